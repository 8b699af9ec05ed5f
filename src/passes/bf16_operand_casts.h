// The passes that take casts between bfloat16 and float32 into a bfloat16 product: of its right
// operand, and of its result (bf16_operand_casts.cpp), declared apart from passes.h.
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

/// cast(matmul(a, b), float32) of a bfloat16 2-D matmul that nothing else reads (under
/// mixed_bfloat16, a weight gradient on its way to its float32 Variable's update) becomes one
/// matmul_epilogue node with rounded_to_f32, in the cast's place: the product stores its sums
/// rounded to bfloat16 and widened, the bits of the two nodes, without the bfloat16 result and
/// the cast's pass over it. A product other nodes read too is left as it is. The matmul then
/// dies in the last DCE. Runs after fuse_product_epilogues (a pipeline pass of its own).
/// Returns the number of casts taken in.
int take_bf16_product_casts(GraphIR& g);

}  // namespace tg::detail
