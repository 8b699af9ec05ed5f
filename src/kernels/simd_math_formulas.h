// Every routine of simd_math.h written once, over "lanes" L of any width: L::V holds the
// values (float32 lanes; a plain float or double at width 1), L::Wide the float64 lanes that
// gelu works in. The instruction-set files (simd_math_avx512.cpp, simd_math_avx2.cpp through
// simd_math_impl.inc) instantiate each formula on their registers, simd_math.cpp's scalar path
// and the ops' functors (elementwise_functors.h: float64, and float32 where no vector path runs)
// on Scalar<T> below, so every dtype and path evaluates one formula with the same constants.
//
// What lanes provide: kWidth, load, store (float32 lanes only); set1(k); exp; every function of
// TG_SIMD_LIBM_F32 (float lanes) or TG_SIMD_LIBM_F64 (Wide); neg_abs(v) (-|v|); min(a, b) (b
// where either is NaN, as x86's min); select_negative(v, a, b) (a where v < 0, else b);
// select_above(v, k, a, b) (a where v > k, else b); in_double<f>(v) (f on v's lanes widened to
// float64, rounded back). Arithmetic is written with the operators, which GCC and clang define
// on the intrinsic vector types as on scalars (the intrinsics themselves are those operators);
// g++ contracts no FMA under -std=c++20, so each step rounds alone on every path.
//
// Everything has internal linkage: the AVX-512 and AVX2 files compile this under other -m
// flags (see elementwise_functors.h). Only the Scalar lanes use std:: math, and those files
// never instantiate them.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

/// Every routine, as X(OpId, functor, routine, avx512, avx2, scalar): the one list that the
/// declarations and per-instruction-set tables of simd_math.h, the per-register table of the
/// fused kernel's chains (simd_math_avx512.h, fused_micro.inc), the ops' functors
/// (elementwise_functors.h, which splices it into its list of elementwise ops), the op table
/// (docs/ops.md) and the tests are generated from. The last three columns are the worst error
/// each instruction-set path may have, in ULP against the exact value: the worst case found over
/// every float32 input (every 13th for log1p to elu) rounded up to the next half ULP, asserted by
/// tests/ops/simd_math_test.cpp on every path the CPU runs. Adding a routine: its line here, its
/// formula below (named as the routine), and its op (docs/design.md, "Where to add things").
#define TG_SIMD_MATH_ROUTINES(X)                                                                   \
  X(Exp, ExpF, exp, 1, 3, 1) X(Log, LogF, log, 4, 4, 1) X(Tanh, TanhF, tanh, 1.5, 1.5, 2.5)        \
  X(Sigmoid, SigmoidF, sigmoid, 2.5, 4, 2.5) X(Sin, SinF, sin, 2.5, 2.5, 1)                       \
  X(Cos, CosF, cos, 2.5, 2.5, 1) X(Log1p, Log1pF, log1p, 2, 2, 1) X(Expm1, Expm1F, expm1, 2.5, 2, 1) \
  X(Erf, ErfF, erf, 4, 2, 1) X(Softplus, SoftplusF, softplus, 7.5, 7, 7.5)                        \
  X(Gelu, GeluF, gelu, 1, 1, 1) X(GeluApproximate, GeluApproximateF, gelu_tanh, 1, 1, 1)          \
  X(Elu, EluF, elu, 2.5, 2, 1)

/// The libm functions the formulas call on float32 lanes and on float64 ones: libmvec's vector
/// variants on AVX-512 and AVX2 (simd_math_impl.inc declares them), libm itself at width 1. exp on
/// float32 lanes is each instruction set's own (ours on AVX-512).
#define TG_SIMD_LIBM_F32(X) X(log) X(tanh) X(sin) X(cos) X(log1p) X(expm1) X(erf)
#define TG_SIMD_LIBM_F64(X) X(erfc) X(exp)

namespace tg::detail::simd {

/// The constants of the formulas below.
/// softplus(x) is x itself above this and e^x below its negative: -(log(epsilon) + 2), TF's
/// threshold, as float32 computes it (log(2^-23) + 2) and as float64 does (log(2^-52) + 2).
inline constexpr float kSoftplusLinearAboveF32 = 13.942385f;
inline constexpr double kSoftplusLinearAboveF64 = 34.04365338911715;
inline constexpr double kSqrt2 = 1.4142135623730951;
inline constexpr double kSqrt2OverPi = 0.7978845608028654;  // gelu's tanh form: u's factor
inline constexpr double kGeluCubic = 0.044715;              // and its x^3 coefficient

namespace {

/// Width 1: T itself, through libm.
template <class T>
struct Scalar {
  using V = T;
  using Elem = T;
  using Wide = Scalar<double>;
  static constexpr int kWidth = 1;
  static V load(const T* p) { return *p; }
  static void store(T* p, V v) { *p = v; }
  static V set1(T k) { return k; }
#define TG_SIMD_SCALAR_LIBM(fn) \
  static V fn(V v) { return std::fn(v); }
  TG_SIMD_LIBM_F32(TG_SIMD_SCALAR_LIBM)
  TG_SIMD_LIBM_F64(TG_SIMD_SCALAR_LIBM)
#undef TG_SIMD_SCALAR_LIBM
  static V neg_abs(V v) { return -std::fabs(v); }
  static V min(V a, V b) { return a < b ? a : b; }
  static V select_negative(V v, V a, V b) { return v < V(0) ? a : b; }
  static V select_above(V v, V k, V a, V b) { return v > k ? a : b; }
  template <double (*f)(double)>
  static V in_double(V v) { return static_cast<V>(f(v)); }
};

template <class T>
constexpr T kSoftplusLinearAbove = sizeof(T) == sizeof(float) ? T(kSoftplusLinearAboveF32)
                                                               : T(kSoftplusLinearAboveF64);

template <class L>
using Vec = typename L::V;

namespace formula {

// The libm functions themselves.
template <class L> Vec<L> exp(Vec<L> v) { return L::exp(v); }
template <class L> Vec<L> log(Vec<L> v) { return L::log(v); }
template <class L> Vec<L> tanh(Vec<L> v) { return L::tanh(v); }
template <class L> Vec<L> sin(Vec<L> v) { return L::sin(v); }
template <class L> Vec<L> cos(Vec<L> v) { return L::cos(v); }
template <class L> Vec<L> log1p(Vec<L> v) { return L::log1p(v); }
template <class L> Vec<L> expm1(Vec<L> v) { return L::expm1(v); }
template <class L> Vec<L> erf(Vec<L> v) { return L::erf(v); }

// 1 / (1 + e^-x) would overflow e^-x for x below -88.7 in float32 (-709.8 in float64) and
// return 0 where the true value is still a normal or subnormal number; with t = e^-|x| in (0, 1]
// the negative side is t / (1 + t).
template <class L>
Vec<L> sigmoid(Vec<L> v) {
  const Vec<L> t = L::exp(L::neg_abs(v));
  const Vec<L> one = L::set1(1.0f);
  return L::select_negative(v, t, one) / (one + t);
}

// log(1 + e^x) in TF's three pieces, with TF's threshold t = log(epsilon) + 2 of the dtype
// (tensorflow/core/kernels/softplus_op.h): x above -t, where 1 + e^x rounds to e^x (and e^x
// would overflow further up); e^x below t, where log(1 + e^x) rounds to it within epsilon;
// log1p(e^x) between. Strict comparisons, as TF's, so NaN takes the last piece. e^x is
// computed on x clamped to -t, where the other lanes' results are dropped anyway: unclamped,
// x > 88.7 would give log1p an inf, which libmvec hands to scalar libm one lane at a time. The
// clamp keeps NaN (min), and NaN fails both comparisons, so it comes out of log1p.
template <class L>
Vec<L> softplus(Vec<L> v) {
  using E = typename L::Elem;
  const Vec<L> k = L::set1(kSoftplusLinearAbove<E>);
  const Vec<L> e = L::exp(L::min(k, v));
  return L::select_above(v, k, v, L::select_above(L::set1(-kSoftplusLinearAbove<E>), v, e, L::log1p(e)));
}

// e^x - 1 below 0 (as expm1, which keeps the digits e^x - 1 cancels), x from 0 up, NaN and -0
// included. expm1 sees min(0, x), for the same reason as softplus's clamp: large positive lanes
// would overflow into libmvec's scalar path.
template <class L>
Vec<L> elu(Vec<L> v) {
  return L::select_negative(v, L::expm1(L::min(L::set1(0.0f), v)), v);
}

// TF's two gelu forms, 0.5 x (1 + erf(x / sqrt 2)) and 0.5 x (1 + tanh(u)) with
// u = sqrt(2 / pi) (x + 0.044715 x^3), written without their cancellation for negative x (where
// 1 + erf and 1 + tanh lose every digit): 0.5 x erfc(-x / sqrt 2) and x / (1 + e^(-2u)), the
// same functions. float32 is evaluated in float64 (W, the Wide lanes): erfc and exp multiply
// their argument's relative error by about 2 z^2 and |2u|, so a float32 x / sqrt 2 or u alone
// costs up to ~170 ULP in the negative tail. Like TF's, both give NaN at -inf (-inf * 0,
// -inf / inf).
template <class W>
Vec<W> gelu_wide(Vec<W> w) {
  return W::set1(0.5) * w * W::erfc(-w / W::set1(kSqrt2));
}
template <class W>
Vec<W> gelu_tanh_wide(Vec<W> w) {
  const Vec<W> u = W::set1(kSqrt2OverPi) * (w + W::set1(kGeluCubic) * (w * w * w));
  return w / (W::set1(1.0) + W::exp(W::set1(-2.0) * u));
}
// A NaN input comes back as itself: which operand's NaN the product 0.5 x erfc(.) returns (its
// sign) is the compiler's choice of operand order, and g++ and clang chose differently.
template <class L>
Vec<L> gelu(Vec<L> v) {
  const Vec<L> r = L::template in_double<&gelu_wide<typename L::Wide>>(v);
  return L::select_negative(v, r, L::select_above(v, L::set1(-1.0f), r, v));
}
template <class L>
Vec<L> gelu_tanh(Vec<L> v) {
  return L::template in_double<&gelu_tanh_wide<typename L::Wide>>(v);
}

}  // namespace formula

/// f over n floats, kWidth at a time. The tail goes through a padded register too, so every
/// element sees the same routine.
template <class L, Vec<L> (*f)(Vec<L>)>
void apply(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + L::kWidth <= n; i += L::kWidth) L::store(y + i, f(L::load(x + i)));
  if constexpr (L::kWidth > 1) {
    if (i < n) {
      alignas(64) float buf[L::kWidth] = {};
      std::memcpy(buf, x + i, static_cast<std::size_t>(n - i) * sizeof(float));
      L::store(buf, f(L::load(buf)));
      std::memcpy(y + i, buf, static_cast<std::size_t>(n - i) * sizeof(float));
    }
  }
}

}  // namespace
}  // namespace tg::detail::simd
