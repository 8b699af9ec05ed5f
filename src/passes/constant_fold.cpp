// Constant folding: stateless ops on constants are computed once, at trace time.
#include "core/tensor_impl.h"
#include "passes/passes.h"
#include "passes/rewrite.h"

namespace tg::detail {

int fold_constants(GraphIR& g) {
  const std::size_t n = g.nodes.size();
  std::vector<std::vector<Tensor>> folded(n);
  int count = 0;
  for (std::size_t i = 0; i < n; ++i) {
    GraphNode& node = g.nodes[i];
    if (node.kind != NodeKind::kOp || (op_def(node.op).traits & kStateful) || node.inputs.empty()) continue;
    // Control flow is never folded: a loop (in a while node, or inside a branch) could take
    // unbounded time. Nor is an op whose result is not known small before it runs: folding must
    // cost little even for a graph read from a file.
    if (has_subgraphs(node.op)) continue;
    bool known_small = true;
    for (const ValueType& t : node.outputs)
      known_small &= t.shape.is_fully_defined() && t.shape.num_elements() <= kMaxFoldedElements;
    if (!known_small) continue;
    std::vector<Tensor> args;
    bool all_const = true;
    for (const ValueRef& in : node.inputs) {
      const GraphNode& src = g.node_of(in);
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
  GraphRebuilder rebuilt(g);
  for (std::size_t i = 0; i < n; ++i) {
    if (folded[i].empty()) {
      rebuilt.keep(static_cast<int>(i));
      continue;
    }
    for (std::size_t k = 0; k < folded[i].size(); ++k) {
      GraphNode c;
      c.kind = NodeKind::kConst;
      c.name = g.unique_name(g.nodes[i].name + "/folded");
      c.value = folded[i][k];
      c.outputs = {ValueType{c.value.dtype(), c.value.shape()}};
      rebuilt.replace(ValueRef{static_cast<int>(i), static_cast<int>(k)}, ValueRef{rebuilt.add(std::move(c)), 0});
    }
  }
  rebuilt.finish();
  return count;
}

}  // namespace tg::detail
