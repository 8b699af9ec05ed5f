// A bfloat16 product's float32-to-bfloat16 operand cast, taken into the product's packing, and
// the float32 cast of its result, taken into its stores (see bf16_operand_casts.h).
#include "passes/bf16_operand_casts.h"

#include "ops/op.h"
#include "ops/op_attrs.h"

namespace tg::detail {

int take_bf16_operand_casts(GraphIR& g) {
  int taken = 0;
  for (GraphNode& node : g.nodes) {
    if (node.kind != NodeKind::kOp || node.op != OpId::MatMulEpilogue || node.inputs.size() < 2) continue;
    const MatMulEpilogueAttrs& attrs = node.attrs.get<MatMulEpilogueAttrs>();
    if (g.type_of(node.inputs[0]).dtype != DType::BFloat16 || attrs.rounded_to_f32) continue;
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

namespace {

bool is_bf16_matrix(const ValueType& t) {
  return t.dtype == DType::BFloat16 && t.shape.has_rank() && t.shape.rank() == 2;
}

}  // namespace

int take_bf16_product_casts(GraphIR& g) {
  const NodeUsers users = g.users();
  int taken = 0;
  for (GraphNode& node : g.nodes) {
    // A plain cast (no control input) of a value to float32 ...
    if (node.kind != NodeKind::kOp || node.op != OpId::Cast || node.control_input >= 0 || node.inputs.size() != 1 ||
        node.attrs.get<CastAttrs>().dtype != DType::Float32 || node.outputs.size() != 1)
      continue;
    // ... made by a plain bfloat16 matmul of matrices that only this cast reads (a reader
    // listed twice, or a control follower, is another use).
    const ValueRef source = node.inputs[0];
    const GraphNode& product = g.node_of(source);
    if (product.kind != NodeKind::kOp || product.op != OpId::MatMul || product.control_input >= 0 ||
        product.inputs.size() != 2 || !is_bf16_matrix(g.type_of(source)))
      continue;
    if (!is_bf16_matrix(g.type_of(product.inputs[0])) || !is_bf16_matrix(g.type_of(product.inputs[1]))) continue;
    const auto readers = users.of(source.node);
    if (readers.size() != 1) continue;
    const MatMulAttrs& mm = product.attrs.get<MatMulAttrs>();
    MatMulEpilogueAttrs fused;
    fused.transpose_a = mm.transpose_a;
    fused.transpose_b = mm.transpose_b;
    fused.rounded_to_f32 = true;
    // In place: the cast's readers and float32 type stay; the product's inputs come first in the
    // node order, as the product does.
    node.op = OpId::MatMulEpilogue;
    node.name = g.unique_name(op_def(OpId::MatMulEpilogue).name);
    node.attrs = fused;
    node.inputs = product.inputs;
    ++taken;
  }
  return taken;
}

}  // namespace tg::detail
