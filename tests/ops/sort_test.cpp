// sort, argsort, top_k and the two *_last_axis helpers: op cases (run eagerly, traced, traced and
// optimised, with None dims and unknown rank, and saved/loaded), checked against a plain
// std::stable_sort reference, plus NaN order, ties, other axes and run-time k errors.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ops/sort.h"
#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
using testing::values::kInf;
using testing::values::kNan;

// Draws in [-1, 1) rounded to eighths, so that sorts meet ties, times scale.
Tensor values(const std::vector<int64_t>& dims, DType dtype, uint64_t seed, double scale = 1.0) {
  return testing::seeded_values(dims, dtype, seed, {.step = 1.0 / 8, .scale = scale});
}

// The reference: each row of the last axis stably sorted (NaN largest), the first k kept.
std::pair<Tensor, Tensor> reference(const Tensor& x, bool descending, int64_t k) {
  const std::vector<double> v = cast(x, float64).to_vector<double>();
  const int64_t n = x.shape().dims().back();
  const int64_t rows = n == 0 ? 0 : static_cast<int64_t>(v.size()) / n;
  auto key = [](double a) { return std::isnan(a) ? kInf : a; };
  auto rank = [](double a) { return std::isnan(a) ? 1 : 0; };  // NaN above +inf
  std::vector<double> vals;
  std::vector<int32_t> idx;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int32_t> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      const double va = v[static_cast<std::size_t>(r * n + a)];
      const double vb = v[static_cast<std::size_t>(r * n + b)];
      const std::pair<int, double> ka{rank(va), key(va)};
      const std::pair<int, double> kb{rank(vb), key(vb)};
      return descending ? ka > kb : ka < kb;
    });
    for (int64_t j = 0; j < k; ++j) {
      vals.push_back(v[static_cast<std::size_t>(r * n + order[static_cast<std::size_t>(j)])]);
      idx.push_back(order[static_cast<std::size_t>(j)]);
    }
  }
  std::vector<int64_t> dims = x.shape().dims();
  dims.back() = k;
  return {cast(constant(vals, TensorShape(dims), float64), x.dtype()),
          constant(std::vector<int64_t>(idx.begin(), idx.end()), TensorShape(dims), int32)};
}

Fn sort_fn(bool descending) {
  return [=](const std::vector<Tensor>& in) {
    return sort(in[0], -1, descending ? SortDirection::Descending : SortDirection::Ascending);
  };
}
Fn argsort_fn(bool descending) {
  return [=](const std::vector<Tensor>& in) {
    return argsort(in[0], -1, descending ? SortDirection::Descending : SortDirection::Ascending);
  };
}

TG_OP_CASES(sort) {
  std::vector<testing::OpCase> cases;
  struct Shape {
    std::string label;
    std::vector<int64_t> dims;
    DType dtype;
  };
  const std::vector<Shape> shapes = {
      {"(7,) float32 with ties", {7}, float32},
      {"(3, 5) float64", {3, 5}, float64},
      {"(2, 3, 4) int32", {2, 3, 4}, int32},
      {"(4, 6) int64", {4, 6}, int64},
      {"(2, 0) no elements", {2, 0}, float32},
      {"(200, 300) float32: rows on the thread pool", {200, 300}, float32},
  };
  uint64_t seed = 3;
  for (const Shape& s : shapes) {
    const Tensor x = values(s.dims, s.dtype, seed++, s.dtype == int32 || s.dtype == int64 ? 16.0 : 1.0);
    const int64_t n = s.dims.back();
    for (const bool desc : {false, true}) {
      const auto [v, i] = reference(x, desc, n);
      const std::string dir = desc ? ", descending" : ", ascending";
      cases.push_back({"sort", s.label + dir, sort_fn(desc), {x}, v});
      cases.push_back({"sort", "argsort " + s.label + dir, argsort_fn(desc), {x}, i});
    }
    for (const int64_t k : {int64_t{0}, std::min<int64_t>(n, 1), std::min<int64_t>(n, 3), n}) {
      const auto [v, i] = reference(x, true, k);
      const Fn values_fn = [k](const std::vector<Tensor>& in) { return top_k(in[0], k).values; };
      const Fn indices_fn = [k](const std::vector<Tensor>& in) { return top_k(in[0], k).indices; };
      cases.push_back({"top_k", s.label + ", k = " + std::to_string(k), values_fn, {x}, v});
      cases.push_back({"top_k", s.label + ", k = " + std::to_string(k) + ", indices", indices_fn, {x}, i});
    }
  }
  // uint8 sorts as unsigned bytes (200 > 3).
  const Tensor bytes = constant({200, 3, 255, 3, 0}, uint8);
  cases.push_back({"sort", "uint8", sort_fn(false), {bytes}, constant({0, 3, 3, 200, 255}, uint8)});
  cases.push_back({"top_k", "uint8, k = 2",
                   [](const std::vector<Tensor>& in) { return top_k(in[0], 2).values; }, {bytes},
                   constant({255, 200}, uint8)});
  // NaN is the largest value: last ascending, first descending and in top_k; -inf/inf in order.
  const Tensor specials = constant({1.0, kNan, -kInf, kInf, kNan, -1.0}, float64);
  cases.push_back({"sort", "NaN last ascending", sort_fn(false), {specials},
                   constant({-kInf, -1.0, 1.0, kInf, kNan, kNan}, float64)});
  cases.push_back({"sort", "NaN first descending, argsort stable among NaNs", argsort_fn(true), {specials},
                   constant({1, 4, 3, 0, 5, 2}, int32)});
  cases.push_back({"top_k", "NaN counts as largest", [](const std::vector<Tensor>& in) { return top_k(in[0], 3).indices; },
                   {specials}, constant({1, 4, 3}, int32)});
  // TF's tie rule: of equal values the lower index comes first.
  cases.push_back({"top_k", "ties: lower index first", [](const std::vector<Tensor>& in) { return top_k(in[0], 3).indices; },
                   {constant({2, 5, 5, 1, 5})}, constant({1, 2, 4}, int32)});
  // The gradient helpers.
  const Tensor x = constant({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}});
  const Tensor idx = constant({{2, 0}, {1, 1}});
  cases.push_back({"gather_last_axis", "(2,3) by (2,2) indices",
                   [](const std::vector<Tensor>& in) { return detail::gather_last_axis(in[0], in[1]); }, {x, idx},
                   constant({{3.f, 1.f}, {5.f, 5.f}})});
  cases.push_back({"gather_last_axis", "int64 indices",
                   [](const std::vector<Tensor>& in) { return detail::gather_last_axis(in[0], cast(in[1], int64)); },
                   {x, idx}, constant({{3.f, 1.f}, {5.f, 5.f}})});
  cases.push_back({"scatter_add_last_axis_like", "repeated index adds",
                   [](const std::vector<Tensor>& in) { return detail::scatter_add_last_axis_like(in[0], in[1], in[2]); },
                   {constant({{1.f, 2.f}, {3.f, 4.f}}), idx, x}, constant({{2.f, 0.f, 1.f}, {0.f, 7.f, 0.f}})});
  return cases;
}

TEST(Sort, OtherAxesMoveToTheEndAndBack) {
  const Tensor x = constant({{3, 1, 2}, {0, 5, -1}});
  EXPECT_TENSOR_EQ(sort(x, 0), constant({{0, 1, -1}, {3, 5, 2}}));
  EXPECT_TENSOR_EQ(argsort(x, 0), constant({{1, 0, 1}, {0, 1, 0}}));
  EXPECT_TENSOR_EQ(sort(x, -2, SortDirection::Descending), constant({{3, 5, 2}, {0, 1, -1}}));
  // The same traced, with None dims.
  auto f = function([](const Tensor& t) { return argsort(t, 0, SortDirection::Descending); });
  EXPECT_TENSOR_EQ(f.get_concrete_function(TensorSpec({None, None}, int32))(x), constant({{0, 1, 0}, {1, 0, 1}}));
}

TEST(Sort, GatherOfArgsortIsSort) {
  const Tensor x = values({5, 9}, float32, 11);
  EXPECT_TENSOR_EQ(detail::gather_last_axis(x, argsort(x)), sort(x));
}

TEST(TopK, KLargerThanARunTimeDimIsAnErrorWhenTheGraphRuns) {
  auto f = function([](const Tensor& t) { return top_k(t, 4).values; });
  auto cf = f.get_concrete_function(TensorSpec({None}, float32));
  EXPECT_TENSOR_EQ(cf(constant({1.f, 4.f, 2.f, 3.f, 0.f})), constant({4.f, 3.f, 2.f, 1.f}));
  EXPECT_THROW_MSG(cf(constant({1.f, 2.f})), InvalidArgumentError, "[top_k]", "k = 4", "last dimension (2)");
}

TEST(TopK, ReturnsValuesAndInt32Indices) {
  const auto [values, indices] = top_k(constant({{1.f, 9.f, 4.f}, {7.f, 7.f, 8.f}}), 2);
  EXPECT_TENSOR_EQ(values, constant({{9.f, 4.f}, {8.f, 7.f}}));
  EXPECT_TENSOR_EQ(indices, constant({{1, 2}, {2, 0}}));
}

}  // namespace
}  // namespace tg
