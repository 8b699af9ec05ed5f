// The pooling ops - max_pool2d and avg_pool2d, their gradient ops, max pooling's second-order
// op, and the optimiser's max_pool2d_grad_masked - over NHWC tensors: shape and dtype rules, the
// kernels' frame, gradient rules and front functions. The kernels are in pool_kernels.h; what
// pooling and convolution share (window attributes and TF's output sizes) in window.h.
#include <optional>
#include <vector>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "ops/broadcast.h"
#include "ops/conv.h"
#include "ops/epilogue_steps.h"
#include "kernels/pool_kernels.h"
#include "ops/window.h"
#include "tracegraph/ops.h"

namespace tg {
namespace detail {
namespace {

ValueType pool_output(const char* op, const ValueType& input, const Pool2DAttrs& a) {
  check_pool_attrs(op, a);
  // bfloat16: max_pool2d, its gradient and the masked gradient by their own kernels; the rest by
  // ops/bf16_compute.cpp's float32 rule, which widens before this rule sees them.
  require_dtype(op, input, {DType::Float32, DType::Float64, DType::BFloat16}, "input");
  const std::vector<int64_t> x = dims4(op, input, "input", kNHWC);
  const Window wh = window_1d(op, "height", x[1], a.ksize[0], 1, a.strides[0], a.padding);
  const Window ww = window_1d(op, "width", x[2], a.ksize[1], 1, a.strides[1], a.padding);
  return ValueType{input.dtype, TensorShape({x[0], wh.out, ww.out, x[3]})};
}

// ---- shape rules ----

std::vector<ValueType> infer_pool(const char* op, const std::vector<ValueType>& in, const OpAttrs& attrs) {
  return {pool_output(op, in[0], attrs.get<Pool2DAttrs>())};
}
std::vector<ValueType> infer_max_pool2d(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  return infer_pool("max_pool2d", in, attrs);
}
std::vector<ValueType> infer_avg_pool2d(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  return infer_pool("avg_pool2d", in, attrs);
}

// (input, grad of the pool's output) -> shaped like input: max_pool2d_grad, avg_pool2d_grad.
std::vector<ValueType> infer_pool_grad(const char* op, const char* forward, const std::vector<ValueType>& in,
                                       const OpAttrs& attrs) {
  require_grad_shape(op, in[1], pool_output(op, in[0], attrs.get<Pool2DAttrs>()), forward);
  return {in[0]};
}
std::vector<ValueType> infer_max_pool2d_grad(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  return infer_pool_grad("max_pool2d_grad", "max_pool2d", in, attrs);
}
std::vector<ValueType> infer_avg_pool2d_grad(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  return infer_pool_grad("avg_pool2d_grad", "avg_pool2d", in, attrs);
}

// (input, g shaped like input) -> shaped like max_pool2d(input).
std::vector<ValueType> infer_max_pool2d_grad_grad(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const char* op = "max_pool2d_grad_grad";
  const ValueType out = pool_output(op, in[0], attrs.get<Pool2DAttrs>());
  require_same_dtype(op, in[0], "input", in[1], "g");
  if (in[0].shape.has_rank() && in[1].shape.has_rank() && !in[1].shape.is_compatible_with(in[0].shape))
    op_error<InvalidArgumentError>(op, "g has shape ", in[1].shape.to_string(),
                                   " but the input has shape ", in[0].shape.to_string(),
                                   "; expected that shape");
  return {out};
}

// ---- kernels ----

// Whether a pooling kernel has nothing to read: its results are empty too, or zeros (the masked
// gradient's channel sums). The kernels take products of the input's dims, which only an input
// that holds elements bounds ((0, 2^40, 2^40, 1) is a valid empty one).
bool empty_pool_input(const Tensor& input) { return input.impl()->shape.num_elements() == 0; }

PoolGeom pool_geometry(const char* op, const Tensor& input, const Pool2DAttrs& a) {
  const auto& x = input.impl()->shape.dims();
  PoolGeom g{};
  g.n = x[0], g.h = x[1], g.w = x[2], g.c = x[3];
  g.kh = a.ksize[0], g.kw = a.ksize[1], g.sh = a.strides[0], g.sw = a.strides[1];
  const Window wh = window_1d(op, "height", g.h, g.kh, 1, g.sh, a.padding);
  const Window ww = window_1d(op, "width", g.w, g.kw, 1, g.sw, a.padding);
  g.oh = wh.out, g.ow = ww.out, g.pt = wh.pad_before, g.pl = ww.pad_before;
  return g;
}

void kernel_max_pool2d(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const PoolGeom g = pool_geometry("max_pool2d", in[0], attrs.get<Pool2DAttrs>());
  if (empty_pool_input(in[0])) return;
  if (in[0].impl()->dtype == DType::BFloat16)
    return max_pool_forward_bf16(g, data_of<bfloat16_t>(in[0]), data_of<bfloat16_t>(out[0]));
  dispatch_float(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    max_pool_forward<T>(g, data_of<T>(in[0]), data_of<T>(out[0]));
  });
}

void kernel_max_pool2d_grad(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const PoolGeom g = pool_geometry("max_pool2d_grad", in[0], attrs.get<Pool2DAttrs>());
  if (empty_pool_input(in[0])) return;
  if (in[0].impl()->dtype == DType::BFloat16)
    return max_pool_backward_bf16(g, data_of<bfloat16_t>(in[0]), data_of<bfloat16_t>(in[1]), nullptr,
                                  data_of<bfloat16_t>(out[0]));
  dispatch_float(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    max_pool_backward<T>(g, data_of<T>(in[0]), data_of<T>(in[1]), nullptr, data_of<T>(out[0]));
  });
}

// ---- max_pool2d_grad_masked: where(mask, max_pool2d_grad(x, dy), 0) in one node, made by the
// optimiser (src/passes/fuse_product_epilogues.cpp): a convolution layer's relu gradient taken
// in by the pooling gradient after it, where it had read and written the whole of dx again
// (the CNN demo's first layer: 1.15 ms of its step). The mask input is bool, or a tensor of the
// input's dtype m standing for m > 0: the optimiser passes x itself where x is relu's result
// and the mask was relu's input > 0 (the same booleans, NaN and -0 included), and the bfloat16
// kernel then reads it off each window's maximum instead of a bool tensor. A uint8 mask is the
// winners of a bfloat16 conv2d_epilogue with pool_winners (one byte per element of dy: the window
// position of the first maximum where it is > 0, else 255), and x is then read for its shape
// only: the gradient where the mask is x > 0, as above, without reading x again. ----

constexpr const char* kMaskedPoolGrad = "max_pool2d_grad_masked";

std::vector<ValueType> infer_max_pool2d_grad_masked(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const MaxPoolGradMaskedAttrs& a = attrs.get<MaxPoolGradMaskedAttrs>();
  ValueType dx = infer_pool_grad(kMaskedPoolGrad, "max_pool2d", {in[0], in[1]}, a.pool).at(0);
  if (in[2].dtype == DType::UInt8) {
    require_dtype(kMaskedPoolGrad, in[0], {DType::BFloat16}, "with a winners mask (uint8), an input");
    if (!in[2].shape.is_compatible_with(in[1].shape))
      op_error<InvalidArgumentError>(kMaskedPoolGrad, "the winners have shape ", in[2].shape.to_string(),
                                     " but the gradient has shape ", in[1].shape.to_string(),
                                     "; expected one winner per element of the gradient");
    if (!pool_window_fits_winners(a.pool.ksize, a.pool.strides, a.pool.padding))
      op_error<InvalidArgumentError>(kMaskedPoolGrad, "winners need a VALID pool whose strides are its window of ",
                                     "at most 16 elements; got window ", format_list(a.pool.ksize), ", strides ",
                                     format_list(a.pool.strides), ", padding ", a.pool.padding,
                                     "; pass a bool mask instead");
    if (!a.channel_sums) return {dx};
    const int64_t channels = dx.shape.has_rank() ? dx.shape.dims().back() : None;
    return {dx, ValueType{dx.dtype, TensorShape({channels})}};
  }
  if (in[2].dtype != DType::Bool) require_same_dtype(kMaskedPoolGrad, in[0], "input", in[2], "a mask's source");
  else require_dtype(kMaskedPoolGrad, in[2], {DType::Bool}, "a mask");
  dx.shape = broadcast_shapes(kMaskedPoolGrad, in[2].shape, dx.shape);  // where's result
  if (!a.channel_sums) return {dx};
  // reduce_sum over every dim but the channels (what sum_to_like(dx, bias) computes).
  const int64_t channels = dx.shape.has_rank() ? dx.shape.dims().back() : None;
  return {dx, ValueType{dx.dtype, TensorShape({channels})}};
}

// The gradient from a conv2d_epilogue's pool winners (in[2]); x (in[0]) gives the shape only.
void masked_pool_grad_of_winners(const MaxPoolGradMaskedAttrs& a, const std::vector<Tensor>& in,
                                 std::vector<Tensor>& out) {
  const PoolGeom g = pool_geometry(kMaskedPoolGrad, in[0], a.pool);
  const TensorShape pooled({g.n, g.oh, g.ow, g.c});
  if (!(in[1].impl()->shape == pooled) || !(in[2].impl()->shape == pooled) || !pool_winners_fit(g))
    op_error<InvalidArgumentError>(kMaskedPoolGrad, "the gradient ", in[1].impl()->shape.to_string(), " and winners ",
                                   in[2].impl()->shape.to_string(), " must both be the pool's output ",
                                   pooled.to_string(), " of windows that tile the input ",
                                   in[0].impl()->shape.to_string(), "; pass a bool mask instead");
  if (empty_pool_input(in[0])) {
    if (a.channel_sums) std::fill_n(data_of<bfloat16_t>(out[1]), g.c, bfloat16_t{});
    return;
  }
  std::optional<EpilogueColumnSums> sums;
  if (a.channel_sums) sums.emplace(g.n * g.h * g.w, g.c);
  max_pool_backward_winners_bf16(g, data_of<uint8_t>(in[2]), data_of<bfloat16_t>(in[1]), data_of<bfloat16_t>(out[0]),
                                 sums ? sums->leaves() : nullptr);
  if (sums) sums->finish(data_of<bfloat16_t>(out[0]), data_of<bfloat16_t>(out[1]));
}

void kernel_max_pool2d_grad_masked(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const MaxPoolGradMaskedAttrs& a = attrs.get<MaxPoolGradMaskedAttrs>();
  const TensorShape& shape = in[0].impl()->shape;
  const bool bf16 = in[0].impl()->dtype == DType::BFloat16;
  if (in[2].impl()->dtype == DType::UInt8) return masked_pool_grad_of_winners(a, in, out);
  Tensor mask = in[2];
  bool positive = false;  // mask = x > 0, read off each window's maximum by the kernel
  if (mask.impl()->dtype != DType::Bool) {
    positive = bf16 && mask.impl() == in[0].impl();
    if (!positive)
      mask = run_op_eager(op_def(OpId::Greater), {in[2], run_op_eager(op_def(OpId::ZerosLike), {in[2]}, OpAttrs{}).at(0)},
                          OpAttrs{})
                 .at(0);
  }
  if (!(mask.impl()->shape == shape) || (a.channel_sums && in[0].impl()->dtype == DType::Float64)) {
    // A mask that broadcasts at run time (None dims), or sums the fused kernel does not make
    // (float32's and bfloat16's leaves only): the ops by their own kernels.
    const Tensor dx = run_op_eager(op_def(OpId::MaxPool2DGrad), {in[0], in[1]}, a.pool).at(0);
    const Tensor zero = run_op_eager(op_def(OpId::ZerosLike), {dx}, OpAttrs{}).at(0);
    const Tensor r = run_op_eager(op_def(OpId::Where), {mask, dx, zero}, OpAttrs{}).at(0);
    copy_elements(r, out[0]);
    if (a.channel_sums)
      copy_elements(run_op_eager(op_def(OpId::ReduceSum), {r}, ReduceAttrs{{0, 1, 2}, false}).at(0), out[1]);
    return;
  }
  const PoolGeom g = pool_geometry(kMaskedPoolGrad, in[0], a.pool);
  if (empty_pool_input(in[0])) {
    if (a.channel_sums && bf16) std::fill_n(data_of<bfloat16_t>(out[1]), g.c, bfloat16_t{});
    else if (a.channel_sums) std::fill_n(data_of<float>(out[1]), g.c, 0.0f);
    return;
  }
  std::optional<EpilogueColumnSums> sums;
  if (a.channel_sums) sums.emplace(g.n * g.h * g.w, g.c);
  if (bf16) {
    // The sums of dx as rounded (each value widened exactly), rounded once: reduce_sum's
    // bfloat16 rule over the where's result, as sum_to_like computes it apart.
    max_pool_backward_bf16(g, data_of<bfloat16_t>(in[0]), data_of<bfloat16_t>(in[1]),
                           positive ? nullptr : data_of<bool>(mask), data_of<bfloat16_t>(out[0]),
                           sums ? sums->leaves() : nullptr, positive);
    if (sums) sums->finish(data_of<bfloat16_t>(out[0]), data_of<bfloat16_t>(out[1]));
    return;
  }
  dispatch_float(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    max_pool_backward<T>(g, data_of<T>(in[0]), data_of<T>(in[1]), data_of<bool>(mask), data_of<T>(out[0]),
                         sums ? sums->leaves() : nullptr);
  });
  if (sums) sums->finish(data_of<float>(out[0]), data_of<float>(out[1]));
}

void kernel_max_pool2d_grad_grad(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const PoolGeom g = pool_geometry("max_pool2d_grad_grad", in[0], attrs.get<Pool2DAttrs>());
  if (empty_pool_input(in[0])) return;
  dispatch_float(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    max_pool_gather<T>(g, data_of<T>(in[0]), data_of<T>(in[1]), data_of<T>(out[0]));
  });
}

void kernel_avg_pool2d(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const PoolGeom g = pool_geometry("avg_pool2d", in[0], attrs.get<Pool2DAttrs>());
  if (empty_pool_input(in[0])) return;
  dispatch_float(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    avg_pool_forward<T>(g, data_of<T>(in[0]), data_of<T>(out[0]));
  });
}

void kernel_avg_pool2d_grad(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const PoolGeom g = pool_geometry("avg_pool2d_grad", in[0], attrs.get<Pool2DAttrs>());
  if (empty_pool_input(in[0])) return;
  dispatch_float(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    avg_pool_backward<T>(g, data_of<T>(in[1]), data_of<T>(out[0]));
  });
}

// ---- gradient rules ----
// Each op is linear in the tensors it reads the values of (the max pool ops: given which
// element is each window's maximum), so every rule is another op of the family, the adjoint:
//   max_pool2d(x)                 dx = max_pool2d_grad(x, dy)
//   max_pool2d_grad(x, d) = G     dd = max_pool2d_grad_grad(x, G)
//   max_pool2d_grad_grad(x, g)    dg = max_pool2d_grad(x, dy)
//   avg_pool2d(x)                 dx = avg_pool2d_grad(x, dy)
//   avg_pool2d_grad(x~, d) = G    dd = avg_pool2d(G)
// (x~: shape only, no gradient). The max pool ops get none with respect to x either: moving x
// changes which element wins only at ties, a set of measure zero, so the derivative is 0
// elsewhere, as in TensorFlow.

const Pool2DAttrs& pool_attrs(const GradInputs& g) { return g.attrs.get<Pool2DAttrs>(); }
Tensor avg_pool_with(const Tensor& x, const Pool2DAttrs& a) { return apply_op1(OpId::AvgPool2D, {x}, a); }

std::vector<Tensor> grad_max_pool2d(const GradInputs& g) {
  return {max_pool2d_grad(g.inputs[0], g.grads[0], pool_attrs(g))};
}
std::vector<Tensor> grad_max_pool2d_grad(const GradInputs& g) {
  return {Tensor(), max_pool2d_grad_grad(g.inputs[0], g.grads[0], pool_attrs(g))};
}
std::vector<Tensor> grad_max_pool2d_grad_grad(const GradInputs& g) {
  return {Tensor(), max_pool2d_grad(g.inputs[0], g.grads[0], pool_attrs(g))};
}
std::vector<Tensor> grad_avg_pool2d(const GradInputs& g) {
  return {avg_pool2d_grad(g.inputs[0], g.grads[0], pool_attrs(g))};
}
std::vector<Tensor> grad_avg_pool2d_grad(const GradInputs& g) {
  return {Tensor(), avg_pool_with(g.grads[0], pool_attrs(g))};
}

}  // namespace

Tensor max_pool2d_grad(const Tensor& input, const Tensor& grad, const Pool2DAttrs& attrs) {
  return apply_op1(OpId::MaxPool2DGrad, {input, grad}, attrs);
}
Tensor max_pool2d_grad_grad(const Tensor& input, const Tensor& g, const Pool2DAttrs& attrs) {
  return apply_op1(OpId::MaxPool2DGradGrad, {input, g}, attrs);
}
Tensor avg_pool2d_grad(const Tensor& input_like, const Tensor& grad, const Pool2DAttrs& attrs) {
  return apply_op1(OpId::AvgPool2DGrad, {input_like, grad}, attrs);
}

void register_pool_ops(OpDef* t) {
  set_op(t, OpId::MaxPool2D, &infer_max_pool2d, &kernel_max_pool2d);
  set_op(t, OpId::MaxPool2DGrad, &infer_max_pool2d_grad, &kernel_max_pool2d_grad);
  set_op(t, OpId::MaxPool2DGradMasked, &infer_max_pool2d_grad_masked, &kernel_max_pool2d_grad_masked);
  set_op(t, OpId::MaxPool2DGradGrad, &infer_max_pool2d_grad_grad, &kernel_max_pool2d_grad_grad);
  set_op(t, OpId::AvgPool2D, &infer_avg_pool2d, &kernel_avg_pool2d);
  set_op(t, OpId::AvgPool2DGrad, &infer_avg_pool2d_grad, &kernel_avg_pool2d_grad);
  set_grad(t, OpId::MaxPool2D, &grad_max_pool2d);
  set_grad(t, OpId::MaxPool2DGrad, &grad_max_pool2d_grad);
  set_grad(t, OpId::MaxPool2DGradGrad, &grad_max_pool2d_grad_grad);
  set_grad(t, OpId::AvgPool2D, &grad_avg_pool2d);
  set_grad(t, OpId::AvgPool2DGrad, &grad_avg_pool2d_grad);
}

}  // namespace detail

namespace {
detail::Pool2DAttrs pool_attrs_of(const char* op, const std::vector<int64_t>& ksize,
                                  const std::vector<int64_t>& strides, Padding padding) {
  return detail::Pool2DAttrs{detail::spatial_pair(op, "ksize", ksize),
                             detail::spatial_pair(op, "strides", strides), static_cast<int64_t>(padding)};
}
}  // namespace

Tensor max_pool2d(const Tensor& input, std::vector<int64_t> ksize, std::vector<int64_t> strides,
                  Padding padding) {
  return detail::apply_op1(detail::OpId::MaxPool2D, {input},
                           pool_attrs_of("max_pool2d", ksize, strides, padding));
}

Tensor avg_pool2d(const Tensor& input, std::vector<int64_t> ksize, std::vector<int64_t> strides,
                  Padding padding) {
  return detail::apply_op1(detail::OpId::AvgPool2D, {input},
                           pool_attrs_of("avg_pool2d", ksize, strides, padding));
}

}  // namespace tg
