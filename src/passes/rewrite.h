// Shared machinery for passes: forwarding a node's outputs to other values, and compacting a
// graph after nodes were removed.
#pragma once
#include <vector>

#include "graph/graph_ir.h"

namespace tg::detail {

/// Per node and output, the value that now stands for it (initially itself).
class Forwarding {
 public:
  explicit Forwarding(const GraphIR& g);
  /// Uses of `from` become uses of `to` (to must come earlier in the graph).
  void forward(ValueRef from, ValueRef to);
  ValueRef resolve(ValueRef r) const;

 private:
  std::vector<std::vector<ValueRef>> map_;
};

/// Rebuilds g keeping the nodes with keep[i], rewriting inputs through `fwd`; a control edge to a
/// removed node moves to that node's own control predecessor.
void compact(GraphIR& g, const std::vector<bool>& keep, const Forwarding& fwd);

}  // namespace tg::detail
