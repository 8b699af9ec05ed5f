// Runs a graph on eager inputs through its plan (src/runtime/plan.h: kernel list, arena with
// in-place reuse, frames parked between calls).
#pragma once
#include <vector>

#include "graph/graph_ir.h"

namespace tg::detail {

/// Executes every node in order; stateful ops run in program order. Builds the graph's plan on
/// the first call. Outputs are fresh tensors (never arena memory).
std::vector<Tensor> execute(const GraphIR& graph, const std::vector<Tensor>& inputs);

}  // namespace tg::detail
