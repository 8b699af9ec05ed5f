// Composites (layers, optimizers, control flow) whose argument checks read the shapes seen while
// tracing: with None dims or an unknown rank in the input signature an invalid argument passed
// that check and broadcast, or was taken for a valid one, when the graph ran. Each case fails
// eagerly; traced, it must fail the same way instead of returning a plausible value (issue 33).
#include <unistd.h>

#include <cstdio>

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

// Dense(3 -> 2) traced on an unknown rank contracts the last axis of any rank >= 2, as Keras's
// Dense does; matmul checks the sizes when the graph runs.
TEST(NoneDimsChecks, DenseInputOfUnknownRank) {
  nn::Dense d(3, 2);
  auto f = function([&](const Tensor& x) { return d(x); },
                    {.input_signature = float_specs({TensorShape::unknown_rank()})});
  const Tensor x3 = testing::seeded_values({2, 4, 3}, float32, 5);
  EXPECT_TRUE(testing::tensors_near(f(x3), d(x3), 1e-6));
  EXPECT_THROW_MSG(f(ones({2, 4, 4})), InvalidArgumentError, "[matmul]", "(2, 4, 4)");
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

// einsum compared a letter's sizes only when both were known while tracing: over None dims the
// mul or the batched matmul it lowers to broadcast a size of 1 against any other, where eagerly
// the sizes must be equal.
// `traced` is einsum(eq, a, b) over all-None dims of the ranks of bad_a and bad_b.
template <class F>
void check_einsum_letter(F& traced, const std::string& eq, char letter, std::vector<int64_t> bad_a,
                         std::vector<int64_t> bad_b, std::vector<int64_t> good_a, std::vector<int64_t> good_b) {
  SCOPED_TRACE(eq);
  const Tensor a = testing::seeded_values(bad_a, float32, 7), b = testing::seeded_values(bad_b, float32, 8);
  const std::string names = std::string("the letter '") + letter + "' in \"" + eq + "\"";
  EXPECT_THROW_MSG(einsum(eq, a, b), InvalidArgumentError, "[einsum]", names, "the sizes must be equal");
  EXPECT_THROW_MSG(traced(a, b), InvalidArgumentError, "[einsum]", "when the graph ran", names,
                   "their sizes must be equal");
  const Tensor ga = testing::seeded_values(good_a, float32, 9), gb = testing::seeded_values(good_b, float32, 10);
  EXPECT_TRUE(testing::tensors_near(traced(ga, gb), einsum(eq, ga, gb), 1e-5));
}

// einsum(eq, a, b) traced over all-None dims of ranks ra and rb.
#define TRACED_EINSUM(eq, ra, rb)                                                                 \
  function([](const Tensor& x, const Tensor& y) { return einsum(eq, x, y); },                     \
           {.input_signature = float_specs({TensorShape(std::vector<int64_t>(ra, None)),          \
                                            TensorShape(std::vector<int64_t>(rb, None))})})

TEST(NoneDimsChecks, EinsumLettersOfNoneSize) {
  auto mul = TRACED_EINSUM("ij,ij->ij", 2, 2);
  check_einsum_letter(mul, "ij,ij->ij", 'i', {1, 3}, {4, 3}, {4, 3}, {4, 3});  // a broadcasting mul
  auto batched = TRACED_EINSUM("bij,bjk->bik", 3, 3);
  check_einsum_letter(batched, "bij,bjk->bik", 'b', {1, 2, 3}, {4, 3, 5}, {4, 2, 3}, {4, 3, 5});  // matmul's batch
  auto summed = TRACED_EINSUM("ijk,jkl->il", 3, 3);
  check_einsum_letter(summed, "ijk,jkl->il", 'j', {2, 1, 4}, {3, 4, 5}, {2, 3, 4}, {3, 4, 5});  // mul, then sum
  auto outer = TRACED_EINSUM("bi,bj->bij", 2, 2);
  check_einsum_letter(outer, "bi,bj->bij", 'b', {1, 3}, {4, 2}, {4, 3}, {4, 2});  // an outer product
  auto product = TRACED_EINSUM("ij,jk->ik", 2, 2);
  check_einsum_letter(product, "ij,jk->ik", 'j', {2, 1}, {3, 4}, {2, 3}, {3, 4});  // matmul's K
  // A diagonal needs its own letter known; the shared letter may still be None.
  auto diagonal = function([](const Tensor& x, const Tensor& y) { return einsum("iij,j->i", x, y); },
                           {.input_signature = float_specs({{2, 2, None}, {None}})});
  EXPECT_THROW_MSG(einsum("iij,j->i", ones({2, 2, 1}), ones({3})), InvalidArgumentError, "the letter 'j'",
                   "the sizes must be equal");
  EXPECT_THROW_MSG(diagonal(ones({2, 2, 1}), ones({3})), InvalidArgumentError, "when the graph ran",
                   "the letter 'j' in \"iij,j->i\"");
  EXPECT_TENSOR_EQ(diagonal(ones({2, 2, 3}), ones({3})), constant({3.0f, 3.0f}));
  // None on one side only: operand 1's known size is operand 0's while tracing.
  std::string traced;
  auto g = function([&](const Tensor& x, const Tensor& y) {
    const Tensor r = einsum("ij,ij->ij", x, y);
    traced = r.shape().to_string();
    return r;
  }, {.input_signature = float_specs({{None, 3}, {4, 3}})});
  EXPECT_THROW_MSG(g(ones({1, 3}), ones({4, 3})), InvalidArgumentError, "[einsum]",
                   "dim 0 of operand 0 (shape (1, 3)) is 1 but dim 0 of operand 1 (shape (4, 3)) is 4",
                   "the letter 'i' in \"ij,ij->ij\" names both dims");
  EXPECT_EQ(traced, "(4, 3)");
  EXPECT_TENSOR_EQ(g(ones({4, 3}), ones({4, 3})), ones({4, 3}));
  // Saved and loaded, the check (its dims among the node's attributes) comes along.
  const std::string path = ::testing::TempDir() + "tg_none_dims_einsum_" + std::to_string(::getpid()) + ".tgx";
  save(path, g);
  LoadedFunction loaded = load(path);
  std::remove(path.c_str());
  EXPECT_THROW_MSG(loaded(ones({1, 3}), ones({4, 3})), InvalidArgumentError, "[einsum]", "when the graph ran",
                   "the letter 'i'");
  EXPECT_TENSOR_EQ(Tensor(loaded(ones({4, 3}), ones({4, 3}))), ones({4, 3}));
}

#undef TRACED_EINSUM

// tg::matmul broadcasts batch dims of size 1 eagerly (as TF's BatchMatMulV2), so the same
// broadcast over None dims is no silent difference; sizes that do not broadcast fail either way.
TEST(NoneDimsChecks, MatmulBroadcastsBatchDimsAsEagerly) {
  const Tensor a = testing::seeded_values({1, 2, 3}, float32, 11), b = testing::seeded_values({4, 3, 5}, float32, 12);
  auto f = function([](const Tensor& x, const Tensor& y) { return matmul(x, y); },
                    {.input_signature = float_specs({{None, None, None}, {None, None, None}})});
  const Tensor eager = matmul(a, b);
  EXPECT_EQ(eager.shape().to_string(), "(4, 2, 5)");
  EXPECT_TRUE(testing::tensors_near(f(a, b), eager, 1e-6));
  const Tensor c = testing::seeded_values({2, 2, 3}, float32, 13);
  EXPECT_THROW_MSG(matmul(c, b), InvalidArgumentError, "[matmul]");
  EXPECT_THROW_MSG(f(c, b), InvalidArgumentError, "[matmul]");
  EXPECT_THROW_MSG(f(a, testing::seeded_values({4, 2, 5}, float32, 14)), InvalidArgumentError, "[matmul]");
}

// clip_by_value's bounds may not enlarge x: with x (None,) or of unknown rank, hi (3,) turned
// x (1,) into (3,), where eagerly it is an error.
TEST(NoneDimsChecks, ClipByValueBoundsThatEnlargeX) {
  const Tensor lo = constant(0.0f), hi = constant({1.0f, 2.0f, 3.0f});
  EXPECT_THROW_MSG(clip_by_value(constant({5.0f}), lo, hi), ValueError, "[clip_by_value]",
                   "hi of shape (3,) would broadcast x of shape (1,) to (3,)", "without enlarging it");
  EXPECT_THROW_MSG(clip_by_value(constant({5.0f}), hi - 5.0f, constant(9.0f)), ValueError, "[clip_by_value]",
                   "lo of shape (3,)", "without enlarging it");
  for (const TensorShape& spec : {TensorShape{None}, TensorShape::unknown_rank()}) {
    SCOPED_TRACE(spec.to_string());
    auto f = function([&](const Tensor& x) { return clip_by_value(x, lo, hi); }, {.input_signature = float_specs({spec})});
    EXPECT_THROW_MSG(f(constant({5.0f})), InvalidArgumentError, "[clip_by_value]",
                     "the clipped values have shape (3,) but the values of x have shape (1,) when the graph ran",
                     "lo and hi must broadcast to x's shape without enlarging it");
    EXPECT_TENSOR_EQ(f(constant({5.0f, -1.0f, 2.5f})), constant({1.0f, 0.0f, 2.5f}));
    auto g = function([&](const Tensor& x) { return clip_by_value(x, hi - 5.0f, constant(9.0f)); },
                      {.input_signature = float_specs({spec})});
    EXPECT_THROW_MSG(g(constant({5.0f})), InvalidArgumentError, "[clip_by_value]", "when the graph ran");
    if (!spec.has_rank()) {
      EXPECT_THROW_MSG(f(constant({{5.0f}, {1.0f}})), InvalidArgumentError, "[clip_by_value]", "(2, 3)", "(2, 1)");
      EXPECT_TENSOR_EQ(f(constant({{5.0f, -1.0f, 2.5f}})), constant({{1.0f, 0.0f, 2.5f}}));
    }
  }
}

// accuracy compared argmax (batch,) with labels by a broadcasting equal: labels of (4, 1) gave
// a (4, 4) table of hits and a plausible wrong accuracy, eagerly too. Like Keras's sparse
// categorical accuracy it squeezes labels of (batch, 1); other shapes are an error.
TEST(NoneDimsChecks, AccuracyLabelsOfOneColumn) {
  const Tensor logits = constant({{5.0f, 0.0f, 0.0f}, {0.0f, 5.0f, 0.0f}, {0.0f, 0.0f, 5.0f}, {5.0f, 0.0f, 0.0f}});
  const Tensor labels = constant({0, 1, 1, 0}), column = constant({{0}, {1}, {1}, {0}});
  EXPECT_TENSOR_EQ(nn::accuracy(logits, labels), constant(0.75f));
  EXPECT_TENSOR_EQ(nn::accuracy(logits, column), constant(0.75f));
  EXPECT_TENSOR_EQ(nn::accuracy(logits, cast(column, int64)), constant(0.75f));
  EXPECT_THROW_MSG(nn::accuracy(logits, constant({{0, 1}, {1, 1}, {1, 2}, {0, 0}})), InvalidArgumentError,
                   "[accuracy] labels have shape (4, 2)", "labels of shape (batch,) or (batch, 1)");
  EXPECT_THROW_MSG(nn::accuracy(logits, constant({0, 1, 1})), InvalidArgumentError,
                   "[accuracy] labels have shape (3,) but the predictions (argmax of logits) have shape (4,)");
  EXPECT_THROW_MSG(nn::accuracy(logits, constant({{0}, {1}, {1}})), InvalidArgumentError, "(3, 1)", "(4, 1)");
  EXPECT_THROW_MSG(nn::accuracy(logits, constant({{{0}}, {{1}}, {{1}}, {{0}}})), InvalidArgumentError,
                   "labels have shape (4, 1, 1)");
  EXPECT_THROW_MSG(nn::accuracy(logits, constant(0)), InvalidArgumentError, "labels have shape ()");

  const auto traced = [](const TensorShape& label_spec) {
    return function([](const Tensor& l, const Tensor& y) { return nn::accuracy(l, y); },
                    {.input_signature = std::vector<TensorSpec>{TensorSpec({None, None}, float32),
                                                                TensorSpec(label_spec, int32)}});
  };
  auto two = traced({None, None});
  EXPECT_TENSOR_EQ(two(logits, column), constant(0.75f));
  EXPECT_THROW_MSG(two(logits, constant({{0, 1}, {1, 1}, {1, 2}, {0, 0}})), InvalidArgumentError,
                   "[accuracy] labels have shape (4, 2)", "(4, 1) when the graph ran",
                   "labels of shape (batch,) or (batch, 1)");
  EXPECT_THROW_MSG(two(logits, constant({{0}, {1}, {1}})), InvalidArgumentError, "(3, 1)", "when the graph ran");
  auto one = traced({None});
  EXPECT_TENSOR_EQ(one(logits, labels), constant(0.75f));
  EXPECT_THROW_MSG(one(logits, constant({0, 1, 1})), InvalidArgumentError, "labels have shape (3,)",
                   "when the graph ran");
  EXPECT_THROW_MSG(traced(TensorShape::unknown_rank())(logits, labels), InvalidArgumentError,
                   "[accuracy] labels have an unknown rank while tracing");
  EXPECT_THROW_MSG(traced({None, 2})(logits, constant({{0, 1}, {1, 1}, {1, 2}, {0, 0}})), InvalidArgumentError,
                   "labels have shape (None, 2)");
}

}  // namespace
}  // namespace tg
