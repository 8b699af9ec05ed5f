// The convolution kernels on raw NHWC / HWIO buffers, given the geometry the op has checked.
//
// float32 goes to oneDNN (onednn_conv.h) where it measured faster, a rule of the shapes and
// direction alone (conv_kernels.cpp's onednn_wins; docs/DECISIONS.md): on AVX-512 CPUs, every
// window but the pointwise one with enough input channels, except a forward whose filter dwarfs
// its output and a filter gradient over a few output pixels. It falls back to the kernels below
// wherever oneDNN has only its reference kernel.
//
// Otherwise float32 on a CPU with AVX-512F runs the implicit-GEMM kernels of implicit_gemm.h: each image
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
// Every way, groups of images (for oneDNN also bands of one image's rows) are spread over the
// thread pool; their boundaries depend only on the shapes, and the filter gradient sums one
// partial per group in group order, so the bits never depend on timing or the thread count.
#pragma once
#include <cstdint>

namespace tg::detail {

struct GemmEpilogue;  // kernels/gemm_epilogue.h
struct PoolGeom;      // kernels/pool_kernels.h

/// A convolution's sizes, every one concrete and checked (conv.cpp's conv_geometry).
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

/// Which kernels float32 convolutions run on. `automatic` is the rule measured on this machine
/// (conv_kernels.cpp's onednn_wins); the others force one side, for the tests and the benchmark
/// (a geometry oneDNN has no optimised kernel for still runs on the own kernels). Process-wide.
enum class ConvBackend { automatic, own, onednn };
void set_conv_backend(ConvBackend backend);
ConvBackend conv_backend();

/// y = conv2d(x, f); with an epilogue (float only: conv2d_epilogue), every block of output pixels
/// gets it on the thread that computed the block.
template <class T>
void conv_forward(const ConvGeom& g, const T* x, const T* f, T* y, const GemmEpilogue* epilogue = nullptr);
/// y = max_pool(conv2d(x, f) with `epilogue`) (float32, conv2d_epilogue with a max pool), one
/// image at a time: each image's convolution into this thread's scratch, pooled there while it
/// is in cache, so the full-resolution result is never written. `pool` is the pooling of the
/// whole (g.n, g.oh, g.ow, g.oc) result. The bits are conv_forward's then max_pool_forward's:
/// on the own implicit GEMM (which computes each image alone), and on oneDNN's image groups
/// (each image taken out of the group's result with its epilogue, then pooled); returns false,
/// writing nothing, elsewhere.
bool conv_forward_max_pool(const ConvGeom& g, const float* x, const float* f, const GemmEpilogue* epilogue,
                           const PoolGeom& pool, float* y);
/// dx, the gradient with respect to the input, from the filter and dy.
template <class T>
void conv_backprop_input(const ConvGeom& g, const T* f, const T* dy, T* dx);
/// df, the gradient with respect to the filter, from the input and dy.
template <class T>
void conv_backprop_filter(const ConvGeom& g, const T* x, const T* dy, T* df);

}  // namespace tg::detail
