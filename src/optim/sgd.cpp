// SGD with optional (Nesterov) momentum, with Keras' update rule.
#include "ops/optimizer_updates.h"
#include "tracegraph/ops.h"
#include "tracegraph/optim.h"

namespace tg::optim {

SGD::SGD(SGDOptions options) : Optimizer("SGD", options.learning_rate), options_(options) {
  check_hyper("momentum", options_.momentum, 0.0, 1.0, /*hi_open=*/false);
}

SGD::SGD(double learning_rate, double momentum, bool nesterov)
    : SGD(SGDOptions{learning_rate, momentum, nesterov}) {}

std::vector<std::string> SGD::slot_names() const {
  if (options_.momentum == 0.0) return {};
  return {"momentum"};
}

void SGD::update(const Tensor& grad, Variable& var, std::vector<Variable>& slots,
                 const StepValues& step) {
  if (slots.empty()) {
    detail::apply_gradient_descent(var, step.learning_rate, grad);  // var -= lr * grad, one pass
    return;
  }
  const Tensor scaled = step.learning_rate * grad;
  const Tensor momentum = constant(options_.momentum, var.dtype());
  Variable& velocity = slots[0];
  const Tensor v_new = velocity.assign(momentum * velocity.read_value() - scaled);
  if (options_.nesterov)
    var.assign_add(momentum * v_new - scaled);
  else
    var.assign_add(v_new);
}

void SGD::update_sparse(const IndexedSlices& grad, Variable& var, std::vector<Variable>& slots,
                        const StepValues& step) {
  // Keras's rows to add: -g_i * lr.
  const IndexedSlices add_rows(grad.indices(), neg(grad.values()) * step.learning_rate, grad.dense_shape());
  if (slots.empty()) {
    var.scatter_add(add_rows);
    return;
  }
  const Tensor momentum = constant(options_.momentum, var.dtype());
  Variable& velocity = slots[0];
  velocity.assign(velocity.read_value() * momentum);
  velocity.scatter_add(add_rows);
  if (options_.nesterov) {
    var.scatter_add(add_rows);
    var.assign_add(velocity.read_value() * momentum);
  } else {
    var.assign_add(velocity.read_value());
  }
}

}  // namespace tg::optim
