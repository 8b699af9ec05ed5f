// The LSTM and GRU layers against their cells unrolled by hand (with and without a mask, both
// directions, whole sequences or the last output), a None time dim traced once, gradients against
// finite differences, the three modes, a training run; and a timing of the traced train step in
// the loop form against the unrolled form (DISABLED_, run by hand).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "autodiff/grad_check.h"
#include "core/thread_pool.h"
#include "train/layer_test_util.h"

namespace tg {
namespace {

using testing::check_gradients;
using testing::check_variable_gradients;
using testing::expect_modes_agree;

// x[:, t, :] as (batch, features).
Tensor step_input(const Tensor& x, int64_t t) {
  const auto d = x.shape().dims();
  return reshape(slice(x, {0, t, 0}, {-1, 1, -1}), {d[0], d[2]});
}

// Rows of `a` where keep[r], else rows of `b`; (batch, units) float64, done on doubles so that the
// reference does not use the ops the layer uses for its mask.
Tensor select_rows(const std::vector<bool>& keep, const Tensor& a, const Tensor& b) {
  const auto d = a.shape().dims();
  std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
  const auto cols = static_cast<std::size_t>(d[1]);
  for (std::size_t r = 0; r < keep.size(); ++r)
    if (!keep[r]) std::copy(vb.begin() + static_cast<std::ptrdiff_t>(r * cols),
                            vb.begin() + static_cast<std::ptrdiff_t>((r + 1) * cols),
                            va.begin() + static_cast<std::ptrdiff_t>(r * cols));
  return constant(va, a.shape(), a.dtype());
}

// The sequence by hand: Keras's rnn loop with the cell's own step called once per time step.
// mask[r][t] false skips step t of row r (states kept, previous output repeated, zeros at first).
// Returns {outputs (batch, time, units) in processing order, the last output, states...}.
struct Unrolled {
  Tensor sequence, last;
  std::vector<Tensor> states;
};
template <class Step>
Unrolled unroll(const Tensor& x, std::vector<Tensor> states, const std::vector<std::vector<bool>>& mask,
                bool backwards, const Step& step) {
  const int64_t steps = x.shape().dim(1);
  Tensor prev = zeros_like(states[0]);
  std::vector<Tensor> outs;
  for (int64_t k = 0; k < steps; ++k) {
    const int64_t t = backwards ? steps - 1 - k : k;
    std::vector<Tensor> next = step(step_input(x, t), states);
    Tensor out = next[0];
    if (!mask.empty()) {
      std::vector<bool> keep;
      for (const auto& row : mask) keep.push_back(row[static_cast<std::size_t>(t)]);
      for (std::size_t s = 0; s < next.size(); ++s) next[s] = select_rows(keep, next[s], states[s]);
      out = select_rows(keep, out, prev);
    }
    states = next;
    prev = out;
    outs.push_back(out);
  }
  return {stack(outs, 1), prev, states};
}

Unrolled lstm_by_hand(const nn::LSTMCell& cell, const Tensor& x, const Tensor& h0, const Tensor& c0,
                      const std::vector<std::vector<bool>>& mask = {}, bool backwards = false) {
  return unroll(x, {h0, c0}, mask, backwards, [&](const Tensor& xt, const std::vector<Tensor>& s) {
    auto hc = cell(xt, s[0], s[1]);
    return std::vector<Tensor>{hc.first, hc.second};
  });
}
Unrolled gru_by_hand(const nn::GRUCell& cell, const Tensor& x, const Tensor& h0,
                     const std::vector<std::vector<bool>>& mask = {}, bool backwards = false) {
  return unroll(x, {h0}, mask, backwards,
                [&](const Tensor& xt, const std::vector<Tensor>& s) { return std::vector<Tensor>{cell(xt, s[0])}; });
}

Tensor bool_mask(const std::vector<std::vector<bool>>& m) {
  std::vector<bool> flat;
  for (const auto& row : m) flat.insert(flat.end(), row.begin(), row.end());
  return constant(flat, {static_cast<int64_t>(m.size()), static_cast<int64_t>(m[0].size())});
}

// Row 0 skips a middle and the last step, row 1 its first two, row 2 nothing, row 3 everything.
const std::vector<std::vector<bool>> kMask = {{true, false, true, true, false},
                                             {false, false, true, true, true},
                                             {true, true, true, true, true},
                                             {false, false, false, false, false}};

// Eagerly the layer runs the same ops on the same values as the hand-unrolled cell (a gathered
// time step holds the bits of a sliced one), so the results are equal bit for bit; the mask's
// selection copies values, so it is exact as well.
TEST(LSTMLayer, EqualsItsCellUnrolledByHandBitForBit) {
  testing::Random rng(11);
  const Tensor x = rng.uniform({4, 5, 3}), h0 = rng.uniform({4, 6}), c0 = rng.uniform({4, 6});
  for (bool backwards : {false, true})
    for (bool use_mask : {false, true}) {
      nn::LSTM seq(3, 6, {.return_sequences = true, .return_state = true, .go_backwards = backwards,
                          .seed = 3, .dtype = float64});
      nn::LSTM last(3, 6, {.return_state = true, .go_backwards = backwards, .seed = 3, .dtype = float64});
      const std::vector<std::vector<bool>> m = use_mask ? kMask : std::vector<std::vector<bool>>{};
      const nn::RecurrentCall call{.mask = use_mask ? bool_mask(kMask) : Tensor(), .initial_state = {h0, c0}};
      const Unrolled ref = lstm_by_hand(seq.cell(), x, h0, c0, m, backwards);
      const std::vector<Tensor> s = seq(x, call), l = last(x, call);
      ASSERT_EQ(s.size(), 3u);
      ASSERT_EQ(l.size(), 3u);
      const std::string where = std::string(backwards ? "backwards" : "forwards") + (use_mask ? ", masked" : "");
      EXPECT_EQ(s[0].shape(), TensorShape({4, 5, 6}));
      EXPECT_TENSOR_EQ(s[0], ref.sequence) << where;
      EXPECT_TENSOR_EQ(l[0], ref.last) << where;
      for (std::size_t k = 0; k < 2; ++k) {
        EXPECT_TENSOR_EQ(s[1 + k], ref.states[k]) << where << ", state " << k;
        EXPECT_TENSOR_EQ(l[1 + k], ref.states[k]) << where << ", state " << k;
      }
      if (use_mask) {  // the fully masked row: zeros as its output, its initial states kept
        EXPECT_TENSOR_EQ(slice(l[0], {3, 0}, {1, -1}), zeros({1, 6}, float64));
        EXPECT_TENSOR_EQ(slice(l[2], {3, 0}, {1, -1}), slice(c0, {3, 0}, {1, -1}));
      }
    }
}

TEST(GRULayer, EqualsItsCellUnrolledByHandBitForBit) {
  testing::Random rng(12);
  const Tensor x = rng.uniform({4, 5, 3}), h0 = rng.uniform({4, 2});
  for (bool backwards : {false, true})
    for (bool use_mask : {false, true}) {
      nn::GRU seq(3, 2, {.return_sequences = true, .return_state = true, .go_backwards = backwards,
                         .seed = 4, .dtype = float64});
      auto vars = seq.trainable_variables();
      vars[2].assign(rng.uniform({2, 6}, -0.5, 0.5));  // both bias rows count
      nn::GRU last(3, 2, {.go_backwards = backwards, .seed = 4, .dtype = float64});
      last.trainable_variables()[2].assign(vars[2].read_value());
      const std::vector<std::vector<bool>> m = use_mask ? kMask : std::vector<std::vector<bool>>{};
      const nn::RecurrentCall call{.mask = use_mask ? bool_mask(kMask) : Tensor(), .initial_state = {h0}};
      const Unrolled ref = gru_by_hand(seq.cell(), x, h0, m, backwards);
      const std::vector<Tensor> s = seq(x, call), l = last(x, call);
      ASSERT_EQ(s.size(), 2u);
      ASSERT_EQ(l.size(), 1u);
      EXPECT_TENSOR_EQ(s[0], ref.sequence) << backwards << use_mask;
      EXPECT_TENSOR_EQ(s[1], ref.states[0]) << backwards << use_mask;
      EXPECT_TENSOR_EQ(l[0], ref.last) << backwards << use_mask;
    }
}

TEST(RecurrentLayers, DefaultsAreKeras) {
  nn::LSTM lstm(3, 4);
  const auto v = lstm.trainable_variables();
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].name(), "lstm/lstm_cell/kernel");
  EXPECT_EQ(v[1].shape(), TensorShape({4, 16}));
  EXPECT_EQ(v[0].dtype(), float32);
  nn::GRU gru(3, 4);
  EXPECT_EQ(gru.trainable_variables()[2].shape(), TensorShape({2, 12}));  // reset_after's two bias rows
  EXPECT_EQ(gru.trainable_variables()[2].name(), "gru/gru_cell/bias");
  // Zero initial states; the last output only.
  const Tensor x = testing::seeded_values({2, 3, 3}, float32, 1);
  const std::vector<Tensor> out = lstm(x);
  ASSERT_EQ(out.size(), 1u);
  const Tensor z = zeros({2, 4});
  EXPECT_TENSOR_EQ(out[0], lstm_by_hand(lstm.cell(), x, z, z).last);
  EXPECT_TENSOR_EQ(gru(x)[0], gru_by_hand(gru.cell(), x, z).last);
}

// Traced with the optimiser and without: the same values as eagerly, to rounding (fusion may
// evaluate a chain of elementwise ops in one kernel; the tolerance allows a few ulps per step).
TEST(RecurrentLayers, EagerTracedAndOptimisedAgree) {
  testing::Random rng(13);
  const Tensor x = rng.uniform({4, 5, 3}), h0 = rng.uniform({4, 3}), c0 = rng.uniform({4, 3});
  const Tensor mask = bool_mask(kMask);
  nn::LSTM lstm(3, 3, {.return_sequences = true, .return_state = true, .seed = 5, .dtype = float64});
  nn::GRU gru(3, 3, {.return_state = true, .go_backwards = true, .seed = 6, .dtype = float64});
  expect_modes_agree(
      [&](const std::vector<Tensor>& in) {
        std::vector<Tensor> out = lstm(in[0], {.mask = mask, .initial_state = {in[1], in[2]}});
        for (const Tensor& t : gru(in[0], {.mask = mask, .initial_state = {in[1]}})) out.push_back(t);
        for (const Tensor& t : lstm(in[0])) out.push_back(t);
        return out;
      },
      {x, h0, c0}, 1e-12);
}

// A None time dim: one trace serves every sequence length; and a trace for a static length has
// as many nodes whatever the length (one while node, its body one step).
TEST(RecurrentLayers, ANoneTimeDimTracesOnceAndTheGraphDoesNotGrowWithTheLength) {
  nn::LSTM lstm(3, 4, {.return_sequences = true, .seed = 7, .dtype = float64});
  nn::GRU gru(3, 4, {.seed = 8, .dtype = float64});
  auto f = function([&](const Tensor& x) { return std::vector<Tensor>{lstm(x)[0], gru(x)[0]}; },
                    {.input_signature = std::vector<TensorSpec>{TensorSpec({2, None, 3}, float64)}});
  for (int64_t steps : {3, 7}) {
    const Tensor x = testing::seeded_values({2, steps, 3}, float64, static_cast<uint64_t>(steps));
    const std::vector<Tensor> got = f(x);
    EXPECT_EQ(got[0].shape(), TensorShape({2, steps, 4}));
    EXPECT_TENSOR_NEAR(got[0], lstm(x)[0], 1e-12) << steps;
    EXPECT_TENSOR_NEAR(got[1], gru(x)[0], 1e-12) << steps;
  }
  EXPECT_EQ(f.tracing_count(), 1);

  auto g = function([&](const Tensor& x) { return lstm(x)[0]; });
  (void)g(testing::seeded_values({2, 4, 3}, float64, 1));
  (void)g(testing::seeded_values({2, 40, 3}, float64, 2));
  const auto traces = g.concrete_functions();
  ASSERT_EQ(traces.size(), 2u);
  EXPECT_EQ(traces[0].graph().nodes().size(), traces[1].graph().nodes().size());
}

// d loss / d every weight against central differences, eagerly and traced (the loop's gradient),
// with and without a mask, the whole sequence and the last output.
TEST(RecurrentLayers, WeightGradientsMatchFiniteDifferences) {
  testing::Random rng(14);
  const Tensor x = rng.uniform({4, 5, 2}), mask = bool_mask(kMask);
  for (bool sequences : {false, true})
    for (bool use_mask : {false, true}) {
      nn::LSTM lstm(2, 3, {.return_sequences = sequences, .seed = 9, .dtype = float64});
      nn::GRU gru(2, 3, {.return_sequences = sequences, .go_backwards = true, .seed = 10, .dtype = float64});
      gru.trainable_variables()[2].assign(rng.uniform({2, 9}, -0.5, 0.5));
      const nn::RecurrentCall call{.mask = use_mask ? mask : Tensor()};
      const Tensor weight = rng.uniform(sequences ? TensorShape({4, 5, 3}) : TensorShape({4, 3}));
      SCOPED_TRACE(std::string(sequences ? "sequences" : "last") + (use_mask ? ", masked" : ""));
      check_variable_gradients([&] { return reduce_sum(lstm(x, call)[0] * weight); }, lstm.trainable_variables());
      check_variable_gradients([&] { return reduce_sum(gru(x, call)[0] * weight); }, gru.trainable_variables());
    }
}

// And with respect to the inputs and the initial states (the op-gradient checker: eager, traced,
// traced with every dim None).
TEST(RecurrentLayers, InputAndStateGradientsMatchFiniteDifferences) {
  testing::Random rng(15);
  nn::LSTM lstm(2, 3, {.return_sequences = true, .return_state = true, .seed = 11, .dtype = float64});
  nn::GRU gru(2, 3, {.return_state = true, .seed = 12, .dtype = float64});
  const Tensor x = rng.uniform({2, 4, 2}), h0 = rng.uniform({2, 3}), c0 = rng.uniform({2, 3});
  check_gradients({"", "LSTM sequence",
                   [&](const std::vector<Tensor>& in) { return lstm(in[0], {.initial_state = {in[1], in[2]}})[0]; },
                   {x, h0, c0}, 1e-6, 1e-6});
  check_gradients({"", "LSTM final c",
                   [&](const std::vector<Tensor>& in) { return lstm(in[0], {.initial_state = {in[1], in[2]}})[2]; },
                   {x, h0, c0}, 1e-6, 1e-6});
  check_gradients({"", "GRU last output",
                   [&](const std::vector<Tensor>& in) { return gru(in[0], {.initial_state = {in[1]}})[0]; },
                   {x, h0}, 1e-6, 1e-6});
}

// A traced LSTM training step (B8 T12 I6 H16, Adam): the loss goes down, and the traced steps
// take the eager steps' values.
struct SequenceModel {
  nn::LSTM lstm{6, 16, {.seed = 21}};
  nn::Dense head{16, 1, nullptr, 22};
  std::vector<Variable> variables() const {
    std::vector<Variable> v = lstm.trainable_variables();
    for (const Variable& w : head.trainable_variables()) v.push_back(w);
    return v;
  }
};
Tensor sequence_step(SequenceModel& model, optim::Adam& opt, const Tensor& x, const Tensor& y) {
  const std::vector<Variable> vars = model.variables();
  Tensor loss;
  std::vector<Tensor> grads;
  {
    GradientTape tape;
    loss = nn::mean_squared_error(y, model.head(model.lstm(x)[0]));
    grads = tape.gradient(loss, vars);
  }
  opt.apply_gradients(grads, vars);
  return loss;
}

TEST(LSTMLayer, ATracedTrainStepLowersTheLoss) {
  const Tensor x = testing::seeded_values({8, 12, 6}, float32, 31);
  const Tensor y = reduce_mean(x, {1, 2}, /*keepdims=*/false);  // a target the sequence determines
  const Tensor target = reshape(y, {8, 1}) * 3.0f;
  SequenceModel eager_model, traced_model;
  optim::Adam eager_opt(0.01), traced_opt(0.01);
  auto traced = function([&](const Tensor& a, const Tensor& b) { return sequence_step(traced_model, traced_opt, a, b); },
                         {.name = "lstm_train_step"});
  float first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    const float lt = traced(x, target).item<float>();
    if (step < 5) {
      const float le = sequence_step(eager_model, eager_opt, x, target).item<float>();
      EXPECT_NEAR(le, lt, 1e-5f * (1 + std::abs(le))) << "step " << step;
    }
    if (step == 0) first = lt;
    last = lt;
  }
  EXPECT_EQ(traced.tracing_count(), 1);
  EXPECT_LT(last, 0.2f * first) << "first " << first << ", last " << last;
}

// Traced on two threads, a batch of at least 16 rows runs in two loops of half the batch each
// (the executor runs them side by side): the same values as eagerly, to rounding - the weight
// gradients add the halves' sums - with masks, initial states, both directions, whole sequences
// and states, and an odd batch.
TEST(RecurrentLayers, ABatchSplitBetweenTwoLoopsAgreesWithTheWholeBatch) {
  const int saved = detail::num_threads();
  detail::set_num_threads(2);
  testing::Random rng(16);
  const int64_t batch = 17;
  const Tensor x = rng.uniform({batch, 5, 3}), h0 = rng.uniform({batch, 4}), c0 = rng.uniform({batch, 4});
  std::vector<std::vector<bool>> rows;
  for (int64_t r = 0; r < batch; ++r) rows.push_back(kMask[static_cast<std::size_t>(r % 4)]);
  const Tensor mask = bool_mask(rows);
  nn::LSTM lstm(3, 4, {.return_sequences = true, .return_state = true, .seed = 17, .dtype = float64});
  nn::GRU gru(3, 4, {.return_state = true, .go_backwards = true, .seed = 18, .dtype = float64});
  auto layers = [&](const std::vector<Tensor>& in) {
    std::vector<Tensor> out = lstm(in[0], {.mask = mask, .initial_state = {in[1], in[2]}});
    for (const Tensor& t : gru(in[0], {.mask = mask, .initial_state = {in[1]}})) out.push_back(t);
    for (const Tensor& t : lstm(in[0])) out.push_back(t);
    return out;
  };
  expect_modes_agree(layers, {x, h0, c0}, 1e-12);
  auto loss = [&] {
    Tensor sum = zeros({}, float64);
    for (const Tensor& t : layers({x, h0, c0})) sum = sum + reduce_sum(t * t);
    return sum;
  };
  std::vector<Variable> vars = lstm.trainable_variables();
  for (const Variable& v : gru.trainable_variables()) vars.push_back(v);
  auto grads = [&] {
    GradientTape tape;
    return tape.gradient(loss(), vars);
  };
  const std::vector<Tensor> eager = grads();
  auto traced = function(grads);
  const std::vector<Tensor> got = traced();
  int loops = 0;
  for (const auto& node : traced.concrete_functions()[0].graph().nodes()) loops += node.op == "while";
  detail::set_num_threads(saved);
  EXPECT_EQ(loops, 12);  // each layer call's two halves and their gradients
  ASSERT_EQ(got.size(), eager.size());
  for (std::size_t k = 0; k < got.size(); ++k) EXPECT_TENSOR_NEAR(got[k], eager[k], 1e-12) << vars[k].name();
}

TEST(RecurrentLayers, TypedErrors) {
  EXPECT_THROW_MSG(nn::LSTM(0, 2), InvalidArgumentError, "[LSTM]", "input_dim > 0");
  EXPECT_THROW_MSG(nn::GRU(2, 0), InvalidArgumentError, "[GRU]", "units > 0");
  EXPECT_THROW_MSG(nn::GRU(2, 2, {.dtype = int32}), TypeError, "[GRU]", "float32 or float64");
  nn::LSTM lstm(3, 2);
  EXPECT_THROW_MSG(lstm(zeros({4, 3})), InvalidArgumentError, "[LSTM]", "(batch, time, 3)", "(4, 3)");
  EXPECT_THROW_MSG(lstm(zeros({4, 5, 2})), InvalidArgumentError, "(batch, time, 3)", "(4, 5, 2)");
  EXPECT_THROW_MSG(lstm(zeros({4, 5, 3}, float64)), InvalidArgumentError, "dtype", "tg::cast");
  EXPECT_THROW_MSG(lstm(zeros({4, 0, 3})), InvalidArgumentError, "at least one time step");
  EXPECT_THROW_MSG(lstm(Tensor()), ValueError, "empty");
  const Tensor x = zeros({4, 5, 3});
  EXPECT_THROW_MSG(lstm(x, {.mask = ones({4, 5})}), TypeError, "bool mask", "float32");
  EXPECT_THROW_MSG(lstm(x, {.mask = fill({4}, true)}), InvalidArgumentError, "(batch, time)");
  EXPECT_THROW_MSG(lstm(x, {.mask = fill({4, 6}, true)}), InvalidArgumentError, "the mask", "(4, 6)");
  EXPECT_THROW_MSG(lstm(x, {.mask = fill({1, 5}, true)}), InvalidArgumentError, "the mask");
  EXPECT_THROW_MSG(lstm(x, {.initial_state = {zeros({4, 2})}}), ValueError, "2 states (h, c)", "got 1");
  EXPECT_THROW_MSG(lstm(x, {.initial_state = {zeros({4, 2}), zeros({4, 3})}}), InvalidArgumentError,
                   "initial_state[1]", "(batch, 2)");
  EXPECT_THROW_MSG(lstm(x, {.initial_state = {zeros({1, 2}), zeros({4, 2})}}), InvalidArgumentError,
                   "initial_state[0]", "batch size");
  // The same checks when the graph runs, where tracing saw None dims.
  auto f = function([&](const Tensor& a, const Tensor& m, const Tensor& h) {
    return lstm(a, {.mask = m, .initial_state = {h, h}})[0];
  }, {.input_signature = std::vector<TensorSpec>{TensorSpec({None, None, 3}, float32), TensorSpec({None, None}, bool_),
                                                 TensorSpec({None, 2}, float32)}});
  EXPECT_EQ(f(x, fill({4, 5}, true), zeros({4, 2})).shape(), TensorShape({4, 2}));
  EXPECT_THROW_MSG(f(x, fill({4, 6}, true), zeros({4, 2})), InvalidArgumentError, "the mask");
  EXPECT_THROW_MSG(f(x, fill({1, 5}, true), zeros({4, 2})), InvalidArgumentError, "the mask");
  EXPECT_THROW_MSG(f(x, fill({4, 5}, true), zeros({1, 2})), InvalidArgumentError, "batch size");
}

// The workload (B32 T32 I64 H128, Adam, one thread): the traced train step with the
// layer's for_range against the same model with the cell called T times in the trace. Prints the
// medians of 20 steps each; run by hand with --gtest_also_run_disabled_tests.
double median_ms(const std::function<void()>& step, int runs) {
  for (int i = 0; i < 3; ++i) step();
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    step();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

TEST(LSTMLayer, DISABLED_TimingLoopFormAgainstUnrolled) {
  const int saved_threads = config::num_threads();
  config::set_num_threads(1);
  constexpr int64_t B = 32, T = 32, I = 64, H = 128;
  const Tensor x = testing::seeded_values({B, T, I}, float32, 41);
  const Tensor y = testing::seeded_values({B, 1}, float32, 42);
  SequenceModel loop_model{nn::LSTM(I, H, {.seed = 1}), nn::Dense(H, 1, nullptr, 2)};
  SequenceModel unrolled_model{nn::LSTM(I, H, {.seed = 1}), nn::Dense(H, 1, nullptr, 2)};
  optim::Adam loop_opt(0.001), unrolled_opt(0.001);
  auto loop_step = function([&](const Tensor& a, const Tensor& b) { return sequence_step(loop_model, loop_opt, a, b); });
  auto unrolled_step = function([&](const Tensor& a, const Tensor& b) {
    const std::vector<Variable> vars = unrolled_model.variables();
    Tensor loss;
    std::vector<Tensor> grads;
    {
      GradientTape tape;
      const nn::LSTMCell& cell = unrolled_model.lstm.cell();
      Tensor h = zeros({B, H}), c = zeros({B, H});
      for (int64_t t = 0; t < T; ++t) {
        auto hc = cell(step_input(a, t), h, c);
        h = hc.first;
        c = hc.second;
      }
      loss = nn::mean_squared_error(b, unrolled_model.head(h));
      grads = tape.gradient(loss, vars);
    }
    unrolled_opt.apply_gradients(grads, vars);
    return loss;
  });
  // The forward passes alone, to tell the loop's forward from its gradient.
  auto loop_forward = function([&](const Tensor& a) { return loop_model.lstm(a)[0]; });
  auto unrolled_forward = function([&](const Tensor& a) {
    const nn::LSTMCell& cell = unrolled_model.lstm.cell();
    Tensor h = zeros({B, H}), c = zeros({B, H});
    for (int64_t t = 0; t < T; ++t) {
      auto hc = cell(step_input(a, t), h, c);
      h = hc.first;
      c = hc.second;
    }
    return h;
  });
  EXPECT_TENSOR_NEAR(loop_forward(x), unrolled_forward(x), 1e-5);
  const double loop_fwd_ms = median_ms([&] { (void)loop_forward(x); }, 20);
  const double unrolled_fwd_ms = median_ms([&] { (void)unrolled_forward(x); }, 20);
  std::printf("LSTM forward B32 T32 I64 H128, 1 thread: for_range %.3f ms, unrolled %.3f ms\n", loop_fwd_ms,
              unrolled_fwd_ms);
  const float l0 = loop_step(x, y).item<float>(), u0 = unrolled_step(x, y).item<float>();
  EXPECT_NEAR(l0, u0, 1e-5f * (1 + std::abs(u0)));  // the same model, the same first loss
  const double loop_ms = median_ms([&] { (void)loop_step(x, y); }, 20);
  const double unrolled_ms = median_ms([&] { (void)unrolled_step(x, y); }, 20);
  std::printf("LSTM train step B32 T32 I64 H128, 1 thread: for_range %.3f ms, unrolled %.3f ms, ratio %.2f\n",
              loop_ms, unrolled_ms, loop_ms / unrolled_ms);
  config::set_num_threads(saved_threads);
}

}  // namespace
}  // namespace tg
