// Vectorised float32 transcendental functions, chosen at run time for the CPU: AVX-512, AVX2
// or a scalar libm loop. tanh, log, sin and cos are glibc's libmvec; exp is ours on AVX-512
// (libmvec's on AVX2); sigmoid is built on exp. y may alias x. Eager and fused kernels both call
// these, so float32 results do not depend on which kernel ran.
//
// Worst error over every float32 input on AVX-512 (docs/DECISIONS.md has every path): exp 0.94
// ULP, tanh 1.4, cos 2.0, sin 2.1, sigmoid 2.4, log 3.9. NaN, infinities and signed zeros come
// out as libm's; tests/ops/simd_math_test.cpp asserts both.
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
