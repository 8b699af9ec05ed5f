// Small building blocks for neural networks: initializers, activations by name, Dense and the
// other Keras layers, attention and a transformer encoder block, losses and accuracy. Not a
// framework.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <type_traits>
#include <optional>
#include <string>
#include <utility>
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

/// An activation, given by Keras's name or as a function object (keras.activations.get).
/// Names: "linear" (or "" / nullptr: none), "relu", "relu6", "elu", "selu", "gelu" (the erf form,
/// Keras's default; "gelu_approximate" for the tanh one), "sigmoid", "hard_sigmoid" (relu6(x + 3)
/// / 6, Keras 3's), "tanh", "softmax" and "log_softmax" (over the last axis), "softplus",
/// "softsign", "silu" (also "swish"), "exponential", "leaky_relu" (alpha 0.2). An unknown name
/// throws tg::ValueError listing the known ones. Function objects: any callable taking a
/// const Tensor& (tg::relu, a lambda, std::function); a function whose second parameter is a bool
/// option (tg::gelu) is called with false, and one whose second parameter is an int axis
/// (tg::softmax, tg::log_softmax) with -1 - their defaults.
///
///   tg::nn::Dense ffn(64, 256, "gelu");
///   tg::nn::Dense out(256, 64, tg::gelu);
class Activation {
 public:
  Activation() = default;
  Activation(std::nullptr_t) {}  // NOLINT: no activation
  Activation(const char* name);  // NOLINT: Keras's names
  Activation(const std::string& name);  // NOLINT
  Activation(Tensor (*fn)(const Tensor&, bool));  // NOLINT: tg::gelu
  Activation(Tensor (*fn)(const Tensor&, int));   // NOLINT: tg::softmax, tg::log_softmax
  template <class F>
    requires(std::is_invocable_r_v<Tensor, const std::decay_t<F>&, const Tensor&> &&
             !std::is_convertible_v<F, std::string> && !std::is_same_v<std::decay_t<F>, Activation> &&
             !std::is_same_v<std::decay_t<F>, std::nullptr_t>)
  Activation(F&& fn)  // NOLINT: any callable on a tensor
      : fn_(std::forward<F>(fn)), name_("custom") {}

  /// activation(x); x itself when there is none.
  Tensor operator()(const Tensor& x) const { return fn_ ? fn_(x) : x; }
  /// Whether there is an activation ("linear" counts as none).
  explicit operator bool() const { return static_cast<bool>(fn_); }
  /// The Keras name it was made from, "linear" for none, "custom" for a function object.
  const std::string& name() const { return name_; }
  /// The names that construct an activation.
  static std::vector<std::string> names();

 private:
  std::function<Tensor(const Tensor&)> fn_;
  std::string name_ = "linear";
};

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

/// A layer's two dtypes, as Keras's tf.keras.mixed_precision.Policy: the dtype of its Variables
/// and the dtype it computes in. "float32", "float64" and "bfloat16" make both the same;
/// "mixed_bfloat16" keeps the Variables (and the optimizer's updates of them) in float32 and
/// computes in bfloat16: at each call the layer casts floating inputs and its Variables to
/// bfloat16, and its output is bfloat16. The gradient of a cast Variable comes back in float32.
/// nn::sparse_softmax_cross_entropy computes in float32 whatever its logits' dtype, as Keras's
/// mixed precision guide asks of a model's last step.
///
///   tg::nn::set_global_policy("mixed_bfloat16");     // layers built from now on
///   tg::nn::Dense hidden(784, 256, tg::relu, 1);       // float32 Variables, bfloat16 compute
///   tg::nn::Dense head(256, 10, nullptr, 2, "float32");  // one layer's own policy
class DTypePolicy {
 public:
  /// "float32", "float64", "bfloat16" or "mixed_bfloat16"; else tg::ValueError.
  DTypePolicy(const std::string& name);
  DTypePolicy(const char* name) : DTypePolicy(std::string(name)) {}
  /// The policy named by a floating dtype (float32 -> "float32"); tg::TypeError for others.
  DTypePolicy(DType dtype);

  const std::string& name() const { return name_; }
  DType variable_dtype() const { return variable_; }
  DType compute_dtype() const { return compute_; }
  bool operator==(const DTypePolicy& other) const { return name_ == other.name_; }

 private:
  std::string name_;
  DType variable_, compute_;
};
/// The policy of layers built without one from now on (Keras's set_global_policy); "float32"
/// until set. Process-wide: set it before building the model, not while layers are built.
void set_global_policy(const DTypePolicy& policy);
DTypePolicy global_policy();

/// y = activation(x @ kernel + bias), with kernel (in, out) Glorot-uniform and bias zeros(out):
/// Keras's Dense, which contracts the last axis of an input of any rank >= 2 (a (batch, T, in)
/// input gives (batch, T, out)). The activation is a name or a function object (nn::Activation).
///
/// Its Variables are created by the constructor. Inside a tg::function construct a layer only
/// on the first trace (keep it in an std::optional and create it when empty), or better, outside
/// the function. Copies share the Variables.
///
///   tg::nn::Dense hidden(784, 256, tg::relu, /*seed=*/1);
///   tg::Tensor h = hidden(x);   // x: (batch, 784) -> (batch, 256)
///   tg::nn::Dense ffn(64, 256, "gelu");   // (batch, T, 64) -> (batch, T, 256)
class Dense {
 public:
  using Activation = nn::Activation;

  /// Throws tg::InvalidArgumentError unless in > 0 and out > 0. `dtype` is a DType or a
  /// DTypePolicy (by default the global policy when the layer is built).
  Dense(int64_t in, int64_t out, Activation activation = nullptr, uint64_t seed = 0,
        DTypePolicy dtype = global_policy(), std::string name = "dense");

  /// x must have rank >= 2 with a last dim of in (or None while tracing, checked when the graph
  /// runs) and the layer's compute dtype (under a mixed policy, any floating dtype, cast to it);
  /// else tg::InvalidArgumentError. The result has x's leading dims and a last dim of out.
  Tensor operator()(const Tensor& x) const;

  const DTypePolicy& dtype_policy() const { return policy_; }

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
  DTypePolicy policy_;
  Variable kernel_;
  Variable bias_;
};

// ---- Embedding, normalisation and recurrent layers; regression and logit losses ----------------
// Keras's definitions (keras.layers.Embedding, LayerNormalization, BatchNormalization, GRUCell,
// LSTMCell; keras.losses). Like Dense, each layer creates its Variables in its constructor:
// build layers outside a tg::function (or on its first trace only). Copies share the Variables.

/// Orthogonal initializer (Keras's Orthogonal): a (rows, cols) matrix, rows = product of all
/// but the last dim, with orthonormal columns (rows >= cols) or rows, times `gain`. Drawn on the
/// host from (seed) and returned as a constant, so it is the same eagerly and inside a trace.
/// tg::InvalidArgumentError for rank < 2 or a shape that is not fully defined.
Tensor orthogonal(const TensorShape& shape, uint64_t seed, double gain = 1.0, DType dtype = float32);

/// keras.layers.Embedding: a (vocab, dim) table, initialised uniform in [-0.05, 0.05);
/// `layer(ids)` gathers rows: ids of any shape, int32/int64, give ids.shape + (dim,). An eager
/// id outside [0, vocab) throws tg::InvalidArgumentError naming it (inside a trace the gather
/// kernel checks the ids when the graph runs, with the same error type).
class Embedding {
 public:
  /// tg::InvalidArgumentError unless vocab > 0 and dim > 0.
  Embedding(int64_t vocab, int64_t dim, uint64_t seed = 0, DType dtype = float32,
            std::string name = "embedding");
  Tensor operator()(const Tensor& ids) const;
  Variable& embeddings() { return embeddings_; }
  const Variable& embeddings() const { return embeddings_; }
  std::vector<Variable> trainable_variables() const { return {embeddings_}; }

 private:
  int64_t vocab_;
  std::string name_;
  Variable embeddings_;
};

/// keras.layers.LayerNormalization over the last axis (of size `features`):
///   y = (x - mean) / sqrt(variance + epsilon) * gamma + beta
/// with the mean and (biased) variance of each row along the last axis; gamma ones, beta zeros.
class LayerNorm {
 public:
  /// tg::InvalidArgumentError unless features > 0 and epsilon >= 0 is finite.
  explicit LayerNorm(int64_t features, double epsilon = 1e-3, DType dtype = float32,
                     std::string name = "layer_norm");
  /// x: rank >= 1, last dim `features` (or None while tracing), the layer's dtype.
  Tensor operator()(const Tensor& x) const;
  Variable& gamma() { return gamma_; }
  Variable& beta() { return beta_; }
  const Variable& gamma() const { return gamma_; }
  const Variable& beta() const { return beta_; }
  double epsilon() const { return epsilon_; }
  /// {gamma, beta}.
  std::vector<Variable> trainable_variables() const { return {gamma_, beta_}; }

 private:
  int64_t features_;
  double epsilon_;
  std::string name_;
  Variable gamma_, beta_;
};

/// keras.layers.BatchNormalization over the last axis (of size `features`).
/// - training: normalises with the batch's mean and (biased) variance over every other axis,
///   and updates the moving statistics, as ordered assigns (inside a tg::function they run at
///   every call):  moving = moving * momentum + batch_statistic * (1 - momentum).
///   Gradients flow through the batch statistics.
/// - inference: normalises with moving_mean and moving_variance (nothing is updated).
///   y = (x - mean) / sqrt(variance + epsilon) * gamma + beta.
/// `training` is a C++ bool or a bool scalar tensor. A symbolic flag selects at run time: both
/// normalisations are computed and tg::where picks one, and the assigns write the old values
/// back when not training (nn may not use tg::cond; the result is the same).
class BatchNorm {
 public:
  /// tg::InvalidArgumentError unless features > 0, momentum in [0, 1] and epsilon >= 0.
  explicit BatchNorm(int64_t features, double momentum = 0.99, double epsilon = 1e-3,
                     DType dtype = float32, std::string name = "batch_norm");
  /// x: rank >= 2 (batch, ..., features) of the layer's dtype.
  Tensor operator()(const Tensor& x, bool training) const;
  /// `training`: a bool scalar tensor (tg::TypeError otherwise).
  Tensor operator()(const Tensor& x, const Tensor& training) const;
  Variable& gamma() { return gamma_; }
  Variable& beta() { return beta_; }
  Variable& moving_mean() { return moving_mean_; }
  Variable& moving_variance() { return moving_variance_; }
  const Variable& gamma() const { return gamma_; }
  const Variable& beta() const { return beta_; }
  const Variable& moving_mean() const { return moving_mean_; }
  const Variable& moving_variance() const { return moving_variance_; }
  /// {gamma, beta}; the moving statistics are not trainable.
  std::vector<Variable> trainable_variables() const { return {gamma_, beta_}; }
  /// {moving_mean, moving_variance}.
  std::vector<Variable> non_trainable_variables() const { return {moving_mean_, moving_variance_}; }

 private:
  void check_input(const Tensor& x) const;
  Tensor normalize(const Tensor& x, const Tensor& mean, const Tensor& variance) const;
  Tensor train_step(const Tensor& x) const;  // batch statistics + moving updates

  int64_t features_;
  double momentum_, epsilon_;
  std::string name_;
  Variable gamma_, beta_, moving_mean_, moving_variance_;
};

/// The weights of a recurrent cell as read values. Inside a tg::while_loop / tg::for_range body
/// that the tape differentiates, read them once before the loop (`cell.read_weights()`) and
/// pass them to the cell: a Variable read inside a loop body cannot carry a gradient out of it.
struct RecurrentWeights {
  Tensor kernel;            // (input_dim, gates * units)
  Tensor recurrent_kernel;  // (units, gates * units)
  Tensor bias;              // GRU: (2, 3 * units) (input bias, recurrent bias); LSTM: (4 * units,)
};

/// What GRUCell and LSTMCell share (as PyTorch's RNNCellBase): their Variables - kernel
/// (input_dim, gates * units) Glorot-uniform, recurrent_kernel (units, gates * units) orthogonal,
/// and a bias whose layout is the cell's - and their reads.
class RecurrentCell {
 public:
  RecurrentWeights read_weights() const;
  /// {kernel, recurrent_kernel, bias}.
  std::vector<Variable> trainable_variables() const { return {kernel_, recurrent_kernel_, bias_}; }
  int64_t units() const { return units_; }

 protected:
  /// tg::InvalidArgumentError unless input_dim > 0 and units > 0, tg::TypeError unless dtype is
  /// float32 or float64 (the errors start with "[<cell>]"); the recurrent kernel's seed is seed + 1.
  RecurrentCell(const char* cell, int64_t input_dim, int64_t units, int64_t gates, uint64_t seed, DType dtype,
                std::string name, Tensor (*initial_bias)(int64_t units, DType dtype));

  int64_t input_dim_, units_;
  std::string name_;
  Variable kernel_, recurrent_kernel_, bias_;
};

/// keras.layers.GRUCell with Keras's defaults (tanh, sigmoid, reset_after=True), gates in
/// Keras's order z (update), r (reset), h (candidate) along the last axis of the kernels:
///   x_z, x_r, x_h = x @ kernel + bias[0];   h_z, h_r, h_h = h @ recurrent_kernel + bias[1]
///   z = sigmoid(x_z + h_z);  r = sigmoid(x_r + h_r);  hh = tanh(x_h + r * h_h)
///   h' = z * h + (1 - z) * hh
/// kernel Glorot-uniform, recurrent kernel orthogonal, bias zeros.
class GRUCell : public RecurrentCell {
 public:
  GRUCell(int64_t input_dim, int64_t units, uint64_t seed = 0, DType dtype = float32,
          std::string name = "gru_cell");
  /// One step: x (batch, input_dim), h (batch, units) -> the new h (batch, units).
  Tensor operator()(const Tensor& x, const Tensor& h) const;
  Tensor operator()(const Tensor& x, const Tensor& h, const RecurrentWeights& weights) const;
};

/// keras.layers.LSTMCell with Keras's defaults (tanh, sigmoid, unit_forget_bias), gates in
/// Keras's order i (input), f (forget), c (cell candidate), o (output):
///   z = x @ kernel + h @ recurrent_kernel + bias;  i, f, g, o = split(z, 4)
///   c' = sigmoid(f) * c + sigmoid(i) * tanh(g);  h' = sigmoid(o) * tanh(c')
/// kernel Glorot-uniform, recurrent kernel orthogonal, bias zeros but ones for the forget gate.
class LSTMCell : public RecurrentCell {
 public:
  LSTMCell(int64_t input_dim, int64_t units, uint64_t seed = 0, DType dtype = float32,
           std::string name = "lstm_cell");
  /// One step: x (batch, input_dim), h and c (batch, units) -> {h', c'}.
  std::pair<Tensor, Tensor> operator()(const Tensor& x, const Tensor& h, const Tensor& c) const;
  std::pair<Tensor, Tensor> operator()(const Tensor& x, const Tensor& h, const Tensor& c,
                                       const RecurrentWeights& weights) const;
};

/// The options of the LSTM and GRU layers (Keras's RNN arguments).
struct RecurrentOptions {
  bool return_sequences = false;  // the output of every step, (batch, time, units); else the last, (batch, units)
  bool return_state = false;      // the final states after the output
  bool go_backwards = false;      // run from the last step to the first; a returned sequence is reversed too
  uint64_t seed = 0;              // the cell's seed
  DType dtype = float32;
  std::string name{};             // empty: "lstm" / "gru"
};

/// What one call of an LSTM or GRU layer takes besides the inputs.
struct RecurrentCall {
  /// Empty, or bool (batch, time): false skips the step for that row - its states stay and its
  /// output repeats the previous step's (zeros before its first unmasked step), as Keras does.
  Tensor mask{};
  /// Empty (zeros), or the states to start from: LSTM {h, c}, GRU {h}, each (batch, units).
  std::vector<Tensor> initial_state{};
};

/// keras.layers.LSTM and keras.layers.GRU (batch-first, Keras's defaults): the cell (LSTMCell,
/// GRUCell with reset_after) applied along the time axis of x (batch, time, input_dim). The time
/// loop is a tg::for_range: eagerly a C++ loop, traced one while node whose body is one step, so
/// a None time dim traces once and the graph does not grow with the sequence length. The weights
/// are read once per call, before the loop, so gradients reach them in traced functions too.
///
/// A call returns {output} ((batch, units), or (batch, time, units) with return_sequences) and,
/// with return_state, the final states after it: LSTM {output, h, c}, GRU {output, h}. Errors
/// (tg::InvalidArgumentError unless said otherwise): x not (batch, time, input_dim) of the
/// layer's dtype; a time dim of 0 known while tracing or eagerly (a None one that is 0 when the
/// graph runs gives the initial states, and as the last output h without a mask, zeros with
/// one); a mask not bool (tg::TypeError) or not (batch, time); initial states not (batch,
/// units) or of the wrong count (tg::ValueError). Variables are made by the constructor, as
/// Dense's; copies share them.
///
///   tg::nn::LSTM lstm(64, 128, {.return_sequences = true});
///   tg::Tensor seq = lstm(x)[0];   // (batch, time, 64) -> (batch, time, 128)
class LSTM {
 public:
  /// tg::InvalidArgumentError unless input_dim > 0 and units > 0; tg::TypeError unless dtype is
  /// float32 or float64.
  LSTM(int64_t input_dim, int64_t units, RecurrentOptions options = {});
  std::vector<Tensor> operator()(const Tensor& x, const RecurrentCall& call = {}) const;

  const LSTMCell& cell() const { return cell_; }
  /// The cell's {kernel, recurrent_kernel, bias}.
  std::vector<Variable> trainable_variables() const { return cell_.trainable_variables(); }
  int64_t units() const { return cell_.units(); }
  const RecurrentOptions& options() const { return options_; }

 private:
  RecurrentOptions options_;
  int64_t input_dim_;
  LSTMCell cell_;
};

/// keras.layers.GRU: see LSTM; the cell is a GRUCell (reset_after, Keras's default).
class GRU {
 public:
  GRU(int64_t input_dim, int64_t units, RecurrentOptions options = {});
  std::vector<Tensor> operator()(const Tensor& x, const RecurrentCall& call = {}) const;

  const GRUCell& cell() const { return cell_; }
  std::vector<Variable> trainable_variables() const { return cell_.trainable_variables(); }
  int64_t units() const { return cell_.units(); }
  const RecurrentOptions& options() const { return options_; }

 private:
  RecurrentOptions options_;
  int64_t input_dim_;
  GRUCell cell_;
};

// Losses, in Keras's argument order (targets first, then predictions or logits) and with its
// default reduction: the per-example losses (the last axis averaged, or summed over the classes
// for softmax) averaged over the batch, a scalar. Both arguments must be float32/float64 of one
// dtype (tg::TypeError) and the same shape (tg::InvalidArgumentError; no broadcasting).

/// mean((y_pred - y_true)^2).
Tensor mean_squared_error(const Tensor& y_true, const Tensor& y_pred);
/// TF's sigmoid_cross_entropy_with_logits, averaged: max(x, 0) - x * z + log(1 + exp(-|x|)) for
/// logits x and labels z in [0, 1]; exact for logits of any size (no exp overflow).
Tensor binary_crossentropy_with_logits(const Tensor& labels, const Tensor& logits);
/// TF's softmax_cross_entropy_with_logits (dense labels, a distribution over the last axis),
/// averaged over the other axes: mean(-sum(labels * log_softmax(logits), -1)).
Tensor softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits);
/// Huber: 0.5 * e^2 where |e| <= delta, else delta * |e| - 0.5 * delta^2 (e = y_pred - y_true),
/// averaged. tg::ValueError unless delta > 0 is finite.
Tensor huber(const Tensor& y_true, const Tensor& y_pred, double delta = 1.0);
// ---- end of the embedding / normalisation / recurrent layers and their losses -----------------


/// Mean over the batch of -log softmax(logits)[label]: logits (batch, classes) float32/float64,
/// labels (batch,) int32/int64 class indices. One op per row loss and one for its gradient
/// (TF's fused form), to any order with respect to the logits. A label outside [0, classes)
/// throws tg::InvalidArgumentError when the op runs, eagerly or in a traced function.
Tensor sparse_softmax_cross_entropy(const Tensor& logits, const Tensor& labels);

/// Fraction of rows whose argmax equals the label, as a float32 scalar: logits (batch, classes),
/// labels (batch,) or (batch, 1) int32/int64 (squeezed, as Keras's sparse categorical accuracy
/// does). Labels of any other shape throw tg::InvalidArgumentError - when the traced function
/// runs if None dims hide the mismatch while tracing.
Tensor accuracy(const Tensor& logits, const Tensor& labels);

// --- Convolution layers ----------------------------------------------------------------------

/// The options of a Conv2D layer (Keras's Conv2D arguments, NHWC).
struct Conv2DOptions {
  std::vector<int64_t> strides{1, 1};    // one entry (both dims) or two (height, width)
  Padding padding = Padding::Valid;      // Keras's default, "valid"
  std::vector<int64_t> dilations{1, 1};  // one or two entries; > 1 only with stride 1, as TF
  Activation activation = nullptr;        // a Keras name or a function object
  bool use_bias = true;
  uint64_t seed = 0;                     // the Glorot-uniform kernel's seed
  DTypePolicy dtype = global_policy();  // as Dense: by default the global policy when built
  std::string name = "conv2d";
  int64_t groups = 1;                    // Keras's groups: in_channels and filters split into them
};

/// y = activation(conv2d(x, kernel) + bias), Keras's Conv2D: input (batch, height, width,
/// in_channels), kernel (kh, kw, in_channels / groups, filters) Glorot-uniform (fans include the
/// receptive field), bias zeros(filters). With groups > 1 (both in_channels and filters must
/// divide by it, else tg::InvalidArgumentError) each group of filters sees its own slice of the
/// input channels (conv2d's grouped form).
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
  /// two entries. `dtype` is a floating DType or a DTypePolicy, as Dense's (mixed_bfloat16: float32
  /// Variables, bfloat16 compute and output).
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

/// The options of a DepthwiseConv2D layer (Keras's DepthwiseConv2D arguments, NHWC).
struct DepthwiseConv2DOptions {
  std::vector<int64_t> strides{1, 1};    // one entry (both dims) or two (height, width)
  Padding padding = Padding::Valid;
  int64_t depth_multiplier = 1;          // output channels per input channel
  std::vector<int64_t> dilations{1, 1};  // one or two entries; > 1 only with stride 1, as TF
  Activation activation = nullptr;
  bool use_bias = true;
  uint64_t seed = 0;                     // the Glorot-uniform kernel's seed
  DTypePolicy dtype = global_policy();  // as Dense: by default the global policy when built
  std::string name = "depthwise_conv2d";
};

/// y = activation(depthwise_conv2d(x, kernel) + bias), Keras's DepthwiseConv2D: input (batch,
/// height, width, in_channels), kernel (kh, kw, in_channels, depth_multiplier) Glorot-uniform,
/// bias zeros(in_channels * depth_multiplier); output channel c * depth_multiplier + m comes from
/// input channel c. Variables are made by the constructor, as Conv2D's; copies share them.
///
///   tg::nn::DepthwiseConv2D dw(32, {3, 3}, {.strides = {2, 2}, .padding = tg::Padding::Same});
class DepthwiseConv2D {
 public:
  /// Throws tg::InvalidArgumentError unless in_channels, depth_multiplier, the kernel size,
  /// strides and dilations are positive (one or two entries). `dtype` is a floating DType or a
  /// DTypePolicy, as Conv2D's.
  DepthwiseConv2D(int64_t in_channels, std::vector<int64_t> kernel_size, DepthwiseConv2DOptions options = {});
  /// x: rank 4 with x.shape[3] == in_channels (or None while tracing), the layer's dtype.
  Tensor operator()(const Tensor& x) const;

  Variable& kernel() { return kernel_; }
  const Variable& kernel() const { return kernel_; }
  /// The bias Variable; tg::ValueError when the layer was built with use_bias = false.
  const Variable& bias() const;
  std::vector<Variable> trainable_variables() const;
  int64_t in_channels() const { return in_; }
  const DepthwiseConv2DOptions& options() const { return options_; }

 private:
  int64_t in_;
  DepthwiseConv2DOptions options_;
  Variable kernel_;
  std::optional<Variable> bias_;
};

/// The options of a Conv2DTranspose layer (Keras's Conv2DTranspose arguments, NHWC).
struct Conv2DTransposeOptions {
  std::vector<int64_t> strides{1, 1};    // one entry (both dims) or two (height, width)
  Padding padding = Padding::Valid;
  /// Keras's output_padding: empty (None) or one or two entries, each < its stride; the extra
  /// rows/columns at the bottom/right of the output.
  std::vector<int64_t> output_padding{};
  std::vector<int64_t> dilations{1, 1};
  Activation activation = nullptr;
  bool use_bias = true;
  uint64_t seed = 0;                     // the Glorot-uniform kernel's seed
  DTypePolicy dtype = global_policy();  // as Dense: by default the global policy when built
  std::string name = "conv2d_transpose";
};

/// y = activation(conv2d_transpose(x, kernel) + bias), Keras's Conv2DTranspose: input (batch,
/// height, width, in_channels), kernel (kh, kw, filters, in_channels) Glorot-uniform, bias
/// zeros(filters). The output size is Keras's: without output_padding, height * stride under
/// SAME and height * stride + max(window - stride, 0) under VALID (window = (k - 1) *
/// dilation + 1); with it, (height - 1) * stride + window - 2 * pad + output_padding, pad being
/// window / 2 under SAME and 0 under VALID. The input's height and width must be known while
/// tracing (the batch may be None).
class Conv2DTranspose {
 public:
  /// Throws tg::InvalidArgumentError for non-positive sizes or an output_padding not below the
  /// stride. `dtype` is a floating DType or a DTypePolicy, as Conv2D's.
  Conv2DTranspose(int64_t in_channels, int64_t filters, std::vector<int64_t> kernel_size,
                  Conv2DTransposeOptions options = {});
  Tensor operator()(const Tensor& x) const;

  Variable& kernel() { return kernel_; }
  const Variable& kernel() const { return kernel_; }
  /// The bias Variable; tg::ValueError when the layer was built with use_bias = false.
  const Variable& bias() const;
  std::vector<Variable> trainable_variables() const;
  int64_t in_channels() const { return in_; }
  int64_t filters() const { return filters_; }
  const Conv2DTransposeOptions& options() const { return options_; }

 private:
  int64_t in_, filters_;
  std::vector<int64_t> kernel_size_;
  Conv2DTransposeOptions options_;
  Variable kernel_;
  std::optional<Variable> bias_;
};

// --- Attention layers ----------------------------------------------------------------------

/// The options of a MultiHeadAttention layer (Keras's MultiHeadAttention arguments).
struct MultiHeadAttentionOptions {
  std::optional<int64_t> value_dim{};    // per-head size of the value projection; default key_dim
  double dropout = 0.0;                  // on the attention weights, while training
  bool use_bias = true;
  std::optional<int64_t> output_dim{};   // the output projection's size; default query_features
  std::optional<int64_t> key_features{}; // last dim of the key input; default value_features
  std::optional<int64_t> value_features{};  // last dim of the value input; default query_features
  uint64_t seed = 0;                     // the Glorot-uniform kernels take seed, seed + 1, ...
  std::optional<uint64_t> dropout_seed{};  // the dropout's op seed (tg::dropout's rules)
  DType dtype = float32;
  std::string name = "multi_head_attention";
};

/// What one call of a MultiHeadAttention layer takes besides query and value.
struct AttentionCall {
  Tensor key{};           // empty: value (Keras's default)
  /// Empty, or bool (batch, Tq, Tk) / (Tq, Tk): true where query i may attend to key j (Keras's
  /// attention_mask); shared by every head.
  Tensor attention_mask{};
  bool use_causal_mask = false;
  bool training = false;
};

/// keras.layers.MultiHeadAttention: query (batch, Tq, query_features), value (batch, Tk,
/// value_features) and key (batch, Tk, key_features; default value) are projected per head
/// (kernels (features, num_heads, key_dim) for query and key, (features, num_heads, value_dim)
/// for value, Glorot-uniform, biases (num_heads, dim) zeros), attended with
/// tg::scaled_dot_product_attention (scale 1 / sqrt(key_dim)), and projected back (kernel
/// (num_heads, value_dim, output_dim), bias (output_dim,)) to (batch, Tq, output_dim). A query
/// that sees no key gives zeros before the output projection (the op's rule; Keras would
/// average every value). Variables are made by the constructor, as Dense's.
///
///   tg::nn::MultiHeadAttention mha(64, /*num_heads=*/4, /*key_dim=*/16);
///   tg::Tensor y = mha(x, x);   // self-attention, (batch, T, 64) -> (batch, T, 64)
class MultiHeadAttention {
 public:
  /// tg::InvalidArgumentError unless every size is > 0 and 0 <= dropout < 1; tg::TypeError
  /// unless dtype is float32 or float64.
  MultiHeadAttention(int64_t query_features, int64_t num_heads, int64_t key_dim,
                     MultiHeadAttentionOptions options = {});
  /// Inputs of rank 3 with the features above (None allowed while tracing) and the layer's
  /// dtype, query and value with the same batch; else tg::InvalidArgumentError.
  Tensor operator()(const Tensor& query, const Tensor& value, const AttentionCall& call = {}) const;

  int64_t num_heads() const { return heads_; }
  int64_t key_dim() const { return key_dim_; }
  int64_t value_dim() const { return value_dim_; }
  int64_t output_dim() const { return output_dim_; }
  /// {query kernel, query bias, key kernel, key bias, value kernel, value bias, output kernel,
  /// output bias}, the biases left out without use_bias.
  std::vector<Variable> trainable_variables() const;

 private:
  Tensor project(const Tensor& x, const Variable& kernel, const std::optional<Variable>& bias, int64_t features,
                 int64_t dim, const char* what) const;

  int64_t query_features_, heads_, key_dim_, value_dim_, output_dim_, key_features_, value_features_;
  MultiHeadAttentionOptions options_;
  Variable query_kernel_, key_kernel_, value_kernel_, output_kernel_;
  std::optional<Variable> query_bias_, key_bias_, value_bias_, output_bias_;
};

/// The options of a TransformerEncoderLayer (PyTorch's nn.TransformerEncoderLayer arguments).
struct TransformerEncoderLayerOptions {
  double dropout = 0.1;                 // after attention, inside and after the feed-forward, and
                                        // on the attention weights, while training
  Activation activation = "relu";       // of the feed-forward's first layer
  double layer_norm_eps = 1e-5;
  bool norm_first = false;              // pre-norm; false: post-norm (PyTorch's default)
  bool use_bias = true;                 // in the attention's projections (the feed-forward's
                                        // Dense layers always have biases)
  uint64_t seed = 0;
  std::optional<uint64_t> dropout_seed{};  // the dropouts' op seeds are dropout_seed, + 1, ...
  DType dtype = float32;
  std::string name = "transformer_encoder";
};

/// One transformer encoder block on (batch, T, d_model) inputs, PyTorch's
/// nn.TransformerEncoderLayer with batch_first=True:
///   post-norm: x = norm1(x + dropout(self_attention(x)));  x = norm2(x + dropout(ffn(x)))
///   norm_first: x = x + dropout(self_attention(norm1(x)));  x = x + dropout(ffn(norm2(x)))
/// with ffn(x) = Dense(dim_feedforward -> d_model)(dropout(activation(Dense(d_model ->
/// dim_feedforward)(x)))), self_attention a MultiHeadAttention of num_heads heads of
/// d_model / num_heads, and LayerNorms over d_model.
class TransformerEncoderLayer {
 public:
  /// tg::InvalidArgumentError unless the sizes are > 0, num_heads divides d_model and the rates
  /// are in [0, 1).
  TransformerEncoderLayer(int64_t d_model, int64_t num_heads, int64_t dim_feedforward,
                          TransformerEncoderLayerOptions options = {});
  /// x (batch, T, d_model); `call.key` must be empty (self-attention), `call.attention_mask`
  /// and `use_causal_mask` as for MultiHeadAttention.
  Tensor operator()(const Tensor& x, const AttentionCall& call = {}) const;

  const MultiHeadAttention& self_attention() const { return attention_; }
  const Dense& linear1() const { return linear1_; }
  const Dense& linear2() const { return linear2_; }
  const LayerNorm& norm1() const { return norm1_; }
  const LayerNorm& norm2() const { return norm2_; }
  /// The attention's, then linear1's, linear2's, norm1's and norm2's Variables.
  std::vector<Variable> trainable_variables() const;

 private:
  Tensor dropped(const Tensor& x, bool training, uint64_t which) const;

  int64_t d_model_;
  TransformerEncoderLayerOptions options_;
  MultiHeadAttention attention_;
  Dense linear1_, linear2_;
  LayerNorm norm1_, norm2_;
};

}  // namespace tg::nn
