// Sorting along the last axis: sort (values and their int32 positions, which argsort returns),
// top_k, and the two helpers their gradients are written with (gather_last_axis and
// scatter_add_last_axis_like). The front functions move another axis to the end and back.
//
// Order: NaN is larger than every number (+inf included) and equal to another NaN, so an
// ascending sort puts NaNs last and a descending sort or top_k puts them first (XLA's and
// NumPy's order; TF's CPU kernel leaves it to where the NaN stands: docs/DECISIONS.md). Equal
// values keep their input order (stable), which is TF's top_k rule: the lower index first.
#include <algorithm>
#include <limits>
#include <numeric>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "core/thread_pool.h"
#include "ops/broadcast.h"
#include "ops/sort.h"
#include "tracegraph/ops.h"

namespace tg {
namespace detail {
namespace {

// Element i of a row comes before element j (i < j in the input) in a descending order.
template <class T>
bool larger(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return b == b;  // NaN before any number, NaNs tie
    if (b != b) return false;
  }
  return a > b;
}
template <class T>
bool smaller(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return false;  // NaN after everything
    if (b != b) return true;
  }
  return a < b;
}

void require_sortable(const char* op, const ValueType& x) {
  require_dtype(op, x, {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::UInt8});
  if (x.shape.has_rank() && x.shape.rank() == 0)
    op_error<InvalidArgumentError>(op, "expected a tensor of rank >= 1 (it works along the last "
                                   "axis), got a scalar; tg::reshape it to (1,) first");
}

// The last dim must fit int32 indices (TF's index dtype for these ops).
void require_int32_positions(const char* op, int64_t n) {
  if (n > std::numeric_limits<int32_t>::max())
    op_error<InvalidArgumentError>(op, "the last dimension has ", n, " elements; its positions must "
                                   "fit the int32 indices the op returns (at most 2147483647)");
}

// Calls fn(row) for each row of `rows`, on the thread pool when the work is large.
template <class Fn>
void for_each_row(int64_t rows, int64_t row_len, Fn&& fn) {
  const int64_t grain = std::max<int64_t>(1, kParallelMinElements / std::max<int64_t>(row_len, 1));
  parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) fn(r);
  });
}

// Writes the first k of each row of x (n long) in the order `before` gives, values and
// positions. k == n: a stable sort; k < n: a partial sort, ties broken by position so that the
// result is the same as the first k of the stable sort.
template <class T, class Before>
void select_rows(const Tensor& x, int64_t n, int64_t k, Before before, Tensor& values, Tensor& indices) {
  const int64_t rows = n == 0 ? 0 : x.impl()->shape.num_elements() / n;
  const T* px = data_of<T>(x);
  T* pv = data_of<T>(values);
  int32_t* pi = data_of<int32_t>(indices);
  for_each_row(rows, n, [&](int64_t r) {
    const T* row = px + r * n;
    std::vector<int32_t> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    auto by_value = [&](int32_t a, int32_t b) { return before(row[a], row[b]); };
    if (k == n) {
      std::stable_sort(order.begin(), order.end(), by_value);
    } else {
      auto by_value_then_position = [&](int32_t a, int32_t b) {
        if (before(row[a], row[b])) return true;
        if (before(row[b], row[a])) return false;
        return a < b;
      };
      std::partial_sort(order.begin(), order.begin() + k, order.end(), by_value_then_position);
    }
    for (int64_t j = 0; j < k; ++j) {
      pv[r * k + j] = row[order[static_cast<std::size_t>(j)]];
      pi[r * k + j] = order[static_cast<std::size_t>(j)];
    }
  });
}

template <class Fn>
void visit_sortable(DType d, Fn&& fn) {
  visit_dtype(d, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) fn(tag);
  });
}

// ---- sort ----
std::vector<ValueType> infer_sort(const std::vector<ValueType>& in, const OpAttrs&) {
  require_sortable("sort", in[0]);
  if (in[0].shape.has_rank() && in[0].shape.dims().back() != None)
    require_int32_positions("sort", in[0].shape.dims().back());
  return {in[0], ValueType{DType::Int32, in[0].shape}};
}
void kernel_sort(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const int64_t n = in[0].impl()->shape.dims().back();
  const bool descending = attrs.get<SortAttrs>().descending;
  visit_sortable(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    if (descending) select_rows<T>(in[0], n, n, larger<T>, out[0], out[1]);
    else select_rows<T>(in[0], n, n, smaller<T>, out[0], out[1]);
  });
}
// The values are x permuted: the gradient goes back to where each value came from.
std::vector<Tensor> grad_sort(const GradInputs& g) {
  return {scatter_add_last_axis_like(g.grads[0], g.outputs[1], g.inputs[0])};
}

// ---- top_k ----
std::vector<ValueType> infer_top_k(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const int64_t k = op_attrs.get<TopKAttrs>().k;
  require_sortable("top_k", in[0]);
  if (k < 0) op_error<InvalidArgumentError>("top_k", "k must be >= 0, got ", k);
  if (!in[0].shape.has_rank()) {
    const TensorShape unknown = TensorShape::unknown_rank();
    return {ValueType{in[0].dtype, unknown}, ValueType{DType::Int32, unknown}};
  }
  std::vector<int64_t> dims = in[0].shape.dims();
  const int64_t n = dims.back();
  if (n != None) {
    require_int32_positions("top_k", n);
    if (k > n)
      op_error<InvalidArgumentError>("top_k", "k = ", k, " is larger than the last dimension (", n,
                                     ") of the input of shape ", in[0].shape.to_string(),
                                     "; expected k <= ", n);
  }
  dims.back() = k;
  return {ValueType{in[0].dtype, TensorShape(dims)}, ValueType{DType::Int32, TensorShape(dims)}};
}
void kernel_top_k(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const int64_t n = in[0].impl()->shape.dims().back();
  const int64_t k = attrs.get<TopKAttrs>().k;
  visit_sortable(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    select_rows<T>(in[0], n, k, larger<T>, out[0], out[1]);
  });
}
// Each chosen value's gradient goes to its position; the others get 0 (TF's TopKGrad).
std::vector<Tensor> grad_top_k(const GradInputs& g) {
  return {scatter_add_last_axis_like(g.grads[0], g.outputs[1], g.inputs[0])};
}

// ---- gather_last_axis / scatter_add_last_axis_like ----

// indices (..., m) against x (..., n): the leading dims must agree where both are known.
void check_leading_dims(const char* op, const TensorShape& x, const TensorShape& indices) {
  if (!x.has_rank() || !indices.has_rank()) return;
  bool ok = x.rank() == indices.rank() && x.rank() >= 1;
  for (int64_t i = 0; ok && i + 1 < x.rank(); ++i) {
    const int64_t a = x.dims()[static_cast<std::size_t>(i)], b = indices.dims()[static_cast<std::size_t>(i)];
    ok = a == None || b == None || a == b;
  }
  if (!ok)
    op_error<InvalidArgumentError>(op, "indices of shape ", indices.to_string(), " do not match the tensor of shape ",
                                   x.to_string(), "; expected the same rank (>= 1) and the same leading dims");
}

// Calls fn(row, j, position) for each index, after checking it is in [0, n).
template <class Fn>
void for_each_position(const char* op, const Tensor& indices, int64_t n, Fn&& fn) {
  const auto& d = indices.impl()->shape.dims();
  const int64_t m = d.back();
  const int64_t total = indices.impl()->shape.num_elements();
  const bool wide = indices.impl()->dtype == DType::Int64;
  const int32_t* i32 = data_of<int32_t>(indices);
  const int64_t* i64 = data_of<int64_t>(indices);
  for (int64_t e = 0; e < total; ++e) {
    const int64_t p = wide ? i64[e] : int64_t{i32[e]};
    if (p < 0 || p >= n)
      op_error<InvalidArgumentError>(op, "index ", p, " at flat position ", e, " is not in [0, ", n, ")");
    fn(e / m, e % m, p);
  }
}

std::vector<ValueType> infer_gather_last_axis(const std::vector<ValueType>& in, const OpAttrs&) {
  const char* op = "gather_last_axis";
  require_dtype(op, in[1], {DType::Int32, DType::Int64}, "indices");
  check_leading_dims(op, in[0].shape, in[1].shape);
  if (!in[1].shape.has_rank()) {  // x's leading dims, and as many positions as indices have
    if (!in[0].shape.has_rank()) return {ValueType{in[0].dtype, TensorShape::unknown_rank()}};
    std::vector<int64_t> dims = in[0].shape.dims();
    dims.back() = None;
    return {ValueType{in[0].dtype, TensorShape(dims)}};
  }
  std::vector<int64_t> dims = in[1].shape.dims();
  if (in[0].shape.has_rank())  // the leading dims known on either side
    for (std::size_t i = 0; i + 1 < dims.size(); ++i)
      if (dims[i] == None) dims[i] = in[0].shape.dims()[i];
  return {ValueType{in[0].dtype, TensorShape(dims)}};
}
void kernel_gather_last_axis(const std::vector<Tensor>& in, const OpAttrs&, std::vector<Tensor>& out) {
  const int64_t n = in[0].impl()->shape.dims().back();
  const int64_t m = in[1].impl()->shape.dims().back();
  visit_dtype(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = data_of<T>(in[0]);
    T* y = data_of<T>(out[0]);
    for_each_position("gather_last_axis", in[1], n, [&](int64_t r, int64_t j, int64_t p) { y[r * m + j] = x[r * n + p]; });
  });
}
std::vector<Tensor> grad_gather_last_axis(const GradInputs& g) {
  return {scatter_add_last_axis_like(g.grads[0], g.inputs[1], g.inputs[0]), Tensor()};
}

std::vector<ValueType> infer_scatter_add_last_axis_like(const std::vector<ValueType>& in, const OpAttrs&) {
  const char* op = "scatter_add_last_axis_like";
  require_dtype(op, in[0], {DType::Float32, DType::Float64, DType::Int32, DType::Int64});
  require_dtype(op, in[1], {DType::Int32, DType::Int64}, "indices");
  if (in[0].shape.has_rank() && in[1].shape.has_rank() && !in[0].shape.is_compatible_with(in[1].shape))
    op_error<InvalidArgumentError>(op, "updates of shape ", in[0].shape.to_string(), " and indices of shape ",
                                   in[1].shape.to_string(), " differ; expected one shape");
  check_leading_dims(op, in[2].shape, in[1].shape);
  return {ValueType{in[0].dtype, in[2].shape}};
}
void kernel_scatter_add_last_axis_like(const std::vector<Tensor>& in, const OpAttrs&, std::vector<Tensor>& out) {
  const int64_t n = in[2].impl()->shape.dims().back();
  const int64_t m = in[1].impl()->shape.dims().back();
  visit_dtype(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      const T* u = data_of<T>(in[0]);
      T* y = data_of<T>(out[0]);
      std::fill(y, y + out[0].impl()->shape.num_elements(), T(0));
      for_each_position("scatter_add_last_axis_like", in[1], n,
                        [&](int64_t r, int64_t j, int64_t p) { y[r * n + p] += u[r * m + j]; });
    }
  });
}
std::vector<Tensor> grad_scatter_add_last_axis_like(const GradInputs& g) {
  return {gather_last_axis(g.grads[0], g.inputs[1]), Tensor(), Tensor()};
}

// The permutation that swaps `axis` with the last one (its own inverse), for the front
// functions; empty when axis already is the last.
std::vector<int> swap_to_last(const char* op, const Tensor& x, int64_t axis) {
  const TensorShape& s = static_shape(x);
  if (!s.has_rank()) {
    if (axis == -1) return {};
    op_error<ValueError>(op, "axis ", axis, " needs the rank of ", x.to_string(),
                         ", which is unknown while tracing; use axis=-1 or give the input a known rank");
  }
  if (s.rank() == 0)
    op_error<InvalidArgumentError>(op, "expected a tensor of rank >= 1, got a scalar; tg::reshape it to (1,) first");
  const int64_t a = normalize_axis(op, axis, s.rank());
  if (a == s.rank() - 1) return {};
  std::vector<int> perm(static_cast<std::size_t>(s.rank()));
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[static_cast<std::size_t>(a)], perm.back());
  return perm;
}

std::vector<Tensor> sort_along(const char* op, const Tensor& x, int64_t axis, SortDirection direction) {
  if (!x.defined()) op_error<ValueError>(op, "the input is an empty tg::Tensor; assign it a value first");
  const std::vector<int> perm = swap_to_last(op, x, axis);
  const SortAttrs attrs{direction == SortDirection::Descending};
  if (perm.empty()) return apply_op(OpId::Sort, {x}, attrs);
  std::vector<Tensor> out = apply_op(OpId::Sort, {transpose(x, perm)}, attrs);
  return {transpose(out[0], perm), transpose(out[1], perm)};
}

}  // namespace

Tensor gather_last_axis(const Tensor& x, const Tensor& indices) {
  return apply_op1(OpId::GatherLastAxis, {x, indices});
}
Tensor scatter_add_last_axis_like(const Tensor& updates, const Tensor& indices, const Tensor& like) {
  return apply_op1(OpId::ScatterAddLastAxisLike, {updates, indices, like});
}

void register_sort_ops(OpDef* t) {
  set_op(t, OpId::Sort, &infer_sort, &kernel_sort);
  set_op(t, OpId::TopK, &infer_top_k, &kernel_top_k);
  set_op(t, OpId::GatherLastAxis, &infer_gather_last_axis, &kernel_gather_last_axis);
  set_op(t, OpId::ScatterAddLastAxisLike, &infer_scatter_add_last_axis_like, &kernel_scatter_add_last_axis_like);
  set_grad(t, OpId::Sort, &grad_sort);
  set_grad(t, OpId::TopK, &grad_top_k);
  set_grad(t, OpId::GatherLastAxis, &grad_gather_last_axis);
  set_grad(t, OpId::ScatterAddLastAxisLike, &grad_scatter_add_last_axis_like);
}

}  // namespace detail

Tensor sort(const Tensor& x, int64_t axis, SortDirection direction) {
  return detail::sort_along("sort", x, axis, direction)[0];
}

Tensor argsort(const Tensor& x, int64_t axis, SortDirection direction, bool stable) {
  (void)stable;  // every sort here is stable, which is also a valid unstable order
  return detail::sort_along("argsort", x, axis, direction)[1];
}

TopK top_k(const Tensor& x, int64_t k, bool sorted) {
  std::vector<Tensor> out = detail::apply_op(detail::OpId::TopK, {x}, detail::TopKAttrs{k, sorted});
  return {out[0], out[1]};
}

}  // namespace tg
