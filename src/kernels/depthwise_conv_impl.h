// The depthwise kernels' bodies (depthwise_conv.h), compiled by depthwise_conv.cpp for the
// baseline ISA and by depthwise_conv_avx512.cpp for AVX-512; an unnamed namespace keeps the two
// copies apart.
#pragma once
#include <algorithm>
#include <type_traits>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "core/thread_pool.h"
#include "kernels/conv_kernels.h"
#include "kernels/gemm_epilogue.h"

namespace tg::detail {
namespace {

// Below this many multiply-adds a kernel runs on the calling thread: waking the pool costs more.
constexpr int64_t kDepthwiseParallelWork = int64_t{1} << 16;
// The filter gradient's blocks of output rows: at most this many partial sums.
constexpr int64_t kDepthwiseMaxParts = 16;

// For one output pixel (oy, ox) of image n: the input pixel each window tap reads, as element
// offsets into x, and the tap's index (ky * kw + kx); taps over the padding are left out.
// Returns the number of taps kept.
inline int64_t taps_inside(const ConvGeom& g, int64_t n, int64_t oy, int64_t ox, int64_t* at, int64_t* tap) {
  int64_t count = 0;
  for (int64_t ky = 0; ky < g.kh; ++ky) {
    const int64_t iy = oy * g.sh - g.pt + ky * g.dh;
    if (iy < 0 || iy >= g.h) continue;
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      const int64_t ix = ox * g.sw - g.pl + kx * g.dw;
      if (ix < 0 || ix >= g.w) continue;
      at[count] = ((n * g.h + iy) * g.w + ix) * g.c;
      tap[count++] = ky * g.kw + kx;
    }
  }
  return count;
}

// The input gradient's mirror: for input pixel (iy, ix) of image n, the output pixels whose
// window reads it (as element offsets into dy) and the tap that reads it there.
inline int64_t readers_of(const ConvGeom& g, int64_t n, int64_t iy, int64_t ix, int64_t* at, int64_t* tap) {
  int64_t count = 0;
  for (int64_t ky = 0; ky < g.kh; ++ky) {
    const int64_t ty = iy + g.pt - ky * g.dh;
    if (ty < 0 || ty % g.sh != 0 || ty / g.sh >= g.oh) continue;
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      const int64_t tx = ix + g.pl - kx * g.dw;
      if (tx < 0 || tx % g.sw != 0 || tx / g.sw >= g.ow) continue;
      at[count] = ((n * g.oh + ty / g.sh) * g.ow + tx / g.sw) * g.oc;
      tap[count++] = ky * g.kw + kx;
    }
  }
  return count;
}

// out[j] = sum over the taps of a[at[t] + j] * b[tap[t] * oc + j], j < c (multiplier 1).
template <class T>
void sum_products(const T* a, const T* b, const int64_t* at, const int64_t* tap, int64_t taps, int64_t c,
                  int64_t oc, T* __restrict out) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    int64_t j = 0;
    for (; j + 64 <= c; j += 64) {
      __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
      for (int64_t t = 0; t < taps; ++t) {
        const float* pa = a + at[t] + j;
        const float* pb = b + tap[t] * oc + j;
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(pa), _mm512_loadu_ps(pb), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(pa + 16), _mm512_loadu_ps(pb + 16), s1);
        s2 = _mm512_fmadd_ps(_mm512_loadu_ps(pa + 32), _mm512_loadu_ps(pb + 32), s2);
        s3 = _mm512_fmadd_ps(_mm512_loadu_ps(pa + 48), _mm512_loadu_ps(pb + 48), s3);
      }
      _mm512_storeu_ps(out + j, s0);
      _mm512_storeu_ps(out + j + 16, s1);
      _mm512_storeu_ps(out + j + 32, s2);
      _mm512_storeu_ps(out + j + 48, s3);
    }
    for (; j < c; j += 16) {
      const __mmask16 lanes = c - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (c - j)) - 1);
      __m512 s = _mm512_setzero_ps();
      for (int64_t t = 0; t < taps; ++t)
        s = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(lanes, a + at[t] + j), _mm512_maskz_loadu_ps(lanes, b + tap[t] * oc + j), s);
      _mm512_mask_storeu_ps(out + j, lanes, s);
    }
    return;
  }
#endif
  std::fill(out, out + c, T(0));
  for (int64_t t = 0; t < taps; ++t) {
    const T* __restrict pa = a + at[t];
    const T* __restrict pb = b + tap[t] * oc;
    for (int64_t k = 0; k < c; ++k) out[k] += pa[k] * pb[k];
  }
}

#if defined(__AVX512F__)
// sum_products for four horizontally adjacent output pixels whose windows lie inside the input
// across: the first pixel's taps, the others' `step` elements further each. Four independent sums
// per 16 channels (one would wait on its own multiply-adds), each filter vector loaded once for
// the four; every sum adds its taps in the same order as sum_products, so the bits agree.
inline void sum_products_x4(const float* a, const float* b, const int64_t* at, const int64_t* tap, int64_t taps,
                            int64_t c, int64_t oc, int64_t step, float* out) {
  int64_t j = 0;
  // Blocks of 64 channels first (16 sums), so that a pixel's channels are read in order, as
  // sum_products reads them: the stream from memory stays sequential for large batches.
  for (; j + 64 <= c; j += 64) {
    __m512 s[4][4];
    for (auto& row : s)
      for (auto& v : row) v = _mm512_setzero_ps();
    for (int64_t t = 0; t < taps; ++t) {
      const float* pb = b + tap[t] * oc + j;
      const __m512 w[4] = {_mm512_loadu_ps(pb), _mm512_loadu_ps(pb + 16), _mm512_loadu_ps(pb + 32),
                           _mm512_loadu_ps(pb + 48)};
      for (int p = 0; p < 4; ++p) {
        const float* pa = a + at[t] + p * step + j;
        for (int v = 0; v < 4; ++v) s[p][v] = _mm512_fmadd_ps(_mm512_loadu_ps(pa + 16 * v), w[v], s[p][v]);
      }
    }
    for (int p = 0; p < 4; ++p)
      for (int v = 0; v < 4; ++v) _mm512_storeu_ps(out + p * oc + j + 16 * v, s[p][v]);
  }
  for (; j < c; j += 16) {
    const __mmask16 lanes = c - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (c - j)) - 1);
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (int64_t t = 0; t < taps; ++t) {
      const float* pa = a + at[t] + j;
      const __m512 w = _mm512_maskz_loadu_ps(lanes, b + tap[t] * oc + j);
      s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(lanes, pa), w, s0);
      s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(lanes, pa + step), w, s1);
      s2 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(lanes, pa + 2 * step), w, s2);
      s3 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(lanes, pa + 3 * step), w, s3);
    }
    _mm512_mask_storeu_ps(out + j, lanes, s0);
    _mm512_mask_storeu_ps(out + oc + j, lanes, s1);
    _mm512_mask_storeu_ps(out + 2 * oc + j, lanes, s2);
    _mm512_mask_storeu_ps(out + 3 * oc + j, lanes, s3);
  }
}
#endif

// Splits [0, rows) over the pool when the work pays for it: fn(r0, r1) for one even block of
// rows per thread (parallel_parts: parallel_for would round a few rows' boundaries to 16).
template <class Fn>
void for_rows(int64_t rows, int64_t work_per_row, Fn&& fn) {
  const int parts = static_cast<int>(std::min<int64_t>(num_threads(), rows));
  if (rows * work_per_row < kDepthwiseParallelWork || parts < 2) return fn(int64_t{0}, rows);
  parallel_parts(parts, [&](int p) { fn(rows * p / parts, rows * (p + 1) / parts); });
}

template <class T>
void forward_impl(const ConvGeom& g, const T* x, const T* f, T* y, const GemmEpilogue* epilogue) {
  const int64_t m = g.oc / g.c, window = g.kh * g.kw;
  TG_CHECK(!epilogue || (std::is_same_v<T, float> && !epilogue->column_sums), "a depthwise epilogue unchecked");
  const EpilogueRowFn epilogue_row = epilogue ? epilogue_row_fn(*epilogue) : nullptr;
  [[maybe_unused]] const bool in_registers =
      epilogue && !epilogue->mask_out && !epilogue->mask_in && !epilogue->matrix;
  for_rows(g.n * g.oh, g.ow * g.oc * window, [&](int64_t r0, int64_t r1) {
    std::vector<int64_t> at(static_cast<std::size_t>(window)), tap(static_cast<std::size_t>(window));
    // The output columns whose windows lie inside the input across: [inner_first, inner_last].
    [[maybe_unused]] const int64_t inner_first = (g.pl + g.sw - 1) / g.sw;
    const int64_t span_end = g.w - 1 + g.pl - (g.kw - 1) * g.dw;
    [[maybe_unused]] const int64_t inner_last = span_end >= 0 ? span_end / g.sw : -1;
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / g.oh, oy = r % g.oh;
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        const int64_t taps = taps_inside(g, n, oy, ox, at.data(), tap.data());
        T* __restrict out = y + (r * g.ow + ox) * g.oc;
#if defined(__AVX512F__)
        if constexpr (std::is_same_v<T, float>) {
          // Stride 1 only: strided blocks measured slower once the input streams from memory
          // (batch 32: 112x112x96 stride 2 16 -> 24 ms).
          if (m == 1 && g.sw == 1 && ox >= inner_first && ox + 3 <= inner_last) {
            sum_products_x4(x, f, at.data(), tap.data(), taps, g.c, g.oc, g.sw * g.c, out);
            ox += 3;
            continue;
          }
        }
#endif
        if (m == 1) {
          sum_products(x, f, at.data(), tap.data(), taps, g.c, g.oc, out);
          continue;
        }
        std::fill(out, out + g.oc, T(0));
        for (int64_t t = 0; t < taps; ++t) {
          const T* __restrict px = x + at[t];
          const T* __restrict pf = f + tap[t] * g.oc;
          for (int64_t c = 0; c < g.c; ++c)
            for (int64_t k = 0; k < m; ++k) out[c * m + k] += px[c] * pf[c * m + k];
        }
      }
      if constexpr (std::is_same_v<T, float>) {
#if defined(__AVX512F__)
        // A bias, relu and clamp alone in registers: the row function's blends for the clamp's
        // NaN rule were ~5% of mobilenet_v2 at batch 32.
        if (in_registers) {
          bias_relu_clamp_in_registers(*epilogue, y + r * g.ow * g.oc, g.ow, g.oc);
          continue;
        }
#endif
        if (epilogue_row)
          for (int64_t p = r * g.ow, end = p + g.ow; p < end; ++p) epilogue_row(*epilogue, y + p * g.oc, p, 0, g.oc);
      }
    }
  });
}

template <class T>
void backprop_input_impl(const ConvGeom& g, const T* f, const T* dy, T* dx) {
  const int64_t m = g.oc / g.c, window = g.kh * g.kw;
  const int64_t reads = std::max<int64_t>(1, window / std::max<int64_t>(1, g.sh * g.sw));
  for_rows(g.n * g.h, g.w * g.oc * reads, [&](int64_t r0, int64_t r1) {
    std::vector<int64_t> at(static_cast<std::size_t>(window)), tap(static_cast<std::size_t>(window));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / g.h, iy = r % g.h;
      for (int64_t ix = 0; ix < g.w; ++ix) {
        const int64_t taps = readers_of(g, n, iy, ix, at.data(), tap.data());
        T* __restrict out = dx + (r * g.w + ix) * g.c;
        if (m == 1) {
          sum_products(dy, f, at.data(), tap.data(), taps, g.c, g.oc, out);
          continue;
        }
        std::fill(out, out + g.c, T(0));
        for (int64_t t = 0; t < taps; ++t) {
          const T* __restrict pd = dy + at[t];
          const T* __restrict pf = f + tap[t] * g.oc;
          for (int64_t c = 0; c < g.c; ++c) {
            T s = 0;
            for (int64_t k = 0; k < m; ++k) s += pd[c * m + k] * pf[c * m + k];
            out[c] += s;
          }
        }
      }
    }
  });
}

// df over the output rows [r0, r1), added to df (zeroed by the caller).
template <class T>
void filter_rows(const ConvGeom& g, const T* x, const T* dy, int64_t r0, int64_t r1, T* __restrict df) {
  const int64_t m = g.oc / g.c, window = g.kh * g.kw;
  std::vector<int64_t> at(static_cast<std::size_t>(window)), tap(static_cast<std::size_t>(window));
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t n = r / g.oh, oy = r % g.oh;
    for (int64_t ox = 0; ox < g.ow; ++ox) {
      const int64_t taps = taps_inside(g, n, oy, ox, at.data(), tap.data());
      const T* __restrict pd = dy + (r * g.ow + ox) * g.oc;
      for (int64_t t = 0; t < taps; ++t) {
        const T* __restrict px = x + at[t];
        T* __restrict out = df + tap[t] * g.oc;
        if (m == 1) {
          for (int64_t c = 0; c < g.c; ++c) out[c] += px[c] * pd[c];
        } else {
          for (int64_t c = 0; c < g.c; ++c)
            for (int64_t k = 0; k < m; ++k) out[c * m + k] += px[c] * pd[c * m + k];
        }
      }
    }
  }
}

template <class T>
void backprop_filter_impl(const ConvGeom& g, const T* x, const T* dy, T* df) {
  const int64_t rows = g.n * g.oh, size = g.kh * g.kw * g.oc;
  const int64_t work_per_row = g.ow * g.oc * g.kh * g.kw;
  // Blocks fixed by the shapes: a few rows' work each at least, at most kDepthwiseMaxParts.
  const int64_t min_rows = std::max<int64_t>(1, kDepthwiseParallelWork / std::max<int64_t>(1, work_per_row));
  const int64_t parts = std::clamp<int64_t>(rows / min_rows, 1, kDepthwiseMaxParts);
  std::fill(df, df + size, T(0));
  if (parts == 1) return filter_rows(g, x, dy, 0, rows, df);
  std::vector<T> partial(static_cast<std::size_t>(parts * size), T(0));
  const auto block = [&](int64_t p) {
    filter_rows(g, x, dy, rows * p / parts, rows * (p + 1) / parts, partial.data() + p * size);
  };
  parallel_parts(static_cast<int>(parts), [&](int p) { block(p); });
  for (int64_t p = 0; p < parts; ++p) {
    const T* __restrict src = partial.data() + p * size;
    for (int64_t i = 0; i < size; ++i) df[i] += src[i];
  }
}

}  // namespace
}  // namespace tg::detail
