// Error of float32 math routines against a double-precision reference, in ULPs, over strided or
// exhaustive sweeps of the float32 bit patterns. Used by tests/ops/simd_math_test.cpp; header-only
// so that a one-off comparison program can sweep other libraries the same way.
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <thread>
#include <vector>

namespace tg::testing {

/// |got - ref| in units of the float32 spacing at ref (2^-149 below 2^-126). Infinity counts as
/// 2^128, the step after FLT_MAX, so an overflow to inf next to FLT_MAX costs about 1 ULP. A NaN
/// where none is due (or none where one is), or a zero of the wrong sign where the reference is
/// an exact zero, is an infinite error: those are wrong results, not inaccurate ones.
inline double ulp_error(float got, double ref) {
  if (std::isnan(ref) || std::isnan(got))
    return std::isnan(ref) && std::isnan(got) ? 0.0 : std::numeric_limits<double>::infinity();
  if (ref == 0.0 && got == 0.0)
    return std::signbit(ref) == std::signbit(got) ? 0.0 : std::numeric_limits<double>::infinity();
  const double g = std::isinf(got) ? std::copysign(0x1p128, got) : static_cast<double>(got);
  const double r = std::fabs(ref) >= 0x1p128 ? std::copysign(0x1p128, ref) : ref;
  int e = 0;
  std::frexp(r, &e);  // |r| in [2^(e-1), 2^e)
  const int binade = std::clamp(e - 1, -126, 127);
  return std::fabs(g - r) / std::ldexp(1.0, binade - 23);
}

/// The worst input of a sweep.
struct UlpResult {
  double max_ulp = 0.0;
  float worst_x = 0.0f;
  float worst_got = 0.0f;
  double worst_ref = 0.0;
  uint64_t count = 0;  // inputs checked
};

/// Sweeps the bit patterns 0, stride, 2 * stride, ... below 2^32 (stride 1: every float32,
/// NaNs and infinities included) on `threads` threads, checking every routine in fs against one
/// evaluation of the double-precision reference (the reference costs more than the routines).
/// Each f is an array function, y[i] = f(x[i]); the results are in the order of fs.
template <class VecFn, class Ref>
std::vector<UlpResult> ulp_sweep(const std::vector<VecFn>& fs, Ref ref, uint64_t stride,
                                 unsigned threads) {
  constexpr uint64_t kEnd = uint64_t{1} << 32;
  constexpr int kChunk = 4096;
  const uint64_t points = (kEnd + stride - 1) / stride;
  std::vector<std::vector<UlpResult>> part(threads, std::vector<UlpResult>(fs.size()));
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<float> x(kChunk), y(kChunk);
      std::vector<double> want(kChunk);
      const uint64_t lo = points * t / threads, hi = points * (t + 1) / threads;
      for (uint64_t p = lo; p < hi; p += kChunk) {
        const int n = static_cast<int>(std::min<uint64_t>(kChunk, hi - p));
        for (int i = 0; i < n; ++i) {
          const uint64_t bits = (p + static_cast<uint64_t>(i)) * stride;
          x[i] = std::bit_cast<float>(static_cast<uint32_t>(bits));
          want[i] = ref(static_cast<double>(x[i]));
        }
        for (std::size_t k = 0; k < fs.size(); ++k) {
          UlpResult& r = part[t][k];
          fs[k](x.data(), y.data(), static_cast<int64_t>(n));
          for (int i = 0; i < n; ++i) {
            const double err = ulp_error(y[i], want[i]);
            if (err > r.max_ulp) r = {err, x[i], y[i], want[i], r.count};
          }
          r.count += static_cast<uint64_t>(n);
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  std::vector<UlpResult> all(fs.size());
  for (std::size_t k = 0; k < fs.size(); ++k) {
    for (const auto& per_thread : part) {
      const UlpResult& r = per_thread[k];
      if (r.max_ulp >= all[k].max_ulp)
        all[k] = {r.max_ulp, r.worst_x, r.worst_got, r.worst_ref, all[k].count};
      all[k].count += r.count;
    }
  }
  return all;
}

}  // namespace tg::testing
