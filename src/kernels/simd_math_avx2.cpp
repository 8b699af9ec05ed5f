// Compiled with -mavx2 -mfma; only called after a run-time CPU check.
#include <immintrin.h>

#include <cstdint>

#include "kernels/simd_math.h"

// libmvec's AVX2 exp (AVX2 has no scalef to build ours on as the AVX-512 file does).
extern "C" __m256 _ZGVdN8v_expf(__m256);

namespace {

// The lanes of simd_math_formulas.h: eight floats (four doubles for gelu_approximate).
struct IsaLanes {
  using V = __m256;
  using Elem = float;
  static constexpr int kWidth = 8;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V set1(float k) { return _mm256_set1_ps(k); }
  static V exp(V v) { return _ZGVdN8v_expf(v); }
  static V neg_abs(V v) { return _mm256_or_ps(v, _mm256_set1_ps(-0.0f)); }
  static V min(V a, V b) { return _mm256_min_ps(a, b); }
  static V select_negative(V v, V a, V b) {
    return _mm256_blendv_ps(b, a, _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ));
  }
  static V select_above(V v, V k, V a, V b) { return _mm256_blendv_ps(b, a, _mm256_cmp_ps(v, k, _CMP_GT_OQ)); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V round(V v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // Two permutes of eight (each takes the low three bits of the index) and a blend on i >= 8.
  static V lookup(const float (&row)[16], V i) {
    const __m256i k = _mm256_cvttps_epi32(i);
    const __m256 lo = _mm256_permutevar8x32_ps(_mm256_loadu_ps(row), k);
    const __m256 hi = _mm256_permutevar8x32_ps(_mm256_loadu_ps(row + 8), k);
    return _mm256_blendv_ps(lo, hi, _mm256_cmp_ps(i, _mm256_set1_ps(7.5f), _CMP_GT_OQ));
  }
  // v 2^n as v 2^(n - m) 2^m with m = floor(n / 2): both powers are normal numbers for
  // |n| <= 252, and the first product is exact wherever gelu calls this (v 2^(n - m) stays normal),
  // so the second rounds once, as AVX-512's scalef does.
  static V scale(V v, V n) {
    const V m = _mm256_floor_ps(_mm256_mul_ps(n, _mm256_set1_ps(0.5f)));
    return _mm256_mul_ps(_mm256_mul_ps(v, pow2(_mm256_sub_ps(n, m))), pow2(m));
  }
  // 2^k for integral k in [-126, 127], built in the exponent field.
  static V pow2(V k) {
    const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  }
  template <__m256d (*f)(__m256d)>
  static V in_double(V v) {
    const __m128 lo = _mm256_cvtpd_ps(f(_mm256_cvtps_pd(_mm256_castps256_ps128(v))));
    const __m128 hi = _mm256_cvtpd_ps(f(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))));
    return _mm256_set_m128(hi, lo);
  }
};
struct IsaWideLanes {
  using V = __m256d;
  using Elem = double;
  static V set1(double k) { return _mm256_set1_pd(k); }
};

}  // namespace

#define NAME "avx2"
#define FNS kAvx2Fns
#define MVEC(fn) _ZGVdN8v_##fn##f
#define DMVEC(fn) _ZGVdN4v_##fn
#include "kernels/simd_math_impl.inc"
