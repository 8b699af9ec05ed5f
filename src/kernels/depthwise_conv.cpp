// See depthwise_conv.h: the AVX-512 build where the CPU has it, else the baseline one.
#include "kernels/depthwise_conv.h"

#include <type_traits>

#include "kernels/depthwise_conv_impl.h"
#include "kernels/gemm.h"

namespace tg::detail {

template <class T>
void depthwise_forward(const ConvGeom& g, const T* x, const T* f, T* y, const GemmEpilogue* epilogue) {
  if (own_avx512_kernels()) return depthwise_avx512::forward(g, x, f, y, epilogue);
  forward_impl(g, x, f, y, epilogue);
}
template <class T>
void depthwise_backprop_input(const ConvGeom& g, const T* f, const T* dy, T* dx) {
  if (own_avx512_kernels()) return depthwise_avx512::backprop_input(g, f, dy, dx);
  backprop_input_impl(g, f, dy, dx);
}
template <class T>
void depthwise_backprop_filter(const ConvGeom& g, const T* x, const T* dy, T* df) {
  if (own_avx512_kernels()) return depthwise_avx512::backprop_filter(g, x, dy, df);
  backprop_filter_impl(g, x, dy, df);
}

template void depthwise_forward<float>(const ConvGeom&, const float*, const float*, float*, const GemmEpilogue*);
template void depthwise_forward<double>(const ConvGeom&, const double*, const double*, double*, const GemmEpilogue*);
template void depthwise_backprop_input<float>(const ConvGeom&, const float*, const float*, float*);
template void depthwise_backprop_input<double>(const ConvGeom&, const double*, const double*, double*);
template void depthwise_backprop_filter<float>(const ConvGeom&, const float*, const float*, float*);
template void depthwise_backprop_filter<double>(const ConvGeom&, const double*, const double*, double*);

}  // namespace tg::detail
