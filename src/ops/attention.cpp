// scaled_dot_product_attention and its gradient op: shape rules, the frames over the tiled
// kernels (src/kernels/attention.cpp), the gradient rule and the public function.
//
// Why one op: written with matmul and softmax, attention holds the (batch, heads, Tq, Tk)
// weights between the two products and again for the gradient; at T = 4096 that is 64 MiB per
// head in float32. The fused op never holds a Tq x Tk matrix, and a query row that sees no key
// gives zeros instead of softmax's NaN (PyTorch's rule).
#include <cmath>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "ops/attention.h"

#include "kernels/attention.h"
#include "ops/op.h"
#include "tracegraph/ops.h"

namespace tg {
namespace detail {

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";
constexpr const char* kGradOp = "scaled_dot_product_attention_grad";
constexpr const char* kLayouts =
    "q (batch, heads, Tq, D), k (batch, heads, Tk, D), v (batch, heads, Tk, Dv); transpose a (batch, T, heads, D) "
    "tensor with perm {0, 2, 1, 3} first";
constexpr const char* kInterleavedLayouts =
    "q (batch, Tq, heads, D), k (batch, Tk, heads, D), v (batch, Tk, heads, Dv) (the heads_interleaved layout)";

// The axes of the batch, the heads and time in q, k, v and the output: (batch, heads, T, D), or
// with heads_interleaved (batch, T, heads, D).
struct Axes {
  int heads, time;
  const char* layouts;
};
Axes axes_of(const AttentionAttrs& a) {
  return a.heads_interleaved ? Axes{2, 1, kInterleavedLayouts} : Axes{1, 2, kLayouts};
}

// The shape of a tensor of the given (batch, heads, T, width) in the attributes' layout.
TensorShape laid_out(const AttentionAttrs& a, int64_t batch, int64_t heads, int64_t t, int64_t width) {
  return a.heads_interleaved ? TensorShape({batch, t, heads, width}) : TensorShape({batch, heads, t, width});
}

int64_t dim_of(const ValueType& t, int i) { return t.shape.has_rank() ? t.shape.dims()[static_cast<std::size_t>(i)] : None; }

// The sizes q, k and v agree on (None where no input knows one).
struct Dims {
  int64_t batch = None, heads = None, tq = None, tk = None, d = None, dv = None;
};

// How many inputs the attributes call for: q, k, v, the mask, the seed pair.
std::size_t base_inputs(const AttentionAttrs& a) { return 3 + (a.has_mask ? 1 : 0) + (a.dropout > 0 ? 1 : 0); }

void check_attrs(const char* op, const AttentionAttrs& a) {
  if (!(a.dropout >= 0.0 && a.dropout < 1.0))
    op_error<InvalidArgumentError>(op, "dropout must be in [0, 1) (the fraction of weights dropped), got ", a.dropout);
  if (a.scale_given && !std::isfinite(a.scale))
    op_error<InvalidArgumentError>(op, "scale must be a finite number, got ", a.scale);
}

Dims check_qkv(const char* op, const std::vector<ValueType>& in, const Axes& ax) {
  const ValueType& q = in[0];
  const ValueType& k = in[1];
  const ValueType& v = in[2];
  if (q.dtype != DType::Float32 && q.dtype != DType::Float64)
    op_error<TypeError>(op, "q must be float32 or float64, got ", to_string(q.dtype));
  if (k.dtype != q.dtype || v.dtype != q.dtype)
    op_error<TypeError>(op, "q, k and v must have one dtype, got q ", to_string(q.dtype), ", k ", to_string(k.dtype),
                        ", v ", to_string(v.dtype), "; tg::cast them");
  const std::string shapes =
      str_cat("q ", q.shape.to_string(), ", k ", k.shape.to_string(), ", v ", v.shape.to_string());
  for (const auto& [name, t] : {std::pair<const char*, const ValueType*>{"q", &q}, {"k", &k}, {"v", &v}})
    if (t->shape.has_rank() && t->shape.rank() != 4)
      op_error<InvalidArgumentError>(op, name, " must have rank 4, got shape ", t->shape.to_string(), " (", shapes,
                                     "); expected ", ax.layouts);
  auto agree = [&](const char* what, std::initializer_list<std::pair<const char*, int64_t>> seen) {
    int64_t out = None;
    const char* first = nullptr;
    for (const auto& named : seen) {
      if (named.second == None) continue;
      if (out == None) {
        out = named.second;
        first = named.first;
      } else if (named.second != out) {
        op_error<InvalidArgumentError>(op, what, " differ: ", first, " has ", out, " but ", named.first, " has ",
                                       named.second, " (", shapes, "); expected ", ax.layouts);
      }
    }
    return out;
  };
  Dims d;
  d.batch = agree("the batch sizes", {{"q", dim_of(q, 0)}, {"k", dim_of(k, 0)}, {"v", dim_of(v, 0)}});
  d.heads = agree("the head counts",
                   {{"q", dim_of(q, ax.heads)}, {"k", dim_of(k, ax.heads)}, {"v", dim_of(v, ax.heads)}});
  d.tq = dim_of(q, ax.time);
  d.tk = agree(ax.time == 2 ? "the key counts (axis 2 of k and v)" : "the key counts (axis 1 of k and v)",
               {{"k", dim_of(k, ax.time)}, {"v", dim_of(v, ax.time)}});
  d.d = agree("the head sizes (axis 3 of q and k)", {{"q", dim_of(q, 3)}, {"k", dim_of(k, 3)}});
  d.dv = dim_of(v, 3);
  return d;
}

std::string dims_string(std::initializer_list<int64_t> dims) {
  std::string s = "(";
  bool first = true;
  for (int64_t x : dims) {
    s += str_cat(first ? "" : ", ", x == None ? std::string("None") : std::to_string(x));
    first = false;
  }
  return s + ")";
}

void check_mask(const char* op, const ValueType& m, DType dtype, const Dims& d) {
  if (m.dtype != DType::Bool && m.dtype != dtype)
    op_error<TypeError>(op, "the mask must be bool (true: attend) or ", to_string(dtype),
                        " (added to the scores), got ", to_string(m.dtype));
  if (!m.shape.has_rank()) return;
  const int64_t target[4] = {d.batch, d.heads, d.tq, d.tk};
  const std::string wanted = dims_string({d.batch, d.heads, d.tq, d.tk});
  const int64_t r = m.shape.rank();
  if (r > 4)
    op_error<InvalidArgumentError>(op, "the mask must broadcast to (batch, heads, Tq, Tk) = ", wanted,
                                   ", got rank ", r, " shape ", m.shape.to_string());
  for (int64_t i = 0; i < r; ++i) {
    const int64_t md = m.shape.dims()[static_cast<std::size_t>(r - 1 - i)];
    const int64_t td = target[3 - i];
    if (md != None && md != 1 && td != None && md != td)
      op_error<InvalidArgumentError>(op, "the mask must broadcast to (batch, heads, Tq, Tk) = ", wanted, ", got shape ",
                                     m.shape.to_string(), " (its axis ", r - 1 - i, " has ", md,
                                     "; each mask axis must be 1 or the size it lines up with)");
  }
}

void check_seed(const char* op, const ValueType& s) {
  if (s.dtype != DType::Int64)
    op_error<TypeError>(op, "the dropout seed pair must be int64, got ", to_string(s.dtype));
  if (s.shape.has_rank() && (s.shape.rank() != 1 || (s.shape.dims()[0] != None && s.shape.dims()[0] != 2)))
    op_error<InvalidArgumentError>(op, "the dropout seed pair must have shape (2,), got ", s.shape.to_string());
}

// The checks of the inputs both ops share: the attributes, q, k, v, the mask and the seed.
Dims check_inputs(const char* op, const std::vector<ValueType>& in, const AttentionAttrs& a, std::size_t extra) {
  check_attrs(op, a);
  const std::size_t want = base_inputs(a) + extra;
  if (in.size() != want)
    op_error<InvalidArgumentError>(op, "expected ", want, " inputs (q, k, v", a.has_mask ? ", the mask" : "",
                                   a.dropout > 0 ? ", the dropout seed pair" : "",
                                   extra ? ", the output, its log-sum-exp and their gradients" : "", "), got ",
                                   in.size());
  const Dims d = check_qkv(op, in, axes_of(a));
  if (a.has_mask) check_mask(op, in[3], in[0].dtype, d);
  if (a.dropout > 0) check_seed(op, in[a.has_mask ? 4 : 3]);
  return d;
}

std::vector<ValueType> infer_forward(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const AttentionAttrs& a = attrs.get<AttentionAttrs>();
  const Dims d = check_inputs(kOp, in, a, 0);
  const DType t = in[0].dtype;
  return {ValueType{t, laid_out(a, d.batch, d.heads, d.tq, d.dv)},
          ValueType{t, TensorShape({d.batch, d.heads, d.tq})}};
}

// One of the gradient op's extra inputs (the output, the log-sum-exp and their gradients),
// checked against the shape the forward gives.
void check_extra(const ValueType& t, const char* name, DType dtype, const TensorShape& want_shape) {
  const std::vector<int64_t>& want = want_shape.dims();
  if (t.dtype != dtype)
    op_error<TypeError>(kGradOp, name, " must be ", to_string(dtype), " (q's dtype), got ", to_string(t.dtype));
  if (!t.shape.has_rank()) return;
  bool ok = t.shape.rank() == static_cast<int64_t>(want.size());
  for (std::size_t i = 0; ok && i < want.size(); ++i) {
    const int64_t x = t.shape.dims()[i];
    ok = x == None || want[i] == None || x == want[i];
  }
  if (!ok) {
    std::string w = "(";
    for (std::size_t i = 0; i < want.size(); ++i)
      w += str_cat(i ? ", " : "", want[i] == None ? std::string("None") : std::to_string(want[i]));
    op_error<InvalidArgumentError>(kGradOp, name, " must have shape ", w, "), got ", t.shape.to_string());
  }
}

std::vector<ValueType> infer_grad(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const AttentionAttrs& a = attrs.get<AttentionAttrs>();
  const std::size_t base = base_inputs(a);
  const Dims d = check_inputs(kGradOp, in, a, 4);
  const DType t = in[0].dtype;
  check_extra(in[base], "the output", t, laid_out(a, d.batch, d.heads, d.tq, d.dv));
  check_extra(in[base + 1], "the log-sum-exp", t, TensorShape({d.batch, d.heads, d.tq}));
  check_extra(in[base + 2], "the output's gradient", t, laid_out(a, d.batch, d.heads, d.tq, d.dv));
  check_extra(in[base + 3], "the log-sum-exp's gradient", t, TensorShape({d.batch, d.heads, d.tq}));
  return {ValueType{t, laid_out(a, d.batch, d.heads, d.tq, d.d)}, ValueType{t, laid_out(a, d.batch, d.heads, d.tk, d.d)},
          ValueType{t, laid_out(a, d.batch, d.heads, d.tk, d.dv)}};
}

std::vector<ValueType> types_of(const std::vector<Tensor>& in) {
  std::vector<ValueType> out;
  out.reserve(in.size());
  for (const Tensor& t : in) out.push_back(ValueType{t.impl()->dtype, t.impl()->shape});
  return out;
}

// The kernel's view of the eager inputs, checked again on their run-time shapes.
std::pair<AttentionSizes, AttentionParams> kernel_args(const char* op, const std::vector<Tensor>& in,
                                                       const AttentionAttrs& a, std::size_t extra) {
  check_inputs(op, types_of(in), a, extra);
  const auto& qd = in[0].impl()->shape.dims();
  const auto& kd = in[1].impl()->shape.dims();
  const auto& vd = in[2].impl()->shape.dims();
  const Axes ax = axes_of(a);
  const auto h = static_cast<std::size_t>(ax.heads), tm = static_cast<std::size_t>(ax.time);
  AttentionSizes s{qd[0], qd[h], qd[tm], kd[tm], qd[3], vd[3], a.heads_interleaved};
  AttentionParams p;
  // 1 / sqrt(D); with D = 0 every score is 0 whatever the scale.
  p.scale = a.scale_given ? a.scale : (s.d > 0 ? 1.0 / std::sqrt(static_cast<double>(s.d)) : 1.0);
  p.causal = a.causal;
  if (a.has_mask) {
    const Tensor& m = in[3];
    const auto& md = m.impl()->shape.dims();
    const int64_t target[4] = {s.batch, s.heads, s.tq, s.tk};
    const std::size_t r = md.size();
    int64_t padded[4];
    for (std::size_t i = 0; i < 4; ++i) padded[i] = i < 4 - r ? 1 : md[i - (4 - r)];
    int64_t stride = 1;
    for (int i = 3; i >= 0; --i) {
      p.mask.strides[i] = padded[i] == 1 ? 0 : stride;
      stride *= padded[i];
    }
    for (int i = 0; i < 4; ++i)
      if (padded[i] != 1 && padded[i] != target[i])
        op_error<InvalidArgumentError>(op, "the mask must broadcast to (batch, heads, Tq, Tk) = ",
                                       dims_string({s.batch, s.heads, s.tq, s.tk}), ", got shape ",
                                       m.impl()->shape.to_string());
    p.mask.is_bool = m.impl()->dtype == DType::Bool;
    p.mask.data = p.mask.is_bool ? static_cast<const void*>(data_of<bool>(m))
                  : m.impl()->dtype == DType::Float32 ? static_cast<const void*>(data_of<float>(m))
                                                      : static_cast<const void*>(data_of<double>(m));
  }
  if (a.dropout > 0) {
    p.dropout = a.dropout;
    const int64_t* seed = data_of<int64_t>(in[a.has_mask ? 4 : 3]);
    p.seed0 = static_cast<uint64_t>(seed[0]);
    p.seed1 = static_cast<uint64_t>(seed[1]);
  }
  return {s, p};
}

void kernel_forward(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const auto [s, p] = kernel_args(kOp, in, attrs.get<AttentionAttrs>(), 0);
  if (in[0].impl()->dtype == DType::Float32)
    attention_forward<float>(s, p, data_of<float>(in[0]), data_of<float>(in[1]), data_of<float>(in[2]),
                             data_of<float>(out[0]), data_of<float>(out[1]));
  else
    attention_forward<double>(s, p, data_of<double>(in[0]), data_of<double>(in[1]), data_of<double>(in[2]),
                              data_of<double>(out[0]), data_of<double>(out[1]));
}

template <class T>
void grad_typed(const AttentionSizes& s, const AttentionParams& p, const std::vector<Tensor>& in, std::size_t base,
                std::vector<Tensor>& out) {
  attention_backward<T>(s, p, data_of<T>(in[0]), data_of<T>(in[1]), data_of<T>(in[2]), data_of<T>(in[base]),
                        data_of<T>(in[base + 1]), data_of<T>(in[base + 2]), data_of<T>(in[base + 3]),
                        data_of<T>(out[0]), data_of<T>(out[1]), data_of<T>(out[2]));
}

void kernel_grad(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const AttentionAttrs& a = attrs.get<AttentionAttrs>();
  const auto [s, p] = kernel_args(kGradOp, in, a, 4);
  if (in[0].impl()->dtype == DType::Float32) grad_typed<float>(s, p, in, base_inputs(a), out);
  else grad_typed<double>(s, p, in, base_inputs(a), out);
}

// q, k and v get their gradients from the gradient op, which reads the output, the log-sum-exp
// and the gradients of both. The mask and the seed pair get none: a float mask that a tape
// wants differentiated is refused, since its gradient is a Tq x Tk tensor the op never holds.
std::vector<Tensor> grad_forward(const GradInputs& g) {
  const AttentionAttrs& a = g.attrs.get<AttentionAttrs>();
  if (a.has_mask && !g.wanted.empty() && g.wanted[3] && is_floating(g.inputs[3].dtype()))
    op_error<InvalidArgumentError>(kOp, "the gradient with respect to a float mask is not computed (it is a "
                                   "(batch, heads, Tq, Tk) tensor the op never holds); pass the mask through "
                                   "tg::stop_gradient, or add it to scores built with tg::matmul");
  std::vector<Tensor> in = g.inputs;
  in.insert(in.end(), {g.outputs[0], g.outputs[1], g.grads[0], g.grads[1]});
  const std::vector<Tensor> d = apply_op(OpId::ScaledDotProductAttentionGrad, in, g.attrs);
  std::vector<Tensor> out(g.inputs.size());
  for (std::size_t i = 0; i < 3; ++i)
    if (g.wants(i)) out[i] = d[i];
  return out;
}

std::vector<Tensor> grad_of_grad(const GradInputs&) {
  op_error<InvalidArgumentError>(kGradOp, "second-order gradients of scaled_dot_product_attention are not "
                                 "implemented; to differentiate attention twice, write it with tg::matmul and "
                                 "tg::softmax");
}

}  // namespace

void register_attention_ops(OpDef* t) {
  set_op(t, OpId::ScaledDotProductAttention, &infer_forward, &kernel_forward);
  set_op(t, OpId::ScaledDotProductAttentionGrad, &infer_grad, &kernel_grad);
  set_grad(t, OpId::ScaledDotProductAttention, &grad_forward);
  set_grad(t, OpId::ScaledDotProductAttentionGrad, &grad_of_grad);
}

Tensor scaled_dot_product_attention_op(const Tensor& q, const Tensor& k, const Tensor& v,
                                       const AttentionOptions& options, bool heads_interleaved) {
  const char* op = kOp;
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"q", &q}, {"k", &k}, {"v", &v}})
    if (!t->defined()) op_error<ValueError>(op, name, " is an empty tg::Tensor");
  if (!(options.dropout >= 0.0 && options.dropout < 1.0))
    op_error<InvalidArgumentError>(op, "dropout must be in [0, 1) (the fraction of weights dropped), got ",
                                   options.dropout);
  if (options.scale && !std::isfinite(*options.scale))
    op_error<InvalidArgumentError>(op, "scale must be a finite number, got ", *options.scale);
  AttentionAttrs a;
  a.heads_interleaved = heads_interleaved;
  a.scale_given = options.scale.has_value();
  a.scale = options.scale.value_or(1.0);
  a.causal = options.causal;
  a.has_mask = options.mask.defined();
  std::vector<Tensor> in{q, k, v};
  if (a.has_mask) in.push_back(options.mask);
  if (options.training && options.dropout > 0) {
    a.dropout = options.dropout;
    // The mask's bits come from a seed pair drawn with tg::dropout's seed rules (a stream's next
    // draw, eagerly or at each run of a traced function); the kernels hash it with each weight's
    // index, so the gradient sees the forward's mask and no Tq x Tk mask is ever stored.
    in.push_back(random_uniform(TensorShape({2}), 0.0, 2147483647.0, int64, options.seed));
  }
  return apply_op(OpId::ScaledDotProductAttention, in, a)[0];
}

}  // namespace detail

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options) {
  return detail::scaled_dot_product_attention_op(q, k, v, options, false);
}

}  // namespace tg
