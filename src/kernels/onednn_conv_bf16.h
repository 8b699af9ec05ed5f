// bfloat16 convolutions through oneDNN's AVX512_BF16 (or AMX) kernels, on tracegraph's NHWC
// input and HWIO filter as they are stored. The bfloat16 conv2d ops (ops/conv.cpp) come here
// first and fall back to the float32 kernels on widened operands where these return false.
//
// Arithmetic: every product of two bfloat16 values is exact in float32 and the sums accumulate
// in float32; the forward and the input gradient are rounded to bfloat16 by oneDNN (to nearest,
// ties to even), the filter gradient's float32 sums by f32_to_bf16 (kernels/bf16.h). As with
// bf16_gemm's vdpbf16ps, subnormal inputs count as zero and subnormal results become zero.
//
// Threads, as onednn_conv.h: one OpenMP thread per oneDNN call, the convolution cut into parts
// fixed by the shapes alone (groups of images; a single image is one part), the parts spread
// over tracegraph's pool; the filter gradient adds the parts' float32 partials in part order
// before rounding, so the bits never depend on the thread count. Primitives are cached per
// geometry.
#pragma once

#include <cstdint>
#include <functional>

#include "tracegraph/dtype.h"

namespace tg::detail {
struct ConvGeom;  // kernels/conv_kernels.h
}  // namespace tg::detail

namespace tg::detail::onednn_bf16 {

/// Whether the calls below may run at all: the CPU has AVX512_BF16 and the switch below is on.
bool available();

/// Turns these kernels on or off (on where the CPU has AVX512_BF16); returns the previous
/// setting. Tests compare the native path with the float32 one.
bool set_enabled(bool enabled);

/// Each returns false, having written nothing, where oneDNN has no native bfloat16 kernel for
/// the geometry (or available() is false).
/// Called by conv_forward after each part, images [n0, n0 + n) of y, is written, on the thread
/// that wrote it, while the part is in that core's cache (a convolution layer's epilogue).
using PartFinish = std::function<void(int64_t n0, int64_t n)>;
/// y = conv2d(x, f); then finish(part) for each part when given.
bool conv_forward(const ConvGeom& g, const bfloat16_t* x, const bfloat16_t* f, bfloat16_t* y,
                  const PartFinish& finish = {});
/// dx from the filter and dy.
bool conv_backprop_input(const ConvGeom& g, const bfloat16_t* f, const bfloat16_t* dy, bfloat16_t* dx);
/// df from the input and dy.
bool conv_backprop_filter(const ConvGeom& g, const bfloat16_t* x, const bfloat16_t* dy, bfloat16_t* df);

}  // namespace tg::detail::onednn_bf16
