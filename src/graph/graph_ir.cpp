#include "graph/graph_ir.h"

#include <sstream>

#include "core/check.h"
#include "tracegraph/function.h"

namespace tg {
namespace detail {

std::string GraphNode::op_name() const {
  switch (kind) {
    case NodeKind::kPlaceholder: return "Placeholder";
    case NodeKind::kConst: return "Const";
    case NodeKind::kOutput: return "Identity";
    case NodeKind::kOp: break;
  }
  return op_def(op).name;
}

std::string GraphIR::unique_name(const std::string& base) {
  std::string name = base;
  while (true) {
    auto [it, inserted] = name_counts_.try_emplace(name, 0);
    if (inserted) return name;
    // Already taken: try base_N with the next N for this base.
    int& n = name_counts_[base];
    name = base + "_" + std::to_string(++n);
  }
}

int GraphIR::add_node(GraphNode node) {
  for (const ValueRef& in : node.inputs)
    TG_CHECK(in.node >= 0 && in.node < static_cast<int>(nodes.size()), "dangling input");
  nodes.push_back(std::move(node));
  return static_cast<int>(nodes.size()) - 1;
}

std::string GraphIR::ref_name(const ValueRef& r) const {
  const std::string& n = nodes[static_cast<std::size_t>(r.node)].name;
  return r.output == 0 ? n : n + ":" + std::to_string(r.output);
}

}  // namespace detail

std::vector<Graph::Node> Graph::nodes() const {
  std::vector<Node> out;
  for (const auto& n : ir_->nodes) {
    Node node{n.name, n.op_name(), {}};
    for (const auto& in : n.inputs) node.inputs.push_back(ir_->ref_name(in));
    if (n.control_input >= 0) node.inputs.push_back("^" + ir_->nodes[static_cast<std::size_t>(n.control_input)].name);
    out.push_back(std::move(node));
  }
  return out;
}

std::string Graph::to_string() const {
  std::ostringstream os;
  for (const auto& n : nodes()) {
    os << "[";
    for (std::size_t i = 0; i < n.inputs.size(); ++i) os << (i ? ", " : "") << n.inputs[i];
    os << "] -> " << n.name << "\n";
  }
  return os.str();
}

std::string Graph::to_dot() const {
  std::ostringstream os;
  os << "digraph G {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n";
  for (std::size_t i = 0; i < ir_->nodes.size(); ++i) {
    const auto& n = ir_->nodes[i];
    std::string types;
    for (const auto& t : n.outputs) types += (types.empty() ? "" : ", ") + detail::describe(t);
    os << "  n" << i << " [label=\"" << n.name << "\\n" << n.op_name() << "\\n" << types << "\"";
    if (n.kind == detail::NodeKind::kPlaceholder || n.kind == detail::NodeKind::kOutput)
      os << ", style=rounded";
    os << "];\n";
  }
  for (std::size_t i = 0; i < ir_->nodes.size(); ++i) {
    const auto& n = ir_->nodes[i];
    for (const auto& in : n.inputs) {
      os << "  n" << in.node << " -> n" << i;
      if (in.output) os << " [label=\":" << in.output << "\"]";
      os << ";\n";
    }
    if (n.control_input >= 0) os << "  n" << n.control_input << " -> n" << i << " [style=dashed];\n";
  }
  os << "}\n";
  return os.str();
}

}  // namespace tg
