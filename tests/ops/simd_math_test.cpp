// The vectorised float32 activations (src/kernels/simd_math.h), each from its row of the one table
// (tests/support/activations.h): the ops' cases in every mode, and each routine's accuracy on
// every instruction-set path this CPU runs, against double-precision references, in ULPs. The
// exhaustive sweep over all 2^32 inputs is disabled by default (minutes); run it with
//   build/release/tests/tg_ops_tests --gtest_also_run_disabled_tests
//     --gtest_filter='SimdMathAccuracy.DISABLED_*'
// (one command line).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/tensor_impl.h"
#include "kernels/simd_math.h"
#include "support/activations.h"
#include "support/op_case.h"
#include "support/test_util.h"
#include "support/ulp.h"

namespace tg {
namespace {

using detail::simd::Isa;
using detail::simd::MathFn;
using detail::simd::MathFns;
using testing::Activation;
using testing::activations;
using testing::ulp_bounds;
using ::tg::testing::ulp_error;
using ::tg::testing::ulp_sweep;

constexpr Isa kIsas[] = {Isa::kAvx512, Isa::kAvx2, Isa::kScalar};

MathFn MathFns::*member(const Activation& a) {
  for (const auto& b : detail::simd::kRoutineBounds)
    if (std::strcmp(b.name, a.routine) == 0) return b.fn;
  return nullptr;
}

double worst_bound(const Activation& a) {
  const double* b = ulp_bounds(a);
  return *std::max_element(b, b + 3);
}

TEST(SimdMathList, EveryRoutineHasOneRowAndEveryRowARoutine) {
  std::set<std::string> rows;
  for (const Activation& a : activations()) {
    EXPECT_TRUE(rows.insert(a.routine).second) << a.routine << " has two rows";
    EXPECT_NE(member(a), nullptr) << a.routine << " is not in TG_SIMD_MATH_ROUTINES";
  }
  for (const auto& b : detail::simd::kRoutineBounds)
    EXPECT_TRUE(rows.count(b.name)) << b.name << " has no row in tests/support/activations.cpp";
  EXPECT_EQ(rows.size(), std::size(detail::simd::kRoutineBounds));
}

// ---- the ops' cases: float32 and float64 against the exact function, every mode ----

// The float32 cases' inputs are the values rounded to float32, and the reference is taken at the
// rounded input; the tolerance is the routine's worst ULP bound.
TG_OP_CASES(activations) {
  std::vector<testing::OpCase> c;
  for (const Activation& a : activations()) {
    const auto n = static_cast<int64_t>(a.values.size());
    std::vector<float> x32, y32;
    std::vector<double> y64;
    for (double v : a.values) {
      x32.push_back(static_cast<float>(v));
      y32.push_back(static_cast<float>(a.exact(static_cast<double>(x32.back()))));
      y64.push_back(a.exact(v));
    }
    const auto op = a.apply;
    const testing::OpFn fn = [op](const std::vector<Tensor>& in) { return op(in[0]); };
    const double tol32 = std::max(2.4e-7, 1.2e-7 * worst_bound(a));
    c.push_back({a.op, "f32", fn, {constant(x32, TensorShape{n}, float32)}, constant(y32, TensorShape{n}, float32),
                 tol32});
    c.push_back({a.op, "f64", fn, {constant(a.values, TensorShape{n}, float64)}, constant(y64, TensorShape{n}, float64),
                 4e-15});
    c.push_back({a.op, "f32 (2,3)", fn, {constant(std::vector<float>(x32.begin(), x32.begin() + 6), TensorShape{2, 3}, float32)},
                 constant(std::vector<float>(y32.begin(), y32.begin() + 6), TensorShape{2, 3}, float32), tol32});
    c.push_back({a.op, "empty", fn, {zeros({0, 3})}, zeros({0, 3})});
  }
  return c;
}

// ---- accuracy: max ULP against the exact function over sweeps of float32 ----

std::string describe(const char* isa, const char* routine, const ::tg::testing::UlpResult& r) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s %s: max %.3f ULP at x = %a (%.9g): got %a, reference %a",
                isa, routine, r.max_ulp, static_cast<double>(r.worst_x),
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
  for (const Activation& a : activations()) {
    std::vector<MathFn> fns;
    for (int k : paths) fns.push_back(detail::simd::math_fns(kIsas[k]).*member(a));
    const auto results = ulp_sweep(fns, a.exact, stride, threads);
    for (std::size_t i = 0; i < paths.size(); ++i) {
      const int k = paths[i];
      const std::string line = describe(detail::simd::math_fns(kIsas[k]).name, a.routine, results[i]);
      if (print) std::printf("%s\n", line.c_str());
      EXPECT_EQ(results[i].count, ((uint64_t{1} << 32) + stride - 1) / stride);
      EXPECT_LE(results[i].max_ulp, ulp_bounds(a)[k]) << line;
    }
    std::fflush(stdout);
  }
}

// Every 997th bit pattern (4.3M inputs: every binade of both signs, NaN payloads included):
// about a second on two cores.
TEST(SimdMathAccuracy, DenseSweepStaysWithinTheDocumentedBound) { sweep_all_paths(997, 2, false); }

// The inputs where vector math libraries take a slow or special path, checked exactly: each
// special value alone and in the middle of ordinary lanes (a vector library that patches
// special lanes must patch the right one), in the body and in the tail.
TEST(SimdMathAccuracy, SpecialValuesOnEveryPath) {
  for (Isa isa : kIsas) {
    if (!detail::simd::cpu_has(isa)) continue;
    const MathFns& fns = detail::simd::math_fns(isa);
    for (const Activation& a : activations()) {
      EXPECT_FALSE(a.specials.empty()) << a.routine;
      for (const Activation::Special& c : a.specials) {
        std::vector<float> x(37, 0.5f), y(37);
        for (int at : {0, 5, 16, 36}) x[static_cast<std::size_t>(at)] = c.x;
        (fns.*member(a))(x.data(), y.data(), 37);
        for (int at : {0, 5, 16, 36}) {
          const float got = y[static_cast<std::size_t>(at)];
          const bool ok = std::isnan(c.want)
                              ? std::isnan(got)
                              : std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(c.want);
          EXPECT_TRUE(ok) << fns.name << " " << a.routine << "(" << c.x << ") at " << at << " = "
                          << got << ", want " << c.want;
        }
        for (int at : {4, 6, 15, 17, 35})
          EXPECT_EQ(y[static_cast<std::size_t>(at)], y[1]) << fns.name << " " << a.routine;
      }
    }
  }
}

// NaN's sign and payload do not matter, but a quiet NaN of either sign must stay NaN.
TEST(SimdMathAccuracy, EveryNanStaysNan) {
  const float nans[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::signaling_NaN(),
                        std::bit_cast<float>(0xffc00001u)};
  for (Isa isa : kIsas) {
    if (!detail::simd::cpu_has(isa)) continue;
    const MathFns& fns = detail::simd::math_fns(isa);
    for (const Activation& a : activations()) {
      std::vector<float> x(std::begin(nans), std::end(nans)), y(x.size());
      (fns.*member(a))(x.data(), y.data(), static_cast<int64_t>(x.size()));
      for (float v : y) EXPECT_TRUE(std::isnan(v)) << fns.name << " " << a.routine;
    }
  }
}

// The public op on the sweep's chunks: its eager kernel is the fused kernel's functor, on the
// dispatched path; its bound is the worst of the paths it may dispatch to.
TEST(SimdMathAccuracy, ThePublicOpsStayWithinTheirBound) {
  const testing::IeeeKernelFloatEnvironment ieee;  // the bound is the formulas', subnormals included
  for (const Activation& a : activations()) {
    using VecFn = std::function<void(const float*, float*, int64_t)>;
    const std::vector<VecFn> fns = {[&](const float* x, float* y, int64_t n) {
      const Tensor out = a.apply(constant(std::vector<float>(x, x + n), TensorShape{n}, float32));
      std::memcpy(y, detail::data_of<float>(out), static_cast<std::size_t>(n) * sizeof(float));
    }};
    const auto r = testing::ulp_sweep(fns, a.exact, 997, 1)[0];
    EXPECT_LE(r.max_ulp, worst_bound(a)) << describe(detail::simd::isa(), a.op, r);
    if (std::getenv("TG_PRINT_ULP")) std::printf("%s\n", describe(detail::simd::isa(), a.op, r).c_str());
  }
}

// ---- every length: the vector body and the padded tail ----

std::vector<float> sample(const Activation& a, std::size_t n, uint64_t seed) {
  if (!a.log_spaced) return random_uniform({static_cast<int64_t>(n)}, a.lo, a.hi, seed).to_vector<float>();
  std::vector<float> v = random_uniform({static_cast<int64_t>(n)}, std::log(a.lo), std::log(a.hi), seed).to_vector<float>();
  for (float& e : v) e = std::exp(e);
  return v;
}

TEST(SimdMathLengths, EveryLengthMatchesTheExactFunction) {
  SCOPED_TRACE(std::string("simd isa: ") + detail::simd::isa());
  uint64_t seed = 100;
  for (const Activation& a : activations()) {
    for (std::size_t n : {1u, 7u, 8u, 15u, 16u, 17u, 31u, 333u, 1000u}) {
      SCOPED_TRACE(std::string(a.op) + " n=" + std::to_string(n));
      const std::vector<float> x = sample(a, n, ++seed);
      const Tensor in = constant(x, {static_cast<int64_t>(n)});
      const std::vector<float> y = a.apply(in).to_vector<float>();
      ASSERT_EQ(y.size(), n);
      for (std::size_t i = 0; i < n; ++i) {
        const double r = a.exact(static_cast<double>(x[i]));
        EXPECT_LE(std::fabs(y[i] - r), 1e-6 * std::fabs(r) + 1e-38) << "x = " << x[i];
      }
      // The same values in float64 run the formula at width 1 and agree to float precision.
      const std::vector<double> yd = a.apply(cast(in, float64)).to_vector<double>();
      for (std::size_t i = 0; i < n; ++i) EXPECT_NEAR(yd[i], y[i], 1e-6 * (1 + std::fabs(yd[i])));
    }
  }
}

TEST(SimdMathLengths, TailElementsAreComputedLikeTheBody) {
  for (const Activation& a : activations()) {
    const float v = a.log_spaced ? std::sqrt(a.lo * a.hi) : 0.37f;
    const std::vector<float> y = a.apply(fill({19}, v)).to_vector<float>();
    for (float e : y) EXPECT_EQ(e, y[0]) << a.op;
  }
}

// Every float32 input on every path: about 25 minutes on two cores, so off by default (see the
// top of the file).
TEST(SimdMathAccuracy, DISABLED_EveryFloat32StaysWithinTheDocumentedBound) {
  sweep_all_paths(1, std::max(1u, std::thread::hardware_concurrency()), true);
}

// gelu_with_grad (the fused kernel's loop for gelu and gelu_grad of one value) gives each routine's
// bits on every path: every 997th bit pattern, in one call (body and tail), and in place.
TEST(SimdMathGeluWithGrad, GivesTheBitsOfGeluAndGeluGradOnEveryPath) {
  std::vector<float> x;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 997) x.push_back(std::bit_cast<float>(static_cast<uint32_t>(b)));
  const std::size_t n = x.size();
  for (Isa isa : kIsas) {
    if (!detail::simd::cpu_has(isa)) continue;
    const MathFns& fns = detail::simd::math_fns(isa);
    std::vector<float> g(n), d(n), pg(n), pd(n);
    fns.gelu(x.data(), g.data(), static_cast<int64_t>(n));
    fns.gelu_grad(x.data(), d.data(), static_cast<int64_t>(n));
    fns.gelu_with_grad(x.data(), pg.data(), pd.data(), static_cast<int64_t>(n));
    EXPECT_EQ(std::memcmp(g.data(), pg.data(), n * sizeof(float)), 0) << fns.name;
    EXPECT_EQ(std::memcmp(d.data(), pd.data(), n * sizeof(float)), 0) << fns.name;
    std::vector<float> inplace(x);
    fns.gelu_with_grad(inplace.data(), inplace.data(), pd.data(), static_cast<int64_t>(n));
    EXPECT_EQ(std::memcmp(g.data(), inplace.data(), n * sizeof(float)), 0) << fns.name << " in place";
  }
}

}  // namespace
}  // namespace tg
