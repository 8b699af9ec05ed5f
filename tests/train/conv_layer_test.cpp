// nn::Conv2D: the layer is conv2d + bias + activation over its own Variables, traced or not,
// with gradients reaching the Variables, and typed errors that name the layer.
#include "support/test_util.h"

namespace tg {
namespace {

TEST(Conv2DLayer, ForwardIsConvPlusBiasThenActivation) {
  nn::Conv2D layer(2, 3, {3}, {.padding = Padding::Same, .activation = relu, .seed = 4, .name = "c1"});
  layer.trainable_variables()[1].assign(constant({0.25f, -0.5f, 1.0f}));
  const Tensor x = random_uniform({2, 5, 4, 2}, -1, 1, 9);
  const Tensor k = layer.kernel().read_value();
  EXPECT_EQ(k.shape(), TensorShape({3, 3, 2, 3}));
  EXPECT_EQ(layer.kernel().name(), "c1/kernel");
  EXPECT_EQ(layer.bias().name(), "c1/bias");
  const Tensor expected = relu(conv2d(x, k, {1, 1}, Padding::Same) + constant({0.25f, -0.5f, 1.0f}));
  EXPECT_TENSOR_EQ(layer(x), expected);
  EXPECT_EQ(layer(x).shape(), TensorShape({2, 5, 4, 3}));

  // Valid padding with strides and no bias: (5 - 3) / 2 + 1 = 2 rows, (4 - 3) / 2 + 1 = 1 column.
  nn::Conv2D strided(2, 4, {3, 3}, {.strides = {2}, .use_bias = false, .seed = 4});
  EXPECT_EQ(strided.trainable_variables().size(), 1u);
  EXPECT_THROW_MSG(strided.bias(), ValueError, "use_bias = false");
  EXPECT_TENSOR_EQ(strided(x), conv2d(x, strided.kernel().read_value(), {2, 2}, Padding::Valid));
  EXPECT_EQ(strided(x).shape(), TensorShape({2, 2, 1, 4}));
  // The kernel is Glorot-uniform over fans with the receptive field, seeded like Dense's.
  EXPECT_TENSOR_EQ(nn::Conv2D(2, 3, {3, 3}, {.seed = 4}).kernel().read_value(), nn::glorot_uniform({3, 3, 2, 3}, 4));
}

TEST(Conv2DLayer, TracedWithNoneDimsMatchesEagerAndGradientsReachTheVariables) {
  nn::Conv2D layer(1, 2, {2, 2}, {.padding = Padding::Same, .activation = tanh, .seed = 2});
  layer.trainable_variables()[1].assign(constant({0.1f, -0.2f}));
  const Tensor x = random_uniform({3, 6, 5, 1}, -1, 1, 5);
  auto step = function(
      [&](const Tensor& in) {
        GradientTape tape;
        const Tensor loss = reduce_sum(square(layer(in)));
        return std::make_pair(loss, tape.gradient(loss, layer.trainable_variables()));
      },
      {.input_signature = std::vector<TensorSpec>{TensorSpec({None, None, None, 1}, float32)}});
  const auto [loss, grads] = step(x);

  // The same computation on plain tensors.
  const Tensor k = layer.kernel().read_value(), b = layer.bias().read_value();
  GradientTape tape;
  tape.watch(k);
  tape.watch(b);
  const Tensor expected_loss = reduce_sum(square(tanh(conv2d(x, k, {1}, Padding::Same) + b)));
  const std::vector<Tensor> expected = tape.gradient(expected_loss, {k, b});
  EXPECT_TENSOR_NEAR(loss, expected_loss, 1e-5);
  ASSERT_EQ(grads.size(), 2u);
  EXPECT_TENSOR_NEAR(grads[0], expected[0], 1e-5);
  EXPECT_TENSOR_NEAR(grads[1], expected[1], 1e-5);
  (void)step(random_uniform({1, 3, 3, 1}, -1, 1, 6));
  EXPECT_EQ(step.tracing_count(), 1) << "None batch, height and width: one trace serves every size";
}

TEST(Conv2DLayer, TypedErrorsNameTheLayer) {
  EXPECT_THROW_MSG(nn::Conv2D(0, 3, {3}), InvalidArgumentError, "[Conv2D]", "in_channels=0");
  EXPECT_THROW_MSG(nn::Conv2D(1, 3, {3, 3, 3}), InvalidArgumentError, "kernel_size", "{3, 3, 3}");
  EXPECT_THROW_MSG(nn::Conv2D(1, 3, {3}, {.strides = {0}}), InvalidArgumentError, "strides");
  EXPECT_THROW_MSG(nn::Conv2D(1, 3, {3}, {.dtype = int32}), TypeError, "must be floating", "int32");
  nn::Conv2D layer(3, 2, {3}, {.name = "edge"});
  EXPECT_THROW_MSG(layer(ones({1, 5, 5, 2})), InvalidArgumentError, "'edge'", "(batch, height, width, 3)",
                   "(1, 5, 5, 2)");
  EXPECT_THROW_MSG(layer(ones({25, 3})), InvalidArgumentError, "NHWC");
  EXPECT_THROW_MSG(layer(ones({1, 5, 5, 3}, float64)), InvalidArgumentError, "dtype float32", "float64");
  EXPECT_THROW_MSG(layer(Tensor{}), ValueError, "empty");
}

// Keras's groups: the kernel (kh, kw, in / groups, filters), conv2d's grouped form.
TEST(Conv2DLayer, GroupsSplitTheChannels) {
  nn::Conv2D layer(4, 6, {3}, {.padding = Padding::Same, .seed = 3, .groups = 2});
  EXPECT_EQ(layer.kernel().read_value().shape(), TensorShape({3, 3, 2, 6}));
  const Tensor x = random_uniform({2, 5, 5, 4}, -1, 1, 9);
  EXPECT_TENSOR_EQ(layer(x), conv2d(x, layer.kernel().read_value(), {1, 1}, Padding::Same) + layer.bias().read_value());
  EXPECT_THROW_MSG(nn::Conv2D(4, 6, {3}, {.groups = 3}), InvalidArgumentError, "[Conv2D]", "groups=3",
                   "in_channels=4", "filters=6");
}

TEST(DepthwiseConv2DLayer, ForwardGradientsAndErrors) {
  nn::DepthwiseConv2D layer(3, {3}, {.strides = {2}, .padding = Padding::Same, .depth_multiplier = 2,
                                     .activation = relu, .seed = 5, .name = "dw"});
  EXPECT_EQ(layer.kernel().read_value().shape(), TensorShape({3, 3, 3, 2}));
  EXPECT_EQ(layer.kernel().name(), "dw/depthwise_kernel");
  EXPECT_EQ(layer.bias().read_value().shape(), TensorShape({6}));
  EXPECT_TENSOR_EQ(layer.kernel().read_value(), nn::glorot_uniform({3, 3, 3, 2}, 5));
  layer.trainable_variables()[1].assign(constant({0.1f, -0.1f, 0.2f, -0.2f, 0.3f, -0.3f}));
  const Tensor x = random_uniform({2, 7, 6, 3}, -1, 1, 4);
  const Tensor k = layer.kernel().read_value(), b = layer.bias().read_value();
  EXPECT_TENSOR_EQ(layer(x), relu(depthwise_conv2d(x, k, {2, 2}, Padding::Same) + b));
  EXPECT_EQ(layer(x).shape(), TensorShape({2, 4, 3, 6}));
  auto step = function(
      [&](const Tensor& in) {
        GradientTape tape;
        return tape.gradient(reduce_sum(square(layer(in))), layer.trainable_variables());
      },
      {.input_signature = std::vector<TensorSpec>{TensorSpec({None, 7, 6, 3}, float32)}});
  GradientTape tape;
  tape.watch(k);
  tape.watch(b);
  const std::vector<Tensor> expected =
      tape.gradient(reduce_sum(square(relu(depthwise_conv2d(x, k, {2, 2}, Padding::Same) + b))), {k, b});
  const std::vector<Tensor> grads = step(x);
  ASSERT_EQ(grads.size(), 2u);
  EXPECT_TENSOR_NEAR(grads[0], expected[0], 1e-5);
  EXPECT_TENSOR_NEAR(grads[1], expected[1], 1e-5);
  EXPECT_THROW_MSG(layer(random_uniform({1, 5, 5, 4}, -1, 1, 1)), InvalidArgumentError, "[DepthwiseConv2D]",
                   "layer 'dw'", "(batch, height, width, 3)");
  EXPECT_THROW_MSG(nn::DepthwiseConv2D(3, {3}, {.depth_multiplier = 0}), InvalidArgumentError, "[DepthwiseConv2D]",
                   "depth_multiplier=0");
}

// Keras's output sizes: SAME gives in * stride; VALID in * stride + max(window - stride, 0); an
// output_padding gives (in - 1) * stride + window - 2 * pad + output_padding.
TEST(Conv2DTransposeLayer, OutputSizesFollowKeras) {
  const Tensor x = random_uniform({2, 4, 5, 3}, -1, 1, 7);
  nn::Conv2DTranspose same(3, 2, {3}, {.strides = {2}, .padding = Padding::Same, .seed = 1});
  EXPECT_EQ(same.kernel().read_value().shape(), TensorShape({3, 3, 2, 3}));
  EXPECT_EQ(same(x).shape(), TensorShape({2, 8, 10, 2}));
  EXPECT_TENSOR_EQ(same(x), conv2d_transpose(x, same.kernel().read_value(), {2, 8, 10, 2}, {2, 2}, Padding::Same) +
                                same.bias().read_value());
  nn::Conv2DTranspose valid(3, 2, {3}, {.strides = {2}, .seed = 1});
  EXPECT_EQ(valid(x).shape(), TensorShape({2, 9, 11, 2}));
  nn::Conv2DTranspose wide(3, 2, {1}, {.strides = {3}, .seed = 1});  // window 1 < stride 3
  EXPECT_EQ(wide(x).shape(), TensorShape({2, 12, 15, 2}));
  nn::Conv2DTranspose padded(3, 2, {3}, {.strides = {2}, .padding = Padding::Same, .output_padding = {0, 1}, .seed = 1});
  EXPECT_EQ(padded(x).shape(), TensorShape({2, 7, 10, 2}));
  EXPECT_THROW_MSG(nn::Conv2DTranspose(3, 2, {3}, {.strides = {2}, .output_padding = {2}}), InvalidArgumentError,
                   "[Conv2DTranspose]", "output_padding 2 must be less than its stride 2");
  // Traced with a None batch: one trace, gradients reach the Variables.
  auto step = function(
      [&](const Tensor& in) {
        GradientTape tape;
        return tape.gradient(reduce_sum(square(same(in))), same.trainable_variables());
      },
      {.input_signature = std::vector<TensorSpec>{TensorSpec({None, 4, 5, 3}, float32)}});
  const std::vector<Tensor> grads = step(x);
  ASSERT_EQ(grads.size(), 2u);
  EXPECT_EQ(grads[0].shape(), TensorShape({3, 3, 2, 3}));
  (void)step(random_uniform({1, 4, 5, 3}, -1, 1, 8));
  EXPECT_EQ(step.tracing_count(), 1);
  auto unknown = function([&](const Tensor& in) { return same(in); },
                          {.input_signature = std::vector<TensorSpec>{TensorSpec({None, None, 5, 3}, float32)}});
  EXPECT_THROW_MSG(unknown(x), InvalidArgumentError, "[Conv2DTranspose]", "height and width while tracing");
}

}  // namespace
}  // namespace tg
