// glorot_uniform, Dense, sparse_softmax_cross_entropy and accuracy against hand-written references.
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
  EXPECT_TENSOR_NEAR(cast(d, float32), nn::glorot_uniform({4, 5}, 3), 0.0);
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

}  // namespace
}  // namespace tg
