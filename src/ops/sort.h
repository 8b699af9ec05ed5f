// The internal ops that the gradients of sort and top_k are written with (src/ops/sort.cpp).
// Both work along the last axis with indices shaped (..., m) whose leading dims are the
// tensor's, and each is the other's gradient.
#pragma once

#include "tracegraph/tensor.h"

namespace tg::detail {

/// y[..., j] = x[..., indices[..., j]] (NumPy's take_along_axis on the last axis). Indices
/// (int32 or int64) out of [0, n) raise InvalidArgumentError.
Tensor gather_last_axis(const Tensor& x, const Tensor& indices);
/// Zeros shaped like `like`, into which updates[..., j] is added at [..., indices[..., j]]
/// (repeated indices add): gather_last_axis's gradient, and sort's and top_k's.
Tensor scatter_add_last_axis_like(const Tensor& updates, const Tensor& indices, const Tensor& like);

}  // namespace tg::detail
