// The float64 references of the windowed ops' tests (tests/ops/conv_test.cpp, pool_test.cpp), written from
// the definitions and not shared with the library: a window at out * stride - pad_before, SAME
// padding split with the extra after.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "tracegraph/tracegraph.h"

namespace tg::testing::windows {

using Dims = std::vector<int64_t>;

inline Tensor iota(const Dims& dims, DType dtype = float32) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i + 1);
  return cast(constant(v, TensorShape(dims), float64), dtype);
}

inline Tensor f32(std::vector<float> v, const Dims& dims) { return constant(v, TensorShape(dims), float32); }

inline std::vector<double> f64(const Tensor& t) { return cast(t, float64).to_vector<double>(); }

// One spatial dim, written from the definition (not shared with the library).
struct Axis {
  int64_t in, k, stride, dilation, out, before;
  Axis(int64_t in_, int64_t k_, int64_t s, int64_t d, bool same) : in(in_), k(k_), stride(s), dilation(d) {
    const int64_t span = (k - 1) * d + 1;
    if (same) {
      out = (in + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (out - 1) * s + span - in);
      before = total / 2;
    } else {
      out = in >= span ? (in - span) / s + 1 : 0;
      before = 0;
    }
  }
  // The input index the window of output o reads at tap t (may be outside [0, in)).
  int64_t at(int64_t o, int64_t t) const { return o * stride - before + t * dilation; }
};

inline Tensor as(const std::vector<double>& v, const Dims& dims, DType dtype) {
  return cast(constant(v, TensorShape(dims), float64), dtype);
}

inline Padding pad(bool same) { return same ? Padding::Same : Padding::Valid; }

}  // namespace tg::testing::windows
