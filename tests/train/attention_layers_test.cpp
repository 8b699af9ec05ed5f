// Dense over any rank and activations by name (Keras's), MultiHeadAttention and
// TransformerEncoderLayer against references written from matmul and softmax: eagerly, traced
// and traced with the optimiser, gradients with respect to their Variables against central
// differences, typed errors, and a transformer block's traced train step against the eager one.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <optional>
#include <vector>

#include "train/layer_test_util.h"

namespace tg {
namespace {

using testing::check_variable_gradients;
using testing::expect_modes_agree;

// ---- Dense over any rank, activations ----

TEST(DenseAnyRank, ContractsTheLastAxisAsKeras) {
  nn::Dense layer(4, 3, "tanh", /*seed=*/2);
  const Tensor x = testing::seeded_values({2, 5, 4}, float32, 1);
  const Tensor y = layer(x);
  ASSERT_EQ(y.shape(), TensorShape({2, 5, 3}));
  const Tensor want = tanh(reshape(matmul(reshape(x, {10, 4}), layer.kernel().read_value()), {2, 5, 3}) +
                           layer.bias().read_value());
  EXPECT_TENSOR_NEAR(y, want, 1e-6);
  const Tensor x4 = testing::seeded_values({2, 1, 3, 4}, float32, 2);
  EXPECT_EQ(layer(x4).shape(), TensorShape({2, 1, 3, 3}));
  expect_modes_agree([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{layer(in[0])}; }, {x}, 1e-6);
  // None leading dims, and a None last dim checked when the graph runs.
  auto traced = function([&](const Tensor& in) { return layer(in); },
                         {.input_signature = std::vector<TensorSpec>{TensorSpec({None, None, None}, float32)}});
  EXPECT_TENSOR_NEAR(traced(x), y, 1e-6);
  EXPECT_THROW_MSG(traced(testing::seeded_values({2, 5, 8}, float32, 3)), InvalidArgumentError, "[Dense]",
                   "4 features");
}

TEST(DenseAnyRank, GradientsOfARankThreeInput) {
  nn::Dense layer(3, 2, "gelu", 5, float64);
  const Tensor x = testing::seeded_values({2, 4, 3}, float64, 4);
  check_variable_gradients([&] { return reduce_sum(square(layer(x))); }, layer.trainable_variables());
}

TEST(DenseAnyRank, StillRefusesRankOneAndAWrongLastAxis) {
  nn::Dense layer(3, 2, nullptr, 1, float32, "fc");
  EXPECT_THROW_MSG(layer(ones({3})), InvalidArgumentError, "[Dense]", "'fc'", "rank >= 2", "(3,)");
  EXPECT_THROW_MSG(layer(ones({2, 4, 4})), InvalidArgumentError, "(2, 4, 4)", "3 features");
}

TEST(Activations, ByKerasNameOrFunctionObject) {
  const Tensor x = constant({-2.0f, -0.5f, 0.0f, 0.5f, 3.0f, 7.0f});
  EXPECT_TENSOR_EQ(nn::Activation("gelu")(x), gelu(x));
  EXPECT_TENSOR_EQ(nn::Activation("gelu_approximate")(x), gelu(x, true));
  EXPECT_TENSOR_EQ(nn::Activation(tg::gelu)(x), gelu(x));  // tg::gelu's default form
  EXPECT_TENSOR_EQ(nn::Activation(tg::softmax)(x), softmax(x));
  EXPECT_TENSOR_EQ(nn::Activation("relu")(x), relu(x));
  EXPECT_TENSOR_EQ(nn::Activation(relu)(x), relu(x));
  EXPECT_TENSOR_EQ(nn::Activation([](const Tensor& t) { return t * 2.0f; })(x), x * 2.0f);
  EXPECT_TENSOR_EQ(nn::Activation("linear")(x), x);
  EXPECT_FALSE(static_cast<bool>(nn::Activation("linear")));
  EXPECT_FALSE(static_cast<bool>(nn::Activation(nullptr)));
  EXPECT_EQ(nn::Activation("tanh").name(), "tanh");
  EXPECT_TENSOR_NEAR(nn::Activation("relu6")(x), constant({0.0f, 0.0f, 0.0f, 0.5f, 3.0f, 6.0f}), 0.0);
  EXPECT_TENSOR_NEAR(nn::Activation("hard_sigmoid")(x), constant({1.0f / 6, 2.5f / 6, 0.5f, 3.5f / 6, 1.0f, 1.0f}),
                     1e-6);
  EXPECT_TENSOR_NEAR(nn::Activation("softsign")(x), x / (abs(x) + 1.0f), 1e-7);
  EXPECT_TENSOR_NEAR(nn::Activation("silu")(x), x * sigmoid(x), 1e-7);
  EXPECT_TENSOR_NEAR(nn::Activation("selu")(constant({1.0, -1.0}, float64)),
                     constant({1.0507009873554805, 1.0507009873554805 * 1.6732632423543772 * std::expm1(-1.0)},
                              float64),
                     1e-12);
  for (const std::string& name : nn::Activation::names())
    EXPECT_EQ(nn::Activation(name)(x).shape(), x.shape()) << name;
  EXPECT_THROW_MSG(nn::Activation("gelus"), ValueError, "[Activation]", "unknown activation \"gelus\"", "\"gelu\"",
                   "\"softmax\"", "\"linear\"", "function object");
  EXPECT_THROW_MSG(nn::Dense(2, 2, "rel"), ValueError, "\"rel\"");
  // Conv2D takes them too.
  nn::Conv2D conv(1, 2, {3}, {.activation = "gelu", .seed = 3});
  const Tensor img = testing::seeded_values({1, 4, 4, 1}, float32, 5);
  nn::Conv2D linear_conv(1, 2, {3}, {.seed = 3});
  EXPECT_TENSOR_NEAR(conv(img), gelu(linear_conv(img)), 1e-6);
}

// ---- MultiHeadAttention ----

// Keras's computation written out: per-head projections with the (features, heads, dim)
// kernels, softmax(q k^T / sqrt(key_dim) + mask) v with a hidden row giving zeros, the output
// projection.
Tensor mha_reference(const nn::MultiHeadAttention& mha, const Tensor& query, const Tensor& value, const Tensor& key,
                     const Tensor& mask, bool causal) {
  const std::vector<Variable> w = mha.trainable_variables();  // qk, qb, kk, kb, vk, vb, ok, ob
  auto heads = [&](const Tensor& x, const Variable& kernel, const Variable& bias) {
    // (b, t, f) x (f, h, d) -> (b, h, t, d)
    return transpose(einsum("btf,fhd->bthd", x, kernel.read_value()) + bias.read_value(), {0, 2, 1, 3});
  };
  const Tensor q = heads(query, w[0], w[1]), k = heads(key, w[2], w[3]), v = heads(value, w[4], w[5]);
  Tensor s = matmul(q, k, false, true) * (1.0 / std::sqrt(static_cast<double>(mha.key_dim())));
  const int64_t tq = query.shape().dims()[1], tk = key.shape().dims()[1];
  std::vector<bool> allowed;
  for (int64_t i = 0; i < tq; ++i)
    for (int64_t j = 0; j < tk; ++j) allowed.push_back(!causal || j <= i);
  Tensor keep = constant(allowed, {tq, tk}, bool_);
  if (mask.defined()) keep = logical_and(keep, expand_dims(mask, -3));
  s = where(keep, s, zeros_like(s) - std::numeric_limits<double>::infinity());
  const Tensor seen = reduce_any(keep, {-1}, true);
  const Tensor p = where(seen, softmax(where(seen, s, zeros_like(s)), -1), zeros_like(s));
  const Tensor o = transpose(matmul(p, v), {0, 2, 1, 3});  // (b, t, h, dv)
  return einsum("bthd,hdo->bto", o, w[6].read_value()) + w[7].read_value();
}

TEST(MultiHeadAttention, MatchesKerasComputation) {
  nn::MultiHeadAttention mha(6, /*num_heads=*/2, /*key_dim=*/3,
                             {.value_dim = 4, .output_dim = 5, .key_features = 7, .value_features = 8, .seed = 3,
                              .dtype = float64});
  EXPECT_EQ(mha.trainable_variables().size(), 8u);
  EXPECT_EQ(mha.trainable_variables()[0].shape(), TensorShape({6, 2, 3}));
  EXPECT_EQ(mha.trainable_variables()[0].name(), "multi_head_attention/query/kernel");
  EXPECT_EQ(mha.trainable_variables()[6].shape(), TensorShape({2, 4, 5}));
  // Biases are zeros at first: give them values so that the reference checks their use.
  for (std::size_t i : {1u, 3u, 5u, 7u}) {
    Variable b = mha.trainable_variables()[i];
    b.assign(testing::seeded_values(b.shape().dims(), float64, 40 + i));
  }
  const Tensor query = testing::seeded_values({2, 4, 6}, float64, 1);
  const Tensor value = testing::seeded_values({2, 5, 8}, float64, 2);
  const Tensor key = testing::seeded_values({2, 5, 7}, float64, 3);
  // Batch 1, query 2 sees no key.
  std::vector<bool> m(2 * 4 * 5, true);
  for (int j = 0; j < 5; ++j) m[static_cast<std::size_t>(20 + 2 * 5 + j)] = false;
  m[3] = false;
  const Tensor mask = constant(m, {2, 4, 5}, bool_);
  const Tensor y = mha(query, value, {.key = key, .attention_mask = mask});
  ASSERT_EQ(y.shape(), TensorShape({2, 4, 5}));
  EXPECT_TENSOR_NEAR(y, mha_reference(mha, query, value, key, mask, false), 1e-12);
  EXPECT_TENSOR_NEAR(mha(query, value, {.key = key, .use_causal_mask = true}),
                     mha_reference(mha, query, value, key, Tensor(), true), 1e-12);
  expect_modes_agree(
      [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{mha(in[0], in[1], {.key = in[2], .attention_mask = in[3]})};
      },
      {query, value, key, mask}, 1e-12);
  // None batch and time dims while tracing.
  auto traced = function([&](const Tensor& a, const Tensor& b, const Tensor& c) { return mha(a, b, {.key = c}); },
                         {.input_signature = std::vector<TensorSpec>{TensorSpec({None, None, 6}, float64),
                                                                     TensorSpec({None, None, 8}, float64),
                                                                     TensorSpec({None, None, 7}, float64)}});
  EXPECT_TENSOR_NEAR(traced(query, value, key), mha(query, value, {.key = key}), 1e-12);
  check_variable_gradients([&] { return reduce_sum(square(mha(query, value, {.key = key, .attention_mask = mask}))); },
                           mha.trainable_variables());
}

TEST(MultiHeadAttention, SelfAttentionDefaultsAndErrors) {
  nn::MultiHeadAttention mha(4, 2, 2, {.use_bias = false});
  EXPECT_EQ(mha.trainable_variables().size(), 4u);
  const Tensor x = testing::seeded_values({1, 3, 4}, float32, 1);
  EXPECT_EQ(mha(x, x).shape(), TensorShape({1, 3, 4}));
  EXPECT_TENSOR_EQ(mha(x, x), mha(x, x, {.key = x}));
  EXPECT_THROW_MSG(nn::MultiHeadAttention(4, 0, 2), InvalidArgumentError, "[MultiHeadAttention]", "num_heads > 0");
  EXPECT_THROW_MSG(nn::MultiHeadAttention(4, 2, 2, {.dropout = 1.5}), InvalidArgumentError, "dropout rate");
  EXPECT_THROW_MSG(nn::MultiHeadAttention(4, 2, 2, {.dtype = int32}), TypeError, "float32 or float64");
  EXPECT_THROW_MSG(mha(ones({1, 3, 5}), x), InvalidArgumentError, "[MultiHeadAttention]", "4 features", "(1, 3, 5)");
  EXPECT_THROW_MSG(mha(ones({3, 4}), x), InvalidArgumentError, "rank >= 3");
  EXPECT_THROW_MSG(mha(x, x, {.attention_mask = ones({1, 3, 3})}), TypeError, "bool attention_mask", "float32");
  EXPECT_THROW_MSG(mha(x, ones({2, 3, 4})), InvalidArgumentError, "[scaled_dot_product_attention]",
                   "the batch sizes");
  // Dropout on the weights only while training.
  nn::MultiHeadAttention dropping(4, 2, 2, {.dropout = 0.5, .dropout_seed = 1});
  EXPECT_TENSOR_EQ(dropping(x, x), dropping(x, x, {.training = false}));
  EXPECT_FALSE(testing::tensors_near(dropping(x, x, {.training = true}), dropping(x, x)));
}

// The layer as written with transposes around the public tg::scaled_dot_product_attention
// ((batch, heads, T, D)): the layer splits heads by a reshape and has the op read them
// interleaved, which must give the same bits, forward and backward, dropout included.
Tensor mha_transposed(const nn::MultiHeadAttention& mha, const Tensor& query, const Tensor& value,
                      const nn::AttentionCall& call, double rate, uint64_t dropout_seed) {
  const std::vector<Variable> w = mha.trainable_variables();  // qk, qb, kk, kb, vk, vb, ok, ob
  auto heads = [&](const Tensor& x, const Variable& kernel, const Variable& bias) {
    const std::vector<int64_t> ks = kernel.shape().dims(), xs = x.shape().dims();  // (f, h, d), (b, t, f)
    const Tensor rows = matmul(reshape(x, {-1, ks[0]}), reshape(kernel.read_value(), {ks[0], ks[1] * ks[2]})) +
                        reshape(bias.read_value(), {ks[1] * ks[2]});
    return transpose(reshape(rows, {xs[0], xs[1], ks[1], ks[2]}), {0, 2, 1, 3});
  };
  const Tensor& key = call.key.defined() ? call.key : value;
  const Tensor q = heads(query, w[0], w[1]), k = heads(key, w[2], w[3]), v = heads(value, w[4], w[5]);
  AttentionOptions o{.causal = call.use_causal_mask,
                     .scale = 1.0 / std::sqrt(static_cast<double>(mha.key_dim())),
                     .dropout = rate,
                     .training = call.training,
                     .seed = dropout_seed};
  if (call.attention_mask.defined()) o.mask = expand_dims(call.attention_mask, -3);
  const Tensor att = transpose(scaled_dot_product_attention(q, k, v, o), {0, 2, 1, 3});  // (b, tq, h, dv)
  const std::vector<int64_t> os = w[6].shape().dims(), qs = query.shape().dims();   // (h, dv, out)
  const Tensor rows = matmul(reshape(att, {-1, os[0] * os[1]}), reshape(w[6].read_value(), {os[0] * os[1], os[2]})) +
                      w[7].read_value();
  return reshape(rows, {qs[0], qs[1], os[2]});
}

TEST(MultiHeadAttention, InterleavedHeadsGiveTheTransposedFormsBits) {
  const double rate = 0.25;
  const uint64_t dropout_seed = 4;
  nn::MultiHeadAttention mha(6, /*num_heads=*/3, /*key_dim=*/4,
                             {.value_dim = 5, .dropout = rate, .output_dim = 7, .key_features = 5,
                              .value_features = 8, .seed = 3, .dropout_seed = dropout_seed});
  const std::vector<Variable> vars = mha.trainable_variables();
  for (std::size_t i : {1u, 3u, 5u, 7u}) {
    Variable b = vars[i];
    b.assign(testing::seeded_values(b.shape().dims(), float32, 40 + i));
  }
  const Tensor query = testing::seeded_values({2, 5, 6}, float32, 1);
  const Tensor value = testing::seeded_values({2, 7, 8}, float32, 2);
  const Tensor key = testing::seeded_values({2, 7, 5}, float32, 3);
  const Tensor dy = testing::seeded_values({2, 5, 7}, float32, 4);
  std::vector<bool> m(2 * 5 * 7, true);
  for (int j = 0; j < 7; ++j) m[static_cast<std::size_t>(35 + 2 * 7 + j)] = false;  // batch 1, query 2 sees no key
  m[3] = m[9] = false;
  const Tensor mask = constant(m, {2, 5, 7}, bool_);
  // The output and the gradients of the Variables and the query; the random seed is reset for
  // each so that both forms draw the same dropout seed pair.
  auto step = [&](bool transposed, bool use_mask, bool causal, bool training) {
    return [&, transposed, use_mask, causal, training](const std::vector<Tensor>& in) {
      const nn::AttentionCall call{
          .key = in[2], .attention_mask = use_mask ? in[3] : Tensor(), .use_causal_mask = causal, .training = training};
      GradientTape tape(/*persistent=*/true);
      tape.watch(in[0]);
      const Tensor y = transposed ? mha_transposed(mha, in[0], in[1], call, rate, dropout_seed) : mha(in[0], in[1], call);
      std::vector<Tensor> out{y};
      const Tensor loss = reduce_sum(y * in[4]);
      const std::vector<Tensor> g = tape.gradient(loss, vars);
      out.insert(out.end(), g.begin(), g.end());
      out.push_back(tape.gradient(loss, in[0]));  // the query's
      return out;
    };
  };
  struct Case {
    bool mask, causal, training;
  };
  for (const Case& c : {Case{true, false, false}, Case{false, true, false}, Case{false, true, true},
                        Case{true, true, true}}) {
    for (int mode = 0; mode < 3; ++mode) {  // eager, traced, traced and optimised
      std::vector<std::vector<Tensor>> got;
      for (bool transposed : {false, true}) {
        const std::function<std::vector<Tensor>(const std::vector<Tensor>&)> f =
            step(transposed, c.mask, c.causal, c.training);
        set_random_seed(17);
        if (mode == 0) {
          got.push_back(f({query, value, key, mask, dy}));
        } else {
          auto traced = function([&](const std::vector<Tensor>& in) { return f(in); }, {.optimize = mode == 2});
          got.push_back(traced(std::vector<Tensor>{query, value, key, mask, dy}));
        }
      }
      ASSERT_EQ(got[0].size(), got[1].size());
      for (std::size_t i = 0; i < got[0].size(); ++i)
        EXPECT_TRUE(testing::same_bits(got[0][i], got[1][i]))
            << "result " << i << " mode " << mode << " mask " << c.mask << " causal " << c.causal << " training "
            << c.training;
    }
  }
  // Dropout did drop weights: training changes the output.
  set_random_seed(17);
  EXPECT_FALSE(testing::tensors_near(mha(query, value, {.key = key, .training = true}),
                                     mha(query, value, {.key = key}), 1e-6));
}

// The attribute is saved by name and loaded: the loaded function runs the interleaved op and
// gives the original's bits; its graph prints the attribute.
TEST(MultiHeadAttention, InterleavedAttributeSurvivesSaveAndLoad) {
  nn::MultiHeadAttention mha(6, 2, 3, {.seed = 5});
  auto f = function([&](const Tensor& x) { return mha(x, x, {.use_causal_mask = true}); }, {.name = "mha"});
  const Tensor x = testing::seeded_values({2, 4, 6}, float32, 1);
  const Tensor want = f(x);
  const std::string graph = f.concrete_functions()[0].graph().to_dot();
  EXPECT_NE(graph.find("heads_interleaved=true"), std::string::npos) << graph;
  const std::string path = ::testing::TempDir() + "tg_mha_interleaved_" + std::to_string(::getpid()) + ".tgx";
  save(path, f);
  LoadedFunction loaded = load(path);
  std::remove(path.c_str());
  EXPECT_TRUE(testing::same_bits(loaded(x), want));
  EXPECT_NE(loaded.concrete_functions()[0].graph().to_dot().find("heads_interleaved=true"), std::string::npos);
}

// ---- TransformerEncoderLayer ----

TEST(TransformerEncoderLayer, PostNormAndPreNormAsPyTorch) {
  for (bool norm_first : {false, true}) {
    nn::TransformerEncoderLayer layer(8, 2, 16,
                                      {.dropout = 0.0, .activation = "gelu", .norm_first = norm_first, .seed = 2,
                                       .dtype = float64});
    const Tensor x = testing::seeded_values({2, 5, 8}, float64, 1);
    // linear1 applies the activation (gelu) itself.
    auto ffn = [&](const Tensor& h) { return layer.linear2()(layer.linear1()(h)); };
    const nn::MultiHeadAttention& sa = layer.self_attention();
    Tensor want;
    if (norm_first) {
      const Tensor h = x + sa(layer.norm1()(x), layer.norm1()(x));
      want = h + ffn(layer.norm2()(h));
    } else {
      const Tensor h = layer.norm1()(x + sa(x, x));
      want = layer.norm2()(h + ffn(h));
    }
    EXPECT_TENSOR_NEAR(layer(x), want, 1e-12) << (norm_first ? "norm_first" : "post-norm");
    EXPECT_EQ(layer.trainable_variables().size(), 8u + 4u + 4u);
    check_variable_gradients([&] { return reduce_sum(square(layer(x, {.use_causal_mask = true}))); },
                             layer.trainable_variables());
  }
  EXPECT_THROW_MSG(nn::TransformerEncoderLayer(10, 3, 16), InvalidArgumentError, "[TransformerEncoderLayer]",
                   "divide d_model", "d_model=10 num_heads=3");
  nn::TransformerEncoderLayer layer(4, 2, 8);
  EXPECT_THROW_MSG(layer(ones({1, 2, 4}), {.key = ones({1, 2, 4})}), InvalidArgumentError, "self-attention");
  EXPECT_THROW_MSG(layer(ones({1, 2, 5})), InvalidArgumentError, "4 features");
}

// A transformer encoder block's training step (B2 T8 d16 h2 FFN32, Adam): the traced step takes
// the same steps as the eager one, and the loss goes down.
struct Block {
  explicit Block(std::optional<uint64_t> dropout_seed)
      : encoder(16, 2, 32,
                {.dropout = dropout_seed ? 0.1 : 0.0, .activation = "gelu", .seed = 7, .dropout_seed = dropout_seed}),
        head(16, 4, nullptr, 20) {}
  nn::TransformerEncoderLayer encoder;
  nn::Dense head;
  std::vector<Variable> variables() const {
    std::vector<Variable> v = encoder.trainable_variables();
    for (const Variable& x : head.trainable_variables()) v.push_back(x);
    return v;
  }
};

Tensor block_step(Block& model, optim::Adam& opt, const Tensor& x, const Tensor& y, bool training) {
  const std::vector<Variable> vars = model.variables();
  Tensor loss;
  std::vector<Tensor> grads;
  {
    GradientTape tape;
    loss = nn::mean_squared_error(y, model.head(model.encoder(x, {.use_causal_mask = true, .training = training})));
    grads = tape.gradient(loss, vars);
  }
  opt.apply_gradients(grads, vars);
  return loss;
}

TEST(TransformerEncoderLayer, TracedTrainStepMatchesEagerAndLearns) {
  const Tensor x = testing::seeded_values({2, 8, 16}, float32, 1);
  const Tensor y = testing::seeded_values({2, 8, 4}, float32, 2);
  Block eager_model(std::nullopt), traced_model(std::nullopt);
  optim::Adam eager_opt(0.01), traced_opt(0.01);
  auto traced_step = function([&](const Tensor& a, const Tensor& b) {
    return block_step(traced_model, traced_opt, a, b, true);
  }, {.name = "train_step"});
  float first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    const float le = block_step(eager_model, eager_opt, x, y, true).item<float>();
    const float lt = traced_step(x, y).item<float>();
    ASSERT_NEAR(le, lt, 1e-4f * (1 + std::abs(le))) << "step " << step;
    if (step == 0) first = le;
    last = le;
  }
  EXPECT_EQ(traced_step.tracing_count(), 1);
  EXPECT_LT(last, 0.5f * first);
  const std::vector<Variable> ev = eager_model.variables(), tv = traced_model.variables();
  for (std::size_t i = 0; i < ev.size(); ++i)
    EXPECT_TENSOR_NEAR(tv[i].read_value(), ev[i].read_value(), 1e-3) << ev[i].name();
}

TEST(TransformerEncoderLayer, DropoutStepsAgreeEagerAndTracedUnderOneSeed) {
  const Tensor x = testing::seeded_values({2, 8, 16}, float32, 1);
  const Tensor y = testing::seeded_values({2, 8, 4}, float32, 2);
  Block eager_model(5), traced_model(5);
  optim::Adam eager_opt(0.01), traced_opt(0.01);
  auto traced_step = function([&](const Tensor& a, const Tensor& b) {
    return block_step(traced_model, traced_opt, a, b, true);
  });
  set_random_seed(9);
  std::vector<float> eager_losses;
  for (int step = 0; step < 3; ++step) eager_losses.push_back(block_step(eager_model, eager_opt, x, y, true).item<float>());
  set_random_seed(9);
  for (int step = 0; step < 3; ++step)
    EXPECT_NEAR(traced_step(x, y).item<float>(), eager_losses[static_cast<std::size_t>(step)],
                1e-4f * (1 + std::abs(eager_losses[static_cast<std::size_t>(step)])))
        << "step " << step;
}

}  // namespace
}  // namespace tg
