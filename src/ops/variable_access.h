// What the kernels of the Variable ops share (state_ops.cpp, optimizer_updates.cpp): which
// Variable an op names, and when a Variable's storage may be updated where it lies.
#pragma once
#include "ops/op_attrs.h"
#include "ops/variable_state.h"

namespace tg::detail {

/// The Variable a VariableAttrs op names, as traced: for shape rules (a parameter has the dtype
/// and shape of the Variables it is bound to).
const VariableState& declared_state(const OpAttrs& attrs);
/// The Variable a kernel reads or writes: a parameter's is the one the running call bound.
VariableState& state_of(const OpAttrs& attrs);
/// FailedPreconditionError: `v` is read before it has a value.
[[noreturn]] void throw_uninitialized(const VariableState& v);
/// True when `t` is the only handle to its storage and that storage is tracegraph's own: nothing
/// else (a handle, a view, a tape) can see a change made to it.
bool sole_owner(const Tensor& t);

}  // namespace tg::detail
