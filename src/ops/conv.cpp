// Convolution and pooling over NHWC tensors: front functions, shape/dtype rules, kernels and
// gradients together. Output sizes and SAME padding follow TensorFlow's GetWindowedOutputSize.
//
// float32 on a CPU with AVX-512F runs the implicit-GEMM kernels of implicit_gemm.h: each image
// is copied once into a zero-padded plane, and the kernels read the windows from it in place.
// The input gradient at stride 1 is the forward kernel over the padded output gradient with the
// filter flipped (the strided one takes the GEMM path below).
//
// Otherwise (float64, other CPUs, and the pointwise window) conv2d is im2col + GEMM: the windows
// of a tile of output pixels are laid out as the rows of a (pixels, kh*kw*in_c) matrix whose
// column order (ky, kx, c) is the HWIO filter's row order, so the filter is the GEMM's right
// operand as stored, and the product is the NHWC output as stored. A 1x1 window at stride 1
// needs no copy: the input is that matrix. The input gradient is the product with the filter
// transposed, scattered back (col2im); the filter gradient is im2col^T times the output gradient.
//
// Either way, groups of images are spread over the thread pool; their boundaries depend only on
// the shapes, and the filter gradient sums one partial per group in group order, so the bits
// never depend on timing.
#include "ops/conv.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "core/thread_pool.h"
#include "ops/broadcast.h"
#include "ops/eager_steps.h"
#include "ops/epilogue_steps.h"
#include "ops/implicit_gemm.h"
#include "ops/pool_grad_avx512.h"
#include "ops/gemm.h"
#include "ops/simd_math.h"
#include "tracegraph/ops.h"

namespace tg {
namespace detail {
namespace {

constexpr int64_t kValid = static_cast<int64_t>(Padding::Valid);
constexpr int64_t kSame = static_cast<int64_t>(Padding::Same);

// ---- attributes ----

// The (height, width) pair of a user's strides/dilations/ksize: TF accepts one entry for both,
// two, or four in NHWC order whose batch and channel entries must be 1.
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

// ---- window geometry ----

struct Window {
  int64_t out;         // output size, None when the input size is None
  int64_t pad_before;  // zero rows/cols added before the input (SAME only)
};

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

// The four dims of an NHWC / HWIO value (None where unknown, all None for an unknown rank),
// after checking the rank.
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

constexpr const char* kNHWC = "(batch, height, width, channels: NHWC)";
constexpr const char* kHWIO = "(height, width, in_channels, out_channels: HWIO)";

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

// conv2d's output type; everything the op family checks about an (input, filter) pair.
ValueType conv_output(const char* op, const ValueType& input, const ValueType& filter,
                      const Conv2DAttrs& a) {
  check_conv_attrs(op, a);
  require_float(op, input, "input");
  require_same_dtype(op, input, "input", filter, "filter");
  const std::vector<int64_t> x = dims4(op, input, "input", kNHWC);
  const std::vector<int64_t> f = dims4(op, filter, "filter", kHWIO);
  for (int64_t d : f)
    if (d == 0)
      op_error<InvalidArgumentError>(op, "the filter ", filter.shape.to_string(),
                                     " has a zero dimension; a filter needs at least one element "
                                     "in each dim (TensorFlow refuses empty filters too)");
  if (x[3] != None && f[2] != None && x[3] != f[2])
    op_error<InvalidArgumentError>(op, "the input has ", x[3], " channels (shape ",
                                   input.shape.to_string(), ") but the filter expects ", f[2],
                                   " (shape ", filter.shape.to_string(),
                                   ", HWIO: dim 2 is in_channels); they must be equal");
  const Window wh = f[0] == None ? Window{None, 0}
                                 : window_1d(op, "height", x[1], f[0], a.dilations[0], a.strides[0], a.padding);
  const Window ww = f[1] == None ? Window{None, 0}
                                 : window_1d(op, "width", x[2], f[1], a.dilations[1], a.strides[1], a.padding);
  return ValueType{input.dtype, TensorShape({x[0], wh.out, ww.out, f[3]})};
}

ValueType pool_output(const char* op, const ValueType& input, const Pool2DAttrs& a) {
  check_pool_attrs(op, a);
  require_float(op, input, "input");
  const std::vector<int64_t> x = dims4(op, input, "input", kNHWC);
  const Window wh = window_1d(op, "height", x[1], a.ksize[0], 1, a.strides[0], a.padding);
  const Window ww = window_1d(op, "width", x[2], a.ksize[1], 1, a.strides[1], a.padding);
  return ValueType{input.dtype, TensorShape({x[0], wh.out, ww.out, x[3]})};
}

// A gradient fed to a gradient op must have the forward output's shape (where known).
void require_grad_shape(const char* op, const ValueType& grad, const ValueType& expected,
                        const char* forward) {
  require_same_dtype(op, expected, "the forward input", grad, "the gradient");
  if (grad.shape.has_rank() && expected.shape.has_rank() &&
      !grad.shape.is_compatible_with(expected.shape))
    op_error<InvalidArgumentError>(op, "the gradient has shape ", grad.shape.to_string(), " but ",
                                   forward, "'s output has shape ", expected.shape.to_string(),
                                   "; expected that shape");
}

// ---- shape rules ----

std::vector<ValueType> infer_conv2d(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  return {conv_output("conv2d", in[0], in[1], attrs.get<Conv2DAttrs>())};
}

std::vector<ValueType> infer_conv2d_backprop_input(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const char* op = "conv2d_backprop_input";
  require_grad_shape(op, in[2], conv_output(op, in[0], in[1], attrs.get<Conv2DAttrs>()), "conv2d");
  return {in[0]};
}

std::vector<ValueType> infer_conv2d_backprop_filter(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const char* op = "conv2d_backprop_filter";
  require_grad_shape(op, in[2], conv_output(op, in[0], in[1], attrs.get<Conv2DAttrs>()), "conv2d");
  return {in[1]};
}

std::vector<ValueType> infer_pool(const char* op, const std::vector<ValueType>& in, const OpAttrs& attrs) {
  return {pool_output(op, in[0], attrs.get<Pool2DAttrs>())};
}
std::vector<ValueType> infer_max_pool2d(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  return infer_pool("max_pool2d", in, attrs);
}
std::vector<ValueType> infer_avg_pool2d(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  return infer_pool("avg_pool2d", in, attrs);
}

// (input, grad of the pool's output) -> shaped like input: max_pool2d_grad, avg_pool2d_grad.
std::vector<ValueType> infer_pool_grad(const char* op, const char* forward, const std::vector<ValueType>& in,
                                       const OpAttrs& attrs) {
  require_grad_shape(op, in[1], pool_output(op, in[0], attrs.get<Pool2DAttrs>()), forward);
  return {in[0]};
}
std::vector<ValueType> infer_max_pool2d_grad(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  return infer_pool_grad("max_pool2d_grad", "max_pool2d", in, attrs);
}
std::vector<ValueType> infer_avg_pool2d_grad(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  return infer_pool_grad("avg_pool2d_grad", "avg_pool2d", in, attrs);
}

// (input, g shaped like input) -> shaped like max_pool2d(input).
std::vector<ValueType> infer_max_pool2d_grad_grad(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const char* op = "max_pool2d_grad_grad";
  const ValueType out = pool_output(op, in[0], attrs.get<Pool2DAttrs>());
  require_same_dtype(op, in[0], "input", in[1], "g");
  if (in[0].shape.has_rank() && in[1].shape.has_rank() && !in[1].shape.is_compatible_with(in[0].shape))
    op_error<InvalidArgumentError>(op, "g has shape ", in[1].shape.to_string(),
                                   " but the input has shape ", in[0].shape.to_string(),
                                   "; expected that shape");
  return {out};
}

// ---- kernels: geometry from concrete shapes ----

struct ConvGeom {
  int64_t n, h, w, c;        // input
  int64_t kh, kw, oc;        // filter
  int64_t oh, ow;            // output
  int64_t sh, sw, dh, dw;    // strides, dilations
  int64_t pt, pl;            // padding before (top, left)
  int64_t k() const { return kh * kw * c; }  // the GEMM's inner dim
  int64_t pixels() const { return oh * ow; }  // output rows per image
  // A 1x1 window at stride 1 without padding: the input is its own im2col matrix.
  bool pointwise() const { return kh == 1 && kw == 1 && sh == 1 && sw == 1 && pt == 0 && pl == 0; }
};

ConvGeom conv_geometry(const Tensor& input, const Tensor& filter, const Conv2DAttrs& a) {
  const auto& x = input.impl()->shape.dims();
  const auto& f = filter.impl()->shape.dims();
  ConvGeom g{};
  g.n = x[0], g.h = x[1], g.w = x[2], g.c = x[3];
  g.kh = f[0], g.kw = f[1], g.oc = f[3];
  g.sh = a.strides[0], g.sw = a.strides[1], g.dh = a.dilations[0], g.dw = a.dilations[1];
  const Window wh = window_1d("conv2d", "height", g.h, g.kh, g.dh, g.sh, a.padding);
  const Window ww = window_1d("conv2d", "width", g.w, g.kw, g.dw, g.sw, a.padding);
  g.oh = wh.out, g.ow = ww.out, g.pt = wh.pad_before, g.pl = ww.pad_before;
  return g;
}

// Images are processed in groups: enough output rows per group for an efficient GEMM, and a
// bounded number of groups (each filter-gradient group keeps a partial sum). Fixed by the
// shapes alone.
struct Groups {
  int64_t count = 0, per = 1;  // groups, images per group (the last may have fewer)
};
constexpr int64_t kGroupRows = 512;
constexpr int64_t kMaxGroups = 32;

Groups plan_groups(int64_t images, int64_t rows_per_image) {
  if (images == 0) return {};
  Groups g;
  g.per = std::max<int64_t>(1, kGroupRows / std::max<int64_t>(1, rows_per_image));
  g.per = std::max(g.per, (images + kMaxGroups - 1) / kMaxGroups);
  g.per = std::min(g.per, images);
  g.count = (images + g.per - 1) / g.per;
  return g;
}

// Runs fn(group) for every group, on the pool when the work pays for waking threads
// (flops_per_group is the GEMM work of a full group).
template <class Fn>
void for_each_group(const Groups& groups, int64_t flops_per_group, Fn&& fn) {
  constexpr int64_t kParallelFlops = int64_t{1} << 23;
  if (groups.count <= 1 || flops_per_group * groups.count < kParallelFlops) {
    for (int64_t i = 0; i < groups.count; ++i) fn(i);
    return;
  }
  parallel_for(groups.count, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) fn(i);
  });
}

// Walks the im2col rows [r0, r1) (row = (image, oy, ox) flattened): fn(row pointer, image
// pointer) per window tap (ky, kx), with the input pixel's offset or -1 in the padding. The
// columns of a row are (ky, kx, c), so each tap covers c consecutive entries.
template <class T, class Fn>
void for_each_tap(const ConvGeom& g, T* col, int64_t r0, int64_t r1, Fn&& fn) {
  const int64_t rows = g.pixels();
  int64_t n = r0 / rows, oy = (r0 % rows) / g.ow, ox = (r0 % rows) % g.ow;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t image = n * g.h * g.w * g.c;
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      const int64_t iy = oy * g.sh - g.pt + ky * g.dh;
      const bool row_inside = iy >= 0 && iy < g.h;
      for (int64_t kx = 0; kx < g.kw; ++kx, col += g.c) {
        const int64_t ix = ox * g.sw - g.pl + kx * g.dw;
        fn(col, row_inside && ix >= 0 && ix < g.w ? image + (iy * g.w + ix) * g.c : int64_t{-1});
      }
    }
    if (++ox == g.ow) {
      ox = 0;
      if (++oy == g.oh) oy = 0, ++n;
    }
  }
}

// The im2col rows [r0, r1) of x into col: zeros where the window hangs over the padding.
template <class T>
void im2col(const ConvGeom& g, const T* x, int64_t r0, int64_t r1, T* col) {
  for_each_tap(g, col, r0, r1, [&](T* dst, int64_t at) {
    if (at < 0) std::fill_n(dst, g.c, T(0));
    else for (int64_t ch = 0; ch < g.c; ++ch) dst[ch] = x[at + ch];
  });
}

// im2col's adjoint: adds the rows [r0, r1) of col back to the input positions they were read
// from (dx must hold zeros, or earlier rows' sums, there).
template <class T>
void col2im(const ConvGeom& g, const T* col, int64_t r0, int64_t r1, T* dx) {
  for_each_tap(g, const_cast<T*>(col), r0, r1, [&](T* src, int64_t at) {
    if (at >= 0) for (int64_t ch = 0; ch < g.c; ++ch) dx[at + ch] += src[ch];
  });
}

// Scratch for im2col tiles, one per thread and element type, kept across calls: a fresh
// allocation of this size comes from mmap, and its page faults cost about as much as the
// im2col itself. Tiles are bounded (kTileElements), so this stays a few MB per thread.
constexpr int64_t kTileElements = int64_t{1} << 18;
template <class T>
T* scratch(int64_t n) {
  thread_local std::vector<T> buffer;
  if (static_cast<int64_t>(buffer.size()) < n) buffer.resize(static_cast<std::size_t>(n));
  return buffer.data();
}

// Calls fn(r0, r1, col) for tiles of the im2col rows of images [n0, n1), col sized for the
// tile's rows (at least one row, else kTileElements entries).
template <class T, class Fn>
void for_each_tile(const ConvGeom& g, int64_t n0, int64_t n1, Fn&& fn) {
  const int64_t k = g.k();
  const int64_t tile = std::max<int64_t>(1, kTileElements / k);
  T* col = scratch<T>(std::min(tile, (n1 - n0) * g.pixels()) * k);
  for (int64_t r0 = n0 * g.pixels(), end = n1 * g.pixels(); r0 < end; r0 += tile)
    fn(r0, std::min(end, r0 + tile), col);
}

constexpr const char* kConvOp = "conv2d";

// ---- the direct float32 kernels (implicit_gemm.h) ----

// Whether float32 work of this geometry goes to the direct kernels: wherever the AVX-512
// kernels run, for every window but the pointwise one, whose input already is its im2col matrix
// (it goes to gemm, which picks its kernel itself).
// They also copy each image into a padded plane (the stride-1 input gradient pads dy by the
// window's span): a window far larger than the image (a huge dilation, with SAME padding) would
// make that plane mostly zeros and larger than memory, so such windows take the im2col path,
// whose scratch is bounded. Both planes fit in (h + span_h - 1) x (w + span_w - 1).
bool padded_planes_fit(const ConvGeom& g) {
  const int64_t span_h = (g.kh - 1) * g.dh + 1, span_w = (g.kw - 1) * g.dw + 1;  // checked by window_1d
  const int64_t channels = std::max(g.c, g.oc);
  int64_t hp = 0, wp = 0, plane = 0;
  if (__builtin_add_overflow(g.h, span_h - 1, &hp) || __builtin_add_overflow(g.w, span_w - 1, &wp) ||
      __builtin_mul_overflow(hp, wp, &plane) || __builtin_mul_overflow(plane, channels, &plane))
    return false;
  return plane <= kTileElements || plane / (4 * channels) <= g.h * g.w;
}

bool use_direct(const ConvGeom& g) { return own_avx512_kernels() && !g.pointwise() && padded_planes_fit(g); }

// One image (h, w, c) copied into a zero-padded (hp, wp, c) plane whose row `top` and column
// `left` hold the image's first row and column; rows and columns past the image are zeros.
void pad_image(const float* image, int64_t h, int64_t w, int64_t c, int64_t top, int64_t left, int64_t hp,
               int64_t wp, float* padded) {
  const int64_t x0 = std::min(left, wp), x1 = std::clamp(left + w, x0, wp);  // columns [x0, x1) from the image
  for (int64_t yp = 0; yp < hp; ++yp) {
    float* row = padded + yp * wp * c;
    const int64_t iy = yp - top;
    if (iy < 0 || iy >= h) {
      std::fill_n(row, wp * c, 0.0f);
      continue;
    }
    std::fill_n(row, x0 * c, 0.0f);
    std::copy_n(image + (iy * w + x0 - left) * c, (x1 - x0) * c, row + x0 * c);
    std::fill(row + x1 * c, row + wp * c, 0.0f);
  }
}

// A window over images padded for it: the padded plane's size, and the kernels' view of it.
// Move-only: the view points into `taps`, whose buffer a move keeps and a copy would not.
struct PaddedWindow {
  int64_t top = 0, left = 0, hp = 0, wp = 0, channels = 0;
  std::vector<int64_t> taps;
  implicit_gemm::Layout view;

  PaddedWindow() = default;
  PaddedWindow(PaddedWindow&&) = default;
  PaddedWindow(const PaddedWindow&) = delete;
  PaddedWindow& operator=(const PaddedWindow&) = delete;
};

// The window (kh, kw) at dilation (dh, dw) and stride (sh, sw) over `channels` channels, for an
// (out_h, out_w, out_c) output; top/left rows and columns of padding before the image.
PaddedWindow padded_window(int64_t kh, int64_t kw, int64_t dh, int64_t dw, int64_t sh, int64_t sw, int64_t channels,
                           int64_t top, int64_t left, int64_t out_h, int64_t out_w, int64_t out_c) {
  // A single output row or column never steps by its stride, which may be any value (INT64_MAX):
  // it would only enter the products below.
  if (out_h <= 1) sh = 1;
  if (out_w <= 1) sw = 1;
  PaddedWindow p;
  p.top = top, p.left = left, p.channels = channels;
  p.hp = (out_h - 1) * sh + (kh - 1) * dh + 1;
  p.wp = (out_w - 1) * sw + (kw - 1) * dw + 1;
  p.taps.reserve(static_cast<std::size_t>(kh * kw * channels));
  for (int64_t ky = 0; ky < kh; ++ky)
    for (int64_t kx = 0; kx < kw; ++kx)
      for (int64_t ch = 0; ch < channels; ++ch) p.taps.push_back((ky * dh * p.wp + kx * dw) * channels + ch);
  p.view = {out_h, out_w, sh * p.wp * channels, sw * channels, p.taps.data(), kh * kw * channels, out_c, out_c, out_c};
  return p;
}

// The forward's window over the input: padding as the geometry says.
PaddedWindow forward_window(const ConvGeom& g) {
  return padded_window(g.kh, g.kw, g.dh, g.dw, g.sh, g.sw, g.c, g.pt, g.pl, g.oh, g.ow, g.oc);
}

// The padded copy of image n of an (n, h, w, channels) tensor for window p, in this thread's
// scratch.
const float* padded_image(const PaddedWindow& p, const float* images, int64_t n, int64_t h, int64_t w) {
  float* plane = scratch<float>(p.hp * p.wp * p.channels);
  pad_image(images + n * h * w * p.channels, h, w, p.channels, p.top, p.left, p.hp, p.wp, plane);
  return plane;
}

// out's image n (out_image floats each) = window's product of images' padded image n (h x w
// pixels) with filter, for every image, a group of images per pool chunk. The forward and the
// stride-1 input gradient are both this, over different windows, images and filters.
void multiply_padded_images(const Groups& groups, int64_t num_images, int64_t flops_per_group,
                            const PaddedWindow& window, const float* images, int64_t h, int64_t w,
                            const float* filter, float* out, int64_t out_image, const GemmEpilogue* epilogue = nullptr) {
  const int64_t rows = window.view.out_h * window.view.out_w;
  for_each_group(groups, flops_per_group, [&](int64_t i) {
    for (int64_t n = i * groups.per, n1 = std::min(num_images, n + groups.per); n < n1; ++n) {
      const GemmEpilogue image_epilogue = epilogue ? epilogue->from_row(n * rows) : GemmEpilogue{};
      implicit_gemm::multiply(window.view, padded_image(window, images, n, h, w), filter, out + n * out_image, false,
                              epilogue ? &image_epilogue : nullptr);
    }
  });
}

// The filter of conv_backprop_input's convolution: HWIO (kh, kw, c, oc) flipped in both spatial
// dims with its channel dims swapped, (kh, kw, oc, c).
std::vector<float> flip_filter(const ConvGeom& g, const float* f) {
  std::vector<float> flipped(static_cast<std::size_t>(g.k() * g.oc));
  float* out = flipped.data();
  for (int64_t ky = g.kh - 1; ky >= 0; --ky)
    for (int64_t kx = g.kw - 1; kx >= 0; --kx)
      for (int64_t o = 0; o < g.oc; ++o)
        for (int64_t ch = 0; ch < g.c; ++ch) *out++ = f[((ky * g.kw + kx) * g.c + ch) * g.oc + o];
  return flipped;
}

// With an epilogue (float only: conv2d_epilogue), every block of output pixels gets it on the
// thread that computed the block.
template <class T>
void conv_forward(const ConvGeom& g, const T* x, const T* f, T* y, const GemmEpilogue* epilogue = nullptr) {
  const int64_t k = g.k(), rows = g.pixels();
  const Groups groups = plan_groups(g.n, rows);
  if constexpr (std::is_same_v<T, float>) {
    if (use_direct(g)) {
      multiply_padded_images(groups, g.n, 2 * groups.per * rows * k * g.oc, forward_window(g), x, g.h, g.w, f, y,
                             rows * g.oc, epilogue);
      return;
    }
  }
  // The epilogue of output rows from r on (each gemm below computes its block as rows 0, 1, ...).
  auto rows_from = [&](int64_t r, GemmEpilogue& e) { return epilogue ? &(e = epilogue->from_row(r)) : nullptr; };
  const int n_oc = blas_int(kConvOp, g.oc), n_k = blas_int(kConvOp, k);
  for_each_group(groups, 2 * groups.per * rows * k * g.oc, [&](int64_t i) {
    const int64_t n0 = i * groups.per, n1 = std::min(g.n, n0 + groups.per);
    GemmEpilogue block;
    if (g.pointwise()) {
      gemm<T>(blas_int(kConvOp, (n1 - n0) * rows), n_oc, n_k, x + n0 * rows * k, n_k, false, f, n_oc, false,
              y + n0 * rows * g.oc, n_oc, false, rows_from(n0 * rows, block));
      return;
    }
    for_each_tile<T>(g, n0, n1, [&](int64_t r0, int64_t r1, T* col) {
      im2col(g, x, r0, r1, col);
      gemm<T>(blas_int(kConvOp, r1 - r0), n_oc, n_k, col, n_k, false, f, n_oc, false, y + r0 * g.oc, n_oc, false,
              rows_from(r0, block));
    });
  });
}

template <class T>
void conv_backprop_input(const ConvGeom& g, const T* f, const T* dy, T* dx) {
  const int64_t k = g.k(), rows = g.pixels();
  const int64_t image = g.h * g.w * g.c;
  const Groups groups = plan_groups(g.n, rows);
  if (rows == 0) {  // no window reads any input
    std::fill_n(dx, g.n * image, T(0));
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    // At stride 1 the input gradient is a convolution of dy, padded by the window's span less
    // the forward's padding, with the filter flipped in space and its channel dims swapped.
    if (use_direct(g) && g.sh == 1 && g.sw == 1) {
      const std::vector<float> flipped = flip_filter(g, f);
      const PaddedWindow window = padded_window(g.kh, g.kw, g.dh, g.dw, 1, 1, g.oc, (g.kh - 1) * g.dh - g.pt,
                                                (g.kw - 1) * g.dw - g.pl, g.h, g.w, g.c);
      multiply_padded_images(groups, g.n, 2 * groups.per * rows * k * g.oc, window, dy, g.oh, g.ow, flipped.data(),
                             dx, image);
      return;
    }
  }
  const int n_oc = blas_int(kConvOp, g.oc), n_k = blas_int(kConvOp, k);
  // Groups hold whole images, so no two groups add into the same dx element.
  for_each_group(groups, 2 * groups.per * rows * k * g.oc, [&](int64_t i) {
    const int64_t n0 = i * groups.per, n1 = std::min(g.n, n0 + groups.per);
    if (g.pointwise()) {  // dx = dy f^T, written in place
      gemm<T>(blas_int(kConvOp, (n1 - n0) * rows), n_k, n_oc, dy + n0 * rows * g.oc, n_oc, false, f, n_oc, true,
              dx + n0 * image, n_k);
      return;
    }
    std::fill(dx + n0 * image, dx + n1 * image, T(0));
    for_each_tile<T>(g, n0, n1, [&](int64_t r0, int64_t r1, T* col) {
      gemm<T>(blas_int(kConvOp, r1 - r0), n_k, n_oc, dy + r0 * g.oc, n_oc, false, f, n_oc, true, col, n_k);
      col2im(g, col, r0, r1, dx);
    });
  });
}

template <class T>
void conv_backprop_filter(const ConvGeom& g, const T* x, const T* dy, T* df) {
  const int64_t k = g.k(), rows = g.pixels();
  const int64_t fsize = k * g.oc;
  const Groups groups = plan_groups(g.n, rows);
  if (groups.count == 0 || rows == 0) {  // no output: nothing depends on the filter
    std::fill_n(df, fsize, T(0));
    return;
  }
  const int n_oc = blas_int(kConvOp, g.oc), n_k = blas_int(kConvOp, k);
  // Group 0 writes df; the others write partials, summed in group order afterwards, so the
  // bits depend on the shapes alone.
  std::vector<T> partials(static_cast<std::size_t>((groups.count - 1) * fsize));
  bool direct = false;
  if constexpr (std::is_same_v<T, float>) direct = use_direct(g);
  const PaddedWindow window = direct ? forward_window(g) : PaddedWindow{};
  for_each_group(groups, 2 * groups.per * rows * k * g.oc, [&](int64_t i) {
    const int64_t n0 = i * groups.per, n1 = std::min(g.n, n0 + groups.per);
    T* out = i == 0 ? df : partials.data() + (i - 1) * fsize;
    if constexpr (std::is_same_v<T, float>) {
      if (direct) {
        std::fill_n(out, fsize, 0.0f);
        for (int64_t n = n0; n < n1; ++n)
          implicit_gemm::add_right_gradient(window.view, padded_image(window, x, n, g.h, g.w), dy + n * rows * g.oc,
                                            out);
        return;
      }
    }
    if (g.pointwise()) {
      gemm<T>(n_k, n_oc, blas_int(kConvOp, (n1 - n0) * rows), x + n0 * rows * k, n_k, true, dy + n0 * rows * g.oc,
              n_oc, false, out, n_oc);
      return;
    }
    bool first = true;
    for_each_tile<T>(g, n0, n1, [&](int64_t r0, int64_t r1, T* col) {
      im2col(g, x, r0, r1, col);
      gemm<T>(n_k, n_oc, blas_int(kConvOp, r1 - r0), col, n_k, true, dy + r0 * g.oc, n_oc, false, out, n_oc,
              /*accumulate=*/!first);
      first = false;
    });
  });
  for (int64_t i = 1; i < groups.count; ++i) {
    const T* p = partials.data() + (i - 1) * fsize;
    for (int64_t j = 0; j < fsize; ++j) df[j] += p[j];
  }
}

template <class Fn>
void dispatch_float(DType d, Fn&& fn) {
  if (d == DType::Float64) fn(double{});
  else fn(float{});
}

// The three convolution kernels share their frame: the geometry from inputs 0 and 1 (the
// forward's input and filter, or the shape they stand for), nothing to do for an empty result,
// zeros for a filter gradient over an empty input, and the pass run on the operands' float type.
// The passes take products of the input's dims, which only an input that holds elements bounds
// ((0, 2^40, 2^40, 1) is a valid empty one).
template <class Pass>
void run_conv_pass(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out, Pass&& pass) {
  const ConvGeom g = conv_geometry(in[0], in[1], attrs.get<Conv2DAttrs>());
  const int64_t n = out[0].impl()->shape.num_elements();
  if (n == 0) return;
  if (in[0].impl()->shape.num_elements() == 0) {
    dispatch_float(in[0].impl()->dtype, [&](auto tag) { std::fill_n(data_of<decltype(tag)>(out[0]), n, decltype(tag)(0)); });
    return;
  }
  dispatch_float(in[0].impl()->dtype, [&](auto tag) { pass(g, tag); });
}

void kernel_conv2d(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  run_conv_pass(in, attrs, out, [&](const ConvGeom& g, auto tag) {
    using T = decltype(tag);
    conv_forward<T>(g, data_of<T>(in[0]), data_of<T>(in[1]), data_of<T>(out[0]));
  });
}

// ---- conv2d_epilogue: a float32 convolution and the elementwise ops after it (ops/gemm_epilogue.h's
// GemmEpilogue along the channels), made by the optimiser (src/passes/fuse_product_epilogues.cpp) ----

OpAttrs product_attrs(const Conv2DEpilogueAttrs& e) { return Conv2DAttrs{e.strides, e.dilations, e.padding}; }

std::vector<ValueType> infer_conv2d_epilogue(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const Conv2DEpilogueAttrs& e = attrs.get<Conv2DEpilogueAttrs>();
  return infer_epilogue_node("conv2d_epilogue", OpId::Conv2D, product_attrs(e), EpilogueParts::of(e), in);
}

void kernel_conv2d_epilogue(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const Conv2DEpilogueAttrs& e = attrs.get<Conv2DEpilogueAttrs>();
  const EpilogueParts parts = EpilogueParts::of(e);
  const ConvGeom g = conv_geometry(in[0], in[1], product_attrs(e).get<Conv2DAttrs>());
  const TensorShape product({g.n, g.oh, g.ow, g.oc});
  if (!epilogue_fits(parts, in, out, product))
    return run_steps_eagerly([&](auto op) { return run_epilogue_steps(OpId::Conv2D, product_attrs(e), parts, in, op); }, out);
  if (product.num_elements() == 0) return;
  const GemmEpilogue epilogue = gemm_epilogue_of(parts, in, out, g.oc);
  conv_forward<float>(g, data_of<float>(in[0]), data_of<float>(in[1]), data_of<float>(out[0]), &epilogue);
}

void kernel_conv2d_backprop_input(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  run_conv_pass(in, attrs, out, [&](const ConvGeom& g, auto tag) {
    using T = decltype(tag);
    conv_backprop_input<T>(g, data_of<T>(in[1]), data_of<T>(in[2]), data_of<T>(out[0]));
  });
}

void kernel_conv2d_backprop_filter(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  run_conv_pass(in, attrs, out, [&](const ConvGeom& g, auto tag) {
    using T = decltype(tag);
    conv_backprop_filter<T>(g, data_of<T>(in[0]), data_of<T>(in[2]), data_of<T>(out[0]));
  });
}

// ---- pooling kernels ----

struct PoolGeom {
  int64_t n, h, w, c, kh, kw, sh, sw, oh, ow, pt, pl;
  // The window of output (oy, ox) clipped to the input: rows [y0, y1), cols [x0, x1).
  void window(int64_t oy, int64_t ox, int64_t& y0, int64_t& y1, int64_t& x0, int64_t& x1) const {
    y0 = oy * sh - pt;
    x0 = ox * sw - pl;
    y1 = std::min(y0 + kh, h);
    x1 = std::min(x0 + kw, w);
    y0 = std::max<int64_t>(y0, 0);
    x0 = std::max<int64_t>(x0, 0);
  }
};

// Whether a pooling kernel has nothing to read: its results are empty too, or zeros (the masked
// gradient's channel sums). The kernels take products of the input's dims, which only an input
// that holds elements bounds ((0, 2^40, 2^40, 1) is a valid empty one).
bool empty_pool_input(const Tensor& input) { return input.impl()->shape.num_elements() == 0; }

PoolGeom pool_geometry(const char* op, const Tensor& input, const Pool2DAttrs& a) {
  const auto& x = input.impl()->shape.dims();
  PoolGeom g{};
  g.n = x[0], g.h = x[1], g.w = x[2], g.c = x[3];
  g.kh = a.ksize[0], g.kw = a.ksize[1], g.sh = a.strides[0], g.sw = a.strides[1];
  const Window wh = window_1d(op, "height", g.h, g.kh, 1, g.sh, a.padding);
  const Window ww = window_1d(op, "width", g.w, g.kw, 1, g.sw, a.padding);
  g.oh = wh.out, g.ow = ww.out, g.pt = wh.pad_before, g.pl = ww.pad_before;
  return g;
}

// Runs fn(image) for every image, on the pool when the tensors are large. By image, so that
// the gradient kernels, whose windows overlap within an image, never share an output element.
template <class Fn>
void for_each_image(const PoolGeom& g, Fn&& fn) {
  const int64_t per_image = std::max<int64_t>(1, (g.h * g.w + g.oh * g.ow) * g.c);
  parallel_for(g.n, std::max<int64_t>(1, kParallelMinElements / per_image), [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) fn(n);
  });
}

// Whether v replaces the window's best so far: strictly larger (ties keep the first, rows
// first), and a NaN beats every number but not an earlier NaN, like argmax. The forward value and
// the gradient's routing both use it, so they always agree.
// Bitwise, not short-circuit, operators: no branch for the compiler to keep.
template <class T>
inline bool replaces(T v, T best) {
  return (v > best) | ((v != v) & (best == best));
}

template <class T>
void max_pool_forward(const PoolGeom& g, const T* x, T* y) {
  for_each_image(g, [&](int64_t n) {
    const T* img = x + n * g.h * g.w * g.c;
    T* o = y + n * g.oh * g.ow * g.c;
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox, o += g.c) {
        int64_t y0, y1, x0, x1;
        g.window(oy, ox, y0, y1, x0, x1);
        std::fill_n(o, g.c, -std::numeric_limits<T>::infinity());
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = x0; ix < x1; ++ix) {
            const T* p = img + (iy * g.w + ix) * g.c;
            for (int64_t ch = 0; ch < g.c; ++ch) o[ch] = replaces(p[ch], o[ch]) ? p[ch] : o[ch];
          }
      }
  });
}

// Calls begin(n) for every image, then pixel(n, o, at) for each of its output pixels, then
// end(n), on the thread that ran them: o is the
// pixel's offset in the pooled tensor, at[ch] the input pixel (iy * w + ix) of channel ch's first
// maximum in the window, by `replaces`. Per image on the pool. The selection is branch-free and
// its index has the value's width (int32 for float when the image allows), so that the loop
// over channels vectorises: with data in no particular order a branch per element mispredicts
// half the time. The geometry is copied into the task: index stores could otherwise alias the
// shared struct's fields, and the compiler would reload them for every element.
template <class I, class T, class Begin, class Pixel, class End>
void for_each_max_as(const PoolGeom& geom, const T* x, Begin& begin, Pixel& pixel, End& end) {
  for_each_image(geom, [&](int64_t n) {
    const PoolGeom g = geom;
    const int64_t c = g.c;
    begin(n);
    const T* img = x + n * g.h * g.w * c;
    std::vector<T> best(static_cast<std::size_t>(c));
    std::vector<I> at(static_cast<std::size_t>(c));
    T* __restrict const b = best.data();
    I* __restrict const a = at.data();
    int64_t o = n * g.oh * g.ow * c;
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox, o += c) {
        int64_t y0, y1, x0, x1;
        g.window(oy, ox, y0, y1, x0, x1);
        const int64_t first = y0 * g.w + x0;
        std::copy_n(img + first * c, c, b);
        std::fill_n(a, c, static_cast<I>(first));
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = x0; ix < x1; ++ix) {
            const I pix = static_cast<I>(iy * g.w + ix);
            const T* __restrict p = img + static_cast<int64_t>(pix) * c;
            for (int64_t ch = 0; ch < c; ++ch) {
              const T v = p[ch];
              const bool r = replaces(v, b[ch]);
              b[ch] = r ? v : b[ch];
              a[ch] = r ? pix : a[ch];
            }
          }
        pixel(n, o, a);
      }
    end(n);
  });
}

template <class T, class Begin, class Pixel, class End>
void for_each_max(const PoolGeom& g, const T* x, Begin&& begin, Pixel&& pixel, End&& end) {
  if (sizeof(T) == 4 && g.h * g.w <= std::numeric_limits<int32_t>::max())
    for_each_max_as<int32_t>(g, x, begin, pixel, end);
  else
    for_each_max_as<int64_t>(g, x, begin, pixel, end);
}

// ---- max pooling over windows that tile the input ----
// Windows as wide as their strides, without padding (the 2 x 2 pool of stride 2, VALID or SAME on
// even sizes): each window lies inside the input, so the forward starts from the window's first
// pixel instead of clipping it and filling -inf, and runs as one loop per pixel over the
// channels. That loop has AVX-512 and AVX2 copies (the library is built for baseline x86-64).
// Alone, the CNN demo's first pool (128 x 28 x 28 x 32) went 680-860 -> 170-310 us on two
// threads and the second 180-300 -> 77-105 us; in the demo's step, 405 -> 239 and 341 -> 270
// us. Same values as the general kernel: the same `replaces` order from the first pixel (which
// always replaces the general kernel's -inf, or equals it).
//
// The float32 gradient over such windows has an AVX-512 kernel written with intrinsics
// (pool_grad_avx512.h): each window read once, 16 channels to a vector, every element of dx
// written once. Written in C++ the same way it ran no faster than the general kernel (1,073
// against 946 us on two threads): gcc 12 kept the selection and the scatter scalar.
// The window must fit the input: its size kh * kw is then at most the image's h * w, which the
// input tensor's own size bounds (a window of INT64_MAX squared overflowed here).
bool tiles_input(const PoolGeom& g) {
  return g.kh == g.sh && g.kw == g.sw && g.pt == 0 && g.pl == 0 && g.kh <= g.h && g.kw <= g.w &&
         g.oh <= g.h / g.kh && g.ow <= g.w / g.kw;
}

template <class T>
[[gnu::always_inline]] inline void tiled_max_pool_images(const PoolGeom& g, const T* x, T* y, int64_t n0, int64_t n1) {
  const int64_t c = g.c, window = g.kh * g.kw;
  for (int64_t n = n0; n < n1; ++n) {
    const T* img = x + n * g.h * g.w * c;
    T* o = y + n * g.oh * g.ow * c;
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox, o += c) {
        const T* win = img + (oy * g.kh * g.w + ox * g.kw) * c;
        T* __restrict best = o;
        for (int64_t ch = 0; ch < c; ++ch) best[ch] = win[ch];
        for (int64_t j = 1; j < window; ++j) {
          const T* __restrict p = win + ((j / g.kw) * g.w + j % g.kw) * c;
          for (int64_t ch = 0; ch < c; ++ch) best[ch] = replaces(p[ch], best[ch]) ? p[ch] : best[ch];
        }
      }
  }
}

#define TG_TILED_MAX_POOL(suffix, target)                                                                       \
  template <class T>                                                                                            \
  target void tiled_max_pool_##suffix(const PoolGeom& g, const T* x, T* y, int64_t n0, int64_t n1) {           \
    tiled_max_pool_images(g, x, y, n0, n1);                                                                     \
  }
TG_TILED_MAX_POOL(avx512, __attribute__((target("avx512f"))))
TG_TILED_MAX_POOL(avx2, __attribute__((target("avx2"))))
TG_TILED_MAX_POOL(baseline, )
#undef TG_TILED_MAX_POOL

template <class T>
void tiled_max_pool(const PoolGeom& g, const T* x, T* y) {
  static const auto fn = simd::cpu_has(simd::Isa::kAvx512) ? &tiled_max_pool_avx512<T>
                         : simd::cpu_has(simd::Isa::kAvx2) ? &tiled_max_pool_avx2<T>
                                                           : &tiled_max_pool_baseline<T>;
  for_each_image(g, [&](int64_t n) { fn(g, x, y, n, n + 1); });
}

template <class T>
void avg_pool_forward(const PoolGeom& g, const T* x, T* y) {
  for_each_image(g, [&](int64_t n) {
    const T* img = x + n * g.h * g.w * g.c;
    T* o = y + n * g.oh * g.ow * g.c;
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox, o += g.c) {
        int64_t y0, y1, x0, x1;
        g.window(oy, ox, y0, y1, x0, x1);
        std::fill_n(o, g.c, T(0));
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = x0; ix < x1; ++ix) {
            const T* p = img + (iy * g.w + ix) * g.c;
            for (int64_t ch = 0; ch < g.c; ++ch) o[ch] += p[ch];
          }
        // Only the elements inside the input count (TF's SAME average).
        const T count = static_cast<T>((y1 - y0) * (x1 - x0));
        for (int64_t ch = 0; ch < g.c; ++ch) o[ch] /= count;
      }
  });
}

template <class T>
void avg_pool_backward(const PoolGeom& g, const T* dy, T* dx) {
  for_each_image(g, [&](int64_t n) {
    T* img = dx + n * g.h * g.w * g.c;
    std::fill_n(img, g.h * g.w * g.c, T(0));
    const T* d = dy + n * g.oh * g.ow * g.c;
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox, d += g.c) {
        int64_t y0, y1, x0, x1;
        g.window(oy, ox, y0, y1, x0, x1);
        const T count = static_cast<T>((y1 - y0) * (x1 - x0));
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = x0; ix < x1; ++ix) {
            T* p = img + (iy * g.w + ix) * g.c;
            for (int64_t ch = 0; ch < g.c; ++ch) p[ch] += d[ch] / count;
          }
      }
  });
}

void kernel_max_pool2d(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const PoolGeom g = pool_geometry("max_pool2d", in[0], attrs.get<Pool2DAttrs>());
  if (empty_pool_input(in[0])) return;
  dispatch_float(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    if (tiles_input(g)) return tiled_max_pool<T>(g, data_of<T>(in[0]), data_of<T>(out[0]));
    max_pool_forward<T>(g, data_of<T>(in[0]), data_of<T>(out[0]));
  });
}

// dx of max_pool2d from dy: dy added at each window's first maximum, then zeroed where `mask`
// (when not null; dx's shape) is false - relu's gradient taken in by max_pool2d_grad_masked. An
// add of +0 to dx's +0 or to a sum of dy's leaves it, so masking each addition gives
// where(mask, dx, 0)'s bits. With `sums` (float32), each image's rows of dx (a pixel's channels
// each) are added to their leaves of the sums over rows, by the thread that wrote them, while
// they are in its cache.
template <class T>
void max_pool_backward(const PoolGeom& g, const T* x, const T* dy, const bool* mask, T* dx,
                       ColumnSumLeaves* sums = nullptr) {
  const int64_t pixels = g.h * g.w, image = pixels * g.c;
  auto add_sums = [&](int64_t n) {
    if constexpr (std::is_same_v<T, float>) {
      if (!sums) return;
      // This thread wrote all of image n's rows, and only those here: a leaf that reaches
      // into another image is summed after, from dx.
      GemmEpilogue e;
      e.column_sums = sums;
      e = e.owning(n * pixels, (n + 1) * pixels);
      add_rows_to_column_sums(e, dx, g.c, n * pixels, pixels, 0, g.c);
    }
  };
  if constexpr (std::is_same_v<T, float>) {
    if (tiles_input(g) && g.kh * g.kw <= 16 && own_avx512_kernels() && simd::cpu_has_avx512_bw_vl()) {
      const pool_avx512::TiledPool p{g.h, g.w, g.c, g.kh, g.kw, g.oh, g.ow};
      for_each_image(g, [&](int64_t n) {
        pool_avx512::tiled_max_pool_grad(p, x + n * image, dy + n * g.oh * g.ow * g.c, mask ? mask + n * image : nullptr,
                                         dx + n * image);
        add_sums(n);
      });
      return;
    }
  }
  // The mask read as bytes, as kernel_where does, so that the select needs no branch.
  const auto* m = reinterpret_cast<const unsigned char*>(mask);
  for_each_max(
      g, x, [&](int64_t n) { std::fill_n(dx + n * image, image, T(0)); },
      [&, c = g.c](int64_t n, int64_t o, const auto* at) {
        T* d = dx + n * image;
        if (!m) {
          for (int64_t ch = 0; ch < c; ++ch) d[static_cast<int64_t>(at[ch]) * c + ch] += dy[o + ch];
          return;
        }
        const unsigned char* mn = m + n * image;
        for (int64_t ch = 0; ch < c; ++ch) {
          const int64_t i = static_cast<int64_t>(at[ch]) * c + ch;
          d[i] += mn[i] != 0 ? dy[o + ch] : T(0);
        }
      },
      add_sums);
}

void kernel_max_pool2d_grad(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const PoolGeom g = pool_geometry("max_pool2d_grad", in[0], attrs.get<Pool2DAttrs>());
  if (empty_pool_input(in[0])) return;
  dispatch_float(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    max_pool_backward<T>(g, data_of<T>(in[0]), data_of<T>(in[1]), nullptr, data_of<T>(out[0]));
  });
}

// ---- max_pool2d_grad_masked: where(mask, max_pool2d_grad(x, dy), 0) in one node, made by the
// optimiser (src/passes/fuse_product_epilogues.cpp): a convolution layer's relu gradient taken
// in by the pooling gradient after it, where it had read and written the whole of dx again
// (the CNN demo's first layer: 1.15 ms of its step). ----

constexpr const char* kMaskedPoolGrad = "max_pool2d_grad_masked";

std::vector<ValueType> infer_max_pool2d_grad_masked(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const MaxPoolGradMaskedAttrs& a = attrs.get<MaxPoolGradMaskedAttrs>();
  ValueType dx = infer_pool_grad(kMaskedPoolGrad, "max_pool2d", {in[0], in[1]}, a.pool).at(0);
  require_dtype(kMaskedPoolGrad, in[2], {DType::Bool}, "a mask");
  dx.shape = broadcast_shapes(kMaskedPoolGrad, in[2].shape, dx.shape);  // where's result
  if (!a.channel_sums) return {dx};
  // reduce_sum over every dim but the channels (what sum_to_like(dx, bias) computes).
  const int64_t channels = dx.shape.has_rank() ? dx.shape.dims().back() : None;
  return {dx, ValueType{dx.dtype, TensorShape({channels})}};
}

void kernel_max_pool2d_grad_masked(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const MaxPoolGradMaskedAttrs& a = attrs.get<MaxPoolGradMaskedAttrs>();
  const TensorShape& shape = in[0].impl()->shape;
  if (!(in[2].impl()->shape == shape) || (a.channel_sums && in[0].impl()->dtype != DType::Float32)) {
    // A mask that broadcasts at run time (None dims), or sums the fused kernel does not make
    // (float32's leaves only): the ops by their own kernels.
    const Tensor dx = run_op_eager(op_def(OpId::MaxPool2DGrad), {in[0], in[1]}, a.pool).at(0);
    const Tensor zero = run_op_eager(op_def(OpId::ZerosLike), {dx}, OpAttrs{}).at(0);
    const Tensor r = run_op_eager(op_def(OpId::Where), {in[2], dx, zero}, OpAttrs{}).at(0);
    copy_elements(r, out[0]);
    if (a.channel_sums)
      copy_elements(run_op_eager(op_def(OpId::ReduceSum), {r}, ReduceAttrs{{0, 1, 2}, false}).at(0), out[1]);
    return;
  }
  const PoolGeom g = pool_geometry(kMaskedPoolGrad, in[0], a.pool);
  if (empty_pool_input(in[0])) {
    if (a.channel_sums) std::fill_n(data_of<float>(out[1]), g.c, 0.0f);
    return;
  }
  std::optional<EpilogueColumnSums> sums;
  if (a.channel_sums) sums.emplace(g.n * g.h * g.w, g.c);
  dispatch_float(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    max_pool_backward<T>(g, data_of<T>(in[0]), data_of<T>(in[1]), data_of<bool>(in[2]), data_of<T>(out[0]),
                         sums ? sums->leaves() : nullptr);
  });
  if (sums) sums->finish(data_of<float>(out[0]), data_of<float>(out[1]));
}

void kernel_max_pool2d_grad_grad(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const PoolGeom g = pool_geometry("max_pool2d_grad_grad", in[0], attrs.get<Pool2DAttrs>());
  if (empty_pool_input(in[0])) return;
  dispatch_float(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    T* y = data_of<T>(out[0]);
    const T* src = data_of<T>(in[1]);
    const int64_t image = g.h * g.w * g.c;
    for_each_max(
        g, data_of<T>(in[0]), [](int64_t) {},
        [&, c = g.c](int64_t n, int64_t o, const auto* at) {
          const T* s = src + n * image;
          for (int64_t ch = 0; ch < c; ++ch) y[o + ch] = s[static_cast<int64_t>(at[ch]) * c + ch];
        },
        [](int64_t) {});
  });
}

void kernel_avg_pool2d(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const PoolGeom g = pool_geometry("avg_pool2d", in[0], attrs.get<Pool2DAttrs>());
  if (empty_pool_input(in[0])) return;
  dispatch_float(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    avg_pool_forward<T>(g, data_of<T>(in[0]), data_of<T>(out[0]));
  });
}

void kernel_avg_pool2d_grad(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const PoolGeom g = pool_geometry("avg_pool2d_grad", in[0], attrs.get<Pool2DAttrs>());
  if (empty_pool_input(in[0])) return;
  dispatch_float(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    avg_pool_backward<T>(g, data_of<T>(in[1]), data_of<T>(out[0]));
  });
}

// ---- gradient rules ----
// Each op is linear in the tensors it reads the values of (the max pool ops: given which
// element is each window's maximum), so every rule is another op of the family, the adjoint:
//   conv2d(x, f)                  dx = backprop_input(x, f, dy)   df = backprop_filter(x, f, dy)
//   backprop_input(x~, f, d) = G  df = backprop_filter(G, f, d)   dd = conv2d(G, f)
//   backprop_filter(x, f~, d) = G dx = backprop_input(x, G, d)    dd = conv2d(x, G)
//   max_pool2d(x)                 dx = max_pool2d_grad(x, dy)
//   max_pool2d_grad(x, d) = G     dd = max_pool2d_grad_grad(x, G)
//   max_pool2d_grad_grad(x, g)    dg = max_pool2d_grad(x, dy)
//   avg_pool2d(x)                 dx = avg_pool2d_grad(x, dy)
//   avg_pool2d_grad(x~, d) = G    dd = avg_pool2d(G)
// (x~, f~: shape only, no gradient). The max pool ops get none with respect to x either: moving
// x changes which element wins only at ties, a set of measure zero, so the derivative is 0
// elsewhere, as in TensorFlow.

const Conv2DAttrs& conv_attrs(const GradInputs& g) { return g.attrs.get<Conv2DAttrs>(); }
const Pool2DAttrs& pool_attrs(const GradInputs& g) { return g.attrs.get<Pool2DAttrs>(); }

Tensor conv2d_with(const Tensor& x, const Tensor& f, const Conv2DAttrs& a) {
  return apply_op1(OpId::Conv2D, {x, f}, a);
}
Tensor avg_pool_with(const Tensor& x, const Pool2DAttrs& a) { return apply_op1(OpId::AvgPool2D, {x}, a); }

// Each gradient is a product as large as the forward one: only those wanted are computed.
std::vector<Tensor> grad_conv2d(const GradInputs& g) {
  const Tensor& dy = g.grads[0];
  return {g.wants(0) ? conv2d_backprop_input(g.inputs[0], g.inputs[1], dy, conv_attrs(g)) : Tensor(),
          g.wants(1) ? conv2d_backprop_filter(g.inputs[0], g.inputs[1], dy, conv_attrs(g)) : Tensor()};
}
std::vector<Tensor> grad_conv2d_backprop_input(const GradInputs& g) {
  const Tensor& G = g.grads[0];
  return {Tensor(), g.wants(1) ? conv2d_backprop_filter(G, g.inputs[1], g.inputs[2], conv_attrs(g)) : Tensor(),
          g.wants(2) ? conv2d_with(G, g.inputs[1], conv_attrs(g)) : Tensor()};
}
std::vector<Tensor> grad_conv2d_backprop_filter(const GradInputs& g) {
  const Tensor& G = g.grads[0];
  return {g.wants(0) ? conv2d_backprop_input(g.inputs[0], G, g.inputs[2], conv_attrs(g)) : Tensor(), Tensor(),
          g.wants(2) ? conv2d_with(g.inputs[0], G, conv_attrs(g)) : Tensor()};
}
std::vector<Tensor> grad_max_pool2d(const GradInputs& g) {
  return {max_pool2d_grad(g.inputs[0], g.grads[0], pool_attrs(g))};
}
std::vector<Tensor> grad_max_pool2d_grad(const GradInputs& g) {
  return {Tensor(), max_pool2d_grad_grad(g.inputs[0], g.grads[0], pool_attrs(g))};
}
std::vector<Tensor> grad_max_pool2d_grad_grad(const GradInputs& g) {
  return {Tensor(), max_pool2d_grad(g.inputs[0], g.grads[0], pool_attrs(g))};
}
std::vector<Tensor> grad_avg_pool2d(const GradInputs& g) {
  return {avg_pool2d_grad(g.inputs[0], g.grads[0], pool_attrs(g))};
}
std::vector<Tensor> grad_avg_pool2d_grad(const GradInputs& g) {
  return {Tensor(), avg_pool_with(g.grads[0], pool_attrs(g))};
}

}  // namespace

Tensor conv2d_backprop_input(const Tensor& input_like, const Tensor& filter, const Tensor& grad,
                             const Conv2DAttrs& attrs) {
  return apply_op1(OpId::Conv2DBackpropInput, {input_like, filter, grad}, attrs);
}
Tensor conv2d_backprop_filter(const Tensor& input, const Tensor& filter_like, const Tensor& grad,
                              const Conv2DAttrs& attrs) {
  return apply_op1(OpId::Conv2DBackpropFilter, {input, filter_like, grad}, attrs);
}
Tensor max_pool2d_grad(const Tensor& input, const Tensor& grad, const Pool2DAttrs& attrs) {
  return apply_op1(OpId::MaxPool2DGrad, {input, grad}, attrs);
}
Tensor max_pool2d_grad_grad(const Tensor& input, const Tensor& g, const Pool2DAttrs& attrs) {
  return apply_op1(OpId::MaxPool2DGradGrad, {input, g}, attrs);
}
Tensor avg_pool2d_grad(const Tensor& input_like, const Tensor& grad, const Pool2DAttrs& attrs) {
  return apply_op1(OpId::AvgPool2DGrad, {input_like, grad}, attrs);
}

void register_conv_ops(OpDef* t) {
  set_op(t, OpId::Conv2D, &infer_conv2d, &kernel_conv2d);
  set_op(t, OpId::Conv2DEpilogue, &infer_conv2d_epilogue, &kernel_conv2d_epilogue);
  set_op(t, OpId::Conv2DBackpropInput, &infer_conv2d_backprop_input, &kernel_conv2d_backprop_input);
  set_op(t, OpId::Conv2DBackpropFilter, &infer_conv2d_backprop_filter, &kernel_conv2d_backprop_filter);
  set_op(t, OpId::MaxPool2D, &infer_max_pool2d, &kernel_max_pool2d);
  set_op(t, OpId::MaxPool2DGrad, &infer_max_pool2d_grad, &kernel_max_pool2d_grad);
  set_op(t, OpId::MaxPool2DGradMasked, &infer_max_pool2d_grad_masked, &kernel_max_pool2d_grad_masked);
  set_op(t, OpId::MaxPool2DGradGrad, &infer_max_pool2d_grad_grad, &kernel_max_pool2d_grad_grad);
  set_op(t, OpId::AvgPool2D, &infer_avg_pool2d, &kernel_avg_pool2d);
  set_op(t, OpId::AvgPool2DGrad, &infer_avg_pool2d_grad, &kernel_avg_pool2d_grad);
  set_grad(t, OpId::Conv2D, &grad_conv2d);
  set_grad(t, OpId::Conv2DBackpropInput, &grad_conv2d_backprop_input);
  set_grad(t, OpId::Conv2DBackpropFilter, &grad_conv2d_backprop_filter);
  set_grad(t, OpId::MaxPool2D, &grad_max_pool2d);
  set_grad(t, OpId::MaxPool2DGrad, &grad_max_pool2d_grad);
  set_grad(t, OpId::MaxPool2DGradGrad, &grad_max_pool2d_grad_grad);
  set_grad(t, OpId::AvgPool2D, &grad_avg_pool2d);
  set_grad(t, OpId::AvgPool2DGrad, &grad_avg_pool2d_grad);
}

}  // namespace detail

Tensor conv2d(const Tensor& input, const Tensor& filter, std::vector<int64_t> strides, Padding padding,
              std::vector<int64_t> dilations) {
  const char* op = "conv2d";
  return detail::apply_op1(detail::OpId::Conv2D, {input, filter},
                           detail::Conv2DAttrs{detail::spatial_pair(op, "strides", strides),
                                               detail::spatial_pair(op, "dilations", dilations),
                                               static_cast<int64_t>(padding)});
}

namespace {
detail::Pool2DAttrs pool_attrs_of(const char* op, const std::vector<int64_t>& ksize,
                                  const std::vector<int64_t>& strides, Padding padding) {
  return detail::Pool2DAttrs{detail::spatial_pair(op, "ksize", ksize),
                             detail::spatial_pair(op, "strides", strides), static_cast<int64_t>(padding)};
}
}  // namespace

Tensor max_pool2d(const Tensor& input, std::vector<int64_t> ksize, std::vector<int64_t> strides,
                  Padding padding) {
  return detail::apply_op1(detail::OpId::MaxPool2D, {input},
                           pool_attrs_of("max_pool2d", ksize, strides, padding));
}

Tensor avg_pool2d(const Tensor& input, std::vector<int64_t> ksize, std::vector<int64_t> strides,
                  Padding padding) {
  return detail::apply_op1(detail::OpId::AvgPool2D, {input},
                           pool_attrs_of("avg_pool2d", ksize, strides, padding));
}

}  // namespace tg
