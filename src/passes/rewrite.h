// Shared machinery for passes: forwarding a node's outputs to other values, and the one way to
// rebuild a graph after a pass removed, replaced or reordered nodes.
#pragma once
#include <unordered_map>
#include <vector>

#include "core/buffer.h"
#include "graph/graph_ir.h"

namespace tg::detail {

/// Per node and output, the value that now stands for it (initially itself). Its arrays are
/// built at the first forward() from the graph's node list as it stands then, by node index:
/// a pass forwards before it changes the node list (compact and GraphRebuilder then resolve
/// through it by the old indices).
class Forwarding {
 public:
  explicit Forwarding(const GraphIR& g) : g_(g) {}
  /// Uses of `from` become uses of `to` (to must come earlier in the graph).
  void forward(ValueRef from, ValueRef to);
  ValueRef resolve(ValueRef r) const {
    // Targets are always resolved when set, so one step suffices.
    return map_.empty() ? r : map_[first_value_[static_cast<std::size_t>(r.node)] + static_cast<std::size_t>(r.output)];
  }

 private:
  // One flat map over all values (first_value_: per node, its output 0's position): a pass
  // allocates two arrays, not one per node, and only once it forwards a value (most passes
  // over most graphs forward none, and at 100k nodes the arrays are megabytes of fresh pages).
  const GraphIR& g_;
  CachedVector<std::size_t> first_value_;
  CachedVector<ValueRef> map_;
};

/// Rebuilds a graph node by node, in the order the pass emits them. Every pass that changes
/// the node list goes through it, so none renumbers inputs, control edges, placeholders or
/// outputs by hand. Precondition: a node is emitted after the producers of its inputs.
class GraphRebuilder {
 public:
  explicit GraphRebuilder(GraphIR& g);
  /// Moves old node `i` into the new graph, its inputs resolved through `fwd` (if any) and
  /// renumbered. A control edge to a node that was not kept moves to that node's own control
  /// predecessor. Returns the node's new index.
  int keep(int i, const Forwarding* fwd = nullptr);
  /// Adds a new node whose inputs are values of the old graph (renumbered here). Returns its
  /// new index.
  int add(GraphNode node);
  /// Adds a new node whose inputs are values of the new graph already. Returns its new index.
  int add_built(GraphNode node);
  /// The new graph's value for the old value `old` (its node kept or replaced already).
  ValueRef now(ValueRef old) const { return renumbered(old); }
  /// Uses of the old value `old` become uses of the new graph's value `now`.
  void replace(ValueRef old, ValueRef now);
  /// Swaps the new node list into the graph and renumbers its placeholders and outputs.
  void finish();

 private:
  ValueRef renumbered(ValueRef old) const;

  GraphIR& g_;
  NodeArray nodes_;
  CachedVector<int> new_index_;  // old node -> new node (-1: not kept)
  // Old node -> its outputs' new values, for the few replaced nodes only (a list per node was
  // 24 bytes a node, megabytes of fresh pages at 100k nodes).
  std::unordered_map<int, std::vector<ValueRef>> replaced_;
};

/// Keeps the nodes with keep[i], in order and in place, rewriting inputs through `fwd` (when
/// given) as GraphRebuilder::keep does, control edges included: GraphRebuilder for passes that
/// only drop nodes, without a second node array. Precondition: every kept node's inputs,
/// resolved through `fwd`, are kept.
void compact(GraphIR& g, const std::vector<bool>& keep, const Forwarding* fwd = nullptr);

/// Which nodes the graph's outputs or effects need (what eliminate_dead_code keeps): for passes
/// that run before the sweep and must not count readers fusion has left dead.
std::vector<bool> live_nodes(const GraphIR& g);

}  // namespace tg::detail
