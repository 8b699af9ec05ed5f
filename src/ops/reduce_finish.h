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
