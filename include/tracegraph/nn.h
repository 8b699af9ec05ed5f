// Small building blocks for neural networks: an initializer, a Dense layer, a classifier's loss
// and accuracy. Enough to write an MLP; not a framework.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tracegraph/ops.h"
#include "tracegraph/tensor.h"
#include "tracegraph/variable.h"

namespace tg::nn {

// Initial values (Keras's initializers). Each is a pure function of (shape, seed, dtype), as a
// seeded Keras initializer is: the same seed gives the same values on every call (the stateless
// random ops with seed (seed, 0)). Fans follow Keras: for a (in, out) kernel fan_in = in and
// fan_out = out; for rank > 2 the leading dims are the receptive field; a vector uses its length
// for both and a scalar 1. Each throws tg::InvalidArgumentError for a shape that is not fully
// defined and tg::TypeError for a non-floating dtype.

/// Glorot (Xavier) uniform: uniform in [-limit, limit) with limit = sqrt(6 / (fan_in + fan_out)).
Tensor glorot_uniform(const TensorShape& shape, uint64_t seed, DType dtype = float32);
/// Glorot normal: a truncated normal (2 stddev) whose stddev after truncation is
/// sqrt(2 / (fan_in + fan_out)) (Keras's VarianceScaling(1, "fan_avg", "truncated_normal")).
Tensor glorot_normal(const TensorShape& shape, uint64_t seed, DType dtype = float32);
/// He normal: a truncated normal whose stddev after truncation is sqrt(2 / fan_in), for ReLU
/// layers (VarianceScaling(2, "fan_in", "truncated_normal")).
Tensor he_normal(const TensorShape& shape, uint64_t seed, DType dtype = float32);
/// mean + stddev * a normal truncated at 2 stddev (Keras's TruncatedNormal; stddev is the
/// parameter before truncation, as there).
Tensor truncated_normal(const TensorShape& shape, uint64_t seed, double mean = 0.0, double stddev = 0.05,
                        DType dtype = float32);
/// Zeros and ones (Keras's Zeros and Ones) are tg::zeros and tg::ones.
using tg::ones;
using tg::zeros;

/// Keras's Dropout layer: tg::dropout with a fixed rate (validated here, InvalidArgumentError
/// unless 0 <= rate < 1) and op seed. Each call draws a new mask; `training` false, or a bool
/// scalar tensor that is false at run time, passes x through.
///
///   tg::nn::Dropout drop(0.5);
///   tg::Tensor h = drop(x, /*training=*/true);
class Dropout {
 public:
  explicit Dropout(double rate, std::optional<uint64_t> seed = std::nullopt);
  Tensor operator()(const Tensor& x, bool training) const;
  Tensor operator()(const Tensor& x, const Tensor& training) const;
  double rate() const { return rate_; }

 private:
  double rate_;
  std::optional<uint64_t> seed_;
};

/// y = activation(x @ kernel + bias), with kernel (in, out) Glorot-uniform and bias zeros(out).
///
/// Its Variables are created by the constructor. Inside a tg::function construct a layer only
/// on the first trace (keep it in an std::optional and create it when empty), or better, outside
/// the function. Copies share the Variables.
///
///   tg::nn::Dense hidden(784, 256, tg::relu, /*seed=*/1);
///   tg::Tensor h = hidden(x);   // x: (batch, 784) -> (batch, 256)
class Dense {
 public:
  using Activation = std::function<Tensor(const Tensor&)>;

  /// Throws tg::InvalidArgumentError unless in > 0 and out > 0.
  Dense(int64_t in, int64_t out, Activation activation = nullptr, uint64_t seed = 0,
        DType dtype = float32, std::string name = "dense");

  /// x must have rank 2 with x.shape[1] == in (or None while tracing) and the layer's dtype;
  /// else tg::InvalidArgumentError.
  Tensor operator()(const Tensor& x) const;

  Variable& kernel() { return kernel_; }
  Variable& bias() { return bias_; }
  const Variable& kernel() const { return kernel_; }
  const Variable& bias() const { return bias_; }
  /// {kernel, bias}.
  std::vector<Variable> trainable_variables() const { return {kernel_, bias_}; }
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

 private:
  int64_t in_, out_;
  Activation activation_;
  std::string name_;
  Variable kernel_;
  Variable bias_;
};

/// Mean over the batch of -log softmax(logits)[label]: logits (batch, classes) float32/float64,
/// labels (batch,) int32/int64 class indices. Built from log_softmax, one_hot and reduce_mean,
/// so it differentiates with respect to the logits. Eager labels outside [0, classes) throw
/// tg::InvalidArgumentError (inside a trace they cannot be checked; they contribute 0).
Tensor sparse_softmax_cross_entropy(const Tensor& logits, const Tensor& labels);

/// Fraction of rows whose argmax equals the label, as a float32 scalar.
Tensor accuracy(const Tensor& logits, const Tensor& labels);

// --- Convolution layers ----------------------------------------------------------------------

/// The options of a Conv2D layer (Keras's Conv2D arguments, NHWC).
struct Conv2DOptions {
  std::vector<int64_t> strides{1, 1};    // one entry (both dims) or two (height, width)
  Padding padding = Padding::Valid;      // Keras's default, "valid"
  std::vector<int64_t> dilations{1, 1};  // one or two entries; > 1 only with stride 1, as TF
  std::function<Tensor(const Tensor&)> activation = nullptr;
  bool use_bias = true;
  uint64_t seed = 0;                     // the Glorot-uniform kernel's seed
  DType dtype = float32;
  std::string name = "conv2d";
};

/// y = activation(conv2d(x, kernel) + bias), Keras's Conv2D: input (batch, height, width,
/// in_channels), kernel (kh, kw, in_channels, filters) Glorot-uniform (fans include the
/// receptive field), bias zeros(filters).
///
/// Like Dense, its Variables are created by the constructor (so in_channels is given); copies
/// share them.
///
///   tg::nn::Conv2D conv(1, 32, {3, 3}, {.padding = tg::Padding::Same, .activation = tg::relu});
///   tg::Tensor h = conv(images);   // (batch, 28, 28, 1) -> (batch, 28, 28, 32)
class Conv2D {
 public:
  /// kernel_size has one entry (square) or two; throws tg::InvalidArgumentError unless
  /// in_channels, filters, the kernel size, strides and dilations are positive and have one or
  /// two entries, and tg::TypeError for a dtype that is not float32 or float64.
  Conv2D(int64_t in_channels, int64_t filters, std::vector<int64_t> kernel_size, Conv2DOptions options = {});

  /// x must have rank 4 with x.shape[3] == in_channels (or None while tracing) and the layer's
  /// dtype; else tg::InvalidArgumentError. Height and width may be None.
  Tensor operator()(const Tensor& x) const;

  Variable& kernel() { return kernel_; }
  const Variable& kernel() const { return kernel_; }
  /// The bias Variable; tg::ValueError when the layer was built with use_bias = false.
  const Variable& bias() const;
  /// {kernel, bias}, or {kernel} without a bias.
  std::vector<Variable> trainable_variables() const;
  int64_t in_channels() const { return in_; }
  int64_t filters() const { return filters_; }
  const Conv2DOptions& options() const { return options_; }

 private:
  int64_t in_, filters_;
  Conv2DOptions options_;
  Variable kernel_;
  std::optional<Variable> bias_;
};

}  // namespace tg::nn
