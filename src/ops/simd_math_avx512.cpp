// Compiled with -mavx512f; only called after a run-time CPU check.
#include <immintrin.h>
#include <sleef.h>

#include <cstdint>

#define VEC __m512
#define WIDTH 16
#define SUFFIX avx512
#define LOAD _mm512_loadu_ps
#define STORE _mm512_storeu_ps
#define SET1 _mm512_set1_ps
#define ADD _mm512_add_ps
#define SUB _mm512_sub_ps
#define DIV _mm512_div_ps
#define SLEEF(f) Sleef_##f##f16_u10
#include "ops/simd_math_impl.inc"
