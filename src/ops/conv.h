// The gradient ops of conv2d, max_pool2d and avg_pool2d (registry ops of their own, so that
// gradient rules built from them record into graphs and can be differentiated again). A
// parameter named *_like only lends its shape (and dtype): the op reads no element of it, so
// the rules work on traced tensors whose dims are None.
#pragma once
#include "ops/op_attrs.h"
#include "tracegraph/tensor.h"

namespace tg::detail {

/// TF's Conv2DBackpropInput: the gradient with respect to conv2d's input, shaped like
/// input_like, given the filter and the gradient of conv2d's output (a transposed convolution).
Tensor conv2d_backprop_input(const Tensor& input_like, const Tensor& filter, const Tensor& grad,
                             const Conv2DAttrs& attrs);
/// TF's Conv2DBackpropFilter: the gradient with respect to conv2d's filter, shaped like
/// filter_like, given conv2d's input and the gradient of its output.
Tensor conv2d_backprop_filter(const Tensor& input, const Tensor& filter_like, const Tensor& grad,
                              const Conv2DAttrs& attrs);
/// conv2d_transpose with groups (ONNX's ConvTranspose): the filter (kh, kw, out_channels /
/// groups, in_channels), groups = output_shape[3] / its dim 2. tg::conv2d_transpose is the
/// one-group case.
Tensor conv2d_transpose_grouped(const Tensor& input, const Tensor& filter, std::vector<int64_t> output_shape,
                                const Conv2DAttrs& attrs);
/// The gradient of max_pool2d(input) given the gradient of its output: each output element's
/// gradient added at its window's first maximum.
Tensor max_pool2d_grad(const Tensor& input, const Tensor& grad, const Pool2DAttrs& attrs);
/// max_pool2d_grad's gradient with respect to its grad input (TF's MaxPoolGradGrad): g, shaped
/// like input, read at each window's first maximum, shaped like max_pool2d(input).
Tensor max_pool2d_grad_grad(const Tensor& input, const Tensor& g, const Pool2DAttrs& attrs);
/// The gradient of avg_pool2d(input) given the gradient of its output, shaped like input_like.
Tensor avg_pool2d_grad(const Tensor& input_like, const Tensor& grad, const Pool2DAttrs& attrs);

}  // namespace tg::detail
