#pragma once
#include <cstdint>
// What graph builders (passes, gradients) may assume of the matmul op's kernels: they may not
// include the kernels themselves (src/LAYERS), and a rewrite that keeps bits on one set of
// kernels may not on another.

namespace tg::detail {

/// Whether float32 matmuls run on tracegraph's own AVX-512 kernels here (the CPU has AVX-512F
/// and set_own_avx512_kernels has not turned them off). Those sum each element of C over k in
/// one order whatever the other rows and columns are, split or not (unless split over k), and
/// read a transposed right operand through an untransposed copy: a batch of products keeps each
/// product's bits, and matmul(a, b, transpose_b) has the bits of matmul(a, transpose(b)).
/// OpenBLAS promises neither.
bool matmul_on_own_kernels();
/// Whether a float32 m x n matmul of inner size k (B transposed: transpose_b) on 2 or more
/// threads splits its sums over k, the exception above: a rewrite that runs rows of a product
/// apart keeps one thread's bits only where neither the whole product nor a part splits so.
bool matmul_sums_over_k_in_parts(int64_t m, int64_t n, int64_t k, bool transpose_b);

}  // namespace tg::detail
