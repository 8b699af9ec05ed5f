#include "ops/window.h"

#include <algorithm>
#include <string>

#include "core/check.h"
#include "ops/broadcast.h"
#include "tracegraph/ops.h"

namespace tg::detail {
namespace {

constexpr int64_t kValid = static_cast<int64_t>(Padding::Valid);
constexpr int64_t kSame = static_cast<int64_t>(Padding::Same);

void check_pair(const char* op, const char* what, const std::vector<int64_t>& v, int64_t min) {
  if (v.size() != 2)
    op_error<InvalidArgumentError>(op, what, " ", format_list(v),
                                   " must have 2 entries (height, width)");
  for (int64_t x : v)
    if (x < min)
      op_error<InvalidArgumentError>(op, what, " ", format_list(v), " must be >= ", min,
                                     " in both dims, got ", x);
}

void check_padding(const char* op, int64_t padding) {
  if (padding != kValid && padding != kSame)
    op_error<InvalidArgumentError>(op, "padding ", padding,
                                   " is not a tg::Padding; expected Padding::Valid (0) or "
                                   "Padding::Same (1)");
}

}  // namespace

std::vector<int64_t> spatial_pair(const char* op, const char* what, const std::vector<int64_t>& v) {
  if (v.size() == 1) return {v[0], v[0]};
  if (v.size() == 2) return v;
  if (v.size() == 4) {
    if (v[0] != 1 || v[3] != 1)
      op_error<InvalidArgumentError>(op, what, " ", format_list(v),
                                     " has 4 entries (NHWC), so its batch and channel entries must "
                                     "be 1; windows never span images or channels. Give (height, "
                                     "width) as two entries");
    return {v[1], v[2]};
  }
  op_error<InvalidArgumentError>(op, what, " ", format_list(v), " has ", v.size(),
                                 " entries; expected 1 (both dims), 2 (height, width) or 4 (NHWC "
                                 "with 1 for batch and channels)");
}

void check_conv_attrs(const char* op, const Conv2DAttrs& a) {
  check_pair(op, "strides", a.strides, 1);
  check_pair(op, "dilations", a.dilations, 1);
  check_padding(op, a.padding);
  const bool strided = a.strides[0] > 1 || a.strides[1] > 1;
  const bool dilated = a.dilations[0] > 1 || a.dilations[1] > 1;
  if (strided && dilated)
    op_error<InvalidArgumentError>(op, "strides ", format_list(a.strides), " and dilations ",
                                   format_list(a.dilations),
                                   ": a stride > 1 together with a dilation > 1 is not supported "
                                   "(TensorFlow refuses it too); use stride 1 and subsample the "
                                   "result, or no dilation");
}

void check_pool_attrs(const char* op, const Pool2DAttrs& a) {
  check_pair(op, "ksize", a.ksize, 1);
  check_pair(op, "strides", a.strides, 1);
  check_padding(op, a.padding);
}

// One spatial dim, TF's rule: VALID gives (in - window + stride) / stride with C++ truncation, so
// a window larger than the input gives 0 when that quotient truncates to 0, and an error when it
// is negative, exactly where TensorFlow does. Window, dilation and stride are the user's (any
// value >= 1), so every step is checked or ordered not to overflow: the windows' padded extent,
// (out - 1) * stride + span, must fit int64, and the kernels index within it.
Window window_1d(const char* op, const char* dim, int64_t in, int64_t k, int64_t dilation,
                 int64_t stride, int64_t padding) {
  int64_t span = 0;  // (k - 1) * dilation + 1, the window's extent
  if (__builtin_mul_overflow(k - 1, dilation, &span) || __builtin_add_overflow(span, 1, &span))
    op_error<InvalidArgumentError>(op, "the window's ", dim, " (", k, " - 1) * dilation ", dilation,
                                   " + 1 overflows int64; use a smaller window or dilation");
  if (in == None) return {None, 0};
  int64_t out = 0;
  if (padding == kSame) {
    out = in / stride + (in % stride != 0);
  } else if (in >= span) {
    out = (in - span) / stride + 1;  // = (in - span + stride) / stride, whose sum may overflow
  } else {
    out = (in - span + stride) / stride;  // in - span < 0: this sum cannot overflow
    if (out < 0)
      op_error<InvalidArgumentError>(op, "with VALID padding the input's ", dim, " ", in,
                                     " is smaller than the window's ", dim, " ", span,
                                     dilation > 1 ? " ((k - 1) * dilation + 1)" : "", " at stride ",
                                     stride, ": the output size would be negative (", out,
                                     "); use Padding::Same, a smaller window or a larger input");
  }
  if (padding != kSame) return {out, 0};
  // (out - 1) * stride < in, so only adding the span can overflow; with no output the windows
  // cover span - stride.
  int64_t extent = span - stride;
  if (out > 0 && __builtin_add_overflow((out - 1) * stride, span, &extent))
    op_error<InvalidArgumentError>(op, "with SAME padding the window's ", dim, " ", span,
                                   dilation > 1 ? " ((k - 1) * dilation + 1)" : "", " over an input ",
                                   dim, " of ", in, " at stride ", stride,
                                   " needs a padded input of more positions than int64 can count; use a "
                                   "smaller window or dilation, or Padding::Valid");
  return {out, std::max<int64_t>(0, extent - in) / 2};
}

std::vector<int64_t> dims4(const char* op, const ValueType& t, const char* what, const char* layout) {
  if (!t.shape.has_rank()) return {None, None, None, None};
  if (t.shape.rank() != 4)
    op_error<InvalidArgumentError>(op, "expected ", what, " of rank 4 ", layout, ", got rank ",
                                   t.shape.rank(), " with shape ", t.shape.to_string(),
                                   t.shape.rank() == 3 && std::string(what) != "filter"
                                       ? "; add the batch dim with tg::expand_dims(x, 0)"
                                       : "; reshape it");
  return t.shape.dims();
}

void require_float(const char* op, const ValueType& t, const char* what) {
  require_dtype(op, t, {DType::Float32, DType::Float64}, what);
}

void require_same_dtype(const char* op, const ValueType& a, const char* an, const ValueType& b,
                        const char* bn) {
  if (a.dtype != b.dtype)
    op_error<InvalidArgumentError>(op, "expected ", an, " and ", bn, " of one dtype, got ",
                                   to_string(a.dtype), " and ", to_string(b.dtype),
                                   " (tracegraph never promotes silently); tg::cast one first");
}

void require_grad_shape(const char* op, const ValueType& grad, const ValueType& expected,
                        const char* forward) {
  require_same_dtype(op, expected, "the forward input", grad, "the gradient");
  if (grad.shape.has_rank() && expected.shape.has_rank() &&
      !grad.shape.is_compatible_with(expected.shape))
    op_error<InvalidArgumentError>(op, "the gradient has shape ", grad.shape.to_string(), " but ",
                                   forward, "'s output has shape ", expected.shape.to_string(),
                                   "; expected that shape");
}

bool pool_window_fits_winners(const std::vector<int64_t>& ksize, const std::vector<int64_t>& strides,
                              int64_t padding) {
  return padding == static_cast<int64_t>(Padding::Valid) && ksize.size() == 2 && ksize == strides && ksize[0] >= 1 &&
         ksize[1] >= 1 && ksize[0] <= 16 && ksize[1] <= 16 && ksize[0] * ksize[1] <= 16;
}

}  // namespace tg::detail
