// The graph verifier: structural invariants every pass must keep.
#pragma once
#include "graph/graph_ir.h"

namespace tg::detail {

/// Throws tg::InternalError naming the first broken invariant: inputs and control edges point
/// to earlier nodes and existing outputs, op arity and kinds are consistent, placeholders and
/// outputs are listed in order, names are unique, constants hold values of their type.
void verify_graph(const GraphIR& g, const char* after_pass);

}  // namespace tg::detail
