// Dead-code elimination.
#include "passes/passes.h"
#include "passes/rewrite.h"

#include <vector>

namespace tg::detail {

std::vector<bool> live_nodes(const GraphIR& g) {
  const std::size_t n = g.nodes.size();
  std::vector<bool> live(n, false);
  for (std::size_t i = 0; i < n; ++i) {
    const GraphNode& node = g.nodes[i];
    live[i] = node.kind == NodeKind::kOutput || node.kind == NodeKind::kPlaceholder ||
              (node.kind == NodeKind::kOp && (op_def(node.op).traits & kStateful));
  }
  // Inputs and control edges point backwards, so one reverse sweep reaches everything.
  for (std::size_t i = n; i-- > 0;) {
    if (!live[i]) continue;
    for (const ValueRef& in : g.nodes[i].inputs) live[static_cast<std::size_t>(in.node)] = true;
    if (g.nodes[i].control_input >= 0) live[static_cast<std::size_t>(g.nodes[i].control_input)] = true;
  }
  return live;
}

int eliminate_dead_code(GraphIR& g) {
  const std::vector<bool> live = live_nodes(g);
  int removed = 0;
  for (bool l : live) removed += !l;
  if (removed) compact(g, live);
  return removed;
}

}  // namespace tg::detail
