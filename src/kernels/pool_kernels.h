// The pooling kernels on raw NHWC buffers, given the geometry the op has checked. Images are
// spread over the thread pool, one image per task, so that the gradients, whose windows overlap
// within an image, never share an output element across threads.
#pragma once
#include <algorithm>
#include <cstdint>

#include "tracegraph/dtype.h"

namespace tg::detail {

struct ColumnSumLeaves;  // kernels/gemm_epilogue.h

/// A pooling's sizes, every one concrete and checked (pool.cpp's pool_geometry).
struct PoolGeom {
  int64_t n, h, w, c, kh, kw, sh, sw, oh, ow, pt, pl;
  // The window of output (oy, ox) clipped to the input: rows [y0, y1), cols [x0, x1).
  void window(int64_t oy, int64_t ox, int64_t& y0, int64_t& y1, int64_t& x0, int64_t& x1) const {
    y0 = oy * sh - pt;
    x0 = ox * sw - pl;
    y1 = std::min(y0 + kh, h);
    x1 = std::min(x0 + kw, w);
    y0 = std::max<int64_t>(y0, 0);
    x0 = std::max<int64_t>(x0, 0);
  }
};

/// Each window's maximum; ties keep the first (rows first), and a NaN wins, like argmax.
template <class T>
void max_pool_forward(const PoolGeom& g, const T* x, T* y);
/// dx of max_pool2d from dy: dy added at each window's first maximum (the element
/// max_pool_forward chose), zeroed where `mask` (when not null; dx's shape) is false; with `sums`
/// (float32 only) dx's rows are also added to those column sums.
template <class T>
void max_pool_backward(const PoolGeom& g, const T* x, const T* dy, const bool* mask, T* dx,
                       ColumnSumLeaves* sums = nullptr);
/// y (pooled shape) = src (x's shape) read at each window's first maximum of x: max_pool2d_grad's
/// gradient with respect to its dy.
template <class T>
void max_pool_gather(const PoolGeom& g, const T* x, const T* src, T* y);
/// bfloat16 max_pool_forward and max_pool_backward: the float32 kernels' bits on
/// the widened values, each result rounded to bfloat16 (the per-op rule; exact, since a maximum is
/// one of the values and a gradient element is 0 + one dy where windows do not overlap). Windows
/// that tile the input run on bfloat16 directly on AVX-512 (pool_grad_avx512.h); other geometries
/// and CPUs widen the tensors, run the float32 kernel and round. With `sums`, dx's rows (its
/// rounded values, widened) are added to those column sums as the float32 kernel adds its own.
/// positive_mask (mask null): the mask is x > 0.
void max_pool_forward_bf16(const PoolGeom& g, const bfloat16_t* x, bfloat16_t* y);
void max_pool_backward_bf16(const PoolGeom& g, const bfloat16_t* x, const bfloat16_t* dy, const bool* mask,
                            bfloat16_t* dx, ColumnSumLeaves* sums = nullptr, bool positive_mask = false);
/// A training conv layer's pool taken into its epilogue (conv2d_epilogue with pool_winners):
/// windows that tile the input (no padding, strides = window) of at most 16 elements.
bool pool_winners_fit(const PoolGeom& g);
/// For images [n0, n1) on the calling thread: y as max_pool_forward_bf16 gives it, and per pooled
/// element its winner - the window position (rows first) of the first maximum, by `replaces`,
/// where that maximum is > 0, else 255. Needs pool_winners_fit(g).
void max_pool_winners_bf16(const PoolGeom& g, const bfloat16_t* x, bfloat16_t* y, uint8_t* winners, int64_t n0,
                           int64_t n1);
/// dx from those winners: 0 + dy at each window's winner (a byte >= the window's size routes
/// nowhere), +0 elsewhere - max_pool_backward_bf16's bits with positive_mask, x unread. With
/// `sums`, dx's rows are added to them. Needs pool_winners_fit(g).
void max_pool_backward_winners_bf16(const PoolGeom& g, const uint8_t* winners, const bfloat16_t* dy, bfloat16_t* dx,
                                    ColumnSumLeaves* sums = nullptr);
/// The mean of each window's elements inside the input (TF's SAME average), and its adjoint.
template <class T>
void avg_pool_forward(const PoolGeom& g, const T* x, T* y);
template <class T>
void avg_pool_backward(const PoolGeom& g, const T* dy, T* dx);

}  // namespace tg::detail
