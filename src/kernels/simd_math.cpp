#include "kernels/simd_math.h"

#include "kernels/simd_math_formulas.h"

namespace tg::detail::simd {

extern const MathFns kAvx512Fns;  // simd_math_avx512.cpp
extern const MathFns kAvx2Fns;    // simd_math_avx2.cpp

namespace {

// Width 1: the same formulas on one float at a time, through libm.
constexpr MathFns kScalarFns = math_fns_of<Scalar<float>>("scalar");

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

bool cpu_is_intel() {
  __builtin_cpu_init();
  return __builtin_cpu_is("intel") != 0;
}

const MathFns& math_fns(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return kAvx512Fns;
    case Isa::kAvx2: return kAvx2Fns;
    case Isa::kScalar: break;
  }
  return kScalarFns;
}

#define TG_SIMD_FORWARD(Op, F, routine, ...) \
  void routine##_f32(const float* x, float* y, int64_t n) { best().routine(x, y, n); }
TG_SIMD_MATH_ROUTINES(TG_SIMD_FORWARD)
#undef TG_SIMD_FORWARD
void gelu_with_grad_f32(const float* x, float* y, float* dy, int64_t n) { best().gelu_with_grad(x, y, dy, n); }
const char* isa() { return best().name; }

}  // namespace tg::detail::simd
