// Compiled with -mavx2 -mfma; only called after a run-time CPU check.
#include <immintrin.h>
#include <sleef.h>

#include <cstdint>

#define VEC __m256
#define WIDTH 8
#define SUFFIX avx2
#define LOAD _mm256_loadu_ps
#define STORE _mm256_storeu_ps
#define SET1 _mm256_set1_ps
#define ADD _mm256_add_ps
#define SUB _mm256_sub_ps
#define DIV _mm256_div_ps
#define SLEEF(f) Sleef_##f##f8_u10
#include "ops/simd_math_impl.inc"
