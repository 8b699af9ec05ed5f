// Optimizers (tf.keras.optimizers.SGD / Adam): apply gradients to Variables, eagerly or inside a
// traced tg::function.
#pragma once
#include <concepts>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tracegraph/indexed_slices.h"
#include "tracegraph/tensor.h"
#include "tracegraph/variable.h"

namespace tg::optim {

/// A learning rate as a function of the optimizer's step (keras.optimizers.schedules).
/// Subclass it for your own: operator() must build the rate from tensor ops on `step`, so that
/// it works on the symbolic step counter of a traced train_step.
class LearningRateSchedule {
 public:
  virtual ~LearningRateSchedule();
  /// The rate at `step` (an integer or floating scalar tensor, eager or symbolic; optimizers pass
  /// their step counter: the number of steps taken, from 0) as a float64 scalar.
  virtual Tensor operator()(const Tensor& step) const = 0;
  /// The same, eagerly, for a C++ step.
  double value_at(int64_t step) const;
};

/// keras.optimizers.schedules.ExponentialDecay:
///   initial_learning_rate * decay_rate ^ (step / decay_steps)
/// with the exponent floored (a staircase) when `staircase`. Computed in float64.
/// tg::ValueError unless decay_steps > 0 and the rates are finite.
class ExponentialDecay : public LearningRateSchedule {
 public:
  ExponentialDecay(double initial_learning_rate, int64_t decay_steps, double decay_rate, bool staircase = false);
  Tensor operator()(const Tensor& step) const override;

 private:
  double initial_, decay_rate_;
  int64_t decay_steps_;
  bool staircase_;
};

/// keras.optimizers.schedules.CosineDecay with its optional linear warm-up. Without a
/// warmup_target:  s = min(step, decay_steps);
///   initial_learning_rate * ((1 - alpha) * 0.5 * (1 + cos(pi * s / decay_steps)) + alpha).
/// With one: s = min(step, warmup_steps + decay_steps); for s < warmup_steps the rate rises
/// linearly, initial + (warmup_target - initial) * s / warmup_steps, then decays as above from
/// warmup_target over (s - warmup_steps). Computed in float64. tg::ValueError unless
/// decay_steps > 0, warmup_steps >= 0 and the rates are finite.
class CosineDecay : public LearningRateSchedule {
 public:
  CosineDecay(double initial_learning_rate, int64_t decay_steps, double alpha = 0.0,
              std::optional<double> warmup_target = std::nullopt, int64_t warmup_steps = 0);
  Tensor operator()(const Tensor& step) const override;

 private:
  double initial_, alpha_;
  int64_t decay_steps_;
  std::optional<double> warmup_target_;
  int64_t warmup_steps_;
};

/// The shared machinery of SGD and Adam: input validation, the step counter and the per-variable
/// slot Variables.
///
/// Slots (momentum, Adam's m and v) and the step counter are Variables created on the first
/// apply_gradients that sees a variable, so an optimizer works inside a tg::function exactly as
/// TensorFlow's does:
/// - the first trace of a train_step creates them (allowed: the singleton rule lets a
///   function's first trace create Variables);
/// - the same optimizer used by a *second* function, or a second optimizer passed to an
///   already-traced function, creates Variables in a later trace, which throws tg::ValueError
///   ("... only supports singleton tg::Variables created on the first call ...", naming the
///   Variable, e.g. 'Adam/iterations' or the slot 'w/m', and this optimizer). Use one
///   tg::function per optimizer, or run one step eagerly first (then no trace creates state).
///
/// Every update is an assign / assign_add / assign_sub of a Variable, so inside a traced function
/// the updates are ordered stateful graph ops that run at every call. The learning rate is a
/// Variable too: set_learning_rate() takes effect in already-traced functions.
///
/// An optimizer is not copyable (its slots belong to it); share it by reference or
/// std::shared_ptr. Passing a std::shared_ptr to a tg::function argument makes the optimizer
/// part of the trace type (by identity), as in the guide's train_step(w, x, y, optimizer).
class Optimizer {
 public:
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// Applies one update: grads[i] is the gradient for variables[i] (the order
  /// GradientTape::gradient returns them in). An undefined gradient (tg::Tensor{}, from
  /// UnconnectedGradients::kNone) leaves its variable unchanged. Throws
  /// tg::InvalidArgumentError for a count, dtype or shape mismatch or a variable listed twice,
  /// tg::TypeError for a non-floating variable, tg::ValueError when every gradient is
  /// undefined. Increments iterations() by one.
  void apply_gradients(const std::vector<Tensor>& grads, const std::vector<Variable>& variables);
  /// The same with (gradient, variable) pairs, as TF's apply_gradients(zip(grads, vars)).
  void apply_gradients(const std::vector<std::pair<Tensor, Variable>>& grads_and_vars);
  /// The same with GradientTape::sparse_gradient's list, where a gradient may be a
  /// tg::IndexedSlices (its dense_shape must be the variable's shape and its dtype the
  /// variable's). As Keras does, the slices are first deduplicated (IndexedSlices::deduplicated)
  /// and then applied with the optimizer's sparse rule: SGD without momentum writes only the
  /// named rows, SGD with momentum, Adam and RMSprop update their slots and variable as Keras's
  /// sparse update_step does (see each class), and AdamW applies the dense gradient.
  /// A template only so that a brace list of tensors still selects the overload above.
  template <class G>
    requires std::same_as<G, Gradient>
  void apply_gradients(const std::vector<G>& grads, const std::vector<Variable>& variables) {
    apply_gradient_list(grads, variables);
  }

  /// The number of apply_gradients calls run so far (an eager read of the step counter).
  int64_t iterations() const;
  /// The step counter Variable (int64 scalar), created by the first apply_gradients.
  std::optional<Variable> iterations_variable() const { return iterations_; }

  /// The learning rate of the next step: the Variable's value, or with a schedule its value at
  /// iterations().
  double learning_rate() const;
  /// Throws tg::ValueError for a negative or non-finite value, tg::TypeError when the optimizer
  /// follows a schedule (as Keras: a scheduled learning rate is not settable).
  void set_learning_rate(double learning_rate);
  /// Follows `schedule` from now on: each apply_gradients evaluates it on the step counter (the
  /// steps already taken, from 0) inside the step, so a traced train_step reads the current
  /// rate at every call and never retraces as the step advances. Set it before the first
  /// apply_gradients (tg::ValueError afterwards: functions traced before would keep the old
  /// rate); tg::ValueError for a null schedule.
  void set_learning_rate_schedule(std::shared_ptr<const LearningRateSchedule> schedule);
  const std::shared_ptr<const LearningRateSchedule>& learning_rate_schedule() const { return schedule_; }

  /// The slot `slot_name` ("momentum" for SGD, "m" / "v" for Adam) of `var`; throws
  /// tg::ValueError when the optimizer has no such slot for it (yet).
  Variable slot(const Variable& var, const std::string& slot_name) const;
  /// The names of this optimizer's per-variable slots, in creation order.
  virtual std::vector<std::string> slot_names() const = 0;
  /// Every Variable the optimizer created: the learning rate, the step counter (once created),
  /// then each variable's slots in creation order.
  std::vector<Variable> variables() const;
  const std::string& name() const { return name_; }

 protected:
  Optimizer(std::string name, double learning_rate);

  /// Per-dtype constants of one apply_gradients call, computed once per call.
  struct StepValues {
    Tensor learning_rate;  // this step's rate (the Variable, or the schedule), in the variable dtype
    Tensor step;           // iterations + 1, cast to the variable dtype
  };
  /// Updates one variable with its gradient (same dtype and shape), reading and writing its
  /// slots (in slot_names() order).
  virtual void update(const Tensor& grad, Variable& var, std::vector<Variable>& slots,
                      const StepValues& step) = 0;
  /// The same for a sparse gradient, its indices distinct (deduplicated). By default it applies
  /// the dense gradient with update().
  virtual void update_sparse(const IndexedSlices& grad, Variable& var, std::vector<Variable>& slots,
                             const StepValues& step);
  /// Throws tg::ValueError "[<name>] <what> must be ..." unless lo <= value <= hi (finite).
  void check_hyper(const char* what, double value, double lo, double hi, bool hi_open) const;

 private:
  void apply_gradient_list(const std::vector<Gradient>& grads, const std::vector<Variable>& variables);
  void ensure_slots(const std::vector<const Variable*>& vars);
  /// The float64 learning rate of the step whose counter (steps taken) is `counter`.
  Tensor current_learning_rate(const Tensor& counter) const;

  std::string name_;
  Variable learning_rate_;
  std::shared_ptr<const LearningRateSchedule> schedule_;
  std::optional<Variable> iterations_;
  std::unordered_map<uint64_t, std::vector<Variable>> slots_;
  std::vector<uint64_t> slot_order_;  // variable ids in slot creation order
  // Variable parameters of a traced function that slots were made for (a Variable passed to
  // the function as an argument): slot() finds them by the Variable first bound to them.
  std::vector<std::shared_ptr<detail::VariableState>> parameter_keys_;
};

struct SGDOptions {
  double learning_rate = 0.01;
  double momentum = 0.0;  // in [0, 1]; 0 = plain gradient descent (no slots)
  bool nesterov = false;
};

/// Stochastic gradient descent with optional (Nesterov) momentum, as Keras defines it:
///   velocity = momentum * velocity - lr * g
///   var += velocity                          (nesterov: var += momentum * velocity - lr * g)
/// With momentum 0 it is var -= lr * g and creates no slots besides the step counter.
/// A sparse gradient (rows g_i at distinct indices i), as Keras's sparse update_step:
///   momentum 0:  var[i] -= lr * g_i                    (no other row is written)
///   else:        velocity = momentum * velocity;  velocity[i] -= lr * g_i
///                var += velocity      (nesterov: var[i] -= lr * g_i; var += momentum * velocity)
class SGD : public Optimizer {
 public:
  explicit SGD(SGDOptions options = {});
  explicit SGD(double learning_rate, double momentum = 0.0, bool nesterov = false);
  std::vector<std::string> slot_names() const override;
  double momentum() const { return options_.momentum; }
  bool nesterov() const { return options_.nesterov; }

 protected:
  void update(const Tensor& grad, Variable& var, std::vector<Variable>& slots,
              const StepValues& step) override;
  void update_sparse(const IndexedSlices& grad, Variable& var, std::vector<Variable>& slots,
                     const StepValues& step) override;

 private:
  SGDOptions options_;
};

struct AdamOptions {
  double learning_rate = 0.001;
  double beta1 = 0.9;     // in [0, 1)
  double beta2 = 0.999;   // in [0, 1)
  double epsilon = 1e-7;  // >= 0, Keras' default
};

/// Adam (Kingma & Ba) with Keras' bias correction; t = iterations() + 1:
///   m += (g - m) * (1 - beta1);   v += (g^2 - v) * (1 - beta2)
///   var -= lr * sqrt(1 - beta2^t) / (1 - beta1^t) * m / (sqrt(v) + epsilon)
/// A sparse gradient (rows g_i at distinct indices i), as Keras's sparse update_step (the
/// moments decay everywhere, so every row of var moves):
///   m -= m * (1 - beta1);  m[i] += g_i * (1 - beta1)
///   v -= v * (1 - beta2);  v[i] += g_i^2 * (1 - beta2)
///   var -= (m * alpha) / (sqrt(v) + epsilon),  alpha = lr * sqrt(1 - beta2^t) / (1 - beta1^t)
class Adam : public Optimizer {
 public:
  explicit Adam(AdamOptions options = {});
  explicit Adam(double learning_rate, double beta1 = 0.9, double beta2 = 0.999,
                double epsilon = 1e-7);
  std::vector<std::string> slot_names() const override;
  const AdamOptions& options() const { return options_; }

 protected:
  Adam(std::string name, AdamOptions options);  // for AdamW
  void update(const Tensor& grad, Variable& var, std::vector<Variable>& slots,
              const StepValues& step) override;
  void update_sparse(const IndexedSlices& grad, Variable& var, std::vector<Variable>& slots,
                     const StepValues& step) override;

 private:
  AdamOptions options_;
};

// ---- AdamW, RMSprop and gradient clipping ----------------------------------------------------

struct AdamWOptions {
  double learning_rate = 0.001;
  double weight_decay = 0.004;  // >= 0, Keras' default
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-7;
};

/// AdamW (Loshchilov & Hutter) as Keras defines it: the decay is decoupled from the gradient and
/// scaled by the current learning rate, applied before the Adam step of the same call:
///   var -= var * (weight_decay * lr);   then Adam's update (see Adam) with the decayed var.
/// Two passes over each weight: the one-pass descent op for the decay, apply_adam for the rest.
class AdamW : public Adam {
 public:
  explicit AdamW(AdamWOptions options = {});
  explicit AdamW(double learning_rate, double weight_decay = 0.004, double beta1 = 0.9,
                 double beta2 = 0.999, double epsilon = 1e-7);
  double weight_decay() const { return weight_decay_; }

 protected:
  void update(const Tensor& grad, Variable& var, std::vector<Variable>& slots,
              const StepValues& step) override;
  /// The dense gradient through update(): Adam's sparse rule would skip the decay.
  void update_sparse(const IndexedSlices& grad, Variable& var, std::vector<Variable>& slots,
                     const StepValues& step) override;

 private:
  double weight_decay_;
};

struct RMSpropOptions {
  double learning_rate = 0.001;
  double rho = 0.9;        // in [0, 1]
  double momentum = 0.0;   // in [0, 1]; 0 = no momentum slot
  double epsilon = 1e-7;   // >= 0
  bool centered = false;   // also track the mean gradient and divide by the variance estimate
};

/// RMSprop as Keras defines it (epsilon inside the square root):
///   velocity = rho * velocity + (1 - rho) * g^2
///   centered: average_gradient = rho * average_gradient + (1 - rho) * g;
///             denominator = velocity - average_gradient^2 + epsilon
///   else:     denominator = velocity + epsilon
///   increment = lr * g / sqrt(denominator)
///   momentum > 0: momentum_slot = momentum * momentum_slot + increment; var -= momentum_slot
///   else:         var -= increment
/// Slots: "velocity", then "momentum" (momentum > 0), then "average_gradient" (centered).
/// A sparse gradient (rows g_i at distinct indices i), as Keras's sparse update_step: velocity
/// (and average_gradient) decay everywhere and get their rows' terms added, the increment is
/// computed for the gathered rows only, lr * g_i / sqrt(denominator[i]); without momentum only
/// those rows of var change (var[i] -= increment_i), with it momentum_slot decays everywhere,
/// gets increment_i added at i, and var -= momentum_slot.
class RMSprop : public Optimizer {
 public:
  explicit RMSprop(RMSpropOptions options = {});
  explicit RMSprop(double learning_rate, double rho = 0.9, double momentum = 0.0, double epsilon = 1e-7,
                   bool centered = false);
  std::vector<std::string> slot_names() const override;
  const RMSpropOptions& options() const { return options_; }

 protected:
  void update(const Tensor& grad, Variable& var, std::vector<Variable>& slots,
              const StepValues& step) override;
  void update_sparse(const IndexedSlices& grad, Variable& var, std::vector<Variable>& slots,
                     const StepValues& step) override;

 private:
  RMSpropOptions options_;
};

// Gradient clipping (tf.clip_by_value over a list, tf.clip_by_global_norm). Both take the list
// GradientTape::gradient returns; an undefined gradient (tg::Tensor{}) passes through as it is.
// They work eagerly and inside traced functions.

/// Each gradient clipped elementwise to [clip_value_min, clip_value_max] (TF's
/// minimum(maximum(...))). tg::InvalidArgumentError unless min <= max (both not NaN);
/// tg::TypeError for a non-floating gradient.
std::vector<Tensor> clip_by_value(const std::vector<Tensor>& grads, double clip_value_min, double clip_value_max);

/// sqrt(sum of every element squared) over the defined gradients, in their dtype (a scalar).
/// tg::TypeError when they are not all float32 or all float64; tg::ValueError when none is
/// defined.
Tensor global_norm(const std::vector<Tensor>& grads);

/// tf.clip_by_global_norm: every gradient times clip_norm / max(global_norm, clip_norm), so the
/// clipped list's global norm is at most clip_norm; returns {clipped, global_norm} (the norm
/// before clipping). A non-finite global norm (an inf or NaN gradient) makes every clipped
/// value NaN, as in TF, so a bad step is visible rather than silently scaled to zero.
/// tg::ValueError unless clip_norm > 0 is finite.
std::pair<std::vector<Tensor>, Tensor> clip_by_global_norm(const std::vector<Tensor>& grads, double clip_norm);

/// The same over GradientTape::sparse_gradient's list, as TF: an IndexedSlices counts with its
/// values (repeated indices each counted) and is clipped by scaling its values, staying sparse.
/// Templates only so that a brace list of tensors still selects the overloads above.
Tensor global_norm_of_gradients(const std::vector<Gradient>& grads);
std::pair<std::vector<Gradient>, Tensor> clip_gradients_by_global_norm(const std::vector<Gradient>& grads,
                                                                       double clip_norm);
template <class G>
  requires std::same_as<G, Gradient>
Tensor global_norm(const std::vector<G>& grads) {
  return global_norm_of_gradients(grads);
}
template <class G>
  requires std::same_as<G, Gradient>
std::pair<std::vector<Gradient>, Tensor> clip_by_global_norm(const std::vector<G>& grads, double clip_norm) {
  return clip_gradients_by_global_norm(grads, clip_norm);
}

}  // namespace tg::optim
