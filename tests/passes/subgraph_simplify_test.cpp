// optimize_graph simplifies the sub-graphs of cond / while nodes (recursively), leaving results
// and gradients as they were.
#include "control_flow/subgraph.h"
#include "trace/function_core.h"
#include "ops/fused.h"
#include "passes/passes.h"
#include "support/test_util.h"
#include "trace/concrete.h"

namespace tg {
namespace {

using detail::GraphIR;
using detail::NodeKind;
using detail::OpId;

// Mul nodes in g and in every sub-graph below it, those fused into a fused_elementwise node
// included (the optimised graph's sub-graphs are fused too).
int count_muls(const GraphIR& g) {
  int n = 0;
  for (const auto& node : g.nodes) {
    if (node.kind != NodeKind::kOp) continue;
    n += node.op == OpId::Mul;
    if (node.op == OpId::FusedElementwise)
      for (OpId op : detail::fused_ops(node.attrs)) n += op == OpId::Mul;
    for (const auto& sub : detail::subgraphs_of(node)) n += count_muls(*sub.graph);
  }
  return n;
}

int count_control_flow(const GraphIR& g) {
  int n = 0;
  for (const auto& node : g.nodes)
    n += node.kind == NodeKind::kOp && !detail::subgraphs_of(node).empty();
  return n;
}

// x * 1 in both branches (exp(x) * w is a real product) of a cond, and in a while body nested inside the then-branch.
Tensor model(const Tensor& x, const Tensor& w) {
  return cond(reduce_sum(x) > 0.0,
              [&] {
                auto [i, acc] = while_loop([](Tensor i, Tensor) { return i < 3; },
                                           [&](Tensor i, Tensor acc) {
                                             return std::tuple{i + 1, sin(acc * 1.0) + w};
                                           },
                                           std::tuple{constant(0), x * 1.0});
                return reduce_sum(acc);
              },
              [&] { return reduce_sum(exp(x * 1.0) * w); });
}

TEST(SubgraphSimplify, XTimesOneDisappearsFromNestedSubgraphs) {
  const Tensor x = constant(std::vector<double>{0.3, 0.7, -0.2}, {3}, float64), w = constant(std::vector<double>{0.5, -1.5, 2.0}, {3}, float64);
  auto plain = function(model, {.optimize = false});
  auto opt = function(model);
  const auto& before = *detail::FunctionAccess::impl(plain.get_concrete_function(x, w))->ir;
  const auto& after = *detail::FunctionAccess::impl(opt.get_concrete_function(x, w))->ir;
  ASSERT_EQ(count_control_flow(before), 1);
  EXPECT_EQ(count_muls(before), 4) << "three x * 1 and exp(x) * w\n" << Graph(detail::FunctionAccess::impl(plain.get_concrete_function(x, w))->ir).to_string();
  EXPECT_EQ(count_control_flow(after), 1);
  EXPECT_EQ(count_muls(after), 1) << Graph(detail::FunctionAccess::impl(opt.get_concrete_function(x, w))->ir).to_string();
  for (const Tensor& xt : {x, -x}) {
    EXPECT_TENSOR_NEAR(opt(xt, w), model(xt, w), 1e-12);
    EXPECT_TENSOR_NEAR(opt(xt, w), plain(xt, w), 1e-12);
  }
}

TEST(SubgraphSimplify, GradientsThroughSimplifiedSubgraphsAreUnchanged) {
  auto grad_of = [](bool optimize) {
    return function(
        [](const Tensor& x, const Tensor& w) {
          GradientTape tape;
          tape.watch(x);
          tape.watch(w);
          Tensor y = model(x, w);
          return tape.gradient(y, std::vector<Tensor>{x, w});
        },
        {.optimize = optimize});
  };
  auto opt = grad_of(true), plain = grad_of(false);
  const Tensor w = constant(std::vector<double>{0.5, -1.5, 2.0}, {3}, float64);
  for (const Tensor& x : {constant(std::vector<double>{0.3, 0.7, -0.2}, {3}, float64), constant(std::vector<double>{-0.3, -0.7, 0.2}, {3}, float64)}) {
    const auto a = opt(x, w), b = plain(x, w);
    ASSERT_EQ(a.size(), 2u);
    GradientTape tape;
    tape.watch(x);
    tape.watch(w);
    Tensor y = model(x, w);
    const auto eager = tape.gradient(y, std::vector<Tensor>{x, w});
    for (std::size_t k = 0; k < 2; ++k) {
      EXPECT_TENSOR_NEAR(a[k], b[k], 1e-12);
      EXPECT_TENSOR_NEAR(a[k], eager[k], 1e-12);
    }
  }
  // Under an eager tape, through a call of the optimised function.
  auto f = function(model);
  const Tensor x = constant(std::vector<double>{0.3, 0.7, -0.2}, {3}, float64);
  GradientTape t1, t2;
  t1.watch(x);
  const Tensor g1 = t1.gradient(f(x, w), x);
  t2.watch(x);
  const Tensor g2 = t2.gradient(model(x, w), x);
  EXPECT_TENSOR_NEAR(g1, g2, 1e-12);
}

TEST(SubgraphSimplify, StatefulOpsInASubgraphKeepTheirOrder) {
  Variable v(constant(1.0));
  auto f = function([&](const Tensor& x) {
    return cond(x > 0.0, [&] {
      v.assign(v.read_value() * 1.0 + x);  // read, then write
      v.assign(v.read_value() * 2.0);       // reads the first write
      return v.read_value() * 1.0;
    }, [&] { return x * 1.0; });
  });
  EXPECT_TENSOR_NEAR(f(constant(3.0)), constant(8.0), 0.0);  // (1 + 3) * 2
  EXPECT_TENSOR_NEAR(v.read_value(), constant(8.0), 0.0);
  EXPECT_TENSOR_NEAR(f(constant(1.0)), constant(18.0), 0.0);  // (8 + 1) * 2
  EXPECT_TENSOR_NEAR(f(constant(-1.0)), constant(-1.0), 0.0);
}

}  // namespace
}  // namespace tg
