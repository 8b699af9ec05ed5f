// The fused softmax cross-entropy of integer labels (src/ops/cross_entropy.cpp), for
// tg::nn::sparse_softmax_cross_entropy.
#pragma once
#include "tracegraph/tensor.h"

namespace tg::detail {

/// -log_softmax(logits)[label] for each row of logits (batch, classes) and integer labels
/// (batch,): the loss of each row, as logits' dtype. A label outside [0, classes) is an
/// InvalidArgumentError when the op runs (eagerly, or in a graph).
Tensor sparse_softmax_cross_entropy_rows(const Tensor& logits, const Tensor& labels);

}  // namespace tg::detail
