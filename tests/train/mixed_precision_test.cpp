// The mixed_bfloat16 policy (Keras's mixed precision): layers keep float32 Variables, compute in
// bfloat16 and return bfloat16; the loss computes in float32; gradients of the Variables come
// back in float32 and the optimizer updates them in float32. A traced training run learns as
// the float32 one does.
#include "support/test_util.h"

namespace tg {
namespace {

// Sets a global policy for one test and puts float32 back after it.
struct GlobalPolicy {
  explicit GlobalPolicy(const char* name) { nn::set_global_policy(name); }
  ~GlobalPolicy() { nn::set_global_policy("float32"); }
};

TEST(MixedPrecision, PolicyNamesAndDtypes) {
  const nn::DTypePolicy mixed("mixed_bfloat16");
  EXPECT_EQ(mixed.name(), "mixed_bfloat16");
  EXPECT_EQ(mixed.variable_dtype(), float32);
  EXPECT_EQ(mixed.compute_dtype(), bfloat16);
  const nn::DTypePolicy plain(float64);
  EXPECT_EQ(plain.name(), "float64");
  EXPECT_EQ(plain.compute_dtype(), float64);
  EXPECT_EQ(nn::DTypePolicy("bfloat16").variable_dtype(), bfloat16);
  EXPECT_EQ(nn::global_policy().name(), "float32");
  EXPECT_THROW_MSG(nn::DTypePolicy("mixed_float16"), ValueError, "mixed_float16", "mixed_bfloat16");
  EXPECT_THROW_MSG(nn::DTypePolicy(int32), TypeError, "floating", "int32");
}

TEST(MixedPrecision, DenseKeepsFloat32VariablesAndComputesInBFloat16) {
  const GlobalPolicy policy("mixed_bfloat16");
  const nn::Dense mixed(6, 3, relu, /*seed=*/5);
  const nn::Dense reference(6, 3, relu, /*seed=*/5, float32);
  EXPECT_EQ(mixed.dtype_policy().name(), "mixed_bfloat16");
  EXPECT_EQ(mixed.kernel().dtype(), float32);
  EXPECT_EQ(mixed.bias().dtype(), float32);
  EXPECT_TENSOR_EQ(mixed.kernel().read_value(), reference.kernel().read_value());  // same draw
  const Tensor x = testing::seeded_values({4, 6}, float32, 7);
  const Tensor y = mixed(x);  // float32 input cast to bfloat16 (Keras's autocast)
  EXPECT_EQ(y.dtype(), bfloat16);
  EXPECT_TENSOR_NEAR(cast(y, float32), reference(x), 2e-2);
  EXPECT_EQ(mixed(cast(x, bfloat16)).dtype(), bfloat16);
  // A float32 layer still refuses another dtype: only mixed policies cast their inputs.
  EXPECT_THROW_MSG(reference(cast(x, bfloat16)), InvalidArgumentError, "has dtype float32", "bfloat16");
}

TEST(MixedPrecision, GradientsOfVariablesAreFloat32AndTheLossComputesInFloat32) {
  const GlobalPolicy policy("mixed_bfloat16");
  const nn::Dense hidden(6, 8, relu, 1), head(8, 3, nullptr, 2);
  const nn::Dense hidden32(6, 8, relu, 1, float32), head32(8, 3, nullptr, 2, float32);
  const Tensor x = testing::seeded_values({5, 6}, float32, 3);
  const Tensor labels = constant({0, 1, 2, 1, 0});
  auto grads_of = [&](const nn::Dense& a, const nn::Dense& b, Tensor* loss) {
    GradientTape tape;
    *loss = nn::sparse_softmax_cross_entropy(b(a(x)), labels);
    return tape.gradient(*loss, {a.kernel(), a.bias(), b.kernel(), b.bias()});
  };
  Tensor loss16, loss32;
  const std::vector<Tensor> g16 = grads_of(hidden, head, &loss16), g32 = grads_of(hidden32, head32, &loss32);
  EXPECT_EQ(loss16.dtype(), float32);
  EXPECT_TENSOR_NEAR(loss16, loss32, 2e-2);
  ASSERT_EQ(g16.size(), 4u);
  for (std::size_t i = 0; i < g16.size(); ++i) {
    EXPECT_EQ(g16[i].dtype(), float32) << i;
    EXPECT_TENSOR_NEAR(g16[i], g32[i], 5e-2) << i;
  }
}

// Two classes split by the sign of the sum of the features: a traced Adam run under the policy
// ends where the float32 run ends.
TEST(MixedPrecision, TracedTrainingMatchesFloat32) {
  const Tensor x = testing::seeded_values({64, 8}, float32, 11);
  const Tensor y = cast(greater(reduce_sum(x, {1}), constant(0.0f)), int32);
  auto train = [&](const char* policy_name) {
    nn::set_global_policy(policy_name);
    const nn::Dense hidden(8, 16, relu, 1), head(16, 2, nullptr, 2);
    nn::set_global_policy("float32");
    optim::Adam opt(0.05);
    const std::vector<Variable> vars = {hidden.kernel(), hidden.bias(), head.kernel(), head.bias()};
    auto step = function([&](const Tensor& xs, const Tensor& ys) {
      GradientTape tape;
      const Tensor loss = nn::sparse_softmax_cross_entropy(head(hidden(xs)), ys);
      opt.apply_gradients(tape.gradient(loss, vars), vars);
      return loss;
    });
    for (int i = 0; i < 60; ++i) step(x, y);
    for (const Variable& v : vars) EXPECT_EQ(v.dtype(), float32);
    return nn::accuracy(cast(head(hidden(x)), float32), y).item<float>();
  };
  const float acc32 = train("float32");
  const float acc16 = train("mixed_bfloat16");
  EXPECT_GT(acc32, 0.9f);
  EXPECT_NEAR(acc16, acc32, 0.05f);
}

}  // namespace
}  // namespace tg
