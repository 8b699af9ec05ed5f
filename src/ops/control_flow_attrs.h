// The attributes of the control-flow ops (cond, while and their stateful variants): declared
// here, with the other op attributes, so that every layer that reads a graph - the printers,
// the verifier, the passes, the planner, export - can read them; the ops themselves live in
// src/control_flow.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ops/op.h"

namespace tg::detail {

/// What a cond / while node carries, in ControlFlowAttrs. Node inputs are
/// cond:  [pred, captures...]        sub-graph placeholders: [its captures...]
/// while: [loop vars..., captures...] sub-graph placeholders: [loop vars..., its captures...]
/// where `capture_inputs[g][k]` is the node input that feeds capture placeholder k of graph g.
struct ControlFlowPayload {
  std::vector<NamedSubgraph> subgraphs;                // cond {then_branch, else_branch}; while {cond, body}
  std::string name;                                    // the node's name: "cond", or WhileOptions::name
  std::vector<std::vector<int>> capture_inputs;
  std::vector<ValueType> output_types;                 // cond: merged branch types; while: invariants
  int num_loop_vars = 0;                               // while only
  std::vector<std::string> var_paths;                  // while: for messages
  int64_t maximum_iterations = -1;                     // while only
};

/// The sub-graphs an op's attributes carry (empty for ops without the kSubgraphs trait).
inline const std::vector<NamedSubgraph>& subgraphs_of(const OpAttrs& attrs) {
  static const std::vector<NamedSubgraph> kNone;
  const ControlFlowAttrs* cf = attrs.get_if<ControlFlowAttrs>();
  return cf && cf->payload ? cf->payload->subgraphs : kNone;
}

}  // namespace tg::detail
