// A bfloat16 product's float32-to-bfloat16 operand cast, taken into the product's packing (see
// bf16_operand_casts.h).
#include "passes/bf16_operand_casts.h"

#include "ops/op_attrs.h"

namespace tg::detail {

int take_bf16_operand_casts(GraphIR& g) {
  int taken = 0;
  for (GraphNode& node : g.nodes) {
    if (node.kind != NodeKind::kOp || node.op != OpId::MatMulEpilogue || node.inputs.size() < 2) continue;
    if (g.type_of(node.inputs[0]).dtype != DType::BFloat16 || node.attrs.get<MatMulEpilogueAttrs>().column_sums)
      continue;
    const GraphNode& cast = g.node_of(node.inputs[1]);
    // A plain cast (no control input) of a float32 matrix to bfloat16.
    if (cast.kind != NodeKind::kOp || cast.op != OpId::Cast || cast.control_input >= 0 || cast.inputs.size() != 1 ||
        cast.attrs.get<CastAttrs>().dtype != DType::BFloat16)
      continue;
    const ValueType& source = g.type_of(cast.inputs[0]);
    if (source.dtype != DType::Float32 || !source.shape.has_rank() || source.shape.rank() != 2) continue;
    node.inputs[1] = cast.inputs[0];
    ++taken;
  }
  return taken;
}

}  // namespace tg::detail
