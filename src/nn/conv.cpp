// Keras's Conv2D layer over the conv2d op: the layer adds Variables, argument checks that name
// the layer, the bias and the activation; the op does the arithmetic and the gradients.
#include "core/check.h"
#include "core/tensor_impl.h"
#include "tracegraph/nn.h"
#include "tracegraph/ops.h"

namespace tg::nn {

using detail::op_error;

namespace {

// One entry (both dims) or two, all positive: the layer's spelling of a (height, width) pair.
std::vector<int64_t> checked_pair(const std::string& layer, const char* what, std::vector<int64_t> v) {
  bool ok = v.size() == 1 || v.size() == 2;
  for (int64_t x : v) ok = ok && x > 0;
  if (!ok) {
    std::string got;
    for (int64_t x : v) got += (got.empty() ? "" : ", ") + std::to_string(x);
    op_error<InvalidArgumentError>("Conv2D", "layer '", layer, "': ", what,
                                   " must be one or two positive integers (height, width), got {", got, "}");
  }
  if (v.size() == 1) v.push_back(v[0]);
  return v;
}

// Runs before the Variables are built, so that a bad argument is reported as such.
Tensor conv_kernel(int64_t in, int64_t filters, const std::vector<int64_t>& kernel_size, const Conv2DOptions& o) {
  if (in <= 0 || filters <= 0)
    op_error<InvalidArgumentError>("Conv2D", "layer '", o.name, "' needs in_channels > 0 and filters > 0, got ",
                                   "in_channels=", in, " filters=", filters);
  if (o.dtype != float32 && o.dtype != float64)
    op_error<TypeError>("Conv2D", "layer '", o.name, "' computes in float32 or float64, got ", to_string(o.dtype));
  const std::vector<int64_t> k = checked_pair(o.name, "kernel_size", kernel_size);
  checked_pair(o.name, "strides", o.strides);
  checked_pair(o.name, "dilations", o.dilations);
  return glorot_uniform({k[0], k[1], in, filters}, o.seed, o.dtype);
}

}  // namespace

Conv2D::Conv2D(int64_t in_channels, int64_t filters, std::vector<int64_t> kernel_size, Conv2DOptions options)
    : in_(in_channels),
      filters_(filters),
      options_(std::move(options)),
      kernel_(conv_kernel(in_channels, filters, kernel_size, options_), options_.name + "/kernel") {
  if (options_.use_bias) bias_.emplace(zeros({filters}, options_.dtype), options_.name + "/bias");
}

Tensor Conv2D::operator()(const Tensor& x) const {
  const std::string& name = options_.name;
  if (!x.defined()) op_error<ValueError>("Conv2D", "layer '", name, "' got an empty tg::Tensor");
  if (x.dtype() != kernel_.dtype())
    op_error<InvalidArgumentError>("Conv2D", "layer '", name, "' has dtype ", to_string(kernel_.dtype()),
                                   " but the input has dtype ", to_string(x.dtype()), "; tg::cast the input first");
  const TensorShape s = detail::static_shape(x);
  if (s.has_rank() && (s.rank() != 4 || (s.dims()[3] != None && s.dims()[3] != in_)))
    op_error<InvalidArgumentError>("Conv2D", "layer '", name, "' expects inputs of shape (batch, height, width, ",
                                   in_, "), got ", s.to_string(), "; images are NHWC: reshape a flat batch to (batch, ",
                                   "height, width, channels)");
  Tensor y = conv2d(x, kernel_.read_value(), options_.strides, options_.padding, options_.dilations);
  if (bias_) y = y + bias_->read_value();
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

}  // namespace tg::nn
