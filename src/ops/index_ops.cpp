// Index ops: slice, gather, one_hot. Bounds that depend on tensor values (gather indices) are
// checked in the kernels, like TensorFlow on CPU; everything static is checked while inferring.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "core/thread_pool.h"
#include "ops/broadcast.h"
#include "ops/grad_helpers.h"
#include "ops/row_prefetch.h"
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
    if (b > d || (s != -1 && s > d - b)) {
      int64_t end = 0;  // begin and size come from the user: their sum may overflow
      const bool overflows = __builtin_add_overflow(b, s, &end);
      op_error<InvalidArgumentError>(op, "dimension ", i, " has size ", d, " (shape ",
                                     in.to_string(), ") but the slice wants begin ", b,
                                     s == -1 ? std::string(" to the end")
                                             : str_cat(" + size ", s, " = ",
                                                       overflows ? std::string("more than int64 can hold")
                                                                 : std::to_string(end)),
                                     "; expected 0 <= begin <= begin + size <= ", d);
    }
    out[i] = s == -1 ? d - b : s;
  }
  return TensorShape(out);
}

std::vector<ValueType> infer_slice(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const SliceAttrs& attrs = op_attrs.get<SliceAttrs>();
  return {ValueType{in[0].dtype, slice_shape(in[0].shape, attrs.begin, attrs.size)}};
}

void kernel_slice(const std::vector<Tensor>& in, const OpAttrs& op_attrs, std::vector<Tensor>& out) {
  const SliceAttrs& attrs = op_attrs.get<SliceAttrs>();
  const auto& id = dims_of(in[0]);
  const std::vector<int64_t> od = slice_shape(in[0].impl()->shape, attrs.begin, attrs.size).dims();
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
  for (std::size_t i = 0; i < od.size(); ++i) base += attrs.begin[i] * st[i];
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

std::vector<ValueType> infer_gather(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const AxisAttrs& attrs = op_attrs.get<AxisAttrs>();
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

void kernel_gather(const std::vector<Tensor>& in, const OpAttrs& op_attrs, std::vector<Tensor>& out) {
  const AxisAttrs& attrs = op_attrs.get<AxisAttrs>();
  const auto& pd = dims_of(in[0]);
  const auto axis = static_cast<std::size_t>(normalize_axis("gather", attrs.axis,
                                                            static_cast<int64_t>(pd.size())));
  const int64_t bound = pd[axis];
  const bool wide = in[1].impl()->dtype == DType::Int64;
  if (wide) check_indices<int64_t>(in[1], bound, static_cast<int64_t>(axis), in[0]);
  else check_indices<int32_t>(in[1], bound, static_cast<int64_t>(axis), in[0]);
  // Nothing to copy (bad indices are refused all the same, above); `outer` of params such
  // as (2^40, 2^40, 0) would be a saturated product (ops/broadcast.h), not a count to loop over.
  if (out[0].impl()->shape.num_elements() == 0) return;
  const int64_t outer = product(pd, 0, axis);
  const int64_t inner = product(pd, axis + 1, pd.size());
  const int64_t m = in[1].impl()->shape.num_elements();
  visit_dtype(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* src = data_of<T>(in[0]);
    T* dst = data_of<T>(out[0]);
    const auto* i32 = data_of<int32_t>(in[1]);
    const auto* i64 = data_of<int64_t>(in[1]);
    // Output rows [r0, r1) of outer * m, each `inner` long: row o * m + j is params' row i[j]
    // of block o. Threads copy ranges of rows (an embedding's 3200 x 64 lookup: 800 KB), which
    // gives the same bytes on any thread count.
    auto source_row = [&](int64_t r) {
      const int64_t o = r / m, j = r % m;
      const int64_t i = wide ? i64[j] : static_cast<int64_t>(i32[j]);
      return src + (o * bound + i) * inner;
    };
    auto rows = [&](int64_t r0, int64_t r1) {
      T* d = dst + r0 * inner;
      for (int64_t r = r0; r < r1; ++r) {
        if constexpr (std::is_trivially_copyable_v<T>)
          if (r + kRowPrefetchDistance < r1)
            prefetch_row(source_row(r + kRowPrefetchDistance), sizeof(T) * static_cast<std::size_t>(inner), false);
        d = std::copy_n(source_row(r), inner, d);
      }
    };
    const int64_t total = outer * m;
    if (total * inner < 2 * kParallelMinElements || std::is_same_v<T, std::string>) rows(0, total);
    else parallel_for(total, std::max<int64_t>(1, kParallelMinElements / std::max<int64_t>(inner, 1)), rows);
  });
}

// ---- one_hot ----

// on_value / off_value in the output dtype; integer dtypes need exactly representable values.
template <class T>
T onehot_value(double v, const char* which) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else if constexpr (std::is_integral_v<T>) {
    // The range is [min, max + 1): 2^63 and -2^63 are exact doubles (int64's max rounds to 2^63).
    const double lo = static_cast<double>(std::numeric_limits<T>::min());
    const double hi = static_cast<double>(std::numeric_limits<T>::max()) + 1.0;
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

std::vector<ValueType> infer_one_hot(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const OneHotAttrs& attrs = op_attrs.get<OneHotAttrs>();
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
  // An output with a zero dim holds no element however large its other dims: (2^40, 2^40, 0, 3).
  const bool empty = std::find(dims.begin(), dims.end(), 0) != dims.end();
  int64_t n = 1;
  for (int64_t d : dims)
    if (!empty && d != None && __builtin_mul_overflow(n, d, &n))
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

void kernel_one_hot(const std::vector<Tensor>& in, const OpAttrs& op_attrs, std::vector<Tensor>& out) {
  const OneHotAttrs& attrs = op_attrs.get<OneHotAttrs>();
  const auto& d = dims_of(in[0]);
  const std::size_t axis = attrs.axis == -1 ? d.size() : static_cast<std::size_t>(attrs.axis);
  // Nothing to fill, and outer * depth * inner below may overflow for (2^40, 2^40, 0).
  if (out[0].impl()->shape.num_elements() == 0) return;
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

// ---- gradient helpers: slice_like, pad_like, scatter_add_like ----

// The begin offsets of a block shaped `small` inside `big` (missing entries 0, negative ones
// counted from the end of the dim); checks that the block fits where the dims are known.
std::vector<int64_t> block_begin(const char* op, const std::vector<int64_t>& begin,
                                 const TensorShape& big, const TensorShape& small) {
  if (big.rank() != small.rank())
    op_error<InvalidArgumentError>(op, "the block has shape ", small.to_string(),
                                   " but the tensor it lies in has shape ", big.to_string(),
                                   "; expected equal ranks");
  if (static_cast<int64_t>(begin.size()) > big.rank())
    op_error<InvalidArgumentError>(op, "begin ", format_list(begin), " has more entries than the rank ",
                                   big.rank(), " of shape ", big.to_string());
  std::vector<int64_t> out(big.dims().size(), 0);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int64_t d = big.dims()[i], n = small.dims()[i];
    int64_t b = i < begin.size() ? begin[i] : 0;
    if (b < 0 && d != None) b += d;
    out[i] = b;
    if (d == None || n == None) continue;
    if (b < 0 || n > d - b)  // not b + n > d: b may be near INT64_MAX
      op_error<InvalidArgumentError>(op, "a block of shape ", small.to_string(), " at begin ",
                                     format_list(begin), " does not fit in shape ", big.to_string(),
                                     " along dimension ", i, "; expected 0 <= begin and begin + "
                                     "size <= ", d);
  }
  return out;
}

// Calls fn(big_offset, small_offset, n) for each contiguous row of a block of dims `small`
// placed at `begin` inside a row-major tensor of dims `big`.
template <class Fn>
void for_each_block_row(const std::vector<int64_t>& big, const std::vector<int64_t>& small,
                        const std::vector<int64_t>& begin, Fn fn) {
  const std::size_t r = big.size();
  if (product(small, 0, r) == 0) return;
  if (r == 0) {
    fn(int64_t{0}, int64_t{0}, int64_t{1});
    return;
  }
  const std::vector<int64_t> strides = row_major_strides(big);
  std::vector<int64_t> idx(r - 1, 0);
  const int64_t row = small[r - 1];
  for (int64_t soff = 0;; soff += row) {
    int64_t boff = begin[r - 1];
    for (std::size_t i = 0; i + 1 < r; ++i) boff += (begin[i] + idx[i]) * strides[i];
    fn(boff, soff, row);
    std::size_t i = r - 1;
    while (i-- > 0) {
      if (++idx[i] < small[i]) break;
      idx[i] = 0;
    }
    if (i == static_cast<std::size_t>(-1)) return;
  }
}

std::vector<ValueType> infer_slice_like(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const BlockAttrs& attrs = op_attrs.get<BlockAttrs>();
  if (in[0].shape.has_rank() && in[1].shape.has_rank())
    block_begin("slice_like", attrs.begin, in[0].shape, in[1].shape);
  return {ValueType{in[0].dtype, in[1].shape}};
}
void kernel_slice_like(const std::vector<Tensor>& in, const OpAttrs& op_attrs, std::vector<Tensor>& out) {
  const BlockAttrs& attrs = op_attrs.get<BlockAttrs>();
  const std::vector<int64_t> b =
      block_begin("slice_like", attrs.begin, in[0].impl()->shape, in[1].impl()->shape);
  visit_dtype(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = data_of<T>(in[0]);
    T* y = data_of<T>(out[0]);
    for_each_block_row(dims_of(in[0]), dims_of(in[1]), b, [&](int64_t bo, int64_t so, int64_t n) {
      std::copy_n(x + bo, n, y + so);
    });
  });
}

std::vector<ValueType> infer_pad_like(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const BlockAttrs& attrs = op_attrs.get<BlockAttrs>();
  if (in[0].dtype == DType::String)
    op_error<InvalidArgumentError>("pad_like", "cannot pad a string tensor with zeros");
  if (in[0].shape.has_rank() && in[1].shape.has_rank())
    block_begin("pad_like", attrs.begin, in[1].shape, in[0].shape);
  return {ValueType{in[0].dtype, in[1].shape}};
}
void kernel_pad_like(const std::vector<Tensor>& in, const OpAttrs& op_attrs, std::vector<Tensor>& out) {
  const BlockAttrs& attrs = op_attrs.get<BlockAttrs>();
  infer_pad_like({ValueType{in[0].impl()->dtype, in[0].impl()->shape},
                  ValueType{in[1].impl()->dtype, in[1].impl()->shape}},
                 op_attrs);
  const std::vector<int64_t> b =
      block_begin("pad_like", attrs.begin, in[1].impl()->shape, in[0].impl()->shape);
  visit_dtype(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, std::string>) {
      const T* g = data_of<T>(in[0]);
      T* y = data_of<T>(out[0]);
      std::fill_n(y, out[0].impl()->shape.num_elements(), T{});
      for_each_block_row(dims_of(in[1]), dims_of(in[0]), b, [&](int64_t bo, int64_t so, int64_t n) {
        std::copy_n(g + so, n, y + bo);
      });
    }
  });
}

std::vector<ValueType> infer_scatter_add_like(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const AxisAttrs& attrs = op_attrs.get<AxisAttrs>();
  const char* op = "scatter_add_like";
  require_dtype(op, in[0], {DType::Float32, DType::Float64, DType::Int32, DType::Int64});
  require_dtype(op, in[1], {DType::Int32, DType::Int64}, "indices");
  const TensorShape want = infer_gather({in[2], in[1]}, op_attrs)[0].shape;
  if (in[0].shape.has_rank() && want.has_rank() && !in[0].shape.is_compatible_with(want))
    op_error<InvalidArgumentError>(op, "the gradient has shape ", in[0].shape.to_string(),
                                   " but gathering indices ", in[1].shape.to_string(), " from ",
                                   in[2].shape.to_string(), " along axis ", attrs.axis, " gives ",
                                   want.to_string(), "; expected that shape");
  return {ValueType{in[0].dtype, in[2].shape}};
}
void kernel_scatter_add_like(const std::vector<Tensor>& in, const OpAttrs& op_attrs, std::vector<Tensor>& out) {
  const AxisAttrs& attrs = op_attrs.get<AxisAttrs>();
  std::vector<ValueType> types;
  for (const Tensor& t : in) types.push_back(ValueType{t.impl()->dtype, t.impl()->shape});
  infer_scatter_add_like(types, op_attrs);
  const auto& ld = dims_of(in[2]);
  const auto axis = static_cast<std::size_t>(
      normalize_axis("scatter_add_like", attrs.axis, static_cast<int64_t>(ld.size())));
  const int64_t bound = ld[axis];
  const int64_t outer = product(ld, 0, axis);
  const int64_t inner = product(ld, axis + 1, ld.size());
  const int64_t m = in[1].impl()->shape.num_elements();
  const bool wide = in[1].impl()->dtype == DType::Int64;
  const auto* i32 = data_of<int32_t>(in[1]);
  const auto* i64 = data_of<int64_t>(in[1]);
  for (int64_t j = 0; j < m; ++j) {
    const int64_t i = wide ? i64[j] : static_cast<int64_t>(i32[j]);
    if (i < 0 || i >= bound)
      op_error<InvalidArgumentError>("scatter_add_like", "indices", position_of(j, dims_of(in[1])),
                                     " = ", i, " is not in [0, ", bound, "); expected indices "
                                     "into axis ", axis, " of shape ",
                                     in[2].impl()->shape.to_string());
  }
  // An empty result has no element to add to; its `outer` may be a saturated product.
  if (out[0].impl()->shape.num_elements() == 0) return;
  visit_dtype(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      const T* g = data_of<T>(in[0]);
      T* y = data_of<T>(out[0]);
      // Threads take ranges [r0, r1) of the output's outer * bound rows, each scanning every
      // index for its own: a row's sum runs in index order on any thread count. A row's first
      // term is written as T{} + term, what adding it to a row of zeros gives, and only the rows
      // no index names are filled with zeros: each output row is written once (a loop's
      // gradient scatters every row of its sequence exactly once).
      auto add_rows = [&](int64_t r0, int64_t r1) {
        std::vector<char> written(static_cast<std::size_t>(r1 - r0), 0);
        for (int64_t o = r0 / bound; o < outer && o * bound < r1; ++o)
          for (int64_t j = 0; j < m; ++j) {
            const int64_t r = o * bound + (wide ? i64[j] : static_cast<int64_t>(i32[j]));
            if (r < r0 || r >= r1) continue;
            const T* src = g + (o * m + j) * inner;
            T* dst = y + r * inner;
            char& w = written[static_cast<std::size_t>(r - r0)];
            if (w) {
              for (int64_t k = 0; k < inner; ++k) dst[k] += src[k];
            } else {
              for (int64_t k = 0; k < inner; ++k) dst[k] = static_cast<T>(T{} + src[k]);
              w = 1;
            }
          }
        for (int64_t r = r0; r < r1; ++r)
          if (!written[static_cast<std::size_t>(r - r0)]) std::fill_n(y + r * inner, inner, T{});
      };
      const int64_t rows = outer * bound;
      if (std::max(outer * m, rows) * inner < 2 * kParallelMinElements) add_rows(0, rows);
      else parallel_for(rows, std::max<int64_t>(1, kParallelMinElements / std::max<int64_t>(inner, 1)), add_rows);
    }
  });
}

// ---- gradient rules ----

std::vector<Tensor> grad_slice(const GradInputs& g) {
  return {pad_like(g.grads[0], g.inputs[0], g.attrs.get<SliceAttrs>().begin)};
}
std::vector<Tensor> grad_gather(const GradInputs& g) {
  return {scatter_add_like(g.grads[0], g.inputs[1], g.inputs[0], g.attrs.get<AxisAttrs>().axis), Tensor()};
}
std::vector<Tensor> grad_slice_like(const GradInputs& g) {
  return {pad_like(g.grads[0], g.inputs[0], g.attrs.get<BlockAttrs>().begin), Tensor()};
}
std::vector<Tensor> grad_pad_like(const GradInputs& g) {
  return {slice_like(g.grads[0], g.inputs[0], g.attrs.get<BlockAttrs>().begin), Tensor()};
}
std::vector<Tensor> grad_scatter_add_like(const GradInputs& g) {
  return {gather(g.grads[0], g.inputs[1], static_cast<int>(g.attrs.get<AxisAttrs>().axis)), Tensor(), Tensor()};
}

}  // namespace

void register_index_ops(OpDef* t) {
  set_op(t, OpId::Slice, &infer_slice, &kernel_slice);
  set_op(t, OpId::Gather, &infer_gather, &kernel_gather);
  set_op(t, OpId::OneHot, &infer_one_hot, &kernel_one_hot);
  set_op(t, OpId::SliceLike, &infer_slice_like, &kernel_slice_like);
  set_op(t, OpId::PadLike, &infer_pad_like, &kernel_pad_like);
  set_op(t, OpId::ScatterAddLike, &infer_scatter_add_like, &kernel_scatter_add_like);
  set_grad(t, OpId::Slice, &grad_slice);
  set_grad(t, OpId::Gather, &grad_gather);
  set_grad(t, OpId::SliceLike, &grad_slice_like);
  set_grad(t, OpId::PadLike, &grad_pad_like);
  set_grad(t, OpId::ScatterAddLike, &grad_scatter_add_like);
}

}  // namespace detail

// ---- public front functions ----

Tensor slice(const Tensor& x, std::vector<int64_t> begin, std::vector<int64_t> size) {
  return detail::apply_op1(detail::OpId::Slice, {x}, detail::SliceAttrs{std::move(begin), std::move(size)});
}

Tensor gather(const Tensor& params, const Tensor& indices, int axis) {
  return detail::apply_op1(detail::OpId::Gather, {params, indices}, detail::AxisAttrs{axis});
}

Tensor one_hot(const Tensor& indices, int64_t depth, double on_value, double off_value, int axis,
               DType dtype) {
  return detail::apply_op1(detail::OpId::OneHot, {indices},
                           detail::OneHotAttrs{depth, axis, dtype, on_value, off_value});
}

namespace detail {

namespace {
OpAttrs begin_attrs(const std::vector<int64_t>& begin) {
  return BlockAttrs{begin};
}
}  // namespace

Tensor slice_like(const Tensor& x, const Tensor& like, const std::vector<int64_t>& begin) {
  return apply_op1(OpId::SliceLike, {x, like}, begin_attrs(begin));
}

Tensor pad_like(const Tensor& g, const Tensor& like, const std::vector<int64_t>& begin) {
  return apply_op1(OpId::PadLike, {g, like}, begin_attrs(begin));
}

Tensor scatter_add_like(const Tensor& g, const Tensor& indices, const Tensor& like, int64_t axis) {
  return apply_op1(OpId::ScatterAddLike, {g, indices, like}, AxisAttrs{axis});
}

}  // namespace detail

}  // namespace tg
