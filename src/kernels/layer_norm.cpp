// The layer-norm kernels (layer_norm.h): layer_norm_impl.h's code for the baseline ISA here, and
// its AVX-512F build (layer_norm_avx512.cpp) where the CPU has AVX-512F: the same bits, the
// transformer step's two layer norms and their gradients ~0.43 -> ~0.28 ms on one thread (perf).
#include "kernels/layer_norm.h"

#include <atomic>

#include "kernels/layer_norm_impl.h"

namespace tg::detail {

namespace {

std::atomic<bool> avx512_enabled{true};  // set_layer_norm_avx512

bool use_avx512() {
  static const bool available = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return available && avx512_enabled.load(std::memory_order_relaxed);
}

}  // namespace

bool set_layer_norm_avx512(bool enabled) { return avx512_enabled.exchange(enabled); }

template <class T>
void layer_norm_forward(int64_t rows, int64_t c, double epsilon, const T* x, const T* gamma, const T* beta, T* y,
                        T* mean, T* rstd) {
  if (use_avx512()) layer_norm_forward_avx512<T>(rows, c, epsilon, x, gamma, beta, y, mean, rstd);
  else forward_impl<T>(rows, c, epsilon, x, gamma, beta, y, mean, rstd);
}

template <class T>
void layer_norm_backward(int64_t rows, int64_t c, const T* x, const T* gamma, const T* mean, const T* rstd,
                         const T* dy, T* dx, T* dgamma, T* dbeta) {
  if (use_avx512()) layer_norm_backward_avx512<T>(rows, c, x, gamma, mean, rstd, dy, dx, dgamma, dbeta);
  else backward_impl<T>(rows, c, x, gamma, mean, rstd, dy, dx, dgamma, dbeta);
}

template void layer_norm_forward<float>(int64_t, int64_t, double, const float*, const float*, const float*, float*,
                                        float*, float*);
template void layer_norm_forward<double>(int64_t, int64_t, double, const double*, const double*, const double*,
                                         double*, double*, double*);
template void layer_norm_backward<float>(int64_t, int64_t, const float*, const float*, const float*, const float*,
                                         const float*, float*, float*, float*);
template void layer_norm_backward<double>(int64_t, int64_t, const double*, const double*, const double*,
                                          const double*, const double*, double*, double*, double*);

}  // namespace tg::detail
