// Constant folding: stateless ops on constants are computed once, at trace time.
#include <algorithm>
#include <utility>

#include "core/tensor_impl.h"
#include "passes/passes.h"
#include "passes/rewrite.h"

namespace tg::detail {

int fold_constants(GraphIR& g) {
  const std::size_t n = g.nodes.size();
  // The folded nodes' values, by node index, in node order: few graphs fold anything, and an
  // array over all nodes was megabytes of fresh pages at 100k nodes.
  std::vector<std::pair<int, std::vector<Tensor>>> folded;
  auto folded_value = [&](ValueRef r) -> const Tensor* {
    auto it = std::lower_bound(folded.begin(), folded.end(), r.node, [](const auto& f, int node) { return f.first < node; });
    return it != folded.end() && it->first == r.node ? &it->second[static_cast<std::size_t>(r.output)] : nullptr;
  };
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
      if (src.kind == NodeKind::kConst) {
        args.push_back(src.value);
      } else if (const Tensor* value = folded_value(in)) {
        args.push_back(*value);
      } else {
        all_const = false;
        break;
      }
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
    folded.emplace_back(static_cast<int>(i), std::move(out));
  }
  if (folded.empty()) return 0;
  // Rebuild: each folded op becomes Const nodes (one per output) at its position.
  GraphRebuilder rebuilt(g);
  auto next = folded.begin();
  for (std::size_t i = 0; i < n; ++i) {
    if (next == folded.end() || next->first != static_cast<int>(i)) {
      rebuilt.keep(static_cast<int>(i));
      continue;
    }
    const std::vector<Tensor>& values = (next++)->second;
    for (std::size_t k = 0; k < values.size(); ++k) {
      GraphNode c;
      c.kind = NodeKind::kConst;
      c.name = g.unique_name(g.nodes[i].name + "/folded");
      c.value = values[k];
      c.outputs = {ValueType{c.value.dtype(), c.value.shape()}};
      rebuilt.replace(ValueRef{static_cast<int>(i), static_cast<int>(k)}, ValueRef{rebuilt.add(std::move(c)), 0});
    }
  }
  rebuilt.finish();
  return static_cast<int>(folded.size());
}

}  // namespace tg::detail
