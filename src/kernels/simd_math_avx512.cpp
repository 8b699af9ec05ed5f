// Compiled with -mavx512f; only called after a run-time CPU check.
#include <immintrin.h>

#include <cstdint>

#include "kernels/simd_math_avx512.h"

namespace {

// GCC 12's unmasked forms of these four pass an "undefined" source register that
// -Wmaybe-uninitialized reports (GCC bug 105593); the same instruction under a full mask, with a
// real source, compiles to identical code without the warning.
constexpr __mmask16 kAll = 0xffff;
inline __m512 min_ps(__m512 a, __m512 b) { return _mm512_mask_min_ps(a, kAll, a, b); }
inline __m512 max_ps(__m512 a, __m512 b) { return _mm512_mask_max_ps(a, kAll, a, b); }
inline __m512 round_ps(__m512 a) {
  return _mm512_mask_roundscale_ps(a, kAll, a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
inline __m512 scalef_ps(__m512 a, __m512 b) { return _mm512_mask_scalef_ps(a, kAll, a, b); }

// e^x as 2^n * e^r with n = round(x / ln 2) and |r| <= ln2 / 2. Ours rather than libmvec's: over
// every float32 input it stays within 1 ULP where libmvec's _ZGVeN16v_expf reaches 2.4, and it is
// faster (docs/DECISIONS.md). scalef applies 2^n with a single rounding, overflowing to inf and
// underflowing through the subnormals to 0 as the exact value would, so the only special case is
// the clamp that keeps r finite for +-inf: e^89 already overflows and e^-104 already rounds to 0.
inline __m512 exp_vec(__m512 x) {
  // min/max return their second operand when either is NaN: the NaN passes through.
  x = max_ps(_mm512_set1_ps(-104.0f), min_ps(_mm512_set1_ps(89.0f), x));
  const __m512 n = round_ps(_mm512_mul_ps(x, _mm512_set1_ps(0x1.715476p+0f)));
  // ln 2 in two parts: the first FMA takes n * ln2_hi off x with one rounding, the second the rest.
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e430p-1f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-0x1.05c610p-29f), r);
  // Taylor to r^7: the first dropped term, r^8 / 8!, is below 0.06 ULP for |r| <= ln2 / 2.
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return scalef_ps(p, n);
}

// Each half of the sixteen lanes moves as four doubles (the float forms of extract and insert
// need AVX512DQ). Full masks and real sources for the same GCC bug as above; in GCC 12 even
// _mm512_castps512_ps256 is an extract with an "undefined" source.
constexpr __mmask8 kAll8 = 0xff;
inline __m256 half(__m512 v, int upper) {
  const __m512d d = _mm512_castps_pd(v);
  return _mm256_castpd_ps(upper ? _mm512_mask_extractf64x4_pd(_mm256_setzero_pd(), kAll8, d, 1)
                                : _mm512_mask_extractf64x4_pd(_mm256_setzero_pd(), kAll8, d, 0));
}
inline __m512d widen(__m256 a) { return _mm512_mask_cvtps_pd(_mm512_setzero_pd(), kAll8, a); }
inline __m256d narrow(__m512d a) {
  return _mm256_castps_pd(_mm512_mask_cvtpd_ps(_mm256_setzero_ps(), kAll8, a));
}

// The lanes of simd_math_formulas.h: sixteen floats (eight doubles for gelu_approximate).
struct IsaLanes {
  using V = __m512;
  using Elem = float;
  static constexpr int kWidth = 16;
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V set1(float k) { return _mm512_set1_ps(k); }
  static V exp(V v) { return exp_vec(v); }
  static V neg_abs(V v) {
    // Integer OR: the float form (_mm512_or_ps) needs AVX512DQ.
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN)));
  }
  static V min(V a, V b) { return min_ps(a, b); }
  static V select_negative(V v, V a, V b) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ), b, a);
  }
  static V select_above(V v, V k, V a, V b) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, k, _CMP_GT_OQ), b, a);
  }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V round(V v) { return round_ps(v); }
  // One permute: its index takes the low four bits of each lane (a NaN converts to INT_MIN: 0).
  static V lookup(const float (&row)[16], V i) {
    const __m512i k = _mm512_mask_cvttps_epi32(_mm512_setzero_si512(), kAll, i);
    const __m512 t = _mm512_loadu_ps(row);
    return _mm512_mask_permutexvar_ps(t, kAll, k, t);
  }
  static V scale(V v, V n) { return scalef_ps(v, n); }
  template <__m512d (*f)(__m512d)>
  static V in_double(V v) {
    const __m512d zero = _mm512_setzero_pd();
    const __m512d lo = _mm512_mask_insertf64x4(zero, kAll8, zero, narrow(f(widen(half(v, 0)))), 0);
    return _mm512_castpd_ps(_mm512_mask_insertf64x4(lo, kAll8, lo, narrow(f(widen(half(v, 1)))), 1));
  }
};
struct IsaWideLanes {
  using V = __m512d;
  using Elem = double;
  static V set1(double k) { return _mm512_set1_pd(k); }
};

}  // namespace

#define NAME "avx512"
#define FNS kAvx512Fns
#define REGISTER_FNS kAvx512RegisterFns
#define MVEC(fn) _ZGVeN16v_##fn##f
#define DMVEC(fn) _ZGVeN8v_##fn
#include "kernels/simd_math_impl.inc"
