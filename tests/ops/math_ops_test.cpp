// The ops of src/ops/math_ops.cpp: cumsum / cumprod (and affine_scan, cumprod's gradient),
// linspace, and the composites clip_by_value, reduce_logsumexp and l2_normalize. Expected values
// come from double-precision arithmetic and the definitions written here (TensorFlow's
// documented behaviour where it pins one down), not from the library's own code.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>

#include "core/tensor_impl.h"
#include "ops/op.h"
#include "support/op_case.h"
#include "support/test_util.h"
#include "tracegraph/gradient.h"

namespace tg {
namespace {

using namespace ::tg::testing::values;

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

Tensor f32v(const std::vector<double>& xs) {
  return cast(constant(xs, TensorShape{static_cast<int64_t>(xs.size())}, float64), float32);
}
Tensor f64v(const std::vector<double>& xs) {
  return constant(xs, TensorShape{static_cast<int64_t>(xs.size())}, float64);
}

// ---- scans ----

Fn scan(Tensor (*f)(const Tensor&, int, bool, bool), int axis, bool exclusive = false, bool reverse = false) {
  return [=](const std::vector<Tensor>& in) { return f(in[0], axis, exclusive, reverse); };
}

// affine_scan(a, b): h -> a h + b along an axis, the internal op of cumprod's gradient.
Tensor affine_scan(const Tensor& a, const Tensor& b, int64_t axis, bool exclusive = false, bool reverse = false) {
  return detail::apply_op1(detail::OpId::AffineScan, {a, b}, detail::ScanAttrs{axis, exclusive, reverse});
}
Fn affine(int64_t axis, bool exclusive = false, bool reverse = false) {
  return [=](const std::vector<Tensor>& in) { return affine_scan(in[0], in[1], axis, exclusive, reverse); };
}

TG_OP_CASES(math_scans) {
  const Tensor v = constant({1.f, 2.f, 3.f, 4.f});
  const Tensor m = constant({{1, 2, 3}, {4, 5, 6}});
  return {
      {"cumsum", "f32", scan(cumsum, 0), {v}, constant({1.f, 3.f, 6.f, 10.f})},
      {"cumsum", "exclusive", scan(cumsum, 0, true), {v}, constant({0.f, 1.f, 3.f, 6.f})},
      {"cumsum", "reverse", scan(cumsum, 0, false, true), {v}, constant({10.f, 9.f, 7.f, 4.f})},
      {"cumsum", "exclusive reverse", scan(cumsum, 0, true, true), {v}, constant({9.f, 7.f, 4.f, 0.f})},
      {"cumsum", "i32 axis 0", scan(cumsum, 0), {m}, constant({{1, 2, 3}, {5, 7, 9}})},
      {"cumsum", "i32 axis 1", scan(cumsum, 1), {m}, constant({{1, 3, 6}, {4, 9, 15}})},
      {"cumsum", "i32 axis -1 exclusive reverse", scan(cumsum, -1, true, true), {m}, constant({{5, 3, 0}, {11, 6, 0}})},
      {"cumsum", "i32 wraps around", scan(cumsum, 0), {constant({kI32Max, 1})}, constant({kI32Max, kI32Min})},
      {"cumsum", "i64 (2,2,2) axis 1", scan(cumsum, 1), {constant({{{int64_t{1}, int64_t{2}}, {int64_t{3}, int64_t{4}}},
                                                                   {{int64_t{5}, int64_t{6}}, {int64_t{7}, int64_t{8}}}})},
       constant({{{int64_t{1}, int64_t{2}}, {int64_t{4}, int64_t{6}}}, {{int64_t{5}, int64_t{6}}, {int64_t{12}, int64_t{14}}}})},
      {"cumsum", "f64 inf and nan propagate", scan(cumsum, 0), {f64v({1.0, kInf, -kInf, 2.0})},
       f64v({1.0, kInf, kNan, kNan})},
      {"cumsum", "empty axis", scan(cumsum, 1), {zeros({2, 0})}, zeros({2, 0})},
      {"cumsum", "length 1", scan(cumsum, 0, true), {constant({7.f})}, constant({0.f})},
      {"cumprod", "f32", scan(cumprod, 0), {v}, constant({1.f, 2.f, 6.f, 24.f})},
      {"cumprod", "exclusive", scan(cumprod, 0, true), {v}, constant({1.f, 1.f, 2.f, 6.f})},
      {"cumprod", "reverse", scan(cumprod, 0, false, true), {v}, constant({24.f, 24.f, 12.f, 4.f})},
      {"cumprod", "exclusive reverse", scan(cumprod, 0, true, true), {v}, constant({24.f, 12.f, 4.f, 1.f})},
      {"cumprod", "zeros", scan(cumprod, 0), {constant({2.f, 0.f, 3.f, 0.f})}, constant({2.f, 0.f, 0.f, 0.f})},
      {"cumprod", "i32 axis 0", scan(cumprod, 0), {m}, constant({{1, 2, 3}, {4, 10, 18}})},
      {"cumprod", "i64 wraps around", scan(cumprod, 0), {constant({int64_t{1} << 62, int64_t{4}})},
       constant({int64_t{1} << 62, int64_t{0}})},
      {"cumprod", "f64 axis -1 reverse", scan(cumprod, -1, false, true), {f64v({2.0, -0.5, 4.0})}, f64v({-4.0, -2.0, 4.0})},
      // h_k = a_k h_(k-1) + b_k from h = 0 (exclusive: h_(k-1), 0 first), in scan order
      {"affine_scan", "f32", affine(0), {constant({2.f, 0.f, 3.f, -1.f}), constant({1.f, 2.f, 3.f, 4.f})},
       constant({1.f, 2.f, 9.f, -5.f})},
      {"affine_scan", "exclusive", affine(0, true), {constant({2.f, 0.f, 3.f, -1.f}), constant({1.f, 2.f, 3.f, 4.f})},
       constant({0.f, 1.f, 2.f, 9.f})},
      {"affine_scan", "reverse", affine(0, false, true), {constant({2.f, 0.f, 3.f, -1.f}), constant({1.f, 2.f, 3.f, 4.f})},
       constant({5.f, 2.f, 15.f, 4.f})},
      {"affine_scan", "exclusive reverse", affine(0, true, true),
       {constant({2.f, 0.f, 3.f, -1.f}), constant({1.f, 2.f, 3.f, 4.f})}, constant({2.f, 15.f, 4.f, 0.f})},
      {"affine_scan", "f64 (2,2) axis 0", affine(0), {constant({{1.0, 2.0}, {3.0, 4.0}}, float64),
                                                      constant({{5.0, 6.0}, {7.0, 8.0}}, float64)},
       constant({{5.0, 6.0}, {22.0, 32.0}}, float64)},
      {"affine_scan", "f64 (2,2) axis -1", affine(-1), {constant({{1.0, 2.0}, {3.0, 4.0}}, float64),
                                                        constant({{5.0, 6.0}, {7.0, 8.0}}, float64)},
       constant({{5.0, 16.0}, {7.0, 36.0}}, float64)},
      {"affine_scan", "empty axis", affine(1), {zeros({2, 0}), zeros({2, 0})}, zeros({2, 0})},
  };
}

// The reference of a scan along `axis`: one plain loop per [outer, n, inner] line, from 0, with
// `step(acc, at)` the next accumulator after element `at` (row-major index).
template <class T, class Step>
std::vector<T> sequential_scan(const TensorShape& shape, int axis, bool exclusive, bool reverse, const Step& step) {
  const auto& d = shape.dims();
  const int64_t r = static_cast<int64_t>(d.size());
  const int64_t a = axis < 0 ? axis + r : axis;
  int64_t outer = 1, n = d[static_cast<std::size_t>(a)], inner = 1;
  for (int64_t i = 0; i < a; ++i) outer *= d[static_cast<std::size_t>(i)];
  for (int64_t i = a + 1; i < r; ++i) inner *= d[static_cast<std::size_t>(i)];
  std::vector<T> out(static_cast<std::size_t>(outer * n * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < inner; ++c) {
      T acc = 0;
      for (int64_t k = 0; k < n; ++k) {
        const int64_t j = reverse ? n - 1 - k : k;
        const auto at = static_cast<std::size_t>((o * n + j) * inner + c);
        if (exclusive) out[at] = acc;
        acc = step(acc, at);
        if (!exclusive) out[at] = acc;
      }
    }
  return out;
}

TEST(MathScans, LargeScansMatchASequentialLoopOnEveryLayout) {
  // Past the parallel threshold and the column chunk, in both layouts.
  for (const TensorShape& shape : {TensorShape{3, 70000}, TensorShape{70, 2100}, TensorShape{5, 3, 1500}}) {
    for (int axis : {0, 1, -1}) {
      for (bool exclusive : {false, true}) {
        for (bool reverse : {false, true}) {
          SCOPED_TRACE(shape.to_string() + " axis " + std::to_string(axis) + (exclusive ? " exclusive" : "") +
                       (reverse ? " reverse" : ""));
          Tensor x = cast(random_uniform(shape, -3.0f, 3.0f, uint64_t{11}) * 10.0f, int64);
          const std::vector<int64_t> xs = x.to_vector<int64_t>();
          const std::vector<int64_t> want = sequential_scan<int64_t>(
              shape, axis, exclusive, reverse, [&](int64_t acc, std::size_t at) { return acc + xs[at]; });
          EXPECT_EQ(cumsum(x, axis, exclusive, reverse).to_vector<int64_t>(), want);
        }
      }
    }
  }
}

TEST(MathScans, LargeAffineScansMatchASequentialLoopOnEveryLayout) {
  // Past the parallel threshold and the column chunk, in both layouts. a holds multiples of 0.2
  // in [-1.2, 1.2], zeros among them, so the products stay finite; the reference does the same
  // float64 operations in the same order, so the comparison is exact.
  for (const TensorShape& shape : {TensorShape{3, 70000}, TensorShape{70, 2100}, TensorShape{5, 3, 1500}}) {
    const Tensor a = cast(round(random_uniform(shape, -6.0f, 6.0f, uint64_t{5})), float64) * 0.2;
    const Tensor b = cast(random_uniform(shape, -1.0f, 1.0f, uint64_t{6}), float64);
    const std::vector<double> as = a.to_vector<double>(), bs = b.to_vector<double>();
    for (int axis : {0, 1, -1}) {
      for (bool exclusive : {false, true}) {
        for (bool reverse : {false, true}) {
          SCOPED_TRACE(shape.to_string() + " axis " + std::to_string(axis) + (exclusive ? " exclusive" : "") +
                       (reverse ? " reverse" : ""));
          const std::vector<double> want = sequential_scan<double>(
              shape, axis, exclusive, reverse, [&](double h, std::size_t at) { return as[at] * h + bs[at]; });
          EXPECT_EQ(affine_scan(a, b, axis, exclusive, reverse).to_vector<double>(), want);
        }
      }
    }
  }
}

TEST(MathScans, AffineScanRefusesOperandsOfTwoShapes) {
  EXPECT_THROW_MSG(affine_scan(zeros({2, 3}), zeros({3, 2}), 0), InvalidArgumentError, "[affine_scan]",
                   "one shape", "(2, 3)", "(3, 2)");
  EXPECT_THROW_MSG(affine_scan(constant({1, 2}), constant({1, 2}), 0), InvalidArgumentError, "[affine_scan]");
}

// ---- linspace ----

TG_OP_CASES(math_linspace) {
  const Fn lin = [](const std::vector<Tensor>& in) { return linspace(in[0], in[1], in[2]); };
  return {
      {"linspace", "0 to 1, 5 values", lin, {constant(0.f), constant(1.f), constant(5)},
       constant({0.f, 0.25f, 0.5f, 0.75f, 1.f})},
      {"linspace", "f64 descending, int64 num", lin, {constant(10.0, float64), constant(-2.0, float64), constant(int64_t{4})},
       f64v({10.0, 6.0, 2.0, -2.0})},
      {"linspace", "the last value is exactly stop", lin, {constant(0.1, float64), constant(0.7, float64), constant(7)},
       f64v({0.1, 0.1 + 1 * ((0.7 - 0.1) / 6), 0.1 + 2 * ((0.7 - 0.1) / 6), 0.1 + 3 * ((0.7 - 0.1) / 6),
             0.1 + 4 * ((0.7 - 0.1) / 6), 0.1 + 5 * ((0.7 - 0.1) / 6), 0.7})},
      {"linspace", "num 1 gives start", lin, {constant(3.f), constant(9.f), constant(1)}, constant({3.f})},
      {"linspace", "num 0 gives an empty tensor", lin, {constant(3.f), constant(9.f), constant(0)}, zeros({0})},
      {"linspace", "start == stop", lin, {constant(2.f), constant(2.f), constant(3)}, constant({2.f, 2.f, 2.f})},
  };
}

TEST(MathLinspace, StaticLengthWhileTracingWhenNumIsKnown) {
  auto f = function([](const Tensor& a, const Tensor& b) { return linspace(a, b, 4); });
  auto cf = f.get_concrete_function(TensorSpec({}, float32), TensorSpec({}, float32));
  EXPECT_NE(cf.function_type().find("shape=(4,)"), std::string::npos) << cf.function_type();
  EXPECT_TRUE(testing::tensors_near(f(constant(0.f), constant(3.f)), constant({0.f, 1.f, 2.f, 3.f}), 0.0));
  auto g = function([](const Tensor& n) { return linspace(0.0, 1.0, 3) + reduce_sum(linspace(constant(0.0), constant(1.0), n)); });
  EXPECT_TRUE(testing::tensors_near(g(constant(3)), constant({1.5f, 2.0f, 2.5f}), 1e-7));
  EXPECT_TRUE(testing::tensors_near(linspace(1.0, 2.0, 3, float64), f64v({1.0, 1.5, 2.0}), 0.0));
}

// ---- the composites: every mode against one reference, bit for bit between modes ----

// Runs fn eagerly, traced, traced and optimised, and traced over None dims and unknown rank;
// each must equal `expected` within tol and the eager result exactly.
void expect_all_modes(const Fn& fn, const std::vector<Tensor>& inputs, const Tensor& expected, double tol) {
  const Tensor eager = fn(inputs);
  EXPECT_TRUE(testing::tensors_near(eager, expected, tol)) << "eager";
  for (const bool optimize : {false, true}) {
    auto traced = function([&](const std::vector<Tensor>& in) { return fn(in); }, {.optimize = optimize});
    EXPECT_TRUE(testing::tensors_near(traced(inputs), eager, 0.0)) << (optimize ? "optimised" : "traced");
  }
  testing::for_each_generalised_trace(fn, inputs, [&](const std::function<Tensor()>& run, const char* label) {
    EXPECT_TRUE(testing::tensors_near(run(), eager, 0.0)) << label;
  });
}

TEST(MathComposites, ClipByValueInEveryMode) {
  const Fn clip = [](const std::vector<Tensor>& in) { return clip_by_value(in[0], in[1], in[2]); };
  expect_all_modes(clip, {f32v({-3.0, -1.0, 0.0, 0.5, 1.0, 7.0, kInf, -kInf, kNan}), constant(-1.f), constant(1.f)},
                   f32v({-1.0, -1.0, 0.0, 0.5, 1.0, 1.0, 1.0, -1.0, kNan}), 0.0);
  // lo and hi broadcast (per column); lo > hi gives lo (minimum with hi first, then maximum).
  expect_all_modes(clip, {constant({{0, 5, 9}, {-4, 2, 3}}), constant({1, 3, 4}), constant({2, 4, 1})},
                   constant({{1, 4, 4}, {1, 3, 4}}), 0.0);
  EXPECT_TRUE(testing::tensors_near(clip_by_value(constant({-2.0, 0.3, 9.0}, float64), -1, 1),
                                    f64v({-1.0, 0.3, 1.0}), 0.0));
  EXPECT_TRUE(testing::tensors_near(clip_by_value(constant({-2, 3, 9}), 0, 6), constant({0, 3, 6}), 0.0));
}

TEST(MathComposites, ClipByValueGradientIsZeroOutsideTheRangeAndPassesAtTheEnds) {
  Tensor x = constant({-2.0, -1.0, 0.0, 1.0, 2.0}, float64);
  Tensor lo = constant(-1.0, float64), hi = constant(1.0, float64);
  GradientTape tape;
  tape.watch(x);
  tape.watch(lo);
  tape.watch(hi);
  Tensor y = clip_by_value(x, lo, hi);
  auto g = tape.gradient(reduce_sum(y * constant({1.0, 2.0, 3.0, 4.0, 5.0}, float64)), {x, lo, hi});
  EXPECT_TRUE(testing::tensors_near(g[0], f64v({0.0, 2.0, 3.0, 4.0, 0.0}), 0.0));
  EXPECT_TRUE(testing::tensors_near(g[1], constant(1.0, float64), 0.0));  // below lo
  EXPECT_TRUE(testing::tensors_near(g[2], constant(5.0, float64), 0.0));  // above hi
}

TEST(MathComposites, ReduceLogSumExpIsStableInEveryMode) {
  const auto lse = [](std::vector<int> axes, bool keepdims) {
    return Fn([=](const std::vector<Tensor>& in) { return reduce_logsumexp(in[0], axes, keepdims); });
  };
  // Large values do not overflow; -inf rows give -inf, +inf rows +inf, NaN rows NaN.
  const Tensor x = constant({{1000.f, 1000.f, 999.f}, {-kInfF, -kInfF, -kInfF}, {1.f, kInfF, 0.f},
                             {-1e30f, 0.f, kNanF}});
  const double row0 = 1000.0 + std::log(2.0 + std::exp(-1.0));
  expect_all_modes(lse({1}, false), {x}, f32v({row0, -kInf, kInf, kNan}), 1e-7);
  expect_all_modes(lse({-1}, true), {x}, reshape(f32v({row0, -kInf, kInf, kNan}), {4, 1}), 1e-7);
  const Tensor y = constant({{0.0, 1.0}, {2.0, 3.0}}, float64);
  const double all = std::log(std::exp(0.0) + std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  expect_all_modes(lse({}, false), {y}, constant(all, float64), 1e-15);
  expect_all_modes(lse({0}, false), {y}, f64v({std::log(std::exp(0.0) + std::exp(2.0)), std::log(std::exp(1.0) + std::exp(3.0))}),
                   1e-15);
  EXPECT_TRUE(testing::tensors_near(reduce_logsumexp(zeros({0}), {0}), constant(-kInfF), 0.0));  // empty: log(0)
}

TEST(MathComposites, L2NormalizeInEveryMode) {
  const auto l2 = [](std::vector<int> axes) {
    return Fn([=](const std::vector<Tensor>& in) { return l2_normalize(in[0], axes); });
  };
  const Tensor x = constant({{3.0, 4.0}, {0.0, 0.0}}, float64);
  expect_all_modes(l2({1}), {x}, constant({{0.6, 0.8}, {0.0, 0.0}}, float64), 1e-15);
  expect_all_modes(l2({}), {x}, constant({{0.6, 0.8}, {0.0, 0.0}}, float64), 1e-15);
  expect_all_modes(l2({0}), {x}, constant({{1.0, 1.0}, {0.0, 0.0}}, float64), 1e-15);
  // epsilon bounds the norm from below: x * rsqrt(max(sum(x^2), eps)).
  EXPECT_TRUE(testing::tensors_near(l2_normalize(constant({1e-4f, 0.f}), 0, 1e-4), constant({1e-2f, 0.f}), 1e-6));
  EXPECT_TRUE(testing::tensors_near(l2_normalize(constant({{3.f, 4.f}}), -1), constant({{0.6f, 0.8f}}), 1e-7));
}

}  // namespace
}  // namespace tg
