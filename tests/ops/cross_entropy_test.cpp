// The fused sparse softmax cross-entropy (src/ops/cross_entropy.cpp): values against a double
// reference, the bits of the composite it replaced, labels checked in graphs, and typed errors.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "ops/cross_entropy.h"
#include "ops/op.h"
#include "support/graph_util.h"
#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

using detail::OpId;

Tensor rows_loss(const std::vector<Tensor>& in) { return detail::sparse_softmax_cross_entropy_rows(in[0], in[1]); }
Tensor rows_log_softmax(const std::vector<Tensor>& in) {
  return detail::apply_op(OpId::SparseSoftmaxCrossEntropy, {in[0], in[1]})[1];
}
// Input 0 is the loss op's log_softmax rows.
Tensor rows_grad(const std::vector<Tensor>& in) {
  return detail::apply_op1(OpId::SparseSoftmaxCrossEntropyGrad, {in[0], in[1], in[2]});
}

// log_softmax(z), log(sum(exp(z))) - z[label] and (softmax(z) - one_hot(label)) * g per row,
// in double.
std::vector<std::vector<double>> reference_log_softmax(const std::vector<std::vector<double>>& z) {
  std::vector<std::vector<double>> out;
  for (const auto& row : z) {
    double mx = -std::numeric_limits<double>::infinity(), s = 0;
    for (double v : row) mx = std::max(mx, v);
    for (double v : row) s += std::exp(v - mx);
    std::vector<double> ls;
    for (double v : row) ls.push_back(v - mx - std::log(s));
    out.push_back(ls);
  }
  return out;
}
std::vector<double> reference_losses(const std::vector<std::vector<double>>& z, const std::vector<int>& labels) {
  const auto ls = reference_log_softmax(z);
  std::vector<double> out;
  for (std::size_t r = 0; r < z.size(); ++r) out.push_back(-ls[r][static_cast<std::size_t>(labels[r])]);
  return out;
}
std::vector<std::vector<double>> reference_grad(const std::vector<std::vector<double>>& z, const std::vector<int>& labels,
                                                const std::vector<double>& g) {
  auto out = reference_log_softmax(z);
  for (std::size_t r = 0; r < z.size(); ++r)
    for (std::size_t j = 0; j < z[r].size(); ++j)
      out[r][j] = (std::exp(out[r][j]) - (static_cast<int>(j) == labels[r] ? 1.0 : 0.0)) * g[r];
  return out;
}

Tensor rows_of(const std::vector<std::vector<double>>& v, DType dt) {
  std::vector<double> flat;
  for (const auto& row : v) flat.insert(flat.end(), row.begin(), row.end());
  return constant(flat, {static_cast<int64_t>(v.size()), static_cast<int64_t>(v[0].size())}, dt);
}
Tensor f32_rows(const std::vector<std::vector<double>>& v) { return rows_of(v, float32); }
Tensor f64_rows(const std::vector<std::vector<double>>& v) { return rows_of(v, float64); }
Tensor vec_of(const std::vector<double>& v, DType dt) { return constant(v, {static_cast<int64_t>(v.size())}, dt); }
Tensor f32(const std::vector<double>& v) { return vec_of(v, float32); }

TG_OP_CASES(cross_entropy) {
  // float32-exact logits, so that the float64 reference sees the same values.
  const std::vector<std::vector<double>> z{{1.0, 2.0, 0.5, -1.0}, {-3.0, 0.0, 3.0, 0.25}, {100.0, 0.0, -100.0, 50.0}};
  const std::vector<int> y{1, 0, 3};
  const std::vector<double> g{0.5, -2.0, 1.0};
  const Tensor labels = constant(y, {static_cast<int64_t>(y.size())});
  const Tensor labels64 = cast(labels, int64);
  const std::vector<std::vector<double>> with_inf{{0.0, -std::numeric_limits<double>::infinity(), 1.0}};
  return {
      {"sparse_softmax_cross_entropy", "f32 (3,4), int32 labels", rows_loss, {f32_rows(z), labels},
       f32(reference_losses(z, y)), 1e-6},
      {"sparse_softmax_cross_entropy", "f64, int64 labels", rows_loss, {f64_rows(z), labels64},
       vec_of(reference_losses(z, y), float64), 1e-12},
      {"sparse_softmax_cross_entropy", "a -inf logit off the label stays finite", rows_loss,
       {f32_rows(with_inf), constant({2})}, f32(reference_losses({{0.0, -1e300, 1.0}}, {2})), 1e-6},
      {"sparse_softmax_cross_entropy", "no rows", rows_loss, {zeros({0, 3}), constant(std::vector<int>{}, {0})},
       zeros({0})},
      {"sparse_softmax_cross_entropy", "output 1: the rows' log_softmax", rows_log_softmax, {f32_rows(z), labels},
       f32_rows(reference_log_softmax(z)), 1e-6},
      {"sparse_softmax_cross_entropy_grad", "f32 (3,4)", rows_grad,
       {f32_rows(reference_log_softmax(z)), labels, f32(g)}, f32_rows(reference_grad(z, y, g)), 1e-6},
      {"sparse_softmax_cross_entropy_grad", "f64, int64 labels", rows_grad,
       {f64_rows(reference_log_softmax(z)), labels64, vec_of(g, float64)}, f64_rows(reference_grad(z, y, g)), 1e-12},
  };
}

// The composite the op replaced, loss and gradient: its bits are the op's for finite logits.
Tensor composite_loss(const Tensor& logits, const Tensor& labels) {
  const Tensor target = one_hot(labels, 10, 1.0, 0.0, -1, logits.dtype());
  return -reduce_mean(reduce_sum(target * log_softmax(logits, -1), {1}));
}

std::vector<Tensor> loss_and_gradient(const Tensor& logits, const Tensor& labels, bool fused) {
  GradientTape tape;
  tape.watch(logits);
  const Tensor loss = fused ? nn::sparse_softmax_cross_entropy(logits, labels) : composite_loss(logits, labels);
  return {loss, tape.gradient(loss, logits)};
}

TEST(CrossEntropy, GivesTheBitsOfTheCompositeEagerlyAndTraced) {
  std::vector<int> y(128);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int>((i * 7) % 10);
  const Tensor labels = constant(y, {static_cast<int64_t>(y.size())});
  auto step = [](const Tensor& z, const Tensor& t) { return loss_and_gradient(z, t, true); };
  for (DType dt : {float32, float64}) {
    SCOPED_TRACE(to_string(dt));
    const Tensor logits = cast(random_normal({128, 10}, 0.0, 4.0, float32, 11), dt);
    const std::vector<Tensor> expected = loss_and_gradient(logits, labels, false);
    const std::vector<Tensor> eager = loss_and_gradient(logits, labels, true);
    EXPECT_TRUE(testing::same_bits(eager[0], expected[0]));
    EXPECT_TRUE(testing::same_bits(eager[1], expected[1]));
    for (bool optimize : {false, true}) {
      auto traced_step = function(step, {.input_signature = std::vector<TensorSpec>{TensorSpec({None, 10}, dt), TensorSpec({None}, int32)},
                                         .optimize = optimize});
      const std::vector<Tensor> traced = traced_step(logits, labels);
      EXPECT_TRUE(testing::same_bits(traced[0], expected[0])) << "optimize " << optimize;
      EXPECT_TRUE(testing::same_bits(traced[1], expected[1])) << "optimize " << optimize;
    }
  }
}

TEST(CrossEntropy, IsTwoNodesOfATrainingStep) {
  auto step = function([](const Tensor& z, const Tensor& t) { return loss_and_gradient(z, t, true); });
  const Graph g = step.get_concrete_function(ones({4, 10}), constant({1, 2, 3, 4})).graph();
  EXPECT_EQ(testing::count_op(g, "sparse_softmax_cross_entropy"), 1);
  EXPECT_EQ(testing::count_op(g, "sparse_softmax_cross_entropy_grad"), 1);
  EXPECT_EQ(testing::count_op(g, "one_hot"), 0);
  EXPECT_EQ(testing::count_op(g, "log_softmax"), 0);
}

// In a traced function a label outside [0, classes) used to become a row of zeros (one_hot's
// rule): a loss and a gradient that silently ignored the row. It is now the eager error.
TEST(CrossEntropy, LabelsOutsideTheClassesRaiseInsideTracedFunctions) {
  auto step = function([](const Tensor& z, const Tensor& t) { return loss_and_gradient(z, t, true); },
                       {.input_signature = std::vector<TensorSpec>{TensorSpec({None, 3}, float32), TensorSpec({None}, int64)}});
  const Tensor logits = ones({2, 3});
  EXPECT_NO_THROW(step(logits, constant({int64_t{0}, int64_t{2}})));
  EXPECT_THROW_MSG(step(logits, constant({int64_t{0}, int64_t{3}})), InvalidArgumentError,
                   "[sparse_softmax_cross_entropy]", "label 3 is outside [0, 3)", "(row 1)");
  EXPECT_THROW_MSG(step(logits, constant({int64_t{-1}, int64_t{0}})), InvalidArgumentError, "label -1 is outside [0, 3)");
  // The gradient op checks its labels too (it can be called apart from the loss).
  EXPECT_THROW_MSG(rows_grad({logits, constant({0, 5}), ones({2})}), InvalidArgumentError,
                   "[sparse_softmax_cross_entropy_grad]", "label 5");
  // Batch sizes that differ only at run time.
  EXPECT_THROW_MSG(step(logits, constant({int64_t{0}})), InvalidArgumentError, "batch size 2", "1");
}

TEST(CrossEntropy, WrongInputsAreTypedErrors) {
  const Tensor logits = ones({2, 3});
  const Tensor labels = constant({0, 1});
  EXPECT_THROW_MSG(rows_loss({logits, constant({0.f, 1.f})}), TypeError, "labels must be int32 or int64");
  EXPECT_THROW_MSG(rows_loss({ones({2, 3}, int32), labels}), TypeError, "logits must be float32 or float64");
  EXPECT_THROW_MSG(rows_loss({ones({2, 3, 1}), labels}), InvalidArgumentError, "logits must have shape (batch, classes)",
                   "(2, 3, 1)");
  EXPECT_THROW_MSG(rows_grad({ones({2}), labels, ones({2})}), InvalidArgumentError,
                   "the log_softmax rows must have shape (batch, classes)", "(2,)");
  EXPECT_THROW_MSG(rows_loss({logits, constant({{0, 1}})}), InvalidArgumentError, "labels must have shape (batch,)");
  EXPECT_THROW_MSG(rows_loss({logits, constant({0, 1, 2})}), InvalidArgumentError, "batch size 2", "3");
  EXPECT_THROW_MSG(rows_grad({logits, labels, ones({2}, float64)}), TypeError, "float64", "float32");
  EXPECT_THROW_MSG(rows_grad({logits, labels, ones({3})}), InvalidArgumentError, "(2,)", "(3,)");
  EXPECT_THROW_MSG(rows_grad({logits, labels, ones({2, 1})}), InvalidArgumentError, "(2, 1)");
  // Unknown ranks trace; the shapes are checked when the node runs.
  auto f = function([](const Tensor& z, const Tensor& t) { return nn::sparse_softmax_cross_entropy(z, t); });
  auto cf = f.get_concrete_function(TensorSpec(TensorShape::unknown_rank(), float32),
                                    TensorSpec(TensorShape::unknown_rank(), int32));
  EXPECT_TRUE(testing::same_bits(cf(logits, labels), nn::sparse_softmax_cross_entropy(logits, labels)));
  EXPECT_THROW_MSG(cf(ones({2, 3, 1}), labels), InvalidArgumentError, "(batch, classes)", "(2, 3, 1)");
  EXPECT_THROW_MSG(cf(logits, constant({0, 1, 2})), InvalidArgumentError, "batch size 2", "3");
}

}  // namespace
}  // namespace tg
