// Vectorised float32 transcendental functions, chosen at run time for the CPU: AVX-512, AVX2
// or a scalar libm loop. tanh, log, sin, cos, log1p, expm1 and erf are glibc's libmvec; exp is
// ours on AVX-512 (libmvec's on AVX2); sigmoid is built on exp, softplus on exp and log1p, elu
// on expm1, gelu is float32 polynomials and its own e^x (simd_math_formulas.h), gelu_approximate
// libmvec's float64 exp. y may alias x. Eager and
// fused kernels both call these, so float32 results do not depend on which kernel ran.
//
// Each routine's worst error on each path is in the list (simd_math_formulas.h); NaN, infinities
// and signed zeros come out as libm's. tests/ops/simd_math_test.cpp asserts both.
#pragma once
#include <cstdint>

#include "kernels/simd_math_formulas.h"  // TG_SIMD_MATH_ROUTINES, next to each routine's formula

namespace tg::detail::simd {

#define TG_SIMD_DECLARE(Op, F, routine, ...) void routine##_f32(const float* x, float* y, int64_t n);
TG_SIMD_MATH_ROUTINES(TG_SIMD_DECLARE)
#undef TG_SIMD_DECLARE

/// gelu into y and gelu_grad into dy, each with the bits of its routine above, sharing their
/// e^(-x^2 / 2) (the fused kernel runs it where a program has both of one value).
void gelu_with_grad_f32(const float* x, float* y, float* dy, int64_t n);

/// Which implementation runs: "avx512", "avx2" or "scalar".
const char* isa();

/// The instruction sets that have their own implementation.
enum class Isa { kAvx512, kAvx2, kScalar };
using MathFn = void (*)(const float* x, float* y, int64_t n);
/// One instruction set's functions; the functions above forward to the best one the CPU runs.
struct MathFns {
  const char* name;
#define TG_SIMD_MEMBER(Op, F, routine, ...) MathFn routine;
  TG_SIMD_MATH_ROUTINES(TG_SIMD_MEMBER)
#undef TG_SIMD_MEMBER
  void (*gelu_with_grad)(const float* x, float* y, float* dy, int64_t n);
};
/// Whether this CPU can run isa's functions (kScalar: always).
bool cpu_has(Isa isa);
/// Whether it has AVX-512F with the byte and word forms (BW) and the 128/256-bit ones (VL): what
/// the AVX-512 kernels that work on bytes need (fused_micro_avx512.cpp, pool_grad_avx512.cpp).
bool cpu_has_avx512_bw_vl();
/// Whether the CPU is Intel's: the kernels whose best form differs between vendors at the same
/// instruction set (bf16.cpp's products, onednn_conv.cpp's Winograd parts) ask this one place.
bool cpu_is_intel();
/// isa's functions, for the accuracy tests and the ULP sweep, which check every path the CPU
/// runs and not only the dispatched one. Calling them needs cpu_has(isa).
const MathFns& math_fns(Isa isa);

/// The list's bounds: the worst error, in ULP, each routine may have on each path.
struct RoutineBound {
  const char* name;
  MathFn MathFns::*fn;
  double ulp[3];  // indexed by Isa
};
inline constexpr RoutineBound kRoutineBounds[] = {
#define TG_SIMD_BOUND(Op, F, routine, avx512, avx2, scalar) {#routine, &MathFns::routine, {avx512, avx2, scalar}},
    TG_SIMD_MATH_ROUTINES(TG_SIMD_BOUND)
#undef TG_SIMD_BOUND
};

namespace {
/// Every routine on float32 lanes L, applied to whole arrays: the table each path's file makes
/// (simd_math.cpp's scalar path, simd_math_impl.inc's vector ones).
template <class L>
constexpr MathFns math_fns_of(const char* name) {
  return MathFns{
      .name = name,
#define TG_SIMD_APPLY(Op, F, routine, ...) .routine = &apply<L, &formula::routine<L>>,
      TG_SIMD_MATH_ROUTINES(TG_SIMD_APPLY)
#undef TG_SIMD_APPLY
      .gelu_with_grad = &apply_gelu_with_grad<L>,
  };
}
}  // namespace

}  // namespace tg::detail::simd
