// The op layer: registry entries, attributes, and the one entry point every op goes through.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor_impl.h"
#include "core/thread_context.h"
#include "ops/op_attrs.h"
#include "tracegraph/tensor.h"

namespace tg::detail {

enum class OpId : uint16_t {
#define TG_OP(id, name, arity, traits, serial, attrs) id,
#include "ops/ops.def"
#undef TG_OP
  kCount
};
inline constexpr std::size_t kNumOps = static_cast<std::size_t>(OpId::kCount);

enum OpTrait : uint32_t {
  kElementwise = 1u << 0,
  kCommutative = 1u << 1,  // f(a, b) and f(b, a) have the same bits (see commutes())
  kInPlace = 1u << 2,
  kDifferentiable = 1u << 3,
  kNotDifferentiable = 1u << 4,
  kView = 1u << 5,       // output 0 shares input 0's storage (implies kOwnOutputs)
  kStateful = 1u << 6,  // has effects beyond its outputs: recorded in order, never removed
  kSubgraphs = 1u << 7,  // carries sub-graphs (ControlFlowAttrs): cond, while
  kOwnOutputs = 1u << 8,  // the kernel makes its outputs itself; nothing is allocated for them
  kOptimizerOnly = 1u << 9,  // made by the graph optimiser only: never recorded, never in a file
  // Effects: what a kStateful op does beyond its outputs. The passes, the tape, the replay and
  // variable_uses() read these and no list of op names (ops.def explains each).
  kReadsVariable = 1u << 10,    // reads the Variables its attributes name (variables_named)
  kWritesVariable = 1u << 11,   // writes them
  kCreatesVariable = 1u << 12,  // gives a Variable its first value
  kRandom = 1u << 13,           // draws from a random stream (RandomAttrs::state)
  kCollective = 1u << 14,       // talks to the other ranks of a distributed job
  kPrints = 1u << 15,           // writes to the program's output
};
/// Every effect trait. A kStateful op declares its effects, or carries sub-graphs whose nodes do.
inline constexpr uint32_t kEffects = kReadsVariable | kWritesVariable | kCreatesVariable | kRandom | kCollective | kPrints;
/// The effects a replay (src/runtime/replay.h) must not run for real: an op with one of them has
/// a replay hook (OpDef::replay), unless it is kOptimizerOnly (replays run graphs as traced).
/// Collectives run again in a replay: every rank replays the same graph, so they still pair up.
inline constexpr uint32_t kReplayedEffects = kReadsVariable | kWritesVariable | kCreatesVariable | kRandom | kPrints;
/// Whether an op's kernel makes its own outputs (views, Variable, control-flow, TensorArray ops).
inline constexpr bool makes_own_outputs(uint32_t traits) { return (traits & (kView | kOwnOutputs)) != 0; }
/// Whether the op's output is a Variable's value as gradients see it: a differentiable read
/// (read_variable). A GradientTape watches these outputs as the Variable; the registry test holds
/// such ops to no inputs and VariableAttrs.
inline constexpr bool is_variable_read(uint32_t traits) {
  return (traits & kReadsVariable) && (traits & kDifferentiable);
}

/// The graph IR (src/graph/graph_ir.h). Ops only hold sub-graphs and hand them on; reading
/// them is the graph layer's business, so the op layer needs no more than the name.
class GraphIR;

/// A sub-graph of a control-flow op, with its role ("then_branch", "body", ...).
struct NamedSubgraph {
  std::string role;
  std::shared_ptr<const GraphIR> graph;
  bool operator==(const NamedSubgraph&) const = default;
};

/// Static type of an op input/output: what shape inference works on (dims may be None, the
/// rank may be unknown while tracing).
struct ValueType {
  DType dtype;
  TensorShape shape;
};

/// Validates inputs and computes output types. Must handle None dims and unknown rank, and
/// throw a tg:: error starting with "[op_name]" on bad input.
using InferFn = std::vector<ValueType> (*)(const std::vector<ValueType>& inputs,
                                           const OpAttrs& attrs);
/// Computes outputs from eager inputs. `outputs` arrive allocated with the inferred types,
/// except for ops that make their own outputs (makes_own_outputs), which receive empty handles
/// and set them (views of an input, a Variable's value, a sub-graph's results).
/// Value-dependent errors (index bounds, integer division by zero) are thrown here.
using KernelFn = void (*)(const std::vector<Tensor>& inputs, const OpAttrs& attrs,
                          std::vector<Tensor>& outputs);

/// What a gradient rule receives: the op's inputs and outputs as recorded (eager, or symbolic
/// while tracing), the incoming gradient of each output (never empty: a zero tensor when an
/// output did not reach the target) and the attributes.
struct GradInputs {
  const std::vector<Tensor>& inputs;
  const std::vector<Tensor>& outputs;
  const std::vector<Tensor>& grads;
  const OpAttrs& attrs;
  /// Which inputs the caller wants a gradient for (empty: all of them). A rule may skip the work
  /// for the others and return an empty tg::Tensor there (TF's skip_input_indices): conv2d's
  /// input gradient, for one, is a large product nobody needs for a layer fed with data.
  std::vector<bool> wanted = {};
  bool wants(std::size_t input) const { return wanted.empty() || wanted[input]; }
  /// Which outputs reached the target (empty: all of them); the others' grads are zero tensors.
  /// A rule may skip the work for those (TF's _is_zeros_tensor): sparse_softmax_cross_entropy's
  /// second output, its rows' log_softmax, is read by its gradient only, so it reaches a target
  /// only in a gradient of a gradient.
  std::vector<bool> reached = {};
  bool got_gradient(std::size_t output) const { return reached.empty() || reached[output]; }
};
/// A vector-Jacobian product: one gradient per input, shaped like that input; an empty
/// tg::Tensor where the input gets none (integer inputs, indices, predicates). Written with the
/// public ops, so the same rule runs eagerly and records into graphs (and can be differentiated
/// again by an outer tape).
using GradFn = std::vector<Tensor> (*)(const GradInputs& g);

/// What a replay (src/runtime/replay.h: a graph run again under a GradientTape, after the
/// forward call ran every effect) gives the replay hook of an op with kReplayedEffects. Nothing
/// real changes: reads see the replay's own values, writes stay in the replay, and a random op
/// repeats the draw the forward call made.
class ReplayContext {
 public:
  /// The Variable's value as this replay sees it.
  virtual Tensor read(const std::shared_ptr<VariableState>& v) = 0;
  /// Keeps `value` as the Variable's value for the rest of the replay.
  virtual void write(const std::shared_ptr<VariableState>& v, Tensor value) = 0;
  /// The values the forward call drew at the node being replayed (a kRandom op; `shape` is its
  /// shape input); throws InvalidArgumentError when the replay does not know that draw.
  virtual Tensor repeat_draw(const Tensor& shape) = 0;

 protected:
  ~ReplayContext() = default;
};
/// An op's outputs in a replay, computed through the public ops (so that a tape records them)
/// from the replay's Variables and draws instead of the real ones.
using ReplayFn = std::vector<Tensor> (*)(ReplayContext& replay, const std::vector<Tensor>& inputs,
                                         const OpAttrs& attrs);

struct OpDef {
  OpId id;
  const char* name;
  int arity;
  uint32_t traits;
  int serial;
  std::size_t attrs_kind;  // the variant index of the op's attribute struct (ops.def)
  InferFn infer = nullptr;
  KernelFn kernel = nullptr;
  GradFn grad = nullptr;  // set for kDifferentiable ops
  ReplayFn replay = nullptr;  // set for ops with kReplayedEffects (set_replay)
};

/// Installs an op's shape/dtype rule and kernel in the registry table (register_* functions).
inline void set_op(OpDef* table, OpId id, InferFn infer, KernelFn kernel) {
  table[static_cast<std::size_t>(id)].infer = infer;
  table[static_cast<std::size_t>(id)].kernel = kernel;
}

/// Installs an op's gradient rule (next to the op, in its family's register_* function).
inline void set_grad(OpDef* table, OpId id, GradFn grad) {
  table[static_cast<std::size_t>(id)].grad = grad;
}

/// Installs an op's replay hook (next to its kernel, for ops with kReplayedEffects).
inline void set_replay(OpDef* table, OpId id, ReplayFn replay) {
  table[static_cast<std::size_t>(id)].replay = replay;
}

/// The Variables an op's attributes name (VariableAttrs, AdamSlotsAttrs, VariableGroupAttrs), in
/// order: what its kReadsVariable / kWritesVariable / kCreatesVariable effects act on.
std::vector<std::shared_ptr<VariableState>> variables_named(const OpAttrs& attrs);

/// The registry entry of an op (filled by each op family's register_* function).
const OpDef& op_def(OpId id);
/// Every op, in ops.def order.
const std::vector<const OpDef*>& all_ops();
/// Looks an op up by its name; nullptr when there is none.
const OpDef* find_op(const std::string& name);
/// Whether f(a, b) may stand for f(b, a) on operands of `dtype` (CSE and simplify ask): the
/// kCommutative ops, except on strings, which add concatenates.
inline bool commutes(OpId id, DType dtype) { return (op_def(id).traits & kCommutative) && dtype != DType::String; }
/// Whether nodes of this op carry sub-graphs (the kSubgraphs trait).
inline bool has_subgraphs(OpId id) { return (op_def(id).traits & kSubgraphs) != 0; }

/// Validates, infers and either runs the kernel (eager inputs) or hands the op to the active
/// trace (any symbolic input). Every public op function ends here.
std::vector<Tensor> apply_op(OpId id, const std::vector<Tensor>& inputs, const OpAttrs& attrs = {});
/// As apply_op, but inside a trace the op is recorded even when every input is eager (a loop
/// over eager tensors must run at every call, not once at trace time). Outside a trace it runs.
std::vector<Tensor> apply_op_in_trace(OpId id, const std::vector<Tensor>& inputs, const OpAttrs& attrs);
Tensor apply_op1(OpId id, const std::vector<Tensor>& inputs, const OpAttrs& attrs = {});

/// Runs an op on eager inputs: infers output types (for concrete shapes) and runs the kernel.
/// The graph executor calls this; it never records.
std::vector<Tensor> run_op_eager(const OpDef& def, const std::vector<Tensor>& inputs,
                                 const OpAttrs& attrs);

/// Receives ops on symbolic tensors while a function is traced (installed per thread by the
/// tracing layer). With none installed, a symbolic input is an OutOfScopeError.
class TraceRecorder {
 public:
  virtual ~TraceRecorder() = default;
  /// Takes the output types over (the node keeps them): a trace records ops by the hundred
  /// thousand, and copying each type was a heap block per op for its shape.
  virtual std::vector<Tensor> record(OpId id, const std::vector<Tensor>& inputs,
                                     const OpAttrs& attrs,
                                     std::vector<ValueType>&& output_types) = 0;
};
/// The recorder installed on this thread, or nullptr when no trace records here.
TraceRecorder* current_recorder();
/// Installs a recorder on this thread for a scope, and restores the previous one on exit. On a
/// thread where no trace was recording, it restarts the trace's op seeds (restart_trace_op_seeds).
class RecorderScope {
 public:
  explicit RecorderScope(TraceRecorder* r);

 private:
  ScopedThreadValue<TraceRecorder*> recorder_;
  TraceRecordingScope recording_;  // core's copy of "a recorder is installed"
};

/// Sees every op that ran or was recorded on this thread: how GradientTape (src/autodiff)
/// records without the op layer knowing about tapes. The autodiff layer installs one while a
/// tape records on the thread; with none installed the dispatcher pays one thread-local load.
class OpObserver {
 public:
  virtual ~OpObserver() = default;
  virtual void on_op(OpId id, const std::vector<Tensor>& inputs, const OpAttrs& attrs,
                     const std::vector<Tensor>& outputs) = 0;
};
OpObserver* current_op_observer();
/// Installed while a tape records on the thread (not a scope: tapes start and stop in any order).
void set_op_observer(OpObserver* o);

/// Fills in every op family's rules, kernels and gradients. Defined in src/register_ops.cpp, the
/// one file that knows every family (families above this layer, like control flow, included);
/// the registry calls it once, on first use.
void register_all_ops(OpDef* table);

// Per-family registration (each defined next to its ops, called by register_all_ops).
void register_elementwise_ops(OpDef* table);
void register_reduce_ops(OpDef* table);
void register_cross_entropy_ops(OpDef* table);
void register_attention_ops(OpDef* table);
void register_layer_norm_ops(OpDef* table);
void register_matmul_ops(OpDef* table);
void register_conv_ops(OpDef* table);
void register_pool_ops(OpDef* table);
void register_shape_ops(OpDef* table);
void register_index_ops(OpDef* table);
void register_state_ops(OpDef* table);
void register_optimizer_update_ops(OpDef* table);
void register_fused_ops(OpDef* table);
void register_random_ops(OpDef* table);
void register_remap_ops(OpDef* table);
void register_nd_index_ops(OpDef* table);
void register_math_ops(OpDef* table);
void register_sort_ops(OpDef* table);
void register_collective_ops(OpDef* table);
void register_runtime_shape_ops(OpDef* table);
void register_sequence_ops(OpDef* table);
void register_host_call_ops(OpDef* table);

/// x, once its shape is known to equal y's: checked now when both shapes are fully known, else
/// by an ensure_same_shape node when the graph runs (a composite op's check that must not vanish
/// under None dims). Errors name `op` and the two arguments: "[mean_squared_error] y_true have
/// shape (4, 5) but y_pred have shape (4, 1) ...".
Tensor ensure_same_shape(const Tensor& x, const Tensor& y, const char* op, const char* x_name, const char* y_name);

/// Normalises a possibly negative axis against rank, or throws "[op] axis a is out of range".
int64_t normalize_axis(const char* op, int64_t axis, int64_t rank);
/// "float32" etc. for messages about the inputs of an op.
std::string describe(const ValueType& t);

}  // namespace tg::detail
