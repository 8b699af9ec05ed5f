// The optimizer base: validation of apply_gradients, the step counter and slot Variables.
#include <cmath>
#include <unordered_set>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "ops/runtime_shape_checks.h"
#include "ops/variable_creation.h"
#include "ops/variable_state.h"
#include "tracegraph/ops.h"
#include "tracegraph/optim.h"

namespace tg::optim {
namespace {

Tensor learning_rate_value(const std::string& name, double lr) {
  if (!std::isfinite(lr) || lr < 0)
    throw ValueError(detail::str_cat("[", name, "] learning_rate must be a finite number >= 0, got ",
                                     lr, "; pass e.g. 0.001"));
  return constant(lr, float64);
}

}  // namespace

Optimizer::Optimizer(std::string name, double learning_rate)
    : name_(std::move(name)),
      learning_rate_(learning_rate_value(name_, learning_rate), name_ + "/learning_rate") {}

Optimizer::~Optimizer() = default;

void Optimizer::check_hyper(const char* what, double value, double lo, double hi,
                            bool hi_open) const {
  const bool ok = std::isfinite(value) && value >= lo && (hi_open ? value < hi : value <= hi);
  if (!ok)
    throw ValueError(detail::str_cat("[", name_, "] ", what, " must be in [", lo, ", ", hi,
                                     hi_open ? ")" : "]", ", got ", value));
}

double Optimizer::learning_rate() const {
  if (schedule_) return schedule_->value_at(iterations());
  return learning_rate_.read_value().item<double>();
}

void Optimizer::set_learning_rate(double learning_rate) {
  if (schedule_)
    throw TypeError(detail::str_cat("[", name_, ".set_learning_rate] this optimizer follows a learning-rate "
                                    "schedule, so its learning rate is not settable; make a new optimizer "
                                    "with a constant rate (or another schedule)"));
  learning_rate_.assign(learning_rate_value(name_, learning_rate));
}

void Optimizer::set_learning_rate_schedule(std::shared_ptr<const LearningRateSchedule> schedule) {
  const std::string op = name_ + ".set_learning_rate_schedule";
  if (!schedule) detail::op_error<ValueError>(op.c_str(), "got a null schedule");
  if (iterations_)
    detail::op_error<ValueError>(op.c_str(), "the optimizer has already taken steps (its step counter exists); "
                                 "functions traced since would keep the old rate. Set the schedule before "
                                 "the first apply_gradients");
  schedule_ = std::move(schedule);
}

Tensor Optimizer::current_learning_rate(const Tensor& counter) const {
  if (!schedule_) return learning_rate_.read_value();
  const Tensor lr = (*schedule_)(counter);
  if (!lr.defined() || !is_floating(lr.dtype()) || detail::static_shape(lr).rank() != 0)
    throw TypeError(detail::str_cat("[", name_, ".apply_gradients] the learning-rate schedule must return a "
                                    "float scalar tensor, got ",
                                    lr.defined() ? to_string(lr.dtype()) + " " + detail::static_shape(lr).to_string()
                                                 : std::string("an empty tg::Tensor")));
  return lr.dtype() == float64 ? lr : cast(lr, float64);
}

int64_t Optimizer::iterations() const {
  return iterations_ ? iterations_->read_value().item<int64_t>() : 0;
}

Variable Optimizer::slot(const Variable& var, const std::string& slot_name) const {
  const auto names = slot_names();
  std::size_t k = 0;
  while (k < names.size() && names[k] != slot_name) ++k;
  if (k == names.size()) {
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "'" : ", '") + n + "'";
    throw ValueError(detail::str_cat("[", name_, ".slot] this optimizer has no slot '", slot_name,
                                     "'; its slots are: ", known.empty() ? "none" : known));
  }
  auto it = slots_.find(var.id());
  for (const auto& p : parameter_keys_) {
    std::lock_guard lock(p->mu);
    if (it == slots_.end() && p->first_binding_id == var.id()) it = slots_.find(p->id);
  }
  if (it == slots_.end())
    throw ValueError(detail::str_cat("[", name_, ".slot] no slots for variable '", var.name(),
                                     "' yet; they are created by the first apply_gradients that "
                                     "updates it"));
  return it->second[k];
}

std::vector<Variable> Optimizer::variables() const {
  std::vector<Variable> out{learning_rate_};
  if (iterations_) out.push_back(*iterations_);
  for (uint64_t id : slot_order_)
    for (const auto& s : slots_.at(id)) out.push_back(s);
  return out;
}

void Optimizer::ensure_slots(const std::vector<const Variable*>& vars) {
  // Each creation below is a Variable construction, so inside a later trace it throws the
  // singleton-rule ValueError before anything is half-built for that variable. The creator
  // scope lets that error say which optimizer made which Variable, and the fix that fits.
  bool creates = !iterations_;
  for (const Variable* v : vars) creates = creates || !slots_.count(v->id());
  if (!creates) return;  // the common case: every step after the first
  detail::VariableCreator creator;
  creator.fix = detail::str_cat(
      "An optimizer creates its step counter and its slots on the first apply_gradients that "
      "updates a variable; here that was a later trace (a second optimizer, or a new variable, "
      "given to an already traced function). Use one tg::function per optimizer, or let '",
      name_, "' take one step (eagerly or in its own function) before this function traces");
  const detail::VariableCreatorScope creating(&creator);
  if (!iterations_) {
    creator.what = detail::str_cat("optimizer '", name_, "' (its step counter)");
    iterations_.emplace(constant(int64_t{0}), name_ + "/iterations");
  }
  const auto names = slot_names();
  for (const Variable* v : vars) {
    if (slots_.count(v->id())) continue;
    std::vector<Variable> slots;
    for (const auto& n : names) {
      creator.what = detail::str_cat("optimizer '", name_, "' (its slot '", n, "' for tg::Variable '",
                                     v->name(), "')");
      slots.emplace_back(zeros(v->shape(), v->dtype()), v->name() + "/" + n);
    }
    slots_.emplace(v->id(), std::move(slots));
    slot_order_.push_back(v->id());
    if (detail::VariableState& state = *v->state(); state.parameter && !names.empty()) {
      // A Variable argument of a traced function: these slots belong to the first Variable the
      // parameter is bound to, and a call that binds another one is refused (not silently
      // given the first one's moments).
      std::lock_guard lock(state.mu);
      state.owns_state_of_first_binding = true;
      parameter_keys_.push_back(v->state());
    }
  }
}

void Optimizer::update_sparse(const IndexedSlices& grad, Variable& var, std::vector<Variable>& slots,
                              const StepValues& step) {
  update(grad.to_dense(), var, slots, step);
}

void Optimizer::apply_gradients(const std::vector<Tensor>& grads,
                                const std::vector<Variable>& variables) {
  apply_gradient_list(std::vector<Gradient>(grads.begin(), grads.end()), variables);
}

void Optimizer::apply_gradient_list(const std::vector<Gradient>& grads,
                                    const std::vector<Variable>& variables) {
  const std::string op = name_ + ".apply_gradients";
  if (grads.size() != variables.size())
    detail::op_error<InvalidArgumentError>(op.c_str(), "got ", grads.size(), " gradients for ",
                                           variables.size(), " variables; pass one gradient per "
                                           "variable, in the same order");
  if (variables.empty())
    detail::op_error<ValueError>(op.c_str(), "no variables given; pass the variables to update");
  std::unordered_set<uint64_t> seen;
  std::vector<const Variable*> updated;
  for (std::size_t i = 0; i < variables.size(); ++i) {
    const Variable& v = variables[i];
    if (!is_floating(v.dtype()))
      detail::op_error<TypeError>(op.c_str(), "variable ", i, " ('", v.name(), "') has dtype ",
                                  to_string(v.dtype()), "; only float32/float64 variables can "
                                  "be trained");
    if (!seen.insert(v.id()).second)
      detail::op_error<InvalidArgumentError>(op.c_str(), "variable ", i, " ('", v.name(),
                                             "') is listed twice; sum its gradients and pass it once");
    const Gradient& g = grads[i];
    if (!g.defined()) continue;
    if (g.is_sparse() && !(g.slices().dense_shape() == v.shape().none_aware()))
      detail::op_error<InvalidArgumentError>(op.c_str(), "gradient ", i, " is an IndexedSlices of dense_shape ",
                                             g.slices().dense_shape().to_string(), " but variable '", v.name(),
                                             "' has shape ", v.shape().to_string(),
                                             "; gradients must have their variable's shape");
    if (g.dtype() != v.dtype())
      detail::op_error<InvalidArgumentError>(op.c_str(), "gradient ", i, " has dtype ",
                                             to_string(g.dtype()), " but variable '", v.name(),
                                             "' has dtype ", to_string(v.dtype()),
                                             "; tg::cast the gradient first");
    if (!g.is_sparse() && !detail::static_shape(g.dense()).is_compatible_with(v.shape()))
      detail::op_error<InvalidArgumentError>(op.c_str(), "gradient ", i, " has shape ",
                                             detail::static_shape(g.dense()).to_string(), " but variable '", v.name(),
                                             "' has shape ", v.shape().to_string(),
                                             "; gradients must have their variable's shape");
    updated.push_back(&v);
  }
  if (updated.empty())
    detail::op_error<ValueError>(op.c_str(), "no gradients provided for any variable (all ",
                                 variables.size(), " are undefined); check that the loss depends "
                                 "on the variables");
  std::vector<const Variable*> all;
  for (const auto& v : variables) all.push_back(&v);
  ensure_slots(all);

  // One read of the counter and the learning rate per call, cast once per dtype.
  const Tensor counter = iterations_->read_value();
  const Tensor step64 = counter + int64_t{1};
  const Tensor lr64 = current_learning_rate(counter);  // a schedule reads the steps taken, from 0
  std::optional<StepValues> per_dtype[2];
  for (std::size_t i = 0; i < variables.size(); ++i) {
    if (!grads[i].defined()) continue;
    Variable v = variables[i];
    auto& sv = per_dtype[v.dtype() == float64 ? 1 : 0];
    if (!sv) {
      sv = StepValues{v.dtype() == float64 ? lr64 : cast(lr64, v.dtype()), cast(step64, v.dtype())};
    }
    if (grads[i].is_sparse()) {
      // Keras deduplicates a sparse gradient before its update step; the slices' values were
      // checked against the variable's rows when they were made.
      update_sparse(grads[i].slices().deduplicated(), v, slots_.at(v.id()), *sv);
      continue;
    }
    // A gradient of None dims passes the check above and would broadcast into the slots (a
    // (1,) gradient moving every momentum entry): its shape is checked again when the graph runs.
    // (The variable is read only then: a fully known gradient was settled above.)
    const Tensor& dense = grads[i].dense();
    const Tensor g = detail::static_shape(dense).is_fully_defined()
                         ? dense
                         : detail::ensure_same_shape(dense, v.read_value(), op, detail::str_cat("gradient ", i),
                                                     detail::str_cat("variable '", v.name(), "'"),
                                                     "gradients must have their variable's shape");
    update(g, v, slots_.at(v.id()), *sv);
  }
  iterations_->assign_add(int64_t{1});
}

void Optimizer::apply_gradients(const std::vector<std::pair<Tensor, Variable>>& grads_and_vars) {
  std::vector<Tensor> grads;
  std::vector<Variable> vars;
  for (const auto& [g, v] : grads_and_vars) {
    grads.push_back(g);
    vars.push_back(v);
  }
  apply_gradients(grads, vars);
}

}  // namespace tg::optim
