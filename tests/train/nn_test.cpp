// The initializers, Dropout, Dense, sparse_softmax_cross_entropy and accuracy against hand-written references.
#include <algorithm>
#include <cmath>

#include "support/test_util.h"

namespace tg {
namespace {

TEST(GlorotUniform, ShapeRangeSpreadAndSeeds) {
  const Tensor k = nn::glorot_uniform({300, 100}, 7);
  EXPECT_EQ(k.shape(), TensorShape({300, 100}));
  EXPECT_EQ(k.dtype(), float32);
  const double limit = std::sqrt(6.0 / 400.0);
  const auto v = k.to_vector<float>();
  double lo = 1e9, hi = -1e9, sum = 0, sq = 0;
  for (float f : v) {
    lo = std::min<double>(lo, f);
    hi = std::max<double>(hi, f);
    sum += f;
    sq += double(f) * f;
  }
  EXPECT_GE(lo, -limit);
  EXPECT_LT(hi, limit);
  EXPECT_GT(hi, 0.99 * limit) << "30000 draws reach the edges";
  EXPECT_LT(lo, -0.99 * limit);
  EXPECT_NEAR(sum / v.size(), 0.0, 0.01 * limit);
  // Uniform on [-l, l) has variance l^2 / 3 = 2 / (fan_in + fan_out).
  EXPECT_NEAR(sq / v.size(), 2.0 / 400.0, 0.05 * 2.0 / 400.0);
  EXPECT_TENSOR_EQ(nn::glorot_uniform({300, 100}, 7), k) << "same seed, same values";
  EXPECT_NE(nn::glorot_uniform({300, 100}, 8).to_vector<float>(), v);
}

TEST(GlorotUniform, FansForOtherRanksAndFloat64) {
  auto max_abs = [](const Tensor& t) {
    double m = 0;
    for (double x : cast(t, float64).to_vector<double>()) m = std::max(m, std::abs(x));
    return m;
  };
  // Vector: fan_in = fan_out = n. Rank 4 (3, 3, 8, 16): receptive field 9.
  EXPECT_LE(max_abs(nn::glorot_uniform({1000}, 1)), std::sqrt(6.0 / 2000.0));
  EXPECT_GT(max_abs(nn::glorot_uniform({1000}, 1)), 0.95 * std::sqrt(6.0 / 2000.0));
  const double l4 = std::sqrt(6.0 / (9 * 8 + 9 * 16));
  EXPECT_LE(max_abs(nn::glorot_uniform({3, 3, 8, 16}, 2)), l4);
  EXPECT_GT(max_abs(nn::glorot_uniform({3, 3, 8, 16}, 2)), 0.95 * l4);
  const Tensor d = nn::glorot_uniform({4, 5}, 3, float64);
  EXPECT_EQ(d.dtype(), float64);
  // float64 values are drawn in float64 (53 random bits), not widened float32 ones.
  EXPECT_LE(max_abs(d), std::sqrt(6.0 / 9.0));
  EXPECT_TENSOR_EQ(d, nn::glorot_uniform({4, 5}, 3, float64));
  EXPECT_EQ(nn::glorot_uniform({0, 5}, 3).shape(), TensorShape({0, 5}));
}

TEST(Dense, ForwardIsMatmulPlusBiasThenActivation) {
  nn::Dense layer(3, 2, relu, /*seed=*/5, float32, "hidden");
  layer.bias().assign(constant({0.5f, -10.0f}));
  const Tensor x = constant({{1.0f, 2.0f, 3.0f}, {-1.0f, 0.0f, 1.0f}});
  const auto k = layer.kernel().read_value().to_vector<float>();  // (3, 2) row-major
  std::vector<float> expected;
  const float xs[2][3] = {{1, 2, 3}, {-1, 0, 1}};
  const float b[2] = {0.5f, -10.0f};
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 2; ++c) {
      float s = b[c];
      for (int i = 0; i < 3; ++i) s += xs[r][i] * k[i * 2 + c];
      expected.push_back(std::max(s, 0.0f));
    }
  EXPECT_TENSOR_NEAR(layer(x), constant(expected, {2, 2}), 1e-6);
  EXPECT_EQ(layer.trainable_variables().size(), 2u);
  EXPECT_EQ(layer.kernel().name(), "hidden/kernel");
  EXPECT_EQ(layer.bias().read_value().shape(), TensorShape({2}));
  EXPECT_EQ(layer.in_features(), 3);
  EXPECT_EQ(layer.out_features(), 2);
  // Same seed, same kernel; no activation is the identity.
  nn::Dense linear(3, 2, nullptr, 5);
  EXPECT_TENSOR_EQ(linear.kernel().read_value(), layer.kernel().read_value());
  EXPECT_TENSOR_NEAR(linear(x), matmul(x, linear.kernel().read_value()), 1e-6);
}

TEST(Dense, TracedMatchesEagerWithUnknownBatch) {
  nn::Dense layer(4, 3, tanh, 11);
  auto f = function([&](const Tensor& x) { return layer(x); },
                    {.input_signature = std::vector<TensorSpec>{TensorSpec({None, 4}, float32)}});
  const Tensor x = random_uniform({5, 4}, -1, 1, 3);
  EXPECT_TENSOR_NEAR(f(x), layer(x), 1e-6);
  EXPECT_EQ(f.tracing_count(), 1);
}

// -log softmax(logits)[label], averaged, written out in doubles.
double reference_xent(const std::vector<std::vector<double>>& logits, const std::vector<int>& labels) {
  double total = 0;
  for (std::size_t r = 0; r < logits.size(); ++r) {
    double mx = -1e300;
    for (double z : logits[r]) mx = std::max(mx, z);
    double se = 0;
    for (double z : logits[r]) se += std::exp(z - mx);
    total += -(logits[r][labels[r]] - mx - std::log(se));
  }
  return total / static_cast<double>(logits.size());
}

TEST(Loss, SparseSoftmaxCrossEntropyMatchesReference) {
  const std::vector<std::vector<double>> z{{1.0, 2.0, 0.5}, {-3.0, 0.0, 3.0}, {100.0, 0.0, -100.0}};
  const std::vector<int> y{1, 0, 0};
  const Tensor logits = constant({{1.0f, 2.0f, 0.5f}, {-3.0f, 0.0f, 3.0f}, {100.0f, 0.0f, -100.0f}});
  const double expected = reference_xent(z, y);
  EXPECT_NEAR(nn::sparse_softmax_cross_entropy(logits, constant({1, 0, 0})).item<float>(), expected, 1e-5);
  EXPECT_NEAR(nn::sparse_softmax_cross_entropy(logits, constant({int64_t{1}, int64_t{0}, int64_t{0}}))
                  .item<float>(), expected, 1e-5);
  EXPECT_NEAR(nn::sparse_softmax_cross_entropy(cast(logits, float64), constant({1, 0, 0})).item<double>(),
              expected, 1e-12);
  // Traced with an unknown batch size.
  auto f = function([](const Tensor& l, const Tensor& t) { return nn::sparse_softmax_cross_entropy(l, t); },
                    {.input_signature = std::vector<TensorSpec>{TensorSpec({None, 3}, float32),
                                                                TensorSpec({None}, int32)}});
  EXPECT_NEAR(f(logits, constant({1, 0, 0})).item<float>(), expected, 1e-5);
}

TEST(Loss, AccuracyCountsArgmaxHits) {
  const Tensor logits = constant({{1.0f, 2.0f}, {3.0f, 0.0f}, {0.0f, 1.0f}, {5.0f, 4.0f}});
  EXPECT_FLOAT_EQ(nn::accuracy(logits, constant({1, 0, 0, 1})).item<float>(), 0.5f);
  EXPECT_FLOAT_EQ(nn::accuracy(logits, constant({1, 0, 1, 0})).item<float>(), 1.0f);
  EXPECT_FLOAT_EQ(nn::accuracy(logits, constant({int64_t{0}, int64_t{1}, int64_t{0}, int64_t{1}}))
                      .item<float>(), 0.0f);
}

// The sample standard deviation and the largest |value|.
std::pair<double, double> spread(const Tensor& t) {
  const auto v = cast(t, float64).to_vector<double>();
  double mean = 0, var = 0, max_abs = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  for (double x : v) {
    var += (x - mean) * (x - mean);
    max_abs = std::max(max_abs, std::fabs(x));
  }
  return {std::sqrt(var / static_cast<double>(v.size() - 1)), max_abs};
}

TEST(NormalInitializers, KerasStddevsAfterTruncationAndTwoStddevBounds) {
  // (400, 250): 1e5 values. Keras: stddev sqrt(scale / n) after truncation, drawn with
  // sqrt(scale / n) / 0.8796 before, so no value lies beyond 2 * that.
  const double he = std::sqrt(2.0 / 400.0), glorot = std::sqrt(2.0 / 650.0);
  const auto [he_sd, he_max] = spread(nn::he_normal({400, 250}, 1));
  EXPECT_NEAR(he_sd, he, 0.01 * he);
  EXPECT_LE(he_max, 2 * he / 0.87962566103423978 * (1 + 1e-6));
  EXPECT_GT(he_max, 1.9 * he / 0.87962566103423978);
  const auto [gl_sd, gl_max] = spread(nn::glorot_normal({400, 250}, 2, float64));
  EXPECT_NEAR(gl_sd, glorot, 0.01 * glorot);
  EXPECT_LE(gl_max, 2 * glorot / 0.87962566103423978 * (1 + 1e-9));
  // A conv kernel's fans include the receptive field: (3, 3, 16, 32) has fan_in 144.
  const auto [conv_sd, conv_max] = spread(nn::he_normal({3, 3, 16, 32}, 3));
  EXPECT_NEAR(conv_sd, std::sqrt(2.0 / 144.0), 0.03 * std::sqrt(2.0 / 144.0));
  (void)conv_max;
  const auto [tn_sd, tn_max] = spread(nn::truncated_normal({100000}, 4, 0.0, 0.05));
  EXPECT_NEAR(tn_sd, 0.05 * 0.87962566103423978, 0.0005);
  EXPECT_LE(tn_max, 0.1 * (1 + 1e-6));
}

TEST(NormalInitializers, ASeedGivesTheSameValuesOnEveryCallTracedOrNot) {
  EXPECT_TENSOR_EQ(nn::he_normal({8, 4}, 5), nn::he_normal({8, 4}, 5));
  EXPECT_FALSE(testing::tensors_near(nn::he_normal({8, 4}, 5), nn::he_normal({8, 4}, 6)));
  EXPECT_TENSOR_EQ(nn::glorot_normal({8, 4}, 5), nn::glorot_normal({8, 4}, 5));
  EXPECT_EQ(nn::he_normal({0, 4}, 5).shape(), TensorShape({0, 4}));
  EXPECT_EQ(nn::glorot_normal({4, 5}, 1, float64).dtype(), float64);
  // Inside a trace the value is made once, for a Variable's initial value.
  auto f = function([](const Tensor& x) { return x + nn::he_normal({4}, 9); });
  EXPECT_TENSOR_EQ(f(zeros({4})), nn::he_normal({4}, 9));
  EXPECT_TENSOR_EQ(nn::zeros({2}), constant({0.0f, 0.0f}));
  EXPECT_TENSOR_EQ(nn::ones({2}, int32), constant({1, 1}));
}

TEST(DropoutLayer, DropsWhileTrainingAndPassesThroughOtherwise) {
  nn::Dropout layer(0.5, /*seed=*/3);
  EXPECT_EQ(layer.rate(), 0.5);
  const Tensor x = ones({1000});
  EXPECT_EQ(layer(x, false).impl(), x.impl());
  const auto y = layer(x, true).to_vector<float>();
  const auto zeros_n = std::count(y.begin(), y.end(), 0.0f);
  EXPECT_NEAR(static_cast<double>(zeros_n), 500.0, 80.0);
  EXPECT_FALSE(testing::tensors_near(layer(x, true), layer(x, true)));  // a new mask per call
  auto step = function([&](const Tensor& in, const Tensor& training) { return layer(in, training); });
  EXPECT_TENSOR_EQ(step(x, constant(false)), x);
  EXPECT_FALSE(testing::tensors_near(step(x, constant(true)), step(x, constant(true))));
  EXPECT_EQ(step.tracing_count(), 1);
}

}  // namespace
}  // namespace tg
