// The pass that takes float32-to-bfloat16 casts of a bfloat16 product's right operand into the
// product (bf16_operand_casts.cpp), declared apart from passes.h.
#pragma once
#include "graph/graph_ir.h"

namespace tg::detail {

/// A bfloat16 matmul_epilogue whose right operand is cast(w, bfloat16) of a float32 w (under
/// mixed_bfloat16, a layer's float32 Variable read for its forward product or its input
/// gradient) reads w itself and rounds it to bfloat16 while it packs it: the cast's pass over
/// the weights and its bfloat16 copy go, the bits stay (the same rounding of the same values).
/// The last step of fuse_product_epilogues (the casts nothing else reads then die in the last
/// DCE).
/// Returns the number of operands taken in.
int take_bf16_operand_casts(GraphIR& g);

}  // namespace tg::detail
