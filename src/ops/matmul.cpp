// Matrix product: front function, shape/dtype rule and kernels together.
// Floats go to OpenBLAS (one gemm per batch entry, transposes passed as flags so nothing is
// copied); integers use an i-k-j loop in unsigned arithmetic, so overflow wraps (as in
// TensorFlow) without undefined behaviour.
#include <algorithm>
#include <climits>
#include <optional>
#include <type_traits>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "ops/broadcast.h"
#include "ops/eager_steps.h"
#include "ops/epilogue_steps.h"
#include "kernels/bf16.h"
#include "kernels/gemm.h"
#include "ops/grad_helpers.h"
#include "ops/matmul.h"
#include "tracegraph/ops.h"

namespace tg {
namespace detail {

bool matmul_on_own_kernels() { return own_avx512_kernels(); }
bool matmul_sums_over_k_in_parts(int64_t m, int64_t n, int64_t k, bool transpose_b) {
  return own_sgemm_sums_over_k_in_parts(m, n, k, transpose_b);
}

namespace {

constexpr const char* kOp = "matmul";

const char* bool_str(bool b) { return b ? "true" : "false"; }

void require_matrix(const ValueType& t, const char* name) {
  if (!t.shape.has_rank() || t.shape.rank() >= 2) return;
  op_error<InvalidArgumentError>(
      kOp, "expected ", name, " of rank >= 2 (a matrix or a batch of matrices), got rank ",
      t.shape.rank(), " with shape ", t.shape.to_string(),
      "; turn a vector into a matrix with tg::expand_dims(", name, ", 0) (a row) or ",
      "tg::expand_dims(", name, ", -1) (a column), or tg::reshape it");
}

// NumPy broadcasting of the batch dims (all but the last two), None-aware like
// broadcast_shapes, but with a message that names the full operand shapes.
std::vector<int64_t> broadcast_batch(const TensorShape& a, const TensorShape& b) {
  const std::vector<int64_t> da(a.dims().begin(), a.dims().end() - 2);
  const std::vector<int64_t> db(b.dims().begin(), b.dims().end() - 2);
  std::vector<int64_t> out;
  if (const auto bad = broadcast_dims(da, db, out))
    op_error<InvalidArgumentError>(
        kOp, "batch dims of a ", a.to_string(), " and b ", b.to_string(),
        " cannot be broadcast together: batch dim ", bad->dim, " of the result would need ", bad->x,
        " == ", bad->y,
        " (or one of them 1); the batch dims are all but the last two, and broadcast like "
        "NumPy's; reshape or expand_dims one operand");
  return out;
}

std::vector<ValueType> infer_matmul(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const MatMulAttrs& attrs = op_attrs.get<MatMulAttrs>();
  const ValueType& a = in[0];
  const ValueType& b = in[1];
  require_matrix(a, "a");
  require_matrix(b, "b");
  if (a.dtype != b.dtype)
    op_error<InvalidArgumentError>(kOp, "expected a and b of one dtype, got ", to_string(a.dtype),
                                   " and ", to_string(b.dtype),
                                   " (tracegraph never promotes silently); tg::cast one first");
  require_dtype(kOp, a, {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::BFloat16},
                "inputs");
  // Unknown rank on either side leaves the number of batch dims unknown.
  if (!a.shape.has_rank() || !b.shape.has_rank())
    return {ValueType{a.dtype, TensorShape::unknown_rank()}};

  const auto& da = a.shape.dims();
  const auto& db = b.shape.dims();
  const std::size_t ra = da.size(), rb = db.size();
  const int64_t m = attrs.transpose_a ? da[ra - 1] : da[ra - 2];
  const int64_t ka = attrs.transpose_a ? da[ra - 2] : da[ra - 1];
  const int64_t kb = attrs.transpose_b ? db[rb - 1] : db[rb - 2];
  const int64_t n = attrs.transpose_b ? db[rb - 2] : db[rb - 1];
  if (ka != None && kb != None && ka != kb)
    op_error<InvalidArgumentError>(
        kOp, "inner dimensions must agree: a has shape ", a.shape.to_string(),
        " (transpose_a=", bool_str(attrs.transpose_a), ") and contributes K = ", ka,
        ", b has shape ", b.shape.to_string(), " (transpose_b=", bool_str(attrs.transpose_b),
        ") and contributes K = ", kb, "; ", ka, " != ", kb,
        ". Fix the shapes or set transpose_a/transpose_b");
  std::vector<int64_t> out = broadcast_batch(a.shape, b.shape);
  out.push_back(m);
  out.push_back(n);
  return {ValueType{a.dtype, TensorShape(std::move(out))}};
}

// The geometry of one call: per-matrix sizes and the stored (row-major) layouts.
struct Gemm {
  int64_t m, n, k;
  int64_t a_cols, b_cols;      // columns of a's / b's stored matrices (their leading dims)
  int64_t a_size, b_size;      // elements per stored matrix
  bool ta, tb;
};

Gemm gemm_geometry(const Tensor& a, const Tensor& b, const MatMulAttrs& attrs) {
  const auto& da = a.impl()->shape.dims();
  const auto& db = b.impl()->shape.dims();
  const std::size_t ra = da.size(), rb = db.size();
  Gemm g{};
  g.ta = attrs.transpose_a;
  g.tb = attrs.transpose_b;
  g.m = g.ta ? da[ra - 1] : da[ra - 2];
  g.k = g.ta ? da[ra - 2] : da[ra - 1];
  g.n = g.tb ? db[rb - 2] : db[rb - 1];
  g.a_cols = da[ra - 1];
  g.b_cols = db[rb - 1];
  // Saturated: an empty batch of huge matrices, (0, 2^40, 2^40), is legal (and never addressed).
  g.a_size = product(da, ra - 2, ra);
  g.b_size = product(db, rb - 2, rb);
  return g;
}

// Calls fn(a_matrix_index, b_matrix_index, out_matrix_index) for every batch entry, with
// broadcast operands revisiting the same matrix (no copies).
template <class Fn>
void for_each_batch(const Tensor& a, const Tensor& b, const Tensor& out, Fn&& fn) {
  const auto& da = a.impl()->shape.dims();
  const auto& db = b.impl()->shape.dims();
  const auto& dout = out.impl()->shape.dims();
  const std::vector<int64_t> ba(da.begin(), da.end() - 2);
  const std::vector<int64_t> bb(db.begin(), db.end() - 2);
  const std::vector<int64_t> bo(dout.begin(), dout.end() - 2);
  int64_t pos = 0;
  for_each_broadcast_run<2>(bo, {&ba, &bb},
                            [&](const std::array<int64_t, 2>& off,
                                const std::array<int64_t, 2>& st, int64_t len) {
                              for (int64_t i = 0; i < len; ++i)
                                fn(off[0] + i * st[0], off[1] + i * st[1], pos + i);
                              pos += len;
                            });
}

int blas_int(int64_t v) { return detail::blas_int(kOp, v); }

template <class T>
void kernel_float(const Tensor& a, const Tensor& b, Tensor& out, const Gemm& g) {
  const T* pa = data_of<T>(a);
  const T* pb = data_of<T>(b);
  T* pc = data_of<T>(out);
  const int64_t total = out.impl()->shape.num_elements();
  if (total == 0) return;
  if (g.k == 0) {  // an empty sum; BLAS must not see K = 0 with lda = 0
    std::fill(pc, pc + total, T(0));
    return;
  }
  const int64_t out_batch = total / (g.m * g.n);
  const int64_t a_batch = a.impl()->shape.num_elements() / g.a_size;
  const int64_t b_batch = b.impl()->shape.num_elements() / g.b_size;
  // (batch, M, K) x (K, N) with a neither transposed nor broadcast is one (batch*M, K) x (K, N)
  // product: a's rows are contiguous, so a single large gemm replaces many small ones.
  if (!g.ta && b_batch == 1 && a_batch == out_batch && out_batch > 1 &&
      out_batch * g.m <= INT_MAX) {
    gemm<T>(blas_int(out_batch * g.m), blas_int(g.n), blas_int(g.k), pa, blas_int(g.a_cols),
            false, pb, blas_int(g.b_cols), g.tb, pc, blas_int(g.n));
    return;
  }
  const int m = blas_int(g.m), n = blas_int(g.n), k = blas_int(g.k);
  const int lda = blas_int(g.a_cols), ldb = blas_int(g.b_cols);
  const int64_t c_size = g.m * g.n;
  for_each_batch(a, b, out, [&](int64_t ia, int64_t ib, int64_t ic) {
    gemm<T>(m, n, k, pa + ia * g.a_size, lda, g.ta, pb + ib * g.b_size, ldb, g.tb,
            pc + ic * c_size, n);
  });
}

// bfloat16 operands: float32 sums of exact products, each rounded to bfloat16 as TensorFlow's
// bfloat16 matmul does, in the product's own pass (bf16_gemm_rounded). Batches go one matrix at
// a time.
void kernel_bf16(const Tensor& a, const Tensor& b, Tensor& out, const Gemm& g) {
  const bfloat16_t* pa = data_of<bfloat16_t>(a);
  const bfloat16_t* pb = data_of<bfloat16_t>(b);
  bfloat16_t* pc = data_of<bfloat16_t>(out);
  if (out.impl()->shape.num_elements() == 0) return;
  const int m = blas_int(g.m), n = blas_int(g.n), k = blas_int(g.k);
  const int lda = blas_int(g.a_cols), ldb = blas_int(g.b_cols);
  const int64_t c_size = g.m * g.n;
  for_each_batch(a, b, out, [&](int64_t ia, int64_t ib, int64_t ic) {
    bf16_gemm_rounded(m, n, k, pa + ia * g.a_size, lda, g.ta, pb + ib * g.b_size, ldb, g.tb, pc + ic * c_size, n);
  });
}

// C = op(A) op(B) for one batch entry, in unsigned arithmetic (wraps on overflow). The i-k-j
// order streams rows of B and C; a transposed B is packed once per call so that the inner loop
// stays contiguous.
template <class U>
void gemm_int(const Gemm& g, const U* a, const U* b, U* c, std::vector<U>& packed_b) {
  const int64_t m = g.m, n = g.n, k = g.k;
  if (g.tb) {  // b is stored (N, K): pack it to (K, N)
    packed_b.resize(static_cast<std::size_t>(k * n));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) packed_b[p * n + j] = b[j * k + p];
    b = packed_b.data();
  }
  for (int64_t i = 0; i < m; ++i) {
    U* crow = c + i * n;
    std::fill(crow, crow + n, U(0));
    for (int64_t p = 0; p < k; ++p) {
      const U aip = g.ta ? a[p * m + i] : a[i * k + p];
      const U* brow = b + p * n;
      for (int64_t j = 0; j < n; ++j) crow[j] += aip * brow[j];
    }
  }
}

template <class T>
void kernel_int(const Tensor& a, const Tensor& b, Tensor& out, const Gemm& g) {
  using U = std::make_unsigned_t<T>;
  // A signed integer type and its unsigned counterpart may alias each other.
  const U* pa = reinterpret_cast<const U*>(data_of<T>(a));
  const U* pb = reinterpret_cast<const U*>(data_of<T>(b));
  U* pc = reinterpret_cast<U*>(data_of<T>(out));
  if (out.impl()->shape.num_elements() == 0) return;
  const int64_t c_size = g.m * g.n;
  std::vector<U> packed_b;
  for_each_batch(a, b, out, [&](int64_t ia, int64_t ib, int64_t ic) {
    gemm_int<U>(g, pa + ia * g.a_size, pb + ib * g.b_size, pc + ic * c_size, packed_b);
  });
}

void kernel_matmul(const std::vector<Tensor>& in, const OpAttrs& attrs,
                   std::vector<Tensor>& out) {
  const Gemm g = gemm_geometry(in[0], in[1], attrs.get<MatMulAttrs>());
  switch (in[0].impl()->dtype) {
    case DType::Float32: return kernel_float<float>(in[0], in[1], out[0], g);
    case DType::Float64: return kernel_float<double>(in[0], in[1], out[0], g);
    case DType::Int32: return kernel_int<int32_t>(in[0], in[1], out[0], g);
    case DType::Int64: return kernel_int<int64_t>(in[0], in[1], out[0], g);
    case DType::BFloat16: return kernel_bf16(in[0], in[1], out[0], g);
    default: TG_CHECK(false, "matmul kernel reached with dtype ", to_string(in[0].impl()->dtype));
  }
}

// ---- matmul_epilogue: a product and the elementwise ops after it (kernels/gemm_epilogue.h),
// made by the optimiser from a matmul and the fused node that alone reads it
// (src/passes/fuse_product_epilogues.cpp) ----

constexpr const char* kEpilogueOp = "matmul_epilogue";

OpAttrs product_attrs(const MatMulEpilogueAttrs& e) { return MatMulAttrs{e.transpose_a, e.transpose_b}; }

// Whether e sets any part but the product (rounded_to_f32 takes none).
bool has_epilogue_parts(const MatMulEpilogueAttrs& e) {
  return e.bias || e.mask_out || e.relu || e.mask_in || e.column_sums || e.sums_keepdims || e.add_matrix || e.mul_matrix;
}

// rounded_to_f32: the bfloat16 matmul's result type, widened to float32.
std::vector<ValueType> infer_rounded_to_f32(const std::vector<ValueType>& in, const MatMulEpilogueAttrs& e) {
  if (has_epilogue_parts(e))
    op_error<InvalidArgumentError>(kEpilogueOp, "expected rounded_to_f32 alone, got it with other epilogue parts; ",
                                   kEpilogueOp, " nodes are made by the graph optimiser only");
  if (in.size() != 2)
    op_error<InvalidArgumentError>(kEpilogueOp, "expected 2 inputs with rounded_to_f32, got ", in.size(), "; ",
                                   kEpilogueOp, " nodes are made by the graph optimiser only");
  for (std::size_t i = 0; i < 2; ++i)
    if (in[i].dtype != DType::BFloat16)
      op_error<InvalidArgumentError>(kEpilogueOp, "expected bfloat16 operands with rounded_to_f32, got input ", i,
                                     " ", describe(in[i]), "; ", kEpilogueOp, " nodes are made by the graph optimiser only");
  std::vector<ValueType> out = infer_matmul(in, product_attrs(e));
  out[0].dtype = DType::Float32;
  return out;
}

std::vector<ValueType> infer_matmul_epilogue(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const MatMulEpilogueAttrs& e = attrs.get<MatMulEpilogueAttrs>();
  // Matrices only: the kernel makes one product (matmul itself also takes batches).
  for (std::size_t i = 0; i < std::min<std::size_t>(2, in.size()); ++i)
    if (in[i].shape.has_rank() && in[i].shape.rank() != 2)
      op_error<InvalidArgumentError>(kEpilogueOp, "expected matrices, got input ", i, " ", describe(in[i]));
  if (e.rounded_to_f32) return infer_rounded_to_f32(in, e);
  return infer_epilogue_node(kEpilogueOp, OpId::MatMul, product_attrs(e), EpilogueParts::of(e), in);
}

// matmul_epilogue on bfloat16 operands: the bits of the ops apart (each op rounds its own result
// to bfloat16, and the next computes in float32 on that rounded value, as kernel_via_float32
// does), applied to each block of sums in registers as the product stores it
// (bf16_gemm_epilogue). Column sums (a bias gradient) are summed from the stored bfloat16 rows
// into reduce_sum's leaves by the part that stored them, and rounded once (sum_to_like's bits).
void kernel_matmul_epilogue_bf16(const EpilogueParts& parts, const Gemm& g, const std::vector<Tensor>& in,
                                 std::vector<Tensor>& out) {
  bfloat16_t* const sums = parts.column_sums ? data_of<bfloat16_t>(out.back()) : nullptr;
  if (g.m * g.n == 0) {
    if (sums) std::fill_n(sums, g.n, bfloat16_t(0.0f));  // a sum of no rows
    return;
  }
  thread_local std::vector<float> bias_buffer;  // kept between calls: no allocation per step
  Bf16Epilogue epilogue;
  if (parts.bias) {
    if (bias_buffer.size() < static_cast<std::size_t>(g.n)) bias_buffer.resize(static_cast<std::size_t>(g.n));
    bf16_to_f32(data_of<bfloat16_t>(in[EpilogueParts::kBiasInput]), bias_buffer.data(), g.n);
    epilogue.bias = bias_buffer.data();
  }
  epilogue.mask_out = parts.mask_out ? data_of<bool>(out[1]) : nullptr;
  epilogue.relu = parts.relu;
  epilogue.mask_in = parts.mask_in ? data_of<bool>(in[parts.mask_input()]) : nullptr;
  epilogue.ld_mask = g.n;
  std::optional<EpilogueColumnSums> column_sums;
  if (sums) epilogue.column_sums = column_sums.emplace(g.m, g.n).leaves();
  const int m = blas_int(g.m), n = blas_int(g.n), k = blas_int(g.k), lda = blas_int(g.a_cols), ldb = blas_int(g.b_cols);
  const bfloat16_t* a = data_of<bfloat16_t>(in[0]);
  bfloat16_t* c = data_of<bfloat16_t>(out[0]);
  // A float32 right operand (the optimiser's, for a cast it took in) is rounded as it is packed.
  if (in[1].impl()->dtype == DType::Float32)
    bf16_gemm_epilogue(m, n, k, a, lda, g.ta, data_of<float>(in[1]), ldb, g.tb, c, n, epilogue);
  else
    bf16_gemm_epilogue(m, n, k, a, lda, g.ta, data_of<bfloat16_t>(in[1]), ldb, g.tb, c, n, epilogue);
  if (sums) column_sums->finish(c, sums);
}

void kernel_matmul_epilogue(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const MatMulEpilogueAttrs& e = attrs.get<MatMulEpilogueAttrs>();
  const EpilogueParts parts = EpilogueParts::of(e);
  const Gemm g = gemm_geometry(in[0], in[1], product_attrs(e).get<MatMulAttrs>());
  if (e.rounded_to_f32) {
    // The bfloat16 matmul's rounded sums, stored widened (bf16_gemm_rounded_to_f32): the bits of
    // kernel_bf16 and the cast to float32 the optimiser took in.
    if (g.m * g.n == 0) return;
    return bf16_gemm_rounded_to_f32(blas_int(g.m), blas_int(g.n), blas_int(g.k), data_of<bfloat16_t>(in[0]),
                                    blas_int(g.a_cols), g.ta, data_of<bfloat16_t>(in[1]), blas_int(g.b_cols), g.tb,
                                    data_of<float>(out[0]), blas_int(g.n));
  }
  const TensorShape product({g.m, g.n});
  if (!epilogue_fits(parts, in, out, product)) {
    // The ops apart; a float32 right operand of bfloat16 products (see kernel_matmul_epilogue_bf16)
    // rounded first, as the cast the optimiser took in did.
    std::vector<Tensor> ops_in = in;
    if (in[0].impl()->dtype == DType::BFloat16 && in[1].impl()->dtype == DType::Float32) {
      Tensor rounded = allocate_tensor(DType::BFloat16, in[1].impl()->shape);
      f32_to_bf16(data_of<float>(in[1]), data_of<bfloat16_t>(rounded), in[1].impl()->shape.num_elements());
      ops_in[1] = rounded;
    }
    return run_steps_eagerly([&](auto op) { return run_epilogue_steps(OpId::MatMul, product_attrs(e), parts, ops_in, op); }, out);
  }
  if (in[0].impl()->dtype == DType::BFloat16) return kernel_matmul_epilogue_bf16(parts, g, in, out);
  float* const sums = parts.column_sums ? data_of<float>(out.back()) : nullptr;
  if (product.num_elements() == 0) {
    if (sums) std::fill_n(sums, g.n, 0.0f);  // a sum of no rows
    return;
  }
  GemmEpilogue epilogue = gemm_epilogue_of(parts, in, out, g.n);
  std::optional<EpilogueColumnSums> column_sums;
  if (sums) epilogue.column_sums = column_sums.emplace(g.m, g.n).leaves();
  gemm<float>(blas_int(g.m), blas_int(g.n), blas_int(g.k), data_of<float>(in[0]), blas_int(g.a_cols), g.ta,
              data_of<float>(in[1]), blas_int(g.b_cols), g.tb, data_of<float>(out[0]), blas_int(g.n), false, &epilogue);
  if (sums) column_sums->finish(data_of<float>(out[0]), sums);
}

// ---- gradient rule ----
// For C = op(A) op(B), with op a transpose or not:
//   C = A B:     dA = G B^T,   dB = A^T G
//   C = A^T B:   dA = B G^T,   dB = A G
//   C = A B^T:   dA = G B,     dB = G^T A
//   C = A^T B^T: dA = B^T G^T, dB = G^T A^T
// then summed over the batch dims the operand was broadcast along.
std::vector<Tensor> grad_matmul(const GradInputs& g) {
  const Tensor& a = g.inputs[0];
  const Tensor& b = g.inputs[1];
  const Tensor& dc = g.grads[0];
  const MatMulAttrs& attrs = g.attrs.get<MatMulAttrs>();
  const bool ta = attrs.transpose_a, tb = attrs.transpose_b;
  Tensor da, db;
  if (!ta && !tb) {
    da = matmul(dc, b, false, true);
    db = matmul(a, dc, true, false);
  } else if (ta && !tb) {
    da = matmul(b, dc, false, true);
    db = matmul(a, dc, false, false);
  } else if (!ta && tb) {
    da = matmul(dc, b, false, false);
    db = matmul(dc, a, true, false);
  } else {
    da = matmul(b, dc, true, true);
    db = matmul(dc, a, true, true);
  }
  // Matrices have no batch dims to sum over: da and db have a's and b's shapes at every run-time
  // size of their None dims (matmul checks that the inner dims agree). They pass as they are
  // when their static shapes also know every dim a's and b's know (a dim of a known only through
  // an operand of None dims would otherwise come back None).
  auto is_matrix = [](const Tensor& t) { return static_shape(t).has_rank() && static_shape(t).rank() == 2; };
  const bool matrices = is_matrix(a) && is_matrix(b);
  auto summed = [&](const Tensor& d, const Tensor& x) {
    return matrices && static_shape(d).is_subtype_of(static_shape(x)) ? d : sum_to_like(d, x);
  };
  return {summed(da, a), summed(db, b)};
}

}  // namespace

void register_matmul_ops(OpDef* t) {
  set_op(t, OpId::MatMul, &infer_matmul, &kernel_matmul);
  set_grad(t, OpId::MatMul, &grad_matmul);
  set_op(t, OpId::MatMulEpilogue, &infer_matmul_epilogue, &kernel_matmul_epilogue);
}

}  // namespace detail

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  return detail::apply_op1(detail::OpId::MatMul, {a, b}, detail::MatMulAttrs{transpose_a, transpose_b});
}

}  // namespace tg
