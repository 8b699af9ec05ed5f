// The graph verifier: the invariants every pass must keep, and every loaded graph: structure,
// and every node's types by its op's own rule.
#pragma once
#include <string>

#include "graph/graph_ir.h"

namespace tg::detail {

/// The first broken invariant of `g` (sub-graphs included) as "node 3 'add' uses a later or
/// missing node", or empty when there is none: inputs and control edges point to earlier nodes
/// and existing outputs, op arity and attribute kinds are consistent, placeholders and outputs
/// are listed in order, names are unique, constants hold values of their type, a control-flow
/// node's sub-graphs fit its inputs and outputs (counts, capture indices, dtypes, shapes), and
/// every node's stored types are its op's rule's (node_type_defect). When `node` is given it
/// receives the index in `g` of the node at fault (a sub-graph's defect is its node's), or -1
/// for the graph's lists.
std::string graph_defect(const GraphIR& g, int* node = nullptr);

/// Whether node `i`'s stored output types are exactly what its op's shape rule computes from
/// its inputs' stored types and its attributes (an output node's: its input's type), as the
/// rest of a sentence that starts with the node's name: "(op add) declares outputs (int32 (2,))
/// but its inputs give (float32 (2,))", "(op reduce_sum) is invalid: [reduce_sum] ...", or
/// empty. The node's inputs must point at earlier nodes' existing outputs (graph_defect checks
/// that first). A rule's tg::InternalError is not a defect of the graph: it propagates.
std::string node_type_defect(const GraphIR& g, std::size_t i);

/// Throws tg::InternalError naming the first broken invariant (graph_defect) after a pass.
void verify_graph(const GraphIR& g, const char* after_pass);

}  // namespace tg::detail
