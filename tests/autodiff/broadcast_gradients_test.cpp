// Gradients of broadcasting ops traced over None dims: where the static shapes prove that an
// operand kept its shape (a batch of None rows plus a bias of static width), the gradient
// passes through without a sum_to_like node; where they do not, the sum stays, and run-time
// broadcasting of a None dim still sums. Either way the values are the eager ones.
#include "support/graph_util.h"
#include "support/test_util.h"
#include "tracegraph/tracegraph.h"

namespace tg {
namespace {

// The gradients of reduce_sum(square(f(x, y))) with respect to x and y.
template <class F>
std::vector<Tensor> gradients(F f, const Tensor& x, const Tensor& y) {
  GradientTape tape;
  tape.watch(x);
  tape.watch(y);
  const Tensor loss = reduce_sum(square(f(x, y)));
  return tape.gradient(loss, {x, y});
}

struct Case {
  const char* label;
  std::function<Tensor(const Tensor&, const Tensor&)> f;
  TensorSpec x_spec, y_spec;
  std::vector<std::pair<TensorShape, TensorShape>> runs;  // run-time shapes of x and y
  int sums;  // sum_to_like nodes the traced gradient keeps
};

TEST(BroadcastGradients, ProvenShapesPassTheGradientAndEveryRunMatchesEager) {
  const std::vector<Case> cases = {
      // x's rows are None, y has no row dim: x keeps its shape, y's gradient is a column sum.
      {"add, bias", [](const Tensor& x, const Tensor& y) { return x + y; }, TensorSpec({None, 3}, float32),
       TensorSpec({3}, float32), {{{4, 3}, {3}}, {{1, 3}, {3}}, {{0, 3}, {3}}}, 1},
      {"mul, bias", [](const Tensor& x, const Tensor& y) { return x * y; }, TensorSpec({None, 3}, float32),
       TensorSpec({3}, float32), {{{4, 3}, {3}}}, 1},
      // y's row dim is a static 1: x keeps its shape; y sums over the rows.
      {"maximum, one row", [](const Tensor& x, const Tensor& y) { return maximum(x, y); },
       TensorSpec({None, 3}, float32), TensorSpec({1, 3}, float32), {{{5, 3}, {1, 3}}, {{1, 3}, {1, 3}}}, 1},
      // Both row dims None: nothing is proven, and a run where y has one row sums y's gradient.
      {"sub, both None", [](const Tensor& x, const Tensor& y) { return x - y; }, TensorSpec({None, 3}, float32),
       TensorSpec({None, 3}, float32), {{{4, 3}, {4, 3}}, {{4, 3}, {1, 3}}, {{1, 3}, {4, 3}}}, 2},
      // x's column dim is a static 1 against y's 3: x's gradient sums over the columns.
      {"div, x one column", [](const Tensor& x, const Tensor& y) { return x / y; }, TensorSpec({None, 1}, float32),
       TensorSpec({3}, float32), {{{4, 1}, {3}}}, 2},
      // x has fewer dims than the result: always summed; y shares its None rows with the
      // condition, so it is summed too.
      {"where, x a row", [](const Tensor& x, const Tensor& y) { return where(greater(y, constant(1.0f)), x, y); },
       TensorSpec({3}, float32), TensorSpec({None, 3}, float32), {{{3}, {4, 3}}}, 2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.label);
    auto f = c.f;
    auto traced = function([f](const Tensor& x, const Tensor& y) { return gradients(f, x, y); },
                           {.input_signature = std::vector<TensorSpec>{c.x_spec, c.y_spec}});
    const Graph g = traced.get_concrete_function(c.x_spec, c.y_spec).graph();
    EXPECT_EQ(testing::count_op(g, "sum_to_like"), c.sums) << g.to_string();
    for (const auto& [xs, ys] : c.runs) {
      SCOPED_TRACE(xs.to_string() + " and " + ys.to_string());
      const Tensor x = random_uniform(xs, -1.0f, 1.0f), y = random_uniform(ys, 0.5f, 1.5f);
      const std::vector<Tensor> got = traced(x, y), want = gradients(f, x, y);
      ASSERT_EQ(got.size(), 2u);
      for (std::size_t i = 0; i < 2; ++i) {
        EXPECT_TRUE(got[i].shape() == want[i].shape()) << i << ": " << got[i].shape().to_string();
        EXPECT_TRUE(testing::tensors_near(got[i], want[i], 0.0)) << i;
      }
    }
  }
}

// A dense layer over a batch of None rows: the gradients of the product and of x need no sum
// (matrices have no batch dims), only the bias's does.
TEST(BroadcastGradients, ADenseLayerOverNoneRowsSumsOnlyTheBiasGradient) {
  auto layer = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    GradientTape tape;
    for (const Tensor* t : {&x, &w, &b}) tape.watch(*t);
    const Tensor loss = reduce_sum(square(relu(matmul(x, w) + b)));
    return tape.gradient(loss, {x, w, b});
  };
  const std::vector<TensorSpec> specs = {TensorSpec({None, 5}, float32), TensorSpec({5, 4}, float32),
                                         TensorSpec({4}, float32)};
  auto traced = function(layer, {.input_signature = specs});
  EXPECT_EQ(testing::count_op(traced.get_concrete_function(specs[0], specs[1], specs[2]).graph(), "sum_to_like"), 1);
  const Tensor w = random_uniform({5, 4}, -1.0f, 1.0f), b = random_uniform({4}, -1.0f, 1.0f);
  for (const int64_t rows : {int64_t{6}, int64_t{1}}) {
    const Tensor x = random_uniform({rows, 5}, -1.0f, 1.0f);
    const std::vector<Tensor> got = traced(x, w, b), want = layer(x, w, b);
    for (std::size_t i = 0; i < 3; ++i) EXPECT_TRUE(testing::tensors_near(got[i], want[i], 0.0)) << rows << " rows, " << i;
  }
}

// When an operand's dim is static but the other operand's matching dim is None, the product's
// gradient would come back with that dim None; it goes through sum_to_like then, so the gradient
// keeps the operand's static shape (what optimizer updates and fusion read). A gradient that
// knows more than its operand (b's rows are a's static columns) passes as it is.
TEST(BroadcastGradients, AMatrixGradientKeepsTheOperandsStaticShape) {
  auto grads = [](const Tensor& a, const Tensor& b) {
    GradientTape tape;
    tape.watch(a);
    tape.watch(b);
    return tape.gradient(reduce_sum(matmul(a, b)), {a, b});
  };
  const std::vector<TensorSpec> specs = {TensorSpec({2, 3}, float32), TensorSpec({None, 4}, float32)};
  auto traced = function(grads, {.input_signature = specs});
  const Graph g = traced.get_concrete_function(specs[0], specs[1]).graph();
  std::vector<TensorShape> results;
  for (const auto& node : g.nodes())
    if (node.op == "Identity") results.push_back(node.outputs.at(0).shape);
  ASSERT_EQ(results.size(), 2u) << g.to_string();
  EXPECT_TRUE(results[0] == TensorShape({2, 3})) << results[0].to_string();
  EXPECT_TRUE(results[1] == TensorShape({3, 4})) << results[1].to_string();
  EXPECT_EQ(testing::count_op(g, "sum_to_like"), 1) << g.to_string();
  const Tensor a = random_uniform({2, 3}, -1.0f, 1.0f), b = random_uniform({3, 4}, -1.0f, 1.0f);
  const std::vector<Tensor> got = traced(a, b), want = grads(a, b);
  for (std::size_t i = 0; i < 2; ++i) EXPECT_TRUE(testing::tensors_near(got[i], want[i], 0.0)) << i;
}

}  // namespace
}  // namespace tg
