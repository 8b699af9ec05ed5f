// Graphs for pass tests: trace a function without optimising and count what it holds.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "graph/graph_ir.h"
#include "trace/function_core.h"
#include "trace/concrete.h"
#include "tracegraph/function.h"
#include "tracegraph/graph.h"

namespace tg::testing {

/// A copy of the unoptimised graph of fn traced on these inputs (passes may then rewrite it).
template <class F>
std::shared_ptr<detail::GraphIR> trace_graph(F fn, const std::vector<Tensor>& inputs) {
  auto f = function([&](const std::vector<Tensor>& in) { return fn(in); }, {.optimize = false});
  auto cf = f.get_concrete_function(inputs);
  return std::make_shared<detail::GraphIR>(*detail::FunctionAccess::impl(cf)->ir);
}

/// Nodes whose printed op name is `op` ("mul", "Const", "Placeholder" ...).
inline int count_op(const detail::GraphIR& g, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes) n += node.op_name() == op;
  return n;
}

/// The same for a traced function's public graph view (ConcreteFunction::graph(),
/// optimized_graph()).
inline int count_op(const Graph& g, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node.op == op;
  return n;
}

}  // namespace tg::testing
