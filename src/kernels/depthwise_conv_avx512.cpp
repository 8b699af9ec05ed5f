// depthwise_conv.h's kernels built for AVX-512 (src/CMakeLists.txt); called only where
// own_avx512_kernels() says the CPU has it.
#include <type_traits>

#include "kernels/depthwise_conv.h"
#include "kernels/depthwise_conv_impl.h"

namespace tg::detail::depthwise_avx512 {

template <class T> void forward(const ConvGeom& g, const T* x, const T* f, T* y, const GemmEpilogue* epilogue) {
  forward_impl(g, x, f, y, epilogue);
}
template <class T> void backprop_input(const ConvGeom& g, const T* f, const T* dy, T* dx) {
  backprop_input_impl(g, f, dy, dx);
}
template <class T> void backprop_filter(const ConvGeom& g, const T* x, const T* dy, T* df) {
  backprop_filter_impl(g, x, dy, df);
}

template void forward<float>(const ConvGeom&, const float*, const float*, float*, const GemmEpilogue*);
template void forward<double>(const ConvGeom&, const double*, const double*, double*, const GemmEpilogue*);
template void backprop_input<float>(const ConvGeom&, const float*, const float*, float*);
template void backprop_input<double>(const ConvGeom&, const double*, const double*, double*);
template void backprop_filter<float>(const ConvGeom&, const float*, const float*, float*);
template void backprop_filter<double>(const ConvGeom&, const double*, const double*, double*);

}  // namespace tg::detail::depthwise_avx512
