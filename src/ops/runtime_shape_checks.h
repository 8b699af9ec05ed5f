// Run-time shape checks for composite ops (layers, optimizers), kept out of op.h so that using
// them recompiles only their callers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tracegraph/tensor.h"

namespace tg::detail {

/// ensure_same_shape (src/ops/op.h) for a check on a value the composite derived from its
/// arguments: the error ends with `remedy`, which says what the composite expected of its
/// arguments and what to do ("layer 'dense' expects inputs of shape (batch, 3); reshape ...").
Tensor ensure_same_shape(const Tensor& x, const Tensor& y, const std::string& op, const std::string& x_name,
                         const std::string& y_name, const std::string& remedy);

/// x, once dim x_dims[k] of x is known to equal dim y_dims[k] of y for every k (dims counted
/// from 0): checked now when each of those sizes is known on both sides, else by an
/// ensure_same_shape node when the graph runs, whose output is x with y's sizes where x's were
/// None - use that output, so that the check stays on the data path. The error names the dims
/// and both shapes, and ends with `remedy` ("the letter 'j' in \"ij,jk->ik\" names both ...").
Tensor ensure_same_dims(const Tensor& x, const Tensor& y, std::vector<int64_t> x_dims, std::vector<int64_t> y_dims,
                        const std::string& op, const std::string& x_name, const std::string& y_name,
                        const std::string& remedy);

}  // namespace tg::detail
