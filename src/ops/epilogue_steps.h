// The ops a product-with-epilogue node (matmul_epilogue, conv2d_epilogue) stands for, in the
// epilogue's order: the product, + bias, the mask out > 0, relu, minimum(maximum(out, lower),
// upper) (conv2d only), where(mask, out, 0), + or * a matrix (matmul only; the result first
// reshaped to the matrix's shape). Run on
// types, they are the node's shape rule (each op's own, errors included); run on tensors, they
// are its kernel for run-time shapes the epilogue does not cover (a None dim that broadcasts).
#pragma once
#include <vector>

#include "kernels/gemm_epilogue.h"
#include "ops/op.h"

namespace tg::detail {

/// Which parts of GemmEpilogue a node has (the flags of its attributes). column_sums (matmul
/// only): the result's sums over the product's rows (the result read as rows x n), a dense
/// layer's bias gradient, as a last output shaped (n) or, with sums_keepdims, (1, n).
/// add_matrix, mul_matrix (matmul only): the result + or * a float32 matrix of as many
/// elements, read row-major as rows x n, after the other elementwise parts (a residual add; a
/// gradient times an activation's derivative); the result takes the matrix's shape.
/// clamp (conv2d only): maximum with the float32 scalar `lower`, then minimum with `upper`
/// (ONNX's Clip, relu6), after relu.
struct EpilogueParts {
  bool bias = false, mask_out = false, relu = false, mask_in = false;
  bool column_sums = false, sums_keepdims = false;
  bool add_matrix = false, mul_matrix = false;
  bool clamp = false;
  float lower = 0.0f, upper = 0.0f;
  template <class Attrs>
  static EpilogueParts of(const Attrs& a) {
    EpilogueParts e{a.bias, a.mask_out, a.relu, a.mask_in};
    if constexpr (requires { a.column_sums; }) e.column_sums = a.column_sums, e.sums_keepdims = a.sums_keepdims;
    if constexpr (requires { a.add_matrix; }) e.add_matrix = a.add_matrix, e.mul_matrix = a.mul_matrix;
    if constexpr (requires { a.clamp; })
      e.clamp = a.clamp, e.lower = static_cast<float>(a.lower), e.upper = static_cast<float>(a.upper);
    return e;
  }
  bool matrix() const { return add_matrix || mul_matrix; }
  /// The node's inputs: the product's two, then the bias, the mask read and the matrix.
  std::size_t arity() const { return 2 + std::size_t{bias} + std::size_t{mask_in} + std::size_t{matrix()}; }
  static constexpr std::size_t kBiasInput = 2;
  /// Where the mask read is among the inputs (after the bias, if any).
  std::size_t mask_input() const { return kBiasInput + std::size_t{bias}; }
  /// Where the matrix is among the inputs (the last).
  std::size_t matrix_input() const { return mask_input() + std::size_t{mask_in}; }
};

/// A float32 scalar of value v, as a step's operand: its type, or the tensor.
inline ValueType float32_scalar(const ValueType&, float) { return ValueType{DType::Float32, TensorShape({})}; }
Tensor float32_scalar(const Tensor&, float v);

/// `op(id, args, attrs)` for each op in order on `in` (the product's operands, then the bias,
/// the mask read and the matrix); returns the node's outputs: the result, then the mask made,
/// then the column sums.
template <class V, class Op>
std::vector<V> run_epilogue_steps(OpId product, const OpAttrs& product_attrs, const EpilogueParts& e,
                                  const std::vector<V>& in, Op&& op) {
  V out = op(product, std::vector<V>{in[0], in[1]}, product_attrs);
  if (e.bias) out = op(OpId::Add, std::vector<V>{out, in[EpilogueParts::kBiasInput]}, OpAttrs{});
  std::vector<V> outs{out};
  if (e.mask_out) outs.push_back(op(OpId::Greater, std::vector<V>{out, op(OpId::ZerosLike, std::vector<V>{out}, OpAttrs{})}, OpAttrs{}));
  if (e.relu) outs[0] = op(OpId::Relu, std::vector<V>{outs[0]}, OpAttrs{});
  if (e.clamp) {
    outs[0] = op(OpId::Maximum, std::vector<V>{outs[0], float32_scalar(outs[0], e.lower)}, OpAttrs{});
    outs[0] = op(OpId::Minimum, std::vector<V>{outs[0], float32_scalar(outs[0], e.upper)}, OpAttrs{});
  }
  if (e.mask_in)
    outs[0] = op(OpId::Where, std::vector<V>{in[e.mask_input()], outs[0], op(OpId::ZerosLike, std::vector<V>{outs[0]}, OpAttrs{})}, OpAttrs{});
  if (e.matrix()) {
    const V& matrix = in[e.matrix_input()];
    outs[0] = op(OpId::ReshapeLike, std::vector<V>{outs[0], matrix}, OpAttrs{});
    outs[0] = op(e.add_matrix ? OpId::Add : OpId::Mul, std::vector<V>{outs[0], matrix}, OpAttrs{});
  }
  if (e.column_sums) {
    // Over the product's rows: a result of the matrix's shape read back as rows x n.
    const V rows = e.matrix() ? op(OpId::ReshapeLike, std::vector<V>{outs[0], out}, OpAttrs{}) : outs[0];
    outs.push_back(op(OpId::ReduceSum, std::vector<V>{rows}, OpAttrs{ReduceAttrs{{0}, e.sums_keepdims}}));
  }
  return outs;
}

/// The node's types by the ops' own rules, after checking that the node (`op`, made by the
/// optimiser only) has its inputs and float32 operands.
std::vector<ValueType> infer_epilogue_node(const char* op, OpId product, const OpAttrs& product_attrs,
                                           const EpilogueParts& e, const std::vector<ValueType>& in);

/// Whether the run-time shapes fit the epilogue: output 0 has the product's shape (with a
/// matrix: the matrix's, of as many elements), the bias one
/// value per column (the last dim), the mask read the product's shape. A None dim that
/// broadcasts at run time (a bias of one value, a mask of one row) leaves them, and the node
/// then runs its steps through the ops' own kernels (run_steps_eagerly, ops/eager_steps.h).
bool epilogue_fits(const EpilogueParts& e, const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                   const TensorShape& product);

/// The column sums of an epilogue (EpilogueParts::column_sums) for a product of `rows` x
/// `columns`: the leaves the epilogue fills (in this thread's buffers), and the rest after the
/// product. The bits are reduce_sum's over rows (its leaves in its order).
class EpilogueColumnSums {
 public:
  EpilogueColumnSums(int64_t rows, int64_t columns);
  ColumnSumLeaves* leaves() { return &leaves_; }
  /// After the product, `out` its result (rows x columns, contiguous): sums the leaves no
  /// thread summed whole, adds the leaves up in reduce_sum's order, and writes the float32 sums.
  void finish(const float* out, float* sums);
  /// The same over a bfloat16 result, each sum rounded to bfloat16 (reduce_sum's bfloat16 rule).
  void finish(const bfloat16_t* out, bfloat16_t* sums);

 private:
  template <class T>
  void finish_of(const T* out, T* sums);
  int64_t rows_, columns_;
  ColumnSumLeaves leaves_;
};

/// The GemmEpilogue of a node's inputs and outputs (float32).
GemmEpilogue gemm_epilogue_of(const EpilogueParts& e, const std::vector<Tensor>& in, std::vector<Tensor>& out,
                              int64_t mask_ld);

}  // namespace tg::detail
