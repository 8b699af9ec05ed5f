// Embedding, LayerNorm and BatchNorm against hand-written references: eagerly, traced and traced
// with the optimiser, finite-difference gradients, the moving statistics, and typed errors.
#include <cmath>

#include "autodiff/grad_check.h"
#include "train/layer_test_util.h"

namespace tg {
namespace {

using testing::check_gradients;
using testing::check_variable_gradients;
using testing::expect_modes_agree;

// ---- Embedding ----

TEST(Embedding, GathersRowsForIdsOfAnyShape) {
  nn::Embedding emb(5, 3, /*seed=*/4);
  const Tensor table = emb.embeddings().read_value();
  EXPECT_EQ(table.shape(), TensorShape({5, 3}));
  EXPECT_EQ(emb.embeddings().name(), "embedding/embeddings");
  for (float v : table.to_vector<float>()) {
    EXPECT_GE(v, -0.05f);  // Keras's "uniform" initializer
    EXPECT_LT(v, 0.05f);
  }
  const auto t = table.to_vector<float>();
  const Tensor y = emb(constant({{4, 0, 2}, {1, 1, 3}}));
  ASSERT_EQ(y.shape(), TensorShape({2, 3, 3}));
  const int ids[6] = {4, 0, 2, 1, 1, 3};
  std::vector<float> expected;
  for (int id : ids)
    for (int d = 0; d < 3; ++d) expected.push_back(t[static_cast<std::size_t>(id * 3 + d)]);
  EXPECT_TENSOR_EQ(y, constant(expected, {2, 3, 3}));
  EXPECT_TENSOR_EQ(emb(constant({int64_t{4}, int64_t{0}})), slice(y, {0, 0, 0}, {1, 2, 3})[0]);
  EXPECT_EQ(emb(constant(2)).shape(), TensorShape({3}));  // a scalar id gives one row
  expect_modes_agree([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{emb(in[0])}; },
                     {constant({{4, 0, 2}, {1, 1, 3}})}, 0.0);
}

TEST(Embedding, GradientCountsEachUseOfARow) {
  nn::Embedding emb(4, 2, 1, float64);
  const Tensor ids = constant({3, 1, 3});
  const Tensor w = constant({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}}, float64);
  check_variable_gradients([&] { return reduce_sum(emb(ids) * w); }, {emb.embeddings()});
  GradientTape tape;
  const Tensor g = tape.gradient(reduce_sum(emb(ids) * w), {emb.embeddings()})[0];
  // Row 3 is used twice (rows 0 and 2 of w), row 1 once, rows 0 and 2 never.
  EXPECT_TENSOR_NEAR(g, constant({{0.0, 0.0}, {3.0, 4.0}, {0.0, 0.0}, {6.0, 8.0}}, float64), 1e-12);
}

TEST(Embedding, TypedErrors) {
  EXPECT_THROW_MSG(nn::Embedding(0, 3), InvalidArgumentError, "[Embedding]", "vocab > 0");
  EXPECT_THROW_MSG(nn::Embedding(3, -1), InvalidArgumentError, "dim > 0");
  EXPECT_THROW_MSG(nn::Embedding(3, 2, 0, int32), TypeError, "float32 or float64");
  nn::Embedding emb(5, 3);
  EXPECT_THROW_MSG(emb(constant({1, 5})), InvalidArgumentError, "[Embedding]", "id 5", "[0, 5)");
  EXPECT_THROW_MSG(emb(constant({int64_t{-1}})), InvalidArgumentError, "id -1");
  EXPECT_THROW_MSG(emb(constant({1.0f})), TypeError, "int32 or int64");
  EXPECT_THROW_MSG(emb(Tensor{}), ValueError, "empty");
  // Inside a trace the ids are checked when the graph runs: the same error type, never a read
  // outside the table.
  auto f = function([&](const Tensor& ids) { return emb(ids); });
  EXPECT_THROW_MSG(f(constant({0, 7})), InvalidArgumentError, "[gather]", "7");
}

// ---- LayerNorm ----

// (x - mean) / sqrt(var + eps) * gamma + beta per row, in doubles.
std::vector<double> layer_norm_reference(const std::vector<double>& x, std::size_t features, double eps,
                                         const std::vector<double>& gamma, const std::vector<double>& beta) {
  std::vector<double> out(x.size());
  for (std::size_t r = 0; r < x.size() / features; ++r) {
    double mean = 0, var = 0;
    for (std::size_t c = 0; c < features; ++c) mean += x[r * features + c];
    mean /= static_cast<double>(features);
    for (std::size_t c = 0; c < features; ++c) var += std::pow(x[r * features + c] - mean, 2);
    var /= static_cast<double>(features);
    for (std::size_t c = 0; c < features; ++c)
      out[r * features + c] = (x[r * features + c] - mean) / std::sqrt(var + eps) * gamma[c] + beta[c];
  }
  return out;
}

TEST(LayerNorm, NormalisesTheLastAxisWithGammaAndBeta) {
  nn::LayerNorm ln(4, 1e-3, float64);
  EXPECT_TENSOR_EQ(ln.gamma().read_value(), ones({4}, float64));
  EXPECT_TENSOR_EQ(ln.beta().read_value(), zeros({4}, float64));
  const std::vector<double> gamma{1.5, -0.5, 2.0, 1.0}, beta{0.1, 0.2, -0.3, 0.0};
  ln.gamma().assign(constant(gamma, {4}, float64));
  ln.beta().assign(constant(beta, {4}, float64));
  const std::vector<double> x{1, 2, 3, 4, -1, 0.5, 7, 2, 0, 0, 0, 1, 3, 3, 3, 3, 10, -10, 5, 1, 0.1, 0.2, 0.3, 0.4};
  const Tensor xt = constant(x, {2, 3, 4}, float64);
  EXPECT_TENSOR_NEAR(ln(xt), constant(layer_norm_reference(x, 4, 1e-3, gamma, beta), {2, 3, 4}, float64), 1e-12);
  // A constant row becomes beta (variance 0, epsilon keeps it finite).
  const auto y = ln(xt).to_vector<double>();
  EXPECT_NEAR(y[12], beta[0], 1e-12);
  expect_modes_agree([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{ln(in[0])}; }, {xt}, 1e-12);
  // float32, unknown batch while tracing.
  nn::LayerNorm ln32(4);
  auto f = function([&](const Tensor& in) { return ln32(in); },
                    {.input_signature = std::vector<TensorSpec>{TensorSpec({None, 4}, float32)}});
  const Tensor x32 = cast(slice(xt, {0, 0, 0}, {1, 3, 4})[0], float32);
  EXPECT_TENSOR_NEAR(f(x32), ln32(x32), 1e-6);
}

TEST(LayerNorm, GradientsMatchFiniteDifferences) {
  nn::LayerNorm ln(3, 1e-3, float64);
  ln.gamma().assign(constant({1.2, 0.7, -0.4}, float64));
  ln.beta().assign(constant({0.3, -0.2, 0.1}, float64));
  testing::Random rng(3);
  check_gradients({"", "LayerNorm input", [&](const std::vector<Tensor>& in) { return ln(in[0]); },
                   {rng.uniform({4, 3}, -2, 2)}, 1e-6, 1e-6});
  const Tensor x = rng.uniform({4, 3}, -2, 2), w = rng.uniform({4, 3}, 0.5, 1.5);
  check_variable_gradients([&] { return reduce_sum(ln(x) * w); }, ln.trainable_variables());
}

TEST(LayerNorm, TypedErrors) {
  EXPECT_THROW_MSG(nn::LayerNorm(0), InvalidArgumentError, "[LayerNorm]", "features > 0");
  EXPECT_THROW_MSG(nn::LayerNorm(3, -1.0), InvalidArgumentError, "epsilon");
  EXPECT_THROW_MSG(nn::LayerNorm(3, 1e-3, int64), TypeError, "float32 or float64");
  nn::LayerNorm ln(3);
  EXPECT_THROW_MSG(ln(zeros({2, 4})), InvalidArgumentError, "[LayerNorm]", "last dimension", "(2, 4)");
  EXPECT_THROW_MSG(ln(zeros({2, 3}, float64)), InvalidArgumentError, "dtype float32", "float64");
  EXPECT_THROW_MSG(ln(constant(1.0f)), InvalidArgumentError, "rank >= 1");
}

// ---- BatchNorm ----

struct Moments {
  std::vector<double> mean, var;
};
// Per-feature mean and biased variance over every row of a (rows, features) matrix.
Moments moments_of(const std::vector<double>& x, std::size_t features) {
  const std::size_t rows = x.size() / features;
  Moments m{std::vector<double>(features), std::vector<double>(features)};
  for (std::size_t c = 0; c < features; ++c) {
    for (std::size_t r = 0; r < rows; ++r) m.mean[c] += x[r * features + c];
    m.mean[c] /= static_cast<double>(rows);
    for (std::size_t r = 0; r < rows; ++r) m.var[c] += std::pow(x[r * features + c] - m.mean[c], 2);
    m.var[c] /= static_cast<double>(rows);
  }
  return m;
}
std::vector<double> normalized(const std::vector<double>& x, const Moments& m, double eps,
                               const std::vector<double>& gamma, const std::vector<double>& beta) {
  const std::size_t f = m.mean.size();
  std::vector<double> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    out[i] = (x[i] - m.mean[i % f]) / std::sqrt(m.var[i % f] + eps) * gamma[i % f] + beta[i % f];
  return out;
}

TEST(BatchNorm, TrainingUsesBatchStatisticsAndUpdatesTheMovingOnes) {
  nn::BatchNorm bn(2, /*momentum=*/0.9, /*epsilon=*/1e-3, float64);
  const std::vector<double> gamma{2.0, 0.5}, beta{0.25, -1.0};
  bn.gamma().assign(constant(gamma, {2}, float64));
  bn.beta().assign(constant(beta, {2}, float64));
  const std::vector<double> x{1, 10, 2, 20, 4, 40, 5, 30};  // (4, 2)
  const Tensor xt = constant(x, {4, 2}, float64);
  const Moments m = moments_of(x, 2);
  EXPECT_TENSOR_NEAR(bn(xt, true), constant(normalized(x, m, 1e-3, gamma, beta), {4, 2}, float64), 1e-12);
  // moving = moving * 0.9 + batch * 0.1, from zeros / ones.
  std::vector<double> mm(2), mv(2);
  for (int c = 0; c < 2; ++c) {
    mm[c] = 0.0 * 0.9 + m.mean[c] * 0.1;
    mv[c] = 1.0 * 0.9 + m.var[c] * 0.1;
  }
  EXPECT_TENSOR_NEAR(bn.moving_mean().read_value(), constant(mm, {2}, float64), 1e-12);
  EXPECT_TENSOR_NEAR(bn.moving_variance().read_value(), constant(mv, {2}, float64), 1e-12);
  // Inference: the moving statistics, and nothing is updated.
  EXPECT_TENSOR_NEAR(bn(xt, false), constant(normalized(x, Moments{mm, mv}, 1e-3, gamma, beta), {4, 2}, float64),
                     1e-12);
  EXPECT_TENSOR_NEAR(bn(xt, constant(false)),
                     constant(normalized(x, Moments{mm, mv}, 1e-3, gamma, beta), {4, 2}, float64), 1e-12);
  EXPECT_TENSOR_NEAR(bn.moving_mean().read_value(), constant(mm, {2}, float64), 1e-12);
  EXPECT_EQ(bn.trainable_variables().size(), 2u);
  EXPECT_EQ(bn.non_trainable_variables()[1].name(), "batch_norm/moving_variance");
}

TEST(BatchNorm, ImagesReduceOverEveryAxisButChannels) {
  nn::BatchNorm bn(3, 0.99, 1e-3, float64);
  testing::Random rng(5);
  const Tensor x = rng.uniform({2, 4, 5, 3}, -3, 3);
  const Moments m = moments_of(x.to_vector<double>(), 3);
  EXPECT_TENSOR_NEAR(bn(x, true), constant(normalized(x.to_vector<double>(), m, 1e-3, {1, 1, 1}, {0, 0, 0}),
                                           {2, 4, 5, 3}, float64), 1e-12);
}

TEST(BatchNorm, EveryModeAgreesWithALiteralOrATensorFlagAndTheStatisticsAdvancePerCall) {
  nn::BatchNorm bn(3, 0.8, 1e-3, float64);
  testing::Random rng(8);
  const Tensor x = rng.uniform({5, 3}, -2, 2);
  auto reset = [&] {
    bn.moving_mean().assign(zeros({3}, float64));
    bn.moving_variance().assign(ones({3}, float64));
  };
  auto step = [&](const std::vector<Tensor>& in) {
    // Training, then inference with the just-updated statistics, then a runtime flag both ways.
    const Tensor a = bn(in[0], true);
    const Tensor b = bn(in[0], false);
    const Tensor c = bn(in[0], in[1]);
    const Tensor d = bn(in[0], logical_not(in[1]));
    return std::vector<Tensor>{a, b, c, d, bn.moving_mean().read_value(), bn.moving_variance().read_value()};
  };
  expect_modes_agree(step, {x, constant(true)}, 1e-12, reset);
  expect_modes_agree(step, {x, constant(false)}, 1e-12, reset);

  // A traced train step run many times: the assigns run at every call, in order.
  reset();
  auto train = function([&](const Tensor& in, const Tensor& training) { return bn(in, training); });
  const Moments m = moments_of(x.to_vector<double>(), 3);
  std::vector<double> mm(3, 0.0), mv(3, 1.0);
  for (int call = 0; call < 5; ++call) {
    train(x, constant(true));
    train(x, constant(false));  // inference between the steps changes nothing
    for (int c = 0; c < 3; ++c) {
      mm[c] = mm[c] * 0.8 + m.mean[c] * 0.2;
      mv[c] = mv[c] * 0.8 + m.var[c] * 0.2;
    }
  }
  EXPECT_EQ(train.tracing_count(), 1);
  EXPECT_TENSOR_NEAR(bn.moving_mean().read_value(), constant(mm, {3}, float64), 1e-12);
  EXPECT_TENSOR_NEAR(bn.moving_variance().read_value(), constant(mv, {3}, float64), 1e-12);
}

TEST(BatchNorm, GradientsFlowThroughTheBatchStatistics) {
  nn::BatchNorm bn(2, 0.99, 1e-3, float64);
  bn.gamma().assign(constant({1.3, -0.6}, float64));
  bn.beta().assign(constant({0.2, 0.4}, float64));
  testing::Random rng(11);
  // Finite differences see the statistics move with x: only a gradient through them matches.
  check_gradients({"", "BatchNorm training", [&](const std::vector<Tensor>& in) { return bn(in[0], true); },
                   {rng.uniform({5, 2}, -2, 2)}, 1e-6, 1e-6});
  check_gradients({"", "BatchNorm inference", [&](const std::vector<Tensor>& in) { return bn(in[0], false); },
                   {rng.uniform({5, 2}, -2, 2)}, 1e-6, 1e-6});
  const Tensor x = rng.uniform({5, 2}, -2, 2), w = rng.uniform({5, 2}, 0.5, 1.5);
  check_variable_gradients([&] { return reduce_sum(bn(x, true) * w); }, bn.trainable_variables());
  // With a runtime flag the selected branch gets the gradient.
  auto grad_x = function([&](const Tensor& in, const Tensor& training) {
    GradientTape tape;
    tape.watch(in);
    return tape.gradient(reduce_sum(bn(in, training) * w), in);
  });
  GradientTape tape;
  tape.watch(x);
  const Tensor eager = tape.gradient(reduce_sum(bn(x, true) * w), x);
  EXPECT_TENSOR_NEAR(grad_x(x, constant(true)), eager, 1e-10);
}

TEST(BatchNorm, TypedErrors) {
  EXPECT_THROW_MSG(nn::BatchNorm(0), InvalidArgumentError, "[BatchNorm]", "features > 0");
  EXPECT_THROW_MSG(nn::BatchNorm(2, 1.5), InvalidArgumentError, "momentum");
  EXPECT_THROW_MSG(nn::BatchNorm(2, 0.9, -1.0), InvalidArgumentError, "epsilon");
  nn::BatchNorm bn(2);
  EXPECT_THROW_MSG(bn(zeros({4}), true), InvalidArgumentError, "rank >= 2");
  EXPECT_THROW_MSG(bn(zeros({4, 3}), true), InvalidArgumentError, "last dimension");
  EXPECT_THROW_MSG(bn(zeros({4, 2}), constant(1)), TypeError, "bool scalar", "int32");
  EXPECT_THROW_MSG(bn(zeros({4, 2}), constant({true, false})), TypeError, "bool scalar");
  EXPECT_THROW_MSG(bn(zeros({4, 2}, float64), false), InvalidArgumentError, "dtype");
  EXPECT_THROW_MSG(bn(zeros({0, 2}), true), InvalidArgumentError, "empty batch");
  EXPECT_EQ(bn.moving_mean().read_value().to_vector<float>(), (std::vector<float>{0.0f, 0.0f}));
  EXPECT_EQ(bn(zeros({0, 2}), false).shape(), TensorShape({0, 2}));  // inference is fine
}

}  // namespace
}  // namespace tg
