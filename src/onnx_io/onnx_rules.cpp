// The op table of the ONNX exporter (opset 17): one row per registry op it writes, with the ONNX
// ops it becomes and how the attributes map. tracegraph's layout is NHWC (filters HWIO) and
// ONNX's Conv and pooling are NCHW (filters OIHW): those rows transpose in and out, which ONNX
// Runtime's layout optimiser removes between consecutive layers.
#include "onnx_io/onnx_rules.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "core/check.h"
#include "ops/control_flow_attrs.h"
#include "ops/op_attrs.h"
#include "ops/window.h"
#include "tracegraph/ops.h"

namespace tg::detail::onnx_export {

int64_t Emitter::rank(int i) {
  const TensorShape& s = in_type(i).shape;
  if (!s.has_rank())
    refuse(str_cat("its input ", i, " has an unknown rank, which the ONNX op needs; trace the function with a "
                   "TensorSpec of known rank"));
  return s.rank();
}

void set_attr(onnx::NodeProto& n, const std::string& name, int64_t v) {
  onnx::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
void set_attr(onnx::NodeProto& n, const std::string& name, float v) {
  onnx::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
void set_attr(onnx::NodeProto& n, const std::string& name, const std::string& v) {
  onnx::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}
void set_attr(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  onnx::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

int onnx_dtype(DType d) {
  switch (d) {
    case DType::Float32: return onnx::TensorProto::FLOAT;
    case DType::Float64: return onnx::TensorProto::DOUBLE;
    case DType::Int32: return onnx::TensorProto::INT32;
    case DType::Int64: return onnx::TensorProto::INT64;
    case DType::Bool: return onnx::TensorProto::BOOL;
    case DType::UInt8: return onnx::TensorProto::UINT8;
    case DType::BFloat16: return onnx::TensorProto::BFLOAT16;
    case DType::String: return 0;
  }
  return 0;
}

namespace {

constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();

void unary(Emitter& e, const char* op) { e.add(op, {e.in(0)}, {e.out(0)}); }
void binary(Emitter& e, const char* op) { e.add(op, {e.in(0), e.in(1)}, {e.out(0)}); }
void float_only(Emitter& e, const char* what) {
  const DType d = e.in_type(0).dtype;
  if (d != DType::Float32 && d != DType::Float64)
    e.refuse(str_cat(what, " is written for float32 and float64 only, and this node's input is ", to_string(d)));
}

// y = Cast(x) to dtype d, unless x already has it.
std::string cast_to(Emitter& e, const std::string& x, DType from, DType to) {
  if (from == to) return x;
  const std::string y = e.temp("cast");
  set_attr(e.add("Cast", {x}, {y}), "to", static_cast<int64_t>(onnx_dtype(to)));
  return y;
}
std::string cast_to_int64(Emitter& e, int i) { return cast_to(e, e.in(i), e.in_type(i).dtype, DType::Int64); }
// Writes `x` (of ONNX type int64) to the node's output 0, cast to the output's dtype.
void int64_to_out(Emitter& e, const std::string& x) {
  if (e.out_type(0).dtype == DType::Int64) {
    e.add("Identity", {x}, {e.out(0)});
  } else {
    set_attr(e.add("Cast", {x}, {e.out(0)}), "to", static_cast<int64_t>(onnx_dtype(e.out_type(0).dtype)));
  }
}
std::string shape_of(Emitter& e, int i) {
  const std::string s = e.temp("shape");
  e.add("Shape", {e.in(i)}, {s});
  return s;
}

// NHWC <-> NCHW around ONNX's Conv and pooling, and HWIO -> OIHW for filters.
std::string transpose(Emitter& e, const std::string& x, const std::vector<int64_t>& perm, const char* hint) {
  const std::string y = e.temp(hint);
  set_attr(e.add("Transpose", {x}, {y}), "perm", perm);
  return y;
}
const char* auto_pad(int64_t padding) { return padding == static_cast<int64_t>(Padding::Same) ? "SAME_UPPER" : "VALID"; }

// A Conv over the NHWC input and an OIHW weight already written, with `group`.
void emit_conv_nchw(Emitter& e, const Conv2DAttrs& a, const std::string& w, int64_t group) {
  const std::string x = transpose(e, e.in(0), {0, 3, 1, 2}, "nchw");
  const std::string y = e.temp("conv_nchw");
  onnx::NodeProto& n = e.add("Conv", {x, w}, {y});
  set_attr(n, "strides", spatial_pair("conv2d", "strides", a.strides));
  set_attr(n, "dilations", spatial_pair("conv2d", "dilations", a.dilations));
  set_attr(n, "auto_pad", std::string(auto_pad(a.padding)));
  if (group != 1) set_attr(n, "group", group);
  set_attr(e.add("Transpose", {y}, {e.out(0)}), "perm", std::vector<int64_t>{0, 2, 3, 1});
}

// The static dims of input i (refused where one is None: the ONNX attribute needs it).
std::vector<int64_t> static_dims(Emitter& e, int i, const char* what) {
  const TensorShape& s = e.in_type(i).shape;
  if (!s.has_rank() || !s.is_fully_defined())
    e.refuse(str_cat("its ", what, " has shape ", s.to_string(), "; the ONNX node needs it fully known"));
  return s.dims();
}

// conv2d's groups (input channels / the filter's in_channels) go to Conv's `group`; an input of
// unknown channels is written as one group, which ONNX checks against the weight when it runs.
void emit_conv2d(Emitter& e) {
  const auto& a = e.attrs<Conv2DAttrs>();
  const TensorShape& xs = e.in_type(0).shape;
  const TensorShape& fs = e.in_type(1).shape;
  int64_t group = 1;
  if (xs.has_rank() && fs.has_rank() && xs.dims()[3] != None && fs.dims()[2] != None && fs.dims()[2] > 0)
    group = xs.dims()[3] / fs.dims()[2];
  emit_conv_nchw(e, a, transpose(e, e.in(1), {3, 2, 0, 1}, "oihw"), group);
}

// depthwise_conv2d: Conv with one group per input channel; the filter (kh, kw, c, m) becomes the
// weight (c * m, 1, kh, kw), output channel c * m + q as in both.
void emit_depthwise_conv2d(Emitter& e) {
  const std::vector<int64_t> f = static_dims(e, 1, "filter");
  const std::string cm = transpose(e, e.in(1), {2, 3, 0, 1}, "cmhw");
  const std::string w = e.temp("depthwise_oihw");
  e.add("Reshape", {cm, e.int64s({f[2] * f[3], 1, f[0], f[1]})}, {w});
  emit_conv_nchw(e, e.attrs<Conv2DAttrs>(), w, f[2]);
}

// conv2d_transpose: ConvTranspose with explicit pads - the forward convolution's padding before
// on each side, and what the output's size leaves at the end split into pads and output_padding.
void emit_conv2d_transpose(Emitter& e) {
  const auto& a = e.attrs<Conv2DTransposeAttrs>();
  const std::vector<int64_t> f = static_dims(e, 1, "filter");
  const TensorShape& xs = e.in_type(0).shape;
  if (!xs.has_rank() || xs.dims()[1] == None || xs.dims()[2] == None)
    e.refuse(str_cat("its input has shape ", xs.to_string(), "; ConvTranspose's pads need its height and width"));
  const std::vector<int64_t> st = spatial_pair("conv2d_transpose", "strides", a.strides);
  const std::vector<int64_t> dl = spatial_pair("conv2d_transpose", "dilations", a.dilations);
  std::vector<int64_t> begin(2), end(2), extra(2);
  for (std::size_t i = 0; i < 2; ++i) {
    const int64_t window = (f[i] - 1) * dl[i] + 1, out = a.output_shape[i + 1], in = xs.dims()[i + 1];
    // The forward convolution over `out`: SAME pads (out' - 1) * stride + window - out in all,
    // the smaller half before.
    const int64_t conv_out = a.padding == 1 ? (out + st[i] - 1) / st[i] : (out - window) / st[i] + 1;
    begin[i] = a.padding == 1 ? std::max<int64_t>(0, (conv_out - 1) * st[i] + window - out) / 2 : 0;
    const int64_t full = (in - 1) * st[i] + window - begin[i];  // output size with no end pads
    end[i] = std::max<int64_t>(0, full - out);
    extra[i] = out - (full - end[i]);
  }
  const std::string x = transpose(e, e.in(0), {0, 3, 1, 2}, "nchw");
  const std::string w = transpose(e, e.in(1), {3, 2, 0, 1}, "iohw");
  const std::string y = e.temp("conv_transpose_nchw");
  onnx::NodeProto& n = e.add("ConvTranspose", {x, w}, {y});
  set_attr(n, "strides", st);
  set_attr(n, "dilations", dl);
  set_attr(n, "pads", std::vector<int64_t>{begin[0], begin[1], end[0], end[1]});
  if (extra[0] != 0 || extra[1] != 0) set_attr(n, "output_padding", extra);
  if (f[2] != a.output_shape[3]) set_attr(n, "group", a.output_shape[3] / f[2]);
  set_attr(e.add("Transpose", {y}, {e.out(0)}), "perm", std::vector<int64_t>{0, 2, 3, 1});
}

void emit_pool(Emitter& e, const char* op) {
  const auto& a = e.attrs<Pool2DAttrs>();
  const std::string x = transpose(e, e.in(0), {0, 3, 1, 2}, "nchw");
  const std::string y = e.temp("pool_nchw");
  onnx::NodeProto& n = e.add(op, {x}, {y});
  set_attr(n, "kernel_shape", spatial_pair(op, "ksize", a.ksize));
  set_attr(n, "strides", spatial_pair(op, "strides", a.strides));
  set_attr(n, "auto_pad", std::string(auto_pad(a.padding)));
  // TF's SAME average counts only the elements inside the input.
  if (std::string_view(op) == "AveragePool") set_attr(n, "count_include_pad", int64_t{0});
  set_attr(e.add("Transpose", {y}, {e.out(0)}), "perm", std::vector<int64_t>{0, 2, 3, 1});
}

void emit_matmul(Emitter& e) {
  const auto& a = e.attrs<MatMulAttrs>();
  std::string x = e.in(0), y = e.in(1);
  const auto swap_last = [&](const std::string& v, int i) {
    const int64_t r = e.rank(i);
    if (r < 2) e.refuse(str_cat("transposing its input ", i, " of rank ", r, " needs rank 2 or more"));
    std::vector<int64_t> perm(static_cast<std::size_t>(r));
    for (int64_t k = 0; k < r; ++k) perm[static_cast<std::size_t>(k)] = k;
    std::swap(perm[static_cast<std::size_t>(r - 1)], perm[static_cast<std::size_t>(r - 2)]);
    return transpose(e, v, perm, "transposed");
  };
  if (a.transpose_a) x = swap_last(x, 0);
  if (a.transpose_b) y = swap_last(y, 1);
  e.add("MatMul", {x, y}, {e.out(0)});
}

// Opset 17: ReduceSum takes its axes as an input, the other reductions as an attribute.
void emit_reduce(Emitter& e, const char* op, const std::string& x, const std::string& out) {
  const auto& a = e.attrs<ReduceAttrs>();
  if (std::string_view(op) == "ReduceSum") {
    std::vector<std::string> ins{x};
    if (!a.axes.empty()) ins.push_back(e.int64s(a.axes));
    set_attr(e.add(op, ins, {out}), "keepdims", int64_t{a.keepdims});
    return;
  }
  onnx::NodeProto& n = e.add(op, {x}, {out});
  if (!a.axes.empty()) set_attr(n, "axes", a.axes);
  set_attr(n, "keepdims", int64_t{a.keepdims});
}
void reduce(Emitter& e, const char* op) {
  if (e.in_type(0).dtype == DType::Bool) e.refuse(str_cat(op, " has no bool form"));
  emit_reduce(e, op, e.in(0), e.out(0));
}
// any / all: bool has no ONNX reduction; as uint8, max is any and min is all.
void reduce_bool(Emitter& e, const char* op) {
  const std::string x = cast_to(e, e.in(0), DType::Bool, DType::UInt8);
  const std::string r = e.temp("reduced");
  emit_reduce(e, op, x, r);
  set_attr(e.add("Cast", {r}, {e.out(0)}), "to", static_cast<int64_t>(onnx::TensorProto::BOOL));
}

void arg_reduce(Emitter& e, const char* op) {
  const auto& a = e.attrs<ArgReduceAttrs>();
  const std::string r = e.temp("arg");
  onnx::NodeProto& n = e.add(op, {e.in(0)}, {r});
  set_attr(n, "axis", a.axis);
  set_attr(n, "keepdims", int64_t{0});
  set_attr(n, "select_last_index", int64_t{0});  // TF picks the first of equal values
  int64_to_out(e, r);
}

void emit_cross_entropy(Emitter& e) {
  // outputs: the rows' losses -log_softmax(logits)[label], and log_softmax(logits)
  set_attr(e.add("LogSoftmax", {e.in(0)}, {e.out(1)}), "axis", int64_t{-1});
  const std::string labels = e.temp("labels");
  e.add("Unsqueeze", {cast_to_int64(e, 1), e.int64s({1})}, {labels});
  const std::string picked = e.temp("picked");
  set_attr(e.add("GatherElements", {e.out(1), labels}, {picked}), "axis", int64_t{1});
  const std::string row = e.temp("picked_row");
  e.add("Squeeze", {picked, e.int64s({1})}, {row});
  e.add("Neg", {row}, {e.out(0)});
}

void emit_cross_entropy_grad(Emitter& e) {
  // inputs: the log_softmax rows, the labels, the losses' gradient g: (exp(rows) - one_hot) * g
  const DType d = e.in_type(0).dtype;
  const std::string soft = e.temp("softmax"), depth = e.temp("classes"), hot = e.temp("one_hot"), diff = e.temp("diff"),
                    g = e.temp("g_column");
  e.add("Exp", {e.in(0)}, {soft});
  set_attr(e.add("Gather", {shape_of(e, 0), e.scalar(DType::Int64, 1.0)}, {depth}), "axis", int64_t{0});
  set_attr(e.add("OneHot", {cast_to_int64(e, 1), depth, e.values(d, {0.0, 1.0})}, {hot}), "axis", int64_t{-1});
  e.add("Sub", {soft, hot}, {diff});
  e.add("Unsqueeze", {e.in(2), e.int64s({1})}, {g});
  e.add("Mul", {diff, g}, {e.out(0)});
}

void emit_gelu(Emitter& e) {
  float_only(e, "gelu");
  const DType d = e.in_type(0).dtype;
  const std::string x = e.in(0);
  const std::string s = e.temp("scaled"), erf = e.temp("erf"), one_plus = e.temp("one_plus"), half_x = e.temp("half_x");
  e.add("Mul", {x, e.scalar(d, 1.0 / std::numbers::sqrt2)}, {s});
  e.add("Erf", {s}, {erf});
  e.add("Add", {erf, e.scalar(d, 1.0)}, {one_plus});
  e.add("Mul", {x, e.scalar(d, 0.5)}, {half_x});
  e.add("Mul", {half_x, one_plus}, {e.out(0)});
}

// gelu's derivative as TF's gradient writes it: (1 + erf(x / sqrt(2))) / 2 + x e^(-x^2 / 2) / sqrt(2 pi)
void emit_gelu_grad(Emitter& e) {
  float_only(e, "gelu_grad");
  const DType d = e.in_type(0).dtype;
  const std::string x = e.in(0);
  const std::string s = e.temp("scaled"), erf = e.temp("erf"), one_plus = e.temp("one_plus"), cdf = e.temp("cdf"),
                    x2 = e.temp("x2"), arg = e.temp("arg"), ex = e.temp("exp"), pdf = e.temp("pdf"), x_pdf = e.temp("x_pdf");
  e.add("Mul", {x, e.scalar(d, 1.0 / std::numbers::sqrt2)}, {s});
  e.add("Erf", {s}, {erf});
  e.add("Add", {erf, e.scalar(d, 1.0)}, {one_plus});
  e.add("Mul", {one_plus, e.scalar(d, 0.5)}, {cdf});
  e.add("Mul", {x, x}, {x2});
  e.add("Mul", {x2, e.scalar(d, -0.5)}, {arg});
  e.add("Exp", {arg}, {ex});
  e.add("Mul", {ex, e.scalar(d, std::numbers::inv_sqrtpi / std::numbers::sqrt2)}, {pdf});
  e.add("Mul", {x, pdf}, {x_pdf});
  e.add("Add", {cdf, x_pdf}, {e.out(0)});
}

void emit_gelu_approximate(Emitter& e) {
  float_only(e, "gelu_approximate");
  const DType d = e.in_type(0).dtype;
  const std::string x = e.in(0);
  const std::string x2 = e.temp("x2"), x3 = e.temp("x3"), c3 = e.temp("c3"), inner = e.temp("inner"),
                    arg = e.temp("arg"), th = e.temp("tanh"), one_plus = e.temp("one_plus"), half_x = e.temp("half_x");
  e.add("Mul", {x, x}, {x2});
  e.add("Mul", {x2, x}, {x3});
  e.add("Mul", {x3, e.scalar(d, 0.044715)}, {c3});
  e.add("Add", {x, c3}, {inner});
  e.add("Mul", {inner, e.scalar(d, std::sqrt(2.0 / std::numbers::pi))}, {arg});
  e.add("Tanh", {arg}, {th});
  e.add("Add", {th, e.scalar(d, 1.0)}, {one_plus});
  e.add("Mul", {x, e.scalar(d, 0.5)}, {half_x});
  e.add("Mul", {half_x, one_plus}, {e.out(0)});
}

void emit_leaky_relu(Emitter& e) {
  // alpha is an operand here (TF's attribute): x > 0 ? x : alpha * x
  const DType d = e.in_type(0).dtype;
  const std::string pos = e.temp("positive"), scaled = e.temp("scaled");
  e.add("Greater", {e.in(0), e.scalar(d, 0.0)}, {pos});
  e.add("Mul", {e.in(1), e.in(0)}, {scaled});
  e.add("Where", {pos, e.in(0), scaled}, {e.out(0)});
}

void emit_floordiv(Emitter& e) {
  const DType d = e.in_type(0).dtype;
  if (d == DType::Float32 || d == DType::Float64) {
    const std::string q = e.temp("quotient");
    e.add("Div", {e.in(0), e.in(1)}, {q});
    e.add("Floor", {q}, {e.out(0)});
    return;
  }
  // integers: (a - floormod(a, b)) / b is exact (ONNX's integer Div truncates)
  const std::string m = e.temp("floormod"), diff = e.temp("diff");
  set_attr(e.add("Mod", {e.in(0), e.in(1)}, {m}), "fmod", int64_t{0});
  e.add("Sub", {e.in(0), m}, {diff});
  e.add("Div", {diff, e.in(1)}, {e.out(0)});
}

void emit_mod(Emitter& e) {
  const DType d = e.in_type(0).dtype;
  if (d != DType::Float32 && d != DType::Float64) {
    set_attr(e.add("Mod", {e.in(0), e.in(1)}, {e.out(0)}), "fmod", int64_t{0});  // the divisor's sign, as TF
    return;
  }
  // floats: C's fmod, moved by b where its sign differs from b's (TF's floormod)
  const std::string r = e.temp("fmod"), rz = e.temp("is_zero"), nz = e.temp("nonzero"), rn = e.temp("r_negative"),
                    bn = e.temp("b_negative"), differ = e.temp("signs_differ"), fix = e.temp("fix"), moved = e.temp("moved");
  set_attr(e.add("Mod", {e.in(0), e.in(1)}, {r}), "fmod", int64_t{1});
  e.add("Equal", {r, e.scalar(d, 0.0)}, {rz});
  e.add("Not", {rz}, {nz});
  e.add("Less", {r, e.scalar(d, 0.0)}, {rn});
  e.add("Less", {e.in(1), e.scalar(d, 0.0)}, {bn});
  e.add("Xor", {rn, bn}, {differ});
  e.add("And", {nz, differ}, {fix});
  e.add("Add", {r, e.in(1)}, {moved});
  e.add("Where", {fix, moved, r}, {e.out(0)});
}

void emit_like(Emitter& e, double value) {
  e.add("Expand", {e.scalar(e.out_type(0).dtype, value), shape_of(e, 0)}, {e.out(0)});
}

void emit_reshape(Emitter& e) {
  const auto& shape = e.attrs<ReshapeAttrs>().shape;
  const bool zero = std::find(shape.begin(), shape.end(), 0) != shape.end();
  onnx::NodeProto& n = e.add("Reshape", {e.in(0), e.int64s(shape)}, {e.out(0)});
  // A 0 is a zero-size dim in tracegraph, and "copy the input's dim" in ONNX unless allowzero.
  if (zero) {
    if (std::find(shape.begin(), shape.end(), -1) != shape.end())
      e.refuse("a shape with both a 0 and a -1 has no ONNX Reshape form");
    set_attr(n, "allowzero", int64_t{1});
  }
}

void emit_squeeze(Emitter& e) {
  const auto& axes = e.attrs<SqueezeAttrs>().axes;
  if (axes.empty()) e.add("Squeeze", {e.in(0)}, {e.out(0)});
  else e.add("Squeeze", {e.in(0), e.int64s(axes)}, {e.out(0)});
}

void emit_stack(Emitter& e) {
  const int64_t axis = e.attrs<AxisAttrs>().axis;
  std::vector<std::string> parts;
  for (int i = 0; i < e.num_inputs(); ++i) {
    parts.push_back(e.temp("stacked"));
    e.add("Unsqueeze", {e.in(i), e.int64s({axis})}, {parts.back()});
  }
  set_attr(e.add("Concat", parts, {e.out(0)}), "axis", axis);
}

void emit_slice(Emitter& e) {
  const auto& a = e.attrs<SliceAttrs>();
  std::vector<int64_t> ends, axes;
  for (std::size_t k = 0; k < a.begin.size(); ++k) {
    ends.push_back(a.size[k] < 0 ? kEnd : a.begin[k] + a.size[k]);
    axes.push_back(static_cast<int64_t>(k));
  }
  e.add("Slice", {e.in(0), e.int64s(a.begin), e.int64s(ends), e.int64s(axes)}, {e.out(0)});
}

void emit_index(Emitter& e) {
  // x[i]: a scalar index removes the first dim
  set_attr(e.add("Gather", {e.in(0), e.scalar(DType::Int64, static_cast<double>(e.attrs<IndexAttrs>().index))},
                 {e.out(0)}),
           "axis", int64_t{0});
}

void emit_one_hot(Emitter& e) {
  const auto& a = e.attrs<OneHotAttrs>();
  // TF gives a row of off values for any index outside [0, depth); ONNX counts negative ones
  // from the end, so those are moved out of range first.
  // (ONNX Runtime's OneHot kernels take int64 indices with an int64 depth.)
  const std::string in = cast_to_int64(e, 0), neg = e.temp("negative"), idx = e.temp("indices");
  e.add("Less", {in, e.scalar(DType::Int64, 0.0)}, {neg});
  e.add("Where", {neg, e.scalar(DType::Int64, static_cast<double>(a.depth)), in}, {idx});
  set_attr(e.add("OneHot", {idx, e.int64s({a.depth}), e.values(a.dtype, {a.off_value, a.on_value})}, {e.out(0)}),
           "axis", a.axis);
}

void emit_sum_to_like(Emitter& e) {
  // x summed down to like's shape (a broadcast's gradient). Leading dims are summed statically;
  // the rest where like has 1 and x not, decided from the types when both shapes are known and
  // at run time from the shapes otherwise.
  const int64_t rx = e.rank(0), rl = e.rank(1);
  if (rl > rx) e.refuse(str_cat("its target has rank ", rl, ", more than its input's ", rx));
  std::string x = e.in(0);
  if (rx > rl) {
    std::vector<int64_t> lead;
    for (int64_t k = 0; k < rx - rl; ++k) lead.push_back(k);
    const std::string y = e.temp("summed_lead");
    set_attr(e.add("ReduceSum", {x, e.int64s(lead)}, {y}), "keepdims", int64_t{0});
    x = y;
  }
  const TensorShape& sx = e.in_type(0).shape;
  const TensorShape& sl = e.in_type(1).shape;
  if (sx.is_fully_defined() && sl.is_fully_defined()) {
    std::vector<int64_t> axes;
    for (int64_t k = 0; k < rl; ++k)
      if (sl.dims()[static_cast<std::size_t>(k)] == 1 && sx.dims()[static_cast<std::size_t>(rx - rl + k)] != 1) axes.push_back(k);
    if (axes.empty()) {
      e.add("Identity", {x}, {e.out(0)});
    } else {
      set_attr(e.add("ReduceSum", {x, e.int64s(axes)}, {e.out(0)}), "keepdims", int64_t{1});
    }
    return;
  }
  const std::string xs = e.temp("x_shape"), ls = shape_of(e, 1), like_one = e.temp("like_one"), x_one = e.temp("x_one"),
                    x_not_one = e.temp("x_not_one"), summed = e.temp("summed_dims"), nz = e.temp("nonzero"),
                    axes = e.temp("axes"), r = e.temp("reduced");
  e.add("Shape", {x}, {xs});
  e.add("Equal", {ls, e.scalar(DType::Int64, 1.0)}, {like_one});
  e.add("Equal", {xs, e.scalar(DType::Int64, 1.0)}, {x_one});
  e.add("Not", {x_one}, {x_not_one});
  e.add("And", {like_one, x_not_one}, {summed});
  e.add("NonZero", {summed}, {nz});
  e.add("Squeeze", {nz, e.int64s({0})}, {axes});
  onnx::NodeProto& n = e.add("ReduceSum", {x, axes}, {r});
  set_attr(n, "keepdims", int64_t{1});
  set_attr(n, "noop_with_empty_axes", int64_t{1});
  e.add("Reshape", {r, ls}, {e.out(0)});
}

void emit_unreduce_like(Emitter& e) {
  // a reduction's result broadcast back to like's shape (its gradient)
  const auto& a = e.attrs<ReduceAttrs>();
  std::string x = e.in(0);
  if (!a.keepdims && !a.axes.empty()) {
    const std::string y = e.temp("unsqueezed");
    e.add("Unsqueeze", {x, e.int64s(a.axes)}, {y});
    x = y;
  }
  e.add("Expand", {x, shape_of(e, 1)}, {e.out(0)});
}

// A block's begin offsets (BlockAttrs: missing entries 0, negative ones counted from the end of
// the dim of `big`, input `big_input`) as an int64 vector of the block's rank.
std::string block_begin(Emitter& e, int big_input, int64_t rank) {
  std::vector<int64_t> b = e.attrs<BlockAttrs>().begin;
  if (static_cast<int64_t>(b.size()) > rank) e.refuse(str_cat("its begin has ", b.size(), " entries for rank ", rank));
  b.resize(static_cast<std::size_t>(rank), 0);
  if (std::none_of(b.begin(), b.end(), [](int64_t v) { return v < 0; })) return e.int64s(b);
  const std::string negative = e.temp("negative_begin"), moved = e.temp("begin_from_end"), out = e.temp("begin");
  e.add("Less", {e.int64s(b), e.scalar(DType::Int64, 0.0)}, {negative});
  e.add("Add", {e.int64s(b), shape_of(e, big_input)}, {moved});
  e.add("Where", {negative, moved, e.int64s(b)}, {out});
  return out;
}

// pad_like(g, like): zeros shaped like `like` with g at the block's offsets (slice_like's gradient).
void emit_pad_like(Emitter& e) {
  const int64_t rank = e.rank(0);
  const std::string b = block_begin(e, 1, rank), rest = e.temp("rest"), after = e.temp("after"), pads = e.temp("pads");
  e.add("Sub", {shape_of(e, 1), shape_of(e, 0)}, {rest});
  e.add("Sub", {rest, b}, {after});
  set_attr(e.add("Concat", {b, after}, {pads}), "axis", int64_t{0});
  e.add("Pad", {e.in(0), pads}, {e.out(0)});
}

// slice_like(x, like): the block of x shaped like `like` at the offsets.
void emit_slice_like(Emitter& e) {
  const int64_t rank = e.rank(0);
  const std::string b = block_begin(e, 0, rank), end = e.temp("end");
  e.add("Add", {b, shape_of(e, 1)}, {end});
  std::vector<int64_t> axes(static_cast<std::size_t>(rank));
  for (int64_t k = 0; k < rank; ++k) axes[static_cast<std::size_t>(k)] = k;
  e.add("Slice", {e.in(0), b, end, e.int64s(axes)}, {e.out(0)});
}

// scatter_add_like(g, indices, like): zeros shaped like `like` with g's slices added at the
// indices along `axis` (gather's gradient): ScatterND with reduction add over the axis moved to
// the front, and back.
void emit_scatter_add_like(Emitter& e) {
  const int64_t r = e.rank(2), ri = e.rank(1);
  int64_t axis = e.attrs<AxisAttrs>().axis;
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) e.refuse(str_cat("its axis ", e.attrs<AxisAttrs>().axis, " is out of range for rank ", r));
  const DType d = e.in_type(0).dtype;
  const std::string zeros = e.temp("zeros"), at = e.temp("at");
  e.add("Expand", {e.scalar(d, 0.0), shape_of(e, 2)}, {zeros});
  e.add("Unsqueeze", {cast_to_int64(e, 1), e.int64s({-1})}, {at});
  if (axis == 0) {
    set_attr(e.add("ScatterND", {zeros, at, e.in(0)}, {e.out(0)}), "reduction", std::string("add"));
    return;
  }
  std::vector<int64_t> to_front{axis}, back(static_cast<std::size_t>(r)), g_perm;
  for (int64_t k = 0; k < r; ++k)
    if (k != axis) to_front.push_back(k);
  for (int64_t k = 0; k < r; ++k) back[static_cast<std::size_t>(to_front[static_cast<std::size_t>(k)])] = k;
  for (int64_t k = 0; k < ri; ++k) g_perm.push_back(axis + k);
  for (int64_t k = 0; k < axis; ++k) g_perm.push_back(k);
  for (int64_t k = axis + ri; k < r - 1 + ri; ++k) g_perm.push_back(k);
  const std::string summed = e.temp("summed_front");
  set_attr(e.add("ScatterND", {transpose(e, zeros, to_front, "zeros_front"), at, transpose(e, e.in(0), g_perm, "g_front")},
                 {summed}),
           "reduction", std::string("add"));
  set_attr(e.add("Transpose", {summed}, {e.out(0)}), "perm", back);
}

void emit_pad(Emitter& e) {
  const auto& a = e.attrs<PadAttrs>();
  if (a.mode == 2) e.refuse("symmetric padding has no ONNX Pad mode (opset 17 has constant, reflect and edge)");
  const std::size_t r = a.paddings.size() / 2;
  std::vector<int64_t> pads(2 * r);
  for (std::size_t k = 0; k < r; ++k) {
    pads[k] = a.paddings[2 * k];
    pads[r + k] = a.paddings[2 * k + 1];
  }
  if (a.mode == 1) {
    set_attr(e.add("Pad", {e.in(0), e.int64s(pads)}, {e.out(0)}), "mode", std::string("reflect"));
  } else {
    set_attr(e.add("Pad", {e.in(0), e.int64s(pads), e.scalar(e.in_type(0).dtype, a.constant_value)}, {e.out(0)}),
             "mode", std::string("constant"));
  }
}

void emit_reverse(Emitter& e) {
  const auto& axes = e.attrs<ReverseAttrs>().axes;
  const std::vector<int64_t> starts(axes.size(), -1), ends(axes.size(), std::numeric_limits<int64_t>::min()),
      steps(axes.size(), -1);
  e.add("Slice", {e.in(0), e.int64s(starts), e.int64s(ends), e.int64s(axes), e.int64s(steps)}, {e.out(0)});
}

void emit_split(Emitter& e) {
  const auto& a = e.attrs<SplitAttrs>();
  std::vector<std::string> outs;
  for (std::size_t k = 0; k < e.node().outputs.size(); ++k) outs.push_back(e.out(static_cast<int>(k)));
  std::vector<std::string> ins{e.in(0)};
  if (a.num <= 0) {
    std::vector<int64_t> sizes = a.sizes;
    const auto rest = std::find(sizes.begin(), sizes.end(), -1);
    if (rest != sizes.end()) {
      // the -1 piece's size is known from the output type
      const TensorShape& s = e.out_type(static_cast<int>(rest - sizes.begin())).shape;
      const int64_t r = s.has_rank() ? s.rank() : 0;
      const int64_t axis = a.axis < 0 ? a.axis + r : a.axis;
      if (!s.has_rank() || s.dims()[static_cast<std::size_t>(axis)] < 0)
        e.refuse("a -1 size whose length is not known when traced has no ONNX Split form");
      *rest = s.dims()[static_cast<std::size_t>(axis)];
    }
    ins.push_back(e.int64s(sizes));
  }
  set_attr(e.add("Split", ins, outs), "axis", a.axis);
}

void emit_cumsum(Emitter& e) {
  const auto& a = e.attrs<ScanAttrs>();
  onnx::NodeProto& n = e.add("CumSum", {e.in(0), e.scalar(DType::Int64, static_cast<double>(a.axis))}, {e.out(0)});
  set_attr(n, "exclusive", int64_t{a.exclusive});
  set_attr(n, "reverse", int64_t{a.reverse});
}

// ---- scaled_dot_product_attention -------------------------------------------------------------

// softmax(q k^T * scale + mask) v, written out: ONNX's Softmax gives NaN for a row whose every
// score is -inf, where tracegraph gives zeros, so the softmax is spelled with the row maximum
// taken as 0 (and the sum as 1) for such rows. Output 1, each row's log-sum-exp, is -inf there.
// With heads_interleaved, q, k, v, the output and the gradients of q, k, v are (batch, T, heads,
// D): Transposes with perm {0, 2, 1, 3} (its own inverse) bring them to (batch, heads, T, D) and
// back, so the nodes between are those of the plain layout.
struct AttentionWeights {
  std::string q, k, v; // the inputs, (batch, heads, T, D)
  std::string scale;   // the scale the scores were multiplied by
  std::string weights; // softmax(scores): (batch, heads, Tq, Tk), zeros for a row that sees no key
  std::string row_max; // each row's maximum score (0 for such a row), keepdims
  std::string row_sum; // each row's sum of exp(scores - row_max), keepdims
};

// x in the heads-first layout: itself, or transposed from the interleaved one.
std::string heads_first(Emitter& e, const AttentionAttrs& a, const std::string& x, const char* hint) {
  return a.heads_interleaved ? transpose(e, x, {0, 2, 1, 3}, hint) : x;
}

// Output `i`, interleaved, from its heads-first value x.
void write_interleaved(Emitter& e, const std::string& x, int i) {
  set_attr(e.add("Transpose", {x}, {e.out(i)}), "perm", std::vector<int64_t>{0, 2, 1, 3});
}

AttentionWeights attention_weights(Emitter& e, const AttentionAttrs& a) {
  if (a.dropout > 0)
    e.refuse(str_cat("it drops attention weights at random (dropout ", a.dropout,
                     " while training), which a model ONNX runs cannot reproduce; export a function that calls it "
                     "with training = false or dropout 0"));
  float_only(e, op_def(e.node().op).name);
  for (int i = 0; i < 3; ++i)
    if (e.rank(i) != 4) e.refuse(str_cat("its input ", i, " has rank ", e.rank(i), ", not 4"));
  const DType d = e.in_type(0).dtype;
  const double inf = std::numeric_limits<double>::infinity();
  AttentionWeights out;
  out.q = heads_first(e, a, e.in(0), "q_heads_first");
  out.k = heads_first(e, a, e.in(1), "k_heads_first");
  out.v = heads_first(e, a, e.in(2), "v_heads_first");
  std::string& scale = out.scale;
  if (a.scale_given) {
    scale = e.scalar(d, a.scale);
  } else if (const int64_t head = e.in_type(0).shape.dims()[3]; head != None) {
    scale = e.scalar(d, head > 0 ? 1.0 / std::sqrt(static_cast<double>(head)) : 1.0);
  } else {
    // 1 / sqrt(D) from q's shape when it runs (D = 0 gives 1: every score is 0 then)
    const std::string head_dim = e.temp("head_size"), as_float = e.temp("head_size_float"),
                      at_least_one = e.temp("head_size_1"), root = e.temp("sqrt_head_size");
    set_attr(e.add("Gather", {shape_of(e, 0), e.scalar(DType::Int64, 3.0)}, {head_dim}), "axis", int64_t{0});
    set_attr(e.add("Cast", {head_dim}, {as_float}), "to", static_cast<int64_t>(onnx_dtype(d)));
    e.add("Max", {as_float, e.scalar(d, 1.0)}, {at_least_one});
    e.add("Sqrt", {at_least_one}, {root});
    scale = e.temp("scale");
    e.add("Reciprocal", {root}, {scale});
  }
  const std::string qs = e.temp("q_scaled"), scores = e.temp("scores");
  e.add("Mul", {out.q, scale}, {qs});
  e.add("MatMul", {qs, transpose(e, out.k, {0, 1, 3, 2}, "k_transposed")}, {scores});
  std::string s = scores;
  std::string visible;  // bool, broadcast to the scores: false hides a key
  if (a.has_mask) {
    if (e.in_type(3).dtype == DType::Bool) {
      visible = e.in(3);
    } else {
      const std::string added = e.temp("masked_scores");
      e.add("Add", {s, e.in(3)}, {added});
      s = added;
    }
  }
  if (a.causal) {
    // query i sees keys j <= i: Range over Tq as a column against Range over Tk as a row
    const auto positions = [&](int input, const char* hint) {
      const std::string count = e.temp(str_cat(hint, "_count")), r = e.temp(hint);
      const double time_axis = a.heads_interleaved ? 1.0 : 2.0;
      set_attr(e.add("Gather", {shape_of(e, input), e.scalar(DType::Int64, time_axis)}, {count}), "axis", int64_t{0});
      e.add("Range", {e.scalar(DType::Int64, 0.0), count, e.scalar(DType::Int64, 1.0)}, {r});
      return r;
    };
    const std::string rows = positions(0, "query_positions"), cols = positions(1, "key_positions");
    const std::string column = e.temp("query_column"), causal = e.temp("causal");
    e.add("Unsqueeze", {rows, e.int64s({1})}, {column});
    e.add("LessOrEqual", {cols, column}, {causal});
    if (visible.empty()) {
      visible = causal;
    } else {
      const std::string both = e.temp("visible");
      e.add("And", {visible, causal}, {both});
      visible = both;
    }
  }
  if (!visible.empty()) {
    const std::string hidden = e.temp("hidden_scores");
    e.add("Where", {visible, s, e.scalar(d, -inf)}, {hidden});
    s = hidden;
  }
  const std::string mx = e.temp("row_max"), none = e.temp("sees_no_key"), shifted = e.temp("shifted"), ex = e.temp("exp"),
                    sum1 = e.temp("row_sum_or_1");
  out.row_max = e.temp("row_max_or_0");
  out.row_sum = e.temp("row_sum");
  out.weights = e.temp("weights");
  onnx::NodeProto& max_node = e.add("ReduceMax", {s}, {mx});
  set_attr(max_node, "axes", std::vector<int64_t>{-1});
  set_attr(max_node, "keepdims", int64_t{1});
  e.add("Equal", {mx, e.scalar(d, -inf)}, {none});
  e.add("Where", {none, e.scalar(d, 0.0), mx}, {out.row_max});
  e.add("Sub", {s, out.row_max}, {shifted});
  e.add("Exp", {shifted}, {ex});
  set_attr(e.add("ReduceSum", {ex, e.int64s({-1})}, {out.row_sum}), "keepdims", int64_t{1});
  e.add("Where", {none, e.scalar(d, 1.0), out.row_sum}, {sum1});
  e.add("Div", {ex, sum1}, {out.weights});
  return out;
}

void emit_attention(Emitter& e) {
  const auto& a = e.attrs<AttentionAttrs>();
  const AttentionWeights w = attention_weights(e, a);
  const std::string log_sum = e.temp("log_sum"), lse = e.temp("lse");
  if (a.heads_interleaved) {
    const std::string o = e.temp("output_heads_first");
    e.add("MatMul", {w.weights, w.v}, {o});
    write_interleaved(e, o, 0);
  } else {
    e.add("MatMul", {w.weights, w.v}, {e.out(0)});
  }
  e.add("Log", {w.row_sum}, {log_sum});
  e.add("Add", {log_sum, w.row_max}, {lse});
  e.add("Squeeze", {lse, e.int64s({-1})}, {e.out(1)});
}

// The gradient op (inputs q, k, v, [mask], out, lse, d_out, d_lse; outputs dq, dk, dv) with the
// weights P recomputed as the forward writes them: dv = P^T d_out; dS = P * (d_out v^T -
// rowsum(d_out * out) + d_lse) (the log-sum-exp's gradient is P); dq = scale dS k,
// dk = scale dS^T q. A row that sees no key has P = 0 and gives nothing.
void emit_attention_grad(Emitter& e) {
  const auto& a = e.attrs<AttentionAttrs>();
  const AttentionWeights w = attention_weights(e, a);
  const int base = a.has_mask ? 4 : 3;
  const std::string out = heads_first(e, a, e.in(base), "out_heads_first"),
                    d_out = heads_first(e, a, e.in(base + 2), "d_out_heads_first"), d_lse = e.in(base + 3);
  // the gradients, heads first; written through write_interleaved when interleaved
  const bool il = a.heads_interleaved;
  const std::string dq = il ? e.temp("dq_heads_first") : e.out(0), dk = il ? e.temp("dk_heads_first") : e.out(1),
                    dv = il ? e.temp("dv_heads_first") : e.out(2);
  const std::string d_p = e.temp("d_weights"), prod = e.temp("d_out_times_out"), dot = e.temp("row_dot"),
                    lse_col = e.temp("d_lse_column"), inner = e.temp("inner"), inner2 = e.temp("inner_with_lse"),
                    d_s = e.temp("d_scores"), d_ss = e.temp("d_scores_scaled"), p_t = transpose(e, w.weights, {0, 1, 3, 2}, "weights_t");
  e.add("MatMul", {p_t, d_out}, {dv});
  e.add("MatMul", {d_out, transpose(e, w.v, {0, 1, 3, 2}, "v_transposed")}, {d_p});
  e.add("Mul", {d_out, out}, {prod});
  set_attr(e.add("ReduceSum", {prod, e.int64s({-1})}, {dot}), "keepdims", int64_t{1});
  e.add("Sub", {d_p, dot}, {inner});
  e.add("Unsqueeze", {d_lse, e.int64s({-1})}, {lse_col});
  e.add("Add", {inner, lse_col}, {inner2});
  e.add("Mul", {w.weights, inner2}, {d_s});
  e.add("Mul", {d_s, w.scale}, {d_ss});
  e.add("MatMul", {d_ss, w.k}, {dq});
  e.add("MatMul", {transpose(e, d_ss, {0, 1, 3, 2}, "d_scores_t"), w.q}, {dk});
  if (il)
    for (int i = 0; i < 3; ++i) write_interleaved(e, i == 0 ? dq : i == 1 ? dk : dv, i);
}

// ---- layer_norm ---------------------------------------------------------------------------------

// ReduceMean over the last axis, kept.
std::string row_mean(Emitter& e, const std::string& x, const char* hint) {
  const std::string out = e.temp(hint);
  onnx::NodeProto& n = e.add("ReduceMean", {x}, {out});
  set_attr(n, "axes", std::vector<int64_t>{-1});
  set_attr(n, "keepdims", int64_t{1});
  return out;
}

void emit_layer_norm(Emitter& e) {
  float_only(e, "layer_norm");
  const DType d = e.in_type(0).dtype;
  const std::string mean = row_mean(e, e.in(0), "row_mean"), centred = e.temp("centred"), sq = e.temp("squared"),
                    plus_eps = e.temp("variance_plus_eps"), root = e.temp("root"), rstd = e.temp("rstd"),
                    normed = e.temp("normalised"), scaled = e.temp("scaled");
  e.add("Sub", {e.in(0), mean}, {centred});
  e.add("Mul", {centred, centred}, {sq});
  e.add("Add", {row_mean(e, sq, "variance"), e.scalar(d, e.attrs<LayerNormAttrs>().epsilon)}, {plus_eps});
  e.add("Sqrt", {plus_eps}, {root});
  e.add("Reciprocal", {root}, {rstd});
  e.add("Mul", {centred, rstd}, {normed});
  e.add("Mul", {normed, e.in(1)}, {scaled});
  e.add("Add", {scaled, e.in(2)}, {e.out(0)});
  e.add("Squeeze", {mean, e.int64s({-1})}, {e.out(1)});
  e.add("Squeeze", {rstd, e.int64s({-1})}, {e.out(2)});
}

void emit_layer_norm_grad(Emitter& e) {
  float_only(e, "layer_norm_grad");
  const std::string mean = e.temp("row_mean"), rstd = e.temp("rstd"), centred = e.temp("centred"),
                    xhat = e.temp("xhat"), g = e.temp("g"), gx = e.temp("g_xhat"), t1 = e.temp("g_centred"),
                    t2 = e.temp("xhat_b"), t3 = e.temp("dx_over_rstd"), dyx = e.temp("dy_xhat"),
                    rows = e.temp("rows_shape"), gamma_shape = e.temp("gamma_shape");
  e.add("Unsqueeze", {e.in(2), e.int64s({-1})}, {mean});
  e.add("Unsqueeze", {e.in(3), e.int64s({-1})}, {rstd});
  e.add("Sub", {e.in(0), mean}, {centred});
  e.add("Mul", {centred, rstd}, {xhat});
  e.add("Mul", {e.in(4), e.in(1)}, {g});
  e.add("Mul", {g, xhat}, {gx});
  e.add("Sub", {g, row_mean(e, g, "g_mean")}, {t1});
  e.add("Mul", {xhat, row_mean(e, gx, "g_xhat_mean")}, {t2});
  e.add("Sub", {t1, t2}, {t3});
  e.add("Mul", {rstd, t3}, {e.out(0)});
  // gamma's and beta's gradients: column sums over the rows of (-1, features).
  e.add("Shape", {e.in(1)}, {gamma_shape});
  set_attr(e.add("Concat", {e.int64s({-1}), gamma_shape}, {rows}), "axis", int64_t{0});
  e.add("Mul", {e.in(4), xhat}, {dyx});
  const auto column_sums = [&](const std::string& t, const std::string& out, const char* hint) {
    const std::string r = e.temp(hint);
    e.add("Reshape", {t, rows}, {r});
    set_attr(e.add("ReduceSum", {r, e.int64s({0})}, {out}), "keepdims", int64_t{0});
  };
  column_sums(dyx, e.out(1), "dy_xhat_rows");
  column_sums(e.in(4), e.out(2), "dy_rows");
}

// ---- TensorArray ------------------------------------------------------------------------------

// A TensorArray's flow is (count, element...) once written, or a scalar while nothing is. As
// ONNX values: `rows` (int64 scalar) is 0 for the scalar and count otherwise, and the rows as
// a (rows, element...) tensor, whatever the flow's rank when it runs (a flow carried by a Loop
// has none when traced). `elements` is the number of values in one element.
struct FlowRows {
  std::string rows, data;
};
FlowRows flow_rows(Emitter& e, const std::string& flow, const std::string& element_shape, const std::string& elements) {
  const std::string dims = e.temp("flow_shape"), padded = e.temp("flow_shape_0"), flat = e.temp("flow_flat"),
                    total = e.temp("flow_values"), kept = e.temp("flow_kept"), row_dims = e.temp("rows_shape"),
                    rows_1d = e.temp("rows_1d");
  FlowRows r{e.temp("rows"), e.temp("flow_rows")};
  e.add("Shape", {flow}, {dims});
  set_attr(e.add("Concat", {dims, e.int64s({0})}, {padded}), "axis", int64_t{0});
  set_attr(e.add("Gather", {padded, e.scalar(DType::Int64, 0.0)}, {r.rows}), "axis", int64_t{0});
  e.add("Reshape", {flow, e.int64s({-1})}, {flat});
  e.add("Mul", {r.rows, elements}, {total});
  e.add("Unsqueeze", {r.rows, e.int64s({0})}, {rows_1d});
  const std::string total_1d = e.temp("flow_values_1d");
  e.add("Unsqueeze", {total, e.int64s({0})}, {total_1d});
  e.add("Slice", {flat, e.int64s({0}), total_1d, e.int64s({0})}, {kept});
  set_attr(e.add("Concat", {rows_1d, element_shape}, {row_dims}), "axis", int64_t{0});
  e.add("Reshape", {kept, row_dims}, {r.data});
  return r;
}

// `data` (rows, element...) of rank `rank` padded with zero rows to `count` rows.
void pad_rows(Emitter& e, const std::string& data, const std::string& rows, const std::string& count, int64_t rank,
              const std::string& out) {
  const std::string more = e.temp("more_rows"), more_1d = e.temp("more_rows_1d"), pads = e.temp("pads");
  e.add("Sub", {count, rows}, {more});
  e.add("Unsqueeze", {more, e.int64s({0})}, {more_1d});
  set_attr(e.add("Concat", {e.int64s(std::vector<int64_t>(static_cast<std::size_t>(rank + 1), 0)), more_1d,
                            e.int64s(std::vector<int64_t>(static_cast<std::size_t>(rank), 0))},
                 {pads}),
           "axis", int64_t{0});
  e.add("Pad", {data, pads}, {out});
}

// write(flow, index, value): the rows, grown to the array's count (a dynamic array: to index + 1
// when larger), with row `index` set by ScatterND.
void emit_tensor_array_write(Emitter& e) {
  const auto& a = e.attrs<TensorArrayAttrs>();
  const int64_t rank = e.rank(2);
  const TensorShape& flow = e.in_type(0).shape;
  const std::string index = cast_to_int64(e, 1), at = e.temp("at"), update = e.temp("update");
  e.add("Reshape", {index, e.int64s({1, 1})}, {at});
  e.add("Unsqueeze", {e.in(2), e.int64s({0})}, {update});
  if (!a.dynamic && flow.has_rank() && flow.rank() >= 1) {
    e.add("ScatterND", {e.in(0), at, update}, {e.out(0)});
    return;
  }
  const std::string element = e.temp("element_shape"), elements = e.temp("element_values");
  e.add("Shape", {e.in(2)}, {element});
  e.add("Size", {e.in(2)}, {elements});
  const FlowRows r = flow_rows(e, e.in(0), element, elements);
  std::string count = e.scalar(DType::Int64, static_cast<double>(a.size));
  if (a.dynamic) {
    const std::string next = e.temp("index_plus_1"), grown = e.temp("grown"), at_least = e.temp("count");
    e.add("Add", {index, e.scalar(DType::Int64, 1.0)}, {next});
    e.add("Max", {r.rows, next, count}, {at_least});
    count = at_least;
  }
  const std::string padded = e.temp("padded");
  pad_rows(e, r.data, r.rows, count, rank, padded);
  e.add("ScatterND", {padded, at, update}, {e.out(0)});
}

// stack(flow): the flow once written; for an array nothing was written to, zeros of its size and
// element shape (which must be known then, as the kernel requires).
void emit_tensor_array_stack(Emitter& e) {
  const auto& a = e.attrs<TensorArrayAttrs>();
  const TensorShape& flow = e.in_type(0).shape;
  const TensorShape hint = a.element_shape_known ? TensorShape(a.element_shape) : TensorShape::unknown_rank();
  if ((flow.has_rank() && flow.rank() >= 1) || !hint.is_fully_defined()) {
    // A flow of unknown rank whose element shape is not known: tracegraph's stack fails on an
    // array nothing was written to, and this Identity passes its scalar on.
    if (flow.has_rank() && flow.rank() == 0)
      e.refuse("it stacks a TensorArray that nothing was written to and whose element shape is not fully known "
               "(tracegraph's stack fails on it too); give the array its element_shape");
    e.add("Identity", {e.in(0)}, {e.out(0)});
    return;
  }
  const FlowRows r = flow_rows(e, e.in(0), e.int64s(hint.dims()), e.scalar(DType::Int64, static_cast<double>(hint.num_elements())));
  const std::string count = e.temp("count");
  e.add("Max", {r.rows, e.scalar(DType::Int64, static_cast<double>(a.size))}, {count});
  pad_rows(e, r.data, r.rows, count, hint.rank(), e.out(0));
}

// ---- Variable writes (OnnxOptions::variables_as_inputs) ----------------------------------------

// assign (op null), assign_add (Add), assign_sub (Sub): the new value is the node's output.
void emit_assign(Emitter& e, const char* op) {
  const auto& v = e.attrs<VariableAttrs>().variable;
  const std::string value = e.node().outputs.empty() ? e.temp("value") : e.out(0);
  if (op) e.add(op, {e.variable(v), e.in(0)}, {value});
  else e.add("Identity", {e.in(0)}, {value});
  e.write_variable(v, value);
}

void emit_gradient_descent(Emitter& e) {
  // var - lr * grad
  const auto& v = e.attrs<VariableAttrs>().variable;
  const std::string step = e.temp("step"), value = e.temp("value");
  e.add("Mul", {e.in(0), e.in(1)}, {step});
  e.add("Sub", {e.variable(v), step}, {value});
  e.write_variable(v, value);
}

// Adam's one-pass update, in the kernel's order: m += (g - m) * (1 - beta1), v += (g^2 - v) *
// (1 - beta2), var -= m * alpha / (sqrt(v) + epsilon).
void emit_adam(Emitter& e) {
  const auto& a = e.attrs<AdamSlotsAttrs>();
  const DType d = e.in_type(0).dtype;
  const std::string g = e.in(0), alpha = e.in(1), beta1 = e.in(2), beta2 = e.in(3), eps = e.in(4);
  const std::string m = e.variable(a.m), v = e.variable(a.v), var = e.variable(a.variable);
  const std::string c1 = e.temp("c1"), c2 = e.temp("c2"), dm = e.temp("m_diff"), sm = e.temp("m_step"),
                    m_new = e.temp("m_new"), gg = e.temp("g_squared"), dv = e.temp("v_diff"), sv = e.temp("v_step"),
                    v_new = e.temp("v_new"), num = e.temp("numerator"), root = e.temp("sqrt_v"),
                    den = e.temp("denominator"), step = e.temp("step"), var_new = e.temp("value");
  e.add("Sub", {e.scalar(d, 1.0), beta1}, {c1});
  e.add("Sub", {e.scalar(d, 1.0), beta2}, {c2});
  e.add("Sub", {g, m}, {dm});
  e.add("Mul", {dm, c1}, {sm});
  e.add("Add", {m, sm}, {m_new});
  e.add("Mul", {g, g}, {gg});
  e.add("Sub", {gg, v}, {dv});
  e.add("Mul", {dv, c2}, {sv});
  e.add("Add", {v, sv}, {v_new});
  e.add("Mul", {m_new, alpha}, {num});
  e.add("Sqrt", {v_new}, {root});
  e.add("Add", {root, eps}, {den});
  e.add("Div", {num, den}, {step});
  e.add("Sub", {var, step}, {var_new});
  e.write_variable(a.m, m_new);
  e.write_variable(a.v, v_new);
  e.write_variable(a.variable, var_new);
}

// scatter_add / scatter_sub / scatter_update on a Variable's rows: ScatterND over the rows named
// by the indices (as (..., 1) positions), with reduction add for add and sub (updates negated).
void emit_scatter_variable(Emitter& e, const char* reduction, bool negate) {
  const auto& v = e.attrs<VariableAttrs>().variable;
  const std::string at = e.temp("rows"), value = e.temp("value");
  e.add("Unsqueeze", {cast_to_int64(e, 0), e.int64s({-1})}, {at});
  std::string updates = e.in(1);
  if (negate) {
    updates = e.temp("negated");
    e.add("Neg", {e.in(1)}, {updates});
  }
  onnx::NodeProto& n = e.add("ScatterND", {e.variable(v), at, updates}, {value});
  if (reduction) set_attr(n, "reduction", std::string(reduction));
  e.write_variable(v, value);
}

// ---- control flow -------------------------------------------------------------------------------

// Nodes added while one lives go to an If branch or a Loop body.
class InSubgraph {
 public:
  InSubgraph(Emitter& e, onnx::GraphProto& g) : e_(e) { e_.push_graph(g); }
  ~InSubgraph() { e_.pop_graph(); }
  InSubgraph(const InSubgraph&) = delete;
  InSubgraph& operator=(const InSubgraph&) = delete;

 private:
  Emitter& e_;
};

// `vars`, then the ONNX names of the node inputs that feed sub-graph g's captures.
std::vector<std::string> with_captures(Emitter& e, const ControlFlowPayload& p, std::size_t g,
                                       std::vector<std::string> vars) {
  for (int k : p.capture_inputs[g]) vars.push_back(e.in(k));
  return vars;
}

// `results` as the outputs of `g` (the graph being written into), typed `types`.
void graph_outputs(Emitter& e, onnx::GraphProto& g, const std::vector<std::string>& results,
                   const std::vector<ValueType>& types, const std::string& hint) {
  TG_CHECK(results.size() == types.size(), "a sub-graph of ", results.size(), " results for ", types.size(), " types");
  for (std::size_t k = 0; k < results.size(); ++k) {
    const std::string name = e.temp(str_cat(hint, "_", k));
    e.add("Identity", {results[k]}, {name});
    set_value_type(*g.add_output(), name, types[k].dtype, types[k].shape);
  }
}

void set_graph_attr(onnx::NodeProto& n, const std::string& name, onnx::GraphProto&& g) {
  onnx::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = std::move(g);
}

std::vector<std::string> node_outputs(Emitter& e) {
  std::vector<std::string> outs;
  for (std::size_t k = 0; k < e.node().outputs.size(); ++k) outs.push_back(e.out(static_cast<int>(k)));
  return outs;
}

// cond: an If whose branches read their captures from the enclosing graph by name.
void emit_cond(Emitter& e) {
  const ControlFlowPayload& p = *e.attrs<ControlFlowAttrs>().payload;
  if (e.node().outputs.empty()) {
    // A cond without results computes nothing a model returns (and ONNX's If must return a
    // value): no If is written, but its branches are, into graphs thrown away, so that an
    // effect in them (a print, a Variable write) is refused rather than dropped.
    for (std::size_t b = 0; b < 2; ++b) {
      onnx::GraphProto scratch;
      InSubgraph inside(e, scratch);
      e.inline_graph(*p.subgraphs[b].graph, p.subgraphs[b].role, with_captures(e, p, b, {}));
    }
    return;
  }
  onnx::GraphProto branches[2];
  for (std::size_t b = 0; b < 2; ++b) {
    const NamedSubgraph& sub = p.subgraphs[b];
    branches[b].set_name(e.temp(sub.role));
    InSubgraph inside(e, branches[b]);
    const std::vector<std::string> results = e.inline_graph(*sub.graph, sub.role, with_captures(e, p, b, {}));
    std::vector<ValueType> types;
    for (int k : sub.graph->outputs) types.push_back(sub.graph->node(k).outputs[0]);
    graph_outputs(e, branches[b], results, types, sub.role + "_out");
  }
  onnx::NodeProto& n = e.add("If", {e.in(0)}, node_outputs(e));
  set_graph_attr(n, "then_branch", std::move(branches[0]));
  set_graph_attr(n, "else_branch", std::move(branches[1]));
}

// while: tracegraph tests the condition before each iteration and ONNX's Loop takes it as an
// input and from the end of each iteration, so the condition is written twice: on the initial
// values before the Loop, and on the body's results at the end of the body.
void emit_while(Emitter& e) {
  const ControlFlowPayload& p = *e.attrs<ControlFlowAttrs>().payload;
  const auto n = static_cast<std::size_t>(p.num_loop_vars);
  const GraphIR& cond = *p.subgraphs[0].graph;
  const GraphIR& body = *p.subgraphs[1].graph;
  std::vector<std::string> init;
  for (std::size_t k = 0; k < n; ++k) init.push_back(e.in(static_cast<int>(k)));
  const std::string first = e.inline_graph(cond, "cond", with_captures(e, p, 0, init)).at(0);
  onnx::GraphProto g;
  g.set_name(e.temp("body"));
  {
    InSubgraph inside(e, g);
    set_value_type(*g.add_input(), e.temp("iteration"), DType::Int64, TensorShape());
    set_value_type(*g.add_input(), e.temp("cond_in"), DType::Bool, TensorShape());
    std::vector<std::string> vars;
    for (std::size_t k = 0; k < n; ++k) {
      vars.push_back(e.temp(str_cat("var_", k)));
      set_value_type(*g.add_input(), vars.back(), p.output_types[k].dtype, p.output_types[k].shape);
    }
    const std::vector<std::string> next = e.inline_graph(body, "body", with_captures(e, p, 1, vars));
    const std::string again = e.inline_graph(cond, "next_cond", with_captures(e, p, 0, next)).at(0);
    graph_outputs(e, g, {again}, {ValueType{DType::Bool, TensorShape()}}, "cond_out");
    graph_outputs(e, g, next, p.output_types, "var_out");
  }
  std::vector<std::string> ins{
      p.maximum_iterations >= 0 ? e.scalar(DType::Int64, static_cast<double>(p.maximum_iterations)) : std::string(),
      first};
  ins.insert(ins.end(), init.begin(), init.end());
  set_graph_attr(e.add("Loop", ins, node_outputs(e)), "body", std::move(g));
}

#define TG_ONNX_UNARY(Id, Op) {OpId::Id, Op, "", [](Emitter& e) { unary(e, Op); }}
#define TG_ONNX_BINARY(Id, Op) {OpId::Id, Op, "", [](Emitter& e) { binary(e, Op); }}

// Registry order (ops.def).
const OnnxRule kRules[] = {
    TG_ONNX_BINARY(Add, "Add"),
    TG_ONNX_BINARY(Sub, "Sub"),
    TG_ONNX_BINARY(Mul, "Mul"),
    TG_ONNX_BINARY(Div, "Div"),
    {OpId::FloorDiv, "Div, Floor (floats); Mod, Sub, Div (integers)", "integers: (a - floormod(a, b)) / b, exact",
     emit_floordiv},
    {OpId::Mod, "Mod (fmod=0; floats: fmod=1 and a sign fix)", "TF's floormod: the result has the divisor's sign",
     emit_mod},
    TG_ONNX_BINARY(Pow, "Pow"),
    TG_ONNX_BINARY(Maximum, "Max"),
    TG_ONNX_BINARY(Minimum, "Min"),
    TG_ONNX_BINARY(Equal, "Equal"),
    {OpId::NotEqual, "Equal, Not", "", [](Emitter& e) {
       const std::string eq = e.temp("equal");
       e.add("Equal", {e.in(0), e.in(1)}, {eq});
       e.add("Not", {eq}, {e.out(0)});
     }},
    TG_ONNX_BINARY(Less, "Less"),
    TG_ONNX_BINARY(LessEqual, "LessOrEqual"),
    TG_ONNX_BINARY(Greater, "Greater"),
    TG_ONNX_BINARY(GreaterEqual, "GreaterOrEqual"),
    TG_ONNX_BINARY(LogicalAnd, "And"),
    TG_ONNX_BINARY(LogicalOr, "Or"),
    {OpId::LeakyRelu, "Greater, Mul, Where", "alpha is an operand (input 1), so not ONNX's LeakyRelu attribute",
     emit_leaky_relu},
    TG_ONNX_UNARY(Neg, "Neg"),
    TG_ONNX_UNARY(Abs, "Abs"),
    TG_ONNX_UNARY(Sign, "Sign"),
    {OpId::Square, "Mul", "x * x", [](Emitter& e) { e.add("Mul", {e.in(0), e.in(0)}, {e.out(0)}); }},
    TG_ONNX_UNARY(Relu, "Relu"),
    TG_ONNX_UNARY(Exp, "Exp"),
    TG_ONNX_UNARY(Log, "Log"),
    TG_ONNX_UNARY(Sqrt, "Sqrt"),
    {OpId::Rsqrt, "Sqrt, Reciprocal", "", [](Emitter& e) {
       const std::string s = e.temp("sqrt");
       e.add("Sqrt", {e.in(0)}, {s});
       e.add("Reciprocal", {s}, {e.out(0)});
     }},
    TG_ONNX_UNARY(Tanh, "Tanh"),
    TG_ONNX_UNARY(Sigmoid, "Sigmoid"),
    TG_ONNX_UNARY(Sin, "Sin"),
    TG_ONNX_UNARY(Cos, "Cos"),
    TG_ONNX_UNARY(LogicalNot, "Not"),
    {OpId::Cast, "Cast", "`dtype` -> `to`", [](Emitter& e) {
       set_attr(e.add("Cast", {e.in(0)}, {e.out(0)}), "to",
                static_cast<int64_t>(onnx_dtype(e.attrs<CastAttrs>().dtype)));
     }},
    TG_ONNX_UNARY(Identity, "Identity"),
    {OpId::ZerosLike, "Shape, Expand", "", [](Emitter& e) { emit_like(e, 0.0); }},
    {OpId::OnesLike, "Shape, Expand", "", [](Emitter& e) { emit_like(e, 1.0); }},
    {OpId::Where, "Where", "", [](Emitter& e) { e.add("Where", {e.in(0), e.in(1), e.in(2)}, {e.out(0)}); }},
    {OpId::StopGradient, "Identity", "", [](Emitter& e) { unary(e, "Identity"); }},
    {OpId::Log1p, "Add, Log", "log(1 + x): less accurate than tracegraph's for x near 0 (below about 1e-4 in size)", [](Emitter& e) {
       const std::string s = e.temp("one_plus");
       e.add("Add", {e.in(0), e.scalar(e.in_type(0).dtype, 1.0)}, {s});
       e.add("Log", {s}, {e.out(0)});
     }},
    {OpId::Expm1, "Exp, Sub", "exp(x) - 1: less accurate than tracegraph's for x near 0 (below about 1e-4 in size)", [](Emitter& e) {
       const std::string s = e.temp("exp");
       e.add("Exp", {e.in(0)}, {s});
       e.add("Sub", {s, e.scalar(e.in_type(0).dtype, 1.0)}, {e.out(0)});
     }},
    TG_ONNX_UNARY(Softplus, "Softplus"),
    {OpId::Gelu, "Mul, Erf, Add", "x / 2 * (1 + erf(x / sqrt(2))) (opset 17 has no Gelu)", emit_gelu},
    {OpId::GeluApproximate, "Mul, Add, Tanh", "x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))",
     emit_gelu_approximate},
    {OpId::GeluGrad, "Mul, Erf, Add, Exp", "(1 + erf(x / sqrt(2))) / 2 + x e^(-x^2 / 2) / sqrt(2 pi)", emit_gelu_grad},
    {OpId::Elu, "Elu", "alpha = 1", [](Emitter& e) {
       set_attr(e.add("Elu", {e.in(0)}, {e.out(0)}), "alpha", 1.0f);
     }},
    TG_ONNX_UNARY(Erf, "Erf"),
    TG_ONNX_UNARY(Floor, "Floor"),
    TG_ONNX_UNARY(Ceil, "Ceil"),
    TG_ONNX_UNARY(Round, "Round"),
    {OpId::MatMul, "MatMul (Transpose first for transpose_a / transpose_b)", "", emit_matmul},
    {OpId::ReduceSum, "ReduceSum", "`axes` (an input; empty: all), `keepdims`", [](Emitter& e) { reduce(e, "ReduceSum"); }},
    {OpId::ReduceMean, "ReduceMean", "`axes`, `keepdims`", [](Emitter& e) { reduce(e, "ReduceMean"); }},
    {OpId::ReduceMax, "ReduceMax", "`axes`, `keepdims`", [](Emitter& e) { reduce(e, "ReduceMax"); }},
    {OpId::ReduceMin, "ReduceMin", "`axes`, `keepdims`", [](Emitter& e) { reduce(e, "ReduceMin"); }},
    {OpId::ReduceProd, "ReduceProd", "`axes`, `keepdims`", [](Emitter& e) { reduce(e, "ReduceProd"); }},
    {OpId::ReduceAny, "Cast, ReduceMax, Cast", "as uint8", [](Emitter& e) { reduce_bool(e, "ReduceMax"); }},
    {OpId::ReduceAll, "Cast, ReduceMin, Cast", "as uint8", [](Emitter& e) { reduce_bool(e, "ReduceMin"); }},
    {OpId::ArgMax, "ArgMax (Cast to int32 when asked)", "`axis`, keepdims 0, the first of equal values",
     [](Emitter& e) { arg_reduce(e, "ArgMax"); }},
    {OpId::ArgMin, "ArgMin (Cast to int32 when asked)", "`axis`, keepdims 0, the first of equal values",
     [](Emitter& e) { arg_reduce(e, "ArgMin"); }},
    {OpId::Softmax, "Softmax", "`axis`", [](Emitter& e) {
       set_attr(e.add("Softmax", {e.in(0)}, {e.out(0)}), "axis", e.attrs<AxisAttrs>().axis);
     }},
    {OpId::LogSoftmax, "LogSoftmax", "`axis`", [](Emitter& e) {
       set_attr(e.add("LogSoftmax", {e.in(0)}, {e.out(0)}), "axis", e.attrs<AxisAttrs>().axis);
     }},
    {OpId::SparseSoftmaxCrossEntropy, "LogSoftmax, Cast, Unsqueeze, GatherElements, Squeeze, Neg",
     "loss = -log_softmax(logits)[label] per row; labels outside [0, classes) are not checked", emit_cross_entropy},
    {OpId::SparseSoftmaxCrossEntropyGrad, "Exp, Shape, Gather, OneHot, Sub, Unsqueeze, Mul",
     "(exp(log_softmax rows) - one_hot(labels)) * the losses' gradient", emit_cross_entropy_grad},
    {OpId::Cumsum, "CumSum", "`axis` (an input), `exclusive`, `reverse`", emit_cumsum},
    {OpId::SumToLike, "ReduceSum, Reshape (Shape, Equal, NonZero when dims are None)",
     "sums x down to like's shape (a broadcast's gradient)", emit_sum_to_like},
    {OpId::BroadcastLike, "Shape, Expand", "", [](Emitter& e) {
       e.add("Expand", {e.in(0), shape_of(e, 1)}, {e.out(0)});
     }},
    {OpId::UnreduceLike, "Unsqueeze, Shape, Expand", "", emit_unreduce_like},
    {OpId::Reshape, "Reshape", "`shape` (an input; allowzero when it has a 0)", emit_reshape},
    {OpId::Transpose, "Transpose", "`perm` (empty: reversed)", [](Emitter& e) {
       onnx::NodeProto& n = e.add("Transpose", {e.in(0)}, {e.out(0)});
       if (!e.attrs<TransposeAttrs>().perm.empty()) set_attr(n, "perm", e.attrs<TransposeAttrs>().perm);
     }},
    {OpId::ExpandDims, "Unsqueeze", "`axis` (an input)", [](Emitter& e) {
       e.add("Unsqueeze", {e.in(0), e.int64s({e.attrs<AxisAttrs>().axis})}, {e.out(0)});
     }},
    {OpId::Squeeze, "Squeeze", "`axes` (an input; empty: every 1)", emit_squeeze},
    {OpId::Concat, "Concat", "`axis`", [](Emitter& e) {
       std::vector<std::string> ins;
       for (int i = 0; i < e.num_inputs(); ++i) ins.push_back(e.in(i));
       set_attr(e.add("Concat", ins, {e.out(0)}), "axis", e.attrs<AxisAttrs>().axis);
     }},
    {OpId::Stack, "Unsqueeze, Concat", "`axis`", emit_stack},
    {OpId::Slice, "Slice", "`begin` -> starts, `begin + size` -> ends (size -1: to the end)", emit_slice},
    {OpId::Gather, "Gather", "`axis`", [](Emitter& e) {
       set_attr(e.add("Gather", {e.in(0), e.in(1)}, {e.out(0)}), "axis", e.attrs<AxisAttrs>().axis);
     }},
    {OpId::OneHot, "Cast, Less, Where, OneHot", "`depth`, `axis`, (`off_value`, `on_value`) -> values; a negative index "
     "gives off values as in TF", emit_one_hot},
    {OpId::Index, "Gather", "`index` -> a scalar index on axis 0", emit_index},
    {OpId::Shape, "Shape (Cast to int32)", "", [](Emitter& e) { int64_to_out(e, shape_of(e, 0)); }},
    {OpId::Size, "Size (Cast to int32)", "", [](Emitter& e) {
       const std::string s = e.temp("size");
       e.add("Size", {e.in(0)}, {s});
       int64_to_out(e, s);
     }},
    {OpId::ReshapeTo, "Cast, Reshape", "", [](Emitter& e) {
       e.add("Reshape", {e.in(0), cast_to_int64(e, 1)}, {e.out(0)});
     }},
    {OpId::EnsureSameShape, "Identity", "the run-time shape check is not written", [](Emitter& e) {
       unary(e, "Identity");
     }},
    {OpId::Range, "Range", "", [](Emitter& e) { e.add("Range", {e.in(0), e.in(1), e.in(2)}, {e.out(0)}); }},
    {OpId::Fill, "Cast, Expand", "", [](Emitter& e) {
       e.add("Expand", {e.in(1), cast_to_int64(e, 0)}, {e.out(0)});
     }},
    {OpId::BroadcastTo, "Cast, Expand", "", [](Emitter& e) {
       e.add("Expand", {e.in(0), cast_to_int64(e, 1)}, {e.out(0)});
     }},
    {OpId::ReshapeLike, "Shape, Reshape", "", [](Emitter& e) {
       e.add("Reshape", {e.in(0), shape_of(e, 1)}, {e.out(0)});
     }},
    {OpId::SliceLike, "Shape, Add, Slice", "the block shaped like input 1 at `begin` (a negative entry counts from "
     "the end)", emit_slice_like},
    {OpId::PadLike, "Shape, Sub, Concat, Pad", "zeros shaped like input 1 with input 0 at `begin`", emit_pad_like},
    {OpId::ScatterAddLike, "Shape, Expand, Cast, Unsqueeze, ScatterND (reduction add), Transpose for an axis but 0",
     "zeros shaped like input 2 with input 0's slices added at the indices along `axis` (gather's gradient)",
     emit_scatter_add_like},
    {OpId::Tile, "Tile", "`multiples` -> repeats (an input)", [](Emitter& e) {
       e.add("Tile", {e.in(0), e.int64s(e.attrs<TileAttrs>().multiples)}, {e.out(0)});
     }},
    {OpId::Pad, "Pad", "`paddings` -> pads (befores, then afters); constant and reflect modes", emit_pad},
    {OpId::Split, "Split", "`sizes` (an input) or `num` equal pieces, `axis`", emit_split},
    {OpId::Reverse, "Slice", "steps -1 on `axes`", emit_reverse},
    {OpId::GatherNd, "GatherND", "batch_dims 0", [](Emitter& e) {
       e.add("GatherND", {e.in(0), cast_to_int64(e, 1)}, {e.out(0)});
     }},
    {OpId::ScatterNd, "Cast, Expand, ScatterND (reduction add)", "zeros of `shape` with the updates added (repeats "
     "add); indices out of range are not checked", [](Emitter& e) {
       const std::string zeros = e.temp("zeros");
       e.add("Expand", {e.scalar(e.in_type(1).dtype, 0.0), cast_to_int64(e, 2)}, {zeros});
       set_attr(e.add("ScatterND", {zeros, cast_to_int64(e, 0), e.in(1)}, {e.out(0)}), "reduction", std::string("add"));
     }},
    {OpId::TensorScatterNdAdd, "Cast, ScatterND (reduction add)", "repeats add; indices out of range are not checked",
     [](Emitter& e) {
       set_attr(e.add("ScatterND", {e.in(0), cast_to_int64(e, 1), e.in(2)}, {e.out(0)}), "reduction", std::string("add"));
     }},
    {OpId::WhereIndices, "NonZero, Transpose", "(n, rank) int64 positions", [](Emitter& e) {
       const std::string nz = e.temp("nonzero");
       e.add("NonZero", {e.in(0)}, {nz});
       int64_to_out(e, transpose(e, nz, {1, 0}, "positions"));
     }},
    {OpId::Conv2D, "Transpose, Conv, Transpose", "NHWC -> NCHW, HWIO -> OIHW; `strides`, `dilations`; SAME -> "
     "auto_pad SAME_UPPER, VALID -> VALID; groups (input channels / the filter's dim 2) -> group", emit_conv2d},
    {OpId::DepthwiseConv2D, "Transpose, Reshape, Conv, Transpose", "group = in_channels, the filter (kh, kw, c, m) "
     "as the weight (c * m, 1, kh, kw); the rest as conv2d; needs a static filter", emit_depthwise_conv2d},
    {OpId::Conv2DTranspose, "Transpose, ConvTranspose, Transpose", "HWOI filter -> IOHW weight; `strides`, "
     "`dilations`; SAME/VALID and output_shape -> explicit pads and output_padding (needs the input's static height "
     "and width)", emit_conv2d_transpose},
    {OpId::MaxPool2D, "Transpose, MaxPool, Transpose", "`ksize` -> kernel_shape, `strides`, padding -> auto_pad",
     [](Emitter& e) { emit_pool(e, "MaxPool"); }},
    {OpId::AvgPool2D, "Transpose, AveragePool, Transpose", "as max_pool2d; count_include_pad 0 (TF's SAME average)",
     [](Emitter& e) { emit_pool(e, "AveragePool"); }},
    {OpId::ScaledDotProductAttention,
     "Mul, Transpose, MatMul, Add / Where (masks), Range, LessOrEqual (causal), ReduceMax, Equal, Sub, Exp, "
     "ReduceSum, Div, MatMul",
     "softmax(q k^T * scale + mask) v; a bool mask and the causal mask as Where(visible, scores, -inf); a row that "
     "sees no key gives zeros (ONNX's Softmax would give NaN); output 1 is each row's log-sum-exp; dropout while "
     "training is refused", emit_attention},
    {OpId::ScaledDotProductAttentionGrad,
     "the forward's weights as scaled_dot_product_attention writes them, then Transpose, MatMul, Mul, ReduceSum, "
     "Sub, Unsqueeze, Add",
     "dv = P^T dout, dS = P (dout v^T - rowsum(dout out) + dlse), dq = scale dS k, dk = scale dS^T q; dropout is "
     "refused", emit_attention_grad},
    {OpId::LayerNorm, "ReduceMean, Sub, Mul, Add, Sqrt, Reciprocal, Squeeze",
     "y = (x - mean) / sqrt(variance + epsilon) * gamma + beta over the last axis; outputs 1 and 2 are each row's "
     "mean and 1 / sqrt(variance + epsilon)", emit_layer_norm},
    {OpId::LayerNormGrad, "Unsqueeze, Sub, Mul, ReduceMean, Shape, Concat, Reshape, ReduceSum",
     "dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy gamma; dgamma and dbeta as column sums of dy xhat and dy",
     emit_layer_norm_grad},
    {OpId::ReadVariable, "Identity of an initializer", "a Variable closed over: an initializer named after it, with "
     "its value at export; a Variable argument, or any Variable with `variables_as_inputs`: a graph input; after a "
     "write: the value written", [](Emitter& e) {
       e.add("Identity", {e.variable(e.attrs<VariableAttrs>().variable)}, {e.out(0)});
     }},
    {OpId::AssignVariable, "Identity", "with `variables_as_inputs` only: the Variable's value from here on, and its "
     "output `<name>/new`", [](Emitter& e) { emit_assign(e, nullptr); }},
    {OpId::AssignAddVariable, "Add", "with `variables_as_inputs` only, as assign_variable",
     [](Emitter& e) { emit_assign(e, "Add"); }},
    {OpId::AssignSubVariable, "Sub", "with `variables_as_inputs` only, as assign_variable",
     [](Emitter& e) { emit_assign(e, "Sub"); }},
    {OpId::ApplyGradientDescent, "Mul, Sub", "with `variables_as_inputs` only: var - lr * grad, as assign_variable",
     emit_gradient_descent},
    {OpId::ApplyAdam, "Sub, Mul, Add, Sqrt, Div", "with `variables_as_inputs` only: m += (g - m) * (1 - beta1), "
     "v += (g^2 - v) * (1 - beta2), var -= m * alpha / (sqrt(v) + epsilon); the three as assign_variable",
     emit_adam},
    {OpId::ScatterAddVariable, "Cast, Unsqueeze, ScatterND (reduction add)",
     "with `variables_as_inputs` only: the rows named by the indices, as assign_variable; indices out of range are "
     "not checked", [](Emitter& e) { emit_scatter_variable(e, "add", false); }},
    {OpId::ScatterSubVariable, "Cast, Unsqueeze, Neg, ScatterND (reduction add)",
     "with `variables_as_inputs` only, as scatter_add_variable", [](Emitter& e) { emit_scatter_variable(e, "add", true); }},
    {OpId::ScatterUpdateVariable, "Cast, Unsqueeze, ScatterND",
     "with `variables_as_inputs` only, as scatter_add_variable (repeated indices are not checked)",
     [](Emitter& e) { emit_scatter_variable(e, nullptr, false); }},
    {OpId::Cond, "If", "then_branch, else_branch: the branches as sub-graphs, reading the values they capture from "
     "the enclosing graph by name; a cond without results writes no If (an effect in a branch is still refused)",
     emit_cond},
    {OpId::StatefulCond, "If", "as cond (its branches read Variables; a Variable write inside is refused)",
     emit_cond},
    {OpId::While, "Loop", "body: (iteration, cond, loop variables...) -> (the condition on the new values, the new "
     "values...); the condition also runs once before the Loop on the initial values; maximum_iterations -> M",
     emit_while},
    {OpId::StatefulWhile, "Loop", "as while (its sub-graphs read Variables; a Variable write inside is refused)",
     emit_while},
    {OpId::TensorArrayWrite, "ScatterND (after Shape, Concat, Gather, Reshape, Slice, Pad for an array that grows)",
     "the array's flow tensor (count, element...) with row `index` set; a dynamic array, or one nothing was written "
     "to, is padded with zero rows to max(size, rows, index + 1) first", emit_tensor_array_write},
    {OpId::TensorArrayRead, "Gather", "row `index` of the flow", [](Emitter& e) {
       set_attr(e.add("Gather", {e.in(0), e.in(1)}, {e.out(0)}), "axis", int64_t{0});
     }},
    {OpId::TensorArrayStack, "Identity (Shape, Slice, Reshape, Pad for an array that may be empty)",
     "the flow; an array nothing was written to as zeros of (size, element_shape); with an element shape not known "
     "when traced, a flow nothing was written to passes as its scalar (tracegraph raises there)",
     emit_tensor_array_stack},
};

#undef TG_ONNX_UNARY
#undef TG_ONNX_BINARY

}  // namespace

std::span<const OnnxRule> onnx_rules() { return kRules; }

const OnnxRule* onnx_rule(OpId op) {
  static const std::vector<const OnnxRule*> by_op = [] {
    std::vector<const OnnxRule*> v(kNumOps, nullptr);
    for (const OnnxRule& r : kRules) v[static_cast<std::size_t>(r.op)] = &r;
    return v;
  }();
  const auto k = static_cast<std::size_t>(op);
  return k < by_op.size() ? by_op[k] : nullptr;
}

const char* onnx_refusal(OpId op) {
  const uint32_t t = op_def(op).traits;
  if (t & kOptimizerOnly) return "made by the optimiser only; files and models hold graphs as traced";
  if (t & kWritesVariable)
    return "writes a Variable in a way the exporter does not write yet (with `variables_as_inputs` it writes "
           "assign, assign_add, assign_sub, apply_gradient_descent and apply_adam); export the inference function";
  if (t & kCreatesVariable) return "creates a Variable: an ONNX model has no state";
  if (t & kRandom) return "draws random numbers: ONNX's random ops give other numbers; export the inference function";
  if (t & kCollective) return "a collective of a distributed job: ONNX has none";
  if (op == OpId::HostCall) return "calls a host function (tf.py_function), which lives in this process only: compute it with tracegraph ops";
  if (t & kPrints) return "prints: ONNX has no side effects; remove tg::print from the function";
  return "";
}

}  // namespace tg::detail::onnx_export
