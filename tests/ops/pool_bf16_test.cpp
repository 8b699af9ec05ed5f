// bfloat16 max pooling: max_pool2d and max_pool2d_grad on their bfloat16 kernels (native over
// windows that tile the input, else float32 and rounded) against loops written here in float32
// over the same values, each result rounded to bfloat16 (the per-op rule), on every path of the
// op harness; bit for bit against the float32 ops on the widened values, rounded, with NaNs (a
// signalling one too) in windows, ties of equal values and of -0 and +0, overlapping windows whose
// gradient sums round, one thread and two; the gradient through a tape; relu's gradient taken in
// by the pooling gradient (max_pool2d_grad_masked) in optimised graphs, with the same bits.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/tensor_impl.h"
#include "graph/verify.h"
#include "ops/conv.h"
#include "ops/op.h"
#include "passes/passes.h"
#include "support/graph_util.h"
#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

using testing::count_op;
using testing::same_bits;
using Dims = std::vector<int64_t>;

struct PoolCase {
  std::string label;
  Dims x;
  int64_t k, s;
  bool same;
};

// Tiled windows (the native kernels: full and partial 16-channel vectors, leftover rows and
// columns, 9-element windows), padded and overlapping ones (float32 and rounded).
const std::vector<PoolCase>& pool_cases() {
  static const std::vector<PoolCase> c{
      {"2x2 VALID, 32 channels", {3, 8, 8, 32}, 2, 2, false},
      {"2x2 VALID, 7x9, 20 channels", {2, 7, 9, 20}, 2, 2, false},
      {"3x3 VALID stride 3, 9x7, 5 channels", {2, 9, 7, 5}, 3, 3, false},
      {"2x2 SAME, 9x9, 17 channels", {1, 9, 9, 17}, 2, 2, true},
      {"3x3 SAME stride 2, 7x6", {2, 7, 6, 5}, 3, 2, true},
      {"3x3 SAME stride 1 (overlapping windows)", {2, 5, 6, 3}, 3, 1, true},
  };
  return c;
}

float float_of_bits(uint16_t b) { return static_cast<float>(bfloat16_t::from_bits(b)); }

// A bfloat16 tensor of these bits (a cast from float32 would make a signalling NaN quiet).
Tensor from_bits(const std::vector<uint16_t>& bits, const Dims& d) {
  Tensor t = cast(constant(std::vector<float>(bits.size(), 0.0f), TensorShape(d)), bfloat16);
  bfloat16_t* p = detail::data_of<bfloat16_t>(t);
  for (std::size_t i = 0; i < bits.size(); ++i) p[i] = bfloat16_t::from_bits(bits[i]);
  return t;
}

// x: few distinct values (ties), zeros of both signs, and NaNs (quiet and signalling) in some
// windows. dy: values that need rounding once summed.
Tensor pool_input(const Dims& d, uint64_t seed) {
  const int64_t n = TensorShape(d).num_elements();
  std::vector<uint16_t> v(static_cast<std::size_t>(n));
  uint64_t r = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (int64_t i = 0; i < n; ++i) {
    r = r * 6364136223846793005ull + 1442695040888963407ull;
    const int pick = static_cast<int>((r >> 33) % 64);
    float f = static_cast<float>(pick % 7 - 3) * 0.625f;
    if (pick == 60) f = 0.0f;
    if (pick == 61) f = -0.0f;
    v[static_cast<std::size_t>(i)] = bfloat16_t(f).bits;
    if (pick == 62) v[static_cast<std::size_t>(i)] = 0x7fc0;  // quiet NaN
    if (pick == 63) v[static_cast<std::size_t>(i)] = 0xff81;  // signalling, negative
  }
  return from_bits(v, d);
}
Tensor grad_input(const Dims& d, uint64_t seed) {
  return cast(random_uniform(d, -3.0, 3.0, seed), bfloat16);  // float32 draws rounded to bfloat16
}

struct Geom {
  int64_t n, h, w, c, k, s, oh, ow, pt, pl;
};
Geom geom_of(const PoolCase& p) {
  Geom g{p.x[0], p.x[1], p.x[2], p.x[3], p.k, p.s, 0, 0, 0, 0};
  auto size = [&](int64_t in, int64_t& out, int64_t& before) {
    if (!p.same) {
      out = (in - p.k) / p.s + 1;
      before = 0;
      return;
    }
    out = (in + p.s - 1) / p.s;
    before = std::max<int64_t>((out - 1) * p.s + p.k - in, 0) / 2;
  };
  size(g.h, g.oh, g.pt);
  size(g.w, g.ow, g.pl);
  return g;
}
Dims pooled_dims(const PoolCase& p) {
  const Geom g = geom_of(p);
  return {g.n, g.oh, g.ow, g.c};
}

// Calls fn(output index, input index of the window's first maximum) for every output element,
// in the order (image, row, column, channel): strictly larger, or a NaN over a number.
template <class Fn>
void each_max(const Geom& g, const std::vector<float>& x, Fn&& fn) {
  int64_t o = 0;
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox)
        for (int64_t ch = 0; ch < g.c; ++ch, ++o) {
          int64_t at = -1;
          for (int64_t iy = oy * g.s - g.pt; iy < oy * g.s - g.pt + g.k; ++iy)
            for (int64_t ix = ox * g.s - g.pl; ix < ox * g.s - g.pl + g.k; ++ix) {
              if (iy < 0 || ix < 0 || iy >= g.h || ix >= g.w) continue;
              const int64_t i = ((n * g.h + iy) * g.w + ix) * g.c + ch;
              const float v = x[static_cast<std::size_t>(i)];
              if (at < 0) {
                at = i;
                continue;
              }
              const float best = x[static_cast<std::size_t>(at)];
              if (v > best || (std::isnan(v) && !std::isnan(best))) at = i;
            }
          fn(o, at);
        }
}

std::vector<float> widened(const Tensor& t) { return cast(t, float32).to_vector<float>(); }

// Each window's maximum, rounded (a NaN made quiet).
Tensor ref_max_pool(const PoolCase& p, const Tensor& x) {
  const std::vector<float> xv = widened(x);
  std::vector<float> y(static_cast<std::size_t>(TensorShape(pooled_dims(p)).num_elements()));
  each_max(geom_of(p), xv, [&](int64_t o, int64_t at) { y[static_cast<std::size_t>(o)] = xv[static_cast<std::size_t>(at)]; });
  return cast(constant(y, TensorShape(pooled_dims(p))), bfloat16);
}
// dy added in float32 at each window's first maximum (where mask, when given, is true), rounded once.
Tensor ref_max_pool_grad(const PoolCase& p, const Tensor& x, const Tensor& dy, const std::vector<bool>* mask = nullptr) {
  const std::vector<float> xv = widened(x), dyv = widened(dy);
  std::vector<float> dx(xv.size(), 0.0f);
  each_max(geom_of(p), xv, [&](int64_t o, int64_t at) {
    const std::size_t i = static_cast<std::size_t>(at);
    dx[i] += (!mask || (*mask)[i]) ? dyv[static_cast<std::size_t>(o)] : 0.0f;
  });
  return cast(constant(dx, TensorShape(p.x)), bfloat16);
}

detail::Pool2DAttrs attrs_of(const PoolCase& p) {
  return detail::Pool2DAttrs{{p.k, p.k}, {p.s, p.s}, static_cast<int64_t>(p.same ? Padding::Same : Padding::Valid)};
}
Padding pad_of(const PoolCase& p) { return p.same ? Padding::Same : Padding::Valid; }

TG_OP_CASES(pool_bf16) {
  std::vector<testing::OpCase> cases;
  uint64_t seed = 900;
  for (const PoolCase& p : pool_cases()) {
    const Tensor x = pool_input(p.x, seed++), dy = grad_input(pooled_dims(p), seed++);
    cases.push_back({"max_pool2d", "bfloat16 " + p.label,
                     [p](const std::vector<Tensor>& in) { return max_pool2d(in[0], {p.k}, {p.s}, pad_of(p)); },
                     {x}, ref_max_pool(p, x)});
    cases.push_back({"max_pool2d_grad", "bfloat16 " + p.label,
                     [p](const std::vector<Tensor>& in) { return detail::max_pool2d_grad(in[0], in[1], attrs_of(p)); },
                     {x, dy}, ref_max_pool_grad(p, x, dy)});
  }
  return cases;
}

// The op harness compares bfloat16 as float32 values: here every bit, against the loops and
// against the float32 ops on the widened values, rounded; with large batches split over two
// threads too.
TEST(PoolBFloat16, MaxPoolAndItsGradientHaveTheBitsOfFloat32Rounded) {
  const int threads_before = config::num_threads();
  for (const int threads : {1, 2})
    for (const int64_t batch : {int64_t{0}, int64_t{64}})
      for (PoolCase p : pool_cases()) {
        if (batch) p.x[0] = batch;
        config::set_num_threads(threads);
        SCOPED_TRACE(::testing::Message() << p.label << ", " << p.x[0] << " images, " << threads << " threads");
        const Tensor x = pool_input(p.x, 17), dy = grad_input(pooled_dims(p), 18);
        const Tensor y = max_pool2d(x, {p.k}, {p.s}, pad_of(p));
        EXPECT_TRUE(same_bits(y, ref_max_pool(p, x)));
        EXPECT_TRUE(same_bits(y, cast(max_pool2d(cast(x, float32), {p.k}, {p.s}, pad_of(p)), bfloat16)));
        const Tensor dx = detail::max_pool2d_grad(x, dy, attrs_of(p));
        EXPECT_TRUE(same_bits(dx, ref_max_pool_grad(p, x, dy)));
        EXPECT_TRUE(same_bits(dx, cast(detail::max_pool2d_grad(cast(x, float32), cast(dy, float32), attrs_of(p)), bfloat16)));
      }
  config::set_num_threads(threads_before);
}

// A NaN that wins comes out quiet, as the rounding of its widened value makes it; -0 and +0 tie
// (the first wins); a gradient of -0 comes out +0 (0 + -0), as the float32 op's.
TEST(PoolBFloat16, NaNsZerosAndTiesKeepTheFloat32RulesBits) {
  // Windows of two: (signalling NaN, 1), (-0, +0), (1, 1), (2, NaN).
  const Tensor x = from_bits({0x7f81, 0x3f80, 0x8000, 0x0000, 0x3f80, 0x3f80, 0x4000, 0x7fc0}, {1, 1, 8, 1});
  const Tensor y = max_pool2d(x, {1, 2}, {1, 2}, Padding::Valid);
  const std::vector<bfloat16_t> got = y.to_vector<bfloat16_t>();
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].bits, 0x7fc1);  // the signalling NaN wins over 1, made quiet
  EXPECT_EQ(got[1].bits, 0x8000);  // -0 then +0: the first
  EXPECT_EQ(got[2].bits, 0x3f80);
  EXPECT_EQ(got[3].bits, 0x7fc0);
  EXPECT_TRUE(std::isnan(float_of_bits(got[3].bits)));
  // dy: -0, 2.5, a signalling NaN, -1.
  const Tensor dy = from_bits({0x8000, 0x4020, 0xff81, 0xbf80}, {1, 1, 4, 1});
  const detail::Pool2DAttrs a{{1, 2}, {1, 2}, static_cast<int64_t>(Padding::Valid)};
  const Tensor dx = detail::max_pool2d_grad(x, dy, a);
  EXPECT_TRUE(same_bits(dx, cast(detail::max_pool2d_grad(cast(x, float32), cast(dy, float32), a), bfloat16)));
  const std::vector<bfloat16_t> d = dx.to_vector<bfloat16_t>();
  const std::vector<uint16_t> want = {0x0000,   // 0 + -0
                                      0x0000, 0x4020,  // 2.5 at -0, the first of the tie
                                      0x0000, 0xffc1,  // the signalling NaN routed to the first 1, made quiet
                                      0x0000, 0x0000, 0xbf80};
  ASSERT_EQ(d.size(), want.size());
  for (std::size_t i = 0; i < d.size(); ++i) EXPECT_EQ(d[i].bits, want[i]) << "element " << i;
}

// The gradient of a loss through max_pool2d on a tape: max_pool2d_grad's bits.
TEST(PoolBFloat16, TheGradientThroughATapeIsTheRoundedFloat32One) {
  for (const PoolCase& p : pool_cases()) {
    SCOPED_TRACE(p.label);
    const Tensor x = pool_input(p.x, 31), w = grad_input(pooled_dims(p), 32);
    GradientTape tape;
    tape.watch(x);
    const Tensor loss = reduce_sum(max_pool2d(x, {p.k}, {p.s}, pad_of(p)) * w);
    const Tensor dx = tape.gradient(loss, std::vector<Tensor>{x})[0];
    EXPECT_EQ(dx.dtype(), bfloat16);
    EXPECT_TRUE(same_bits(dx, ref_max_pool_grad(p, x, w)));  // d loss / d pool = 1 * w, exact
  }
}

// A bfloat16 convolution layer and its pool: in the optimised graph the pooling gradient takes in
// relu's gradient (where(mask, dx, zeros_like(dx))), with the bits of the plain graph and of eager.
TEST(PoolBFloat16, APoolingGradientTakesInReluGradientWithTheSameBits) {
  detail::set_verify_graphs(true);
  auto layer = [](const Tensor& x, const Tensor& f, const Tensor& b, int64_t stride) {
    GradientTape tape;
    tape.watch(f);
    tape.watch(b);
    const Tensor h = relu(conv2d(x, f, {1, 1}, Padding::Same) + b);
    const Tensor p = max_pool2d(h, {2, 2}, {stride, stride}, Padding::Same);
    return tape.gradient(reduce_sum(p * p), std::vector<Tensor>{f, b});
  };
  auto optimised = function(layer);
  auto plain = function(layer, {.optimize = false});
  const int threads_before = config::num_threads();
  for (const int threads : {1, 2})
    for (const int64_t stride : {int64_t{2}, int64_t{1}})
      for (const Dims& shape : {Dims{6, 10, 10, 3}, Dims{40, 9, 12, 3}}) {
        SCOPED_TRACE(::testing::Message() << "threads " << threads << " stride " << stride << " batch " << shape[0]);
        config::set_num_threads(threads);
        const Tensor x = cast(random_uniform(shape, -1, 1, 1), bfloat16);
        const Tensor f = cast(random_uniform({3, 3, 3, 16}, -0.5, 0.5, 2), bfloat16);
        const Tensor b = cast(random_uniform({16}, -0.5, 0.5, 3), bfloat16);
        const std::vector<Tensor> got = optimised(x, f, b, stride), want = plain(x, f, b, stride),
                                  eager = layer(x, f, b, stride);
        ASSERT_EQ(got.size(), 2u);
        for (std::size_t k = 0; k < got.size(); ++k) {
          EXPECT_EQ(got[k].dtype(), bfloat16);
          EXPECT_TRUE(same_bits(got[k], want[k])) << "output " << k;
          EXPECT_TRUE(same_bits(got[k], eager[k])) << "output " << k;
        }
        const Graph g = optimised.get_concrete_function(x, f, b, stride).optimized_graph();
        EXPECT_EQ(count_op(g, "max_pool2d_grad_masked"), 1) << g.to_string();
        EXPECT_EQ(count_op(g, "max_pool2d_grad"), 0) << g.to_string();
        EXPECT_EQ(count_op(g, "where"), 0) << g.to_string();
        EXPECT_EQ(count_op(g, "sum_to_like"), 0) << g.to_string();  // the bias gradient, taken in too
      }
  config::set_num_threads(threads_before);
}

// The masked gradient node on its own, against the loop: relu's mask applied to each routed dy.
TEST(PoolBFloat16, TheMaskedGradientKernelMasksEachRoutedValue) {
  for (const PoolCase& p : pool_cases()) {
    SCOPED_TRACE(p.label);
    const Tensor x = pool_input(p.x, 41), dy = grad_input(pooled_dims(p), 42);
    const Tensor m = greater(random_uniform(p.x, -1, 1, 43), constant(0.0f));
    const std::vector<bool> mv = m.to_vector<bool>();
    const Tensor got = detail::run_op_eager(detail::op_def(detail::OpId::MaxPool2DGradMasked), {x, dy, m},
                                            detail::MaxPoolGradMaskedAttrs{attrs_of(p), false})
                           .at(0);
    EXPECT_TRUE(same_bits(got, ref_max_pool_grad(p, x, dy, &mv)));
  }
}

// With channel sums (a convolution layer's bias gradient): dx as without them, and the sums of
// dx over every dim but the channels with the bits of the float32 rule (reduce_sum of the widened
// dx, rounded): windows that tile the input (summed per image as written) and overlapping ones
// (summed after), NaNs routed into some sums, images enough that leaves straddle two, one thread
// and two.
TEST(PoolBFloat16, TheMaskedGradientsChannelSumsHaveTheBitsOfTheFloat32Rule) {
  const int threads_before = config::num_threads();
  for (const int threads : {1, 2})
    for (PoolCase p : pool_cases()) {
      config::set_num_threads(threads);
      p.x[0] = 37;
      SCOPED_TRACE(::testing::Message() << p.label << ", " << threads << " threads");
      const Tensor x = pool_input(p.x, 51);
      const Tensor m = greater(random_uniform(p.x, -1, 1, 53), constant(-0.5f));
      const std::vector<bool> mv = m.to_vector<bool>();
      // dy: values whose sums round; then -0, ties and NaNs (a signalling one) routed too.
      for (const Tensor& dy : {grad_input(pooled_dims(p), 52), pool_input(pooled_dims(p), 54)}) {
        const std::vector<Tensor> got = detail::run_op_eager(detail::op_def(detail::OpId::MaxPool2DGradMasked),
                                                             {x, dy, m}, detail::MaxPoolGradMaskedAttrs{attrs_of(p), true});
        ASSERT_EQ(got.size(), 2u);
        const Tensor dx = ref_max_pool_grad(p, x, dy, &mv);
        EXPECT_TRUE(same_bits(got[0], dx));
        EXPECT_EQ(got[1].dtype(), bfloat16);
        // Every bit, but which of two different NaNs a sum of both keeps (their order in an add
        // is the compiler's, in both rules): NaN there.
        const std::vector<bfloat16_t> sums = got[1].to_vector<bfloat16_t>(),
                                      want = cast(reduce_sum(cast(dx, float32), {0, 1, 2}), bfloat16).to_vector<bfloat16_t>();
        ASSERT_EQ(sums.size(), want.size());
        for (std::size_t k = 0; k < sums.size(); ++k) {
          const float s = static_cast<float>(sums[k]), w = static_cast<float>(want[k]);
          if (std::isnan(w)) EXPECT_TRUE(std::isnan(s)) << "channel " << k;
          else EXPECT_EQ(sums[k].bits, want[k].bits) << "channel " << k;
        }
      }
    }
  config::set_num_threads(threads_before);
}

}  // namespace
}  // namespace tg
