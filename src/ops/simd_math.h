// Vectorised float32 transcendental functions, chosen at run time for the CPU: AVX-512, AVX2
// or a scalar libm loop. tanh, log, sin, cos, log1p, expm1 and erf are glibc's libmvec; exp is
// ours on AVX-512 (libmvec's on AVX2); sigmoid is built on exp, softplus on exp and log1p, elu
// on expm1, and both gelu forms on libmvec's float64 erfc and exp. y may alias x. Eager and
// fused kernels both call these, so float32 results do not depend on which kernel ran.
//
// Worst error over every float32 input on AVX-512 (docs/DECISIONS.md has every path): exp 0.94
// ULP, tanh 1.4, cos 2.0, sin 2.1, sigmoid 2.4, log 3.9; over every 13th: gelu (both forms)
// 0.5, log1p 2.0, expm1 and elu 2.3, softplus 7.3 (TF's e^x piece), erf 4.0. NaN, infinities
// and signed zeros come out as libm's; tests/ops/simd_math_test.cpp asserts both.
#pragma once
#include <cstdint>

/// Every routine, as X(OpId, functor, routine): the one list that the declarations below, each
/// instruction set's table, the per-register table of the fused kernel's chains
/// (simd_math_avx512.h, fused_micro.inc) and the ops' functors (elementwise_functors.h, which
/// splices it into its list of elementwise ops) are generated from. Each routine is written
/// once, in simd_math_formulas.h, over lanes of any width. Adding one: a line here, its formula
/// there.
#define TG_SIMD_MATH_ROUTINES(X)                                                                \
  X(Exp, ExpF, exp) X(Log, LogF, log) X(Tanh, TanhF, tanh) X(Sigmoid, SigmoidF, sigmoid)        \
  X(Sin, SinF, sin) X(Cos, CosF, cos) X(Log1p, Log1pF, log1p) X(Expm1, Expm1F, expm1)           \
  X(Erf, ErfF, erf) X(Softplus, SoftplusF, softplus) X(Gelu, GeluF, gelu)                       \
  X(GeluApproximate, GeluApproximateF, gelu_tanh) X(Elu, EluF, elu)

namespace tg::detail::simd {

#define TG_SIMD_DECLARE(Op, F, routine) void routine##_f32(const float* x, float* y, int64_t n);
TG_SIMD_MATH_ROUTINES(TG_SIMD_DECLARE)
#undef TG_SIMD_DECLARE

/// The constants of the activations' formulas (simd_math_formulas.h).
/// softplus(x) is x itself above this and e^x below its negative: -(log(epsilon) + 2), TF's
/// threshold, as float32 computes it (log(2^-23) + 2) and as float64 does (log(2^-52) + 2).
inline constexpr float kSoftplusLinearAboveF32 = 13.942385f;
inline constexpr double kSoftplusLinearAboveF64 = 34.04365338911715;
inline constexpr double kSqrt2 = 1.4142135623730951;
inline constexpr double kSqrt2OverPi = 0.7978845608028654;  // gelu's tanh form: u's factor
inline constexpr double kGeluCubic = 0.044715;              // and its x^3 coefficient

/// Which implementation runs: "avx512", "avx2" or "scalar".
const char* isa();

/// The instruction sets that have their own implementation.
enum class Isa { kAvx512, kAvx2, kScalar };
using MathFn = void (*)(const float* x, float* y, int64_t n);
/// One instruction set's functions; the functions above forward to the best one the CPU runs.
struct MathFns {
  const char* name;
#define TG_SIMD_MEMBER(Op, F, routine) MathFn routine;
  TG_SIMD_MATH_ROUTINES(TG_SIMD_MEMBER)
#undef TG_SIMD_MEMBER
};
/// Whether this CPU can run isa's functions (kScalar: always).
bool cpu_has(Isa isa);
/// Whether it has AVX-512F with the byte and word forms (BW) and the 128/256-bit ones (VL): what
/// the AVX-512 kernels that work on bytes need (fused_micro_avx512.cpp, pool_grad_avx512.cpp).
bool cpu_has_avx512_bw_vl();
/// isa's functions, for the accuracy tests and the ULP sweep, which check every path the CPU
/// runs and not only the dispatched one. Calling them needs cpu_has(isa).
const MathFns& math_fns(Isa isa);

}  // namespace tg::detail::simd
