// What a reduction computes, written once for the two kernels that compute one - the reduce ops
// (reduce.cpp) and the reductions folded into fused elementwise nodes (fused.cpp, and the bias
// sums of a product's epilogue) - so that an optimised graph answers as the unoptimised one does.
// Each kind's accumulator, identity, element and lane steps, NaN rule, integer wrap-around, the
// mean's division and the order floating sums add in are here; a kernel only decides which
// elements go to which lane. (Included by baseline-ISA files only: see the ISA note at the top of
// fused_micro.inc.)
#pragma once
#include <cstdint>
#include <limits>
#include <type_traits>

namespace tg::detail {

/// The reductions, with TensorFlow 2's semantics where it defines them:
/// - An empty reduction gives the identity: sum 0 (+0.0), prod 1, max -inf (integers: lowest),
///   min +inf (integers: max), any false, all true; mean NaN for floats and 0 for integers (TF
///   fills with NumTraits<T>::quiet_NaN(), which is 0 for integers).
/// - A reduction of one element is that element (TF reduces nothing over dims of size 1), so a
///   sum of one -0.0 is -0.0 where +0.0 + -0.0 would be +0.0.
/// - float32 sums, means and products accumulate in double; integer sums and products wrap
///   around; an integer mean is the wrapped sum divided by the count, truncated toward zero.
/// - Float max/min are NaN when any element is NaN (TF propagates it); sums, means and products
///   get NaN from IEEE arithmetic. Which NaN (sign, payload) is left open, as IEEE 754 leaves it,
///   and so is which of -0.0 and +0.0 a max or min returns when both are the extreme (it depends
///   on the order the elements are visited, which differs between kernels).
enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kAny, kAll };

/// What a reduction of T accumulates in: double for floating sums, means and products (float32's
/// accuracy), otherwise T itself.
template <ReduceKind R, class T>
using reduce_acc_t = std::conditional_t<std::is_floating_point_v<T> && (R == ReduceKind::kSum || R == ReduceKind::kMean ||
                                                                        R == ReduceKind::kProd),
                                        double, T>;

/// Whether R over A adds floats: pairwise (sum_in_lanes, pairwise_sum, pairwise_over_rows).
template <ReduceKind R, class A>
inline constexpr bool kFloatingSum = (R == ReduceKind::kSum || R == ReduceKind::kMean) && std::is_floating_point_v<A>;

template <ReduceKind R, class A>
constexpr A reduce_identity() {
  if constexpr (R == ReduceKind::kSum || R == ReduceKind::kMean) return A(0);
  else if constexpr (R == ReduceKind::kProd) return A(1);
  else if constexpr (R == ReduceKind::kAny) return false;
  else if constexpr (R == ReduceKind::kAll) return true;
  else if constexpr (R == ReduceKind::kMax)
    return std::is_floating_point_v<A> ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::lowest();
  else
    return std::is_floating_point_v<A> ? std::numeric_limits<A>::infinity() : std::numeric_limits<A>::max();
}

/// Max and min: whether x replaces the accumulator a. Strictly better only, so ties keep the
/// element visited first, and a NaN never replaces (see reduce_combine and kReduceFlagsNan).
template <ReduceKind R, class A>
inline bool reduce_prefers(A x, A a) {
  return R == ReduceKind::kMax ? x > a : x < a;
}

/// Folds one element into one lane: branch-free, so that lane loops vectorise (a float max/min
/// step is the max/min instruction). Integers wrap around. Float max/min skip a NaN here: the
/// lane loops flag it apart (kReduceFlagsNan).
template <ReduceKind R, class A, class X>
inline A reduce_step(A lane, X x) {
  if constexpr (R == ReduceKind::kSum || R == ReduceKind::kMean || R == ReduceKind::kProd) {
    constexpr bool kAdd = R != ReduceKind::kProd;
    if constexpr (std::is_integral_v<A>) {
      using U = std::make_unsigned_t<A>;
      const U a = static_cast<U>(lane), b = static_cast<U>(x);
      return static_cast<A>(kAdd ? static_cast<U>(a + b) : static_cast<U>(a * b));
    } else {
      return kAdd ? lane + static_cast<A>(x) : lane * static_cast<A>(x);
    }
  } else if constexpr (R == ReduceKind::kMax || R == ReduceKind::kMin) {
    const A v = static_cast<A>(x);
    return reduce_prefers<R>(v, lane) ? v : lane;
  } else if constexpr (R == ReduceKind::kAny) {
    return lane || x;
  } else {
    return lane && x;
  }
}

/// Whether R's lanes keep a NaN flag beside them: float max/min, whose steps skip NaNs (a plain
/// compare-select and a flag vectorise far better than a NaN-aware select).
template <ReduceKind R, class A>
inline constexpr bool kReduceFlagsNan =
    std::is_floating_point_v<A> && (R == ReduceKind::kMax || R == ReduceKind::kMin);

/// Folds one element into an accumulator, one at a time: the lane step, and for float max/min
/// NaN propagation - a NaN replaces the accumulator, and nothing but a NaN replaces a NaN.
template <ReduceKind R, class A, class X>
inline A reduce_combine(A a, X x) {
  if constexpr (kReduceFlagsNan<R, A>) return (reduce_prefers<R>(A(x), a) || x != x) ? A(x) : a;
  else return reduce_step<R>(a, x);
}

/// What float max/min give once a lane has flagged a NaN.
template <class A>
constexpr A reduce_nan() {
  return std::numeric_limits<A>::quiet_NaN();
}

/// A reduction of exactly one element, as the accumulator: the element itself (see ReduceKind).
template <ReduceKind R, class A, class X>
constexpr A reduce_one(X x) {
  return static_cast<A>(x);
}

// ---- lanes: independent accumulators break the dependency chain, so row loops vectorise ----

/// Lanes per row. Element i of each whole block of kReduceLanes elements goes to lane i.
inline constexpr int kReduceLanes = 8;

/// Steps every whole block of x[0, n) into `lane` and returns where the blocks end. `nan[j]` is
/// set when lane j skipped a NaN (kReduceFlagsNan; untouched otherwise).
template <ReduceKind R, class A, class X>
inline int64_t reduce_blocks(const X* x, int64_t n, A (&lane)[kReduceLanes], int (&nan)[kReduceLanes]) {
  int64_t i = 0;
  for (; i + kReduceLanes <= n; i += kReduceLanes)
    for (int j = 0; j < kReduceLanes; ++j) {
      const A v = static_cast<A>(x[i + j]);
      lane[j] = reduce_step<R>(lane[j], v);
      if constexpr (kReduceFlagsNan<R, A>) nan[j] |= v != v;
    }
  return i;
}

/// Whether any lane flagged a NaN (then float max/min give reduce_nan()).
inline bool any_lane_nan(const int (&nan)[kReduceLanes]) {
  int any = 0;
  for (int j = 0; j < kReduceLanes; ++j) any |= nan[j];
  return any != 0;
}

/// The lanes folded into a, lane 0 first (floating sums fold pairwise instead: sum_in_lanes).
template <ReduceKind R, class A>
inline A fold_lanes(A a, const A (&lane)[kReduceLanes]) {
  for (int j = 0; j < kReduceLanes; ++j) a = reduce_combine<R>(a, lane[j]);
  return a;
}

/// x[0, n) reduced from the identity: its whole blocks in lanes, the lanes folded, then the
/// elements after the last block one at a time. Every kind's row but floating sums and any/all.
/// (Inlined into each row loop, as the kernels' loops were before they shared it.)
template <ReduceKind R, class A, class X>
[[gnu::always_inline]] inline A reduce_in_lanes(const X* x, int64_t n) {
  A lane[kReduceLanes];
  int nan[kReduceLanes] = {};
  for (A& l : lane) l = reduce_identity<R, A>();
  int64_t i = reduce_blocks<R>(x, n, lane, nan);
  if constexpr (kReduceFlagsNan<R, A>)
    if (any_lane_nan(nan)) return reduce_nan<A>();
  A a = fold_lanes<R>(reduce_identity<R, A>(), lane);
  for (; i < n; ++i) a = reduce_combine<R>(a, x[i]);
  return a;
}

// ---- the order floating sums add in ----

/// The float sum of x[0..n) in lanes, folded pairwise, then the elements after the last block:
/// the leaf of pairwise_sum and the fused kernel's sum of each part of a row in one tile.
template <class A, class X>
A sum_in_lanes(const X* x, int64_t n) {
  static_assert(kReduceLanes == 8, "the pairwise fold below names eight lanes");
  A lane[kReduceLanes] = {};
  int64_t i = 0;
  for (; i + kReduceLanes <= n; i += kReduceLanes)
    for (int j = 0; j < kReduceLanes; ++j) lane[j] = reduce_step<ReduceKind::kSum>(lane[j], x[i + j]);
  A s = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  for (; i < n; ++i) s = reduce_step<ReduceKind::kSum>(s, x[i]);
  return s;
}

/// Rows no longer than this are one leaf of pairwise_sum.
inline constexpr int64_t kPairwiseLeaf = 128;

/// Where pairwise_sum splits a row of n > kPairwiseLeaf elements: near the middle, at a whole
/// block of lanes.
inline int64_t pairwise_half(int64_t n) { return (n / 2) & ~int64_t{kReduceLanes - 1}; }

/// The float sum of a contiguous row (NumPy's pairwise scheme): halves added, down to leaves of
/// sum_in_lanes, so that the error grows with log(n) instead of n.
template <class A, class X>
A pairwise_sum(const X* x, int64_t n) {
  if (n <= kPairwiseLeaf) return sum_in_lanes<A>(x, n);
  const int64_t half = pairwise_half(n);
  return pairwise_sum<A>(x, half) + pairwise_sum<A>(x + half, n - half);
}

/// Rows per leaf of the pairwise sum over rows below.
inline constexpr int64_t kPairwiseRowLeaf = 32;

/// reduce_sum's order for floating sums over `rows` rows of `inner` columns (float32's leaf:
/// kernels/column_sums.h) (row r is global row
/// first + r): pairwise, halving down to leaves of at most kPairwiseRowLeaf rows, so that the
/// error grows with log(rows). leaf(first_row, row_count, dst) writes a leaf's column sums into
/// dst; the halves are then added, y += scratch. `scratch` holds one inner-sized buffer per level.
/// With inner == 0 (and null buffers) it only visits the leaves, left to right.
template <class A, class Leaf>
void pairwise_over_rows(int64_t first, int64_t rows, int64_t inner, A* y, A* scratch, Leaf&& leaf) {
  if (rows <= kPairwiseRowLeaf) return leaf(first, rows, y);
  const int64_t half = rows / 2;
  pairwise_over_rows(first, half, inner, y, scratch, leaf);
  pairwise_over_rows(first + half, rows - half, inner, scratch, scratch + inner, leaf);
  for (int64_t k = 0; k < inner; ++k) y[k] += scratch[k];
}


/// The scratch buffers pairwise_over_rows needs over `rows` rows: one per level of halving.
inline int64_t pairwise_levels(int64_t rows) {
  int64_t levels = 1;
  for (int64_t r = rows; r > kPairwiseRowLeaf; r = (r + 1) / 2) ++levels;
  return levels;
}

// ---- the result ----

/// The accumulator of `count` elements as the result's T: cast, or for a mean divided by the
/// count (NaN for an empty float mean, 0 for an empty integer one; integer means truncate).
template <ReduceKind R, class T, class A>
T finish_reduction(A a, int64_t count) {
  if constexpr (R == ReduceKind::kMean) {
    if constexpr (std::is_floating_point_v<T>) {
      if (count == 0) return std::numeric_limits<T>::quiet_NaN();
      return static_cast<T>(a / static_cast<double>(count));
    } else {
      if (count == 0) return T(0);
      return static_cast<T>(static_cast<int64_t>(a) / count);
    }
  } else {
    return static_cast<T>(a);
  }
}

}  // namespace tg::detail
