// What a trace knows of the elements of small integer tensors - the shape tensors that fill,
// zeros, broadcast_to, reshape and the random ops take - before the graph runs: TF's
// constant_value_as_shape. `zeros(stack({shape(x)[0], constant(16)}))` is then (None, 16), not
// (None, None), so a loop whose state must keep (None, 16) accepts it.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "ops/op.h"

namespace tg::detail {

/// The elements of a scalar or 1-D int32/int64 tensor as far as they are known now, None
/// (== -1) where not: all of an eager tensor's, what tracing inferred of a symbolic one's
/// (SymbolicValue::known_elements). Empty optional when nothing is known, including its length.
std::optional<std::vector<int64_t>> known_elements(const Tensor& t);

/// What an op's output `output` will hold, inferred from its inputs' known elements, for the
/// ops that build shapes (shape, stack, concat, x[i], slice, cast, integer arithmetic); null for
/// other ops and outputs that are not scalar or 1-D integers. The recorder stores it with the
/// output.
std::shared_ptr<const std::vector<int64_t>> infer_known_elements(OpId id, const std::vector<Tensor>& inputs,
                                                                 const OpAttrs& attrs, const ValueType& output);

}  // namespace tg::detail
