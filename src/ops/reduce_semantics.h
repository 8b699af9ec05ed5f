// What the reduce kernels and the reductions folded into fused kernels share, so that both give
// the same sums, the same mean of nothing and the same integer rounding. (Included by
// baseline-ISA files only: see the ISA note at the top of fused_micro.inc.)
#pragma once
#include <cstdint>
#include <limits>
#include <type_traits>

namespace tg::detail {

/// The float sum of x[0..n) in 8 independent lanes, combined pairwise: the loop vectorises, and
/// it is the leaf of reduce.cpp's pairwise summation and the fused kernel's per-tile sum.
template <class A, class X>
A sum_in_lanes(const X* x, int64_t n) {
  A lane[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) lane[j] += static_cast<A>(x[i + j]);
  A s = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  for (; i < n; ++i) s += static_cast<A>(x[i]);
  return s;
}

/// Rows per leaf of the pairwise sum over rows below.
inline constexpr int64_t kPairwiseRowLeaf = 32;

/// reduce_sum's order for floating sums over `rows` rows of `inner` columns (float32's leaf:
/// ops/column_sums.h) (row r is global row
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

/// Sum/max/min/prod: the accumulator cast to T. Mean: divided by `count` (NaN for an empty
/// float mean, 0 for an empty integer one; integer means truncate, like TF).
template <bool kMean, class T, class A>
T finish_reduction(A a, int64_t count) {
  if constexpr (kMean) {
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
