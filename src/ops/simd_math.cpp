#include "ops/simd_math.h"

#include <cmath>

#include "ops/elementwise_functors.h"

namespace tg::detail::simd {

extern const MathFns kAvx512Fns;  // simd_math_avx512.cpp
extern const MathFns kAvx2Fns;    // simd_math_avx2.cpp

namespace {

template <float (*f)(float)>
void scalar_loop(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}
// The newer ops' scalar path is their functor itself, the definition float64 runs as well.
template <class F>
void functor_loop(const float* x, float* y, int64_t n) {
  const F f{};
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}
float exp1(float v) { return std::exp(v); }
float log1(float v) { return std::log(v); }
float tanh1(float v) { return std::tanh(v); }
float sin1(float v) { return std::sin(v); }
float cos1(float v) { return std::cos(v); }
// The same form as the vector paths (simd_math_impl.inc): e^-|v| cannot overflow, so the
// negative tail keeps its tiny values instead of collapsing to 0 once e^-v reaches inf.
float sigmoid1(float v) {
  const float t = std::exp(-std::fabs(v));
  return (v < 0.0f ? t : 1.0f) / (1.0f + t);
}

constexpr MathFns kScalarFns = {"scalar",
                                &scalar_loop<exp1>,
                                &scalar_loop<log1>,
                                &scalar_loop<tanh1>,
                                &scalar_loop<sigmoid1>,
                                &scalar_loop<sin1>,
                                &scalar_loop<cos1>,
                                &functor_loop<Log1pF>,
                                &functor_loop<Expm1F>,
                                &functor_loop<ErfF>,
                                &functor_loop<SoftplusF>,
                                &functor_loop<GeluF>,
                                &functor_loop<GeluApproximateF>,
                                &functor_loop<EluF>};

Isa detect() {
  if (cpu_has(Isa::kAvx512)) return Isa::kAvx512;
  if (cpu_has(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kScalar;
}
// A function-local static: other translation units' static initialisers may already call in.
const MathFns& best() {
  static const MathFns& fns = math_fns(detect());
  return fns;
}

}  // namespace

bool cpu_has(Isa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case Isa::kAvx512: return __builtin_cpu_supports("avx512f");
    // libmvec's AVX2 variants need FMA as well (its own dispatch checks both).
    case Isa::kAvx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::kScalar: break;
  }
  return true;
}

bool cpu_has_avx512_bw_vl() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}

const MathFns& math_fns(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return kAvx512Fns;
    case Isa::kAvx2: return kAvx2Fns;
    case Isa::kScalar: break;
  }
  return kScalarFns;
}

void exp_f32(const float* x, float* y, int64_t n) { best().exp(x, y, n); }
void log_f32(const float* x, float* y, int64_t n) { best().log(x, y, n); }
void tanh_f32(const float* x, float* y, int64_t n) { best().tanh(x, y, n); }
void sigmoid_f32(const float* x, float* y, int64_t n) { best().sigmoid(x, y, n); }
void sin_f32(const float* x, float* y, int64_t n) { best().sin(x, y, n); }
void cos_f32(const float* x, float* y, int64_t n) { best().cos(x, y, n); }
void log1p_f32(const float* x, float* y, int64_t n) { best().log1p(x, y, n); }
void expm1_f32(const float* x, float* y, int64_t n) { best().expm1(x, y, n); }
void erf_f32(const float* x, float* y, int64_t n) { best().erf(x, y, n); }
void softplus_f32(const float* x, float* y, int64_t n) { best().softplus(x, y, n); }
void gelu_f32(const float* x, float* y, int64_t n) { best().gelu(x, y, n); }
void gelu_tanh_f32(const float* x, float* y, int64_t n) { best().gelu_tanh(x, y, n); }
void elu_f32(const float* x, float* y, int64_t n) { best().elu(x, y, n); }
const char* isa() { return best().name; }

}  // namespace tg::detail::simd
