// The graph verifier's type check: every node's stored types are its op's own rule's, in traced
// graphs, in optimised ones (fused nodes) and inside control-flow sub-graphs. The loader runs
// the same check on every file (tests/export/malformed_test.cpp).
#include <memory>
#include <string>

#include "graph/verify.h"
#include "ops/control_flow_attrs.h"
#include "passes/passes.h"
#include "support/graph_util.h"
#include "support/test_util.h"
#include "tracegraph/control_flow.h"

namespace tg {
namespace {

using detail::GraphIR;
using detail::NodeKind;
using testing::trace_graph;

int node_of(const GraphIR& g, const std::string& op) {
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].op_name() == op) return static_cast<int>(i);
  ADD_FAILURE() << "no " << op << " node";
  return 0;
}

TEST(Verifier, RefusesAStoredTypeThatIsNotTheOpsRules) {
  auto g = trace_graph([](const std::vector<Tensor>& in) { return in[0] + 1.0f; }, {constant({1.0f, 2.0f})});
  detail::verify_graph(*g, "test");
  const int add = node_of(*g, "add");
  GraphIR dtype = *g;
  dtype.nodes[static_cast<std::size_t>(add)].outputs[0].dtype = int32;
  EXPECT_THROW_MSG(detail::verify_graph(dtype, "test"), InternalError, "graph verifier (after test)",
                   "(op add) declares outputs (int32 (2,)) but its inputs give (float32 (2,))");
  int at = -1;
  EXPECT_FALSE(detail::graph_defect(dtype, &at).empty());
  EXPECT_EQ(at, add) << "the node at fault";
  // A less specific stored shape is as wrong as another one: the rule decides.
  GraphIR vague = *g;
  vague.nodes[static_cast<std::size_t>(add)].outputs[0].shape = TensorShape({None});
  EXPECT_THROW_MSG(detail::verify_graph(vague, "test"), InternalError, "declares outputs (float32 (None,))");
  GraphIR output = *g;
  output.nodes[static_cast<std::size_t>(output.outputs[0])].outputs[0].shape = TensorShape{3};
  EXPECT_THROW_MSG(detail::verify_graph(output, "test"), InternalError, "does not have the type of its input");
}

TEST(Verifier, RefusesANodeItsOpsRuleRejects) {
  auto g = trace_graph([](const std::vector<Tensor>& in) { return reduce_sum(in[0], {0}); }, {constant({1.0f, 2.0f})});
  GraphIR bad = *g;
  bad.nodes[static_cast<std::size_t>(node_of(bad, "reduce_sum"))].attrs = detail::ReduceAttrs{{7}, false};
  EXPECT_THROW_MSG(detail::verify_graph(bad, "test"), InternalError, "(op reduce_sum) is invalid", "[reduce_sum]");
}

// Nodes only the optimiser makes: a fused node's types are its program's.
TEST(Verifier, ChecksFusedNodesTypes) {
  auto g = trace_graph([](const std::vector<Tensor>& in) { return exp(in[0]) * 2.0f + 1.0f; },
                       {constant({1.0f, 2.0f, 3.0f})});
  ASSERT_GT(detail::fuse_elementwise(*g), 0);
  detail::verify_graph(*g, "fuse_elementwise");
  GraphIR bad = *g;
  bad.nodes[static_cast<std::size_t>(node_of(bad, "fused_elementwise"))].outputs[0].shape = TensorShape{4};
  EXPECT_THROW_MSG(detail::verify_graph(bad, "test"), InternalError, "(op fused_elementwise) declares outputs (float32 (4,))",
                   "give (float32 (3,))");
}

TEST(Verifier, ChecksTheTypesInsideSubGraphs) {
  auto g = trace_graph([](const std::vector<Tensor>& in) {
    return cond(in[0] > 0.0f, [&] { return in[0] * 2.0f; }, [&] { return -in[0]; });
  }, {constant(1.0f)});
  detail::verify_graph(*g, "test");
  GraphIR bad = *g;
  detail::GraphNode& node = bad.nodes[static_cast<std::size_t>(node_of(bad, "cond"))];
  auto payload = std::make_shared<detail::ControlFlowPayload>(*node.attrs.get<detail::ControlFlowAttrs>().payload);
  auto branch = std::make_shared<GraphIR>(*payload->subgraphs[0].graph);
  branch->nodes[static_cast<std::size_t>(node_of(*branch, "mul"))].outputs[0].dtype = float64;
  payload->subgraphs[0].graph = branch;
  node.attrs = detail::ControlFlowAttrs{payload};
  EXPECT_THROW_MSG(detail::verify_graph(bad, "test"), InternalError, "has sub-graph 'then_branch' whose node",
                   "(op mul) declares outputs (float64 ())");
}

}  // namespace
}  // namespace tg
