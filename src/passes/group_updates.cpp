// Groups an optimizer's step into one node: a run of apply_gradient_descent (or apply_adam)
// nodes that follow each other in the stateful chain becomes one apply_gradient_descent_group
// (apply_adam_group) node, whose kernel runs the updates in turn (src/ops/optimizer_updates.cpp)
// without the executor's cost per node.
//
// Why a run can be one node: the updates make no values, so no node reads them; only the next
// stateful node follows each by its control edge, and within a run that is the next update. So
// every input of every update in the run is made before the run starts, and the group can sit
// where the run's last update was, with the first one's control edge.
#include <algorithm>

#include "passes/passes.h"
#include "passes/rewrite.h"

namespace tg::detail {

namespace {

bool is_update(const GraphNode& node) {
  return node.kind == NodeKind::kOp && (node.op == OpId::ApplyGradientDescent || node.op == OpId::ApplyAdam);
}

// The Variables an update names, in the group's order: its Variable (and m, v for Adam).
void add_variables(const GraphNode& node, std::vector<std::shared_ptr<VariableState>>& out) {
  const std::vector<std::shared_ptr<VariableState>> named = variables_named(node.attrs);
  out.insert(out.end(), named.begin(), named.end());
}

}  // namespace

int group_variable_updates(GraphIR& g) {
  const std::size_t n = g.nodes.size();
  if (std::none_of(g.nodes.begin(), g.nodes.end(), is_update)) return 0;
  // The stateful chain is a list: each stateful node's control edge names the one before it.
  std::vector<int> next_in_chain(n, -1);
  for (std::size_t i = 0; i < n; ++i)
    if (g.nodes[i].control_input >= 0) next_in_chain[static_cast<std::size_t>(g.nodes[i].control_input)] = static_cast<int>(i);
  std::vector<bool> keep(n, true);
  int groups = 0;
  for (std::size_t first = 0; first < n; ++first) {
    if (!keep[first] || !is_update(g.nodes[first])) continue;
    const OpId op = g.nodes[first].op;
    std::vector<int> run{static_cast<int>(first)};
    auto group = std::make_shared<VariableGroup>();
    add_variables(g.nodes[first], group->variables);
    // Two updates of one Variable may share a group: its kernel runs them in turn, so the second
    // reads what the first wrote.
    for (int next = next_in_chain[first]; next >= 0; next = next_in_chain[static_cast<std::size_t>(next)]) {
      const GraphNode& node = g.nodes[static_cast<std::size_t>(next)];
      if (!is_update(node) || node.op != op) break;
      add_variables(node, group->variables);
      run.push_back(next);
    }
    if (run.size() < 2) continue;
    GraphNode& last = g.nodes[static_cast<std::size_t>(run.back())];
    SmallVector<ValueRef, 2> inputs;
    for (int k : run)
      for (const ValueRef& in : g.nodes[static_cast<std::size_t>(k)].inputs) inputs.push_back(in);
    last.control_input = g.nodes[first].control_input;
    last.op = op == OpId::ApplyAdam ? OpId::ApplyAdamGroup : OpId::ApplyGradientDescentGroup;
    last.name = g.unique_name(op_def(last.op).name);  // dumps and errors name what runs
    last.inputs = std::move(inputs);
    last.attrs = VariableGroupAttrs{std::move(group)};
    for (std::size_t k = 0; k + 1 < run.size(); ++k) keep[static_cast<std::size_t>(run[k])] = false;
    ++groups;
  }
  if (groups) compact(g, keep);
  return groups;
}

}  // namespace tg::detail
