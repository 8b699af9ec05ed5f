// Elementwise ops: front functions, shape/dtype rules, kernels and gradients together. What
// each op computes on one element lives in kernels/elementwise_functors.h, shared with the fused
// kernel.
#include <type_traits>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "ops/broadcast.h"
#include "kernels/bf16.h"
#include "kernels/elementwise_functors.h"
#include "ops/grad_helpers.h"
#include "tracegraph/ops.h"

namespace tg {
namespace detail {
namespace {

std::string accepted_list(unsigned acc) {
  std::string s;
  auto add = [&](const char* n) { s += (s.empty() ? "" : ", ") + std::string(n); };
  if (acc & kFloat) { add("float32"); add("float64"); }
  if (acc & kInt) { add("int32"); add("int64"); }
  if (acc & kU8) add("uint8");
  if (acc & kBoolT) add("bool");
  if (acc & kStr) add("string");
  if (acc & kBF16) add("bfloat16");
  return s;
}

void require_accepts(const char* op, unsigned acc, DType d) {
  const unsigned cls = d == DType::BFloat16      ? kBF16
                       : is_floating(d)           ? kFloat
                       : d == DType::UInt8       ? kU8
                       : is_integer(d)           ? kInt
                       : d == DType::Bool        ? kBoolT
                                                 : kStr;
  if (!(acc & cls))
    op_error<InvalidArgumentError>(op, "does not support dtype ", to_string(d), "; expected one of: ",
                                   accepted_list(acc), ". tg::cast the input first");
}

// ---- shape/dtype rules ----
template <class F, OpId kId>
std::vector<ValueType> infer_binary(const std::vector<ValueType>& in, const OpAttrs&) {
  const char* op = op_def(kId).name;
  require_same_dtype(op, in);
  require_accepts(op, F::accepts, in[0].dtype);
  using R = decltype(F{}(std::declval<float>(), std::declval<float>()));
  const DType out = std::is_same_v<R, bool> ? DType::Bool : in[0].dtype;
  return {ValueType{out, broadcast_shapes(op, in[0].shape, in[1].shape)}};
}

template <class F, OpId kId>
std::vector<ValueType> infer_unary(const std::vector<ValueType>& in, const OpAttrs&) {
  require_accepts(op_def(kId).name, F::accepts, in[0].dtype);
  using R = decltype(F{}(std::declval<bool>()));
  const DType out = std::is_same_v<R, bool> && F::accepts == kBoolT ? DType::Bool : in[0].dtype;
  return {ValueType{out, in[0].shape}};
}

// ---- kernels ----
template <class T, class Out, class F>
void binary_loop(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  const T* pa = data_of<T>(a);
  const T* pb = data_of<T>(b);
  Out* po = data_of<Out>(out);
  const auto& oa = a.impl()->shape.dims();
  const auto& ob = b.impl()->shape.dims();
  int64_t pos = 0;
  for_each_broadcast_run<2>(out.impl()->shape.dims(), {&oa, &ob},
                            [&](const std::array<int64_t, 2>& off, const std::array<int64_t, 2>& st,
                                int64_t n) {
                              const T* x = pa + off[0];
                              const T* y = pb + off[1];
                              Out* z = po + pos;
                              pos += n;
                              if (st[0] == 1 && st[1] == 1) {
                                for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], y[i]);
                              } else if (st[0] == 1 && st[1] == 0) {
                                const T yv = *y;
                                for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], yv);
                              } else if (st[0] == 0 && st[1] == 1) {
                                const T xv = *x;
                                for (int64_t i = 0; i < n; ++i) z[i] = f(xv, y[i]);
                              } else {
                                for (int64_t i = 0; i < n; ++i) z[i] = f(x[i * st[0]], y[i * st[1]]);
                              }
                            });
}

template <class F>
void kernel_binary(const std::vector<Tensor>& in, const OpAttrs&, std::vector<Tensor>& out) {
  visit_dtype(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr ((F::accepts & class_of<T>()) != 0) {
      using R = std::decay_t<decltype(F{}(std::declval<T>(), std::declval<T>()))>;
      binary_loop<T, R>(in[0], in[1], out[0], F{});
    }
  });
}

// F's vectorised float loop. A template of its own, so that F::vec_f32 is named only for
// functors that have it (clang checks a generic lambda's discarded branch for names that do not
// depend on the lambda's own parameter).
template <class F>
void unary_vec_f32(const float* x, float* y, int64_t n) {
  if constexpr (has_vec_f32<F>) F::vec_f32(x, y, n);
}

template <class F>
void kernel_unary(const std::vector<Tensor>& in, const OpAttrs&, std::vector<Tensor>& out) {
  visit_dtype(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr ((F::accepts & class_of<T>()) != 0) {
      using R = std::decay_t<decltype(F{}(std::declval<T>()))>;
      const T* x = data_of<T>(in[0]);
      R* y = data_of<R>(out[0]);
      const int64_t n = in[0].impl()->shape.num_elements();
      if constexpr (std::is_same_v<T, float> && has_vec_f32<F>) {
        unary_vec_f32<F>(x, y, n);
      } else {
        const F f{};
        for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
      }
    }
  });
}

// ---- cast ----
std::vector<ValueType> infer_cast(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const DType to = attrs.get<CastAttrs>().dtype;
  if ((in[0].dtype == DType::String) != (to == DType::String))
    op_error<InvalidArgumentError>("cast", "cannot cast ", to_string(in[0].dtype), " to ",
                                   to_string(to),
                                   "; casts between strings and other dtypes are not supported");
  return {ValueType{to, in[0].shape}};
}

void kernel_cast(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const int64_t n = in[0].impl()->shape.num_elements();
  // float32 <-> bfloat16, every step of a mixed_bfloat16 model: the vectorised conversions,
  // which round as convert does.
  const DType from = in[0].impl()->dtype, to = attrs.get<CastAttrs>().dtype;
  if (from == DType::Float32 && to == DType::BFloat16)
    return f32_to_bf16(data_of<float>(in[0]), data_of<bfloat16_t>(out[0]), n);
  if (from == DType::BFloat16 && to == DType::Float32)
    return bf16_to_f32(data_of<bfloat16_t>(in[0]), data_of<float>(out[0]), n);
  visit_dtype(in[0].impl()->dtype, [&](auto from_tag) {
    using From = decltype(from_tag);
    visit_dtype(attrs.get<CastAttrs>().dtype, [&](auto to_tag) {
      using To = decltype(to_tag);
      constexpr bool from_str = std::is_same_v<From, std::string>;
      constexpr bool to_str = std::is_same_v<To, std::string>;
      if constexpr (from_str && to_str) {
        for (int64_t i = 0; i < n; ++i) data_of<To>(out[0])[i] = data_of<From>(in[0])[i];
      } else if constexpr (!from_str && !to_str) {
        const From* x = data_of<From>(in[0]);
        To* y = data_of<To>(out[0]);
        for (int64_t i = 0; i < n; ++i) y[i] = convert<To>(x[i]);
      }
    });
  });
}

// ---- identity, ones_like ----
std::vector<ValueType> infer_same(const std::vector<ValueType>& in, const OpAttrs&) { return {in[0]}; }
void kernel_identity(const std::vector<Tensor>& in, const OpAttrs&, std::vector<Tensor>& out) {
  out[0] = make_view(in[0], in[0].impl()->shape);
}
std::vector<ValueType> infer_ones_like(const std::vector<ValueType>& in, const OpAttrs&) {
  if (in[0].dtype == DType::String)
    op_error<InvalidArgumentError>("ones_like", "a string tensor has no 'one'; use tg::fill");
  return {in[0]};
}

// ---- where ----
std::vector<ValueType> infer_where(const std::vector<ValueType>& in, const OpAttrs&) {
  require_dtype("where", in[0], {DType::Bool}, "a condition");
  if (in[1].dtype != in[2].dtype)
    op_error<InvalidArgumentError>("where", "expected x and y of one dtype, got ",
                                   to_string(in[1].dtype), " and ", to_string(in[2].dtype),
                                   "; tg::cast one of them first");
  TensorShape s = broadcast_shapes("where", in[0].shape, in[1].shape);
  return {ValueType{in[1].dtype, broadcast_shapes("where", s, in[2].shape)}};
}
template <class F>
void kernel_where(const std::vector<Tensor>& in, const OpAttrs&, std::vector<Tensor>& out) {
  visit_dtype(in[1].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    const bool* c = data_of<bool>(in[0]);
    const T* x = data_of<T>(in[1]);
    const T* y = data_of<T>(in[2]);
    T* z = data_of<T>(out[0]);
    const F f{};
    int64_t pos = 0;
    for_each_broadcast_run<3>(
        out[0].impl()->shape.dims(),
        {&in[0].impl()->shape.dims(), &in[1].impl()->shape.dims(), &in[2].impl()->shape.dims()},
        [&](const std::array<int64_t, 3>& off, const std::array<int64_t, 3>& st, int64_t n) {
          if constexpr (std::is_arithmetic_v<T>) {
            // Numbers: both operands read unconditionally, the condition as bytes, so the loop
            // blends instead of branching on each condition (see fused_micro.inc's where_v).
            const auto* cb = reinterpret_cast<const unsigned char*>(c);
            for (int64_t i = 0; i < n; ++i) {
              const T xv = x[off[1] + i * st[1]], yv = y[off[2] + i * st[2]];
              z[pos + i] = f(cb[off[0] + i * st[0]] != 0, xv, yv);
            }
          } else {
            for (int64_t i = 0; i < n; ++i)
              z[pos + i] = f(c[off[0] + i * st[0]], x[off[1] + i * st[1]], y[off[2] + i * st[2]]);
          }
          pos += n;
        });
  });
}

// ---- gradient rules ----
// Binary ops broadcast, so each input's gradient is summed back to that input's shape.

std::vector<Tensor> grad_add(const GradInputs& g) {
  return {sum_to_operand(g.grads[0], g.inputs, 0), sum_to_operand(g.grads[0], g.inputs, 1)};
}
std::vector<Tensor> grad_sub(const GradInputs& g) {
  return {sum_to_operand(g.grads[0], g.inputs, 0), sum_to_operand(neg(g.grads[0]), g.inputs, 1)};
}
std::vector<Tensor> grad_mul(const GradInputs& g) {
  const Tensor& a = g.inputs[0];
  const Tensor& b = g.inputs[1];
  return {sum_to_operand(mul(g.grads[0], b), g.inputs, 0), sum_to_operand(mul(g.grads[0], a), g.inputs, 1)};
}
std::vector<Tensor> grad_div(const GradInputs& g) {
  const Tensor& a = g.inputs[0];
  const Tensor& b = g.inputs[1];
  const Tensor& dz = g.grads[0];
  return {sum_to_operand(div(dz, b), g.inputs, 0), sum_to_operand(div(mul(neg(dz), a), square(b)), g.inputs, 1)};
}
// d(a^b)/db = a^b log(a), taken as 0 where a <= 0 (where log is undefined), as TensorFlow does.
std::vector<Tensor> grad_pow(const GradInputs& g) {
  const Tensor& a = g.inputs[0];
  const Tensor& b = g.inputs[1];
  const Tensor& dz = g.grads[0];
  const Tensor da = mul(dz, mul(b, pow(a, sub(b, scalar_like(b, 1.0)))));
  const Tensor positive = greater(a, zeros_like(a));
  const Tensor log_a = where(positive, log(where(positive, a, ones_like(a))), zeros_like(a));
  const Tensor db = mul(dz, mul(g.outputs[0], log_a));
  return {sum_to_operand(da, g.inputs, 0), sum_to_operand(db, g.inputs, 1)};
}
// maximum/minimum: on ties the gradient goes to the first input (TensorFlow's choice).
template <bool kMax>
std::vector<Tensor> grad_extreme(const GradInputs& g) {
  const Tensor& a = g.inputs[0];
  const Tensor& b = g.inputs[1];
  const Tensor& dz = g.grads[0];
  const Tensor first = kMax ? greater_equal(a, b) : less_equal(a, b);
  const Tensor zero = zeros_like(dz);
  return {sum_to_operand(where(first, dz, zero), g.inputs, 0), sum_to_operand(where(first, zero, dz), g.inputs, 1)};
}

std::vector<Tensor> grad_neg(const GradInputs& g) { return {neg(g.grads[0])}; }
std::vector<Tensor> grad_abs(const GradInputs& g) { return {mul(g.grads[0], sign(g.inputs[0]))}; }
std::vector<Tensor> grad_sign(const GradInputs& g) { return {zeros_like(g.inputs[0])}; }
std::vector<Tensor> grad_square(const GradInputs& g) {
  return {mul(g.grads[0], mul(g.inputs[0], scalar_like(g.inputs[0], 2.0)))};
}
std::vector<Tensor> grad_relu(const GradInputs& g) {
  const Tensor& x = g.inputs[0];
  return {where(greater(x, zeros_like(x)), g.grads[0], zeros_like(g.grads[0]))};
}
std::vector<Tensor> grad_exp(const GradInputs& g) { return {mul(g.grads[0], g.outputs[0])}; }
std::vector<Tensor> grad_log(const GradInputs& g) { return {div(g.grads[0], g.inputs[0])}; }
std::vector<Tensor> grad_sqrt(const GradInputs& g) {
  const Tensor& y = g.outputs[0];
  return {div(g.grads[0], mul(y, scalar_like(y, 2.0)))};
}
// d(x^-1/2)/dx = -y^3 / 2
std::vector<Tensor> grad_rsqrt(const GradInputs& g) {
  const Tensor& y = g.outputs[0];
  return {mul(g.grads[0], mul(mul(y, square(y)), scalar_like(y, -0.5)))};
}
std::vector<Tensor> grad_tanh(const GradInputs& g) {
  const Tensor& y = g.outputs[0];
  return {mul(g.grads[0], sub(scalar_like(y, 1.0), square(y)))};
}
std::vector<Tensor> grad_sigmoid(const GradInputs& g) {
  const Tensor& y = g.outputs[0];
  return {mul(g.grads[0], mul(y, sub(scalar_like(y, 1.0), y)))};
}
std::vector<Tensor> grad_sin(const GradInputs& g) { return {mul(g.grads[0], cos(g.inputs[0]))}; }
std::vector<Tensor> grad_cos(const GradInputs& g) {
  return {neg(mul(g.grads[0], sin(g.inputs[0])))};
}
// Only a floating input has a gradient (a cast from an integer is where the path starts).
std::vector<Tensor> grad_cast(const GradInputs& g) {
  const Tensor& x = g.inputs[0];
  if (!is_floating(x.dtype())) return {Tensor()};
  return {cast(g.grads[0], x.dtype())};
}
std::vector<Tensor> grad_identity(const GradInputs& g) { return {g.grads[0]}; }
std::vector<Tensor> grad_where(const GradInputs& g) {
  const Tensor& c = g.inputs[0];
  const Tensor& dz = g.grads[0];
  const Tensor zero = zeros_like(dz);
  return {Tensor(), sum_to_operand(where(c, dz, zero), g.inputs, 1), sum_to_operand(where(c, zero, dz), g.inputs, 2)};
}

std::vector<Tensor> grad_log1p(const GradInputs& g) {
  const Tensor& x = g.inputs[0];
  return {div(g.grads[0], add(scalar_like(x, 1.0), x))};
}
std::vector<Tensor> grad_expm1(const GradInputs& g) { return {mul(g.grads[0], exp(g.inputs[0]))}; }
// d softplus / dx = sigmoid(x): the same value as TF's 1 / (1 + e^-x), and it composes.
std::vector<Tensor> grad_softplus(const GradInputs& g) { return {mul(g.grads[0], sigmoid(g.inputs[0]))}; }
// phi(x) = e^(-x^2 / 2) / sqrt(2 pi), the standard normal density, as ops.
Tensor normal_pdf(const Tensor& x) {
  return mul(scalar_like(x, 0.3989422804014327), exp(mul(square(x), scalar_like(x, -0.5))));
}
// d/dx 0.5 x (1 + erf(x / sqrt 2)) = 0.5 (1 + erf(x / sqrt 2)) + x e^(-x^2 / 2) / sqrt(2 pi): the op
// gelu_grad (one routine, without the formula's cancellations), for float32 and float64; other
// dtypes (bfloat16, computed through float32 op by op) as that formula.
std::vector<Tensor> grad_gelu(const GradInputs& g) {
  const Tensor& x = g.inputs[0];
  if (x.dtype() == float32 || x.dtype() == float64) return {mul(g.grads[0], detail::apply_op1(OpId::GeluGrad, {x}))};
  const Tensor cdf = mul(scalar_like(x, 0.5), add(scalar_like(x, 1.0), erf(mul(x, scalar_like(x, 0.7071067811865476)))));
  const Tensor pdf = normal_pdf(x);
  return {mul(g.grads[0], add(cdf, mul(x, pdf)))};
}
// d/dx (Phi(x) + x phi(x)) = phi(x) (2 - x^2)
std::vector<Tensor> grad_gelu_grad(const GradInputs& g) {
  const Tensor& x = g.inputs[0];
  const Tensor pdf = normal_pdf(x);
  return {mul(g.grads[0], mul(pdf, sub(scalar_like(x, 2.0), square(x))))};
}
// With u = c (x + a x^3) and t = tanh(u): 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 a x^2)
std::vector<Tensor> grad_gelu_approximate(const GradInputs& g) {
  const Tensor& x = g.inputs[0];
  const Tensor x2 = square(x);
  const Tensor t = tanh(mul(scalar_like(x, 0.7978845608028654),
                            add(x, mul(scalar_like(x, 0.044715), mul(x2, x)))));
  const Tensor du = mul(scalar_like(x, 0.7978845608028654),
                        add(scalar_like(x, 1.0), mul(scalar_like(x, 3 * 0.044715), x2)));
  const Tensor half_x = mul(scalar_like(x, 0.5), x);
  const Tensor d = add(mul(scalar_like(x, 0.5), add(scalar_like(x, 1.0), t)),
                       mul(half_x, mul(sub(scalar_like(x, 1.0), square(t)), du)));
  return {mul(g.grads[0], d)};
}
// TF's EluGrad: (y + 1) g below 0 (y + 1 = e^x), g from 0 up.
std::vector<Tensor> grad_elu(const GradInputs& g) {
  const Tensor& y = g.outputs[0];
  const Tensor& dy = g.grads[0];
  return {where(less(y, zeros_like(y)), mul(dy, add(y, scalar_like(y, 1.0))), dy)};
}
// alpha is TF's attribute, not a differentiable input: it has no gradient.
std::vector<Tensor> grad_leaky_relu(const GradInputs& g) {
  const Tensor& x = g.inputs[0];
  const Tensor& dy = g.grads[0];
  return {where(greater(x, zeros_like(x)), dy, mul(dy, g.inputs[1])), Tensor()};
}
// d erf / dx = 2 / sqrt(pi) e^(-x^2)
std::vector<Tensor> grad_erf(const GradInputs& g) {
  const Tensor& x = g.inputs[0];
  return {mul(g.grads[0], mul(scalar_like(x, 1.1283791670955126), exp(neg(square(x)))))};
}

// The eager side of an op of TG_ELEMENTWISE_FUNCTOR_OPS: the generic rule and loop for its arity,
// but for identity (a zero-copy view), ones_like (which refuses strings with its own advice) and
// where (a bool condition and two operands of one dtype).
template <class F, OpId kId>
void set_functor_op(OpDef* t) {
  if constexpr (kId == OpId::Identity) set_op(t, kId, &infer_same, &kernel_identity);
  else if constexpr (kId == OpId::OnesLike) set_op(t, kId, &infer_ones_like, &kernel_unary<F>);
  else if constexpr (kId == OpId::Where) set_op(t, kId, &infer_where, &kernel_where<F>);
  else if constexpr (F::arity == 2) set_op(t, kId, &infer_binary<F, kId>, &kernel_binary<F>);
  else set_op(t, kId, &infer_unary<F, kId>, &kernel_unary<F>);
}

}  // namespace

void register_elementwise_ops(OpDef* t) {
#define TG_SET_FUNCTOR_OP(Id, F, ...) set_functor_op<F, OpId::Id>(t);
  TG_ELEMENTWISE_FUNCTOR_OPS(TG_SET_FUNCTOR_OP)
#undef TG_SET_FUNCTOR_OP
  set_op(t, OpId::Cast, &infer_cast, &kernel_cast);
  set_op(t, OpId::StopGradient, &infer_same, &kernel_identity);  // identity the tapes ignore
  set_grad(t, OpId::Add, &grad_add);
  set_grad(t, OpId::Sub, &grad_sub);
  set_grad(t, OpId::Mul, &grad_mul);
  set_grad(t, OpId::Div, &grad_div);
  set_grad(t, OpId::Pow, &grad_pow);
  set_grad(t, OpId::Maximum, &grad_extreme<true>);
  set_grad(t, OpId::Minimum, &grad_extreme<false>);
  set_grad(t, OpId::Neg, &grad_neg);
  set_grad(t, OpId::Abs, &grad_abs);
  set_grad(t, OpId::Sign, &grad_sign);
  set_grad(t, OpId::Square, &grad_square);
  set_grad(t, OpId::Relu, &grad_relu);
  set_grad(t, OpId::Exp, &grad_exp);
  set_grad(t, OpId::Log, &grad_log);
  set_grad(t, OpId::Sqrt, &grad_sqrt);
  set_grad(t, OpId::Rsqrt, &grad_rsqrt);
  set_grad(t, OpId::Tanh, &grad_tanh);
  set_grad(t, OpId::Sigmoid, &grad_sigmoid);
  set_grad(t, OpId::Sin, &grad_sin);
  set_grad(t, OpId::Cos, &grad_cos);
  set_grad(t, OpId::Cast, &grad_cast);
  set_grad(t, OpId::Identity, &grad_identity);
  set_grad(t, OpId::Where, &grad_where);
  set_grad(t, OpId::Log1p, &grad_log1p);
  set_grad(t, OpId::Expm1, &grad_expm1);
  set_grad(t, OpId::Softplus, &grad_softplus);
  set_grad(t, OpId::Gelu, &grad_gelu);
  set_grad(t, OpId::GeluApproximate, &grad_gelu_approximate);
  set_grad(t, OpId::GeluGrad, &grad_gelu_grad);
  set_grad(t, OpId::Elu, &grad_elu);
  set_grad(t, OpId::LeakyRelu, &grad_leaky_relu);
  set_grad(t, OpId::Erf, &grad_erf);
}

}  // namespace detail

// ---- public front functions ----
#define TG_BINARY(fn, Id) \
  Tensor fn(const Tensor& a, const Tensor& b) { return detail::apply_op1(detail::OpId::Id, {a, b}); }
TG_BINARY(add, Add)
TG_BINARY(sub, Sub)
TG_BINARY(mul, Mul)
TG_BINARY(div, Div)
TG_BINARY(floordiv, FloorDiv)
TG_BINARY(mod, Mod)
TG_BINARY(pow, Pow)
TG_BINARY(maximum, Maximum)
TG_BINARY(minimum, Minimum)
TG_BINARY(equal, Equal)
TG_BINARY(not_equal, NotEqual)
TG_BINARY(less, Less)
TG_BINARY(less_equal, LessEqual)
TG_BINARY(greater, Greater)
TG_BINARY(greater_equal, GreaterEqual)
TG_BINARY(logical_and, LogicalAnd)
TG_BINARY(logical_or, LogicalOr)
#undef TG_BINARY
#define TG_UNARY(fn, Id) \
  Tensor fn(const Tensor& x) { return detail::apply_op1(detail::OpId::Id, {x}); }
TG_UNARY(neg, Neg)
TG_UNARY(abs, Abs)
TG_UNARY(sign, Sign)
TG_UNARY(square, Square)
TG_UNARY(relu, Relu)
TG_UNARY(exp, Exp)
TG_UNARY(log, Log)
TG_UNARY(sqrt, Sqrt)
TG_UNARY(rsqrt, Rsqrt)
TG_UNARY(tanh, Tanh)
TG_UNARY(sigmoid, Sigmoid)
TG_UNARY(sin, Sin)
TG_UNARY(cos, Cos)
TG_UNARY(logical_not, LogicalNot)
TG_UNARY(identity, Identity)
TG_UNARY(zeros_like, ZerosLike)
TG_UNARY(ones_like, OnesLike)
TG_UNARY(log1p, Log1p)
TG_UNARY(expm1, Expm1)
TG_UNARY(softplus, Softplus)
TG_UNARY(elu, Elu)
TG_UNARY(erf, Erf)
TG_UNARY(floor, Floor)
TG_UNARY(ceil, Ceil)
TG_UNARY(round, Round)
#undef TG_UNARY

Tensor gelu(const Tensor& x, bool approximate) {
  return detail::apply_op1(approximate ? detail::OpId::GeluApproximate : detail::OpId::Gelu, {x});
}

// alpha becomes a scalar of x's dtype (input 1). An empty or non-float x is passed as both
// operands instead, so that it gets leaky_relu's own error rather than scalar_like's.
Tensor leaky_relu(const Tensor& x, double alpha) {
  if (!x.defined() || !is_floating(x.dtype()))
    return detail::apply_op1(detail::OpId::LeakyRelu, {x, x});
  return detail::apply_op1(detail::OpId::LeakyRelu, {x, detail::scalar_like(x, alpha)});
}

Tensor where(const Tensor& cond, const Tensor& x, const Tensor& y) {
  return detail::apply_op1(detail::OpId::Where, {cond, x, y});
}

Tensor cast(const Tensor& x, DType dtype) {
  return detail::apply_op1(detail::OpId::Cast, {x}, detail::CastAttrs{dtype});
}

}  // namespace tg
