// The regression and logit losses against hand-written references: values, +-1000 logits,
// finite-difference gradients, every execution mode, and typed errors.
#include <cmath>

#include "autodiff/grad_check.h"
#include "train/layer_test_util.h"

namespace tg {
namespace {

using testing::check_gradients;
using testing::expect_modes_agree;

const std::vector<double> kTargets{0.0, 1.0, 0.25, 1.0, 0.0, 0.5};
const std::vector<double> kPreds{0.5, -2.0, 0.3, 3.5, -0.1, 0.5};

TEST(MeanSquaredError, IsTheMeanOfSquaredErrors) {
  double sum = 0;
  for (std::size_t i = 0; i < kTargets.size(); ++i) sum += std::pow(kPreds[i] - kTargets[i], 2);
  const Tensor t = constant(kTargets, {2, 3}, float64), p = constant(kPreds, {2, 3}, float64);
  EXPECT_NEAR(nn::mean_squared_error(t, p).item<double>(), sum / 6, 1e-15);
  // Keras: mean over the last axis, then over the batch: the same for equal row lengths.
  EXPECT_NEAR(nn::mean_squared_error(cast(t, float32), cast(p, float32)).item<float>(), sum / 6, 1e-6);
  EXPECT_EQ(nn::mean_squared_error(t, p).shape(), TensorShape({}));
}

// Huber per element, in doubles.
double huber_ref(double t, double p, double delta) {
  const double e = std::fabs(p - t);
  return e <= delta ? 0.5 * e * e : delta * e - 0.5 * delta * delta;
}

TEST(Huber, QuadraticInsideDeltaLinearOutside) {
  const Tensor t = constant(kTargets, {2, 3}, float64), p = constant(kPreds, {2, 3}, float64);
  for (double delta : {1.0, 0.5, 2.0}) {
    double sum = 0;
    for (std::size_t i = 0; i < kTargets.size(); ++i) sum += huber_ref(kTargets[i], kPreds[i], delta);
    EXPECT_NEAR(nn::huber(t, p, delta).item<double>(), sum / 6, 1e-15) << delta;
  }
}

// TF's sigmoid_cross_entropy_with_logits, written out in long double from the definition
// -z log sigmoid(x) - (1 - z) log(1 - sigmoid(x)), valid for moderate x.
double bce_ref(double z, double x) {
  const long double s = 1.0L / (1.0L + std::exp(-static_cast<long double>(x)));
  return static_cast<double>(-z * std::log(s) - (1 - z) * std::log(1 - s));
}

TEST(BinaryCrossentropyWithLogits, MatchesTheDefinitionAndStaysExactForHugeLogits) {
  const Tensor z = constant(kTargets, {2, 3}, float64), x = constant(kPreds, {2, 3}, float64);
  double sum = 0;
  for (std::size_t i = 0; i < kTargets.size(); ++i) sum += bce_ref(kTargets[i], kPreds[i]);
  EXPECT_NEAR(nn::binary_crossentropy_with_logits(z, x).item<double>(), sum / 6, 1e-14);
  // +-1000: exp(1000) overflows, the stable form does not. Per element the loss is
  // max(x, 0) - x z + log1p(exp(-|x|)) = 1000 - 1000 z for x = 1000 and 1000 z for x = -1000.
  const Tensor big = constant({1000.0f, -1000.0f, 1000.0f, -1000.0f});
  const Tensor labels = constant({1.0f, 0.0f, 0.0f, 1.0f});
  EXPECT_FLOAT_EQ(nn::binary_crossentropy_with_logits(labels, big).item<float>(), (0 + 0 + 1000 + 1000) / 4.0f);
  GradientTape tape;
  tape.watch(big);
  const Tensor g = tape.gradient(nn::binary_crossentropy_with_logits(labels, big), big);
  // d/dx = (sigmoid(x) - z) / n.
  EXPECT_TENSOR_NEAR(g, constant({0.0f, 0.0f, 0.25f, -0.25f}), 1e-7);
}

TEST(BinaryCrossentropyWithLogits, GradientAtZeroIsSigmoidMinusLabel) {
  // The selects (not max and abs) give sigmoid(0) - z at x = 0, the true derivative.
  const Tensor x = constant({0.0, 0.0}), z = constant({0.0, 1.0});
  GradientTape tape;
  tape.watch(x);
  EXPECT_TENSOR_NEAR(tape.gradient(nn::binary_crossentropy_with_logits(z, x), x), constant({0.25, -0.25}), 1e-15);
}

TEST(SoftmaxCrossEntropyWithLogits, MatchesTheDefinitionAndStaysFiniteForHugeLogits) {
  const std::vector<double> logits{1.0, 2.0, 0.5, -3.0, 0.0, 3.0};
  const std::vector<double> labels{0.2, 0.7, 0.1, 0.0, 0.0, 1.0};
  double total = 0;
  for (int r = 0; r < 2; ++r) {
    double se = 0;
    for (int c = 0; c < 3; ++c) se += std::exp(logits[r * 3 + c]);
    for (int c = 0; c < 3; ++c) total -= labels[r * 3 + c] * (logits[r * 3 + c] - std::log(se));
  }
  const Tensor lt = constant(labels, {2, 3}, float64), zt = constant(logits, {2, 3}, float64);
  EXPECT_NEAR(nn::softmax_cross_entropy_with_logits(lt, zt).item<double>(), total / 2, 1e-14);
  // One-hot labels give sparse_softmax_cross_entropy.
  const Tensor onehot = constant({{0.0, 1.0, 0.0}, {1.0, 0.0, 0.0}}, float64);
  EXPECT_NEAR(nn::softmax_cross_entropy_with_logits(onehot, zt).item<double>(),
              nn::sparse_softmax_cross_entropy(zt, constant({1, 0})).item<double>(), 1e-14);
  // +-1000 logits: finite, and exactly the log-softmax gap.
  const Tensor big = constant({{1000.0f, -1000.0f}, {-1000.0f, 1000.0f}});
  const Tensor lab = constant({{1.0f, 0.0f}, {1.0f, 0.0f}});
  EXPECT_FLOAT_EQ(nn::softmax_cross_entropy_with_logits(lab, big).item<float>(), 1000.0f);
  GradientTape tape;
  tape.watch(big);
  // d/dlogits = (softmax - labels) / batch.
  EXPECT_TENSOR_NEAR(tape.gradient(nn::softmax_cross_entropy_with_logits(lab, big), big),
                     constant({{0.0f, 0.0f}, {-0.5f, 0.5f}}), 1e-7);
  // Rank 3 (batch, time, classes): the mean over batch and time.
  EXPECT_EQ(nn::softmax_cross_entropy_with_logits(reshape(lt, {1, 2, 3}), reshape(zt, {1, 2, 3})).shape(),
            TensorShape({}));
}

TEST(Losses, GradientsMatchFiniteDifferences) {
  testing::Random rng(21);
  const Tensor targets = rng.uniform({3, 4}, 0, 1), preds = rng.uniform({3, 4}, -3, 3);
  using F = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::pair<const char*, F>> losses{
      {"mean_squared_error", [](const Tensor& a, const Tensor& b) { return nn::mean_squared_error(a, b); }},
      {"huber", [](const Tensor& a, const Tensor& b) { return nn::huber(a, b, 0.7); }},
      {"binary_crossentropy_with_logits",
       [](const Tensor& a, const Tensor& b) { return nn::binary_crossentropy_with_logits(a, b); }},
      {"softmax_cross_entropy_with_logits",
       [](const Tensor& a, const Tensor& b) { return nn::softmax_cross_entropy_with_logits(a, b); }},
  };
  for (const auto& [name, loss] : losses) {
    // Gradients for both arguments (TF's losses differentiate the labels too).
    check_gradients({"", name, [loss = loss](const std::vector<Tensor>& in) { return loss(in[0], in[1]); },
                     {targets, preds}, 1e-6, 1e-6});
    expect_modes_agree([loss = loss](const std::vector<Tensor>& in) { return std::vector<Tensor>{loss(in[0], in[1])}; },
                       {targets, preds}, 1e-12);
  }
}

TEST(Losses, TypedErrorsForShapeAndDtypeMismatches) {
  const Tensor a = zeros({2, 3}), b = zeros({3, 2});
  EXPECT_THROW_MSG(nn::mean_squared_error(a, b), InvalidArgumentError, "[mean_squared_error]", "(2, 3)", "(3, 2)",
                   "do not broadcast");
  EXPECT_THROW_MSG(nn::mean_squared_error(zeros({4}), zeros({4, 1})), InvalidArgumentError, "(4,)", "(4, 1)");
  EXPECT_THROW_MSG(nn::huber(a, zeros({2, 3}, float64)), TypeError, "[huber]", "float32", "float64");
  EXPECT_THROW_MSG(nn::binary_crossentropy_with_logits(constant({1, 0}), constant({0.5f, 0.5f})), TypeError,
                   "[binary_crossentropy_with_logits]", "labels must be float32 or float64", "int32");
  EXPECT_THROW_MSG(nn::softmax_cross_entropy_with_logits(a, b), InvalidArgumentError,
                   "[softmax_cross_entropy_with_logits]");
  EXPECT_THROW_MSG(nn::softmax_cross_entropy_with_logits(constant(1.0f), constant(1.0f)), InvalidArgumentError,
                   "rank >= 1");
  EXPECT_THROW_MSG(nn::huber(a, a, 0.0), ValueError, "delta");
  EXPECT_THROW_MSG(nn::huber(a, a, std::nan("")), ValueError, "delta");
  EXPECT_THROW_MSG(nn::mean_squared_error(Tensor{}, a), ValueError, "empty");
  // Traced with a None batch, the known dims are still checked.
  auto f = function([](const Tensor& t, const Tensor& p) { return nn::mean_squared_error(t, p); },
                    {.input_signature = std::vector<TensorSpec>{TensorSpec({None, 3}, float32),
                                                                TensorSpec({None, 2}, float32)}});
  EXPECT_THROW_MSG(f(a, zeros({2, 2})), InvalidArgumentError, "(None, 3)", "(None, 2)");
}

}  // namespace
}  // namespace tg
