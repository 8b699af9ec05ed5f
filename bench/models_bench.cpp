// Models the older rows never saw (issue 36), each traced the way a user writes it from the docs:
// a transformer encoder block's train step, an LSTM's train step as the layer (one loop node)
// and as the cell called in a C++ loop (unrolled into the trace), a CNN's inference at batch
// 256, and an embedding text classifier's train step. bench/torch_bench.py builds the same
// models in PyTorch under the same names with "torch/" in front and its variants after them;
// bench/run sets them side by side with the machine's limits.
#include <cstdint>
#include <tuple>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_util.h"
#include "tracegraph/tracegraph.h"
#include "workloads.h"
#if TG_BENCH_HAVE_TAPE
#include "tracegraph/gradient.h"
#endif

#if TG_BENCH_HAVE_TAPE
namespace {

using tg::Tensor;
using tg::Variable;
namespace nn = tg::nn;
using tg_bench::random_tensor;

// Integer labels in [0, classes).
Tensor labels_of(int64_t n, int64_t classes) {
  std::vector<int32_t> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>((i * 7 + 3) % static_cast<std::size_t>(classes));
  return tg::constant(v, tg::TensorShape({n}), tg::int32);
}

// One eager step first (it makes the optimizer's slots, as a user's first step does), then the
// traced step timed; a step traced more than once is an error of the benchmark.
template <class Step>
void time_traced_step(benchmark::State& state, const char* name, Step step) {
  (void)step();
  auto traced = tg::function([&] { return step(); }, {.name = name});
  tg_bench::reach_steady_state([&] { benchmark::DoNotOptimize(traced()); });
  for (auto _ : state) benchmark::DoNotOptimize(traced());
  if (traced.tracing_count() != 1)
    throw std::runtime_error(std::string(name) + ": traced " + std::to_string(traced.tracing_count()) +
                             " times, expected once");
}

// The gradient step every train-step row shares: loss under a tape, then the optimizer.
template <class Loss>
Tensor apply_step(tg::optim::Optimizer& opt, const std::vector<Variable>& vars, Loss loss_fn) {
  Tensor loss;
  std::vector<Tensor> grads;
  {
    tg::GradientTape tape;
    loss = loss_fn();
    grads = tape.gradient(loss, vars);
  }
  opt.apply_gradients(grads, vars);
  return loss;
}

// ---- transformer encoder block: B16 T64 d128 h4 FFN512, GELU, post-norm, Adam ----------------
constexpr int64_t kTfBatch = 16, kTfTime = 64, kTfModel = 128, kTfHeads = 4, kTfFfn = 512;

void BM_TransformerStep(benchmark::State& state) {
  tg_bench::guarded(state, [&] {
    nn::TransformerEncoderLayer block(kTfModel, kTfHeads, kTfFfn,
                                      {.dropout = 0.0, .activation = "gelu", .seed = 1});
    tg::optim::Adam opt(1e-3);
    const Tensor x = random_tensor({kTfBatch, kTfTime, kTfModel}, 1.0f, 11);
    const Tensor target = random_tensor({kTfBatch, kTfTime, kTfModel}, 1.0f, 12);
    const std::vector<Variable> vars = block.trainable_variables();
    time_traced_step(state, "transformer_step", [&] {
      return apply_step(opt, vars, [&] { return tg::reduce_mean(tg::square(block(x) - target)); });
    });
  });
}
BENCHMARK(BM_TransformerStep)->Name("models/transformer/train_step/traced")->MinTime(0.5)->Unit(benchmark::kMillisecond);

// ---- LSTM: B32 T32 I64 H128, the last output through Dense(128 -> 10), cross-entropy, Adam -----
constexpr int64_t kLstmBatch = 32, kLstmTime = 32, kLstmIn = 64, kLstmUnits = 128, kLstmClasses = 10;

struct LstmModel {
  nn::LSTM lstm{kLstmIn, kLstmUnits, {.seed = 21}};
  nn::Dense head{kLstmUnits, kLstmClasses, nullptr, 22};
  Tensor x = random_tensor({kLstmBatch, kLstmTime, kLstmIn}, 1.0f, 23);
  Tensor y = labels_of(kLstmBatch, kLstmClasses);
  std::vector<Variable> variables() const {
    std::vector<Variable> v = lstm.trainable_variables();
    for (const Variable& w : head.trainable_variables()) v.push_back(w);
    return v;
  }
};

// The layer: one while node over the time axis.
void BM_LstmLoopStep(benchmark::State& state) {
  tg_bench::guarded(state, [&] {
    LstmModel m;
    tg::optim::Adam opt(1e-3);
    const std::vector<Variable> vars = m.variables();
    time_traced_step(state, "lstm_loop_step", [&] {
      return apply_step(opt, vars, [&] {
        return nn::sparse_softmax_cross_entropy(m.head(m.lstm(m.x)[0]), m.y);
      });
    });
  });
}
BENCHMARK(BM_LstmLoopStep)->Name("models/lstm/train_step/loop")->MinTime(0.5)->Unit(benchmark::kMillisecond);

// The same model with the layer's cell called in a C++ loop: 32 copies of the step in the trace.
void BM_LstmUnrolledStep(benchmark::State& state) {
  tg_bench::guarded(state, [&] {
    LstmModel m;
    tg::optim::Adam opt(1e-3);
    const std::vector<Variable> vars = m.variables();
    time_traced_step(state, "lstm_unrolled_step", [&] {
      return apply_step(opt, vars, [&] {
        const Tensor steps = tg::transpose(m.x, {1, 0, 2});  // (time, batch, input)
        Tensor h = tg::zeros({kLstmBatch, kLstmUnits}), c = tg::zeros({kLstmBatch, kLstmUnits});
        for (int64_t t = 0; t < kLstmTime; ++t) std::tie(h, c) = m.lstm.cell()(steps[t], h, c);
        return nn::sparse_softmax_cross_entropy(m.head(h), m.y);
      });
    });
  });
}
BENCHMARK(BM_LstmUnrolledStep)->Name("models/lstm/train_step/unrolled")->MinTime(0.5)->Unit(benchmark::kMillisecond);

// ---- CNN inference, batch 256: conv32 3x3 SAME relu, pool 2, conv64 3x3 SAME relu, pool 2, dense ----
constexpr int64_t kCnnBatch = 256, kCnnClasses = 10;

void BM_CnnInference(benchmark::State& state) {
  tg_bench::guarded(state, [&] {
    nn::Conv2D conv1(1, 32, {3, 3}, {.padding = tg::Padding::Same, .activation = "relu", .seed = 31});
    nn::Conv2D conv2(32, 64, {3, 3}, {.padding = tg::Padding::Same, .activation = "relu", .seed = 32});
    nn::Dense head(7 * 7 * 64, kCnnClasses, nullptr, 33);
    const Tensor x = random_tensor({kCnnBatch, 28, 28, 1}, 0.5f, 34) + 0.5f;
    auto model = tg::function([&](const Tensor& images) {
      Tensor h = tg::max_pool2d(conv1(images), {2, 2}, {2, 2}, tg::Padding::Valid);
      h = tg::max_pool2d(conv2(h), {2, 2}, {2, 2}, tg::Padding::Valid);
      return head(tg::reshape(h, {-1, 7 * 7 * 64}));
    });
    tg_bench::reach_steady_state([&] { benchmark::DoNotOptimize(model(x)); });
    for (auto _ : state) benchmark::DoNotOptimize(model(x));
  });
}
BENCHMARK(BM_CnnInference)->Name("models/cnn/inference/b256/traced")->MinTime(0.5)->Unit(benchmark::kMillisecond);

// ---- embedding text classifier: vocab 20000 x 64, batch 64 x 50 tokens, mean, Dense, SGD -------
constexpr int64_t kVocab = 20000, kEmbed = 64, kEmbBatch = 64, kTokens = 50, kEmbClasses = 2;

// kSparse: the gradient as the docs tell an embedding model to take it (tape.sparse_gradient:
// the table's rows as IndexedSlices, SGD writing only them); else the dense gradient of the
// whole table.
template <bool kSparse>
void BM_EmbeddingStep(benchmark::State& state) {
  tg_bench::guarded(state, [&] {
    nn::Embedding embedding(kVocab, kEmbed, 41);
    nn::Dense head(kEmbed, kEmbClasses, nullptr, 42);
    tg::optim::SGD opt(0.1);
    std::vector<int32_t> ids(static_cast<std::size_t>(kEmbBatch * kTokens));
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7919 + 13) % kVocab);
    const Tensor tokens = tg::constant(ids, tg::TensorShape({kEmbBatch, kTokens}), tg::int32);
    const Tensor y = labels_of(kEmbBatch, kEmbClasses);
    std::vector<Variable> vars = embedding.trainable_variables();
    for (const Variable& w : head.trainable_variables()) vars.push_back(w);
    auto loss_of = [&] { return nn::sparse_softmax_cross_entropy(head(tg::reduce_mean(embedding(tokens), {1})), y); };
    time_traced_step(state, "embedding_step", [&] {
      if constexpr (!kSparse) {
        return apply_step(opt, vars, loss_of);
      } else {
        Tensor loss;
        std::vector<tg::Gradient> grads;
        {
          tg::GradientTape tape;
          loss = loss_of();
          grads = tape.sparse_gradient(loss, vars);
        }
        opt.apply_gradients(grads, vars);
        return loss;
      }
    });
  });
}
BENCHMARK(BM_EmbeddingStep<true>)->Name("models/embedding/train_step/traced")->MinTime(0.5)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EmbeddingStep<false>)->Name("models/embedding/train_step/traced_dense")->MinTime(0.5)->Unit(benchmark::kMillisecond);

}  // namespace
#endif
