// Index ops: slice, gather, one_hot. Bounds that depend on tensor values (gather indices) are
// checked in the kernels, like TensorFlow on CPU; everything static is checked while inferring.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "ops/broadcast.h"
#include "tracegraph/ops.h"

namespace tg {
namespace detail {
namespace {



const std::vector<int64_t>& dims_of(const Tensor& t) { return t.impl()->shape.dims(); }

// ---- slice ----

// The output shape (None where a size of -1 meets a None dim); validates begin and size.
TensorShape slice_shape(const TensorShape& in, const std::vector<int64_t>& begin,
                        const std::vector<int64_t>& size) {
  const char* op = "slice";
  if (begin.size() != size.size())
    op_error<InvalidArgumentError>(op, "begin ", format_list(begin), " has ", begin.size(),
                                   " entries but size ", format_list(size), " has ", size.size(),
                                   "; give both one entry per dimension");
  if (in.has_rank() && static_cast<int64_t>(begin.size()) != in.rank())
    op_error<InvalidArgumentError>(op, "begin and size have ", begin.size(),
                                   " entries but the input has rank ", in.rank(), " (shape ",
                                   in.to_string(), "); give one entry per dimension");
  std::vector<int64_t> out(begin.size());
  for (std::size_t i = 0; i < begin.size(); ++i) {
    const int64_t b = begin[i], s = size[i];
    const int64_t d = in.has_rank() ? in.dims()[i] : None;
    if (b < 0)
      op_error<InvalidArgumentError>(op, "begin[", i, "] = ", b,
                                     " is negative; slice begins must be >= 0");
    if (s < -1)
      op_error<InvalidArgumentError>(op, "size[", i, "] = ", s,
                                     " is invalid; expected a size >= 0, or -1 for \"to the "
                                     "end of the dimension\"");
    if (d == None) {
      out[i] = s == -1 ? None : s;
      continue;
    }
    if (b > d || (s != -1 && s > d - b))
      op_error<InvalidArgumentError>(op, "dimension ", i, " has size ", d, " (shape ",
                                     in.to_string(), ") but the slice wants begin ", b,
                                     s == -1 ? std::string(" to the end")
                                             : str_cat(" + size ", s, " = ", b + s),
                                     "; expected 0 <= begin <= begin + size <= ", d);
    out[i] = s == -1 ? d - b : s;
  }
  return TensorShape(out);
}

std::vector<ValueType> infer_slice(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  return {ValueType{in[0].dtype, slice_shape(in[0].shape, attrs.axes, attrs.sizes)}};
}

void kernel_slice(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const auto& id = dims_of(in[0]);
  const std::vector<int64_t> od = slice_shape(in[0].impl()->shape, attrs.axes, attrs.sizes).dims();
  const int64_t total = product(od, 0, od.size());
  if (total == 0) return;
  const std::vector<int64_t> st = row_major_strides(id);
  // Trailing dims taken whole extend the contiguous run; dim k is the outermost one in it.
  std::size_t k = od.size();
  int64_t run = 1;
  while (k > 0) {
    --k;
    run *= od[k];
    if (od[k] != id[k]) break;
  }
  int64_t base = 0;
  for (std::size_t i = 0; i < od.size(); ++i) base += attrs.axes[i] * st[i];
  visit_dtype(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* src = data_of<T>(in[0]);
    T* dst = data_of<T>(out[0]);
    std::vector<int64_t> counter(k, 0);
    int64_t off = base;
    for (int64_t o = 0, n = total / run; o < n; ++o) {
      dst = std::copy_n(src + off, run, dst);
      for (std::size_t i = k; i-- > 0;) {
        off += st[i];
        if (++counter[i] < od[i]) break;
        off -= st[i] * od[i];
        counter[i] = 0;
      }
    }
  });
}

// ---- gather ----

std::vector<ValueType> infer_gather(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const char* op = "gather";
  require_dtype(op, in[1], {DType::Int32, DType::Int64}, "indices");
  const TensorShape& p = in[0].shape;
  const TensorShape& ix = in[1].shape;
  if (!p.has_rank()) return {ValueType{in[0].dtype, TensorShape::unknown_rank()}};
  if (p.rank() == 0)
    op_error<InvalidArgumentError>(op, "params must have rank >= 1 to gather from, got a scalar "
                                   "(shape ()); expand_dims it first");
  const auto axis = static_cast<std::size_t>(normalize_axis(op, attrs.axis, p.rank()));
  if (!ix.has_rank()) return {ValueType{in[0].dtype, TensorShape::unknown_rank()}};
  std::vector<int64_t> dims(p.dims().begin(), p.dims().begin() + static_cast<std::ptrdiff_t>(axis));
  dims.insert(dims.end(), ix.dims().begin(), ix.dims().end());
  dims.insert(dims.end(), p.dims().begin() + static_cast<std::ptrdiff_t>(axis) + 1, p.dims().end());
  return {ValueType{in[0].dtype, TensorShape(dims)}};
}

// "[1, 0]" (nothing for scalar indices): the position of flat element j in a tensor of the given dims.
std::string position_of(int64_t j, const std::vector<int64_t>& dims) {
  if (dims.empty()) return "";
  std::vector<int64_t> pos(dims.size());
  for (std::size_t i = dims.size(); i-- > 0;) {
    pos[i] = j % dims[i];
    j /= dims[i];
  }
  return format_list(pos);
}

template <class I>
void check_indices(const Tensor& indices, int64_t bound, int64_t axis, const Tensor& params) {
  const I* idx = data_of<I>(indices);
  const int64_t m = indices.impl()->shape.num_elements();
  for (int64_t j = 0; j < m; ++j)
    if (idx[j] < 0 || static_cast<int64_t>(idx[j]) >= bound)
      op_error<InvalidArgumentError>(
          "gather", "indices", position_of(j, dims_of(indices)), " = ", idx[j], " is not in [0, ",
          bound, "): axis ", axis, " of params (shape ", params.impl()->shape.to_string(),
          ") has size ", bound, "; indices must be >= 0 and < that size");
}

void kernel_gather(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const auto& pd = dims_of(in[0]);
  const auto axis = static_cast<std::size_t>(normalize_axis("gather", attrs.axis,
                                                            static_cast<int64_t>(pd.size())));
  const int64_t bound = pd[axis];
  const bool wide = in[1].impl()->dtype == DType::Int64;
  if (wide) check_indices<int64_t>(in[1], bound, static_cast<int64_t>(axis), in[0]);
  else check_indices<int32_t>(in[1], bound, static_cast<int64_t>(axis), in[0]);
  const int64_t outer = product(pd, 0, axis);
  const int64_t inner = product(pd, axis + 1, pd.size());
  const int64_t m = in[1].impl()->shape.num_elements();
  visit_dtype(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* src = data_of<T>(in[0]);
    T* dst = data_of<T>(out[0]);
    const auto* i32 = data_of<int32_t>(in[1]);
    const auto* i64 = data_of<int64_t>(in[1]);
    for (int64_t o = 0; o < outer; ++o) {
      const T* block = src + o * bound * inner;
      for (int64_t j = 0; j < m; ++j) {
        const int64_t i = wide ? i64[j] : static_cast<int64_t>(i32[j]);
        dst = std::copy_n(block + i * inner, inner, dst);
      }
    }
  });
}

// ---- one_hot ----

// on_value / off_value in the output dtype; integer dtypes need exactly representable values.
template <class T>
T onehot_value(double v, const char* which) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else if constexpr (std::is_integral_v<T>) {
    // 2^63 and -2^63 are exact doubles; the int64 range is [-2^63, 2^63).
    const double lo = static_cast<double>(std::numeric_limits<T>::min());
    const double hi = -lo;
    if (!(v == std::floor(v)) || v < lo || v >= hi)
      op_error<InvalidArgumentError>("one_hot", which, " ", v, " cannot be represented exactly as ",
                                     to_string(dtype_of_v<T>),
                                     "; use an integral value in range or a float dtype");
    return static_cast<T>(v);
  } else if constexpr (std::is_same_v<T, float>) {
    // Finite doubles beyond float's range become +-inf (a C++ conversion would be undefined).
    if (std::isfinite(v) && std::fabs(v) > std::numeric_limits<float>::max())
      return v > 0 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
    return static_cast<float>(v);
  } else {
    return static_cast<T>(v);
  }
}

std::vector<ValueType> infer_one_hot(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const char* op = "one_hot";
  require_dtype(op, in[0], {DType::Int32, DType::Int64}, "indices");
  if (attrs.depth < 0)
    op_error<InvalidArgumentError>(op, "depth must be >= 0, got ", attrs.depth);
  if (attrs.dtype == DType::String)
    op_error<InvalidArgumentError>(op, "dtype string is not supported: on_value and off_value are "
                                   "numbers; expected a numeric dtype or bool");
  visit_dtype(attrs.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, std::string>) {
      onehot_value<T>(attrs.on_value, "on_value");
      onehot_value<T>(attrs.off_value, "off_value");
    }
  });
  const TensorShape& s = in[0].shape;
  const int64_t r = s.rank();
  if (attrs.axis < -1 || (s.has_rank() && attrs.axis > r))
    op_error<InvalidArgumentError>(op, "axis ", attrs.axis, " is out of range for indices of rank ",
                                   s.has_rank() ? std::to_string(r) : std::string("<unknown>"),
                                   "; expected -1 (a new last axis) or an axis in [0, ",
                                   s.has_rank() ? std::to_string(r) : std::string("rank"), "]");
  if (!s.has_rank()) return {ValueType{attrs.dtype, s}};
  std::vector<int64_t> dims = s.dims();
  dims.insert(dims.begin() + (attrs.axis == -1 ? r : attrs.axis), attrs.depth);
  int64_t n = 1;
  for (int64_t d : dims)
    if (d != None && __builtin_mul_overflow(n, d, &n))
      op_error<InvalidArgumentError>(op, "the output shape ", TensorShape(dims).to_string(),
                                     " has more elements than int64 can count; use a smaller "
                                     "depth");
  return {ValueType{attrs.dtype, TensorShape(dims)}};
}

template <class T, class I>
void one_hot_fill(const I* idx, T* y, int64_t outer, int64_t depth, int64_t inner, T on, T off) {
  std::fill_n(y, outer * depth * inner, off);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const auto v = static_cast<int64_t>(idx[o * inner + i]);
      if (v >= 0 && v < depth) y[(o * depth + v) * inner + i] = on;
    }
}

void kernel_one_hot(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const auto& d = dims_of(in[0]);
  const std::size_t axis = attrs.axis == -1 ? d.size() : static_cast<std::size_t>(attrs.axis);
  const int64_t outer = product(d, 0, axis);
  const int64_t inner = product(d, axis, d.size());
  visit_dtype(attrs.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, std::string>) {
      const T on = onehot_value<T>(attrs.on_value, "on_value");
      const T off = onehot_value<T>(attrs.off_value, "off_value");
      T* y = data_of<T>(out[0]);
      if (in[0].impl()->dtype == DType::Int64)
        one_hot_fill(data_of<int64_t>(in[0]), y, outer, attrs.depth, inner, on, off);
      else
        one_hot_fill(data_of<int32_t>(in[0]), y, outer, attrs.depth, inner, on, off);
    }
  });
}

}  // namespace

void register_index_ops(OpDef* t) {
  set_op(t, OpId::Slice, &infer_slice, &kernel_slice);
  set_op(t, OpId::Gather, &infer_gather, &kernel_gather);
  set_op(t, OpId::OneHot, &infer_one_hot, &kernel_one_hot);
}

}  // namespace detail

// ---- public front functions ----

Tensor slice(const Tensor& x, std::vector<int64_t> begin, std::vector<int64_t> size) {
  detail::OpAttrs attrs;
  attrs.axes = std::move(begin);
  attrs.sizes = std::move(size);
  return detail::apply_op1(detail::OpId::Slice, {x}, attrs);
}

Tensor gather(const Tensor& params, const Tensor& indices, int axis) {
  detail::OpAttrs attrs;
  attrs.axis = axis;
  return detail::apply_op1(detail::OpId::Gather, {params, indices}, attrs);
}

Tensor one_hot(const Tensor& indices, int64_t depth, double on_value, double off_value, int axis,
               DType dtype) {
  detail::OpAttrs attrs;
  attrs.depth = depth;
  attrs.on_value = on_value;
  attrs.off_value = off_value;
  attrs.axis = axis;
  attrs.dtype = dtype;
  return detail::apply_op1(detail::OpId::OneHot, {indices}, attrs);
}

}  // namespace tg
