// The convolution layers under the mixed_bfloat16 policy, as Dense under it
// (mixed_precision_test.cpp): float32 Variables cast to bfloat16 at each call, bfloat16 output,
// float32 gradients of the Variables; eagerly and traced.
#include "support/test_util.h"

namespace tg {
namespace {

struct GlobalPolicy {
  explicit GlobalPolicy(const char* name) { nn::set_global_policy(name); }
  ~GlobalPolicy() { nn::set_global_policy("float32"); }
};

TEST(ConvLayersMixedBFloat16, Conv2DKeepsFloat32VariablesAndComputesInBFloat16) {
  const GlobalPolicy policy("mixed_bfloat16");
  const nn::Conv2D mixed(3, 8, {3}, {.padding = Padding::Same, .activation = relu, .seed = 4});
  const nn::Conv2D reference(3, 8, {3}, {.padding = Padding::Same, .activation = relu, .seed = 4, .dtype = float32});
  EXPECT_EQ(mixed.options().dtype.name(), "mixed_bfloat16");
  EXPECT_EQ(mixed.kernel().dtype(), float32);
  EXPECT_EQ(mixed.bias().dtype(), float32);
  EXPECT_TENSOR_EQ(mixed.kernel().read_value(), reference.kernel().read_value());  // the same draw
  const Tensor x = testing::seeded_values({2, 6, 6, 3}, float32, 9);
  const Tensor y = mixed(x);  // float32 input cast to bfloat16 (Keras's autocast)
  EXPECT_EQ(y.dtype(), bfloat16);
  EXPECT_TENSOR_NEAR(cast(y, float32), reference(x), 3e-2);
  // The same computed in the test: conv2d of the bfloat16 values, bias, relu, each rounded.
  const Tensor k16 = cast(mixed.kernel().read_value(), bfloat16), b16 = cast(mixed.bias().read_value(), bfloat16);
  EXPECT_TENSOR_EQ(y, relu(conv2d(cast(x, bfloat16), k16, {1, 1}, Padding::Same) + b16));
  auto traced = function([&](const Tensor& in) { return mixed(in); });
  EXPECT_TENSOR_EQ(traced(x), y);
  EXPECT_THROW_MSG(reference(cast(x, bfloat16)), InvalidArgumentError, "has dtype float32", "bfloat16");
}

TEST(ConvLayersMixedBFloat16, GradientsOfTheVariablesAreFloat32) {
  const GlobalPolicy policy("mixed_bfloat16");
  const nn::Conv2D conv(2, 4, {3}, {.padding = Padding::Same, .activation = relu, .seed = 1});
  const nn::Conv2D conv32(2, 4, {3}, {.padding = Padding::Same, .activation = relu, .seed = 1, .dtype = float32});
  const Tensor x = testing::seeded_values({3, 5, 5, 2}, float32, 2);
  auto grads_of = [&](const nn::Conv2D& c) {
    GradientTape tape;
    const Tensor loss = reduce_mean(square(cast(c(x), float32)));
    return tape.gradient(loss, c.trainable_variables());
  };
  const std::vector<Tensor> g16 = grads_of(conv), g32 = grads_of(conv32);
  ASSERT_EQ(g16.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(g16[i].dtype(), float32);
    EXPECT_TENSOR_NEAR(g16[i], g32[i], 5e-2);
  }
}

TEST(ConvLayersMixedBFloat16, DepthwiseAndTransposeFollowThePolicy) {
  const GlobalPolicy policy("mixed_bfloat16");
  const nn::DepthwiseConv2D dw(4, {3}, {.padding = Padding::Same, .depth_multiplier = 2, .seed = 3});
  const nn::Conv2DTranspose up(4, 3, {3}, {.strides = {2}, .padding = Padding::Same, .seed = 5});
  EXPECT_EQ(dw.kernel().dtype(), float32);
  EXPECT_EQ(up.kernel().dtype(), float32);
  const Tensor x = testing::seeded_values({2, 5, 5, 4}, float32, 6);
  const Tensor a = dw(x), b = up(x);
  EXPECT_EQ(a.dtype(), bfloat16);
  EXPECT_EQ(b.dtype(), bfloat16);
  EXPECT_EQ(b.shape(), TensorShape({2, 10, 10, 3}));
  const nn::DepthwiseConv2D dw32(4, {3}, {.padding = Padding::Same, .depth_multiplier = 2, .seed = 3, .dtype = float32});
  EXPECT_TENSOR_NEAR(cast(a, float32), dw32(x), 3e-2);
}

// Dropout on a mixed model's bfloat16 activations: noise drawn in float32, the kept elements
// scaled (exactly, by 2) and the result still bfloat16.
TEST(ConvLayersMixedBFloat16, DropoutTakesBFloat16) {
  const Tensor x = cast(testing::seeded_values({64, 16}, float32, 8, {0.125, 1.0}), bfloat16);
  const Tensor y = nn::Dropout(0.5, 3)(x, true);
  ASSERT_EQ(y.dtype(), bfloat16);
  const std::vector<float> xv = cast(x, float32).to_vector<float>(), yv = cast(y, float32).to_vector<float>();
  int kept = 0;
  for (std::size_t i = 0; i < xv.size(); ++i) {
    EXPECT_TRUE(yv[i] == 0.0f || yv[i] == 2.0f * xv[i]) << i;
    kept += yv[i] != 0.0f;
  }
  EXPECT_GT(kept, 300);
  EXPECT_LT(kept, 724);
}

}  // namespace
}  // namespace tg
