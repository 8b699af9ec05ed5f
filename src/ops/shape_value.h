// Ops whose output shape is a value: a 1-D int32/int64 tensor input (fill, broadcast_to, the
// random ops). Their shape rule reads what was known of that value when the op was built, and
// their kernel checks the value it gets against it.
#pragma once
#include <cstdint>
#include <vector>

#include "ops/op.h"

namespace tg::detail {

/// What is known of a shape tensor's value when an op is built: all of it when it is eager.
/// Throws (with the [op] prefix) on an empty handle or a negative size.
ShapeValueAttrs shape_value_of(const char* op, const Tensor& shape);
/// A fully defined static shape as an int64 shape tensor (a constant); throws
/// InvalidArgumentError (with the [op] prefix) when a size is None.
Tensor static_shape_tensor(const char* op, const TensorShape& shape);
/// The static shape a shape tensor of type `t` describes, given what was known of its value;
/// throws TypeError / InvalidArgumentError unless `t` is a 1-D int32/int64 tensor.
TensorShape described_shape(const char* op, const ValueType& t, const ShapeValueAttrs& known);
/// The output shape of reshape(x of shape `in`, target), validating everything the known dims
/// allow: at most one -1 (inferred), equal element counts.
TensorShape reshape_shape(const TensorShape& in, const std::vector<int64_t>& target);
/// The sizes an eager shape tensor holds, checked (sizes >= 0, what the op knew of them).
std::vector<int64_t> shape_values(const char* op, const Tensor& shape, const ShapeValueAttrs& known);

}  // namespace tg::detail
