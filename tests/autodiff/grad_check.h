// The finite-difference gradient checker shared by the autodiff tests.
//
// A case is a function of some tensors. The checker differentiates the scalar
// L = reduce_sum(f(inputs) * w), for a fixed random weight tensor w shaped like f's result (so
// that every output element gets a different incoming gradient), with respect to every
// floating-point input, and compares the tape's answer with central differences
// (L(x + eps) - L(x - eps)) / 2 eps taken element by element, in float64.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tracegraph/tracegraph.h"

namespace tg::testing {

using CaseFn = std::function<Tensor(const std::vector<Tensor>&)>;

struct GradCase {
  std::string op;     // registry name of the op under test ("" for composite functions)
  std::string label;  // what the case covers
  CaseFn fn;
  std::vector<Tensor> inputs;  // float64 values; integer/bool inputs are held constant
  double eps = 1e-6;
  double tol = 1e-6;  // |tape - numeric| <= tol * (1 + |numeric|)
};

/// Deterministic float64 tensors: uniform in [lo, hi]; away_from_zero: |x| in [lo, hi] with a
/// random sign (for ops with a kink at 0).
class Random {
 public:
  explicit Random(uint64_t seed = 42) : gen_(seed) {}
  Tensor uniform(const TensorShape& shape, double lo = -1.0, double hi = 1.0);
  Tensor away_from_zero(const TensorShape& shape, double lo = 0.2, double hi = 1.5);

 private:
  std::mt19937_64 gen_;
};

/// L = reduce_sum(fn(inputs) * w).
Tensor weighted_loss(const CaseFn& fn, const std::vector<Tensor>& inputs, const Tensor& w);
/// Central-difference dL/dinput for each floating-point input (eager).
std::vector<Tensor> numeric_gradients(const GradCase& c, const Tensor& w);
/// Indices of the floating-point inputs.
std::vector<std::size_t> floating_inputs(const std::vector<Tensor>& inputs);
/// Tape gradients of L for each floating-point input, eagerly.
std::vector<Tensor> tape_gradients_eager(const GradCase& c, const Tensor& w);
/// Elementwise |a - e| <= tol * (1 + |e|), with matching dtypes and shapes.
::testing::AssertionResult gradients_close(const std::vector<Tensor>& actual,
                                           const std::vector<Tensor>& expected, double tol);
/// Runs the whole check: eager tape, traced tape (exact shapes), traced tape with every dim
/// None, each against central differences.
void check_gradients(const GradCase& c, uint64_t seed = 7);

}  // namespace tg::testing
