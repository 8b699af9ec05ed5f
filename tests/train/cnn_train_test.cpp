// The CNN demo's recipe on small synthetic data: Conv2D + max-pool + Dense trained by a traced
// train_step learns a task it can only solve through its convolution, and the traced step moves
// the weights exactly as the eager step does.
#include <random>

#include "support/test_util.h"

namespace tg {
namespace {

// 8x8 images with a bright 3x3 blob at a random place in one of the four quadrants (the label),
// plus noise: the class is a position, which the pooled convolution features carry.
std::pair<Tensor, Tensor> blob_images(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> noise(0.0f, 0.3f);
  std::uniform_int_distribution<int> offset(0, 1), label(0, 3);
  std::vector<float> pixels(static_cast<std::size_t>(n * 64));
  std::vector<int32_t> labels(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float* img = &pixels[static_cast<std::size_t>(i * 64)];
    for (int p = 0; p < 64; ++p) img[p] = noise(rng);
    const int c = label(rng);
    labels[static_cast<std::size_t>(i)] = c;
    const int r0 = (c / 2) * 4 + offset(rng), c0 = (c % 2) * 4 + offset(rng);
    for (int r = r0; r < r0 + 3; ++r)
      for (int q = c0; q < c0 + 3; ++q) img[r * 8 + q] += 1.0f;
  }
  return {constant(pixels, {n, 8, 8, 1}), constant(labels, {n})};
}

struct SmallCnn {
  nn::Conv2D conv{1, 4, {3}, {.padding = Padding::Same, .activation = relu, .seed = 3}};
  nn::Dense out{4 * 4 * 4, 4, nullptr, /*seed=*/4};

  Tensor operator()(const Tensor& x) const {
    const Tensor h = max_pool2d(conv(x), {2}, {2}, Padding::Valid);
    return out(reshape(h, {-1, 4 * 4 * 4}));
  }
  std::vector<Variable> variables() const {
    return {conv.kernel(), conv.bias(), out.kernel(), out.bias()};
  }
};

Tensor train_step_body(SmallCnn& model, optim::Optimizer& opt, const Tensor& x, const Tensor& y) {
  const std::vector<Variable> vars = model.variables();
  GradientTape tape;
  const Tensor loss = nn::sparse_softmax_cross_entropy(model(x), y);
  opt.apply_gradients(tape.gradient(loss, vars), vars);
  return loss;
}

TEST(CnnTraining, TracedStepLearnsAPositionTaskWithOneTrace) {
  const auto [train_x, train_y] = blob_images(512, 1);
  const auto [test_x, test_y] = blob_images(256, 2);
  SmallCnn model;
  optim::Adam opt(0.01);
  auto step = function([&](const Tensor& x, const Tensor& y) { return train_step_body(model, opt, x, y); },
                       {.input_signature = std::vector<TensorSpec>{TensorSpec({None, 8, 8, 1}, float32),
                                                                   TensorSpec({None}, int32)}});
  (void)train_step_body(model, opt, slice(train_x, {0, 0, 0, 0}, {32, 8, 8, 1}), slice(train_y, {0}, {32}));
  const float first_accuracy = nn::accuracy(model(test_x), test_y).item<float>();
  for (int epoch = 0; epoch < 8; ++epoch)
    for (int64_t b = 0; b < 512; b += 32) (void)step(slice(train_x, {b, 0, 0, 0}, {32, 8, 8, 1}), slice(train_y, {b}, {32}));
  const float accuracy = nn::accuracy(model(test_x), test_y).item<float>();
  EXPECT_LT(first_accuracy, 0.6f);
  EXPECT_GE(accuracy, 0.95f) << "after 128 traced steps; it started at " << first_accuracy;
  EXPECT_EQ(step.tracing_count(), 1);
}

TEST(CnnTraining, TracedStepsMoveTheWeightsAsEagerStepsDo) {
  const auto [x, y] = blob_images(64, 5);
  SmallCnn eager_model, traced_model;  // the same seeds: the same initial weights
  optim::Adam eager_opt(0.01), traced_opt(0.01);
  auto step = function([&](const Tensor& xs, const Tensor& ys) { return train_step_body(traced_model, traced_opt, xs, ys); });
  (void)train_step_body(traced_model, traced_opt, x, y);  // creates the slots outside the trace
  (void)train_step_body(eager_model, eager_opt, x, y);
  for (int i = 0; i < 3; ++i) EXPECT_TENSOR_NEAR(step(x, y), train_step_body(eager_model, eager_opt, x, y), 1e-5);
  const auto a = eager_model.variables(), b = traced_model.variables();
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_TENSOR_NEAR(b[i].read_value(), a[i].read_value(), 1e-5) << i;
}

}  // namespace
}  // namespace tg
