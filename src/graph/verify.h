// The graph verifier: structural invariants every pass must keep, and every loaded graph.
#pragma once
#include <string>

#include "graph/graph_ir.h"

namespace tg::detail {

/// The first broken invariant of `g` (sub-graphs included) as "node 3 'add' uses a later or
/// missing node", or empty when there is none: inputs and control edges point to earlier nodes
/// and existing outputs, op arity and attribute kinds are consistent, placeholders and outputs
/// are listed in order, names are unique, constants hold values of their type, and a
/// control-flow node's sub-graphs fit its inputs and outputs (counts, capture indices, dtypes,
/// shapes).
std::string graph_defect(const GraphIR& g);

/// Throws tg::InternalError naming the first broken invariant (graph_defect) after a pass.
void verify_graph(const GraphIR& g, const char* after_pass);

}  // namespace tg::detail
