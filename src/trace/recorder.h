// The one recorder: records the ops a C++ callable runs into a graph. Tracing a tg::function
// and tracing a cond branch or loop body differ only in what they do with a symbolic tensor of
// another trace (the capture policy) and in how messages name them.
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/graph_ir.h"
#include "ops/op.h"
#include "ops/variable_state.h"
#include "tracegraph/structure.h"

namespace tg::detail {

/// Dims of a function's tensor arguments that the traced C++ code read as integers
/// (x.shape().dim(i), dims(), num_elements()): (argument path, dim index).
using StaticDimReads = std::set<std::pair<std::string, int64_t>>;

/// The Variable parameters of one tg::function, one per (alias id, dtype, shape), kept across
/// its traces: state a trace made for one (an optimizer's slots, keyed by the Variable) is found
/// again by the next trace instead of being made twice.
class VariableParameters {
 public:
  explicit VariableParameters(std::string function) : function_(std::move(function)) {}
  std::shared_ptr<VariableState> get(int64_t alias_id, const VariableState& traced_with);

 private:
  std::mutex mu_;
  std::string function_;
  std::vector<std::pair<int64_t, std::shared_ptr<VariableState>>> made_;
};

/// What a recorder does with a symbolic tensor that belongs to another trace.
enum class CapturePolicy {
  kReject,   // a function's trace: an OutOfScopeError (the tensor leaked from elsewhere)
  kCapture,  // a sub-graph: an enclosing trace's value becomes an extra input (see captures())
};

class GraphRecorder final : public TraceRecorder, public PlaceholderContext {
 public:
  /// `label` names the trace in messages: the function's name (kReject; `trace_index` is its
  /// trace number) or the sub-graph's path, "cond/then_branch" (kCapture).
  /// `parameters`: where a function's trace takes its Variable parameters from (kReject only).
  GraphRecorder(CapturePolicy policy, std::string label, int64_t trace_index = 0,
                VariableParameters* parameters = nullptr);

  /// A new graph input named after an argument path ("batch[1]" -> "batch_1").
  Tensor placeholder(const TraceType& tensor_type, const std::string& path) override;
  Tensor add_input(const ValueType& type, const std::string& path);
  Variable variable_placeholder(const TraceType& variable_type, const Variable& traced_with) override;
  /// The Variable parameters handed out, by alias id.
  const std::vector<std::shared_ptr<VariableState>>& variable_parameters() const { return variable_params_; }

  std::vector<Tensor> record(OpId id, const std::vector<Tensor>& inputs, const OpAttrs& attrs,
                             std::vector<ValueType>&& output_types) override;

  /// The graph's Const node holding the eager tensor `value`, as a symbolic tensor (what
  /// tf.constant gives inside a Python trace); tracing knows its elements when it is a shape.
  Tensor constant(const Tensor& value);

  /// Adds "Identity" output nodes for the traced results.
  void add_outputs(const std::vector<Tensor>& outputs, const char* user);
  /// Runs fn with this recorder installed on the thread and adds fn's results as the outputs.
  std::vector<Tensor> trace(const std::function<std::vector<Tensor>()>& fn);

  const std::shared_ptr<GraphIR>& graph() const { return graph_; }
  /// kCapture: the enclosing trace's tensor behind each capture input, in placeholder order.
  const std::vector<Tensor>& captures() const { return captures_; }
  /// kReject: which dims of the arguments the traced code read as integers so far.
  const StaticDimReads& static_dim_reads() const { return *static_reads_; }
  /// Whether any stateful op was recorded (a cond / while with one is itself stateful).
  bool stateful() const { return last_stateful_ >= 0; }

 private:
  ValueRef value_of(const Tensor& t, const char* user);
  Tensor symbolic_output(int node, int output);

  /// A numeric scalar's dtype and bits: what tells two captured scalars apart.
  struct ScalarBits {
    DType dtype;
    uint64_t bits;
    bool operator==(const ScalarBits&) const = default;
  };
  struct ScalarBitsHash {
    std::size_t operator()(const ScalarBits& s) const {
      return std::hash<uint64_t>{}(s.bits * 31 + static_cast<uint64_t>(s.dtype));
    }
  };
  /// A numeric, rank-0 tensor that owns its memory: its dtype and bits; others: DType::String.
  static ScalarBits scalar_bits(const Tensor& t);

  std::shared_ptr<GraphIR> graph_;
  CapturePolicy policy_;
  std::string label_;
  std::shared_ptr<StaticDimReads> static_reads_;  // shared with the argument values
  std::shared_ptr<const std::string> origin_suffix_;  // shared by every value of this trace
  int last_stateful_ = -1;
  std::vector<Tensor> captures_;
  VariableParameters* parameter_source_;
  std::vector<std::shared_ptr<VariableState>> variable_params_;
  std::unordered_map<const void*, int> capture_nodes_;  // outer symbolic value -> placeholder
  std::unordered_map<const void*, int> constants_;      // captured eager tensor -> Const node
  // The first Const node made for each scalar value: a later equal scalar's node holds that
  // node's tensor (see value_of).
  std::unordered_map<ScalarBits, int, ScalarBitsHash> scalar_constants_;
};

/// A graph input's name from an argument path: "batch[1]" -> "batch_1", "cfg['lr']" -> "cfg_lr";
/// `fallback` when nothing is left.
std::string placeholder_name(const std::string& path, const char* fallback);

}  // namespace tg::detail
