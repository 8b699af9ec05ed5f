// float32 convolutions through oneDNN (Debian's libdnnl, OpenMP runtime), on tracegraph's NHWC
// input and HWIO filter as they are stored. conv_kernels.cpp decides which geometries come here
// (docs/DECISIONS.md, "Convolution and pooling").
//
// Threads: oneDNN always runs on one thread per call here, and tracegraph's pool runs the calls:
// each convolution is cut into parts fixed by its shapes alone (groups of images, or bands of
// output rows for a single image), and parallel_for spreads the parts. oneDNN's own OpenMP
// threads would spin for milliseconds after every call (libgomp's default spin count, which only
// the environment read before main can change) on the core tracegraph's pool needs next; with
// one thread per call no OpenMP team is ever started. The filter gradient sums one partial per
// part in part order, so, as with the own kernels, the bits depend on the shapes alone: not on
// timing, and not on the thread count.
//
// Each part's primitive is created once per geometry and kept (creation costs milliseconds);
// the cache is shared by all threads. Every function returns false, having written nothing, when
// oneDNN has no optimised kernel for the geometry (its reference kernels are slower than ours).
#pragma once
#include <cstdint>

namespace tg::detail {
struct ConvGeom;      // kernels/conv_kernels.h
struct GemmEpilogue;  // kernels/gemm_epilogue.h
}  // namespace tg::detail

namespace tg::detail::onednn {

/// How activations are handed to oneDNN: as stored (NHWC), or in the blocked layout oneDNN
/// picks, reordered to it and back on every call. The filter always goes in oneDNN's layout.
enum class ActivationLayout { nhwc, blocked };

enum class ConvDirection { forward, backprop_input, backprop_filter };

/// Whether a single image's forward or input gradient is cut into bands of rows: every band
/// reads the whole filter, and where that is more than twice the image, two bands on two cores
/// ran no faster than one (resnet18's 14x14x256 and 7x7x512 layers: their time goes to reading
/// the filter), so such an image is one part.
bool bands_read_filter_cheaply(const ConvGeom& g);

/// Whether oneDNN runs this direction of this geometry with an optimised kernel.
bool supports(ConvDirection d, const ConvGeom& g, ActivationLayout layout = ActivationLayout::nhwc);

/// Whether conv_forward runs this geometry with oneDNN's Winograd kernel (onednn_conv.cpp's rule).
bool runs_winograd_forward(const ConvGeom& g);

/// y = conv2d(x, f), then the epilogue (if any) on the rows each part computed.
bool conv_forward(const ConvGeom& g, const float* x, const float* f, float* y, const GemmEpilogue* epilogue,
                  ActivationLayout layout = ActivationLayout::nhwc);
/// conv_forward (NHWC) image by image: image_done(ctx, n, image) gets image n with its
/// epilogue, on the thread that computed it, in that thread's scratch (valid during the call
/// only, while in its cache): the whole result is never written. False, calling nothing,
/// where conv_forward would be (no primitive) or a part is not whole images (bands).
bool conv_forward_by_image(const ConvGeom& g, const float* x, const float* f, const GemmEpilogue* epilogue,
                           void (*image_done)(void* ctx, int64_t n, const float* image), void* ctx);
/// dx from the filter and dy.
bool conv_backprop_input(const ConvGeom& g, const float* f, const float* dy, float* dx,
                         ActivationLayout layout = ActivationLayout::nhwc);
/// df from the input and dy.
bool conv_backprop_filter(const ConvGeom& g, const float* x, const float* dy, float* df,
                          ActivationLayout layout = ActivationLayout::nhwc);

}  // namespace tg::detail::onednn
