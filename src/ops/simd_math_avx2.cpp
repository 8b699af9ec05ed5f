// Compiled with -mavx2 -mfma; only called after a run-time CPU check.
#include <immintrin.h>

#include <cstdint>

// libmvec's AVX2 exp (AVX2 has no scalef to build ours on as the AVX-512 file does).
extern "C" __m256 _ZGVdN8v_expf(__m256);

namespace {
inline __m256 exp_vec(__m256 v) { return _ZGVdN8v_expf(v); }
inline __m256 neg_abs(__m256 v) { return _mm256_or_ps(v, _mm256_set1_ps(-0.0f)); }
inline __m256 min_vec(__m256 a, __m256 b) { return _mm256_min_ps(a, b); }
inline __m256 select_negative(__m256 v, __m256 a, __m256 b) {
  return _mm256_blendv_ps(b, a, _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ));
}
inline __m256 select_above(__m256 v, __m256 k, __m256 a, __m256 b) {
  return _mm256_blendv_ps(b, a, _mm256_cmp_ps(v, k, _CMP_GT_OQ));
}
template <__m256d (*f)(__m256d)>
inline __m256 in_double(__m256 v) {
  const __m128 lo = _mm256_cvtpd_ps(f(_mm256_cvtps_pd(_mm256_castps256_ps128(v))));
  const __m128 hi = _mm256_cvtpd_ps(f(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))));
  return _mm256_set_m128(hi, lo);
}
}  // namespace

#define VEC __m256
#define WIDTH 8
#define SUFFIX avx2
#define NAME "avx2"
#define FNS kAvx2Fns
#define MVEC(fn) _ZGVdN8v_##fn##f
#define DVEC __m256d
#define DMVEC(fn) _ZGVdN4v_##fn
#define LOAD _mm256_loadu_ps
#define STORE _mm256_storeu_ps
#define SET1 _mm256_set1_ps
#define DSET1 _mm256_set1_pd
#define ADD _mm256_add_ps
#define DIV _mm256_div_ps
#include "ops/simd_math_impl.inc"
