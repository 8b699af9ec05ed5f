// Adam with Keras' bias correction folded into the step size.
#include "tracegraph/ops.h"
#include "tracegraph/optim.h"

namespace tg::optim {

Adam::Adam(AdamOptions options) : Optimizer("Adam", options.learning_rate), options_(options) {
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
  Variable& m = slots[0];
  Variable& v = slots[1];
  const Tensor m_new = m.assign_add((grad - m.read_value()) * (one - beta1));
  const Tensor v_new = v.assign_add((square(grad) - v.read_value()) * (one - beta2));
  var.assign_sub(m_new * alpha / (sqrt(v_new) + constant(options_.epsilon, dt)));
}

}  // namespace tg::optim
