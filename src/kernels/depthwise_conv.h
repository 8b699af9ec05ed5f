// Depthwise convolution (TF's depthwise_conv2d: conv2d with as many groups as input channels)
// on raw NHWC buffers, given the geometry conv.cpp has checked: ConvGeom with oc = c * multiplier
// and the filter (kh, kw, c, multiplier), whose output channel c * multiplier + m reads input
// channel c - the same buffer as the grouped HWIO filter (kh, kw, 1, oc).
//
// Each output element is a short sum over the window, so the kernels walk the pixels and run
// vectorised along the channels (AVX-512 where own_avx512_kernels() says so). The forward and the
// input gradient split the output (input) rows over the thread pool, each element computed by one
// thread; the filter gradient sums partials over blocks of rows fixed by the shapes, added in
// block order, so the bits never depend on timing or the thread count.
#pragma once
#include "kernels/conv_kernels.h"

namespace tg::detail {

/// y = depthwise_conv2d(x, f); with an epilogue (float32 only; no column sums), each row of
/// pixels gets it right after its sums, on the thread that computed them.
template <class T>
void depthwise_forward(const ConvGeom& g, const T* x, const T* f, T* y, const GemmEpilogue* epilogue = nullptr);
/// dx, the gradient with respect to the input, from the filter and dy.
template <class T>
void depthwise_backprop_input(const ConvGeom& g, const T* f, const T* dy, T* dx);
/// df, the gradient with respect to the filter, from the input and dy.
template <class T>
void depthwise_backprop_filter(const ConvGeom& g, const T* x, const T* dy, T* df);

namespace depthwise_avx512 {  // the same, built for AVX-512 (depthwise_conv_avx512.cpp)
template <class T> void forward(const ConvGeom& g, const T* x, const T* f, T* y, const GemmEpilogue* epilogue);
template <class T> void backprop_input(const ConvGeom& g, const T* f, const T* dy, T* dx);
template <class T> void backprop_filter(const ConvGeom& g, const T* x, const T* dy, T* df);
}  // namespace depthwise_avx512

}  // namespace tg::detail
