#include "ops/simd_math.h"

#include <cmath>

namespace tg::detail::simd {

#define TG_DECLARE_ISA(ns)                                  \
  namespace ns {                                            \
  void exp_f32(const float*, float*, int64_t);              \
  void log_f32(const float*, float*, int64_t);              \
  void tanh_f32(const float*, float*, int64_t);             \
  void sigmoid_f32(const float*, float*, int64_t);          \
  void sin_f32(const float*, float*, int64_t);              \
  void cos_f32(const float*, float*, int64_t);              \
  }
TG_DECLARE_ISA(avx512)
TG_DECLARE_ISA(avx2)
#undef TG_DECLARE_ISA

namespace {
enum class Isa { kAvx512, kAvx2, kScalar };
Isa detect() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return Isa::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::kAvx2;
  return Isa::kScalar;
}
const Isa kIsa = detect();

template <class F>
void scalar_loop(const float* x, float* y, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}
}  // namespace

#define TG_DISPATCH(name, scalar_expr)                                        \
  void name(const float* x, float* y, int64_t n) {                            \
    switch (kIsa) {                                                           \
      case Isa::kAvx512: return avx512::name(x, y, n);                        \
      case Isa::kAvx2: return avx2::name(x, y, n);                            \
      case Isa::kScalar: break;                                               \
    }                                                                         \
    scalar_loop(x, y, n, [](float v) { return scalar_expr; });                \
  }
TG_DISPATCH(exp_f32, std::exp(v))
TG_DISPATCH(log_f32, std::log(v))
TG_DISPATCH(tanh_f32, std::tanh(v))
TG_DISPATCH(sigmoid_f32, 1.0f / (1.0f + std::exp(-v)))
TG_DISPATCH(sin_f32, std::sin(v))
TG_DISPATCH(cos_f32, std::cos(v))
#undef TG_DISPATCH

const char* isa() {
  switch (kIsa) {
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx2: return "avx2";
    case Isa::kScalar: break;
  }
  return "scalar";
}

}  // namespace tg::detail::simd
