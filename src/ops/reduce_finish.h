// How a reduction's accumulator becomes its output element: shared by the reduce kernels and the
// reductions folded into fused kernels, so that both give the same mean of nothing and the same
// integer rounding.
#pragma once
#include <cstdint>
#include <limits>
#include <type_traits>

namespace tg::detail {

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
