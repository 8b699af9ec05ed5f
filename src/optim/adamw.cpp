// AdamW: Keras's decoupled weight decay, then the same one-pass Adam update as Adam.
#include <limits>

#include "ops/optimizer_updates.h"
#include "tracegraph/ops.h"
#include "tracegraph/optim.h"

namespace tg::optim {

AdamW::AdamW(AdamWOptions options)
    : Adam("AdamW", AdamOptions{options.learning_rate, options.beta1, options.beta2, options.epsilon}),
      weight_decay_(options.weight_decay) {
  check_hyper("weight_decay", weight_decay_, 0.0, std::numeric_limits<double>::infinity(), /*hi_open=*/false);
}

AdamW::AdamW(double learning_rate, double weight_decay, double beta1, double beta2, double epsilon)
    : AdamW(AdamWOptions{learning_rate, weight_decay, beta1, beta2, epsilon}) {}

void AdamW::update(const Tensor& grad, Variable& var, std::vector<Variable>& slots, const StepValues& step) {
  if (weight_decay_ != 0.0) {
    // var -= var * (weight_decay * lr): the descent op with the variable as its "gradient" is
    // one pass over the weights. The rate is this step's (a schedule's value included).
    const Tensor decay = step.learning_rate * constant(weight_decay_, var.dtype());
    detail::apply_gradient_descent(var, decay, var.read_value());
  }
  Adam::update(grad, var, slots, step);
}

void AdamW::update_sparse(const IndexedSlices& grad, Variable& var, std::vector<Variable>& slots,
                          const StepValues& step) {
  update(grad.to_dense(), var, slots, step);
}

}  // namespace tg::optim
