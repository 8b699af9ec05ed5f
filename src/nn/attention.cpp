// MultiHeadAttention (Keras's) and TransformerEncoderLayer (PyTorch's), composed from public ops
// around tg::scaled_dot_product_attention, so that gradients come from the ops' own rules.
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "nn/layer_checks.h"
#include "ops/attention.h"
#include "ops/runtime_shape_checks.h"
#include "tracegraph/nn.h"
#include "tracegraph/ops.h"

namespace tg::nn {

using detail::op_error;

namespace {

constexpr const char* kMha = "MultiHeadAttention";
constexpr const char* kEncoder = "TransformerEncoderLayer";

void check_rate(const char* layer, const std::string& name, double rate) {
  if (!(rate >= 0.0 && rate < 1.0))
    op_error<InvalidArgumentError>(layer, "layer '", name, "' needs a dropout rate in [0, 1), got ", rate);
}

MultiHeadAttentionOptions checked_mha_options(int64_t query_features, int64_t num_heads, int64_t key_dim,
                                              MultiHeadAttentionOptions o) {
  check_sizes(kMha, o.name,
              {{"query_features", query_features},
               {"num_heads", num_heads},
               {"key_dim", key_dim},
               {"value_dim", o.value_dim.value_or(key_dim)},
               {"output_dim", o.output_dim.value_or(query_features)},
               {"value_features", o.value_features.value_or(query_features)},
               {"key_features", o.key_features.value_or(o.value_features.value_or(query_features))}});
  check_float_dtype(kMha, o.dtype);
  check_rate(kMha, o.name, o.dropout);
  return o;
}

// x's first `n` dims followed by `tail`: static when they are known, else a shape tensor.
Tensor reshape_leading(const Tensor& y, const Tensor& x, int64_t n, const std::vector<int64_t>& tail) {
  const TensorShape s = detail::static_shape(x);
  std::vector<int64_t> dims(s.dims().begin(), s.dims().begin() + n);
  bool known = true;
  for (int64_t d : dims) known = known && d != None;
  if (known) {
    dims.insert(dims.end(), tail.begin(), tail.end());
    return reshape(y, dims);
  }
  std::vector<int32_t> t;
  for (int64_t d : tail) t.push_back(static_cast<int32_t>(d));
  return reshape(y, concat({slice(shape(x), {0}, {n}), constant(t, {static_cast<int64_t>(t.size())}, int32)}, 0));
}

}  // namespace

// ---- MultiHeadAttention ----

MultiHeadAttention::MultiHeadAttention(int64_t query_features, int64_t num_heads, int64_t key_dim,
                                       MultiHeadAttentionOptions options)
    : query_features_(query_features),
      heads_(num_heads),
      key_dim_(key_dim),
      value_dim_(options.value_dim.value_or(key_dim)),
      output_dim_(options.output_dim.value_or(query_features)),
      key_features_(options.key_features.value_or(options.value_features.value_or(query_features))),
      value_features_(options.value_features.value_or(query_features)),
      options_(checked_mha_options(query_features, num_heads, key_dim, std::move(options))),
      // Keras's EinsumDense kernels, (features, heads, size), Glorot-uniform with Keras's fans.
      query_kernel_(glorot_uniform({query_features_, heads_, key_dim_}, options_.seed, options_.dtype),
                    options_.name + "/query/kernel"),
      key_kernel_(glorot_uniform({key_features_, heads_, key_dim_}, options_.seed + 1, options_.dtype),
                  options_.name + "/key/kernel"),
      value_kernel_(glorot_uniform({value_features_, heads_, value_dim_}, options_.seed + 2, options_.dtype),
                    options_.name + "/value/kernel"),
      output_kernel_(glorot_uniform({heads_, value_dim_, output_dim_}, options_.seed + 3, options_.dtype),
                     options_.name + "/attention_output/kernel") {
  if (!options_.use_bias) return;
  query_bias_.emplace(zeros({heads_, key_dim_}, options_.dtype), options_.name + "/query/bias");
  key_bias_.emplace(zeros({heads_, key_dim_}, options_.dtype), options_.name + "/key/bias");
  value_bias_.emplace(zeros({heads_, value_dim_}, options_.dtype), options_.name + "/value/bias");
  output_bias_.emplace(zeros({output_dim_}, options_.dtype), options_.name + "/attention_output/bias");
}

std::vector<Variable> MultiHeadAttention::trainable_variables() const {
  std::vector<Variable> out;
  const std::pair<const Variable*, const std::optional<Variable>*> parts[] = {
      {&query_kernel_, &query_bias_}, {&key_kernel_, &key_bias_}, {&value_kernel_, &value_bias_},
      {&output_kernel_, &output_bias_}};
  for (const auto& part : parts) {
    out.push_back(*part.first);
    if (*part.second) out.push_back(**part.second);
  }
  return out;
}

// x (batch, T, features) -> (batch, T, heads, dim): one (rows, features) x (features, heads * dim)
// product, split into heads by a reshape (the attention op reads them interleaved, so no
// transpose moves the data).
Tensor MultiHeadAttention::project(const Tensor& x, const Variable& kernel, const std::optional<Variable>& bias,
                                   int64_t features, int64_t dim, const char* what) const {
  check_features_input(kMha, options_.name, x, options_.dtype, features, 3);
  const TensorShape s = detail::static_shape(x);
  if (s.rank() != 3)
    op_error<InvalidArgumentError>(kMha, "layer '", options_.name, "' expects the ", what,
                                   " of shape (batch, T, ", features, "), got ", s.to_string());
  const Tensor w = reshape(kernel.read_value(), {features, heads_ * dim});
  const Tensor input =
      s.dims()[2] != None
          ? x
          : detail::ensure_same_dims(x, w, {2}, {0}, kMha, detail::str_cat("the ", what), "its projection kernel",
                                     detail::str_cat("layer '", options_.name, "' expects the ", what,
                                                     " of shape (batch, T, ", features, ")"));
  Tensor rows = matmul(reshape(input, {-1, features}), w);
  if (bias) rows = rows + reshape(bias->read_value(), {heads_ * dim});
  return reshape_leading(rows, x, 2, {heads_, dim});
}

Tensor MultiHeadAttention::operator()(const Tensor& query, const Tensor& value, const AttentionCall& call) const {
  const Tensor& key = call.key.defined() ? call.key : value;
  const Tensor q = project(query, query_kernel_, query_bias_, query_features_, key_dim_, "query");
  const Tensor k = project(key, key_kernel_, key_bias_, key_features_, key_dim_, "key");
  const Tensor v = project(value, value_kernel_, value_bias_, value_features_, value_dim_, "value");
  AttentionOptions attention;
  attention.causal = call.use_causal_mask;
  attention.scale = 1.0 / std::sqrt(static_cast<double>(key_dim_));
  attention.dropout = options_.dropout;
  attention.training = call.training;
  attention.seed = options_.dropout_seed;
  if (call.attention_mask.defined()) {
    const Tensor& m = call.attention_mask;
    if (m.dtype() != bool_)
      op_error<TypeError>(kMha, "layer '", options_.name, "' expects a bool attention_mask (true: attend), got ",
                          to_string(m.dtype()), "; tg::cast it to tg::bool_");
    const TensorShape ms = detail::static_shape(m);
    if (!ms.has_rank() || (ms.rank() != 2 && ms.rank() != 3))
      op_error<InvalidArgumentError>(kMha, "layer '", options_.name,
                                     "' expects an attention_mask of shape (batch, Tq, Tk) or (Tq, Tk), got ",
                                     ms.to_string());
    attention.mask = expand_dims(m, -3);  // one mask for every head
  }
  // (batch, Tq, heads, value_dim) -> (batch, Tq, heads * value_dim) -> the output projection.
  const Tensor o = detail::scaled_dot_product_attention_op(q, k, v, attention, true);
  Tensor rows = matmul(reshape(o, {-1, heads_ * value_dim_}),
                       reshape(output_kernel_.read_value(), {heads_ * value_dim_, output_dim_}));
  if (output_bias_) rows = rows + output_bias_->read_value();
  return reshape_leading(rows, query, 2, {output_dim_});
}

// ---- TransformerEncoderLayer ----

namespace {

TransformerEncoderLayerOptions checked_encoder_options(int64_t d_model, int64_t num_heads, int64_t dim_feedforward,
                                                       TransformerEncoderLayerOptions o) {
  check_sizes(kEncoder, o.name, {{"d_model", d_model}, {"num_heads", num_heads}, {"dim_feedforward", dim_feedforward}});
  check_float_dtype(kEncoder, o.dtype);
  check_rate(kEncoder, o.name, o.dropout);
  if (d_model % num_heads != 0)
    op_error<InvalidArgumentError>(kEncoder, "layer '", o.name, "' needs num_heads to divide d_model, got d_model=",
                                   d_model, " num_heads=", num_heads);
  if (!(std::isfinite(o.layer_norm_eps) && o.layer_norm_eps >= 0))
    op_error<InvalidArgumentError>(kEncoder, "layer '", o.name, "' needs a finite layer_norm_eps >= 0, got ",
                                   o.layer_norm_eps);
  return o;
}

MultiHeadAttentionOptions attention_options(const TransformerEncoderLayerOptions& o) {
  MultiHeadAttentionOptions a;
  a.dropout = o.dropout;
  a.use_bias = o.use_bias;
  a.seed = o.seed;
  a.dropout_seed = o.dropout_seed;
  a.dtype = o.dtype;
  a.name = o.name + "/self_attention";
  return a;
}

}  // namespace

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d_model, int64_t num_heads, int64_t dim_feedforward,
                                                 TransformerEncoderLayerOptions options)
    : d_model_(d_model),
      options_(checked_encoder_options(d_model, num_heads, dim_feedforward, std::move(options))),
      attention_(d_model, num_heads, d_model / num_heads, attention_options(options_)),
      linear1_(d_model, dim_feedforward, options_.activation, options_.seed + 4, options_.dtype,
               options_.name + "/linear1"),
      linear2_(dim_feedforward, d_model, nullptr, options_.seed + 5, options_.dtype, options_.name + "/linear2"),
      norm1_(d_model, options_.layer_norm_eps, options_.dtype, options_.name + "/norm1"),
      norm2_(d_model, options_.layer_norm_eps, options_.dtype, options_.name + "/norm2") {}

std::vector<Variable> TransformerEncoderLayer::trainable_variables() const {
  std::vector<Variable> out = attention_.trainable_variables();
  for (const auto& vars : {linear1_.trainable_variables(), linear2_.trainable_variables(),
                           norm1_.trainable_variables(), norm2_.trainable_variables()})
    out.insert(out.end(), vars.begin(), vars.end());
  return out;
}

// Dropout number `which` of the layer (1 after attention, 2 inside the feed-forward, 3 after it;
// the attention weights' is number 0, the attention layer's own).
Tensor TransformerEncoderLayer::dropped(const Tensor& x, bool training, uint64_t which) const {
  std::optional<uint64_t> seed;
  if (options_.dropout_seed) seed = *options_.dropout_seed + which;
  return dropout(x, options_.dropout, training, seed);
}

Tensor TransformerEncoderLayer::operator()(const Tensor& x, const AttentionCall& call) const {
  if (call.key.defined())
    op_error<InvalidArgumentError>(kEncoder, "layer '", options_.name,
                                   "' is self-attention: leave AttentionCall::key empty (got a key tensor)");
  check_features_input(kEncoder, options_.name, x, options_.dtype, d_model_, 3);
  auto self_attention = [&](const Tensor& h) { return dropped(attention_(h, h, call), call.training, 1); };
  auto feed_forward = [&](const Tensor& h) {
    return dropped(linear2_(dropped(linear1_(h), call.training, 2)), call.training, 3);
  };
  if (options_.norm_first) {
    const Tensor h = x + self_attention(norm1_(x));
    return h + feed_forward(norm2_(h));
  }
  const Tensor h = norm1_(x + self_attention(x));
  return norm2_(h + feed_forward(h));
}

}  // namespace tg::nn
