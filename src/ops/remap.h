// The adjoints of tile and pad (src/ops/remap_ops.cpp): gradient ops with gradients of their
// own, so that rules built from them can be differentiated again. Each takes the shape it
// produces from a "like" tensor at run time, as the helpers of grad_helpers.h do.
#pragma once
#include <cstdint>
#include <vector>

#include "ops/op.h"

namespace tg::detail {

/// The tiles of g (shaped like `like` tiled by `multiples`) summed into like's shape.
Tensor tile_grad(const Tensor& g, const Tensor& like, const std::vector<int64_t>& multiples);
/// g (shaped like `like` padded by reflect/symmetric `attrs`) with each border element added
/// onto the element it mirrors, cut to like's shape (TF's MirrorPadGrad).
Tensor mirror_pad_grad(const Tensor& g, const Tensor& like, const PadAttrs& attrs);

}  // namespace tg::detail
