// The float32 max pooling and its gradient over windows that tile the input, for AVX-512
// (pool_grad_avx512.cpp). The gradient: pool_kernels.cpp's general kernel zeroes dx and then adds dy at each window's
// first maximum one channel at a time, a scatter the compiler leaves scalar; here each window is
// read once, 16 channels to a vector, and every element of dx is written once.
#pragma once
#include <cstdint>

#include "tracegraph/dtype.h"

namespace tg::detail::pool_avx512 {

/// One image's pooling, NHWC: windows of kh x kw with strides kh and kw, no padding, oh x ow of
/// them inside the h x w input (rows and columns past them get no window).
struct TiledPool {
  int64_t h = 0, w = 0, c = 0, kh = 0, kw = 0, oh = 0, ow = 0;
};

/// y (oh x ow x c) of max pooling for one image (on CPUs with simd::cpu_has_avx512_bw_vl()): each
/// window's first maximum in pool_kernels.cpp's `replaces` order, the general kernel's bits.
/// Windows of at most 16 elements. gcc 12's vectorisation of the C++ loop over a run-time
/// channel count ran the CNN's 256 x 28 x 28 x 32 pool in ~2x the time of this one.
void tiled_max_pool(const TiledPool& p, const float* x, float* y);

/// dx (h x w x c) of max pooling for one image (on CPUs with simd::cpu_has_avx512_bw_vl()): at each window's first maximum (pool_kernels.cpp's
/// `replaces` order, rows first; NaN beats every number but not an earlier NaN) 0 + dy, where
/// mask (dx's shape; null: everywhere) is true; +0 everywhere else. The general kernel's bits,
/// -0 and NaN included. Windows of at most 16 elements.
void tiled_max_pool_grad(const TiledPool& p, const float* x, const float* dy, const bool* mask, float* dx);

/// The same two on bfloat16 tensors, with the bits of the float32 kernels above on the widened
/// values rounded back (the per-op rule): each element of x is widened in a register and the
/// float32 selection runs on it; the pool's result goes back to its upper 16 bits - exact, since
/// every value there is a bfloat16 value - with a NaN's quiet bit set as the rounding does; the
/// gradient stores dy's bits as they are but for 0 + dy's two changes (-0 to +0, a NaN made quiet).
void tiled_max_pool_bf16(const TiledPool& p, const bfloat16_t* x, bfloat16_t* y);
/// positive_mask: the mask is x > 0 (relu's gradient read off relu's result): true at a window's
/// maximum where that maximum is > 0, so no mask is read (mask must then be null).
void tiled_max_pool_grad_bf16(const TiledPool& p, const bfloat16_t* x, const bfloat16_t* dy, const bool* mask,
                              bfloat16_t* dx, bool positive_mask = false);

/// The bfloat16 pool of one image and, per pooled element, its winner: the window position
/// (rows first) of the first maximum tiled_max_pool_grad_bf16 selects, where that maximum is
/// > 0, else 255 (what the gradient of a pool of relu's result routes nowhere). y has
/// tiled_max_pool_bf16's bits.
void tiled_max_pool_winners_bf16(const TiledPool& p, const bfloat16_t* x, bfloat16_t* y, uint8_t* winners);
/// dx (h x w x c) of one image from those winners: 0 + dy at each window's winner, +0 elsewhere
/// - the bits of tiled_max_pool_grad_bf16 with positive_mask, without reading x.
void tiled_max_pool_grad_winners_bf16(const TiledPool& p, const uint8_t* winners, const bfloat16_t* dy,
                                      bfloat16_t* dx);

}  // namespace tg::detail::pool_avx512
