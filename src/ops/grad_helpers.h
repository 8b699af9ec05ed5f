// Internal ops that gradient rules are written with. Each takes the shape it produces from a
// "like" tensor at run time (never from static shapes), so a rule works the same on eager
// tensors and on traced tensors with None dims or unknown rank. Each has its own gradient
// rule, so rules built from them can be differentiated again (higher-order gradients).
#pragma once
#include <cstdint>
#include <vector>

#include "tracegraph/tensor.h"

namespace tg::detail {

/// g summed down to like's shape by NumPy broadcasting in reverse (leading dims and the dims
/// where like has size 1 are summed). like's shape must broadcast to g's. Returns g itself when
/// both shapes are known and equal.
Tensor sum_to_like(const Tensor& g, const Tensor& like);
/// The gradient of operand i of a broadcasting elementwise op, from g of the op's output shape:
/// g itself when the static shapes prove that broadcasting left the operand's shape as it was
/// at every run-time size of its None dims, else sum_to_like(g, operands[i]). A dim qualifies
/// when it is static and equal to g's, or when it is None and no other operand has it (counting
/// from the right) or every other operand has it as a static 1. So the bias add of a batch of None rows,
/// (None, n) + (n), passes its gradient to (None, n) untouched instead of through a sum_to_like
/// that copies it at run time.
Tensor sum_to_operand(const Tensor& g, const std::vector<Tensor>& operands, std::size_t i);
/// x broadcast to like's shape (x's shape must broadcast to like's). Returns x itself when both
/// shapes are known and equal.
Tensor broadcast_like(const Tensor& x, const Tensor& like);
/// Undoes a reduction: g, the result of reducing a tensor shaped like `like` over `axes`
/// (empty = all) with `keepdims`, broadcast back to like's shape.
Tensor unreduce_like(const Tensor& g, const Tensor& like, const std::vector<int64_t>& axes,
                     bool keepdims);
/// x's elements with like's shape (same element count). Zero-copy.
Tensor reshape_like(const Tensor& x, const Tensor& like);
/// g split along `axis` into one piece per `like` tensor, piece k shaped like likes[k] (their
/// sizes along axis must add up to g's). Inverse of concat(likes, axis).
std::vector<Tensor> split_like(const Tensor& g, const std::vector<Tensor>& likes, int64_t axis);
/// The block of x shaped like `like` that starts at `begin` (one entry per leading dim, the
/// missing ones 0; a negative entry counts from the end of its dim).
Tensor slice_like(const Tensor& x, const Tensor& like, const std::vector<int64_t>& begin);
/// Zeros shaped like `like` with g written at `begin` (as in slice_like): slice_like's inverse.
Tensor pad_like(const Tensor& g, const Tensor& like, const std::vector<int64_t>& begin);
/// Zeros shaped like `like` (gather's params) into which the slices of g are added at
/// `indices` along `axis`: the gradient of gather(like, indices, axis). Repeated indices add.
Tensor scatter_add_like(const Tensor& g, const Tensor& indices, const Tensor& like, int64_t axis);

}  // namespace tg::detail
