// What convolution and pooling share: their window attributes as the user gives them, TF's
// output sizes and SAME padding (TensorFlow's GetWindowedOutputSize), and the checks of their
// NHWC / HWIO operands. conv.cpp and pool.cpp build their ops' rules from these.
#pragma once
#include <cstdint>
#include <vector>

#include "ops/op.h"

namespace tg::detail {

/// The (height, width) pair of a user's strides/dilations/ksize: TF accepts one entry for both,
/// two, or four in NHWC order whose batch and channel entries must be 1.
std::vector<int64_t> spatial_pair(const char* op, const char* what, const std::vector<int64_t>& v);
void check_conv_attrs(const char* op, const Conv2DAttrs& a);
void check_pool_attrs(const char* op, const Pool2DAttrs& a);
/// Whether a 2-D max pool's windows can be recorded as one byte each (a bfloat16 training conv
/// layer's pool winners): VALID, strides = window, at most 16 elements (checked without overflow).
bool pool_window_fits_winners(const std::vector<int64_t>& ksize, const std::vector<int64_t>& strides,
                              int64_t padding);

struct Window {
  int64_t out;         // output size, None when the input size is None
  int64_t pad_before;  // zero rows/cols added before the input (SAME only)
};
/// One spatial dim's output size and padding for a window k at `dilation` and `stride`.
Window window_1d(const char* op, const char* dim, int64_t in, int64_t k, int64_t dilation, int64_t stride,
                 int64_t padding);

inline constexpr const char* kNHWC = "(batch, height, width, channels: NHWC)";
inline constexpr const char* kHWIO = "(height, width, in_channels, out_channels: HWIO)";
/// The four dims of an NHWC / HWIO value (None where unknown, all None for an unknown rank),
/// after checking the rank.
std::vector<int64_t> dims4(const char* op, const ValueType& t, const char* what, const char* layout);
void require_float(const char* op, const ValueType& t, const char* what);
void require_same_dtype(const char* op, const ValueType& a, const char* an, const ValueType& b, const char* bn);
/// A gradient fed to a gradient op must have the forward output's shape (where known).
void require_grad_shape(const char* op, const ValueType& grad, const ValueType& expected, const char* forward);

/// fn(T{}) for the float type of dtype d (float32 or float64: the dtypes these ops take).
template <class Fn>
void dispatch_float(DType d, Fn&& fn) {
  if (d == DType::Float64) fn(double{});
  else fn(float{});
}

}  // namespace tg::detail
