// Math ops that are not one-element functors: the scans cumsum / cumprod, linspace, and the
// composites clip_by_value, reduce_logsumexp and l2_normalize (built from existing ops exactly
// as TensorFlow builds them in Python, so their gradients are those of their parts).
#include <algorithm>
#include <cstring>
#include <limits>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "core/thread_pool.h"
#include "ops/broadcast.h"
#include "kernels/elementwise_functors.h"
#include "ops/grad_helpers.h"
#include "ops/runtime_shape_checks.h"
#include "tracegraph/ops.h"

namespace tg {
namespace detail {
namespace {

// ---- cumsum / cumprod ----

template <bool kProd>
constexpr const char* scan_name() { return kProd ? "cumprod" : "cumsum"; }

template <bool kProd>
std::vector<ValueType> infer_scan(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const char* op = scan_name<kProd>();
  require_dtype(op, in[0], {DType::Float32, DType::Float64, DType::Int32, DType::Int64});
  const TensorShape& s = in[0].shape;
  if (s.has_rank()) {
    if (s.rank() == 0)
      op_error<InvalidArgumentError>(op, "expected a tensor of rank >= 1 to scan along an axis, got a "
                                     "scalar; reshape it to (1,) first");
    normalize_axis(op, attrs.get<ScanAttrs>().axis, s.rank());
  }
  return {in[0]};
}

// The tensor as [outer, n, inner] around the scanned axis: every (outer, column) pair is one
// independent scan of n elements, `inner` apart.
struct ScanView {
  int64_t outer = 1, n = 1, inner = 1;
};

// The view of a nonempty tensor's dims, whose products fit int64 since the tensor exists. The
// kernels return on zero elements first: an empty shape's other dims may overflow when
// multiplied out ((2^40, 2^40, 0) is legal), and there is nothing to scan.
ScanView scan_view(const std::vector<int64_t>& dims, std::size_t axis) {
  ScanView v;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i < axis) v.outer *= dims[i];
    else if (i == axis) v.n = dims[i];
    else v.inner *= dims[i];
  }
  return v;
}

// Columns per unit of parallel work: whole rows of this many elements stay contiguous, so the
// row-at-a-time loop below vectorises across columns.
constexpr int64_t kScanColumns = 1024;

// Scans columns [c0, c1) of one outer block, row by row in scan order: a row is combined with
// the previous result row (exclusive: the previous input row into the previous result), so the
// inner loop runs over contiguous columns. Accumulates in T, as TF's scan does.
template <bool kProd, class T>
void scan_block(const T* x, T* y, const ScanView& v, int64_t c0, int64_t c1, bool exclusive,
                bool reverse) {
  using Combine = std::conditional_t<kProd, MulF, AddF>;
  const Combine f{};
  const T init = kProd ? T(1) : T(0);
  const int64_t inner = v.inner, width = c1 - c0;
  for (int64_t k = 0; k < v.n; ++k) {
    const int64_t row = reverse ? v.n - 1 - k : k;
    const int64_t prev_row = reverse ? row + 1 : row - 1;
    T* yr = y + row * inner + c0;
    const T* xr = x + row * inner + c0;
    if (k == 0) {
      if (exclusive) std::fill(yr, yr + width, init);
      else std::copy(xr, xr + width, yr);
      continue;
    }
    const T* yp = y + prev_row * inner + c0;
    const T* xs = exclusive ? x + prev_row * inner + c0 : xr;
    for (int64_t i = 0; i < width; ++i) yr[i] = f(yp[i], xs[i]);
  }
}

// One contiguous scan (inner == 1): a running accumulator.
template <bool kProd, class T>
void scan_line(const T* x, T* y, int64_t n, bool exclusive, bool reverse) {
  using Combine = std::conditional_t<kProd, MulF, AddF>;
  const Combine f{};
  T acc = kProd ? T(1) : T(0);
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = reverse ? n - 1 - k : k;
    if (exclusive) {
      y[i] = acc;
      acc = f(acc, x[i]);
    } else {
      acc = f(acc, x[i]);
      y[i] = acc;
    }
  }
}

// Splits a scan over the [outer, n, inner] view across the pool: `line(at)` for each outer block
// when inner is 1 (its n elements are contiguous from element `at`), else `block(at, c0, c1)`
// for each (outer block, chunk of kScanColumns columns) pair, units independent of each other.
template <class Line, class Block>
void for_each_scan_part(const ScanView& v, const Line& line, const Block& block) {
  const int64_t stride = v.n * v.inner;
  if (v.inner == 1) {
    parallel_for(v.outer, std::max<int64_t>(1, kParallelMinElements / v.n), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) line(o * stride);
    });
    return;
  }
  const int64_t chunks = (v.inner + kScanColumns - 1) / kScanColumns;
  const int64_t unit = v.n * std::min(v.inner, kScanColumns);
  parallel_for(v.outer * chunks, std::max<int64_t>(1, kParallelMinElements / unit), [&](int64_t b, int64_t e) {
    for (int64_t u = b; u < e; ++u) {
      const int64_t o = u / chunks, c0 = (u % chunks) * kScanColumns;
      block(o * stride, c0, std::min(v.inner, c0 + kScanColumns));
    }
  });
}

template <bool kProd>
void kernel_scan(const std::vector<Tensor>& in, const OpAttrs& op_attrs, std::vector<Tensor>& out) {
  const ScanAttrs& attrs = op_attrs.get<ScanAttrs>();
  const auto& dims = in[0].impl()->shape.dims();
  const auto axis = static_cast<std::size_t>(
      normalize_axis(scan_name<kProd>(), attrs.axis, static_cast<int64_t>(dims.size())));
  if (in[0].impl()->shape.num_elements() == 0) return;
  const ScanView v = scan_view(dims, axis);
  visit_dtype(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      const T* x = data_of<T>(in[0]);
      T* y = data_of<T>(out[0]);
      for_each_scan_part(
          v, [&](int64_t at) { scan_line<kProd>(x + at, y + at, v.n, attrs.exclusive, attrs.reverse); },
          [&](int64_t at, int64_t c0, int64_t c1) {
            scan_block<kProd>(x + at, y + at, v, c0, c1, attrs.exclusive, attrs.reverse);
          });
    }
  });
}

// The gradient of a sum over the elements each result reads: the same scan the other way.
std::vector<Tensor> grad_cumsum(const GradInputs& g) {
  const ScanAttrs& a = g.attrs.get<ScanAttrs>();
  return {cumsum(g.grads[0], static_cast<int>(a.axis), a.exclusive, !a.reverse)};
}

// ---- affine_scan: the scan of h -> a h + b, that cumprod's gradient is written with ----
//
// In scan order, inclusive: h_k = a_k h_(k-1) + b_k from h = 0; exclusive: result k is the
// inclusive h_(k-1), 0 first. Its gradient is affine scans, products and sums again, none of
// them a division, so every order of derivative of cumprod is exact where x holds zeros.

Tensor affine_scan(const Tensor& a, const Tensor& b, int64_t axis, bool exclusive, bool reverse) {
  return apply_op1(OpId::AffineScan, {a, b}, ScanAttrs{axis, exclusive, reverse});
}

std::vector<ValueType> infer_affine_scan(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const char* op = "affine_scan";
  require_dtype(op, in[0], {DType::Float32, DType::Float64}, "a");
  require_same_dtype(op, in);
  const TensorShape& sa = in[0].shape;
  const TensorShape& sb = in[1].shape;
  if (!sa.is_compatible_with(sb))
    op_error<InvalidArgumentError>(op, "expected a and b of one shape, got ", sa.to_string(), " and ",
                                   sb.to_string(), "; broadcast them to one shape first");
  // The result has every dim either input knows.
  TensorShape out = sa.has_rank() ? sa.none_aware() : sb.none_aware();
  if (sa.has_rank() && sb.has_rank()) {
    std::vector<int64_t> dims = out.dims();
    const std::vector<int64_t> other = sb.none_aware().dims();
    for (std::size_t i = 0; i < dims.size(); ++i)
      if (dims[i] == None) dims[i] = other[i];
    out = TensorShape(dims);
  }
  if (out.has_rank()) {
    if (out.rank() == 0)
      op_error<InvalidArgumentError>(op, "expected tensors of rank >= 1 to scan along an axis, got scalars");
    normalize_axis(op, attrs.get<ScanAttrs>().axis, out.rank());
  }
  return {ValueType{in[0].dtype, out}};
}

// Columns [c0, c1) of one outer block, row by row in scan order (as scan_block).
template <class T>
void affine_block(const T* a, const T* b, T* y, const ScanView& v, int64_t c0, int64_t c1, bool exclusive,
                  bool reverse) {
  const int64_t inner = v.inner, width = c1 - c0;
  for (int64_t k = 0; k < v.n; ++k) {
    const int64_t row = reverse ? v.n - 1 - k : k;
    const int64_t prev_row = reverse ? row + 1 : row - 1;
    T* yr = y + row * inner + c0;
    if (k == 0) {
      if (exclusive) std::fill(yr, yr + width, T(0));
      else std::copy(b + row * inner + c0, b + row * inner + c0 + width, yr);
      continue;
    }
    const T* yp = y + prev_row * inner + c0;
    // Exclusive: this row's result is the previous row's inclusive one.
    const int64_t src = (exclusive ? prev_row : row) * inner + c0;
    const T* as = a + src;
    const T* bs = b + src;
    for (int64_t i = 0; i < width; ++i) yr[i] = as[i] * yp[i] + bs[i];
  }
}

template <class T>
void affine_line(const T* a, const T* b, T* y, int64_t n, bool exclusive, bool reverse) {
  T h = T(0);
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = reverse ? n - 1 - k : k;
    if (exclusive) {
      y[i] = h;
      h = a[i] * h + b[i];
    } else {
      h = a[i] * h + b[i];
      y[i] = h;
    }
  }
}

void kernel_affine_scan(const std::vector<Tensor>& in, const OpAttrs& op_attrs, std::vector<Tensor>& out) {
  const ScanAttrs& attrs = op_attrs.get<ScanAttrs>();
  const auto& dims = in[0].impl()->shape.dims();
  const auto axis = static_cast<std::size_t>(
      normalize_axis("affine_scan", attrs.axis, static_cast<int64_t>(dims.size())));
  if (in[0].impl()->shape.num_elements() == 0) return;
  const ScanView v = scan_view(dims, axis);
  visit_dtype(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      const T* a = data_of<T>(in[0]);
      const T* b = data_of<T>(in[1]);
      T* y = data_of<T>(out[0]);
      for_each_scan_part(
          v, [&](int64_t at) { affine_line(a + at, b + at, y + at, v.n, attrs.exclusive, attrs.reverse); },
          [&](int64_t at, int64_t c0, int64_t c1) {
            affine_block(a + at, b + at, y + at, v, c0, c1, attrs.exclusive, attrs.reverse);
          });
    }
  });
}

// With u the incoming gradient and lambda_i = sum over k from i on (scan order) of
// u_k a_(i+1) ... a_k, i.e. lambda_i = u_i + a_(i+1) lambda_(i+1):
// - inclusive: d/db = lambda, d/da_i = lambda_i h_(i-1); and a_i lambda_i is the reversed
//   inclusive scan of (a, a u), so lambda = u + its reversed exclusive scan;
// - exclusive: result k is h_(k-1), so u reaches h_(k-1): d/db is the reversed exclusive scan
//   of (a, u), and d/da_i is that times h_(i-1), which is result i itself.
std::vector<Tensor> grad_affine_scan(const GradInputs& g) {
  const ScanAttrs& s = g.attrs.get<ScanAttrs>();
  const Tensor& a = g.inputs[0];
  const Tensor& b = g.inputs[1];
  const Tensor& u = g.grads[0];
  const Tensor lambda = s.exclusive ? affine_scan(a, u, s.axis, true, !s.reverse)
                                    : add(u, affine_scan(a, mul(a, u), s.axis, true, !s.reverse));
  Tensor da;
  if (g.wants(0)) da = mul(lambda, s.exclusive ? g.outputs[0] : affine_scan(a, b, s.axis, true, s.reverse));
  return {da, lambda};
}

// d y_k / d x_i, for i at or before k in scan order, is the product of x_j over j up to k
// other than i: the product before i (the exclusive cumprod, which is y itself when y is
// exclusive) times the product of x_(i+1) .. x_k. Summed against dy, the second factor is
// r_i = dy_i + x_(i+1) r_(i+1) (exclusive: r_i = dy_(i+1) + x_(i+1) r_(i+1)), an affine scan
// run backwards. TF's rule divides cumsum(dy y) by x instead, wrong wherever x holds a zero,
// and a rule that special-cases zeros with where() gets the value right but not its own
// derivative (the branch chosen at x = 0 is not the function near it). Without a division or a
// branch, the rule's derivatives are exact at every order.
std::vector<Tensor> grad_cumprod(const GradInputs& g) {
  const ScanAttrs& a = g.attrs.get<ScanAttrs>();
  const Tensor& x = g.inputs[0];
  const Tensor& y = g.outputs[0];
  const Tensor& dy = g.grads[0];
  if (a.exclusive) return {mul(y, affine_scan(x, dy, a.axis, true, !a.reverse))};
  const Tensor before = cumprod(x, static_cast<int>(a.axis), true, a.reverse);
  return {mul(before, add(dy, affine_scan(x, mul(x, dy), a.axis, true, !a.reverse)))};
}

// ---- linspace ----

std::vector<ValueType> infer_linspace(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  require_dtype("linspace", in[0], {DType::Float32, DType::Float64}, "start");
  if (in[1].dtype != in[0].dtype)
    op_error<InvalidArgumentError>("linspace", "expected start and stop of one dtype, got ", to_string(in[0].dtype),
                                   " and ", to_string(in[1].dtype), "; tg::cast one of them");
  require_dtype("linspace", in[2], {DType::Int32, DType::Int64}, "num");
  const char* names[] = {"start", "stop", "num"};
  for (int i = 0; i < 3; ++i)
    if (in[i].shape.has_rank() && in[i].shape.rank() != 0)
      op_error<InvalidArgumentError>("linspace", "expected ", names[i], " to be a scalar (rank 0), got ",
                                     describe(in[i]));
  const ShapeValueAttrs& known = attrs.get<ShapeValueAttrs>();
  return {ValueType{in[0].dtype, TensorShape{known.known && known.dims.size() == 1 ? known.dims[0] : None}}};
}

int64_t num_value(const TensorImpl& num) {
  return num.dtype == DType::Int64 ? num.data<int64_t>()[0] : int64_t{num.data<int32_t>()[0]};
}

void check_num(int64_t num) {
  if (num < 0)
    op_error<InvalidArgumentError>("linspace", "num must be >= 0 (the number of values), got ", num);
}

void kernel_linspace(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const int64_t num = num_value(*in[2].impl());
  check_num(num);
  const ShapeValueAttrs& known = attrs.get<ShapeValueAttrs>();
  if (known.known && known.dims.size() == 1 && known.dims[0] != num)
    op_error<InvalidArgumentError>("linspace", "num is ", num, " at run time but was known as ", known.dims[0],
                                   " when the graph was built");
  Tensor result = allocate_tensor(in[0].impl()->dtype, TensorShape{num});
  visit_dtype(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      const T start = in[0].impl()->data<T>()[0], stop = in[1].impl()->data<T>()[0];
      T* y = data_of<T>(result);
      if (num == 0) return;
      // TF's tf.linspace: start, then start + i * delta, then stop itself.
      const T delta = (stop - start) / static_cast<T>(std::max<int64_t>(num - 1, 1));
      y[0] = start;
      for (int64_t i = 1; i < num - 1; ++i) y[i] = start + static_cast<T>(i) * delta;
      if (num > 1) y[num - 1] = stop;
    }
  });
  out[0] = std::move(result);
}

// y_i = start (1 - t_i) + stop t_i with t = linspace(0, 1, num): d/dstop = sum(g t),
// d/dstart = sum(g) - that.
std::vector<Tensor> grad_linspace(const GradInputs& g) {
  const Tensor& start = g.inputs[0];
  const Tensor t = linspace(zeros_like(start), ones_like(start), g.inputs[2]);
  const Tensor dstop = reduce_sum(mul(g.grads[0], t));
  return {sub(reduce_sum(g.grads[0]), dstop), dstop, Tensor()};
}

// ---- helpers of the composites ----

void require_floating(const char* op, const Tensor& x) {
  if (!x.defined()) op_error<ValueError>(op, "the input is an empty tg::Tensor");
  if (!is_floating(x.dtype()))
    op_error<InvalidArgumentError>(op, "does not support dtype ", to_string(x.dtype()),
                                   "; expected float32 or float64. tg::cast the input first");
}

// Checks the axes against x's rank when it is known, so that a bad axis is reported under the
// composite's own name rather than one of its parts'.
void check_axes(const char* op, const Tensor& x, const std::vector<int>& axes) {
  const TensorShape s = static_shape(x);
  if (!s.has_rank()) return;
  for (int a : axes) normalize_axis(op, a, s.rank());
}

}  // namespace

void register_math_ops(OpDef* t) {
  set_op(t, OpId::Cumsum, &infer_scan<false>, &kernel_scan<false>);
  set_op(t, OpId::Cumprod, &infer_scan<true>, &kernel_scan<true>);
  set_op(t, OpId::Linspace, &infer_linspace, &kernel_linspace);
  set_grad(t, OpId::Cumsum, &grad_cumsum);
  set_grad(t, OpId::Cumprod, &grad_cumprod);
  set_op(t, OpId::AffineScan, &infer_affine_scan, &kernel_affine_scan);
  set_grad(t, OpId::AffineScan, &grad_affine_scan);
  set_grad(t, OpId::Linspace, &grad_linspace);
}

}  // namespace detail

// ---- public front functions ----

Tensor cumsum(const Tensor& x, int axis, bool exclusive, bool reverse) {
  return detail::apply_op1(detail::OpId::Cumsum, {x}, detail::ScanAttrs{axis, exclusive, reverse});
}
Tensor cumprod(const Tensor& x, int axis, bool exclusive, bool reverse) {
  return detail::apply_op1(detail::OpId::Cumprod, {x}, detail::ScanAttrs{axis, exclusive, reverse});
}

Tensor linspace(const Tensor& start, const Tensor& stop, const Tensor& num) {
  const char* names[] = {"start", "stop", "num"};
  const Tensor* args[] = {&start, &stop, &num};
  for (int i = 0; i < 3; ++i)
    if (!args[i]->defined()) detail::op_error<ValueError>("linspace", names[i], " is an empty tg::Tensor");
  // An eager num fixes the result's length while tracing (TF's static shape (num,)).
  detail::ShapeValueAttrs known;
  const detail::TensorImpl& n = *num.impl();
  if (!n.symbolic && n.shape.rank() == 0 && (n.dtype == DType::Int32 || n.dtype == DType::Int64)) {
    known.known = true;
    known.dims = {detail::num_value(n)};
    detail::check_num(known.dims[0]);
  }
  return detail::apply_op1(detail::OpId::Linspace, {start, stop, num}, known);
}
Tensor linspace(const Tensor& start, const Tensor& stop, int64_t num) {
  return linspace(start, stop, constant(num));
}
Tensor linspace(double start, double stop, int64_t num, DType dtype) {
  if (!is_floating(dtype))
    detail::op_error<InvalidArgumentError>("linspace", "expected a float32 or float64 dtype, got ", to_string(dtype));
  return linspace(constant(start, dtype), constant(stop, dtype), constant(num));
}

// TF's clip_by_value: minimum with hi, then maximum with lo (so lo wins where lo > hi), each
// result checked to have x's shape (while tracing, and again when the graph runs where the trace
// could not tell). The gradient is that of the two (ties go to x: g flows on the closed range
// [lo, hi]).
Tensor clip_by_value(const Tensor& x, const Tensor& lo, const Tensor& hi) {
  const char* op = "clip_by_value";
  if (!x.defined() || !lo.defined() || !hi.defined())
    detail::op_error<ValueError>(op, "x, lo and hi must be defined tensors (one is an empty tg::Tensor)");
  if (x.dtype() == DType::Bool || x.dtype() == DType::String)
    detail::op_error<InvalidArgumentError>(op, "does not support dtype ", to_string(x.dtype()),
                                           "; expected a number dtype. tg::cast the input first");
  if (lo.dtype() != x.dtype() || hi.dtype() != x.dtype())
    detail::op_error<InvalidArgumentError>(op, "expected x, lo and hi of one dtype, got ", to_string(x.dtype()),
                                           ", ", to_string(lo.dtype()), " and ", to_string(hi.dtype()),
                                           "; tg::cast them to x's dtype");
  const TensorShape xs = detail::static_shape(x);
  const auto check_shape = [&](const Tensor& r, const char* bound, const Tensor& b) {
    if (!xs.is_compatible_with(detail::static_shape(r)))
      detail::op_error<ValueError>(op, bound, " of shape ", detail::static_shape(b).to_string(),
                                   " would broadcast x of shape ", xs.to_string(), " to ",
                                   detail::static_shape(r).to_string(),
                                   "; lo and hi must broadcast to x's shape without enlarging it");
  };
  const Tensor below_hi = minimum(x, hi);
  check_shape(below_hi, "hi", hi);
  const Tensor clipped = maximum(below_hi, lo);
  check_shape(clipped, "lo", lo);
  // With None dims (or an unknown rank) the checks above cannot tell that lo or hi enlarged x:
  // the graph checks it when it runs.
  return detail::ensure_same_shape(clipped, x, op, "the clipped values", "the values of x",
                                   "lo and hi must broadcast to x's shape without enlarging it");
}

// TF's reduce_logsumexp: the max (0 where it is not finite, so that -inf / inf / NaN slices
// come out as -inf / inf / NaN) is subtracted before exp and added back after log, outside the
// gradient.
Tensor reduce_logsumexp(const Tensor& x, std::vector<int> axes, bool keepdims) {
  detail::require_floating("reduce_logsumexp", x);
  detail::check_axes("reduce_logsumexp", x, axes);
  const Tensor raw_max = reduce_max(x, axes, true);
  const Tensor finite = less(abs(raw_max), detail::scalar_like(raw_max, std::numeric_limits<double>::infinity()));
  // stop_gradient's op (tg::stop_gradient belongs to the autodiff layer, above this one)
  const Tensor shift = detail::apply_op1(detail::OpId::StopGradient, {where(finite, raw_max, zeros_like(raw_max))});
  const Tensor lse = log(reduce_sum(exp(sub(x, shift)), axes, keepdims));
  return add(lse, keepdims ? shift : detail::reshape_like(shift, lse));
}

Tensor l2_normalize(const Tensor& x, std::vector<int> axes, double epsilon) {
  detail::require_floating("l2_normalize", x);
  detail::check_axes("l2_normalize", x, axes);
  const Tensor square_sum = reduce_sum(square(x), axes, true);
  return mul(x, rsqrt(maximum(square_sum, detail::scalar_like(x, epsilon))));
}
Tensor l2_normalize(const Tensor& x, int axis, double epsilon) {
  return l2_normalize(x, std::vector<int>{axis}, epsilon);
}

}  // namespace tg
