// Gradient clipping over the list GradientTape::gradient returns: by value and by global norm
// (TF's clip_by_value and clip_by_global_norm), undefined gradients passed through.
#include <cmath>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "tracegraph/ops.h"
#include "tracegraph/optim.h"

namespace tg::optim {

using detail::op_error;

namespace {

void check_floating(const char* op, const std::vector<Tensor>& grads) {
  for (std::size_t i = 0; i < grads.size(); ++i)
    if (grads[i].defined() && !is_floating(grads[i].dtype()))
      op_error<TypeError>(op, "gradient ", i, " has dtype ", to_string(grads[i].dtype()),
                          "; only float32/float64 gradients can be clipped");
}

}  // namespace

std::vector<Tensor> clip_by_value(const std::vector<Tensor>& grads, double clip_value_min, double clip_value_max) {
  const char* op = "clip_by_value";
  if (!(clip_value_min <= clip_value_max))  // also false for a NaN bound
    op_error<InvalidArgumentError>(op, "clip_value_min must be <= clip_value_max, got [", clip_value_min, ", ",
                                   clip_value_max, "]");
  check_floating(op, grads);
  std::vector<Tensor> out;
  out.reserve(grads.size());
  for (const Tensor& g : grads)
    out.push_back(g.defined() ? maximum(minimum(g, detail::scalar_like(g, clip_value_max)),
                                        detail::scalar_like(g, clip_value_min))
                              : g);
  return out;
}

Tensor global_norm(const std::vector<Tensor>& grads) {
  const char* op = "global_norm";
  check_floating(op, grads);
  Tensor sum_of_squares;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    if (!g.defined()) continue;
    if (sum_of_squares.defined() && g.dtype() != sum_of_squares.dtype())
      op_error<TypeError>(op, "the gradients mix ", to_string(sum_of_squares.dtype()), " and ",
                          to_string(g.dtype()), " (gradient ", i, "); tg::cast them to one dtype");
    const Tensor squares = reduce_sum(square(g));
    sum_of_squares = sum_of_squares.defined() ? sum_of_squares + squares : squares;
  }
  if (!sum_of_squares.defined())
    op_error<ValueError>(op, "every one of the ", grads.size(), " gradients is undefined; there is no norm to take");
  return sqrt(sum_of_squares);
}

std::pair<std::vector<Tensor>, Tensor> clip_by_global_norm(const std::vector<Tensor>& grads, double clip_norm) {
  if (!(std::isfinite(clip_norm) && clip_norm > 0))
    op_error<ValueError>("clip_by_global_norm", "clip_norm must be a finite number > 0, got ", clip_norm);
  const Tensor norm = global_norm(grads);
  const Tensor clip = detail::scalar_like(norm, clip_norm);
  // TF's arithmetic: clip * min(1 / norm, 1 / clip), plus (norm - norm), which is 0 for a finite
  // norm and NaN otherwise, so an inf or NaN gradient poisons the whole step visibly.
  const Tensor scale = clip * minimum(1.0 / norm, 1.0 / clip) + (norm - norm);
  std::vector<Tensor> out;
  out.reserve(grads.size());
  for (const Tensor& g : grads) out.push_back(g.defined() ? g * scale : g);
  return {std::move(out), norm};
}

namespace {
// What a gradient counts with in a global norm: its values when it is sparse, as TF's global_norm.
std::vector<Tensor> norm_parts(const std::vector<Gradient>& grads) {
  std::vector<Tensor> parts;
  parts.reserve(grads.size());
  for (const Gradient& g : grads) parts.push_back(!g.defined() ? Tensor() : g.is_sparse() ? g.slices().values() : g.dense());
  return parts;
}
}  // namespace

Tensor global_norm_of_gradients(const std::vector<Gradient>& grads) { return global_norm(norm_parts(grads)); }

std::pair<std::vector<Gradient>, Tensor> clip_gradients_by_global_norm(const std::vector<Gradient>& grads,
                                                                       double clip_norm) {
  auto [clipped, norm] = clip_by_global_norm(norm_parts(grads), clip_norm);
  std::vector<Gradient> out;
  out.reserve(grads.size());
  for (std::size_t i = 0; i < grads.size(); ++i) {
    if (grads[i].is_sparse()) {
      const IndexedSlices& s = grads[i].slices();
      out.emplace_back(IndexedSlices(s.indices(), clipped[i], s.dense_shape()));
    } else {
      out.emplace_back(clipped[i]);
    }
  }
  return {std::move(out), norm};
}

}  // namespace tg::optim
