// Run-time shape checks for composite ops (layers, optimizers), kept out of op.h so that using
// them recompiles only their callers.
#pragma once
#include <string>

#include "tracegraph/tensor.h"

namespace tg::detail {

/// ensure_same_shape (src/ops/op.h) for a check on a value the composite derived from its
/// arguments: the error ends with `remedy`, which says what the composite expected of its
/// arguments and what to do ("layer 'dense' expects inputs of shape (batch, 3); reshape ...").
Tensor ensure_same_shape(const Tensor& x, const Tensor& y, const std::string& op, const std::string& x_name,
                         const std::string& y_name, const std::string& remedy);

}  // namespace tg::detail
