// How ops treat bfloat16 (docs/DECISIONS.md, "bfloat16"). TensorFlow computes its bfloat16 ops
// in float32 and rounds each result to bfloat16; here one table says, per op, which of three
// rules applies, and the registry's entries are wrapped to follow it:
// - via float32: bfloat16 inputs are widened, the op's float32 shape rule and kernel run, and
//   its float32 outputs are rounded to bfloat16 (arithmetic, activations, reductions, softmax,
//   cross-entropy, pooling, and their gradient helpers);
// - native: the op handles bfloat16 itself (data movement, which copies elements; matmul and the
//   convolutions, which run on the CPU's bfloat16 instructions where they can and round float32
//   results elsewhere; variables and control flow, which pass values on);
// - refused: every other op raises InvalidArgumentError naming the op and the dtype.
#pragma once
#include "ops/op.h"

namespace tg::detail {

/// Wraps the shape rules and kernels of `table` (filled by every other register_* function, so
/// this one runs last) with the bfloat16 rule of each op.
void register_bf16_rules(OpDef* table);

/// Runs a float32 kernel on bfloat16 operands the whole-tensor way: each bfloat16 input widened
/// into a float32 tensor, each bfloat16 output computed in float32 and rounded once (the rule
/// every op without a bfloat16 kernel follows; also the fallback of ops that have one).
void run_via_float32(KernelFn float_kernel, const std::vector<Tensor>& in, const OpAttrs& attrs,
                     std::vector<Tensor>& out);

}  // namespace tg::detail
