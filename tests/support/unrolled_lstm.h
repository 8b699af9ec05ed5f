// An LSTM cell called in a C++ loop (as the models benchmark's unrolled train step records it),
// for the tests of the passes that rewrite such graphs.
#pragma once
#include <tuple>
#include <vector>

#include "tracegraph/tracegraph.h"

namespace tg::testing {

/// The cell run over x's time axis (x: batch, time, features) from zero states, the loss (the
/// sum of the last h squared) and its weights' gradients: {loss, gradients...}. The steps'
/// inputs come from x, a function argument, so nothing folds them.
inline std::vector<Tensor> unrolled_lstm_step(const nn::LSTMCell& cell, const Tensor& x, int64_t units) {
  const std::vector<Variable> vars = cell.trainable_variables();
  GradientTape tape;
  const Tensor steps = transpose(x, {1, 0, 2});
  const int64_t batch = x.shape().dim(0), time = x.shape().dim(1);
  Tensor h = zeros({batch, units}), c = zeros({batch, units});
  for (int64_t t = 0; t < time; ++t) std::tie(h, c) = cell(steps[t], h, c);
  const Tensor loss = reduce_sum(h * h);
  std::vector<Tensor> out = tape.gradient(loss, vars);
  out.insert(out.begin(), loss);
  return out;
}

}  // namespace tg::testing
