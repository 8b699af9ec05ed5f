// Keras's learning-rate schedules, built from tensor ops on the step so that a traced train_step
// evaluates them on its step counter at every call.
#include <cmath>
#include <numbers>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "tracegraph/ops.h"
#include "tracegraph/optim.h"

namespace tg::optim {

using detail::op_error;

LearningRateSchedule::~LearningRateSchedule() = default;

double LearningRateSchedule::value_at(int64_t step) const {
  return cast((*this)(constant(step)), float64).item<double>();
}

namespace {

void check_finite(const char* schedule, const char* what, double value) {
  if (!std::isfinite(value)) op_error<ValueError>(schedule, what, " must be finite, got ", value);
}

// The step as a float64 scalar; any integer or floating scalar is accepted.
Tensor step_as_float64(const char* schedule, const Tensor& step) {
  if (!step.defined() || step.dtype() == bool_ || step.dtype() == string_ ||
      detail::static_shape(step).rank() != 0)
    op_error<TypeError>(schedule, "expected the step as a numeric scalar tensor, got ",
                        step.defined() ? to_string(step.dtype()) + " " + detail::static_shape(step).to_string()
                                       : std::string("an empty tg::Tensor"));
  return step.dtype() == float64 ? step : cast(step, float64);
}

}  // namespace

ExponentialDecay::ExponentialDecay(double initial_learning_rate, int64_t decay_steps, double decay_rate,
                                   bool staircase)
    : initial_(initial_learning_rate), decay_rate_(decay_rate), decay_steps_(decay_steps), staircase_(staircase) {
  const char* op = "ExponentialDecay";
  if (decay_steps <= 0) op_error<ValueError>(op, "decay_steps must be > 0, got ", decay_steps);
  check_finite(op, "initial_learning_rate", initial_learning_rate);
  check_finite(op, "decay_rate", decay_rate);
}

Tensor ExponentialDecay::operator()(const Tensor& step) const {
  const Tensor decay_steps = constant(static_cast<double>(decay_steps_), float64);
  Tensor p = step_as_float64("ExponentialDecay", step) / decay_steps;
  if (staircase_) p = floordiv(p, constant(1.0, float64));  // floor, for the staircase
  return constant(initial_, float64) * pow(constant(decay_rate_, float64), p);
}

CosineDecay::CosineDecay(double initial_learning_rate, int64_t decay_steps, double alpha,
                         std::optional<double> warmup_target, int64_t warmup_steps)
    : initial_(initial_learning_rate),
      alpha_(alpha),
      decay_steps_(decay_steps),
      warmup_target_(warmup_target),
      warmup_steps_(warmup_steps) {
  const char* op = "CosineDecay";
  if (decay_steps <= 0) op_error<ValueError>(op, "decay_steps must be > 0, got ", decay_steps);
  if (warmup_steps < 0) op_error<ValueError>(op, "warmup_steps must be >= 0, got ", warmup_steps);
  check_finite(op, "initial_learning_rate", initial_learning_rate);
  check_finite(op, "alpha", alpha);
  if (warmup_target) check_finite(op, "warmup_target", *warmup_target);
}

Tensor CosineDecay::operator()(const Tensor& step) const {
  const Tensor s = step_as_float64("CosineDecay", step);
  const Tensor decay_steps = constant(static_cast<double>(decay_steps_), float64);
  // (1 - alpha) * 0.5 * (1 + cos(pi * t / decay_steps)) + alpha, times the rate decayed from.
  auto decayed = [&](const Tensor& t, double from) {
    const Tensor cosine = 0.5 * (1.0 + cos(std::numbers::pi * (t / decay_steps)));
    return from * ((1.0 - alpha_) * cosine + alpha_);
  };
  if (!warmup_target_) return decayed(minimum(s, decay_steps), initial_);
  const Tensor warmup_steps = constant(static_cast<double>(warmup_steps_), float64);
  const Tensor t = minimum(s, decay_steps + warmup_steps);
  // Keras's cond as a select: both are cheap scalars, and the warm-up's 0 / 0 when
  // warmup_steps is 0 is never selected (t < 0 never holds).
  const Tensor warming = (*warmup_target_ - initial_) * (t / warmup_steps) + initial_;
  return where(t < warmup_steps, warming, decayed(t - warmup_steps, *warmup_target_));
}

}  // namespace tg::optim
