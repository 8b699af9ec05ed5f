// Vectorised float32 transcendental functions, chosen at run time for the CPU: glibc's libmvec
// (its AVX-512 or AVX2 variants) or a scalar libm loop. y may alias x. Eager and fused kernels
// both call these, so float32 results do not depend on which kernel ran.
// NaN, infinities and signed zeros come out as libm's; the accuracy of each path is measured
// over every float32 input in tests/ops/simd_math_test.cpp.
#pragma once
#include <cstdint>

namespace tg::detail::simd {

void exp_f32(const float* x, float* y, int64_t n);
void log_f32(const float* x, float* y, int64_t n);
void tanh_f32(const float* x, float* y, int64_t n);
void sigmoid_f32(const float* x, float* y, int64_t n);
void sin_f32(const float* x, float* y, int64_t n);
void cos_f32(const float* x, float* y, int64_t n);
/// Which implementation runs: "avx512", "avx2" or "scalar".
const char* isa();

/// The instruction sets that have their own implementation.
enum class Isa { kAvx512, kAvx2, kScalar };
using MathFn = void (*)(const float* x, float* y, int64_t n);
/// One instruction set's functions; the functions above forward to the best one the CPU runs.
struct MathFns {
  const char* name;
  MathFn exp, log, tanh, sigmoid, sin, cos;
};
/// Whether this CPU can run isa's functions (kScalar: always).
bool cpu_has(Isa isa);
/// isa's functions, for the accuracy tests and the ULP sweep, which check every path the CPU
/// runs and not only the dispatched one. Calling them needs cpu_has(isa).
const MathFns& math_fns(Isa isa);

}  // namespace tg::detail::simd
