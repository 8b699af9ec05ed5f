#include "passes/rewrite.h"

#include "core/check.h"

namespace tg::detail {

void Forwarding::forward(ValueRef from, ValueRef to) {
  TG_CHECK(to.node < from.node, "values may only forward to earlier nodes");
  if (map_.empty()) {
    // One pass over the nodes: at 100k nodes each node read is a cache miss.
    first_value_.reserve(g_.nodes.size());
    map_.reserve(g_.nodes.size());  // nearly every node has one output
    for (std::size_t i = 0; i < g_.nodes.size(); ++i) {
      first_value_.push_back(map_.size());
      for (std::size_t k = 0; k < g_.nodes[i].outputs.size(); ++k)
        map_.push_back(ValueRef{static_cast<int>(i), static_cast<int>(k)});
    }
  }
  const ValueRef target = resolve(to);
  map_[first_value_[static_cast<std::size_t>(from.node)] + static_cast<std::size_t>(from.output)] = target;
}

GraphRebuilder::GraphRebuilder(GraphIR& g) : g_(g), new_index_(g.nodes.size(), -1) {}

ValueRef GraphRebuilder::renumbered(ValueRef old) const {
  if (auto it = replaced_.find(old.node); it != replaced_.end()) {
    const std::vector<ValueRef>& replaced = it->second;
    TG_CHECK(static_cast<std::size_t>(old.output) < replaced.size(), "a replaced node has no output ", old.output);
    return replaced[static_cast<std::size_t>(old.output)];
  }
  const int at = new_index_[static_cast<std::size_t>(old.node)];
  TG_CHECK(at >= 0, "a node uses node ", old.node, ", which the rebuilt graph does not have (yet)");
  return ValueRef{at, old.output};
}

int GraphRebuilder::keep(int i, const Forwarding* fwd) {
  GraphNode node = std::move(g_.nodes[static_cast<std::size_t>(i)]);
  for (ValueRef& in : node.inputs) in = renumbered(fwd ? fwd->resolve(in) : in);
  int c = node.control_input;
  while (c >= 0 && new_index_[static_cast<std::size_t>(c)] < 0) c = g_.nodes[static_cast<std::size_t>(c)].control_input;
  node.control_input = c >= 0 ? new_index_[static_cast<std::size_t>(c)] : -1;
  const int at = static_cast<int>(nodes_.size());
  new_index_[static_cast<std::size_t>(i)] = at;
  nodes_.push_back(std::move(node));
  return at;
}

int GraphRebuilder::add(GraphNode node) {
  for (ValueRef& in : node.inputs) in = renumbered(in);
  nodes_.push_back(std::move(node));
  return static_cast<int>(nodes_.size()) - 1;
}

int GraphRebuilder::add_built(GraphNode node) {
  nodes_.push_back(std::move(node));
  return static_cast<int>(nodes_.size()) - 1;
}

void GraphRebuilder::replace(ValueRef old, ValueRef now) {
  std::vector<ValueRef>& replaced = replaced_[old.node];
  if (replaced.size() <= static_cast<std::size_t>(old.output)) replaced.resize(static_cast<std::size_t>(old.output) + 1);
  replaced[static_cast<std::size_t>(old.output)] = now;
}

void GraphRebuilder::finish() {
  for (int& p : g_.placeholders) p = new_index_[static_cast<std::size_t>(p)];
  for (int& o : g_.outputs) o = new_index_[static_cast<std::size_t>(o)];
  g_.nodes = std::move(nodes_);
}

void compact(GraphIR& g, const std::vector<bool>& keep, const Forwarding* fwd) {
  // In place: a kept node only moves down, into a slot whose node was already moved or dropped,
  // so a pass that only drops nodes allocates no second node array (for a large graph, tens of
  // MB of fresh pages per pass).
  const std::size_t n = g.nodes.size();
  CachedVector<int> new_index(n, -1);
  // Per node, the new index a control edge to it goes to: its own if kept, else its control
  // predecessor's (found before that predecessor's slot is overwritten).
  CachedVector<int> control_target(n, -1);
  std::size_t next = 0;
  for (std::size_t i = 0; i < n; ++i) {
    GraphNode& node = g.nodes[i];
    const int c = node.control_input;
    const int control = c >= 0 ? control_target[static_cast<std::size_t>(c)] : -1;
    if (!keep[i]) {
      control_target[i] = control;
      continue;
    }
    for (ValueRef& in : node.inputs) {
      const ValueRef old = fwd ? fwd->resolve(in) : in;
      const int at = new_index[static_cast<std::size_t>(old.node)];
      TG_CHECK(at >= 0, "a node uses node ", old.node, ", which the compacted graph does not keep");
      in = ValueRef{at, old.output};
    }
    node.control_input = control;
    new_index[i] = control_target[i] = static_cast<int>(next);
    if (next != i) g.nodes[next] = std::move(node);
    ++next;
  }
  g.nodes.truncate(next);
  for (int& p : g.placeholders) p = new_index[static_cast<std::size_t>(p)];
  for (int& o : g.outputs) o = new_index[static_cast<std::size_t>(o)];
}

}  // namespace tg::detail
