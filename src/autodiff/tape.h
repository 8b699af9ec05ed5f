// The tape machinery behind tg::GradientTape, as the op dispatcher and the function runtime see it.
#pragma once
#include <functional>
#include <vector>

#include "ops/op.h"

namespace tg::detail {

class ConcreteImpl;

/// Number of tapes recording on this thread; the dispatcher's only cost when it is zero.
extern thread_local int t_recording_tapes;
inline bool tapes_recording() { return t_recording_tapes != 0; }

/// Offers an op that just ran (eagerly or recorded into a trace) to the recording tapes.
void record_op_on_tapes(OpId id, const std::vector<Tensor>& inputs, const OpAttrs& attrs,
                        const std::vector<Tensor>& outputs);

/// A backward function for an entry that is not a registry op (a call of a traced function):
/// gets the incoming gradient of each output and returns one gradient per input (empty = none).
using CustomBackward = std::function<std::vector<Tensor>(const std::vector<Tensor>& out_grads)>;
/// Offers such an entry to the recording tapes; true when a tape took it.
struct VariableState;
/// `inner_variables`: Variables read inside the call's cond / while sub-graphs, whose gradients
/// the call cannot give (gradient() refuses a request for them).
bool record_custom_on_tapes(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                            CustomBackward backward,
                            const std::vector<const VariableState*>& inner_variables = {});

/// Runs a concrete function's graph; under a recording tape, also records the call so that the
/// tape can differentiate through it (with a cached backward graph).
std::vector<Tensor> run_concrete(const ConcreteImpl& cf, const std::vector<Tensor>& inputs);

/// How many times the cached backward function of `cf` has been traced (0 before its first
/// call under a tape). For tests: the backward graph is built once per concrete function.
int64_t backward_tracing_count(const ConcreteImpl& cf);

}  // namespace tg::detail
