// The helpers the demos share (demo.cpp, cnn_demo.cpp, dist_demo.cpp): the MLP and the CNN and
// their train steps, timing, section titles, batches and the epoch loop. tg_bench includes it
// too, to time the demos' steps.
#pragma once
#include <tracegraph/tracegraph.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

namespace demo {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The flagship demo's 784-256-256-10 MLP (relu, fixed seeds): demo.cpp trains it in one
// process, dist_demo.cpp on every rank of an MPI job. Its layers take the global dtype policy
// (float32 unless tg::nn::set_global_policy("mixed_bfloat16") ran before the model was built).
struct Mlp {
  tg::nn::Dense hidden1{784, 256, tg::relu, /*seed=*/1, tg::nn::global_policy(), "hidden1"};
  tg::nn::Dense hidden2{256, 256, tg::relu, /*seed=*/2, tg::nn::global_policy(), "hidden2"};
  tg::nn::Dense logits{256, 10, nullptr, /*seed=*/3, tg::nn::global_policy(), "logits"};

  tg::Tensor operator()(const tg::Tensor& x) const { return logits(hidden2(hidden1(x))); }
  std::vector<tg::Variable> variables() const {
    std::vector<tg::Variable> v;
    for (const auto* layer : {&hidden1, &hidden2, &logits})
      for (const auto& var : layer->trainable_variables()) v.push_back(var);
    return v;
  }
};

// The demo's training hyperparameters: Adam's learning rate and the batch size.
inline constexpr double kMlpLearningRate = 1e-3;
inline constexpr std::size_t kMlpBatch = 128;

// One optimisation step of the flagship demo: forward under a tape, backward, the optimizer's
// update; grad_scale, when given, multiplies every gradient. Returns (loss, accuracy). demo.cpp
// traces it as train_step; bench/workloads_bench.cpp times that (demo/train_step/traced) beside
// the same step driven from Python (bench/python_bench.py).
inline std::pair<tg::Tensor, tg::Tensor> mlp_train_step(Mlp& model, tg::optim::Optimizer& opt,
                                                        const tg::Tensor& x, const tg::Tensor& y,
                                                        const tg::Tensor& grad_scale = {}) {
  const std::vector<tg::Variable> vars = model.variables();
  tg::Tensor loss, accuracy;
  std::vector<tg::Tensor> grads;
  {
    tg::GradientTape tape;
    const tg::Tensor logits = model(x);
    loss = tg::nn::sparse_softmax_cross_entropy(logits, y);
    grads = tape.gradient(loss, vars);
    accuracy = tg::nn::accuracy(logits, y);
  }
  if (grad_scale.defined())
    for (auto& g : grads) g = g * grad_scale;
  opt.apply_gradients(grads, vars);
  return {loss, accuracy};
}

// The CNN demo's network (cnn_demo.cpp; the same as examples/cnn_torch.py): conv(32, 3x3) ->
// pool 2 -> conv(64, 3x3) -> pool 2 -> dense 128 -> dropout -> dense 10, relu, fixed seeds. Its
// layers take the global dtype policy, as Mlp's.
inline constexpr std::size_t kCnnBatch = 128;
inline constexpr double kCnnDropout = 0.25;
inline constexpr double kCnnLearningRate = 1e-3;

struct Cnn {
  tg::nn::Conv2D conv1{1, 32, {3}, {.padding = tg::Padding::Same, .activation = tg::relu, .seed = 11, .name = "conv1"}};
  tg::nn::Conv2D conv2{32, 64, {3}, {.padding = tg::Padding::Same, .activation = tg::relu, .seed = 12, .name = "conv2"}};
  tg::nn::Dense hidden{7 * 7 * 64, 128, tg::relu, /*seed=*/13, tg::nn::global_policy(), "hidden"};
  tg::nn::Dropout dropout{kCnnDropout, /*seed=*/14};
  tg::nn::Dense logits{128, 10, nullptr, /*seed=*/15, tg::nn::global_policy(), "logits"};

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

// One optimisation step of the CNN demo (training mode: dropout on). Returns (loss, accuracy).
inline std::pair<tg::Tensor, tg::Tensor> cnn_train_step(Cnn& model, tg::optim::Optimizer& opt, const tg::Tensor& x,
                                                        const tg::Tensor& y) {
  const std::vector<tg::Variable> vars = model.variables();
  tg::GradientTape tape;
  const tg::Tensor logits = model(x, /*training=*/true);
  const tg::Tensor loss = tg::nn::sparse_softmax_cross_entropy(logits, y);
  const std::vector<tg::Tensor> grads = tape.gradient(loss, vars);
  opt.apply_gradients(grads, vars);
  return {loss, tg::nn::accuracy(logits, y)};
}

// train_step's input signature: images [None, 784] float32, labels [None] int32. The batch
// dimension is None so that the last, smaller batch of an epoch reuses the same trace.
inline std::vector<tg::TensorSpec> mlp_train_step_signature() {
  return {tg::TensorSpec({tg::None, 784}, tg::float32), tg::TensorSpec({tg::None}, tg::int32)};
}

inline void section(const std::string& title) { std::cout << "\n== " << title << " ==\n"; }

// Rows `idx[begin, begin + n)` of the data set: one batch.
inline std::pair<tg::Tensor, tg::Tensor> batch(const tg::data::LabeledImages& ds, const std::vector<int32_t>& idx,
                                               std::size_t begin, std::size_t n) {
  const std::vector<int32_t> rows(idx.begin() + static_cast<std::ptrdiff_t>(begin),
                                  idx.begin() + static_cast<std::ptrdiff_t>(begin + n));
  const tg::Tensor r = tg::constant(rows, {static_cast<int64_t>(n)});
  return {tg::gather(ds.images, r), tg::gather(ds.labels, r)};
}

// What one epoch of training saw: sums over its examples, so a caller can print any mean.
struct EpochTotals {
  double loss_sum = 0, accuracy_sum = 0;  // train_step's batch means, each times its batch size
  std::size_t examples = 0;
  double seconds = 0;
};

// One pass of train_step(x, y) -> (loss, accuracy) over the rows order[first, end), in batches of
// batch_size (the last may be smaller).
template <class Step>
EpochTotals train_epoch(Step& train_step, const tg::data::LabeledImages& ds, const std::vector<int32_t>& order,
                        std::size_t first, std::size_t batch_size) {
  EpochTotals totals;
  const auto t0 = Clock::now();
  for (std::size_t b = first; b < order.size(); b += batch_size) {
    const std::size_t n = std::min(batch_size, order.size() - b);
    auto [x, y] = batch(ds, order, b, n);
    auto [loss, accuracy] = train_step(x, y);
    totals.loss_sum += loss.template item<float>() * static_cast<double>(n);
    totals.accuracy_sum += accuracy.template item<float>() * static_cast<double>(n);
    totals.examples += n;
  }
  totals.seconds = seconds_since(t0);
  return totals;
}

// The median of n timed calls of f, in milliseconds: steadier than the mean when another
// process takes a core for a moment.
template <class F>
double median_ms(F&& f, int n) {
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    const auto t0 = Clock::now();
    f();
    ms.push_back(seconds_since(t0) * 1e3);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace demo
