// A convolution layer's max pool taken into its conv2d_epilogue (inference): the epilogue's
// result, read by nothing but a max_pool2d, is pooled inside the node (ops/conv.cpp's
// kernel_conv2d_epilogue_max_pool), so the full-resolution activation is never written whole.
// Training graphs keep that result for max_pool2d_grad (and the relu mask is an output of the
// node), so they are left as they are. Same bits: the node's kernel is the two ops' kernels.
#include "passes/passes.h"

#include <utility>

#include "ops/op.h"

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
  return count;
}

}  // namespace tg::detail
