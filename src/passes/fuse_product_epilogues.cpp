// Product epilogues: a 2-D float32 matmul or a float32 conv2d (dense or depthwise) whose output
// only one node reads - a fused node (or an add) computing just what kernels/gemm_epilogue.h's
// GemmEpilogue does with it - becomes one matmul_epilogue or conv2d_epilogue node. The product's
// output then gets the bias, relu (a convolution's: or ONNX's Clip) and the gradient masks of a
// dense or convolution layer on the thread that computed it, while it is in that core's cache,
// instead of in a node of its own that reads it back (from memory for a convolution's
// megabytes; on two threads, from the other core's cache as often as not). Two more of the same kind:
// - a matmul_epilogue takes in the sum over rows of its result (a dense layer's bias gradient);
// - a float32 max_pool2d_grad read only by where(mask, dx, 0) (relu's gradient before the pool)
//   becomes max_pool2d_grad_masked, which takes in the sum over all but the channels of its
//   result (a convolution layer's bias gradient);
// - a 2-D float32 matmul's result (perhaps through one reshape, after its bias) added to or
//   multiplied by a float32 value of the result's static shape - a residual add, a gradient
//   times an activation's derivative - takes that value in as the epilogue's matrix.
// A 2-D bfloat16 matmul takes in the same bias, relu, masks from its op nodes (fuse_elementwise
// leaves the readers of a bfloat16 product to this pass), rounding each op's result as the op
// would (see the bfloat16 section);
// a bfloat16 conv2d its bias, relu and mask, and a bfloat16 max_pool2d_grad relu's gradient, the same way.
#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "ops/epilogue_steps.h"
#include "ops/fused.h"
#include "passes/bf16_operand_casts.h"
#include "passes/passes.h"

namespace tg::detail {

namespace {

// What a fused program does with the product, when it is an epilogue: the program's input slots
// of the product, the bias and the mask read, and the slots of the node's two results.
struct Match {
  EpilogueParts parts;
  int bias_input = -1;
  int mask_input = -1;
  int matrix_input = -1;
  int out_slot = -1;   // the product after the epilogue
  int mask_slot = -1;  // the mask out > 0 (parts.mask_out)
};

// Whether `bias` is what the epilogue adds to a product of `shape`: float32, one value per
// column (the last dim, known statically: a bias that broadcasts is no epilogue).
bool is_bias_of(const ValueType& bias, const TensorShape& shape, DType dtype = DType::Float32) {
  return bias.dtype == dtype && bias.shape.has_rank() && bias.shape.rank() == 1 && shape.has_rank() &&
         shape.rank() >= 1 && shape.dims().back() != None && bias.shape.dims()[0] == shape.dims().back();
}

// The float32 value of slot `s` when it is one of the program's one-element constants and not
// NaN (the kernels' clamp in registers passes a NaN bound by).
std::optional<float> bound_of(const FusedProgram& p, int s) {
  const int first = static_cast<int>(p.inputs.size());
  if (s < first || s >= p.first_step_slot()) return std::nullopt;
  const Tensor& t = p.immediates[static_cast<std::size_t>(s - first)];
  if (t.dtype() != DType::Float32) return std::nullopt;
  const float v = data_of<float>(t)[0];
  if (v != v) return std::nullopt;
  return v;
}

// The program's steps, read as the epilogue's stages in order: + bias, the mask out > 0, relu,
// maximum(out, lower) then minimum(out, upper) with constant bounds (float32 only: ONNX's Clip),
// where(mask, out, 0), + or * a matrix (float32 only: an input of the program's static shape).
// Each step must take the value the stages so far made (`out`); the zeros_like steps feed only
// the mask and the where. Anything else is no epilogue.
// A bfloat16 product (a convolution's) reads a program of bfloat16 steps, each rounding its own
// result, as conv2d_epilogue's bfloat16 kernel does.
std::optional<Match> match_program(const FusedProgram& p, int product, DType dtype = DType::Float32) {
  if (p.has_reduce() || !p.shape.has_rank() || p.shape.rank() < 1 || !(p.inputs[static_cast<std::size_t>(product)].shape == p.shape))
    return std::nullopt;
  Match m;
  int out = product;    // the slot holding the product after the stages so far
  int pre_relu = out;   // the value relu reads (the mask compares it, or relu's result, with 0)
  std::vector<bool> zeros(static_cast<std::size_t>(p.first_step_slot()) + p.steps.size(), false);
  enum Stage { kProduct, kBias, kRelu, kClamp, kWhere, kMatrix } stage = kProduct;
  for (std::size_t k = 0; k < p.steps.size(); ++k) {
    const FusedStep& st = p.steps[k];
    const int slot = p.first_step_slot() + static_cast<int>(k);
    auto input = [&](int a) -> int {  // the input index of argument a, or -1
      return st.args[a] < static_cast<int>(p.inputs.size()) && st.args[a] != product ? st.args[a] : -1;
    };
    if (st.in_dtype != dtype || ((stage == kMatrix || stage == kClamp) && st.op != OpId::ZerosLike)) return std::nullopt;
    // out + matrix, matrix + out, out * matrix, matrix * out (the same bits either way round).
    if ((st.op == OpId::Add || st.op == OpId::Mul) && dtype == DType::Float32 && !m.parts.matrix() &&
        (st.args[0] == out || st.args[1] == out) && st.args[0] != st.args[1]) {
      const int c = input(st.args[0] == out ? 1 : 0);
      if (c >= 0) {
        const ValueType& matrix = p.inputs[static_cast<std::size_t>(c)];
        if (matrix.dtype == DType::Float32 && matrix.shape == p.shape && p.shape.is_fully_defined() &&
            !(st.op == OpId::Add && stage == kProduct && !m.parts.mask_out && st.args[0] == out &&
              is_bias_of(matrix, p.shape, dtype))) {
          (st.op == OpId::Add ? m.parts.add_matrix : m.parts.mul_matrix) = true;
          m.matrix_input = c, stage = kMatrix;
          out = slot;
          continue;
        }
      }
    }
    switch (st.op) {
      case OpId::Add: {
        const int b = input(1);
        if (stage != kProduct || m.parts.mask_out || st.args[0] != out || b < 0) return std::nullopt;
        if (!is_bias_of(p.inputs[static_cast<std::size_t>(b)], p.shape, dtype)) return std::nullopt;
        m.parts.bias = true, m.bias_input = b, stage = kBias;
        out = pre_relu = slot;
        break;
      }
      case OpId::ZerosLike:  // every step has the program's shape: these are its float32 zeros
        zeros[static_cast<std::size_t>(slot)] = true;
        break;
      case OpId::Greater:
        if (m.parts.mask_out || stage == kWhere || (st.args[0] != pre_relu && st.args[0] != out) ||
            !zeros[static_cast<std::size_t>(st.args[1])])
          return std::nullopt;
        m.parts.mask_out = true, m.mask_slot = slot;
        break;
      case OpId::Relu:
        if (stage == kRelu || stage == kWhere || st.args[0] != out) return std::nullopt;
        m.parts.relu = true, stage = kRelu;
        out = slot;
        break;
      case OpId::Maximum: {
        // maximum(out, lower) then minimum(it, upper), in that order and with out first (the
        // ops' bits: maximum(-0, 0) is -0, maximum(0, -0) is 0).
        if (dtype != DType::Float32 || m.parts.mask_out || stage == kWhere || st.args[0] != out ||
            k + 1 >= p.steps.size())
          return std::nullopt;
        const FusedStep& next = p.steps[k + 1];
        const std::optional<float> lower = bound_of(p, st.args[1]);
        const std::optional<float> upper =
            next.op == OpId::Minimum && next.in_dtype == dtype && next.args[0] == slot ? bound_of(p, next.args[1]) : std::nullopt;
        if (!lower || !upper) return std::nullopt;
        m.parts.clamp = true, m.parts.lower = *lower, m.parts.upper = *upper, stage = kClamp;
        out = slot + 1;
        ++k;
        break;
      }
      case OpId::Where: {
        const int c = input(0);
        if (stage != kProduct || m.parts.mask_out || c < 0 || st.args[1] != out ||
            !zeros[static_cast<std::size_t>(st.args[2])])
          return std::nullopt;
        const ValueType& mask = p.inputs[static_cast<std::size_t>(c)];
        if (mask.dtype != DType::Bool || !(mask.shape == p.shape)) return std::nullopt;
        m.parts.mask_in = true, m.mask_input = c, stage = kWhere;
        out = slot;
        break;
      }
      default: return std::nullopt;
    }
  }
  // The node's results: the product after every stage, and the mask if one was made.
  m.out_slot = out;
  if (stage == kProduct) return std::nullopt;  // nothing the product gets (a mask alone)
  for (int s : p.outputs)
    if (s != out && s != m.mask_slot) return std::nullopt;
  if (std::find(p.outputs.begin(), p.outputs.end(), out) == p.outputs.end()) return std::nullopt;
  if (m.parts.mask_out && std::find(p.outputs.begin(), p.outputs.end(), m.mask_slot) == p.outputs.end()) return std::nullopt;
  return m;
}

// Whether `r` is the output of a 2-D float32 matmul, a float32 or bfloat16 conv2d or a float32
// max_pool2d_grad that nothing but `reader` reads.
bool is_lone_product(const GraphIR& g, const NodeUsers& users, ValueRef r, int reader) {
  const GraphNode& mm = g.node_of(r);
  if (mm.kind != NodeKind::kOp || mm.control_input >= 0 ||
      (mm.op != OpId::MatMul && mm.op != OpId::Conv2D && mm.op != OpId::MaxPool2DGrad))
    return false;
  const auto readers = users.of(r.node);
  if (readers.size() != 1 || readers[0] != reader) return false;
  const int64_t rank = mm.op == OpId::MatMul ? 2 : 4;
  const DType dtype = mm.op == OpId::Conv2D && g.type_of(r).dtype == DType::BFloat16 ? DType::BFloat16 : DType::Float32;
  for (const ValueRef& in : mm.inputs) {
    const ValueType& t = g.type_of(in);
    if (t.dtype != dtype || !t.shape.has_rank() || t.shape.rank() != rank) return false;
  }
  return true;
}

// Whether a product of this op takes these parts: a pooling gradient takes relu's gradient only
// (where(mask, dx, 0)).
bool takes(OpId product, const EpilogueParts& e) {
  if (e.matrix() && product != OpId::MatMul) return false;
  if (e.clamp && product != OpId::Conv2D) return false;
  return product != OpId::MaxPool2DGrad || (e.mask_in && !e.bias && !e.mask_out && !e.relu);
}

// Whether the kernel of product `r` applies an epilogue itself: a grouped convolution's does
// only with one input channel per group (the depthwise kernel); other groupings would run the
// epilogue as the ops apart, a pass over the result each, where the fused node makes one.
bool applies_epilogue(const GraphIR& g, ValueRef r) {
  const GraphNode& n = g.node_of(r);
  if (n.op != OpId::Conv2D) return true;
  const int64_t channels = g.type_of(n.inputs[0]).shape.dims()[3], per_group = g.type_of(n.inputs[1]).shape.dims()[2];
  return per_group == 1 || (channels != None && per_group == channels);
}

// The node a product with this epilogue becomes: its op and attributes.
std::pair<OpId, OpAttrs> epilogue_node(const GraphNode& product, const EpilogueParts& e) {
  if (product.op == OpId::MaxPool2DGrad)
    return {OpId::MaxPool2DGradMasked, MaxPoolGradMaskedAttrs{product.attrs.get<Pool2DAttrs>(), false}};
  if (product.op == OpId::MatMul) {
    const MatMulAttrs& a = product.attrs.get<MatMulAttrs>();
    MatMulEpilogueAttrs attrs{a.transpose_a, a.transpose_b, e.bias, e.mask_out, e.relu, e.mask_in};
    attrs.add_matrix = e.add_matrix, attrs.mul_matrix = e.mul_matrix;
    return {OpId::MatMulEpilogue, attrs};
  }
  const Conv2DAttrs& a = product.attrs.get<Conv2DAttrs>();
  Conv2DEpilogueAttrs attrs{a.strides, a.dilations, a.padding, e.bias, e.mask_out, e.relu, e.mask_in};
  attrs.clamp = e.clamp, attrs.lower = e.lower, attrs.upper = e.upper;
  return {OpId::Conv2DEpilogue, attrs};
}

// Whether every reader of node `n` but `reader` reads only its shape - reshape_like(x, n), as
// a dense layer's gradient reshapes dY like the product - and that shape is static: those
// readers can read it off their attributes instead (move_shape_readers).
bool others_read_only_shape(const GraphIR& g, const NodeUsers& users, int n, int reader) {
  bool reader_seen = false;
  for (int r : users.of(n)) {
    if (r == reader) {
      reader_seen = true;
      continue;
    }
    const GraphNode& like = g.node(r);
    if (like.kind != NodeKind::kOp || like.op != OpId::ReshapeLike || like.control_input >= 0 ||
        like.inputs.size() != 2 || like.inputs[0].node == n || like.inputs[1].node != n ||
        !like.outputs[0].shape.is_fully_defined())
      return false;
  }
  return reader_seen;
}

// The readers others_read_only_shape allowed become reshapes to their static shape (the same
// view: a reshape_like of a static shape is that reshape), so that only `reader` reads node `n`.
void move_shape_readers(GraphIR& g, const NodeUsers& users, int n, int reader) {
  for (int r : users.of(n)) {
    if (r == reader) continue;
    GraphNode& like = g.nodes[static_cast<std::size_t>(r)];
    like.op = OpId::Reshape;
    like.name = g.unique_name(op_def(OpId::Reshape).name);
    like.attrs = ReshapeAttrs{like.outputs[0].shape.dims()};
    SmallVector<ValueRef, 2> inputs;
    inputs.push_back(like.inputs[0]);
    like.inputs = std::move(inputs);
  }
}

// An epilogue found on a node: what it does, which input is the product, and for each of the
// new node's outputs (the result, then the mask) the old node's output it replaces.
struct Found {
  Match match;
  int product = -1;      // the input that reads it
  ValueRef product_ref;  // the product itself (that input, or what the input reshapes)
  int reshape = -1;      // the reshape between them, if any (other readers read the shape only)
  std::vector<int> old_output_of;
};

// The value `r` reshapes, when `r` is a reshape or reshape_like (no control input) that only
// `reader` reads; else nothing.
std::optional<ValueRef> reshaped_from(const GraphIR& g, const NodeUsers& users, ValueRef r, int reader) {
  const GraphNode& n = g.node_of(r);
  const auto readers = users.of(r.node);
  if (n.kind != NodeKind::kOp || n.control_input >= 0 || (n.op != OpId::Reshape && n.op != OpId::ReshapeLike) ||
      readers.size() != 1 || readers[0] != reader)
    return std::nullopt;
  return n.inputs[0];
}

// The epilogue node `self` (a fused node, or a lone bias add) is, if it is one.
std::optional<Found> find_epilogue(const GraphIR& g, const NodeUsers& users, int self) {
  const GraphNode& node = g.node(self);
  if (node.kind != NodeKind::kOp || node.control_input >= 0) return std::nullopt;
  Found f;
  if (node.op == OpId::FusedElementwise) {
    const FusedProgram& p = fused_program(node.attrs);
    std::optional<Match> match;
    for (std::size_t k = 0; k < node.inputs.size() && !match; ++k) {
      if (is_lone_product(g, users, node.inputs[k], self)) {
        match = match_program(p, static_cast<int>(k), g.type_of(node.inputs[k]).dtype);
        f.product = static_cast<int>(k), f.product_ref = node.inputs[k], f.reshape = -1;  // not an earlier try's
        continue;
      }
      // A float32 matmul's result reshaped (a dense layer over a rank-3 input): the node's
      // result takes the matrix's shape, so the matrix must be there; the bias adds per column
      // of the program's last dim, which must be the product's; no masks (they have the product's shape).
      const std::optional<ValueRef> from = reshaped_from(g, users, node.inputs[k], self);
      if (!from || from->output != 0 || !p.shape.has_rank() || p.shape.rank() < 1) continue;
      const GraphNode& mm = g.node_of(*from);
      if (mm.kind != NodeKind::kOp || mm.op != OpId::MatMul || mm.control_input >= 0 ||
          !others_read_only_shape(g, users, from->node, node.inputs[k].node) ||
          p.shape.dims().back() != g.type_of(*from).shape.dims().back())
        continue;
      bool float32_matrices = true;
      for (const ValueRef& in : mm.inputs) {
        const ValueType& t = g.type_of(in);
        float32_matrices &= t.dtype == DType::Float32 && t.shape.has_rank() && t.shape.rank() == 2;
      }
      if (!float32_matrices) continue;
      match = match_program(p, static_cast<int>(k), DType::Float32);
      if (match && (!match->parts.matrix() || match->parts.mask_out || match->parts.mask_in)) match.reset();
      f.product = static_cast<int>(k), f.product_ref = *from, f.reshape = node.inputs[k].node;
    }
    if (!match || !takes(g.node_of(f.product_ref).op, match->parts) || !applies_epilogue(g, f.product_ref))
      return std::nullopt;
    f.match = *match;
    for (int slot : {f.match.out_slot, f.match.mask_slot})
      if (slot >= 0)
        f.old_output_of.push_back(static_cast<int>(std::find(p.outputs.begin(), p.outputs.end(), slot) - p.outputs.begin()));
    return f;
  }
  // A lone bias add (a layer without an activation): no fused node was made for it.
  if (node.op != OpId::Add || node.inputs.size() != 2 || !is_lone_product(g, users, node.inputs[0], self) ||
      g.node_of(node.inputs[0]).op == OpId::MaxPool2DGrad ||
      !is_bias_of(g.type_of(node.inputs[1]), g.type_of(node.inputs[0]).shape) ||
      !(node.outputs[0].shape == g.type_of(node.inputs[0]).shape) || !applies_epilogue(g, node.inputs[0]))
    return std::nullopt;
  f.match.parts.bias = true, f.match.bias_input = 1;
  f.product = 0, f.product_ref = node.inputs[0];
  f.old_output_of = {0};
  return f;
}

// Node `self` becomes the product with the epilogue `f` found on it; its readers follow its
// outputs' new order.
void rewrite_as_epilogue(GraphIR& g, const NodeUsers& users, int self, const Found& f) {
  GraphNode& node = g.nodes[static_cast<std::size_t>(self)];
  if (f.reshape >= 0) move_shape_readers(g, users, f.product_ref.node, f.reshape);
  const GraphNode& product = g.node_of(f.product_ref);
  auto [op, attrs] = epilogue_node(product, f.match.parts);
  SmallVector<ValueRef, 2> inputs;
  inputs.push_back(product.inputs[0]);
  inputs.push_back(product.inputs[1]);
  if (f.match.bias_input >= 0) inputs.push_back(node.inputs[static_cast<std::size_t>(f.match.bias_input)]);
  if (f.match.mask_input >= 0) inputs.push_back(node.inputs[static_cast<std::size_t>(f.match.mask_input)]);
  if (f.match.matrix_input >= 0) inputs.push_back(node.inputs[static_cast<std::size_t>(f.match.matrix_input)]);
  SmallVector<ValueType, 1> outputs;
  for (int old : f.old_output_of) outputs.push_back(node.outputs[static_cast<std::size_t>(old)]);
  std::vector<int> new_output_of(node.outputs.size(), -1);
  for (std::size_t k = 0; k < f.old_output_of.size(); ++k)
    new_output_of[static_cast<std::size_t>(f.old_output_of[k])] = static_cast<int>(k);
  for (int reader : users.of(self))
    for (ValueRef& in : g.nodes[static_cast<std::size_t>(reader)].inputs)
      if (in.node == self) in.output = new_output_of[static_cast<std::size_t>(in.output)];
  node.op = op;
  node.name = g.unique_name(op_def(op).name);
  node.attrs = std::move(attrs);
  node.inputs = std::move(inputs);
  node.outputs = std::move(outputs);
}

// Whether `sum` is a sum_to_like node over `result`.
bool sums(const GraphNode& sum, ValueRef result) {
  return sum.kind == NodeKind::kOp && sum.op == OpId::SumToLike && sum.control_input < 0 && sum.inputs[0] == result;
}

// Whether `sum` is sum_to_like(result, like) over the rows of `result` (rows x n, n static and
// not 1; or a matrix epilogue's result of more dims, whose leading dims make the product's rows,
// the transformer's (batch, time, n) feed-forward gradient): like is (n) or (1, n) of the
// result's dtype, float32 or bfloat16. reduce_sum folds the leading dims into one run of rows,
// summed in the same pairwise order. Rows of any size but a static 1; a size-1 column dim would
// change reduce_sum's order (its contiguous sum), so n = 1 stays a node.
bool sums_rows_of(const GraphIR& g, const GraphNode& sum, ValueRef result) {
  if (!sums(sum, result)) return false;
  const TensorShape& r = g.type_of(result).shape;
  const ValueType& like = g.type_of(sum.inputs[1]);
  if (!r.has_rank() || r.rank() < 2 || r.dims().back() == None || r.dims().back() == 1) return false;
  if (r.rank() > 2) {
    const MatMulEpilogueAttrs& e = g.node_of(result).attrs.get<MatMulEpilogueAttrs>();
    if (!e.add_matrix && !e.mul_matrix) return false;
  }
  if (std::all_of(r.dims().begin(), r.dims().end() - 1, [](int64_t d) { return d == 1; })) return false;
  if ((like.dtype != DType::Float32 && like.dtype != DType::BFloat16) || like.dtype != g.type_of(result).dtype ||
      !like.shape.has_rank())
    return false;
  const auto& d = like.shape.dims();
  return (d.size() == 1 && d[0] == r.dims().back()) || (d.size() == 2 && d[0] == 1 && d[1] == r.dims().back());
}

// Whether `sum` is sum_to_like(result, like) over every dim of a float32 or bfloat16 (n, h, w, c)
// `result` but the channels (c static and not 1, as above): like is (c) of the same dtype.
// reduce_sum sums those n h w rows of c in the same pairwise order over rows as a product's rows.
bool sums_channels_of(const GraphIR& g, const GraphNode& sum, ValueRef result) {
  if (!sums(sum, result)) return false;
  const ValueType& r = g.type_of(result);
  const ValueType& like = g.type_of(sum.inputs[1]);
  if ((r.dtype != DType::Float32 && r.dtype != DType::BFloat16) || !r.shape.has_rank() || r.shape.rank() != 4)
    return false;
  const int64_t c = r.shape.dims()[3];
  return c != None && c != 1 && like.dtype == r.dtype && like.shape.has_rank() && like.shape.rank() == 1 &&
         like.shape.dims()[0] == c;
}

// A layer's bias gradient becomes the last output of the node whose result it sums, where each
// thread adds up the rows it finishes while they are in its cache (kernels/gemm_epilogue.h), and
// the sum_to_like read them back - on two threads, half of them from the other core's cache:
// - a dense layer's, the sum over rows of a matmul_epilogue's result;
// - a convolution layer's, the sum over all but the channels of the max_pool2d_grad_masked
//   that took in its relu gradient (the CNN demo's two: 0.37 and 0.55 ms of a 21.7 ms step).
// Readers of the sum move to the new output; the sum_to_like is left for the sweep.
void take_column_sums(GraphIR& g, const NodeUsers& users, int self) {
  GraphNode& node = g.nodes[static_cast<std::size_t>(self)];
  const bool dense = node.op == OpId::MatMulEpilogue && !node.attrs.get<MatMulEpilogueAttrs>().column_sums;
  const bool pooled = node.op == OpId::MaxPool2DGradMasked && !node.attrs.get<MaxPoolGradMaskedAttrs>().channel_sums;
  if (!dense && !pooled) return;
  const ValueRef result{self, 0};
  for (int reader : users.of(self)) {
    const GraphNode& sum = g.node(reader);
    if (dense ? !sums_rows_of(g, sum, result) : !sums_channels_of(g, sum, result)) continue;
    if (dense) {
      MatMulEpilogueAttrs attrs = node.attrs.get<MatMulEpilogueAttrs>();
      attrs.column_sums = true;
      attrs.sums_keepdims = g.type_of(sum.inputs[1]).shape.rank() == 2;
      node.attrs = attrs;
    } else {
      MaxPoolGradMaskedAttrs attrs = node.attrs.get<MaxPoolGradMaskedAttrs>();
      attrs.channel_sums = true;
      node.attrs = attrs;
    }
    node.outputs.push_back(sum.outputs[0]);
    const ValueRef sums{self, static_cast<int>(node.outputs.size()) - 1};
    for (int r : users.of(reader))
      for (ValueRef& in : g.nodes[static_cast<std::size_t>(r)].inputs)
        if (in.node == reader) in = sums;
    return;
  }
}

// ---- bfloat16 dense layers. fuse_elementwise leaves the ops reading a bfloat16 matmul or
// max_pool2d_grad unfused, so the epilogue is read off the op nodes: a 2-D bfloat16 matmul read by
// - add(product, bias) alone, the add then read by relu and by greater(add, zeros_like(add))
//   (relu's gradient's mask), or by anything (then the bias alone is taken in); also over a
//   bfloat16 conv2d (a conv2d_epilogue, ops/conv.cpp);
// - where(mask, product, zeros_like(product)) and that zeros_like alone (relu's gradient), also
//   over a bfloat16 max_pool2d_grad (then a max_pool2d_grad_masked: 0 + dy or +0, as the ops).
// The matmul_epilogue rounds as the ops apart do (matmul.cpp), so the bits stay the same. ----

// Whether `r` is an output of a plain op node `op` (no control input) reading exactly `inputs`.
bool is_op(const GraphIR& g, ValueRef r, OpId op) {
  const GraphNode& n = g.node_of(r);
  return n.kind == NodeKind::kOp && n.op == op && n.control_input < 0;
}

// Whether `r` is a 2-D bfloat16 matmul's output.
bool is_bf16_matmul(const GraphIR& g, ValueRef r) {
  if (!is_op(g, r, OpId::MatMul)) return false;
  for (const ValueRef& in : g.node_of(r).inputs) {
    const ValueType& t = g.type_of(in);
    if (t.dtype != DType::BFloat16 || !t.shape.has_rank() || t.shape.rank() != 2) return false;
  }
  return true;
}

// Whether `r` is a bfloat16 conv2d's output (a convolution layer's product under mixed_bfloat16).
bool is_bf16_conv(const GraphIR& g, ValueRef r) {
  if (!is_op(g, r, OpId::Conv2D)) return false;
  for (const ValueRef& in : g.node_of(r).inputs) {
    const ValueType& t = g.type_of(in);
    if (t.dtype != DType::BFloat16 || !t.shape.has_rank() || t.shape.rank() != 4) return false;
  }
  return true;
}

// Every input in the graph that reads `from` reads `to` instead.
void redirect(GraphIR& g, ValueRef from, ValueRef to) {
  for (GraphNode& n : g.nodes)
    for (ValueRef& in : n.inputs)
      if (in == from) in = to;
}

bool only_reader(const NodeUsers& users, int node, int reader) {
  const auto readers = users.of(node);
  return readers.size() == 1 && readers[0] == reader;
}

// Node `self` becomes matmul_epilogue or conv2d_epilogue(product's operands, extra inputs) with
// these outputs.
void become_bf16_epilogue(GraphIR& g, int self, const GraphNode& product, const EpilogueParts& e,
                          const std::vector<ValueRef>& extra, SmallVector<ValueType, 1> outputs) {
  if (product.op == OpId::Conv2D) {
    GraphNode& node = g.nodes[static_cast<std::size_t>(self)];
    node.op = OpId::Conv2DEpilogue;
    node.name = g.unique_name(op_def(OpId::Conv2DEpilogue).name);
    node.attrs = epilogue_node(product, e).second;
    SmallVector<ValueRef, 2> inputs;
    inputs.push_back(product.inputs[0]);
    inputs.push_back(product.inputs[1]);
    for (const ValueRef& r : extra) inputs.push_back(r);
    node.inputs = std::move(inputs);
    node.outputs = std::move(outputs);
    return;
  }
  const MatMulAttrs& a = product.attrs.get<MatMulAttrs>();
  SmallVector<ValueRef, 2> inputs;
  inputs.push_back(product.inputs[0]);
  inputs.push_back(product.inputs[1]);
  for (const ValueRef& r : extra) inputs.push_back(r);
  GraphNode& node = g.nodes[static_cast<std::size_t>(self)];
  node.op = OpId::MatMulEpilogue;
  node.name = g.unique_name(op_def(OpId::MatMulEpilogue).name);
  node.attrs = MatMulEpilogueAttrs{a.transpose_a, a.transpose_b, e.bias, e.mask_out, e.relu, e.mask_in};
  node.inputs = std::move(inputs);
  node.outputs = std::move(outputs);
}

// add(product, bias): the bias, and relu with its mask where the add's readers are just those.
// The product a matmul, or a conv2d (a convolution layer's).
bool fuse_bf16_bias(GraphIR& g, const NodeUsers& users, int self) {
  const GraphNode& node = g.node(self);
  if (node.inputs.size() != 2 || !(is_bf16_matmul(g, node.inputs[0]) || is_bf16_conv(g, node.inputs[0])) ||
      !only_reader(users, node.inputs[0].node, self))
    return false;
  const ValueType& bias = g.type_of(node.inputs[1]);
  const TensorShape& shape = g.type_of(node.inputs[0]).shape;
  if (bias.dtype != DType::BFloat16 || !bias.shape.has_rank() || bias.shape.rank() != 1 || shape.dims().back() == None ||
      bias.shape.dims()[0] != shape.dims().back() || !(node.outputs[0].shape == shape))
    return false;
  // The add's readers: one relu, and at most one greater(add, zeros_like(add)) whose zeros_like
  // nothing else reads. Anything else needs the add's own value.
  const ValueRef sum{self, 0};
  int relu = -1, greater = -1;
  bool other = false;
  for (int r : users.of(self)) {
    const GraphNode& n = g.node(r);
    if (n.kind != NodeKind::kOp || n.control_input >= 0) other = true;
    else if (n.op == OpId::Relu && relu < 0) relu = r;
    else if (n.op == OpId::ZerosLike && n.inputs[0] == sum && users.of(r).size() == 1 &&
             is_op(g, ValueRef{users.of(r)[0], 0}, OpId::Greater))
      continue;  // checked with its greater
    else if (n.op == OpId::Greater && greater < 0 && n.inputs[0] == sum && is_op(g, n.inputs[1], OpId::ZerosLike) &&
             g.node_of(n.inputs[1]).inputs[0] == sum && only_reader(users, n.inputs[1].node, r))
      greater = r;
    else other = true;
  }
  const GraphNode product = g.node_of(node.inputs[0]);
  const ValueRef bias_ref = node.inputs[1];
  EpilogueParts e;
  e.bias = true;
  if (other || relu < 0) {
    become_bf16_epilogue(g, self, product, e, {bias_ref}, g.node(self).outputs);
    return true;
  }
  e.relu = true;
  e.mask_out = greater >= 0;
  SmallVector<ValueType, 1> outputs;
  outputs.push_back(g.node(relu).outputs[0]);
  if (greater >= 0) outputs.push_back(g.node(greater).outputs[0]);
  become_bf16_epilogue(g, self, product, e, {bias_ref}, std::move(outputs));
  // The relu, the greater and its zeros_like are left without readers, for the sweep.
  redirect(g, ValueRef{relu, 0}, ValueRef{self, 0});
  if (greater >= 0) redirect(g, ValueRef{greater, 0}, ValueRef{self, 1});
  return true;
}

// Whether `r` is a bfloat16 max_pool2d_grad's output (its kernel takes a mask in, pool.cpp).
bool is_bf16_pool_grad(const GraphIR& g, ValueRef r) {
  if (!is_op(g, r, OpId::MaxPool2DGrad)) return false;
  for (const ValueRef& in : g.node_of(r).inputs) {
    const ValueType& t = g.type_of(in);
    if (t.dtype != DType::BFloat16 || !t.shape.has_rank() || t.shape.rank() != 4) return false;
  }
  return true;
}

// where(mask, product, zeros_like(product)); the product a matmul, or a max_pool2d_grad (a
// convolution layer's relu gradient before its pool), which becomes max_pool2d_grad_masked.
bool fuse_bf16_masked(GraphIR& g, const NodeUsers& users, int self) {
  const GraphNode& node = g.node(self);
  const bool pool = node.inputs.size() == 3 && is_bf16_pool_grad(g, node.inputs[1]);
  if (node.inputs.size() != 3 || !(pool || is_bf16_matmul(g, node.inputs[1])) ||
      !is_op(g, node.inputs[2], OpId::ZerosLike))
    return false;
  const ValueRef product_ref = node.inputs[1];
  const int zeros = node.inputs[2].node;
  if (!(g.node(zeros).inputs[0] == product_ref) || !only_reader(users, zeros, self)) return false;
  const auto readers = users.of(product_ref.node);
  if (readers.size() != 2 || !((readers[0] == self && readers[1] == zeros) || (readers[0] == zeros && readers[1] == self)))
    return false;
  const ValueType& mask = g.type_of(node.inputs[0]);
  const TensorShape& shape = g.type_of(product_ref).shape;
  if (mask.dtype != DType::Bool || !(mask.shape == shape) || !(node.outputs[0].shape == shape)) return false;
  const GraphNode product = g.node_of(product_ref);
  if (pool) {
    GraphNode& n = g.nodes[static_cast<std::size_t>(self)];
    n.op = OpId::MaxPool2DGradMasked;
    n.name = g.unique_name(op_def(OpId::MaxPool2DGradMasked).name);
    n.attrs = MaxPoolGradMaskedAttrs{product.attrs.get<Pool2DAttrs>(), false};
    n.inputs = {product.inputs[0], product.inputs[1], n.inputs[0]};
    return true;
  }
  EpilogueParts e;
  e.mask_in = true;
  become_bf16_epilogue(g, self, product, e, {node.inputs[0]}, g.node(self).outputs);
  return true;
}

bool fuse_bf16_epilogue(GraphIR& g, const NodeUsers& users, int self) {
  const GraphNode& node = g.node(self);
  if (node.kind != NodeKind::kOp || node.control_input >= 0 || node.outputs.size() != 1 ||
      node.outputs[0].dtype != DType::BFloat16)
    return false;
  if (node.op == OpId::Add) return fuse_bf16_bias(g, users, self);
  if (node.op == OpId::Where) return fuse_bf16_masked(g, users, self);
  return false;
}

// A bfloat16 convolution layer's relu gradient read off relu's result: a max_pool2d_grad_masked
// over x = conv2d_epilogue:0 (bias, relu) whose mask is conv2d_epilogue:1 (the sum before relu
// > 0) takes x as its mask's source (x > 0 is the same booleans: relu keeps what is > 0, and
// NaN and -0 are > 0 in neither), so its kernel reads the mask off each window's maximum; the
// epilogue's mask output, then unread, is no longer written.
int derive_bf16_pool_masks(GraphIR& g) {
  int count = 0;
  std::vector<int> convs;
  for (GraphNode& node : g.nodes) {
    if (node.kind != NodeKind::kOp || node.op != OpId::MaxPool2DGradMasked || node.control_input >= 0 ||
        node.inputs.size() != 3)
      continue;
    const ValueRef x = node.inputs[0], m = node.inputs[2];
    if (m.node != x.node || x.output != 0 || m.output != 1 || g.type_of(x).dtype != DType::BFloat16) continue;
    const GraphNode& conv = g.node_of(x);
    if (conv.kind != NodeKind::kOp || conv.op != OpId::Conv2DEpilogue) continue;
    const Conv2DEpilogueAttrs& a = conv.attrs.get<Conv2DEpilogueAttrs>();
    if (!a.relu || !a.mask_out || a.mask_in || a.max_pool || conv.outputs.size() != 2) continue;
    node.inputs[2] = x;
    convs.push_back(x.node);
    ++count;
  }
  for (int c : convs) {
    bool read = false;
    for (const GraphNode& n : g.nodes)
      for (const ValueRef& in : n.inputs) read |= in.node == c && in.output == 1;
    GraphNode& conv = g.nodes[static_cast<std::size_t>(c)];
    if (read || conv.outputs.size() != 2) continue;
    Conv2DEpilogueAttrs a = conv.attrs.get<Conv2DEpilogueAttrs>();
    a.mask_out = false;
    conv.attrs = a;
    conv.outputs = SmallVector<ValueType, 1>{conv.outputs[0]};
  }
  return count;
}

// ---- matrix epilogues of op nodes: fuse_elementwise leaves an add or a mul alone when its
// operand is a reshape (a dense layer over a rank-3 input) or a matmul_epilogue already made. ----

// The epilogue attributes a float32 product `r` (a 2-D matmul, or a matmul_epilogue with no
// mask made, column sums or matrix) that only `reader` reads would start from; else nothing.
std::optional<MatMulEpilogueAttrs> matrix_base(const GraphIR& g, const NodeUsers& users, ValueRef r, int reader) {
  const GraphNode& n = g.node_of(r);
  if (r.output != 0 || n.kind != NodeKind::kOp || n.control_input >= 0 ||
      !others_read_only_shape(g, users, r.node, reader) || n.inputs.size() < 2)
    return std::nullopt;
  for (std::size_t i = 0; i < 2; ++i) {
    const ValueType& t = g.type_of(n.inputs[i]);
    if (t.dtype != DType::Float32 || !t.shape.has_rank() || t.shape.rank() != 2) return std::nullopt;
  }
  if (n.op == OpId::MatMul && n.inputs.size() == 2) {
    const MatMulAttrs& a = n.attrs.get<MatMulAttrs>();
    return MatMulEpilogueAttrs{a.transpose_a, a.transpose_b, false, false, false, false};
  }
  if (n.op != OpId::MatMulEpilogue || n.outputs.size() != 1) return std::nullopt;
  const MatMulEpilogueAttrs& e = n.attrs.get<MatMulEpilogueAttrs>();
  if (e.mask_out || e.column_sums || e.add_matrix || e.mul_matrix) return std::nullopt;
  return e;
}

// add(a, b) or mul(a, b) over float32 values of one static shape (no broadcast), one of them a
// product matrix_base takes, perhaps through one reshape: the node becomes that product with
// the other as its matrix (the same bits either way round). Its result keeps the node's shape.
bool fuse_matrix_epilogue(GraphIR& g, const NodeUsers& users, int self) {
  const GraphNode& node = g.node(self);
  if (node.kind != NodeKind::kOp || node.control_input >= 0 || (node.op != OpId::Add && node.op != OpId::Mul) ||
      node.inputs.size() != 2 || node.outputs.size() != 1 || node.outputs[0].dtype != DType::Float32 ||
      !node.outputs[0].shape.is_fully_defined())
    return false;
  const TensorShape& shape = node.outputs[0].shape;
  for (std::size_t k = 0; k < 2; ++k) {
    const ValueRef side = node.inputs[k], matrix = node.inputs[1 - k];
    const ValueType& m = g.type_of(matrix);
    if (side.node == matrix.node || m.dtype != DType::Float32 || !(m.shape == shape) ||
        !(g.type_of(side).shape == shape))
      continue;
    ValueRef product = side;
    int reader = self;
    if (const std::optional<ValueRef> from = reshaped_from(g, users, side, self)) product = *from, reader = side.node;
    if (product.node == matrix.node) continue;
    std::optional<MatMulEpilogueAttrs> attrs = matrix_base(g, users, product, reader);
    if (!attrs) continue;
    (node.op == OpId::Add ? attrs->add_matrix : attrs->mul_matrix) = true;
    SmallVector<ValueRef, 2> inputs;
    for (const ValueRef& in : g.node_of(product).inputs) inputs.push_back(in);
    inputs.push_back(matrix);
    move_shape_readers(g, users, product.node, reader);
    GraphNode& out = g.nodes[static_cast<std::size_t>(self)];
    out.op = OpId::MatMulEpilogue;
    out.name = g.unique_name(op_def(OpId::MatMulEpilogue).name);
    out.attrs = *attrs;
    out.inputs = std::move(inputs);
    return true;  // the product (and its reshape) are left without readers, for the sweep
  }
  return false;
}

}  // namespace

int fuse_product_epilogues(GraphIR& g) {
  const NodeUsers users = g.users();
  int count = 0;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const int self = static_cast<int>(i);
    if (fuse_bf16_epilogue(g, users, self)) {
      ++count;
      take_column_sums(g, users, self);  // a bfloat16 max_pool2d_grad_masked's channel sums
      continue;
    }
    if (const std::optional<Found> f = find_epilogue(g, users, self)) {
      rewrite_as_epilogue(g, users, self, *f);
      ++count;  // the product is left without readers, for the sweep after this pass
      take_column_sums(g, users, self);
      continue;
    }
    if (fuse_matrix_epilogue(g, users, self)) {
      ++count;
      take_column_sums(g, users, self);
    }
  }
  count += fuse_conv_max_pools(g);  // the conv2d_epilogue nodes just made take in their pools
  count += derive_bf16_pool_masks(g);
  count += take_bf16_operand_casts(g);  // the bfloat16 products just made read float32 weights
  return count;
}

}  // namespace tg::detail
