// Folds a hand-written gradient-descent step into the one-pass update op:
//   v.assign_sub(g * lr)  ->  apply_gradient_descent(v, lr, g)
// The separate ops read g, write g * lr, then read it back with v and write v: two passes over
// a tensor of the Variable's size where one does. The result is bit-identical: the update op
// computes v - lr * g with the same two roundings (no contraction, src/CMakeLists.txt), and a
// float product does not depend on its operands' order.
#include "passes/passes.h"

namespace tg::detail {

namespace {

// Value uses of each node's output 0 (control edges are not uses of a value).
std::vector<int> value_uses(const GraphIR& g) {
  std::vector<int> uses(g.nodes.size(), 0);
  for (const GraphNode& node : g.nodes)
    for (const ValueRef& in : node.inputs)
      if (in.output == 0) ++uses[static_cast<std::size_t>(in.node)];
  return uses;
}

bool is_scalar_of(const ValueType& t, DType dtype) {
  return t.dtype == dtype && t.shape.has_rank() && t.shape.rank() == 0;
}

}  // namespace

int fold_scaled_updates(GraphIR& g) {
  std::vector<int> uses;  // computed at the first candidate: most graphs have none
  int folded = 0;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    GraphNode& node = g.nodes[i];
    if (node.kind != NodeKind::kOp || node.op != OpId::AssignSubVariable) continue;
    const VariableState& var = *node.attrs.get<VariableAttrs>().variable;
    if (var.dtype != DType::Float32 && var.dtype != DType::Float64) continue;
    const ValueRef delta = node.inputs[0];
    const GraphNode& mul = g.node_of(delta);
    if (mul.kind != NodeKind::kOp || mul.op != OpId::Mul || delta.output != 0) continue;
    if (uses.empty()) uses = value_uses(g);
    // The product feeds only this update, and nothing reads the updated value the op returns
    // (apply_gradient_descent returns none).
    if (uses[static_cast<std::size_t>(delta.node)] != 1 || uses[i] != 0) continue;
    for (int lr_at = 0; lr_at < 2; ++lr_at) {
      const ValueRef lr = mul.inputs[static_cast<std::size_t>(lr_at)], grad = mul.inputs[static_cast<std::size_t>(1 - lr_at)];
      const ValueType& grad_type = g.type_of(grad);
      // No broadcasting on either side: g has the Variable's (static) shape exactly.
      if (!is_scalar_of(g.type_of(lr), var.dtype) || grad_type.dtype != var.dtype || !(grad_type.shape == var.shape) ||
          !var.shape.is_fully_defined())
        continue;
      node.op = OpId::ApplyGradientDescent;
      node.name = g.unique_name(op_def(node.op).name);  // dumps and errors name what runs
      node.inputs = {lr, grad};
      node.outputs.clear();
      ++folded;  // the product is dead now: DCE removes it
      break;
    }
  }
  return folded;
}

}  // namespace tg::detail
