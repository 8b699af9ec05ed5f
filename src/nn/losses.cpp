// Keras's regression and logit losses with its default reduction (the mean over the batch),
// composed from public ops so that they differentiate.
#include <cmath>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "ops/op.h"
#include "tracegraph/nn.h"
#include "tracegraph/ops.h"

namespace tg::nn {

using detail::op_error;

namespace {

// Both arguments defined, floating, of one dtype and of one shape: a mismatch is an error rather
// than a broadcast, which would average a (batch, batch) matrix of wrong pairs. Returns the
// targets, checked: where the trace cannot tell the shapes equal (None dims), the check is a
// node that runs with the graph, so it holds for every batch.
Tensor checked_pair(const char* op, const Tensor& targets, const char* targets_name, const Tensor& predictions,
                    const char* predictions_name) {
  if (!targets.defined() || !predictions.defined()) op_error<ValueError>(op, "got an empty tg::Tensor");
  for (const auto& [t, what] : {std::pair{&targets, targets_name}, std::pair{&predictions, predictions_name}})
    if (!is_floating(t->dtype()))
      op_error<TypeError>(op, what, " must be float32 or float64, got ", to_string(t->dtype()),
                          "; tg::cast it (integer class labels go to sparse_softmax_cross_entropy)");
  if (targets.dtype() != predictions.dtype())
    op_error<TypeError>(op, targets_name, " have dtype ", to_string(targets.dtype()), " but ", predictions_name,
                        " have dtype ", to_string(predictions.dtype()), "; tg::cast one of them");
  return detail::ensure_same_shape(targets, predictions, op, targets_name, predictions_name);
}

}  // namespace

Tensor mean_squared_error(const Tensor& y_true, const Tensor& y_pred) {
  const Tensor targets = checked_pair("mean_squared_error", y_true, "y_true", y_pred, "y_pred");
  return reduce_mean(square(y_pred - targets));
}

Tensor binary_crossentropy_with_logits(const Tensor& labels, const Tensor& logits) {
  const Tensor targets = checked_pair("binary_crossentropy_with_logits", labels, "labels", logits, "logits");
  // TF's form, max(x, 0) - x * z + log(1 + exp(-|x|)), with the max and |x| written as selects
  // on x >= 0 as TF does, so that the gradient at x = 0 is sigmoid(0) - z (a kink-free sum).
  const Tensor positive = logits >= 0.0;
  const Tensor zero = zeros_like(logits);
  const Tensor relu_logits = where(positive, logits, zero);
  const Tensor neg_abs_logits = where(positive, -logits, logits);
  return reduce_mean(relu_logits - logits * targets + log(1.0 + exp(neg_abs_logits)));
}

Tensor softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits) {
  const char* op = "softmax_cross_entropy_with_logits";
  const Tensor targets = checked_pair(op, labels, "labels", logits, "logits");
  const TensorShape s = detail::static_shape(logits);
  if (s.has_rank() && s.rank() < 1)
    op_error<InvalidArgumentError>(op, "logits must have a class axis (rank >= 1), got a scalar");
  return reduce_mean(-reduce_sum(targets * log_softmax(logits, -1), {-1}));
}

Tensor huber(const Tensor& y_true, const Tensor& y_pred, double delta) {
  const char* op = "huber";
  if (!(std::isfinite(delta) && delta > 0))
    op_error<ValueError>(op, "delta must be a finite number > 0 (where the loss turns linear), got ", delta);
  const Tensor error = y_pred - checked_pair(op, y_true, "y_true", y_pred, "y_pred");
  const Tensor abs_error = abs(error);
  return reduce_mean(where(abs_error <= delta, 0.5 * square(error), delta * abs_error - 0.5 * delta * delta));
}

}  // namespace tg::nn
