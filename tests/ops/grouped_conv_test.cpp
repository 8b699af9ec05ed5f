// Grouped conv2d (and its gradient ops), depthwise_conv2d and conv2d_transpose against naive
// float64 loops written here from TF's definitions (window_reference.h), on every path of the op
// harness; the depthwise kernels on their vector edges and the thread pool; TF's own figures
// where they pin a semantic down.
#include "core/thread_pool.h"
#include "kernels/gemm.h"
#include "ops/conv.h"
#include "ops/op.h"
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
  DType dtype = float32;
};

Tensor ref_forward(const Geometry& c, const Tensor& xt, const Tensor& ft) {
  const ConvReference r(c.x, c.f, c.strides, c.same, c.dilations);
  const std::vector<double> x = f64(xt), f = f64(ft);
  const Dims od = r.out_dims();
  std::vector<double> y(static_cast<std::size_t>(od[0] * od[1] * od[2] * od[3]), 0.0);
  r.each([&](int64_t i, int64_t j, int64_t o) { y[o] += x[i] * f[j]; });
  return as(y, od, c.dtype);
}
Tensor ref_input_grad(const Geometry& c, const Tensor& ft, const Tensor& dyt) {
  const ConvReference r(c.x, c.f, c.strides, c.same, c.dilations);
  const std::vector<double> f = f64(ft), dy = f64(dyt);
  std::vector<double> dx(static_cast<std::size_t>(TensorShape(c.x).num_elements()), 0.0);
  r.each([&](int64_t i, int64_t j, int64_t o) { dx[i] += f[j] * dy[o]; });
  return as(dx, c.x, c.dtype);
}
Tensor ref_filter_grad(const Geometry& c, const Tensor& xt, const Tensor& dyt) {
  const ConvReference r(c.x, c.f, c.strides, c.same, c.dilations);
  const std::vector<double> x = f64(xt), dy = f64(dyt);
  std::vector<double> df(static_cast<std::size_t>(TensorShape(c.f).num_elements()), 0.0);
  r.each([&](int64_t i, int64_t j, int64_t o) { df[j] += x[i] * dy[o]; });
  return as(df, c.f, c.dtype);
}

double tol_of(DType d) { return d == float32 ? 2e-5 : 1e-12; }

// A grouped conv2d and its two gradient ops.
std::vector<testing::OpCase> grouped_cases(const Geometry& c, uint64_t seed) {
  const Tensor x = seeded_values(c.x, c.dtype, seed), f = seeded_values(c.f, c.dtype, seed + 1);
  const Tensor dy = seeded_values(ConvReference(c.x, c.f, c.strides, c.same, c.dilations).out_dims(), c.dtype, seed + 2);
  const Dims s = c.strides, d = c.dilations;
  const bool same = c.same;
  const detail::Conv2DAttrs a{s, d, static_cast<int64_t>(pad(same))};
  const std::string label = "grouped: " + c.label;
  return {
      {"conv2d", label, [=](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], s, pad(same), d); }, {x, f},
       ref_forward(c, x, f), tol_of(c.dtype)},
      {"conv2d_backprop_input", label,
       [=](const std::vector<Tensor>& in) { return detail::conv2d_backprop_input(in[0], in[1], in[2], a); },
       {x, f, dy}, ref_input_grad(c, f, dy), tol_of(c.dtype)},
      {"conv2d_backprop_filter", label,
       [=](const std::vector<Tensor>& in) { return detail::conv2d_backprop_filter(in[0], in[1], in[2], a); },
       {x, f, dy}, ref_filter_grad(c, x, dy), tol_of(c.dtype)},
  };
}

// depthwise_conv2d from TF's definition: out[b, i, j, k * m + q] = sum over the window of
// input[b, .., .., k] * filter[di, dj, k, q].
Tensor ref_depthwise(const Geometry& c, const Tensor& xt, const Tensor& ft) {
  const int64_t channels = c.x[3], mult = c.f[3];
  const Axis ay(c.x[1], c.f[0], c.strides[0], c.dilations[0], c.same), ax(c.x[2], c.f[1], c.strides[1], c.dilations[1], c.same);
  const std::vector<double> x = f64(xt), f = f64(ft);
  const Dims od{c.x[0], ay.out, ax.out, channels * mult};
  std::vector<double> y(static_cast<std::size_t>(od[0] * od[1] * od[2] * od[3]), 0.0);
  for (int64_t b = 0; b < c.x[0]; ++b)
    for (int64_t oy = 0; oy < ay.out; ++oy)
      for (int64_t ox = 0; ox < ax.out; ++ox)
        for (int64_t k = 0; k < channels; ++k)
          for (int64_t q = 0; q < mult; ++q) {
            double sum = 0;
            for (int64_t di = 0; di < c.f[0]; ++di)
              for (int64_t dj = 0; dj < c.f[1]; ++dj) {
                const int64_t iy = ay.at(oy, di), ix = ax.at(ox, dj);
                if (iy < 0 || iy >= ay.in || ix < 0 || ix >= ax.in) continue;
                sum += x[static_cast<std::size_t>(((b * ay.in + iy) * ax.in + ix) * channels + k)] *
                       f[static_cast<std::size_t>(((di * c.f[1] + dj) * channels + k) * mult + q)];
              }
            y[static_cast<std::size_t>(((b * ay.out + oy) * ax.out + ox) * channels * mult + k * mult + q)] = sum;
          }
  return as(y, od, c.dtype);
}

TG_OP_CASES(grouped_conv) {
  std::vector<testing::OpCase> cases;
  const std::vector<Geometry> grouped = {
      {"groups 2, 4 -> 6 channels, 3x3 SAME, batch 2", {2, 6, 7, 4}, {3, 3, 2, 6}, {1, 1}, true},
      {"groups 3, 2x3 VALID stride 2, batch 1", {1, 7, 6, 6}, {2, 3, 2, 3}, {2, 2}, false},
      {"one channel per group, multiplier 2, dilation 2", {1, 7, 7, 3}, {3, 3, 1, 6}, {1, 1}, true, {2, 2}},
      {"one channel per group, 20 channels stride 2 (masked vector tail)", {2, 9, 8, 20}, {3, 3, 1, 20}, {2, 2}, true},
      {"float64 groups 2, 1x1 SAME stride (2, 1)", {2, 5, 5, 4}, {1, 1, 2, 4}, {2, 1}, true, {1, 1}, float64},
      {"float64 one channel per group, 3x2 VALID", {1, 6, 5, 3}, {3, 2, 1, 3}, {1, 1}, false, {1, 1}, float64},
  };
  uint64_t seed = 300;
  for (const Geometry& c : grouped) {
    for (auto& oc : grouped_cases(c, seed)) cases.push_back(std::move(oc));
    seed += 3;
  }

  const std::vector<Geometry> depthwise = {
      {"3x3 SAME, batch 1, 1 channel", {1, 5, 5, 1}, {3, 3, 1, 1}, {1, 1}, true},
      {"3x3 SAME stride 2, 16 channels, batch 2", {2, 9, 8, 16}, {3, 3, 16, 1}, {2, 2}, true},
      {"3x3 VALID dilation 2, multiplier 2", {1, 8, 7, 3}, {3, 3, 3, 2}, {1, 1}, false, {2, 2}},
      {"3x3 SAME, 37 channels (masked vector tail)", {1, 6, 5, 37}, {3, 3, 37, 1}, {1, 1}, true},
      {"5x5 SAME stride 2, 80 channels (a 64-channel block and a tail)", {1, 7, 6, 80}, {5, 5, 80, 1}, {2, 2}, true},
      {"4x2 SAME stride (1, 2), even padding", {2, 5, 6, 2}, {4, 2, 2, 1}, {1, 2}, true},
      {"window as large as the input, VALID", {2, 3, 4, 5}, {3, 4, 5, 1}, {1, 1}, false},
      {"rows on the thread pool, 32 channels", {4, 20, 20, 32}, {3, 3, 32, 1}, {1, 1}, true},
      // Stride 1 computes four output pixels at once where their windows lie inside the input.
      {"23 columns, 37 channels (blocks of four pixels, a channel tail)", {1, 5, 23, 37}, {3, 3, 37, 1}, {1, 1}, true},
      {"VALID dilation 2, 80 channels (a 64-channel block of four pixels)", {1, 9, 26, 80}, {3, 3, 80, 1}, {1, 1},
       false, {2, 2}},
      {"5x3 SAME, 11 columns, 16 channels, batch 2", {2, 6, 11, 16}, {5, 3, 16, 1}, {1, 1}, true},
      {"float64 multiplier 3, stride 2", {2, 6, 7, 2}, {3, 3, 2, 3}, {2, 2}, true, {1, 1}, float64},
  };
  for (const Geometry& c : depthwise) {
    const Tensor x = seeded_values(c.x, c.dtype, seed), f = seeded_values(c.f, c.dtype, seed + 1);
    seed += 2;
    const Dims s = c.strides, d = c.dilations;
    const bool same = c.same;
    cases.push_back({"depthwise_conv2d", c.label,
                     [=](const std::vector<Tensor>& in) { return depthwise_conv2d(in[0], in[1], s, pad(same), d); },
                     {x, f}, ref_depthwise(c, x, f), tol_of(c.dtype)});
  }
  // By hand: input channel 0 reads 1, 3, 5, 7 and channel 1 reads 2, 4, 6, 8 over the four taps;
  // output channel k * 2 + q takes filter[tap, k, q] = 4 * tap + 2 * k + q + 1.
  cases.push_back({"depthwise_conv2d", "2x2 input of 2 channels, multiplier 2, by hand (TF's channel order)",
                   [](const std::vector<Tensor>& in) { return depthwise_conv2d(in[0], in[1], {1, 1}, Padding::Valid); },
                   {iota({1, 2, 2, 2}), iota({2, 2, 2, 2})}, f32({152.f, 168.f, 220.f, 240.f}, {1, 1, 1, 4}), 0.0});
  cases.push_back({"depthwise_conv2d", "empty batch",
                   [](const std::vector<Tensor>& in) { return depthwise_conv2d(in[0], in[1], {1, 1}, Padding::Same); },
                   {testing::empty<float>({0, 4, 4, 3}, float32), ones({3, 3, 3, 2})},
                   testing::empty<float>({0, 4, 4, 6}, float32), 0.0});

  // conv2d_transpose is conv2d's input gradient: the reference adds each product of the
  // convolution over output_shape back onto the output.
  struct Transposed {
    std::string label;
    Dims out, f, strides;  // f: (kh, kw, out_channels, in_channels)
    bool same;
    Dims dilations{1, 1};
    DType dtype = float32;
  };
  const std::vector<Transposed> transposed = {
      {"3x3 SAME stride 2, 3 -> 2 channels, batch 1", {1, 8, 8, 2}, {3, 3, 2, 3}, {2, 2}, true},
      {"3x3 SAME stride 2, odd output 7x7", {1, 7, 7, 2}, {3, 3, 2, 3}, {2, 2}, true},
      {"2x2 VALID stride 2, batch 2", {2, 6, 8, 5}, {2, 2, 5, 2}, {2, 2}, false},
      {"3x3 VALID stride 1 (a full convolution)", {1, 6, 5, 1}, {3, 3, 1, 2}, {1, 1}, false},
      {"3x3 SAME dilation 2", {1, 6, 6, 3}, {3, 3, 3, 4}, {1, 1}, true, {2, 2}},
      {"float64 4x3 SAME stride (2, 3)", {2, 7, 9, 2}, {4, 3, 2, 3}, {2, 3}, true, {1, 1}, float64},
  };
  for (const Transposed& t : transposed) {
    // The convolution it transposes: input output_shape, filter HWIO = (kh, kw, out, in).
    const Geometry fwd{t.label, t.out, t.f, t.strides, t.same, t.dilations, t.dtype};
    const Dims in_dims = ConvReference(t.out, t.f, t.strides, t.same, t.dilations).out_dims();
    const Tensor x = seeded_values(in_dims, t.dtype, seed), f = seeded_values(t.f, t.dtype, seed + 1);
    seed += 2;
    const Dims out = t.out, s = t.strides, d = t.dilations;
    const bool same = t.same;
    cases.push_back({"conv2d_transpose", t.label,
                     [=](const std::vector<Tensor>& in) { return conv2d_transpose(in[0], in[1], out, s, pad(same), d); },
                     {x, f}, ref_input_grad(fwd, f, x), tol_of(t.dtype)});
  }
  // The output's batch may be None (the input's is taken), and an empty input gives zeros.
  cases.push_back({"conv2d_transpose", "batch None in output_shape",
                   [](const std::vector<Tensor>& in) {
                     return conv2d_transpose(in[0], in[1], {None, 4, 4, 1}, {2, 2}, Padding::Valid);
                   },
                   {iota({2, 2, 2, 1}), ones({2, 2, 1, 1})},
                   f32({1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4, 5, 5, 6, 6, 5, 5, 6, 6, 7, 7, 8, 8, 7, 7, 8, 8},
                       {2, 4, 4, 1}),
                   0.0});
  cases.push_back({"conv2d_transpose", "input of empty spatial dims: zeros",
                   [](const std::vector<Tensor>& in) {
                     return conv2d_transpose(in[0], in[1], {1, 2, 2, 2}, {1, 1}, Padding::Valid);
                   },
                   {testing::empty<float>({1, 0, 0, 1}, float32), ones({3, 3, 2, 1})}, zeros({1, 2, 2, 2}), 0.0});
  return cases;
}

// The depthwise kernels' two builds (AVX-512 and baseline) and the dense kernels per group agree.
TEST(GroupedConv, DepthwiseKernelsAgreeAcrossBuildsAndThreadCounts) {
  const Tensor x = seeded_values({3, 17, 15, 40}, float32, 1), f = seeded_values({3, 3, 40, 1}, float32, 2);
  const Tensor grouped_f = reshape(f, {3, 3, 1, 40});
  const Tensor dy = seeded_values({3, 9, 8, 40}, float32, 3);
  const detail::Conv2DAttrs a{{2, 2}, {1, 1}, 1};
  auto run = [&] {
    return std::vector<Tensor>{depthwise_conv2d(x, f, {2, 2}, Padding::Same),
                               detail::conv2d_backprop_input(x, grouped_f, dy, a),
                               detail::conv2d_backprop_filter(x, grouped_f, dy, a),
                               depthwise_conv2d(x, f, {1, 1}, Padding::Same)};
  };
  const std::vector<Tensor> first = run(), again = run();
  for (std::size_t i = 0; i < first.size(); ++i) EXPECT_TENSOR_EQ(first[i], again[i]);
  const int threads = detail::num_threads();
  detail::set_num_threads(1);
  const std::vector<Tensor> serial = run();
  detail::set_num_threads(threads);
  const bool was = detail::set_own_avx512_kernels(false);
  const std::vector<Tensor> baseline = run();
  detail::set_own_avx512_kernels(was);
  for (std::size_t i = 0; i < first.size(); ++i) {
    EXPECT_TENSOR_EQ(first[i], serial[i]) << "result " << i;  // the blocks depend on the shapes only
    EXPECT_TENSOR_NEAR(first[i], baseline[i], 1e-5) << "result " << i;
  }
}

// depthwise_conv2d is the grouped conv2d over the filter seen as (kh, kw, 1, channels * m).
TEST(GroupedConv, DepthwiseIsConv2dWithOneChannelPerGroup) {
  const Tensor x = seeded_values({2, 6, 6, 3}, float32, 4), f = seeded_values({3, 3, 3, 2}, float32, 5);
  EXPECT_TENSOR_NEAR(depthwise_conv2d(x, f, {1, 1}, Padding::Same),
                     conv2d(x, reshape(f, {3, 3, 1, 6}), {1, 1}, Padding::Same), 1e-6);
}

// The gradient of a depthwise layer traced with a None batch equals the eager one, and the
// graph keeps depthwise_conv2d as one node.
TEST(GroupedConv, DepthwiseGradientsTracedWithANoneBatchEqualEager) {
  auto grads = [](const Tensor& x, const Tensor& f) {
    GradientTape tape;
    tape.watch(x);
    tape.watch(f);
    const Tensor loss = reduce_sum(square(depthwise_conv2d(x, f, {2, 2}, Padding::Same)));
    return tape.gradient(loss, {x, f});
  };
  auto traced = function(grads, {.input_signature = std::vector<TensorSpec>{TensorSpec({None, 9, 9, 4}, float32),
                                                                            TensorSpec({3, 3, 4, 2}, float32)}});
  const Tensor x = seeded_values({2, 9, 9, 4}, float32, 6), f = seeded_values({3, 3, 4, 2}, float32, 7);
  const std::vector<Tensor> eager = grads(x, f), graph = traced(x, f);
  ASSERT_EQ(graph.size(), 2u);
  EXPECT_TENSOR_NEAR(graph[0], eager[0], 1e-6);
  EXPECT_TENSOR_NEAR(graph[1], eager[1], 1e-6);
}

// A grouped conv2d followed by a bias and relu: the optimiser's fused node gives the unfused ops'
// result (the grouped kernels take no epilogue: it runs after them).
TEST(GroupedConv, FusedBiasAndReluAfterAGroupedConvolution) {
  const Tensor f = seeded_values({3, 3, 1, 8}, float32, 8), b = seeded_values({8}, float32, 9);
  auto layer = [&](const Tensor& x) { return relu(conv2d(x, f, {1, 1}, Padding::Same) + b); };
  auto traced = function(layer);
  const Tensor x = seeded_values({2, 7, 7, 4}, float32, 10);
  EXPECT_TENSOR_NEAR(traced(x), layer(x), 1e-6);
}

}  // namespace
}  // namespace tg
