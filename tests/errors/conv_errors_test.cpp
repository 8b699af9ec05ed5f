// conv2d and pooling: every validation throws InvalidArgumentError naming what was expected, what
// was received and what to do, eagerly and while tracing; none reaches a kernel.
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
  // a mask of bools, and a mask that broadcasts to the input.
  const detail::Pool2DAttrs pool{{2, 2}, {2, 2}, 0};
  auto masked = [&](const Tensor& dy, const Tensor& mask) {
    return detail::apply_op1(detail::OpId::MaxPool2DGradMasked, {x4_(), dy, mask}, detail::MaxPoolGradMaskedAttrs{pool});
  };
  const Tensor mask = zeros({2, 8, 8, 3}, bool_);
  EXPECT_THROW_MSG(masked(zeros({2, 8, 8, 3}), mask), InvalidArgumentError, "[max_pool2d_grad_masked]", "(2, 4, 4, 3)");
  EXPECT_THROW_MSG(masked(zeros({2, 4, 4, 3}), zeros({2, 8, 8, 3})), InvalidArgumentError, "[max_pool2d_grad_masked]",
                   "a mask of dtype bool", "float32");
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

}  // namespace
}  // namespace tg
