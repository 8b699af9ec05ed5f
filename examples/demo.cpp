// The flagship demo (`./tg demo`): a 784-256-256-10 MLP learns Fashion-MNIST with a traced
// train_step (GradientTape and Adam inside one tg::function), then a train_step with a C++
// literal step counter shows the retracing diagnostics and their fix.
//
// After training it exports the model: a second process (the tgx tool) classifies the test set
// from the saved file, and the saved train_step resumes training in this one.
//
//   tg_demo [DATA_DIR] [EPOCHS] [OUT_DIR]    DATA_DIR defaults to /usr/share/datasets/fashion-mnist,
//                                            OUT_DIR (the exported files) to $TMPDIR/tracegraph-demo
#include <tracegraph/tracegraph.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "demo_util.h"

namespace {

using namespace demo;  // the helpers both demos share

// Collects tracegraph's diagnostics (retrace lines, warnings) instead of printing to stderr.
std::vector<std::string> g_log;
void capture_log(const std::string& message, void*) { g_log.push_back(message); }

void print_wrapped(const std::string& text, const std::string& indent) {
  std::string line;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && line.size() + 1 + word.size() > 96) {
      std::cout << indent << line << "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    start = end + 1;
  }
  if (!line.empty()) std::cout << indent << line << "\n";
}

// Export: the trained classifier and train_step saved to .tgx files; the tgx tool, a separate
// process, classifies the test set from .npy files; the saved train_step, loaded back, trains on
// (a restart); its Variables, checkpointed by name, go into a fresh model.
template <class Step>
void export_section(const std::string& out, Mlp& model, Step& train_step, const tg::data::LabeledImages& train,
                    const tg::data::LabeledImages& test, const std::vector<int32_t>& order, std::size_t batch_size) {
  section("Export: save, classify in another process, resume training from the file");
  std::filesystem::create_directories(out);
  auto classify = tg::function([&](const tg::Tensor& x) { return model(x); },
                               {.name = "classify",
                                .input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None, 784}, tg::float32)},
                                .arg_names = {"images"}});
  const tg::Tensor logits = classify(test.images);
  const float here = tg::nn::accuracy(logits, test.labels).item<float>();
  auto t0 = Clock::now();
  tg::save(out + "/classify.tgx", classify);
  tg::save(out + "/train_step.tgx", train_step);
  const double save_s = seconds_since(t0);
  tg::save_npy(out + "/test_images.npy", test.images);
  tg::save_npy(out + "/test_labels.npy", test.labels);
  tg::save_npy(out + "/expected_logits.npy", logits);
  std::cout << "Saved classify.tgx (" << std::filesystem::file_size(out + "/classify.tgx") / 1024 << " KiB) and "
            << "train_step.tgx (" << std::filesystem::file_size(out + "/train_step.tgx") / 1024 << " KiB, with Adam's state) to "
            << out << " in " << std::setprecision(3) << save_s << " s\n";
#ifdef TG_TGX_PATH
  // The second process: the installed command-line tool, knowing nothing of this program.
  const std::string command = std::string(TG_TGX_PATH) + " run " + out + "/classify.tgx --input images=" + out +
                              "/test_images.npy --output-dir " + out + "/tgx-out --expect output_0=" + out +
                              "/expected_logits.npy --rtol 1e-5 --atol 1e-5";
  std::cout << "$ tgx run classify.tgx --input images=test_images.npy --output-dir tgx-out --expect output_0=expected_logits.npy\n";
  std::cout.flush();
  const int rc = std::system(command.c_str());
  if (rc != 0) {
    std::cout << "tgx exited with status " << rc << "\n";
  } else {
    const tg::Tensor theirs = tg::load_npy(out + "/tgx-out/output_0.npy");
    const float there = tg::nn::accuracy(theirs, test.labels).item<float>();
    std::cout << std::setprecision(2) << "Test accuracy: " << 100 * here << "% in this process, " << 100 * there
              << "% from tgx's output_0.npy (" << (here == there ? "the same" : "DIFFERENT") << ")\n";
  }
#else
  std::cout << "Test accuracy " << std::setprecision(2) << 100 * here << "% (tgx was not built: TG_BUILD_TOOLS=OFF)\n";
#endif

  t0 = Clock::now();
  tg::LoadedFunction resumed = tg::load(out + "/train_step.tgx");
  std::cout << "Loaded train_step.tgx in " << std::setprecision(1) << seconds_since(t0) * 1e3 << " ms: "
            << resumed.variables().size() << " Variables, signature " << resumed.signatures().front() << "\n";
  auto resumed_step = [&](const tg::Tensor& x, const tg::Tensor& y) {
    const tg::Outputs loss_and_accuracy = resumed(x, y);
    return std::pair{loss_and_accuracy[0], loss_and_accuracy[1]};
  };
  const EpochTotals totals = train_epoch(resumed_step, train, order, 0, batch_size);
  tg::save_variables(out + "/resumed.ckpt.tgx", resumed.variables());
  Mlp fresh;
  tg::restore_variables(out + "/resumed.ckpt.tgx", fresh.variables());
  const float resumed_acc = tg::nn::accuracy(fresh(test.images), test.labels).item<float>();
  std::cout << "One more epoch with the loaded train_step: loss " << std::setprecision(4)
            << totals.loss_sum / totals.examples << ", " << std::setprecision(0) << totals.examples / totals.seconds
            << " examples/s; its Variables checkpointed and restored "
            << "by name into a fresh model: test accuracy " << std::setprecision(2) << 100 * resumed_acc << "%\n";
}

}  // namespace

// Trains `model` from the seeded shuffles every run shares: 5 eager steps first (the first
// creates Adam's slot Variables outside the trace; on_eager(step, loss) sees each), then `epochs`
// of train_step as a graph, on_epoch(epoch, totals) after each. `order` ends as the last epoch's.
template <class Step, class OnEager, class OnEpoch>
void train_mlp(Mlp& model, tg::optim::Optimizer& opt, Step& train_step, const tg::data::LabeledImages& train,
               int epochs, std::size_t batch_size, std::vector<int32_t>& order, OnEager&& on_eager, OnEpoch&& on_epoch) {
  std::mt19937 rng(2024);
  order.resize(static_cast<std::size_t>(train.size()));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  for (std::size_t s = 0; s < 5; ++s) {
    auto [x, y] = batch(train, order, s * batch_size, batch_size);
    on_eager(s, mlp_train_step(model, opt, x, y).first);
  }
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    if (epoch > 1) std::shuffle(order.begin(), order.end(), rng);
    const std::size_t first = epoch == 1 ? 5 * batch_size : 0;  // the eager steps count in epoch 1
    on_epoch(epoch, train_epoch(train_step, train, order, first, batch_size));
  }
}

// The same model trained again from the same initial weights and shuffles under Keras's
// mixed_bfloat16 policy: Dense computes in bfloat16 (products on the CPU's AVX512_BF16 units
// where it has them) while its Variables, their gradients and Adam's updates stay float32.
void mixed_precision_section(const tg::data::LabeledImages& train, const tg::data::LabeledImages& test,
                             int epochs, std::size_t batch_size, float float32_accuracy, double float32_step_ms) {
  section("The same MLP in mixed precision (tg::nn::set_global_policy(\"mixed_bfloat16\"))");
  const tg::nn::DTypePolicy before = tg::nn::global_policy();
  tg::nn::set_global_policy("mixed_bfloat16");
  Mlp model;
  tg::nn::set_global_policy(before);
  tg::optim::Adam opt(kMlpLearningRate);
  auto train_step = tg::function(
      [&](const tg::Tensor& x, const tg::Tensor& y) { return mlp_train_step(model, opt, x, y); },
      {.name = "mixed_train_step", .input_signature = mlp_train_step_signature(), .arg_names = {"x", "y"}});
  std::vector<int32_t> order;
  train_mlp(model, opt, train_step, train, epochs, batch_size, order, [](std::size_t, const tg::Tensor&) {},
            [](int, const EpochTotals&) {});
  const float accuracy = tg::nn::accuracy(model(test.images), test.labels).item<float>();
  auto [x, y] = batch(train, order, 0, batch_size);
  const double step_ms = median_ms([&] { (void)train_step(x, y).first.item<float>(); }, 30);
  std::cout << std::setprecision(2) << "Weights " << model.hidden1.kernel().dtype() << ", layer outputs "
            << model(test.images).dtype() << ". Test accuracy after " << epochs << " epochs: " << 100 * accuracy
            << "% (float32: " << 100 * float32_accuracy << "%); traced step " << step_ms << " ms (float32: "
            << float32_step_ms << " ms, " << float32_step_ms / step_ms << "x)\n";
}

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : tg::data::kFashionMnistDir;
  const int epochs = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  const std::string out_dir = argc > 3 ? argv[3] : (std::filesystem::temp_directory_path() / "tracegraph-demo").string();
  constexpr std::size_t kBatch = kMlpBatch;
  const auto demo_start = Clock::now();

  std::cout << "tracegraph demo: a Fashion-MNIST classifier trained by a traced train_step\n";
  section("Data");
  tg::data::LabeledImages train, test;
  try {
    const auto t0 = Clock::now();
    train = tg::data::load_mnist(dir, "train");
    test = tg::data::load_mnist(dir, "t10k");
    std::cout << "Read " << train.size() << " training and " << test.size()
              << " test images (28x28, gzipped IDX files in " << dir << ") in "
              << std::fixed << std::setprecision(2) << seconds_since(t0) << " s\n";
  } catch (const tg::Error& e) {
    std::cout << "\nThe Fashion-MNIST files are missing or unreadable:\n  " << e.what() << "\n\n"
              << "Install Debian's package (./tg demo does this for you):\n"
              << "  sudo apt-get install dataset-fashion-mnist\n"
              << "or pass the directory that holds train-images-idx3-ubyte[.gz] etc.:\n"
              << "  " << argv[0] << " /path/to/fashion-mnist\n";
    return 1;
  }

  Mlp model;
  tg::optim::Adam opt(kMlpLearningRate);
  std::cout << "Model: 784-256-256-10 MLP (relu), 269,322 parameters, Glorot-uniform init; "
               "Adam(lr=0.001); batch "
            << kBatch << "; shuffled with a seeded std::mt19937\n";

  // The traced train_step. The batch dimension is None so that the last, smaller batch of an
  // epoch reuses the same trace.
  auto train_step = tg::function(
      [&](const tg::Tensor& x, const tg::Tensor& y) { return mlp_train_step(model, opt, x, y); },
      {.name = "train_step", .input_signature = mlp_train_step_signature(), .arg_names = {"x", "y"}});

  section("Training");
  std::cout << "The first 5 steps run eagerly (the first creates Adam's slot Variables), then "
               "train_step runs as a graph.\n";
  std::vector<int32_t> order;
  auto print_eager = [](std::size_t s, const tg::Tensor& loss) {
    std::cout << "  eager step " << s + 1 << ": loss " << std::setprecision(4) << loss.item<float>() << "\n";
  };
  train_mlp(model, opt, train_step, train, epochs, kBatch, order, print_eager, [&](int epoch, const EpochTotals& totals) {
    const float test_acc = tg::nn::accuracy(model(test.images), test.labels).item<float>();
    std::cout << "epoch " << epoch << "/" << epochs << ": loss " << std::setprecision(4)
              << totals.loss_sum / totals.examples << "  train accuracy " << std::setprecision(1)
              << 100 * totals.accuracy_sum / totals.examples << "%  test accuracy " << 100 * test_acc << "%  "
              << std::setprecision(0) << totals.examples / totals.seconds << " examples/s (" << std::setprecision(1)
              << totals.seconds << " s)\n";
  });
  const float test_acc = tg::nn::accuracy(model(test.images), test.labels).item<float>();
  std::cout << "\nTest accuracy after " << epochs << " epochs: " << std::setprecision(2)
            << 100 * test_acc << "% on " << test.size() << " images\n";
  std::cout << "train_step was traced " << train_step.tracing_count()
            << (train_step.tracing_count() == 1 ? " time (" : " times (")
            << train_step.trace_history().front().reason << "); Adam created "
            << opt.variables().size() << " Variables (learning rate, step counter, m and v "
            << "for 6 weights); step counter = " << opt.iterations() << "\n";

  export_section(out_dir, model, train_step, train, test, order, kBatch);

  section("Step time, eager vs traced vs its matrix products alone (the same batch, median of 30 steps each)");
  double traced_ms = 0;
  {
    auto [x, y] = batch(train, order, 0, kBatch);
    const double eager_ms = median_ms([&] { (void)mlp_train_step(model, opt, x, y).first.item<float>(); }, 30);
    traced_ms = median_ms([&] { (void)train_step(x, y).first.item<float>(); }, 30);
    // The floor for this step: its eight matrix products (three forward; for each layer the
    // weight gradient, and the input gradient of the upper two) on operands of the same shapes,
    // nothing else.
    const int64_t b = kBatch;
    const tg::Tensor w1 = tg::ones({784, 256}), w2 = tg::ones({256, 256}), w3 = tg::ones({256, 10});
    const tg::Tensor h1 = tg::ones({b, 256}), h2 = tg::ones({b, 256}), d3 = tg::ones({b, 10});
    const double gemm_ms = median_ms([&] {
      (void)tg::matmul(x, w1);
      (void)tg::matmul(h1, w2);
      (void)tg::matmul(h2, w3);
      (void)tg::matmul(h2, d3, true, false);
      (void)tg::matmul(d3, w3, false, true);
      (void)tg::matmul(h1, h2, true, false);
      (void)tg::matmul(h2, w2, false, true);
      (void)tg::matmul(x, h1, true, false);
    }, 30);
    std::cout << std::setprecision(2) << "eager : " << eager_ms << " ms/step\ntraced: " << traced_ms
              << " ms/step (" << eager_ms / traced_ms << "x faster than eager)\nits 8 matrix products alone: " << gemm_ms
              << " ms (the traced step costs " << traced_ms / gemm_ms << "x its matrix products; "
              << tg::config::num_threads() << " threads)\n";
  }

  mixed_precision_section(train, test, epochs, kBatch, test_acc, traced_ms);

  section("A deliberately bad train_step: the step counter as a C++ int");
  tg::config::set_log_sink(&capture_log);
  tg::config::log_retraces(true);
  // The warm-up factor is computed in C++ from a literal: every new step value is a new trace
  // type, and the factor is baked into each graph as a constant.
  auto bad_step = tg::function(
      [&](const tg::Tensor& x, const tg::Tensor& y, int step) {
        const float warmup = std::min(1.0f, static_cast<float>(step + 1) / 10.0f);
        return mlp_train_step(model, opt, x, y, tg::constant(warmup)).first;
      },
      {.name = "bad_train_step", .arg_names = {"x", "y", "step"}});
  {
    auto [x, y] = batch(train, order, 0, kBatch);
    const auto t0 = Clock::now();
    for (int step = 0; step < 10; ++step) bad_step(x, y, step);
    std::cout << "10 calls took " << std::setprecision(2) << seconds_since(t0) << " s and traced "
              << bad_step.tracing_count() << " times. trace_history():\n";
  }
  for (const auto& rec : bad_step.trace_history())
    if (rec.index < 3 || rec.index == bad_step.tracing_count() - 1)
      std::cout << "  #" << rec.index << ": " << rec.reason << "\n";
    else if (rec.index == 3)
      std::cout << "  ...\n";
  std::cout << "Diagnostics logged by tracegraph (TG_LOG=retrace lines and the warning):\n";
  bool warned = false;
  for (std::size_t i = 0; i < g_log.size(); ++i) {
    const bool warning = g_log[i].rfind("tracegraph warning", 0) == 0;
    if (i < 2 || (warning && !warned)) print_wrapped(g_log[i], "  ");
    else if (i == 2) std::cout << "  ...\n";
    warned = warned || warning;
  }
  std::cout << "  (" << g_log.size() << " messages in all)\n";
  std::cout << "suggested_input_signature(): "
            << (bad_step.suggested_input_signature() ? "present" : "none (a literal varied: no "
                                                                   "signature fixes that)")
            << "\n";
  g_log.clear();

  section("The fix: pass the counter as a tensor");
  auto good_step = tg::function(
      [&](const tg::Tensor& x, const tg::Tensor& y, const tg::Tensor& step) {
        const tg::Tensor warmup =
            tg::minimum(tg::constant(1.0f), (tg::cast(step, tg::float32) + 1.0f) / 10.0f);
        return mlp_train_step(model, opt, x, y, warmup).first;
      },
      {.name = "good_train_step", .arg_names = {"x", "y", "step"}});
  {
    auto [x, y] = batch(train, order, 0, kBatch);
    const auto t0 = Clock::now();
    for (int step = 0; step < 10; ++step) good_step(x, y, tg::constant(step));
    std::cout << "10 calls took " << std::setprecision(2) << seconds_since(t0) << " s and traced "
              << good_step.tracing_count() << " time: " << good_step.trace_history().front().reason
              << "; no retrace lines or warnings were logged (" << g_log.size() << " messages)\n";
  }
  tg::config::log_retraces(false);
  tg::config::set_log_sink(nullptr);

  std::cout << "\nDemo finished in " << std::setprecision(1) << seconds_since(demo_start) << " s\n";
  return 0;
}
