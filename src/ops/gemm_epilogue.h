// What a float32 product's output gets before anyone reads it (gemm.h's gemm and the AVX-512
// kernels apply it), and the loops that apply it. The loops are compiled by each file that
// includes this header, for that file's ISA: gemm.cpp's baseline and implicit_gemm_avx512.cpp's
// AVX-512 (an unnamed namespace keeps the two copies apart, as the linker would otherwise pick
// one for both).
#pragma once
#include <array>
#include <cstdint>
#include <utility>

#include "ops/elementwise_functors.h"

namespace tg::detail {

/// What a float32 product's output gets before anyone reads it, in this order (each part
/// optional): out = out + bias[column]; mask_out = out > 0; out = relu(out); out = mask_in ?
/// out : 0. The bias + relu of a dense layer with the mask its gradient reads, or that
/// gradient. Each row block gets it on the thread that computed the block, while the block is
/// in that core's cache. The ops are the elementwise kernels' own (elementwise_functors.h), so
/// the bits are those of the product and the ops apart. Masks are row-major, n per row.
struct GemmEpilogue {
  const float* bias = nullptr;
  bool* mask_out = nullptr;
  bool relu = false;
  const bool* mask_in = nullptr;
  int64_t mask_ld = 0;  // elements between two rows of the masks

  /// The same epilogue for the rows from `first` on, as rows 0, 1, ...: for a block of rows
  /// computed as a product of its own (the masks advance; the bias is per column).
  GemmEpilogue from_row(int64_t first) const {
    GemmEpilogue e = *this;
    if (e.mask_out) e.mask_out += first * mask_ld;
    if (e.mask_in) e.mask_in += first * mask_ld;
    return e;
  }
};

namespace {

// The epilogue's parts for one row, in one pass over the row (each part a compile-time choice,
// so that the loop has no branch): columns [c0, c1) of row `row`, `out` the row's first element.
template <bool kBias, bool kMaskOut, bool kRelu, bool kMaskIn>
void apply_epilogue_as(const GemmEpilogue& e, float* __restrict out, int64_t row, int64_t c0, int64_t c1) {
  // No array here overlaps another (restrict: no run-time overlap checks per row, which cost as
  // much as a convolution's 32-channel row).
  const float* __restrict bias = e.bias;
  bool* __restrict mask_out = kMaskOut ? e.mask_out + row * e.mask_ld : nullptr;
  // The mask read as bytes, as kernel_where does, so that the loop blends instead of branching.
  const auto* __restrict mask_in = kMaskIn ? reinterpret_cast<const unsigned char*>(e.mask_in + row * e.mask_ld) : nullptr;
  for (int64_t j = c0; j < c1; ++j) {
    float x = out[j];
    if constexpr (kBias) x = AddF{}(x, bias[j]);
    if constexpr (kMaskOut) mask_out[j] = GreaterF{}(x, 0.0f);
    if constexpr (kRelu) x = ReluF{}(x);
    if constexpr (kMaskIn) x = WhereF{}(mask_in[j] != 0, x, 0.0f);
    out[j] = x;
  }
}

using EpilogueRowFn = void (*)(const GemmEpilogue&, float*, int64_t, int64_t, int64_t);

template <std::size_t... I>
constexpr std::array<EpilogueRowFn, 16> epilogue_row_fns(std::index_sequence<I...>) {
  return {&apply_epilogue_as<(I & 1) != 0, (I & 2) != 0, (I & 4) != 0, (I & 8) != 0>...};
}

// The row function for e's parts: taken once per block of rows, called per row.
inline EpilogueRowFn epilogue_row_fn(const GemmEpilogue& e) {
  static constexpr std::array<EpilogueRowFn, 16> kFns = epilogue_row_fns(std::make_index_sequence<16>());
  return kFns[(e.bias ? 1 : 0) | (e.mask_out ? 2 : 0) | (e.relu ? 4 : 0) | (e.mask_in ? 8 : 0)];
}

}  // namespace

}  // namespace tg::detail
