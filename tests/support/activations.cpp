#include "support/activations.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/simd_math.h"
#include "ops/op.h"
#include "tracegraph/ops.h"

namespace tg::testing {
namespace {

constexpr float kInfF = std::numeric_limits<float>::infinity();
constexpr float kNanF = std::numeric_limits<float>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr float kDen = std::numeric_limits<float>::denorm_min();
constexpr float kMax = std::numeric_limits<float>::max();
constexpr double kTiny = 1e-10;

// The definitions, in double, in forms that keep their digits where the textbook form cancels.
double exact_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double exact_softplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }
// 0.5 x (1 + erf(x / sqrt 2)) and 0.5 x (1 + tanh(u)), u = sqrt(2 / pi) (x + 0.044715 x^3), as
// 1 + erf(z) = erfc(-z) and 1 + tanh(u) = 2 / (1 + e^(-2u)).
double exact_gelu(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
double exact_gelu_tanh(double x) {
  const double u = 0.7978845608028654 * (x + 0.044715 * (x * x * x));
  return x / (1.0 + std::exp(-2.0 * u));
}
double exact_elu(double x) { return x < 0 ? std::expm1(x) : x; }
// Phi(x) + x phi(x) in long double: its two terms cancel at the zero near -0.75, and the float32
// inputs nearest it need the difference to more digits than double keeps. Far below the zero the
// value, negative, underflows even long double: -0.
double exact_gelu_grad(double x) {
  const long double v = x;
  const double r = static_cast<double>(0.5L * std::erfc(-v / std::sqrt(2.0L)) +
                                       v * std::exp(-0.5L * v * v) / std::sqrt(2.0L * 3.141592653589793238462643383279502884L));
  return r == 0 && x < 0 ? -0.0 : r;
}

Tensor gelu_erf(const Tensor& x) { return gelu(x, false); }
Tensor gelu_tanh(const Tensor& x) { return gelu(x, true); }
Tensor elu_alpha_1(const Tensor& x) { return elu(x); }
Tensor gelu_grad_op(const Tensor& x) { return detail::apply_op1(detail::OpId::GeluGrad, {x}); }

std::vector<Activation> make() {
  const float nan = kNanF, inf = kInfF, den = kDen, fmax = kMax;
  return {
      {"exp", "exp", &exp, [](double x) { return std::exp(x); },
       {0.0, 1.0, -1.0, 2.5, -10.0, 88.0, 89.0, -110.0, 710.0, kInf, -kInf, kNan},
       {{nan, nan}, {inf, inf}, {-inf, 0.0f}, {0.0f, 1.0f}, {-0.0f, 1.0f}, {88.8f, inf}, {1e30f, inf},
        {fmax, inf}, {-110.0f, 0.0f}, {-1e30f, 0.0f}, {-fmax, 0.0f}, {den, 1.0f}, {-den, 1.0f}},
       -87.f, 88.f, false, -1.0, 1.0, false,
       {0xfffa466eaceafd28ull, 0x61c6d7bf53fb048dull, 0x0d1f027043e33f22ull}, 0x5ae78831287678c0ull},
      {"log", "log", &log, [](double x) { return std::log(x); },
       {1.0, 0.5, 100.0, 1e-30, 3e38, 0.0, -0.0, -1.0, kInf, kNan},
       {{nan, nan}, {0.0f, -inf}, {-0.0f, -inf}, {-1.0f, nan}, {-den, nan}, {-inf, nan}, {inf, inf},
        {1.0f, 0.0f}},
       1e-30f, 1e30f, true, 0.5, 2.0, false,
       {0x76275b037ec84ab9ull, 0x76275b037ec84ab9ull, 0x194f688b2f944674ull}, 0x680f4237db2ad318ull},
      {"tanh", "tanh", &tanh, [](double x) { return std::tanh(x); },
       {0.0, 0.5, -1.0, 3.0, -20.0, 100.0, -100.0, 1e-5, 1e3, kInf, -kInf, kNan},
       {{nan, nan}, {inf, 1.0f}, {-inf, -1.0f}, {0.0f, 0.0f}, {-0.0f, -0.0f}, {den, den}, {-den, -den},
        {20.0f, 1.0f}, {-fmax, -1.0f}},
       -12.f, 12.f, false, -2.0, 2.0, false,
       {0x7341691b147164e5ull, 0x60b50f64771ef3f5ull, 0xea42cf055b4b6cd9ull}, 0x17a2da4f1f1ba751ull},
      {"sigmoid", "sigmoid", &sigmoid, &exact_sigmoid,
       {0.0, 1.0, -1.0, 5.0, -20.0, 100.0, -100.0, 800.0, -800.0, kInf, -kInf, kNan},
       {{nan, nan}, {inf, 1.0f}, {-inf, 0.0f}, {0.0f, 0.5f}, {-0.0f, 0.5f}, {fmax, 1.0f}, {-fmax, 0.0f},
        {-200.0f, 0.0f}},
       -30.f, 30.f, false, -3.0, 3.0, false,
       {0x2c00baa0b730d091ull, 0x97f5ca7567de668eull, 0x35831ab4a11daa4full}, 0x48f82694782264dfull},
      {"sin", "sin", &sin, [](double x) { return std::sin(x); },
       {0.0, 0.5, -1.0, 3.14159265, 100.0, -1000.0, 1e-6, kInf, kNan},
       {{nan, nan}, {inf, nan}, {-inf, nan}, {0.0f, 0.0f}, {-0.0f, -0.0f}, {den, den}, {-den, -den}},
       -100.f, 100.f, false, -3.0, 3.0, false,
       {0xbd6725c67b15434aull, 0xbd6725c67b15434aull, 0xa3fd8c01a0a867faull}, 0x478f3484ba177afdull},
      {"cos", "cos", &cos, [](double x) { return std::cos(x); },
       {0.0, 0.5, -1.0, 3.14159265, 100.0, -1000.0, -kInf, kNan},
       {{nan, nan}, {inf, nan}, {-inf, nan}, {0.0f, 1.0f}, {-0.0f, 1.0f}, {den, 1.0f}},
       -100.f, 100.f, false, -3.0, 3.0, false,
       {0x6cc5b5da47a4207cull, 0x6cc5b5da47a4207cull, 0x4a04bb14a76784d0ull}, 0xa24a92a0f718fd57ull},
      {"log1p", "log1p", &log1p, [](double x) { return std::log1p(x); },
       {0.0, -0.0, kTiny, -kTiny, 0.5, -0.5, 1.0, 1e10, -1.0, -2.0, kInf, kNan},
       {{nan, nan}, {-1.0f, -inf}, {-2.0f, nan}, {-inf, nan}, {inf, inf}, {0.0f, 0.0f}, {-0.0f, -0.0f},
        {den, den}, {-den, -den}},
       1e-6f, 1e6f, true, -0.5, 2.0, false,
       {0xcfac7d3a90abb32eull, 0xcfac7d3a90abb32eull, 0x047058fb81ca2419ull}, 0x9dfc8da7ae4e7be9ull},
      {"expm1", "expm1", &expm1, [](double x) { return std::expm1(x); },
       {0.0, -0.0, kTiny, -kTiny, 1.0, -1.0, 20.0, -40.0, 1000.0, -kInf, kInf, kNan},
       {{nan, nan}, {inf, inf}, {-inf, -1.0f}, {0.0f, 0.0f}, {-0.0f, -0.0f}, {den, den}, {-den, -den},
        {100.0f, inf}, {-100.0f, -1.0f}},
       -20.f, 20.f, false, -2.0, 2.0, false,
       {0x1d8f2e3edefbef1eull, 0x93fcb7282ccb5c35ull, 0x46660fbc1efd579dull}, 0x462ff7e19048e36dull},
      {"erf", "erf", &erf, [](double x) { return std::erf(x); },
       {0.0, -0.0, kTiny, 0.5, -0.5, 1.5, 3.0, -6.0, kInf, -kInf, kNan},
       {{nan, nan}, {inf, 1.0f}, {-inf, -1.0f}, {0.0f, 0.0f}, {-0.0f, -0.0f}, {10.0f, 1.0f},
        {-10.0f, -1.0f}},
       0.01f, 4.f, false, -2.0, 2.0, false,
       {0x6452942fd5be663full, 0xed550fbce3c1e3abull, 0x66cc235f09b87955ull}, 0x1e57616b6a12a874ull},
      // TF's three pieces; tests/ops/elementwise_test.cpp checks the bits at TF's thresholds.
      {"softplus", "softplus", &softplus, &exact_softplus,
       {0.0, 1.0, -1.0, 5.0, -5.0, 13.0, -13.0, 15.0, -15.0, 40.0, -40.0, 100.0, -100.0, 1e30, kInf, -kInf, kNan},
       {{nan, nan}, {inf, inf}, {-inf, 0.0f}, {20.0f, 20.0f}, {fmax, fmax}, {-200.0f, 0.0f}, {-fmax, 0.0f}},
       -13.f, 20.f, false, -4.0, 4.0, false,
       {0x9373c28f967eaac3ull, 0x5106a6a48e8fd1eeull, 0x7d3182d922167298ull}, 0x13c3a94ccd8fd47bull},
      // The erf form; like TF's, gelu(-inf) is NaN.
      {"gelu", "gelu", &gelu_erf, &exact_gelu,
       {0.0, 0.5, -0.5, 1.0, -1.0, 3.0, -3.0, 10.0, -10.0, 1e30, kInf, -kInf, kNan},
       {{nan, nan}, {-inf, nan}, {inf, inf}, {0.0f, 0.0f}, {-0.0f, -0.0f}, {fmax, fmax}, {-200.0f, -0.0f},
        {-fmax, -0.0f}},
       -5.f, 5.f, false, -3.0, 3.0, false,
       {0xca6be7bb1cb9c077ull, 0xca6be7bb1cb9c077ull, 0xca6be7bb1cb9c077ull}, 0x3f377d3ffaebbd8bull},
      // The tanh form (TF's approximate = True).
      {"gelu_tanh", "gelu_approximate", &gelu_tanh, &exact_gelu_tanh,
       {0.0, 0.5, -0.5, 1.0, -1.0, 3.0, -3.0, 10.0, -10.0, -kInf, kNan},
       {{nan, nan}, {-inf, nan}, {inf, inf}, {0.0f, 0.0f}, {-0.0f, -0.0f}, {fmax, fmax}, {-200.0f, -0.0f},
        {-fmax, -0.0f}},
       -5.f, 5.f, false, -3.0, 3.0, false,
       {0x8605272fe6ed7734ull, 0x8605272fe6ed7734ull, 0x8605272fe6ed7734ull}, 0xe80bf243f84d2f4aull},
      {"elu", "elu", &elu_alpha_1, &exact_elu,
       {0.0, -0.0, 1e-8, -1e-8, 2.0, -1.0, -20.0, kInf, -kInf, kNan},
       {{nan, nan}, {inf, inf}, {-inf, -1.0f}, {0.0f, 0.0f}, {-0.0f, -0.0f}, {-100.0f, -1.0f}, {den, den},
        {-den, -den}, {fmax, fmax}},
       -20.f, 20.f, false, 0.2, 1.5, true,
       {0x867a3e8f5b51294aull, 0x37375604971f31c3ull, 0x8ecc69ebc6e7ffdeull}, 0x6cc1f6f928a71fe6ull},
      // gelu's derivative (autodiff's op for the erf form's gradient); like TF's formula, NaN at
      // +-inf.
      {"gelu_grad", "gelu_grad", &gelu_grad_op, &exact_gelu_grad,
       {0.0, 0.5, -0.5, 0.75, -0.75, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 6.0, -6.0, 10.0, -10.0, -14.0, 1e30, kInf, -kInf,
        kNan},
       {{nan, nan}, {-inf, nan}, {inf, nan}, {fmax, 1.0f}, {-200.0f, -0.0f}, {-fmax, -0.0f}, {8.0f, 1.0f}},
       -5.f, 5.f, false, 0.2, 3.0, false,
       {0x69d3d4ec41b55491ull, 0x69d3d4ec41b55491ull, 0x69d3d4ec41b55491ull}, 0x454c9193f426a20aull},
  };
}

}  // namespace

const std::vector<Activation>& activations() {
  static const std::vector<Activation> rows = make();
  return rows;
}

const double* ulp_bounds(const Activation& a) {
  for (const auto& b : detail::simd::kRoutineBounds)
    if (std::strcmp(b.name, a.routine) == 0) return b.ulp;
  throw std::logic_error(std::string("no routine '") + a.routine + "' in TG_SIMD_MATH_ROUTINES");
}

}  // namespace tg::testing
