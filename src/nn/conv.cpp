// Keras's Conv2D, DepthwiseConv2D and Conv2DTranspose layers over the conv2d, depthwise_conv2d
// and conv2d_transpose ops: the layers add Variables, argument checks that name the layer, the
// bias and the activation; the ops do the arithmetic and the gradients. Each layer follows its
// dtype policy as Dense does: under mixed_bfloat16 float32 Variables, cast with the input to
// bfloat16 at each call.
#include <algorithm>
#include <optional>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "tracegraph/nn.h"
#include "tracegraph/ops.h"

namespace tg::nn {

using detail::op_error;

namespace {

// One entry (both dims) or two, all positive: the layer's spelling of a (height, width) pair.
std::vector<int64_t> checked_pair(const char* kind, const std::string& layer, const char* what, std::vector<int64_t> v,
                                  int64_t least = 1) {
  bool ok = v.size() == 1 || v.size() == 2;
  for (int64_t x : v) ok = ok && x >= least;
  if (!ok) {
    std::string got;
    for (int64_t x : v) got += (got.empty() ? "" : ", ") + std::to_string(x);
    op_error<InvalidArgumentError>(kind, "layer '", layer, "': ", what, " must be one or two ",
                                   least > 0 ? "positive" : "non-negative", " integers (height, width), got {", got, "}");
  }
  if (v.size() == 1) v.push_back(v[0]);
  return v;
}
std::vector<int64_t> checked_pair(const std::string& layer, const char* what, std::vector<int64_t> v) {
  return checked_pair("Conv2D", layer, what, std::move(v));
}

// Runs before the Variables are built, so that a bad argument is reported as such.
Tensor conv_kernel(int64_t in, int64_t filters, const std::vector<int64_t>& kernel_size, const Conv2DOptions& o) {
  if (in <= 0 || filters <= 0)
    op_error<InvalidArgumentError>("Conv2D", "layer '", o.name, "' needs in_channels > 0 and filters > 0, got ",
                                   "in_channels=", in, " filters=", filters);
  if (o.groups < 1 || in % o.groups != 0 || filters % o.groups != 0)
    op_error<InvalidArgumentError>("Conv2D", "layer '", o.name, "' has groups=", o.groups, ", which must be >= 1 and ",
                                   "divide both in_channels=", in, " and filters=", filters, " (as Keras requires)");
  const std::vector<int64_t> k = checked_pair(o.name, "kernel_size", kernel_size);
  checked_pair(o.name, "strides", o.strides);
  checked_pair(o.name, "dilations", o.dilations);
  return glorot_uniform({k[0], k[1], in / o.groups, filters}, o.seed, o.dtype.variable_dtype());
}

Tensor depthwise_kernel(int64_t in, const std::vector<int64_t>& kernel_size, const DepthwiseConv2DOptions& o) {
  if (in <= 0 || o.depth_multiplier <= 0)
    op_error<InvalidArgumentError>("DepthwiseConv2D", "layer '", o.name, "' needs in_channels > 0 and ",
                                   "depth_multiplier > 0, got in_channels=", in, " depth_multiplier=", o.depth_multiplier);
  const std::vector<int64_t> k = checked_pair("DepthwiseConv2D", o.name, "kernel_size", kernel_size);
  checked_pair("DepthwiseConv2D", o.name, "strides", o.strides);
  checked_pair("DepthwiseConv2D", o.name, "dilations", o.dilations);
  return glorot_uniform({k[0], k[1], in, o.depth_multiplier}, o.seed, o.dtype.variable_dtype());
}

Tensor transpose_kernel(int64_t in, int64_t filters, const std::vector<int64_t>& kernel_size,
                        const Conv2DTransposeOptions& o) {
  const char* kind = "Conv2DTranspose";
  if (in <= 0 || filters <= 0)
    op_error<InvalidArgumentError>(kind, "layer '", o.name, "' needs in_channels > 0 and filters > 0, got ",
                                   "in_channels=", in, " filters=", filters);
  const std::vector<int64_t> k = checked_pair(kind, o.name, "kernel_size", kernel_size);
  const std::vector<int64_t> s = checked_pair(kind, o.name, "strides", o.strides);
  checked_pair(kind, o.name, "dilations", o.dilations);
  if (!o.output_padding.empty()) {
    const std::vector<int64_t> p = checked_pair(kind, o.name, "output_padding", o.output_padding, 0);
    for (int i = 0; i < 2; ++i)
      if (p[i] >= s[i])
        op_error<InvalidArgumentError>(kind, "layer '", o.name, "': output_padding ", p[i], " must be less than its ",
                                       "stride ", s[i], " (as Keras requires)");
  }
  return glorot_uniform({k[0], k[1], filters, in}, o.seed, o.dtype.variable_dtype());
}

// The checks every layer makes of its input: defined, NHWC with its channels, of the layer's
// compute dtype. Under a mixed policy a floating input is cast to it first (Keras's autocast);
// otherwise another dtype is an error, as everywhere in tracegraph. Returns the input to compute on.
Tensor checked_input(const char* kind, const std::string& name, const Tensor& input, const DTypePolicy& policy,
                     int64_t in) {
  if (!input.defined()) op_error<ValueError>(kind, "layer '", name, "' got an empty tg::Tensor");
  const DType compute = policy.compute_dtype();
  const bool mixed = compute != policy.variable_dtype();
  const Tensor x = mixed && is_floating(input.dtype()) && input.dtype() != compute ? cast(input, compute) : input;
  if (x.dtype() != compute)
    op_error<InvalidArgumentError>(kind, "layer '", name, "' has dtype ", to_string(compute), " but the input has dtype ",
                                   to_string(x.dtype()), "; tg::cast the input first");
  const TensorShape s = detail::static_shape(x);
  if (s.has_rank() && (s.rank() != 4 || (s.dims()[3] != None && s.dims()[3] != in)))
    op_error<InvalidArgumentError>(kind, "layer '", name, "' expects inputs of shape (batch, height, width, ", in,
                                   "), got ", s.to_string(), "; images are NHWC: reshape a flat batch to (batch, ",
                                   "height, width, channels)");
  return x;
}

// A Variable's value in the policy's compute dtype (cast under a mixed policy: its gradient
// comes back in the Variable's dtype).
Tensor compute_value(const Variable& v, const DTypePolicy& policy) {
  const Tensor value = v.read_value();
  return value.dtype() == policy.compute_dtype() ? value : cast(value, policy.compute_dtype());
}

// Keras's deconv_output_length for one spatial dim.
int64_t transposed_length(int64_t in, int64_t k, int64_t stride, int64_t dilation, Padding padding,
                          std::optional<int64_t> output_padding) {
  const int64_t window = (k - 1) * dilation + 1;
  if (!output_padding) return padding == Padding::Same ? in * stride : in * stride + std::max<int64_t>(window - stride, 0);
  const int64_t pad = padding == Padding::Same ? window / 2 : 0;
  return (in - 1) * stride + window - 2 * pad + *output_padding;
}

}  // namespace

Conv2D::Conv2D(int64_t in_channels, int64_t filters, std::vector<int64_t> kernel_size, Conv2DOptions options)
    : in_(in_channels),
      filters_(filters),
      options_(std::move(options)),
      kernel_(conv_kernel(in_channels, filters, kernel_size, options_), options_.name + "/kernel") {
  if (options_.use_bias) bias_.emplace(zeros({filters}, options_.dtype.variable_dtype()), options_.name + "/bias");
}

Tensor Conv2D::operator()(const Tensor& x) const {
  const Tensor xc = checked_input("Conv2D", options_.name, x, options_.dtype, in_);
  Tensor y = conv2d(xc, compute_value(kernel_, options_.dtype), options_.strides, options_.padding, options_.dilations);
  if (bias_) y = y + compute_value(*bias_, options_.dtype);
  return options_.activation ? options_.activation(y) : y;
}

const Variable& Conv2D::bias() const {
  if (!bias_) op_error<ValueError>("Conv2D", "layer '", options_.name, "' was built with use_bias = false: it has no bias");
  return *bias_;
}

std::vector<Variable> Conv2D::trainable_variables() const {
  if (bias_) return {kernel_, *bias_};
  return {kernel_};
}

// ---- DepthwiseConv2D ----

DepthwiseConv2D::DepthwiseConv2D(int64_t in_channels, std::vector<int64_t> kernel_size, DepthwiseConv2DOptions options)
    : in_(in_channels),
      options_(std::move(options)),
      kernel_(depthwise_kernel(in_channels, kernel_size, options_), options_.name + "/depthwise_kernel") {
  if (options_.use_bias) bias_.emplace(zeros({in_ * options_.depth_multiplier}, options_.dtype.variable_dtype()), options_.name + "/bias");
}

Tensor DepthwiseConv2D::operator()(const Tensor& x) const {
  const Tensor xc = checked_input("DepthwiseConv2D", options_.name, x, options_.dtype, in_);
  Tensor y = depthwise_conv2d(xc, compute_value(kernel_, options_.dtype), options_.strides, options_.padding,
                              options_.dilations);
  if (bias_) y = y + compute_value(*bias_, options_.dtype);
  return options_.activation ? options_.activation(y) : y;
}

const Variable& DepthwiseConv2D::bias() const {
  if (!bias_)
    op_error<ValueError>("DepthwiseConv2D", "layer '", options_.name, "' was built with use_bias = false: it has no bias");
  return *bias_;
}

std::vector<Variable> DepthwiseConv2D::trainable_variables() const {
  if (bias_) return {kernel_, *bias_};
  return {kernel_};
}

// ---- Conv2DTranspose ----

Conv2DTranspose::Conv2DTranspose(int64_t in_channels, int64_t filters, std::vector<int64_t> kernel_size,
                                 Conv2DTransposeOptions options)
    : in_(in_channels),
      filters_(filters),
      options_(std::move(options)),
      kernel_(transpose_kernel(in_channels, filters, kernel_size, options_), options_.name + "/kernel") {
  kernel_size_ = checked_pair("Conv2DTranspose", options_.name, "kernel_size", kernel_size);
  if (options_.use_bias) bias_.emplace(zeros({filters}, options_.dtype.variable_dtype()), options_.name + "/bias");
}

Tensor Conv2DTranspose::operator()(const Tensor& x) const {
  const char* kind = "Conv2DTranspose";
  const Tensor xc = checked_input(kind, options_.name, x, options_.dtype, in_);
  const TensorShape s = detail::static_shape(xc);
  if (!s.has_rank() || s.dims()[1] == None || s.dims()[2] == None)
    op_error<InvalidArgumentError>(kind, "layer '", options_.name, "' needs the input's height and width while ",
                                   "tracing to size its output, got ", s.to_string(),
                                   "; trace with static spatial dims (the batch may be None)");
  const std::vector<int64_t> st = checked_pair(kind, options_.name, "strides", options_.strides);
  const std::vector<int64_t> dl = checked_pair(kind, options_.name, "dilations", options_.dilations);
  std::vector<int64_t> out{s.dims()[0], 0, 0, filters_};
  for (int i = 0; i < 2; ++i) {
    std::optional<int64_t> op;
    if (!options_.output_padding.empty())
      op = options_.output_padding[options_.output_padding.size() == 1 ? 0 : static_cast<std::size_t>(i)];
    out[static_cast<std::size_t>(i) + 1] = transposed_length(s.dims()[static_cast<std::size_t>(i) + 1],
                                                             kernel_size_[static_cast<std::size_t>(i)], st[i], dl[i],
                                                             options_.padding, op);
  }
  Tensor y = conv2d_transpose(xc, compute_value(kernel_, options_.dtype), out, st, options_.padding, dl);
  if (bias_) y = y + compute_value(*bias_, options_.dtype);
  return options_.activation ? options_.activation(y) : y;
}

const Variable& Conv2DTranspose::bias() const {
  if (!bias_)
    op_error<ValueError>("Conv2DTranspose", "layer '", options_.name, "' was built with use_bias = false: it has no bias");
  return *bias_;
}

std::vector<Variable> Conv2DTranspose::trainable_variables() const {
  if (bias_) return {kernel_, *bias_};
  return {kernel_};
}

}  // namespace tg::nn
