// The log_softmax op's row loop and the exp op's loop, for other ops that must give the bits of
// those ops (the fused cross-entropy, src/ops/cross_entropy.cpp). Defined in reduce.cpp.
#pragma once
#include <cstdint>

namespace tg::detail {

/// y = log_softmax(x) over each of `rows` contiguous rows of n elements (float or double), as
/// the log_softmax op computes it along its last axis.
template <class T>
void log_softmax_rows(const T* x, int64_t rows, int64_t n, T* y);

/// v = exp(v) over n elements, as the exp op computes it (simd_math.h's exp for float32).
template <class T>
void exp_in_place(T* v, int64_t n);

}  // namespace tg::detail
