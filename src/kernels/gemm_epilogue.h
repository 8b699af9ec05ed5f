// What a float32 product's output gets before anyone reads it (gemm.h's gemm and the AVX-512
// kernels apply it), and the loops that apply it. The loops are compiled by each file that
// includes this header, for that file's ISA: gemm.cpp's baseline and implicit_gemm_avx512.cpp's
// AVX-512 (an unnamed namespace keeps the two copies apart, as the linker would otherwise pick
// one for both).
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <utility>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "core/check.h"
#include "kernels/column_sums.h"
#include "kernels/elementwise_functors.h"
#include "kernels/implicit_gemm.h"

namespace tg::detail {

/// Column sums of a product's result (rows x ld), kept per leaf of reduce_sum's pairwise order
/// over rows (reduce_semantics.h's pairwise_over_rows; column_sums.h is its leaf). The thread that
/// finishes all rows of a leaf adds them in double, row after row, as reduce_sum's leaf does, so
/// that the leaves added up in that order give reduce_sum's bits (epilogue_steps.h's
/// EpilogueColumnSums makes these and adds the leaves up).
struct ColumnSumLeaves {
  const int32_t* leaf_of_row = nullptr;     // per row of the product
  const int64_t* leaf_first_row = nullptr;  // per leaf, and one past its last row
  const int64_t* leaf_end_row = nullptr;
  double* sums = nullptr;                   // leaves x ld
  int64_t ld = 0;
  std::atomic<bool>* summed = nullptr;      // per leaf: set by the thread that sums it
};

/// What a float32 product's output gets before anyone reads it, in this order (each part
/// optional): out = out + bias[column]; mask_out = out > 0; out = relu(out); out =
/// minimum(maximum(out, lower), upper); out = mask_in ? out : 0; out = out + matrix or out *
/// matrix. The bias + relu of a dense layer with the mask
/// its gradient reads, or that gradient; a residual add, or a gradient times an activation's
/// derivative. Each row block gets it on the thread that computed the block, while the block is
/// in that core's cache. The ops are the elementwise kernels' own (elementwise_functors.h), so
/// the bits are those of the product and the ops apart. Masks are row-major, n per row.
struct GemmEpilogue {
  const float* bias = nullptr;
  bool* mask_out = nullptr;
  bool relu = false;
  /// ONNX's Clip (relu6 among them): maximum with `lower`, then minimum with `upper`, as
  /// maximum and minimum compute them (a NaN becomes their quiet NaN).
  bool clamp = false;
  float lower = 0.0f, upper = 0.0f;
  const bool* mask_in = nullptr;
  const float* matrix = nullptr;  // the result's shape, added (or multiplied, matrix_mul) last
  bool matrix_mul = false;
  int64_t mask_ld = 0;  // elements between two rows of the masks and of the matrix
  /// The column sums of the result (a dense layer's bias gradient), by leaves of reduce_sum's
  /// order over rows; null: none. gemm() adds them, once each thread has finished its rows or
  /// columns; implicit_gemm::multiply applies the elementwise parts only.
  ColumnSumLeaves* column_sums = nullptr;
  /// The rows the thread running this epilogue finishes, all of them: a leaf of column sums is
  /// summed here only when its rows are all among them (where rows are split across threads,
  /// a leaf that straddles two threads is summed after the product).
  int64_t rows_begin = 0, rows_end = std::numeric_limits<int64_t>::max();

  /// The same epilogue for the rows from `first` on, as rows 0, 1, ...: for a block of rows
  /// computed as a product of its own (the masks advance; the bias is per column). Column sums
  /// are numbered by the product's rows, so they cannot be moved.
  GemmEpilogue from_row(int64_t first) const {
    TG_CHECK(!column_sums, "column sums in an epilogue moved by rows");
    GemmEpilogue e = *this;
    if (e.mask_out) e.mask_out += first * mask_ld;
    if (e.mask_in) e.mask_in += first * mask_ld;
    if (e.matrix) e.matrix += first * mask_ld;
    return e;
  }
  /// The same epilogue run by a thread that finishes rows [r0, r1).
  GemmEpilogue owning(int64_t r0, int64_t r1) const {
    GemmEpilogue e = *this;
    e.rows_begin = r0, e.rows_end = r1;
    return e;
  }
};

namespace {

// Rows [row, row + count) of the result (row r at base + r * ld), columns [c0, c1), added to
// their leaves' column sums (GemmEpilogue::column_sums) where the calling thread finishes the
// whole leaf. The rows come in order, a leaf's first row first. T: float, or bfloat16_t (a
// bfloat16 max pool gradient's channel sums, each value widened exactly).
template <class T>
inline void add_rows_to_column_sums(const GemmEpilogue& e, const T* base, int64_t ld, int64_t row, int64_t count,
                                    int64_t c0, int64_t c1) {
  const ColumnSumLeaves& s = *e.column_sums;
  for (int64_t r = row, end = row + count; r < end;) {
    const int32_t leaf = s.leaf_of_row[r];
    const int64_t first = s.leaf_first_row[leaf], last = s.leaf_end_row[leaf];
    const int64_t stop = last < end ? last : end;
    if (first >= e.rows_begin && last <= e.rows_end) {
      if (r == first) s.summed[leaf].store(true, std::memory_order_relaxed);  // read after the threads join
      add_column_sums(base + r * ld + c0, stop - r, ld, c1 - c0, r == first, s.sums + leaf * s.ld + c0);
    }
    r = stop;
  }
}

// The epilogue's parts for one row, in one pass over the row (each part a compile-time choice,
// so that the loop has no branch): columns [c0, c1) of row `row`, `out` the row's first element.
// kMatrix: 0 none, 1 add, 2 multiply.
template <bool kBias, bool kMaskOut, bool kRelu, bool kClamp, bool kMaskIn, int kMatrix>
void apply_epilogue_as(const GemmEpilogue& e, float* __restrict out, int64_t row, int64_t c0, int64_t c1) {
  // No array here overlaps another (restrict: no run-time overlap checks per row, which cost as
  // much as a convolution's 32-channel row).
  const float* __restrict bias = e.bias;
  bool* __restrict mask_out = kMaskOut ? e.mask_out + row * e.mask_ld : nullptr;
  // The mask read as bytes, as kernel_where does, so that the loop blends instead of branching.
  const auto* __restrict mask_in = kMaskIn ? reinterpret_cast<const unsigned char*>(e.mask_in + row * e.mask_ld) : nullptr;
  const float* __restrict matrix = kMatrix != 0 ? e.matrix + row * e.mask_ld : nullptr;
  for (int64_t j = c0; j < c1; ++j) {
    float x = out[j];
    if constexpr (kBias) x = AddF{}(x, bias[j]);
    if constexpr (kMaskOut) mask_out[j] = GreaterF{}(x, 0.0f);
    if constexpr (kRelu) x = ReluF{}(x);
    if constexpr (kClamp) x = MinimumF{}(MaximumF{}(x, e.lower), e.upper);
    if constexpr (kMaskIn) x = WhereF{}(mask_in[j] != 0, x, 0.0f);
    // x is a finished float32 value (a store or a call away from any product): no contraction.
    if constexpr (kMatrix == 1) x = AddF{}(x, matrix[j]);
    if constexpr (kMatrix == 2) x = MulF{}(x, matrix[j]);
    out[j] = x;
  }
}

#if defined(__AVX512F__)
// The clamp on 16 values in registers, with MaximumF(x, lower) then MinimumF(it, upper)'s bits
// for bounds that are not NaN: vmaxps(lower, x) is lower only where lower > x, vminps(upper, it)
// upper only where upper < it (x kept on ties, -0 too); a NaN x passes both and becomes their
// quiet NaN. (The zero-masked forms: gcc 12's plain ones read an undefined register.)
inline __m512 clamp_in_registers(__m512 x, __m512 lower, __m512 upper) {
  const __m512 y = _mm512_maskz_min_ps(0xFFFF, upper, _mm512_maskz_max_ps(0xFFFF, lower, x));
  return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), _mm512_set1_ps(kQuietNaN<float>));
}

// The bias, relu and clamp of e (no other part) on `pixels` rows of c values at y, in registers:
// apply_epilogue_as's bits (AddF, ReluF as vmaxps(0, x), clamp_in_registers).
inline void bias_relu_clamp_in_registers(const GemmEpilogue& e, float* y, int64_t pixels, int64_t c) {
  const __m512 zero = _mm512_setzero_ps(), lower = _mm512_set1_ps(e.lower), upper = _mm512_set1_ps(e.upper);
  for (int64_t p = 0; p < pixels; ++p, y += c)
    for (int64_t j = 0; j < c; j += 16) {
      const __mmask16 lanes = c - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (c - j)) - 1);
      __m512 x = _mm512_maskz_loadu_ps(lanes, y + j);
      if (e.bias) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(lanes, e.bias + j));
      if (e.relu) x = _mm512_maskz_max_ps(0xFFFF, zero, x);
      if (e.clamp) x = clamp_in_registers(x, lower, upper);
      _mm512_mask_storeu_ps(y + j, lanes, x);
    }
}
#endif

using EpilogueRowFn = void (*)(const GemmEpilogue&, float*, int64_t, int64_t, int64_t);

template <std::size_t... I>
constexpr std::array<EpilogueRowFn, 96> epilogue_row_fns(std::index_sequence<I...>) {
  return {&apply_epilogue_as<(I & 1) != 0, (I & 2) != 0, (I & 4) != 0, (I & 8) != 0, (I & 16) != 0,
                             static_cast<int>(I >> 5)>...};
}

// The row function for e's elementwise parts: taken once per block of rows, called per row (the
// column sums are added per block, add_rows_to_column_sums).
inline EpilogueRowFn epilogue_row_fn(const GemmEpilogue& e) {
  static constexpr std::array<EpilogueRowFn, 96> kFns = epilogue_row_fns(std::make_index_sequence<96>());
  const int matrix = e.matrix ? (e.matrix_mul ? 2 : 1) : 0;
  return kFns[(e.bias ? 1 : 0) | (e.mask_out ? 2 : 0) | (e.relu ? 4 : 0) | (e.clamp ? 8 : 0) | (e.mask_in ? 16 : 0) |
              matrix << 5];
}

#if !defined(__AVX512F__)
// epilogue_row_fn in the widest ISA this CPU runs: implicit_gemm's AVX-512 copy where it runs
// (the baseline's NaN-careful clamp and relu blends, four lanes wide, were 3% of imported
// resnet18 at batch 32 behind oneDNN's convolutions), else this file's.
inline EpilogueRowFn widest_epilogue_row_fn(const GemmEpilogue& e) {
  static const bool avx512 = implicit_gemm::available();
  return avx512 ? implicit_gemm::epilogue_row(e) : epilogue_row_fn(e);
}
#endif

}  // namespace

}  // namespace tg::detail
