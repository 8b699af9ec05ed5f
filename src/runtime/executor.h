// Runs graphs on eager inputs through plans (src/runtime/plan.h: kernel list, arena with
// in-place reuse, frames parked between calls). Whoever runs a graph repeatedly owns its plan:
// a concrete function the plan of its graph, a plan the plans of its cond / while sub-graphs.
#pragma once
#include <memory>
#include <span>
#include <vector>

#include "graph/graph_ir.h"

namespace tg::detail {

class Plan;

/// The plan of `graph` and of its control-flow nodes' sub-graphs. `graph` must outlive the plan
/// and not change after it is planned.
std::shared_ptr<const Plan> make_plan(const GraphIR& graph);

/// Executes every step of `plan` in order; stateful ops run in program order. Outputs are fresh
/// tensors (never arena memory). Safe to call from several threads at once.
std::vector<Tensor> execute(const Plan& plan, const std::vector<Tensor>& inputs);
/// The same, moving the inputs into the run instead of copying their handles (each copy is an
/// atomic increment and decrement, a tenth of a cached scalar call once the process has threads).
std::vector<Tensor> execute(const Plan& plan, std::vector<Tensor>&& inputs);
/// The same on handles the caller lends: they must stay alive, unchanged, until execute_lent
/// returns. An input that only kernels writing into given outputs read reaches them without a
/// copy of its handle (none of a cached call's reference counting); any other is copied, so no
/// result and no Variable keeps a lent handle.
std::vector<Tensor> execute_lent(const Plan& plan, std::span<const Tensor* const> inputs);

/// Plans `graph` for this one call and runs it: for graphs run once (tests, a pass comparing
/// results before and after a rewrite). Keep a plan instead to run a graph repeatedly.
std::vector<Tensor> execute(const GraphIR& graph, const std::vector<Tensor>& inputs);

/// For the kernels of control-flow ops: runs `graph`, a sub-graph of the node being run, with
/// the plan the enclosing plan made for it. A kernel run outside a plan (eagerly, or by constant
/// folding) plans the sub-graph for this one call.
std::vector<Tensor> run_subgraph(const GraphIR& graph, const std::vector<Tensor>& inputs);

}  // namespace tg::detail
