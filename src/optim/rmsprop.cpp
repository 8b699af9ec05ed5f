// RMSprop with Keras' update rule (epsilon inside the square root, plain momentum).
#include "tracegraph/ops.h"
#include "tracegraph/optim.h"

namespace tg::optim {

RMSprop::RMSprop(RMSpropOptions options) : Optimizer("RMSprop", options.learning_rate), options_(options) {
  check_hyper("rho", options_.rho, 0.0, 1.0, /*hi_open=*/false);
  check_hyper("momentum", options_.momentum, 0.0, 1.0, /*hi_open=*/false);
  check_hyper("epsilon", options_.epsilon, 0.0, 1.0, /*hi_open=*/false);
}

RMSprop::RMSprop(double learning_rate, double rho, double momentum, double epsilon, bool centered)
    : RMSprop(RMSpropOptions{learning_rate, rho, momentum, epsilon, centered}) {}

std::vector<std::string> RMSprop::slot_names() const {
  std::vector<std::string> names{"velocity"};
  if (options_.momentum > 0) names.emplace_back("momentum");
  if (options_.centered) names.emplace_back("average_gradient");
  return names;
}

void RMSprop::update(const Tensor& grad, Variable& var, std::vector<Variable>& slots, const StepValues& step) {
  const DType dt = var.dtype();
  const Tensor rho = constant(options_.rho, dt);
  const Tensor one_minus_rho = constant(1.0 - options_.rho, dt);
  const Tensor epsilon = constant(options_.epsilon, dt);
  Variable& velocity = slots[0];
  const Tensor v = velocity.assign(rho * velocity.read_value() + one_minus_rho * square(grad));
  Tensor denominator;
  if (options_.centered) {
    Variable& average = slots.back();
    const Tensor avg = average.assign(rho * average.read_value() + one_minus_rho * grad);
    denominator = v - square(avg) + epsilon;
  } else {
    denominator = v + epsilon;
  }
  const Tensor increment = step.learning_rate * grad / sqrt(denominator);
  if (options_.momentum > 0) {
    Variable& momentum = slots[1];
    var.assign_sub(momentum.assign(constant(options_.momentum, dt) * momentum.read_value() + increment));
  } else {
    var.assign_sub(increment);
  }
}

void RMSprop::update_sparse(const IndexedSlices& grad, Variable& var, std::vector<Variable>& slots,
                            const StepValues& step) {
  const DType dt = var.dtype();
  const Tensor rho = constant(options_.rho, dt);
  const Tensor one_minus_rho = constant(1.0 - options_.rho, dt);
  const Tensor epsilon = constant(options_.epsilon, dt);
  const Tensor& indices = grad.indices();
  auto rows = [&](const Tensor& values) { return IndexedSlices(indices, values, grad.dense_shape()); };
  Variable& velocity = slots[0];
  velocity.assign(rho * velocity.read_value());
  velocity.scatter_add(rows(square(grad.values()) * one_minus_rho));
  // The denominator of the gathered rows only: elementwise, so the same values as Keras's
  // gather of the whole denominator.
  Tensor denominator;
  if (options_.centered) {
    Variable& average = slots.back();
    average.assign(rho * average.read_value());
    average.scatter_add(rows(grad.values() * one_minus_rho));
    denominator = gather(velocity.read_value(), indices) - square(gather(average.read_value(), indices)) + epsilon;
  } else {
    denominator = gather(velocity.read_value(), indices) + epsilon;
  }
  const Tensor increment = step.learning_rate * grad.values() * rsqrt(denominator);
  if (options_.momentum > 0) {
    Variable& momentum = slots[1];
    momentum.assign(constant(options_.momentum, dt) * momentum.read_value());
    momentum.scatter_add(rows(increment));
    var.assign_add(neg(momentum.read_value()));
  } else {
    var.scatter_add(rows(neg(increment)));
  }
}

}  // namespace tg::optim
