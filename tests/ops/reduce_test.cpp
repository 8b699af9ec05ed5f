// Reductions, argmax/argmin and softmax/log_softmax: values for every dtype, axis variants,
// empty and scalar inputs, shape inference with unknown dims, and numerical properties.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>

#include "ops/op.h"
#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

using namespace ::tg::testing::values;

using CaseFn = std::function<Tensor(const std::vector<Tensor>&)>;
using ReduceFn = Tensor (*)(const Tensor&, std::vector<int>, bool);
using AxisFn = Tensor (*)(const Tensor&, int);

CaseFn red(ReduceFn f, std::vector<int> axes = {}, bool keepdims = false) {
  return [f, axes, keepdims](const std::vector<Tensor>& in) { return f(in[0], axes, keepdims); };
}
CaseFn along(AxisFn f, int axis) {
  return [f, axis](const std::vector<Tensor>& in) { return f(in[0], axis); };
}


// (2, 3) and (2, 3, 2) inputs shared by several cases.
Tensor m23f() { return constant({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}}); }
Tensor m232d() {
  return constant({{{1., 2.}, {3., 4.}, {5., 6.}}, {{7., 8.}, {9., 10.}, {11., 12.}}}, float64);
}
Tensor m232l() {
  return constant({{{1, 2}, {3, 4}, {5, 6}}, {{7, 8}, {9, 10}, {11, 12}}}, int64);
}

TG_OP_CASES(reduce_sum) {
  const auto f = &reduce_sum;
  return {
      {"reduce_sum", "f32 all axes", red(f), {m23f()}, constant(21.f)},
      {"reduce_sum", "f32 axis 0", red(f, {0}), {m23f()}, constant({5.f, 7.f, 9.f})},
      {"reduce_sum", "f32 axis -1 keepdims", red(f, {-1}, true), {m23f()},
       constant({{6.f}, {15.f}})},
      {"reduce_sum", "f32 all axes keepdims", red(f, {}, true), {m23f()}, constant({{21.f}})},
      {"reduce_sum", "f32 axes listed out of order", red(f, {1, 0}), {m23f()}, constant(21.f)},
      {"reduce_sum", "f64 axes {0,2} (two reduced groups)", red(f, {0, 2}), {m232d()},
       constant({18., 26., 34.}, float64)},
      {"reduce_sum", "f64 axes {0,-1} keepdims", red(f, {0, -1}, true), {m232d()},
       constant({{{18.}, {26.}, {34.}}}, float64)},
      {"reduce_sum", "f64 middle axis", red(f, {1}), {m232d()},
       constant({{9., 12.}, {27., 30.}}, float64)},
      {"reduce_sum", "i32 axis 1", red(f, {1}), {constant({{1, 2, 3}, {4, 5, 6}})},
       constant({6, 15})},
      {"reduce_sum", "i32 wraps on overflow", red(f), {constant({kI32Max, 1, 1})},
       constant(kI32Min + 1)},
      {"reduce_sum", "i64 axes {1,2}", red(f, {1, 2}), {m232l()}, constant({21, 57}, int64)},
      {"reduce_sum", "i64 wraps on overflow", red(f), {constant({kI64Max, int64_t{2}})},
       constant(kI64Min + 1)},
      {"reduce_sum", "f32 empty reduced dim -> 0", red(f, {0}), {zeros({0, 3})},
       constant({0.f, 0.f, 0.f})},
      {"reduce_sum", "i32 empty all axes -> 0", red(f), {zeros({2, 0}, int32)}, constant(0)},
      {"reduce_sum", "empty kept dim -> empty", red(f, {0}), {zeros({2, 0})}, zeros({0})},
      {"reduce_sum", "middle empty dim", red(f, {1}), {zeros({3, 0, 2}, int64)},
       zeros({3, 2}, int64)},
      {"reduce_sum", "empty tensor, two reduced groups", red(f, {0, 2}), {zeros({0, 2, 3})},
       constant({0.f, 0.f})},
      {"reduce_sum", "scalar, axes {}", red(f), {constant(5.f)}, constant(5.f)},
      {"reduce_sum", "scalar, keepdims", red(f, {}, true), {constant(5)}, constant(5)},
      {"reduce_sum", "size-1 dims", red(f, {0}), {constant({{{1.f}, {2.f}, {3.f}}})},
       constant({{1.f}, {2.f}, {3.f}})},
      {"reduce_sum", "reduce only a size-1 dim", red(f, {1}, false), {constant({{1}, {2}})},
       constant({1, 2})},
  };
}

TG_OP_CASES(reduce_mean) {
  const auto f = &reduce_mean;
  return {
      {"reduce_mean", "f32 axis 1", red(f, {1}), {m23f()}, constant({2.f, 5.f})},
      {"reduce_mean", "f32 all axes", red(f), {m23f()}, constant(3.5f)},
      {"reduce_mean", "f32 axis 0 keepdims", red(f, {0}, true), {m23f()},
       constant({{2.5f, 3.5f, 4.5f}})},
      {"reduce_mean", "f64 axes {0,2}", red(f, {0, 2}), {m232d()},
       constant({4.5, 6.5, 8.5}, float64)},
      {"reduce_mean", "f64 axis -2", red(f, {-2}), {m232d()},
       constant({{3., 4.}, {9., 10.}}, float64)},
      {"reduce_mean", "i32 truncates toward zero", red(f, {1}),
       {constant({{1, 2}, {3, 6}, {-1, -2}, {-7, 0}})}, constant({1, 4, -1, -3})},
      {"reduce_mean", "i64 all axes", red(f), {m232l()}, constant(int64_t{6})},
      {"reduce_mean", "i64 axes {0,2} keepdims", red(f, {0, 2}, true), {m232l()},
       constant({{{4}, {6}, {8}}}, int64)},
      {"reduce_mean", "f32 empty -> NaN", red(f, {0}), {zeros({0, 2})}, constant({kNanF, kNanF})},
      {"reduce_mean", "f64 empty all axes -> NaN", red(f), {zeros({0}, float64)},
       constant(kNan, float64)},
      {"reduce_mean", "i32 empty -> 0", red(f, {1}), {zeros({2, 0}, int32)}, constant({0, 0})},
      {"reduce_mean", "scalar", red(f), {constant(4)}, constant(4)},
  };
}

TG_OP_CASES(reduce_max) {
  const auto f = &reduce_max;
  return {
      {"reduce_max", "f32 axis 0", red(f, {0}), {constant({{1.f, -5.f}, {-2.f, 3.f}})},
       constant({1.f, 3.f})},
      {"reduce_max", "f32 NaN propagates", red(f, {1}),
       {constant({{1.f, kNanF, 3.f}, {kNanF, 2.f, 0.f}, {-kInfF, kInfF, 0.f}})},
       constant({kNanF, kNanF, kInfF})},
      {"reduce_max", "f32 NaN propagates along a strided axis", red(f, {0}),
       {constant({{1.f, 2.f}, {kNanF, 0.f}, {5.f, 1.f}})}, constant({kNanF, 2.f})},
      {"reduce_max", "f32 all -inf", red(f), {constant({-kInfF, -kInfF})}, constant(-kInfF)},
      {"reduce_max", "f64 axes {0,2} keepdims", red(f, {0, 2}, true), {m232d()},
       constant({{{8.}, {10.}, {12.}}}, float64)},
      {"reduce_max", "i32 negative values, axis -1", red(f, {-1}),
       {constant({{-3, -1, -2}, {kI32Min, kI32Min, kI32Min}})}, constant({-1, kI32Min})},
      {"reduce_max", "i64 all axes", red(f), {m232l()}, constant(int64_t{12})},
      {"reduce_max", "f32 empty -> -inf", red(f, {0}), {zeros({0, 2})},
       constant({-kInfF, -kInfF})},
      {"reduce_max", "f64 empty -> -inf", red(f), {zeros({0}, float64)}, constant(-kInf, float64)},
      {"reduce_max", "i32 empty -> lowest", red(f, {1}), {zeros({2, 0}, int32)},
       constant({kI32Min, kI32Min})},
      {"reduce_max", "i64 empty -> lowest", red(f), {zeros({0, 3}, int64)}, constant(kI64Min)},
      {"reduce_max", "scalar", red(f), {constant(-2.f)}, constant(-2.f)},
  };
}

TG_OP_CASES(reduce_min) {
  const auto f = &reduce_min;
  return {
      {"reduce_min", "f32 axis 1", red(f, {1}), {constant({{1.f, -5.f}, {-2.f, 3.f}})},
       constant({-5.f, -2.f})},
      {"reduce_min", "f32 NaN propagates", red(f),
       {constant({{1.f, 2.f}, {3.f, kNanF}})}, constant(kNanF)},
      {"reduce_min", "f64 axis 0, -inf wins", red(f, {0}),
       {constant({{1., 5.}, {-kInf, 3.}}, float64)}, constant({-kInf, 3.}, float64)},
      {"reduce_min", "f64 axes {0,2}", red(f, {0, 2}), {m232d()}, constant({1., 3., 5.}, float64)},
      {"reduce_min", "i32 all axes keepdims", red(f, {}, true), {constant({{4, -7}, {kI32Max, 0}})},
       constant({{-7}})},
      {"reduce_min", "i64 axis -3", red(f, {-3}), {m232l()},
       constant({{1, 2}, {3, 4}, {5, 6}}, int64)},
      {"reduce_min", "f32 empty -> +inf", red(f, {0}), {zeros({0, 1})}, constant({kInfF})},
      {"reduce_min", "f64 empty -> +inf", red(f), {zeros({3, 0}, float64)},
       constant(kInf, float64)},
      {"reduce_min", "i32 empty -> max", red(f), {zeros({0}, int32)}, constant(kI32Max)},
      {"reduce_min", "i64 empty -> max", red(f, {0}), {zeros({0, 2}, int64)},
       constant({kI64Max, kI64Max})},
      {"reduce_min", "scalar", red(f), {constant(int64_t{9})}, constant(int64_t{9})},
  };
}

TG_OP_CASES(reduce_prod) {
  const auto f = &reduce_prod;
  return {
      {"reduce_prod", "f32 axis 1", red(f, {1}), {m23f()}, constant({6.f, 120.f})},
      {"reduce_prod", "f32 all axes", red(f), {m23f()}, constant(720.f)},
      {"reduce_prod", "f64 axes {0,2}", red(f, {0, 2}), {m232d()},
       constant({112., 1080., 3960.}, float64)},
      {"reduce_prod", "i32 axis 0 keepdims", red(f, {0}, true), {constant({{2, -3}, {4, 5}})},
       constant({{8, -15}})},
      {"reduce_prod", "i32 wraps on overflow", red(f), {constant({65536, 65536, 3})},
       constant(0)},
      {"reduce_prod", "i32 wraps to negative", red(f), {constant({65536, 32768})},
       constant(kI32Min)},
      {"reduce_prod", "i64 axis -1", red(f, {-1}), {m232l()},
       constant({{2, 12, 30}, {56, 90, 132}}, int64)},
      {"reduce_prod", "f32 empty -> 1", red(f, {0}), {zeros({0, 2})}, constant({1.f, 1.f})},
      {"reduce_prod", "i64 empty -> 1", red(f), {zeros({0}, int64)}, constant(int64_t{1})},
      {"reduce_prod", "scalar", red(f), {constant(3.)}, constant(3.)},
  };
}

TG_OP_CASES(reduce_any_all) {
  const Tensor b = constant({{true, false, false}, {false, false, false}});
  const Tensor c = constant({{true, true, false}, {true, true, true}});
  return {
      {"reduce_any", "axis 1", red(&reduce_any, {1}), {b}, constant({true, false})},
      {"reduce_any", "axis 0 keepdims", red(&reduce_any, {0}, true), {b},
       constant({{true, false, false}})},
      {"reduce_any", "all axes", red(&reduce_any), {b}, constant(true)},
      {"reduce_any", "axes {0,-1}, all false", red(&reduce_any, {0, -1}),
       {constant({{false, false}, {false, false}})}, constant(false)},
      {"reduce_any", "empty -> false", red(&reduce_any, {0}), {zeros({0, 2}, bool_)},
       constant({false, false})},
      {"reduce_any", "scalar", red(&reduce_any), {constant(true)}, constant(true)},
      {"reduce_all", "axis -1", red(&reduce_all, {-1}), {c}, constant({false, true})},
      {"reduce_all", "axis 0", red(&reduce_all, {0}), {c}, constant({true, true, false})},
      {"reduce_all", "all axes keepdims", red(&reduce_all, {}, true), {c}, constant({{false}})},
      {"reduce_all", "three dims, axes {0,2}", red(&reduce_all, {0, 2}),
       {constant({{{true, true}, {true, false}}, {{true, true}, {true, true}}})},
       constant({true, false})},
      {"reduce_all", "empty -> true", red(&reduce_all), {zeros({2, 0}, bool_)}, constant(true)},
      {"reduce_all", "scalar", red(&reduce_all), {constant(false)}, constant(false)},
  };
}

TG_OP_CASES(argmax_argmin) {
  const Tensor t = constant({{1.f, 7.f, 7.f}, {9.f, 2.f, 9.f}});
  return {
      {"argmax", "f32 axis 0", along(&argmax, 0), {t}, constant({1, 0, 1}, int64)},
      {"argmax", "f32 axis 1, first index on ties", along(&argmax, 1), {t},
       constant({1, 0}, int64)},
      {"argmax", "f32 NaN wins, first NaN", along(&argmax, -1),
       {constant({{1.f, kNanF, 5.f, kNanF}, {kInfF, 1.f, kInfF, 0.f}})}, constant({1, 0}, int64)},
      {"argmax", "f32 NaN along a strided axis", along(&argmax, 0),
       {constant({{1.f, 5.f}, {kNanF, 0.f}, {kNanF, 9.f}})}, constant({1, 2}, int64)},
      {"argmax", "f64 middle axis", along(&argmax, 1), {m232d()},
       constant({{2, 2}, {2, 2}}, int64)},
      {"argmax", "i32 1-D", along(&argmax, 0), {constant({3, -1, 8, 8, 2})}, constant(int64_t{2})},
      {"argmax", "i64 axis -1", along(&argmax, -1), {constant({{kI64Min, kI64Min}, {int64_t{0}, int64_t{5}}}, int64)},
       constant({0, 1}, int64)},
      {"argmax", "size-1 axis", along(&argmax, 1), {constant({{4}, {5}})}, constant({0, 0}, int64)},
      {"argmax", "empty other dim", along(&argmax, 1), {zeros({0, 3})}, zeros({0}, int64)},
      {"argmin", "f32 axis 0", along(&argmin, 0), {t}, constant({0, 1, 0}, int64)},
      {"argmin", "f32 axis 1, first index on ties", along(&argmin, 1),
       {constant({{3.f, 1.f, 1.f}, {-kInfF, 0.f, -kInfF}})}, constant({1, 0}, int64)},
      {"argmin", "f32 NaN wins", along(&argmin, 0), {constant({1.f, kNanF, -5.f})},
       constant(int64_t{1})},
      {"argmin", "f64 axis -3", along(&argmin, -3), {m232d()},
       constant({{0, 0}, {0, 0}, {0, 0}}, int64)},
      {"argmin", "i32 axis 1", along(&argmin, 1), {constant({{5, 2, 2}, {kI32Max, kI32Min, 0}})},
       constant({1, 1}, int64)},
      {"argmin", "i64 middle axis", along(&argmin, 1),
       {constant({{{3, 1}, {2, 4}}, {{0, 0}, {-1, 0}}}, int64)},
       constant({{1, 0}, {1, 0}}, int64)},
  };
}

TG_OP_CASES(softmax) {
  const auto f = &softmax;
  return {
      {"softmax", "f32 last axis", along(f, -1), {constant({{1.f, 2.f, 3.f}, {0.f, 0.f, 0.f}})},
       constant({{0.0900305732f, 0.244728471f, 0.665240956f}, {1 / 3.f, 1 / 3.f, 1 / 3.f}}),
       1e-6},
      {"softmax", "f32 large logits do not overflow", along(f, -1),
       {constant({1000.f, 1001.f})}, constant({0.268941421f, 0.731058579f}), 1e-6},
      {"softmax", "f32 -inf entries give 0", along(f, -1), {constant({{0.f, -kInfF}, {-kInfF, 5.f}})},
       constant({{1.f, 0.f}, {0.f, 1.f}}), 1e-6},
      {"softmax", "f32 axis 0 (strided)", along(f, 0), {constant({{3.f, 2.f}, {1.f, 4.f}})},
       constant({{0.880797078f, 0.119202922f}, {0.119202922f, 0.880797078f}}), 1e-6},
      {"softmax", "f64 last axis", along(f, 1), {constant({{-1., 0., 1., 2.}}, float64)},
       constant({{0.0320586033, 0.0871443187, 0.236882818, 0.64391426}}, float64), 1e-8},
      {"softmax", "f64 middle axis of rank 3", along(f, 1),
       {constant({{{3., 2.}, {1., 4.}}, {{0., 0.}, {0., 0.}}}, float64)},
       constant({{{0.880797078, 0.119202922}, {0.119202922, 0.880797078}},
                 {{0.5, 0.5}, {0.5, 0.5}}},
                float64),
       1e-8},
      {"softmax", "f32 a NaN poisons its row only", along(f, -1),
       {constant({{1.f, kNanF}, {1000.f, 1001.f}})},
       constant({{kNanF, kNanF}, {0.268941421f, 0.731058579f}}), 1e-6},
      {"softmax", "f64 all -inf row is NaN", along(f, 0), {constant({-kInf, -kInf}, float64)},
       constant({kNan, kNan}, float64)},
      {"softmax", "f32 size-1 axis", along(f, -1), {constant({{7.f}, {-3.f}})},
       constant({{1.f}, {1.f}})},
      {"softmax", "f32 empty", along(f, -1), {zeros({2, 0})}, zeros({2, 0})},
  };
}

TG_OP_CASES(log_softmax) {
  const auto f = &log_softmax;
  return {
      {"log_softmax", "f32 last axis", along(f, -1), {constant({1.f, 2.f, 3.f})},
       constant({-2.40760596f, -1.40760596f, -0.407605964f}), 1e-6},
      {"log_softmax", "f32 large logits stay finite", along(f, -1),
       {constant({{1000.f, 1001.f}, {-1000.f, -1001.f}})},
       constant({{-1.31326169f, -0.313261688f}, {-0.313261688f, -1.31326169f}}), 1e-6},
      {"log_softmax", "f32 -inf entry stays -inf", along(f, -1), {constant({0.f, -kInfF})},
       constant({0.f, -kInfF})},
      {"log_softmax", "f32 axis 0 (strided)", along(f, 0),
       {constant({{3.f, 2.f}, {1.f, 4.f}})},
       constant({{-0.126928011f, -2.12692801f}, {-2.12692801f, -0.126928011f}}), 1e-6},
      {"log_softmax", "f64", along(f, 0), {constant({0.5, -0.5, 2.}, float64)},
       constant({-1.7663679, -2.7663679, -0.2663679}, float64), 1e-7},
      {"log_softmax", "f64 axis -2 of rank 3", along(f, -2),
       {constant({{{0., 1000.}, {0., 1001.}}}, float64)},
       constant({{{-0.693147181, -1.31326169}, {-0.693147181, -0.313261688}}}, float64), 1e-8},
      {"log_softmax", "f32 NaN along a strided axis", along(f, 0),
       {constant({{kNanF, 0.f}, {1.f, 0.f}})},
       constant({{kNanF, -0.693147181f}, {kNanF, -0.693147181f}}), 1e-6},
      {"log_softmax", "f32 size-1 axis", along(f, 0), {constant({5.f})}, constant({0.f})},
  };
}

// ---- properties and behaviour the case table cannot express ----

TEST(Reduce, SumOfOnesIsTheSize) {
  for (const TensorShape& s : {TensorShape{1000003}, TensorShape{1000, 1001}, TensorShape{7, 300, 11}}) {
    SCOPED_TRACE(s.to_string());
    const Tensor x = ones(s);
    EXPECT_EQ(reduce_sum(x).item<float>(), static_cast<float>(s.num_elements()));
    EXPECT_EQ(reduce_sum(ones(s, int64)).item<int64_t>(), s.num_elements());
    EXPECT_EQ(reduce_sum(x, {0}).to_vector<float>(),
              std::vector<float>(static_cast<std::size_t>(s.num_elements() / s.dims()[0]),
                                 static_cast<float>(s.dims()[0])));
  }
}

TEST(Reduce, MeanOfAMillionFloat32OnesIsExactlyOne) {
  EXPECT_EQ(reduce_mean(ones({1000000})).item<float>(), 1.0f);
  EXPECT_EQ(reduce_mean(ones({1000, 1000}), {0}).to_vector<float>(), std::vector<float>(1000, 1.0f));
  EXPECT_EQ(reduce_mean(ones({1000, 1000}), {1}).to_vector<float>(), std::vector<float>(1000, 1.0f));
}

TEST(Reduce, Float32SumsAreAccurate) {
  // 0.1f summed 4M times: naive float accumulation drifts by percents.
  const int64_t n = 4000000;
  const double exact = static_cast<double>(0.1f) * static_cast<double>(n);
  EXPECT_NEAR(reduce_sum(fill({n}, 0.1f)).item<float>(), exact, exact * 1e-7);
  EXPECT_NEAR(reduce_sum(fill({n / 10, 10}, 0.1f), {0}).to_vector<float>()[3], exact / 10,
              exact / 10 * 1e-7);
  // float64 sums along rows and across rows.
  const double exact64 = 0.1 * static_cast<double>(n);
  EXPECT_NEAR(reduce_sum(fill({n}, 0.1, float64)).item<double>(), exact64, exact64 * 1e-14);
  EXPECT_NEAR(reduce_sum(fill({n / 2, 2}, 0.1, float64), {0}).to_vector<double>()[1],
              exact64 / 2, exact64 * 1e-13);
}

// float32 sums over leading rows accumulate each column in double, row after row within blocks
// of 32 rows, and blocks pairwise (halving until a block has at most 32 rows), then round once.
// The bits are pinned here, since the column loop has a copy per ISA (reduce.cpp).
double pairwise_column(const std::vector<float>& x, int64_t rows, int64_t inner, int64_t first, int64_t k) {
  if (rows <= 32) {
    double s = 0.0;
    for (int64_t r = 0; r < rows; ++r) s += static_cast<double>(x[static_cast<std::size_t>((first + r) * inner + k)]);
    return s;
  }
  const int64_t half = rows / 2;
  const double a = pairwise_column(x, half, inner, first, k);
  return a + pairwise_column(x, rows - half, inner, first + half, k);
}

TEST(Reduce, Float32ColumnSumsHaveTheBitsOfRowOrderDoubleSums) {
  for (const int64_t rows : {int64_t{1}, int64_t{7}, int64_t{32}, int64_t{33}, int64_t{128}, int64_t{1000}}) {
    for (const int64_t inner : {int64_t{3}, int64_t{16}, int64_t{257}}) {
      SCOPED_TRACE(::testing::Message() << rows << " x " << inner);
      const Tensor x = random_uniform({rows, inner}, -1000.0f, 1000.0f, 11);
      const std::vector<float> v = x.to_vector<float>();
      std::vector<float> want_sum, want_mean;
      for (int64_t k = 0; k < inner; ++k) {
        const double s = pairwise_column(v, rows, inner, 0, k);
        want_sum.push_back(static_cast<float>(s));
        want_mean.push_back(static_cast<float>(s / static_cast<double>(rows)));
      }
      EXPECT_EQ(reduce_sum(x, {0}).to_vector<float>(), want_sum);
      EXPECT_EQ(reduce_mean(x, {0}).to_vector<float>(), want_mean);
    }
  }
}

// Large reductions run on the pool only where every output keeps its order of additions: the
// bits on two threads are one thread's, for sums over everything (pairwise_sum's halves), over
// rows (the top levels of the pairwise tree over rows, or whole outputs per thread), over columns,
// several axes at once (a bias gradient's (16, 64, 512) over the first two), and every reduction kind.
TEST(Reduce, LargeReductionsGiveTheSameBitsOnOneAndTwoThreads) {
  using ReduceFn = Tensor (*)(const Tensor&, std::vector<int>, bool);
  struct Case { TensorShape shape; std::vector<int> axes; };
  const std::vector<Case> cases = {{{1000003}, {}},       {{1000, 1001}, {0}},  {{1001, 1000}, {1}},
                                   {{3, 700, 257}, {1}},  {{700, 3, 257}, {0, 2}}, {{2, 300000}, {1}},
                                   {{300000, 2}, {0}},    {{64, 4100}, {0}},    {{16, 64, 512}, {0, 1}}};
  const int threads_before = config::num_threads();
  for (const Case& c : cases)
    for (const DType dt : {float32, float64, int32}) {
      SCOPED_TRACE(::testing::Message() << c.shape.to_string() << " axes " << c.axes.size() << " " << to_string(dt));
      const Tensor x = dt == int32 ? cast(random_uniform(c.shape, -1000.0f, 1000.0f, 3), int32)
                                   : cast(random_uniform(c.shape, -1000.0f, 1000.0f, 3), dt);
      const std::vector<std::pair<const char*, ReduceFn>> fns = {
          {"sum", &reduce_sum}, {"mean", &reduce_mean}, {"max", &reduce_max}, {"min", &reduce_min}, {"prod", &reduce_prod}};
      for (const auto& [name, fn] : fns) {
        SCOPED_TRACE(name);
        config::set_num_threads(1);
        const Tensor one = fn(x, c.axes, false);
        config::set_num_threads(2);
        EXPECT_TRUE(testing::same_bits(fn(x, c.axes, false), one));
      }
      const Tensor positive = x > (dt == int32 ? constant(0) : cast(constant(0.0f), dt));
      config::set_num_threads(1);
      const Tensor any1 = reduce_any(positive, c.axes), all1 = reduce_all(positive, c.axes);
      config::set_num_threads(2);
      EXPECT_TRUE(testing::same_bits(reduce_any(positive, c.axes), any1));
      EXPECT_TRUE(testing::same_bits(reduce_all(positive, c.axes), all1));
    }
  config::set_num_threads(threads_before);
}

TEST(Reduce, AgreesWithAnElementwiseReferenceOnEveryAxisSet) {
  // Every subset of axes of a (3, 1, 4, 5) tensor, with keepdims both ways, against a loop.
  const std::vector<int64_t> dims = {3, 1, 4, 5};
  std::vector<double> v(60);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 37) % 23) - 11.0;
  const Tensor x = constant(v, TensorShape(dims), float64);
  for (int mask = 0; mask < 16; ++mask) {
    std::vector<int> axes;
    for (int d = 0; d < 4; ++d)
      if (mask & (1 << d)) axes.push_back(mask & 1 ? d - 4 : d);  // mix negative axes in
    SCOPED_TRACE(mask);
    std::vector<int64_t> out_dims;
    for (int d = 0; d < 4; ++d) out_dims.push_back((mask & (1 << d)) || mask == 0 ? 1 : dims[d]);
    const int64_t n_out = out_dims[0] * out_dims[1] * out_dims[2] * out_dims[3];
    std::vector<double> sum(n_out, 0.0), mx(n_out, -1e300);
    for (int64_t a = 0; a < 3; ++a)
      for (int64_t c = 0; c < 4; ++c)
        for (int64_t e = 0; e < 5; ++e) {
          const double val = v[static_cast<std::size_t>((a * 4 + c) * 5 + e)];
          const int64_t oa = out_dims[0] == 1 ? 0 : a, oc = out_dims[2] == 1 ? 0 : c,
                        oe = out_dims[3] == 1 ? 0 : e;
          const auto o = static_cast<std::size_t>((oa * out_dims[2] + oc) * out_dims[3] + oe);
          sum[o] += val;
          mx[o] = std::max(mx[o], val);
        }
    const Tensor s = reduce_sum(x, axes, true), m = reduce_max(x, axes, true);
    EXPECT_EQ(s.shape(), TensorShape(out_dims));
    EXPECT_EQ(s.to_vector<double>(), sum);
    EXPECT_EQ(m.to_vector<double>(), mx);
    std::vector<int64_t> squeezed;
    for (int d = 0; d < 4; ++d)
      if (!(mask & (1 << d)) && mask != 0) squeezed.push_back(dims[d]);
    EXPECT_EQ(reduce_sum(x, axes).shape(), TensorShape(squeezed));
  }
}

TEST(Reduce, ShapeInferenceWithUnknownDimsAndRank) {
  using detail::OpAttrs;
  using detail::OpId;
  using detail::ValueType;
  auto infer = [](OpId id, TensorShape s, std::vector<int64_t> axes, bool keepdims,
                  DType d = float32) {
    return detail::op_def(id).infer({ValueType{d, std::move(s)}}, detail::ReduceAttrs{std::move(axes), keepdims})[0];
  };
  EXPECT_EQ(infer(OpId::ReduceSum, {None, 3, None}, {1}, false).shape, TensorShape({None, None}));
  EXPECT_EQ(infer(OpId::ReduceSum, {None, 3, None}, {-1, 0}, true).shape, TensorShape({1, 3, 1}));
  EXPECT_EQ(infer(OpId::ReduceMax, {None, 3}, {}, false).shape, TensorShape{});
  EXPECT_EQ(infer(OpId::ReduceMax, {None, 3}, {}, true).shape, TensorShape({1, 1}));
  EXPECT_EQ(infer(OpId::ReduceMean, TensorShape::unknown_rank(), {}, false).shape, TensorShape{});
  EXPECT_FALSE(infer(OpId::ReduceMean, TensorShape::unknown_rank(), {}, true).shape.has_rank());
  EXPECT_FALSE(infer(OpId::ReduceMin, TensorShape::unknown_rank(), {0}, false).shape.has_rank());
  EXPECT_FALSE(infer(OpId::ReduceProd, TensorShape::unknown_rank(), {0, -1}, true).shape.has_rank());
  EXPECT_EQ(infer(OpId::ReduceAll, {None}, {0}, false, bool_).dtype, bool_);
  EXPECT_EQ(infer(OpId::ReduceSum, {2}, {}, false, int64).dtype, int64);

  detail::ArgReduceAttrs a{-1, int64};
  auto ty = detail::op_def(OpId::ArgMax).infer({ValueType{float32, {None, None, 4}}}, a)[0];
  EXPECT_EQ(ty.shape, TensorShape({None, None}));
  EXPECT_EQ(ty.dtype, int64);
  EXPECT_FALSE(detail::op_def(OpId::ArgMin)
                   .infer({ValueType{int32, TensorShape::unknown_rank()}}, a)[0]
                   .shape.has_rank());
  // None along the axis cannot be checked statically.
  EXPECT_EQ(detail::op_def(OpId::ArgMin).infer({ValueType{int32, {3, None}}}, a)[0].shape,
            TensorShape({3}));
  a.output_type = int32;
  EXPECT_EQ(detail::op_def(OpId::ArgMax).infer({ValueType{float64, {2, 5}}}, a)[0].dtype, int32);

  detail::AxisAttrs along{5};  // cannot be checked against an unknown rank
  auto sm = detail::op_def(OpId::Softmax).infer({ValueType{float32, TensorShape::unknown_rank()}}, along)[0];
  EXPECT_FALSE(sm.shape.has_rank());
  along.axis = 0;
  EXPECT_EQ(detail::op_def(OpId::LogSoftmax).infer({ValueType{float64, {None, 3}}}, along)[0].shape,
            TensorShape({None, 3}));
}

TEST(Reduce, AttrsStoreAxesAsGiven) {
  // Normalising is the rules' job; the stored attrs keep what the user wrote.
  const detail::ReduceAttrs a{{-1, 0}, true};
  EXPECT_EQ(detail::op_def(detail::OpId::ReduceSum)
                .infer({detail::ValueType{float32, {2, 3}}}, a)[0]
                .shape,
            TensorShape({1, 1}));
}

TEST(Reduce, LargeBlocksMatchAReference) {
  // Exercise the strided (inner > 1) and contiguous paths on sizes past the unrolled lanes.
  const Tensor x = random_uniform({37, 129, 3}, -1.f, 1.f, 7);
  const auto v = x.to_vector<float>();
  std::vector<double> s0(129 * 3, 0.0), s2(37 * 129, 0.0);
  std::vector<float> m1(37 * 3, -kInfF);
  for (int a = 0; a < 37; ++a)
    for (int b = 0; b < 129; ++b)
      for (int c = 0; c < 3; ++c) {
        const float e = v[static_cast<std::size_t>((a * 129 + b) * 3 + c)];
        s0[static_cast<std::size_t>(b * 3 + c)] += e;
        s2[static_cast<std::size_t>(a * 129 + b)] += e;
        m1[static_cast<std::size_t>(a * 3 + c)] = std::max(m1[static_cast<std::size_t>(a * 3 + c)], e);
      }
  const auto r0 = reduce_sum(x, {0}).to_vector<float>();
  for (std::size_t i = 0; i < s0.size(); ++i) EXPECT_NEAR(r0[i], s0[i], 1e-5);
  const auto r2 = reduce_sum(x, {2}).to_vector<float>();
  for (std::size_t i = 0; i < s2.size(); ++i) EXPECT_NEAR(r2[i], s2[i], 1e-5);
  EXPECT_EQ(reduce_max(x, {1}).to_vector<float>(), m1);
  const auto am = argmax(x, 1).to_vector<int64_t>();
  for (int a = 0; a < 37; ++a)
    for (int c = 0; c < 3; ++c) {
      const auto i = static_cast<std::size_t>(a * 3 + c);
      EXPECT_EQ(v[static_cast<std::size_t>((a * 129 + am[i]) * 3 + c)], m1[i]);
    }
}

TEST(Softmax, RowsSumToOneAndLogSoftmaxIsLogOfSoftmax) {
  const Tensor x = random_uniform({17, 33, 5}, -30.f, 30.f, 3);
  for (int axis : {-1, 1, 0}) {
    SCOPED_TRACE(axis);
    const Tensor p = softmax(x, axis);
    EXPECT_TENSOR_NEAR(reduce_sum(p, {axis}), ones(reduce_sum(x, {axis}).shape()), 1e-5);
    for (float e : p.to_vector<float>()) {
      EXPECT_GE(e, 0.f);
      EXPECT_LE(e, 1.f);
    }
    const Tensor lp = log_softmax(x, axis);
    const auto a = lp.to_vector<float>();
    const auto b = log(p).to_vector<float>();
    for (std::size_t i = 0; i < a.size(); ++i)
      EXPECT_NEAR(a[i], b[i], 1e-4 * (1 + std::fabs(b[i])));
    // log_softmax stays finite where softmax underflows.
    for (float e : a) EXPECT_TRUE(std::isfinite(e));
  }
  const Tensor xd = cast(x, float64);
  EXPECT_TENSOR_NEAR(reduce_sum(softmax(xd, 0), {0}), ones({33, 5}, float64), 1e-12);
  EXPECT_TENSOR_NEAR(exp(log_softmax(xd)), softmax(xd), 1e-12);
}

TEST(Softmax, ShiftInvariantAndStableForHugeLogits) {
  const Tensor x = constant({{1.f, 2.f, 3.f}});
  EXPECT_TENSOR_NEAR(softmax(x + 1e4f), softmax(x), 1e-5);
  EXPECT_TENSOR_NEAR(softmax(x - 1e4f), softmax(x), 1e-5);
  const Tensor big = constant({{3e38f, 3e38f}, {-3e38f, 0.f}});
  EXPECT_TENSOR_NEAR(softmax(big), constant({{0.5f, 0.5f}, {0.f, 1.f}}), 1e-6);
  EXPECT_TENSOR_NEAR(log_softmax(big), constant({{-0.693147181f, -0.693147181f}, {-3e38f, 0.f}}),
                     1e-6);
  // A long float32 row goes through the vectorised exp.
  const Tensor row = random_uniform({1, 1000}, -5.f, 5.f, 11);
  EXPECT_NEAR(reduce_sum(softmax(row)).item<float>(), 1.0f, 1e-5);
  EXPECT_TENSOR_NEAR(softmax(row), cast(softmax(cast(row, float64)), float32), 1e-6);
}

}  // namespace
}  // namespace tg
