// layer_norm_impl.h's kernels built for AVX-512F, without fused multiply-adds
// (-mavx512f -ffp-contract=off): the baseline build's bits at four times its vector width.
#include "kernels/layer_norm_impl.h"

namespace tg::detail {

template <class T>
void layer_norm_forward_avx512(int64_t rows, int64_t c, double epsilon, const T* x, const T* gamma, const T* beta,
                               T* y, T* mean, T* rstd) {
  forward_impl<T>(rows, c, epsilon, x, gamma, beta, y, mean, rstd);
}

template <class T>
void layer_norm_backward_avx512(int64_t rows, int64_t c, const T* x, const T* gamma, const T* mean, const T* rstd,
                                const T* dy, T* dx, T* dgamma, T* dbeta) {
  backward_impl<T>(rows, c, x, gamma, mean, rstd, dy, dx, dgamma, dbeta);
}

template void layer_norm_forward_avx512<float>(int64_t, int64_t, double, const float*, const float*, const float*,
                                               float*, float*, float*);
template void layer_norm_forward_avx512<double>(int64_t, int64_t, double, const double*, const double*,
                                                const double*, double*, double*, double*);
template void layer_norm_backward_avx512<float>(int64_t, int64_t, const float*, const float*, const float*,
                                                const float*, const float*, float*, float*, float*);
template void layer_norm_backward_avx512<double>(int64_t, int64_t, const double*, const double*, const double*,
                                                 const double*, const double*, double*, double*, double*);

}  // namespace tg::detail
