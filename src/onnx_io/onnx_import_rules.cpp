// The importer's op table: each ONNX op computed with tracegraph's ops, as the ONNX operator spec
// defines it for the opsets the importer reads (7-21). ONNX is channels-first (NCHW); tracegraph's
// convolution and pooling are NHWC, so those rules take their input channels-last and return
// their output channels-last (NodeContext::in_nhwc, mark_nhwc): the importer holds such values
// NHWC until a rule that is not layout-aware reads them (see onnx_import.h). Every attribute a rule
// does not read is refused by the importer, so an attribute with a meaning is never dropped.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "onnx_io/onnx_import.h"
#include "ops/conv.h"
#include "ops/known_values.h"
#include "ops/record_mode.h"
#include "tracegraph/control_flow.h"
#include "tracegraph/ops.h"

namespace tg::detail::onnx_import {

// ---- NodeContext's shared part --------------------------------------------------------------

int NodeContext::num_inputs() const {
  int n = node().input_size();
  while (n > 0 && node().input(n - 1).empty()) --n;
  return n;
}
bool NodeContext::has_input(int i) const { return i >= 0 && i < node().input_size() && !node().input(i).empty(); }
int NodeContext::num_outputs() const {
  int n = node().output_size();
  while (n > 0 && node().output(n - 1).empty()) --n;
  return n;
}

int64_t NodeContext::rank(int i) {
  const TensorShape s = shape_of(i);
  if (!s.has_rank()) refuse(str_cat("input ", i, " has an unknown rank, which this op needs; give the graph's inputs shapes"));
  return s.rank();
}
std::vector<int64_t> NodeContext::dims(int i) {
  rank(i);
  return shape_of(i).none_aware().dims();
}
bool NodeContext::input_read(int i) const {
  return std::find(read_inputs_.begin(), read_inputs_.end(), i) != read_inputs_.end();
}
bool NodeContext::marked_nhwc(int k) const {
  return std::find(nhwc_outputs_.begin(), nhwc_outputs_.end(), k) != nhwc_outputs_.end();
}

std::vector<int64_t> NodeContext::const_ints(int i, const char* what) {
  const Tensor t = in(i);
  if (t.dtype() != DType::Int64 && t.dtype() != DType::Int32)
    malformed(str_cat(what, " (input ", i, ") must be int64, not ", to_string(t.dtype())));
  if (!t.is_symbolic()) {
    if (t.shape().rank() > 1) malformed(str_cat(what, " (input ", i, ") must be a scalar or a 1-D tensor, not rank ", t.shape().rank()));
    return tg::cast(t, DType::Int64).to_vector<int64_t>();
  }
  // A symbolic value whose every element tracing knows (a shape of static dims): known elements
  // use -1 for "unknown", so only non-negative ones are taken as values.
  if (auto known = known_elements(t); known && std::all_of(known->begin(), known->end(), [](int64_t v) { return v >= 0; }))
    return *known;
  refuse(str_cat(what, " (input ", i, ") is computed when the graph runs; tracegraph needs it while importing (a "
                 "constant or an initializer). Export the model with constant ", what));
}

const onnx::AttributeProto* NodeContext::attr(const std::string& name, onnx::AttributeProto_AttributeType type) {
  for (const auto& a : node().attribute()) {
    if (a.name() != name) continue;
    used_.push_back(name);
    if (a.type() != type)
      malformed(str_cat("attribute '", name, "' has type ", onnx::AttributeProto_AttributeType_Name(a.type()), ", expected ",
                        onnx::AttributeProto_AttributeType_Name(type)));
    return &a;
  }
  return nullptr;
}
bool NodeContext::has_attr(const std::string& name) {
  for (const auto& a : node().attribute())
    if (a.name() == name) return true;
  return false;
}
int64_t NodeContext::attr_int(const std::string& name, int64_t fallback) {
  const auto* a = attr(name, onnx::AttributeProto::INT);
  return a ? a->i() : fallback;
}
float NodeContext::attr_float(const std::string& name, float fallback) {
  const auto* a = attr(name, onnx::AttributeProto::FLOAT);
  return a ? a->f() : fallback;
}
std::string NodeContext::attr_string(const std::string& name, const std::string& fallback) {
  const auto* a = attr(name, onnx::AttributeProto::STRING);
  return a ? a->s() : fallback;
}
std::vector<int64_t> NodeContext::attr_ints(const std::string& name, const std::vector<int64_t>& fallback) {
  const auto* a = attr(name, onnx::AttributeProto::INTS);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : fallback;
}
std::vector<float> NodeContext::attr_floats(const std::string& name) {
  const auto* a = attr(name, onnx::AttributeProto::FLOATS);
  return a ? std::vector<float>(a->floats().begin(), a->floats().end()) : std::vector<float>{};
}
void NodeContext::accept_attr(const std::string& name) { used_.push_back(name); }
const onnx::GraphProto* NodeContext::subgraph(const std::string& name) {
  const auto* a = attr(name, onnx::AttributeProto::GRAPH);
  return a ? &a->g() : nullptr;
}

void NodeContext::refuse(const std::string& why) const {
  throw ValueError(str_cat("[tg::import_onnx] ", where(), " cannot be imported: ", why,
                           ". docs/onnx.md lists what the importer reads"));
}
void NodeContext::malformed(const std::string& why) const {
  const std::string part = where();
  throw FormatError(str_cat("[tg::import_onnx] ", part, ": ", why), part, 0);
}

namespace {

using tg::abs, tg::add, tg::avg_pool2d, tg::cast, tg::ceil, tg::concat, tg::constant, tg::conv2d, tg::div, tg::equal,
    tg::erf, tg::exp, tg::expand_dims, tg::fill, tg::floor, tg::gather, tg::gelu, tg::greater, tg::greater_equal,
    tg::identity, tg::leaky_relu, tg::less, tg::less_equal, tg::log, tg::log_softmax, tg::logical_and,
    tg::logical_not, tg::logical_or, tg::matmul, tg::max_pool2d, tg::maximum, tg::minimum, tg::mod, tg::mul, tg::neg,
    tg::not_equal, tg::ones, tg::ones_like, tg::pad, tg::pow, tg::reduce_max, tg::reduce_mean, tg::reduce_min,
    tg::reduce_prod, tg::reduce_sum, tg::relu, tg::reshape, tg::rsqrt, tg::scatter_nd, tg::shape, tg::sigmoid, tg::size, tg::slice,
    tg::softmax, tg::split, tg::sqrt, tg::square, tg::squeeze, tg::stack, tg::sub, tg::tanh, tg::tensor_scatter_nd_add, tg::transpose, tg::where,
    tg::zeros, tg::zeros_like;

// ---- helpers ---------------------------------------------------------------------------------

// A tensor's dims with None as -1 (a rank the caller checked).
std::vector<int64_t> dims_of(const Tensor& t) { return t.shape().none_aware().dims(); }

bool is_float(DType d) { return d == DType::Float32 || d == DType::Float64; }

Tensor int64s(const std::vector<int64_t>& v) {
  return constant(v, TensorShape({static_cast<int64_t>(v.size())}), DType::Int64);
}

// An axis attribute or value in [-rank, rank) as a non-negative axis.
int64_t norm_axis(NodeContext& c, int64_t axis, int64_t rank, const char* what) {
  if (axis < -rank || axis >= rank) c.malformed(str_cat(what, " ", axis, " is out of range for rank ", rank));
  return axis < 0 ? axis + rank : axis;
}

// Dim `axis` of x as an int64 scalar: a constant when static, else read when the graph runs.
Tensor dim_value(const Tensor& x, int64_t axis) {
  const int64_t d = dims_of(x)[static_cast<std::size_t>(axis)];
  if (d >= 0) return constant(d, DType::Int64);
  return cast(shape(x)[axis], DType::Int64);
}

// ---- elementwise -----------------------------------------------------------------------------

template <Tensor (*F)(const Tensor&)>
std::vector<Tensor> unary(NodeContext& c) {
  return {F(c.in(0))};
}
template <Tensor (*F)(const Tensor&, const Tensor&)>
std::vector<Tensor> binary(NodeContext& c) {
  return {F(c.in(0), c.in(1))};
}

std::vector<Tensor> div_rule(NodeContext& c) {
  const Tensor a = c.in(0), b = c.in(1);
  if (is_float(a.dtype()) || a.dtype() != b.dtype()) return {div(a, b)};
  // ONNX's integer division truncates toward zero; tracegraph's rounds toward -inf.
  const Tensor q = div(a, b);
  const Tensor zero = zeros_like(b);
  const Tensor inexact = not_equal(mod(a, b), zero);
  const Tensor opposite = not_equal(less(a, zeros_like(a)), less(b, zero));
  return {where(logical_and(inexact, opposite), add(q, ones_like(q)), q)};
}

std::vector<Tensor> pow_rule(NodeContext& c) {
  const Tensor base = c.in(0);
  Tensor e = c.in(1);
  if (e.dtype() != base.dtype()) {
    if (!is_float(base.dtype()))
      c.refuse(str_cat("an integer base (", to_string(base.dtype()), ") with a ", to_string(e.dtype()),
                       " exponent is not computed; cast the base to float"));
    e = cast(e, base.dtype());
  }
  return {pow(base, e)};
}

std::vector<Tensor> variadic(NodeContext& c, Tensor (*f)(const Tensor&, const Tensor&)) {
  if (c.num_inputs() < 1) c.malformed("it has no inputs; it takes at least one");
  Tensor r = c.in(0);
  for (int i = 1; i < c.num_inputs(); ++i) r = f(r, c.in(i));
  return {r};
}
std::vector<Tensor> max_rule(NodeContext& c) { return variadic(c, maximum); }
std::vector<Tensor> min_rule(NodeContext& c) { return variadic(c, minimum); }
std::vector<Tensor> sum_rule(NodeContext& c) { return variadic(c, add); }

std::vector<Tensor> reciprocal(NodeContext& c) {
  const Tensor x = c.in(0);
  return {div(ones_like(x), x)};
}

std::vector<Tensor> gelu_rule(NodeContext& c) {
  const std::string approximate = c.attr_string("approximate", "none");
  if (approximate != "none" && approximate != "tanh") c.malformed(str_cat("approximate is '", approximate, "'; ONNX allows 'none' and 'tanh'"));
  return {gelu(c.in(0), approximate == "tanh")};
}

std::vector<Tensor> leaky_relu_rule(NodeContext& c) { return {leaky_relu(c.in(0), c.attr_float("alpha", 0.01f))}; }

std::vector<Tensor> clip_rule(NodeContext& c) {
  Tensor x = c.in(0);
  if (c.opset() < 11) {
    // Before opset 11 the bounds are attributes (defaults: the float range).
    const float lo = c.attr_float("min", std::numeric_limits<float>::lowest());
    const float hi = c.attr_float("max", std::numeric_limits<float>::max());
    return {minimum(maximum(x, cast(constant(lo), x.dtype())), cast(constant(hi), x.dtype()))};
  }
  if (c.has_input(1)) x = maximum(x, c.in(1));
  if (c.has_input(2)) x = minimum(x, c.in(2));
  return {x};
}

std::vector<Tensor> where_rule(NodeContext& c) { return {where(c.in(0), c.in(1), c.in(2))}; }

std::vector<Tensor> cast_rule(NodeContext& c) {
  const auto* to = c.attr("to", onnx::AttributeProto::INT);
  if (!to) c.malformed("it has no 'to' attribute");
  const std::optional<DType> d = dtype_of(static_cast<int>(to->i()));
  if (!d) c.refuse(str_cat("it casts to ", onnx_type_name(static_cast<int>(to->i())), ", a type tracegraph does not compute in"));
  // saturate (opset 19) only concerns float8 targets, which are refused above.
  c.accept_attr("saturate");
  return {cast(c.in(0), *d)};
}

std::vector<Tensor> identity_rule(NodeContext& c) { return {identity(c.in(0))}; }

std::vector<Tensor> dropout_rule(NodeContext& c) {
  const Tensor x = c.in(0);
  if (c.opset() < 12) {
    c.accept_attr("ratio");    // used only when training
    if (c.opset() < 7) c.accept_attr("is_test");
  } else {
    c.accept_attr("seed");     // used only when training
    if (c.has_input(2)) {
      const Tensor mode = c.in(2);
      if (mode.is_symbolic() || mode.dtype() != DType::Bool || mode.num_elements() != 1)
        c.refuse("its training_mode is not a constant false; the importer computes inference only");
      if (mode.to_vector<bool>()[0]) c.refuse("its training_mode is true; the importer computes inference only (export the model in eval mode)");
    }
  }
  std::vector<Tensor> out{identity(x)};
  if (c.num_outputs() > 1) out.push_back(cast(ones_like(x), DType::Bool));  // nothing is dropped
  return out;
}

// ---- matrix products -------------------------------------------------------------------------

std::vector<Tensor> matmul_rule(NodeContext& c) {
  Tensor a = c.in(0), b = c.in(1);
  const int64_t ra = c.rank(0), rb = c.rank(1);
  if (ra < 1 || rb < 1) c.malformed("MatMul's inputs must have rank 1 or more");
  // NumPy's rules for 1-D operands: a vector is a row (left) or a column (right), removed after.
  if (ra == 1) a = expand_dims(a, 0);
  if (rb == 1) b = expand_dims(b, 1);
  Tensor y = matmul(a, b);
  if (ra == 1) y = squeeze(y, {-2});
  if (rb == 1) y = squeeze(y, {-1});
  return {y};
}

// Gemm's alpha * product + beta * C.
std::vector<Tensor> gemm_tail(NodeContext& c, Tensor y, float alpha, float beta) {
  if (alpha != 1.0f) y = mul(y, cast(constant(alpha), y.dtype()));
  if (c.has_input(2) && beta != 0.0f) {
    Tensor bias = c.in(2);
    if (beta != 1.0f) bias = mul(bias, cast(constant(beta), bias.dtype()));
    y = add(y, bias);
  }
  return {y};
}

std::vector<Tensor> gemm_rule(NodeContext& c) {
  const Tensor a = c.in(0), b = c.in(1);
  if (c.rank(0) != 2 || c.rank(1) != 2) c.malformed("Gemm's A and B must be matrices (rank 2)");
  const bool ta = c.attr_int("transA", 0) != 0, tb = c.attr_int("transB", 0) != 0;
  const float alpha = c.attr_float("alpha", 1.0f), beta = c.attr_float("beta", 1.0f);
  if (c.opset() < 7) c.accept_attr("broadcast");
  // A transposed B known while importing (a Linear layer's weight, as PyTorch exports it) is
  // transposed once here: the product would copy it transposed on every call (mobilenet_v2's
  // 1280 x 1000 classifier: ~1.5 of 19 ms at batch 1).
  if (tb && !b.is_symbolic()) return gemm_tail(c, matmul(a, transpose(b, {1, 0}), ta, false), alpha, beta);
  return gemm_tail(c, matmul(a, b, ta, tb), alpha, beta);
}

// ---- convolution and pooling -----------------------------------------------------------------

// The window geometry of a Conv or pool node over a 4-D NCHW input, after auto_pad.
struct Window {
  std::vector<int64_t> kernel, strides, dilations;
  std::vector<int64_t> pads;  // top, left, bottom, right
  bool same_upper = false;    // tracegraph's Same padding does it (needs no static dims)
};

Window window_of(NodeContext& c, const std::vector<int64_t>& d, std::vector<int64_t> kernel, bool has_dilations) {
  Window w;
  if (kernel.size() != 2) c.refuse(str_cat("its window has ", kernel.size(), " spatial dims; the importer reads 2-D windows (NCHW inputs) only"));
  for (int64_t k : kernel)
    if (k < 1) c.malformed(str_cat("kernel size ", k, " is not positive"));
  w.kernel = kernel;
  w.strides = c.attr_ints("strides", {1, 1});
  w.dilations = has_dilations ? c.attr_ints("dilations", {1, 1}) : std::vector<int64_t>{1, 1};
  if (w.strides.size() != 2 || w.dilations.size() != 2) c.malformed("strides and dilations need one entry per spatial dim (2)");
  for (std::size_t i = 0; i < 2; ++i)
    if (w.strides[i] < 1 || w.dilations[i] < 1) c.malformed("strides and dilations must be positive");
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  const bool has_pads = c.has_attr("pads");
  w.pads = c.attr_ints("pads", {0, 0, 0, 0});
  if (w.pads.size() != 4) c.malformed(str_cat("pads has ", w.pads.size(), " entries; a 2-D window takes 4 (begin, begin, end, end)"));
  for (int64_t p : w.pads)
    if (p < 0) c.malformed(str_cat("pads holds ", p, "; pads are non-negative"));
  if (auto_pad == "NOTSET") return w;
  if (has_pads) c.malformed(str_cat("it has both pads and auto_pad ", auto_pad, "; ONNX allows one of them"));
  if (auto_pad == "VALID") return w;
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") c.malformed(str_cat("auto_pad '", auto_pad, "' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER"));
  if (auto_pad == "SAME_UPPER") {
    w.same_upper = true;
    return w;
  }
  // SAME_LOWER: the odd element of padding goes first, which needs the input's size (d: NCHW).
  for (std::size_t i = 0; i < 2; ++i) {
    const int64_t in = d[2 + i];
    if (in < 0) c.refuse("auto_pad SAME_LOWER over a spatial dim of unknown size is not computed; give the input static spatial dims");
    const int64_t out = (in + w.strides[i] - 1) / w.strides[i];
    const int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] + (w.kernel[i] - 1) * w.dilations[i] + 1 - in);
    w.pads[i] = total - total / 2;
    w.pads[2 + i] = total / 2;
  }
  return w;
}

bool any_pads(const Window& w) {
  return std::any_of(w.pads.begin(), w.pads.end(), [](int64_t p) { return p != 0; });
}

// Explicit pads that are what SAME_UPPER pads over the input's (static) spatial dims d: the
// convolution then pads inside its kernel instead of copying the input into a padded one.
bool pads_are_same(const Window& w, const std::vector<int64_t>& d) {
  for (std::size_t i = 0; i < 2; ++i) {
    const int64_t in = d[2 + i];
    if (in < 0) return false;
    const int64_t out = (in + w.strides[i] - 1) / w.strides[i];
    const int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] + (w.kernel[i] - 1) * w.dilations[i] + 1 - in);
    if (w.pads[i] != total / 2 || w.pads[2 + i] != total - total / 2) return false;
  }
  return true;
}

// NHWC x with the window's explicit pads added (value `fill`).
Tensor pad_nhwc(const Tensor& x, const Window& w, double fill) {
  return pad(x, {{0, 0}, {w.pads[0], w.pads[2]}, {w.pads[1], w.pads[3]}, {0, 0}}, PadMode::Constant, fill);
}

std::vector<Tensor> conv_rule(NodeContext& c) {
  const Tensor weight = c.in(1);
  if (c.rank(0) != 4 || c.rank(1) != 4)
    c.refuse(str_cat("it is a ", c.rank(0) - 2, "-D convolution; the importer reads 2-D ones (4-D NCHW input and weight)"));
  const std::vector<int64_t> wd = dims_of(weight);
  if (wd[2] < 0 || wd[3] < 0) c.refuse("its weight's kernel size is not known while importing; make the weight an initializer");
  std::vector<int64_t> kernel = c.attr_ints("kernel_shape", {wd[2], wd[3]});
  if (kernel != std::vector<int64_t>{wd[2], wd[3]})
    c.malformed(str_cat("kernel_shape (", kernel[0], ", ", kernel.size() > 1 ? kernel[1] : 0, ") is not the weight's (", wd[2], ", ", wd[3], ")"));
  const std::vector<int64_t> xd = c.dims(0);
  const Window w = window_of(c, xd, kernel, true);
  const int64_t group = c.attr_int("group", 1);
  const int64_t channels = xd[1];
  if (group < 1) c.malformed(str_cat("group is ", group));
  if (group > 1 && channels < 0) c.refuse("a grouped convolution over an unknown number of channels is not computed");
  if (channels >= 0 && wd[1] >= 0 && channels != wd[1] * group)
    c.malformed(str_cat("the input has ", channels, " channels but the weight takes ", wd[1], " per group in ", group, " groups"));
  if (wd[0] >= 0 && wd[0] % group != 0) c.malformed(str_cat("the weight's ", wd[0], " output channels do not split into ", group, " groups"));
  Tensor h = c.in_nhwc(0);
  Tensor filter = transpose(weight, {2, 3, 1, 0});  // (kh, kw, in / group, out)
  Padding padding = Padding::Valid;
  if (w.same_upper || (any_pads(w) && pads_are_same(w, xd))) padding = Padding::Same;
  else if (any_pads(w)) h = pad_nhwc(h, w, 0.0);
  // A grouped Conv is conv2d's grouped form as it stands (the weight's in_channels per group);
  // one channel per group runs the depthwise kernels.
  Tensor y = conv2d(h, filter, w.strides, padding, w.dilations);
  if (c.has_input(2)) y = add(y, c.in(2));
  c.mark_nhwc(0);
  return {y};
}

// ConvTranspose: conv2d_transpose onto the whole output (no pads, VALID), then the ONNX pads
// cropped off and output_padding added as zero rows/columns at the end where no window reaches.
std::vector<Tensor> conv_transpose_rule(NodeContext& c) {
  const Tensor weight = c.in(1);
  if (c.rank(0) != 4 || c.rank(1) != 4)
    c.refuse(str_cat("it is a ", c.rank(0) - 2, "-D transposed convolution; the importer reads 2-D ones (4-D NCHW input and weight)"));
  const std::vector<int64_t> wd = dims_of(weight), xd = c.dims(0);
  for (int64_t d : wd)
    if (d < 0) c.refuse("its weight's shape is not known while importing; make the weight an initializer");
  if (xd[2] < 0 || xd[3] < 0) c.refuse("its input's height and width are not known while importing; give them static sizes");
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER")
    c.refuse(str_cat("auto_pad ", auto_pad, " is not read for ConvTranspose; export it with explicit pads"));
  if (c.has_attr("output_shape")) c.refuse("output_shape is not read; export it with explicit pads and output_padding");
  const std::vector<int64_t> kernel = c.attr_ints("kernel_shape", {wd[2], wd[3]});
  if (kernel != std::vector<int64_t>{wd[2], wd[3]}) c.malformed("kernel_shape is not the weight's spatial shape");
  const Window w = window_of(c, xd, kernel, true);
  const int64_t group = c.attr_int("group", 1);
  if (group < 1) c.malformed(str_cat("group is ", group));
  if (xd[1] >= 0 && xd[1] != wd[0])
    c.malformed(str_cat("the input has ", xd[1], " channels but the weight's dim 0 is ", wd[0]));
  if (wd[0] % group != 0) c.malformed(str_cat("the weight's ", wd[0], " input channels do not split into ", group, " groups"));
  const std::vector<int64_t> output_padding = c.attr_ints("output_padding", {0, 0});
  if (output_padding.size() != 2) c.malformed("output_padding needs one entry per spatial dim (2)");
  std::vector<int64_t> full(2), out(2);
  for (std::size_t i = 0; i < 2; ++i) {
    if (output_padding[i] < 0) c.malformed("output_padding must be non-negative");
    full[i] = (xd[2 + i] - 1) * w.strides[i] + (w.kernel[i] - 1) * w.dilations[i] + 1;
    out[i] = full[i] - w.pads[i] - w.pads[2 + i] + output_padding[i];
    if (out[i] < 0) c.malformed(str_cat("its pads leave an output of size ", out[i]));
  }
  const Tensor filter = transpose(weight, {2, 3, 1, 0});  // (kh, kw, out / group, in)
  Tensor y = conv2d_transpose_grouped(c.in_nhwc(0), filter, {None, full[0], full[1], wd[1] * group},
                                      Conv2DAttrs{w.strides, w.dilations, static_cast<int64_t>(Padding::Valid)});
  const int64_t more_h = std::max<int64_t>(0, w.pads[0] + out[0] - full[0]);
  const int64_t more_w = std::max<int64_t>(0, w.pads[1] + out[1] - full[1]);
  if (more_h > 0 || more_w > 0) y = pad(y, {{0, 0}, {0, more_h}, {0, more_w}, {0, 0}}, PadMode::Constant, 0.0);
  y = slice(y, {0, w.pads[0], w.pads[1], 0}, {-1, out[0], out[1], -1});
  if (c.has_input(2)) y = add(y, c.in(2));
  c.mark_nhwc(0);
  return {y};
}

// ONNX's output size with ceil_mode must equal the floor one (tracegraph's windows never start
// past the input): checked on static dims.
void check_ceil_mode(NodeContext& c, const std::vector<int64_t>& d, const Window& w) {
  if (c.attr_int("ceil_mode", 0) == 0) return;
  if (w.same_upper) return;  // auto_pad SAME: ceil_mode does not change the output size
  for (std::size_t i = 0; i < 2; ++i) {
    const int64_t in = d[2 + i];
    if (in < 0) c.refuse("ceil_mode 1 over a spatial dim of unknown size is not computed; give the input static spatial dims");
    const int64_t span = in + w.pads[i] + w.pads[2 + i] - ((w.kernel[i] - 1) * w.dilations[i] + 1);
    if (span < 0) continue;  // the window does not fit: the pool op reports it
    if (span % w.strides[i] != 0)
      c.refuse(str_cat("ceil_mode 1 adds a partial window along spatial dim ", i, " (size ", in, "), which tracegraph's "
                       "pooling does not compute; export with ceil_mode=False or pad the input"));
  }
}

std::vector<Tensor> max_pool_rule(NodeContext& c) {
  if (c.rank(0) != 4) c.refuse("the importer reads 2-D pooling (4-D NCHW input) only");
  if (c.num_outputs() > 1) c.refuse("its Indices output is not computed; use the pooled values only");
  const auto* k = c.attr("kernel_shape", onnx::AttributeProto::INTS);
  if (!k) c.malformed("it has no kernel_shape");
  const std::vector<int64_t> xd = c.dims(0);
  const Window w = window_of(c, xd, {k->ints().begin(), k->ints().end()}, c.opset() >= 10);
  if (w.dilations != std::vector<int64_t>{1, 1}) c.refuse("dilated max pooling is not computed");
  check_ceil_mode(c, xd, w);
  c.accept_attr("storage_order");  // the layout of the Indices output, refused above
  Tensor h = c.in_nhwc(0);
  c.mark_nhwc(0);
  if (w.same_upper) return {max_pool2d(h, w.kernel, w.strides, Padding::Same)};
  // Padding never wins the max: -inf for floats (integers are refused by the pool op).
  if (any_pads(w)) h = pad_nhwc(h, w, -std::numeric_limits<double>::infinity());
  return {max_pool2d(h, w.kernel, w.strides, Padding::Valid)};
}

std::vector<Tensor> average_pool_rule(NodeContext& c) {
  if (c.rank(0) != 4) c.refuse("the importer reads 2-D pooling (4-D NCHW input) only");
  const auto* k = c.attr("kernel_shape", onnx::AttributeProto::INTS);
  if (!k) c.malformed("it has no kernel_shape");
  const std::vector<int64_t> d = c.dims(0);
  Window w = window_of(c, d, {k->ints().begin(), k->ints().end()}, c.opset() >= 19);
  if (w.dilations != std::vector<int64_t>{1, 1}) c.refuse("dilated average pooling is not computed");
  check_ceil_mode(c, d, w);
  const bool count_pads = c.attr_int("count_include_pad", 0) != 0;
  const Tensor h = c.in_nhwc(0);
  c.mark_nhwc(0);
  if (w.same_upper && !count_pads) return {avg_pool2d(h, w.kernel, w.strides, Padding::Same)};
  if (w.same_upper) {
    // Padded elements counted: explicit pads (which need the spatial dims).
    for (std::size_t i = 0; i < 2; ++i) {
      if (d[2 + i] < 0) c.refuse("count_include_pad with auto_pad SAME over a dim of unknown size is not computed");
      const int64_t out = (d[2 + i] + w.strides[i] - 1) / w.strides[i];
      const int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] + w.kernel[i] - d[2 + i]);
      w.pads[i] = total / 2;
      w.pads[2 + i] = total - total / 2;
    }
  }
  if (!any_pads(w)) return {avg_pool2d(h, w.kernel, w.strides, Padding::Valid)};
  const Tensor sums = avg_pool2d(pad_nhwc(h, w, 0.0), w.kernel, w.strides, Padding::Valid);
  if (count_pads) return {sums};
  // Only the input's elements counted: divide by the share of each window inside the input.
  const Tensor inside = avg_pool2d(pad_nhwc(ones_like(h), w, 0.0), w.kernel, w.strides, Padding::Valid);
  return {div(sums, inside)};
}

std::vector<Tensor> global_pool(NodeContext& c, Tensor (*reduce)(const Tensor&, std::vector<int>, bool)) {
  const int64_t r = c.rank(0);
  if (r < 3) c.malformed(str_cat("its input has rank ", r, "; it needs (N, C, spatial...)"));
  if (c.held_nhwc(0)) {
    c.mark_nhwc(0);
    return {reduce(c.in_nhwc(0), {1, 2}, true)};  // (N, 1, 1, C)
  }
  std::vector<int> axes;
  for (int64_t a = 2; a < r; ++a) axes.push_back(static_cast<int>(a));
  return {reduce(c.in(0), axes, true)};
}
std::vector<Tensor> global_average_pool(NodeContext& c) { return global_pool(c, reduce_mean); }
std::vector<Tensor> global_max_pool(NodeContext& c) { return global_pool(c, reduce_max); }

// ---- normalisation ---------------------------------------------------------------------------

// A per-channel vector (C,) shaped to broadcast over NCHW... (C, 1, ..., 1).
Tensor per_channel(const Tensor& v, int64_t rank) {
  std::vector<int64_t> s(static_cast<std::size_t>(std::max<int64_t>(rank - 1, 1)), 1);
  s[0] = -1;
  return reshape(v, s);
}

std::vector<Tensor> batch_norm_rule(NodeContext& c) {
  const int64_t r = c.rank(0);
  if (r < 2) c.malformed(str_cat("its input has rank ", r, "; it needs (N, C, ...)"));
  if (c.num_outputs() > 1) c.refuse("it asks for the running statistics, which only training computes; export in eval mode");
  if (c.opset() >= 14 && c.attr_int("training_mode", 0) != 0)
    c.refuse("training_mode is 1; the importer computes inference only (export the model in eval mode)");
  if (c.opset() < 9 && c.attr_int("spatial", 1) != 1) c.refuse("spatial 0 (per-element statistics) is not computed");
  if (c.opset() < 7) c.accept_attr("is_test");
  c.accept_attr("momentum");  // updates the running statistics in training only
  const double eps = c.attr_float("epsilon", 1e-5f);
  // Channels-last: the (C,) vectors broadcast over the last axis as they are.
  const bool nhwc = r == 4 && c.held_nhwc(0);
  const int64_t vr = nhwc ? 2 : r;
  const Tensor x = nhwc ? c.in_nhwc(0) : c.in(0);
  const Tensor scale = per_channel(c.in(1), vr), bias = per_channel(c.in(2), vr);
  const Tensor mean = per_channel(c.in(3), vr), var = per_channel(c.in(4), vr);
  const Tensor factor = mul(scale, rsqrt(add(var, cast(constant(eps), var.dtype()))));
  if (nhwc) c.mark_nhwc(0);
  return {add(mul(sub(x, mean), factor), bias)};
}

std::vector<Tensor> layer_norm_rule(NodeContext& c) {
  Tensor x = c.in(0);
  const int64_t r = c.rank(0);
  const int64_t axis = norm_axis(c, c.attr_int("axis", -1), r, "axis");
  const double eps = c.attr_float("epsilon", 1e-5f);
  if (c.attr_int("stash_type", 1) != 1)
    c.refuse("stash_type is not 1 (float32 statistics); only float32 statistics are computed");
  if (c.num_outputs() > 1) c.refuse("its Mean and InvStdDev outputs are not computed; use Y only");
  const DType dtype = x.dtype();
  if (!is_float(dtype)) c.malformed(str_cat("its input is ", to_string(dtype), "; LayerNormalization takes floats"));
  // stash_type 1: the statistics in float32 whatever the input's type.
  const Tensor xs = cast(x, DType::Float32);
  std::vector<int> axes;
  for (int64_t a = axis; a < r; ++a) axes.push_back(static_cast<int>(a));
  const Tensor mean = reduce_mean(xs, axes, true);
  const Tensor centred = sub(xs, mean);
  const Tensor inv = rsqrt(add(reduce_mean(square(centred), axes, true), constant(static_cast<float>(eps))));
  Tensor y = cast(mul(centred, inv), dtype);
  y = mul(y, c.in(1));
  if (c.has_input(2)) y = add(y, c.in(2));
  return {y};
}

std::vector<Tensor> softmax_like(NodeContext& c, Tensor (*f)(const Tensor&, int)) {
  const Tensor x = c.in(0);
  const int64_t r = c.rank(0);
  if (c.opset() >= 13) return {f(x, static_cast<int>(norm_axis(c, c.attr_int("axis", -1), r, "axis")))};
  // Before opset 13: the input as a matrix (dims before axis, dims from axis), over its rows.
  const int64_t axis = r == 0 ? 0 : norm_axis(c, c.attr_int("axis", 1), r, "axis");
  if (axis == r - 1 || r == 0) return {f(x, -1)};
  const Tensor s = cast(shape(x), DType::Int64);
  const Tensor rows = reduce_prod(slice(s, {0}, {axis}), {}, false);
  const Tensor m = reshape(x, stack({rows, constant(int64_t{-1})}));
  return {reshape(f(m, -1), s)};
}
std::vector<Tensor> softmax_rule(NodeContext& c) { return softmax_like(c, softmax); }
std::vector<Tensor> log_softmax_rule(NodeContext& c) { return softmax_like(c, log_softmax); }

// ---- reductions ------------------------------------------------------------------------------

// The NHWC axis of NCHW axis a.
int nhwc_axis(int a) { return a == 0 ? 0 : a == 1 ? 3 : a - 1; }

std::vector<Tensor> reduce(NodeContext& c, Tensor (*f)(const Tensor&, std::vector<int>, bool), int64_t axes_input_since) {
  const int64_t r = c.rank(0);
  const bool nhwc = r == 4 && c.held_nhwc(0);
  const bool keepdims = c.attr_int("keepdims", 1) != 0;
  std::vector<int64_t> axes;
  bool noop = false;
  if (c.opset() >= axes_input_since) {
    noop = c.attr_int("noop_with_empty_axes", 0) != 0;
    if (c.has_input(1)) axes = c.const_ints(1, "the axes");
  } else {
    // Before the opset that made the axes an input they are an attribute; a second input then has
    // no meaning and reducing over every axis instead would be a wrong result.
    if (c.num_inputs() > 1)
      c.malformed(str_cat("it has ", c.num_inputs(), " inputs; before opset ", axes_input_since,
                          " it takes one and reads its axes from the attribute 'axes'"));
    axes = c.attr_ints("axes", {});
  }
  if (axes.empty() && noop) {
    if (!nhwc) return {identity(c.in(0))};
    c.mark_nhwc(0);
    return {identity(c.in_nhwc(0))};
  }
  std::vector<int> a;
  for (int64_t v : axes) {
    const int ax = static_cast<int>(norm_axis(c, v, r, "axis"));
    if (std::find(a.begin(), a.end(), ax) != a.end()) c.malformed(str_cat("axis ", v, " appears twice"));
    a.push_back(ax);
  }
  if (a.empty())
    for (int64_t k = 0; k < r; ++k) a.push_back(static_cast<int>(k));
  if (!nhwc) return {f(c.in(0), a, keepdims)};
  // Channels-last: the axes mapped; kept dims stay NHWC, else the dims left are put in NCHW order.
  std::vector<int> mapped;
  for (int ax : a) mapped.push_back(nhwc_axis(ax));
  Tensor y = f(c.in_nhwc(0), mapped, keepdims);
  if (keepdims) {
    c.mark_nhwc(0);
    return {y};
  }
  std::vector<int> left;  // the NHWC axes left, in NHWC order
  for (int k = 0; k < 4; ++k)
    if (std::find(mapped.begin(), mapped.end(), k) == mapped.end()) left.push_back(k);
  std::vector<int> perm;  // for each NCHW axis left (in order), its position in y
  for (int k = 0; k < 4; ++k)
    if (std::find(a.begin(), a.end(), k) == a.end())
      perm.push_back(static_cast<int>(std::find(left.begin(), left.end(), nhwc_axis(k)) - left.begin()));
  if (!std::is_sorted(perm.begin(), perm.end())) y = transpose(y, perm);
  return {y};
}
std::vector<Tensor> reduce_mean_rule(NodeContext& c) { return reduce(c, reduce_mean, 18); }
std::vector<Tensor> reduce_sum_rule(NodeContext& c) { return reduce(c, reduce_sum, 13); }
std::vector<Tensor> reduce_max_rule(NodeContext& c) { return reduce(c, reduce_max, 18); }
std::vector<Tensor> reduce_min_rule(NodeContext& c) { return reduce(c, reduce_min, 18); }
std::vector<Tensor> reduce_prod_rule(NodeContext& c) { return reduce(c, reduce_prod, 18); }

// ---- shapes ----------------------------------------------------------------------------------

std::vector<Tensor> shape_rule(NodeContext& c) {
  const int64_t r = c.rank(0);
  int64_t start = 0, end = r;
  if (c.opset() >= 15) {
    // Out-of-range start and end are clamped (not an error), negative ones count from the end.
    start = c.attr_int("start", 0);
    end = c.attr_int("end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = std::clamp<int64_t>(start, 0, r);
    end = std::clamp<int64_t>(end, 0, r);
  }
  const int64_t n = std::max<int64_t>(0, end - start);
  const std::vector<int64_t> d = c.dims(0);
  if (std::all_of(d.begin() + start, d.begin() + start + n, [](int64_t v) { return v >= 0; }))
    return {int64s(std::vector<int64_t>(d.begin() + start, d.begin() + start + n))};
  // A channels-last input's dims read in NCHW order.
  const Tensor s = c.held_nhwc(0) ? gather(cast(shape(c.in_nhwc(0)), DType::Int64), int64s({0, 3, 1, 2}))
                                  : cast(shape(c.in(0)), DType::Int64);
  return {slice(s, {start}, {n})};
}

std::vector<Tensor> size_rule(NodeContext& c) { return {cast(size(c.in(0)), DType::Int64)}; }

std::vector<Tensor> reshape_rule(NodeContext& c) {
  const Tensor x = c.in(0);
  const bool allow_zero = c.opset() >= 14 && c.attr_int("allowzero", 0) != 0;
  const Tensor s = c.in(1);
  if (s.dtype() != DType::Int64) c.malformed(str_cat("its shape is ", to_string(s.dtype()), "; ONNX's is int64"));
  if (!s.shape().has_rank() || s.shape().rank() != 1) c.malformed("its shape input is not a 1-D tensor");
  if (allow_zero) return {reshape(x, s)};
  // allowzero 0: a 0 copies the input's dim at that position.
  const int64_t rx = x.shape().has_rank() ? x.shape().rank() : -1;
  const std::vector<int64_t> dx = rx >= 0 ? dims_of(x) : std::vector<int64_t>{};
  if (!s.is_symbolic()) {
    std::vector<int64_t> target = s.to_vector<int64_t>();
    std::vector<Tensor> parts;
    bool static_target = true;
    for (std::size_t k = 0; k < target.size(); ++k) {
      if (target[k] == 0) {
        if (static_cast<int64_t>(k) >= rx) c.malformed(str_cat("its shape copies dim ", k, " (a 0) of an input of rank ", rx));
        target[k] = dx[k];
        static_target &= dx[k] >= 0;
      }
      parts.push_back(target[k] >= 0 || s.to_vector<int64_t>()[k] != 0 ? constant(target[k], DType::Int64)
                                                                          : dim_value(x, static_cast<int64_t>(k)));
    }
    return {static_target ? reshape(x, target) : reshape(x, stack(parts))};
  }
  // A shape computed when the graph runs: an element that may be 0 becomes the input's dim there.
  const std::optional<std::vector<int64_t>> known = known_elements(s);
  if (!known) c.refuse("its shape has a length known only when the graph runs; give it a static length");
  std::vector<Tensor> parts;
  for (std::size_t k = 0; k < known->size(); ++k) {
    const int64_t v = (*known)[k];
    const Tensor element = s[static_cast<int64_t>(k)];  // x[i] keeps what tracing knows of it
    if (v > 0 || static_cast<int64_t>(k) >= rx) {  // past the input's rank a 0 is the spec's error
      parts.push_back(element);
      continue;
    }
    const Tensor d = dim_value(x, static_cast<int64_t>(k));
    parts.push_back(v == 0 ? d : where(equal(element, zeros_like(element)), d, element));
  }
  if (parts.empty()) return {reshape(x, s)};
  return {reshape(x, stack(parts))};
}

std::vector<Tensor> flatten_rule(NodeContext& c) {
  const Tensor x = c.in(0);
  const int64_t r = c.rank(0);
  int64_t axis = c.attr_int("axis", 1);
  if (axis < -r || axis > r) c.malformed(str_cat("axis ", axis, " is out of range for rank ", r));
  if (axis < 0) axis += r;
  const std::vector<int64_t> d = dims_of(x);
  auto product = [&](int64_t from, int64_t to) {
    int64_t p = 1;
    for (int64_t i = from; i < to; ++i) {
      if (d[static_cast<std::size_t>(i)] < 0) return int64_t{-1};
      p *= d[static_cast<std::size_t>(i)];
    }
    return p;
  };
  const int64_t outer = product(0, axis), inner = product(axis, r);
  if (outer >= 0 && inner >= 0) return {reshape(x, {outer, inner})};
  if (inner > 0) return {reshape(x, {-1, inner})};
  if (outer > 0) return {reshape(x, {outer, -1})};
  const Tensor s = cast(shape(x), DType::Int64);
  return {reshape(x, stack({reduce_prod(slice(s, {0}, {axis}), {}, false), reduce_prod(slice(s, {axis}, {r - axis}), {}, false)}))};
}

std::vector<Tensor> transpose_rule(NodeContext& c) {
  const int64_t r = c.rank(0);
  std::vector<int64_t> perm = c.attr_ints("perm", {});
  if (perm.empty())
    for (int64_t k = r - 1; k >= 0; --k) perm.push_back(k);
  if (static_cast<int64_t>(perm.size()) != r) c.malformed(str_cat("perm has ", perm.size(), " entries for rank ", r));
  std::vector<int> p;
  for (int64_t v : perm) p.push_back(static_cast<int>(norm_axis(c, v, r, "perm entry")));
  return {transpose(c.in(0), p)};
}

// Axes from the opset-13 input form or the older attribute.
std::vector<int64_t> axes_of(NodeContext& c, bool required) {
  if (c.opset() >= 13) {
    if (c.has_input(1)) return c.const_ints(1, "the axes");
    if (required) c.malformed("it has no axes input");
    return {};
  }
  if (required && !c.has_attr("axes")) c.malformed("it has no axes attribute");
  return c.attr_ints("axes", {});
}

std::vector<Tensor> squeeze_rule(NodeContext& c) {
  const Tensor x = c.in(0);
  const int64_t r = c.rank(0);
  const std::vector<int64_t> axes = axes_of(c, false);
  std::vector<int> a;
  const std::vector<int64_t> d = dims_of(x);
  if (axes.empty()) {
    for (int64_t k = 0; k < r; ++k) {
      if (d[static_cast<std::size_t>(k)] < 0) c.refuse("it squeezes every size-1 dim of an input with unknown dims; give the axes");
      if (d[static_cast<std::size_t>(k)] == 1) a.push_back(static_cast<int>(k));
    }
    if (a.empty()) return {identity(x)};
  }
  for (int64_t v : axes) a.push_back(static_cast<int>(norm_axis(c, v, r, "axis")));
  // One element of a shape computation: x[0] keeps what tracing knows of it.
  if (r == 1 && a == std::vector<int>{0} && x.is_symbolic() && !is_float(x.dtype()) && d[0] == 1) return {x[0]};
  return {squeeze(x, a)};
}

std::vector<Tensor> unsqueeze_rule(NodeContext& c) {
  Tensor x = c.in(0);
  const int64_t r = c.rank(0);
  std::vector<int64_t> axes = axes_of(c, true);
  const int64_t out_rank = r + static_cast<int64_t>(axes.size());
  for (int64_t& v : axes) v = norm_axis(c, v, out_rank, "axis");
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) c.malformed("an axis appears twice");
  // A scalar of a shape computation: stack keeps what tracing knows of it (expand_dims would not).
  if (r == 0 && axes == std::vector<int64_t>{0} && x.is_symbolic() && !is_float(x.dtype())) return {stack({x})};
  for (int64_t v : axes) x = expand_dims(x, static_cast<int>(v));
  return {x};
}

std::vector<Tensor> concat_rule(NodeContext& c) {
  if (c.num_inputs() < 1) c.malformed("it has no inputs");
  const auto* axis = c.attr("axis", onnx::AttributeProto::INT);
  if (!axis && c.opset() >= 4) c.malformed("it has no axis attribute");
  std::vector<Tensor> values;
  const int64_t r = c.rank(0);
  const int a = static_cast<int>(norm_axis(c, axis ? axis->i() : 1, r, "axis"));
  // Channels-last when an input is held so and every input is 4-D: the axis mapped.
  bool nhwc = false, all4 = true;
  for (int i = 0; i < c.num_inputs(); ++i) {
    nhwc = nhwc || c.held_nhwc(i);
    all4 = all4 && c.shape_of(i).has_rank() && c.shape_of(i).rank() == 4;
  }
  if (nhwc && all4) {
    for (int i = 0; i < c.num_inputs(); ++i) values.push_back(c.in_nhwc(i));
    c.mark_nhwc(0);
    return {concat(values, nhwc_axis(a))};
  }
  for (int i = 0; i < c.num_inputs(); ++i) values.push_back(c.in(i));
  return {concat(values, a)};
}

std::vector<Tensor> slice_rule(NodeContext& c) {
  Tensor x = c.in(0);
  const int64_t r = c.rank(0);
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset() >= 10) {
    starts = c.const_ints(1, "the starts");
    ends = c.const_ints(2, "the ends");
    if (c.has_input(3)) axes = c.const_ints(3, "the axes");
    if (c.has_input(4)) steps = c.const_ints(4, "the steps");
  } else {
    starts = c.attr_ints("starts", {});
    ends = c.attr_ints("ends", {});
    axes = c.attr_ints("axes", {});
  }
  if (starts.size() != ends.size()) c.malformed("starts and ends differ in length");
  if (axes.empty())
    for (std::size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) c.malformed("starts, ends, axes and steps differ in length");
  const std::vector<int64_t> d = dims_of(x);
  std::vector<int64_t> begin(static_cast<std::size_t>(r), 0), size(static_cast<std::size_t>(r), -1);
  std::vector<bool> seen(static_cast<std::size_t>(r), false);
  std::vector<std::pair<int64_t, Tensor>> strided;  // (axis, indices) gathered after the slice
  for (std::size_t k = 0; k < starts.size(); ++k) {
    const int64_t axis = norm_axis(c, axes[k], r, "axis");
    if (seen[static_cast<std::size_t>(axis)]) c.malformed(str_cat("axis ", axes[k], " appears twice"));
    seen[static_cast<std::size_t>(axis)] = true;
    const int64_t step = steps[k];
    if (step == 0) c.malformed("a step is 0");
    const int64_t dim = d[static_cast<std::size_t>(axis)];
    int64_t start = starts[k], end = ends[k];
    if (dim < 0) {
      // An unknown dim: only "from a non-negative start to the end" is computed without it.
      if (step == 1 && start >= 0 && end >= std::numeric_limits<int32_t>::max()) {
        begin[static_cast<std::size_t>(axis)] = start;
        continue;
      }
      c.refuse(str_cat("it slices dim ", axis, ", whose size is unknown while importing, with start ", start, ", end ", end,
                       " and step ", step, "; only [start:] with start >= 0 is computed on such a dim"));
    }
    // The spec's clamping: negative values count from the end; then into [0, dim] (step > 0)
    // or [-1, dim - 1] (step < 0).
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    // The count of positions, computed without overflow for any step (INT64_MIN included).
    const uint64_t stride = step > 0 ? static_cast<uint64_t>(step) : uint64_t{0} - static_cast<uint64_t>(step);
    int64_t n;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      n = end > start ? static_cast<int64_t>((static_cast<uint64_t>(end - start) - 1) / stride + 1) : 0;
    } else {
      start = std::clamp<int64_t>(start, -1, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      n = start > end ? static_cast<int64_t>((static_cast<uint64_t>(start - end) - 1) / stride + 1) : 0;
    }
    if (step == 1) {
      begin[static_cast<std::size_t>(axis)] = start;
      size[static_cast<std::size_t>(axis)] = n;
    } else {
      // The positions as a range node of the graph, made when it runs: a declared dim of any
      // size costs nothing while importing (a host vector of 2^28 positions did). Its limit is
      // one past the last position (within [0, dim - 1]), or the start when there is none.
      const int64_t limit = n == 0 ? start : start + (n - 1) * step + (step > 0 ? 1 : -1);
      RecordEveryOpScope in_graph(true);
      strided.emplace_back(axis, range(constant(start), constant(limit), constant(step)));
    }
  }
  x = slice(x, begin, size);
  for (const auto& s : strided) x = gather(x, s.second, static_cast<int>(s.first));
  return {x};
}

std::vector<Tensor> gather_rule(NodeContext& c) {
  const Tensor x = c.in(0);
  Tensor idx = c.in(1);
  const int64_t r = c.rank(0);
  const int64_t axis = norm_axis(c, c.attr_int("axis", 0), r, "axis");
  if (idx.dtype() != DType::Int64 && idx.dtype() != DType::Int32)
    c.malformed(str_cat("its indices are ", to_string(idx.dtype()), "; ONNX's are int32 or int64"));
  // Negative indices count from the end of the axis (tracegraph's gather refuses them).
  const int64_t dim = dims_of(x)[static_cast<std::size_t>(axis)];
  if (!idx.is_symbolic() && dim >= 0) {
    std::vector<int64_t> v = cast(idx, DType::Int64).to_vector<int64_t>();
    for (int64_t& i : v) {
      if (i < -dim || i >= dim) c.malformed(str_cat("index ", i, " is out of range for a dim of size ", dim));
      if (i < 0) i += dim;
    }
    // Elements of a shape vector: x[i] keeps what tracing knows of them (gather would not).
    if (r == 1 && x.is_symbolic() && idx.shape().rank() <= 1 && (x.dtype() == DType::Int64 || x.dtype() == DType::Int32)) {
      std::vector<Tensor> picked;
      for (int64_t i : v) picked.push_back(x[i]);
      if (idx.shape().rank() == 0) return {picked[0]};
      if (!picked.empty()) return {stack(picked)};
    }
    idx = constant(v, idx.shape(), DType::Int64);
  } else {
    const Tensor d = cast(dim_value(x, axis), idx.dtype());
    idx = where(less(idx, zeros_like(idx)), add(idx, d), idx);
  }
  return {gather(x, idx, static_cast<int>(axis))};
}

// ScatterND: data with updates at the index tuples of indices' last dim (negative entries count
// from the end of their dim); reduction none replaces (repeated tuples are undefined in ONNX),
// add adds (tensor_scatter_nd_add).
std::vector<Tensor> scatter_nd_rule(NodeContext& c) {
  const Tensor data = c.in(0), updates = c.in(2);
  Tensor idx = c.in(1);
  if (idx.dtype() != DType::Int64) c.malformed(str_cat("its indices are ", to_string(idx.dtype()), "; ONNX's are int64"));
  const int64_t ri = c.rank(1);
  const int64_t rd = c.rank(0);
  const int64_t k = ri > 0 ? dims_of(idx)[static_cast<std::size_t>(ri - 1)] : -1;
  if (k < 0) c.refuse("the length of its index tuples (the indices' last dim) is not known while importing");
  if (k > rd) c.malformed(str_cat("its index tuples have ", k, " entries for data of rank ", rd));
  const std::string reduction = c.attr_string("reduction", "none");
  if (reduction != "none" && reduction != "add")
    c.refuse(str_cat("reduction '", reduction, "' is not computed (none and add are)"));
  if (k > 0) {
    const Tensor dims = slice(cast(shape(data), DType::Int64), {0}, {k});
    idx = where(less(idx, zeros_like(idx)), add(idx, dims), idx);
  }
  if (reduction == "add") return {tensor_scatter_nd_add(data, idx, updates)};
  const Tensor where_written = scatter_nd(idx, ones_like(updates), shape(data));
  return {where(greater(where_written, zeros_like(where_written)), scatter_nd(idx, updates, shape(data)), data)};
}

std::vector<Tensor> expand_rule(NodeContext& c) {
  const Tensor x = c.in(0), s = c.in(1);
  if (s.dtype() != DType::Int64) c.malformed(str_cat("its shape is ", to_string(s.dtype()), "; ONNX's is int64"));
  // Broadcasting both ways (a 1 in the shape keeps x's dim): x combined with a neutral tensor of
  // the shape.
  if (x.dtype() == DType::Bool) return {logical_or(x, zeros(s, DType::Bool))};
  if (x.dtype() == DType::String) c.refuse("expanding a string tensor is not computed");
  return {mul(x, ones(s, x.dtype()))};
}

std::vector<Tensor> constant_rule(NodeContext& c) {
  if (c.has_attr("value")) return {c.attr_tensor("value")};
  if (const auto* a = c.attr("value_float", onnx::AttributeProto::FLOAT)) return {constant(a->f())};
  if (const auto* a = c.attr("value_int", onnx::AttributeProto::INT)) return {constant(a->i(), DType::Int64)};
  if (const auto* a = c.attr("value_floats", onnx::AttributeProto::FLOATS))
    return {constant(std::vector<float>(a->floats().begin(), a->floats().end()), TensorShape({a->floats_size()}), DType::Float32)};
  if (const auto* a = c.attr("value_ints", onnx::AttributeProto::INTS))
    return {int64s(std::vector<int64_t>(a->ints().begin(), a->ints().end()))};
  if (c.has_attr("sparse_value")) c.refuse("sparse constants are not read; store it dense");
  if (c.has_attr("value_string") || c.has_attr("value_strings")) c.refuse("string constants are not read");
  c.malformed("it has no value attribute");
}

std::vector<Tensor> constant_of_shape_rule(NodeContext& c) {
  const Tensor s = c.in(0);
  if (s.dtype() != DType::Int64) c.malformed(str_cat("its shape is ", to_string(s.dtype()), "; ONNX's is int64"));
  Tensor value = constant(0.0f);
  if (c.has_attr("value")) {
    value = c.attr_tensor("value");
    if (value.num_elements() != 1) c.malformed(str_cat("its value holds ", value.num_elements(), " elements; it must hold one"));
    value = reshape(value, std::vector<int64_t>{});
  }
  return {fill(s, value)};
}

std::vector<Tensor> pad_rule(NodeContext& c) {
  const Tensor x = c.in(0);
  const int64_t r = c.rank(0);
  const std::string mode = c.attr_string("mode", "constant");
  std::vector<int64_t> pads;
  double value = 0.0;
  std::vector<int64_t> axes;
  if (c.opset() >= 11) {
    pads = c.const_ints(1, "the pads");
    if (c.has_input(2)) {
      const Tensor v = c.in(2);
      if (v.is_symbolic() || v.num_elements() != 1) c.refuse("its constant_value is not a constant scalar");
      value = cast(v, DType::Float64).to_vector<double>()[0];
    }
    if (c.has_input(3)) axes = c.const_ints(3, "the axes");
  } else {
    pads = c.attr_ints(c.opset() >= 2 ? "pads" : "paddings", {});
    value = c.attr_float("value", 0.0f);
  }
  if (axes.empty())
    for (int64_t k = 0; k < r; ++k) axes.push_back(k);
  if (pads.size() != 2 * axes.size()) c.malformed(str_cat("pads has ", pads.size(), " entries for ", axes.size(), " axes"));
  std::vector<std::pair<int64_t, int64_t>> paddings(static_cast<std::size_t>(r), {0, 0});
  for (std::size_t k = 0; k < axes.size(); ++k) {
    const int64_t a = norm_axis(c, axes[k], r, "axis");
    const int64_t before = pads[k], after = pads[k + axes.size()];
    if (before < 0 || after < 0) c.refuse("negative pads (cropping) are not computed; use Slice");
    paddings[static_cast<std::size_t>(a)] = {before, after};
  }
  if (mode == "constant") return {pad(x, paddings, PadMode::Constant, value)};
  if (mode == "reflect") return {pad(x, paddings, PadMode::Reflect)};
  if (mode == "edge" || mode == "wrap") c.refuse(str_cat("mode '", mode, "' is not computed (constant and reflect are)"));
  c.malformed(str_cat("mode '", mode, "' is not an ONNX padding mode"));
}

std::vector<Tensor> not_rule(NodeContext& c) { return {logical_not(c.in(0))}; }
std::vector<Tensor> less_equal_rule(NodeContext& c) { return {less_equal(c.in(0), c.in(1))}; }
std::vector<Tensor> greater_equal_rule(NodeContext& c) { return {greater_equal(c.in(0), c.in(1))}; }

// ---- control flow --------------------------------------------------------------------------

// Input i as the scalar of `dtype` that If's and Loop's condition and trip count are (ONNX
// allows a one-element tensor of any rank).
Tensor scalar_input(NodeContext& c, int i, DType dtype, const char* what) {
  const Tensor t = c.in(i);
  if (t.dtype() != dtype) c.malformed(str_cat(what, " (input ", i, ") must be ", to_string(dtype), ", not ", to_string(t.dtype())));
  const TensorShape& s = t.shape();
  if (s.has_rank() && s.rank() == 0) return t;
  if (s.is_fully_defined() && s.num_elements() != 1)
    c.malformed(str_cat(what, " (input ", i, ") must hold one element, not shape ", s.to_string()));
  return reshape(t, std::vector<int64_t>{});
}

// A sub-graph result that is a one-element bool (the body's condition) as a scalar.
Tensor scalar_result(NodeContext& c, const Tensor& t, const char* what) {
  if (t.dtype() != DType::Bool) c.malformed(str_cat(what, " must be bool, not ", to_string(t.dtype())));
  const TensorShape& s = t.shape();
  if (s.has_rank() && s.rank() == 0) return t;
  if (s.is_fully_defined() && s.num_elements() != 1) c.malformed(str_cat(what, " must hold one element, not shape ", s.to_string()));
  return reshape(t, std::vector<int64_t>{});
}

std::vector<Tensor> if_rule(NodeContext& c) {
  const onnx::GraphProto* then_branch = c.subgraph("then_branch");
  const onnx::GraphProto* else_branch = c.subgraph("else_branch");
  if (!then_branch || !else_branch) c.malformed("it needs both graph attributes then_branch and else_branch");
  if (then_branch->output_size() != else_branch->output_size())
    c.malformed(str_cat("then_branch returns ", then_branch->output_size(), " values and else_branch ",
                        else_branch->output_size(), "; both return one value per output of the If"));
  if (c.node().output_size() > then_branch->output_size())
    c.malformed(str_cat("it has ", c.node().output_size(), " outputs but its branches return ", then_branch->output_size()));
  const Tensor pred = scalar_input(c, 0, DType::Bool, "the condition");
  // A condition known while importing (a constant) imports the branch it takes only.
  return detail::cond_flat(pred, [&] { return c.run_subgraph("then_branch", {}); },
                           [&] { return c.run_subgraph("else_branch", {}); });
}

// What a Loop learns about its loop across the traces of one import: a loop-carried value whose
// shape an iteration changes is traced again with the changed dims None, and a scan output whose
// dtype the body's declaration does not give is traced again with the dtype the body computes.
// Kept per node, so that a Loop in a body traced again starts from what it learned.
struct LoopMemo {
  std::vector<TensorShape> carried;
  std::vector<DType> scans;
  std::vector<TensorShape> scan_shapes;  // what the body computes (or declares) per scan output
};
// Thrown out of a Loop body traced with shapes or dtypes it does not keep (caught by its rule).
struct RetraceLoop {};
constexpr int kLoopTraces = 4;  // a Loop's body is traced at most this often per trace of its graph
// Scan outputs of a Loop with a constant M whose elements have a static shape are arrays of M
// elements from the start (so that the loop differentiates) up to this many bytes each.
constexpr uint64_t kFixedScanBytes = uint64_t{1} << 30;

// A declared type's shape when every dim has a value; else unknown.
TensorShape declared_static_shape(const onnx::ValueInfoProto& v) {
  if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return TensorShape::unknown_rank();
  const auto& dims = v.type().tensor_type().shape().dim();
  if (dims.size() > 32) return TensorShape::unknown_rank();
  std::vector<int64_t> out;
  for (const auto& d : dims) {
    if (!d.has_dim_value() || d.dim_value() < 0) return TensorShape::unknown_rank();
    out.push_back(d.dim_value());
  }
  return TensorShape(out);
}

// Loop (M, cond, v...) with body (iteration, cond, v...) -> (cond, v..., scans...): a while_loop
// over (iteration, cond, v..., one TensorArray per scan output), whose condition is "cond, and
// iteration < M" (M a constant: maximum_iterations); the scan outputs are the arrays stacked.
// With a constant M and static element shapes the arrays have M elements from the start (a loop
// that differentiates keeps its variables' shapes), and the stack is cut to the iterations run
// unless the condition is a constant true.
std::vector<Tensor> loop_rule(NodeContext& c) {
  const onnx::GraphProto* body = c.subgraph("body");
  if (!body) c.malformed("it has no graph attribute 'body'");
  if (c.node().input_size() < 2)
    c.malformed(str_cat("it has ", c.node().input_size(), " inputs; Loop takes M and cond (either may be the empty name), "
                        "then its loop-carried values"));
  const int n = c.node().input_size() - 2;
  if (body->input_size() != 2 + n)
    c.malformed(str_cat("its body has ", body->input_size(), " inputs; with ", n, " loop-carried values it takes ", 2 + n,
                        " (the iteration number, the condition, the values)"));
  const int k = body->output_size() - 1 - n;
  if (k < 0)
    c.malformed(str_cat("its body has ", body->output_size(), " outputs; with ", n, " loop-carried values it returns at least ",
                        1 + n, " (the condition, the values, then any scan outputs)"));
  if (c.node().output_size() > n + k)
    c.malformed(str_cat("it has ", c.node().output_size(), " outputs but its body gives ", n, " loop-carried values and ", k,
                        " scan outputs"));
  const auto nn = static_cast<std::size_t>(n), nk = static_cast<std::size_t>(k);

  WhileOptions options;
  options.name = "loop";
  Tensor trip;  // M known only when the graph runs
  if (c.has_input(0)) {
    const Tensor m = scalar_input(c, 0, DType::Int64, "the trip count M");
    if (m.is_symbolic()) trip = m;
    else options.maximum_iterations = std::max<int64_t>(m.item<int64_t>(), 0);
  }
  std::vector<Tensor> init{constant(int64_t{0}), c.has_input(1) ? scalar_input(c, 1, DType::Bool, "the condition") : constant(true)};
  std::vector<FlatLeaf> leaves{{"iteration", false}, {"cond", false}};
  for (int j = 0; j < n; ++j) {
    if (!c.has_input(2 + j)) c.malformed(str_cat("its loop-carried value ", j, " (input ", 2 + j, ") is missing"));
    init.push_back(c.in(2 + j));
    leaves.push_back({body->input(2 + j).name(), false});
  }
  std::any& any = c.memo();
  if (!any.has_value()) {
    LoopMemo fresh;
    for (std::size_t j = 0; j < nn; ++j) fresh.carried.push_back(init[2 + j].shape());
    for (std::size_t s = 0; s < nk; ++s) {
      const auto& out = body->output(static_cast<int>(1 + nn + s));
      const std::optional<DType> d = out.type().has_tensor_type() ? dtype_of(out.type().tensor_type().elem_type()) : std::nullopt;
      fresh.scans.push_back(d.value_or(DType::Float32));
      fresh.scan_shapes.push_back(declared_static_shape(out));
    }
    any = std::move(fresh);
  }
  LoopMemo& memo = std::any_cast<LoopMemo&>(any);
  for (std::size_t j = 0; j < nn; ++j) memo.carried[j] = memo.carried[j].most_specific_common_supertype(init[2 + j].shape());

  for (int attempt = 1;; ++attempt) {
    const bool last = attempt == kLoopTraces;
    std::vector<Tensor> vars = init;
    std::vector<FlatLeaf> flat_leaves = leaves;
    std::vector<TensorArray> arrays;
    const int64_t trips = options.maximum_iterations;
    bool fixed = trips >= 0 && nk > 0;
    for (std::size_t s = 0; s < nk && fixed; ++s) {
      const TensorShape& e = memo.scan_shapes[s];
      fixed = e.is_fully_defined() &&
              (e.num_elements() == 0 ||
               static_cast<uint64_t>(trips) <= kFixedScanBytes / dtype_size(memo.scans[s]) / static_cast<uint64_t>(e.num_elements()));
    }
    bool always = !init[1].is_symbolic() && init[1].item<bool>();  // the body's condition is a constant true too
    for (std::size_t s = 0; s < nk; ++s) {
      if (fixed) arrays.emplace_back(memo.scans[s], trips, false, memo.scan_shapes[s]);
      else arrays.emplace_back(memo.scans[s], 0, true);
      vars.push_back(arrays.back().flow());
      flat_leaves.push_back({body->output(static_cast<int>(1 + nn + s)).name(), true});
    }
    options.shape_invariants = {TensorShape{}, TensorShape{}};
    for (std::size_t j = 0; j < nn; ++j) options.shape_invariants.push_back(memo.carried[j]);
    for (std::size_t s = 0; s < nk; ++s) options.shape_invariants.push_back(TensorShape::unknown_rank());
    std::vector<TensorShape> scan_shapes(nk, TensorShape::unknown_rank());
    auto cond_fn = [&](const std::vector<Tensor>& v) -> std::vector<Tensor> {
      if (!trip.defined()) return {v[1]};
      return {logical_and(v[1], less(v[0], trip))};
    };
    auto body_fn = [&](const std::vector<Tensor>& v) -> std::vector<Tensor> {
      const std::vector<Tensor> in(v.begin(), v.begin() + 2 + n);
      const std::vector<Tensor> out = c.run_subgraph("body", in);
      std::vector<Tensor> next{add(v[0], constant(int64_t{1})), scalar_result(c, out[0], "the body's condition (output 0)")};
      always = always && !next[1].is_symbolic() && next[1].item<bool>();
      bool retrace = false;
      for (std::size_t j = 0; j < nn; ++j) {
        const Tensor& r = out[1 + j];
        next.push_back(r);
        if (r.dtype() == init[2 + j].dtype() && !r.shape().is_subtype_of(memo.carried[j])) {
          memo.carried[j] = memo.carried[j].most_specific_common_supertype(r.shape());
          retrace = true;
        }
      }
      for (std::size_t s = 0; s < nk; ++s) {
        const Tensor& r = out[1 + nn + s];
        if (r.dtype() != memo.scans[s]) {
          memo.scans[s] = r.dtype();
          retrace = true;
        }
        scan_shapes[s] = r.shape();
        const TensorShape& known = memo.scan_shapes[s];
        if (!known.has_rank() || !r.shape().is_subtype_of(known)) {
          memo.scan_shapes[s] = known.has_rank() && known.rank() == r.shape().rank() ? known.most_specific_common_supertype(r.shape())
                                                                                      : r.shape();
          // Traced again when the arrays could be made whole (or were made with another shape).
          retrace |= fixed || (trips >= 0 && memo.scan_shapes[s].is_fully_defined());
        }
      }
      if (retrace && !last) throw RetraceLoop{};
      for (std::size_t s = 0; s < nk; ++s) next.push_back(arrays[s].with_flow(v[2 + nn + s]).write(v[0], out[1 + nn + s]).flow());
      return next;
    };
    std::vector<Tensor> result;
    try {
      result = detail::while_loop_flat(cond_fn, body_fn, vars, flat_leaves, options);
    } catch (const RetraceLoop&) {
      continue;
    }
    std::vector<Tensor> outs(result.begin() + 2, result.begin() + 2 + n);
    for (std::size_t s = 0; s < nk; ++s) {
      // The stacked array's element shape is what the body computes (zero iterations stack to
      // (0, element...) when it is fully known).
      if (fixed) {
        const Tensor stacked = arrays[s].with_flow(result[2 + nn + s]).stack();
        outs.push_back(always ? stacked : gather(stacked, tg::range(result[0])));
        continue;
      }
      const TensorArray done = TensorArray(memo.scans[s], 0, true, scan_shapes[s]).with_flow(result[2 + nn + s]);
      outs.push_back(done.stack());
    }
    return outs;
  }
}

// ---- the table -------------------------------------------------------------------------------

const ImportRule kRules[] = {
    {"Abs", 6, "", unary<abs>},
    {"Add", 7, "NumPy broadcasting", binary<add>},
    {"And", 7, "", binary<logical_and>},
    {"AveragePool", 7, "2-D (NCHW) only; dilations other than 1 and a ceil_mode that adds a partial window are refused", average_pool_rule},
    {"BatchNormalization", 7, "inference only: training_mode 1 and the running-statistics outputs are refused", batch_norm_rule},
    {"Cast", 6, "to the types tracegraph computes in (float, double, int32, int64, bool, uint8); others are refused", cast_rule},
    {"Ceil", 6, "", unary<ceil>},
    {"Clip", 6, "", clip_rule},
    {"Concat", 4, "", concat_rule},
    {"Constant", 9, "dense values only (sparse_value and strings are refused)", constant_rule},
    {"ConstantOfShape", 9, "", constant_of_shape_rule},
    {"Conv", 1, "2-D (NCHW) only; group > 1 as conv2d's grouped form (depthwise kernels for one channel per group); a dilation with a stride is refused (as tracegraph's conv2d refuses it)", conv_rule},
    {"ConvTranspose", 1, "2-D (NCHW) with static weight, height and width; explicit pads, output_padding, group, strides, dilations (auto_pad SAME and output_shape are refused)", conv_transpose_rule},
    {"Div", 7, "integer division truncates toward zero", div_rule},
    {"Dropout", 7, "inference only: an identity (training_mode true is refused)", dropout_rule},
    {"Equal", 7, "", binary<equal>},
    {"Erf", 9, "", unary<erf>},
    {"Exp", 6, "", unary<exp>},
    {"Expand", 8, "", expand_rule},
    {"Flatten", 1, "", flatten_rule},
    {"Floor", 6, "", unary<floor>},
    {"Gather", 1, "negative indices count from the end", gather_rule},
    {"Gelu", 20, "approximate 'none' or 'tanh'", gelu_rule},
    {"Gemm", 6, "", gemm_rule},
    {"GlobalAveragePool", 1, "", global_average_pool},
    {"GlobalMaxPool", 1, "", global_max_pool},
    {"Greater", 7, "", binary<greater>},
    {"GreaterOrEqual", 12, "", greater_equal_rule},
    {"Identity", 1, "", identity_rule},
    {"If", 11, "a tg::cond whose branches read the enclosing graphs' values; a constant condition imports the branch it takes",
     if_rule},
    {"LayerNormalization", 17, "the Mean and InvStdDev outputs are refused", layer_norm_rule},
    {"LeakyRelu", 6, "", leaky_relu_rule},
    {"Less", 7, "", binary<less>},
    {"LessOrEqual", 12, "", less_equal_rule},
    {"Log", 6, "", unary<log>},
    {"Loop", 11, "a tg::while_loop over the iteration number, the condition and the loop-carried values (M a constant: "
     "maximum_iterations); scan outputs as tg::TensorArrays, stacked (of M elements when M is a constant and their "
     "shape static, so that gradients flow through them); a loop-carried value may change its shape (its changing "
     "dims become None)", loop_rule},
    {"LogSoftmax", 1, "", log_softmax_rule},
    {"MatMul", 1, "", matmul_rule},
    {"Max", 8, "", max_rule},
    {"MaxPool", 1, "2-D (NCHW) only; the Indices output, dilations other than 1 and a ceil_mode that adds a partial window are refused", max_pool_rule},
    {"Min", 8, "", min_rule},
    {"Mul", 7, "", binary<mul>},
    {"Neg", 6, "", unary<neg>},
    {"Not", 1, "", not_rule},
    {"Or", 7, "", binary<logical_or>},
    {"Pad", 2, "modes constant and reflect; edge, wrap and negative pads are refused", pad_rule},
    {"Pow", 7, "", pow_rule},
    {"Reciprocal", 6, "", reciprocal},
    {"ReduceMax", 1, "", reduce_max_rule},
    {"ReduceMean", 1, "", reduce_mean_rule},
    {"ReduceMin", 1, "", reduce_min_rule},
    {"ReduceProd", 1, "", reduce_prod_rule},
    {"ReduceSum", 1, "", reduce_sum_rule},
    {"Relu", 6, "", unary<relu>},
    {"Reshape", 5, "0 copies the input's dim (allowzero 1 honoured)", reshape_rule},
    {"ScatterND", 11, "reduction none and add (mul, max, min are refused); repeated index tuples add under none too "
     "(ONNX leaves them undefined)", scatter_nd_rule},
    {"Shape", 1, "", shape_rule},
    {"Sigmoid", 6, "", unary<sigmoid>},
    {"Size", 1, "", size_rule},
    {"Slice", 1, "on a dim of unknown size only [start:] with start >= 0", slice_rule},
    {"Softmax", 1, "before opset 13 over the input flattened from axis", softmax_rule},
    {"Sqrt", 6, "", unary<sqrt>},
    {"Squeeze", 1, "", squeeze_rule},
    {"Sub", 7, "", binary<sub>},
    {"Sum", 8, "", sum_rule},
    {"Tanh", 6, "", unary<tanh>},
    {"Transpose", 1, "", transpose_rule},
    {"Unsqueeze", 1, "", unsqueeze_rule},
    {"Where", 9, "", where_rule},
};

}  // namespace

std::span<const ImportRule> import_rules() { return kRules; }

bool elementwise_op(const std::string& op_type) {
  static const char* const kOps[] = {"Abs", "Add", "And", "Cast", "Ceil", "Clip", "Div", "Dropout", "Equal", "Erf", "Exp",
                                     "Floor", "Gelu", "Greater", "GreaterOrEqual", "Identity", "LeakyRelu", "Less",
                                     "LessOrEqual", "Log", "Max", "Min", "Mul", "Neg", "Not", "Or", "Pow", "Reciprocal",
                                     "Relu", "Sigmoid", "Sqrt", "Sub", "Sum", "Tanh", "Where"};
  return std::any_of(std::begin(kOps), std::end(kOps), [&](const char* op) { return op_type == op; });
}

const ImportRule* import_rule(const std::string& op_type) {
  for (const ImportRule& r : kRules)
    if (op_type == r.op_type) return &r;
  return nullptr;
}

}  // namespace tg::detail::onnx_import
