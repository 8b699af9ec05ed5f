// The kernels of implicit_gemm.h, built for AVX-512F (-mavx512f -mfma).
//
// Register blocking: a block holds R output rows x V vectors of 16 output columns (multiply),
// or R entries of the sum x V vectors (add_right_gradient), 24 accumulators when the columns
// allow, so that the two FMA pipes always have independent sums to work on. Each step of the
// inner loop loads the V vectors of the right operand (or of the output's gradient) once and
// broadcasts one left-operand value per row (or entry). The last vector of a column block is
// masked, so any column count runs without a scalar tail, and masked-off lanes are never read
// from memory.
#include "kernels/implicit_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "core/unroll.h"
#include "kernels/gemm_epilogue.h"

namespace tg::detail::implicit_gemm {
namespace {

constexpr int kLanes = 16;
constexpr int kMaxVectors = 4;  // columns per block: 64

// Rows (or entries) of a block for a column block of v vectors: 24 accumulators, at most 16.
constexpr int block_rows(int v) { return v == 4 ? 6 : v == 3 ? 8 : v == 2 ? 12 : 16; }

// multiply's entries per pass over a block of rows: the right operand's rows a pass reads stay in
// L2 (512 x 64 columns x 4 bytes = 128 KiB).
constexpr int64_t kMultiplyKChunk = 512;
// multiply packs the right operand (multiply_packed) for at least kPackMinRows output rows and
// kPackMinColumns columns when all of it, at most kPackBytes, is one pass.
constexpr int64_t kPackMinRows = 64, kPackMinColumns = 256;
constexpr int64_t kPackBytes = 512 * 1024;
// add_right_gradient reads a tile of the output gradient's rows once per block of entries: about
// 24 KiB, so the tile stays in L1 while every block of entries runs over it.
constexpr int64_t kGradientTileBytes = 24 * 1024;

struct ColumnBlock {
  int64_t first = 0;  // output column of lane 0 of vector 0
  int vectors = 0;
  __mmask16 mask[kMaxVectors] = {};
};

ColumnBlock column_block(int64_t n, int64_t first) {
  ColumnBlock b;
  b.first = first;
  const int64_t left = std::min<int64_t>(n - first, kLanes * kMaxVectors);
  b.vectors = static_cast<int>((left + kLanes - 1) / kLanes);
  for (int v = 0; v < b.vectors; ++v) {
    const int64_t lanes = std::min<int64_t>(kLanes, left - int64_t{v} * kLanes);
    b.mask[v] = static_cast<__mmask16>(lanes == kLanes ? 0xFFFF : (1u << lanes) - 1);
  }
  return b;
}

// Runs fn.template operator()<V>(block) for each block of up to 64 output columns.
template <class Fn>
void each_column_block(int64_t n, Fn&& fn) {
  for (int64_t first = 0; first < n; first += kLanes * kMaxVectors) {
    const ColumnBlock cb = column_block(n, first);
    switch (cb.vectors) {
      case 4: fn.template operator()<4>(cb); break;
      case 3: fn.template operator()<3>(cb); break;
      case 2: fn.template operator()<2>(cb); break;
      default: fn.template operator()<1>(cb); break;
    }
  }
}

// ---- multiply ----

// R rows whose left-operand bases are a0, a0 + step, ..., entries [0, nk) of a pass (taps
// and b already offset to it; b's rows b_stride apart), into out[r]; a null out[r] is a row
// computed and dropped (see each_row_block). Sums start from out[r]'s values when `load`.
// `fused` (when not null) is applied to the sums before they are stored: the epilogue's bias
// (its columns of this block), relu, the clamp, and + or * the matrix (its rows of this block,
// at matrix_rows[r]; a null row for a row dropped), in the elementwise kernels' arithmetic
// (AddF, ReluF, MaximumF and MinimumF, MulF). The matrix rows are prefetched before the sums start: they come from memory
// (a residual, an activation's derivative made in the forward pass), and the block's products
// take far longer than the fetch.
struct FusedEpilogue {
  const float* bias = nullptr;
  bool relu = false;
  const float* const* matrix_rows = nullptr;
  bool matrix_mul = false;
  bool clamp = false;
  float lower = 0.0f, upper = 0.0f;  // never NaN (the optimiser takes no NaN bound in)
};

// `Full`: the block's vectors are all whole (every mask all ones), and are loaded and stored
// unmasked: masked loads in the inner loop cost ~10% of a product (Zen 4; 1024 x 128 times
// 128 x 384: 99 -> 110 GFLOP/s, the bits the same).
template <int R, int V, bool Full>
void multiply_block(const float* a0, int64_t step, const int64_t* taps, int64_t nk, const float* b,
                    int64_t b_stride, const __mmask16* mask, float* const* out, bool load, const FusedEpilogue* fused) {
  if (fused && fused->matrix_rows)
TG_UNROLL(16)
    for (int r = 0; r < R; ++r)
      if (fused->matrix_rows[r])
TG_UNROLL(4)
        for (int v = 0; v < V; ++v) _mm_prefetch(reinterpret_cast<const char*>(fused->matrix_rows[r] + v * kLanes), _MM_HINT_T0);
  __m512 acc[R][V];
TG_UNROLL(16)
  for (int r = 0; r < R; ++r)
TG_UNROLL(4)
    for (int v = 0; v < V; ++v)
      acc[r][v] = !(load && out[r])         ? _mm512_setzero_ps()
                  : Full                    ? _mm512_loadu_ps(out[r] + v * kLanes)
                                            : _mm512_maskz_loadu_ps(mask[v], out[r] + v * kLanes);
  for (int64_t k = 0; k < nk; ++k, b += b_stride) {
    const float* ak = a0 + taps[k];
    __m512 w[V];
TG_UNROLL(4)
    for (int v = 0; v < V; ++v) w[v] = Full ? _mm512_loadu_ps(b + v * kLanes) : _mm512_maskz_loadu_ps(mask[v], b + v * kLanes);
TG_UNROLL(16)
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_set1_ps(ak[r * step]);
TG_UNROLL(4)
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(x, w[v], acc[r][v]);
    }
  }
  if (fused) {
    __m512 bias[V];
TG_UNROLL(4)
    for (int v = 0; v < V; ++v) bias[v] = fused->bias ? _mm512_maskz_loadu_ps(mask[v], fused->bias + v * kLanes) : _mm512_setzero_ps();
    const __m512 zero = _mm512_setzero_ps();
    const __m512 lower = _mm512_set1_ps(fused->lower), upper = _mm512_set1_ps(fused->upper);
TG_UNROLL(16)
    for (int r = 0; r < R; ++r)
TG_UNROLL(4)
      for (int v = 0; v < V; ++v) {
        // x + bias as AddF, then relu as ReluF: vmaxps(0, x) returns x unless 0 > x (NaN, -0 kept).
        if (fused->bias) acc[r][v] = _mm512_add_ps(acc[r][v], bias[v]);
        if (fused->relu) acc[r][v] = _mm512_maskz_max_ps(0xFFFF, zero, acc[r][v]);
        if (fused->clamp) acc[r][v] = clamp_in_registers(acc[r][v], lower, upper);
      }
    if (fused->matrix_rows)
TG_UNROLL(16)
      for (int r = 0; r < R; ++r) {
        const float* m = fused->matrix_rows[r];
        if (!m) continue;
TG_UNROLL(4)
        for (int v = 0; v < V; ++v) {
          // The sum is final here (no product follows it), so nothing contracts: AddF or MulF.
          const __m512 x = Full ? _mm512_loadu_ps(m + v * kLanes) : _mm512_maskz_loadu_ps(mask[v], m + v * kLanes);
          acc[r][v] = fused->matrix_mul ? _mm512_mul_ps(acc[r][v], x) : _mm512_add_ps(acc[r][v], x);
        }
      }
  }
TG_UNROLL(16)
  for (int r = 0; r < R; ++r)
    if (out[r])
TG_UNROLL(4)
      for (int v = 0; v < V; ++v) {
        if (Full) _mm512_storeu_ps(out[r] + v * kLanes, acc[r][v]);
        else _mm512_mask_storeu_ps(out[r] + v * kLanes, mask[v], acc[r][v]);
      }
}

using MultiplyBlockFn = void (*)(const float*, int64_t, const int64_t*, int64_t, const float*, int64_t,
                                 const __mmask16*, float* const*, bool, const FusedEpilogue*);

// multiply_block for 1 .. block_rows(V) rows: the last block of a row of pixels, or of a plain
// product, takes the one of its exact size.
template <int V, bool Full, std::size_t... Rows>
constexpr std::array<MultiplyBlockFn, sizeof...(Rows)> multiply_blocks(std::index_sequence<Rows...>) {
  return {&multiply_block<static_cast<int>(Rows) + 1, V, Full>...};
}

// Calls fn(left-operand offset, count, out pointers, row step) for blocks of up to `rows` output
// rows covering the output. When the rows oy are a whole number of columns ox apart in the left
// operand (a convolution at stride 1 along the width), the rows of consecutive oy are evenly
// spaced, the window's overhang columns in between: blocks then run across the ends of oy rows,
// computing the overhang rows and dropping them (null out). Otherwise each oy is blocked alone.
template <class Fn>
void each_row_block(const Layout& l, int64_t first_column, float* c, int rows, Fn&& fn) {
  float* out[16];
  const int64_t width = l.col_step > 0 && l.row_step % l.col_step == 0 ? l.row_step / l.col_step : 0;
  if (l.out_h > 1 && width >= l.out_w && (width - l.out_w) * 4 <= width) {
    const int64_t last = (l.out_h - 1) * width + l.out_w;  // rows on the virtual (oy, width) grid
    for (int64_t q0 = 0; q0 < last; q0 += rows) {
      const int count = static_cast<int>(std::min<int64_t>(rows, last - q0));
      for (int i = 0; i < count; ++i) {
        const int64_t oy = (q0 + i) / width, ox = (q0 + i) % width;
        out[i] = ox < l.out_w ? c + (oy * l.out_w + ox) * l.c_stride + first_column : nullptr;
      }
      fn(q0 * l.col_step, count, out);
    }
    return;
  }
  for (int64_t oy = 0; oy < l.out_h; ++oy)
    for (int64_t ox0 = 0; ox0 < l.out_w; ox0 += rows) {
      const int count = static_cast<int>(std::min<int64_t>(rows, l.out_w - ox0));
      for (int i = 0; i < count; ++i) out[i] = c + (oy * l.out_w + ox0 + i) * l.c_stride + first_column;
      fn(oy * l.row_step + ox0 * l.col_step, count, out);
    }
}

// The epilogue matrix's rows for a block of output rows (out[r] in c, rows c_stride apart; null:
// a row dropped), from column `column` of the whole product.
inline void matrix_rows_of(const GemmEpilogue& e, const float* c, int64_t c_stride, float* const* out, int count,
                           int64_t column, const float** rows) {
  for (int r = 0; r < count; ++r) rows[r] = out[r] ? e.matrix + (out[r] - c) / c_stride * e.mask_ld + column : nullptr;
}

template <int V>
void multiply_columns(const Layout& l, const ColumnBlock& cb, const float* a, const float* b, float* c,
                      bool accumulate, const GemmEpilogue* epilogue, int64_t first_column) {
  static constexpr auto kMasked = multiply_blocks<V, false>(std::make_index_sequence<block_rows(V)>());
  static constexpr auto kFull = multiply_blocks<V, true>(std::make_index_sequence<block_rows(V)>());
  const auto& kBlocks = cb.mask[V - 1] == 0xFFFF ? kFull : kMasked;
  const int64_t width = std::min<int64_t>(l.n - cb.first, kLanes * kMaxVectors);
  const EpilogueRowFn epilogue_row = epilogue ? epilogue_row_fn(*epilogue) : nullptr;
  // A bias and relu alone are applied in registers before the last pass's stores (the CNN's
  // first layer, 32 channels over 9 taps: a second pass over each stored block cost ~20% of
  // it); masks and column sums take the row function after the stores.
  const bool in_registers = epilogue && !epilogue->mask_out && !epilogue->mask_in && !epilogue->column_sums;
  const float* matrix_rows[16];
  FusedEpilogue fused{in_registers && epilogue->bias ? epilogue->bias + first_column + cb.first : nullptr,
                      in_registers && epilogue->relu, in_registers && epilogue->matrix ? matrix_rows : nullptr,
                      in_registers && epilogue->matrix_mul, in_registers && epilogue->clamp,
                      in_registers ? epilogue->lower : 0.0f, in_registers ? epilogue->upper : 0.0f};
  for (int64_t k0 = 0; k0 < l.k; k0 += kMultiplyKChunk) {
    const int64_t nk = std::min(kMultiplyKChunk, l.k - k0);
    const float* bk = b + k0 * l.b_stride + cb.first;
    const bool load = accumulate || k0 > 0;
    const bool last = k0 + nk == l.k;
    each_row_block(l, cb.first, c, block_rows(V), [&](int64_t offset, int count, float* const* out) {
      if (fused.matrix_rows && last) matrix_rows_of(*epilogue, c, l.c_stride, out, count, first_column + cb.first, matrix_rows);
      kBlocks[count - 1](a + offset, l.col_step, l.taps + k0, nk, bk, l.b_stride, cb.mask, out, load,
                         in_registers && last ? &fused : nullptr);
      if (epilogue && last && !in_registers)
        for (int r = 0; r < count; ++r) {
          if (!out[r]) continue;  // a row computed and dropped (see each_row_block)
          // out[r] is row p's column cb.first; the epilogue takes the row's column 0 of the
          // whole product, first_column to the left of c's.
          const int64_t p = (out[r] - c) / l.c_stride;
          epilogue_row(*epilogue, c + p * l.c_stride - first_column, p, first_column + cb.first,
                       first_column + cb.first + width);
        }
    });
  }
}

// ---- add_right_gradient ----

// Entries taps[0..R) of the sum (g_b's rows from g_b, b_stride apart) summed over output rows
// [oy0, oy1); `Full` as multiply_block's.
template <int R, int V, bool Full>
void gradient_block(const Layout& l, const float* a, const int64_t* taps, const float* g_c, const __mmask16* mask,
                    float* g_b, int64_t oy0, int64_t oy1) {
  __m512 acc[R][V];
  int64_t tap[R];
TG_UNROLL(16)
  for (int r = 0; r < R; ++r) {
    tap[r] = taps[r];
TG_UNROLL(4)
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_maskz_loadu_ps(mask[v], g_b + r * l.b_stride + v * kLanes);
  }
  for (int64_t oy = oy0; oy < oy1; ++oy) {
    const float* x = a + oy * l.row_step;
    const float* g = g_c + oy * l.out_w * l.c_stride;
    for (int64_t ox = 0; ox < l.out_w; ++ox, x += l.col_step, g += l.c_stride) {
      __m512 grad[V];
TG_UNROLL(4)
      for (int v = 0; v < V; ++v) grad[v] = Full ? _mm512_loadu_ps(g + v * kLanes) : _mm512_maskz_loadu_ps(mask[v], g + v * kLanes);
TG_UNROLL(16)
      for (int r = 0; r < R; ++r) {
        const __m512 xv = _mm512_set1_ps(x[tap[r]]);
TG_UNROLL(4)
        for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(xv, grad[v], acc[r][v]);
      }
    }
  }
TG_UNROLL(16)
  for (int r = 0; r < R; ++r)
TG_UNROLL(4)
    for (int v = 0; v < V; ++v) _mm512_mask_storeu_ps(g_b + r * l.b_stride + v * kLanes, mask[v], acc[r][v]);
}

using GradientBlockFn = void (*)(const Layout&, const float*, const int64_t*, const float*, const __mmask16*,
                                 float*, int64_t, int64_t);

// gradient_block for 1 .. block_rows(V) entries: the last block of the sum takes the one of its
// exact size, so that every entry is summed in one pass over the tile.
template <int V, bool Full, std::size_t... Entries>
constexpr std::array<GradientBlockFn, sizeof...(Entries)> gradient_blocks(std::index_sequence<Entries...>) {
  return {&gradient_block<static_cast<int>(Entries) + 1, V, Full>...};
}

template <int V>
void gradient_columns(const Layout& l, const ColumnBlock& cb, const float* a, const float* g_c, float* g_b) {
  static constexpr auto kMasked = gradient_blocks<V, false>(std::make_index_sequence<block_rows(V)>());
  static constexpr auto kFull = gradient_blocks<V, true>(std::make_index_sequence<block_rows(V)>());
  const auto& kBlocks = cb.mask[V - 1] == 0xFFFF ? kFull : kMasked;
  constexpr int64_t kEntries = block_rows(V);
  const int64_t row_bytes = l.out_w * cb.vectors * kLanes * static_cast<int64_t>(sizeof(float));
  const int64_t tile = std::max<int64_t>(1, kGradientTileBytes / std::max<int64_t>(1, row_bytes));
  g_c += cb.first;
  g_b += cb.first;
  for (int64_t oy0 = 0; oy0 < l.out_h; oy0 += tile) {
    const int64_t oy1 = std::min(l.out_h, oy0 + tile);
    for (int64_t k0 = 0; k0 < l.k; k0 += kEntries)
      kBlocks[std::min(kEntries, l.k - k0) - 1](l, a, l.taps + k0, g_c, cb.mask, g_b + k0 * l.b_stride, oy0, oy1);
  }
}

// dst[c * ld_dst + r] = src[r * ld_src + c] for a 16 x 16 tile: 32-bit then 64-bit interleaves
// within 128-bit lanes, then two rounds of 128-bit lane shuffles. (GCC 12's avx512fintrin.h
// gives the unpack intrinsics an undefined vector as their unused merge source, and its
// -Wuninitialized (-Wmaybe-uninitialized at -O1) then flags the header's own code once inlined
// here: a false positive.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__  // clang has no such group (and no such false positive)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
void transpose_tile(const float* src, int64_t ld_src, float* dst, int64_t ld_dst) {
  __m512 r[16], t[16];
TG_UNROLL(16)
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * ld_src);
TG_UNROLL(8)
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // Lane L of r[4g + m] now holds column 4L + m of rows 4g .. 4g + 3.
  auto lo = [](__m512 a, __m512 b) { return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b))); };
  auto hi = [](__m512 a, __m512 b) { return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b))); };
TG_UNROLL(4)
  for (int g = 0; g < 4; ++g) {
    r[4 * g] = lo(t[4 * g], t[4 * g + 2]);
    r[4 * g + 1] = hi(t[4 * g], t[4 * g + 2]);
    r[4 * g + 2] = lo(t[4 * g + 1], t[4 * g + 3]);
    r[4 * g + 3] = hi(t[4 * g + 1], t[4 * g + 3]);
  }
TG_UNROLL(4)
  for (int m = 0; m < 4; ++m) {
    const __m512 even_top = _mm512_shuffle_f32x4(r[m], r[4 + m], 0x88), odd_top = _mm512_shuffle_f32x4(r[m], r[4 + m], 0xDD);
    const __m512 even_low = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0x88),
                 odd_low = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0xDD);
    _mm512_storeu_ps(dst + m * ld_dst, _mm512_shuffle_f32x4(even_top, even_low, 0x88));
    _mm512_storeu_ps(dst + (4 + m) * ld_dst, _mm512_shuffle_f32x4(odd_top, odd_low, 0x88));
    _mm512_storeu_ps(dst + (8 + m) * ld_dst, _mm512_shuffle_f32x4(even_top, even_low, 0xDD));
    _mm512_storeu_ps(dst + (12 + m) * ld_dst, _mm512_shuffle_f32x4(odd_top, odd_low, 0xDD));
  }
}
#pragma GCC diagnostic pop

// multiply for products of many rows and columns whose right operand fits L2 (packed_product).
// Per pass over a chunk of entries, the right operand's rows are copied into one panel per
// column block (V * 16 floats a row, zero-padded, side by side), then each block of rows runs
// over every column block in turn: the block's left-operand rows stay in L1 across the column
// blocks, and the output is written once. With column blocks outside (multiply_columns), a
// 1024 x 512 output (2 MiB) pushed the left operand (512 KiB) out of L2 before the next column
// block read it again: the transformer's 1024 x 128 times 128 x 512 ran at 96-97 GFLOP/s in its
// step, 102-104 packed. Each output element is summed in the same order as multiply_columns
// sums it: the same bits.
void multiply_packed(const Layout& l, const float* a, const float* b, float* c, bool accumulate,
                     const GemmEpilogue* epilogue, int64_t first_column) {
  struct Panel {
    ColumnBlock cb;
    const MultiplyBlockFn* blocks = nullptr;
    int64_t offset = 0;  // of its rows in the packed chunk, per entry
    FusedEpilogue fused;
  };
  // A full column block's kernels read and write whole vectors; a partial one masks its lanes.
  static constexpr auto kFull4 = multiply_blocks<4, true>(std::make_index_sequence<block_rows(4)>());
  static constexpr auto kFull3 = multiply_blocks<3, true>(std::make_index_sequence<block_rows(3)>());
  static constexpr auto kFull2 = multiply_blocks<2, true>(std::make_index_sequence<block_rows(2)>());
  static constexpr auto kFull1 = multiply_blocks<1, true>(std::make_index_sequence<block_rows(1)>());
  static constexpr auto kMasked4 = multiply_blocks<4, false>(std::make_index_sequence<block_rows(4)>());
  static constexpr auto kMasked3 = multiply_blocks<3, false>(std::make_index_sequence<block_rows(3)>());
  static constexpr auto kMasked2 = multiply_blocks<2, false>(std::make_index_sequence<block_rows(2)>());
  static constexpr auto kMasked1 = multiply_blocks<1, false>(std::make_index_sequence<block_rows(1)>());
  const bool in_registers = epilogue && !epilogue->mask_out && !epilogue->mask_in && !epilogue->column_sums;
  const EpilogueRowFn epilogue_row = epilogue ? epilogue_row_fn(*epilogue) : nullptr;
  const bool matrix_in_registers = in_registers && epilogue->matrix;
  const float* matrix_rows[16];
  thread_local std::vector<Panel> panels;
  panels.clear();
  int64_t row_floats = 0;  // of the packed chunk, per entry
  for (int64_t first = 0; first < l.n; first += kLanes * kMaxVectors) {
    Panel p;
    p.cb = column_block(l.n, first);
    const int v = p.cb.vectors;
    if (p.cb.mask[v - 1] == 0xFFFF)
      p.blocks = v == 4 ? kFull4.data() : v == 3 ? kFull3.data() : v == 2 ? kFull2.data() : kFull1.data();
    else
      p.blocks = v == 4 ? kMasked4.data() : v == 3 ? kMasked3.data() : v == 2 ? kMasked2.data() : kMasked1.data();
    p.offset = row_floats;
    p.fused = {in_registers && epilogue->bias ? epilogue->bias + first_column + first : nullptr,
               in_registers && epilogue->relu, matrix_in_registers ? matrix_rows : nullptr,
               matrix_in_registers && epilogue->matrix_mul, in_registers && epilogue->clamp,
               in_registers ? epilogue->lower : 0.0f, in_registers ? epilogue->upper : 0.0f};
    row_floats += int64_t{v} * kLanes;
    panels.push_back(p);
  }
  // Every column block but the last has the most vectors, and the fewest rows: blocks of that
  // many rows fit every column block's kernels.
  const int rows = block_rows(panels.front().cb.vectors);
  const int64_t chunk = std::clamp<int64_t>(kPackBytes / (row_floats * static_cast<int64_t>(sizeof(float))), 16,
                                            kMultiplyKChunk);
  thread_local std::vector<float> packed;
  packed.resize(static_cast<std::size_t>(std::min(chunk, l.k) * row_floats));
  for (int64_t k0 = 0; k0 < l.k; k0 += chunk) {
    const int64_t nk = std::min(chunk, l.k - k0);
    for (const Panel& p : panels) {
      const int64_t width = int64_t{p.cb.vectors} * kLanes;
      float* dst = packed.data() + p.offset * nk;
      const float* src = b + k0 * l.b_stride + p.cb.first;
      for (int64_t k = 0; k < nk; ++k, dst += width, src += l.b_stride)
        for (int v = 0; v < p.cb.vectors; ++v)
          _mm512_storeu_ps(dst + v * kLanes, _mm512_maskz_loadu_ps(p.cb.mask[v], src + v * kLanes));
    }
    const bool load = accumulate || k0 > 0;
    const bool last = k0 + nk == l.k;
    each_row_block(l, 0, c, rows, [&](int64_t offset, int count, float* const* out) {
      float* block_out[16];
      for (const Panel& p : panels) {
        for (int r = 0; r < count; ++r) block_out[r] = out[r] ? out[r] + p.cb.first : nullptr;
        if (matrix_in_registers && last)
          matrix_rows_of(*epilogue, c, l.c_stride, block_out, count, first_column + p.cb.first, matrix_rows);
        const int64_t width = int64_t{p.cb.vectors} * kLanes;
        p.blocks[count - 1](a + offset, l.col_step, l.taps + k0, nk, packed.data() + p.offset * nk, width, p.cb.mask,
                            block_out, load, in_registers && last ? &p.fused : nullptr);
        if (epilogue && last && !in_registers)
          for (int r = 0; r < count; ++r) {
            if (!out[r]) continue;  // a row computed and dropped (see each_row_block)
            const int64_t row = (out[r] - c) / l.c_stride;
            epilogue_row(*epilogue, out[r] - first_column, row, first_column + p.cb.first,
                         first_column + p.cb.first + std::min<int64_t>(width, l.n - p.cb.first));
          }
      }
    });
  }
}

}  // namespace

void transpose(int64_t rows, int64_t cols, const float* src, int64_t ld_src, float* dst, int64_t ld_dst) {
  const int64_t full_rows = rows / 16 * 16, full_cols = cols / 16 * 16;
  for (int64_t r = 0; r < full_rows; r += 16)
    for (int64_t c = 0; c < full_cols; c += 16) transpose_tile(src + r * ld_src + c, ld_src, dst + c * ld_dst + r, ld_dst);
  // The edges: the last columns of every row, then the last rows.
  for (int64_t r = 0; r < full_rows; ++r)
    for (int64_t c = full_cols; c < cols; ++c) dst[c * ld_dst + r] = src[r * ld_src + c];
  for (int64_t r = full_rows; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * ld_dst + r] = src[r * ld_src + c];
}

bool available() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
}

EpilogueRow epilogue_row(const GemmEpilogue& e) { return epilogue_row_fn(e); }

void multiply(const Layout& l, const float* a, const float* b, float* c, bool accumulate,
              const GemmEpilogue* epilogue, int64_t first_column) {
  if (l.out_h * l.out_w >= kPackMinRows && l.n >= kPackMinColumns && l.k > 0 &&
      l.k * l.n * static_cast<int64_t>(sizeof(float)) <= kPackBytes) {
    multiply_packed(l, a, b, c, accumulate, epilogue, first_column);
    return;
  }
  each_column_block(l.n, [&]<int V>(const ColumnBlock& cb) {
    multiply_columns<V>(l, cb, a, b, c, accumulate, epilogue, first_column);
  });
}

void add_right_gradient(const Layout& l, const float* a, const float* g_c, float* g_b) {
  each_column_block(l.n, [&]<int V>(const ColumnBlock& cb) { gradient_columns<V>(l, cb, a, g_c, g_b); });
}

}  // namespace tg::detail::implicit_gemm
