// N-d indexing: gather_nd, scatter_nd, tensor_scatter_nd_add (an index tuple in the last dim of
// `indices` names a slice of the leading dims), and the ops whose output size is data:
// where(condition) (the coordinates of the true elements) and boolean_mask. Index bounds and
// run-time shapes are checked in the kernels, as TensorFlow's CPU kernels do: a bad index is an
// error, never a read or write outside a buffer.
#include <algorithm>
#include <string>
#include <type_traits>

#include "core/check.h"
#include "core/sink.h"
#include "core/tensor_impl.h"
#include "core/thread_pool.h"
#include "ops/broadcast.h"
#include "ops/distinct_indices.h"
#include "ops/shape_value.h"
#include "tracegraph/indexed_slices.h"
#include "tracegraph/ops.h"

namespace tg {
namespace detail {
namespace {

const std::vector<int64_t>& dims_of(const Tensor& t) { return t.impl()->shape.dims(); }
ValueType type_of(const Tensor& t) { return ValueType{t.impl()->dtype, t.impl()->shape}; }

// ---- the index tuples ----

// The index depth K (indices' last dim, None when unknown); validates dtype and rank.
int64_t index_depth(const char* op, const ValueType& indices) {
  require_dtype(op, indices, {DType::Int32, DType::Int64}, "indices");
  if (!indices.shape.has_rank()) return None;
  if (indices.shape.rank() == 0)
    op_error<InvalidArgumentError>(op, "indices must have rank >= 1 (its last dim holds each index tuple), got a "
                                   "scalar; use tg::expand_dims(indices, -1) for single indices");
  return indices.shape.dims().back();
}

// The shape of the slices that indices name in a tensor of shape `s`: indices.shape[:-1] +
// s[K:]. Checks K <= rank. Unknown rank when K or a rank is unknown.
TensorShape indexed_shape(const char* op, const TensorShape& indices, int64_t depth, const TensorShape& s,
                          const char* what) {
  if (depth != None && s.has_rank() && depth > s.rank())
    op_error<InvalidArgumentError>(op, "index tuples have ", depth, " entries (indices shape ", indices.to_string(),
                                   ") but ", what, " has rank ", s.rank(), " (shape ", s.to_string(),
                                   "); the last dim of indices must be <= that rank");
  if (depth == None || !s.has_rank() || !indices.has_rank()) return TensorShape::unknown_rank();
  std::vector<int64_t> dims(indices.dims().begin(), indices.dims().end() - 1);
  dims.insert(dims.end(), s.dims().begin() + depth, s.dims().end());
  return TensorShape(dims);
}

// "[1, 0]": the position of tuple j among indices' leading dims.
std::string tuple_position(int64_t j, const std::vector<int64_t>& dims) {
  std::vector<int64_t> pos(dims.size() - 1);
  for (std::size_t i = pos.size(); i-- > 0;) {
    pos[i] = j % dims[i];
    j /= dims[i];
  }
  return format_list(pos);
}

// The element offset of each index tuple's slice in a row-major tensor of `dims`, bounds checked.
// `moves` says whether the op moves any element (its gathered result or its updates have one);
// when none, the tuples are only checked and no offset is returned. Tuples of K = 0 entries
// are then never counted: indices such as (2^40, 2^40, 0) hold no element yet name 2^80 (empty)
// tuples, a count that would overflow or ask for a table no memory holds.
template <class I>
std::vector<int64_t> tuple_offsets(const char* op, const Tensor& indices, const std::vector<int64_t>& dims,
                                   const char* what, bool moves) {
  const std::vector<int64_t>& id = dims_of(indices);
  const auto depth = static_cast<std::size_t>(id.back());
  // With K > 0 the tuples are the indices' elements K at a time, so their count fits; with
  // K = 0 and something moved, each tuple names one slice of the moved tensor, so it fits too.
  const int64_t count = depth > 0 ? indices.impl()->shape.num_elements() / static_cast<int64_t>(depth)
                        : moves   ? product(id, 0, id.size() - 1)
                                  : 0;
  const std::vector<int64_t> strides = row_major_strides(dims);
  const I* idx = data_of<I>(indices);
  std::vector<int64_t> offsets(moves ? static_cast<std::size_t>(count) : 0);
  for (int64_t j = 0; j < count; ++j) {
    int64_t off = 0;
    for (std::size_t k = 0; k < depth; ++k) {
      const auto v = static_cast<int64_t>(idx[static_cast<std::size_t>(j) * depth + k]);
      if (v < 0 || v >= dims[k]) {
        std::vector<int64_t> tuple(idx + static_cast<std::size_t>(j) * depth, idx + (static_cast<std::size_t>(j) + 1) * depth);
        op_error<InvalidArgumentError>(op, "indices", tuple_position(j, id), " = ", format_list(tuple),
                                       " does not index into ", what, " of shape ", TensorShape(dims).to_string(), ": ",
                                       v, " is not in [0, ", dims[k], ") along dimension ", k,
                                       "; every index must be >= 0 and < its dimension");
      }
      off += v * strides[k];
    }
    if (moves) offsets[static_cast<std::size_t>(j)] = off;
  }
  return offsets;
}
std::vector<int64_t> tuple_offsets(const char* op, const Tensor& indices, const std::vector<int64_t>& dims,
                                   const char* what, bool moves) {
  return indices.impl()->dtype == DType::Int64 ? tuple_offsets<int64_t>(op, indices, dims, what, moves)
                                               : tuple_offsets<int32_t>(op, indices, dims, what, moves);
}

// out += updates, slice j of `slice` elements at offsets[j] (repeated tuples add up).
void scatter_add(const Tensor& updates, const std::vector<int64_t>& offsets, int64_t slice, Tensor& out) {
  visit_dtype(out.impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      const T* u = data_of<T>(updates);
      T* y = data_of<T>(out);
      for (std::size_t j = 0; j < offsets.size(); ++j) {
        T* d = y + offsets[j];
        const T* s = u + static_cast<int64_t>(j) * slice;
        for (int64_t i = 0; i < slice; ++i) d[i] += s[i];
      }
    }
  });
}

// Validates the updates of a scatter into shape `out`: dtype and shape indices[:-1] + out[K:].
void check_updates(const char* op, const ValueType& indices, const ValueType& updates, const TensorShape& out) {
  require_dtype(op, updates, {DType::Float32, DType::Float64, DType::Int32, DType::Int64}, "updates");
  const int64_t depth = index_depth(op, indices);
  if (out.has_rank() && out.rank() == 0)
    op_error<InvalidArgumentError>(op, "the output must have rank >= 1, got a scalar shape; scatter into a vector");
  const TensorShape want = indexed_shape(op, indices.shape, depth, out, "the output");
  if (!updates.shape.is_compatible_with(want))
    op_error<InvalidArgumentError>(op, "updates has shape ", updates.shape.to_string(), " but indices of shape ",
                                   indices.shape.to_string(), " into shape ", out.to_string(), " need updates of shape ",
                                   want.to_string(), " (indices.shape[:-1] + shape[K:], K = the last dim of indices)");
}

// ---- gather_nd ----

std::vector<ValueType> infer_gather_nd(const std::vector<ValueType>& in, const OpAttrs&) {
  const char* op = "gather_nd";
  const int64_t depth = index_depth(op, in[1]);
  return {ValueType{in[0].dtype, indexed_shape(op, in[1].shape, depth, in[0].shape, "params")}};
}
void kernel_gather_nd(const std::vector<Tensor>& in, const OpAttrs&, std::vector<Tensor>& out) {
  const auto& pd = dims_of(in[0]);
  const std::vector<int64_t> offsets =
      tuple_offsets("gather_nd", in[1], pd, "params", out[0].impl()->shape.num_elements() > 0);
  const int64_t slice = product(pd, static_cast<std::size_t>(dims_of(in[1]).back()), pd.size());
  visit_dtype(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* p = data_of<T>(in[0]);
    T* y = data_of<T>(out[0]);
    for (int64_t off : offsets) y = std::copy_n(p + off, slice, y);
  });
}

// ---- scatter_nd: zeros of a run-time shape (input 2) with the updates added ----

std::vector<ValueType> infer_scatter_nd(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const char* op = "scatter_nd";
  const TensorShape out = described_shape(op, in[2], attrs.get<ShapeValueAttrs>());
  check_updates(op, in[0], in[1], out);
  return {ValueType{in[1].dtype, out}};
}
void kernel_scatter_nd(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const char* op = "scatter_nd";
  const TensorShape shape(shape_values(op, in[2], attrs.get<ShapeValueAttrs>()));
  check_updates(op, type_of(in[0]), type_of(in[1]), shape);
  const std::vector<int64_t> offsets =
      tuple_offsets(op, in[0], shape.dims(), "the output", in[1].impl()->shape.num_elements() > 0);
  Tensor result = allocate_tensor(in[1].impl()->dtype, shape);
  visit_dtype(in[1].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_arithmetic_v<T>) std::fill_n(data_of<T>(result), shape.num_elements(), T{});
  });
  scatter_add(in[1], offsets, product(shape.dims(), static_cast<std::size_t>(dims_of(in[0]).back()), shape.dims().size()),
              result);
  out[0] = std::move(result);
}

// ---- tensor_scatter_nd_add: a copy of tensor with the updates added ----

std::vector<ValueType> infer_tensor_scatter_nd_add(const std::vector<ValueType>& in, const OpAttrs&) {
  const char* op = "tensor_scatter_nd_add";
  require_same_dtype(op, {in[0], in[2]});
  check_updates(op, in[1], in[2], in[0].shape);
  return {in[0]};
}
void kernel_tensor_scatter_nd_add(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const char* op = "tensor_scatter_nd_add";
  infer_tensor_scatter_nd_add({type_of(in[0]), type_of(in[1]), type_of(in[2])}, attrs);
  const auto& td = dims_of(in[0]);
  const std::vector<int64_t> offsets = tuple_offsets(op, in[1], td, "tensor", in[2].impl()->shape.num_elements() > 0);
  visit_dtype(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    std::copy_n(data_of<T>(in[0]), in[0].impl()->shape.num_elements(), data_of<T>(out[0]));
  });
  scatter_add(in[2], offsets, product(td, static_cast<std::size_t>(dims_of(in[1]).back()), td.size()), out[0]);
}

// ---- where(condition): the coordinates of the true (non-zero) elements, row-major order ----

std::vector<ValueType> infer_where_indices(const std::vector<ValueType>& in, const OpAttrs&) {
  require_dtype("where", in[0], {DType::Bool, DType::Float32, DType::Float64, DType::Int32, DType::Int64},
                "condition");
  return {ValueType{DType::Int64, TensorShape{None, in[0].shape.has_rank() ? in[0].shape.rank() : None}}};
}
void kernel_where_indices(const std::vector<Tensor>& in, const OpAttrs&, std::vector<Tensor>& out) {
  const auto& d = dims_of(in[0]);
  const int64_t total = in[0].impl()->shape.num_elements();
  visit_dtype(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_arithmetic_v<T>) {
      const T* c = data_of<T>(in[0]);
      const int64_t count = std::count_if(c, c + total, [](T v) { return v != T{}; });
      const auto rank = static_cast<int64_t>(d.size());
      out[0] = allocate_tensor(DType::Int64, TensorShape{count, rank});
      int64_t* y = data_of<int64_t>(out[0]);
      std::vector<int64_t> pos(d.size(), 0);
      for (int64_t j = 0; j < total; ++j) {
        if (c[j] != T{}) y = std::copy(pos.begin(), pos.end(), y);
        for (std::size_t k = d.size(); k-- > 0;) {
          if (++pos[k] < d[k]) break;
          pos[k] = 0;
        }
      }
    }
  });
}

// ---- boolean_mask(tensor, mask, axis): the slices of tensor where mask is true ----

// The output shape: tensor.shape[:axis] + (count,) + tensor.shape[axis + k:] for a mask of rank k
// (count None unless given). Validates dtype, ranks, the axis and the masked dims.
TensorShape boolean_mask_shape(const ValueType& x, const ValueType& mask, int64_t axis, int64_t count) {
  const char* op = "boolean_mask";
  require_dtype(op, mask, {DType::Bool}, "mask");
  const TensorShape& xs = x.shape;
  const TensorShape& ms = mask.shape;
  if (ms.has_rank() && ms.rank() == 0)
    op_error<InvalidArgumentError>(op, "mask must have rank >= 1, got a scalar; expected a bool tensor "
                                   "shaped like the masked dims of the tensor");
  if (!xs.has_rank() || !ms.has_rank()) return TensorShape::unknown_rank();
  const int64_t r = xs.rank(), k = ms.rank();
  const int64_t a = axis < 0 ? axis + r : axis;
  if (a < 0 || a + k > r)
    op_error<InvalidArgumentError>(op, "a mask of rank ", k, " (shape ", ms.to_string(), ") at axis ", axis,
                                   " does not fit a tensor of rank ", r, " (shape ", xs.to_string(),
                                   "); expected 0 <= axis <= ", r - k, " (negative axes count from the end)");
  for (int64_t i = 0; i < k; ++i) {
    const int64_t xd = xs.dims()[static_cast<std::size_t>(a + i)], md = ms.dims()[static_cast<std::size_t>(i)];
    if (xd != None && md != None && xd != md)
      op_error<InvalidArgumentError>(op, "mask shape ", ms.to_string(), " does not match dims ", a, "..", a + k - 1,
                                     " of the tensor (shape ", xs.to_string(),
                                     "); the mask must have the shape of the dims it masks");
  }
  std::vector<int64_t> dims(xs.dims().begin(), xs.dims().begin() + a);
  dims.push_back(count);
  dims.insert(dims.end(), xs.dims().begin() + a + k, xs.dims().end());
  return TensorShape(dims);
}

std::vector<ValueType> infer_boolean_mask(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  return {ValueType{in[0].dtype, boolean_mask_shape(in[0], in[1], attrs.get<AxisAttrs>().axis, None)}};
}
void kernel_boolean_mask(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const int64_t axis = attrs.get<AxisAttrs>().axis;
  const auto& xd = dims_of(in[0]);
  const int64_t m = in[1].impl()->shape.num_elements();
  const bool* mask = data_of<bool>(in[1]);
  const int64_t count = std::count(mask, mask + m, true);
  const TensorShape shape = boolean_mask_shape(type_of(in[0]), type_of(in[1]), axis, count);
  const auto a = static_cast<std::size_t>(axis < 0 ? axis + static_cast<int64_t>(xd.size()) : axis);
  out[0] = allocate_tensor(in[0].impl()->dtype, shape);
  // Nothing to copy; `outer` of a tensor such as (2^40, 2^40, 0) would be a saturated product.
  if (shape.num_elements() == 0) return;
  const int64_t outer = product(xd, 0, a);
  const int64_t inner = product(xd, a + dims_of(in[1]).size(), xd.size());
  visit_dtype(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = data_of<T>(in[0]);
    T* y = data_of<T>(out[0]);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < m; ++j)
        if (mask[j]) y = std::copy_n(x + (o * m + j) * inner, inner, y);
  });
}

// ---- deduplicate_slices(indices, values): repeated indices' rows summed ----

std::vector<ValueType> infer_deduplicate_slices(const std::vector<ValueType>& in, const OpAttrs&) {
  const char* op = "deduplicate_slices";
  require_dtype(op, in[0], {DType::Int32, DType::Int64}, "indices");
  require_dtype(op, in[1], {DType::Float32, DType::Float64}, "values");
  if (in[0].shape.has_rank() && in[0].shape.rank() != 1)
    op_error<InvalidArgumentError>(op, "indices must be a vector (rank 1), got shape ", in[0].shape.to_string(),
                                   "; reshape them to (-1,)");
  if (!in[1].shape.has_rank()) return {ValueType{in[0].dtype, TensorShape{None}}, ValueType{in[1].dtype, TensorShape::unknown_rank()}};
  if (in[1].shape.rank() == 0)
    op_error<InvalidArgumentError>(op, "values must have rank >= 1 (one row per index), got a scalar");
  const int64_t rows_given = in[1].shape.none_aware().dims()[0];
  const int64_t n = in[0].shape.has_rank() ? in[0].shape.none_aware().dims()[0] : None;
  if (rows_given != None && n != None && rows_given != n)
    op_error<InvalidArgumentError>(op, "values (shape ", in[1].shape.to_string(), ") must have one row per index (indices shape ",
                                   in[0].shape.to_string(), ")");
  std::vector<int64_t> rows = in[1].shape.none_aware().dims();
  rows[0] = None;
  return {ValueType{in[0].dtype, TensorShape{None}}, ValueType{in[1].dtype, TensorShape(rows)}};
}
template <class I>
void deduplicate(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const I* idx = data_of<I>(in[0]);
  const int64_t n = in[0].impl()->shape.num_elements();
  const auto& vd = dims_of(in[1]);
  const int64_t row = product(vd, 1, vd.size());
  DistinctIndices<I> numbering(n);
  std::vector<int64_t> position(static_cast<std::size_t>(n));
  std::vector<I> distinct;
  for (int64_t j = 0; j < n; ++j) {
    const auto [number, first] = numbering.number(idx[j]);
    if (first) distinct.push_back(idx[j]);
    position[static_cast<std::size_t>(j)] = number;
  }
  const auto u = static_cast<int64_t>(distinct.size());
  out[0] = allocate_tensor(in[0].impl()->dtype, TensorShape{u});
  std::copy(distinct.begin(), distinct.end(), data_of<I>(out[0]));
  std::vector<int64_t> dims = vd;
  dims[0] = u;
  out[1] = allocate_tensor(in[1].impl()->dtype, TensorShape(dims));
  visit_dtype(in[1].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      const T* v = data_of<T>(in[1]);
      T* y = data_of<T>(out[1]);
      // In order of appearance from zero, as unsorted_segment_sum adds; a row's first value is
      // written as 0 + value (not copied), so that a -0 sums to +0 as it does there.
      // Threads take ranges of output rows, each scanning every index for its own: a row's sum
      // runs in the same order on any thread count.
      std::vector<char> started(static_cast<std::size_t>(u));
      auto sum_rows = [&](int64_t begin, int64_t end) {
        for (int64_t j = 0; j < n; ++j) {
          const int64_t p = position[static_cast<std::size_t>(j)];
          if (p < begin || p >= end) continue;
          T* d = y + p * row;
          const T* s = v + j * row;
          if (started[static_cast<std::size_t>(p)]) {
            for (int64_t k = 0; k < row; ++k) d[k] += s[k];
          } else {
            started[static_cast<std::size_t>(p)] = 1;
            for (int64_t k = 0; k < row; ++k) d[k] = T{0} + s[k];
          }
        }
      };
      if (n * row < 2 * kParallelMinElements) sum_rows(0, u);
      else parallel_for(u, std::max<int64_t>(1, kParallelMinElements / std::max<int64_t>(row, 1)), sum_rows);
    }
  });
}
void kernel_deduplicate_slices(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  infer_deduplicate_slices({type_of(in[0]), type_of(in[1])}, attrs);
  if (dims_of(in[1])[0] != in[0].impl()->shape.num_elements())
    op_error<InvalidArgumentError>("deduplicate_slices", "values (shape ", in[1].impl()->shape.to_string(),
                                   ") must have one row per index, and there are ", in[0].impl()->shape.num_elements(),
                                   " indices");
  if (in[0].impl()->dtype == DType::Int64) deduplicate<int64_t>(in, out);
  else deduplicate<int32_t>(in, out);
}

// ---- gradient rules ----

// gather_nd's adjoint: the slices of g added into zeros shaped like params (repeats add).
std::vector<Tensor> grad_gather_nd(const GradInputs& g) {
  return {tensor_scatter_nd_add(zeros_like(g.inputs[0]), g.inputs[1], g.grads[0]), Tensor()};
}
std::vector<Tensor> grad_scatter_nd(const GradInputs& g) {
  return {Tensor(), gather_nd(g.grads[0], g.inputs[0]), Tensor()};
}
std::vector<Tensor> grad_tensor_scatter_nd_add(const GradInputs& g) {
  return {g.grads[0], Tensor(), gather_nd(g.grads[0], g.inputs[1])};
}
// TF's rule (the gradient of the gather boolean_mask is): g scattered back to the true positions,
// zeros elsewhere. A mask at axis > 0 is moved to the front, scattered there, and moved back.
std::vector<Tensor> grad_boolean_mask(const GradInputs& g) {
  const Tensor& x = g.inputs[0];
  const Tensor indices = where(g.inputs[1]);
  const int64_t axis = g.attrs.get<AxisAttrs>().axis;
  if (axis == 0) return {tensor_scatter_nd_add(zeros_like(x), indices, g.grads[0]), Tensor()};
  const TensorShape& xs = static_shape(x);
  const TensorShape& ms = static_shape(g.inputs[1]);
  if (!xs.has_rank() || !ms.has_rank())
    op_error<ValueError>("boolean_mask", "the gradient of a mask at axis ", axis,
                         " needs the ranks of the tensor and the mask while tracing; give them in the input "
                         "signature, or mask at axis 0");
  const auto r = static_cast<int>(xs.rank()), k = static_cast<int>(ms.rank());
  const int a = static_cast<int>(axis < 0 ? axis + r : axis);
  std::vector<int> to_front, g_to_front, back(static_cast<std::size_t>(r));
  for (int i = a; i < a + k; ++i) to_front.push_back(i);
  for (int i = 0; i < r; ++i)
    if (i < a || i >= a + k) to_front.push_back(i);
  for (int i = 0; i < r; ++i) back[static_cast<std::size_t>(to_front[static_cast<std::size_t>(i)])] = i;
  g_to_front.push_back(a);
  for (int i = 0; i < r - k + 1; ++i)
    if (i != a) g_to_front.push_back(i);
  const Tensor front = tensor_scatter_nd_add(transpose(zeros_like(x), to_front), indices,
                                             transpose(g.grads[0], g_to_front));
  return {transpose(front, back), Tensor()};
}

}  // namespace

void register_nd_index_ops(OpDef* t) {
  set_op(t, OpId::GatherNd, &infer_gather_nd, &kernel_gather_nd);
  set_op(t, OpId::ScatterNd, &infer_scatter_nd, &kernel_scatter_nd);
  set_op(t, OpId::TensorScatterNdAdd, &infer_tensor_scatter_nd_add, &kernel_tensor_scatter_nd_add);
  set_op(t, OpId::WhereIndices, &infer_where_indices, &kernel_where_indices);
  set_op(t, OpId::BooleanMask, &infer_boolean_mask, &kernel_boolean_mask);
  set_op(t, OpId::DeduplicateSlices, &infer_deduplicate_slices, &kernel_deduplicate_slices);
  set_grad(t, OpId::GatherNd, &grad_gather_nd);
  set_grad(t, OpId::ScatterNd, &grad_scatter_nd);
  set_grad(t, OpId::TensorScatterNdAdd, &grad_tensor_scatter_nd_add);
  set_grad(t, OpId::BooleanMask, &grad_boolean_mask);
}

}  // namespace detail

// ---- public front functions ----

Tensor gather_nd(const Tensor& params, const Tensor& indices) {
  return detail::apply_op1(detail::OpId::GatherNd, {params, indices});
}

Tensor scatter_nd(const Tensor& indices, const Tensor& updates, const Tensor& shape) {
  return detail::apply_op1(detail::OpId::ScatterNd, {indices, updates, shape},
                           detail::shape_value_of("scatter_nd", shape));
}
Tensor scatter_nd(const Tensor& indices, const Tensor& updates, const TensorShape& shape) {
  if (!shape.is_fully_defined())
    detail::op_error<InvalidArgumentError>("scatter_nd", "the shape ", shape.to_string(),
                                           " is not fully defined; pass a 1-D int tensor (e.g. from tg::shape) for "
                                           "sizes known at run time");
  return scatter_nd(indices, updates, constant(shape.dims(), TensorShape{shape.rank()}, int64));
}

Tensor tensor_scatter_nd_add(const Tensor& tensor, const Tensor& indices, const Tensor& updates) {
  return detail::apply_op1(detail::OpId::TensorScatterNdAdd, {tensor, indices, updates});
}

Tensor where(const Tensor& condition) { return detail::apply_op1(detail::OpId::WhereIndices, {condition}); }

Tensor boolean_mask(const Tensor& tensor, const Tensor& mask, int axis) {
  return detail::apply_op1(detail::OpId::BooleanMask, {tensor, mask}, detail::AxisAttrs{axis});
}

// ---- IndexedSlices and Gradient ----

namespace {
// TF warns when converting sparse slices to a dense tensor of at least this many elements.
constexpr int64_t kLargeSparseElements = 100000000;
}  // namespace

IndexedSlices::IndexedSlices(Tensor indices, Tensor values, TensorShape dense_shape)
    : indices_(std::move(indices)), values_(std::move(values)), dense_shape_(std::move(dense_shape)) {
  const char* op = "IndexedSlices";
  if (!indices_.defined() || !values_.defined())
    detail::op_error<InvalidArgumentError>(op, "indices and values must be computed tensors, got an empty tg::Tensor");
  if (indices_.dtype() != DType::Int32 && indices_.dtype() != DType::Int64)
    detail::op_error<InvalidArgumentError>(op, "indices must be int32 or int64, got ", tg::to_string(indices_.dtype()));
  if (!is_floating(values_.dtype()))
    detail::op_error<InvalidArgumentError>(op, "values must be float32 or float64, got ", tg::to_string(values_.dtype()));
  if (!dense_shape_.is_fully_defined() || dense_shape_.rank() == 0)
    detail::op_error<InvalidArgumentError>(op, "dense_shape must be fully known with rank >= 1, got ",
                                           dense_shape_.to_string());
  const TensorShape is = detail::static_shape(indices_).none_aware();
  const TensorShape vs = detail::static_shape(values_).none_aware();
  if (!is.has_rank() || is.rank() != 1)
    detail::op_error<InvalidArgumentError>(op, "indices must be a vector (rank 1), got shape ", is.to_string(),
                                           "; reshape them to (-1,)");
  std::vector<int64_t> want = dense_shape_.dims();
  want[0] = is.dims()[0];
  if (!vs.is_compatible_with(TensorShape(want)))
    detail::op_error<InvalidArgumentError>(op, "values have shape ", vs.to_string(), " but ", is.to_string(),
                                           " indices into a dense shape ", dense_shape_.to_string(), " need values of shape ",
                                           TensorShape(want).to_string(), " (one row of dense_shape[1:] per index)");
}

Tensor IndexedSlices::to_dense() const {
  const int64_t elements = dense_shape_.num_elements();
  if (elements >= kLargeSparseElements)
    detail::log_message(detail::str_cat("tracegraph warning: Converting sparse IndexedSlices to a dense Tensor with ",
                                        elements, " elements. This may consume a large amount of memory."));
  // scatter_nd adds the rows in index order onto zeros, as the gather's dense gradient does.
  return scatter_nd(expand_dims(indices_, -1), values_, dense_shape_);
}

IndexedSlices IndexedSlices::deduplicated() const {
  std::vector<Tensor> out = detail::apply_op(detail::OpId::DeduplicateSlices, {indices_, values_});
  return IndexedSlices(std::move(out[0]), std::move(out[1]), dense_shape_);
}

std::string IndexedSlices::to_string() const {
  return detail::str_cat("IndexedSlices(indices=", indices_.to_string(), ", values=", values_.to_string(),
                         ", dense_shape=", dense_shape_.to_string(), ")");
}

Gradient::Gradient(IndexedSlices sparse) : sparse_(std::make_shared<const IndexedSlices>(std::move(sparse))) {}

const Tensor& Gradient::dense() const {
  if (sparse_)
    throw TypeError("[Gradient.dense] this gradient is an IndexedSlices (the gradient of a gather or Embedding); "
                    "read it with slices(), or convert it with to_dense()");
  return dense_;
}

const IndexedSlices& Gradient::slices() const {
  if (!sparse_)
    throw TypeError("[Gradient.slices] this gradient is a dense tensor, not an IndexedSlices; read it with dense() "
                    "(check is_sparse() first)");
  return *sparse_;
}

Tensor Gradient::to_dense() const { return sparse_ ? sparse_->to_dense() : dense_; }

DType Gradient::dtype() const {
  if (!defined())
    throw ValueError("[Gradient.dtype] the gradient is undefined (the target does not depend on its source)");
  return sparse_ ? sparse_->dtype() : dense_.dtype();
}

}  // namespace tg
