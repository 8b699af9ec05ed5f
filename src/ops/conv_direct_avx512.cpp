// The direct convolution kernels of conv_direct.h, built for AVX-512F (-mavx512f -mfma).
//
// Register blocking: a block holds PX output pixels x OCV vectors of 16 output channels (the
// forward), or KB window entries x OCV vectors (the filter gradient), 24 accumulators when the
// channels allow, so that the two FMA pipes always have independent sums to work on. Each step
// of the inner loop loads OCV filter (or gradient) vectors once and broadcasts one input value
// per pixel (or entry). The last vector of a channel block is masked, so any channel count runs
// without a scalar tail, and masked-off lanes are never read from memory.
#include "ops/conv_direct.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>

namespace tg::detail::conv_direct {
namespace {

constexpr int kLanes = 16;
constexpr int kMaxVectors = 4;  // channels per block: 64

// Rows of the block for a channel block of `vectors` vectors: 24 accumulators, at most 16 rows.
constexpr int block_rows(int vectors) { return vectors == 4 ? 6 : vectors == 3 ? 8 : vectors == 2 ? 12 : 16; }

// The forward's window entries per pass over a block of pixels: the filter rows a pass reads
// stay in L2 (k_chunk x 64 channels x 4 bytes = 128 KiB).
constexpr int64_t kForwardKChunk = 512;
// The filter gradient reads a tile of output-gradient rows once per KB entries: ~24 KiB, so the
// tile stays in L1 while every entry block runs over it.
constexpr int64_t kGradTileBytes = 24 * 1024;

struct ChannelBlock {
  int64_t first = 0;  // output channel of lane 0 of vector 0
  int vectors = 0;
  __mmask16 mask[kMaxVectors] = {};
};

ChannelBlock channel_block(int64_t out_c, int64_t first) {
  ChannelBlock b;
  b.first = first;
  const int64_t left = std::min<int64_t>(out_c - first, kLanes * kMaxVectors);
  b.vectors = static_cast<int>((left + kLanes - 1) / kLanes);
  for (int v = 0; v < b.vectors; ++v) {
    const int64_t lanes = std::min<int64_t>(kLanes, left - int64_t{v} * kLanes);
    b.mask[v] = static_cast<__mmask16>(lanes == kLanes ? 0xFFFF : (1u << lanes) - 1);
  }
  return b;
}

// ---- forward ----

// PX pixels at x0, x0 + pixel_step, ... (in the padded image), window entries [0, nk) of the
// chunk (taps and filter rows already offset to the chunk), into out[px] (+ the channel
// block); a null out[px] is a pixel outside the image, computed and dropped.
template <int PX, int OCV>
void forward_block(const float* x0, int64_t pixel_step, const int64_t* taps, int64_t nk, const float* filter,
                   int64_t out_c, const __mmask16* mask, float* const* out, bool accumulate) {
  __m512 acc[PX][OCV];
#pragma GCC unroll 16
  for (int px = 0; px < PX; ++px)
#pragma GCC unroll 4
    for (int v = 0; v < OCV; ++v)
      acc[px][v] = accumulate && out[px] ? _mm512_maskz_loadu_ps(mask[v], out[px] + v * kLanes) : _mm512_setzero_ps();
  for (int64_t k = 0; k < nk; ++k, filter += out_c) {
    const float* xk = x0 + taps[k];
    __m512 w[OCV];
#pragma GCC unroll 4
    for (int v = 0; v < OCV; ++v) w[v] = _mm512_maskz_loadu_ps(mask[v], filter + v * kLanes);
#pragma GCC unroll 16
    for (int px = 0; px < PX; ++px) {
      const __m512 a = _mm512_set1_ps(xk[px * pixel_step]);
#pragma GCC unroll 4
      for (int v = 0; v < OCV; ++v) acc[px][v] = _mm512_fmadd_ps(a, w[v], acc[px][v]);
    }
  }
#pragma GCC unroll 16
  for (int px = 0; px < PX; ++px)
    if (out[px])
#pragma GCC unroll 4
      for (int v = 0; v < OCV; ++v) _mm512_mask_storeu_ps(out[px] + v * kLanes, mask[v], acc[px][v]);
}

using ForwardBlockFn = void (*)(const float*, int64_t, const int64_t*, int64_t, const float*, int64_t,
                                const __mmask16*, float* const*, bool);

// forward_block for 1 .. block_rows(OCV) pixels: a row's or an image's last block takes the one
// of its exact size.
template <int OCV, std::size_t... Rows>
constexpr std::array<ForwardBlockFn, sizeof...(Rows)> forward_blocks(std::index_sequence<Rows...>) {
  return {&forward_block<static_cast<int>(Rows) + 1, OCV>...};
}

template <int OCV>
void forward_pixels(int count, const float* x0, int64_t pixel_step, const int64_t* taps, int64_t nk,
                    const float* filter, int64_t out_c, const __mmask16* mask, float* const* out, bool accumulate) {
  static constexpr auto kBlocks = forward_blocks<OCV>(std::make_index_sequence<block_rows(OCV)>());
  kBlocks[count - 1](x0, pixel_step, taps, nk, filter, out_c, mask, out, accumulate);
}

// Calls fn(x0 offset, count, out pointers) for blocks of up to `rows` pixels covering the image.
// With stride 1 along the width and rows whose bases are a whole number of columns apart, the
// pixels of consecutive rows are evenly spaced (the window's overhang columns in between are
// computed and dropped): blocks then run across row ends. Otherwise each row is blocked alone.
template <class Fn>
void each_pixel_block(const ImageGeom& g, int64_t first_channel, float* y, int rows, Fn&& fn) {
  float* out[16];
  const bool flat = g.col_step > 0 && g.row_step % g.col_step == 0 &&
                    g.row_step / g.col_step >= g.out_w && (g.row_step / g.col_step - g.out_w) * 4 <= g.row_step / g.col_step;
  if (flat) {
    const int64_t width = g.row_step / g.col_step;  // virtual columns per output row
    const int64_t last = (g.out_h - 1) * width + g.out_w;
    for (int64_t q0 = 0; q0 < last; q0 += rows) {
      const int count = static_cast<int>(std::min<int64_t>(rows, last - q0));
      for (int i = 0; i < count; ++i) {
        const int64_t oy = (q0 + i) / width, ox = (q0 + i) % width;
        out[i] = ox < g.out_w ? y + (oy * g.out_w + ox) * g.out_c + first_channel : nullptr;
      }
      fn(q0 * g.col_step, count, out);
    }
    return;
  }
  for (int64_t oy = 0; oy < g.out_h; ++oy)
    for (int64_t ox0 = 0; ox0 < g.out_w; ox0 += rows) {
      const int count = static_cast<int>(std::min<int64_t>(rows, g.out_w - ox0));
      for (int i = 0; i < count; ++i) out[i] = y + (oy * g.out_w + ox0 + i) * g.out_c + first_channel;
      fn(oy * g.row_step + ox0 * g.col_step, count, out);
    }
}

template <int OCV>
void forward_channels(const ImageGeom& g, const ChannelBlock& cb, const float* xp, const float* filter, float* y) {
  for (int64_t k0 = 0; k0 < g.k; k0 += kForwardKChunk) {
    const int64_t nk = std::min(kForwardKChunk, g.k - k0);
    const float* f = filter + k0 * g.out_c + cb.first;
    each_pixel_block(g, cb.first, y, block_rows(OCV), [&](int64_t offset, int count, float* const* out) {
      forward_pixels<OCV>(count, xp + offset, g.col_step, g.taps + k0, nk, f, g.out_c, cb.mask, out, k0 > 0);
    });
  }
}

// ---- filter gradient ----

// Entries taps[0..KB) of the window (filter rows df[0..KB), both offset to the block) summed
// over output rows [oy0, oy1) of the image.
template <int KB, int OCV>
void filter_grad_block(const ImageGeom& g, const float* xp, const int64_t* taps, const float* dy,
                       const __mmask16* mask, float* df, int64_t oy0, int64_t oy1) {
  __m512 acc[KB][OCV];
  int64_t tap[KB];
#pragma GCC unroll 16
  for (int kb = 0; kb < KB; ++kb) {
    tap[kb] = taps[kb];
#pragma GCC unroll 4
    for (int v = 0; v < OCV; ++v) acc[kb][v] = _mm512_maskz_loadu_ps(mask[v], df + kb * g.out_c + v * kLanes);
  }
  for (int64_t oy = oy0; oy < oy1; ++oy) {
    const float* x = xp + oy * g.row_step;
    const float* d = dy + oy * g.out_w * g.out_c;
    for (int64_t ox = 0; ox < g.out_w; ++ox, x += g.col_step, d += g.out_c) {
      __m512 grad[OCV];
#pragma GCC unroll 4
      for (int v = 0; v < OCV; ++v) grad[v] = _mm512_maskz_loadu_ps(mask[v], d + v * kLanes);
#pragma GCC unroll 16
      for (int kb = 0; kb < KB; ++kb) {
        const __m512 a = _mm512_set1_ps(x[tap[kb]]);
#pragma GCC unroll 4
        for (int v = 0; v < OCV; ++v) acc[kb][v] = _mm512_fmadd_ps(a, grad[v], acc[kb][v]);
      }
    }
  }
#pragma GCC unroll 16
  for (int kb = 0; kb < KB; ++kb)
#pragma GCC unroll 4
    for (int v = 0; v < OCV; ++v) _mm512_mask_storeu_ps(df + kb * g.out_c + v * kLanes, mask[v], acc[kb][v]);
}

using GradBlockFn = void (*)(const ImageGeom&, const float*, const int64_t*, const float*, const __mmask16*,
                             float*, int64_t, int64_t);

// filter_grad_block for 1 .. block_rows(OCV) window entries: the last block of the window takes
// the one of its exact size, so that every entry is summed in one pass over the tile.
template <int OCV, std::size_t... Entries>
constexpr std::array<GradBlockFn, sizeof...(Entries)> filter_grad_blocks(std::index_sequence<Entries...>) {
  return {&filter_grad_block<static_cast<int>(Entries) + 1, OCV>...};
}

template <int OCV>
void filter_grad_channels(const ImageGeom& g, const ChannelBlock& cb, const float* xp, const float* dy, float* df) {
  const int64_t row_bytes = g.out_w * cb.vectors * kLanes * static_cast<int64_t>(sizeof(float));
  const int64_t tile = std::max<int64_t>(1, kGradTileBytes / std::max<int64_t>(1, row_bytes));
  static constexpr auto kBlocks = filter_grad_blocks<OCV>(std::make_index_sequence<block_rows(OCV)>());
  constexpr int64_t kRows = block_rows(OCV);
  dy += cb.first;
  df += cb.first;
  for (int64_t oy0 = 0; oy0 < g.out_h; oy0 += tile) {
    const int64_t oy1 = std::min(g.out_h, oy0 + tile);
    for (int64_t k0 = 0; k0 < g.k; k0 += kRows)
      kBlocks[std::min(kRows, g.k - k0) - 1](g, xp, g.taps + k0, dy, cb.mask, df + k0 * g.out_c, oy0, oy1);
  }
}

// Runs fn.template operator()<OCV> for each block of up to 64 output channels.
template <class Fn>
void each_channel_block(int64_t out_c, Fn&& fn) {
  for (int64_t first = 0; first < out_c; first += kLanes * kMaxVectors) {
    const ChannelBlock cb = channel_block(out_c, first);
    switch (cb.vectors) {
      case 4: fn.template operator()<4>(cb); break;
      case 3: fn.template operator()<3>(cb); break;
      case 2: fn.template operator()<2>(cb); break;
      default: fn.template operator()<1>(cb); break;
    }
  }
}

}  // namespace

bool available() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
}

void forward_image(const ImageGeom& g, const float* xp, const float* filter, float* y) {
  each_channel_block(g.out_c, [&]<int OCV>(const ChannelBlock& cb) { forward_channels<OCV>(g, cb, xp, filter, y); });
}

void filter_grad_image(const ImageGeom& g, const float* xp, const float* dy, float* df) {
  each_channel_block(g.out_c, [&]<int OCV>(const ChannelBlock& cb) { filter_grad_channels<OCV>(g, cb, xp, dy, df); });
}

}  // namespace tg::detail::conv_direct
