// bfloat16 convolutions: conv2d and its two gradient ops (and conv2d_transpose, which is the
// input gradient) on oneDNN's AVX512_BF16 kernels, against float64 loops over the same bfloat16
// values (window_reference.h) rounded to bfloat16, on every path of the op harness; the same
// against the float32-and-round path (the CPU without the instructions); subnormals; gradients
// through a tape; the layers under mixed_bfloat16.
//
// The values are multiples of 1/8 in [-1, 1]: every product and every sum is exact in float32,
// so the float32 sum is the exact one whatever the order of summation, and a correctly rounded
// result (to nearest, ties to even) has one bit pattern - the checks are exact.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/conv_kernels.h"
#include "kernels/onednn_conv_bf16.h"
#include "ops/conv.h"
#include "support/op_case.h"
#include "support/test_util.h"
#include "support/window_reference.h"

namespace tg {
namespace {

using namespace testing::windows;
using testing::seeded_values;

struct Geometry {
  std::string label;
  Dims x, f, strides;
  bool same;
  Dims dilations{1, 1};
};

// Batches above 8 split into groups of images; odd sizes, strides, dilation, VALID remainders.
const std::vector<Geometry>& geometries() {
  static const std::vector<Geometry> g{
      {"3x3 SAME 16->32", {3, 9, 9, 16}, {3, 3, 16, 32}, {1, 1}, true},
      {"3x3 SAME 1->32, 9 images", {9, 8, 8, 1}, {3, 3, 1, 32}, {1, 1}, true},
      {"3x3 VALID stride 2 8->16", {2, 10, 7, 8}, {3, 3, 8, 16}, {2, 2}, false},
      {"5x3 SAME dilated 2 4->8", {2, 9, 8, 4}, {5, 3, 4, 8}, {1, 1}, true, {2, 2}},
      {"1x1 32->64 (sums of 32)", {4, 5, 5, 32}, {1, 1, 32, 64}, {1, 1}, false},
      {"3x3 SAME 64->64 (sums of 576)", {2, 6, 6, 64}, {3, 3, 64, 64}, {1, 1}, true},
  };
  return g;
}

Dims out_dims(const Geometry& c) { return ConvReference(c.x, c.f, c.strides, c.same, c.dilations).out_dims(); }

Tensor values(const Dims& d, uint64_t seed) { return seeded_values(d, bfloat16, seed, {0.125, 1.0}); }

// The float64 sums (exact here) rounded to float32 and then to bfloat16.
Tensor rounded(const std::vector<double>& v, const Dims& d) { return cast(as(v, d, float32), bfloat16); }

Tensor ref_forward(const Geometry& c, const Tensor& xt, const Tensor& ft) {
  const ConvReference r(c.x, c.f, c.strides, c.same, c.dilations);
  const std::vector<double> x = f64(xt), f = f64(ft);
  std::vector<double> y(static_cast<std::size_t>(TensorShape(r.out_dims()).num_elements()), 0.0);
  r.each([&](int64_t i, int64_t j, int64_t o) { y[o] += x[i] * f[j]; });
  return rounded(y, r.out_dims());
}
Tensor ref_input_grad(const Geometry& c, const Tensor& ft, const Tensor& dyt) {
  const ConvReference r(c.x, c.f, c.strides, c.same, c.dilations);
  const std::vector<double> f = f64(ft), dy = f64(dyt);
  std::vector<double> dx(static_cast<std::size_t>(TensorShape(c.x).num_elements()), 0.0);
  r.each([&](int64_t i, int64_t j, int64_t o) { dx[i] += f[j] * dy[o]; });
  return rounded(dx, c.x);
}
Tensor ref_filter_grad(const Geometry& c, const Tensor& xt, const Tensor& dyt) {
  const ConvReference r(c.x, c.f, c.strides, c.same, c.dilations);
  const std::vector<double> x = f64(xt), dy = f64(dyt);
  std::vector<double> df(static_cast<std::size_t>(TensorShape(c.f).num_elements()), 0.0);
  r.each([&](int64_t i, int64_t j, int64_t o) { df[j] += x[i] * dy[o]; });
  return rounded(df, c.f);
}

detail::Conv2DAttrs attrs_of(const Geometry& c) {
  return detail::Conv2DAttrs{c.strides, c.dilations, static_cast<int64_t>(pad(c.same))};
}

TG_OP_CASES(conv_bf16) {
  std::vector<testing::OpCase> cases;
  uint64_t seed = 700;
  for (const Geometry& c : geometries()) {
    const Tensor x = values(c.x, seed++), f = values(c.f, seed++), dy = values(out_dims(c), seed++);
    cases.push_back({"conv2d", "bfloat16 " + c.label,
                     [c](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], c.strides, pad(c.same), c.dilations); },
                     {x, f}, ref_forward(c, x, f)});
    cases.push_back({"conv2d_backprop_input", "bfloat16 " + c.label,
                     [c](const std::vector<Tensor>& in) {
                       return detail::conv2d_backprop_input(in[0], in[1], in[2], attrs_of(c));
                     },
                     {x, f, dy}, ref_input_grad(c, f, dy)});
    cases.push_back({"conv2d_backprop_filter", "bfloat16 " + c.label,
                     [c](const std::vector<Tensor>& in) {
                       return detail::conv2d_backprop_filter(in[0], in[1], in[2], attrs_of(c));
                     },
                     {x, f, dy}, ref_filter_grad(c, x, dy)});
  }
  // conv2d_transpose is the input gradient of the convolution over its result.
  const Geometry& t = geometries()[2];
  const Tensor f = values(t.f, 799), dy = values(out_dims(t), 800);
  cases.push_back({"conv2d_transpose", "bfloat16 " + t.label,
                   [t](const std::vector<Tensor>& in) {
                     return conv2d_transpose(in[0], in[1], t.x, t.strides, pad(t.same), t.dilations);
                   },
                   {dy, f}, ref_input_grad(t, f, dy)});
  return cases;
}

// The cases' ops directly, on the native kernels and with them turned off: the same bits.
TEST(ConvBFloat16, NativeAndFloat32PathsGiveTheCorrectlyRoundedBits) {
  uint64_t seed = 900;
  for (const Geometry& c : geometries()) {
    SCOPED_TRACE(c.label);
    const Tensor x = values(c.x, seed++), f = values(c.f, seed++), dy = values(out_dims(c), seed++);
    const Tensor want_y = ref_forward(c, x, f), want_dx = ref_input_grad(c, f, dy), want_df = ref_filter_grad(c, x, dy);
    for (bool native : {true, false}) {
      SCOPED_TRACE(native ? "native" : "float32 and rounded");
      const bool was = detail::onednn_bf16::set_enabled(native);
      const Tensor y = conv2d(x, f, c.strides, pad(c.same), c.dilations);
      const Tensor dx = detail::conv2d_backprop_input(x, f, dy, attrs_of(c));
      const Tensor df = detail::conv2d_backprop_filter(x, f, dy, attrs_of(c));
      detail::onednn_bf16::set_enabled(was);
      EXPECT_EQ(y.dtype(), bfloat16);
      EXPECT_TENSOR_EQ(y, want_y);
      EXPECT_TENSOR_EQ(dx, want_dx);
      EXPECT_TENSOR_EQ(df, want_df);
    }
  }
}

// The native kernels run on this machine's CPU when it has AVX512_BF16: the geometries above
// are ones oneDNN has bfloat16 kernels for, so they must not fall back silently.
TEST(ConvBFloat16, NativeKernelsTakeTheCommonGeometries) {
  if (!detail::cpu_has_avx512_bf16()) GTEST_SKIP() << "the CPU has no AVX512_BF16";
  // On by default only where they beat float32 (not on Intel without AMX): on for this test.
  struct Enabled {
    bool was = detail::onednn_bf16::set_enabled(true);
    ~Enabled() { detail::onednn_bf16::set_enabled(was); }
  } enabled;
  ASSERT_TRUE(detail::onednn_bf16::available());
  for (const Geometry& c : geometries()) {
    const ConvReference r(c.x, c.f, c.strides, c.same, c.dilations);
    detail::ConvGeom g{};
    g.n = c.x[0], g.h = c.x[1], g.w = c.x[2], g.c = c.x[3], g.kh = c.f[0], g.kw = c.f[1], g.oc = c.f[3];
    g.oh = r.y.out, g.ow = r.x.out, g.sh = c.strides[0], g.sw = c.strides[1], g.dh = c.dilations[0], g.dw = c.dilations[1];
    g.pt = r.y.before, g.pl = r.x.before;
    const std::vector<bfloat16_t> x(static_cast<std::size_t>(TensorShape(c.x).num_elements()), bfloat16_t(0.5f));
    const std::vector<bfloat16_t> f(static_cast<std::size_t>(TensorShape(c.f).num_elements()), bfloat16_t(0.25f));
    std::vector<bfloat16_t> y(static_cast<std::size_t>(TensorShape(r.out_dims()).num_elements()));
    std::vector<bfloat16_t> dx(x.size()), df(f.size());
    EXPECT_TRUE(detail::onednn_bf16::conv_forward(g, x.data(), f.data(), y.data())) << c.label;
    EXPECT_TRUE(detail::onednn_bf16::conv_backprop_input(g, f.data(), y.data(), dx.data())) << c.label;
    EXPECT_TRUE(detail::onednn_bf16::conv_backprop_filter(g, x.data(), y.data(), df.data())) << c.label;
  }
}

// Off-grid values: sums that float32 rounds, in whatever order; within a bfloat16 step of the
// float32 convolution of the same values, rounded.
TEST(ConvBFloat16, ArbitraryValuesStayWithinABFloat16StepOfFloat32) {
  const Geometry c{"3x3 SAME 32->64", {16, 14, 14, 32}, {3, 3, 32, 64}, {1, 1}, true};
  const Tensor x = seeded_values(c.x, bfloat16, 31), f = seeded_values(c.f, bfloat16, 32);
  const Tensor dy = seeded_values(out_dims(c), bfloat16, 33);
  const Tensor x32 = cast(x, float32), f32v = cast(f, float32), dy32 = cast(dy, float32);
  auto near = [](const Tensor& got, const Tensor& want32) {
    // Each element within 2^-7 of its magnitude, plus float32 summation error.
    const Tensor err = abs(cast(got, float32) - want32);
    const Tensor bound = abs(want32) * (1.0f / 128) + 1e-4f;
    EXPECT_TRUE(reduce_sum(cast(err > bound, int32)).item<int32_t>() == 0);
  };
  near(conv2d(x, f, c.strides, Padding::Same), conv2d(x32, f32v, c.strides, Padding::Same));
  near(detail::conv2d_backprop_input(x, f, dy, attrs_of(c)), detail::conv2d_backprop_input(x32, f32v, dy32, attrs_of(c)));
  near(detail::conv2d_backprop_filter(x, f, dy, attrs_of(c)),
       detail::conv2d_backprop_filter(x32, f32v, dy32, attrs_of(c)));
}

// Subnormal inputs count as zero and subnormal results are flushed to zero on both paths in the
// kernels' float environment (TensorFlow's, core/float_environment.h). The native kernels do so
// even where subnormals are kept (vdpbf16ps always does); the float32 path then keeps both.
TEST(ConvBFloat16, SubnormalsAreZeroOnEveryPath) {
  const float tiny = std::ldexp(1.0f, -130);  // a bfloat16 subnormal
  const Tensor x_sub = cast(fill({1, 1, 1, 1}, tiny), bfloat16), f_big = cast(fill({1, 1, 1, 1}, 1024.0f), bfloat16);
  const Tensor x_small = cast(fill({1, 1, 1, 1}, std::ldexp(1.0f, -120)), bfloat16);
  const Tensor f_small = cast(fill({1, 1, 1, 1}, std::ldexp(1.0f, -10)), bfloat16);
  for (const bool ieee : {false, true}) {
    for (const bool native : {true, false}) {
      SCOPED_TRACE(std::string(ieee ? "subnormals kept" : "TF's environment") + (native ? ", native" : ", float32"));
      std::optional<testing::IeeeKernelFloatEnvironment> keep;
      if (ieee) keep.emplace();
      const bool was = detail::onednn_bf16::set_enabled(native);
      const float from_subnormal = cast(conv2d(x_sub, f_big, {1, 1}, Padding::Valid), float32).to_vector<float>()[0];
      const float to_subnormal = cast(conv2d(x_small, f_small, {1, 1}, Padding::Valid), float32).to_vector<float>()[0];
      detail::onednn_bf16::set_enabled(was);
      if (!ieee || (native && detail::cpu_has_avx512_bf16())) {
        EXPECT_EQ(from_subnormal, 0.0f);
        EXPECT_EQ(to_subnormal, 0.0f);
      } else {
        EXPECT_EQ(from_subnormal, std::ldexp(1.0f, -120));
        EXPECT_EQ(to_subnormal, tiny);
      }
    }
  }
}

TEST(ConvBFloat16, MixedDtypesAreRefused) {
  const Tensor x = values({1, 4, 4, 2}, 1), f = values({3, 3, 2, 2}, 2);
  EXPECT_THROW_MSG(conv2d(x, cast(f, float32), {1, 1}, Padding::Same), InvalidArgumentError, "bfloat16", "float32");
  EXPECT_THROW_MSG(depthwise_conv2d(cast(x, float32), values({3, 3, 2, 1}, 3), {1, 1}, Padding::Same),
                   InvalidArgumentError, "one dtype");
}

// depthwise_conv2d and grouped conv2d have no bfloat16 kernel: float32, rounded once.
TEST(ConvBFloat16, DepthwiseAndGroupedRoundTheFloat32Result) {
  const Tensor x = values({2, 7, 7, 8}, 11), dw = values({3, 3, 8, 2}, 12), grouped = values({3, 3, 2, 8}, 13);
  EXPECT_TENSOR_EQ(depthwise_conv2d(x, dw, {1, 1}, Padding::Same),
                   cast(depthwise_conv2d(cast(x, float32), cast(dw, float32), {1, 1}, Padding::Same), bfloat16));
  EXPECT_TENSOR_EQ(conv2d(x, grouped, {2, 2}, Padding::Valid),
                   cast(conv2d(cast(x, float32), cast(grouped, float32), {2, 2}, Padding::Valid), bfloat16));
}

// A tape through bfloat16 convolutions: the gradient ops run on bfloat16 and give the exact
// sums' rounding; a float32 Variable cast to bfloat16 gets its gradient back in float32.
TEST(ConvBFloat16, GradientsThroughATape) {
  const Geometry& c = geometries()[0];
  const Tensor x = values(c.x, 41), dy = values(out_dims(c), 43);
  const Variable w(cast(values(c.f, 42), float32));
  GradientTape tape;
  tape.watch(x);
  const Tensor y = conv2d(x, cast(w.read_value(), bfloat16), c.strides, pad(c.same));
  const Tensor loss = reduce_sum(cast(y * dy, float32));
  const std::vector<Tensor> g = tape.gradient(loss, std::vector<Tensor>{x, w.read_value()});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].dtype(), bfloat16);
  EXPECT_EQ(g[1].dtype(), float32);
  // d(sum(y * dy))/dx is backprop_input(dy) when y * dy's gradient is dy exactly (it is: dy's
  // values times 1).
  EXPECT_TENSOR_EQ(g[0], ref_input_grad(c, cast(w.read_value(), bfloat16), dy));
  EXPECT_TENSOR_EQ(g[1], cast(ref_filter_grad(c, x, dy), float32));
}

}  // namespace
}  // namespace tg
