// Issue 5's workloads as tracegraph code, shared by the files that measure them: the 100-op
// elementwise chain (workloads_bench.cpp, export_bench.cpp) and the MLP train step (batch 64,
// 784-256-256-10, softmax cross-entropy, SGD) with its model.
#pragma once
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "reference_cpp.h"
#include "tracegraph/tracegraph.h"
#if TG_BENCH_HAVE_TAPE
#include "tracegraph/gradient.h"
#endif

namespace tg_bench {

// ---- the 100-op chain: (x * 1.01, x + 0.5, act) x kChainRounds (reference_cpp.h) = 99 ops ----

enum class Act { kTanh, kRelu };

// n float32 values in [-0.5, 0.46].
inline tg::Tensor input_of(int64_t n) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 97) * 0.01f - 0.5f;
  return tg::constant(v, tg::TensorShape({n}));
}

template <Act kAct>
tg::Tensor chain(const tg::Tensor& x0) {
  tg::Tensor x = x0;
  for (int r = 0; r < kChainRounds; ++r) {
    x = x * 1.01f;
    x = x + 0.5f;
    x = kAct == Act::kTanh ? tg::tanh(x) : tg::relu(x);
  }
  return x;
}

// ---- MLP train step: batch 64, 784-256-256-10, softmax cross-entropy, SGD -------------------
inline constexpr int64_t kBatch = 64, kIn = 784, kHidden = 256, kOut = 10;
inline constexpr float kLearningRate = 0.01f;

inline tg::Tensor random_tensor(tg::TensorShape shape, float scale, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(static_cast<std::size_t>(shape.num_elements()));
  for (float& e : v) e = dist(rng);
  return tg::constant(v, shape);
}

struct Mlp {
  tg::Variable w1{random_tensor({kIn, kHidden}, 0.05f, 1)}, b1{tg::zeros({kHidden})};
  tg::Variable w2{random_tensor({kHidden, kHidden}, 0.08f, 2)}, b2{tg::zeros({kHidden})};
  tg::Variable w3{random_tensor({kHidden, kOut}, 0.1f, 3)}, b3{tg::zeros({kOut})};
  tg::Tensor x = random_tensor({kBatch, kIn}, 1.0f, 4);
  tg::Tensor y;  // one-hot labels
  Mlp() {
    std::vector<int32_t> labels(kBatch);
    for (int64_t i = 0; i < kBatch; ++i) labels[static_cast<std::size_t>(i)] = static_cast<int32_t>(i % kOut);
    y = tg::one_hot(tg::constant(labels, tg::TensorShape({kBatch}), tg::int32), kOut);
  }
  std::vector<tg::Variable> params() const { return {w1, b1, w2, b2, w3, b3}; }
};

// The backward pass written out by hand with the public ops: runs today, with or without a tape.
inline tg::Tensor train_step_manual(Mlp& m, const tg::Tensor& x, const tg::Tensor& y) {
  using tg::Tensor;
  const Tensor w1 = m.w1, w2 = m.w2, w3 = m.w3;
  const Tensor z1 = tg::matmul(x, w1) + m.b1.read_value();
  const Tensor h1 = tg::relu(z1);
  const Tensor z2 = tg::matmul(h1, w2) + m.b2.read_value();
  const Tensor h2 = tg::relu(z2);
  const Tensor logits = tg::matmul(h2, w3) + m.b3.read_value();
  const Tensor loss = -tg::reduce_mean(tg::reduce_sum(y * tg::log_softmax(logits), {1}));
  const Tensor dlogits = (tg::softmax(logits) - y) * (1.0f / static_cast<float>(kBatch));
  const Tensor dw3 = tg::matmul(h2, dlogits, true, false);
  const Tensor db3 = tg::reduce_sum(dlogits, {0});
  const Tensor dz2 = tg::matmul(dlogits, w3, false, true) * tg::cast(z2 > 0.0f, tg::float32);
  const Tensor dw2 = tg::matmul(h1, dz2, true, false);
  const Tensor db2 = tg::reduce_sum(dz2, {0});
  const Tensor dz1 = tg::matmul(dz2, w2, false, true) * tg::cast(z1 > 0.0f, tg::float32);
  const Tensor dw1 = tg::matmul(x, dz1, true, false);
  const Tensor db1 = tg::reduce_sum(dz1, {0});
  m.w1.assign_sub(dw1 * kLearningRate);
  m.b1.assign_sub(db1 * kLearningRate);
  m.w2.assign_sub(dw2 * kLearningRate);
  m.b2.assign_sub(db2 * kLearningRate);
  m.w3.assign_sub(dw3 * kLearningRate);
  m.b3.assign_sub(db3 * kLearningRate);
  return loss;
}

#if TG_BENCH_HAVE_TAPE
// The same step with tg::GradientTape computing the gradients.
inline tg::Tensor train_step_tape(Mlp& m, const tg::Tensor& x, const tg::Tensor& y) {
  using tg::Tensor;
  tg::GradientTape tape;
  const Tensor h1 = tg::relu(tg::matmul(x, m.w1) + m.b1.read_value());
  const Tensor h2 = tg::relu(tg::matmul(h1, m.w2) + m.b2.read_value());
  const Tensor logits = tg::matmul(h2, m.w3) + m.b3.read_value();
  const Tensor loss = -tg::reduce_mean(tg::reduce_sum(y * tg::log_softmax(logits), {1}));
  const std::vector<tg::Variable> params = m.params();
  const std::vector<Tensor> grads = tape.gradient(loss, params);
  for (std::size_t i = 0; i < params.size(); ++i) {
    tg::Variable p = params[i];
    p.assign_sub(grads[i] * kLearningRate);
  }
  return loss;
}
#endif

// The step issue 5's table measures: the tape-based one once tg::GradientTape is built, else the
// hand-written backward pass.
inline tg::Tensor train_step(Mlp& m, const tg::Tensor& x, const tg::Tensor& y) {
#if TG_BENCH_HAVE_TAPE
  return train_step_tape(m, x, y);
#else
  return train_step_manual(m, x, y);
#endif
}

}  // namespace tg_bench
