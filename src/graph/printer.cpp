// tg::Graph's printers: text ("[a, b] -> add", sub-graphs indented under their node) and DOT.
#include <sstream>

#include "graph/graph_ir.h"
#include "ops/fused.h"
#include "ops/variable_state.h"
#include "tracegraph/graph.h"

namespace tg {

std::vector<Graph::Node> Graph::nodes() const {
  std::vector<Node> out;
  for (const auto& n : ir_->nodes) {
    Node node{n.name, n.op_name(), {}, {}, {}, ir_->captured_name(n)};
    for (const auto& in : n.inputs) node.inputs.push_back(ir_->ref_name(in));
    if (n.control_input >= 0) node.inputs.push_back("^" + ir_->node(n.control_input).name);
    for (std::size_t i = 0; i < n.outputs.size(); ++i) {
      std::string name = n.name;
      if (i) name.append(":").append(std::to_string(i));
      node.outputs.emplace_back(n.outputs[i].shape, n.outputs[i].dtype, std::move(name));
    }
    if (n.kind == detail::NodeKind::kOp)
      if (const auto* v = n.attrs.get_if<detail::VariableAttrs>(); v && v->variable) node.variable = v->variable->name;
    out.push_back(std::move(node));
  }
  return out;
}

namespace {
// DOT labels are double-quoted: print's texts may hold quotes, backslashes and newlines.
std::string dot_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// One line per node; a control-flow node's sub-graphs follow it, indented under their roles.
void write_text(std::ostringstream& os, const std::shared_ptr<const detail::GraphIR>& ir, const std::string& indent) {
  const std::vector<Graph::Node> nodes = Graph(ir).nodes();
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    const auto& n = nodes[k];
    os << indent << "[";
    if (!n.captured.empty()) os << "capture: " << n.captured;
    for (std::size_t i = 0; i < n.inputs.size(); ++i) os << (i ? ", " : "") << n.inputs[i];
    os << "] -> " << n.name;
    const auto& node = ir->nodes[k];
    if (node.kind == detail::NodeKind::kOp && node.op == detail::OpId::FusedElementwise)
      os << "{" << detail::fused_summary(node.attrs) << "}";  // the fused ops, in order
    os << "\n";
    if (node.kind != detail::NodeKind::kOp) continue;
    for (const auto& sub : detail::subgraphs_of(node)) {
      os << indent << "    " << n.name << "/" << sub.role << ":\n";
      write_text(os, sub.graph, indent + "      ");
    }
  }
}

// Nodes of one graph, sub-graphs as clusters; ids are prefixed so that they stay unique.
void write_dot(std::ostringstream& os, const detail::GraphIR& ir, const std::string& prefix, const std::string& indent) {
  for (std::size_t i = 0; i < ir.nodes.size(); ++i) {
    const auto& n = ir.nodes[i];
    std::string types;
    for (const auto& t : n.outputs) types += (types.empty() ? "" : ", ") + detail::describe(t);
    const std::string& captured = ir.captured_name(n);
    os << indent << prefix << i << " [label=\"" << n.name << "\\n";
    if (!captured.empty()) os << "capture of " << dot_escape(captured);
    else os << n.op_name();
    if (n.kind == detail::NodeKind::kOp && n.op == detail::OpId::FusedElementwise)
      os << "{" << detail::fused_summary(n.attrs) << "}";
    if (n.kind == detail::NodeKind::kOp) {
      std::string attrs = detail::format_attrs(n.attrs);
      // the Variable a read or an assignment is about (format_attrs leaves references out)
      if (const auto* v = n.attrs.get_if<detail::VariableAttrs>(); v && v->variable)
        attrs.append(attrs.empty() ? "" : ", ").append("variable='").append(v->variable->name).append("'");
      if (!attrs.empty()) os << "(" << dot_escape(attrs) << ")";
    }
    os << "\\n" << types << "\"";
    if (!captured.empty()) os << ", style=\"rounded,dashed\"";
    else if (n.kind == detail::NodeKind::kPlaceholder || n.kind == detail::NodeKind::kOutput)
      os << ", style=rounded";
    os << "];\n";
    if (n.kind != detail::NodeKind::kOp) continue;
    const auto& subs = detail::subgraphs_of(n);
    for (std::size_t s = 0; s < subs.size(); ++s) {
      const std::string sub_prefix = prefix + std::to_string(i) + "_" + std::to_string(s) + "_";
      os << indent << "subgraph cluster_" << sub_prefix << " {\n" << indent << "  label=\"" << n.name << "/"
         << subs[s].role << "\";\n" << indent << "  style=dashed;\n";
      write_dot(os, *subs[s].graph, sub_prefix, indent + "  ");
      os << indent << "}\n";
    }
  }
  for (std::size_t i = 0; i < ir.nodes.size(); ++i) {
    const auto& n = ir.nodes[i];
    for (const auto& in : n.inputs) {
      os << indent << prefix << in.node << " -> " << prefix << i;
      if (in.output) os << " [label=\":" << in.output << "\"]";
      os << ";\n";
    }
    if (n.control_input >= 0) os << indent << prefix << n.control_input << " -> " << prefix << i << " [style=dashed];\n";
  }
}
}  // namespace

std::string Graph::to_string() const {
  std::ostringstream os;
  write_text(os, ir_, "");
  return os.str();
}

std::string Graph::to_dot() const {
  std::ostringstream os;
  os << "digraph G {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n";
  write_dot(os, *ir_, "n", "  ");
  os << "}\n";
  return os.str();
}

}  // namespace tg
