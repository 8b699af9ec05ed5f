// Convolution: conv2d, its gradient ops and conv2d_epilogue against a naive loop written here (in
// float64, window_reference.h), plus figures from TensorFlow's own tests where they pin a
// semantic down; and the convolution-and-pooling stacks of a CNN layer, traced and
// differentiated. Pooling's own cases are in pool_test.cpp.
#include <cmath>
#include <limits>

#include "core/thread_pool.h"
#include "ops/conv.h"
#include "kernels/conv_kernels.h"
#include "kernels/gemm.h"
#include "kernels/implicit_gemm.h"
#include "ops/op.h"
#include "support/graph_util.h"
#include "support/window_reference.h"
#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
using namespace testing::windows;

// Full-precision draws: distinct enough that max pooling has no ties.
using testing::seeded_values;

Tensor ref_conv(const Tensor& xt, const Tensor& ft, Dims s, bool same, Dims d = {1, 1}) {
  const ConvReference r(xt.shape().dims(), ft.shape().dims(), s, same, d);
  const std::vector<double> x = f64(xt), f = f64(ft);
  const Dims od = r.out_dims();
  std::vector<double> y(static_cast<std::size_t>(od[0] * od[1] * od[2] * od[3]), 0.0);
  r.each([&](int64_t i, int64_t j, int64_t o) { y[o] += x[i] * f[j]; });
  return as(y, od, xt.dtype());
}
Tensor ref_backprop_input(const Tensor& like, const Tensor& ft, const Tensor& dyt, Dims s, bool same, Dims d) {
  const ConvReference r(like.shape().dims(), ft.shape().dims(), s, same, d);
  const std::vector<double> f = f64(ft), dy = f64(dyt);
  std::vector<double> dx(static_cast<std::size_t>(like.num_elements()), 0.0);
  r.each([&](int64_t i, int64_t j, int64_t o) { dx[i] += f[j] * dy[o]; });
  return as(dx, like.shape().dims(), like.dtype());
}
Tensor ref_backprop_filter(const Tensor& xt, const Tensor& like, const Tensor& dyt, Dims s, bool same, Dims d) {
  const ConvReference r(xt.shape().dims(), like.shape().dims(), s, same, d);
  const std::vector<double> x = f64(xt), dy = f64(dyt);
  std::vector<double> df(static_cast<std::size_t>(like.num_elements()), 0.0);
  r.each([&](int64_t i, int64_t j, int64_t o) { df[j] += x[i] * dy[o]; });
  return as(df, like.shape().dims(), like.dtype());
}

detail::Conv2DAttrs conv_attrs(Dims s, bool same, Dims d) {
  return detail::Conv2DAttrs{s, d, static_cast<int64_t>(pad(same))};
}

// One geometry of a convolution: the cases of conv2d and of its two gradient ops.
struct ConvShape {
  std::string label;
  Dims x, f, strides;
  bool same;
  Dims dilations{1, 1};
  DType dtype = float32;
};

std::vector<testing::OpCase> conv_cases(const ConvShape& c, uint64_t seed) {
  const double tol = c.dtype == float32 ? 2e-5 : 1e-12;
  const Tensor x = seeded_values(c.x, c.dtype, seed), f = seeded_values(c.f, c.dtype, seed + 1);
  const ConvReference r(c.x, c.f, c.strides, c.same, c.dilations);
  const Tensor dy = seeded_values(r.out_dims(), c.dtype, seed + 2);
  const Dims s = c.strides, d = c.dilations;
  const bool same = c.same;
  const detail::Conv2DAttrs a = conv_attrs(s, same, d);
  return {
      {"conv2d", c.label, [=](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], s, pad(same), d); },
       {x, f}, ref_conv(x, f, s, same, d), tol},
      {"conv2d_backprop_input", c.label,
       [=](const std::vector<Tensor>& in) { return detail::conv2d_backprop_input(in[0], in[1], in[2], a); },
       {x, f, dy}, ref_backprop_input(x, f, dy, s, same, d), tol},
      {"conv2d_backprop_filter", c.label,
       [=](const std::vector<Tensor>& in) { return detail::conv2d_backprop_filter(in[0], in[1], in[2], a); },
       {x, f, dy}, ref_backprop_filter(x, f, dy, s, same, d), tol},
  };
}

// conv2d_epilogue as the optimiser makes it, recorded by hand: output `k` of the node. The
// expected values are the unfused ops' (conv2d has its own cases against a naive loop).
auto conv_epilogue(detail::Conv2DEpilogueAttrs attrs, std::size_t k) {
  return [attrs, k](const std::vector<Tensor>& in) { return detail::apply_op(detail::OpId::Conv2DEpilogue, in, attrs).at(k); };
}

TG_OP_CASES(conv2d_epilogue) {
  const Tensor x = constant(std::vector<float>{0.5f, -1.f, 2.f, 1.5f, -0.5f, 1.f, -2.f, 0.25f, 3.f}, {1, 3, 3, 1});
  const Tensor f = constant(std::vector<float>{1.f, -1.f, 0.5f, 2.f, -1.f, 0.25f, 1.f, -0.5f}, {2, 2, 1, 2});
  const Tensor b = constant({0.5f, -0.75f});
  const Tensor z = conv2d(x, f, {1, 1}, Padding::Valid) + b;  // (1, 2, 2, 2)
  const Tensor mask = constant(std::vector<bool>{true, false, false, true, true, true, false, false}, {1, 2, 2, 2});
  const Tensor dz = conv2d(x, f, {1, 1}, Padding::Valid);
  const int64_t valid = static_cast<int64_t>(Padding::Valid);
  return {
      {"conv2d_epilogue", "relu(conv2d(x, f) + b)", conv_epilogue({{1, 1}, {1, 1}, valid, true, true, true, false}, 0),
       {x, f, b}, relu(z)},
      {"conv2d_epilogue", "the mask conv2d(x, f) + b > 0", conv_epilogue({{1, 1}, {1, 1}, valid, true, true, true, false}, 1),
       {x, f, b}, greater(z, zeros_like(z))},
      {"conv2d_epilogue", "where(mask, conv2d(x, f), 0)", conv_epilogue({{1, 1}, {1, 1}, valid, false, false, false, true}, 0),
       {x, f, mask}, where(mask, dz, zeros_like(dz))},
      {"conv2d_epilogue", "max_pool2d(relu(conv2d(x, f) + b))",
       conv_epilogue({{1, 1}, {1, 1}, valid, true, false, true, false, true, {2, 2}, {1, 1}, valid}, 0), {x, f, b},
       max_pool2d(relu(z), {2, 2}, {1, 1}, Padding::Valid)},
  };
}

TG_OP_CASES(conv) {
  std::vector<testing::OpCase> cases;
  const std::vector<ConvShape> convs = {
      {"3x3 SAME stride 1, batch 1, 1 channel", {1, 5, 5, 1}, {3, 3, 1, 1}, {1, 1}, true},
      {"3x3 SAME stride 2, odd/even sizes, 3 -> 8 channels, batch 3", {3, 6, 7, 3}, {3, 3, 3, 8}, {2, 2}, true},
      {"2x3 VALID stride 2", {2, 7, 6, 3}, {2, 3, 3, 4}, {2, 2}, false},
      {"3x3 SAME dilation 2", {1, 7, 7, 2}, {3, 3, 2, 3}, {1, 1}, true, {2, 2}},
      {"2x2 VALID dilation (2, 1)", {2, 6, 5, 1}, {2, 2, 1, 2}, {1, 1}, false, {2, 1}},
      {"1x1 VALID stride 1 (the input is its own im2col), 8 channels", {3, 4, 5, 8}, {1, 1, 8, 3}, {1, 1}, false},
      {"1x1 SAME stride 2", {1, 5, 4, 3}, {1, 1, 3, 2}, {2, 2}, true},
      {"4x4 SAME stride (1, 2), even padding", {2, 5, 6, 2}, {4, 4, 2, 2}, {1, 2}, true},
      {"float64 3x2 SAME stride (2, 1)", {2, 5, 5, 3}, {3, 2, 3, 2}, {2, 1}, true, {1, 1}, float64},
      {"window as large as the input, VALID", {2, 3, 4, 1}, {3, 4, 1, 2}, {1, 1}, false},
      {"many image groups on the thread pool", {16, 16, 16, 8}, {3, 3, 8, 16}, {1, 1}, true},
      // Shapes for the direct float32 kernels' edges (implicit_gemm.h): channel counts that leave
      // a masked vector, more than one block of 64 output channels, a window of more entries
      // than one pass takes (512), pixel blocks cut by row and image ends.
      {"3x3 SAME, 20 -> 37 channels (masked channel tails)", {2, 9, 11, 20}, {3, 3, 20, 37}, {1, 1}, true},
      {"5x5 SAME, 3 -> 70 channels (two channel blocks)", {1, 12, 10, 3}, {5, 5, 3, 70}, {1, 1}, true},
      {"3x3 VALID, 64 -> 5 channels (576 window entries: two passes)", {1, 6, 7, 64}, {3, 3, 64, 5}, {1, 1}, false},
      {"3x3 SAME stride 2, 5 -> 130 channels", {2, 9, 8, 5}, {3, 3, 5, 130}, {2, 2}, true},
      {"3x3 VALID dilation 2, 4 -> 17 channels", {1, 11, 12, 4}, {3, 3, 4, 17}, {1, 1}, false, {2, 2}},
      // A single image whose filter is over twice the image: on Intel cores the direct kernels,
      // its 128 output channels split over the threads (conv_kernels.cpp's onednn_wins).
      {"3x3 SAME, one 10x10 image, 64 -> 128 channels", {1, 10, 10, 64}, {3, 3, 64, 128}, {1, 1}, true},
      // oneDNN's Winograd forward (onednn_conv.cpp's winograd_pays): 16 -> 32 channels, 86 images.
      {"3x3 SAME, 86 images of 14x14, 16 -> 32 channels (Winograd)", {86, 14, 14, 16}, {3, 3, 16, 32}, {1, 1}, true},
  };
  uint64_t seed = 10;
  for (const ConvShape& c : convs) {
    for (auto& oc : conv_cases(c, seed)) cases.push_back(std::move(oc));
    seed += 3;
  }
  auto conv_fn = [](Dims s, Padding p) {
    return [=](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], s, p); };
  };
  // TensorFlow's conv_ops_test figures: a 2x2 filter VALID, and a 1x1 filter.
  cases.push_back({"conv2d", "TF's 2x2 filter test", conv_fn({1, 1}, Padding::Valid),
                   {iota({1, 2, 3, 3}), iota({2, 2, 3, 3})},
                   f32({2271.f, 2367.f, 2463.f, 2901.f, 3033.f, 3165.f}, {1, 1, 2, 3}), 0.0});
  cases.push_back({"conv2d", "TF's 1x1 filter test", conv_fn({1, 1}, Padding::Valid),
                   {iota({1, 2, 3, 3}), iota({1, 1, 3, 3})},
                   f32({30.f, 36.f, 42.f, 66.f, 81.f, 96.f, 102.f, 126.f, 150.f, 138.f, 171.f, 204.f,
                             174.f, 216.f, 258.f, 210.f, 261.f, 312.f}, {1, 2, 3, 3}),
                   0.0});
  // SAME with an odd total padding puts the extra row/column after: a 2x2 window of ones over
  // [[1, 2], [3, 4]] pads one zero row below and one zero column right.
  cases.push_back({"conv2d", "SAME odd padding goes after", conv_fn({1, 1}, Padding::Same),
                   {iota({1, 2, 2, 1}), ones({2, 2, 1, 1})},
                   f32({10.f, 6.f, 7.f, 4.f}, {1, 2, 2, 1}), 0.0});
  // TF's arithmetic: a window larger than the input under VALID gives an empty output when
  // (in - window + stride) / stride truncates to 0.
  cases.push_back({"conv2d", "VALID window larger than the input: empty output", conv_fn({2, 2}, Padding::Valid),
                   {iota({1, 1, 1, 1}), ones({3, 3, 1, 2})}, testing::empty<float>({1, 0, 0, 2}, float32), 0.0});
  cases.push_back({"conv2d", "empty batch", conv_fn({1, 1}, Padding::Same),
                   {testing::empty<float>({0, 4, 4, 1}, float32), ones({3, 3, 1, 2})},
                   testing::empty<float>({0, 4, 4, 2}, float32), 0.0});
  return cases;
}

TEST(Conv, StridesAndDilationsTakeOneTwoOrFourEntries) {
  const Tensor x = seeded_values({2, 7, 7, 3}, float32, 1), f = seeded_values({3, 3, 3, 4}, float32, 2);
  const Tensor ref = conv2d(x, f, {2, 2}, Padding::Same);
  EXPECT_TENSOR_EQ(conv2d(x, f, {2}, Padding::Same), ref);
  EXPECT_TENSOR_EQ(conv2d(x, f, {1, 2, 2, 1}, Padding::Same), ref);
  EXPECT_TENSOR_EQ(conv2d(x, f, {1, 1}, Padding::Same, {2}), conv2d(x, f, {1, 1}, Padding::Same, {2, 2}));
  EXPECT_TENSOR_EQ(max_pool2d(x, {1, 3, 3, 1}, {1, 2, 2, 1}, Padding::Valid), max_pool2d(x, {3}, {2}, Padding::Valid));
}

// The CNN demo traces its step with a None batch: shapes stay static where they can.
TEST(Conv, TracesWithANoneBatchAndKeepsTheOtherDims) {
  const Tensor f1 = seeded_values({3, 3, 1, 4}, float32, 3), f2 = seeded_values({3, 3, 4, 8}, float32, 4);
  auto net = [&](const Tensor& x) {
    const Tensor h = max_pool2d(relu(conv2d(x, f1, {1, 1}, Padding::Same)), {2, 2}, {2, 2}, Padding::Valid);
    return avg_pool2d(conv2d(h, f2, {1, 1}, Padding::Same), {2, 2}, {2, 2}, Padding::Valid);
  };
  auto f = function(net, {.input_signature = std::vector<TensorSpec>{TensorSpec({None, 12, 12, 1}, float32)}});
  const auto cf = f.get_concrete_function(TensorSpec({None, 12, 12, 1}, float32));
  EXPECT_NE(cf.function_type().find("shape=(None, 3, 3, 8)"), std::string::npos) << cf.function_type();
  for (int64_t batch : {1, 3}) {
    const Tensor x = seeded_values({batch, 12, 12, 1}, float32, 5 + static_cast<uint64_t>(batch));
    EXPECT_TENSOR_EQ(f(x), net(x));
  }
}

// A training step's gradients traced with a None batch equal the eager ones.
TEST(Conv, GradientsTracedWithANoneBatchEqualEager) {
  const Tensor f1 = seeded_values({3, 3, 2, 4}, float32, 6);
  auto loss_grads = [&](const Tensor& x, const Tensor& f) {
    GradientTape tape;
    tape.watch(x);
    tape.watch(f);
    const Tensor h = conv2d(x, f, {2, 2}, Padding::Same);
    const Tensor loss = reduce_sum(square(avg_pool2d(max_pool2d(h, {2, 2}, {1, 1}, Padding::Same), {2, 2},
                                                     {2, 2}, Padding::Same)));
    return tape.gradient(loss, {x, f});
  };
  auto traced = function(loss_grads, {.input_signature = std::vector<TensorSpec>{
                                          TensorSpec({None, 9, 9, 2}, float32), TensorSpec({3, 3, 2, 4}, float32)}});
  const Tensor x = seeded_values({2, 9, 9, 2}, float32, 7);
  const std::vector<Tensor> eager = loss_grads(x, f1), graph = traced(x, f1);
  ASSERT_EQ(graph.size(), 2u);
  EXPECT_TENSOR_EQ(graph[0], eager[0]);
  EXPECT_TENSOR_EQ(graph[1], eager[1]);
}

// Second order: the filter gradient of <d loss / d x, v> (the gradient ops' own rules at work)
// against central differences of that inner product.
TEST(Conv, SecondOrderGradientsMatchFiniteDifferences) {
  const Tensor x = seeded_values({2, 5, 5, 2}, float64, 21), v = seeded_values({2, 5, 5, 2}, float64, 22);
  const Tensor w = seeded_values({3, 3, 2, 3}, float64, 23);
  auto inner = [&](const Tensor& wv) {
    GradientTape tape;
    tape.watch(x);
    const Tensor y = avg_pool2d(max_pool2d(conv2d(x, wv, {1, 1}, Padding::Same), {2, 2}, {1, 1}, Padding::Same),
                                {2, 2}, {2, 2}, Padding::Same);
    return reduce_sum(tape.gradient(reduce_sum(square(y)), x) * v);
  };
  GradientTape outer;
  outer.watch(w);
  const std::vector<double> tape_dw = outer.gradient(inner(w), w).to_vector<double>();
  std::vector<double> wv = w.to_vector<double>();
  const double eps = 1e-6;
  for (std::size_t j = 0; j < wv.size(); ++j) {
    const double keep = wv[j];
    wv[j] = keep + eps;
    const double up = inner(constant(wv, w.shape(), float64)).item<double>();
    wv[j] = keep - eps;
    const double down = inner(constant(wv, w.shape(), float64)).item<double>();
    wv[j] = keep;
    const double numeric = (up - down) / (2 * eps);
    EXPECT_NEAR(tape_dw[j], numeric, 1e-6 * (1 + std::abs(numeric))) << "element " << j;
  }
}

// The tape asks only for the gradients it needs: a layer fed with data gets no input gradient.
TEST(Conv, AFilterGradientAloneBuildsNoInputGradient) {
  auto f = function([](const Tensor& x, const Tensor& w) {
    GradientTape tape;
    tape.watch(w);
    return tape.gradient(reduce_sum(conv2d(x, w, {1, 1}, Padding::Same)), w);
  });
  const auto cf = f.get_concrete_function(TensorSpec({None, 6, 6, 2}, float32), TensorSpec({3, 3, 2, 4}, float32));
  bool filter = false, input = false;
  for (const auto& node : cf.graph().nodes()) {
    filter |= node.op == "conv2d_backprop_filter";
    input |= node.op == "conv2d_backprop_input";
  }
  EXPECT_TRUE(filter) << cf.graph().to_string();
  EXPECT_FALSE(input) << cf.graph().to_string();
}

// Large convolutions run on the pool: the same bits on every run at a given thread count, and
// within rounding of one thread's result.
TEST(Conv, ParallelResultsAreReproducible) {
  const Tensor x = seeded_values({32, 14, 14, 16}, float32, 8), f = seeded_values({3, 3, 16, 32}, float32, 9);
  const Tensor dy = seeded_values({32, 14, 14, 32}, float32, 10);
  const detail::Conv2DAttrs a{{1, 1}, {1, 1}, 1};
  auto run = [&] {
    return std::vector<Tensor>{conv2d(x, f, {1, 1}, Padding::Same), detail::conv2d_backprop_input(x, f, dy, a),
                               detail::conv2d_backprop_filter(x, f, dy, a)};
  };
  const int threads = detail::num_threads();
  const std::vector<Tensor> first = run(), second = run();
  for (std::size_t i = 0; i < first.size(); ++i) EXPECT_TENSOR_EQ(first[i], second[i]);
  detail::set_num_threads(1);
  const std::vector<Tensor> serial = run();
  detail::set_num_threads(threads);
  for (std::size_t i = 0; i < first.size(); ++i) EXPECT_TENSOR_NEAR(first[i], serial[i], 1e-5);
}

// Inference (no tape, so no relu mask): conv2d_epilogue's bias and relu are applied in the
// direct kernels' registers (implicit_gemm_avx512.cpp), and a dense layer's in its product's
// where the product runs there: the bits of the unfused ops, eagerly and traced, with masked
// channel tails (37 = 2 x 16 + 5) and a first layer of one channel (9 taps), on 1 and 2 threads.
TEST(Conv, InferenceBiasAndReluInTheKernelsRegistersKeepTheUnfusedBits) {
  auto net = [](const Tensor& x, const Tensor& f1, const Tensor& b1, const Tensor& w, const Tensor& b2) {
    const Tensor h = relu(conv2d(x, f1, {1, 1}, Padding::Same) + b1);  // (n, 13, 11, 37)
    return relu(matmul(reshape(h, {-1, 13 * 11 * 37}), w) + b2);
  };
  const Tensor x = seeded_values({5, 13, 11, 1}, float32, 61), f1 = seeded_values({3, 3, 1, 37}, float32, 62);
  const Tensor b1 = seeded_values({37}, float32, 63), w = seeded_values({13 * 11 * 37, 21}, float32, 64);
  const Tensor b2 = seeded_values({21}, float32, 65);
  const Tensor eager = net(x, f1, b1, w, b2);
  const int threads = detail::num_threads();
  for (const int t : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << t << " threads");
    detail::set_num_threads(t);
    auto optimised = function(net);
    auto plain = function(net, {.optimize = false});
    const Tensor got = optimised(x, f1, b1, w, b2);
    EXPECT_TRUE(testing::same_bits(got, plain(x, f1, b1, w, b2)));
    EXPECT_TRUE(testing::same_bits(got, eager));
    EXPECT_EQ(testing::count_op(optimised.get_concrete_function(x, f1, b1, w, b2).optimized_graph(), "conv2d_epilogue"), 1);
  }
  detail::set_num_threads(threads);
}

// A single image (inference at batch 1) runs the direct kernels over every thread: its product
// split by blocks of 64 output columns (200 = 3 x 64 + 8: a masked tail), or by bands of output
// rows where there are fewer blocks than threads (37 channels). Each output element is summed
// as on one thread: the same bits at 1 and 2 threads, for the forward with its bias and relu
// (eager, traced, traced and optimised: conv2d_epilogue) and for the stride-1 input gradient.
TEST(Conv, ASingleImageSplitOverThreadsKeepsOneThreadsBits) {
  if (!detail::implicit_gemm::available()) GTEST_SKIP() << "this CPU has no AVX-512F: the direct kernels do not run";
  struct OwnKernels {
    OwnKernels() { detail::set_conv_backend(detail::ConvBackend::own); }
    ~OwnKernels() { detail::set_conv_backend(detail::ConvBackend::automatic); }
  } own_kernels;
  auto layer = [](const Tensor& x, const Tensor& f, const Tensor& b) { return relu(conv2d(x, f, {1, 1}, Padding::Same) + b); };
  auto optimised = function(layer);
  auto plain = function(layer, {.optimize = false});
  const detail::Conv2DAttrs a{{1, 1}, {1, 1}, 1};
  const int threads = detail::num_threads();
  uint64_t seed = 70;
  for (const auto& [xd, fd] : std::vector<std::pair<Dims, Dims>>{{{1, 20, 20, 64}, {3, 3, 64, 200}},
                                                                 {{1, 30, 30, 16}, {3, 3, 16, 37}}}) {
    SCOPED_TRACE(::testing::Message() << "filter " << TensorShape(fd).to_string());
    const Tensor x = seeded_values(xd, float32, seed++), f = seeded_values(fd, float32, seed++);
    const Tensor b = seeded_values({fd[3]}, float32, seed++);
    const Tensor dy = seeded_values({1, xd[1], xd[2], fd[3]}, float32, seed++);
    auto run = [&] {
      return std::vector<Tensor>{layer(x, f, b), plain(x, f, b), optimised(x, f, b), detail::conv2d_backprop_input(x, f, dy, a)};
    };
    detail::set_num_threads(1);
    const std::vector<Tensor> serial = run();
    detail::set_num_threads(2);
    const std::vector<Tensor> split = run();
    detail::set_num_threads(threads);
    for (std::size_t i = 0; i < serial.size(); ++i) EXPECT_TRUE(testing::same_bits(serial[i], split[i])) << "result " << i;
    EXPECT_TRUE(testing::same_bits(serial[0], serial[2]));  // the epilogue in the kernel: the unfused bits
  }
}

// The direct float32 kernels and im2col + GEMM compute the same sums in different orders: they
// agree to rounding on every path (forward, both gradients) and geometry kind. A filter gradient
// sums thousands of products of magnitude ~1 into entries of magnitude ~30, so an entry that
// cancels to near 0 carries the absolute rounding of the whole sum: hence 1e-4.
TEST(Conv, DirectKernelsAgreeWithIm2colAndGemm) {
  if (!detail::implicit_gemm::available()) GTEST_SKIP() << "this CPU has no AVX-512F: only im2col + GEMM runs";
  // The own kernels even where oneDNN would take the geometry (conv_onednn_test.cpp tests that).
  struct OwnKernels {
    OwnKernels() { detail::set_conv_backend(detail::ConvBackend::own); }
    ~OwnKernels() { detail::set_conv_backend(detail::ConvBackend::automatic); }
  } own_kernels;
  struct Geometry {
    Dims x, f, strides;
    bool same;
    Dims dilations;
  };
  const std::vector<Geometry> geometries = {
      {{4, 28, 28, 1}, {3, 3, 1, 32}, {1, 1}, true, {1, 1}},     // the demo CNN's first layer
      {{4, 14, 14, 32}, {3, 3, 32, 64}, {1, 1}, true, {1, 1}},   // and its second
      {{3, 13, 9, 7}, {5, 3, 7, 19}, {2, 1}, false, {1, 1}},
      {{2, 10, 10, 6}, {3, 3, 6, 100}, {1, 1}, true, {2, 3}},
      {{2, 8, 9, 70}, {2, 2, 70, 3}, {2, 2}, true, {1, 1}},
  };
  uint64_t seed = 40;
  for (const Geometry& c : geometries) {
    const Tensor x = seeded_values(c.x, float32, seed++), f = seeded_values(c.f, float32, seed++);
    const Tensor dy = seeded_values(ConvReference(c.x, c.f, c.strides, c.same, c.dilations).out_dims(), float32, seed++);
    const detail::Conv2DAttrs a = conv_attrs(c.strides, c.same, c.dilations);
    auto run = [&] {
      return std::vector<Tensor>{conv2d(x, f, c.strides, pad(c.same), c.dilations),
                                 detail::conv2d_backprop_input(x, f, dy, a), detail::conv2d_backprop_filter(x, f, dy, a)};
    };
    const std::vector<Tensor> direct = run();
    const bool was = detail::set_own_avx512_kernels(false);
    const std::vector<Tensor> gemm = run();
    detail::set_own_avx512_kernels(was);
    for (std::size_t i = 0; i < direct.size(); ++i)
      EXPECT_TENSOR_NEAR(direct[i], gemm[i], 1e-4) << "result " << i << " of x " << TensorShape(c.x).to_string()
                                                   << ", filter " << TensorShape(c.f).to_string();
  }
}

}  // namespace
}  // namespace tg
