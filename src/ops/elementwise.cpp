// Elementwise ops: front functions, shape/dtype rules and kernels together.
// Integer arithmetic wraps around on overflow (as TensorFlow's does) and is computed in unsigned
// arithmetic so that it is defined behaviour in C++.
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "ops/broadcast.h"
#include "ops/grad_helpers.h"
#include "ops/simd_math.h"
#include "tracegraph/ops.h"

namespace tg {
namespace detail {
namespace {

// ---- dtype classes a functor accepts ----
enum Accepts : unsigned { kFloat = 1, kInt = 2, kBoolT = 4, kStr = 8, kNum = kFloat | kInt };

template <class T>
constexpr unsigned class_of() {
  if constexpr (std::is_same_v<T, bool>) return kBoolT;
  else if constexpr (std::is_same_v<T, std::string>) return kStr;
  else if constexpr (std::is_floating_point_v<T>) return kFloat;
  else return kInt;
}

template <class T>
using unsigned_of = std::make_unsigned_t<T>;

template <class T>
T wrap_add(T a, T b) { return static_cast<T>(static_cast<unsigned_of<T>>(a) + static_cast<unsigned_of<T>>(b)); }
template <class T>
T wrap_sub(T a, T b) { return static_cast<T>(static_cast<unsigned_of<T>>(a) - static_cast<unsigned_of<T>>(b)); }
template <class T>
T wrap_mul(T a, T b) { return static_cast<T>(static_cast<unsigned_of<T>>(a) * static_cast<unsigned_of<T>>(b)); }

// ---- binary functors ----
struct AddF {
  static constexpr unsigned accepts = kNum | kStr;
  template <class T>
  T operator()(const T& a, const T& b) const {
    if constexpr (class_of<T>() == kInt) return wrap_add(a, b);
    else return a + b;
  }
};
struct SubF {
  static constexpr unsigned accepts = kNum;
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (class_of<T>() == kInt) return wrap_sub(a, b);
    else return a - b;
  }
};
struct MulF {
  static constexpr unsigned accepts = kNum;
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (class_of<T>() == kInt) return wrap_mul(a, b);
    else return a * b;
  }
};
template <class T>
T int_floordiv(const char* op, T a, T b) {
  if (b == 0)
    op_error<InvalidArgumentError>(op, "integer division by zero (", a, " / 0); check the divisor "
                                   "or use a floating dtype, where x / 0 is inf");
  if (a == std::numeric_limits<T>::min() && b == -1) return a;  // wraps, as two's complement does
  T q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
struct FloorDivF {
  static constexpr unsigned accepts = kNum;
  const char* op = "floordiv";
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (class_of<T>() == kInt) return int_floordiv(op, a, b);
    else return std::floor(a / b);
  }
};
struct DivF {
  static constexpr unsigned accepts = kNum;
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (class_of<T>() == kInt) return int_floordiv("div", a, b);
    else return a / b;
  }
};
struct ModF {
  static constexpr unsigned accepts = kNum;
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (class_of<T>() == kInt) {
      if (b == 0)
        op_error<InvalidArgumentError>("mod", "integer modulo by zero (", a, " % 0); check the "
                                       "divisor or use a floating dtype");
      if (b == -1) return 0;
      T r = a % b;
      if (r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    } else {
      T r = std::fmod(a, b);
      if (r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
  }
};
struct PowF {
  static constexpr unsigned accepts = kNum;
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (class_of<T>() == kInt) {
      if (b < 0)
        op_error<InvalidArgumentError>("pow", "integers to negative integer powers are not "
                                       "allowed (got exponent ", b, "); cast to a float dtype");
      using U = unsigned_of<T>;
      U base = static_cast<U>(a), result = 1;
      for (T e = b; e > 0; e >>= 1) {
        if (e & 1) result *= base;
        base *= base;
      }
      return static_cast<T>(result);
    } else {
      return std::pow(a, b);
    }
  }
};
struct MaximumF {
  static constexpr unsigned accepts = kNum;
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (class_of<T>() == kFloat) {
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
    }
    return a < b ? b : a;
  }
};
struct MinimumF {
  static constexpr unsigned accepts = kNum;
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (class_of<T>() == kFloat) {
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
    }
    return b < a ? b : a;
  }
};
#define TG_COMPARE(Name, expr, acc)                                  \
  struct Name {                                                      \
    static constexpr unsigned accepts = acc;                         \
    template <class T>                                               \
    bool operator()(const T& a, const T& b) const { return expr; }   \
  };
TG_COMPARE(EqualF, a == b, kNum | kBoolT | kStr)
TG_COMPARE(NotEqualF, a != b, kNum | kBoolT | kStr)
TG_COMPARE(LessF, a < b, kNum)
TG_COMPARE(LessEqualF, a <= b, kNum)
TG_COMPARE(GreaterF, a > b, kNum)
TG_COMPARE(GreaterEqualF, a >= b, kNum)
TG_COMPARE(LogicalAndF, a && b, kBoolT)
TG_COMPARE(LogicalOrF, a || b, kBoolT)
#undef TG_COMPARE

// ---- unary functors ----
struct NegF {
  static constexpr unsigned accepts = kNum;
  template <class T>
  T operator()(T x) const {
    if constexpr (class_of<T>() == kInt) return wrap_sub(T(0), x);
    else return -x;
  }
};
struct AbsF {
  static constexpr unsigned accepts = kNum;
  template <class T>
  T operator()(T x) const {
    if constexpr (class_of<T>() == kInt) return x < 0 ? wrap_sub(T(0), x) : x;
    else return std::fabs(x);
  }
};
struct SignF {
  static constexpr unsigned accepts = kNum;
  template <class T>
  T operator()(T x) const {
    if constexpr (class_of<T>() == kFloat)
      if (std::isnan(x)) return x;
    return static_cast<T>((T(0) < x) - (x < T(0)));
  }
};
struct SquareF {
  static constexpr unsigned accepts = kNum;
  template <class T>
  T operator()(T x) const {
    if constexpr (class_of<T>() == kInt) return wrap_mul(x, x);
    else return x * x;
  }
};
struct ReluF {
  static constexpr unsigned accepts = kNum;
  template <class T>
  T operator()(T x) const { return x < T(0) ? T(0) : x; }  // NaN passes through, as in TF
};
// has_vec says whether vec_f32 is a SIMD routine; a bool rather than a null test of the function
// pointer, which is not a constant expression under -fsanitize (GCC).
#define TG_FLOAT_UNARY(Name, expr, vec, has_vec)                              \
  struct Name {                                                               \
    static constexpr unsigned accepts = kFloat;                               \
    static constexpr bool kHasVec = has_vec;                                  \
    static void vec_f32(const float* x, float* y, int64_t n) { vec(x, y, n); } \
    template <class T>                                                        \
    T operator()(T x) const { return expr; }                                  \
  };
inline void no_vec(const float*, float*, int64_t) {}
TG_FLOAT_UNARY(ExpF, std::exp(x), simd::exp_f32, true)
TG_FLOAT_UNARY(LogF, std::log(x), simd::log_f32, true)
TG_FLOAT_UNARY(TanhF, std::tanh(x), simd::tanh_f32, true)
TG_FLOAT_UNARY(SigmoidF, T(1) / (T(1) + std::exp(-x)), simd::sigmoid_f32, true)
TG_FLOAT_UNARY(SinF, std::sin(x), simd::sin_f32, true)
TG_FLOAT_UNARY(CosF, std::cos(x), simd::cos_f32, true)
TG_FLOAT_UNARY(SqrtF, std::sqrt(x), no_vec, false)
TG_FLOAT_UNARY(RsqrtF, T(1) / std::sqrt(x), no_vec, false)
#undef TG_FLOAT_UNARY
struct LogicalNotF {
  static constexpr unsigned accepts = kBoolT;
  template <class T>
  bool operator()(T x) const { return !x; }
};

template <class F>
constexpr bool has_vec_f32() {
  if constexpr (requires { F::kHasVec; }) return F::kHasVec;
  else return false;
}


std::string accepted_list(unsigned acc) {
  std::string s;
  auto add = [&](const char* n) { s += (s.empty() ? "" : ", ") + std::string(n); };
  if (acc & kFloat) { add("float32"); add("float64"); }
  if (acc & kInt) { add("int32"); add("int64"); }
  if (acc & kBoolT) add("bool");
  if (acc & kStr) add("string");
  return s;
}

void require_accepts(const char* op, unsigned acc, DType d) {
  unsigned cls = is_floating(d) ? kFloat : is_integer(d) ? kInt : d == DType::Bool ? kBoolT : kStr;
  if (!(acc & cls))
    op_error<InvalidArgumentError>(op, "does not support dtype ", to_string(d), "; expected one of: ",
                                   accepted_list(acc), ". tg::cast the input first");
}

// ---- shape/dtype rules ----
template <class F, int kOp>
std::vector<ValueType> infer_binary(const std::vector<ValueType>& in, const OpAttrs&) {
  const char* op = op_def(static_cast<OpId>(kOp)).name;
  require_same_dtype(op, in);
  require_accepts(op, F::accepts, in[0].dtype);
  using R = decltype(F{}(std::declval<float>(), std::declval<float>()));
  const DType out = std::is_same_v<R, bool> ? DType::Bool : in[0].dtype;
  return {ValueType{out, broadcast_shapes(op, in[0].shape, in[1].shape)}};
}

template <class F, int kOp>
std::vector<ValueType> infer_unary(const std::vector<ValueType>& in, const OpAttrs&) {
  require_accepts(op_def(static_cast<OpId>(kOp)).name, F::accepts, in[0].dtype);
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

template <class F>
void kernel_unary(const std::vector<Tensor>& in, const OpAttrs&, std::vector<Tensor>& out) {
  visit_dtype(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr ((F::accepts & class_of<T>()) != 0) {
      using R = std::decay_t<decltype(F{}(std::declval<T>()))>;
      const T* x = data_of<T>(in[0]);
      R* y = data_of<R>(out[0]);
      const int64_t n = in[0].impl()->shape.num_elements();
      if constexpr (std::is_same_v<T, float> && has_vec_f32<F>()) {
        F::vec_f32(x, y, n);
      } else {
        const F f{};
        for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
      }
    }
  });
}

// ---- cast ----
template <class To, class From>
To convert(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    // Defined saturation instead of C++'s undefined out-of-range conversion.
    if (std::isnan(v)) return 0;
    if (v <= static_cast<From>(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
    if (v >= static_cast<From>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else if constexpr (std::is_integral_v<From> && std::is_integral_v<To> && !std::is_same_v<From, bool>) {
    // Modulo 2^bits (narrowing keeps the low bits, widening sign-extends), without overflow.
    return static_cast<To>(static_cast<std::make_unsigned_t<To>>(v));
  } else {
    return static_cast<To>(v);
  }
}

std::vector<ValueType> infer_cast(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  if ((in[0].dtype == DType::String) != (attrs.dtype == DType::String))
    op_error<InvalidArgumentError>("cast", "cannot cast ", to_string(in[0].dtype), " to ",
                                   to_string(attrs.dtype),
                                   "; casts between strings and other dtypes are not supported");
  return {ValueType{attrs.dtype, in[0].shape}};
}

void kernel_cast(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const int64_t n = in[0].impl()->shape.num_elements();
  visit_dtype(in[0].impl()->dtype, [&](auto from_tag) {
    using From = decltype(from_tag);
    visit_dtype(attrs.dtype, [&](auto to_tag) {
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

// ---- identity, zeros_like, ones_like ----
std::vector<ValueType> infer_same(const std::vector<ValueType>& in, const OpAttrs&) { return {in[0]}; }
void kernel_identity(const std::vector<Tensor>& in, const OpAttrs&, std::vector<Tensor>& out) {
  out[0] = make_view(in[0], in[0].impl()->shape);
}
void kernel_zeros_like(const std::vector<Tensor>& in, const OpAttrs&, std::vector<Tensor>& out) {
  visit_dtype(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    T* y = data_of<T>(out[0]);
    const int64_t n = in[0].impl()->shape.num_elements();
    for (int64_t i = 0; i < n; ++i) y[i] = T{};
  });
}
std::vector<ValueType> infer_ones_like(const std::vector<ValueType>& in, const OpAttrs&) {
  if (in[0].dtype == DType::String)
    op_error<InvalidArgumentError>("ones_like", "a string tensor has no 'one'; use tg::fill");
  return {in[0]};
}
void kernel_ones_like(const std::vector<Tensor>& in, const OpAttrs&, std::vector<Tensor>& out) {
  visit_dtype(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, std::string>) {
      T* y = data_of<T>(out[0]);
      const int64_t n = in[0].impl()->shape.num_elements();
      for (int64_t i = 0; i < n; ++i) y[i] = T(1);
    }
  });
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
void kernel_where(const std::vector<Tensor>& in, const OpAttrs&, std::vector<Tensor>& out) {
  visit_dtype(in[1].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    const bool* c = data_of<bool>(in[0]);
    const T* x = data_of<T>(in[1]);
    const T* y = data_of<T>(in[2]);
    T* z = data_of<T>(out[0]);
    int64_t pos = 0;
    for_each_broadcast_run<3>(
        out[0].impl()->shape.dims(),
        {&in[0].impl()->shape.dims(), &in[1].impl()->shape.dims(), &in[2].impl()->shape.dims()},
        [&](const std::array<int64_t, 3>& off, const std::array<int64_t, 3>& st, int64_t n) {
          for (int64_t i = 0; i < n; ++i)
            z[pos + i] = c[off[0] + i * st[0]] ? x[off[1] + i * st[1]] : y[off[2] + i * st[2]];
          pos += n;
        });
  });
}

// ---- gradient rules ----
// Binary ops broadcast, so each input's gradient is summed back to that input's shape.

std::vector<Tensor> grad_add(const GradInputs& g) {
  return {sum_to_like(g.grads[0], g.inputs[0]), sum_to_like(g.grads[0], g.inputs[1])};
}
std::vector<Tensor> grad_sub(const GradInputs& g) {
  return {sum_to_like(g.grads[0], g.inputs[0]), sum_to_like(neg(g.grads[0]), g.inputs[1])};
}
std::vector<Tensor> grad_mul(const GradInputs& g) {
  const Tensor& a = g.inputs[0];
  const Tensor& b = g.inputs[1];
  return {sum_to_like(mul(g.grads[0], b), a), sum_to_like(mul(g.grads[0], a), b)};
}
std::vector<Tensor> grad_div(const GradInputs& g) {
  const Tensor& a = g.inputs[0];
  const Tensor& b = g.inputs[1];
  const Tensor& dz = g.grads[0];
  return {sum_to_like(div(dz, b), a), sum_to_like(div(mul(neg(dz), a), square(b)), b)};
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
  return {sum_to_like(da, a), sum_to_like(db, b)};
}
// maximum/minimum: on ties the gradient goes to the first input (TensorFlow's choice).
template <bool kMax>
std::vector<Tensor> grad_extreme(const GradInputs& g) {
  const Tensor& a = g.inputs[0];
  const Tensor& b = g.inputs[1];
  const Tensor& dz = g.grads[0];
  const Tensor first = kMax ? greater_equal(a, b) : less_equal(a, b);
  const Tensor zero = zeros_like(dz);
  return {sum_to_like(where(first, dz, zero), a), sum_to_like(where(first, zero, dz), b)};
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
  return {Tensor(), sum_to_like(where(c, dz, zero), g.inputs[1]),
          sum_to_like(where(c, zero, dz), g.inputs[2])};
}

template <class F, OpId kId>
void set_binary(OpDef* t) {
  set_op(t, kId, &infer_binary<F, static_cast<int>(kId)>, &kernel_binary<F>);
}
template <class F, OpId kId>
void set_unary(OpDef* t) {
  set_op(t, kId, &infer_unary<F, static_cast<int>(kId)>, &kernel_unary<F>);
}

}  // namespace

void register_elementwise_ops(OpDef* t) {
  set_binary<AddF, OpId::Add>(t);
  set_binary<SubF, OpId::Sub>(t);
  set_binary<MulF, OpId::Mul>(t);
  set_binary<DivF, OpId::Div>(t);
  set_binary<FloorDivF, OpId::FloorDiv>(t);
  set_binary<ModF, OpId::Mod>(t);
  set_binary<PowF, OpId::Pow>(t);
  set_binary<MaximumF, OpId::Maximum>(t);
  set_binary<MinimumF, OpId::Minimum>(t);
  set_binary<EqualF, OpId::Equal>(t);
  set_binary<NotEqualF, OpId::NotEqual>(t);
  set_binary<LessF, OpId::Less>(t);
  set_binary<LessEqualF, OpId::LessEqual>(t);
  set_binary<GreaterF, OpId::Greater>(t);
  set_binary<GreaterEqualF, OpId::GreaterEqual>(t);
  set_binary<LogicalAndF, OpId::LogicalAnd>(t);
  set_binary<LogicalOrF, OpId::LogicalOr>(t);
  set_unary<NegF, OpId::Neg>(t);
  set_unary<AbsF, OpId::Abs>(t);
  set_unary<SignF, OpId::Sign>(t);
  set_unary<SquareF, OpId::Square>(t);
  set_unary<ReluF, OpId::Relu>(t);
  set_unary<ExpF, OpId::Exp>(t);
  set_unary<LogF, OpId::Log>(t);
  set_unary<SqrtF, OpId::Sqrt>(t);
  set_unary<RsqrtF, OpId::Rsqrt>(t);
  set_unary<TanhF, OpId::Tanh>(t);
  set_unary<SigmoidF, OpId::Sigmoid>(t);
  set_unary<SinF, OpId::Sin>(t);
  set_unary<CosF, OpId::Cos>(t);
  set_unary<LogicalNotF, OpId::LogicalNot>(t);
  set_op(t, OpId::Cast, &infer_cast, &kernel_cast);
  set_op(t, OpId::Identity, &infer_same, &kernel_identity);
  set_op(t, OpId::StopGradient, &infer_same, &kernel_identity);  // identity the tapes ignore
  set_op(t, OpId::ZerosLike, &infer_same, &kernel_zeros_like);
  set_op(t, OpId::OnesLike, &infer_ones_like, &kernel_ones_like);
  set_op(t, OpId::Where, &infer_where, &kernel_where);
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
#undef TG_UNARY

Tensor where(const Tensor& cond, const Tensor& x, const Tensor& y) {
  return detail::apply_op1(detail::OpId::Where, {cond, x, y});
}

Tensor cast(const Tensor& x, DType dtype) {
  detail::OpAttrs attrs;
  attrs.dtype = dtype;
  return detail::apply_op1(detail::OpId::Cast, {x}, attrs);
}

}  // namespace tg
