// The second demo (`./tg demo` runs it after the MLP): a small CNN - two conv + max-pool blocks,
// a dense layer with dropout, the classifier - learns Fashion-MNIST with a traced train_step,
// then its step time is compared with the same step run eagerly and, when python3-torch is
// installed, with PyTorch running the same network; last, the same network is trained again
// under the mixed_bfloat16 policy and its test accuracy and step time are printed beside float32's.
//
//   tg_cnn_demo [DATA_DIR] [EPOCHS]    DATA_DIR defaults to /usr/share/datasets/fashion-mnist, EPOCHS to 5
#include <tracegraph/tracegraph.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
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

constexpr auto kBatch = static_cast<int64_t>(kCnnBatch);

// The traced train step and prediction of one model; the batch dim None, so that the last,
// smaller batch of an epoch and the test set's slices reuse one trace.
auto make_train_step(Cnn& model, tg::optim::Optimizer& opt, const char* name) {
  return tg::function([&model, &opt](const tg::Tensor& x, const tg::Tensor& y) { return cnn_train_step(model, opt, x, y); },
                      {.name = name,
                       .input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None, 784}, tg::float32),
                                                                      tg::TensorSpec({tg::None}, tg::int32)},
                       .arg_names = {"x", "y"}});
}
auto make_predict(Cnn& model) {
  return tg::function([&model](const tg::Tensor& x) { return model(x, /*training=*/false); },
                      {.name = "cnn_predict",
                       .input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None, 784}, tg::float32)},
                       .arg_names = {"x"}});
}

template <class Predict>
double test_accuracy(Predict& predict, const tg::data::LabeledImages& test) {
  int64_t hits = 0;
  for (int64_t b = 0; b < test.size(); b += 1000) {
    const int64_t n = std::min<int64_t>(1000, test.size() - b);
    const tg::Tensor x = tg::slice(test.images, {b, 0}, {n, 784});
    const tg::Tensor y = tg::slice(test.labels, {b}, {n});
    const tg::Tensor logits = predict(x);
    hits += static_cast<int64_t>(std::lround(tg::nn::accuracy(logits, y).item<float>() * static_cast<float>(n)));
  }
  return static_cast<double>(hits) / static_cast<double>(test.size());
}

// Trains a model from the seeded shuffles every run shares: eager steps first (the first creates
// Adam's slots outside the trace), then epochs of the traced step, a line per epoch. Returns the
// final test accuracy; `order` ends as the last epoch's.
template <class Step, class Predict>
double train_model(Cnn& model, tg::optim::Optimizer& opt, Step& train_step, Predict& predict,
                   const tg::data::LabeledImages& train, const tg::data::LabeledImages& test, int epochs,
                   std::vector<int32_t>& order) {
  std::mt19937 rng(2024);
  order.resize(static_cast<std::size_t>(train.size()));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  constexpr std::size_t kEagerSteps = 3;
  for (std::size_t s = 0; s < kEagerSteps; ++s) {
    auto [x, y] = batch(train, order, s * kCnnBatch, kCnnBatch);
    std::cout << "  eager step " << s + 1 << ": loss " << std::setprecision(4)
              << cnn_train_step(model, opt, x, y).first.template item<float>() << "\n";
  }
  double accuracy = 0;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    if (epoch > 1) std::shuffle(order.begin(), order.end(), rng);
    const std::size_t first = epoch == 1 ? kEagerSteps * kCnnBatch : 0;
    const EpochTotals totals = train_epoch(train_step, train, order, first, kCnnBatch);
    accuracy = test_accuracy(predict, test);
    std::cout << std::fixed << "epoch " << epoch << "/" << epochs << ": loss " << std::setprecision(4)
              << totals.loss_sum / totals.examples << "  train accuracy " << std::setprecision(1)
              << 100 * totals.accuracy_sum / totals.examples << "%  test accuracy " << 100 * accuracy << "%  "
              << std::setprecision(0) << totals.examples / totals.seconds << " examples/s (" << std::setprecision(1)
              << totals.seconds << " s)" << std::endl;
  }
  return accuracy;
}

// The same network trained again from the same initial weights and shuffles under Keras's
// mixed_bfloat16 policy: convolutions and products in bfloat16 on the CPU's AVX512_BF16 units
// (where it has them), Variables, gradients and Adam's updates in float32.
void mixed_precision_section(const tg::data::LabeledImages& train, const tg::data::LabeledImages& test, int epochs,
                             double float32_accuracy, double float32_step_ms) {
  section("The same CNN in mixed precision (tg::nn::set_global_policy(\"mixed_bfloat16\"))");
  const tg::nn::DTypePolicy before = tg::nn::global_policy();
  tg::nn::set_global_policy("mixed_bfloat16");
  Cnn model;
  tg::nn::set_global_policy(before);
  tg::optim::Adam opt(kCnnLearningRate);
  auto train_step = make_train_step(model, opt, "cnn_mixed_train_step");
  auto predict = make_predict(model);
  std::vector<int32_t> order;
  const double accuracy = train_model(model, opt, train_step, predict, train, test, epochs, order);
  auto [x, y] = batch(train, order, 0, kCnnBatch);
  const double step_ms = median_ms([&] { (void)train_step(x, y).first.item<float>(); }, 20);
  const double gap = 100 * std::abs(accuracy - float32_accuracy);
  std::cout << std::setprecision(2) << "Weights " << model.conv1.kernel().dtype() << ", layer outputs "
            << predict(tg::slice(test.images, {0, 0}, {1, 784})).dtype() << ". Test accuracy after " << epochs
            << " epochs: " << 100 * accuracy << "% (float32: " << 100 * float32_accuracy << "%, "
            << (gap <= 0.5 ? "within" : "NOT within") << " 0.5 points); traced step " << step_ms << " ms (float32: "
            << float32_step_ms << " ms, " << float32_step_ms / step_ms << "x)\n";
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
  tg::optim::Adam opt(kCnnLearningRate);
  std::cout << "Model: conv 3x3x32 (same, relu) -> max-pool 2 -> conv 3x3x64 (same, relu) -> max-pool 2 -> dense 128 "
               "(relu) -> dropout "
            << kCnnDropout << " -> dense 10; " << model.parameter_count() << " parameters; Adam(lr=0.001); batch "
            << kBatch << "; " << tg::config::num_threads() << " threads\n";

  auto train_step = make_train_step(model, opt, "cnn_train_step");
  auto predict = make_predict(model);

  section("Training");
  std::vector<int32_t> order;
  const double final_accuracy = train_model(model, opt, train_step, predict, train, test, epochs, order);
  std::cout << "\nTest accuracy after " << epochs << " epochs: " << std::setprecision(2) << 100 * final_accuracy
            << "% (the target is 90%: " << (final_accuracy >= 0.90 ? "reached" : "NOT reached") << "); train_step traced "
            << train_step.tracing_count() << " time, predict " << predict.tracing_count() << " time\n";

  section("Step time: eager vs traced vs PyTorch (the same batch of 128, median of 20 steps each)");
  double traced_ms = 0;
  {
    auto [x, y] = batch(train, order, 0, kBatch);
    const double eager_ms = median_ms([&] { (void)cnn_train_step(model, opt, x, y).first.item<float>(); }, 20);
    traced_ms = median_ms([&] { (void)train_step(x, y).first.item<float>(); }, 20);
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
  mixed_precision_section(train, test, epochs, final_accuracy, traced_ms);
  std::cout << "\nCNN demo finished in " << std::setprecision(1) << seconds_since(demo_start) << " s\n";
  return final_accuracy >= 0.90 ? 0 : 2;
}
