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

}  // namespace tg::detail
