// conv2d and pooling: every validation throws InvalidArgumentError naming what was expected, what
// was received and what to do, eagerly and while tracing; none reaches a kernel.
#include <limits>

#include "ops/conv.h"
#include "ops/op.h"
#include "support/test_util.h"

namespace tg {
namespace {

Tensor x4_() { return zeros({2, 8, 8, 3}); }
Tensor f4_() { return zeros({3, 3, 3, 4}); }

TEST(ConvErrors, RanksMustBeFour) {
  EXPECT_THROW_MSG(conv2d(zeros({8, 8, 3}), f4_(), {1, 1}, Padding::Same), InvalidArgumentError, "[conv2d]",
                   "expected input of rank 4", "NHWC", "got rank 3", "(8, 8, 3)", "tg::expand_dims(x, 0)");
  EXPECT_THROW_MSG(conv2d(x4_(), zeros({3, 3, 3}), {1, 1}, Padding::Same), InvalidArgumentError, "[conv2d]",
                   "expected filter of rank 4", "HWIO", "got rank 3");
  EXPECT_THROW_MSG(max_pool2d(zeros({8, 8}), {2, 2}, {2, 2}, Padding::Valid), InvalidArgumentError,
                   "[max_pool2d]", "rank 4", "got rank 2");
  EXPECT_THROW_MSG(avg_pool2d(zeros({1, 8, 8, 1, 1}), {2, 2}, {2, 2}, Padding::Valid), InvalidArgumentError,
                   "[avg_pool2d]", "rank 4", "got rank 5");
}

TEST(ConvErrors, ChannelsMustMatch) {
  EXPECT_THROW_MSG(conv2d(zeros({2, 8, 8, 2}), f4_(), {1, 1}, Padding::Same), InvalidArgumentError, "[conv2d]",
                   "the input has 2 channels", "the filter expects 3", "in_channels");
}

// Groups as TF reads them: the input's channels a multiple of the filter's in_channels, the
// out_channels a multiple of the groups.
TEST(ConvErrors, GroupsMustDivideTheChannels) {
  EXPECT_THROW_MSG(conv2d(zeros({1, 5, 5, 6}), zeros({3, 3, 4, 4}), {1, 1}, Padding::Same), InvalidArgumentError,
                   "[conv2d]", "the input has 6 channels", "the filter expects 4", "multiple of it",
                   "grouped convolution");
  EXPECT_THROW_MSG(conv2d(zeros({1, 5, 5, 6}), zeros({3, 3, 2, 4}), {1, 1}, Padding::Same), InvalidArgumentError,
                   "[conv2d]", "4 out_channels", "do not split into the 3 groups", "multiple of 3");
  EXPECT_THROW_MSG(detail::conv2d_backprop_filter(zeros({1, 5, 5, 6}), zeros({3, 3, 2, 4}), zeros({1, 5, 5, 4}),
                                                  detail::Conv2DAttrs{{1, 1}, {1, 1}, 1}),
                   InvalidArgumentError, "[conv2d_backprop_filter]", "do not split into the 3 groups");
  // While tracing with None channels the check waits for the run.
  auto traced = function([](const Tensor& x) { return conv2d(x, zeros({3, 3, 4, 4}), {1, 1}, Padding::Same); },
                         {.input_signature = std::vector<TensorSpec>{TensorSpec({None, 5, 5, None}, float32)}});
  EXPECT_THROW_MSG(traced(zeros({1, 5, 5, 6})), InvalidArgumentError, "[conv2d]", "the input has 6 channels");
}

TEST(ConvErrors, DepthwiseFilterMustMatchTheInputChannels) {
  EXPECT_THROW_MSG(depthwise_conv2d(zeros({1, 5, 5, 3}), zeros({3, 3, 4, 1}), {1, 1}, Padding::Same),
                   InvalidArgumentError, "[depthwise_conv2d]", "the input has 3 channels", "has 4 in dim 2",
                   "must be equal");
  EXPECT_THROW_MSG(depthwise_conv2d(zeros({1, 5, 5, 3}), zeros({3, 3, 3}), {1, 1}, Padding::Same),
                   InvalidArgumentError, "[depthwise_conv2d]", "expected filter of rank 4", "channel_multiplier");
  EXPECT_THROW_MSG(depthwise_conv2d(zeros({1, 5, 5, 3}), zeros({3, 3, 3, 1}), {2, 2}, Padding::Same, {2, 2}),
                   InvalidArgumentError, "[depthwise_conv2d]", "a stride > 1 together with a dilation > 1");
  EXPECT_THROW_MSG(depthwise_conv2d(zeros({1, 5, 5, 3}), zeros({3, 3, 3, 1}, float64), {1, 1}, Padding::Same),
                   InvalidArgumentError, "[depthwise_conv2d]", "of one dtype");
  auto traced = function([](const Tensor& x) { return depthwise_conv2d(x, zeros({3, 3, 4, 2}), {1, 1}, Padding::Same); },
                         {.input_signature = std::vector<TensorSpec>{TensorSpec({None, 5, 5, None}, float32)}});
  EXPECT_THROW_MSG(traced(zeros({1, 5, 5, 2})), InvalidArgumentError, "[depthwise_conv2d]", "the input has 2 channels");
}

// TF's checks of conv2d_transpose's output_shape.
TEST(ConvErrors, Conv2dTransposeOutputShapeMustFit) {
  const Tensor x = zeros({1, 4, 4, 3}), f = zeros({3, 3, 2, 3});
  EXPECT_THROW_MSG(conv2d_transpose(x, f, {1, 8, 8}, {2, 2}, Padding::Same), InvalidArgumentError,
                   "[conv2d_transpose]", "output_shape [1, 8, 8] has 3 entries", "expected 4");
  EXPECT_THROW_MSG(conv2d_transpose(x, f, {1, 8, 8, 5}, {2, 2}, Padding::Same), InvalidArgumentError,
                   "[conv2d_transpose]", "has 5 channels", "makes 2", "out_channels");
  EXPECT_THROW_MSG(conv2d_transpose(x, f, {2, 8, 8, 2}, {2, 2}, Padding::Same), InvalidArgumentError,
                   "[conv2d_transpose]", "has batch 2", "has batch 1");
  EXPECT_THROW_MSG(conv2d_transpose(x, f, {1, 10, 8, 2}, {2, 2}, Padding::Same), InvalidArgumentError,
                   "[conv2d_transpose]", "does not fit output_shape [1, 10, 8, 2]", "height 5, not 4");
  EXPECT_THROW_MSG(conv2d_transpose(zeros({1, 4, 4, 2}), f, {1, 8, 8, 2}, {2, 2}, Padding::Same),
                   InvalidArgumentError, "[conv2d_transpose]", "the input has 2 channels", "takes 3");
  EXPECT_THROW_MSG(conv2d_transpose(x, f, {1, -8, 8, 2}, {2, 2}, Padding::Same), InvalidArgumentError,
                   "[conv2d_transpose]", "size -8 in dim 1");
  EXPECT_THROW_MSG(conv2d_transpose(x, zeros({3, 3, 2, 3}, float64), {1, 8, 8, 2}, {2, 2}, Padding::Same),
                   InvalidArgumentError, "[conv2d_transpose]", "of one dtype");
  // A filter whose out_channels tracing does not know is checked when the function runs.
  auto traced = function([](const Tensor& in, const Tensor& w) {
    return conv2d_transpose(in, w, {1, 8, 8, 2}, {2, 2}, Padding::Same);
  }, {.input_signature = std::vector<TensorSpec>{TensorSpec({1, 4, 4, 3}, float32), TensorSpec({3, 3, None, 3}, float32)}});
  EXPECT_EQ(traced(x, ones({3, 3, 2, 3})).shape(), (TensorShape{1, 8, 8, 2}));
  EXPECT_THROW(traced(x, ones({3, 3, 1, 3})), InvalidArgumentError);
  // Both 7 and 8 map onto 4 at stride 2 SAME: either is accepted.
  EXPECT_EQ(conv2d_transpose(x, f, {1, 7, 8, 2}, {2, 2}, Padding::Same).shape(), (TensorShape{1, 7, 8, 2}));
}

TEST(ConvErrors, StridesDilationsAndWindowsMustBePositive) {
  EXPECT_THROW_MSG(conv2d(x4_(), f4_(), {0, 1}, Padding::Same), InvalidArgumentError, "[conv2d]", "strides [0, 1]",
                   ">= 1", "got 0");
  EXPECT_THROW_MSG(conv2d(x4_(), f4_(), {1, -2}, Padding::Same), InvalidArgumentError, "[conv2d]", "strides", "got -2");
  EXPECT_THROW_MSG(conv2d(x4_(), f4_(), {1, 1}, Padding::Same, {0, 1}), InvalidArgumentError, "[conv2d]",
                   "dilations [0, 1]", ">= 1");
  EXPECT_THROW_MSG(max_pool2d(x4_(), {0, 2}, {1, 1}, Padding::Same), InvalidArgumentError, "[max_pool2d]",
                   "ksize [0, 2]", ">= 1");
  EXPECT_THROW_MSG(avg_pool2d(x4_(), {2, 2}, {2, 0}, Padding::Same), InvalidArgumentError, "[avg_pool2d]",
                   "strides [2, 0]");
  EXPECT_THROW_MSG(conv2d(x4_(), zeros({0, 3, 3, 4}), {1, 1}, Padding::Same), InvalidArgumentError, "[conv2d]",
                   "zero dimension", "empty filters");
}

TEST(ConvErrors, EntryCountsFollowTensorFlow) {
  EXPECT_THROW_MSG(conv2d(x4_(), f4_(), {1, 1, 1}, Padding::Same), InvalidArgumentError, "[conv2d]",
                   "strides [1, 1, 1] has 3 entries", "expected 1", "2 (height, width) or 4");
  EXPECT_THROW_MSG(conv2d(x4_(), f4_(), {2, 1, 1, 1}, Padding::Same), InvalidArgumentError, "[conv2d]",
                   "batch and channel entries must be 1");
  EXPECT_THROW_MSG(max_pool2d(x4_(), {}, {1}, Padding::Same), InvalidArgumentError, "[max_pool2d]", "ksize []",
                   "0 entries");
}

TEST(ConvErrors, StrideWithDilationIsRefusedAsTensorFlowDoes) {
  EXPECT_THROW_MSG(conv2d(x4_(), f4_(), {2, 1}, Padding::Same, {1, 2}), InvalidArgumentError, "[conv2d]",
                   "a stride > 1 together with a dilation > 1", "TensorFlow refuses it too");
}

TEST(ConvErrors, PaddingMustBeValidOrSame) {
  EXPECT_THROW_MSG(conv2d(x4_(), f4_(), {1, 1}, static_cast<Padding>(7)), InvalidArgumentError, "[conv2d]",
                   "padding 7 is not a tg::Padding", "Padding::Same");
  EXPECT_THROW_MSG(max_pool2d(x4_(), {2, 2}, {2, 2}, static_cast<Padding>(-1)), InvalidArgumentError,
                   "[max_pool2d]", "padding -1");
}

TEST(ConvErrors, ValidWindowLargerThanTheInput) {
  // (1 - 3 + 1) / 1 = -1: negative, refused (TF: "Computed output size would be negative").
  EXPECT_THROW_MSG(conv2d(zeros({1, 1, 5, 3}), f4_(), {1, 1}, Padding::Valid), InvalidArgumentError, "[conv2d]",
                   "VALID", "height 1 is smaller than the window's height 3", "Padding::Same");
  EXPECT_THROW_MSG(conv2d(zeros({1, 5, 5, 3}), f4_(), {1, 1}, Padding::Valid, {3, 3}), InvalidArgumentError,
                   "[conv2d]", "window's height 7", "(k - 1) * dilation + 1");
  EXPECT_THROW_MSG(max_pool2d(zeros({1, 4, 1, 1}), {2, 3}, {1, 1}, Padding::Valid), InvalidArgumentError,
                   "[max_pool2d]", "width 1 is smaller than the window's width 3");
  // SAME never fails on size.
  EXPECT_EQ(conv2d(zeros({1, 1, 1, 3}), f4_(), {1, 1}, Padding::Same).shape(), (TensorShape{1, 1, 1, 4}));
}

TEST(ConvErrors, DtypesMustBeOneFloatType) {
  EXPECT_THROW_MSG(conv2d(x4_(), zeros({3, 3, 3, 4}, float64), {1, 1}, Padding::Same), InvalidArgumentError,
                   "[conv2d]", "one dtype", "float32 and float64", "tg::cast");
  EXPECT_THROW_MSG(conv2d(zeros({2, 8, 8, 3}, int32), zeros({3, 3, 3, 4}, int32), {1, 1}, Padding::Same),
                   InvalidArgumentError, "[conv2d]", "float32, float64", "got int32");
  EXPECT_THROW_MSG(max_pool2d(zeros({1, 4, 4, 1}, int64), {2, 2}, {2, 2}, Padding::Same), InvalidArgumentError,
                   "[max_pool2d]", "got int64");
}

TEST(ConvErrors, GradientOpsCheckTheGradientShape) {
  const detail::Conv2DAttrs a{{1, 1}, {1, 1}, 1};
  EXPECT_THROW_MSG(detail::conv2d_backprop_input(x4_(), f4_(), zeros({2, 8, 8, 5}), a), InvalidArgumentError,
                   "[conv2d_backprop_input]", "the gradient has shape (2, 8, 8, 5)", "(2, 8, 8, 4)");
  EXPECT_THROW_MSG(detail::conv2d_backprop_filter(x4_(), f4_(), zeros({2, 4, 4, 4}), a), InvalidArgumentError,
                   "[conv2d_backprop_filter]", "(2, 4, 4, 4)", "(2, 8, 8, 4)");
  EXPECT_THROW_MSG(detail::max_pool2d_grad(x4_(), zeros({2, 8, 8, 3}), detail::Pool2DAttrs{{2, 2}, {2, 2}, 0}),
                   InvalidArgumentError, "[max_pool2d_grad]", "(2, 4, 4, 3)");
  // max_pool2d_grad_masked (made by the optimiser; recorded by hand here): the gradient's shape,
  // a mask of bools or a mask source m of the input's dtype (standing for m > 0), and a mask that
  // broadcasts to the input.
  const detail::Pool2DAttrs pool{{2, 2}, {2, 2}, 0};
  auto masked = [&](const Tensor& dy, const Tensor& mask) {
    return detail::apply_op1(detail::OpId::MaxPool2DGradMasked, {x4_(), dy, mask}, detail::MaxPoolGradMaskedAttrs{pool});
  };
  const Tensor mask = zeros({2, 8, 8, 3}, bool_);
  EXPECT_THROW_MSG(masked(zeros({2, 8, 8, 3}), mask), InvalidArgumentError, "[max_pool2d_grad_masked]", "(2, 4, 4, 3)");
  EXPECT_THROW_MSG(masked(zeros({2, 4, 4, 3}), zeros({2, 8, 8, 3}, int32)), InvalidArgumentError,
                   "[max_pool2d_grad_masked]", "int32", "float32");
  EXPECT_THROW_MSG(masked(zeros({2, 4, 4, 3}), zeros({2, 8, 8, 3}, float64)), InvalidArgumentError,
                   "[max_pool2d_grad_masked]", "float64", "float32");
  EXPECT_THROW_MSG(masked(zeros({2, 4, 4, 3}), zeros({2, 8, 5, 3}, bool_)), InvalidArgumentError,
                   "[max_pool2d_grad_masked]");
}

// While tracing, what is known is checked at trace time; the rest when the graph runs.
TEST(ConvErrors, TracedChecksKnownDimsThenRunTimeOnes) {
  auto f = function([](const Tensor& x, const Tensor& w) { return conv2d(x, w, {1, 1}, Padding::Valid); },
                    {.input_signature = std::vector<TensorSpec>{TensorSpec({None, None, None, 3}, float32),
                                                                TensorSpec({3, 3, 3, 4}, float32)}});
  EXPECT_EQ(f(zeros({1, 4, 4, 3}), f4_()).shape(), (TensorShape{1, 2, 2, 4}));
  EXPECT_THROW_MSG(f(zeros({1, 1, 4, 3}), f4_()), InvalidArgumentError, "[conv2d]", "height 1 is smaller");
  auto g = function([](const Tensor& x) { return conv2d(x, f4_(), {1, 1}, Padding::Same); });
  EXPECT_THROW_MSG(g.get_concrete_function(TensorSpec({None, 8, 8, 2}, float32)), InvalidArgumentError,
                   "[conv2d]", "the input has 2 channels");
}

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// conv2d's and the pools' values and gradients at `strides`, eagerly and traced.
std::vector<Tensor> conv_family(const Tensor& x, const Tensor& f, std::vector<int64_t> strides, Padding padding,
                                std::vector<int64_t> dilations = {1, 1}) {
  GradientTape tape;
  tape.watch(x);
  tape.watch(f);
  const Tensor y = conv2d(x, f, strides, padding, dilations);
  const Tensor m = max_pool2d(x, {2, 2}, strides, padding);
  const Tensor a = avg_pool2d(x, {2, 2}, strides, padding);
  const std::vector<Tensor> g = tape.gradient(reduce_sum(y) + reduce_sum(m) + reduce_sum(a), {x, f});
  return {y, m, a, g[0], g[1]};
}

// TF's output sizes at any stride, window and dilation >= 1, computed without overflow: a stride
// of INT64_MAX puts one window at the origin, as any stride past the input does. It overflowed
// int64 in the VALID size and in the direct kernels' row steps (UBSan).
TEST(ConvErrors, StridesUpToInt64MaxGiveTheOneWindowAtTheOrigin) {
  const Tensor x = random_uniform({2, 5, 5, 3}, -1.0f, 1.0f, uint64_t{1});
  const Tensor f = random_uniform({3, 3, 3, 4}, -1.0f, 1.0f, uint64_t{2});
  for (Padding padding : {Padding::Valid, Padding::Same}) {
    SCOPED_TRACE(padding == Padding::Valid ? "VALID" : "SAME");
    const std::vector<Tensor> want = conv_family(x, f, {5, 5}, padding);
    const std::vector<Tensor> got = conv_family(x, f, {kMax, kMax}, padding);
    EXPECT_EQ(got[0].shape(), (TensorShape{2, 1, 1, 4}));
    for (std::size_t i = 0; i < want.size(); ++i) EXPECT_TENSOR_EQ(got[i], want[i]);
    auto traced = function([&](const Tensor& xs) { return conv_family(xs, f, {kMax, 1}, padding); },
                           {.input_signature = std::vector<TensorSpec>{TensorSpec({None, None, None, 3}, float32)}});
    const std::vector<Tensor> eager = conv_family(x, f, {kMax, 1}, padding);
    const std::vector<Tensor> graph = traced(x);
    for (std::size_t i = 0; i < eager.size(); ++i) EXPECT_TENSOR_EQ(graph[i], eager[i]);
  }
  // A window of INT64_MAX: SAME over one pixel is that pixel; VALID past the input is empty.
  const Tensor pixel = random_uniform({1, 1, 1, 3}, -1.0f, 1.0f, uint64_t{3});
  EXPECT_TENSOR_EQ(max_pool2d(pixel, {kMax, kMax}, {1, 1}, Padding::Same), pixel);
  EXPECT_TENSOR_EQ(avg_pool2d(pixel, {kMax, kMax}, {kMax, kMax}, Padding::Same), pixel);
  EXPECT_EQ(max_pool2d(x, {kMax, kMax}, {kMax, kMax}, Padding::Valid).shape(), (TensorShape{2, 0, 0, 3}));
}

// SAME padding for a window wider than int64 can pad (the input plus the padding it needs): a bad
// attribute, refused. A window that fits but dwarfs the input takes the im2col kernel, whose scratch
// is bounded (the direct kernels' padded copy of the image would have been 2^63 rows).
TEST(ConvErrors, SamePaddingMustFitInt64) {
  const Tensor x = random_uniform({1, 5, 5, 3}, -1.0f, 1.0f, uint64_t{4});
  EXPECT_THROW_MSG(max_pool2d(x, {kMax, 2}, {1, 1}, Padding::Same), InvalidArgumentError, "[max_pool2d]",
                   "SAME padding", "window's height 9223372036854775807", "input height of 5",
                   "more positions than int64", "Padding::Valid");
  EXPECT_THROW_MSG(conv2d(x, f4_(), {1, 1}, Padding::Same, {1, kMax / 2}), InvalidArgumentError, "[conv2d]",
                   "window's width 9223372036854775807 ((k - 1) * dilation + 1)");
  EXPECT_THROW_MSG(avg_pool2d(x, {2, kMax}, {1, 1}, Padding::Same), InvalidArgumentError, "[avg_pool2d]", "SAME");
  // Over one pixel, the window's centre tap (the middle of 3 at dilation 2^62 - 1) is the pixel:
  // y = x f[1, 1]; dx = f[1, 1] summed over the output channels, df = x at the centre tap.
  const Tensor pixel = random_uniform({1, 1, 1, 3}, -1.0f, 1.0f, uint64_t{5});
  const Tensor f = random_uniform({3, 3, 3, 4}, -1.0f, 1.0f, uint64_t{6});
  GradientTape tape;
  tape.watch(pixel);
  tape.watch(f);
  const Tensor y = conv2d(pixel, f, {1, 1}, Padding::Same, {kMax / 2, kMax / 2});
  const std::vector<Tensor> g = tape.gradient(reduce_sum(y), {pixel, f});
  const Tensor centre = reshape(slice(f, {1, 1, 0, 0}, {1, 1, 3, 4}), {3, 4});
  EXPECT_TENSOR_NEAR(y, reshape(matmul(reshape(pixel, {1, 3}), centre), {1, 1, 1, 4}), 1e-6);
  EXPECT_TENSOR_NEAR(g[0], reshape(reduce_sum(centre, {1}), {1, 1, 1, 3}), 1e-6);
  const Tensor at_centre = reshape(broadcast_to(reshape(pixel, {3, 1}), constant({3, 4})), {1, 1, 3, 4});
  EXPECT_TENSOR_NEAR(g[1], pad(at_centre, {{1, 1}, {1, 1}, {0, 0}, {0, 0}}), 1e-6);
}

// An empty input may have dims whose product overflows int64 ((0, 2^40, 2^40, 1)): the kernels
// take such products per image, so they do nothing (or write the zeros a filter gradient is).
TEST(ConvErrors, EmptyInputsWithHugeDimsAreNotMultipliedOut) {
  const int64_t big = int64_t{1} << 40;
  const Tensor x = zeros({0, big, big, 1});
  const detail::Pool2DAttrs pool{{2, 2}, {2, 2}, 0};
  EXPECT_EQ(max_pool2d(x, {2, 2}, {2, 2}, Padding::Valid).shape(), (TensorShape{0, big / 2, big / 2, 1}));
  EXPECT_EQ(avg_pool2d(x, {3, 3}, {1, 1}, Padding::Same).shape(), (TensorShape{0, big, big, 1}));
  const Tensor dy = zeros({0, big / 2, big / 2, 1});
  EXPECT_EQ(detail::max_pool2d_grad(x, dy, pool).shape(), x.shape());
  EXPECT_EQ(detail::avg_pool2d_grad(x, dy, pool).shape(), x.shape());
  EXPECT_EQ(detail::max_pool2d_grad_grad(x, x, pool).shape(), dy.shape());
  const Tensor mask = zeros({0, big, big, 1}, bool_);
  const std::vector<Tensor> masked = detail::apply_op(detail::OpId::MaxPool2DGradMasked, {x, dy, mask},
                                                      detail::MaxPoolGradMaskedAttrs{pool, true});
  EXPECT_TENSOR_EQ(masked[1], zeros({1}));
  const Tensor f = random_uniform({3, 3, 1, 2}, -1.0f, 1.0f, uint64_t{7});
  const detail::Conv2DAttrs same{{1, 1}, {1, 1}, 1};
  EXPECT_EQ(conv2d(x, f, {1, 1}, Padding::Same).shape(), (TensorShape{0, big, big, 2}));
  EXPECT_EQ(detail::conv2d_backprop_input(x, f, zeros({0, big, big, 2}), same).shape(), x.shape());
  EXPECT_TENSOR_EQ(detail::conv2d_backprop_filter(x, f, zeros({0, big, big, 2}), same), zeros({3, 3, 1, 2}));
  // Traced, the graph's kernels get the same shapes at run time. (The ops are called directly:
  // a reduction or a broadcast over such a shape multiplies its dims out in other kernels.)
  auto traced = function(
      [&](const Tensor& xs, const Tensor& dys, const Tensor& dyc) {
        return std::vector<Tensor>{conv2d(xs, f, {1, 1}, Padding::Same),
                                   max_pool2d(xs, {2, 2}, {2, 2}, Padding::Valid),
                                   avg_pool2d(xs, {2, 2}, {2, 2}, Padding::Valid),
                                   detail::max_pool2d_grad(xs, dys, pool),
                                   detail::avg_pool2d_grad(xs, dys, pool),
                                   detail::max_pool2d_grad_grad(xs, xs, pool),
                                   detail::conv2d_backprop_input(xs, f, dyc, same),
                                   detail::conv2d_backprop_filter(xs, f, dyc, same)};
      },
      {.input_signature = std::vector<TensorSpec>{TensorSpec({None, None, None, 1}, float32),
                                                  TensorSpec({None, None, None, 1}, float32),
                                                  TensorSpec({None, None, None, 2}, float32)}});
  const std::vector<Tensor> g = traced(x, dy, zeros({0, big, big, 2}));
  EXPECT_EQ(g[0].shape(), (TensorShape{0, big, big, 2}));
  EXPECT_EQ(g[1].shape(), dy.shape());
  EXPECT_EQ(g[3].shape(), x.shape());
  EXPECT_EQ(g[5].shape(), dy.shape());
  EXPECT_EQ(g[6].shape(), x.shape());
  EXPECT_TENSOR_EQ(g[7], zeros({3, 3, 1, 2}));
}

}  // namespace
}  // namespace tg
