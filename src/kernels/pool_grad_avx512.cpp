// See pool_grad_avx512.h. Built with AVX-512F/BW/VL (src/CMakeLists.txt); called only when
// simd::cpu_has_avx512_bw_vl() says the CPU has them.
#include "kernels/pool_grad_avx512.h"

#include <immintrin.h>

#include <algorithm>

namespace tg::detail::pool_avx512 {

namespace {

// The window's first maximum of 16 channels (fewer where `lanes` says): strictly larger, or a
// NaN over a number, from the window's first element (`at`: each element's pixel offset).
// Without NaNs that is vmaxps(v, best), which returns its second operand unless the first is
// strictly larger (ties of -0 and +0 included): one instruction on the chain from element to
// element where the exact rule's compares, mask logic and blend took three (the CNN's first
// pool, 256 x 28 x 28 x 32 on one thread: ~3.5 -> ~2.6 ms, the rest is reading memory). A
// window with a NaN in any lane is done again by the exact rule.
inline __m512 window_max(const float* first, const int64_t* at, int64_t window, int64_t c, __mmask16 lanes) {
  __m512 best = _mm512_maskz_loadu_ps(lanes, first);
  __mmask16 nan = _mm512_cmp_ps_mask(best, best, _CMP_UNORD_Q);
  for (int64_t j = 1; j < window; ++j) {
    const __m512 v = _mm512_maskz_loadu_ps(lanes, first + at[j] * c);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    best = _mm512_maskz_max_ps(0xFFFF, v, best);  // _mm512_max_ps trips gcc 12's -Wmaybe-uninitialized
  }
  if (nan == 0) return best;
  best = _mm512_maskz_loadu_ps(lanes, first);
  for (int64_t j = 1; j < window; ++j) {
    const __m512 v = _mm512_maskz_loadu_ps(lanes, first + at[j] * c);
    const __mmask16 replaces = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) |
                               (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) & _mm512_cmp_ps_mask(best, best, _CMP_ORD_Q));
    best = _mm512_mask_blend_ps(replaces, best, v);
  }
  return best;
}

}  // namespace

void tiled_max_pool(const TiledPool& p, const float* x, float* y) {
  const int64_t c = p.c, window = p.kh * p.kw, full = c / 16 * 16;
  int64_t at[16];
  for (int64_t j = 0; j < window; ++j) at[j] = (j / p.kw) * p.w + j % p.kw;
  const auto tail = static_cast<__mmask16>((1u << (c - full)) - 1);
  for (int64_t oy = 0; oy < p.oh; ++oy)
    for (int64_t ox = 0; ox < p.ow; ++ox) {
      const float* first = x + (oy * p.kh * p.w + ox * p.kw) * c;
      float* o = y + (oy * p.ow + ox) * c;
      int64_t c0 = 0;
      for (; c0 < full; c0 += 16) _mm512_storeu_ps(o + c0, window_max(first + c0, at, window, c, 0xFFFF));
      if (c0 < c) _mm512_mask_storeu_ps(o + c0, tail, window_max(first + c0, at, window, c, tail));
    }
}

void tiled_max_pool_grad(const TiledPool& p, const float* x, const float* dy, const bool* mask, float* dx) {
  const int64_t c = p.c, window = p.kh * p.kw;
  int64_t at[16];  // each window element's pixel, from the window's first (rows first)
  for (int64_t j = 0; j < window; ++j) at[j] = (j / p.kw) * p.w + j % p.kw;
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t oy = 0; oy < p.oh; ++oy)
    for (int64_t ox = 0; ox < p.ow; ++ox) {
      const int64_t first = oy * p.kh * p.w + ox * p.kw;
      const float* d = dy + (oy * p.ow + ox) * c;
      for (int64_t c0 = 0; c0 < c; c0 += 16) {
        const __mmask16 lanes = c - c0 >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (c - c0)) - 1);
        // The first maximum, as pool_kernels.cpp's `replaces`: strictly larger, or a NaN over a number.
        __m512 best = _mm512_maskz_loadu_ps(lanes, x + first * c + c0);
        __m512i winner = _mm512_setzero_si512();
        for (int64_t j = 1; j < window; ++j) {
          const __m512 v = _mm512_maskz_loadu_ps(lanes, x + (first + at[j]) * c + c0);
          const __mmask16 replaces = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) |
                                     (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) & _mm512_cmp_ps_mask(best, best, _CMP_ORD_Q));
          best = _mm512_mask_blend_ps(replaces, best, v);
          winner = _mm512_mask_mov_epi32(winner, replaces, _mm512_set1_epi32(static_cast<int>(j)));
        }
        const __m512 g = _mm512_maskz_loadu_ps(lanes, d + c0);
        for (int64_t j = 0; j < window; ++j) {
          const int64_t i = (first + at[j]) * c + c0;
          __mmask16 keep = _mm512_cmpeq_epi32_mask(winner, _mm512_set1_epi32(static_cast<int>(j))) & lanes;
          if (mask) {
            const __m128i m = _mm_maskz_loadu_epi8(lanes, mask + i);
            keep &= _mm_test_epi8_mask(m, m);
          }
          // 0 + dy where kept, 0 + 0 elsewhere: the general kernel's sum into a zeroed dx (-0
          // becomes +0 there too).
          _mm512_mask_storeu_ps(dx + i, lanes, _mm512_add_ps(zero, _mm512_maskz_mov_ps(keep, g)));
        }
      }
    }
  // Rows and columns no window covers.
  for (int64_t iy = 0; iy < p.h; ++iy) {
    float* row = dx + iy * p.w * c;
    if (iy >= p.oh * p.kh) std::fill_n(row, p.w * c, 0.0f);
    else std::fill(row + p.ow * p.kw * c, row + p.w * c, 0.0f);
  }
}

}  // namespace tg::detail::pool_avx512
