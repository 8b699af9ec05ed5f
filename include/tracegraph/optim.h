// Optimizers (tf.keras.optimizers.SGD / Adam): apply gradients to Variables, eagerly or inside a
// traced tg::function.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tracegraph/tensor.h"
#include "tracegraph/variable.h"

namespace tg::optim {

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

  /// The number of apply_gradients calls run so far (an eager read of the step counter).
  int64_t iterations() const;
  /// The step counter Variable (int64 scalar), created by the first apply_gradients.
  std::optional<Variable> iterations_variable() const { return iterations_; }

  double learning_rate() const;
  /// Throws tg::ValueError for a negative or non-finite value.
  void set_learning_rate(double learning_rate);

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
    Tensor learning_rate;  // the learning-rate Variable read, cast to the variable dtype
    Tensor step;           // iterations + 1, cast to the variable dtype
  };
  /// Updates one variable with its gradient (same dtype and shape), reading and writing its
  /// slots (in slot_names() order).
  virtual void update(const Tensor& grad, Variable& var, std::vector<Variable>& slots,
                      const StepValues& step) = 0;
  /// Throws tg::ValueError "[<name>] <what> must be ..." unless lo <= value <= hi (finite).
  void check_hyper(const char* what, double value, double lo, double hi, bool hi_open) const;

 private:
  void ensure_slots(const std::vector<const Variable*>& vars);

  std::string name_;
  Variable learning_rate_;
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
class Adam : public Optimizer {
 public:
  explicit Adam(AdamOptions options = {});
  explicit Adam(double learning_rate, double beta1 = 0.9, double beta2 = 0.999,
                double epsilon = 1e-7);
  std::vector<std::string> slot_names() const override;
  const AdamOptions& options() const { return options_; }

 protected:
  void update(const Tensor& grad, Variable& var, std::vector<Variable>& slots,
              const StepValues& step) override;

 private:
  AdamOptions options_;
};

}  // namespace tg::optim
