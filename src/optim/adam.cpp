// Adam with Keras' bias correction folded into the step size.
#include "ops/optimizer_updates.h"
#include "tracegraph/ops.h"
#include "tracegraph/optim.h"

namespace tg::optim {

Adam::Adam(AdamOptions options) : Adam("Adam", options) {}

Adam::Adam(std::string name, AdamOptions options)
    : Optimizer(std::move(name), options.learning_rate), options_(options) {
  check_hyper("beta1", options_.beta1, 0.0, 1.0, /*hi_open=*/true);
  check_hyper("beta2", options_.beta2, 0.0, 1.0, /*hi_open=*/true);
  check_hyper("epsilon", options_.epsilon, 0.0, 1.0, /*hi_open=*/false);
}

Adam::Adam(double learning_rate, double beta1, double beta2, double epsilon)
    : Adam(AdamOptions{learning_rate, beta1, beta2, epsilon}) {}

std::vector<std::string> Adam::slot_names() const { return {"m", "v"}; }

void Adam::update(const Tensor& grad, Variable& var, std::vector<Variable>& slots,
                  const StepValues& step) {
  const DType dt = var.dtype();
  const Tensor beta1 = constant(options_.beta1, dt);
  const Tensor beta2 = constant(options_.beta2, dt);
  const Tensor one = constant(1.0, dt);
  const Tensor alpha =
      step.learning_rate * sqrt(one - pow(beta2, step.step)) / (one - pow(beta1, step.step));
  // m += (grad - m) * (1 - beta1); v += (grad^2 - v) * (1 - beta2);
  // var -= m * alpha / (sqrt(v) + epsilon): one pass over the four arrays.
  detail::apply_adam(var, slots[0], slots[1], grad, alpha, beta1, beta2, constant(options_.epsilon, dt));
}

void Adam::update_sparse(const IndexedSlices& grad, Variable& var, std::vector<Variable>& slots,
                         const StepValues& step) {
  const DType dt = var.dtype();
  const Tensor one = constant(1.0, dt);
  const Tensor beta1 = constant(options_.beta1, dt);
  const Tensor beta2 = constant(options_.beta2, dt);
  const Tensor alpha =
      step.learning_rate * sqrt(one - pow(beta2, step.step)) / (one - pow(beta1, step.step));
  Variable& m = slots[0];
  Variable& v = slots[1];
  m.assign_add(neg(m.read_value()) * (one - beta1));
  m.scatter_add(IndexedSlices(grad.indices(), grad.values() * (one - beta1), grad.dense_shape()));
  v.assign_add(neg(v.read_value()) * (one - beta2));
  v.scatter_add(IndexedSlices(grad.indices(), square(grad.values()) * (one - beta2), grad.dense_shape()));
  var.assign_sub((m.read_value() * alpha) / (sqrt(v.read_value()) + constant(options_.epsilon, dt)));
}

}  // namespace tg::optim
