// Algebraic simplification: which rewrites fire, and that none changes a result (IEEE -0.0,
// NaN, inf and broadcasting included).
#include <cmath>
#include <limits>

#include "trace/function_core.h"
#include "ops/grad_helpers.h"
#include "passes/passes.h"
#include "graph/verify.h"
#include "runtime/executor.h"
#include "support/graph_util.h"
#include "support/test_util.h"
#include "trace/concrete.h"

namespace tg {
namespace {

using detail::GraphIR;

using testing::count_op;
using testing::same_bits;
using testing::trace_graph;

// Simplifies the graph of fn and checks: `rewrites` rewrites, `op` count afterwards, results
// bit-identical before and after.
template <class F>
void check(F fn, const std::vector<Tensor>& inputs, int rewrites, const std::string& op, int remaining) {
  auto g = trace_graph(fn, inputs);
  const auto before = detail::execute(*g, inputs);
  EXPECT_EQ(detail::simplify_algebra(*g), rewrites) << Graph(g).to_string();
  detail::verify_graph(*g, "simplify");
  detail::eliminate_dead_code(*g);
  EXPECT_EQ(count_op(*g, op), remaining) << Graph(g).to_string();
  const auto after = detail::execute(*g, inputs);
  ASSERT_EQ(after.size(), before.size());
  for (std::size_t k = 0; k < after.size(); ++k) EXPECT_TRUE(same_bits(after[k], before[k])) << k;
}

const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();
Tensor specials() { return constant({-0.0f, 0.0f, kNan, kInf, -kInf, 1.5f}); }

TEST(Simplify, MultiplyAndDivideByOneAreDropped) {
  check([](const std::vector<Tensor>& in) { return in[0] * 1.0f; }, {specials()}, 1, "mul", 0);
  check([](const std::vector<Tensor>& in) { return 1.0f * in[0]; }, {specials()}, 1, "mul", 0);
  check([](const std::vector<Tensor>& in) { return in[0] / 1.0f; }, {specials()}, 1, "div", 0);
  check([](const std::vector<Tensor>& in) { return pow(in[0], constant(1.0f)); }, {specials()}, 1, "pow", 0);
  check([](const std::vector<Tensor>& in) { return in[0] * 1; }, {constant({-7, 0, 2147483647})}, 1, "mul", 0);
  check([](const std::vector<Tensor>& in) { return in[0] * constant({{1.0f}}); }, {constant({{2.0f, 3.0f}})}, 1, "mul", 0);
}

TEST(Simplify, AOneThatBroadcastsTheResultLargerStays) {
  // x (3,) * ones (2, 1) is (2, 3): not x.
  check([](const std::vector<Tensor>& in) { return in[0] * constant({{1.0f}, {1.0f}}); },
        {constant({1.0f, 2.0f, 3.0f})}, 0, "mul", 1);
  // x () * [1] is (1,): the rank grows.
  check([](const std::vector<Tensor>& in) { return in[0] * constant({1.0f}); }, {constant(2.0f)}, 0, "mul", 1);
  // Not all ones.
  check([](const std::vector<Tensor>& in) { return in[0] * constant({1.0f, 2.0f}); }, {constant({2.0f, 2.0f})}, 0, "mul", 1);
}

TEST(Simplify, AddingZeroRespectsTheSignOfZero) {
  // x + (+0.0) turns -0.0 into +0.0: kept. x + (-0.0) is x: dropped.
  check([](const std::vector<Tensor>& in) { return in[0] + 0.0f; }, {specials()}, 0, "add", 1);
  check([](const std::vector<Tensor>& in) { return in[0] + (-0.0f); }, {specials()}, 1, "add", 0);
  check([](const std::vector<Tensor>& in) { return (-0.0f) + in[0]; }, {specials()}, 1, "add", 0);
  // x - (+0.0) is x; x - (-0.0) = x + 0.0 is not.
  check([](const std::vector<Tensor>& in) { return in[0] - 0.0f; }, {specials()}, 1, "sub", 0);
  check([](const std::vector<Tensor>& in) { return in[0] - (-0.0f); }, {specials()}, 0, "sub", 1);
  // 0 - x is not x.
  check([](const std::vector<Tensor>& in) { return 0.0f - in[0]; }, {specials()}, 0, "sub", 1);
  // Integers have one zero.
  check([](const std::vector<Tensor>& in) { return in[0] + 0 - 0; }, {constant({-1, 0, 5})}, 2, "add", 0);
}

TEST(Simplify, MultiplyByZeroIsNeverFolded) {
  check([](const std::vector<Tensor>& in) { return in[0] * 0.0f; }, {specials()}, 0, "mul", 1);
}

TEST(Simplify, InvolutionsAndIdempotentOps) {
  check([](const std::vector<Tensor>& in) { return neg(neg(in[0])); }, {specials()}, 1, "neg", 0);
  check([](const std::vector<Tensor>& in) { return neg(neg(neg(in[0]))); }, {specials()}, 1, "neg", 1);
  check([](const std::vector<Tensor>& in) { return neg(neg(in[0])); }, {constant({-2147483647 - 1, 3})}, 1, "neg", 0);
  check([](const std::vector<Tensor>& in) { return logical_not(logical_not(in[0])); }, {constant({true, false})}, 1,
        "logical_not", 0);
  check([](const std::vector<Tensor>& in) { return abs(abs(in[0])); }, {specials()}, 1, "abs", 1);
  check([](const std::vector<Tensor>& in) { return relu(relu(relu(in[0]))); }, {specials()}, 2, "relu", 1);
}

TEST(Simplify, IdentityAndSameDtypeCastsGo) {
  check([](const std::vector<Tensor>& in) { return identity(in[0]) + 1.0f; }, {specials()}, 1, "identity", 0);
  check([](const std::vector<Tensor>& in) { return cast(in[0], float32) * 2.0f; }, {specials()}, 1, "cast", 0);
  check([](const std::vector<Tensor>& in) { return cast(in[0], float64); }, {specials()}, 0, "cast", 1);
}

TEST(Simplify, TransposePairsCombine) {
  const Tensor x = random_uniform({2, 3, 4}, -1, 1, 4);
  check([](const std::vector<Tensor>& in) { return transpose(transpose(in[0], {1, 2, 0}), {2, 0, 1}); }, {x}, 1,
        "transpose", 0);
  check([](const std::vector<Tensor>& in) { return transpose(transpose(in[0], {})); }, {x}, 1, "transpose", 0);
  // Two rotations make a third: one transpose left, with the combined perm.
  check([](const std::vector<Tensor>& in) { return transpose(transpose(in[0], {1, 2, 0}), {1, 2, 0}); }, {x}, 1,
        "transpose", 1);
  check([](const std::vector<Tensor>& in) { return transpose(transpose(in[0], {1, 0, 2}), {0, 2, 1}); }, {x}, 1,
        "transpose", 1);
  check([](const std::vector<Tensor>& in) { return transpose(in[0], {0, 1, 2}); }, {x}, 1, "transpose", 0);
}

TEST(Simplify, ReshapeChainsShorten) {
  const Tensor x = random_uniform({2, 6}, -1, 1, 4);
  check([](const std::vector<Tensor>& in) { return reshape(reshape(in[0], {3, 4}), {4, -1}); }, {x}, 1, "reshape", 1);
  check([](const std::vector<Tensor>& in) { return reshape(reshape(in[0], {12}), {2, 6}); }, {x}, 1, "reshape", 0);
  check([](const std::vector<Tensor>& in) { return reshape(in[0], {2, 6}); }, {x}, 1, "reshape", 0);
  check([](const std::vector<Tensor>& in) { return reshape(in[0], {6, 2}); }, {x}, 0, "reshape", 1);
}

TEST(Simplify, RulesSeeThroughEarlierRewrites) {
  // ((x * 1) + -0.0) / 1 -> x, and the graph's output is the input itself.
  check([](const std::vector<Tensor>& in) { return neg(neg((in[0] * 1.0f + (-0.0f)) / 1.0f)); }, {specials()}, 4,
        "Placeholder", 1);
}

TEST(Simplify, UnknownShapesAreHandled) {
  // A None-shaped x: x * 1 with a (1,) constant keeps x's (None,) shape: dropped. With unknown
  // rank the constant could add a dim: kept.
  auto f = function([](const Tensor& x) { return x * constant({1.0f}); });
  auto cf = f.get_concrete_function(TensorSpec(TensorShape({None}), float32));
  EXPECT_EQ(count_op(*detail::FunctionAccess::impl(cf)->ir, "mul"), 0);
  auto cf2 = f.get_concrete_function(TensorSpec(TensorShape::unknown_rank(), float32));
  EXPECT_EQ(count_op(*detail::FunctionAccess::impl(cf2)->ir, "mul"), 1);
  EXPECT_TRUE(same_bits(cf2(constant(2.0f)), constant({2.0f})));
}

// A mean loss's gradient, one value broadcast to the loss's input shape and then multiplied:
// the product broadcasts the value itself (NaN, inf and -0.0 in both operands, either order,
// the value of rank 0 or with its dims kept as 1).
TEST(Simplify, AOneValueGradientBroadcastBeforeAProductIsDropped) {
  const Tensor x = constant({{-0.0f, 0.0f, kNan, kInf}, {-kInf, 1.5f, -2.0f, 3.0f}, {0.25f, -0.0f, 7.0f, 1e-30f}});
  for (const Tensor& s : {constant(-0.0f), constant(kInf), constant(-1.5f)}) {
    check([](const std::vector<Tensor>& in) { return detail::unreduce_like(in[1], in[0], {}, false) * in[0]; }, {x, s},
          1, "unreduce_like", 0);
    check([](const std::vector<Tensor>& in) { return in[0] * detail::unreduce_like(in[1], in[0], {}, false); }, {x, s},
          1, "unreduce_like", 0);
  }
  check([](const std::vector<Tensor>& in) { return detail::unreduce_like(in[1], in[0], {}, true) * in[0]; },
        {x, constant({{-1.5f}})}, 1, "unreduce_like", 0);
}

TEST(Simplify, ABroadcastTheProductNeedsStays) {
  const Tensor x = random_uniform({3, 4}, -1, 1, 1);
  // The other operand is smaller than the broadcast: the product's shape is the broadcast's.
  check([](const std::vector<Tensor>& in) { return detail::unreduce_like(in[1], in[0], {}, false) * in[2]; },
        {x, constant(2.0f), random_uniform({4}, -1, 1, 2)}, 0, "unreduce_like", 1);
  // More than one value: each row of the product has its own.
  check([](const std::vector<Tensor>& in) { return detail::unreduce_like(in[1], in[0], {1}, false) * in[0]; },
        {x, random_uniform({3}, -1, 1, 3)}, 0, "unreduce_like", 1);
  // A None dim: the broadcast's run-time shape is like's, which the product must check.
  auto f = function([](const Tensor& a, const Tensor& s) { return detail::unreduce_like(s, a, {}, false) * a; });
  auto cf = f.get_concrete_function(TensorSpec(TensorShape({None, 4}), float32), TensorSpec(TensorShape({}), float32));
  EXPECT_EQ(count_op(*detail::FunctionAccess::impl(cf)->ir, "unreduce_like"), 1);
}

// A mean squared error's gradient, traced and optimised, traced plain and eager: the same bits,
// and no unreduce_like left in the optimised graph.
TEST(Simplify, AMeanLossGradientKeepsItsBitsWithoutTheBroadcast) {
  auto grad = [](const Tensor& x, const Tensor& t) {
    GradientTape tape;
    tape.watch(x);
    const Tensor loss = reduce_mean(square(x - t));
    return tape.gradient(loss, std::vector<Tensor>{x});
  };
  const Tensor x = random_uniform({16, 8, 32}, -2, 2, 4), t = random_uniform({16, 8, 32}, -2, 2, 5);
  auto optimised = function(grad);
  auto plain = function(grad, {.optimize = false});
  const std::vector<Tensor> got = optimised(x, t), want = plain(x, t), eager = grad(x, t);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(want.size(), 1u);
  ASSERT_EQ(eager.size(), 1u);
  EXPECT_TRUE(same_bits(got[0], want[0]));
  EXPECT_TRUE(same_bits(eager[0], want[0]));
  const Graph g = optimised.get_concrete_function(x, t).optimized_graph();
  EXPECT_EQ(count_op(g, "unreduce_like"), 0) << g.to_string();
  const Graph p = plain.get_concrete_function(x, t).optimized_graph();
  EXPECT_EQ(count_op(p, "unreduce_like"), 1) << p.to_string();
}

// fold_scaled_updates: v.assign_sub(g * lr) becomes apply_gradient_descent where nothing else
// reads the product or the updated value, with the Variable's bits unchanged.
struct StepResult {
  Tensor variable;
  Graph graph;
};
template <class Step>
StepResult run_step(Step step, const Tensor& start, const Tensor& g) {
  Variable v(start);
  auto f = function([&](const Tensor& grad) { return step(v, grad); });
  f(g);
  f(g);  // twice: the update reads what the first call wrote
  return {v.read_value(), f.get_concrete_function(g).optimized_graph()};
}

TEST(FoldScaledUpdates, AHandWrittenStepBecomesOneUpdateWithTheSameBits) {
  const Tensor start = testing::seeded_values({33, 17}, float32, 5), g = testing::seeded_values({33, 17}, float32, 6);
  for (const bool lr_first : {false, true}) {
    auto step = [lr_first](Variable& v, const Tensor& grad) {
      v.assign_sub(lr_first ? 0.037f * grad : grad * 0.037f);
      return grad;
    };
    const StepResult traced = run_step(step, start, g);
    EXPECT_EQ(testing::count_op(traced.graph, "apply_gradient_descent"), 1) << traced.graph.to_string();
    EXPECT_EQ(testing::count_op(traced.graph, "assign_sub_variable"), 0);
    EXPECT_EQ(testing::count_op(traced.graph, "mul"), 0);
    Variable eager(start);
    for (int i = 0; i < 2; ++i) step(eager, g);
    EXPECT_TRUE(same_bits(traced.variable, eager.read_value()));
  }
}

TEST(FoldScaledUpdates, FloatSixtyFourAndATracedLearningRateFoldToo) {
  const Tensor start = cast(testing::seeded_values({4, 3}, float64, 7), float64), g = cast(testing::seeded_values({4, 3}, float64, 8), float64);
  Variable v(start);
  auto f = function([&](const Tensor& grad, const Tensor& lr) {
    v.assign_sub(grad * lr);
    return grad;
  });
  const Tensor lr = constant(0.25, float64);
  f(g, lr);
  const Graph graph = f.get_concrete_function(g, lr).optimized_graph();
  EXPECT_EQ(testing::count_op(graph, "apply_gradient_descent"), 1) << graph.to_string();
  EXPECT_TRUE(same_bits(v.read_value(), start - g * lr));
}

TEST(FoldScaledUpdates, StaysWhenTheProductOrTheUpdatedValueIsRead) {
  const Tensor start = testing::seeded_values({5, 4}, float32, 9), g = testing::seeded_values({5, 4}, float32, 10);
  auto kept = [&](auto step, const char* why) {
    const StepResult traced = run_step(step, start, g);
    EXPECT_EQ(testing::count_op(traced.graph, "apply_gradient_descent"), 0) << why << "\n" << traced.graph.to_string();
    EXPECT_EQ(testing::count_op(traced.graph, "assign_sub_variable"), 1) << why;
    Variable eager(start);
    for (int i = 0; i < 2; ++i) step(eager, g);
    EXPECT_TRUE(same_bits(traced.variable, eager.read_value())) << why;
  };
  kept([](Variable& v, const Tensor& grad) {
    const Tensor scaled = grad * 0.5f;
    v.assign_sub(scaled);
    return scaled;
  }, "the product is also a result");
  kept([](Variable& v, const Tensor& grad) { return v.assign_sub(grad * 0.5f) + 1.0f; }, "the updated value is read");
  kept([](Variable& v, const Tensor& grad) {
    v.assign_sub(grad * constant({0.5f, 0.25f, 1.0f, 2.0f}));
    return grad;
  }, "the scale is a vector, not a scalar");
}

}  // namespace
}  // namespace tg
