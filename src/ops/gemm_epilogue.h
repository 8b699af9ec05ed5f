// What a float32 product's output gets before anyone reads it (gemm.h's gemm and the AVX-512
// kernels apply it), and the loops that apply it. The loops are compiled by each file that
// includes this header, for that file's ISA: gemm.cpp's baseline and implicit_gemm_avx512.cpp's
// AVX-512 (an unnamed namespace keeps the two copies apart, as the linker would otherwise pick
// one for both).
#pragma once
#include <cstdint>

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
};

namespace {

// The epilogue on columns [c0, c1) of output row `row`; `out` is the row's first element.
inline void apply_epilogue(const GemmEpilogue& e, float* out, int64_t row, int64_t c0, int64_t c1) {
  if (e.bias)
    for (int64_t j = c0; j < c1; ++j) out[j] = AddF{}(out[j], e.bias[j]);
  if (e.mask_out) {
    bool* m = e.mask_out + row * e.mask_ld;
    for (int64_t j = c0; j < c1; ++j) m[j] = GreaterF{}(out[j], 0.0f);
  }
  if (e.relu)
    for (int64_t j = c0; j < c1; ++j) out[j] = ReluF{}(out[j]);
  if (e.mask_in) {
    // Both operands read unconditionally and the mask as bytes, as kernel_where does, so that
    // the loop blends instead of branching on each (unpredictable) mask value.
    const auto* m = reinterpret_cast<const unsigned char*>(e.mask_in + row * e.mask_ld);
    for (int64_t j = c0; j < c1; ++j) {
      const float x = out[j];
      out[j] = WhereF{}(m[j] != 0, x, 0.0f);
    }
  }
}

}  // namespace

}  // namespace tg::detail
