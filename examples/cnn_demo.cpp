// The second demo (`./tg demo` runs it after the MLP): a small CNN - two conv + max-pool blocks,
// a dense layer with dropout, the classifier - learns Fashion-MNIST with a traced train_step,
// then its step time is compared with the same step run eagerly and, when python3-torch is
// installed, with PyTorch running the same network.
//
//   tg_cnn_demo [DATA_DIR] [EPOCHS]    DATA_DIR defaults to /usr/share/datasets/fashion-mnist, EPOCHS to 5
#include <tracegraph/tracegraph.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "demo_util.h"

namespace {

using namespace demo;  // the helpers both demos share

constexpr int64_t kBatch = 128;
constexpr double kDropout = 0.25;

// conv(32, 3x3) -> pool 2 -> conv(64, 3x3) -> pool 2 -> dense 128 -> dropout -> dense 10.
// The same network as examples/cnn_torch.py.
struct Cnn {
  tg::nn::Conv2D conv1{1, 32, {3}, {.padding = tg::Padding::Same, .activation = tg::relu, .seed = 11, .name = "conv1"}};
  tg::nn::Conv2D conv2{32, 64, {3}, {.padding = tg::Padding::Same, .activation = tg::relu, .seed = 12, .name = "conv2"}};
  tg::nn::Dense hidden{7 * 7 * 64, 128, tg::relu, /*seed=*/13, tg::float32, "hidden"};
  tg::nn::Dropout dropout{kDropout, /*seed=*/14};
  tg::nn::Dense logits{128, 10, nullptr, /*seed=*/15, tg::float32, "logits"};

  // x: (batch, 784) pixels in [0, 1].
  tg::Tensor operator()(const tg::Tensor& x, bool training) const {
    tg::Tensor h = tg::reshape(x, {-1, 28, 28, 1});
    h = tg::max_pool2d(conv1(h), {2}, {2}, tg::Padding::Valid);  // (batch, 14, 14, 32)
    h = tg::max_pool2d(conv2(h), {2}, {2}, tg::Padding::Valid);  // (batch, 7, 7, 64)
    h = hidden(tg::reshape(h, {-1, 7 * 7 * 64}));
    return logits(dropout(h, training));
  }
  std::vector<tg::Variable> variables() const {
    std::vector<tg::Variable> v;
    for (const auto& var : conv1.trainable_variables()) v.push_back(var);
    for (const auto& var : conv2.trainable_variables()) v.push_back(var);
    for (const auto& var : hidden.trainable_variables()) v.push_back(var);
    for (const auto& var : logits.trainable_variables()) v.push_back(var);
    return v;
  }
  int64_t parameter_count() const {
    int64_t n = 0;
    for (const auto& var : variables()) n += var.shape().num_elements();
    return n;
  }
};

std::pair<tg::Tensor, tg::Tensor> step_body(Cnn& model, tg::optim::Optimizer& opt, const tg::Tensor& x,
                                            const tg::Tensor& y) {
  const std::vector<tg::Variable> vars = model.variables();
  tg::GradientTape tape;
  const tg::Tensor logits = model(x, /*training=*/true);
  const tg::Tensor loss = tg::nn::sparse_softmax_cross_entropy(logits, y);
  const std::vector<tg::Tensor> grads = tape.gradient(loss, vars);
  opt.apply_gradients(grads, vars);
  return {loss, tg::nn::accuracy(logits, y)};
}

// PyTorch's median step time (ms) for the same network, batch and thread count, from
// examples/cnn_torch.py run with Debian's python3-torch; a negative value when torch is missing.
double torch_step_ms(int threads, int steps) {
#ifdef TG_CNN_TORCH_SCRIPT
  const std::string command = "/usr/bin/python3 " + std::string(TG_CNN_TORCH_SCRIPT) + " --batch " +
                              std::to_string(kBatch) + " --threads " + std::to_string(threads) + " --steps " +
                              std::to_string(steps) + " 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return -1;
  std::array<char, 256> line{};
  double ms = -1;
  while (std::fgets(line.data(), line.size(), pipe.get()))
    if (std::sscanf(line.data(), "torch_step_ms %lf", &ms) == 1) break;
  return ms;
#else
  (void)threads;
  (void)steps;
  return -1;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : tg::data::kFashionMnistDir;
  const int epochs = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  const auto demo_start = Clock::now();

  std::cout << "tracegraph CNN demo: a convolutional Fashion-MNIST classifier trained by a traced train_step\n";
  tg::data::LabeledImages train, test;
  try {
    train = tg::data::load_mnist(dir, "train");
    test = tg::data::load_mnist(dir, "t10k");
  } catch (const tg::Error& e) {
    std::cout << "\nThe Fashion-MNIST files are missing or unreadable:\n  " << e.what() << "\n"
              << "Install Debian's package (./tg demo does this for you): sudo apt-get install dataset-fashion-mnist\n";
    return 1;
  }

  Cnn model;
  tg::optim::Adam opt(1e-3);
  std::cout << "Model: conv 3x3x32 (same, relu) -> max-pool 2 -> conv 3x3x64 (same, relu) -> max-pool 2 -> dense 128 "
               "(relu) -> dropout "
            << kDropout << " -> dense 10; " << model.parameter_count() << " parameters; Adam(lr=0.001); batch " << kBatch
            << "; " << tg::config::num_threads() << " threads\n";

  auto train_step = tg::function([&](const tg::Tensor& x, const tg::Tensor& y) { return step_body(model, opt, x, y); },
                                 {.name = "cnn_train_step",
                                  .input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None, 784}, tg::float32),
                                                                                 tg::TensorSpec({tg::None}, tg::int32)},
                                  .arg_names = {"x", "y"}});
  auto predict = tg::function([&](const tg::Tensor& x) { return model(x, /*training=*/false); },
                              {.name = "cnn_predict",
                               .input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None, 784}, tg::float32)},
                               .arg_names = {"x"}});
  auto test_accuracy = [&] {
    int64_t hits = 0;
    for (int64_t b = 0; b < test.size(); b += 1000) {
      const int64_t n = std::min<int64_t>(1000, test.size() - b);
      const tg::Tensor x = tg::slice(test.images, {b, 0}, {n, 784});
      const tg::Tensor y = tg::slice(test.labels, {b}, {n});
      hits += static_cast<int64_t>(std::lround(tg::nn::accuracy(predict(x), y).item<float>() * static_cast<float>(n)));
    }
    return static_cast<double>(hits) / static_cast<double>(test.size());
  };

  section("Training");
  std::mt19937 rng(2024);
  std::vector<int32_t> order(static_cast<std::size_t>(train.size()));
  std::iota(order.begin(), order.end(), 0);
  // Eager steps first: the first creates Adam's slots outside the trace; then the graph runs.
  std::shuffle(order.begin(), order.end(), rng);
  constexpr std::size_t kEagerSteps = 3;
  for (std::size_t s = 0; s < kEagerSteps; ++s) {
    auto [x, y] = batch(train, order, s * kBatch, kBatch);
    std::cout << "  eager step " << s + 1 << ": loss " << std::setprecision(4)
              << step_body(model, opt, x, y).first.item<float>() << "\n";
  }
  double final_accuracy = 0;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    if (epoch > 1) std::shuffle(order.begin(), order.end(), rng);
    const std::size_t first = epoch == 1 ? kEagerSteps * kBatch : 0;
    const EpochTotals totals = train_epoch(train_step, train, order, first, kBatch);
    final_accuracy = test_accuracy();
    std::cout << std::fixed << "epoch " << epoch << "/" << epochs << ": loss " << std::setprecision(4)
              << totals.loss_sum / totals.examples << "  train accuracy " << std::setprecision(1)
              << 100 * totals.accuracy_sum / totals.examples << "%  test accuracy " << 100 * final_accuracy << "%  "
              << std::setprecision(0) << totals.examples / totals.seconds << " examples/s (" << std::setprecision(1)
              << totals.seconds << " s)" << std::endl;
  }
  std::cout << "\nTest accuracy after " << epochs << " epochs: " << std::setprecision(2) << 100 * final_accuracy
            << "% (the target is 90%: " << (final_accuracy >= 0.90 ? "reached" : "NOT reached") << "); train_step traced "
            << train_step.tracing_count() << " time, predict " << predict.tracing_count() << " time\n";

  section("Step time: eager vs traced vs PyTorch (the same batch of 128, median of 20 steps each)");
  {
    auto [x, y] = batch(train, order, 0, kBatch);
    const double eager_ms = median_ms([&] { (void)step_body(model, opt, x, y).first.item<float>(); }, 20);
    const double traced_ms = median_ms([&] { (void)train_step(x, y).first.item<float>(); }, 20);
    std::cout << std::setprecision(2) << "tracegraph eager : " << eager_ms << " ms/step\ntracegraph traced: " << traced_ms
              << " ms/step (eager / traced = " << eager_ms / traced_ms << "x; " << std::setprecision(0)
              << kBatch * 1000.0 / traced_ms << " examples/s)\n";
    const double torch_ms = torch_step_ms(tg::config::num_threads(), 20);
    if (torch_ms > 0)
      std::cout << std::setprecision(2) << "PyTorch eager    : " << torch_ms << " ms/step, the same network and batch, "
                << tg::config::num_threads() << " threads (traced tracegraph is " << torch_ms / traced_ms
                << "x PyTorch's speed)\n";
    else
      std::cout << "PyTorch: not measured (install Debian's python3-torch to compare)\n";
  }
  std::cout << "\nCNN demo finished in " << std::setprecision(1) << seconds_since(demo_start) << " s\n";
  return final_accuracy >= 0.90 ? 0 : 2;
}
