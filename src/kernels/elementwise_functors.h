// The scalar semantics of every elementwise op, written once. The eager kernels
// (elementwise.cpp) and the fused kernel's micro-ops (fused_micro.inc, built once per ISA) both
// apply these functors, and constant folding runs the eager kernels, so a fused graph, an
// unfused one and a folded constant agree bit for bit (tests/passes/fusion_test.cpp).
//
// The AVX-512 build of the micro-ops includes this header too, hence two rules:
// - Everything here has internal linkage (an unnamed namespace). An inline function compiled in
//   two translation units under different -m flags is otherwise one symbol, and the linker may
//   keep the AVX-512 copy for baseline callers.
// - That cannot protect std::'s own inline functions, so only functors with `calls_libm` use
//   std:: math, and the AVX-512 build never instantiates them; the others use operators and
//   compiler builtins, and take limits from constants evaluated at compile time.
#pragma once
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "core/check.h"
#include "kernels/simd_math.h"
#include "kernels/simd_math_formulas.h"
#include "tracegraph/dtype.h"

namespace tg::detail {
namespace {

// ---- what a functor is defined on ----

// kU8 (uint8) is a class of its own, not part of kInt or kNum: TensorFlow defines only some ops
// on uint8 (no neg, abs, pow, mod ...), so each functor that accepts it says so.
// kBF16 (bfloat16) is accepted by no functor: ops compute on it in float32 and round the
// result (ops/bf16_compute.h), so these functors only ever see its float32 values.
enum DTypeClass : unsigned {
  kFloat = 1, kInt = 2, kBoolT = 4, kStr = 8, kU8 = 16, kBF16 = 32, kNum = kFloat | kInt, kAny = 31
};

/// Sixteen float32 lanes as one value (a GCC vector type). The fused kernel's register chains
/// (fused_micro.inc, AVX-512 build) apply the arithmetic functors below to whole registers, so
/// the functors are written to work on it too; every rule treats it as float.
typedef float F32x16 __attribute__((vector_size(64)));

template <class T>
constexpr unsigned class_of() {
  if constexpr (std::is_same_v<T, bool>) return kBoolT;
  else if constexpr (std::is_same_v<T, std::string>) return kStr;
  else if constexpr (std::is_same_v<T, uint8_t>) return kU8;
  else if constexpr (std::is_same_v<T, bfloat16_t>) return kBF16;
  else if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, F32x16>) return kFloat;
  else return kInt;
}
/// Signed or unsigned integers: the classes whose arithmetic wraps and whose division floors.
template <class T>
constexpr bool integral_class() {
  return (class_of<T>() & (kInt | kU8)) != 0;
}

/// Every functor derives from one of these. accepts: the dtype classes it is defined on (shape
/// inference refuses the others). raises_on: classes on which it can throw
/// (integer division by zero), which the fused kernel leaves to the op's own kernel so that the
/// error surfaces where it belongs. calls_libm: uses std:: math (see the file comment).
template <unsigned kAccepts, unsigned kRaisesOn = 0>
struct Unary {
  static constexpr int arity = 1;
  static constexpr unsigned accepts = kAccepts;
  static constexpr unsigned raises_on = kRaisesOn;
  static constexpr bool calls_libm = false;
};
template <unsigned kAccepts, unsigned kRaisesOn = 0>
struct Binary : Unary<kAccepts, kRaisesOn> {
  static constexpr int arity = 2;
};
struct LibmUnary : Unary<kFloat> {
  static constexpr bool calls_libm = true;
};
// floordiv, mod and pow: libm on floats; their integer forms can raise.
struct LibmBinary : Binary<kFloat | kInt, kInt> {
  static constexpr bool calls_libm = true;
};
// floordiv and mod, which TensorFlow also defines on uint8.
struct LibmBinaryU8 : Binary<kFloat | kInt | kU8, kInt | kU8> {
  static constexpr bool calls_libm = true;
};

/// The dtype classes the fused kernel builds loops for.
template <class F>
constexpr unsigned fusable_classes = F::accepts & ~F::raises_on & ~kStr;

/// Whether F has a vectorised float32 routine (simd_math.h) that both kernels call for float32.
template <class F>
constexpr bool has_vec_f32 = requires(const float* x, float* y, int64_t n) { F::vec_f32(x, y, n); };

// Constants, not calls: std::numeric_limits' functions are inline std:: functions too.
template <class T>
constexpr T kQuietNaN = std::numeric_limits<T>::quiet_NaN();
template <class T>
constexpr T kLowest = std::numeric_limits<T>::min();  // integers only
template <class T>
constexpr T kHighest = std::numeric_limits<T>::max();

template <class T>
constexpr bool is_nan(T v) {
  return __builtin_isnan(v);  // what std::isnan expands to, without being a std:: function
}

// Integer arithmetic wraps around (TensorFlow's behaviour), computed in unsigned arithmetic so
// that it is defined in C++.
template <class T>
using Unsigned = std::make_unsigned_t<T>;
template <class T>
T wrap_add(T a, T b) { return static_cast<T>(static_cast<Unsigned<T>>(a) + static_cast<Unsigned<T>>(b)); }
template <class T>
T wrap_sub(T a, T b) { return static_cast<T>(static_cast<Unsigned<T>>(a) - static_cast<Unsigned<T>>(b)); }
template <class T>
T wrap_mul(T a, T b) { return static_cast<T>(static_cast<Unsigned<T>>(a) * static_cast<Unsigned<T>>(b)); }

// ---- binary ----

struct AddF : Binary<kNum | kU8 | kStr> {
  template <class T>
  T operator()(const T& a, const T& b) const {
    if constexpr (integral_class<T>()) return wrap_add(a, b);
    else return a + b;
  }
};
struct SubF : Binary<kNum | kU8> {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (integral_class<T>()) return wrap_sub(a, b);
    else return a - b;
  }
};
struct MulF : Binary<kNum | kU8> {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (integral_class<T>()) return wrap_mul(a, b);
    else return a * b;
  }
};

// Rounds toward negative infinity; INT_MIN / -1 wraps to INT_MIN, as two's complement does.
template <class T>
T int_floordiv(const char* op, T a, T b) {
  if (b == 0)
    op_error<InvalidArgumentError>(op, "integer division by zero (", a, " / 0); check the divisor "
                                   "or use a floating dtype, where x / 0 is inf");
  if constexpr (std::is_unsigned_v<T>) {
    return static_cast<T>(a / b);  // non-negative operands: truncation is the floor
  } else {
    if (a == kLowest<T> && b == -1) return a;
    T q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  }
}
// Integer div floors, as floordiv does.
struct DivF : Binary<kNum | kU8, kInt | kU8> {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (integral_class<T>()) return int_floordiv("div", a, b);
    else return a / b;
  }
};
struct FloorDivF : LibmBinaryU8 {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (integral_class<T>()) return int_floordiv("floordiv", a, b);
    else return std::floor(a / b);
  }
};
// The result takes the divisor's sign (Python's and TensorFlow's floormod).
struct ModF : LibmBinaryU8 {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (integral_class<T>()) {
      if (b == 0)
        op_error<InvalidArgumentError>("mod", "integer modulo by zero (", a, " % 0); check the "
                                       "divisor or use a floating dtype");
      if constexpr (std::is_unsigned_v<T>) {
        return static_cast<T>(a % b);  // both non-negative: no sign to fix
      } else {
        if (b == -1) return 0;  // INT_MIN % -1 overflows in C++
        T r = a % b;
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
        return r;
      }
    } else {
      T r = std::fmod(a, b);
      if (r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
  }
};
struct PowF : LibmBinary {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (class_of<T>() == kInt) {
      if (b < 0)
        op_error<InvalidArgumentError>("pow", "integers to negative integer powers are not "
                                       "allowed (got exponent ", b, "); cast to a float dtype");
      Unsigned<T> base = static_cast<Unsigned<T>>(a), result = 1;
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
/// A float with a subnormal value read as the zero of its sign, found in integer arithmetic; other
/// types as they are. The kernels' float environment (core/float_environment.h) reads subnormal
/// operands so (DAZ), but only in arithmetic: a compare-and-select returns a subnormal as stored
/// where MAXPS returns it as zero, and gcc turns one into the other. The ops that return an
/// operand by comparing (relu, maximum, minimum) read it here first on scalars, so every path and
/// every compiler choice gives the same bits (relu on whole registers is one MAXPS instead).
template <class T>
T read_as_kernels_do(T x) {
  if constexpr (std::is_same_v<T, float>) {
    const uint32_t u = __builtin_bit_cast(uint32_t, x);
    return __builtin_bit_cast(float, (u & 0x7f800000u) == 0 ? (u & 0x80000000u) : u);
  } else if constexpr (std::is_same_v<T, double>) {
    const uint64_t u = __builtin_bit_cast(uint64_t, x);
    constexpr uint64_t kExponent = 0x7ff0000000000000u, kSign = 0x8000000000000000u;
    return __builtin_bit_cast(double, (u & kExponent) == 0 ? (u & kSign) : u);
  } else {
    return x;
  }
}

// NaN in either operand gives NaN (TensorFlow's rule, unlike std::max).
struct MaximumF : Binary<kNum | kU8> {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (class_of<T>() == kFloat) {
      if (is_nan(a) || is_nan(b)) return kQuietNaN<T>;
    }
    a = read_as_kernels_do(a), b = read_as_kernels_do(b);
    return a < b ? b : a;
  }
};
struct MinimumF : Binary<kNum | kU8> {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (class_of<T>() == kFloat) {
      if (is_nan(a) || is_nan(b)) return kQuietNaN<T>;
    }
    a = read_as_kernels_do(a), b = read_as_kernels_do(b);
    return b < a ? b : a;
  }
};
#define TG_PREDICATE(Name, expr, acc)                              \
  struct Name : Binary<acc> {                                      \
    template <class T>                                             \
    bool operator()(const T& a, const T& b) const { return expr; } \
  };
TG_PREDICATE(EqualF, a == b, kNum | kU8 | kBoolT | kStr)
TG_PREDICATE(NotEqualF, a != b, kNum | kU8 | kBoolT | kStr)
TG_PREDICATE(LessF, a < b, kNum | kU8)
TG_PREDICATE(LessEqualF, a <= b, kNum | kU8)
TG_PREDICATE(GreaterF, a > b, kNum | kU8)
TG_PREDICATE(GreaterEqualF, a >= b, kNum | kU8)
#undef TG_PREDICATE
// Operands by value: both are loaded before && / || look at them, so the loops vectorise
// (through references the second load would be conditional).
struct LogicalAndF : Binary<kBoolT> {
  bool operator()(bool a, bool b) const { return a && b; }
};
struct LogicalOrF : Binary<kBoolT> {
  bool operator()(bool a, bool b) const { return a || b; }
};

// ---- unary ----

struct NegF : Unary<kNum> {
  template <class T>
  T operator()(T x) const {
    if constexpr (class_of<T>() == kInt) return wrap_sub(T(0), x);
    else return -x;
  }
};
struct AbsF : Unary<kNum> {
  template <class T>
  T operator()(T x) const {
    if constexpr (class_of<T>() == kInt) return x < 0 ? wrap_sub(T(0), x) : x;
    else if constexpr (std::is_same_v<T, float>) return __builtin_fabsf(x);
    else return __builtin_fabs(x);
  }
};
struct SignF : Unary<kNum> {
  template <class T>
  T operator()(T x) const {
    if constexpr (class_of<T>() == kFloat)
      if (is_nan(x)) return x;
    return static_cast<T>((T(0) < x) - (x < T(0)));
  }
};
struct SquareF : Unary<kNum | kU8> {
  template <class T>
  T operator()(T x) const {
    if constexpr (integral_class<T>()) return wrap_mul(x, x);
    else return x * x;
  }
};
struct ReluF : Unary<kNum> {
  // NaN and -0.0 pass through, as in TF; a subnormal x reads as the zero of its sign, as the
  // kernels' float environment (DAZ) reads it. On whole registers that is one MAXPS(0, x): it
  // returns its second operand unless the first is greater, read under DAZ. Elsewhere the select
  // would return a subnormal as stored (and gcc picks select or MAXPS as it likes), so x is read
  // from its bits first. (All 16 lanes through the masked form: gcc 12 warns about the unmasked
  // intrinsic's undefined pass-through value.)
  template <class T>
  T operator()(T x) const {
    if constexpr (std::is_same_v<T, F32x16>) {
      const __m512 v = reinterpret_cast<__m512>(x);
      return reinterpret_cast<F32x16>(_mm512_mask_max_ps(v, 0xFFFF, _mm512_setzero_ps(), v));
    } else {
      x = read_as_kernels_do(x);
      return x < T{} ? T{} : x;  // T{}: 0 in every lane
    }
  }
};
#define TG_LIBM_UNARY(Name, expr)              \
  struct Name : LibmUnary {                    \
    template <class T>                         \
    T operator()(T x) const { return expr; }   \
  };
TG_LIBM_UNARY(SqrtF, std::sqrt(x))
TG_LIBM_UNARY(RsqrtF, T(1) / std::sqrt(x))
TG_LIBM_UNARY(FloorF, std::floor(x))
TG_LIBM_UNARY(CeilF, std::ceil(x))
#undef TG_LIBM_UNARY

// The ops with a vectorised float32 routine (simd_math.h's list): float32 runs the routine in
// both kernels; float64 (and any other use of operator()) evaluates the routine's formula at
// width 1 (simd_math_formulas.h, which explains each), so every dtype and path has one formula.
#define TG_SIMD_MATH_FUNCTOR(Op, F, routine, ...)                                                 \
  struct F : LibmUnary {                                                                       \
    static void vec_f32(const float* x, float* y, int64_t n) { simd::routine##_f32(x, y, n); } \
    template <class T>                                                                         \
    T operator()(T x) const { return simd::formula::routine<simd::Scalar<T>>(x); }             \
  };
TG_SIMD_MATH_ROUTINES(TG_SIMD_MATH_FUNCTOR)
#undef TG_SIMD_MATH_FUNCTOR

// Half to even (TF's Round, NumPy's round): nearbyint under the default rounding mode. Integers
// are already round.
struct RoundF : Unary<kNum> {
  static constexpr bool calls_libm = true;
  template <class T>
  T operator()(T x) const {
    if constexpr (class_of<T>() == kInt) return x;
    else return std::nearbyint(x);
  }
};
// x above 0, alpha * x elsewhere (TF's select: alpha may be > 1 or negative, so not a max).
struct LeakyReluF : Binary<kFloat> {
  template <class T>
  T operator()(T x, T alpha) const { return x > T(0) ? x : x * alpha; }
};
struct LogicalNotF : Unary<kBoolT> {
  template <class T>
  bool operator()(T x) const { return !x; }
};
struct IdentityF : Unary<kAny> {
  template <class T>
  T operator()(const T& x) const { return x; }
};
struct ZerosLikeF : Unary<kAny> {
  template <class T>
  T operator()(const T&) const { return T{}; }
};
struct OnesLikeF : Unary<kNum | kU8 | kBoolT> {
  template <class T>
  T operator()(const T&) const { return T(1); }
};

// ---- where (operands: a bool condition, then x and y of one dtype) ----

struct WhereF : Unary<kAny> {
  static constexpr int arity = 3;
  template <class T>
  T operator()(bool c, const T& x, const T& y) const { return c ? x : y; }
};

// ---- cast (a conversion between two dtypes, so both kernels iterate dtype pairs) ----

template <class To, class From>
To convert(From v) {
  if constexpr (std::is_same_v<From, bfloat16_t>) {
    return convert<To>(static_cast<float>(v));  // exact: every bfloat16 is a float32
  } else if constexpr (std::is_same_v<To, bfloat16_t>) {
    // Through float32, as TensorFlow (Eigen) converts: float64 and int64 round twice.
    return bfloat16_t(convert<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    // Defined saturation instead of C++'s undefined out-of-range conversion; NaN gives 0.
    if (is_nan(v)) return 0;
    if (v <= static_cast<From>(kLowest<To>)) return kLowest<To>;
    if (v >= static_cast<From>(kHighest<To>)) return kHighest<To>;
    return static_cast<To>(v);
  } else if constexpr (std::is_integral_v<From> && std::is_integral_v<To> && !std::is_same_v<From, bool>) {
    // Modulo 2^bits (narrowing keeps the low bits, widening sign-extends), without overflow.
    return static_cast<To>(static_cast<Unsigned<To>>(v));
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace
}  // namespace tg::detail

/// The elementwise ops computed by a functor above, as X(OpId name, functor, ...): the eager
/// registration (register_elementwise_ops) and the fused kernel's micro-op table
/// (fused_micro.inc) are both generated from this list, so an op listed here is registered and
/// fusable (for its fusable_classes) at once. The ops with a vectorised float32 routine come
/// from simd_math.h's list, whose entries carry the routine's name as a third argument (hence
/// the `...` of every X). Cast is the one elementwise op that is not here: it converts between
/// two dtypes (convert above); stop_gradient never fuses.
#define TG_ELEMENTWISE_FUNCTOR_OPS(X)                                                        \
  X(Add, AddF) X(Sub, SubF) X(Mul, MulF) X(Div, DivF) X(FloorDiv, FloorDivF) X(Mod, ModF)   \
  X(Pow, PowF) X(Maximum, MaximumF) X(Minimum, MinimumF) X(Equal, EqualF)                    \
  X(NotEqual, NotEqualF) X(Less, LessF) X(LessEqual, LessEqualF) X(Greater, GreaterF)        \
  X(GreaterEqual, GreaterEqualF) X(LogicalAnd, LogicalAndF) X(LogicalOr, LogicalOrF)         \
  X(Neg, NegF) X(Abs, AbsF) X(Sign, SignF) X(Square, SquareF) X(Relu, ReluF) X(Sqrt, SqrtF)  \
  X(Rsqrt, RsqrtF) X(LogicalNot, LogicalNotF) X(Identity, IdentityF) X(ZerosLike, ZerosLikeF) \
  X(OnesLike, OnesLikeF) X(Where, WhereF) X(LeakyRelu, LeakyReluF) X(Floor, FloorF)          \
  X(Ceil, CeilF) X(Round, RoundF) TG_SIMD_MATH_ROUTINES(X)
