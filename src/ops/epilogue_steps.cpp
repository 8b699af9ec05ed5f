#include "ops/epilogue_steps.h"

#include <algorithm>
#include <atomic>
#include <memory>

#include "core/tensor_impl.h"
#include "kernels/column_sums.h"
#include "kernels/reduce_semantics.h"

namespace tg::detail {

std::vector<ValueType> infer_epilogue_node(const char* op, OpId product, const OpAttrs& product_attrs,
                                           const EpilogueParts& e, const std::vector<ValueType>& in) {
  if (in.size() != e.arity())
    op_error<InvalidArgumentError>(op, "expected ", e.arity(), " inputs, got ", in.size(), "; ", op,
                                   " nodes are made by the graph optimiser only");
  // bfloat16: a matmul's or a convolution's (their kernels' bfloat16 paths round as the ops apart do).
  const bool bf16 = (product == OpId::MatMul && in[0].dtype == DType::BFloat16) ||
                    (product == OpId::Conv2D && in[0].dtype == DType::BFloat16 && !e.column_sums);
  // A bfloat16 matmul's right operand may be float32: a float32 Variable's value the product
  // rounds to bfloat16 as it packs it, for the cast the optimiser took in
  // (passes/bf16_operand_casts.cpp). The steps see the rounded value.
  std::vector<ValueType> types = in;
  if (bf16 && product == OpId::MatMul && types[1].dtype == DType::Float32) types[1].dtype = DType::BFloat16;
  for (std::size_t i = 0; i < 2; ++i)
    if (types[i].dtype != (bf16 ? DType::BFloat16 : DType::Float32))
      op_error<InvalidArgumentError>(op, "expected float32 operands, got input ", i, " ", describe(in[i]),
                                     product == OpId::MatMul ? " (bfloat16 operands: both)" : "");
  if (e.matrix()) {
    if (e.add_matrix && e.mul_matrix)
      op_error<InvalidArgumentError>(op, "expected add_matrix or mul_matrix, got both; ", op,
                                     " nodes are made by the graph optimiser only");
    if (product != OpId::MatMul || bf16)
      op_error<InvalidArgumentError>(op, "expected a float32 matmul for a matrix epilogue, got ",
                                     bf16 ? "bfloat16 operands" : "another product");
    const ValueType& matrix = in[e.matrix_input()];
    if (matrix.dtype != DType::Float32)
      op_error<InvalidArgumentError>(op, "expected a float32 matrix (input ", e.matrix_input(), "), got ", describe(matrix));
  }
  return run_epilogue_steps(product, product_attrs, e, types, [](OpId id, const std::vector<ValueType>& args, const OpAttrs& a) {
    return op_def(id).infer(args, a).at(0);
  });
}

bool epilogue_fits(const EpilogueParts& e, const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                   const TensorShape& product) {
  // With a matrix, the result has the matrix's shape, and as many elements as the product (read
  // row-major, element i of one is element i of the other; the column sums read it so).
  const TensorShape& result = out[0].impl()->shape;
  const bool shaped = e.matrix()
                          ? result == in[e.matrix_input()].impl()->shape && result.num_elements() == product.num_elements()
                          : result == product;
  return shaped &&
         (!e.bias || in[EpilogueParts::kBiasInput].impl()->shape == TensorShape({product.dims().back()})) &&
         (!e.mask_in || in[e.mask_input()].impl()->shape == product);
}

namespace {

// The buffers of EpilogueColumnSums, one set per thread that runs an epilogue node (the node's
// calling thread; the pool's threads write through the pointers while it waits).
struct ColumnSumBuffers {
  std::vector<int32_t> leaf_of_row;
  std::vector<int64_t> first_row, end_row;
  std::vector<double> sums, total;
  std::unique_ptr<std::atomic<bool>[]> summed;
  std::size_t summed_size = 0;
};
thread_local ColumnSumBuffers t_column_sums;

}  // namespace

EpilogueColumnSums::EpilogueColumnSums(int64_t rows, int64_t columns) : rows_(rows), columns_(columns) {
  ColumnSumBuffers& b = t_column_sums;
  b.leaf_of_row.resize(static_cast<std::size_t>(rows));
  b.first_row.clear(), b.end_row.clear();
  // The leaves of reduce_sum's order, left to right (inner = 0: only visits them).
  pairwise_over_rows<double>(0, rows, 0, nullptr, nullptr, [&](int64_t first, int64_t count, double*) {
    std::fill_n(b.leaf_of_row.begin() + first, count, static_cast<int32_t>(b.first_row.size()));
    b.first_row.push_back(first);
    b.end_row.push_back(first + count);
  });
  const std::size_t leaves = b.first_row.size();
  b.sums.resize(leaves * static_cast<std::size_t>(columns));
  if (b.summed_size < leaves) b.summed.reset(new std::atomic<bool>[leaves]), b.summed_size = leaves;
  for (std::size_t i = 0; i < leaves; ++i) b.summed[i].store(false, std::memory_order_relaxed);
  leaves_ = ColumnSumLeaves{b.leaf_of_row.data(), b.first_row.data(), b.end_row.data(), b.sums.data(), columns,
                            b.summed.get()};
}

void EpilogueColumnSums::finish(const float* out, float* sums) { finish_of(out, sums); }
void EpilogueColumnSums::finish(const bfloat16_t* out, bfloat16_t* sums) { finish_of(out, sums); }

template <class T>
void EpilogueColumnSums::finish_of(const T* out, T* sums) {
  ColumnSumBuffers& b = t_column_sums;
  if (rows_ == 1) {  // reduce_sum drops a size-1 dim and copies (not 0.0 + x: -0.0 stays -0.0)
    for (int64_t k = 0; k < columns_; ++k) sums[k] = T(static_cast<float>(out[k]));  // bfloat16: widened, rounded
    return;
  }
  b.total.resize(static_cast<std::size_t>((pairwise_levels(rows_) + 1) * columns_));
  int32_t leaf = 0;
  pairwise_over_rows(0, rows_, columns_, b.total.data(), b.total.data() + columns_,
                     [&](int64_t first, int64_t count, double* dst) {
                       if (b.summed[static_cast<std::size_t>(leaf)].load(std::memory_order_relaxed))
                         std::copy_n(b.sums.data() + leaf * columns_, columns_, dst);
                       else
                         column_sums(out + first * columns_, count, columns_, dst);
                       ++leaf;
                     });
  for (int64_t k = 0; k < columns_; ++k)
    sums[k] = T(finish_reduction<ReduceKind::kSum, float>(b.total[static_cast<std::size_t>(k)], rows_));
}

Tensor float32_scalar(const Tensor&, float v) { return constant(v); }

GemmEpilogue gemm_epilogue_of(const EpilogueParts& e, const std::vector<Tensor>& in, std::vector<Tensor>& out,
                              int64_t mask_ld) {
  GemmEpilogue epilogue;
  if (e.bias) epilogue.bias = data_of<float>(in[EpilogueParts::kBiasInput]);
  if (e.mask_in) epilogue.mask_in = data_of<bool>(in[e.mask_input()]);
  if (e.mask_out) epilogue.mask_out = data_of<bool>(out[1]);
  epilogue.relu = e.relu;
  epilogue.clamp = e.clamp, epilogue.lower = e.lower, epilogue.upper = e.upper;
  if (e.matrix()) epilogue.matrix = data_of<float>(in[e.matrix_input()]), epilogue.matrix_mul = e.mul_matrix;
  epilogue.mask_ld = mask_ld;
  return epilogue;
}

}  // namespace tg::detail
