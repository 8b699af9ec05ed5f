// The convolution ops - conv2d (grouped too), its two gradient ops, conv2d_transpose,
// depthwise_conv2d, and the optimiser's conv2d_epilogue - over NHWC tensors and HWIO filters:
// shape and dtype rules, the kernels' frame, gradient rules and front functions. The kernels are
// in conv_kernels.h and depthwise_conv.h; what convolution and pooling share (window attributes
// and TF's output sizes) in window.h.
//
// Groups follow TF's Conv2D: a filter (kh, kw, in_channels / groups, out_channels) gives group
// g the input channels [g * in/groups, (g + 1) * in/groups) and the output channels
// [g * out/groups, (g + 1) * out/groups); the number of groups is read off the shapes, never
// stored. A filter of one in_channel with groups == in_channels is a depthwise convolution
// and runs on depthwise_conv.h's kernels; other groups run the dense kernels once per group.
#include "ops/conv.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "kernels/bf16.h"
#include "kernels/conv_kernels.h"
#include "kernels/onednn_conv_bf16.h"
#include "kernels/pool_kernels.h"
#include "kernels/simd_math.h"
#include "ops/bf16_compute.h"
#include "ops/broadcast.h"
#include "kernels/depthwise_conv.h"
#include "kernels/elementwise_functors.h"
#include "ops/eager_steps.h"
#include "ops/epilogue_steps.h"
#include "ops/window.h"
#include "ops/grad_helpers.h"
#include "tracegraph/ops.h"

namespace tg {
namespace detail {
namespace {

// The convolutions take bfloat16 too (the kernels' section says how they compute it).
void require_conv_float(const char* op, const ValueType& t) {
  require_dtype(op, t, {DType::Float32, DType::Float64, DType::BFloat16}, "input");
}

// conv2d's output type; everything the op family checks about an (input, filter) pair.
ValueType conv_output(const char* op, const ValueType& input, const ValueType& filter,
                      const Conv2DAttrs& a) {
  check_conv_attrs(op, a);
  require_conv_float(op, input);
  require_same_dtype(op, input, "input", filter, "filter");
  const std::vector<int64_t> x = dims4(op, input, "input", kNHWC);
  const std::vector<int64_t> f = dims4(op, filter, "filter", kHWIO);
  for (int64_t d : f)
    if (d == 0)
      op_error<InvalidArgumentError>(op, "the filter ", filter.shape.to_string(),
                                     " has a zero dimension; a filter needs at least one element "
                                     "in each dim (TensorFlow refuses empty filters too)");
  if (x[3] != None && f[2] != None && (x[3] % f[2] != 0 || x[3] == 0))
    op_error<InvalidArgumentError>(op, "the input has ", x[3], " channels (shape ",
                                   input.shape.to_string(), ") but the filter expects ", f[2],
                                   " (shape ", filter.shape.to_string(),
                                   ", HWIO: dim 2 is in_channels per group); the input's channels must "
                                   "equal it, or be a multiple of it for a grouped convolution (groups = "
                                   "input channels / in_channels, as in TensorFlow)");
  if (x[3] != None && f[2] != None && f[3] != None && f[3] % (x[3] / f[2]) != 0)
    op_error<InvalidArgumentError>(op, "the filter ", filter.shape.to_string(), " has ", f[3],
                                   " out_channels, which do not split into the ", x[3] / f[2],
                                   " groups that the input's ", x[3], " channels make (", x[3], " / ", f[2],
                                   " in_channels per group); give it a multiple of ", x[3] / f[2],
                                   " out_channels");
  const Window wh = f[0] == None ? Window{None, 0}
                                 : window_1d(op, "height", x[1], f[0], a.dilations[0], a.strides[0], a.padding);
  const Window ww = f[1] == None ? Window{None, 0}
                                 : window_1d(op, "width", x[2], f[1], a.dilations[1], a.strides[1], a.padding);
  return ValueType{input.dtype, TensorShape({x[0], wh.out, ww.out, f[3]})};
}

// conv2d_transpose's output type: the input of the convolution it transposes, which must map
// back onto conv2d_transpose's input (TF's checks of conv2d_backprop_input's input_sizes).
ValueType transpose_output(const char* op, const ValueType& input, const ValueType& filter,
                           const Conv2DTransposeAttrs& a) {
  require_conv_float(op, input);
  require_same_dtype(op, input, "input", filter, "filter");
  const std::vector<int64_t>& os = a.output_shape;
  if (os.size() != 4)
    op_error<InvalidArgumentError>(op, "output_shape ", format_list(os), " has ", os.size(),
                                   " entries; expected 4 (batch, height, width, channels: NHWC)");
  for (std::size_t i = 1; i < 4; ++i)
    if (os[i] < 0)
      op_error<InvalidArgumentError>(op, "output_shape ", format_list(os), " has size ", os[i], " in dim ", i,
                                     "; the height, width and channels must be known and >= 0");
  if (os[0] < None)
    op_error<InvalidArgumentError>(op, "output_shape ", format_list(os), " has a negative batch size");
  const std::vector<int64_t> x = dims4(op, input, "input", kNHWC);
  const std::vector<int64_t> f = dims4(op, filter, "filter", "(height, width, out_channels, in_channels)");
  if (os[0] != None && x[0] != None && os[0] != x[0])
    op_error<InvalidArgumentError>(op, "output_shape ", format_list(os), " has batch ", os[0], " but the input ",
                                   input.shape.to_string(), " has batch ", x[0], "; they must be equal");
  if (x[3] != None && f[3] != None && x[3] != f[3])
    op_error<InvalidArgumentError>(op, "the input has ", x[3], " channels (shape ", input.shape.to_string(),
                                   ") but the filter ", filter.shape.to_string(), " takes ", f[3],
                                   " (dim 3 is in_channels); they must be equal");
  const int64_t batch = x[0] != None ? x[0] : os[0];
  const ValueType result{input.dtype, TensorShape({batch, os[1], os[2], os[3]})};
  // The convolution over the result gives the input's shape back (conv_output checks the filter
  // against the output's channels, groups included).
  const ValueType back = conv_output(op, result, filter, Conv2DAttrs{a.strides, a.dilations, a.padding});
  const std::vector<int64_t>& b = back.shape.dims();
  for (std::size_t i = 1; i < 3; ++i)
    if (x[i] != None && b[i] != None && x[i] != b[i])
      op_error<InvalidArgumentError>(op, "the input ", input.shape.to_string(), " does not fit output_shape ",
                                     format_list(os), ": a conv2d with these strides, dilations and padding over ",
                                     "the output gives ", back.shape.to_string(), " (", i == 1 ? "height" : "width",
                                     " ", b[i], ", not ", x[i], "); pick the output_shape whose convolution gives "
                                     "the input's size");
  return result;
}

// depthwise_conv2d's output type: TF's checks (the filter's dim 2 is the input's channels), then
// conv2d's over the filter seen as (kh, kw, 1, channels * multiplier).
ValueType depthwise_output(const char* op, const ValueType& input, const ValueType& filter, const Conv2DAttrs& a) {
  const std::vector<int64_t> x = dims4(op, input, "input", kNHWC);
  const std::vector<int64_t> f = dims4(op, filter, "filter", "(height, width, in_channels, channel_multiplier)");
  if (x[3] != None && f[2] != None && x[3] != f[2])
    op_error<InvalidArgumentError>(op, "the input has ", x[3], " channels (shape ", input.shape.to_string(),
                                   ") but the filter ", filter.shape.to_string(), " has ", f[2],
                                   " in dim 2 (in_channels); they must be equal");
  const int64_t flat = f[2] == None || f[3] == None ? None : f[2] * f[3];
  return conv_output(op, input, ValueType{filter.dtype, TensorShape({f[0], f[1], 1, flat})}, a);
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

std::vector<ValueType> infer_conv2d_transpose(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  return {transpose_output("conv2d_transpose", in[0], in[1], attrs.get<Conv2DTransposeAttrs>())};
}

std::vector<ValueType> infer_depthwise_conv2d(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  return {depthwise_output("depthwise_conv2d", in[0], in[1], attrs.get<Conv2DAttrs>())};
}

// ---- kernels ----

// A convolution's geometry over the whole tensors (c and oc count every group's channels) and
// its number of groups, from the input's and the filter's dims.
struct GroupedGeom {
  ConvGeom g;
  int64_t groups;
  bool depthwise() const { return groups > 1 && g.c == groups; }
  // One group's convolution, for the dense kernels.
  ConvGeom per_group() const {
    ConvGeom p = g;
    p.c = g.c / groups, p.oc = g.oc / groups;
    return p;
  }
};

GroupedGeom conv_geometry(const std::vector<int64_t>& x, const std::vector<int64_t>& f, const Conv2DAttrs& a) {
  ConvGeom g{};
  g.n = x[0], g.h = x[1], g.w = x[2], g.c = x[3];
  g.kh = f[0], g.kw = f[1], g.oc = f[3];
  g.sh = a.strides[0], g.sw = a.strides[1], g.dh = a.dilations[0], g.dw = a.dilations[1];
  const Window wh = window_1d("conv2d", "height", g.h, g.kh, g.dh, g.sh, a.padding);
  const Window ww = window_1d("conv2d", "width", g.w, g.kw, g.dw, g.sw, a.padding);
  g.oh = wh.out, g.ow = ww.out, g.pt = wh.pad_before, g.pl = ww.pad_before;
  TG_CHECK(f[2] > 0 && g.c % f[2] == 0 && g.oc % (g.c / f[2]) == 0, "convolution groups unchecked");
  return {g, g.c / f[2]};
}
GroupedGeom conv_geometry(const Tensor& input, const Tensor& filter, const Conv2DAttrs& a) {
  return conv_geometry(input.impl()->shape.dims(), filter.impl()->shape.dims(), a);
}

// Channels [first, first + count) of every pixel of an (pixels, channels) buffer, copied to or
// from a dense (pixels, count) one.
template <class T>
void take_channels(const T* src, int64_t pixels, int64_t channels, int64_t first, int64_t count, T* dst) {
  for (int64_t p = 0; p < pixels; ++p) std::copy_n(src + p * channels + first, count, dst + p * count);
}
template <class T>
void put_channels(const T* src, int64_t pixels, int64_t channels, int64_t first, int64_t count, T* dst) {
  for (int64_t p = 0; p < pixels; ++p) std::copy_n(src + p * count, count, dst + p * channels + first);
}

// The three passes over groups: one call for one group, the depthwise kernels for a depthwise
// convolution, else the dense kernel once per group over dense copies of its channels.
template <class T>
void grouped_forward(const GroupedGeom& gg, const T* x, const T* f, T* y) {
  if (gg.groups == 1) return conv_forward<T>(gg.g, x, f, y);
  if (gg.depthwise()) return depthwise_forward<T>(gg.g, x, f, y);
  const ConvGeom& g = gg.g;
  const ConvGeom p = gg.per_group();
  const int64_t in_pixels = g.n * g.h * g.w, out_pixels = g.n * g.oh * g.ow, taps = g.kh * g.kw * p.c;
  std::vector<T> xg(static_cast<std::size_t>(in_pixels * p.c)), fg(static_cast<std::size_t>(taps * p.oc)),
      yg(static_cast<std::size_t>(out_pixels * p.oc));
  for (int64_t k = 0; k < gg.groups; ++k) {
    take_channels(x, in_pixels, g.c, k * p.c, p.c, xg.data());
    take_channels(f, taps, g.oc, k * p.oc, p.oc, fg.data());
    conv_forward<T>(p, xg.data(), fg.data(), yg.data());
    put_channels(yg.data(), out_pixels, g.oc, k * p.oc, p.oc, y);
  }
}
template <class T>
void grouped_backprop_input(const GroupedGeom& gg, const T* f, const T* dy, T* dx) {
  if (gg.groups == 1) return conv_backprop_input<T>(gg.g, f, dy, dx);
  if (gg.depthwise()) return depthwise_backprop_input<T>(gg.g, f, dy, dx);
  const ConvGeom& g = gg.g;
  const ConvGeom p = gg.per_group();
  const int64_t in_pixels = g.n * g.h * g.w, out_pixels = g.n * g.oh * g.ow, taps = g.kh * g.kw * p.c;
  std::vector<T> dxg(static_cast<std::size_t>(in_pixels * p.c)), fg(static_cast<std::size_t>(taps * p.oc)),
      dyg(static_cast<std::size_t>(out_pixels * p.oc));
  for (int64_t k = 0; k < gg.groups; ++k) {
    take_channels(f, taps, g.oc, k * p.oc, p.oc, fg.data());
    take_channels(dy, out_pixels, g.oc, k * p.oc, p.oc, dyg.data());
    conv_backprop_input<T>(p, fg.data(), dyg.data(), dxg.data());
    put_channels(dxg.data(), in_pixels, g.c, k * p.c, p.c, dx);
  }
}
template <class T>
void grouped_backprop_filter(const GroupedGeom& gg, const T* x, const T* dy, T* df) {
  if (gg.groups == 1) return conv_backprop_filter<T>(gg.g, x, dy, df);
  if (gg.depthwise()) return depthwise_backprop_filter<T>(gg.g, x, dy, df);
  const ConvGeom& g = gg.g;
  const ConvGeom p = gg.per_group();
  const int64_t in_pixels = g.n * g.h * g.w, out_pixels = g.n * g.oh * g.ow, taps = g.kh * g.kw * p.c;
  std::vector<T> xg(static_cast<std::size_t>(in_pixels * p.c)), dfg(static_cast<std::size_t>(taps * p.oc)),
      dyg(static_cast<std::size_t>(out_pixels * p.oc));
  for (int64_t k = 0; k < gg.groups; ++k) {
    take_channels(x, in_pixels, g.c, k * p.c, p.c, xg.data());
    take_channels(dy, out_pixels, g.oc, k * p.oc, p.oc, dyg.data());
    conv_backprop_filter<T>(p, xg.data(), dyg.data(), dfg.data());
    put_channels(dfg.data(), taps, g.oc, k * p.oc, p.oc, df);
  }
}

// The convolution kernels share their frame: the geometry (from the forward's input and filter
// dims, or the shapes they stand for), nothing to do for an empty result, zeros for a filter
// gradient over an empty input, and the pass run on the operands' float type. The passes take
// products of the input's dims, which only an input that holds elements bounds ((0, 2^40, 2^40,
// 1) is a valid empty one).
template <class Pass>
void run_conv_pass(const GroupedGeom& gg, int64_t input_elements, DType dtype, std::vector<Tensor>& out, Pass&& pass) {
  const int64_t n = out[0].impl()->shape.num_elements();
  if (n == 0) return;
  if (input_elements == 0) {
    dispatch_float(dtype, [&](auto tag) { std::fill_n(data_of<decltype(tag)>(out[0]), n, decltype(tag)(0)); });
    return;
  }
  dispatch_float(dtype, [&](auto tag) { pass(gg, tag); });
}
template <class Pass>
void run_conv_pass(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out, Pass&& pass) {
  run_conv_pass(conv_geometry(in[0], in[1], attrs.get<Conv2DAttrs>()), in[0].impl()->shape.num_elements(),
                in[0].impl()->dtype, out, pass);
}

// ---- bfloat16 ----
// A bfloat16 convolution of one group runs on oneDNN's AVX512_BF16 kernels where they take it
// (kernels/onednn_conv_bf16.h); any other runs the op's float32 kernel on the widened operands
// and rounds each result to bfloat16, TensorFlow's rule for bfloat16 ops (ops/bf16_compute.h).
// Both round float32 sums of exact products to nearest, ties to even; the native kernels count
// subnormals as zero, as the bfloat16 matmul does.

bool is_bf16(const std::vector<Tensor>& in) { return in[0].impl()->dtype == DType::BFloat16; }

// The native pass native(geometry) -> bool where one group and a non-empty input allow it,
// else the float32 kernel.
template <class Native>
void run_bf16(KernelFn float_kernel, const GroupedGeom& gg, const std::vector<Tensor>& in, const OpAttrs& attrs,
              std::vector<Tensor>& out, Native&& native) {
  if (out[0].impl()->shape.num_elements() == 0) return;
  if (gg.groups == 1 && in[0].impl()->shape.num_elements() > 0 && native(gg.g)) return;
  run_via_float32(float_kernel, in, attrs, out);
}

void kernel_conv2d(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  if (is_bf16(in))
    return run_bf16(&kernel_conv2d, conv_geometry(in[0], in[1], attrs.get<Conv2DAttrs>()), in, attrs, out,
                    [&](const ConvGeom& g) {
                      return onednn_bf16::conv_forward(g, data_of<bfloat16_t>(in[0]), data_of<bfloat16_t>(in[1]),
                                                       data_of<bfloat16_t>(out[0]));
                    });
  run_conv_pass(in, attrs, out, [&](const GroupedGeom& g, auto tag) {
    using T = decltype(tag);
    grouped_forward<T>(g, data_of<T>(in[0]), data_of<T>(in[1]), data_of<T>(out[0]));
  });
}

// The filter's buffer read as the grouped (kh, kw, 1, channels * multiplier) one.
std::vector<int64_t> depthwise_as_grouped(const Tensor& filter) {
  const auto& f = filter.impl()->shape.dims();
  return {f[0], f[1], 1, f[2] * f[3]};
}

void kernel_depthwise_conv2d(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  if (is_bf16(in)) return run_via_float32(&kernel_depthwise_conv2d, in, attrs, out);
  const GroupedGeom gg = conv_geometry(in[0].impl()->shape.dims(), depthwise_as_grouped(in[1]), attrs.get<Conv2DAttrs>());
  run_conv_pass(gg, in[0].impl()->shape.num_elements(), in[0].impl()->dtype, out, [&](const GroupedGeom& g, auto tag) {
    using T = decltype(tag);
    grouped_forward<T>(g, data_of<T>(in[0]), data_of<T>(in[1]), data_of<T>(out[0]));
  });
}

void kernel_conv2d_transpose(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const Conv2DTransposeAttrs& a = attrs.get<Conv2DTransposeAttrs>();
  const GroupedGeom gg = conv_geometry(out[0].impl()->shape.dims(), in[1].impl()->shape.dims(),
                                       Conv2DAttrs{a.strides, a.dilations, a.padding});
  if (is_bf16(in))
    return run_bf16(&kernel_conv2d_transpose, gg, in, attrs, out, [&](const ConvGeom& g) {
      return onednn_bf16::conv_backprop_input(g, data_of<bfloat16_t>(in[1]), data_of<bfloat16_t>(in[0]), data_of<bfloat16_t>(out[0]));
    });
  // The forward convolution's input is this op's output; its output (this op's input) may be
  // empty while the result is not: the result is then zeros.
  run_conv_pass(gg, in[0].impl()->shape.num_elements(), in[0].impl()->dtype, out, [&](const GroupedGeom& g, auto tag) {
    using T = decltype(tag);
    grouped_backprop_input<T>(g, data_of<T>(in[1]), data_of<T>(in[0]), data_of<T>(out[0]));
  });
}

// ---- conv2d_epilogue: a float32 convolution and the elementwise ops after it (kernels/gemm_epilogue.h's
// GemmEpilogue along the channels), made by the optimiser (src/passes/fuse_product_epilogues.cpp) ----

OpAttrs product_attrs(const Conv2DEpilogueAttrs& e) { return Conv2DAttrs{e.strides, e.dilations, e.padding}; }

// The max_pool2d a conv2d_epilogue with max_pool ends with.
OpAttrs conv_pool_attrs(const Conv2DEpilogueAttrs& e) { return Pool2DAttrs{e.pool_ksize, e.pool_strides, e.pool_padding}; }

std::vector<ValueType> infer_conv2d_epilogue(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const Conv2DEpilogueAttrs& e = attrs.get<Conv2DEpilogueAttrs>();
  const char* op = "conv2d_epilogue";
  std::vector<ValueType> out = infer_epilogue_node(op, OpId::Conv2D, product_attrs(e), EpilogueParts::of(e), in);
  const ValueType activation = out[0];
  if (e.max_pool) out[0] = op_def(OpId::MaxPool2D).infer({out[0]}, conv_pool_attrs(e)).at(0);
  if (!e.pool_winners) return out;
  // The pool's winners (training): bfloat16, windows that tile (VALID, strides = window, at
  // most 16 elements), and no other output.
  if (!e.max_pool || out.size() != 1)
    op_error<InvalidArgumentError>(op, "pool_winners needs max_pool and no mask or sums output; got max_pool ",
                                   e.max_pool ? "true" : "false", " and ", out.size(),
                                   " outputs; leave pool_winners false");
  require_dtype(op, activation, {DType::BFloat16}, "with pool_winners, operands");
  if (!pool_window_fits_winners(e.pool_ksize, e.pool_strides, e.pool_padding))
    op_error<InvalidArgumentError>(op, "pool_winners needs a VALID pool whose strides are its window of at most 16 ",
                                   "elements; got window ", format_list(e.pool_ksize), ", strides ",
                                   format_list(e.pool_strides), ", padding ", e.pool_padding,
                                   "; leave pool_winners false");
  return {out[0], activation, ValueType{DType::UInt8, out[0].shape}};
}

// conv2d_epilogue with max_pool (a convolution layer's relu(conv2d(x, f) + b) read only by its
// max_pool2d, in inference): the epilogue's ops, then the pool, as the node's steps.
template <class V, class Op>
std::vector<V> conv_max_pool_steps(const Conv2DEpilogueAttrs& e, const std::vector<V>& in, Op&& op) {
  std::vector<V> outs = run_epilogue_steps(OpId::Conv2D, product_attrs(e), EpilogueParts::of(e), in, op);
  outs[0] = op(OpId::MaxPool2D, std::vector<V>{outs[0]}, conv_pool_attrs(e));
  return outs;
}

// The pool a conv2d_epilogue takes in, over the convolution's output.
PoolGeom epilogue_pool_geometry(const Conv2DEpilogueAttrs& e, const ConvGeom& g) {
  const char* op = "conv2d_epilogue";
  const Window wh = window_1d(op, "height", g.oh, e.pool_ksize[0], 1, e.pool_strides[0], e.pool_padding);
  const Window ww = window_1d(op, "width", g.ow, e.pool_ksize[1], 1, e.pool_strides[1], e.pool_padding);
  return PoolGeom{g.n, g.oh, g.ow, g.oc, e.pool_ksize[0], e.pool_ksize[1], e.pool_strides[0], e.pool_strides[1],
                  wh.out, ww.out, wh.pad_before, ww.pad_before};
}

// Its kernel, float32 with a bias and relu only: each image is pooled while its activation is
// in cache (conv_forward_max_pool: the activation is never written whole); otherwise (im2col, oneDNN's bands of one image) the
// convolution with its epilogue into a temporary, then the pool's kernel. Either way the bits
// are the ops' apart: the convolution's with its epilogue, then max_pool_forward's, which keeps
// the first maximum (or NaN) of each window whatever the kernel. Anything else runs the steps.
void kernel_conv2d_epilogue_max_pool(const Conv2DEpilogueAttrs& e, const EpilogueParts& parts,
                                     const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const GroupedGeom gg = conv_geometry(in[0], in[1], product_attrs(e).get<Conv2DAttrs>());
  const ConvGeom& g = gg.g;
  const TensorShape product({g.n, g.oh, g.ow, g.oc});
  const PoolGeom pool = epilogue_pool_geometry(e, g);
  const bool fits = gg.groups == 1 && !parts.mask_out && !parts.mask_in && !parts.column_sums && out.size() == 1 &&
                    in[0].dtype() == DType::Float32 && in[1].dtype() == DType::Float32 &&
                    out[0].impl()->shape == TensorShape({g.n, pool.oh, pool.ow, g.oc}) &&
                    (!parts.bias || in[EpilogueParts::kBiasInput].impl()->shape == TensorShape({g.oc})) &&
                    product.num_elements() > 0 && out[0].impl()->shape.num_elements() > 0;
  if (!fits) return run_steps_eagerly([&](auto step) { return conv_max_pool_steps(e, in, step); }, out);
  const GemmEpilogue epilogue = gemm_epilogue_of(parts, in, out, g.oc);
  const float* x = data_of<float>(in[0]);
  const float* f = data_of<float>(in[1]);
  float* y = data_of<float>(out[0]);
  if (conv_forward_max_pool(g, x, f, &epilogue, pool, y)) return;
  const Tensor activation = allocate_tensor(DType::Float32, product);
  float* const a = data_of<float>(activation);
  conv_forward<float>(g, x, f, a, &epilogue);
  max_pool_forward<float>(pool, a, y);
}

// The epilogue of a bfloat16 convolution over pixels [p0, p1) of its rounded result y (c
// channels each), with the bits of the ops apart, as matmul_epilogue's bfloat16 path: each op
// rounds its own result and the next computes in float32 on that rounded value - so the bias is
// added to the product as rounded, the sum rounded, and the mask, relu and where look at that
// rounded value (relu and where of a bfloat16 value are bfloat16 values). `wide` holds the block.
void bf16_conv_epilogue_pixels(const EpilogueParts& e, int64_t c, const float* bias, bool* mask_out,
                               const bool* mask_in, bfloat16_t* y, float* wide, int64_t p0, int64_t p1) {
  const int64_t at = p0 * c, count = (p1 - p0) * c;
  bfloat16_t* block = y + at;
  float* __restrict w = wide;
  bf16_to_f32(block, w, count);
  if (e.bias) {
    for (int64_t p = 0; p < p1 - p0; ++p)
      for (int64_t j = 0; j < c; ++j) w[p * c + j] = AddF{}(w[p * c + j], bias[j]);
    f32_to_bf16(w, block, count);
    if (!e.mask_out && !e.relu && !e.mask_in) return;
    bf16_to_f32(block, w, count);
  }
  if (e.mask_out) {
    bool* __restrict m = mask_out + at;
    for (int64_t j = 0; j < count; ++j) m[j] = GreaterF{}(w[j], 0.0f);
  }
  if (e.relu)
    for (int64_t j = 0; j < count; ++j) w[j] = ReluF{}(w[j]);
  if (e.mask_in) {
    const auto* __restrict m = reinterpret_cast<const unsigned char*>(mask_in + at);
    for (int64_t j = 0; j < count; ++j) w[j] = WhereF{}(m[j] != 0, w[j], 0.0f);
  }
  f32_to_bf16(w, block, count);
}

// The same epilogue in one pass over the pixels, 16 channels to a register (on CPUs with
// AVX-512 F/BW/VL): each value widened, the bias added and the sum rounded in the register (to
// nearest, ties to even, a NaN made quiet: bfloat16_t's rounding), then the mask, relu and where
// on that rounded value, and the result stored as its upper half - exact, since it is a bfloat16
// value or +0 - with a NaN's quiet bit set, as the final rounding of the ops apart sets it. The
// bits of bf16_conv_epilogue_pixels; one read and one write of the block where that function
// makes up to three conversion passes over it.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void bf16_conv_epilogue_pixels_avx512(
    const EpilogueParts& e, int64_t c, const float* bias, bool* mask_out, const bool* mask_in, bfloat16_t* y,
    int64_t p0, int64_t p1) {
  // The maskz forms throughout: the plain ones trip gcc 12's -Wmaybe-uninitialized.
  const __m512 zero = _mm512_setzero_ps();
  const __m512i lsb = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff), quiet = _mm512_set1_epi32(0x40),
                magnitude = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  // The parts in locals: the stores below could alias `e` as far as the compiler knows.
  const bool add_bias = e.bias, write_mask = e.mask_out, relu = e.relu, read_mask = e.mask_in;
  for (int64_t p = p0; p < p1; ++p)
    for (int64_t j = 0; j < c; j += 16) {
      const __mmask16 lanes = c - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (c - j)) - 1);
      const int64_t i = p * c + j;
      __m512i u = _mm512_maskz_slli_epi32(
          0xFFFF, _mm512_maskz_cvtepu16_epi32(0xFFFF, _mm256_maskz_loadu_epi16(lanes, y + i)), 16);
      if (add_bias) {
        const __m512 product = _mm512_castsi512_ps(u);
        __m512 sum = _mm512_maskz_add_ps(0xFFFF, product, _mm512_maskz_loadu_ps(lanes, bias + j));
        // NaN + NaN: the product's NaN, as the add op's kernel gives it (the compiler may swap
        // the operands of the commutative vaddps); quieted by the rounding below.
        sum = _mm512_mask_mov_ps(sum, _mm512_cmp_ps_mask(product, product, _CMP_UNORD_Q), product);
        const __m512i s = _mm512_castps_si512(sum);
        const __m512i odd = _mm512_maskz_and_epi32(0xFFFF, _mm512_maskz_srli_epi32(0xFFFF, s, 16), lsb);
        __m512i r = _mm512_maskz_srli_epi32(
            0xFFFF, _mm512_maskz_add_epi32(0xFFFF, _mm512_maskz_add_epi32(0xFFFF, s, half), odd), 16);
        const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_maskz_and_epi32(0xFFFF, s, magnitude), inf);
        r = _mm512_mask_or_epi32(r, nan, _mm512_maskz_srli_epi32(0xFFFF, s, 16), quiet);
        u = _mm512_maskz_slli_epi32(0xFFFF, r, 16);
      }
      __m512 v = _mm512_castsi512_ps(u);
      if (write_mask) {
        const __mmask16 positive = _mm512_cmp_ps_mask(v, zero, _CMP_GT_OQ);
        _mm_mask_storeu_epi8(mask_out + i, lanes, _mm_maskz_mov_epi8(positive, _mm_set1_epi8(1)));
      }
      if (relu) v = _mm512_mask_max_ps(v, 0xFFFF, zero, v);  // x < 0 ? 0 : x, NaN and -0 kept
      if (read_mask) {
        const __m128i m = _mm_maskz_loadu_epi8(lanes, mask_in + i);
        v = _mm512_maskz_mov_ps(_mm_test_epi8_mask(m, m), v);
      }
      const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
      __m512i b = _mm512_maskz_srli_epi32(0xFFFF, _mm512_castps_si512(v), 16);
      b = _mm512_mask_or_epi32(b, nan, b, quiet);
      _mm512_mask_cvtepi32_storeu_epi16(y + i, lanes, b);
    }
}

// The integer rule of bf16_conv_epilogue_pixels_avx512 on 16 float32 values: bfloat16_t's
// rounding (subnormals included), the bits in the lower halves of the lanes.
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512i round_to_bf16_bits(__m512 value) {
  const __m512i s = _mm512_castps_si512(value);
  const __m512i odd = _mm512_maskz_and_epi32(0xFFFF, _mm512_maskz_srli_epi32(0xFFFF, s, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_maskz_srli_epi32(
      0xFFFF, _mm512_maskz_add_epi32(0xFFFF, _mm512_maskz_add_epi32(0xFFFF, s, _mm512_set1_epi32(0x7fff)), odd), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_maskz_and_epi32(0xFFFF, s, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_or_epi32(r, nan, _mm512_maskz_srli_epi32(0xFFFF, s, 16), _mm512_set1_epi32(0x40));
}

// The epilogue without masks (bias and relu, either or both) on CPUs with AVX512_BF16, 32
// channels to a step: each sum rounded by vcvtne2ps2bf16 (to nearest, ties to even, a NaN made
// quiet: bfloat16_t's rounding of every sum but a subnormal one, which it reads as zero - a step
// with one rounds by the integer rule instead), then relu on the bfloat16 bits (x < 0 as a
// number: the sign bit set, not -0, not NaN), a NaN's quiet bit set as the final rounding of the
// ops apart sets it. The bits of bf16_conv_epilogue_pixels; about half the instructions of
// bf16_conv_epilogue_pixels_avx512, whose rounding takes nine per 16 values.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void bf16_conv_bias_relu_pixels_avx512bf16(
    const EpilogueParts& e, int64_t c, const float* bias, bfloat16_t* y, int64_t p0, int64_t p1) {
  // The maskz forms throughout: the plain ones trip gcc 12's -Wmaybe-uninitialized.
  const __m512i exponent = _mm512_set1_epi32(0x7f800000), mantissa = _mm512_set1_epi32(0x007fffff);
  const __m512i negative_zero = _mm512_set1_epi16(static_cast<short>(0x8000)), magnitude = _mm512_set1_epi16(0x7fff),
                inf = _mm512_set1_epi16(0x7f80), quiet = _mm512_set1_epi16(0x40);
  const bool add_bias = e.bias, relu = e.relu;
  for (int64_t p = p0; p < p1; ++p)
    for (int64_t j = 0; j < c; j += 32) {
      const __mmask32 lanes = c - j >= 32 ? ~__mmask32(0) : static_cast<__mmask32>((1u << (c - j)) - 1);
      bfloat16_t* const at = y + p * c + j;
      __m512i v = _mm512_maskz_loadu_epi16(lanes, at);
      if (add_bias) {
        __m512 sum[2];
        __mmask16 subnormal = 0;
        for (int h = 0; h < 2; ++h) {
          const __mmask16 part = static_cast<__mmask16>(lanes >> (16 * h));
          const __m256i bits = h == 0 ? _mm512_maskz_extracti64x4_epi64(0xFF, v, 0) : _mm512_maskz_extracti64x4_epi64(0xFF, v, 1);
          const __m512 product =
              _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, _mm512_maskz_cvtepu16_epi32(0xFFFF, bits), 16));
          __m512 s = _mm512_maskz_add_ps(0xFFFF, product, _mm512_maskz_loadu_ps(part, bias + j + 16 * h));
          // NaN + NaN: the product's NaN, as in bf16_conv_epilogue_pixels_avx512.
          sum[h] = _mm512_mask_mov_ps(s, _mm512_cmp_ps_mask(product, product, _CMP_UNORD_Q), product);
          const __m512i si = _mm512_castps_si512(sum[h]);
          subnormal |= _mm512_testn_epi32_mask(si, exponent) & _mm512_test_epi32_mask(si, mantissa) & part;
        }
        if (subnormal == 0) {
          v = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(sum[1], sum[0]));
        } else {
          const __m256i lo = _mm512_maskz_cvtepi32_epi16(0xFFFF, round_to_bf16_bits(sum[0])),
                        hi = _mm512_maskz_cvtepi32_epi16(0xFFFF, round_to_bf16_bits(sum[1]));
          v = _mm512_maskz_inserti64x4(0xFF, _mm512_maskz_inserti64x4(0xFF, _mm512_setzero_si512(), lo, 0), hi, 1);
        }
      }
      const __mmask32 nan = _mm512_cmpgt_epu16_mask(_mm512_and_si512(v, magnitude), inf);
      if (relu) {
        const __mmask32 negative = _mm512_movepi16_mask(v) & _mm512_cmpneq_epi16_mask(v, negative_zero) & ~nan;
        v = _mm512_maskz_mov_epi16(~negative, v);
      }
      v = _mm512_or_si512(v, _mm512_maskz_mov_epi16(nan, quiet));
      _mm512_mask_storeu_epi16(at, lanes, v);
    }
}

// The epilogue of a bfloat16 convolution's result y, applied image group by image group.
class Bf16ConvEpilogue {
 public:
  Bf16ConvEpilogue(const EpilogueParts& parts, const ConvGeom& g, const std::vector<Tensor>& in, bool* mask_out,
                   bfloat16_t* y)
      : parts_(parts), oc_(g.oc), per_image_(g.oh * g.ow), mask_out_(mask_out),
        mask_in_(parts.mask_in ? data_of<bool>(in[parts.mask_input()]) : nullptr), y_(y) {
    if (!parts.bias) return;
    bias_.resize(static_cast<std::size_t>(g.oc));
    bf16_to_f32(data_of<bfloat16_t>(in[EpilogueParts::kBiasInput]), bias_.data(), g.oc);
  }
  // Images [n0, n0 + n), on the calling thread.
  void images(int64_t n0, int64_t n) const {
    static const bool avx512 = simd::cpu_has_avx512_bw_vl(), avx512_bf16 = avx512 && cpu_has_avx512_bf16();
    if (avx512_bf16 && !mask_out_ && !mask_in_)
      return bf16_conv_bias_relu_pixels_avx512bf16(parts_, oc_, bias_.data(), y_, n0 * per_image_,
                                                   (n0 + n) * per_image_);
    if (avx512)
      return bf16_conv_epilogue_pixels_avx512(parts_, oc_, bias_.data(), mask_out_, mask_in_, y_, n0 * per_image_,
                                              (n0 + n) * per_image_);
    // Blocks of about 4K elements: the conversions stay serial, the block in L1.
    const int64_t block = std::max<int64_t>(1, 4096 / oc_);
    std::vector<float> wide(static_cast<std::size_t>(std::min(block, n * per_image_) * oc_));
    for (int64_t p = n0 * per_image_, end = (n0 + n) * per_image_; p < end; p += block)
      bf16_conv_epilogue_pixels(parts_, oc_, bias_.data(), mask_out_, mask_in_, y_, wide.data(), p,
                                std::min(p + block, end));
  }

 private:
  const EpilogueParts& parts_;
  int64_t oc_, per_image_;
  bool* mask_out_;
  const bool* mask_in_;
  bfloat16_t* y_;
  std::vector<float> bias_;
};

// conv2d_epilogue on bfloat16 operands: oneDNN's bfloat16 convolution writes the rounded product
// part by part (groups of images), and the thread that wrote a part applies the epilogue to it in
// blocks of pixels while it is in that core's cache, where the ops apart read and wrote the whole
// tensor once per op. Without the native convolution (geometry, CPU) the ops run one by one.
void kernel_conv2d_epilogue_bf16(const Conv2DEpilogueAttrs& e, const EpilogueParts& parts, const ConvGeom& g,
                                 const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  bfloat16_t* const y = data_of<bfloat16_t>(out[0]);
  const Bf16ConvEpilogue epilogue(parts, g, in, parts.mask_out ? data_of<bool>(out[1]) : nullptr, y);
  const onednn_bf16::PartFinish finish = [&](int64_t n0, int64_t n) { epilogue.images(n0, n); };
  if (parts.column_sums || in[0].impl()->shape.num_elements() == 0 ||
      !onednn_bf16::conv_forward(g, data_of<bfloat16_t>(in[0]), data_of<bfloat16_t>(in[1]), y, finish))
    run_steps_eagerly([&](auto op) { return run_epilogue_steps(OpId::Conv2D, product_attrs(e), parts, in, op); }, out);
}

// conv2d_epilogue with pool_winners (a bfloat16 training layer's relu(conv2d(x, f) + b) read by
// its max_pool2d and by that pool's masked gradient): outputs (pooled, activation, winners). The
// thread that finished a part of oneDNN's convolution pools its images while they are in cache
// and notes each window's winner, so neither the pool nor its gradient reads the activation
// again (the gradient reads the winners, an eighth of its bytes for 2 x 2 windows). The
// activation is still written: the gradient takes its shape. The pool's bits are
// max_pool_forward_bf16's, the activation's the epilogue's.
void kernel_conv2d_epilogue_pool_winners(const Conv2DEpilogueAttrs& e, const EpilogueParts& parts,
                                         const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const GroupedGeom gg = conv_geometry(in[0], in[1], product_attrs(e).get<Conv2DAttrs>());
  const ConvGeom& g = gg.g;
  const TensorShape product({g.n, g.oh, g.ow, g.oc});
  const PoolGeom pool = epilogue_pool_geometry(e, g);
  TG_CHECK(out.size() == 3 && pool_winners_fit(pool), "conv2d_epilogue's pool winners unchecked");
  if (product.num_elements() == 0 || out[0].impl()->shape.num_elements() == 0) return;
  std::vector<Tensor> activation{out[1]};
  bfloat16_t* const y = data_of<bfloat16_t>(out[1]);
  bfloat16_t* const pooled = data_of<bfloat16_t>(out[0]);
  uint8_t* const winners = data_of<uint8_t>(out[2]);
  if (gg.groups == 1 && epilogue_fits(parts, in, activation, product)) {
    const Bf16ConvEpilogue epilogue(parts, g, in, nullptr, y);
    const onednn_bf16::PartFinish finish = [&](int64_t n0, int64_t n) {
      epilogue.images(n0, n);
      max_pool_winners_bf16(pool, y, pooled, winners, n0, n0 + n);
    };
    if (onednn_bf16::conv_forward(g, data_of<bfloat16_t>(in[0]), data_of<bfloat16_t>(in[1]), y, finish)) return;
  }
  run_steps_eagerly([&](auto step) { return run_epilogue_steps(OpId::Conv2D, product_attrs(e), parts, in, step); },
                    activation);
  max_pool_winners_bf16(pool, y, pooled, winners, 0, g.n);
}

void kernel_conv2d_epilogue(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const Conv2DEpilogueAttrs& e = attrs.get<Conv2DEpilogueAttrs>();
  const EpilogueParts parts = EpilogueParts::of(e);
  if (e.max_pool && e.pool_winners) return kernel_conv2d_epilogue_pool_winners(e, parts, in, out);
  if (e.max_pool) return kernel_conv2d_epilogue_max_pool(e, parts, in, out);
  const GroupedGeom gg = conv_geometry(in[0], in[1], product_attrs(e).get<Conv2DAttrs>());
  const ConvGeom& g = gg.g;
  const TensorShape product({g.n, g.oh, g.ow, g.oc});
  // A grouped convolution's kernels take no epilogue, but for a float32 depthwise one's: it
  // runs after them, as the separate ops.
  const bool depthwise = gg.depthwise() && !is_bf16(in);
  if ((gg.groups != 1 && !depthwise) || !epilogue_fits(parts, in, out, product))
    return run_steps_eagerly([&](auto op) { return run_epilogue_steps(OpId::Conv2D, product_attrs(e), parts, in, op); }, out);
  if (product.num_elements() == 0) return;
  if (is_bf16(in)) return kernel_conv2d_epilogue_bf16(e, parts, g, in, out);
  const GemmEpilogue epilogue = gemm_epilogue_of(parts, in, out, g.oc);
  const float* x = data_of<float>(in[0]);
  const float* f = data_of<float>(in[1]);
  if (depthwise) return depthwise_forward<float>(g, x, f, data_of<float>(out[0]), &epilogue);
  conv_forward<float>(g, x, f, data_of<float>(out[0]), &epilogue);
}

void kernel_conv2d_backprop_input(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  if (is_bf16(in))
    return run_bf16(&kernel_conv2d_backprop_input, conv_geometry(in[0], in[1], attrs.get<Conv2DAttrs>()), in, attrs,
                    out, [&](const ConvGeom& g) {
                      return onednn_bf16::conv_backprop_input(g, data_of<bfloat16_t>(in[1]), data_of<bfloat16_t>(in[2]),
                                                              data_of<bfloat16_t>(out[0]));
                    });
  run_conv_pass(in, attrs, out, [&](const GroupedGeom& g, auto tag) {
    using T = decltype(tag);
    grouped_backprop_input<T>(g, data_of<T>(in[1]), data_of<T>(in[2]), data_of<T>(out[0]));
  });
}

void kernel_conv2d_backprop_filter(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  if (is_bf16(in))
    return run_bf16(&kernel_conv2d_backprop_filter, conv_geometry(in[0], in[1], attrs.get<Conv2DAttrs>()), in, attrs,
                    out, [&](const ConvGeom& g) {
                      return onednn_bf16::conv_backprop_filter(g, data_of<bfloat16_t>(in[0]), data_of<bfloat16_t>(in[2]),
                                                               data_of<bfloat16_t>(out[0]));
                    });
  run_conv_pass(in, attrs, out, [&](const GroupedGeom& g, auto tag) {
    using T = decltype(tag);
    grouped_backprop_filter<T>(g, data_of<T>(in[0]), data_of<T>(in[2]), data_of<T>(out[0]));
  });
}

// ---- gradient rules ----
// Each op is linear in the tensors it reads the values of, so every rule is another op of the
// family, the adjoint:
//   conv2d(x, f)                  dx = backprop_input(x, f, dy)   df = backprop_filter(x, f, dy)
//   backprop_input(x~, f, d) = G  df = backprop_filter(G, f, d)   dd = conv2d(G, f)
//   backprop_filter(x, f~, d) = G dx = backprop_input(x, G, d)    dd = conv2d(x, G)
//   conv2d_transpose(d, f) = G    dd = conv2d(dG, f)              df = backprop_filter(dG, f, d)
//   depthwise_conv2d(x, f)        conv2d's, over f viewed as the grouped (kh, kw, 1, c * m)
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
std::vector<Tensor> grad_conv2d_transpose(const GradInputs& g) {
  const Conv2DTransposeAttrs& t = g.attrs.get<Conv2DTransposeAttrs>();
  const Conv2DAttrs a{t.strides, t.dilations, t.padding};
  const Tensor& G = g.grads[0];
  return {g.wants(0) ? conv2d_with(G, g.inputs[1], a) : Tensor(),
          g.wants(1) ? conv2d_backprop_filter(G, g.inputs[1], g.inputs[0], a) : Tensor()};
}

// A depthwise filter (kh, kw, c, m) as the grouped conv2d filter (kh, kw, 1, c * m): the same
// elements in the same order.
Tensor grouped_view(const Tensor& filter) {
  const TensorShape s = filter.shape().none_aware();
  if (s.has_rank() && s.rank() == 4 && s.dims()[0] != None && s.dims()[1] != None)
    return reshape(filter, {s.dims()[0], s.dims()[1], 1, -1});
  return reshape(filter, concat({slice(shape(filter), {0}, {2}), constant({1, -1})}, 0));
}
std::vector<Tensor> grad_depthwise_conv2d(const GradInputs& g) {
  const Tensor& dy = g.grads[0];
  const Tensor f = grouped_view(g.inputs[1]);
  return {g.wants(0) ? conv2d_backprop_input(g.inputs[0], f, dy, conv_attrs(g)) : Tensor(),
          g.wants(1) ? reshape_like(conv2d_backprop_filter(g.inputs[0], f, dy, conv_attrs(g)), g.inputs[1]) : Tensor()};
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
Tensor conv2d_transpose_grouped(const Tensor& input, const Tensor& filter, std::vector<int64_t> output_shape,
                                const Conv2DAttrs& attrs) {
  return apply_op1(OpId::Conv2DTranspose, {input, filter},
                   Conv2DTransposeAttrs{std::move(output_shape), attrs.strides, attrs.dilations, attrs.padding});
}

void register_conv_ops(OpDef* t) {
  set_op(t, OpId::Conv2D, &infer_conv2d, &kernel_conv2d);
  set_op(t, OpId::Conv2DEpilogue, &infer_conv2d_epilogue, &kernel_conv2d_epilogue);
  set_op(t, OpId::Conv2DBackpropInput, &infer_conv2d_backprop_input, &kernel_conv2d_backprop_input);
  set_op(t, OpId::Conv2DBackpropFilter, &infer_conv2d_backprop_filter, &kernel_conv2d_backprop_filter);
  set_op(t, OpId::Conv2DTranspose, &infer_conv2d_transpose, &kernel_conv2d_transpose);
  set_op(t, OpId::DepthwiseConv2D, &infer_depthwise_conv2d, &kernel_depthwise_conv2d);
  set_grad(t, OpId::Conv2D, &grad_conv2d);
  set_grad(t, OpId::Conv2DBackpropInput, &grad_conv2d_backprop_input);
  set_grad(t, OpId::Conv2DBackpropFilter, &grad_conv2d_backprop_filter);
  set_grad(t, OpId::Conv2DTranspose, &grad_conv2d_transpose);
  set_grad(t, OpId::DepthwiseConv2D, &grad_depthwise_conv2d);
}

}  // namespace detail

namespace {
detail::Conv2DAttrs user_conv_attrs(const char* op, const std::vector<int64_t>& strides, Padding padding,
                                    const std::vector<int64_t>& dilations) {
  return detail::Conv2DAttrs{detail::spatial_pair(op, "strides", strides),
                             detail::spatial_pair(op, "dilations", dilations), static_cast<int64_t>(padding)};
}
}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& filter, std::vector<int64_t> strides, Padding padding,
              std::vector<int64_t> dilations) {
  return detail::apply_op1(detail::OpId::Conv2D, {input, filter}, user_conv_attrs("conv2d", strides, padding, dilations));
}

Tensor depthwise_conv2d(const Tensor& input, const Tensor& filter, std::vector<int64_t> strides, Padding padding,
                        std::vector<int64_t> dilations) {
  return detail::apply_op1(detail::OpId::DepthwiseConv2D, {input, filter},
                           user_conv_attrs("depthwise_conv2d", strides, padding, dilations));
}

Tensor conv2d_transpose(const Tensor& input, const Tensor& filter, std::vector<int64_t> output_shape,
                        std::vector<int64_t> strides, Padding padding, std::vector<int64_t> dilations) {
  const char* op = "conv2d_transpose";
  const detail::Conv2DAttrs a = user_conv_attrs(op, strides, padding, dilations);
  // TF's conv2d_transpose has no groups: the output's channels are the filter's dim 2.
  const TensorShape fs = filter.defined() ? filter.shape().none_aware() : TensorShape::unknown_rank();
  if (output_shape.size() == 4 && fs.has_rank() && fs.rank() == 4 && fs.dims()[2] != None &&
      output_shape[3] != fs.dims()[2])
    detail::op_error<InvalidArgumentError>(op, "output_shape ", detail::format_list(output_shape), " has ",
                                           output_shape[3], " channels but the filter ", fs.to_string(),
                                           " makes ", fs.dims()[2],
                                           " (dim 2 is out_channels); they must be equal");
  if (output_shape.size() == 4 && output_shape[3] >= 0 && (!fs.has_rank() || fs.dims()[2] == None)) {
    // Tracing does not know the filter's out_channels: seen as (kh, kw, output channels, in), a
    // filter of other out_channels fails at run time instead of running as a grouped transpose.
    const Tensor dims = shape(filter);
    const Tensor want = concat({slice(dims, {0}, {2}), constant({static_cast<int32_t>(output_shape[3])}),
                                slice(dims, {3}, {1})}, 0);
    return detail::conv2d_transpose_grouped(input, reshape(filter, want), std::move(output_shape), a);
  }
  return detail::conv2d_transpose_grouped(input, filter, std::move(output_shape), a);
}

}  // namespace tg
