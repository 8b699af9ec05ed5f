// Gradient rules that differentiate a formula with a tape of their own. They live in the
// autodiff layer because the ops layer may not use tapes; register_all_ops (src/register_ops.cpp)
// adds them after the op families have registered their ops.
#include "autodiff/composed_gradients.h"

#include <vector>

#include "ops/op.h"
#include "tracegraph/gradient.h"
#include "tracegraph/ops.h"

namespace tg::detail {
namespace {

// dx, dgamma, dbeta of the gradient op written with public ops (the formula of layer_norm.h),
// which the gradient op's own gradient differentiates.
std::vector<Tensor> composed_grad(const std::vector<Tensor>& in) {
  const Tensor& x = in[0];
  const Tensor& gamma = in[1];
  const Tensor mean = expand_dims(in[2], -1), rstd = expand_dims(in[3], -1);
  const Tensor& dy = in[4];
  const Tensor xhat = (x - mean) * rstd;
  const Tensor g = dy * gamma;
  const Tensor dx = rstd * (g - reduce_mean(g, {-1}, true) - xhat * reduce_mean(g * xhat, {-1}, true));
  // The column sums over every leading axis, whatever x's rank: as rows of gamma's length.
  const Tensor rows = concat({constant(std::vector<int32_t>{-1}, {1}, int32), cast(shape(gamma), int32)}, 0);
  auto column_sums = [&](const Tensor& t) { return reduce_sum(reshape(t, rows), {0}); };
  return {dx, column_sums(dy * xhat), column_sums(dy)};
}

// The gradient op's own gradient: its formula written with public ops, differentiated by a tape
// of its own (which an outer tape records in turn, for a third order).
std::vector<Tensor> grad_of_grad(const GradInputs& g) {
  const std::vector<Tensor> in(g.inputs.begin(), g.inputs.end());
  GradientTape tape;
  for (const Tensor& t : in) tape.watch(t);
  const std::vector<Tensor> d = composed_grad(in);
  const Tensor target = reduce_sum(d[0] * g.grads[0]) + reduce_sum(d[1] * g.grads[1]) + reduce_sum(d[2] * g.grads[2]);
  return tape.gradient(target, in);
}

}  // namespace

void register_composed_gradients(OpDef* table) { set_grad(table, OpId::LayerNormGrad, &grad_of_grad); }

}  // namespace tg::detail
