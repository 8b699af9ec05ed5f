// Compiled with -mavx2 -mfma; only called after a run-time CPU check.
#include <immintrin.h>

#include <cstdint>

#include "kernels/simd_math.h"

// libmvec's AVX2 exp (AVX2 has no scalef to build ours on as the AVX-512 file does).
extern "C" __m256 _ZGVdN8v_expf(__m256);

namespace {

// The lanes of simd_math_formulas.h: eight floats (four doubles for gelu).
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
