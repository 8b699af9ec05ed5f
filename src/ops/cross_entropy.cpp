// sparse_softmax_cross_entropy and its gradient, each one op (TF's
// SparseSoftmaxCrossEntropyWithLogits). The loss op gives the loss of each row,
// -log_softmax(logits)[label], and the rows' log_softmax, which its gradient reads; the gradient
// op gives (softmax(logits) - one_hot(label)) * g from those rows.
//
// Why ops of their own: written with one_hot, log_softmax and reductions, the loss and its
// gradient were 15 graph nodes (15 us of the demo's training step), and a label outside
// [0, classes) inside a traced function silently became a row of zeros (one_hot's rule) - a loss
// and a gradient that quietly ignored the row. Both kernels check every label at run time, as
// TF's CPU kernel does.
//
// The bits are those of the composite for finite logits: the loss op runs the log_softmax op's
// own row loop, and the gradient computes log_softmax's gradient rule on one-hot rows,
// t * gs - exp(ls) * gs with gs = -g (the one nonzero product of t * gs is the row's sum of
// them, exactly). A -inf logit off the label gives a finite loss here (TF's result), where the
// composite's 0 * -inf made it NaN.
#include <algorithm>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "ops/cross_entropy.h"
#include "ops/op.h"
#include "kernels/softmax_rows.h"
#include "ops/sort.h"
#include "tracegraph/ops.h"

namespace tg::detail {

namespace {

constexpr const char* kLossOp = "sparse_softmax_cross_entropy";
constexpr const char* kGradOp = "sparse_softmax_cross_entropy_grad";

// Whether two batch dims can be the same at run time; `out` is the known one, if any.
bool same_batch(int64_t a, int64_t b, int64_t& out) {
  out = a == None ? b : a;
  return a == None || b == None || a == b;
}

// The type of input 0 (the logits, or the loss op's log_softmax rows: `rows`), with the batch
// size both inputs agree on (None when neither knows it), after the checks the loss and its
// gradient share. An unknown rank passes (the shapes are checked again when the node runs).
ValueType check_rows_and_labels(const char* op, const char* rows, const ValueType& x, const ValueType& labels) {
  if (x.dtype != DType::Float32 && x.dtype != DType::Float64)
    op_error<TypeError>(op, rows, " must be float32 or float64, got ", to_string(x.dtype));
  if (labels.dtype != DType::Int32 && labels.dtype != DType::Int64)
    op_error<TypeError>(op, "labels must be int32 or int64 class indices, got ", to_string(labels.dtype),
                        "; tg::cast them");
  const TensorShape& xs = x.shape;
  const TensorShape& ys = labels.shape;
  if (xs.has_rank() && xs.rank() != 2)
    op_error<InvalidArgumentError>(op, rows, " must have shape (batch, classes), got ", xs.to_string());
  if (ys.has_rank() && ys.rank() != 1)
    op_error<InvalidArgumentError>(op, "labels must have shape (batch,), got ", ys.to_string());
  const int64_t x_batch = xs.has_rank() ? xs.dims()[0] : None;
  const int64_t labels_batch = ys.has_rank() ? ys.dims()[0] : None;
  int64_t batch = None;
  if (!same_batch(x_batch, labels_batch, batch))
    op_error<InvalidArgumentError>(op, rows, " have batch size ", x_batch, " but labels have ", labels_batch,
                                   "; pass one label per row");
  return ValueType{x.dtype, TensorShape({batch, xs.has_rank() ? xs.dims()[1] : None})};
}

// Outputs: the rows' losses, and the rows' log_softmax.
std::vector<ValueType> infer_loss(const std::vector<ValueType>& in, const OpAttrs&) {
  const ValueType logits = check_rows_and_labels(kLossOp, "logits", in[0], in[1]);
  return {ValueType{logits.dtype, TensorShape({logits.shape.dims()[0]})}, logits};
}

// Inputs: the loss op's log_softmax rows, the labels, the gradient of the losses.
std::vector<ValueType> infer_grad(const std::vector<ValueType>& in, const OpAttrs&) {
  const ValueType rows = check_rows_and_labels(kGradOp, "the log_softmax rows", in[0], in[1]);
  const ValueType& g = in[2];
  if (g.dtype != rows.dtype)
    op_error<TypeError>(kGradOp, "the loss gradient has dtype ", to_string(g.dtype), " but the rows ",
                        to_string(rows.dtype), "; pass the gradient of the loss op's losses");
  int64_t batch = rows.shape.dims()[0];
  if (g.shape.has_rank() && (g.shape.rank() != 1 || !same_batch(g.shape.dims()[0], rows.shape.dims()[0], batch)))
    op_error<InvalidArgumentError>(kGradOp, "the loss gradient must have shape (", rows.shape.dims()[0],
                                   ",) (one value per row), got ", g.shape.to_string());
  return {ValueType{rows.dtype, TensorShape({batch, rows.shape.dims()[1]})}};
}

// The labels as int64, each checked against [0, classes): a label outside it is an error, as in
// TF's CPU kernel, rather than a row that one_hot would silently zero.
std::vector<int64_t> checked_labels(const char* op, const char* rows_name, const Tensor& labels, int64_t rows,
                                    int64_t classes) {
  const int64_t n = labels.impl()->shape.dims()[0];
  if (n != rows)
    op_error<InvalidArgumentError>(op, rows_name, " have batch size ", rows, " but labels have ", n,
                                   "; pass one label per row");
  std::vector<int64_t> out(static_cast<std::size_t>(n));
  const bool wide = labels.impl()->dtype == DType::Int64;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = wide ? data_of<int64_t>(labels)[i] : int64_t{data_of<int32_t>(labels)[i]};
    if (v < 0 || v >= classes)
      op_error<InvalidArgumentError>(op, "label ", v, " is outside [0, ", classes, ") for logits with ", classes,
                                     " classes (row ", i, "); labels are class indices");
    out[static_cast<std::size_t>(i)] = v;
  }
  return out;
}

template <class T>
void loss_typed(const Tensor& logits, const std::vector<int64_t>& labels, Tensor& loss, Tensor& log_softmax) {
  const auto& d = logits.impl()->shape.dims();
  T* ls = data_of<T>(log_softmax);
  log_softmax_rows(data_of<T>(logits), d[0], d[1], ls);
  T* y = data_of<T>(loss);
  for (int64_t i = 0; i < d[0]; ++i) y[i] = -ls[i * d[1] + labels[static_cast<std::size_t>(i)]];
}

template <class T>
void grad_typed(const Tensor& log_softmax, const std::vector<int64_t>& labels, const Tensor& g, Tensor& out) {
  const auto& d = log_softmax.impl()->shape.dims();
  const int64_t rows = d[0], classes = d[1];
  // softmax as exp(log_softmax), as log_softmax's gradient rule computes it
  thread_local std::vector<T> softmax;
  softmax.resize(static_cast<std::size_t>(rows * classes));
  T* e = softmax.data();
  std::copy_n(data_of<T>(log_softmax), rows * classes, e);
  exp_in_place(e, rows * classes);
  const T* gl = data_of<T>(g);
  T* y = data_of<T>(out);
  for (int64_t i = 0; i < rows; ++i) {
    const T gs = -gl[i];
    const int64_t label = labels[static_cast<std::size_t>(i)];
    for (int64_t j = 0; j < classes; ++j) {
      const T t = j == label ? T(1) : T(0);
      y[i * classes + j] = t * gs - e[i * classes + j] * gs;
    }
  }
}

void kernel_loss(const std::vector<Tensor>& in, const OpAttrs&, std::vector<Tensor>& out) {
  const auto& d = in[0].impl()->shape.dims();
  const std::vector<int64_t> labels = checked_labels(kLossOp, "logits", in[1], d[0], d[1]);
  if (in[0].impl()->dtype == DType::Float32) loss_typed<float>(in[0], labels, out[0], out[1]);
  else loss_typed<double>(in[0], labels, out[0], out[1]);
}

void kernel_grad(const std::vector<Tensor>& in, const OpAttrs&, std::vector<Tensor>& out) {
  const auto& d = in[0].impl()->shape.dims();
  const std::vector<int64_t> labels = checked_labels(kGradOp, "the log_softmax rows", in[1], d[0], d[1]);
  if (in[2].impl()->shape.dims()[0] != d[0])
    op_error<InvalidArgumentError>(kGradOp, "the loss gradient has ", in[2].impl()->shape.dims()[0],
                                   " values for ", d[0], " rows; pass one value per row");
  if (in[0].impl()->dtype == DType::Float32) grad_typed<float>(in[0], labels, in[2], out[0]);
  else grad_typed<double>(in[0], labels, in[2], out[0]);
}

// The losses' gradient goes through the gradient op. The log_softmax rows get a gradient only
// in a gradient of a gradient (the gradient op reads them): log_softmax's own rule then.
std::vector<Tensor> grad_loss(const GradInputs& g) {
  const Tensor& ls = g.outputs[1];
  Tensor dx;
  if (g.got_gradient(0)) dx = apply_op1(OpId::SparseSoftmaxCrossEntropyGrad, {ls, g.inputs[1], g.grads[0]});
  if (g.got_gradient(1)) {
    const Tensor d_ls = g.grads[1] - exp(ls) * reduce_sum(g.grads[1], {1}, true);
    dx = dx.defined() ? dx + d_ls : d_ls;
  }
  return {dx, Tensor()};
}

// The gradient's own gradient, with public ops so that it differentiates again. The gradient
// is D = (e - t) * g per row, e = exp(ls), t = one_hot(label): for an incoming U,
//   d ls = U * e * g (e's own derivative),
//   dg = sum(U * e) - U[label] (U[label] gathered, so that the number of classes may be None).
std::vector<Tensor> grad_grad(const GradInputs& g) {
  const Tensor& u = g.grads[0];
  const Tensor e = exp(g.inputs[0]);
  Tensor d_ls, dg;
  if (g.wants(0)) d_ls = u * e * expand_dims(g.inputs[2], 1);
  if (g.wants(2)) dg = reduce_sum(u * e, {1}) - reduce_sum(gather_last_axis(u, expand_dims(g.inputs[1], 1)), {1});
  return {d_ls, Tensor(), dg};
}

}  // namespace

void register_cross_entropy_ops(OpDef* t) {
  set_op(t, OpId::SparseSoftmaxCrossEntropy, &infer_loss, &kernel_loss);
  set_op(t, OpId::SparseSoftmaxCrossEntropyGrad, &infer_grad, &kernel_grad);
  set_grad(t, OpId::SparseSoftmaxCrossEntropy, &grad_loss);
  set_grad(t, OpId::SparseSoftmaxCrossEntropyGrad, &grad_grad);
}

Tensor sparse_softmax_cross_entropy_rows(const Tensor& logits, const Tensor& labels) {
  return apply_op(OpId::SparseSoftmaxCrossEntropy, {logits, labels})[0];
}

}  // namespace tg::detail
