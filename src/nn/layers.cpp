// Embedding, LayerNorm and BatchNorm (Keras's layers), composed from public ops so that gradients
// come from the ops' own rules.
#include <cmath>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "nn/init_seed.h"
#include "nn/layer_checks.h"
#include "ops/op.h"
#include "ops/runtime_shape_checks.h"
#include "tracegraph/nn.h"
#include "tracegraph/ops.h"

namespace tg::nn {

using detail::op_error;

namespace {

// Keras's batch_normalization arithmetic, shared by LayerNorm and BatchNorm:
// inv = gamma / sqrt(variance + epsilon); y = x * inv + (beta - mean * inv).
Tensor normalize_with(const Tensor& x, const Tensor& mean, const Tensor& variance, const Tensor& gamma,
                      const Tensor& beta, double epsilon) {
  const Tensor inv = rsqrt(variance + epsilon) * gamma;
  return x * inv + (beta - mean * inv);
}

// What a normalisation layer says when an input's last dimension is not its features, found
// when the graph runs (None dims): a last dimension of 1 would broadcast against gamma.
std::string features_remedy(const std::string& name, int64_t features) {
  return detail::str_cat("layer '", name, "' expects inputs whose last dimension is its ", features,
                         " features (a last dimension of 1 would broadcast); reshape the input so that "
                         "the features come last");
}

// The normalised values, checked to have x's shape: under None dims the static check cannot see
// a last dimension of 1, which broadcasts against gamma to (..., features).
Tensor checked_output(const char* layer, const std::string& name, int64_t features, const Tensor& y,
                      const Tensor& x) {
  return detail::ensure_same_shape(y, x, layer, "the normalized values", "the inputs",
                                   features_remedy(name, features));
}

void check_epsilon(const char* layer, double epsilon) {
  if (!(std::isfinite(epsilon) && epsilon >= 0))
    op_error<InvalidArgumentError>(layer, "epsilon must be a finite number >= 0, got ", epsilon);
}

}  // namespace

// ---- Embedding ----

Embedding::Embedding(int64_t vocab, int64_t dim, uint64_t seed, DType dtype, std::string name)
    : vocab_(vocab),
      name_(checked_layer_name("Embedding", std::move(name), {{"vocab", vocab}, {"dim", dim}}, dtype)),
      // Keras's default embeddings_initializer "uniform": RandomUniform(-0.05, 0.05).
      embeddings_(stateless_random_uniform({vocab, dim}, detail::seed_tensor(seed), -0.05, 0.05, dtype),
                  name_ + "/embeddings") {}

Tensor Embedding::operator()(const Tensor& ids) const {
  const char* op = "Embedding";
  if (!ids.defined()) op_error<ValueError>(op, "layer '", name_, "' got an empty tg::Tensor");
  if (ids.dtype() != int32 && ids.dtype() != int64)
    op_error<TypeError>(op, "layer '", name_, "' expects int32 or int64 token ids, got ",
                        to_string(ids.dtype()), "; tg::cast the ids to int32");
  if (!ids.is_symbolic()) {
    const Tensor wide = cast(ids, int64);
    const auto v = wide.to_vector<int64_t>();
    for (std::size_t j = 0; j < v.size(); ++j)
      if (v[j] < 0 || v[j] >= vocab_)
        op_error<InvalidArgumentError>(op, "layer '", name_, "' has a vocabulary of ", vocab_,
                                       " ids, [0, ", vocab_, "), but id ", v[j], " (flat element ", j,
                                       ") is outside it; map unknown tokens to an id in range");
  }
  return gather(embeddings_.read_value(), ids, 0);
}

// ---- LayerNorm ----

LayerNorm::LayerNorm(int64_t features, double epsilon, DType dtype, std::string name)
    : features_(features),
      epsilon_(epsilon),
      name_(checked_layer_name("LayerNorm", std::move(name), {{"features", features}}, dtype)),
      gamma_(
          [&] {
            check_epsilon("LayerNorm", epsilon);
            return ones({features}, dtype);
          }(),
          name_ + "/gamma"),
      beta_(zeros({features}, dtype), name_ + "/beta") {}

Tensor LayerNorm::operator()(const Tensor& x) const {
  check_features_input("LayerNorm", name_, x, gamma_.dtype(), features_, /*min_rank=*/1);
  // The layer_norm op where x's last dimension is known (then it is features_, checked above):
  // one sweep forward and one for the gradient. Otherwise (a None last dimension, which may turn
  // out 1 and broadcast) the composition below, whose output check names the layer.
  const TensorShape s = detail::static_shape(x);
  if ((gamma_.dtype() == float32 || gamma_.dtype() == float64) && s.has_rank() && s.dims().back() != None)
    return detail::apply_op(detail::OpId::LayerNorm, {x, gamma_.read_value(), beta_.read_value()},
                            detail::LayerNormAttrs{.epsilon = epsilon_})[0];
  const Tensor mean = reduce_mean(x, {-1}, /*keepdims=*/true);
  const Tensor variance = reduce_mean(square(x - mean), {-1}, /*keepdims=*/true);
  return checked_output("LayerNorm", name_, features_, normalize_with(x, mean, variance, gamma_.read_value(),
                                                                      beta_.read_value(), epsilon_), x);
}

// ---- BatchNorm ----

BatchNorm::BatchNorm(int64_t features, double momentum, double epsilon, DType dtype, std::string name)
    : features_(features),
      momentum_(momentum),
      epsilon_(epsilon),
      name_(checked_layer_name("BatchNorm", std::move(name), {{"features", features}}, dtype)),
      gamma_(
          [&] {
            check_epsilon("BatchNorm", epsilon);
            if (!(momentum >= 0.0 && momentum <= 1.0))
              op_error<InvalidArgumentError>("BatchNorm", "momentum must be in [0, 1] (the weight of the "
                                             "old moving statistics), got ", momentum);
            return ones({features}, dtype);
          }(),
          name_ + "/gamma"),
      beta_(zeros({features}, dtype), name_ + "/beta"),
      moving_mean_(zeros({features}, dtype), name_ + "/moving_mean"),
      moving_variance_(ones({features}, dtype), name_ + "/moving_variance") {}

void BatchNorm::check_input(const Tensor& x) const {
  check_features_input("BatchNorm", name_, x, gamma_.dtype(), features_, /*min_rank=*/2);
}

Tensor BatchNorm::normalize(const Tensor& x, const Tensor& mean, const Tensor& variance) const {
  return checked_output("BatchNorm", name_, features_,
                        normalize_with(x, mean, variance, gamma_.read_value(), beta_.read_value(), epsilon_), x);
}

namespace {
// Every axis but the last: the statistics are per feature.
std::vector<int> batch_axes(const Tensor& x) {
  std::vector<int> axes;
  for (int64_t a = 0; a + 1 < detail::static_shape(x).rank(); ++a) axes.push_back(static_cast<int>(a));
  return axes;
}

// The batch means, one per feature: checked before the moving statistics are updated from them,
// since a last dimension of 1 (None while tracing) would broadcast into every feature's average.
Tensor feature_means(const Tensor& x, const std::vector<int>& axes, const Tensor& gamma, const std::string& name,
                     int64_t features) {
  return detail::ensure_same_shape(reduce_mean(x, axes), gamma, "BatchNorm", "the batch means", "gamma",
                                   features_remedy(name, features));
}
}  // namespace

Tensor BatchNorm::train_step(const Tensor& x) const {
  // An empty batch has no statistics: its NaN mean would silently poison the moving ones.
  if (!x.is_symbolic() && x.num_elements() == 0)
    op_error<InvalidArgumentError>("BatchNorm", "layer '", name_, "' got an empty batch (shape ",
                                   x.shape().to_string(), ") in training mode; batch statistics need at "
                                   "least one example per feature");
  const std::vector<int> axes = batch_axes(x);
  const Tensor mean = feature_means(x, axes, gamma_.read_value(), name_, features_);
  const Tensor variance = reduce_mean(square(x - mean), axes);  // biased, as Keras's moments
  const Tensor y = normalize(x, mean, variance);
  Variable mm = moving_mean_, mv = moving_variance_;
  mm.assign(mm.read_value() * momentum_ + mean * (1.0 - momentum_));
  mv.assign(mv.read_value() * momentum_ + variance * (1.0 - momentum_));
  return y;
}

Tensor BatchNorm::operator()(const Tensor& x, bool training) const {
  check_input(x);
  if (training) return train_step(x);
  return normalize(x, moving_mean_.read_value(), moving_variance_.read_value());
}

Tensor BatchNorm::operator()(const Tensor& x, const Tensor& training) const {
  if (!training.defined() || training.dtype() != bool_ || detail::static_shape(training).rank() != 0)
    op_error<TypeError>("BatchNorm", "layer '", name_, "' expects `training` to be a C++ bool or a bool "
                        "scalar tensor, got ",
                        training.defined() ? to_string(training.dtype()) + " " +
                                                 detail::static_shape(training).to_string()
                                           : std::string("an empty tg::Tensor"));
  if (!training.is_symbolic()) return (*this)(x, training.item<bool>());
  check_input(x);
  // Decided at run time: both normalisations, and the assigns write the old values back when
  // not training. The moving statistics are read before they are assigned.
  const Tensor old_mean = moving_mean_.read_value(), old_variance = moving_variance_.read_value();
  const Tensor inferred = normalize(x, old_mean, old_variance);
  const std::vector<int> axes = batch_axes(x);
  const Tensor mean = feature_means(x, axes, gamma_.read_value(), name_, features_);
  const Tensor variance = reduce_mean(square(x - mean), axes);
  const Tensor trained = normalize(x, mean, variance);
  Variable mm = moving_mean_, mv = moving_variance_;
  mm.assign(where(training, old_mean * momentum_ + mean * (1.0 - momentum_), old_mean));
  mv.assign(where(training, old_variance * momentum_ + variance * (1.0 - momentum_), old_variance));
  return where(training, trained, inferred);
}

}  // namespace tg::nn
