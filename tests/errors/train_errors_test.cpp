// Expected failures of the optimizers, Dense, the initializer and the classifier loss: each names
// what was expected and what was received.
#include <limits>

#include "support/test_util.h"

namespace tg {
namespace {

TEST(OptimizerErrors, GradientsMustMatchTheVariables) {
  Variable a(constant({1.0f, 2.0f}), "a"), b(constant(1.0f), "b");
  optim::SGD opt(0.1);
  EXPECT_THROW_MSG(opt.apply_gradients({constant({1.0f, 1.0f})}, {a, b}), InvalidArgumentError,
                   "[SGD.apply_gradients]", "1 gradients for 2 variables");
  EXPECT_THROW_MSG(opt.apply_gradients({constant({1.0, 1.0}, float64)}, {a}), InvalidArgumentError,
                   "gradient 0 has dtype float64", "'a' has dtype float32", "tg::cast");
  EXPECT_THROW_MSG(opt.apply_gradients({constant({1.0f, 1.0f, 1.0f})}, {a}), InvalidArgumentError,
                   "gradient 0 has shape (3,)", "'a' has shape (2,)");
  EXPECT_THROW_MSG(opt.apply_gradients({constant({1.0f, 1.0f}), constant({1.0f, 1.0f})}, {a, a}),
                   InvalidArgumentError, "'a'", "listed twice");
  EXPECT_THROW_MSG(opt.apply_gradients({Tensor(), Tensor()}, {a, b}), ValueError,
                   "no gradients provided for any variable");
  EXPECT_THROW_MSG(opt.apply_gradients(std::vector<Tensor>{}, std::vector<Variable>{}), ValueError,
                   "no variables");
  Variable n(constant({1, 2}), "counts");
  EXPECT_THROW_MSG(opt.apply_gradients({constant({1, 1})}, {n}), TypeError, "'counts'", "int32",
                   "float32/float64");
  EXPECT_EQ(opt.iterations(), 0) << "failed calls change nothing";
  EXPECT_TENSOR_EQ(a.read_value(), constant({1.0f, 2.0f}));
}

TEST(OptimizerErrors, ShapesAreCheckedInsideTracesToo) {
  Variable a(constant({1.0f, 2.0f}), "a");
  optim::Adam opt;
  auto step = function([&](const Tensor& g) { opt.apply_gradients({g}, {a}); });
  EXPECT_THROW_MSG(step(constant({1.0f, 2.0f, 3.0f})), InvalidArgumentError,
                   "[Adam.apply_gradients]", "shape (3,)", "(2,)");
}

TEST(OptimizerErrors, HyperParameters) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW_MSG(optim::SGD(-0.1), ValueError, "[SGD] learning_rate", "-0.1");
  EXPECT_THROW_MSG(optim::SGD(nan), ValueError, "[SGD] learning_rate");
  EXPECT_THROW_MSG(optim::SGD(0.1, 1.5), ValueError, "[SGD] momentum must be in [0, 1]", "1.5");
  EXPECT_THROW_MSG(optim::SGD(0.1, -0.5), ValueError, "momentum");
  EXPECT_THROW_MSG(optim::Adam(0.1, 1.0), ValueError, "[Adam] beta1 must be in [0, 1)", "got 1");
  EXPECT_THROW_MSG(optim::Adam(0.1, 0.9, -0.1), ValueError, "[Adam] beta2");
  EXPECT_THROW_MSG(optim::Adam(0.1, 0.9, 0.999, -1e-8), ValueError, "[Adam] epsilon");
  optim::Adam opt;
  EXPECT_THROW_MSG(opt.set_learning_rate(-1), ValueError, "[Adam] learning_rate");
  EXPECT_DOUBLE_EQ(opt.learning_rate(), 0.001);
}

TEST(OptimizerErrors, Slots) {
  Variable a(constant(1.0f), "a");
  optim::SGD opt(0.1, 0.9);
  EXPECT_THROW_MSG(opt.slot(a, "momentum"), ValueError, "no slots for variable 'a' yet");
  opt.apply_gradients({constant(1.0f)}, {a});
  EXPECT_THROW_MSG(opt.slot(a, "m"), ValueError, "no slot 'm'", "'momentum'");
}

TEST(NnErrors, GlorotAndDense) {
  EXPECT_THROW_MSG(nn::glorot_uniform({None, 3}, 1), InvalidArgumentError, "[glorot_uniform]",
                   "(None, 3)");
  EXPECT_THROW_MSG(nn::glorot_uniform({2, 3}, 1, int32), TypeError, "[glorot_uniform]", "int32");
  EXPECT_THROW_MSG(nn::Dense(0, 3), InvalidArgumentError, "[Dense]", "in=0");
  nn::Dense layer(3, 2, nullptr, 1, float32, "fc");
  EXPECT_THROW_MSG(layer(ones({2, 4})), InvalidArgumentError, "[Dense]", "'fc'", "(batch, ..., 3)",
                   "(2, 4)");
  EXPECT_THROW_MSG(layer(ones({3})), InvalidArgumentError, "(batch, ..., 3)", "rank >= 2", "(3,)");
  EXPECT_THROW_MSG(layer(ones({2, 3}, float64)), InvalidArgumentError, "float32", "float64");
}

TEST(NnErrors, LossAndAccuracy) {
  const Tensor logits = ones({2, 3});
  EXPECT_THROW_MSG(nn::sparse_softmax_cross_entropy(logits, constant({0.0f, 1.0f})), TypeError,
                   "[sparse_softmax_cross_entropy]", "int32 or int64", "float32");
  EXPECT_THROW_MSG(nn::sparse_softmax_cross_entropy(ones({2, 3}, int32), constant({0, 1})),
                   TypeError, "logits must be float32 or float64");
  EXPECT_THROW_MSG(nn::sparse_softmax_cross_entropy(logits, constant({0, 1, 2})),
                   InvalidArgumentError, "batch size 2", "3");
  EXPECT_THROW_MSG(nn::sparse_softmax_cross_entropy(ones({3}), constant({0})), InvalidArgumentError,
                   "(batch, classes)", "(3,)");
  EXPECT_THROW_MSG(nn::sparse_softmax_cross_entropy(logits, constant({0, 3})), InvalidArgumentError,
                   "label 3 is outside [0, 3)");
  EXPECT_THROW_MSG(nn::sparse_softmax_cross_entropy(logits, constant({{0, 1}})),
                   InvalidArgumentError, "labels must have shape (batch,)");
  EXPECT_THROW_MSG(nn::accuracy(logits, constant({0.0f, 1.0f})), TypeError, "[accuracy]");
}

}  // namespace
}  // namespace tg
