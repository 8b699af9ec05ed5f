// The one float GEMM entry point of the op layer: float32 on implicit_gemm.h's AVX-512 kernels
// where the CPU has them, else OpenBLAS on one thread per call; a large product split by rows
// across tracegraph's thread pool. matmul and the convolutions use it.
#pragma once
#include <cstdint>

#include "kernels/gemm_epilogue.h"

namespace tg::detail {

/// Checks that a GEMM dimension fits the BLAS interface's int, else throws
/// InvalidArgumentError prefixed with [op].
int blas_int(const char* op, int64_t v);

/// Whether float32 products and convolutions run on tracegraph's AVX-512 kernels
/// (implicit_gemm.h): the CPU has AVX-512F and set_own_avx512_kernels has not turned them off.
bool own_avx512_kernels();
/// Turns them on or off (on by default where the CPU has them); returns the previous setting.
/// They and OpenBLAS sum in different orders: tests compare them, and nothing else switches.
bool set_own_avx512_kernels(bool enabled);

/// Whether gemm() on 2 or more threads splits a float32 m x n product's sums over k into parts
/// added at the end (on the AVX-512 kernels, for a long k), an order one thread does not take;
/// every other split keeps one thread's bits. For passes that promise those bits.
bool own_sgemm_sums_over_k_in_parts(int64_t m, int64_t n, int64_t k, bool transpose_b);

/// C (m x n, row-major, leading dim ldc) = op(A) op(B) (+ C when accumulate), T float or double,
/// then the epilogue on every row (float only; null: none). Large products are split across
/// the pool by rows or columns of C, or (on the AVX-512 kernels, for a long k) over k, in blocks
/// fixed by the sizes and the thread count, so a given thread count always gives the same bits
/// (with the AVX-512 kernels, every thread count does unless k is split). Called from inside a
/// parallel_for chunk it runs on the calling thread. k may be 0 (C becomes 0, or is kept).
template <class T>
void gemm(int m, int n, int k, const T* a, int lda, bool ta, const T* b, int ldb, bool tb, T* c,
          int ldc, bool accumulate = false, const GemmEpilogue* epilogue = nullptr);

}  // namespace tg::detail
