// Optimizer updates that read and write each Variable once (TF's ResourceApplyGradientDescent
// and ResourceApplyAdam). Written as the composite ops they replace, operation for operation,
// so that they give those ops' bits; a step over large weights is bound by memory, and the
// composite form passed over each weight array up to 19 times where these pass once.
#pragma once
#include <vector>

#include "tracegraph/variable.h"

namespace tg::detail {

/// var -= lr * grad (lr a scalar of var's dtype).
void apply_gradient_descent(const Variable& var, const Tensor& lr, const Tensor& grad);

/// Adam with the bias correction folded into alpha (scalars of var's float dtype):
///   m += (grad - m) * (1 - beta1);  v += (grad^2 - v) * (1 - beta2);
///   var -= m * alpha / (sqrt(v) + epsilon)      (m and v the updated moments)
void apply_adam(const Variable& var, const Variable& m, const Variable& v, const Tensor& grad,
                const Tensor& alpha, const Tensor& beta1, const Tensor& beta2, const Tensor& epsilon);

/// The optimiser's update groups (src/passes/group_updates.cpp), recorded directly: for tests
/// and the op cases. `variables` holds each update's Variable (and m, v for Adam), `inputs` each
/// update's inputs as the single op takes them, update after update.
void apply_gradient_descent_group(const std::vector<Variable>& variables, const std::vector<Tensor>& inputs);
void apply_adam_group(const std::vector<Variable>& variables, const std::vector<Tensor>& inputs);

/// apply_adam on values instead of Variables: the updated {var, m, v} (for graph replays, which
/// keep Variables in a snapshot). `scalars` are alpha, beta1, beta2, epsilon.
std::vector<Tensor> adam_values(const Tensor& var, const Tensor& m, const Tensor& v, const Tensor& grad,
                                const std::vector<Tensor>& scalars);

}  // namespace tg::detail
