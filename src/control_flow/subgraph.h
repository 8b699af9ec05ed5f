// Tracing a C++ callable into a sub-graph (a cond branch, a loop condition or body), and what
// control-flow nodes carry.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/graph_ir.h"
#include "ops/op.h"

namespace tg::detail {

/// The payload of cond / while nodes, in OpAttrs::resource (their sub-graphs are in
/// OpAttrs::subgraphs: cond {then_branch, else_branch}, while {cond, body}). Node inputs are
/// cond:  [pred, captures...]        sub-graph placeholders: [its captures...]
/// while: [loop vars..., captures...] sub-graph placeholders: [loop vars..., its captures...]
/// where `capture_inputs[g][k]` is the node input that feeds capture placeholder k of graph g.
struct ControlFlowPayload {
  std::vector<std::vector<int>> capture_inputs;
  std::vector<ValueType> output_types;                 // cond: merged branch types; while: invariants
  int num_loop_vars = 0;                               // while only
  std::vector<std::string> var_paths;                  // while: for messages
  int64_t maximum_iterations = -1;                     // while only
};

const ControlFlowPayload& payload_of(const OpAttrs& attrs);

/// Records the ops a callable runs into a fresh GraphIR. Inputs are placeholders made with
/// add_input; symbolic tensors of enclosing traces become capture placeholders (and are listed
/// in captures(), to become inputs of the control-flow node); eager tensors become constants.
class SubgraphTracer final : public TraceRecorder {
 public:
  explicit SubgraphTracer(std::string label);

  Tensor add_input(const ValueType& type, const std::string& name);
  /// Runs fn with this tracer installed (tapes paused: the node is differentiated as a whole)
  /// and adds fn's results as the graph's outputs.
  std::vector<Tensor> trace(const std::function<std::vector<Tensor>()>& fn);

  std::vector<Tensor> record(OpId id, const std::vector<Tensor>& inputs, const OpAttrs& attrs,
                             const std::vector<ValueType>& output_types) override;

  std::shared_ptr<GraphIR> graph() const { return graph_; }
  /// The outer tensor of each capture placeholder, in placeholder order.
  const std::vector<Tensor>& captures() const { return captures_; }
  bool stateful() const { return stateful_; }

 private:
  ValueRef value_of(const Tensor& t, const char* user);
  Tensor symbolic_output(int node, int output);

  std::shared_ptr<GraphIR> graph_;
  std::string label_;
  int last_stateful_ = -1;
  bool stateful_ = false;
  std::vector<Tensor> captures_;
  std::unordered_map<const void*, int> capture_nodes_;  // outer symbolic value -> placeholder
  std::unordered_map<const void*, int> constants_;      // eager impl -> Const node
};

/// Merges the capture lists of several sub-graphs into the node's extra inputs (starting at
/// `first_input`): appends them to `inputs` and fills payload.capture_inputs.
void merge_captures(const std::vector<const SubgraphTracer*>& tracers, int first_input,
                    std::vector<Tensor>& inputs, ControlFlowPayload& payload);

/// The value of an eager int32 / int64 tensor with one element.
int64_t scalar_index(const Tensor& t);

// The control-flow family's registration (called by src/register_ops.cpp).
void register_control_flow_ops(OpDef* table);
void register_tensor_array_ops(OpDef* table);
void register_control_flow_gradients(OpDef* table);

/// "(float32 (3,), int32 ())" for messages about structures of tensors.
std::string describe_tensors(const std::vector<Tensor>& ts);

}  // namespace tg::detail
