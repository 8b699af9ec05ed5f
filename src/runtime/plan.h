// The execution plan of a graph: built once by whoever runs the graph repeatedly (a concrete
// function owns the plan of its graph), then every run walks a flat list of kernel calls over
// numbered value slots, with intermediates in a reused arena.
//
// - Slots: one per value (node output). Placeholders are filled from the call's inputs,
//   constants once per frame; a slot is cleared after its last reader.
// - Memory: where each value lives is decided by plan_memory (runtime/memory_plan.h): arena
//   buffers reused by liveness and in place, fresh buffers per call for graph outputs and values
//   that escape, buffers kept by the frame for None-dim values that die within the call.
// - Frames: the per-call state (slot values, argument vectors, arena buffers) is built once and
//   parked in the plan between calls, so a cached call allocates only its output tensors.
//   Concurrent calls of one graph each take a frame of their own.
// - Lent inputs: the cached call path passes the caller's own handles (run(span)), and an input
//   that only kernels writing into given outputs read is lent to them as a handle that owns
//   nothing, so that the call copies and drops no reference count for it.
// - Sub-graphs: a cond / while step holds the plans of its node's sub-graphs, which its kernel
//   runs through run_subgraph (runtime/executor.h). No plan is kept in a GraphIR.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "graph/graph_ir.h"
#include "runtime/memory_plan.h"

namespace tg::detail {

class Plan;

/// The plan of one sub-graph of a control-flow node.
struct SubgraphPlan {
  const GraphIR* graph = nullptr;
  std::unique_ptr<const Plan> plan;
};

struct PlanStep {
  const OpDef* def = nullptr;
  const OpAttrs* attrs = nullptr;
  int node = -1;
  OutputMemory memory = OutputMemory::kByKernel;
  bool infer_per_call = false;  // some input or output type has None dims (or unknown rank)
  bool parallel = false;        // elementwise without broadcasting: split over the thread pool
  bool beside_next = false;     // a control-flow step that runs beside the next one (execution_order)
  // kFresh, static shapes, small, not String: the outputs are tensors of earlier calls' results
  // that nothing holds any more, when there are such (executor.cpp's reuse_result).
  bool reuses_results = false;
  std::vector<int> in_slots;
  std::vector<int> out_slots;
  std::vector<int> out_buffers;  // kArena: arena buffer per output
  std::vector<int> release;      // slots whose last reader is this step
  // Per input: the step is its slot's last reader and this its last mention, so the value is
  // moved to the kernel rather than copied (each copy of a handle is an atomic increment and
  // decrement, a fifth of a cached scalar call).
  std::vector<char> move_in;
  std::vector<SubgraphPlan> subgraph_plans;  // control-flow steps: one per distinct sub-graph
};

/// What a plan decided, for tests and benchmarks.
struct PlanStats {
  int steps = 0;
  int arena_steps = 0;       // steps writing into the arena
  int arena_buffers = 0;     // distinct arena buffers
  int in_place = 0;          // outputs that reuse a dying input's buffer
  int reused_per_call = 0;   // None-dim steps whose buffers the frame keeps between calls
  int64_t arena_bytes = 0;   // sum of the arena buffers' sizes
  bool dynamic = false;      // some step infers shapes per call
  int lent_inputs = 0;       // inputs the cached call path lends to kernels (Plan::lendable_)
  int pairs_beside = 0;      // pairs of control-flow steps that run side by side (beside_next)
};

struct Frame;

class Plan {
 public:
  /// Plans `graph` and, recursively, its control-flow nodes' sub-graphs. `graph` must outlive
  /// the plan and not change (the plan points into its nodes).
  explicit Plan(const GraphIR& graph);
  ~Plan();
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;
  std::vector<Tensor> run(std::vector<Tensor>&& inputs) const;  // moves the inputs in
  /// On handles the caller keeps alive until run returns (execute_lent).
  std::vector<Tensor> run(std::span<const Tensor* const> inputs) const;
  const PlanStats& stats() const { return stats_; }

 private:
  class FrameLease;
  std::unique_ptr<Frame> make_frame() const;
  template <class Inputs>
  std::vector<Tensor> run_with(Inputs&& inputs) const;
  /// std::bad_alloc while running step `step` (steps_.size(): outside every step) as TF's
  /// ResourceExhaustedError naming the op and node.
  [[noreturn]] void throw_refused(std::size_t step) const;
  void run_step(const PlanStep& step, Frame& frame) const;
  void run_steps_beside(const PlanStep& first, Frame& frame) const;
  // run_step's parts: take the arguments and make the outputs; the kernel; store the results.
  void begin_step(const PlanStep& step, Frame& frame) const;
  void run_kernel(const PlanStep& step, Frame& frame) const;
  void end_step(const PlanStep& step, Frame& frame) const;

  const NodeArray* nodes_;
  int num_slots_ = 0;
  std::vector<std::pair<int, int>> placeholder_slots_;  // (slot, input index)
  bool inputs_movable_ = true;  // no input index feeds two placeholders
  // Per input index: every placeholder of it is read only by kernels that write into given
  // outputs (not runs_by_kernel: those may keep an input) and is no graph output, so a lent
  // handle cannot outlive the call.
  std::vector<char> lendable_;
  std::vector<std::pair<int, Tensor>> const_slots_;
  std::vector<PlanStep> steps_;
  std::vector<int> output_slots_;
  std::vector<int> end_release_;  // slots cleared after the outputs are collected
  std::vector<char> move_out_;    // per output: its slot is cleared at the end and named once
  std::vector<ArenaBufferSpec> buffers_;
  PlanStats stats_;
  // The frame parked between calls, held by at most one call at a time: taking it is one
  // exchange of the flag and giving it back a plain store (a pointer exchanged out and
  // compare-exchanged back was two locked instructions per call).
  mutable std::unique_ptr<Frame> frame_;
  mutable std::atomic<bool> frame_in_use_{false};
};

}  // namespace tg::detail
