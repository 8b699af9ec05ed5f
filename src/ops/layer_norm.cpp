// layer_norm and its gradient op: shape rules, the frames over the kernels
// (src/kernels/layer_norm.cpp) and layer_norm's gradient rule. nn::LayerNorm runs on them.
//
// Why one op: written with reduce_mean and elementwise ops, a layer norm and its gradient are
// about fifteen graph nodes, each a sweep over the activations with the row statistics
// broadcast between them; the op makes the forward one sweep and the gradient one more.
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "kernels/layer_norm.h"
#include "ops/op.h"
#include "tracegraph/ops.h"

namespace tg::detail {

namespace {

constexpr const char* kOp = "layer_norm";
constexpr const char* kGradOp = "layer_norm_grad";

int64_t last_dim(const TensorShape& s) { return s.has_rank() && s.rank() > 0 ? s.dims().back() : None; }

// x's shape without its last axis (the shape of the row statistics).
TensorShape rows_shape(const TensorShape& s) {
  if (!s.has_rank()) return TensorShape::unknown_rank();
  return TensorShape(std::vector<int64_t>(s.dims().begin(), s.dims().end() - 1));
}

void check_epsilon(const char* op, const LayerNormAttrs& a) {
  if (!(std::isfinite(a.epsilon) && a.epsilon >= 0))
    op_error<InvalidArgumentError>(op, "epsilon must be a finite number >= 0, got ", a.epsilon);
}

// x: float32 or float64 of rank >= 1 with a non-empty last axis; returns that axis (or None).
int64_t check_x(const char* op, const ValueType& x) {
  if (x.dtype != DType::Float32 && x.dtype != DType::Float64)
    op_error<TypeError>(op, "x must be float32 or float64, got ", to_string(x.dtype), "; tg::cast it");
  if (x.shape.has_rank() && x.shape.rank() == 0)
    op_error<InvalidArgumentError>(op, "x must have rank >= 1 (the features on its last axis), got a scalar");
  const int64_t c = last_dim(x.shape);
  if (c == 0)
    op_error<InvalidArgumentError>(op, "x's last axis (the features normalised over) must not be empty, got shape ",
                                   x.shape.to_string());
  return c;
}

// A (c,) parameter or row statistic of x's dtype and the shape `want`.
void check_like(const char* op, const char* name, const ValueType& t, DType dtype, const TensorShape& want) {
  if (t.dtype != dtype)
    op_error<TypeError>(op, name, " must be ", to_string(dtype), " (x's dtype), got ", to_string(t.dtype));
  if (!t.shape.has_rank() || !want.has_rank()) return;
  bool ok = t.shape.rank() == want.rank();
  for (std::size_t i = 0; ok && i < want.dims().size(); ++i) {
    const int64_t a = t.shape.dims()[i], b = want.dims()[i];
    ok = a == None || b == None || a == b;
  }
  if (!ok)
    op_error<InvalidArgumentError>(op, name, " must have shape ", want.to_string(), ", got ", t.shape.to_string());
}

std::vector<ValueType> infer_forward(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  check_epsilon(kOp, attrs.get<LayerNormAttrs>());
  const ValueType& x = in[0];
  const int64_t c = check_x(kOp, x);
  check_like(kOp, "gamma", in[1], x.dtype, TensorShape({c}));
  check_like(kOp, "beta", in[2], x.dtype, TensorShape({c}));
  const TensorShape rows = rows_shape(x.shape);
  return {x, ValueType{x.dtype, rows}, ValueType{x.dtype, rows}};
}

std::vector<ValueType> infer_grad(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  check_epsilon(kGradOp, attrs.get<LayerNormAttrs>());
  const ValueType& x = in[0];
  const int64_t c = check_x(kGradOp, x);
  check_like(kGradOp, "gamma", in[1], x.dtype, TensorShape({c}));
  check_like(kGradOp, "the row means", in[2], x.dtype, rows_shape(x.shape));
  check_like(kGradOp, "the rows' 1 / sqrt(variance + epsilon)", in[3], x.dtype, rows_shape(x.shape));
  check_like(kGradOp, "y's gradient", in[4], x.dtype, x.shape);
  const ValueType param{x.dtype, TensorShape({c})};
  return {x, param, param};
}

// The run-time sizes: rows (the product of x's leading dims) and c, each input checked again.
struct Sizes {
  int64_t rows = 0, c = 0;
};
Sizes sizes_of(const char* op, const std::vector<Tensor>& in, std::initializer_list<int> params,
               std::initializer_list<int> row_stats, int like_x) {
  const TensorShape& xs = in[0].impl()->shape;
  Sizes s;
  s.c = xs.dims().back();
  s.rows = s.c > 0 ? xs.num_elements() / s.c : 0;
  if (s.c == 0)
    op_error<InvalidArgumentError>(op, "x's last axis (the features normalised over) must not be empty, got shape ",
                                   xs.to_string());
  for (int i : params)
    if (in[static_cast<std::size_t>(i)].impl()->shape != TensorShape({s.c}))
      op_error<InvalidArgumentError>(op, "input ", i, " must have shape ", TensorShape({s.c}).to_string(),
                                     " (x's last axis), got ",
                                     in[static_cast<std::size_t>(i)].impl()->shape.to_string());
  for (int i : row_stats)
    if (in[static_cast<std::size_t>(i)].impl()->shape != rows_shape(xs))
      op_error<InvalidArgumentError>(op, "input ", i, " must have shape ", rows_shape(xs).to_string(),
                                     " (x's shape without its last axis), got ",
                                     in[static_cast<std::size_t>(i)].impl()->shape.to_string());
  if (like_x >= 0 && in[static_cast<std::size_t>(like_x)].impl()->shape != xs)
    op_error<InvalidArgumentError>(op, "y's gradient must have x's shape ", xs.to_string(), ", got ",
                                   in[static_cast<std::size_t>(like_x)].impl()->shape.to_string());
  return s;
}

void kernel_forward(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const Sizes s = sizes_of(kOp, in, {1, 2}, {}, -1);
  const double eps = attrs.get<LayerNormAttrs>().epsilon;
  if (in[0].impl()->dtype == DType::Float32)
    layer_norm_forward<float>(s.rows, s.c, eps, data_of<float>(in[0]), data_of<float>(in[1]), data_of<float>(in[2]),
                              data_of<float>(out[0]), data_of<float>(out[1]), data_of<float>(out[2]));
  else
    layer_norm_forward<double>(s.rows, s.c, eps, data_of<double>(in[0]), data_of<double>(in[1]),
                               data_of<double>(in[2]), data_of<double>(out[0]), data_of<double>(out[1]),
                               data_of<double>(out[2]));
}

template <class T>
void grad_typed(const Sizes& s, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  layer_norm_backward<T>(s.rows, s.c, data_of<T>(in[0]), data_of<T>(in[1]), data_of<T>(in[2]), data_of<T>(in[3]),
                         data_of<T>(in[4]), data_of<T>(out[0]), data_of<T>(out[1]), data_of<T>(out[2]));
}

void kernel_grad(const std::vector<Tensor>& in, const OpAttrs&, std::vector<Tensor>& out) {
  const Sizes s = sizes_of(kGradOp, in, {1}, {2, 3}, 4);
  if (in[0].impl()->dtype == DType::Float32) grad_typed<float>(s, in, out);
  else grad_typed<double>(s, in, out);
}

// x, gamma and beta get their gradients from the gradient op. The row statistics (outputs 1
// and 2) get a gradient only when something reads them: mean's is 1/c per element, and that of
// r = 1 / sqrt(var + eps) is -r^3 (x - mean) / c.
std::vector<Tensor> grad_forward(const GradInputs& g) {
  const Tensor& x = g.inputs[0];
  std::vector<Tensor> out(3);
  if (g.got_gradient(0)) {
    const std::vector<Tensor> d =
        apply_op(OpId::LayerNormGrad, {x, g.inputs[1], g.outputs[1], g.outputs[2], g.grads[0]}, g.attrs);
    for (std::size_t i = 0; i < 3; ++i)
      if (g.wants(i)) out[i] = d[i];
  }
  if (g.wants(0) && (g.got_gradient(1) || g.got_gradient(2))) {
    const Tensor r = expand_dims(g.outputs[2], -1);
    const Tensor count = reduce_sum(ones_like(x), {-1}, true);
    const Tensor extra = (expand_dims(g.grads[1], -1) - expand_dims(g.grads[2], -1) * r * r * r *
                                                           (x - expand_dims(g.outputs[1], -1))) / count;
    out[0] = out[0].defined() ? out[0] + extra : extra;
  }
  return out;
}

}  // namespace

void register_layer_norm_ops(OpDef* t) {
  set_op(t, OpId::LayerNorm, &infer_forward, &kernel_forward);
  set_op(t, OpId::LayerNormGrad, &infer_grad, &kernel_grad);
  set_grad(t, OpId::LayerNorm, &grad_forward);
  // layer_norm_grad's own gradient needs a tape: src/autodiff/composed_gradients.cpp.
}

}  // namespace tg::detail
