// Composites (layers, optimizers, control flow) whose argument checks read the shapes seen while
// tracing: with None dims or an unknown rank in the input signature an invalid argument passed
// that check and broadcast, or was taken for a valid one, when the graph ran. Each case fails
// eagerly; traced, it must fail the same way instead of returning a plausible value (issue 33).
#include "support/test_util.h"

namespace tg {
namespace {

std::vector<TensorSpec> float_specs(std::initializer_list<TensorShape> shapes) {
  std::vector<TensorSpec> s;
  for (const auto& sh : shapes) s.emplace_back(sh, float32);
  return s;
}

// LayerNorm(5) on (4, 1) broadcast the one column against gamma and returned (4, 5).
TEST(NoneDimsChecks, LayerNormInputWithOneFeatureColumn) {
  nn::LayerNorm ln(5);
  auto f = function([&](const Tensor& x) { return ln(x); }, {.input_signature = float_specs({{None, None}})});
  EXPECT_THROW_MSG(ln(ones({4, 1})), InvalidArgumentError, "[LayerNorm]", "(4, 1)");
  EXPECT_THROW_MSG(f(ones({4, 1})), InvalidArgumentError, "[LayerNorm]", "(4, 1)", "when the graph ran",
                   "layer 'layer_norm' expects inputs whose last dimension is its 5 features");
  const Tensor x = testing::seeded_values({4, 5}, float32, 1);
  EXPECT_TRUE(testing::tensors_near(f(x), ln(x), 1e-6));
}

// BatchNorm(5) on (4, 1): the output broadcast to (4, 5) and, in training, the one column's mean
// and variance were averaged into every feature's moving statistics.
TEST(NoneDimsChecks, BatchNormInputWithOneFeatureColumn) {
  nn::BatchNorm bn(5);
  auto train = function([&](const Tensor& x) { return bn(x, true); }, {.input_signature = float_specs({{None, None}})});
  auto infer = function([&](const Tensor& x) { return bn(x, false); }, {.input_signature = float_specs({{None, None}})});
  auto flagged = function([&](const Tensor& x, const Tensor& t) { return bn(x, t); },
                          {.input_signature = std::vector<TensorSpec>{TensorSpec({None, None}, float32),
                                                                      TensorSpec({}, bool_)}});
  EXPECT_THROW_MSG(bn(ones({4, 1}), true), InvalidArgumentError, "[BatchNorm]", "(4, 1)");
  const Tensor bad = constant({{3.0f}, {5.0f}, {7.0f}, {9.0f}});
  EXPECT_THROW_MSG(train(bad), InvalidArgumentError, "[BatchNorm]", "the batch means have shape (1,)",
                   "gamma have shape (5,)", "its 5 features");
  EXPECT_THROW_MSG(infer(bad), InvalidArgumentError, "[BatchNorm]", "(4, 5)", "(4, 1)", "its 5 features");
  EXPECT_THROW_MSG(flagged(bad, constant(true)), InvalidArgumentError, "[BatchNorm]", "its 5 features");
  EXPECT_THROW_MSG(flagged(bad, constant(false)), InvalidArgumentError, "[BatchNorm]", "its 5 features");
  EXPECT_TENSOR_EQ(bn.moving_mean().read_value(), zeros({5}));
  EXPECT_TENSOR_EQ(bn.moving_variance().read_value(), ones({5}));
  const Tensor x = testing::seeded_values({4, 5}, float32, 2);
  nn::BatchNorm eager(5);
  EXPECT_TRUE(testing::tensors_near(train(x), eager(x, true), 1e-6));
  EXPECT_TRUE(testing::tensors_near(bn.moving_mean().read_value(), eager.moving_mean().read_value(), 1e-6));
}

// Dense(3 -> 2) traced on an unknown rank took a (2, 4, 3) input for a batch of matrices.
TEST(NoneDimsChecks, DenseInputOfUnknownRank) {
  nn::Dense d(3, 2);
  auto f = function([&](const Tensor& x) { return d(x); },
                    {.input_signature = float_specs({TensorShape::unknown_rank()})});
  EXPECT_THROW_MSG(d(ones({2, 4, 3})), InvalidArgumentError, "[Dense]", "(2, 4, 3)");
  EXPECT_THROW_MSG(f(ones({2, 4, 3})), InvalidArgumentError, "[Dense]", "(2, 4, 3)", "when the graph ran",
                   "layer 'dense' expects inputs of shape (batch, 3)");
  EXPECT_THROW_MSG(f(ones({3})), InvalidArgumentError, "(3,)");
  const Tensor x = testing::seeded_values({4, 3}, float32, 3);
  EXPECT_TRUE(testing::tensors_near(f(x), d(x), 1e-6));
}

// LSTMCell's state c meets the gates only elementwise: a (4, 1) c broadcast to (4, units).
TEST(NoneDimsChecks, LstmCellStateOfOneColumn) {
  nn::LSTMCell lstm(3, 2);
  auto f = function([&](const Tensor& x, const Tensor& h, const Tensor& c) {
    auto [h2, c2] = lstm(x, h, c);
    return std::vector<Tensor>{h2, c2};
  }, {.input_signature = float_specs({{None, None}, {None, None}, {None, None}})});
  EXPECT_THROW_MSG(lstm(ones({4, 3}), ones({4, 2}), ones({4, 1})), InvalidArgumentError, "[LSTMCell]",
                   "the state c of shape (batch, 2)");
  EXPECT_THROW_MSG(f(ones({4, 3}), ones({4, 2}), ones({4, 1})), InvalidArgumentError, "[LSTMCell]",
                   "the state c have shape (4, 1)", "when the graph ran", "expects the state c of shape (batch, 2)");
  const Tensor x = testing::seeded_values({4, 3}, float32, 4), h = testing::seeded_values({4, 2}, float32, 5),
               c = testing::seeded_values({4, 2}, float32, 6);
  const auto got = f(x, h, c);
  const auto [h_want, c_want] = lstm(x, h, c);
  EXPECT_TRUE(testing::tensors_near(got[0], h_want, 1e-6));
  EXPECT_TRUE(testing::tensors_near(got[1], c_want, 1e-6));
}

// Momentum SGD and RMSprop update with elementwise ops: a (1,) gradient of a (5,) variable
// broadcast into every slot entry and moved every weight.
template <class Opt>
void check_gradient_shape(Opt opt, const char* name) {
  SCOPED_TRACE(name);
  Variable v(zeros({5}), "v");
  auto step = function([&](const Tensor& g) { opt.apply_gradients({g}, {v}); },
                       {.input_signature = float_specs({{None}})});
  EXPECT_THROW_MSG(opt.apply_gradients({ones({1})}, {v}), InvalidArgumentError, "gradient 0 has shape (1,)");
  EXPECT_THROW_MSG(step(ones({1})), InvalidArgumentError, std::string("[") + name + ".apply_gradients]",
                   "gradient 0 have shape (1,)", "variable 'v' have shape (5,) when the graph ran",
                   "gradients must have their variable's shape");
  EXPECT_TENSOR_EQ(v.read_value(), zeros({5}));
  step(ones({5}));
  EXPECT_EQ(opt.iterations(), 1);
}

TEST(NoneDimsChecks, OptimizerGradientOfNoneDims) {
  check_gradient_shape(optim::SGD(0.1, 0.9), "SGD");
  check_gradient_shape(optim::SGD(0.1, 0.9, /*nesterov=*/true), "SGD");
  check_gradient_shape(optim::SGD(0.1), "SGD");
  check_gradient_shape(optim::RMSprop(0.1), "RMSprop");
  check_gradient_shape(optim::RMSprop(0.1, 0.9, 0.5, 1e-7, /*centered=*/true), "RMSprop");
  check_gradient_shape(optim::Adam(0.1), "Adam");
}

// A predicate of unknown rank that is (1,) at run time was taken for its one element; eagerly
// (and in TF) a predicate must be a scalar.
TEST(NoneDimsChecks, PredicateOfUnknownRank) {
  const std::vector<TensorSpec> unknown_bool{TensorSpec(TensorShape::unknown_rank(), bool_)};
  auto c = function([](const Tensor& p) { return cond(p, [] { return constant(1.0f); }, [] { return constant(2.0f); }); },
                    {.input_signature = unknown_bool});
  EXPECT_THROW_MSG(cond(constant({true}), [] { return constant(1.0f); }, [] { return constant(2.0f); }),
                   InvalidArgumentError, "[cond]", "(1,)");
  EXPECT_THROW_MSG(c(constant({true})), InvalidArgumentError, "[cond]", "scalar", "(1,) when the graph ran");
  EXPECT_TENSOR_EQ(c(constant(false)), constant(2.0f));
  auto w = function([](const Tensor& n) {
    return while_loop([&](const Tensor& i) { return i < n; }, [](const Tensor& i) { return i + 1; }, constant(0));
  }, {.input_signature = std::vector<TensorSpec>{TensorSpec(TensorShape::unknown_rank(), int32)}});
  EXPECT_THROW_MSG(w(constant({3})), InvalidArgumentError, "[while_loop]", "scalar", "(1,)");
  EXPECT_TENSOR_EQ(w(constant(3)), constant(3));
}

}  // namespace
}  // namespace tg
