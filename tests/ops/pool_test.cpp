// Pooling: max_pool2d, avg_pool2d, their gradient ops, max_pool2d_grad_grad and
// max_pool2d_grad_masked against a naive loop written here (in float64, window_reference.h), plus
// figures from TensorFlow's own tests where they pin a semantic down, and the tiled kernels
// against the general ones bit for bit.
#include <cmath>
#include <limits>

#include "core/thread_pool.h"
#include "ops/conv.h"
#include "kernels/gemm.h"
#include "ops/op.h"
#include "support/window_reference.h"
#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

using namespace testing::windows;

// Full-precision draws: distinct enough that max pooling has no ties.
using testing::seeded_values;

// Pooling: calls fn(output index, input indices of the window inside the input, in row order).
template <class F>
void each_window(const Dims& xd, Dims k, Dims s, bool same, F fn) {
  const Axis y(xd[1], k[0], s[0], 1, same), x(xd[2], k[1], s[1], 1, same);
  const int64_t c = xd[3];
  for (int64_t b = 0; b < xd[0]; ++b)
    for (int64_t oy = 0; oy < y.out; ++oy)
      for (int64_t ox = 0; ox < x.out; ++ox)
        for (int64_t ch = 0; ch < c; ++ch) {
          std::vector<int64_t> in;
          for (int64_t ky = 0; ky < k[0]; ++ky)
            for (int64_t kx = 0; kx < k[1]; ++kx) {
              const int64_t iy = y.at(oy, ky), ix = x.at(ox, kx);
              if (iy >= 0 && iy < y.in && ix >= 0 && ix < x.in) in.push_back(((b * y.in + iy) * x.in + ix) * c + ch);
            }
          fn(((b * y.out + oy) * x.out + ox) * c + ch, in);
        }
}
Dims pool_dims(const Dims& xd, Dims k, Dims s, bool same) {
  return {xd[0], Axis(xd[1], k[0], s[0], 1, same).out, Axis(xd[2], k[1], s[1], 1, same).out, xd[3]};
}
// The first maximum of a window (ties: the first in row order).
int64_t first_max(const std::vector<double>& x, const std::vector<int64_t>& in) {
  int64_t best = in[0];
  for (int64_t i : in)
    if (x[i] > x[best]) best = i;
  return best;
}
Tensor ref_max_pool(const Tensor& xt, Dims k, Dims s, bool same) {
  const std::vector<double> x = f64(xt);
  const Dims od = pool_dims(xt.shape().dims(), k, s, same);
  std::vector<double> y(static_cast<std::size_t>(od[0] * od[1] * od[2] * od[3]));
  each_window(xt.shape().dims(), k, s, same, [&](int64_t o, const std::vector<int64_t>& in) { y[o] = x[first_max(x, in)]; });
  return as(y, od, xt.dtype());
}
Tensor ref_avg_pool(const Tensor& xt, Dims k, Dims s, bool same) {
  const std::vector<double> x = f64(xt);
  const Dims od = pool_dims(xt.shape().dims(), k, s, same);
  std::vector<double> y(static_cast<std::size_t>(od[0] * od[1] * od[2] * od[3]));
  each_window(xt.shape().dims(), k, s, same, [&](int64_t o, const std::vector<int64_t>& in) {
    double sum = 0;
    for (int64_t i : in) sum += x[i];
    y[o] = sum / static_cast<double>(in.size());
  });
  return as(y, od, xt.dtype());
}
Tensor ref_max_pool_grad(const Tensor& xt, const Tensor& dyt, Dims k, Dims s, bool same) {
  const std::vector<double> x = f64(xt), dy = f64(dyt);
  std::vector<double> dx(x.size(), 0.0);
  each_window(xt.shape().dims(), k, s, same,
              [&](int64_t o, const std::vector<int64_t>& in) { dx[first_max(x, in)] += dy[o]; });
  return as(dx, xt.shape().dims(), xt.dtype());
}
Tensor ref_max_pool_grad_grad(const Tensor& xt, const Tensor& gt, Dims k, Dims s, bool same) {
  const std::vector<double> x = f64(xt), g = f64(gt);
  const Dims od = pool_dims(xt.shape().dims(), k, s, same);
  std::vector<double> y(static_cast<std::size_t>(od[0] * od[1] * od[2] * od[3]));
  each_window(xt.shape().dims(), k, s, same, [&](int64_t o, const std::vector<int64_t>& in) { y[o] = g[first_max(x, in)]; });
  return as(y, od, xt.dtype());
}
Tensor ref_avg_pool_grad(const Tensor& like, const Tensor& dyt, Dims k, Dims s, bool same) {
  const std::vector<double> dy = f64(dyt);
  std::vector<double> dx(static_cast<std::size_t>(like.num_elements()), 0.0);
  each_window(like.shape().dims(), k, s, same, [&](int64_t o, const std::vector<int64_t>& in) {
    for (int64_t i : in) dx[i] += dy[o] / static_cast<double>(in.size());
  });
  return as(dx, like.shape().dims(), like.dtype());
}

detail::Pool2DAttrs pool_attrs(Dims k, Dims s, bool same) {
  return detail::Pool2DAttrs{k, s, static_cast<int64_t>(pad(same))};
}

struct PoolShape {
  std::string label;
  Dims x, k, strides;
  bool same;
  DType dtype = float32;
};

std::vector<testing::OpCase> pool_cases(const PoolShape& c, uint64_t seed) {
  const double tol = c.dtype == float32 ? 1e-6 : 1e-13;
  const Tensor x = seeded_values(c.x, c.dtype, seed);
  const Dims k = c.k, s = c.strides;
  const bool same = c.same;
  const Tensor dy = seeded_values(pool_dims(c.x, k, s, same), c.dtype, seed + 1);
  const Tensor g = seeded_values(c.x, c.dtype, seed + 2);
  const detail::Pool2DAttrs a = pool_attrs(k, s, same);
  return {
      {"max_pool2d", c.label, [=](const std::vector<Tensor>& in) { return max_pool2d(in[0], k, s, pad(same)); },
       {x}, ref_max_pool(x, k, s, same), 0.0},
      {"avg_pool2d", c.label, [=](const std::vector<Tensor>& in) { return avg_pool2d(in[0], k, s, pad(same)); },
       {x}, ref_avg_pool(x, k, s, same), tol},
      {"max_pool2d_grad", c.label,
       [=](const std::vector<Tensor>& in) { return detail::max_pool2d_grad(in[0], in[1], a); }, {x, dy},
       ref_max_pool_grad(x, dy, k, s, same), tol},
      {"max_pool2d_grad_grad", c.label,
       [=](const std::vector<Tensor>& in) { return detail::max_pool2d_grad_grad(in[0], in[1], a); }, {x, g},
       ref_max_pool_grad_grad(x, g, k, s, same), 0.0},
      {"avg_pool2d_grad", c.label,
       [=](const std::vector<Tensor>& in) { return detail::avg_pool2d_grad(in[0], in[1], a); }, {x, dy},
       ref_avg_pool_grad(x, dy, k, s, same), tol},
  };
}

// max_pool2d_grad_masked as the optimiser makes it (where(mask, max_pool2d_grad(x, dy), 0)),
// recorded by hand; expected: the unfused ops'. Windows that tile the input, and overlapping
// ones (one input pixel the maximum of several windows, its gradient a sum).
TG_OP_CASES(max_pool2d_grad_masked) {
  const Tensor x = constant(std::vector<float>{1.f, 5.f, 2.f, 0.f, 3.f, -1.f, 4.f, 4.f, 0.5f, 2.f, 9.f, 1.f, 7.f, 7.f, -3.f, 6.f},
                            {1, 4, 4, 1});
  const Tensor mask = constant(std::vector<bool>{true, true, false, true, true, false, true, true, false, true, true, true,
                                                 true, false, true, true},
                               {1, 4, 4, 1});
  std::vector<testing::OpCase> cases;
  for (const auto& [label, attrs] : {std::pair{"2 x 2, stride 2", pool_attrs({2, 2}, {2, 2}, false)},
                                     std::pair{"2 x 2, stride 1, SAME", pool_attrs({2, 2}, {1, 1}, true)}}) {
    const Tensor dy = random_uniform(max_pool2d(x, attrs.ksize, attrs.strides, attrs.padding ? Padding::Same : Padding::Valid).shape(),
                                     -1, 1, 5);
    const Tensor dx = detail::max_pool2d_grad(x, dy, attrs);
    cases.push_back({"max_pool2d_grad_masked", label,
                     [a = attrs](const std::vector<Tensor>& in) {
                       return detail::apply_op1(detail::OpId::MaxPool2DGradMasked, in, detail::MaxPoolGradMaskedAttrs{a});
                     },
                     {x, dy, mask}, where(mask, dx, zeros_like(dx))});
  }
  // A mask that broadcasts (one image for two): the two ops run by their own kernels.
  const Tensor x2 = concat({x, x * 0.5f}, 0);
  const detail::Pool2DAttrs a = pool_attrs({2, 2}, {2, 2}, false);
  const Tensor dy2 = random_uniform({2, 2, 2, 1}, -1, 1, 6);
  const Tensor dx2 = detail::max_pool2d_grad(x2, dy2, a);
  cases.push_back({"max_pool2d_grad_masked", "a mask of one image for two",
                   [a](const std::vector<Tensor>& in) {
                     return detail::apply_op1(detail::OpId::MaxPool2DGradMasked, in, detail::MaxPoolGradMaskedAttrs{a});
                   },
                   {x2, dy2, mask}, where(mask, dx2, zeros_like(dx2))});
  // With the sums over all but the channels as a second output (a convolution layer's bias
  // gradient): dx and the sums, flattened into one result. 3 x 5 x 5 pixels of 4 channels, so
  // that the sums' leaves reach across images; float64 and a broadcasting mask run the ops.
  for (const DType dtype : {float32, float64}) {
    const Tensor x3 = cast(random_uniform({3, 5, 5, 4}, -1, 1, 7), dtype);
    const Tensor mask3 = random_uniform({3, 5, 5, 4}, -1, 1, 8) > 0.0f;
    const detail::Pool2DAttrs p = pool_attrs({2, 2}, {2, 2}, true);
    const Tensor dy3 = cast(random_uniform({3, 3, 3, 4}, -1, 1, 9), dtype);
    for (const Tensor& m : {mask3, mask3[0]}) {
      const Tensor r = where(m, detail::max_pool2d_grad(x3, dy3, p), zeros_like(x3));
      cases.push_back({"max_pool2d_grad_masked", m.shape().rank() == 4 ? "and the channel sums" : "and the channel sums, broadcasting",
                       [p](const std::vector<Tensor>& in) {
                         const std::vector<Tensor> out =
                             detail::apply_op(detail::OpId::MaxPool2DGradMasked, in, detail::MaxPoolGradMaskedAttrs{p, true});
                         return concat({reshape(out[0], {-1}), out[1]}, 0);
                       },
                       {x3, dy3, m}, concat({reshape(r, {-1}), reduce_sum(r, {0, 1, 2})}, 0)});
    }
  }
  return cases;
}

TG_OP_CASES(pool) {
  std::vector<testing::OpCase> cases;
  uint64_t seed = 10;
  const std::vector<PoolShape> pools = {
      {"2x2 SAME stride 2 on odd 5x5, 3 channels", {2, 5, 5, 3}, {2, 2}, {2, 2}, true},
      {"3x3 VALID stride 2, batch 3, 1 channel", {3, 7, 6, 1}, {3, 3}, {2, 2}, false},
      {"3x3 SAME stride 1 (overlapping windows, clipped at every border)", {1, 4, 5, 8}, {3, 3}, {1, 1}, true},
      {"2x3 VALID stride (1, 2)", {2, 4, 7, 2}, {2, 3}, {1, 2}, false},
      {"float64 3x3 SAME stride 2", {1, 6, 6, 3}, {3, 3}, {2, 2}, true, float64},
  };
  for (const PoolShape& p : pools) {
    for (auto& pc : pool_cases(p, seed)) cases.push_back(std::move(pc));
    seed += 3;
  }
  cases.push_back({"max_pool2d", "empty batch",
                   [](const std::vector<Tensor>& in) { return max_pool2d(in[0], {2, 2}, {2, 2}, Padding::Same); },
                   {testing::empty<float>({0, 5, 5, 3}, float32)}, testing::empty<float>({0, 3, 3, 3}, float32), 0.0});
  cases.push_back({"avg_pool2d", "no channels",
                   [](const std::vector<Tensor>& in) { return avg_pool2d(in[0], {3, 3}, {1, 1}, Padding::Valid); },
                   {testing::empty<float>({2, 4, 4, 0}, float32)}, testing::empty<float>({2, 2, 2, 0}, float32), 0.0});
  // TensorFlow's pooling_ops_test figures.
  cases.push_back({"max_pool2d", "TF's SAME 2x2 stride 2 test",
                   [](const std::vector<Tensor>& in) { return max_pool2d(in[0], {2, 2}, {2, 2}, Padding::Same); },
                   {iota({1, 2, 3, 3})}, f32({13.f, 14.f, 15.f, 16.f, 17.f, 18.f}, {1, 1, 2, 3}),
                   0.0});
  cases.push_back({"avg_pool2d", "TF's SAME 2x2 stride 2 test",
                   [](const std::vector<Tensor>& in) { return avg_pool2d(in[0], {2, 2}, {2, 2}, Padding::Same); },
                   {iota({1, 2, 4, 3})}, f32({8.5f, 9.5f, 10.5f, 14.5f, 15.5f, 16.5f}, {1, 1, 2, 3}),
                   0.0});
  // SAME averages count only the elements inside the input.
  cases.push_back({"avg_pool2d", "SAME border windows average fewer elements",
                   [](const std::vector<Tensor>& in) { return avg_pool2d(in[0], {2, 2}, {1, 1}, Padding::Same); },
                   {iota({1, 2, 2, 1})}, f32({2.5f, 3.f, 3.5f, 4.f}, {1, 2, 2, 1}), 0.0});
  // Ties: the gradient goes to the first maximum in row order, as TF's CPU kernel routes it.
  cases.push_back({"max_pool2d_grad", "ties go to the first maximum",
                   [](const std::vector<Tensor>& in) {
                     return detail::max_pool2d_grad(in[0], in[1], pool_attrs({2, 2}, {1, 1}, false));
                   },
                   {f32({5.f, 5.f, 1.f, 5.f, 5.f, 5.f}, {1, 2, 3, 1}),
                    f32({1.f, 10.f}, {1, 1, 2, 1})},
                   f32({1.f, 10.f, 0.f, 0.f, 0.f, 0.f}, {1, 2, 3, 1}), 0.0});
  return cases;
}

TEST(Pool, NaNInAWindowPropagatesAndTakesTheGradient) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = f32({1.f, nan, 3.f, nan}, {1, 2, 2, 1});
  const Tensor y = max_pool2d(x, {2, 2}, {2, 2}, Padding::Valid);
  EXPECT_TRUE(std::isnan(y.to_vector<float>()[0]));
  // The first NaN takes the gradient.
  const Tensor dx = detail::max_pool2d_grad(x, ones({1, 1, 1, 1}), detail::Pool2DAttrs{{2, 2}, {2, 2}, 0});
  EXPECT_EQ(dx.to_vector<float>(), (std::vector<float>{0.f, 1.f, 0.f, 0.f}));
  // -inf everywhere is a maximum like any other (padding never wins).
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(max_pool2d(f32({-inf, -inf}, {1, 1, 2, 1}), {3, 3}, {1, 1}, Padding::Same)
                .to_vector<float>(),
            (std::vector<float>{-inf, -inf}));
}

// Pools whose windows tile the input (ksize = strides, no padding) run their own kernel, per
// ISA: it must pick the element the general rule picks (the first NaN, else the first maximum)
// with ties, infinities and NaNs, rows and columns no window covers, SAME on even sizes, 3 x 3
// windows, float64, and on one thread and two.
TEST(Pool, TiledMaxPoolsPickTheElementsTheGeneralRulePicks) {
  struct Case { Dims shape; int64_t k; Padding padding; DType dtype; };
  const std::vector<Case> cases = {{{3, 28, 28, 32}, 2, Padding::Valid, float32}, {{2, 7, 9, 5}, 2, Padding::Valid, float32},
                                   {{2, 8, 6, 3}, 2, Padding::Same, float32},    {{2, 9, 11, 17}, 3, Padding::Valid, float32},
                                   {{2, 6, 6, 4}, 2, Padding::Valid, float64}};
  const int threads_before = config::num_threads();
  for (const Case& c : cases) {
    // Few distinct values (ties, -0 against +0 too), and some NaNs and infinities.
    std::vector<double> v(static_cast<std::size_t>(c.shape[0] * c.shape[1] * c.shape[2] * c.shape[3]));
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::size_t r = (i * 2654435761u) % 97;
      v[i] = r == 0   ? std::numeric_limits<double>::quiet_NaN()
             : r == 1 ? -std::numeric_limits<double>::infinity()
             : r == 2 ? -0.0
                      : static_cast<double>(r % 7);
    }
    const Tensor x = constant(v, TensorShape(c.shape), c.dtype);
    const int64_t n = c.shape[0], h = c.shape[1], w = c.shape[2], ch = c.shape[3], oh = h / c.k, ow = w / c.k;
    std::vector<double> want;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox)
          for (int64_t q = 0; q < ch; ++q) {
            double best = 0;
            bool first = true;
            for (int64_t iy = oy * c.k; iy < oy * c.k + c.k; ++iy)
              for (int64_t ix = ox * c.k; ix < ox * c.k + c.k; ++ix) {
                const double e = v[static_cast<std::size_t>(((b * h + iy) * w + ix) * ch + q)];
                if (first || e > best || (std::isnan(e) && !std::isnan(best))) best = e;
                first = false;
              }
            want.push_back(best);
          }
    const Tensor expected = constant(want, {n, oh, ow, ch}, c.dtype);
    for (const int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << TensorShape(c.shape).to_string() << " k " << c.k << " threads " << threads);
      config::set_num_threads(threads);
      EXPECT_TRUE(testing::same_bits(max_pool2d(x, {c.k}, {c.k}, c.padding), expected));
    }
  }
  config::set_num_threads(threads_before);
}

// The float32 gradient of those pools runs an AVX-512 kernel that writes every element of dx
// once: it must give the general kernel's bits (zeros and a scatter) with ties, NaNs and
// infinities in the input, -0 and NaN in the gradient, with and without a mask, on rows and
// columns no window covers, channel counts that are not a multiple of 16, and 3 x 3 and 1 x 2
// windows; with the channel sums of max_pool2d_grad_masked too; on one thread and two.
TEST(Pool, TiledMaxPoolGradientsGiveTheGeneralKernelsBits) {
  struct Case { Dims shape; Dims k; Padding padding; };
  const std::vector<Case> cases = {{{3, 28, 28, 32}, {2, 2}, Padding::Valid}, {{2, 7, 9, 5}, {2, 2}, Padding::Valid},
                                   {{2, 8, 6, 20}, {2, 2}, Padding::Same},    {{2, 9, 11, 17}, {3, 3}, Padding::Valid},
                                   {{40, 6, 8, 16}, {1, 2}, Padding::Valid}};
  const int threads_before = config::num_threads();
  for (const Case& c : cases) {
    const int64_t size = c.shape[0] * c.shape[1] * c.shape[2] * c.shape[3];
    std::vector<float> v(static_cast<std::size_t>(size));
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::size_t r = (i * 2654435761u) % 97;
      v[i] = r == 0 ? std::numeric_limits<float>::quiet_NaN() : r == 1 ? -std::numeric_limits<float>::infinity()
                                                                          : static_cast<float>(r % 7);
    }
    const Tensor x = constant(v, TensorShape(c.shape));
    const detail::Pool2DAttrs attrs{c.k, c.k, c.padding == Padding::Same ? 1 : 0};
    const TensorShape pooled = max_pool2d(x, c.k, c.k, c.padding).shape();
    std::vector<float> g = random_uniform(pooled.dims(), -1, 1, 3).to_vector<float>();
    g[0] = -0.0f, g[1] = std::numeric_limits<float>::quiet_NaN();
    const Tensor dy = constant(g, pooled);
    const Tensor mask = random_uniform(c.shape, -1, 1, 4) > 0.0f;
    auto run = [&] {
      std::vector<Tensor> out{detail::max_pool2d_grad(x, dy, attrs)};
      for (const Tensor& r : detail::apply_op(detail::OpId::MaxPool2DGradMasked, {x, dy, mask},
                                              detail::MaxPoolGradMaskedAttrs{attrs, true}))
        out.push_back(r);
      return out;
    };
    for (const int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << TensorShape(c.shape).to_string() << " threads " << threads);
      config::set_num_threads(threads);
      const std::vector<Tensor> got = run();
      const bool was = detail::set_own_avx512_kernels(false);
      const std::vector<Tensor> want = run();
      detail::set_own_avx512_kernels(was);
      for (std::size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(testing::same_bits(got[k], want[k])) << "output " << k;
    }
  }
  config::set_num_threads(threads_before);
}

}  // namespace
}  // namespace tg
