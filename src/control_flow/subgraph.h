// What control-flow nodes carry, and how the sub-graphs' captures become node inputs. Sub-graphs
// are traced by the one recorder (src/trace/recorder.h) with CapturePolicy::kCapture.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/graph_ir.h"
#include "ops/control_flow_attrs.h"
#include "ops/op.h"
#include "trace/recorder.h"

namespace tg::detail {

const ControlFlowPayload& payload_of(const OpAttrs& attrs);

/// Merges the capture lists of several sub-graphs into the node's extra inputs (starting at
/// `first_input`): appends them to `inputs` and fills payload.capture_inputs.
void merge_captures(const std::vector<const GraphRecorder*>& tracers, int first_input,
                    std::vector<Tensor>& inputs, ControlFlowPayload& payload);

/// The value of an eager int32 / int64 tensor with one element.
int64_t scalar_index(const Tensor& t);

// The control-flow family's registration (called by src/register_ops.cpp).
void register_control_flow_ops(OpDef* table);
void register_tensor_array_ops(OpDef* table);
void register_control_flow_gradients(OpDef* table);

/// The payload of the last while node built on this thread (while_loop_flat).
std::shared_ptr<const ControlFlowPayload> last_while_payload();

/// A while loop with payload `p` and node inputs `inputs` (loop variables, captures), built
/// instead as a loop that also stores, per iteration, the forward values its gradient needs
/// (src/control_flow/gradients.cpp): its loop variables' final values, or nothing where the loop
/// is built as it is (no float loop variable, a body the gradient cannot split, or a loop built
/// by a gradient).
std::optional<std::vector<Tensor>> while_storing_gradient_values(const ControlFlowPayload& p,
                                                                 const std::vector<Tensor>& inputs);

/// "(float32 (3,), int32 ())" for messages about structures of tensors.
std::string describe_tensors(const std::vector<Tensor>& ts);

}  // namespace tg::detail
