// Every routine of simd_math.h written once, over "lanes" L of any width: L::V holds the
// values (float32 lanes; a plain float or double at width 1), L::Wide the float64 lanes that
// gelu_approximate works in. The instruction-set files (simd_math_avx512.cpp, simd_math_avx2.cpp through
// simd_math_impl.inc) instantiate each formula on their registers, simd_math.cpp's scalar path
// and the ops' functors (elementwise_functors.h: float64, and float32 where no vector path runs)
// on Scalar<T> below, so every dtype and path evaluates one formula with the same constants.
//
// What lanes provide: kWidth, load, store (float32 lanes only); set1(k); exp; every function of
// TG_SIMD_LIBM_F32 (float lanes) or TG_SIMD_LIBM_F64 (Wide); neg_abs(v) (-|v|); min(a, b) (b
// where either is NaN, as x86's min); select_negative(v, a, b) (a where v < 0, else b);
// select_above(v, k, a, b) (a where v > k, else b); in_double<f>(v) (f on v's lanes widened to
// float64, rounded back); and for float32 gelu: fma(a, b, c) (a b + c rounded once),
// round (to nearest, ties to even), lookup(row, i) (row[i] for a float i in 0..15 and a row of 16
// floats; any index for a NaN i) and scale(v, n) (v 2^n rounded once, n integral, |n| <= 252).
// Arithmetic is written with the operators, which GCC and clang define on the intrinsic vector
// types as on scalars (the intrinsics themselves are those operators); the simd_math files
// compile with -ffp-contract=off (src/CMakeLists.txt: g++ 12 contracts a * b + c into one FMA
// even under -std=c++20), so each step rounds alone on every path, and where a formula wants an
// FMA it says L::fma.
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
  X(Gelu, GeluF, gelu, 1.5, 1.5, 1.5) X(GeluApproximate, GeluApproximateF, gelu_tanh, 1, 1, 1)          \
  X(Elu, EluF, elu, 2.5, 2, 1) X(GeluGrad, GeluGradF, gelu_grad, 2.5, 2.5, 2.5)

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
  static V fma(V a, V b, V c) { return std::fma(a, b, c); }
  static V round(V v) { return std::nearbyint(v); }
  static V lookup(const float (&row)[16], V i) { return row[i >= V(0) && i < V(16) ? static_cast<int>(i) : 0]; }
  static V scale(V v, V n) { return std::ldexp(v, n == n ? static_cast<int>(n) : 0); }
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
// 1 + erf and 1 + tanh lose every digit): x Phi(x) with Phi(-a) = 0.5 erfc(a / sqrt 2) and
// x / (1 + e^(-2u)), the same functions. Like TF's, both give NaN at -inf (-inf * 0, -inf / inf).
//
// The erf form runs in float32 arithmetic (float64, at width 1, as written in gelu_wide; the tanh
// form is still evaluated in float64 and rounded once). With a = |x|,
//   gelu(-a) = -e^(-a^2 / 2) G(a),   gelu(a) = a - e^(-a^2 / 2) G(a),   G(a) = a e^(a^2 / 2) Phi(-a),
// G smooth, going from a / 2 at 0 to 1 / sqrt(2 pi) at infinity, which gaussian_poly evaluates
// piecewise (GaussTailPieces, within 0.05 ULP). What cost float32 its accuracy before is
// e^(-a^2 / 2): a float32 a^2 alone carries a relative error of 2^-24, which e^ multiplies by
// a^2 / 2 (up to 104 before the result underflows), ~170 ULP in the tail. So -a^2 / 2 is formed
// exactly as hi + lo with one FMA and split as n ln 2 + r with the Cody-Waite constants below (the
// first product exact); the products and sums after that keep their rounding errors (FMA,
// Fast2Sum) until the last sum, and 2^n is applied after it with one rounding (scale), so results
// in the subnormal range round only once too. About 60 float32 operations per vector, 16 of them
// table permutes: several times faster than libmvec's float64 erfc on half-width vectors.
// Worst errors over every float32 input are in the list (TG_SIMD_MATH_ROUTINES).
template <class W>
Vec<W> gelu_wide(Vec<W> w) {
  return W::set1(0.5) * w * W::erfc(-w / W::set1(kSqrt2));
}
template <class W>
Vec<W> gelu_tanh_wide(Vec<W> w) {
  const Vec<W> u = W::set1(kSqrt2OverPi) * (w + W::set1(kGeluCubic) * (w * w * w));
  return w / (W::set1(1.0) + W::exp(W::set1(-2.0) * u));
}

/// G (above) of a = |x| on [0, 15.25] as sixteen degree-8 polynomials in s = a - k for the k
/// nearest a (s exact: k is within a factor 2 of a). The constant term is two floats
/// (c[0] + c0_lo), which keeps the pieces within 0.05 ULP of G; fitted by weighted
/// least squares in long double, each coefficient rounded to float32 in turn and the later ones
/// refitted to what was left.
struct GaussTailPieces {
  float c0_lo[16];
  float c[9][16];  // the coefficient of s^j, j = 0..8, in each piece
};
// a e^(a^2 / 2) Phi(-a): gelu's tail
inline constexpr GaussTailPieces kGeluTailPieces = {
    .c0_lo = {0.0f, 0x1.11aab4p-35f, 0x1.5a2a66p-27f, -0x1.cb54cep-27f,
      -0x1.cdad1cp-28f, -0x1.e06aa4p-30f, -0x1.a8ebe4p-27f, 0x1.8fef02p-27f,
      0x1.7a866ep-29f, 0x1.61f1bcp-27f, -0x1.89d5dap-28f, -0x1.199a6cp-28f,
      -0x1.4e8d6ap-28f, -0x1.32f026p-30f, -0x1.fda6c6p-29f, 0x1.8ff4cap-28f},
    .c = {
     {0.0f, 0x1.0bdb2ep-2f, 0x1.5845dcp-2f, 0x1.754a76p-2f,
      0x1.82b4bcp-2f, 0x1.89d3acp-2f, 0x1.8e010ep-2f, 0x1.90a4fcp-2f,
      0x1.926972p-2f, 0x1.93a64ep-2f, 0x1.948c6ep-2f, 0x1.95389ep-2f,
      0x1.95bcb4p-2f, 0x1.96242ep-2f, 0x1.9676b8p-2f, 0x1.96b996p-2f},
     {0x1p-1f, 0x1.fcc82p-4f, 0x1.5d300ap-5f, 0x1.2c08cap-6f,
      0x1.2dda04p-7f, 0x1.542a9ap-8f, 0x1.a0eee4p-9f, 0x1.106374p-9f,
      0x1.7625d6p-10f, 0x1.0b6e08p-10f, 0x1.8af23ep-11f, 0x1.2b9aa2p-11f,
      0x1.d0fb64p-12f, 0x1.6fdc4p-12f, 0x1.27e806p-12f, 0x1.e2fd9p-13f},
     {-0x1.988452p-2f, -0x1.34407ep-4f, -0x1.498754p-6f, -0x1.c642ccp-8f,
      -0x1.78fbb8p-9f, -0x1.66fd6p-10f, -0x1.7b5976p-11f, -0x1.b2792cp-12f,
      -0x1.0926d2p-12f, -0x1.54ab2cp-13f, -0x1.c8803p-14f, -0x1.3cc448p-14f,
      -0x1.c4cf74p-15f, -0x1.4becfap-15f, -0x1.f15cf6p-16f, -0x1.7bc8a8p-16f},
     {0x1.ffff8ap-3f, 0x1.2f48f4p-5f, 0x1.030104p-7f, 0x1.239dap-9f,
      0x1.943c6ap-11f, 0x1.480fc4p-12f, 0x1.2cab2p-13f, 0x1.2f20dcp-14f,
      0x1.49ccdcp-15f, 0x1.7db87ap-16f, 0x1.d0f168p-17f, 0x1.2784ep-17f,
      0x1.857b1ap-18f, 0x1.08c8a2p-18f, 0x1.71be88p-19f, 0x1.085566p-19f},
     {-0x1.105088p-3f, -0x1.035ec4p-6f, -0x1.68bd8ap-9f, -0x1.5084aap-11f,
      -0x1.89a294p-13f, -0x1.124716p-14f, -0x1.b65bacp-16f, -0x1.868bfap-17f,
      -0x1.7bd624p-18f, -0x1.8ce52ap-19f, -0x1.b82744p-20f, -0x1.0096a6p-20f,
      -0x1.3823f4p-21f, -0x1.89e112p-22f, -0x1.008c6ep-22f, -0x1.57925ep-23f},
     {0x1.ff076cp-5f, 0x1.8e9518p-8f, 0x1.caac94p-11f, 0x1.66bc28p-13f,
      0x1.65397p-15f, 0x1.af4b12p-17f, 0x1.2d7d28p-18f, 0x1.dd4dbcp-20f,
      0x1.9d3a94p-21f, 0x1.820f2ap-22f, 0x1.85cf78p-23f, 0x1.9c9072p-24f,
      0x1.e734fap-25f, 0x1.0f9842p-25f, 0x1.74a288p-26f, 0x1.ba7b0ap-27f},
     {-0x1.ab29aap-6f, -0x1.196b6p-9f, -0x1.0ef624p-12f, -0x1.66f0c6p-15f,
      -0x1.32cffcp-17f, -0x1.41a53p-19f, -0x1.8ba1p-21f, -0x1.15762cp-22f,
      -0x1.b007e2p-24f, -0x1.6f302ap-25f, -0x1.518e1ep-26f, -0x1.49379ap-27f,
      -0x1.64503p-28f, -0x1.8c3234p-29f, -0x1.a26ce4p-30f, -0x1.f2d0eep-31f},
     {0x1.2a3126p-7f, 0x1.86e88p-11f, 0x1.3777bcp-14f, 0x1.5ddd66p-17f,
      0x1.01a28ep-19f, 0x1.8dc904p-22f, 0x1.d73532p-24f, 0x1.cc8eeep-26f,
      0x1.50e9e8p-26f, 0x1.23854p-26f, 0x1.2cdc9cp-27f, 0x1.d4dedep-28f,
      -0x1.065af8p-29f, 0x1.30324ap-29f, -0x1.0516d6p-28f, -0x1.decd36p-31f},
     {-0x1.014506p-9f, -0x1.e9a7f2p-13f, -0x1.4f9cf8p-16f, -0x1.42d872p-19f,
      -0x1.912caep-22f, -0x1.203f5cp-24f, -0x1.333c42p-26f, -0x1.a92d3p-28f,
      -0x1.bcac2ep-29f, -0x1.09925ep-29f, -0x1.1b11cap-30f, -0x1.6c7f1cp-31f,
      0x1.02225ap-34f, 0x1.436b66p-33f, -0x1.2d0682p-33f, -0x1.fac9f8p-35f}
    }};

// K(a) / (a - r) with K(a) = e^(a^2 / 2) Phi(-a) - a / sqrt(2 pi) and r its zero: gelu_grad's
// tail (below), the same kind of pieces as kGeluTailPieces, fitted with relative weights (within
// 0.003 ULP); the quotient is smooth and between -2/3 and -0.4, where K itself crosses zero.
inline constexpr float kGeluGradZeroHi = 0x1.80ead2p-1f;    // r = 0.7517915246935644...
inline constexpr float kGeluGradZeroLo = -0x1.a03fd4p-27f;  // as hi + lo
inline constexpr GaussTailPieces kGeluGradTailPieces = {
    .c0_lo = {-0x1.730036p-27f, 0x1.b335c6p-26f, 0x1.dd715cp-26f, 0x1.893a76p-29f, 0x1.ef6adap-28f, 0x1.7cb88ap-27f, -0x1.a14c06p-28f, -0x1.394f4ep-27f, -0x1.12beaep-27f, 0x1.1ff0dcp-28f, 0x1.5fc716p-27f, 0x1.0775dep-28f, 0x1.7492fap-32f, -0x1.8eb2ccp-30f, -0x1.06abccp-29f, -0x1.ebe35ap-27f},
    .c = {
     {-0x1.54851ap-1f, -0x1.1b5a1cp-1f, -0x1.025446p-1f, -0x1.e9c6dep-2f, -0x1.d94de8p-2f, -0x1.ce451cp-2f, -0x1.c6657ep-2f, -0x1.c08288p-2f, -0x1.bbf2e6p-2f, -0x1.b85066p-2f, -0x1.b559e2p-2f, -0x1.b2e3f2p-2f, -0x1.b0d098p-2f, -0x1.af0a74p-2f, -0x1.ad81e4p-2f, -0x1.ac2b36p-2f},
     {0x1.69c948p-3f, 0x1.1a7204p-4f, 0x1.1958d6p-5f, 0x1.479ce6p-6f, 0x1.a763p-7f, 0x1.263ed4p-7f, 0x1.af48f8p-8f, 0x1.490256p-8f, 0x1.02f338p-8f, 0x1.a1e988p-9f, 0x1.582802p-9f, 0x1.203dbap-9f, 0x1.e9bc4p-10f, 0x1.a51f14p-10f, 0x1.6deee2p-10f, 0x1.40e4a2p-10f},
     {-0x1.8f9d5ep-4f, -0x1.c41c94p-6f, -0x1.5619bcp-7f, -0x1.3bfa32p-8f, -0x1.4f857ep-9f, -0x1.89f626p-10f, -0x1.f288ep-11f, -0x1.4e102ap-11f, -0x1.d460eap-12f, -0x1.547d9ep-12f, -0x1.fe0098p-13f, -0x1.878be6p-13f, -0x1.32f93p-13f, -0x1.ea0c88p-14f, -0x1.8d4528p-14f, -0x1.4672acp-14f},
     {0x1.81ebb2p-5f, 0x1.4b3f4ap-7f, 0x1.884a1cp-9f, 0x1.24c8eep-10f, 0x1.026ecap-11f, 0x1.0247f4p-12f, 0x1.1b9576p-13f, 0x1.4f07e8p-14f, 0x1.a36304p-15f, 0x1.132cd4p-15f, 0x1.77584ep-16f, 0x1.086e28p-16f, 0x1.7ef194p-17f, 0x1.1bebfcp-17f, 0x1.adc9ep-18f, 0x1.4b230cp-18f},
     {-0x1.4f095cp-6f, -0x1.c2ab9cp-9f, -0x1.ab1f96p-11f, -0x1.057eep-12f, -0x1.839838p-14f, -0x1.4beaf6p-15f, -0x1.3db4c6p-16f, -0x1.4be76cp-17f, -0x1.73e566p-18f, -0x1.b93bf8p-19f, -0x1.127098p-19f, -0x1.6324ep-20f, -0x1.db8abp-21f, -0x1.47a6ecp-21f, -0x1.cf2bfep-22f, -0x1.4e31dap-22f},
     {0x1.085958p-7f, 0x1.1f601ep-10f, 0x1.bbdf9ap-13f, 0x1.c2286ap-15f, 0x1.1b40dp-16f, 0x1.9e6e7cp-18f, 0x1.6157c6p-19f, 0x1.3b6e4p-20f, 0x1.50006p-21f, 0x1.5edad8p-22f, 0x1.967784p-23f, 0x1.e7fd0cp-24f, 0x1.44c4fep-24f, 0x1.a235f8p-25f, 0x1.8d13aap-26f, -0x1.4bc288p-32f},
     {-0x1.6f7274p-9f, -0x1.5ac4f4p-12f, -0x1.baaa1cp-15f, -0x1.789534p-17f, -0x1.9481bap-19f, -0x1.024472p-20f, -0x1.7cec86p-22f, -0x1.3aad06p-23f, -0x1.215bcep-24f, -0x1.14bd3ep-25f, -0x1.10ccc4p-26f, -0x1.5ae51cp-27f, -0x1.538894p-28f, -0x1.e74ee2p-29f, -0x1.0634e2p-29f, -0x1.708002p-26f},
     {0x1.822a3p-11f, 0x1.9ebeeep-14f, 0x1.b2c184p-17f, 0x1.638198p-19f, 0x1.27412ep-21f, 0x1.23952cp-22f, 0x1.ade7bp-28f, 0x1.87a1c8p-24f, -0x1.f2974ep-26f, 0x1.d24fa8p-29f, -0x1.a12fa6p-28f, -0x1.8e56dap-28f, -0x1.f40bep-27f, -0x1.516b14p-27f, 0x1.a49fb2p-27f, 0x1.5fcb52p-24f},
     {-0x1.8491b6p-14f, -0x1.c4425cp-16f, -0x1.88bdaep-19f, -0x1.19404ap-21f, -0x1.8f6a14p-24f, -0x1.d4950ap-26f, -0x1.ee1826p-28f, -0x1.14bb6ap-29f, 0x1.bbaf44p-30f, -0x1.93a494p-32f, -0x1.ef847ap-30f, 0x1.ddb9ap-30f, -0x1.5e258ap-31f, 0x1.ae598p-31f, -0x1.305d42p-34f, 0x1.fb77ccp-24f}
    }};

/// e^(-a^2 / 2) as 2^n (1 + em1 + em1_lo), for gaussian_poly.
template <class L>
struct GaussianExp {
  Vec<L> n, em1, em1_lo;
};
template <class L>
GaussianExp<L> gaussian_exp(Vec<L> a) {
  using V = Vec<L>;
  // -a^2 / 2 = hi + lo exactly: -a / 2 is exact, and the FMA gives the product's rounding error.
  const V m = a * L::set1(-0.5f);
  const V hi = m * a;
  const V lo = L::fma(m, a, -hi);
  // hi = n ln 2 + r1 with ln 2's first 13 bits (n ln2_hi exact for |n| < 2^11, and the FMA's
  // difference then exact, Cody-Waite); the rest of ln 2 and lo go into r, |r| <= 0.36.
  const V n = L::round(hi * L::set1(0x1.715476p+0f));
  const V r1 = L::fma(n, L::set1(-0x1.62ep-1f), hi);
  const V r2 = L::fma(n, L::set1(-0x1.0bfbe8p-15f), lo);
  const V r = r1 + r2;
  const V r_err = (r1 - r) + r2;  // r's rounding error (|r1| >= |r2| wherever it matters)
  // e^r - 1 = r + r^2 p to r^8 (the first term dropped, r^9 / 9!, is below 2^-32); r - em1 is
  // exact (Sterbenz), so em1_lo is em1's rounding error, with r's added to first order.
  V p = L::set1(1.0f / 40320);
  p = L::fma(p, r, L::set1(1.0f / 5040));
  p = L::fma(p, r, L::set1(1.0f / 720));
  p = L::fma(p, r, L::set1(1.0f / 120));
  p = L::fma(p, r, L::set1(1.0f / 24));
  p = L::fma(p, r, L::set1(1.0f / 6));
  p = L::fma(p, r, L::set1(0.5f));
  const V r_sq = r * r;
  const V em1 = L::fma(r_sq, p, r);
  const V em1_lo = L::fma(r_sq, p, r - em1) + r_err;
  return {n, em1, em1_lo};
}

/// e^(-a^2 / 2) P(a) for a in [0, 15.25] (a NaN gives a NaN), with P = pieces' function and
/// e = gaussian_exp(a): returns the value before its power of two, e.n; the caller applies it
/// with L::scale after the last rounding. gelu and gelu_grad of one a share e (gelu_with_grad).
template <class L>
Vec<L> gaussian_poly(Vec<L> a, const GaussTailPieces& pieces, const GaussianExp<L>& e) {
  using V = Vec<L>;
  const V em1 = e.em1, em1_lo = e.em1_lo;
  const V i = L::round(a);  // the piece
  const V s = a - i;  // the piece's center is its index
  V q = L::lookup(pieces.c[8], i);
  for (int j = 7; j >= 2; --j) q = L::fma(q, s, L::lookup(pieces.c[j], i));
  // q = c1 + s q2 as q_hi + q_lo (Fast2Sum: c1 is the larger), then s q as t_hi + t_lo.
  const V c1 = L::lookup(pieces.c[1], i);
  const V w = s * q;
  const V q_hi = c1 + w;
  const V q_lo = (c1 - q_hi) + w;
  // P = c0 + t_hi + t_lo with t_hi + t_lo = s q + c0_lo (s q_hi's rounding error exactly, by FMA),
  // and P e^r = (c0 + c0 em1) + (t_hi + (t_lo + t_hi em1 + c0 em1_lo)), the first sum's rounding
  // error kept (Fast2Sum: |c0 em1| < c0 wherever c0 is not 0), so only small terms round on the
  // way and the whole is rounded once, at the end.
  const V c0 = L::lookup(pieces.c[0], i);
  const V t_hi = q_hi * s;
  const V t_lo = L::fma(q_hi, s, -t_hi) + L::fma(q_lo, s, L::lookup(pieces.c0_lo, i));
  const V c0_em1 = c0 * em1;
  const V big = c0 + c0_em1;
  const V big_err = ((c0 - big) + c0_em1) + L::fma(c0, em1, -c0_em1);
  return big + (t_hi + (big_err + L::fma(c0, em1_lo, L::fma(t_hi, em1, t_lo))));
}

// A NaN input comes back as itself: which operand's NaN an arithmetic step returns (its sign) is
// the compiler's choice of operand order, and g++ and clang chose differently. float64 evaluates
// the erf form with libm's erfc (gelu_wide); float32 as above: a is |x| clamped to 15.25, beyond
// which both results round to the same 0 or x; v - v turns -inf's result into TF's NaN.
// a = |x| clamped to the pieces' end, 15.25, for gelu, gelu_grad and both at once.
template <class L>
Vec<L> gelu_tail_argument(Vec<L> v) {
  return L::min(L::set1(15.25f), -L::neg_abs(v));
}
// float64 lanes: the wide formula `wide`, with a NaN input given back as itself.
template <class L, Vec<typename L::Wide> (*wide)(Vec<typename L::Wide>)>
Vec<L> gelu_in_double(Vec<L> v) {
  const Vec<L> r = L::template in_double<wide>(v);
  return L::select_negative(v, r, L::select_above(v, L::set1(-1.0f), r, v));
}
template <class L>
Vec<L> gelu_from_tail(Vec<L> v, Vec<L> f, Vec<L> n) {
  const Vec<L> tail = L::scale(f, n);
  return L::select_negative(v, -tail - (v - v), L::select_above(v, L::set1(0.0f), v - tail, v));
}
template <class L>
Vec<L> gelu(Vec<L> v) {
  if constexpr (sizeof(typename L::Elem) == sizeof(double)) {
    return gelu_in_double<L, &gelu_wide<typename L::Wide>>(v);
  } else {
    const Vec<L> a = gelu_tail_argument<L>(v);
    const GaussianExp<L> e = gaussian_exp<L>(a);
    return gelu_from_tail<L>(v, gaussian_poly<L>(a, kGeluTailPieces, e), e.n);
  }
}
// gelu's derivative Phi(x) + x phi(x), phi(x) = e^(-x^2 / 2) / sqrt(2 pi), TF's gradient of the erf
// form, without its cancellations (1 + erf for negative x, and the two terms, which cancel at the
// zero near -0.75): with a = |x| and K as above,
//   gelu'(-a) = e^(-a^2 / 2) K(a),   gelu'(a) = 1 - e^(-a^2 / 2) K(a),
// and K(a) = (a - r) Q(a) with Q the pieces above, so gaussian_poly evaluates e^(-a^2 / 2) Q(a)
// exactly as gelu's tail and a - r comes with its relative accuracy ((a - r_hi) is exact near r).
// a is clamped to 15.25, where the tail has underflowed and the result is 0 or 1; as TF's
// formula (inf * 0), +-inf give NaN, and a NaN comes back as itself. float64 evaluates that
// formula with libm's erfc (gelu_grad_wide).
template <class W>
Vec<W> gelu_grad_wide(Vec<W> w) {
  return W::set1(0.5) * W::erfc(-w / W::set1(kSqrt2)) +
         w * (W::set1(0.3989422804014327) * W::exp(W::set1(-0.5) * (w * w)));
}
template <class L>
Vec<L> gelu_grad_from_tail(Vec<L> v, Vec<L> a, Vec<L> f, Vec<L> n) {
  const Vec<L> tail = L::scale(f * ((a - L::set1(kGeluGradZeroHi)) - L::set1(kGeluGradZeroLo)), n);
  const Vec<L> inf_nan = v - v;
  return L::select_negative(v, tail - inf_nan,
                            L::select_above(v, L::set1(-1.0f), (L::set1(1.0f) - tail) - inf_nan, v));
}
template <class L>
Vec<L> gelu_grad(Vec<L> v) {
  if constexpr (sizeof(typename L::Elem) == sizeof(double)) {
    return gelu_in_double<L, &gelu_grad_wide<typename L::Wide>>(v);
  } else {
    const Vec<L> a = gelu_tail_argument<L>(v);
    const GaussianExp<L> e = gaussian_exp<L>(a);
    return gelu_grad_from_tail<L>(v, a, gaussian_poly<L>(a, kGeluGradTailPieces, e), e.n);
  }
}
// Both at once, for a fused program that computes gelu(x) and gelu_grad(x) (the erf form's
// forward and its gradient's factor): e^(-a^2 / 2) once, and otherwise the operations of the two
// apart, so their bits. float32 lanes only.
template <class L>
Vec<L> gelu_with_grad(Vec<L> v, Vec<L>& grad) {
  static_assert(sizeof(typename L::Elem) == sizeof(float));
  const Vec<L> a = gelu_tail_argument<L>(v);
  const GaussianExp<L> e = gaussian_exp<L>(a);
  grad = gelu_grad_from_tail<L>(v, a, gaussian_poly<L>(a, kGeluGradTailPieces, e), e.n);
  return gelu_from_tail<L>(v, gaussian_poly<L>(a, kGeluTailPieces, e), e.n);
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

/// formula::gelu_with_grad over n floats: gelu into y, gelu_grad into dy (either may alias x).
template <class L>
void apply_gelu_with_grad(const float* x, float* y, float* dy, int64_t n) {
  int64_t i = 0;
  for (; i + L::kWidth <= n; i += L::kWidth) {
    Vec<L> g;
    const Vec<L> r = formula::gelu_with_grad<L>(L::load(x + i), g);
    L::store(y + i, r);
    L::store(dy + i, g);
  }
  if constexpr (L::kWidth > 1) {
    if (i < n) {
      alignas(64) float buf[L::kWidth] = {};
      alignas(64) float grad[L::kWidth];
      std::memcpy(buf, x + i, static_cast<std::size_t>(n - i) * sizeof(float));
      Vec<L> g;
      L::store(buf, formula::gelu_with_grad<L>(L::load(buf), g));
      L::store(grad, g);
      std::memcpy(y + i, buf, static_cast<std::size_t>(n - i) * sizeof(float));
      std::memcpy(dy + i, grad, static_cast<std::size_t>(n - i) * sizeof(float));
    }
  }
}

}  // namespace
}  // namespace tg::detail::simd
