// Runs a graph on eager inputs. A plain interpreter for now: the optimiser and planned
// executor come with the graph-speed work.
#pragma once
#include <vector>

#include "graph/graph_ir.h"

namespace tg::detail {

/// Executes every node in order; stateful ops run in program order. Values are released after
/// their last use so peak memory follows liveness rather than graph size.
std::vector<Tensor> execute(const GraphIR& graph, const std::vector<Tensor>& inputs);

}  // namespace tg::detail
