#include "passes/rewrite.h"

#include "core/check.h"

namespace tg::detail {

Forwarding::Forwarding(const GraphIR& g) : map_(g.nodes.size()) {
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    for (std::size_t k = 0; k < g.nodes[i].outputs.size(); ++k)
      map_[i].push_back(ValueRef{static_cast<int>(i), static_cast<int>(k)});
}

void Forwarding::forward(ValueRef from, ValueRef to) {
  TG_CHECK(to.node < from.node, "values may only forward to earlier nodes");
  map_[static_cast<std::size_t>(from.node)][static_cast<std::size_t>(from.output)] = resolve(to);
}

ValueRef Forwarding::resolve(ValueRef r) const {
  // Targets are always resolved when set, so one step suffices.
  return map_[static_cast<std::size_t>(r.node)][static_cast<std::size_t>(r.output)];
}

void compact(GraphIR& g, const std::vector<bool>& keep, const Forwarding& fwd) {
  const std::size_t n = g.nodes.size();
  std::vector<int> new_index(n, -1);
  std::vector<GraphNode> nodes;
  nodes.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (!keep[i]) continue;
    GraphNode node = std::move(g.nodes[i]);
    for (ValueRef& in : node.inputs) {
      const ValueRef r = fwd.resolve(in);
      TG_CHECK(keep[static_cast<std::size_t>(r.node)], "a kept node uses removed node ", r.node);
      in = ValueRef{new_index[static_cast<std::size_t>(r.node)], r.output};
    }
    int c = node.control_input;
    while (c >= 0 && !keep[static_cast<std::size_t>(c)]) c = g.nodes[static_cast<std::size_t>(c)].control_input;
    node.control_input = c >= 0 ? new_index[static_cast<std::size_t>(c)] : -1;
    new_index[i] = static_cast<int>(nodes.size());
    nodes.push_back(std::move(node));
  }
  for (int& p : g.placeholders) p = new_index[static_cast<std::size_t>(p)];
  for (int& o : g.outputs) o = new_index[static_cast<std::size_t>(o)];
  g.nodes = std::move(nodes);
}

}  // namespace tg::detail
