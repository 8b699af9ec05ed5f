// The float64 references of the windowed ops' tests (tests/ops/conv_test.cpp,
// grouped_conv_test.cpp, pool_test.cpp), written from the definitions and not shared with the
// library: a window at out * stride - pad_before, SAME padding split with the extra after.
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

// A convolution's index arithmetic from the definition (NHWC input, HWIO filter), grouped as TF
// groups it: groups = input channels / the filter's dim 2 (1 for a dense convolution); output
// channel o of group o / (out / groups) reads input channels of that group only.
struct ConvReference {
  int64_t n, c, cg, oc, groups, ocg;  // ocg after groups: it is computed from it
  Axis y, x;
  ConvReference(const Dims& xd, const Dims& fd, Dims s, bool same, Dims d)
      : n(xd[0]), c(xd[3]), cg(fd[2]), oc(fd[3]), groups(fd[2] > 0 ? xd[3] / fd[2] : 1), ocg(groups > 0 ? fd[3] / groups : fd[3]),
        y(xd[1], fd[0], s[0], d[0], same), x(xd[2], fd[1], s[1], d[1], same) {}
  int64_t xi(int64_t b, int64_t iy, int64_t ix, int64_t ch) const { return ((b * y.in + iy) * x.in + ix) * c + ch; }
  int64_t fi(int64_t ky, int64_t kx, int64_t ch, int64_t o) const { return ((ky * x.k + kx) * cg + ch) * oc + o; }
  int64_t yi(int64_t b, int64_t oy, int64_t ox, int64_t o) const { return ((b * y.out + oy) * x.out + ox) * oc + o; }
  // fn(input index, filter index, output index) for every product of the convolution.
  template <class F> void each(F fn) const {
    for (int64_t b = 0; b < n; ++b)
      for (int64_t oy = 0; oy < y.out; ++oy)
        for (int64_t ox = 0; ox < x.out; ++ox)
          for (int64_t ky = 0; ky < y.k; ++ky)
            for (int64_t kx = 0; kx < x.k; ++kx) {
              const int64_t iy = y.at(oy, ky), ix = x.at(ox, kx);
              if (iy < 0 || iy >= y.in || ix < 0 || ix >= x.in) continue;
              for (int64_t g = 0; g < groups; ++g)
                for (int64_t ch = 0; ch < cg; ++ch)
                  for (int64_t o = g * ocg; o < (g + 1) * ocg; ++o)
                    fn(xi(b, iy, ix, g * cg + ch), fi(ky, kx, ch, o), yi(b, oy, ox, o));
            }
  }
  Dims out_dims() const { return {n, y.out, x.out, oc}; }
};

}  // namespace tg::testing::windows
