#include "graph/verify.h"

#include <unordered_set>

#include "core/check.h"

namespace tg::detail {

void verify_graph(const GraphIR& g, const char* after_pass) {
  auto fail = [&](std::size_t i, const std::string& what) {
    throw InternalError(str_cat("graph verifier (after ", after_pass, "): node ", i, " '",
                                i < g.nodes.size() ? g.nodes[i].name : std::string("?"), "' ", what));
  };
  std::unordered_set<std::string> names;
  std::size_t placeholder_count = 0;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    if (!names.insert(n.name).second) fail(i, "has a duplicate name");
    for (const ValueRef& in : n.inputs) {
      if (in.node < 0 || static_cast<std::size_t>(in.node) >= i) fail(i, "uses a later or missing node");
      if (in.output < 0 || static_cast<std::size_t>(in.output) >= g.node(in.node).outputs.size())
        fail(i, "uses a missing output");
    }
    if (n.control_input >= 0) {
      if (static_cast<std::size_t>(n.control_input) >= i) fail(i, "has a control edge to a later node");
      const GraphNode& c = g.node(n.control_input);
      if (c.kind != NodeKind::kOp || !(op_def(c.op).traits & kStateful)) fail(i, "has a control edge to a stateless node");
    }
    switch (n.kind) {
      case NodeKind::kPlaceholder:
        if (!n.inputs.empty() || n.outputs.size() != 1) fail(i, "is a malformed placeholder");
        if (n.input_index < 0 || static_cast<std::size_t>(n.input_index) >= g.placeholders.size() ||
            g.placeholders[static_cast<std::size_t>(n.input_index)] != static_cast<int>(i))
          fail(i, "is not listed as placeholder #" + std::to_string(n.input_index));
        ++placeholder_count;
        break;
      case NodeKind::kConst:
        if (!n.inputs.empty() || n.outputs.size() != 1 || !n.value.defined() || n.value.is_symbolic() ||
            n.value.dtype() != n.outputs[0].dtype || !n.value.shape().is_subtype_of(n.outputs[0].shape))
          fail(i, "is a malformed constant");
        break;
      case NodeKind::kOp: {
        const OpDef& d = op_def(n.op);
        if (d.arity >= 0 && static_cast<std::size_t>(d.arity) != n.inputs.size())
          fail(i, str_cat("has ", n.inputs.size(), " inputs, op ", d.name, " takes ", d.arity));
        if (n.attrs.kind() != d.attrs_kind)
          fail(i, str_cat("holds ", attrs_kind_name(n.attrs.kind()), ", op ", d.name, " takes ",
                          attrs_kind_name(d.attrs_kind)));
        // Control-flow nodes: their sub-graphs must be well formed too.
        if (has_subgraphs(n.op) == subgraphs_of(n).empty())
          fail(i, has_subgraphs(n.op) ? "is a control-flow node without its sub-graphs"
                                      : "carries sub-graphs but its op takes none");
        for (const auto& s : subgraphs_of(n)) {
          if (!s.graph) fail(i, "has an empty sub-graph slot");
          verify_graph(*s.graph, after_pass);
        }
        break;
      }
      case NodeKind::kOutput:
        if (n.inputs.size() != 1) fail(i, "is an output without exactly one input");
        break;
    }
  }
  if (placeholder_count != g.placeholders.size()) fail(0, "placeholder list does not match the nodes");
  for (int o : g.outputs)
    if (o < 0 || static_cast<std::size_t>(o) >= g.nodes.size() || g.node(o).kind != NodeKind::kOutput)
      fail(static_cast<std::size_t>(o < 0 ? 0 : o), "is listed as an output but is not an output node");
}

}  // namespace tg::detail
