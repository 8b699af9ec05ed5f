// The fused_elementwise op: a DAG of elementwise ops run as one kernel. Only the optimiser makes
// these nodes (src/passes/fuse_elementwise.cpp); the program rides in FusedAttrs.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "ops/op.h"

namespace tg::detail {

/// One micro-op: a registry elementwise op applied to earlier slots.
struct FusedStep {
  OpId op = OpId::Identity;
  DType in_dtype = DType::Float32;   // the operands' dtype (for where: of x and y)
  DType out_dtype = DType::Float32;  // differs for casts and comparisons
  int args[3] = {-1, -1, -1};        // slots
  int num_args = 0;
};

struct FusedPlan;  // how the kernel runs a program (derived, fused_plan.h)

/// A reduction folded into the program: reduce_sum/mean/max/min of one step's value over all of
/// the program's shape or over its last dim. Its result is the node's last output; the reduced
/// value itself is never written out.
struct FusedReduce {
  OpId op = OpId::Identity;  // Identity: no reduction
  int slot = -1;             // the step slot reduced
  bool over_all = false;     // every dim (else only the last)
  ReduceAttrs attrs;         // the reduction node's own: its shape rule decides the result
  TensorShape shape;         // the result's static shape (keepdims or not)
};

struct DynamicPlans;  // plans of a program over None dims, one per run-time shape (fused_plan.h)

/// What a fused_elementwise node computes. Slots number the values: first the node's inputs,
/// then the one-element constants folded into the program, then one per step. Every step is
/// computed over `shape`; inputs broadcast to it; outputs have exactly that shape. Immutable
/// once built by make_fused_program (nodes share it through a shared_ptr).
///
/// `shape` may hold None dims (a batch of any size). Then the plan is derived per run-time
/// shape of the inputs, and a run whose steps turn out not to share one shape (a None dim
/// that broadcasts at run time: relu(x) of shape (1, n) feeding x' + y with y (5, n)) runs
/// its steps one by one through the ops' own kernels, so shapes, values and errors are
/// exactly those of the unfused graph.
struct FusedProgram {
  std::vector<ValueType> inputs;   // static shapes of known rank, broadcastable to `shape`
  std::vector<Tensor> immediates;  // eager one-element tensors
  CachedVector<FusedStep> steps;
  std::vector<int> outputs;        // step slots, one per node output, no repeats
  TensorShape shape;               // known rank, dims may be None
  FusedReduce reduce;
  std::shared_ptr<const FusedPlan> plan;   // when `shape` is fully defined
  std::shared_ptr<DynamicPlans> dynamic;   // otherwise: a cache, filled as shapes are met

  bool has_reduce() const { return reduce.op != OpId::Identity; }
  int first_step_slot() const { return static_cast<int>(inputs.size() + immediates.size()); }
  DType slot_dtype(int slot) const;
};

/// Checks the program and derives its execution plan. Throws tg::InternalError on a malformed
/// program (a pass bug).
std::shared_ptr<const FusedProgram> make_fused_program(FusedProgram p);
/// True when the fused kernel runs `op` on operands of in_dtype giving out_dtype, with exactly
/// the results of the op's own kernel (ops that can throw, strings: false).
bool fusable_op(OpId op, DType in_dtype, DType out_dtype);
/// True when the fused kernel can fold reduction `op` of a value of dtype `dtype`.
bool fusable_reduce(OpId op, DType dtype);
/// The program of a fused_elementwise node (FusedAttrs).
const FusedProgram& fused_program(const OpAttrs& attrs);
/// The ops of a fused node's program, in program order.
std::vector<OpId> fused_ops(const OpAttrs& attrs);
/// "mul,add,tanh" (the first max_ops ops, then "...(N ops)"), for graph printing.
std::string fused_summary(const OpAttrs& attrs, std::size_t max_ops = 9);
/// Runs elementwise op `op` (one without attributes) on `in` into `out` (one tensor of the op's
/// output type and shape) as a one-op program of the fused kernel, tile by tile over the pool;
/// false, doing nothing, where the fused kernel has no loop for it. The bfloat16 rule's unfused
/// path (bf16_compute.cpp): conversions in blocks in cache, no float32 tensors.
bool run_as_fused_op(OpId op, const std::vector<Tensor>& in, std::vector<Tensor>& out);
/// Attributes for a fused_elementwise node running `program`.
OpAttrs fused_attrs(std::shared_ptr<const FusedProgram> program);

}  // namespace tg::detail
