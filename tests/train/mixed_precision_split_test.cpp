// A mixed_bfloat16 MLP's training step whose larger bfloat16 products split over two threads
// (rows of C per part, the packed right operand shared by the parts): on two threads, eager
// execution, the graph as traced and the optimised graph leave the Variables with the bits of
// eager execution on one thread (no product splits there).
#include <vector>

#include "support/test_util.h"

namespace tg {
namespace {

// mode 0: eager; 1: traced, not optimised; 2: traced and optimised. The first step runs eagerly
// in every mode (it creates Adam's slots, as the demo's first step does).
std::vector<Tensor> variables_after_two_steps(int mode) {
  const Tensor x = testing::seeded_values({64, 300}, float32, 21);
  const Tensor y = cast(greater(reduce_sum(x, {1}), constant(0.0f)), int32);
  nn::set_global_policy("mixed_bfloat16");
  const nn::Dense hidden(300, 128, relu, 1), middle(128, 96, relu, 2), head(96, 40, nullptr, 3);
  nn::set_global_policy("float32");
  optim::Adam opt(0.01);
  const std::vector<Variable> vars = {hidden.kernel(), hidden.bias(), middle.kernel(), middle.bias(),
                                      head.kernel(),   head.bias()};
  auto step = [&](const Tensor& xs, const Tensor& ys) {
    GradientTape tape;
    const Tensor loss = nn::sparse_softmax_cross_entropy(head(middle(hidden(xs))), ys);
    opt.apply_gradients(tape.gradient(loss, vars), vars);
    return loss;
  };
  step(x, y);
  if (mode == 0) {
    step(x, y);
  } else {
    auto traced = function(step, {.name = "mixed_split_step", .optimize = mode == 2});
    traced(x, y);
  }
  std::vector<Tensor> values;
  for (const Variable& v : vars) values.push_back(v.read_value());
  return values;
}

TEST(MixedPrecision, SplitProductsKeepTheBitsOfOneThread) {
  const int threads_before = config::num_threads();
  config::set_num_threads(1);
  const std::vector<Tensor> want = variables_after_two_steps(0);
  config::set_num_threads(2);
  std::vector<std::vector<Tensor>> got;
  for (int mode = 0; mode < 3; ++mode) got.push_back(variables_after_two_steps(mode));
  config::set_num_threads(threads_before);
  ASSERT_EQ(want.size(), 6u);
  const char* names[] = {"eager", "traced", "optimised"};
  for (int mode = 0; mode < 3; ++mode)
    for (std::size_t k = 0; k < want.size(); ++k)
      EXPECT_TRUE(testing::same_bits(got[static_cast<std::size_t>(mode)][k], want[k])) << names[mode] << ", variable " << k;
  // The steps changed the weights: the bits compared are the products' and the updates'.
  nn::set_global_policy("mixed_bfloat16");
  const nn::Dense untrained(300, 128, relu, 1);
  nn::set_global_policy("float32");
  EXPECT_FALSE(testing::same_bits(want[0], untrained.kernel().read_value()));
}

}  // namespace
}  // namespace tg
