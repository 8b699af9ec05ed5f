#include "runtime/executor.h"

#include "core/check.h"
#include "core/tensor_impl.h"

namespace tg::detail {

std::vector<Tensor> execute(const GraphIR& graph, const std::vector<Tensor>& inputs) {
  const std::size_t n = graph.nodes.size();
  TG_CHECK(inputs.size() == graph.placeholders.size());
  // Remaining uses per node, so that intermediate buffers are freed as soon as possible.
  std::vector<int> uses(n, 0);
  for (const auto& node : graph.nodes)
    for (const auto& in : node.inputs) ++uses[static_cast<std::size_t>(in.node)];
  std::vector<std::vector<Tensor>> values(n);
  std::vector<Tensor> results;
  results.reserve(graph.outputs.size());
  std::vector<Tensor> args;
  for (std::size_t i = 0; i < n; ++i) {
    const GraphNode& node = graph.nodes[i];
    args.clear();
    for (const auto& in : node.inputs) {
      const auto src = static_cast<std::size_t>(in.node);
      args.push_back(values[src][static_cast<std::size_t>(in.output)]);
      if (--uses[src] == 0) values[src].clear();
    }
    switch (node.kind) {
      case NodeKind::kPlaceholder:
        values[i] = {inputs[static_cast<std::size_t>(node.attrs.axis)]};
        break;
      case NodeKind::kConst:
        values[i] = {node.value};
        break;
      case NodeKind::kOp:
        values[i] = run_op_eager(op_def(node.op), args, node.attrs);
        break;
      case NodeKind::kOutput:
        results.push_back(args[0]);
        break;
    }
  }
  return results;
}

}  // namespace tg::detail
