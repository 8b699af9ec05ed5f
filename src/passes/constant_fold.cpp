// Constant folding: stateless ops on constants are computed once, at trace time.
#include "core/tensor_impl.h"
#include "passes/passes.h"
#include "passes/rewrite.h"

namespace tg::detail {

int fold_constants(GraphIR& g) {
  const std::size_t n = g.nodes.size();
  std::vector<GraphNode> added;  // new Const nodes, spliced in front of the op they replace
  std::vector<std::vector<Tensor>> folded(n);
  int count = 0;
  for (std::size_t i = 0; i < n; ++i) {
    GraphNode& node = g.nodes[i];
    if (node.kind != NodeKind::kOp || (op_def(node.op).traits & kStateful) || node.inputs.empty()) continue;
    if (node.op == OpId::While) continue;  // running a loop at trace time could take unbounded time
    std::vector<Tensor> args;
    bool all_const = true;
    for (const ValueRef& in : node.inputs) {
      const GraphNode& src = g.nodes[static_cast<std::size_t>(in.node)];
      if (src.kind == NodeKind::kConst) args.push_back(src.value);
      else if (!folded[static_cast<std::size_t>(in.node)].empty()) args.push_back(folded[static_cast<std::size_t>(in.node)][static_cast<std::size_t>(in.output)]);
      else all_const = false;
    }
    if (!all_const) continue;
    std::vector<Tensor> out;
    try {
      out = run_op_eager(op_def(node.op), args, node.attrs);
    } catch (const Error&) {
      continue;  // e.g. an integer division by zero: keep it, so it fails when the graph runs
    }
    bool small = true;
    for (const Tensor& t : out) small &= t.num_elements() <= kMaxFoldedElements;
    if (!small) continue;
    folded[i] = std::move(out);
    ++count;
  }
  if (!count) return 0;
  // Rebuild: each folded op becomes Const nodes (one per output) at its position.
  std::vector<GraphNode> nodes;
  std::vector<std::vector<ValueRef>> remap(n);
  std::vector<int> new_index(n, -1);
  for (std::size_t i = 0; i < n; ++i) {
    GraphNode& node = g.nodes[i];
    if (!folded[i].empty()) {
      for (std::size_t k = 0; k < folded[i].size(); ++k) {
        GraphNode c;
        c.kind = NodeKind::kConst;
        c.name = g.unique_name(node.name + "/folded");
        c.value = folded[i][k];
        c.outputs = {ValueType{c.value.dtype(), c.value.shape()}};
        remap[i].push_back(ValueRef{static_cast<int>(nodes.size()), 0});
        nodes.push_back(std::move(c));
      }
      continue;
    }
    for (ValueRef& in : node.inputs) in = remap[static_cast<std::size_t>(in.node)][static_cast<std::size_t>(in.output)];
    if (node.control_input >= 0) node.control_input = new_index[static_cast<std::size_t>(node.control_input)];
    new_index[i] = static_cast<int>(nodes.size());
    for (std::size_t k = 0; k < node.outputs.size(); ++k) remap[i].push_back(ValueRef{new_index[i], static_cast<int>(k)});
    nodes.push_back(std::move(node));
  }
  for (int& p : g.placeholders) p = new_index[static_cast<std::size_t>(p)];
  for (int& o : g.outputs) o = new_index[static_cast<std::size_t>(o)];
  g.nodes = std::move(nodes);
  return count;
}

}  // namespace tg::detail
