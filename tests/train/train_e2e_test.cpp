// End to end: a small MLP learns a separable synthetic problem stored as gzipped IDX files,
// eagerly and as a traced train_step (GradientTape inside the function); both take the same
// steps, with the same losses, and reach high test accuracy.
#include <random>

#include "support/test_util.h"
#include "train/idx_files.h"

namespace tg {
namespace {

using testing::idx_bytes;
using testing::TempDir;

// Class k of 4 lights up quadrant k of a 4x4 image; every other pixel is dim noise.
void write_split(const TempDir& dir, const std::string& split, uint32_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dim(0, 90), bright(150, 255), cls(0, 3);
  std::vector<uint8_t> pixels, labels;
  for (uint32_t i = 0; i < n; ++i) {
    const int k = cls(rng);
    labels.push_back(static_cast<uint8_t>(k));
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 4; ++c) {
        const int quadrant = (r / 2) * 2 + c / 2;
        pixels.push_back(static_cast<uint8_t>(quadrant == k ? bright(rng) : dim(rng)));
      }
  }
  dir.write(split + "-images-idx3-ubyte.gz", idx_bytes(0x08, {n, 4, 4}, pixels), true);
  dir.write(split + "-labels-idx1-ubyte.gz", idx_bytes(0x08, {n}, labels), true);
}

struct Mlp {
  nn::Dense hidden{16, 16, relu, 1, float32, "hidden"};
  nn::Dense out{16, 4, nullptr, 2, float32, "out"};
  Tensor operator()(const Tensor& x) const { return out(hidden(x)); }
  std::vector<Variable> variables() const {
    return {hidden.kernel(), hidden.bias(), out.kernel(), out.bias()};
  }
};

Tensor train_step(Mlp& model, optim::Optimizer& opt, const Tensor& x, const Tensor& y) {
  const std::vector<Variable> vars = model.variables();
  Tensor loss;
  std::vector<Tensor> grads;
  {
    GradientTape tape;
    loss = nn::sparse_softmax_cross_entropy(model(x), y);
    grads = tape.gradient(loss, vars);
  }
  opt.apply_gradients(grads, vars);
  return loss;
}

TEST(TrainEndToEnd, EagerAndTracedTakeTheSameStepsAndLearn) {
  TempDir dir;
  write_split(dir, "train", 256, 1);
  write_split(dir, "t10k", 128, 2);
  const data::LabeledImages train = data::load_mnist(dir.path(""), "train");
  const data::LabeledImages test = data::load_mnist(dir.path(""), "t10k");
  ASSERT_EQ(train.images.shape(), TensorShape({256, 16}));

  Mlp eager_model, traced_model;
  optim::Adam eager_opt(0.02), traced_opt(0.02);
  auto traced_step = function(
      [&](const Tensor& x, const Tensor& y) { return train_step(traced_model, traced_opt, x, y); },
      {.name = "train_step"});

  float first_loss = 0, last_loss = 0;
  for (int step = 0; step < 40; ++step) {
    const int64_t begin = (step % 4) * 64;
    const Tensor x = slice(train.images, {begin, 0}, {64, -1});
    const Tensor y = slice(train.labels, {begin}, {64});
    const float le = train_step(eager_model, eager_opt, x, y).item<float>();
    const float lt = traced_step(x, y).item<float>();
    ASSERT_NEAR(le, lt, 1e-5f * (1 + std::abs(le))) << "step " << step;
    if (step == 0) first_loss = le;
    last_loss = le;
  }
  EXPECT_EQ(traced_step.tracing_count(), 1);
  EXPECT_LT(last_loss, 0.25f * first_loss);
  for (const auto& [a, b] : {std::pair{eager_model.hidden.kernel(), traced_model.hidden.kernel()},
                             std::pair{eager_model.out.bias(), traced_model.out.bias()}})
    EXPECT_TENSOR_NEAR(a.read_value(), b.read_value(), 1e-4);
  const float eager_acc = nn::accuracy(eager_model(test.images), test.labels).item<float>();
  const float traced_acc = nn::accuracy(traced_model(test.images), test.labels).item<float>();
  EXPECT_GE(eager_acc, 0.95f);
  EXPECT_GE(traced_acc, 0.95f);
}

TEST(TrainEndToEnd, GuideTrainStepWithTheTape) {
  // The guide's example with a real gradient: L = sum((w x - y)^2), dL/dw = sum(2 (w x - y) x).
  Variable w(constant(2.0f), "w");
  const Tensor x = constant({-1.0f}), y = constant({2.0f});
  optim::SGD opt(0.1);
  auto step = function([&](Variable w, const Tensor& x, const Tensor& y) {
    std::vector<Tensor> grads;
    {
      GradientTape tape;
      const Tensor loss = reduce_sum(square(w * x - y));
      grads = tape.gradient(loss, std::vector<Variable>{w});
    }
    opt.apply_gradients(grads, {w});
  });
  step(w, x, y);  // g = 2 * (-2 - 2) * -1 = 8; w = 2 - 0.8
  EXPECT_NEAR(w.read_value().item<float>(), 1.2f, 1e-6);
  step(w, x, y);  // g = 2 * (-1.2 - 2) * -1 = 6.4; w = 1.2 - 0.64
  EXPECT_NEAR(w.read_value().item<float>(), 0.56f, 1e-6);
  EXPECT_EQ(step.tracing_count(), 1);
}

}  // namespace
}  // namespace tg
