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

namespace tg::detail::simd {

void exp_f32(const float* x, float* y, int64_t n);
void log_f32(const float* x, float* y, int64_t n);
void tanh_f32(const float* x, float* y, int64_t n);
void sigmoid_f32(const float* x, float* y, int64_t n);
void sin_f32(const float* x, float* y, int64_t n);
void cos_f32(const float* x, float* y, int64_t n);
void log1p_f32(const float* x, float* y, int64_t n);
void expm1_f32(const float* x, float* y, int64_t n);
void erf_f32(const float* x, float* y, int64_t n);
void softplus_f32(const float* x, float* y, int64_t n);
void gelu_f32(const float* x, float* y, int64_t n);
void gelu_tanh_f32(const float* x, float* y, int64_t n);
void elu_f32(const float* x, float* y, int64_t n);
/// The constants of the activations' formulas, shared by their functors
/// (elementwise_functors.h, which define the ops and serve float64 and the scalar path) and the
/// vector paths, which evaluate the same formulas.
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
  MathFn exp, log, tanh, sigmoid, sin, cos;
  MathFn log1p, expm1, erf, softplus, gelu, gelu_tanh, elu;
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
