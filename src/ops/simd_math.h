// Vectorised float32 transcendental functions (SLEEF, 1-ULP variants), chosen at run time for
// the CPU: AVX-512, AVX2, or a scalar fallback. y may alias x.
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

}  // namespace tg::detail::simd
