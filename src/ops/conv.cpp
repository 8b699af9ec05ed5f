// The convolution ops - conv2d, its two gradient ops, and the optimiser's conv2d_epilogue - over
// NHWC tensors and HWIO filters: shape and dtype rules, the kernels' frame, gradient rules and
// front functions. The kernels are in conv_kernels.h; what convolution and pooling share (window
// attributes and TF's output sizes) in window.h.
#include "ops/conv.h"

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "kernels/conv_kernels.h"
#include "ops/eager_steps.h"
#include "ops/epilogue_steps.h"
#include "ops/window.h"
#include "tracegraph/ops.h"

namespace tg {
namespace detail {
namespace {

// conv2d's output type; everything the op family checks about an (input, filter) pair.
ValueType conv_output(const char* op, const ValueType& input, const ValueType& filter,
                      const Conv2DAttrs& a) {
  check_conv_attrs(op, a);
  require_float(op, input, "input");
  require_same_dtype(op, input, "input", filter, "filter");
  const std::vector<int64_t> x = dims4(op, input, "input", kNHWC);
  const std::vector<int64_t> f = dims4(op, filter, "filter", kHWIO);
  for (int64_t d : f)
    if (d == 0)
      op_error<InvalidArgumentError>(op, "the filter ", filter.shape.to_string(),
                                     " has a zero dimension; a filter needs at least one element "
                                     "in each dim (TensorFlow refuses empty filters too)");
  if (x[3] != None && f[2] != None && x[3] != f[2])
    op_error<InvalidArgumentError>(op, "the input has ", x[3], " channels (shape ",
                                   input.shape.to_string(), ") but the filter expects ", f[2],
                                   " (shape ", filter.shape.to_string(),
                                   ", HWIO: dim 2 is in_channels); they must be equal");
  const Window wh = f[0] == None ? Window{None, 0}
                                 : window_1d(op, "height", x[1], f[0], a.dilations[0], a.strides[0], a.padding);
  const Window ww = f[1] == None ? Window{None, 0}
                                 : window_1d(op, "width", x[2], f[1], a.dilations[1], a.strides[1], a.padding);
  return ValueType{input.dtype, TensorShape({x[0], wh.out, ww.out, f[3]})};
}

// ---- shape rules ----

std::vector<ValueType> infer_conv2d(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  return {conv_output("conv2d", in[0], in[1], attrs.get<Conv2DAttrs>())};
}

std::vector<ValueType> infer_conv2d_backprop_input(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const char* op = "conv2d_backprop_input";
  require_grad_shape(op, in[2], conv_output(op, in[0], in[1], attrs.get<Conv2DAttrs>()), "conv2d");
  return {in[0]};
}

std::vector<ValueType> infer_conv2d_backprop_filter(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const char* op = "conv2d_backprop_filter";
  require_grad_shape(op, in[2], conv_output(op, in[0], in[1], attrs.get<Conv2DAttrs>()), "conv2d");
  return {in[1]};
}

// ---- kernels ----

ConvGeom conv_geometry(const Tensor& input, const Tensor& filter, const Conv2DAttrs& a) {
  const auto& x = input.impl()->shape.dims();
  const auto& f = filter.impl()->shape.dims();
  ConvGeom g{};
  g.n = x[0], g.h = x[1], g.w = x[2], g.c = x[3];
  g.kh = f[0], g.kw = f[1], g.oc = f[3];
  g.sh = a.strides[0], g.sw = a.strides[1], g.dh = a.dilations[0], g.dw = a.dilations[1];
  const Window wh = window_1d("conv2d", "height", g.h, g.kh, g.dh, g.sh, a.padding);
  const Window ww = window_1d("conv2d", "width", g.w, g.kw, g.dw, g.sw, a.padding);
  g.oh = wh.out, g.ow = ww.out, g.pt = wh.pad_before, g.pl = ww.pad_before;
  return g;
}

// The three convolution kernels share their frame: the geometry from inputs 0 and 1 (the
// forward's input and filter, or the shape they stand for), nothing to do for an empty result,
// zeros for a filter gradient over an empty input, and the pass run on the operands' float type.
// The passes take products of the input's dims, which only an input that holds elements bounds
// ((0, 2^40, 2^40, 1) is a valid empty one).
template <class Pass>
void run_conv_pass(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out, Pass&& pass) {
  const ConvGeom g = conv_geometry(in[0], in[1], attrs.get<Conv2DAttrs>());
  const int64_t n = out[0].impl()->shape.num_elements();
  if (n == 0) return;
  if (in[0].impl()->shape.num_elements() == 0) {
    dispatch_float(in[0].impl()->dtype, [&](auto tag) { std::fill_n(data_of<decltype(tag)>(out[0]), n, decltype(tag)(0)); });
    return;
  }
  dispatch_float(in[0].impl()->dtype, [&](auto tag) { pass(g, tag); });
}

void kernel_conv2d(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  run_conv_pass(in, attrs, out, [&](const ConvGeom& g, auto tag) {
    using T = decltype(tag);
    conv_forward<T>(g, data_of<T>(in[0]), data_of<T>(in[1]), data_of<T>(out[0]));
  });
}

// ---- conv2d_epilogue: a float32 convolution and the elementwise ops after it (kernels/gemm_epilogue.h's
// GemmEpilogue along the channels), made by the optimiser (src/passes/fuse_product_epilogues.cpp) ----

OpAttrs product_attrs(const Conv2DEpilogueAttrs& e) { return Conv2DAttrs{e.strides, e.dilations, e.padding}; }

std::vector<ValueType> infer_conv2d_epilogue(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const Conv2DEpilogueAttrs& e = attrs.get<Conv2DEpilogueAttrs>();
  return infer_epilogue_node("conv2d_epilogue", OpId::Conv2D, product_attrs(e), EpilogueParts::of(e), in);
}

void kernel_conv2d_epilogue(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const Conv2DEpilogueAttrs& e = attrs.get<Conv2DEpilogueAttrs>();
  const EpilogueParts parts = EpilogueParts::of(e);
  const ConvGeom g = conv_geometry(in[0], in[1], product_attrs(e).get<Conv2DAttrs>());
  const TensorShape product({g.n, g.oh, g.ow, g.oc});
  if (!epilogue_fits(parts, in, out, product))
    return run_steps_eagerly([&](auto op) { return run_epilogue_steps(OpId::Conv2D, product_attrs(e), parts, in, op); }, out);
  if (product.num_elements() == 0) return;
  const GemmEpilogue epilogue = gemm_epilogue_of(parts, in, out, g.oc);
  conv_forward<float>(g, data_of<float>(in[0]), data_of<float>(in[1]), data_of<float>(out[0]), &epilogue);
}

void kernel_conv2d_backprop_input(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  run_conv_pass(in, attrs, out, [&](const ConvGeom& g, auto tag) {
    using T = decltype(tag);
    conv_backprop_input<T>(g, data_of<T>(in[1]), data_of<T>(in[2]), data_of<T>(out[0]));
  });
}

void kernel_conv2d_backprop_filter(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  run_conv_pass(in, attrs, out, [&](const ConvGeom& g, auto tag) {
    using T = decltype(tag);
    conv_backprop_filter<T>(g, data_of<T>(in[0]), data_of<T>(in[2]), data_of<T>(out[0]));
  });
}

// ---- gradient rules ----
// Each op is linear in the tensors it reads the values of, so every rule is another op of the
// family, the adjoint:
//   conv2d(x, f)                  dx = backprop_input(x, f, dy)   df = backprop_filter(x, f, dy)
//   backprop_input(x~, f, d) = G  df = backprop_filter(G, f, d)   dd = conv2d(G, f)
//   backprop_filter(x, f~, d) = G dx = backprop_input(x, G, d)    dd = conv2d(x, G)
// (x~, f~: shape only, no gradient).

const Conv2DAttrs& conv_attrs(const GradInputs& g) { return g.attrs.get<Conv2DAttrs>(); }

Tensor conv2d_with(const Tensor& x, const Tensor& f, const Conv2DAttrs& a) {
  return apply_op1(OpId::Conv2D, {x, f}, a);
}

// Each gradient is a product as large as the forward one: only those wanted are computed.
std::vector<Tensor> grad_conv2d(const GradInputs& g) {
  const Tensor& dy = g.grads[0];
  return {g.wants(0) ? conv2d_backprop_input(g.inputs[0], g.inputs[1], dy, conv_attrs(g)) : Tensor(),
          g.wants(1) ? conv2d_backprop_filter(g.inputs[0], g.inputs[1], dy, conv_attrs(g)) : Tensor()};
}
std::vector<Tensor> grad_conv2d_backprop_input(const GradInputs& g) {
  const Tensor& G = g.grads[0];
  return {Tensor(), g.wants(1) ? conv2d_backprop_filter(G, g.inputs[1], g.inputs[2], conv_attrs(g)) : Tensor(),
          g.wants(2) ? conv2d_with(G, g.inputs[1], conv_attrs(g)) : Tensor()};
}
std::vector<Tensor> grad_conv2d_backprop_filter(const GradInputs& g) {
  const Tensor& G = g.grads[0];
  return {g.wants(0) ? conv2d_backprop_input(g.inputs[0], G, g.inputs[2], conv_attrs(g)) : Tensor(), Tensor(),
          g.wants(2) ? conv2d_with(g.inputs[0], G, conv_attrs(g)) : Tensor()};
}

}  // namespace

Tensor conv2d_backprop_input(const Tensor& input_like, const Tensor& filter, const Tensor& grad,
                             const Conv2DAttrs& attrs) {
  return apply_op1(OpId::Conv2DBackpropInput, {input_like, filter, grad}, attrs);
}
Tensor conv2d_backprop_filter(const Tensor& input, const Tensor& filter_like, const Tensor& grad,
                              const Conv2DAttrs& attrs) {
  return apply_op1(OpId::Conv2DBackpropFilter, {input, filter_like, grad}, attrs);
}

void register_conv_ops(OpDef* t) {
  set_op(t, OpId::Conv2D, &infer_conv2d, &kernel_conv2d);
  set_op(t, OpId::Conv2DEpilogue, &infer_conv2d_epilogue, &kernel_conv2d_epilogue);
  set_op(t, OpId::Conv2DBackpropInput, &infer_conv2d_backprop_input, &kernel_conv2d_backprop_input);
  set_op(t, OpId::Conv2DBackpropFilter, &infer_conv2d_backprop_filter, &kernel_conv2d_backprop_filter);
  set_grad(t, OpId::Conv2D, &grad_conv2d);
  set_grad(t, OpId::Conv2DBackpropInput, &grad_conv2d_backprop_input);
  set_grad(t, OpId::Conv2DBackpropFilter, &grad_conv2d_backprop_filter);
}

}  // namespace detail

Tensor conv2d(const Tensor& input, const Tensor& filter, std::vector<int64_t> strides, Padding padding,
              std::vector<int64_t> dilations) {
  const char* op = "conv2d";
  return detail::apply_op1(detail::OpId::Conv2D, {input, filter},
                           detail::Conv2DAttrs{detail::spatial_pair(op, "strides", strides),
                                               detail::spatial_pair(op, "dilations", dilations),
                                               static_cast<int64_t>(padding)});
}

}  // namespace tg
