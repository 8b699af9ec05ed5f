// Direct float32 convolution kernels for AVX-512 (conv_direct_avx512.cpp), used by conv.cpp in
// place of im2col + GEMM when the CPU has AVX-512F.
//
// Both kernels see one image as an implicit GEMM over a zero-padded copy of it: output pixel p
// reads the window entry k = (ky, kx, c) at base(p) + taps[k] in the padded image, so no
// im2col matrix is written. The filter is the (K, out_channels) matrix as stored (HWIO), and
// every output element is summed in k order within fixed blocks: the bits depend on the
// shapes alone, never on the thread count.
#pragma once
#include <cstdint>

namespace tg::detail::conv_direct {

/// One padded image and the window that walks it.
struct ImageGeom {
  int64_t out_h = 0, out_w = 0;  // output pixels (oy, ox)
  int64_t row_step = 0;          // floats between the bases of output rows oy and oy + 1
  int64_t col_step = 0;          // floats between the bases of output columns ox and ox + 1
  int64_t out_c = 0;             // output channels (the filter's columns)
  const int64_t* taps = nullptr; // k -> offset from a pixel's base, k = (ky * kw + kx) * c + ch
  int64_t k = 0;                 // entries of one window
};

/// Whether this CPU runs the kernels (AVX-512F).
bool available();

/// y[p * out_c + o] = sum over k of xp[base(p) + taps[k]] * filter[k * out_c + o], for every
/// output pixel p = oy * out_w + ox of one image; base(p) = oy * row_step + ox * col_step.
void forward_image(const ImageGeom& g, const float* xp, const float* filter, float* y);

/// df[k * out_c + o] += sum over pixels p of xp[base(p) + taps[k]] * dy[p * out_c + o].
void filter_grad_image(const ImageGeom& g, const float* xp, const float* dy, float* df);

}  // namespace tg::detail::conv_direct
