// A convolution layer's max pool taken into its conv2d_epilogue (inference): the epilogue's
// result, read by nothing but a max_pool2d, is pooled inside the node (ops/conv.cpp's
// kernel_conv2d_epilogue_max_pool), so the full-resolution activation is never written whole.
// Training graphs keep that result for max_pool2d_grad (and the relu mask is an output of the
// node), so they are left as they are, but for bfloat16 layers whose pool tiles the result and
// whose masked pooling gradient's mask is the result > 0 (max_pool2d_grad_masked(y, dy, y), or
// with relu's mask output): there the node pools with pool_winners, and the gradient reads the
// winners (the window position of each maximum > 0) instead of y. Same bits: the node's kernel
// is the two ops' kernels, and the gradient routes dy where it read y's maxima (CNN demo step,
// mixed_bfloat16: 21.3-21.6 -> 20.1-20.3 ms at 1 thread, 11.4-11.6 -> 10.7-11.0 ms at 2).
#include "passes/passes.h"

#include <utility>
#include <vector>

#include "ops/op.h"
#include "ops/window.h"
#include "passes/rewrite.h"
#include "tracegraph/ops.h"

namespace tg::detail {

namespace {

// Whether node `i` is a float32 max_pool2d of a conv2d_epilogue's only output (bias and relu at
// most, no pool yet) that nothing else reads.
bool pools_lone_conv_epilogue(const GraphIR& g, const NodeUsers& users, int i) {
  const GraphNode& pool = g.node(i);
  if (pool.kind != NodeKind::kOp || pool.op != OpId::MaxPool2D || pool.control_input >= 0 || pool.inputs.size() != 1 ||
      pool.outputs.size() != 1 || pool.outputs[0].dtype != DType::Float32)
    return false;
  const ValueRef r = pool.inputs[0];
  const GraphNode& conv = g.node_of(r);
  if (conv.kind != NodeKind::kOp || conv.op != OpId::Conv2DEpilogue || conv.control_input >= 0 ||
      conv.outputs.size() != 1 || r.output != 0 || conv.outputs[0].dtype != DType::Float32)
    return false;
  for (const ValueRef& in : conv.inputs)
    if (g.type_of(in).dtype != DType::Float32) return false;
  const Conv2DEpilogueAttrs& e = conv.attrs.get<Conv2DEpilogueAttrs>();
  if (e.max_pool || e.mask_out || e.mask_in) return false;
  const auto readers = users.of(r.node);
  return readers.size() == 1 && readers[0] == i;
}

// Whether node `i` is a bfloat16 max_pool2d of a conv2d_epilogue's activation (output 0; no
// pool yet, no mask read in) whose other readers are one max_pool2d_grad_masked of that pool
// with x = the activation and a mask that is the activation > 0: the activation itself (its
// mask read off it), or the epilogue's relu mask (output 1, the sum before relu > 0: the same
// booleans, as derive_bf16_pool_masks says). Windows that tile: VALID, strides = window, <= 16
// elements, over an activation of static height and width at least the window's (a smaller one
// pools to nothing, which the winners kernels do not take). Readers that are dead (this pass runs
// before the sweep, and fusion left some still reading the activation) do not count. Returns
// that gradient's node, or -1.
int pools_training_conv_epilogue(const GraphIR& g, const NodeUsers& users, const std::vector<bool>& live, int i) {
  const GraphNode& pool = g.node(i);
  if (pool.kind != NodeKind::kOp || pool.op != OpId::MaxPool2D || pool.control_input >= 0 || pool.inputs.size() != 1 ||
      pool.outputs.size() != 1 || pool.outputs[0].dtype != DType::BFloat16)
    return -1;
  const Pool2DAttrs& p = pool.attrs.get<Pool2DAttrs>();
  if (!pool_window_fits_winners(p.ksize, p.strides, p.padding)) return -1;
  const ValueRef r = pool.inputs[0];
  const GraphNode& conv = g.node_of(r);
  if (conv.kind != NodeKind::kOp || conv.op != OpId::Conv2DEpilogue || conv.control_input >= 0 || r.output != 0 ||
      conv.outputs[0].dtype != DType::BFloat16)
    return -1;
  for (const ValueRef& in : conv.inputs)
    if (g.type_of(in).dtype != DType::BFloat16) return -1;
  const TensorShape& y = conv.outputs[0].shape;
  if (!y.has_rank() || y.rank() != 4 || y.dims()[1] == None || y.dims()[2] == None || y.dims()[1] < p.ksize[0] ||
      y.dims()[2] < p.ksize[1])
    return -1;
  const Conv2DEpilogueAttrs& e = conv.attrs.get<Conv2DEpilogueAttrs>();
  if (e.max_pool || e.mask_in) return -1;
  const bool relu_mask = e.relu && e.mask_out && conv.outputs.size() == 2;  // output 1: relu's mask
  if (conv.outputs.size() != 1 && !relu_mask) return -1;
  int grad = -1;
  for (const int user : users.of(r.node)) {
    if (user == i || user == grad || !live[static_cast<std::size_t>(user)]) continue;
    const GraphNode& n = g.node(user);
    // After the pool: the gradient will read the node the pool becomes.
    if (grad >= 0 || user < i || n.kind != NodeKind::kOp || n.op != OpId::MaxPool2DGradMasked || n.control_input >= 0 ||
        n.inputs.size() != 3 || !(n.inputs[0] == r) || n.inputs[1].node == r.node ||
        !(n.attrs.get<MaxPoolGradMaskedAttrs>().pool == p))
      return -1;
    const ValueRef m = n.inputs[2];
    if (!(m == r) && !(relu_mask && m == ValueRef{r.node, 1})) return -1;
    grad = user;
  }
  return grad;
}

// The bfloat16 training layers: the pool node becomes conv2d_epilogue with pool_winners
// (outputs: pooled, activation, winners; no relu mask), its gradient reads the winners.
int fuse_training_conv_max_pools(GraphIR& g) {
  const NodeUsers users = g.users();
  const std::vector<bool> live = live_nodes(g);  // as eliminate_dead_code finds them
  int count = 0;
  for (std::size_t k = 0; k < g.nodes.size(); ++k) {
    const int i = static_cast<int>(k);
    if (!live[k]) continue;
    const int grad = pools_training_conv_epilogue(g, users, live, i);
    if (grad < 0) continue;
    const GraphNode& conv = g.node_of(g.node(i).inputs[0]);
    Conv2DEpilogueAttrs e = conv.attrs.get<Conv2DEpilogueAttrs>();
    const Pool2DAttrs& p = g.node(i).attrs.get<Pool2DAttrs>();
    e.mask_out = false, e.max_pool = true, e.pool_winners = true;
    e.pool_ksize = p.ksize, e.pool_strides = p.strides, e.pool_padding = p.padding;
    SmallVector<ValueRef, 2> inputs(conv.inputs);
    const ValueType activation = conv.outputs[0];
    GraphNode& node = g.nodes[k];  // keeps its output 0 (the pool's) and its readers
    const ValueType pooled = node.outputs[0];
    node.op = OpId::Conv2DEpilogue;
    node.name = g.unique_name(op_def(OpId::Conv2DEpilogue).name);
    node.attrs = std::move(e);
    node.inputs = std::move(inputs);
    node.outputs = SmallVector<ValueType, 1>{pooled, activation, ValueType{DType::UInt8, pooled.shape}};
    GraphNode& gradient = g.nodes[static_cast<std::size_t>(grad)];
    gradient.inputs[0] = ValueRef{i, 1};
    gradient.inputs[2] = ValueRef{i, 2};
    ++count;  // the old conv2d_epilogue is left without readers, for the sweep after this pass
  }
  return count;
}

}  // namespace

int fuse_conv_max_pools(GraphIR& g) {
  const NodeUsers users = g.users();
  int count = 0;
  for (std::size_t k = 0; k < g.nodes.size(); ++k) {
    const int i = static_cast<int>(k);
    if (!pools_lone_conv_epilogue(g, users, i)) continue;
    const GraphNode& conv = g.node_of(g.node(i).inputs[0]);
    Conv2DEpilogueAttrs e = conv.attrs.get<Conv2DEpilogueAttrs>();
    const Pool2DAttrs& p = g.node(i).attrs.get<Pool2DAttrs>();
    e.max_pool = true, e.pool_ksize = p.ksize, e.pool_strides = p.strides, e.pool_padding = p.padding;
    SmallVector<ValueRef, 2> inputs(conv.inputs);
    GraphNode& node = g.nodes[k];  // keeps its output (the pool's) and its readers
    node.op = OpId::Conv2DEpilogue;
    node.name = g.unique_name(op_def(OpId::Conv2DEpilogue).name);
    node.attrs = std::move(e);
    node.inputs = std::move(inputs);
    ++count;  // the old conv2d_epilogue is left without readers, for the sweep after this pass
  }
  return count + fuse_training_conv_max_pools(g);
}

}  // namespace tg::detail
