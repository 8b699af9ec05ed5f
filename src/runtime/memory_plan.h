// Memory planning: where every value of a graph lives when the executor runs it, decided once,
// before any run (ggml's allocator). A plain function of the graph, so that it can be tested on
// hand-built graphs without running anything.
//
// It lives in runtime/, not passes/: it rewrites nothing (passes are `int pass(GraphIR&)`), and
// what it decides - which kernels make their own outputs, what a frame keeps between calls - is
// the executor's contract with the kernels.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "graph/graph_ir.h"

namespace tg::detail {

/// How an op node's outputs get their memory.
enum class OutputMemory : uint8_t {
  kArena,      // arena buffers (MemoryPlan::buffer_of), allocated once per frame
  kFresh,      // allocated per call: graph outputs, values that escape, String outputs
  kFreshKept,  // None dims, dying within the call: allocated per call, and the frame keeps the
               // buffers for the next call
  kByKernel,   // run as run_op_eager: views, stateful and control-flow ops
};

/// One arena buffer: `count` elements of `dtype`.
struct ArenaBufferSpec {
  DType dtype;
  int64_t count;
};

/// What plan_memory decided. Values are the outputs of placeholder, constant and op nodes (one
/// for a placeholder or constant), numbered in node order.
struct MemoryPlan {
  /// Means "when the graph's outputs have been collected" in drop_after.
  static constexpr int kAtEnd = -1;
  /// Means "never": constants stay in the frame between calls.
  static constexpr int kNever = -2;

  int num_values = 0;
  std::vector<int> first_value;  // per node: its first output's value (kOutput: the next value)
  std::vector<ValueType> value_types;
  // The value whose storage a value shares: itself, or for an aliasing view (see
  // output_aliases_input) the source's own storage value.
  std::vector<int> storage_of;
  // Per value: the node after which nothing reads it (its last op reader; its producer when
  // unread), or kAtEnd / kNever.
  std::vector<int> drop_after;
  std::vector<int> buffer_of;    // per value: its arena buffer, or -1
  std::vector<char> in_place;    // per value: its buffer was taken over from an input dying at its op
  // Per node (meaningful for op nodes): some input or output type has None dims or unknown
  // rank, so shapes are inferred per call.
  std::vector<char> dynamic_shapes;
  std::vector<OutputMemory> output_memory;  // per node (meaningful for op nodes)
  std::vector<ArenaBufferSpec> buffers;

  int value_of(const ValueRef& r) const { return first_value[static_cast<std::size_t>(r.node)] + r.output; }
};

/// Plans the memory of `graph` (ggml's allocator): counts each storage's readers (through any
/// view of it), assigns arena buffers in node order, returns a buffer to the free list when its
/// count reaches zero, and gives a new value a free buffer of the same dtype and size. An op
/// with the kInPlace trait may take over the buffer of an input that dies at that op, when the
/// dtype and element count match. Never in the arena: graph outputs and everything they view
/// (results handed to the caller must not alias memory a later call overwrites), values that
/// reach a kByKernel op other than an aliasing view (a Variable may keep the tensor), outputs of
/// such ops, String values, and None-dim values.
///
/// `order` is the order the executor runs the nodes in, every node once, each after the
/// producers of its inputs (empty: node order); liveness and buffers follow it.
///
/// Preconditions: `graph` is final and well formed (graph/verify.h): nodes in topological
/// order, every input names an earlier node's output, op nodes carry their static output types,
/// `graph.outputs` lists kOutput nodes with one input each. Nothing else needs to run first.
MemoryPlan plan_memory(const GraphIR& graph, std::span<const int> order = {});

/// Whether `node`'s output shares its input 0's storage and nothing else: the kView trait of
/// ops.def. (Ops whose kernels make their outputs otherwise - TensorArray, Variable and
/// control-flow ops, which may keep their inputs - are kOwnOutputs, and their values escape.)
bool output_aliases_input(const GraphNode& node);

/// Whether `node`'s kernel makes its own outputs or may keep its inputs past the call: views,
/// stateful ops (a Variable keeps the assigned tensor; every Variable op is stateful) and control
/// flow. Every other kernel writes into the outputs it is given and keeps nothing.
bool runs_by_kernel(const GraphNode& node);

}  // namespace tg::detail
