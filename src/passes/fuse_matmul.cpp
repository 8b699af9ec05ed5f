// Epilogue fusion: a matmul of two matrices whose product only an elementwise program reads,
//   y = fused_elementwise{add,relu}(matmul(x, w), b)  ->  y = fused_matmul(x, w, b)
// The program then runs on each block of the product as soon as the gemm has written it, on
// the same thread (src/ops/matmul.cpp). The steps and the product are unchanged, so are the bits.
// Runs after fuse_elementwise: it takes over the programs that pass built.
#include "ops/fused.h"
#include "passes/passes.h"

namespace tg::detail {

namespace {

bool is_matrix(const ValueType& t) { return t.shape.has_rank() && t.shape.rank() == 2; }

// The input of fused node `f` that a matmul only `f` reads produces, or -1.
int fusable_product(const GraphIR& g, const NodeUsers& users, int f) {
  const GraphNode& node = g.node(f);
  const FusedProgram& p = fused_program(node.attrs);
  if (p.has_reduce()) return -1;  // the reduction's rows would have to follow the gemm's blocks
  for (std::size_t i = 0; i < node.inputs.size(); ++i) {
    const ValueRef in = node.inputs[i];
    const GraphNode& mm = g.node_of(in);
    if (mm.kind != NodeKind::kOp || mm.op != OpId::MatMul || mm.control_input >= 0) continue;
    const ValueType& product = mm.outputs[0];
    if (product.dtype != DType::Float32 && product.dtype != DType::Float64) continue;
    if (!is_matrix(g.type_of(mm.inputs[0])) || !is_matrix(g.type_of(mm.inputs[1]))) continue;
    // Each step's shape is the product's: blocks of the product are blocks of every step.
    if (!(product.shape == p.shape)) continue;
    const std::span<const int> readers = users.of(in.node);
    if (readers.size() != 1 || readers[0] != f) continue;  // one read, by this node alone
    return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

int fuse_matmul_epilogues(GraphIR& g) {
  const NodeUsers users = g.users();
  int fused = 0;
  for (std::size_t f = 0; f < g.nodes.size(); ++f) {
    GraphNode& node = g.nodes[f];
    if (node.kind != NodeKind::kOp || node.op != OpId::FusedElementwise) continue;
    const int at = fusable_product(g, users, static_cast<int>(f));
    if (at < 0) continue;
    const GraphNode& mm = g.node_of(node.inputs[static_cast<std::size_t>(at)]);
    const MatMulAttrs& mm_attrs = mm.attrs.get<MatMulAttrs>();
    FusedMatMulAttrs attrs{mm_attrs.transpose_a, mm_attrs.transpose_b, at, node.attrs.get<FusedAttrs>().program};
    decltype(node.inputs) inputs;
    inputs.push_back(mm.inputs[0]);
    inputs.push_back(mm.inputs[1]);
    for (std::size_t i = 0; i < node.inputs.size(); ++i)
      if (static_cast<int>(i) != at) inputs.push_back(node.inputs[i]);
    node.op = OpId::FusedMatMul;
    node.attrs = std::move(attrs);
    node.inputs = std::move(inputs);
    node.outputs.push_back(mm.outputs[0]);  // the product: the plan gives it a reused buffer
    node.name = g.unique_name(op_def(node.op).name);  // dumps and errors name what runs
    ++fused;  // the matmul is dead now: DCE removes it
  }
  return fused;
}

}  // namespace tg::detail
