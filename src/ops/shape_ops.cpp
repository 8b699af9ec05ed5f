// Shape ops: reshape, transpose, expand_dims, squeeze, concat, stack, x[i], shape, size, and
// the ops whose shape is a tensor: fill (zeros / ones) and broadcast_to.
// Eager tensors are always contiguous row-major, so reshape, expand_dims, squeeze and x[i] only
// change the shape (and, for x[i], the offset): they return views that share the input's
// storage. Kernels recompute their output shape from the concrete input shape instead of
// trusting the traced one, because a None dim seen while tracing is only known at run time.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "core/check.h"
#include "core/shape_limits.h"
#include "core/tensor_impl.h"
#include "core/thread_pool.h"
#include "ops/broadcast.h"
#include "ops/grad_helpers.h"
#include "ops/known_values.h"
#include "ops/shape_value.h"
#include "tracegraph/ops.h"

namespace tg {
namespace detail {
namespace {



// `what()` names the shape for the message and runs only when the product overflows: building
// the name on every call was most of a reshape node's cost.
template <class What>
int64_t checked_mul(const char* op, int64_t a, int64_t b, const What& what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    op_error<InvalidArgumentError>(op, "the number of elements of ", what(),
                                   " overflows int64; use smaller dimensions");
  return r;
}

const std::vector<int64_t>& dims_of(const Tensor& t) { return t.impl()->shape.dims(); }

// A shape with a zero dim holds no element however large its other dims ((2^40, 2^40, 0) is
// legal): its count is 0, not an overflow.
bool has_zero(const std::vector<int64_t>& dims) { return std::find(dims.begin(), dims.end(), 0) != dims.end(); }

// ---- reshape ----

}  // namespace

TensorShape reshape_shape(const TensorShape& in, const std::vector<int64_t>& target) {
  const char* op = "reshape";
  int64_t infer_at = -1;
  int64_t known = 1;  // product of the target dims other than -1
  const bool target_empty = has_zero(target);
  for (std::size_t i = 0; i < target.size(); ++i) {
    if (target[i] < -1)
      op_error<InvalidArgumentError>(op, "target dimension ", i, " is ", target[i], " in shape ",
                                     format_list(target),
                                     "; expected sizes >= 0, or -1 (once) for a dimension to "
                                     "infer");
    if (target[i] == -1) {
      if (infer_at >= 0)
        op_error<InvalidArgumentError>(op, "at most one target dimension may be -1, got shape ",
                                       format_list(target), " (dimensions ", infer_at, " and ",
                                       i, "); give every other dimension explicitly");
      infer_at = static_cast<int64_t>(i);
    } else {
      known = target_empty ? 0 : checked_mul(op, known, target[i], [&] { return "the target shape " + format_list(target); });
    }
  }
  std::vector<int64_t> out = target;
  if (!in.has_rank()) return TensorShape(out);  // a -1 target dim is None: tg::None == -1
  int64_t in_known = 1;
  bool in_unknown = false;
  const bool in_empty = has_zero(in.dims());
  for (int64_t d : in.dims()) {
    if (d == None) in_unknown = true;
    else in_known = in_empty ? 0 : checked_mul(op, in_known, d, [&] { return "the input shape " + in.to_string(); });
  }
  const auto fail = [&](const char* why) {
    op_error<InvalidArgumentError>(op, "cannot reshape a tensor with ",
                                   in_unknown && in_known != 0 ? "a multiple of " : "", in_known,
                                   " elements (shape ", in.to_string(), ") into shape ",
                                   format_list(target), ", which has ", known, " elements",
                                   infer_at >= 0 ? " besides the -1" : "", ": ", why);
  };
  const auto fail_empty = [&] {
    op_error<InvalidArgumentError>(
        op, "cannot infer the -1 dimension of shape ", format_list(target),
        " for a tensor with 0 elements (shape ", in.to_string(),
        ") when another target dimension is 0: any size would fit; give every dimension "
        "explicitly");
  };
  if (!in_unknown) {
    if (infer_at < 0) {
      if (known != in_known) fail("the element counts must match");
    } else if (known == 0) {
      if (in_known == 0) fail_empty();
      fail("no size of the -1 dimension gives the same number of elements");
    } else {
      if (in_known % known != 0)
        fail("the element count is not divisible by the product of the other dimensions");
      out[static_cast<std::size_t>(infer_at)] = in_known / known;
    }
  } else if (infer_at < 0) {
    // The input has in_known * (product of its None dims) elements.
    if (in_known == 0 ? known != 0 : known % in_known != 0)
      fail("no size of the None dimensions gives the same number of elements");
  } else if (in_known == 0) {
    if (known == 0) fail_empty();
    out[static_cast<std::size_t>(infer_at)] = 0;
  }  // else the -1 stays None (== -1): it depends on the input's None dims
  return TensorShape(out);
}

namespace {

std::vector<ValueType> infer_reshape(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const ReshapeAttrs& attrs = op_attrs.get<ReshapeAttrs>();
  return {ValueType{in[0].dtype, reshape_shape(in[0].shape, attrs.shape)}};
}
void kernel_reshape(const std::vector<Tensor>& in, const OpAttrs& op_attrs, std::vector<Tensor>& out) {
  const ReshapeAttrs& attrs = op_attrs.get<ReshapeAttrs>();
  out[0] = make_view(in[0], reshape_shape(in[0].impl()->shape, attrs.shape));
}

// ---- transpose ----

// The permutation to apply (an empty perm reverses the dims); empty when the rank is unknown.
std::vector<int64_t> resolve_perm(const std::vector<int64_t>& perm, const TensorShape& in) {
  const char* op = "transpose";
  if (perm.empty()) {
    std::vector<int64_t> p(static_cast<std::size_t>(std::max<int64_t>(in.rank(), 0)));
    for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<int64_t>(p.size() - 1 - i);
    return p;
  }
  const auto n = static_cast<int64_t>(perm.size());
  if (in.has_rank() && n != in.rank())
    op_error<InvalidArgumentError>(op, "perm ", format_list(perm), " has ", n,
                                   " entries but the input has rank ", in.rank(), " (shape ",
                                   in.to_string(), "); give one entry per dimension");
  std::vector<bool> seen(perm.size(), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= n || seen[static_cast<std::size_t>(p)])
      op_error<InvalidArgumentError>(op, "perm ", format_list(perm),
                                     " is not a permutation of 0..", n - 1, ": entry ", p,
                                     p < 0 || p >= n ? " is out of range" : " is repeated",
                                     "; list every dimension index exactly once");
    seen[static_cast<std::size_t>(p)] = true;
  }
  return perm;
}

std::vector<ValueType> infer_transpose(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const TransposeAttrs& attrs = op_attrs.get<TransposeAttrs>();
  const TensorShape& s = in[0].shape;
  if (!s.has_rank() && attrs.perm.empty()) return {ValueType{in[0].dtype, s}};
  const std::vector<int64_t> perm = resolve_perm(attrs.perm, s);
  std::vector<int64_t> dims(perm.size(), None);
  if (s.has_rank())
    for (std::size_t i = 0; i < perm.size(); ++i)
      dims[i] = s.dims()[static_cast<std::size_t>(perm[i])];
  return {ValueType{in[0].dtype, TensorShape(dims)}};
}

// One contiguous run of a transpose. A short run of trivially copyable elements is copied a
// cache line at a time in fixed-size copies the compiler inlines: a memmove call per run cost
// more than its bytes (a transformer's head split, (16, 64, 4, 32) -> (16, 4, 64, 32): 4096 runs
// of 128 bytes, 2.3% of its train step in memmove).
template <class T>
void copy_run(const T* src, int64_t n, T* dst) {
  constexpr int64_t kLine = 64;
  if constexpr (std::is_trivially_copyable_v<T> && sizeof(T) <= kLine && kLine % sizeof(T) == 0) {
    constexpr int64_t kPerLine = kLine / static_cast<int64_t>(sizeof(T));
    if (n <= 8 * kPerLine) {
      int64_t i = 0;
      for (; i + kPerLine <= n; i += kPerLine) std::memcpy(dst + i, src + i, kLine);
      if (i < n) std::memcpy(dst + i, src + i, static_cast<std::size_t>(n - i) * sizeof(T));
      return;
    }
  }
  std::copy_n(src, n, dst);
}

// Copies src (dims in_dims) into dst in the permuted order. Dims of size 1 are dropped and
// output dims that stay adjacent in the input are merged, so that e.g. (B, M, N) -> (B, N, M)
// becomes B 2-D transposes and identity-like perms become one copy.
// One step of transpose_copy's odometer over the dims outer[0 .. counter.size()) (the last
// fastest), moving the source and destination offsets with it.
void next_index(std::vector<int64_t>& counter, const std::vector<std::size_t>& outer,
                const std::vector<int64_t>& dims, const std::vector<int64_t>& sstr,
                const std::vector<int64_t>& dstr, int64_t& soff, int64_t& doff) {
  for (std::size_t i = counter.size(); i-- > 0;) {
    const std::size_t k = outer[i];
    soff += sstr[k];
    doff += dstr[k];
    if (++counter[i] < dims[k]) return;
    soff -= sstr[k] * dims[k];
    doff -= dstr[k] * dims[k];
    counter[i] = 0;
  }
}

template <class T>
void transpose_copy(const T* src, T* dst, const std::vector<int64_t>& in_dims,
                    const std::vector<int64_t>& perm) {
  // Nothing to copy, and the merged dims below could overflow: (0, 2^40, 2^40, 3) is legal.
  if (std::find(in_dims.begin(), in_dims.end(), 0) != in_dims.end()) return;
  const std::vector<int64_t> in_strides = row_major_strides(in_dims);
  std::vector<int64_t> dims, sstr;  // merged output dims and their strides in src
  int64_t total = 1;
  for (int64_t p : perm) {
    const int64_t d = in_dims[static_cast<std::size_t>(p)];
    const int64_t s = in_strides[static_cast<std::size_t>(p)];
    total *= d;
    if (d == 1) continue;
    if (!dims.empty() && sstr.back() == s * d) {
      dims.back() *= d;
      sstr.back() = s;
    } else {
      dims.push_back(d);
      sstr.push_back(s);
    }
  }
  if (total == 0) return;
  if (dims.empty() || (dims.size() == 1 && sstr[0] == 1)) {
    std::copy_n(src, total, dst);
    return;
  }
  const std::vector<int64_t> dstr = row_major_strides(dims);
  const std::size_t r = dims.size();
  const std::size_t last = r - 1;
  // The output dim that is contiguous in src (the input's innermost dim) pairs with the
  // output's last dim to form 2-D tiles; the remaining dims are walked by an odometer.
  std::size_t unit = last;
  for (std::size_t k = 0; k < r; ++k)
    if (sstr[k] == 1) unit = k;
  std::vector<std::size_t> outer;
  for (std::size_t k = 0; k < r; ++k)
    if (k != unit && k != last) outer.push_back(k);
  int64_t outer_count = 1;
  for (std::size_t k : outer) outer_count *= dims[k];
  if (unit == last) {
    // Runs of the last dim: the innermost outer dim in a loop of its own, the odometer over the
    // others (per run, the odometer cost as much as a short run's copy).
    const std::size_t inner = outer.back();
    const int64_t n_inner = dims[inner], s_inner = sstr[inner], d_inner = dstr[inner], run = dims[last];
    std::vector<int64_t> counter(outer.size() - 1, 0);
    int64_t soff = 0, doff = 0;
    for (int64_t o = 0; o < outer_count / n_inner; ++o) {
      const T* s = src + soff;
      T* d = dst + doff;
      for (int64_t i = 0; i < n_inner; ++i, s += s_inner, d += d_inner) copy_run(s, run, d);
      next_index(counter, outer, dims, sstr, dstr, soff, doff);
    }
    return;
  }
  std::vector<int64_t> counter(outer.size(), 0);
  int64_t soff = 0, doff = 0;
  for (int64_t o = 0; o < outer_count; ++o) {
    // Cache-blocked 2-D transpose: dst[a * da + b] = src[a + b * sb]. Few src rows per
    // tile (kTileB) because with power-of-two strides they all map to the same cache sets;
    // measured 2x faster than 32x32 tiles on 4096^2 float32.
    constexpr int64_t kTileA = 64, kTileB = 16;
    const int64_t A = dims[unit], B = dims[last];
    const int64_t da = dstr[unit], sb = sstr[last];
    const T* s0 = src + soff;
    T* d0 = dst + doff;
    for (int64_t a0 = 0; a0 < A; a0 += kTileA) {
      const int64_t a1 = std::min(A, a0 + kTileA);
      for (int64_t b0 = 0; b0 < B; b0 += kTileB) {
        const int64_t b1 = std::min(B, b0 + kTileB);
        for (int64_t a = a0; a < a1; ++a) {
          T* drow = d0 + a * da;
          const T* scol = s0 + a;
          for (int64_t b = b0; b < b1; ++b) drow[b] = scol[b * sb];
        }
      }
    }
    next_index(counter, outer, dims, sstr, dstr, soff, doff);
  }
}

void kernel_transpose(const std::vector<Tensor>& in, const OpAttrs& op_attrs,
                      std::vector<Tensor>& out) {
  const TransposeAttrs& attrs = op_attrs.get<TransposeAttrs>();
  const std::vector<int64_t> perm = resolve_perm(attrs.perm, in[0].impl()->shape);
  visit_dtype(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    transpose_copy<T>(data_of<T>(in[0]), data_of<T>(out[0]), dims_of(in[0]), perm);
  });
}

// ---- expand_dims ----

TensorShape expand_dims_shape(const TensorShape& in, int64_t axis) {
  if (!in.has_rank()) return in;
  const int64_t r = in.rank();
  if (axis < -r - 1 || axis > r)
    op_error<InvalidArgumentError>("expand_dims", "axis ", axis,
                                   " is out of range for a tensor of rank ", r, " (shape ",
                                   in.to_string(), "); expected an axis in [", -r - 1, ", ", r,
                                   "]");
  std::vector<int64_t> dims = in.dims();
  dims.insert(dims.begin() + (axis < 0 ? axis + r + 1 : axis), 1);
  return TensorShape(dims);
}

std::vector<ValueType> infer_expand_dims(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const AxisAttrs& attrs = op_attrs.get<AxisAttrs>();
  return {ValueType{in[0].dtype, expand_dims_shape(in[0].shape, attrs.axis)}};
}
void kernel_expand_dims(const std::vector<Tensor>& in, const OpAttrs& op_attrs,
                        std::vector<Tensor>& out) {
  const AxisAttrs& attrs = op_attrs.get<AxisAttrs>();
  out[0] = make_view(in[0], expand_dims_shape(in[0].impl()->shape, attrs.axis));
}

// ---- squeeze ----

// Like TensorFlow: a listed None dim is assumed to be 1; squeezing every size-1 dim of a shape
// with a None dim gives an unknown rank, since that dim may or may not be 1 at run time.
TensorShape squeeze_shape(const TensorShape& in, const std::vector<int64_t>& axes) {
  const char* op = "squeeze";
  if (!in.has_rank()) return in;
  const int64_t r = in.rank();
  std::vector<bool> listed(static_cast<std::size_t>(r), false);
  for (int64_t a : axes) {
    if (a < -r || a >= r)
      op_error<InvalidArgumentError>(op, "axis ", a, " is out of range for a tensor of rank ", r,
                                     " (shape ", in.to_string(), "); expected axes in [", -r,
                                     ", ", r, ")");
    const int64_t k = a < 0 ? a + r : a;
    const int64_t d = in.dims()[static_cast<std::size_t>(k)];
    if (d != 1 && d != None)
      op_error<InvalidArgumentError>(op, "cannot squeeze axis ", a, ": dimension ", k,
                                     " has size ", d, " in shape ", in.to_string(),
                                     ", expected size 1; only size-1 dims can be removed");
    listed[static_cast<std::size_t>(k)] = true;
  }
  std::vector<int64_t> dims;
  for (std::size_t i = 0; i < listed.size(); ++i) {
    const int64_t d = in.dims()[i];
    if (axes.empty()) {
      if (d == None) return TensorShape::unknown_rank();
      if (d == 1) continue;
    } else if (listed[i]) {
      continue;
    }
    dims.push_back(d);
  }
  return TensorShape(dims);
}

std::vector<ValueType> infer_squeeze(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const SqueezeAttrs& attrs = op_attrs.get<SqueezeAttrs>();
  return {ValueType{in[0].dtype, squeeze_shape(in[0].shape, attrs.axes)}};
}
void kernel_squeeze(const std::vector<Tensor>& in, const OpAttrs& op_attrs, std::vector<Tensor>& out) {
  const SqueezeAttrs& attrs = op_attrs.get<SqueezeAttrs>();
  out[0] = make_view(in[0], squeeze_shape(in[0].impl()->shape, attrs.axes));
}

// ---- concat / stack ----

// The first input of known rank, or -1 when no rank is known.
int64_t first_ranked(const std::vector<ValueType>& in) {
  for (std::size_t i = 0; i < in.size(); ++i)
    if (in[i].shape.has_rank()) return static_cast<int64_t>(i);
  return -1;
}

void require_inputs(const char* op, const std::vector<ValueType>& in) {
  if (in.empty())
    op_error<InvalidArgumentError>(op, "expected at least one tensor, got an empty list; pass "
                                   "the tensors to join");
  require_same_dtype(op, in);
}

// Merges dim i of every input (None matches anything), skipping dim `skip` (-1: none).
std::vector<int64_t> merge_dims(const char* op, const std::vector<ValueType>& in, int64_t rank,
                                int64_t skip, const char* what) {
  const std::size_t ref = static_cast<std::size_t>(first_ranked(in));
  std::vector<int64_t> dims(static_cast<std::size_t>(rank), None);
  for (std::size_t k = 0; k < in.size(); ++k) {
    const TensorShape& s = in[k].shape;
    if (!s.has_rank()) continue;
    if (s.rank() != rank)
      op_error<InvalidArgumentError>(op, "expected tensors of one rank, got shape ",
                                     in[ref].shape.to_string(), " (input ", ref, ") and ",
                                     s.to_string(), " (input ", k, "); ", what);
    for (std::size_t i = 0; i < dims.size(); ++i) {
      if (static_cast<int64_t>(i) == skip) continue;
      const int64_t d = s.dims()[i];
      if (d == None) continue;
      if (dims[i] != None && dims[i] != d)
        op_error<InvalidArgumentError>(op, "dimension ", i, " differs: shape ",
                                       in[ref].shape.to_string(), " (input ", ref, ") vs ",
                                       s.to_string(), " (input ", k, "); ", what);
      dims[i] = d;
    }
  }
  return dims;
}

std::vector<ValueType> infer_concat(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const AxisAttrs& attrs = op_attrs.get<AxisAttrs>();
  const char* op = "concat";
  require_inputs(op, in);
  const int64_t ref = first_ranked(in);
  if (ref < 0) return {ValueType{in[0].dtype, TensorShape::unknown_rank()}};
  const int64_t rank = in[static_cast<std::size_t>(ref)].shape.rank();
  if (rank == 0)
    op_error<InvalidArgumentError>(op, "cannot concatenate scalars (input ", ref,
                                   " has shape ()); use tg::stack to join scalars into a vector");
  const int64_t axis = normalize_axis(op, attrs.axis, rank);
  std::vector<int64_t> dims = merge_dims(
      op, in, rank, axis, "all dims must be equal except the concat axis");
  int64_t sum = 0;
  for (const ValueType& v : in) {
    const int64_t d = v.shape.has_rank() ? v.shape.dims()[static_cast<std::size_t>(axis)] : None;
    if (d == None || sum == None) {
      sum = None;
    } else if (__builtin_add_overflow(sum, d, &sum)) {
      op_error<InvalidArgumentError>(op, "the concatenated axis size overflows int64");
    }
  }
  dims[static_cast<std::size_t>(axis)] = sum;
  return {ValueType{in[0].dtype, TensorShape(dims)}};
}

std::vector<ValueType> infer_stack(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const AxisAttrs& attrs = op_attrs.get<AxisAttrs>();
  const char* op = "stack";
  require_inputs(op, in);
  const int64_t ref = first_ranked(in);
  if (ref < 0) return {ValueType{in[0].dtype, TensorShape::unknown_rank()}};
  const int64_t rank = in[static_cast<std::size_t>(ref)].shape.rank();
  std::vector<int64_t> dims =
      merge_dims(op, in, rank, -1, "stack needs tensors of one shape");
  if (attrs.axis < -rank - 1 || attrs.axis > rank)
    op_error<InvalidArgumentError>(op, "axis ", attrs.axis, " is out of range for stacking rank ",
                                   rank, " tensors; expected an axis in [", -rank - 1, ", ", rank,
                                   "]");
  const int64_t axis = attrs.axis < 0 ? attrs.axis + rank + 1 : attrs.axis;
  dims.insert(dims.begin() + axis, static_cast<int64_t>(in.size()));
  return {ValueType{in[0].dtype, TensorShape(dims)}};
}

// out = for each of `outer` blocks, the next chunks[k] elements of each input k in turn.
void interleave_copy(const std::vector<Tensor>& in, int64_t outer,
                     const std::vector<int64_t>& chunks, Tensor& out) {
  // An empty output's `outer` may be a saturated product (products in ops/broadcast.h).
  if (out.impl()->shape.num_elements() == 0) return;
  visit_dtype(out.impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    T* dst = data_of<T>(out);
    const int64_t total = out.impl()->shape.num_elements();
    if (outer == 1 && num_threads() > 1 && total >= 2 * kParallelMinElements) {
      // Pieces one after the other (a concatenation of rows: an unrolled gradient's per-step
      // values stacked for a weight gradient), each thread its range of the result: twice the
      // copy bandwidth, and a product split over k then reads the rows its own thread wrote.
      parallel_for(total, kParallelMinElements, [&](int64_t b, int64_t e) {
        int64_t at = 0;
        for (std::size_t k = 0; k < in.size() && at < e; at += chunks[k], ++k) {
          const int64_t from = std::max(b, at), to = std::min(e, at + chunks[k]);
          if (from < to) std::copy_n(data_of<T>(in[k]) + (from - at), to - from, dst + from);
        }
      });
      return;
    }
    for (int64_t o = 0; o < outer; ++o)
      for (std::size_t k = 0; k < in.size(); ++k) {
        dst = std::copy_n(data_of<T>(in[k]) + o * chunks[k], chunks[k], dst);
      }
  });
}

// The kernels re-check shapes: a traced concat may have seen None dims that disagree at run time.
void kernel_concat(const std::vector<Tensor>& in, const OpAttrs& op_attrs, std::vector<Tensor>& out) {
  const AxisAttrs& attrs = op_attrs.get<AxisAttrs>();
  std::vector<ValueType> types;
  for (const Tensor& t : in) types.push_back(ValueType{t.impl()->dtype, t.impl()->shape});
  infer_concat(types, attrs);
  const auto& od = dims_of(out[0]);
  const auto axis = static_cast<std::size_t>(normalize_axis("concat", attrs.axis,
                                                            static_cast<int64_t>(od.size())));
  std::vector<int64_t> chunks;
  for (const Tensor& t : in) chunks.push_back(product(dims_of(t), axis, od.size()));
  interleave_copy(in, product(od, 0, axis), chunks, out[0]);
}

void kernel_stack(const std::vector<Tensor>& in, const OpAttrs& op_attrs, std::vector<Tensor>& out) {
  const AxisAttrs& attrs = op_attrs.get<AxisAttrs>();
  std::vector<ValueType> types;
  for (const Tensor& t : in) types.push_back(ValueType{t.impl()->dtype, t.impl()->shape});
  infer_stack(types, attrs);
  const auto& d = dims_of(in[0]);
  const auto rank = static_cast<int64_t>(d.size());
  const auto axis = static_cast<std::size_t>(attrs.axis < 0 ? attrs.axis + rank + 1 : attrs.axis);
  interleave_copy(in, product(d, 0, axis),
                  std::vector<int64_t>(in.size(), product(d, axis, d.size())), out[0]);
}

// ---- x[i] ----

// x[i]'s shape; `pos` receives i counted from the start when dim 0 is known.
TensorShape index_shape(const TensorShape& in, int64_t i, int64_t* pos) {
  const char* op = "index";
  if (!in.has_rank()) return in;
  if (in.rank() == 0)
    op_error<InvalidArgumentError>(op, "cannot index a scalar (shape ()) with [", i,
                                   "]; x[i] needs a tensor of rank >= 1");
  const int64_t d = in.dims()[0];
  if (d != None) {
    if (i < -d || i >= d)
      op_error<InvalidArgumentError>(op, "index ", i, " is out of range for dimension 0 of size ",
                                     d, " (shape ", in.to_string(), "); expected an index in [",
                                     -d, ", ", d, ")");
    if (pos) *pos = i < 0 ? i + d : i;
  }
  return TensorShape(std::vector<int64_t>(in.dims().begin() + 1, in.dims().end()));
}

std::vector<ValueType> infer_index(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const IndexAttrs& attrs = op_attrs.get<IndexAttrs>();
  return {ValueType{in[0].dtype, index_shape(in[0].shape, attrs.index, nullptr)}};
}
void kernel_index(const std::vector<Tensor>& in, const OpAttrs& op_attrs, std::vector<Tensor>& out) {
  const IndexAttrs& attrs = op_attrs.get<IndexAttrs>();
  int64_t pos = 0;
  const TensorShape s = index_shape(in[0].impl()->shape, attrs.index, &pos);
  out[0] = make_view(in[0], s, pos * s.num_elements());
}

// ---- shape / size ----

int32_t to_int32(const char* op, int64_t v, const char* what) {
  if (v > std::numeric_limits<int32_t>::max())
    op_error<InvalidArgumentError>(op, what, " ", v,
                                   " does not fit in the int32 result; the tensor is too large "
                                   "for this op");
  return static_cast<int32_t>(v);
}

std::vector<ValueType> infer_shape(const std::vector<ValueType>& in, const OpAttrs&) {
  return {ValueType{DType::Int32, TensorShape{in[0].shape.has_rank() ? in[0].shape.rank() : None}}};
}
void kernel_shape(const std::vector<Tensor>& in, const OpAttrs&, std::vector<Tensor>& out) {
  const auto& d = dims_of(in[0]);
  int32_t* y = data_of<int32_t>(out[0]);
  for (std::size_t i = 0; i < d.size(); ++i) y[i] = to_int32("shape", d[i], "dimension");
}

std::vector<ValueType> infer_size(const std::vector<ValueType>&, const OpAttrs&) {
  return {ValueType{DType::Int32, TensorShape{}}};
}
void kernel_size(const std::vector<Tensor>& in, const OpAttrs&, std::vector<Tensor>& out) {
  *data_of<int32_t>(out[0]) =
      to_int32("size", in[0].impl()->shape.num_elements(), "the element count");
}

// ---- gradient helpers: reshape_like, split_like ----

std::vector<ValueType> infer_reshape_like(const std::vector<ValueType>& in, const OpAttrs&) {
  const int64_t n = in[0].shape.num_elements(), m = in[1].shape.num_elements();
  if (n >= 0 && m >= 0 && n != m)
    op_error<InvalidArgumentError>("reshape_like", "cannot give a tensor of shape ",
                                   in[0].shape.to_string(), " (", n, " elements) the shape ",
                                   in[1].shape.to_string(), " (", m,
                                   " elements); expected shapes with equal element counts");
  return {ValueType{in[0].dtype, in[1].shape}};
}
void kernel_reshape_like(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  infer_reshape_like({ValueType{in[0].impl()->dtype, in[0].impl()->shape},
                      ValueType{in[1].impl()->dtype, in[1].impl()->shape}},
                     attrs);
  out[0] = make_view(in[0], in[1].impl()->shape);
}

// Copies x into the allocated pieces `out` along `axis` (each piece's size there read from its
// shape): split's and split_like's kernel.
void split_copy(const Tensor& x, int64_t axis, std::vector<Tensor>& out) {
  const auto& xd = dims_of(x);
  if (x.impl()->shape.num_elements() == 0) return;  // `outer` below may be saturated
  const auto a = static_cast<std::size_t>(axis);
  const int64_t outer = product(xd, 0, a);
  std::vector<int64_t> chunks;
  for (const Tensor& piece : out) chunks.push_back(product(dims_of(piece), a, xd.size()));
  visit_dtype(x.impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* src = data_of<T>(x);
    for (int64_t o = 0; o < outer; ++o)
      for (std::size_t k = 0; k < out.size(); ++k) {
        std::copy_n(src, chunks[k], data_of<T>(out[k]) + o * chunks[k]);
        src += chunks[k];
      }
  });
}

std::vector<ValueType> infer_split_like(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const AxisAttrs& attrs = op_attrs.get<AxisAttrs>();
  const char* op = "split_like";
  if (in.size() < 2)
    op_error<InvalidArgumentError>(op, "expected a tensor and at least one tensor to take the "
                                   "piece shapes from, got ", in.size(), " inputs");
  const TensorShape& g = in[0].shape;
  std::vector<ValueType> out;
  for (std::size_t k = 1; k < in.size(); ++k) out.push_back(ValueType{in[0].dtype, in[k].shape});
  if (!g.has_rank()) return out;
  if (g.rank() == 0)
    op_error<InvalidArgumentError>(op, "cannot split a scalar; expected rank >= 1");
  const auto axis = static_cast<std::size_t>(normalize_axis(op, attrs.axis, g.rank()));
  int64_t sum = 0;
  for (std::size_t k = 1; k < in.size(); ++k) {
    const TensorShape& l = in[k].shape;
    if (!l.has_rank()) {
      sum = None;
      continue;
    }
    bool ok = l.rank() == g.rank();
    for (std::size_t i = 0; ok && i < l.dims().size(); ++i)
      ok = i == axis || l.dims()[i] == None || g.dims()[i] == None || l.dims()[i] == g.dims()[i];
    if (!ok)
      op_error<InvalidArgumentError>(op, "piece ", k - 1, " has shape ", l.to_string(),
                                     " but the split tensor has shape ", g.to_string(),
                                     "; expected equal ranks and equal dims except axis ", axis);
    const int64_t d = l.dims()[axis];
    sum = (sum == None || d == None) ? None : sum + d;
  }
  if (sum != None && g.dims()[axis] != None && sum != g.dims()[axis])
    op_error<InvalidArgumentError>(op, "the pieces add up to ", sum, " along axis ", axis,
                                   " but the split tensor has ", g.dims()[axis], " there (shape ",
                                   g.to_string(), "); expected sizes that add up");
  return out;
}
void kernel_split_like(const std::vector<Tensor>& in, const OpAttrs& op_attrs, std::vector<Tensor>& out) {
  const AxisAttrs& attrs = op_attrs.get<AxisAttrs>();
  std::vector<ValueType> types;
  for (const Tensor& t : in) types.push_back(ValueType{t.impl()->dtype, t.impl()->shape});
  infer_split_like(types, attrs);
  split_copy(in[0], normalize_axis("split_like", attrs.axis, static_cast<int64_t>(dims_of(in[0]).size())), out);
}

// ---- split ----

// The pieces' shapes: `num` equal ones, or one per entry of `sizes` (one -1 takes the rest).
std::vector<ValueType> infer_split(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const SplitAttrs& a = op_attrs.get<SplitAttrs>();
  const char* op = "split";
  if (a.num < 0 || (a.num == 0 && a.sizes.empty()))
    op_error<InvalidArgumentError>(op, "expected a number of pieces >= 1 or a list of piece sizes, got ",
                                   a.num == 0 ? std::string("an empty size list") : std::to_string(a.num),
                                   "; pass e.g. tg::split(x, 2) or tg::split(x, {2, 3})");
  if (a.num > 0 && !a.sizes.empty())
    op_error<InvalidArgumentError>(op, "got both a number of pieces (", a.num, ") and piece sizes ",
                                   format_list(a.sizes), "; give one of them");
  // Every piece is a graph value: a count beyond this is a corrupt attribute, not a model.
  constexpr int64_t kMaxPieces = int64_t{1} << 20;
  if (a.num > kMaxPieces || static_cast<int64_t>(a.sizes.size()) > kMaxPieces)
    op_error<InvalidArgumentError>(op, "cannot make more than ", kMaxPieces, " pieces, got ",
                                   std::max<int64_t>(a.num, static_cast<int64_t>(a.sizes.size())),
                                   "; use tg::reshape or tg::gather for that many slices");
  int64_t infer_at = -1, known = 0;
  for (std::size_t i = 0; i < a.sizes.size(); ++i) {
    const int64_t s = a.sizes[i];
    if (s < -1)
      op_error<InvalidArgumentError>(op, "size ", i, " is ", s, " in ", format_list(a.sizes),
                                     "; expected sizes >= 0, or -1 (once) for the rest of the dimension");
    if (s == -1 && infer_at >= 0)
      op_error<InvalidArgumentError>(op, "at most one size may be -1, got ", format_list(a.sizes),
                                     "; give every other size explicitly");
    if (s == -1) infer_at = static_cast<int64_t>(i);
    else if (__builtin_add_overflow(known, s, &known))
      op_error<InvalidArgumentError>(op, "the sizes ", format_list(a.sizes), " overflow int64");
  }
  const std::size_t pieces = a.num > 0 ? static_cast<std::size_t>(a.num) : a.sizes.size();
  const TensorShape& s = in[0].shape;
  if (!s.has_rank()) return std::vector<ValueType>(pieces, ValueType{in[0].dtype, s});
  if (s.rank() == 0)
    op_error<InvalidArgumentError>(op, "cannot split a scalar (shape ()); expected rank >= 1");
  const auto axis = static_cast<std::size_t>(normalize_axis(op, a.axis, s.rank()));
  const int64_t d = s.dims()[axis];
  std::vector<int64_t> sizes = a.sizes;
  if (a.num > 0) {
    if (d != None && d % a.num != 0)
      op_error<InvalidArgumentError>(op, "dimension ", axis, " has size ", d, " (shape ", s.to_string(),
                                     "), which is not divisible into ", a.num, " equal pieces; pass a list of "
                                     "piece sizes instead");
    sizes.assign(pieces, d == None ? None : d / a.num);
  } else if (d != None) {
    if (infer_at >= 0 ? known > d : known != d)
      op_error<InvalidArgumentError>(op, "the sizes ", format_list(a.sizes), " add up to ", known,
                                     infer_at >= 0 ? " besides the -1, more than" : " but", " dimension ", axis,
                                     " has size ", d, " (shape ", s.to_string(), "); expected sizes that add up to ", d);
    if (infer_at >= 0) sizes[static_cast<std::size_t>(infer_at)] = d - known;
  } else if (infer_at >= 0) {
    sizes[static_cast<std::size_t>(infer_at)] = None;  // the rest of a None dim
  }
  std::vector<ValueType> out;
  for (int64_t size : sizes) {
    std::vector<int64_t> dims = s.dims();
    dims[axis] = size;
    out.push_back(ValueType{in[0].dtype, TensorShape(dims)});
  }
  return out;
}
void kernel_split(const std::vector<Tensor>& in, const OpAttrs& op_attrs, std::vector<Tensor>& out) {
  infer_split({ValueType{in[0].impl()->dtype, in[0].impl()->shape}}, op_attrs);  // sizes against a None dim
  split_copy(in[0], normalize_axis("split", op_attrs.get<SplitAttrs>().axis,
                                   static_cast<int64_t>(dims_of(in[0]).size())), out);
}

// ---- fill and broadcast_to: the shape is a 1-D int tensor ----

}  // namespace

TensorShape described_shape(const char* op, const ValueType& t, const ShapeValueAttrs& a) {
  if (t.dtype != DType::Int32 && t.dtype != DType::Int64)
    op_error<TypeError>(op, "the shape must be an int32 or int64 tensor, got ", describe(t),
                        "; pass e.g. tg::shape(x) or tg::constant({2, 3})");
  if (t.shape.has_rank() && t.shape.rank() != 1)
    op_error<InvalidArgumentError>(op, "the shape must be a 1-D tensor (one size per dimension), got ",
                                   describe(t), "; tg::stack scalar sizes into a vector");
  const int64_t length = t.shape.has_rank() ? t.shape.dims()[0] : None;
  // One dim per element: the rank limit comes before anything is allocated per dim (a traced
  // spec, or a .tgx file, may say (2^40,)).
  const int64_t rank = a.known ? static_cast<int64_t>(a.dims.size()) : length;
  if (rank != None && rank > static_cast<int64_t>(kMaxRank))
    op_error<InvalidArgumentError>(op, "the shape tensor has ", rank, " elements, so the result would have rank ",
                                   rank, "; at most ", kMaxRank, " dimensions are supported (TensorFlow's limit "
                                   "too): pass a shape of at most ", kMaxRank, " sizes");
  if (a.known) {
    if (length != None && length != static_cast<int64_t>(a.dims.size()))
      op_error<InvalidArgumentError>(op, "the shape tensor has ", length, " elements but its value was known as ",
                                     format_list(a.dims));
    return TensorShape(a.dims);
  }
  if (length == None) return TensorShape::unknown_rank();
  return TensorShape(std::vector<int64_t>(static_cast<std::size_t>(length), None));
}

std::vector<int64_t> shape_values(const char* op, const Tensor& shape, const ShapeValueAttrs& a) {
  const TensorImpl& impl = *shape.impl();
  described_shape(op, ValueType{impl.dtype, impl.shape}, a);  // traced with an unknown rank
  const int64_t n = impl.shape.dims()[0];
  std::vector<int64_t> dims(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    dims[static_cast<std::size_t>(i)] = impl.dtype == DType::Int64 ? impl.data<int64_t>()[i]
                                                                   : int64_t{impl.data<int32_t>()[i]};
  int64_t elements = 1;
  const bool empty = has_zero(dims);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0)
      op_error<InvalidArgumentError>(op, "dimension ", i, " of the shape ", format_list(dims),
                                     " is negative; sizes must be >= 0");
    if (!empty) elements = checked_mul(op, elements, dims[i], [&] { return "the shape " + format_list(dims); });
  }
  for (std::size_t i = 0; a.known && i < dims.size(); ++i)
    if (a.dims[i] != None && a.dims[i] != dims[i])
      op_error<InvalidArgumentError>(op, "the shape is ", format_list(dims), " at run time but was known as ",
                                     TensorShape(a.dims).to_string(), " when the graph was built");
  return dims;
}

namespace {

std::vector<ValueType> infer_fill(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const TensorShape out = described_shape("fill", in[0], attrs.get<ShapeValueAttrs>());
  if (in[1].shape.has_rank() && in[1].shape.rank() != 0)
    op_error<InvalidArgumentError>("fill", "expected a scalar (rank 0) value, got ", describe(in[1]));
  return {ValueType{in[1].dtype, out}};
}
void kernel_fill(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const std::vector<int64_t> dims = shape_values("fill", in[0], attrs.get<ShapeValueAttrs>());
  const TensorImpl& value = *in[1].impl();
  if (value.shape.rank() != 0)
    op_error<InvalidArgumentError>("fill", "expected a scalar (rank 0) value, got shape ", value.shape.to_string());
  Tensor result = allocate_tensor(value.dtype, TensorShape(dims));
  visit_dtype(value.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* y = data_of<T>(result);
    std::fill(y, y + result.impl()->shape.num_elements(), *value.data<T>());
  });
  out[0] = std::move(result);
}

// broadcast_to(x, shape): the target with x's known dims where the target's are unknown (x
// broadcasts only where its dim is 1 or equal to the target's).
TensorShape broadcast_to_shape(const TensorShape& x, const TensorShape& target) {
  if (!x.has_rank() || !target.has_rank()) return target;
  const auto& xd = x.dims();
  std::vector<int64_t> out = target.dims();
  const auto fail = [&] {
    op_error<InvalidArgumentError>("broadcast_to", "cannot broadcast shape ", x.to_string(), " to ",
                                   target.to_string(), "; each dim of x (aligned from the right) must be 1 "
                                   "or the target's, and x may not have more dims than the target");
  };
  if (xd.size() > out.size()) fail();
  for (std::size_t i = 0; i < xd.size(); ++i) {
    int64_t& o = out[out.size() - xd.size() + i];
    const int64_t d = xd[i];
    if (d == None || d == 1) continue;
    if (o == None) o = d;
    else if (o != d) fail();
  }
  return TensorShape(out);
}

std::vector<ValueType> infer_broadcast_to(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  return {ValueType{in[0].dtype, broadcast_to_shape(in[0].shape, described_shape("broadcast_to", in[1], attrs.get<ShapeValueAttrs>()))}};
}
void kernel_broadcast_to(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const TensorShape target(shape_values("broadcast_to", in[1], attrs.get<ShapeValueAttrs>()));
  const TensorShape& x = in[0].impl()->shape;
  const TensorShape checked = broadcast_to_shape(x, target);
  TG_CHECK(checked == target);
  out[0] = allocate_tensor(in[0].impl()->dtype, target);
  broadcast_copy(in[0], x.dims(), out[0]);
}

// ---- gradient rules ----

std::vector<Tensor> grad_reshape_like_input(const GradInputs& g) {
  return {reshape_like(g.grads[0], g.inputs[0])};
}
std::vector<Tensor> grad_transpose(const GradInputs& g) {
  const std::vector<int64_t>& perm = g.attrs.get<TransposeAttrs>().perm;
  if (perm.empty()) return {transpose(g.grads[0])};  // reversing is its own inverse
  std::vector<int> inverse(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) inverse[static_cast<std::size_t>(perm[i])] = static_cast<int>(i);
  return {transpose(g.grads[0], inverse)};
}
std::vector<Tensor> grad_concat(const GradInputs& g) {
  return split_like(g.grads[0], g.inputs, g.attrs.get<AxisAttrs>().axis);
}
// stack(xs, axis) == concat(expand_dims(x, axis) for each x, axis)
std::vector<Tensor> grad_stack(const GradInputs& g) {
  const int64_t axis = g.attrs.get<AxisAttrs>().axis;
  std::vector<Tensor> likes;
  for (const Tensor& x : g.inputs) likes.push_back(expand_dims(x, static_cast<int>(axis)));
  std::vector<Tensor> pieces = split_like(g.grads[0], likes, axis);
  for (std::size_t k = 0; k < pieces.size(); ++k) pieces[k] = reshape_like(pieces[k], g.inputs[k]);
  return pieces;
}
std::vector<Tensor> grad_index(const GradInputs& g) {
  return {pad_like(expand_dims(g.grads[0], 0), g.inputs[0], {g.attrs.get<IndexAttrs>().index})};
}
std::vector<Tensor> grad_reshape_like(const GradInputs& g) {
  return {reshape_like(g.grads[0], g.inputs[0]), Tensor()};
}
// fill's value is every element: its gradient is the sum of the incoming one
std::vector<Tensor> grad_fill(const GradInputs& g) { return {Tensor(), reduce_sum(g.grads[0])}; }
std::vector<Tensor> grad_broadcast_to(const GradInputs& g) { return {sum_to_like(g.grads[0], g.inputs[0]), Tensor()}; }
// The pieces joined again (a piece that did not reach the target brings zeros: GradInputs).
std::vector<Tensor> grad_split(const GradInputs& g) {
  return {concat(g.grads, static_cast<int>(g.attrs.get<SplitAttrs>().axis))};
}
std::vector<Tensor> grad_split_like(const GradInputs& g) {
  std::vector<Tensor> result(g.inputs.size());
  result[0] = concat(g.grads, static_cast<int>(g.attrs.get<AxisAttrs>().axis));
  return result;
}

}  // namespace

void register_shape_ops(OpDef* t) {
  set_op(t, OpId::Reshape, &infer_reshape, &kernel_reshape);
  set_op(t, OpId::Transpose, &infer_transpose, &kernel_transpose);
  set_op(t, OpId::ExpandDims, &infer_expand_dims, &kernel_expand_dims);
  set_op(t, OpId::Squeeze, &infer_squeeze, &kernel_squeeze);
  set_op(t, OpId::Concat, &infer_concat, &kernel_concat);
  set_op(t, OpId::Stack, &infer_stack, &kernel_stack);
  set_op(t, OpId::Index, &infer_index, &kernel_index);
  set_op(t, OpId::Shape, &infer_shape, &kernel_shape);
  set_op(t, OpId::Size, &infer_size, &kernel_size);
  set_op(t, OpId::ReshapeLike, &infer_reshape_like, &kernel_reshape_like);
  set_op(t, OpId::SplitLike, &infer_split_like, &kernel_split_like);
  set_op(t, OpId::Fill, &infer_fill, &kernel_fill);
  set_op(t, OpId::BroadcastTo, &infer_broadcast_to, &kernel_broadcast_to);
  set_op(t, OpId::Split, &infer_split, &kernel_split);
  set_grad(t, OpId::Reshape, &grad_reshape_like_input);
  set_grad(t, OpId::Transpose, &grad_transpose);
  set_grad(t, OpId::ExpandDims, &grad_reshape_like_input);
  set_grad(t, OpId::Squeeze, &grad_reshape_like_input);
  set_grad(t, OpId::Concat, &grad_concat);
  set_grad(t, OpId::Stack, &grad_stack);
  set_grad(t, OpId::Index, &grad_index);
  set_grad(t, OpId::ReshapeLike, &grad_reshape_like);
  set_grad(t, OpId::SplitLike, &grad_split_like);
  set_grad(t, OpId::Fill, &grad_fill);
  set_grad(t, OpId::BroadcastTo, &grad_broadcast_to);
  set_grad(t, OpId::Split, &grad_split);
}

}  // namespace detail

// ---- public front functions ----
namespace {
std::vector<int64_t> widen(const std::vector<int>& v) { return {v.begin(), v.end()}; }
}  // namespace

Tensor reshape(const Tensor& x, std::vector<int64_t> shape) {
  return detail::apply_op1(detail::OpId::Reshape, {x}, detail::ReshapeAttrs{std::move(shape)});
}

Tensor transpose(const Tensor& x, std::vector<int> perm) {
  return detail::apply_op1(detail::OpId::Transpose, {x}, detail::TransposeAttrs{widen(perm)});
}

Tensor expand_dims(const Tensor& x, int axis) {
  return detail::apply_op1(detail::OpId::ExpandDims, {x}, detail::AxisAttrs{axis});
}

Tensor squeeze(const Tensor& x, std::vector<int> axes) {
  return detail::apply_op1(detail::OpId::Squeeze, {x}, detail::SqueezeAttrs{widen(axes)});
}

Tensor concat(const std::vector<Tensor>& values, int axis) {
  return detail::apply_op1(detail::OpId::Concat, values, detail::AxisAttrs{axis});
}

Tensor stack(const std::vector<Tensor>& values, int axis) {
  return detail::apply_op1(detail::OpId::Stack, values, detail::AxisAttrs{axis});
}

namespace detail {
Tensor static_shape_tensor(const char* op, const TensorShape& shape) {
  if (!shape.is_fully_defined())
    op_error<InvalidArgumentError>(op, "expected a fully defined shape, got ", shape.to_string(),
                                   "; for sizes known only at run time pass the shape as a 1-D int tensor "
                                   "(e.g. built from tg::shape(x))");
  const auto& dims = shape.dims();
  return make_constant(dims.data(), static_cast<int64_t>(dims.size()), TensorShape{static_cast<int64_t>(dims.size())},
                       DType::Int64);
}

ShapeValueAttrs shape_value_of(const char* op, const Tensor& shape) {
  if (!shape.defined())
    op_error<ValueError>(op, "the shape is an empty tg::Tensor; pass e.g. tg::shape(x)");
  ShapeValueAttrs a;
  const TensorImpl& impl = *shape.impl();
  if (!impl.shape.has_rank() || impl.shape.rank() != 1 || (impl.dtype != DType::Int32 && impl.dtype != DType::Int64))
    return a;  // the shape rule explains a wrong dtype or rank
  // Eager: every size; traced: the sizes tracing knows (None for the rest), as TF's
  // constant_value_as_shape gives (None, 16) for stack({shape(x)[0], 16}).
  std::optional<std::vector<int64_t>> known = known_elements(shape);
  if (!known) return a;
  a.known = true;
  a.dims = std::move(*known);
  for (int64_t d : a.dims)
    if (d < 0 && !(impl.symbolic && d == None))
      op_error<InvalidArgumentError>(op, "the shape ", format_list(a.dims), " has a negative size; sizes must be >= 0");
  return a;
}

Tensor fill_from_shape_tensor(const Tensor& shape, const Tensor& value) {
  if (!value.defined()) op_error<ValueError>("fill", "the value is an empty tg::Tensor");
  return apply_op1(OpId::Fill, {shape, value}, shape_value_of("fill", shape));
}
Tensor zeros_from_shape_tensor(const Tensor& shape, DType dtype) {
  return fill_from_shape_tensor(shape, tg::zeros(TensorShape{}, dtype));
}
Tensor ones_from_shape_tensor(const Tensor& shape, DType dtype) {
  if (dtype == DType::String)
    op_error<TypeError>("ones", "a string tensor has no 'one'; use tg::fill(shape, \"text\")");
  return fill_from_shape_tensor(shape, tg::ones(TensorShape{}, dtype));
}
}  // namespace detail

Tensor broadcast_to(const Tensor& x, const Tensor& shape) {
  return detail::apply_op1(detail::OpId::BroadcastTo, {x, shape}, detail::shape_value_of("broadcast_to", shape));
}

std::vector<Tensor> split(const Tensor& x, std::vector<int64_t> size_splits, int axis) {
  return detail::apply_op(detail::OpId::Split, {x}, detail::SplitAttrs{0, std::move(size_splits), axis});
}

namespace detail {
std::vector<Tensor> split_evenly(const Tensor& x, int64_t num_splits, int axis) {
  if (num_splits < 1)
    op_error<InvalidArgumentError>("split", "expected a number of pieces >= 1, got ", num_splits,
                                   "; pass e.g. tg::split(x, 2) or a list of piece sizes");
  return apply_op(OpId::Split, {x}, SplitAttrs{num_splits, {}, axis});
}
}  // namespace detail

// unstack is split into size-1 pieces, each squeezed: the number of pieces must be known.
std::vector<Tensor> unstack(const Tensor& x, int axis) {
  const char* op = "unstack";
  if (!x.defined()) detail::op_error<ValueError>(op, "the input is an empty tg::Tensor");
  const TensorShape& s = detail::static_shape(x);
  if (!s.has_rank())
    detail::op_error<ValueError>(op, "cannot unstack a tensor of unknown rank: the number of results must be known "
                                 "while tracing; give the shape in the input signature");
  if (s.rank() == 0)
    detail::op_error<InvalidArgumentError>(op, "cannot unstack a scalar (shape ()); expected rank >= 1");
  const auto a = static_cast<std::size_t>(detail::normalize_axis(op, axis, s.rank()));
  const int64_t d = s.dims()[a];
  if (d == None)
    detail::op_error<ValueError>(op, "cannot unstack dimension ", a, " of shape ", s.to_string(),
                                 ": its size is None while tracing, and the number of results must be known; give "
                                 "that size in the input signature, or use tg::split / tg::gather");
  if (d == 0) return {};
  std::vector<Tensor> pieces = detail::split_evenly(x, d, axis);
  for (Tensor& p : pieces) p = squeeze(p, {static_cast<int>(a)});
  return pieces;
}

Tensor shape(const Tensor& x) { return detail::apply_op1(detail::OpId::Shape, {x}); }
Tensor size(const Tensor& x) { return detail::apply_op1(detail::OpId::Size, {x}); }

namespace detail {

Tensor reshape_like(const Tensor& x, const Tensor& like) {
  const TensorShape sx = detail::static_shape(x);
  if (sx.is_fully_defined() && sx == detail::static_shape(like)) return x;
  return apply_op1(OpId::ReshapeLike, {x, like});
}

std::vector<Tensor> split_like(const Tensor& g, const std::vector<Tensor>& likes, int64_t axis) {
  std::vector<Tensor> inputs{g};
  inputs.insert(inputs.end(), likes.begin(), likes.end());
  return apply_op(OpId::SplitLike, inputs, AxisAttrs{axis});
}

}  // namespace detail

// x[i]: the Index op (declared on Tensor, defined with the other shape ops).
Tensor Tensor::operator[](int64_t i) const {
  return detail::apply_op1(detail::OpId::Index, {*this}, detail::IndexAttrs{i});
}

}  // namespace tg
