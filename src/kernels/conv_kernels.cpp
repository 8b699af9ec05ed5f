#include "kernels/conv_kernels.h"

#include <algorithm>
#include <atomic>
#include <type_traits>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/gemm.h"
#include "kernels/implicit_gemm.h"
#include "kernels/onednn_conv.h"
#include "kernels/pool_kernels.h"
#include "kernels/simd_math.h"

namespace tg::detail {
namespace {

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

// Below this much work a product runs on the calling thread: waking threads costs more.
constexpr int64_t kParallelFlops = int64_t{1} << 23;

// Runs fn(group) for every group, on the pool when the work pays for waking threads
// (flops_per_group is the GEMM work of a full group).
template <class Fn>
void for_each_group(const Groups& groups, int64_t flops_per_group, Fn&& fn) {
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

// implicit_gemm::multiply's blocks of output columns: a product's columns split at multiples of
// this are summed as they would be whole.
constexpr int64_t kColumnBlock = 64;

// Image n's product (multiply_padded_images) split over the pool, for when there are fewer
// groups of images than threads (a single image, at inference): the padded image is made once
// on the calling thread and every part reads it. Parts take blocks of 64 output columns
// (multiply's own column blocks, so no element's sum changes: the same bits as whole) where
// there is a block per thread, else bands of output rows (each row's sum is its own).
void multiply_padded_image_in_parts(const PaddedWindow& window, const float* images, int64_t n, int64_t h, int64_t w,
                                    const float* filter, float* out, const GemmEpilogue* epilogue, int parts) {
  const implicit_gemm::Layout& whole = window.view;
  const int64_t rows = whole.out_h * whole.out_w;
  const float* plane = padded_image(window, images, n, h, w);
  const GemmEpilogue image_epilogue = epilogue ? epilogue->from_row(n * rows) : GemmEpilogue{};
  const GemmEpilogue* e = epilogue ? &image_epilogue : nullptr;
  const int64_t blocks = (whole.n + kColumnBlock - 1) / kColumnBlock;
  if (blocks >= parts) {
    parallel_parts(parts, [&](int p) {
      const int64_t c0 = blocks * p / parts * kColumnBlock, c1 = std::min(whole.n, blocks * (p + 1) / parts * kColumnBlock);
      implicit_gemm::Layout l = whole;
      l.n = c1 - c0;
      implicit_gemm::multiply(l, plane, filter + c0, out + c0, false, e, c0);
    });
    return;
  }
  parallel_parts(parts, [&](int p) {
    const int64_t y0 = whole.out_h * p / parts, y1 = whole.out_h * (p + 1) / parts;
    implicit_gemm::Layout l = whole;
    l.out_h = y1 - y0;
    const GemmEpilogue band = e ? e->from_row(y0 * whole.out_w) : GemmEpilogue{};
    implicit_gemm::multiply(l, plane + y0 * whole.row_step, filter, out + y0 * whole.out_w * whole.c_stride, false,
                            e ? &band : nullptr);
  });
}

// out's image n (out_image floats each) = window's product of images' padded image n (h x w
// pixels) with filter, for every image, a group of images per pool chunk (or, with fewer groups
// than threads, each image over all threads). The forward and the stride-1 input gradient are
// both this, over different windows, images and filters.
void multiply_padded_images(const Groups& groups, int64_t num_images, int64_t flops_per_group,
                            const PaddedWindow& window, const float* images, int64_t h, int64_t w,
                            const float* filter, float* out, int64_t out_image, const GemmEpilogue* epilogue = nullptr) {
  const int64_t rows = window.view.out_h * window.view.out_w;
  const int threads = num_threads();
  if (groups.count < threads && flops_per_group / groups.per >= kParallelFlops &&
      ((window.view.n + kColumnBlock - 1) / kColumnBlock >= threads || window.view.out_h >= threads)) {
    for (int64_t n = 0; n < num_images; ++n)
      multiply_padded_image_in_parts(window, images, n, h, w, filter, out + n * out_image, epilogue, threads);
    return;
  }
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

// ---- oneDNN (onednn_conv.h) ----

std::atomic<ConvBackend> g_backend{ConvBackend::automatic};

// Whether oneDNN computes this direction of this float32 geometry: the rule measured with
// bench/conv_bench.cpp's conv_layers rows on this project's AVX-512 machines (the CNN's layers,
// resnet18's at batch 1 and 32, 1 and 2 threads), where oneDNN's kernels (brgconv, jit avx512)
// beat ours by 10-40% and its parts use the second core for a single image. Ours stay for:
// - few input channels: a forward window of under 32 taps (the CNN's 3x3x1 layer), and both
//   gradients under 8 channels (resnet's 7x7x3 stem: input gradient 149 against 355 ms);
// - the pointwise window, which is a plain GEMM (not measured);
// - a forward whose filter dwarfs its output (7x7x512 at batch 1: oneDNN reorders 9 MB of
//   filter per call), and a filter gradient over under 100 output pixels;
// - on Intel cores, a single image's forward whose filter is over twice the image: oneDNN runs
//   it as one part (onednn::bands_read_filter_cheaply), the own kernels split its output
//   columns over the threads (resnet18 at batch 1 on Emerald Rapids, 2 threads: 33.7 -> 25.3
//   ms; 1 thread unchanged). Zen 4, not measured so, keeps oneDNN;
// - CPUs without AVX-512, where the rule was not measured.
// The rule does not depend on the thread count, so neither do the bits.
bool onednn_wins(onednn::ConvDirection d, const ConvGeom& g) {
  if (!own_avx512_kernels() || g.pointwise()) return false;
  const int64_t output_pixels = g.n * g.oh * g.ow;
  switch (d) {
    case onednn::ConvDirection::forward:
      if (g.n == 1 && !onednn::bands_read_filter_cheaply(g) && simd::cpu_is_intel()) return false;
      return g.k() >= 32 && !(output_pixels < 64 && g.k() * g.oc > (int64_t{1} << 20));
    case onednn::ConvDirection::backprop_input: return g.c >= 8;
    case onednn::ConvDirection::backprop_filter: return g.c >= 8 && output_pixels >= 100;
  }
  return false;
}

bool use_onednn(onednn::ConvDirection d, const ConvGeom& g) {
  switch (g_backend.load(std::memory_order_relaxed)) {
    case ConvBackend::own: return false;
    case ConvBackend::onednn: return true;
    case ConvBackend::automatic: break;
  }
  return onednn_wins(d, g);
}

}  // namespace

void set_conv_backend(ConvBackend backend) { g_backend.store(backend, std::memory_order_relaxed); }
ConvBackend conv_backend() { return g_backend.load(std::memory_order_relaxed); }

template <class T>
void conv_forward(const ConvGeom& g, const T* x, const T* f, T* y, const GemmEpilogue* epilogue) {
  const int64_t k = g.k(), rows = g.pixels();
  const Groups groups = plan_groups(g.n, rows);
  if constexpr (std::is_same_v<T, float>) {
    if (use_onednn(onednn::ConvDirection::forward, g) && onednn::conv_forward(g, x, f, y, epilogue)) return;
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
    if (use_onednn(onednn::ConvDirection::backprop_input, g) && onednn::conv_backprop_input(g, f, dy, dx)) return;
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
  if constexpr (std::is_same_v<T, float>) {
    if (use_onednn(onednn::ConvDirection::backprop_filter, g) && onednn::conv_backprop_filter(g, x, dy, df)) return;
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

bool conv_forward_max_pool(const ConvGeom& g, const float* x, const float* f, const GemmEpilogue* epilogue,
                           const PoolGeom& pool, float* y) {
  const int64_t rows = g.pixels(), pooled = pool.oh * pool.ow * pool.c;
  PoolGeom image_pool = pool;
  image_pool.n = 1;
  if (use_onednn(onednn::ConvDirection::forward, g)) {
    // conv_forward's oneDNN parts (or, where it declines, whatever conv_forward falls back to:
    // the caller's unfused path gives those bits).
    struct Pooling {
      const PoolGeom& one;
      float* y;
      int64_t pooled;
    } p{image_pool, y, pooled};
    return onednn::conv_forward_by_image(g, x, f, epilogue, [](void* c, int64_t n, const float* image) {
      const Pooling& k = *static_cast<const Pooling*>(c);
      max_pool_forward<float>(k.one, image, k.y + n * k.pooled);  // nested: on this thread
    }, &p);
  }
  if (!use_direct(g)) return false;
  const Groups groups = plan_groups(g.n, rows);  // conv_forward's groups: the same split
  const PaddedWindow window = forward_window(g);
  for_each_group(groups, 2 * groups.per * rows * g.k() * g.oc, [&](int64_t i) {
    // Not scratch<float>: padded_image holds that one.
    thread_local std::vector<float> image_out;
    image_out.resize(static_cast<std::size_t>(rows * g.oc));
    for (int64_t n = i * groups.per, n1 = std::min(g.n, n + groups.per); n < n1; ++n) {
      const GemmEpilogue image_epilogue = epilogue ? epilogue->from_row(n * rows) : GemmEpilogue{};
      implicit_gemm::multiply(window.view, padded_image(window, x, n, g.h, g.w), f, image_out.data(), false,
                              epilogue ? &image_epilogue : nullptr);
      max_pool_forward<float>(image_pool, image_out.data(), y + n * pooled);  // nested: runs on this thread
    }
  });
  return true;
}

#define TG_CONV_KERNELS(T)                                                                      \
  template void conv_forward<T>(const ConvGeom&, const T*, const T*, T*, const GemmEpilogue*); \
  template void conv_backprop_input<T>(const ConvGeom&, const T*, const T*, T*);               \
  template void conv_backprop_filter<T>(const ConvGeom&, const T*, const T*, T*);
TG_CONV_KERNELS(float)
TG_CONV_KERNELS(double)
#undef TG_CONV_KERNELS

}  // namespace tg::detail
