// Compiled with -mavx512f; only called after a run-time CPU check.
#include <immintrin.h>

#include <cstdint>

extern "C" __m512 _ZGVeN16v_expf(__m512);

namespace {

inline __m512 exp_vec(__m512 v) { return _ZGVeN16v_expf(v); }
inline __m512 neg_abs(__m512 v) {
  // Integer OR: the float form (_mm512_or_ps) needs AVX512DQ.
  return _mm512_castsi512_ps(
      _mm512_or_si512(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN)));
}
inline __m512 select_negative(__m512 v, __m512 a, __m512 b) {
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ), b, a);
}

}  // namespace

#define VEC __m512
#define WIDTH 16
#define SUFFIX avx512
#define NAME "avx512"
#define FNS kAvx512Fns
#define MVEC(fn) _ZGVeN16v_##fn##f
#define LOAD _mm512_loadu_ps
#define STORE _mm512_storeu_ps
#define SET1 _mm512_set1_ps
#define ADD _mm512_add_ps
#define DIV _mm512_div_ps
#include "ops/simd_math_impl.inc"
