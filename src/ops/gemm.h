// The one float GEMM entry point of the op layer: OpenBLAS on one thread per call, a large
// product split by rows across tracegraph's thread pool. matmul and the convolutions use it.
#pragma once
#include <cstdint>

namespace tg::detail {

/// Checks that a GEMM dimension fits the BLAS interface's int, else throws
/// InvalidArgumentError prefixed with [op].
int blas_int(const char* op, int64_t v);

/// C (m x n, row-major, leading dim ldc) = op(A) op(B) (+ C when accumulate), T float or double.
/// Large products are split across the pool by rows of C, in blocks fixed by the sizes and the
/// thread count, so a given thread count always gives the same bits. Called from inside a
/// parallel_for chunk it runs on the calling thread. k may be 0 (C becomes 0, or is kept).
template <class T>
void gemm(int m, int n, int k, const T* a, int lda, bool ta, const T* b, int ldb, bool tb, T* c,
          int ldc, bool accumulate = false);

}  // namespace tg::detail
