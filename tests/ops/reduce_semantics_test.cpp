// Every reduction kind and dtype, run two ways - by its op eagerly, and inside a tg::function
// whose optimiser folds it into a fused elementwise node - on rows holding NaN, +-inf, -0.0,
// integer overflow and no elements at all. Both ways must give the bits of the reference fold
// below, written from the rules of src/kernels/reduce_semantics.h: the identities, NaN in gives NaN
// out (which NaN is left open, as IEEE 754 leaves it), integers wrap around, integer means
// truncate, an empty float mean is NaN. The two paths add in different orders (the fused one tile
// by tile; tests/passes/fusion_test.cpp bounds the rounding that makes), so the values here keep
// every partial sum and product exact: any order gives the same bits, and a difference is a
// difference of semantics.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/fused.h"
#include "support/graph_util.h"
#include "support/test_util.h"

namespace tg {
namespace {

using detail::OpId;

// Row lengths: empty, one element, shorter than a block of lanes, whole blocks, blocks and a tail.
const int64_t kLengths[] = {0, 1, 2, 7, 8, 9, 16, 31, 64, 127};

Tensor reduce_by(OpId op, const Tensor& x, const std::vector<int>& axes) {
  switch (op) {
    case OpId::ReduceSum: return reduce_sum(x, axes);
    case OpId::ReduceMean: return reduce_mean(x, axes);
    case OpId::ReduceMax: return reduce_max(x, axes);
    case OpId::ReduceMin: return reduce_min(x, axes);
    case OpId::ReduceProd: return reduce_prod(x, axes);
    case OpId::ReduceAny: return reduce_any(x, axes);
    default: return reduce_all(x, axes);
  }
}

// The elementwise chain the reduction reads: -(x * 2) keeps -0.0 (from +0.0), NaN and the
// infinities, wraps integers around, and keeps powers of two exact.
Tensor chain(const Tensor& x) { return x.dtype() == bool_ ? logical_not(x) : neg(x * 2); }

// The reduction of `row` by the rules, with the identities written out.
template <class T>
T reference(OpId op, const std::vector<T>& row) {
  const auto n = static_cast<int64_t>(row.size());
  if (n == 1) return row[0];  // one element is the reduction: a sum of -0.0 is not +0.0 + -0.0
  if constexpr (std::is_same_v<T, bool>) {
    bool any = false, all = true;
    for (bool v : row) {
      any = any || v;
      all = all && v;
    }
    return op == OpId::ReduceAny ? any : all;
  } else if constexpr (std::is_floating_point_v<T>) {
    double sum = 0.0, prod = 1.0;  // float32 sums and products accumulate in double
    T max = -std::numeric_limits<T>::infinity(), min = std::numeric_limits<T>::infinity();
    bool nan = false;
    for (T v : row) {
      sum += v;
      prod *= v;
      nan = nan || std::isnan(v);
      max = v > max ? v : max;
      min = v < min ? v : min;
    }
    switch (op) {
      case OpId::ReduceSum: return static_cast<T>(sum);
      case OpId::ReduceMean: return n == 0 ? std::numeric_limits<T>::quiet_NaN() : static_cast<T>(sum / static_cast<double>(n));
      case OpId::ReduceMax: return nan ? std::numeric_limits<T>::quiet_NaN() : max;
      case OpId::ReduceMin: return nan ? std::numeric_limits<T>::quiet_NaN() : min;
      default: return static_cast<T>(prod);
    }
  } else {
    using U = std::make_unsigned_t<T>;
    U sum = 0, prod = 1;
    T max = std::numeric_limits<T>::lowest(), min = std::numeric_limits<T>::max();
    for (T v : row) {
      sum = static_cast<U>(sum + static_cast<U>(v));
      prod = static_cast<U>(prod * static_cast<U>(v));
      max = v > max ? v : max;
      min = v < min ? v : min;
    }
    switch (op) {
      case OpId::ReduceSum: return static_cast<T>(sum);
      case OpId::ReduceMean: return n == 0 ? T(0) : static_cast<T>(static_cast<int64_t>(static_cast<T>(sum)) / n);
      case OpId::ReduceMax: return max;
      case OpId::ReduceMin: return min;
      default: return static_cast<T>(prod);
    }
  }
}

template <class T>
bool same(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    if (std::isnan(a) && std::isnan(b)) return true;
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
std::string show(T v) {
  if constexpr (std::is_floating_point_v<T>) return (std::signbit(v) && v == 0 ? "-0.0" : std::to_string(v));
  else return std::to_string(v);
}

// Element i of `got` against the reference of `rows[i]`.
template <class T>
::testing::AssertionResult matches(const Tensor& got, const std::vector<std::vector<T>>& rows, OpId op) {
  const std::vector<T> values = got.to_vector<T>();
  if (values.size() != rows.size())
    return ::testing::AssertionFailure() << values.size() << " results for " << rows.size() << " rows";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const T want = reference(op, rows[i]);
    if (!same(values[i], want))
      return ::testing::AssertionFailure() << "row " << i << " (" << rows[i].size() << " elements): got " << show(values[i])
                                           << ", the rules give " << show(want);
  }
  return ::testing::AssertionSuccess();
}

// Rows of x of kind `flavour`, n long, each drawn from `rng`. Floats are signed powers of two
// (exact sums and products) among specials; integers are small, or anywhere in their range so
// that doubling and summing them wrap around.
template <class T>
std::vector<T> row_of(int flavour, int64_t n, std::mt19937& rng) {
  std::vector<T> row(static_cast<std::size_t>(n));
  if constexpr (std::is_same_v<T, bool>) {
    for (int64_t i = 0; i < n; ++i) row[static_cast<std::size_t>(i)] = flavour == 0 ? true : flavour == 1 ? false : rng() % 2 == 0;
    if (n > 0 && flavour == 3) row.back() = !row.back();
    return row;
  } else if constexpr (std::is_floating_point_v<T>) {
    const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
    for (auto& v : row) v = std::ldexp(rng() % 2 ? T(1) : T(-1), static_cast<int>(rng() % 5) - 2);
    auto put = [&](int64_t i, T v) {
      if (n > 0) row[static_cast<std::size_t>(i % n)] = v;
    };
    switch (flavour) {
      case 0: break;                                       // finite
      case 1: for (auto& v : row) v = T(0); break;         // all -0.0 after the chain
      case 2: for (auto& v : row) v = std::abs(v); put(n / 2, T(0)); break;  // max is -0.0
      case 3: for (auto& v : row) v = -T(0); break;        // all +0.0 after the chain
      case 4: put(n - 1, inf); break;
      case 5: put(0, -inf); break;
      case 6: put(1, inf); put(n / 2 + 1, -inf); break;   // sums are NaN
      case 7: put(n / 2, nan); break;                      // NaN among the lanes' blocks
      case 8: put(n - 1, nan); break;                      // NaN in the tail
      case 9: put(0, -nan); break;                         // a NaN with its sign bit set
      case 10: for (auto& v : row) v = -inf; break;        // all +inf after the chain
      case 11: for (auto& v : row) v = inf; break;         // all -inf: max is its identity
      default: put(n / 3, std::numeric_limits<T>::max()); break;  // doubling overflows to inf
    }
    return row;
  } else {
    const T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
    std::uniform_int_distribution<T> small(-1000, 1000), any(lo, hi);
    for (auto& v : row) v = small(rng);
    switch (flavour) {
      case 0: break;
      case 1: for (auto& v : row) v = any(rng); break;  // sums and products wrap
      case 2: for (auto& v : row) v = hi; break;        // -(2 * hi) wraps to 2
      case 3: for (auto& v : row) v = lo / 2; break;    // -(2 * (lo / 2)) wraps to lo
      case 4: for (auto& v : row) v = T(0); break;
      default: for (auto& v : row) v = static_cast<T>(hi / 2 + 1 + (rng() % 4)); break;  // doubling wraps
    }
    return row;
  }
}

template <class T>
int num_flavours() {
  if constexpr (std::is_same_v<T, bool>) return 4;
  else if constexpr (std::is_floating_point_v<T>) return 13;
  else return 6;
}

template <class T>
std::vector<T> flat(const std::vector<std::vector<T>>& rows) {
  std::vector<T> out;
  for (const auto& r : rows) out.insert(out.end(), r.begin(), r.end());
  return out;
}

// The rows of the chain's output, as the eager elementwise kernels compute it.
template <class T>
std::vector<std::vector<T>> chained_rows(const Tensor& x, int64_t rows, int64_t n) {
  const std::vector<T> y = chain(x).to_vector<T>();
  std::vector<std::vector<T>> out(static_cast<std::size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    out[static_cast<std::size_t>(r)].assign(y.begin() + r * n, y.begin() + (r + 1) * n);
  return out;
}

// Whether the optimised graph folded the reduction into a fused node (when the fused kernel
// folds that kind and dtype) or kept it as it is.
::testing::AssertionResult folded_as_expected(const Graph& g, OpId op, DType dtype) {
  const char* name = detail::op_def(op).name;
  const bool fold = detail::fusable_reduce(op, dtype);
  const int fused = testing::count_op(g, "fused_elementwise"), kept = testing::count_op(g, name);
  if (fold ? fused == 1 && kept == 0 : kept == 1)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << name << (fold ? " should fold" : " should stay") << ":\n" << g.to_string();
}

// kOp is a template parameter so that each kind's tg::functions have a callable of their own.
template <OpId kOp, class T>
void check_kind() {
  const DType dtype = dtype_of_v<T>;
  const char* name = detail::op_def(kOp).name;
  const int flavours = num_flavours<T>();
  std::mt19937 rng(7);
  // Along the last axis, one row per flavour: one trace per static shape.
  auto f = function([](const Tensor& in) { return reduce_by(kOp, chain(in), {-1}); });
  for (int64_t n : kLengths) {
    SCOPED_TRACE(std::string(name) + " " + to_string(dtype) + " rows of " + std::to_string(n));
    std::vector<std::vector<T>> rows;
    for (int k = 0; k < flavours; ++k) rows.push_back(row_of<T>(k, n, rng));
    const Tensor x = constant(flat(rows), TensorShape({flavours, n}), dtype);
    const std::vector<std::vector<T>> y = chained_rows<T>(x, flavours, n);
    auto traced = f.get_concrete_function(x);  // not a call: no retracing warning
    EXPECT_TRUE(matches(reduce_by(kOp, chain(x), {-1}), y, kOp)) << "eager";
    EXPECT_TRUE(matches(traced(x), y, kOp)) << "traced";
    EXPECT_TRUE(folded_as_expected(traced.optimized_graph(), kOp, dtype));
  }
  // Over every axis of a (2, n) tensor whose dims the trace leaves as None: the fused kernel plans
  // each run-time shape (ops/fused.h).
  auto g = function([](const Tensor& in) { return reduce_by(kOp, chain(in), {}); },
                    {.input_signature = std::vector<TensorSpec>{TensorSpec(TensorShape({None, None}), dtype)}});
  for (int64_t n : kLengths) {
    for (int flavour = 0; flavour < flavours; ++flavour) {
      SCOPED_TRACE(std::string(name) + " " + to_string(dtype) + " all of (2, " + std::to_string(n) + "), flavour " +
                   std::to_string(flavour));
      const std::vector<T> both = flat<T>({row_of<T>(flavour, n, rng), row_of<T>((flavour * 5 + 1) % flavours, n, rng)});
      const Tensor x = constant(both, TensorShape({2, n}), dtype);
      const std::vector<std::vector<T>> y = {flat(chained_rows<T>(x, 2, n))};
      EXPECT_TRUE(matches(reduce_by(kOp, chain(x), {}), y, kOp)) << "eager";
      EXPECT_TRUE(matches(g(x), y, kOp)) << "traced";
    }
  }
  EXPECT_TRUE(folded_as_expected(g.concrete_functions().at(0).optimized_graph(), kOp, dtype));
}

template <OpId kOp>
void check_numbers() {
  check_kind<kOp, float>();
  check_kind<kOp, double>();
  check_kind<kOp, int32_t>();
  check_kind<kOp, int64_t>();
}

TEST(ReduceSemantics, EveryKindAndDtypeGivesTheRulesBitsEagerlyAndFolded) {
  check_numbers<OpId::ReduceSum>();
  check_numbers<OpId::ReduceMean>();
  check_numbers<OpId::ReduceMax>();
  check_numbers<OpId::ReduceMin>();
  check_numbers<OpId::ReduceProd>();
  check_kind<OpId::ReduceAny, bool>();
  check_kind<OpId::ReduceAll, bool>();
}

// The identities, spelled out: what each kind gives for rows of nothing, on both paths.
template <OpId kOp, class T>
void expect_identity(T want) {
  const DType dtype = dtype_of_v<T>;
  SCOPED_TRACE(std::string(detail::op_def(kOp).name) + " " + to_string(dtype));
  const Tensor x = constant(std::vector<T>{}, TensorShape({3, 0}), dtype);
  auto f = function([](const Tensor& in) { return reduce_by(kOp, chain(in), {-1}); });
  for (const Tensor& got : {reduce_by(kOp, chain(x), {-1}), f(x)}) {
    const std::vector<T> values = got.to_vector<T>();
    ASSERT_EQ(values.size(), 3u);
    for (T v : values) EXPECT_TRUE(same(v, want)) << show(v) << " instead of " << show(want);
  }
}

TEST(ReduceSemantics, RowsOfNothingGiveTheIdentities) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  expect_identity<OpId::ReduceSum, float>(0.0f);
  expect_identity<OpId::ReduceSum, double>(0.0);
  expect_identity<OpId::ReduceProd, float>(1.0f);
  expect_identity<OpId::ReduceMax, double>(-inf);
  expect_identity<OpId::ReduceMax, float>(-static_cast<float>(inf));
  expect_identity<OpId::ReduceMin, double>(inf);
  expect_identity<OpId::ReduceMin, float>(static_cast<float>(inf));
  expect_identity<OpId::ReduceMean, float>(static_cast<float>(nan));
  expect_identity<OpId::ReduceMean, double>(nan);
  expect_identity<OpId::ReduceSum, int32_t>(0);
  expect_identity<OpId::ReduceProd, int64_t>(1);
  expect_identity<OpId::ReduceMax, int32_t>(std::numeric_limits<int32_t>::lowest());
  expect_identity<OpId::ReduceMax, int64_t>(std::numeric_limits<int64_t>::lowest());
  expect_identity<OpId::ReduceMin, int32_t>(std::numeric_limits<int32_t>::max());
  expect_identity<OpId::ReduceMin, int64_t>(std::numeric_limits<int64_t>::max());
  expect_identity<OpId::ReduceMean, int32_t>(0);
  expect_identity<OpId::ReduceMean, int64_t>(0);
  expect_identity<OpId::ReduceAny, bool>(false);
  expect_identity<OpId::ReduceAll, bool>(true);
}

}  // namespace
}  // namespace tg
