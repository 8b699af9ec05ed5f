// See pool_grad_avx512.h. Built with AVX-512F/BW/VL (src/CMakeLists.txt); called only when
// simd::cpu_has_avx512_bw_vl() says the CPU has them.
#include "kernels/pool_grad_avx512.h"

#include <immintrin.h>

#include <algorithm>

namespace tg::detail::pool_avx512 {

namespace {

// 16 lanes (fewer where `lanes` says) as float32: float32 as they are, bfloat16 widened exactly.
inline __m512 load16(const float* p, __mmask16 lanes) { return _mm512_maskz_loadu_ps(lanes, p); }
inline __m512 load16(const bfloat16_t* p, __mmask16 lanes) {
  // The maskz forms: the plain ones trip gcc 12's -Wmaybe-uninitialized, as _mm512_max_ps below.
  const __m512i wide = _mm512_maskz_cvtepu16_epi32(0xFFFF, _mm256_maskz_loadu_epi16(lanes, p));
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, wide, 16));
}
inline void store16(float* p, __mmask16 lanes, __m512 v) { _mm512_mask_storeu_ps(p, lanes, v); }
// v's lanes are bfloat16 values (their lower halves zero): the upper halves, a NaN made quiet as
// bfloat16_t's rounding makes it.
inline void store16(bfloat16_t* p, __mmask16 lanes, __m512 v) {
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  __m512i b = _mm512_maskz_srli_epi32(0xFFFF, _mm512_castps_si512(v), 16);
  b = _mm512_mask_or_epi32(b, nan, b, _mm512_set1_epi32(0x40));
  _mm512_mask_cvtepi32_storeu_epi16(p, lanes, b);
}

// The window's first maximum of 16 channels (fewer where `lanes` says): strictly larger, or a
// NaN over a number, from the window's first element (`at`: each element's pixel offset).
// Without NaNs that is vmaxps(v, best), which returns its second operand unless the first is
// strictly larger (ties of -0 and +0 included): one instruction on the chain from element to
// element where the exact rule's compares, mask logic and blend took three (the CNN's first
// pool, 256 x 28 x 28 x 32 on one thread: ~3.5 -> ~2.6 ms, the rest is reading memory). A
// window with a NaN in any lane is done again by the exact rule.
template <class T>
inline __m512 window_max(const T* first, const int64_t* at, int64_t window, int64_t c, __mmask16 lanes) {
  __m512 best = load16(first, lanes);
  __mmask16 nan = _mm512_cmp_ps_mask(best, best, _CMP_UNORD_Q);
  for (int64_t j = 1; j < window; ++j) {
    const __m512 v = load16(first + at[j] * c, lanes);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    best = _mm512_maskz_max_ps(0xFFFF, v, best);  // _mm512_max_ps trips gcc 12's -Wmaybe-uninitialized
  }
  if (nan == 0) return best;
  best = load16(first, lanes);
  for (int64_t j = 1; j < window; ++j) {
    const __m512 v = load16(first + at[j] * c, lanes);
    const __mmask16 replaces = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) |
                               (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) & _mm512_cmp_ps_mask(best, best, _CMP_ORD_Q));
    best = _mm512_mask_blend_ps(replaces, best, v);
  }
  return best;
}

// Rows and columns of dx no window covers: +0.
template <class T>
void zero_uncovered(const TiledPool& p, T* dx) {
  for (int64_t iy = 0; iy < p.h; ++iy) {
    T* row = dx + iy * p.w * p.c;
    if (iy >= p.oh * p.kh) std::fill_n(row, p.w * p.c, T{});
    else std::fill(row + p.ow * p.kw * p.c, row + p.w * p.c, T{});
  }
}

template <class T>
void tiled_max_pool_of(const TiledPool& p, const T* x, T* y) {
  const int64_t c = p.c, window = p.kh * p.kw, full = c / 16 * 16;
  int64_t at[16];
  for (int64_t j = 0; j < window; ++j) at[j] = (j / p.kw) * p.w + j % p.kw;
  const auto tail = static_cast<__mmask16>((1u << (c - full)) - 1);
  for (int64_t oy = 0; oy < p.oh; ++oy)
    for (int64_t ox = 0; ox < p.ow; ++ox) {
      const T* first = x + (oy * p.kh * p.w + ox * p.kw) * c;
      T* o = y + (oy * p.ow + ox) * c;
      int64_t c0 = 0;
      for (; c0 < full; c0 += 16) store16(o + c0, 0xFFFF, window_max(first + c0, at, window, c, 0xFFFF));
      if (c0 < c) store16(o + c0, tail, window_max(first + c0, at, window, c, tail));
    }
}

template <class T>
void tiled_max_pool_grad_of(const TiledPool& p, const T* x, const T* dy, const bool* mask, T* dx) {
  const int64_t c = p.c, window = p.kh * p.kw;
  int64_t at[16];  // each window element's pixel, from the window's first (rows first)
  for (int64_t j = 0; j < window; ++j) at[j] = (j / p.kw) * p.w + j % p.kw;
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t oy = 0; oy < p.oh; ++oy)
    for (int64_t ox = 0; ox < p.ow; ++ox) {
      const int64_t first = oy * p.kh * p.w + ox * p.kw;
      const T* d = dy + (oy * p.ow + ox) * c;
      for (int64_t c0 = 0; c0 < c; c0 += 16) {
        const __mmask16 lanes = c - c0 >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (c - c0)) - 1);
        // The first maximum, as pool_kernels.cpp's `replaces`: strictly larger, or a NaN over a number.
        __m512 best = load16(x + first * c + c0, lanes);
        __m512i winner = _mm512_setzero_si512();
        for (int64_t j = 1; j < window; ++j) {
          const __m512 v = load16(x + (first + at[j]) * c + c0, lanes);
          const __mmask16 replaces = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) |
                                     (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) & _mm512_cmp_ps_mask(best, best, _CMP_ORD_Q));
          best = _mm512_mask_blend_ps(replaces, best, v);
          winner = _mm512_mask_mov_epi32(winner, replaces, _mm512_set1_epi32(static_cast<int>(j)));
        }
        const __m512 g = load16(d + c0, lanes);
        for (int64_t j = 0; j < window; ++j) {
          const int64_t i = (first + at[j]) * c + c0;
          __mmask16 keep = _mm512_cmpeq_epi32_mask(winner, _mm512_set1_epi32(static_cast<int>(j))) & lanes;
          if (mask) {
            const __m128i m = _mm_maskz_loadu_epi8(lanes, mask + i);
            keep &= _mm_test_epi8_mask(m, m);
          }
          // 0 + dy where kept, 0 + 0 elsewhere: the general kernel's sum into a zeroed dx (-0
          // becomes +0 there too).
          store16(dx + i, lanes, _mm512_add_ps(zero, _mm512_maskz_mov_ps(keep, g)));
        }
      }
    }
  zero_uncovered(p, dx);
}

// One window's 16 channels (from `first`, the window's first element at channel c0) into
// v[0..window), their vmaxps chain into `best` (the first maximum's own bits where no NaN is
// met), and the lanes where the window holds a NaN: the bfloat16 gradient's and winners' start.
[[gnu::always_inline]] inline __mmask16 load_window_bf16(const bfloat16_t* first, const int64_t* at, int64_t window,
                                                         int64_t c, __mmask16 lanes, __m512* v, __m512& best) {
  v[0] = load16(first, lanes);
  best = v[0];
  __mmask16 nan = _mm512_cmp_ps_mask(v[0], v[0], _CMP_UNORD_Q);
  for (int64_t j = 1; j < window; ++j) {
    v[j] = load16(first + at[j] * c, lanes);
    nan |= _mm512_cmp_ps_mask(v[j], v[j], _CMP_UNORD_Q);
    best = _mm512_maskz_max_ps(0xFFFF, v[j], best);
  }
  return nan;
}

// The bfloat16 gradient. Each window's first maximum found as in window_max - vmaxps along the
// window, then the first element equal to that maximum (equal as numbers: -0 and +0 tie, and the
// first wins as with the exact rule) - with the exact rule's compares only for a group of
// channels with a NaN. dy is stored as bfloat16 bits without widening: 0 + dy rounded is dy
// except -0 (+0) and a NaN (made quiet), fixed once per window.
void tiled_max_pool_grad_bf16_of(const TiledPool& p, const bfloat16_t* x, const bfloat16_t* dy, const bool* mask,
                                 bfloat16_t* dx, bool positive_mask) {
  const int64_t c = p.c, window = p.kh * p.kw;
  int64_t at[16];
  for (int64_t j = 0; j < window; ++j) at[j] = (j / p.kw) * p.w + j % p.kw;
  const __m256i negative_zero = _mm256_set1_epi16(static_cast<short>(0x8000)),
                magnitude = _mm256_set1_epi16(0x7fff), inf = _mm256_set1_epi16(0x7f80),
                quiet = _mm256_set1_epi16(0x40);
  __m512 v[16];
  __mmask16 keep[16];
  for (int64_t oy = 0; oy < p.oh; ++oy)
    for (int64_t ox = 0; ox < p.ow; ++ox) {
      const int64_t first = oy * p.kh * p.w + ox * p.kw;
      const bfloat16_t* d = dy + (oy * p.ow + ox) * c;
      for (int64_t c0 = 0; c0 < c; c0 += 16) {
        const __mmask16 lanes = c - c0 >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (c - c0)) - 1);
        __m512 best;
        const __mmask16 nan = load_window_bf16(x + first * c + c0, at, window, c, lanes, v, best);
        if (nan == 0) {
          __mmask16 taken = 0;
          for (int64_t j = 0; j < window; ++j) {
            keep[j] = _mm512_cmp_ps_mask(v[j], best, _CMP_EQ_OQ) & static_cast<__mmask16>(~taken);
            taken |= keep[j];
          }
        } else {
          // The exact rule: strictly larger, or a NaN over a number.
          best = v[0];
          __mmask16 won[16];
          won[0] = 0xFFFF;
          for (int64_t j = 1; j < window; ++j) {
            const __mmask16 replaces = _mm512_cmp_ps_mask(v[j], best, _CMP_GT_OQ) |
                                       (_mm512_cmp_ps_mask(v[j], v[j], _CMP_UNORD_Q) & _mm512_cmp_ps_mask(best, best, _CMP_ORD_Q));
            best = _mm512_mask_blend_ps(replaces, best, v[j]);
            for (int64_t i = 0; i < j; ++i) won[i] &= static_cast<__mmask16>(~replaces);
            won[j] = replaces;
          }
          for (int64_t j = 0; j < window; ++j) keep[j] = won[j];
        }
        if (positive_mask) {  // x > 0 at the maximum: best > 0 (a NaN maximum is not)
          const __mmask16 positive = _mm512_cmp_ps_mask(best, _mm512_setzero_ps(), _CMP_GT_OQ);
          for (int64_t j = 0; j < window; ++j) keep[j] &= positive;
        }
        __m256i g = _mm256_maskz_loadu_epi16(lanes, d + c0);
        g = _mm256_maskz_mov_epi16(_mm256_cmpneq_epi16_mask(g, negative_zero), g);
        const __mmask16 g_nan = _mm256_cmpgt_epu16_mask(_mm256_and_si256(g, magnitude), inf);
        g = _mm256_or_si256(g, _mm256_maskz_mov_epi16(g_nan, quiet));
        for (int64_t j = 0; j < window; ++j) {
          const int64_t i = (first + at[j]) * c + c0;
          __mmask16 k = keep[j] & lanes;
          if (mask) {
            const __m128i m = _mm_maskz_loadu_epi8(lanes, mask + i);
            k &= _mm_test_epi8_mask(m, m);
          }
          _mm256_mask_storeu_epi16(dx + i, lanes, _mm256_maskz_mov_epi16(k, g));
        }
      }
    }
  zero_uncovered(p, dx);
}

// The selection of tiled_max_pool_grad_bf16_of, with the maximum stored as tiled_max_pool_of
// stores it (the vmaxps chain returns the first maximum's own bits; the exact rule's blend too)
// and the position of the kept element as a byte.
void tiled_max_pool_winners_bf16_of(const TiledPool& p, const bfloat16_t* x, bfloat16_t* y, uint8_t* winners) {
  const int64_t c = p.c, window = p.kh * p.kw;
  int64_t at[16];
  for (int64_t j = 0; j < window; ++j) at[j] = (j / p.kw) * p.w + j % p.kw;
  __m512 v[16];
  for (int64_t oy = 0; oy < p.oh; ++oy)
    for (int64_t ox = 0; ox < p.ow; ++ox) {
      const int64_t first = oy * p.kh * p.w + ox * p.kw, o = (oy * p.ow + ox) * c;
      for (int64_t c0 = 0; c0 < c; c0 += 16) {
        const __mmask16 lanes = c - c0 >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (c - c0)) - 1);
        __m512 best;
        const __mmask16 nan = load_window_bf16(x + first * c + c0, at, window, c, lanes, v, best);
        __m128i won = _mm_setzero_si128();  // lanes of the first element win unless replaced
        if (nan == 0) {
          __mmask16 taken = _mm512_cmp_ps_mask(v[0], best, _CMP_EQ_OQ);
          for (int64_t j = 1; j < window; ++j) {
            const __mmask16 keep = _mm512_cmp_ps_mask(v[j], best, _CMP_EQ_OQ) & static_cast<__mmask16>(~taken);
            won = _mm_mask_mov_epi8(won, keep, _mm_set1_epi8(static_cast<char>(j)));
            taken |= keep;
          }
        } else {
          best = v[0];
          for (int64_t j = 1; j < window; ++j) {
            const __mmask16 replaces = _mm512_cmp_ps_mask(v[j], best, _CMP_GT_OQ) |
                                       (_mm512_cmp_ps_mask(v[j], v[j], _CMP_UNORD_Q) & _mm512_cmp_ps_mask(best, best, _CMP_ORD_Q));
            best = _mm512_mask_blend_ps(replaces, best, v[j]);
            won = _mm_mask_mov_epi8(won, replaces, _mm_set1_epi8(static_cast<char>(j)));
          }
        }
        // x > 0 at the maximum, as the gradient's positive mask reads it (a NaN maximum is not).
        const __mmask16 positive = _mm512_cmp_ps_mask(best, _mm512_setzero_ps(), _CMP_GT_OQ);
        won = _mm_mask_mov_epi8(_mm_set1_epi8(static_cast<char>(0xFF)), positive, won);
        store16(y + o + c0, lanes, best);
        _mm_mask_storeu_epi8(winners + o + c0, lanes, won);
      }
    }
}

// 32 channels to a register: each window's winners compared with its positions, dy's bits stored
// where they match (with 0 + dy's two changes: -0 to +0, a NaN made quiet), +0 elsewhere.
void tiled_max_pool_grad_winners_bf16_of(const TiledPool& p, const uint8_t* winners, const bfloat16_t* dy,
                                         bfloat16_t* dx) {
  const int64_t c = p.c, window = p.kh * p.kw;
  int64_t at[16];
  for (int64_t j = 0; j < window; ++j) at[j] = (j / p.kw) * p.w + j % p.kw;
  const __m512i negative_zero = _mm512_set1_epi16(static_cast<short>(0x8000)), magnitude = _mm512_set1_epi16(0x7fff),
                inf = _mm512_set1_epi16(0x7f80), quiet = _mm512_set1_epi16(0x40);
  for (int64_t oy = 0; oy < p.oh; ++oy)
    for (int64_t ox = 0; ox < p.ow; ++ox) {
      const int64_t first = oy * p.kh * p.w + ox * p.kw, o = (oy * p.ow + ox) * c;
      for (int64_t c0 = 0; c0 < c; c0 += 32) {
        const __mmask32 lanes = c - c0 >= 32 ? ~__mmask32(0) : __mmask32((1u << (c - c0)) - 1);
        const __m256i won = _mm256_maskz_loadu_epi8(lanes, winners + o + c0);
        __m512i g = _mm512_maskz_loadu_epi16(lanes, dy + o + c0);
        g = _mm512_maskz_mov_epi16(_mm512_cmpneq_epi16_mask(g, negative_zero), g);
        const __mmask32 g_nan = _mm512_cmpgt_epu16_mask(_mm512_and_si512(g, magnitude), inf);
        g = _mm512_or_si512(g, _mm512_maskz_mov_epi16(g_nan, quiet));
        for (int64_t j = 0; j < window; ++j) {
          const __mmask32 k = _mm256_cmpeq_epi8_mask(won, _mm256_set1_epi8(static_cast<char>(j)));
          _mm512_mask_storeu_epi16(dx + (first + at[j]) * c + c0, lanes, _mm512_maskz_mov_epi16(k, g));
        }
      }
    }
  zero_uncovered(p, dx);
}

}  // namespace

void tiled_max_pool_winners_bf16(const TiledPool& p, const bfloat16_t* x, bfloat16_t* y, uint8_t* winners) {
  tiled_max_pool_winners_bf16_of(p, x, y, winners);
}
void tiled_max_pool_grad_winners_bf16(const TiledPool& p, const uint8_t* winners, const bfloat16_t* dy,
                                      bfloat16_t* dx) {
  tiled_max_pool_grad_winners_bf16_of(p, winners, dy, dx);
}

void tiled_max_pool(const TiledPool& p, const float* x, float* y) { tiled_max_pool_of(p, x, y); }
void tiled_max_pool_grad(const TiledPool& p, const float* x, const float* dy, const bool* mask, float* dx) {
  tiled_max_pool_grad_of(p, x, dy, mask, dx);
}
void tiled_max_pool_bf16(const TiledPool& p, const bfloat16_t* x, bfloat16_t* y) { tiled_max_pool_of(p, x, y); }
void tiled_max_pool_grad_bf16(const TiledPool& p, const bfloat16_t* x, const bfloat16_t* dy, const bool* mask,
                              bfloat16_t* dx, bool positive_mask) {
  tiled_max_pool_grad_bf16_of(p, x, dy, mask, dx, positive_mask);
}

}  // namespace tg::detail::pool_avx512
