#pragma once
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

}  // namespace tg::detail
