// Accuracy of the float32 math routines (src/ops/simd_math.h) on every instruction-set path this
// CPU runs, against double-precision references, in ULPs. The exhaustive sweep over all 2^32
// inputs is disabled by default (minutes); run it with
//   build/release/tests/tg_ops_tests --gtest_also_run_disabled_tests
//     --gtest_filter='SimdMathAccuracy.DISABLED_*'
// (one command line). Its table is in docs/DECISIONS.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "ops/simd_math.h"
#include "support/ulp.h"

namespace tg {
namespace {

using detail::simd::Isa;
using detail::simd::MathFn;
using detail::simd::MathFns;
using ::tg::testing::ulp_error;
using ::tg::testing::ulp_sweep;

double ref_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

struct Func {
  const char* name;
  MathFn MathFns::*fn;
  double (*ref)(double);
  // The largest error allowed on the avx512, avx2 and scalar paths: the worst case over every
  // float32 input (the disabled test below, table in docs/DECISIONS.md) rounded up to the next
  // half ULP. glibc's libm-test-ulps lists smaller figures for libmvec (1 for exp, tanh, sin and
  // cos), but those come from its test inputs; the sweep finds libmvec's expf at 2.6 ULP.
  // log1p to elu (issue 14's ops): the worst case over every 13th bit pattern (330M inputs; the
  // exhaustive sweep was not run for them), rounded up the same way; gelu's 0.5 (evaluated in
  // float64, rounded once) gets 1, as the scalar path's sub-1 figures do.
  double bound[3];
};
const Func kFuncs[] = {
    {"exp", &MathFns::exp, [](double x) { return std::exp(x); }, {1, 3, 1}},
    {"log", &MathFns::log, [](double x) { return std::log(x); }, {4, 4, 1}},
    {"tanh", &MathFns::tanh, [](double x) { return std::tanh(x); }, {1.5, 1.5, 2.5}},
    {"sigmoid", &MathFns::sigmoid, &ref_sigmoid, {2.5, 4, 2.5}},
    {"sin", &MathFns::sin, [](double x) { return std::sin(x); }, {2.5, 2.5, 1}},
    {"cos", &MathFns::cos, [](double x) { return std::cos(x); }, {2.5, 2.5, 1}},
    {"log1p", &MathFns::log1p, [](double x) { return std::log1p(x); }, {2, 2, 1}},
    {"expm1", &MathFns::expm1, [](double x) { return std::expm1(x); }, {2.5, 2, 1}},
    {"erf", &MathFns::erf, [](double x) { return std::erf(x); }, {4, 2, 1}},
    // e^x below TF's threshold log(epsilon) + 2 (as TF): e^x / 2 short of log1p(e^x) there,
    // 6.8 ULP at the threshold on its own (issue 33; stride-13 worst 7.33, 6.91, 7.32)
    {"softplus", &MathFns::softplus, &::tg::testing::ref_softplus, {7.5, 7, 7.5}},
    {"gelu", &MathFns::gelu, &::tg::testing::ref_gelu, {1, 1, 1}},
    {"gelu_tanh", &MathFns::gelu_tanh, &::tg::testing::ref_gelu_tanh, {1, 1, 1}},
    {"elu", &MathFns::elu, &::tg::testing::ref_elu, {2.5, 2, 1}},
};
constexpr Isa kIsas[] = {Isa::kAvx512, Isa::kAvx2, Isa::kScalar};

std::string describe(const char* isa, const Func& f, const ::tg::testing::UlpResult& r) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s %s: max %.3f ULP at x = %a (%.9g): got %a, reference %a",
                isa, f.name, r.max_ulp, static_cast<double>(r.worst_x),
                static_cast<double>(r.worst_x), static_cast<double>(r.worst_got), r.worst_ref);
  return buf;
}

TEST(SimdMathAccuracy, UlpHelperCountsSpacingAtTheReference) {
  EXPECT_EQ(ulp_error(1.0f, 1.0), 0.0);
  EXPECT_EQ(ulp_error(std::nextafter(1.0f, 2.0f), 1.0), 1.0);
  EXPECT_EQ(ulp_error(0.0f, 0x1p-149), 1.0);  // the subnormal spacing
  EXPECT_EQ(ulp_error(std::numeric_limits<float>::infinity(), 1e300), 0.0);  // overflow is inf
  EXPECT_EQ(ulp_error(std::numeric_limits<float>::max(), 1e300), 1.0);
  EXPECT_TRUE(std::isinf(ulp_error(std::nanf(""), 1.0)));
  EXPECT_TRUE(std::isinf(ulp_error(1.0f, std::nan(""))));
  EXPECT_TRUE(std::isinf(ulp_error(0.0f, -0.0)));
}

// Sweeps every path the CPU runs for each function and checks the documented bound; a NaN,
// infinity or signed zero where another is due counts as an infinite error.
void sweep_all_paths(uint64_t stride, unsigned threads, bool print) {
  std::vector<int> paths;
  for (int k = 0; k < 3; ++k)
    if (detail::simd::cpu_has(kIsas[k])) paths.push_back(k);
  for (const Func& f : kFuncs) {
    std::vector<MathFn> fns;
    for (int k : paths) fns.push_back(detail::simd::math_fns(kIsas[k]).*f.fn);
    const auto results = ulp_sweep(fns, f.ref, stride, threads);
    for (std::size_t i = 0; i < paths.size(); ++i) {
      const int k = paths[i];
      const std::string line = describe(detail::simd::math_fns(kIsas[k]).name, f, results[i]);
      if (print) std::printf("%s\n", line.c_str());
      EXPECT_EQ(results[i].count, ((uint64_t{1} << 32) + stride - 1) / stride);
      EXPECT_LE(results[i].max_ulp, f.bound[k]) << line;
    }
    std::fflush(stdout);
  }
}

// Every 997th bit pattern (4.3M inputs: every binade of both signs, NaN payloads included):
// about a second on two cores.
TEST(SimdMathAccuracy, DenseSweepStaysWithinTheDocumentedBound) { sweep_all_paths(997, 2, false); }

// The inputs where vector math libraries take a slow or special path, checked exactly.
TEST(SimdMathAccuracy, SpecialValuesOnEveryPath) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float snan = std::numeric_limits<float>::signaling_NaN();
  const float neg_nan = std::bit_cast<float>(0xffc00001u);
  const float den = std::numeric_limits<float>::denorm_min();
  const float fmax = std::numeric_limits<float>::max();
  struct Case {
    const char* fn;
    float x;
    float want;  // compared bitwise for zeros and infinities, NaN-ness for NaN
  };
  const Case cases[] = {
      {"exp", nan, nan}, {"exp", snan, nan}, {"exp", neg_nan, nan},
      {"exp", inf, inf}, {"exp", -inf, 0.0f}, {"exp", 0.0f, 1.0f}, {"exp", -0.0f, 1.0f},
      {"exp", 88.8f, inf}, {"exp", 1e30f, inf}, {"exp", fmax, inf},  // overflow
      {"exp", -110.0f, 0.0f}, {"exp", -1e30f, 0.0f}, {"exp", -fmax, 0.0f},  // underflow
      {"exp", den, 1.0f}, {"exp", -den, 1.0f},
      {"log", nan, nan}, {"log", neg_nan, nan}, {"log", 0.0f, -inf}, {"log", -0.0f, -inf},
      {"log", -1.0f, nan}, {"log", -den, nan}, {"log", -inf, nan}, {"log", inf, inf},
      {"log", 1.0f, 0.0f},
      {"tanh", nan, nan}, {"tanh", inf, 1.0f}, {"tanh", -inf, -1.0f}, {"tanh", 0.0f, 0.0f},
      {"tanh", -0.0f, -0.0f}, {"tanh", den, den}, {"tanh", -den, -den}, {"tanh", 20.0f, 1.0f},
      {"tanh", -fmax, -1.0f},
      {"sigmoid", nan, nan}, {"sigmoid", inf, 1.0f}, {"sigmoid", -inf, 0.0f},
      {"sigmoid", 0.0f, 0.5f}, {"sigmoid", -0.0f, 0.5f}, {"sigmoid", fmax, 1.0f},
      {"sigmoid", -fmax, 0.0f}, {"sigmoid", -200.0f, 0.0f},
      {"sin", nan, nan}, {"sin", inf, nan}, {"sin", -inf, nan}, {"sin", 0.0f, 0.0f},
      {"sin", -0.0f, -0.0f}, {"sin", den, den}, {"sin", -den, -den},
      {"cos", nan, nan}, {"cos", inf, nan}, {"cos", -inf, nan}, {"cos", 0.0f, 1.0f},
      {"cos", -0.0f, 1.0f}, {"cos", den, 1.0f},
      {"log1p", nan, nan}, {"log1p", -1.0f, -inf}, {"log1p", -2.0f, nan}, {"log1p", -inf, nan},
      {"log1p", inf, inf}, {"log1p", 0.0f, 0.0f}, {"log1p", -0.0f, -0.0f}, {"log1p", den, den},
      {"log1p", -den, -den},
      {"expm1", nan, nan}, {"expm1", inf, inf}, {"expm1", -inf, -1.0f}, {"expm1", 0.0f, 0.0f},
      {"expm1", -0.0f, -0.0f}, {"expm1", den, den}, {"expm1", -den, -den},
      {"expm1", 100.0f, inf}, {"expm1", -100.0f, -1.0f},
      {"erf", nan, nan}, {"erf", inf, 1.0f}, {"erf", -inf, -1.0f}, {"erf", 0.0f, 0.0f},
      {"erf", -0.0f, -0.0f}, {"erf", 10.0f, 1.0f}, {"erf", -10.0f, -1.0f},
      {"softplus", nan, nan}, {"softplus", inf, inf}, {"softplus", -inf, 0.0f},
      {"softplus", 20.0f, 20.0f}, {"softplus", fmax, fmax}, {"softplus", -200.0f, 0.0f},
      {"softplus", -fmax, 0.0f},
      {"gelu", nan, nan}, {"gelu", -inf, nan}, {"gelu", inf, inf}, {"gelu", 0.0f, 0.0f},
      {"gelu", -0.0f, -0.0f}, {"gelu", fmax, fmax}, {"gelu", -200.0f, -0.0f},
      {"gelu", -fmax, -0.0f},
      {"gelu_tanh", nan, nan}, {"gelu_tanh", -inf, nan}, {"gelu_tanh", inf, inf},
      {"gelu_tanh", 0.0f, 0.0f}, {"gelu_tanh", -0.0f, -0.0f}, {"gelu_tanh", fmax, fmax},
      {"gelu_tanh", -200.0f, -0.0f}, {"gelu_tanh", -fmax, -0.0f},
      {"elu", nan, nan}, {"elu", inf, inf}, {"elu", -inf, -1.0f}, {"elu", 0.0f, 0.0f},
      {"elu", -0.0f, -0.0f}, {"elu", -100.0f, -1.0f}, {"elu", den, den}, {"elu", -den, -den},
      {"elu", fmax, fmax},
  };
  for (Isa isa : kIsas) {
    if (!detail::simd::cpu_has(isa)) continue;
    const MathFns& fns = detail::simd::math_fns(isa);
    for (const Func& f : kFuncs) {
      // Each special value alone and in the middle of ordinary lanes (a vector library that
      // patches special lanes must patch the right one), in the body and in the tail.
      for (const Case& c : cases) {
        if (std::string(c.fn) != f.name) continue;
        std::vector<float> x(37, 0.5f), y(37);
        for (int at : {0, 5, 16, 36}) x[static_cast<std::size_t>(at)] = c.x;
        (fns.*f.fn)(x.data(), y.data(), 37);
        for (int at : {0, 5, 16, 36}) {
          const float got = y[static_cast<std::size_t>(at)];
          const bool ok = std::isnan(c.want)
                              ? std::isnan(got)
                              : std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(c.want);
          EXPECT_TRUE(ok) << fns.name << " " << f.name << "(" << c.x << ") at " << at << " = "
                          << got << ", want " << c.want;
        }
        for (int at : {4, 6, 15, 17, 35})
          EXPECT_EQ(y[static_cast<std::size_t>(at)], y[1]) << fns.name << " " << f.name;
      }
    }
  }
}

// Every float32 input on every path: about 25 minutes on two cores, so off by default (see the
// top of the file).
TEST(SimdMathAccuracy, DISABLED_EveryFloat32StaysWithinTheDocumentedBound) {
  sweep_all_paths(1, std::max(1u, std::thread::hardware_concurrency()), true);
}

}  // namespace
}  // namespace tg
