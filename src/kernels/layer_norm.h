// Layer normalisation over the last axis on raw buffers: the forward pass in one sweep per row
// (its mean and 1 / sqrt(variance + epsilon) saved for the gradient) and the gradient in one
// sweep per row plus the column sums of gamma's and beta's gradients. The rows split across the
// thread pool in blocks fixed by the sizes, so the bits do not depend on the thread count.
#pragma once
#include <cstdint>

namespace tg::detail {

/// x (rows, c) row-major, gamma and beta (c): y = (x - mean) * rstd * gamma + beta per row, with
/// mean and rstd = 1 / sqrt(biased variance + epsilon) written per row. T is float or double;
/// each sum runs in 16 partial sums of T, added up in double.
template <class T>
void layer_norm_forward(int64_t rows, int64_t c, double epsilon, const T* x, const T* gamma, const T* beta, T* y,
                        T* mean, T* rstd);

/// The gradients of y for an incoming dy, from the forward's mean and rstd:
/// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma, xhat = (x - mean) * rstd;
/// dgamma = the column sums of dy * xhat, dbeta = those of dy.
template <class T>
void layer_norm_backward(int64_t rows, int64_t c, const T* x, const T* gamma, const T* mean, const T* rstd,
                         const T* dy, T* dx, T* dgamma, T* dbeta);

/// Whether the kernels may run their AVX-512F build where the CPU has it (on by default);
/// returns the previous setting. Both builds give the same bits: tests compare them.
bool set_layer_norm_avx512(bool enabled);

}  // namespace tg::detail
