#include "graph/verify.h"

#include <algorithm>
#include <functional>
#include <unordered_set>

#include "core/check.h"

namespace tg::detail {

namespace {

struct Defect {
  std::string what;
  int node = -1;
};

bool same_type(const ValueType& a, const ValueType& b) { return a.dtype == b.dtype && a.shape == b.shape; }

template <class Types>
std::string list_types(const Types& types) {
  std::string out;
  for (const auto& t : types) out += (out.empty() ? "" : ", ") + describe(t);
  return out;
}

// A control-flow node's payload against its node and its sub-graphs. Node inputs are
// cond: [pred, captures...]; while: [loop vars..., captures...] (ops/control_flow_attrs.h).
void check_control_flow(const GraphIR& g, const GraphNode& n, const std::function<void(const std::string&)>& fail) {
  const ControlFlowAttrs* attrs = n.attrs.get_if<ControlFlowAttrs>();
  if (!attrs || !attrs->payload) return fail("is a control-flow node without its payload");
  const ControlFlowPayload& p = *attrs->payload;
  const bool is_while = n.op == OpId::While || n.op == OpId::StatefulWhile;
  if (p.subgraphs.size() != 2 || p.capture_inputs.size() != 2)
    return fail(str_cat("has ", p.subgraphs.size(), " sub-graphs and ", p.capture_inputs.size(),
                        " capture lists; a control-flow node has 2 of each"));
  for (const auto& s : p.subgraphs)
    if (!s.graph) return fail("has an empty sub-graph slot");
  if (p.output_types.size() != n.outputs.size())
    return fail(str_cat("has ", n.outputs.size(), " outputs but its payload types ", p.output_types.size()));
  const std::size_t loop_vars = is_while ? static_cast<std::size_t>(std::max(p.num_loop_vars, 0)) : 0;
  const std::size_t first_capture = is_while ? loop_vars : 1;
  if (is_while) {
    if (p.num_loop_vars < 0 || loop_vars > n.inputs.size() || p.var_paths.size() != loop_vars ||
        p.output_types.size() != loop_vars)
      return fail(str_cat("is a while loop of ", p.num_loop_vars, " loop variables with ", n.inputs.size(),
                          " inputs, ", p.var_paths.size(), " variable paths and ", p.output_types.size(), " outputs"));
  } else if (n.inputs.empty()) {
    return fail("is a cond without a predicate input");
  }
  auto input_type = [&](std::size_t k) -> const ValueType& { return g.type_of(n.inputs[k]); };
  for (std::size_t s = 0; s < 2; ++s) {
    const GraphIR& sub = *p.subgraphs[s].graph;
    const auto& caps = p.capture_inputs[s];
    if (sub.placeholders.size() != loop_vars + caps.size())
      return fail(str_cat("sub-graph '", p.subgraphs[s].role, "' takes ", sub.placeholders.size(),
                          " inputs but the node feeds it ", loop_vars + caps.size()));
    for (std::size_t j = 0; j < sub.placeholders.size(); ++j) {
      std::size_t k = j;
      if (j >= loop_vars) {
        const int c = caps[j - loop_vars];
        if (c < static_cast<int>(first_capture) || static_cast<std::size_t>(c) >= n.inputs.size())
          return fail(str_cat("sub-graph '", p.subgraphs[s].role, "' captures node input ", c, " of ", n.inputs.size()));
        k = static_cast<std::size_t>(c);
      }
      const ValueType& want = sub.node(sub.placeholders[j]).outputs.at(0);
      const ValueType& got = is_while && j < loop_vars ? p.output_types[j] : input_type(k);
      if (got.dtype != want.dtype || !got.shape.is_subtype_of(want.shape))
        return fail(str_cat("feeds ", describe(got), " to input ", j, " of sub-graph '", p.subgraphs[s].role,
                            "', which takes ", describe(want)));
      if (is_while && j < loop_vars &&
          (input_type(j).dtype != got.dtype || !input_type(j).shape.is_subtype_of(got.shape)))
        return fail(str_cat("enters loop variable ", j, " as ", describe(input_type(j)), " but its type is ", describe(got)));
    }
    // Results: cond branches give the node's outputs; a while condition one bool, its body the loop variables.
    std::vector<ValueType> results;
    if (is_while && s == 0) results.push_back(ValueType{DType::Bool, TensorShape{}});
    else results = p.output_types;
    if (sub.outputs.size() != results.size())
      return fail(str_cat("sub-graph '", p.subgraphs[s].role, "' returns ", sub.outputs.size(), " values for ",
                          results.size()));
    for (std::size_t j = 0; j < results.size(); ++j) {
      const GraphNode& out = sub.node(sub.outputs[j]);
      if (out.outputs.size() != 1) return fail(str_cat("sub-graph '", p.subgraphs[s].role, "' has a malformed output"));
      const ValueType& got = out.outputs[0];
      const bool scalar_bool = is_while && s == 0;
      if (got.dtype != results[j].dtype ||
          !(scalar_bool ? got.shape.is_compatible_with(results[j].shape) : got.shape.is_subtype_of(results[j].shape)))
        return fail(str_cat("sub-graph '", p.subgraphs[s].role, "' returns ", describe(got), " for result ", j,
                            ", expected ", describe(results[j])));
    }
  }
}

void check_graph(const GraphIR& g) {
  auto fail_at = [&](std::size_t i, const std::string& what) {
    throw Defect{str_cat("node ", i, " '", i < g.nodes.size() ? g.nodes[i].name : std::string("?"), "' ", what),
                 i < g.nodes.size() ? static_cast<int>(i) : -1};
  };
  std::unordered_set<std::string> names;
  std::size_t placeholder_count = 0;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    auto fail = [&](const std::string& what) { fail_at(i, what); };
    if (!names.insert(n.name).second) fail("has a duplicate name");
    for (const ValueRef& in : n.inputs) {
      if (in.node < 0 || static_cast<std::size_t>(in.node) >= i) fail("uses a later or missing node");
      if (in.output < 0 || static_cast<std::size_t>(in.output) >= g.node(in.node).outputs.size())
        fail("uses a missing output");
    }
    if (n.control_input >= 0) {
      if (static_cast<std::size_t>(n.control_input) >= i) fail("has a control edge to a later node");
      const GraphNode& c = g.node(n.control_input);
      if (c.kind != NodeKind::kOp || !(op_def(c.op).traits & kStateful)) fail("has a control edge to a stateless node");
    }
    switch (n.kind) {
      case NodeKind::kPlaceholder:
        if (!n.inputs.empty() || n.outputs.size() != 1) fail("is a malformed placeholder");
        if (n.input_index < 0 || static_cast<std::size_t>(n.input_index) >= g.placeholders.size() ||
            g.placeholders[static_cast<std::size_t>(n.input_index)] != static_cast<int>(i))
          fail("is not listed as placeholder #" + std::to_string(n.input_index));
        ++placeholder_count;
        break;
      case NodeKind::kConst:
        if (!n.inputs.empty() || n.outputs.size() != 1 || !n.value.defined() || n.value.is_symbolic() ||
            n.value.dtype() != n.outputs[0].dtype || !n.value.shape().is_subtype_of(n.outputs[0].shape))
          fail("is a malformed constant");
        break;
      case NodeKind::kOp: {
        const OpDef& d = op_def(n.op);
        if (d.arity >= 0 && static_cast<std::size_t>(d.arity) != n.inputs.size())
          fail(str_cat("has ", n.inputs.size(), " inputs, op ", d.name, " takes ", d.arity));
        if (n.attrs.kind() != d.attrs_kind)
          fail(str_cat("holds ", attrs_kind_name(n.attrs.kind()), ", op ", d.name, " takes ",
                       attrs_kind_name(d.attrs_kind)));
        // Control-flow nodes: their sub-graphs must be well formed, and fit the node.
        if (has_subgraphs(n.op) == subgraphs_of(n).empty())
          fail(has_subgraphs(n.op) ? "is a control-flow node without its sub-graphs"
                                   : "carries sub-graphs but its op takes none");
        if (has_subgraphs(n.op)) {
          check_control_flow(g, n, fail);
          for (const auto& s : subgraphs_of(n)) {
            try {
              check_graph(*s.graph);
            } catch (Defect& d) {
              fail("has sub-graph '" + s.role + "' whose " + d.what);
            }
          }
        }
        break;
      }
      case NodeKind::kOutput:
        if (n.inputs.size() != 1 || n.outputs.size() != 1) fail("is an output without exactly one input and output");
        break;
    }
    if (const std::string defect = node_type_defect(g, i); !defect.empty()) fail(defect);
  }
  auto fail_lists = [&](const std::string& what) { throw Defect{what}; };
  if (placeholder_count != g.placeholders.size()) fail_lists("the placeholder list does not match the nodes");
  for (int o : g.outputs)
    if (o < 0 || static_cast<std::size_t>(o) >= g.nodes.size() || g.node(o).kind != NodeKind::kOutput)
      fail_lists(str_cat("the output list names node ", o, ", which is not an output node"));
}

}  // namespace

std::string node_type_defect(const GraphIR& g, std::size_t i) {
  const GraphNode& n = g.nodes[i];
  if (n.kind == NodeKind::kOutput)
    return same_type(n.outputs[0], g.type_of(n.inputs[0])) ? std::string() : "does not have the type of its input";
  if (n.kind != NodeKind::kOp) return {};
  const OpDef& def = op_def(n.op);
  std::vector<ValueType> in;
  in.reserve(n.inputs.size());
  for (const ValueRef& ref : n.inputs) in.push_back(g.type_of(ref));
  std::vector<ValueType> want;
  try {
    want = def.infer(in, n.attrs);
  } catch (const InternalError&) {
    throw;  // a check graph_defect should have made first, or a broken rule: never a graph's defect
  } catch (const Error& e) {
    return str_cat("(op ", def.name, ") is invalid: ", e.what());
  }
  bool same = want.size() == n.outputs.size();
  for (std::size_t k = 0; same && k < want.size(); ++k) same = same_type(want[k], n.outputs[k]);
  if (same) return {};
  return str_cat("(op ", def.name, ") declares outputs (", list_types(n.outputs), ") but its inputs give (",
                 list_types(want), ")");
}

std::string graph_defect(const GraphIR& g, int* node) {
  if (node) *node = -1;
  try {
    check_graph(g);
  } catch (Defect& d) {
    if (node) *node = d.node;
    return d.what;
  }
  return {};
}

void verify_graph(const GraphIR& g, const char* after_pass) {
  const std::string defect = graph_defect(g);
  if (!defect.empty()) throw InternalError(str_cat("graph verifier (after ", after_pass, "): ", defect));
}

}  // namespace tg::detail
