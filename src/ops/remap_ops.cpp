// tile, pad and reverse: ops where output element (o_0, ..., o_r-1) is input element
// (m_0(o_0), ..., m_r-1(o_r-1)) for one index map per dim (or the pad value where a map says
// -1). One copy kernel serves all three, and one accumulating kernel serves their adjoints
// (tile_grad: the sum of the tiles; mirror_pad_grad: reflected borders added back). Value
// limits that depend on run-time dims (reflect padding) are checked in the kernels too.
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
#include "ops/remap.h"
#include "tracegraph/ops.h"

namespace tg {
namespace detail {
namespace {

const std::vector<int64_t>& dims_of(const Tensor& t) { return t.impl()->shape.dims(); }
ValueType type_of(const Tensor& t) { return ValueType{t.impl()->dtype, t.impl()->shape}; }

// A stretch of the last dim's map: out[out, out + len) reads src, src + step, ... (step +1, -1
// or 0), or the fill value when src is -1.
struct Run {
  int64_t out, len, src, step;
};

// The last dim's map cut into runs, so that rows copy (or reverse, or repeat) in bulk.
std::vector<Run> runs_of(const std::vector<int64_t>& map) {
  std::vector<Run> runs;
  const auto n = static_cast<int64_t>(map.size());
  for (int64_t t = 0; t < n;) {
    const int64_t src = map[static_cast<std::size_t>(t)];
    int64_t step = 1;
    if (src < 0) step = 0;
    else if (t + 1 < n && map[static_cast<std::size_t>(t + 1)] >= 0)
      step = std::clamp<int64_t>(map[static_cast<std::size_t>(t + 1)] - src, -1, 1);
    int64_t len = 1;
    while (t + len < n) {
      const int64_t next = map[static_cast<std::size_t>(t + len)];
      if (src < 0 ? next >= 0 : next != src + step * len) break;
      ++len;
    }
    runs.push_back({t, len, src, step});
    t += len;
  }
  return runs;
}

// Calls row(out_offset, src_offset) for each row (all dims but the last) of the output, where
// src_offset is the input row's offset, or -1 when an outer map says "fill"; rows [first, end)
// of them only when end >= 0.
template <class RowFn>
void for_each_mapped_row(const std::vector<int64_t>& in_dims, const std::vector<int64_t>& out_dims,
                         const std::vector<std::vector<int64_t>>& maps, RowFn row, int64_t first = 0,
                         int64_t end = -1) {
  const std::size_t r = out_dims.size();
  if (product(out_dims, 0, r) == 0) return;
  const std::vector<int64_t> strides = row_major_strides(in_dims);
  const int64_t row_len = out_dims[r - 1];
  std::vector<int64_t> idx(r - 1, 0);
  for (int64_t k = r - 1, rest = first; k-- > 0; rest /= out_dims[k]) idx[k] = rest % out_dims[k];
  for (int64_t out = first * row_len, left = end < 0 ? -1 : end - first; left != 0; out += row_len, --left) {
    int64_t src = 0;
    for (std::size_t k = 0; k + 1 < r && src >= 0; ++k) {
      const int64_t m = maps[k][static_cast<std::size_t>(idx[k])];
      src = m < 0 ? -1 : src + m * strides[k];
    }
    row(out, src);
    std::size_t k = r - 1;
    while (k-- > 0) {
      if (++idx[k] < out_dims[k]) break;
      idx[k] = 0;
    }
    if (k == static_cast<std::size_t>(-1)) return;
  }
}

// The number of leading dims that are remapped: the trailing dims that maps leave as they are
// (identity maps) are moved as blocks of `inner` elements, so that e.g. padding NHWC images
// copies whole pixels rather than one channel at a time. 0 when nothing is remapped.
std::size_t remapped_rank(const std::vector<int64_t>& in_dims, const std::vector<std::vector<int64_t>>& maps,
                          int64_t& inner) {
  inner = 1;
  std::size_t kept = in_dims.size();
  for (; kept > 0; --kept) {
    const std::vector<int64_t>& m = maps[kept - 1];
    bool identity = static_cast<int64_t>(m.size()) == in_dims[kept - 1];
    for (std::size_t o = 0; identity && o < m.size(); ++o) identity = m[o] == static_cast<int64_t>(o);
    if (!identity) break;
    inner *= in_dims[kept - 1];
  }
  return kept;
}

// y (out_dims) = x (in_dims) remapped by `maps`, `fill` where a map says -1.
template <class T>
void remap_copy(const T* x, const std::vector<int64_t>& in_dims, T* y, const std::vector<int64_t>& out_dims,
                const std::vector<std::vector<int64_t>>& maps, const T& fill) {
  int64_t inner = 1;
  const std::size_t kept = remapped_rank(in_dims, maps, inner);
  if (kept == 0) {
    std::copy_n(x, inner, y);
    return;
  }
  const std::vector<int64_t> in_k(in_dims.begin(), in_dims.begin() + static_cast<std::ptrdiff_t>(kept));
  const std::vector<int64_t> out_k(out_dims.begin(), out_dims.begin() + static_cast<std::ptrdiff_t>(kept));
  const std::vector<Run> runs = runs_of(maps[kept - 1]);
  const int64_t row_len = out_k.back() * inner;
  // Offsets from for_each_mapped_row count blocks of `inner` elements.
  auto copy_row = [&](int64_t out, int64_t src) {
    T* yrow = y + out * inner;
    if (src < 0) {
      std::fill_n(yrow, row_len, fill);
      return;
    }
    const T* xrow = x + src * inner;
    for (const Run& run : runs) {
      T* d = yrow + run.out * inner;
      if (run.src < 0) std::fill_n(d, run.len * inner, fill);
      else if (run.step == 1) std::copy_n(xrow + run.src * inner, run.len * inner, d);
      else if (inner == 1 && run.step == 0) std::fill_n(d, run.len, xrow[run.src]);
      else if (inner == 1)
        for (int64_t i = 0; i < run.len; ++i) d[i] = xrow[run.src - i];
      else
        for (int64_t i = 0; i < run.len; ++i) std::copy_n(xrow + (run.src + run.step * i) * inner, inner, d + i * inner);
    }
  };
  // A large copy by rows on the pool (each row is written once, by one thread: the same result
  // on any split). Memory-bound, it gains from a second core's bandwidth: padding mobilenet_v2's
  // 112 x 112 x 96 activations before its stride-2 depthwise layers was ~10% of its batch-32 run.
  const int64_t rows = product(out_k, 0, kept - 1);
  if (rows > 1 && rows * row_len >= 2 * kParallelMinElements && num_threads() > 1) {
    parallel_for(rows, std::max<int64_t>(1, kParallelMinElements / row_len), [&](int64_t r0, int64_t r1) {
      for_each_mapped_row(in_k, out_k, maps, copy_row, r0, r1);
    });
    return;
  }
  for_each_mapped_row(in_k, out_k, maps, copy_row);
}

// The adjoint of remap_copy: y (in_dims, zeroed here) += g (out_dims) at the mapped positions.
template <class T>
void remap_accumulate(const T* g, const std::vector<int64_t>& out_dims, T* y, const std::vector<int64_t>& in_dims,
                      const std::vector<std::vector<int64_t>>& maps) {
  int64_t inner = 1;
  const std::size_t kept = remapped_rank(in_dims, maps, inner);
  if (kept == 0) {
    std::copy_n(g, inner, y);
    return;
  }
  std::fill_n(y, product(in_dims, 0, in_dims.size()), T{});
  const std::vector<int64_t> in_k(in_dims.begin(), in_dims.begin() + static_cast<std::ptrdiff_t>(kept));
  const std::vector<int64_t> out_k(out_dims.begin(), out_dims.begin() + static_cast<std::ptrdiff_t>(kept));
  const std::vector<Run> runs = runs_of(maps[kept - 1]);
  for_each_mapped_row(in_k, out_k, maps, [&](int64_t out, int64_t src) {
    if (src < 0) return;
    const T* grow = g + out * inner;
    T* yrow = y + src * inner;
    for (const Run& run : runs) {
      if (run.src < 0) continue;
      const T* s = grow + run.out * inner;
      if (run.step == 1) {
        T* d = yrow + run.src * inner;
        for (int64_t i = 0; i < run.len * inner; ++i) d[i] += s[i];
      } else {
        for (int64_t i = 0; i < run.len; ++i) {
          T* d = yrow + (run.src + run.step * i) * inner;
          const T* b = s + i * inner;
          for (int64_t k = 0; k < inner; ++k) d[k] += b[k];
        }
      }
    }
  });
}

// Runs the copy kernel over out[0] for any dtype.
void run_remap_copy(const Tensor& x, Tensor& out, const std::vector<std::vector<int64_t>>& maps,
                    double fill_value = 0.0) {
  visit_dtype(x.impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    T fill{};
    if constexpr (std::is_arithmetic_v<T>) fill = static_cast<T>(fill_value);
    remap_copy<T>(data_of<T>(x), dims_of(x), data_of<T>(out), dims_of(out), maps, fill);
  });
}
void run_remap_accumulate(const Tensor& g, Tensor& out, const std::vector<std::vector<int64_t>>& maps) {
  visit_dtype(g.impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>)
      remap_accumulate<T>(data_of<T>(g), dims_of(g), data_of<T>(out), dims_of(out), maps);
  });
}

// The index maps are sized by the dims, not by the elements: an empty tensor's other dims may be
// huge (pad of a (0, 3) tensor by 2^40), so the kernels build no map when nothing is copied, and
// an adjoint over an empty gradient only zeroes its result. Returns whether that was all.
bool nothing_to_remap(const Tensor& from, Tensor& to) {
  const int64_t n = to.impl()->shape.num_elements();
  if (n == 0) return true;
  if (from.impl()->shape.num_elements() != 0) return false;
  visit_dtype(to.impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    std::fill_n(data_of<T>(to), n, T{});
  });
  return true;
}

int64_t checked_mul(const char* op, int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    op_error<InvalidArgumentError>(op, "the output has more elements than int64 can count (", a, " * ", b,
                                   "); use smaller sizes");
  return r;
}

// The gradient helpers take float gradients only (what a tape hands them).
void require_summable(const char* op, const ValueType& g) {
  require_dtype(op, g, {DType::Float32, DType::Float64, DType::Int32, DType::Int64}, "gradient");
}

// ---- tile ----

TensorShape tile_shape(const TensorShape& in, const std::vector<int64_t>& multiples) {
  const char* op = "tile";
  if (in.has_rank() && static_cast<int64_t>(multiples.size()) != in.rank())
    op_error<InvalidArgumentError>(op, "multiples ", format_list(multiples), " has ", multiples.size(),
                                   " entries but the input has rank ", in.rank(), " (shape ", in.to_string(),
                                   "); give one multiple per dimension");
  std::vector<int64_t> dims(multiples.size(), None);
  for (std::size_t i = 0; i < multiples.size(); ++i) {
    const int64_t m = multiples[i];
    if (m < 0)
      op_error<InvalidArgumentError>(op, "multiples[", i, "] = ", m, " is negative in ", format_list(multiples),
                                     "; expected copy counts >= 0");
    const int64_t d = in.has_rank() ? in.dims()[i] : None;
    dims[i] = m == 0 ? 0 : d == None ? None : checked_mul(op, d, m);
  }
  // An output with a zero dim holds no element however large its other dims: (2^40, 2^40, 0).
  if (std::find(dims.begin(), dims.end(), 0) == dims.end()) {
    int64_t total = 1;
    for (int64_t d : dims)
      if (d != None) total = checked_mul(op, total, d);
  }
  return TensorShape(dims);
}

// Output index o of dim k reads o mod d.
std::vector<std::vector<int64_t>> tile_maps(const std::vector<int64_t>& in_dims, const std::vector<int64_t>& out_dims) {
  std::vector<std::vector<int64_t>> maps(in_dims.size());
  for (std::size_t k = 0; k < maps.size(); ++k) {
    maps[k].resize(static_cast<std::size_t>(out_dims[k]));
    for (int64_t o = 0; o < out_dims[k]; ++o) maps[k][static_cast<std::size_t>(o)] = o % in_dims[k];
  }
  return maps;
}

std::vector<ValueType> infer_tile(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  return {ValueType{in[0].dtype, tile_shape(in[0].shape, attrs.get<TileAttrs>().multiples)}};
}
void kernel_tile(const std::vector<Tensor>& in, const OpAttrs&, std::vector<Tensor>& out) {
  if (out[0].impl()->shape.num_elements() == 0) return;
  run_remap_copy(in[0], out[0], tile_maps(dims_of(in[0]), dims_of(out[0])));
}

// tile_grad(g, like): g has like's shape tiled; the result sums the tiles into like's shape.
std::vector<ValueType> infer_tile_grad(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const char* op = "tile_grad";
  require_summable(op, in[0]);
  const TensorShape want = tile_shape(in[1].shape, attrs.get<TileAttrs>().multiples);
  if (in[0].shape.has_rank() && !in[0].shape.is_compatible_with(want))
    op_error<InvalidArgumentError>(op, "the gradient has shape ", in[0].shape.to_string(), " but tiling ",
                                   in[1].shape.to_string(), " by ", format_list(attrs.get<TileAttrs>().multiples),
                                   " gives ", want.to_string(), "; expected that shape");
  return {ValueType{in[0].dtype, in[1].shape}};
}
void kernel_tile_grad(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  infer_tile_grad({type_of(in[0]), type_of(in[1])}, attrs);
  if (nothing_to_remap(in[0], out[0])) return;
  run_remap_accumulate(in[0], out[0], tile_maps(dims_of(in[1]), dims_of(in[0])));
}

// ---- pad ----

const char* mode_name(int64_t mode) {
  return mode == 1 ? "REFLECT" : mode == 2 ? "SYMMETRIC" : "CONSTANT";
}

// Checks the attributes against the input's shape (None dims pass) and returns the output shape.
TensorShape pad_shape(const char* op, const TensorShape& in, const PadAttrs& a) {
  if (a.mode < 0 || a.mode > 2)
    op_error<InvalidArgumentError>(op, "mode ", a.mode, " is not a tg::PadMode; expected PadMode::Constant, "
                                   "PadMode::Reflect or PadMode::Symmetric");
  if (a.paddings.size() % 2 != 0)
    op_error<InvalidArgumentError>(op, "paddings ", format_list(a.paddings), " has an odd number of entries; "
                                   "expected a (before, after) pair per dimension");
  const std::size_t r = a.paddings.size() / 2;
  if (in.has_rank() && static_cast<int64_t>(r) != in.rank())
    op_error<InvalidArgumentError>(op, "paddings has ", r, " (before, after) pairs but the input has rank ",
                                   in.rank(), " (shape ", in.to_string(), "); give one pair per dimension");
  const int64_t offset = a.mode == 1 ? 1 : 0;  // reflect leaves out the edge, symmetric repeats it
  std::vector<int64_t> dims(r, None);
  for (std::size_t i = 0; i < r; ++i) {
    const int64_t before = a.paddings[2 * i], after = a.paddings[2 * i + 1];
    if (before < 0 || after < 0)
      op_error<InvalidArgumentError>(op, "paddings for dimension ", i, " are (", before, ", ", after,
                                     "); expected sizes >= 0");
    const int64_t d = in.has_rank() ? in.dims()[i] : None;
    if (d == None) continue;
    if (a.mode != 0 && (before > d - offset || after > d - offset))
      op_error<InvalidArgumentError>(op, mode_name(a.mode), " padding of dimension ", i, " by (", before, ", ",
                                     after, ") needs at most ", d - offset, " on each side: the dimension has size ",
                                     d, " (shape ", in.to_string(), ")",
                                     a.mode == 1 ? ", and a reflection leaves out the edge element" : "",
                                     "; use smaller paddings or PadMode::Constant");
    int64_t total = 0;
    if (__builtin_add_overflow(d, before, &total) || __builtin_add_overflow(total, after, &total))
      op_error<InvalidArgumentError>(op, "padding dimension ", i, " of size ", d, " by (", before, ", ", after,
                                     ") overflows int64");
    dims[i] = total;
  }
  return TensorShape(dims);
}

// Output index o of a dim reads the input index it mirrors (or -1: the constant).
std::vector<std::vector<int64_t>> pad_maps(const std::vector<int64_t>& in_dims, const PadAttrs& a) {
  std::vector<std::vector<int64_t>> maps(in_dims.size());
  for (std::size_t k = 0; k < maps.size(); ++k) {
    const int64_t d = in_dims[k], before = a.paddings[2 * k], after = a.paddings[2 * k + 1];
    maps[k].resize(static_cast<std::size_t>(before + d + after));
    for (int64_t o = 0; o < before + d + after; ++o) {
      const int64_t i = o - before;
      int64_t m = i;
      if (i < 0 || i >= d) {
        if (a.mode == 0) m = -1;
        else if (a.mode == 1) m = i < 0 ? -i : 2 * (d - 1) - i;
        else m = i < 0 ? -i - 1 : 2 * d - 1 - i;
      }
      maps[k][static_cast<std::size_t>(o)] = m;
    }
  }
  return maps;
}

// The constant in x's dtype: integers must hold it exactly, strings pad with "" only.
void check_constant(const char* op, DType dtype, double v) {
  if (dtype == DType::String) {
    if (v != 0.0)
      op_error<InvalidArgumentError>(op, "a string tensor pads with \"\" only; got constant_values ", v);
    return;
  }
  if (dtype == DType::Int32 || dtype == DType::Int64) {
    const double lo = dtype == DType::Int32 ? -2147483648.0 : -9223372036854775808.0;
    if (!(v == std::floor(v)) || v < lo || v >= -lo)
      op_error<InvalidArgumentError>(op, "constant_values ", v, " cannot be represented exactly as ",
                                     to_string(dtype), "; use an integral value in range");
  }
}

std::vector<ValueType> infer_pad(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const PadAttrs& a = op_attrs.get<PadAttrs>();
  if (a.mode == 0) check_constant("pad", in[0].dtype, a.constant_value);
  return {ValueType{in[0].dtype, pad_shape("pad", in[0].shape, a)}};
}
void kernel_pad(const std::vector<Tensor>& in, const OpAttrs& op_attrs, std::vector<Tensor>& out) {
  const PadAttrs& a = op_attrs.get<PadAttrs>();
  pad_shape("pad", in[0].impl()->shape, a);  // the reflect limits on dims that were None
  if (out[0].impl()->shape.num_elements() == 0) return;
  double fill = a.constant_value;
  if (in[0].impl()->dtype == DType::Float32 && std::isfinite(fill) &&
      std::fabs(fill) > std::numeric_limits<float>::max())
    fill = fill > 0 ? HUGE_VAL : -HUGE_VAL;  // a C++ conversion would be undefined
  run_remap_copy(in[0], out[0], pad_maps(dims_of(in[0]), a), fill);
}

// mirror_pad_grad(g, like): g has the padded shape of like; the border is added back onto the
// elements it mirrors (TF's MirrorPadGrad).
std::vector<ValueType> infer_mirror_pad_grad(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const char* op = "mirror_pad_grad";
  require_summable(op, in[0]);
  const TensorShape want = pad_shape(op, in[1].shape, op_attrs.get<PadAttrs>());
  if (in[0].shape.has_rank() && !in[0].shape.is_compatible_with(want))
    op_error<InvalidArgumentError>(op, "the gradient has shape ", in[0].shape.to_string(), " but padding ",
                                   in[1].shape.to_string(), " gives ", want.to_string(), "; expected that shape");
  return {ValueType{in[0].dtype, in[1].shape}};
}
void kernel_mirror_pad_grad(const std::vector<Tensor>& in, const OpAttrs& op_attrs, std::vector<Tensor>& out) {
  infer_mirror_pad_grad({type_of(in[0]), type_of(in[1])}, op_attrs);
  if (nothing_to_remap(in[0], out[0])) return;
  run_remap_accumulate(in[0], out[0], pad_maps(dims_of(in[1]), op_attrs.get<PadAttrs>()));
}

// ---- reverse ----

// Which dims are reversed; empty when the rank is unknown.
std::vector<bool> reversed_dims(const std::vector<int64_t>& axes, const TensorShape& in) {
  const char* op = "reverse";
  if (!in.has_rank()) return {};
  std::vector<bool> rev(static_cast<std::size_t>(in.rank()), false);
  for (int64_t a : axes) {
    const auto k = static_cast<std::size_t>(normalize_axis(op, a, in.rank()));
    if (rev[k])
      op_error<InvalidArgumentError>(op, "axes ", format_list(axes), " name dimension ", k,
                                     " more than once; list each dimension to reverse once");
    rev[k] = true;
  }
  return rev;
}

std::vector<ValueType> infer_reverse(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  reversed_dims(attrs.get<ReverseAttrs>().axes, in[0].shape);
  return {in[0]};
}
void kernel_reverse(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const std::vector<bool> rev = reversed_dims(attrs.get<ReverseAttrs>().axes, in[0].impl()->shape);
  if (out[0].impl()->shape.num_elements() == 0) return;
  const auto& d = dims_of(in[0]);
  std::vector<std::vector<int64_t>> maps(d.size());
  for (std::size_t k = 0; k < d.size(); ++k) {
    maps[k].resize(static_cast<std::size_t>(d[k]));
    for (int64_t o = 0; o < d[k]; ++o) maps[k][static_cast<std::size_t>(o)] = rev[k] ? d[k] - 1 - o : o;
  }
  run_remap_copy(in[0], out[0], maps);
}

// ---- gradient rules ----

std::vector<Tensor> grad_tile(const GradInputs& g) {
  return {tile_grad(g.grads[0], g.inputs[0], g.attrs.get<TileAttrs>().multiples)};
}
std::vector<Tensor> grad_tile_grad(const GradInputs& g) {
  return {tile(g.grads[0], g.attrs.get<TileAttrs>().multiples), Tensor()};
}
// Constant padding: the block the input fills; reflect / symmetric: the mirrored border too.
std::vector<Tensor> grad_pad(const GradInputs& g) {
  const PadAttrs& a = g.attrs.get<PadAttrs>();
  if (a.mode != 0) return {mirror_pad_grad(g.grads[0], g.inputs[0], a)};
  std::vector<int64_t> begin;
  for (std::size_t i = 0; i < a.paddings.size(); i += 2) begin.push_back(a.paddings[i]);
  return {slice_like(g.grads[0], g.inputs[0], begin)};
}
// mirror_pad_grad is linear in g, and its adjoint is the padding itself.
std::vector<Tensor> grad_mirror_pad_grad(const GradInputs& g) {
  return {apply_op1(OpId::Pad, {g.grads[0]}, g.attrs.get<PadAttrs>()), Tensor()};
}
std::vector<Tensor> grad_reverse(const GradInputs& g) {
  return {apply_op1(OpId::Reverse, {g.grads[0]}, g.attrs)};
}

}  // namespace

Tensor tile_grad(const Tensor& g, const Tensor& like, const std::vector<int64_t>& multiples) {
  return apply_op1(OpId::TileGrad, {g, like}, TileAttrs{multiples});
}
Tensor mirror_pad_grad(const Tensor& g, const Tensor& like, const PadAttrs& attrs) {
  return apply_op1(OpId::MirrorPadGrad, {g, like}, attrs);
}

void register_remap_ops(OpDef* t) {
  set_op(t, OpId::Tile, &infer_tile, &kernel_tile);
  set_op(t, OpId::TileGrad, &infer_tile_grad, &kernel_tile_grad);
  set_op(t, OpId::Pad, &infer_pad, &kernel_pad);
  set_op(t, OpId::MirrorPadGrad, &infer_mirror_pad_grad, &kernel_mirror_pad_grad);
  set_op(t, OpId::Reverse, &infer_reverse, &kernel_reverse);
  set_grad(t, OpId::Tile, &grad_tile);
  set_grad(t, OpId::TileGrad, &grad_tile_grad);
  set_grad(t, OpId::Pad, &grad_pad);
  set_grad(t, OpId::MirrorPadGrad, &grad_mirror_pad_grad);
  set_grad(t, OpId::Reverse, &grad_reverse);
}

}  // namespace detail

// ---- public front functions ----

Tensor tile(const Tensor& x, std::vector<int64_t> multiples) {
  return detail::apply_op1(detail::OpId::Tile, {x}, detail::TileAttrs{std::move(multiples)});
}

Tensor pad(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& paddings, PadMode mode,
           double constant_values) {
  detail::PadAttrs a;
  for (const auto& [before, after] : paddings) {
    a.paddings.push_back(before);
    a.paddings.push_back(after);
  }
  a.mode = static_cast<int64_t>(mode);
  a.constant_value = constant_values;
  return detail::apply_op1(detail::OpId::Pad, {x}, a);
}

Tensor reverse(const Tensor& x, std::vector<int64_t> axes) {
  return detail::apply_op1(detail::OpId::Reverse, {x}, detail::ReverseAttrs{std::move(axes)});
}

}  // namespace tg
