// Reverse-mode differentiation: what a tape records, and how gradient() walks it back.
#include "autodiff/tape.h"

#include <algorithm>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "runtime/replay.h"
#include "core/check.h"
#include "core/tensor_impl.h"
#include "graph/graph_ir.h"
#include "ops/grad_helpers.h"
#include "ops/random.h"
#include "ops/variable_state.h"
#include "runtime/executor.h"
#include "trace/concrete.h"
#include "tracegraph/function.h"
#include "tracegraph/gradient.h"
#include "tracegraph/indexed_slices.h"
#include "tracegraph/ops.h"

namespace tg {
namespace detail {

/// A backward function for an entry that is not a registry op (a call of a traced function):
/// gets the incoming gradient of each output and returns one gradient per input (empty = none).
using CustomBackward = std::function<std::vector<Tensor>(const std::vector<Tensor>& out_grads)>;

namespace {

thread_local int t_recording_tapes = 0;  // tapes recording on this thread
// Installs the tapes' op and call observers on this thread while any tape records (defined
// below, with the observer).
void observe_for_tapes(bool on);

struct TapeEntry {
  OpId op = OpId::Identity;
  OpAttrs attrs;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  CustomBackward custom;  // set for calls of traced functions
  // For such calls: Variables read inside the function's cond / while sub-graphs.
  std::vector<const VariableState*> inner_variables;
};

}  // namespace

struct TapeState {
  // The trace the tape was created in (nullptr: eager). A tape records only the ops of its own
  // context: an eager tape ignores the ops of a function being traced meanwhile (that function
  // is recorded as one call), and a tape inside a trace ignores sub-graphs being traced.
  const TraceRecorder* context = nullptr;
  bool persistent = false;
  bool recording = false;  // counted in t_recording_tapes while true
  bool spent = false;      // a non-persistent tape that already computed its gradients
  // A deque: a persistent tape records its own gradient() computation while walking its
  // entries, and appending must not move the entries the walk holds.
  std::deque<TapeEntry> entries;
  // Tensors whose gradient the tape can compute, keyed by identity; the handle keeps the key
  // alive so that an address is never reused while the tape lives.
  std::unordered_map<const TensorImpl*, Tensor> tracked;
  // Every recorded read of a floating-point Variable: a Variable source means all of them.
  std::vector<std::pair<const VariableState*, Tensor>> variable_reads;

  bool is_tracked(const Tensor& t) const { return t.impl() && tracked.count(t.impl().get()) != 0; }
  void track(const Tensor& t) { tracked.emplace(t.impl().get(), t); }
  void set_recording(bool on) {
    if (on == recording) return;
    recording = on;
    t_recording_tapes += on ? 1 : -1;
    observe_for_tapes(t_recording_tapes > 0);
  }
};

namespace {

thread_local std::vector<TapeState*> t_tapes;  // tapes alive on this thread, oldest first

bool any_tracked(const TapeState& tape, const std::vector<Tensor>& ts) {
  return std::any_of(ts.begin(), ts.end(), [&](const Tensor& t) { return tape.is_tracked(t); });
}

// An entry whose output is one of its inputs (a kernel that handed its input back) would make
// the walk feed a gradient into itself; such an op is an identity for gradients anyway.
bool aliases_input(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
  for (const Tensor& o : outputs)
    for (const Tensor& i : inputs)
      if (o.impl() == i.impl()) return true;
  return false;
}

void add_entry(TapeState& tape, TapeEntry entry) {
  for (const Tensor& out : entry.outputs)
    if (out.defined() && is_floating(out.dtype())) tape.track(out);
  tape.entries.push_back(std::move(entry));
}

Tensor accumulate(const Tensor& sum, const Tensor& g) { return sum.defined() ? add(sum, g) : g; }

// A slice's gradient held back from the sum (walk_back): the slice's incoming gradient and where
// the slice sits. Its own rule pads it with zeros to its input's shape.
struct SlicePart {
  Tensor grad;
  Tensor input;
  const SliceAttrs* attrs;  // the entry's (the tape's entries do not move)
};

// Whether the slices' gradients go to `x` as one concat: float32 / float64, at least two slices
// that lie side by side along one axis, together covering x, each whole along every other axis.
// Then the sum of their padded gradients (every element adds one slice's value to zeros, in any
// order: that value + 0.0) is the concat of (gradient + 0.0), without writing and adding the
// zeros (an LSTM's four gates: 4 x 4 padded blocks of the step's width). Returns the axis, or -1.
int concat_axis(const Tensor& x, const std::vector<SlicePart>& parts) {
  if (parts.size() < 2 || (x.dtype() != float32 && x.dtype() != float64)) return -1;
  const TensorShape& xs = static_shape(x);
  if (!xs.has_rank() || xs.rank() == 0) return -1;
  const auto rank = static_cast<std::size_t>(xs.rank());
  // The extent of part p along axis d, or -1 when it is not known while tracing.
  auto extent = [&](const SlicePart& p, std::size_t d) -> int64_t {
    const int64_t size = p.attrs->size[d], dim = xs.dims()[d];
    if (size >= 0) return size;
    return dim == None ? -1 : dim - p.attrs->begin[d];
  };
  int axis = -1;
  for (const SlicePart& p : parts) {
    if (p.attrs->begin.size() != rank || p.attrs->size.size() != rank) return -1;
    for (std::size_t d = 0; d < rank; ++d) {
      const bool whole = p.attrs->begin[d] == 0 && (p.attrs->size[d] == -1 || (xs.dims()[d] != None && p.attrs->size[d] == xs.dims()[d]));
      if (whole) continue;
      if (axis != -1 && axis != static_cast<int>(d)) return -1;
      axis = static_cast<int>(d);
    }
  }
  if (axis == -1 || xs.dims()[static_cast<std::size_t>(axis)] == None) return -1;
  const auto a = static_cast<std::size_t>(axis);
  std::vector<std::pair<int64_t, int64_t>> ranges;  // [begin, end) along the axis
  for (const SlicePart& p : parts) {
    const int64_t b = p.attrs->begin[a], e = extent(p, a);
    if (b < 0 || e <= 0) return -1;
    ranges.emplace_back(b, b + e);
  }
  std::sort(ranges.begin(), ranges.end());
  int64_t at = 0;
  for (const auto& [b, e] : ranges) {
    if (b != at) return -1;
    at = e;
  }
  return at == xs.dims()[a] ? axis : -1;
}

// The sum of the slices' gradients: their concat when concat_axis allows, else each padded by
// the slice's own rule and added in order, as accumulate would have.
Tensor sum_slice_parts(const Tensor& x, std::vector<SlicePart>& parts) {
  const int axis = concat_axis(x, parts);
  if (axis >= 0) {
    const auto a = static_cast<std::size_t>(axis);
    std::stable_sort(parts.begin(), parts.end(),
                     [&](const SlicePart& l, const SlicePart& r) { return l.attrs->begin[a] < r.attrs->begin[a]; });
    std::vector<Tensor> pieces;
    for (const SlicePart& p : parts) pieces.push_back(p.grad + 0.0);  // -0.0 -> +0.0, as the padded sum
    return concat(pieces, axis);
  }
  Tensor sum;
  for (const SlicePart& p : parts) sum = accumulate(sum, pad_like(p.grad, p.input, p.attrs->begin));
  return sum;
}

// The first Variable of `vars` that a control-flow op's sub-graphs (nested ones included) read,
// or nullptr.
// (`vars` null: any floating-point Variable.)
const VariableState* variable_read_inside(const OpAttrs& attrs,
                                          const std::unordered_set<const VariableState*>* vars) {
  for (const NamedSubgraph& sg : subgraphs_of(attrs))
    for (const GraphNode& node : sg.graph->nodes) {
      if (node.kind != NodeKind::kOp) continue;
      if (is_variable_read(op_def(node.op).traits)) {
        const auto* v = bound_variable_or_self(node.attrs.get<VariableAttrs>().variable.get());
        if (vars ? vars->count(v) != 0 : is_floating(v->dtype)) return v;
      } else if (has_subgraphs(node.op)) {
        if (const VariableState* v = variable_read_inside(node.attrs, vars)) return v;
      }
    }
  return nullptr;
}

// A cond / while node is differentiated with respect to its inputs; a Variable its branches or
// body read is not one of them, so its gradient would silently be zero. Refuse that case (the
// target depends on such a node and the Variable is a source) with the workaround.
void check_no_variable_read_in_control_flow(const TapeState& tape, const std::vector<Tensor>& targets,
                                            const std::vector<std::vector<const TensorImpl*>>& keys) {
  std::unordered_set<const VariableState*> source_vars;
  for (const auto& group : keys)
    for (const auto& [var, read] : tape.variable_reads)
      if (std::find(group.begin(), group.end(), read.impl().get()) != group.end()) source_vars.insert(var);
  if (source_vars.empty()) return;
  std::unordered_set<const TensorImpl*> downstream;  // outputs that depend on such a node
  const VariableState* culprit = nullptr;
  OpId culprit_op = OpId::Identity;
  for (const TapeEntry& entry : tape.entries) {
    bool tainted = std::any_of(entry.inputs.begin(), entry.inputs.end(),
                               [&](const Tensor& t) { return downstream.count(t.impl().get()) != 0; });
    if (!entry.custom && has_subgraphs(entry.op))
      if (const VariableState* v = variable_read_inside(entry.attrs, &source_vars)) {
        tainted = true;
        if (!culprit) culprit = v, culprit_op = entry.op;
      }
    for (const VariableState* v : entry.inner_variables)  // a traced function's cond / while
      if (source_vars.count(v)) {
        tainted = true;
        if (!culprit) culprit = v, culprit_op = OpId::Cond;
      }
    if (tainted)
      for (const Tensor& o : entry.outputs) downstream.insert(o.impl().get());
  }
  for (const Tensor& t : targets)
    if (culprit && downstream.count(t.impl().get()))
      throw InvalidArgumentError(str_cat(
          "[gradient] the target depends on a ", op_def(culprit_op).name, " whose ",
          culprit_op == OpId::Cond || culprit_op == OpId::StatefulCond ? "branches read" : "body reads",
          " the Variable '", culprit->name, "', and gradients with respect to Variables read inside "
          "tg::cond / tg::while_loop are not supported yet (they would come out as zero). Read the "
          "Variable before the cond / while_loop (tg::Tensor w_value = w.read_value();) and use "
          "w_value inside: gradients flow through captured tensors"));
}

// The gradient of a gather along axis 0 with respect to its params as TF gives it: the rows of
// the incoming gradient, one per index (repeated indices kept). None when params' shape is not
// fully known while tracing (the dense shape an IndexedSlices needs): the dense rule then applies.
std::optional<IndexedSlices> gather_slices(const TapeEntry& entry, const Tensor& out_grad) {
  const TensorShape& params = static_shape(entry.inputs[0]);
  if (!params.is_fully_defined() || params.rank() == 0) return std::nullopt;
  int64_t axis = entry.attrs.get<AxisAttrs>().axis;
  if (axis < 0) axis += params.rank();
  if (axis != 0) return std::nullopt;
  std::vector<int64_t> rows = params.dims();
  rows[0] = -1;
  return IndexedSlices(reshape(entry.inputs[1], {-1}), reshape(out_grad, rows), params);
}

// The walk itself: `keys` lists, per source, the tensors that stand for it.
// With `sparse_out`, a source gathered along axis 0 gets its gradient from that gather as
// IndexedSlices (TF's gather gradient), one list per source in `*sparse_out`; the dense part of
// each source's gradient is the result as before.
std::vector<Tensor> walk_back(TapeState& tape, const std::vector<Tensor>& targets,
                              const std::vector<Tensor>& target_grads,
                              const std::vector<std::vector<const TensorImpl*>>& keys,
                              std::vector<std::vector<IndexedSlices>>* sparse_out = nullptr) {
  // Forward sweep: only entries downstream of a source matter. The walk covers the entries
  // recorded so far; a recording persistent tape appends its own backward ops behind them.
  const std::size_t recorded = tape.entries.size();
  std::unordered_set<const TensorImpl*> reach;
  for (const auto& k : keys) reach.insert(k.begin(), k.end());
  std::vector<char> needed(recorded, 0);
  for (std::size_t e = 0; e < recorded; ++e) {
    const TapeEntry& entry = tape.entries[e];
    if (!std::any_of(entry.inputs.begin(), entry.inputs.end(),
                     [&](const Tensor& t) { return reach.count(t.impl().get()) != 0; }))
      continue;
    needed[e] = 1;
    for (const Tensor& o : entry.outputs) reach.insert(o.impl().get());
  }
  std::unordered_map<const TensorImpl*, Tensor> grads;
  // Slice gradients held back while a tensor's gradient is only a sum of slices' (SlicePart);
  // joined into `grads` when the gradient is read or another kind of gradient arrives.
  std::unordered_map<const TensorImpl*, std::vector<SlicePart>> slice_parts;
  auto join_slices = [&](const Tensor& x) {
    auto it = slice_parts.find(x.impl().get());
    if (it == slice_parts.end()) return;
    Tensor& g = grads[x.impl().get()];
    g = accumulate(g, sum_slice_parts(x, it->second));
    slice_parts.erase(it);
  };
  // Sparse gradients of sources (sparse_out only), kept apart until a dense one is needed.
  std::unordered_map<const TensorImpl*, std::vector<IndexedSlices>> sparse;
  std::unordered_set<const TensorImpl*> sources;
  if (sparse_out)
    for (const auto& k : keys) sources.insert(k.begin(), k.end());
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const TensorImpl* k = targets[i].impl().get();
    if (reach.count(k)) grads[k] = accumulate(grads[k], target_grads[i]);
  }
  for (std::size_t e = recorded; e-- > 0;) {
    if (!needed[e]) continue;
    const TapeEntry& entry = tape.entries[e];
    bool any = false;
    std::vector<Tensor> out_grads;
    std::vector<bool> reached;
    out_grads.reserve(entry.outputs.size());
    for (const Tensor& o : entry.outputs) {
      join_slices(o);
      // A source that an earlier op made (a watched intermediate): its sparse gradients join
      // the dense one that flows on to that op.
      if (auto s = sparse.find(o.impl().get()); s != sparse.end()) {
        Tensor& g = grads[o.impl().get()];
        for (const IndexedSlices& slices : s->second) g = accumulate(g, slices.to_dense());
        sparse.erase(s);
      }
      auto it = grads.find(o.impl().get());
      any |= it != grads.end();
      reached.push_back(it != grads.end());
      out_grads.push_back(it != grads.end() ? it->second : zeros_like(o));
    }
    if (!any) continue;
    if (sparse_out && !entry.custom && entry.op == OpId::Gather && sources.count(entry.inputs[0].impl().get())) {
      if (std::optional<IndexedSlices> slices = gather_slices(entry, out_grads[0])) {
        sparse[entry.inputs[0].impl().get()].push_back(std::move(*slices));
        continue;
      }
    }
    if (!entry.custom && entry.op == OpId::Slice && reach.count(entry.inputs[0].impl().get())) {
      // Held back while the input's gradient has no other kind of term (none came first).
      const Tensor& x = entry.inputs[0];
      auto g = grads.find(x.impl().get());
      if (g == grads.end() || !g->second.defined()) {
        slice_parts[x.impl().get()].push_back({out_grads[0], x, &entry.attrs.get<SliceAttrs>()});
        continue;
      }
    }
    std::vector<Tensor> in_grads;
    if (entry.custom) {
      in_grads = entry.custom(out_grads);
    } else {
      const OpDef& def = op_def(entry.op);
      if (!def.grad)
        throw InternalError(str_cat("[gradient] the op '", def.name,
                                    "' is marked differentiable but has no gradient rule"));
      std::vector<bool> wanted(entry.inputs.size());
      for (std::size_t i = 0; i < wanted.size(); ++i) wanted[i] = reach.count(entry.inputs[i].impl().get()) != 0;
      in_grads = def.grad(GradInputs{entry.inputs, entry.outputs, out_grads, entry.attrs, std::move(wanted), std::move(reached)});
    }
    TG_CHECK(in_grads.size() == entry.inputs.size(), "gradient rule of ",
             entry.custom ? "a function call" : op_def(entry.op).name, " returned ",
             in_grads.size(), " gradients for ", entry.inputs.size(), " inputs");
    for (std::size_t i = 0; i < in_grads.size(); ++i) {
      const Tensor& in = entry.inputs[i];
      if (!in_grads[i].defined() || !reach.count(in.impl().get())) continue;
      TG_CHECK(in_grads[i].dtype() == in.dtype(), "gradient rule of ",
               entry.custom ? "a function call" : op_def(entry.op).name, " gave a ",
               to_string(in_grads[i].dtype()), " gradient for a ", to_string(in.dtype()), " input");
      join_slices(in);
      Tensor& g = grads[in.impl().get()];
      g = accumulate(g, in_grads[i]);
    }
  }
  std::vector<Tensor> result;
  result.reserve(keys.size());
  for (const auto& group : keys) {
    Tensor sum;
    std::vector<IndexedSlices> parts;
    std::unordered_set<const TensorImpl*> seen;  // eager reads of one variable share a handle
    for (const TensorImpl* k : group) {
      if (!seen.insert(k).second) continue;
      if (auto p = slice_parts.find(k); p != slice_parts.end()) {
        Tensor& g = grads[k];
        g = accumulate(g, sum_slice_parts(p->second.front().input, p->second));
        slice_parts.erase(p);
      }
      auto it = grads.find(k);
      if (it != grads.end()) sum = accumulate(sum, it->second);
      if (auto s = sparse.find(k); s != sparse.end()) parts.insert(parts.end(), s->second.begin(), s->second.end());
    }
    result.push_back(sum);
    if (sparse_out) sparse_out->push_back(std::move(parts));
  }
  return result;
}

// Turns a tape's recording on or off for a scope and restores it on exit, exceptions included;
// a tape spent meanwhile stays off. Pausing a non-persistent tape while it computes its gradient:
// it is spent afterwards, so its own backward ops are of no use to it (outer tapes still record
// them, for higher-order gradients). A persistent tape that is recording keeps recording them,
// as in TensorFlow, so that tape.gradient(tape.gradient(y, x), x) is the second derivative.
class TapeRecordingScope {
 public:
  TapeRecordingScope(TapeState& t, bool on) : tape_(t), was_(t.recording) { tape_.set_recording(on); }
  ~TapeRecordingScope() { tape_.set_recording(was_ && !tape_.spent); }
  TapeRecordingScope(const TapeRecordingScope&) = delete;
  TapeRecordingScope& operator=(const TapeRecordingScope&) = delete;

 private:
  TapeState& tape_;
  bool was_;
};

}  // namespace

// Offers an op that just ran (eagerly or recorded into a trace) to the recording tapes.
void record_op_on_tapes(OpId id, const std::vector<Tensor>& inputs, const OpAttrs& attrs,
                        const std::vector<Tensor>& outputs) {
  const OpDef& def = op_def(id);
  const TraceRecorder* context = current_recorder();
  for (TapeState* tape : t_tapes) {
    if (!tape->recording || tape->context != context) continue;
    if (is_variable_read(def.traits)) {  // trainable state is watched automatically
      if (is_floating(outputs[0].dtype())) {
        tape->track(outputs[0]);
        // A Variable parameter read while its function runs is a read of the caller's Variable.
        tape->variable_reads.emplace_back(bound_variable_or_self(attrs.get<VariableAttrs>().variable.get()),
                                          outputs[0]);
      }
      continue;
    }
    // Non-differentiable ops (comparisons, stop_gradient, assigns) cut the gradient path. A
    // cond / while whose sub-graphs read Variables is kept even with untracked inputs, so that
    // gradient() can refuse what it cannot differentiate instead of returning zeros.
    const bool reads_variables =
        has_subgraphs(id) && variable_read_inside(attrs, nullptr) != nullptr;
    if (!(def.traits & kDifferentiable) || !(reads_variables || any_tracked(*tape, inputs)) ||
        aliases_input(inputs, outputs))
      continue;
    add_entry(*tape, TapeEntry{id, attrs, inputs, outputs, {}, {}});
  }
}

// Offers an entry that is not a registry op (a call of a traced function, differentiated by
// `backward`) to the recording tapes; true when a tape took it. `inner_variables`: Variables
// read inside the call's cond / while sub-graphs, whose gradients the call cannot give
// (gradient() refuses a request for them).
bool record_custom_on_tapes(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                            CustomBackward backward,
                            const std::vector<const VariableState*>& inner_variables) {
  bool taken = false;
  const TraceRecorder* context = current_recorder();
  for (TapeState* tape : t_tapes) {
    if (!tape->recording || tape->context != context ||
        !(any_tracked(*tape, inputs) || !inner_variables.empty()) || aliases_input(inputs, outputs))
      continue;
    add_entry(*tape, TapeEntry{OpId::Identity, {}, inputs, outputs, backward, inner_variables});
    taken = true;
  }
  return taken;
}

// ---- calls of traced functions under a tape ------------------------------------------------

using BackwardFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&, const std::vector<Tensor>&,
                                                     const std::vector<Tensor>&, const std::vector<Tensor>&,
                                                     const std::vector<Tensor>&)>;

// What differentiating one concrete function needs, built on its first call under a tape.
struct FunctionGradient {
  std::vector<std::shared_ptr<VariableState>> variables;  // floating-point Variables the graph reads
  // Those read inside cond / while sub-graphs: their gradient cannot be computed (see
  // check_no_variable_read_in_control_flow); a call is refused when it is asked for.
  std::vector<const VariableState*> inner_variables;
  // The stateful random nodes of the graph (not of its sub-graphs): the backward repeats the
  // draws each call made.
  std::vector<const RandomState*> random_states;
  // Every other Variable the graph (sub-graphs included) reads or writes, of any dtype - an
  // integer counter, a Variable only assign_add-ed, one read inside a cond. The backward replay
  // starts each at the value the call saw (a value read at backward time would include the
  // call's own writes), without differentiating it.
  std::vector<std::shared_ptr<VariableState>> state_variables;
  BackwardFn backward;  // (inputs, variable values, output grads, draws, state values)
  std::function<int64_t()> tracing_count;        // of the backward function (tests)
};

namespace {

// Replays the forward graph with the public ops under a tape and differentiates it. Traced as a
// tg::function, so this runs once per concrete function (and input types); the replay uses the
// graph as traced, before the optimiser rewrote it into ops that have no gradient rules.
std::vector<Tensor> replay_and_differentiate(const GraphIR& fwd,
                                             const std::vector<std::shared_ptr<VariableState>>& variables,
                                             const std::vector<const RandomState*>& random_states,
                                             const std::vector<Tensor>& inputs,
                                             const std::vector<Tensor>& var_values,
                                             const std::vector<Tensor>& out_grads,
                                             const std::vector<Tensor>& draws,
                                             const std::vector<std::shared_ptr<VariableState>>& state_variables,
                                             const std::vector<Tensor>& state_values) {
  GradientTape tape;
  for (const Tensor& t : inputs)
    if (is_floating(t.dtype())) tape.watch(t);
  // Plain watches: inside the replay the values are just inputs (the caller's tape checks what
  // gradient() is asked for, see FunctionGradient::inner_variables).
  for (const Tensor& t : var_values) tape.watch(t);
  // The call's Variable values are replay inputs, so that the tape differentiates them.
  ReplayVariables replay_vars;
  for (std::size_t i = 0; i < state_variables.size(); ++i) replay_vars.set_value(state_variables[i].get(), state_values[i]);
  for (std::size_t i = 0; i < variables.size(); ++i)
    replay_vars.set_value(variables[i].get(), var_values[i]);
  for (std::size_t i = 0; i < random_states.size(); ++i) replay_vars.set_random_draw(random_states[i], draws[i]);
  const std::vector<Tensor> outputs = replay_graph(fwd, inputs, &replay_vars);
  std::vector<Tensor> targets, target_grads;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (!is_floating(outputs[i].dtype())) continue;
    targets.push_back(outputs[i]);
    target_grads.push_back(out_grads[i]);
  }
  std::vector<Tensor> all_sources = inputs;
  all_sources.insert(all_sources.end(), var_values.begin(), var_values.end());
  std::vector<Tensor> grads = tape_gradient(tape, targets, target_grads, all_sources);
  // A fixed output structure: zeros for inputs that get no gradient (integer inputs included).
  for (std::size_t i = 0; i < grads.size(); ++i)
    if (!grads[i].defined()) grads[i] = zeros_like(all_sources[i]);
  return grads;
}

std::shared_ptr<FunctionGradient> gradient_of(const ConcreteImpl& cf) {
  std::lock_guard lock(cf.gradient_mu);
  if (cf.gradient) return cf.gradient;
  auto fg = std::make_shared<FunctionGradient>();
  std::shared_ptr<const GraphIR> fwd = cf.unoptimized_ir ? cf.unoptimized_ir : cf.ir;
  // Every floating-point Variable the graph reads, in sub-graphs too (there, gradient() refuses
  // them with a workaround rather than returning zeros).
  std::function<void(const GraphIR&, bool)> collect = [&](const GraphIR& g, bool inner) {
    for (const GraphNode& node : g.nodes) {
      if (node.kind != NodeKind::kOp) continue;
      if (has_subgraphs(node.op))
        for (const NamedSubgraph& sg : subgraphs_of(node)) collect(*sg.graph, true);
      const uint32_t traits = op_def(node.op).traits;
      if (!inner && (traits & kRandom)) fg->random_states.push_back(node.attrs.get<RandomAttrs>().state.get());
      if (!is_variable_read(traits)) continue;
      const auto& variable = node.attrs.get<VariableAttrs>().variable;
      const VariableState* state = variable.get();
      if (!is_floating(state->dtype)) continue;
      if (inner) {
        if (std::find(fg->inner_variables.begin(), fg->inner_variables.end(), state) ==
            fg->inner_variables.end())
          fg->inner_variables.push_back(state);
        continue;
      }
      const bool seen = std::any_of(fg->variables.begin(), fg->variables.end(),
                                    [&](const auto& v) { return v.get() == state; });
      if (!seen) fg->variables.push_back(variable);
    }
  };
  collect(*fwd, false);
  // The state variables: whatever else a node reads or writes, but not a Variable the graph
  // creates (the call gives it its first value; the replay reads that).
  std::vector<const VariableState*> created;
  std::function<void(const GraphIR&)> collect_state = [&](const GraphIR& g) {
    for (const GraphNode& node : g.nodes) {
      if (node.kind != NodeKind::kOp) continue;
      if (has_subgraphs(node.op))
        for (const NamedSubgraph& sg : subgraphs_of(node)) collect_state(*sg.graph);
      const uint32_t traits = op_def(node.op).traits;
      if (!(traits & (kReadsVariable | kWritesVariable | kCreatesVariable))) continue;
      for (const auto& v : variables_named(node.attrs)) {
        if (traits & kCreatesVariable) created.push_back(v.get());
        auto same = [&](const auto& u) { return u.get() == v.get(); };
        if (std::none_of(fg->variables.begin(), fg->variables.end(), same) &&
            std::none_of(fg->state_variables.begin(), fg->state_variables.end(), same))
          fg->state_variables.push_back(v);
      }
    }
  };
  collect_state(*fwd);
  std::erase_if(fg->state_variables,
                [&](const auto& v) { return std::count(created.begin(), created.end(), v.get()) != 0; });
  auto fn = function(
      [fwd, vars = fg->variables, randoms = fg->random_states, states = fg->state_variables](
          const std::vector<Tensor>& inputs, const std::vector<Tensor>& var_values,
          const std::vector<Tensor>& out_grads, const std::vector<Tensor>& draws,
          const std::vector<Tensor>& state_values) {
        return replay_and_differentiate(*fwd, vars, randoms, inputs, var_values, out_grads, draws, states,
                                        state_values);
      },
      {.name = cf.function_name + "_backward"});
  fg->backward = [fn](const std::vector<Tensor>& a, const std::vector<Tensor>& b, const std::vector<Tensor>& c,
                      const std::vector<Tensor>& d, const std::vector<Tensor>& e) mutable { return fn(a, b, c, d, e); };
  fg->tracing_count = [fn] { return fn.tracing_count(); };
  cf.gradient = fg;
  return fg;
}

}  // namespace

// Runs a call of a traced function while tapes record: the tapes see the call as one op whose
// backward is the function's cached backward graph.
std::vector<Tensor> run_call_under_tapes(const ConcreteImpl& cf, const std::vector<Tensor>& inputs) {
  std::shared_ptr<FunctionGradient> fg = gradient_of(cf);
  // The variables' values as the call sees them, read through the op so that tapes track them.
  // A Variable this very call initializes (its value comes from the inputs) is read after it.
  std::vector<Tensor> var_values(fg->variables.size());
  std::vector<std::size_t> read_after;
  for (std::size_t i = 0; i < fg->variables.size(); ++i) {
    if (!variable_has_value(*resolve_variable(fg->variables[i]))) {
      read_after.push_back(i);
      continue;
    }
    var_values[i] = apply_op1(OpId::ReadVariable, {}, VariableAttrs{fg->variables[i]});
  }
  // The other Variables' values before the call, read without an op: no tape is to see them.
  std::vector<Tensor> state_values(fg->state_variables.size());
  std::vector<std::size_t> state_after;
  auto value_now = [](const std::shared_ptr<VariableState>& v) {
    VariableState& s = *resolve_variable(v);
    std::lock_guard lock(s.mu);
    return s.value;
  };
  for (std::size_t i = 0; i < fg->state_variables.size(); ++i) {
    state_values[i] = value_now(fg->state_variables[i]);
    if (!state_values[i].defined()) state_after.push_back(i);
  }
  std::vector<Tensor> outputs;
  std::vector<Tensor> draws;  // the draw each random node of the graph made, for the backward
  {
    RandomDrawLog log;
    outputs = execute(*cf.plan, inputs);
    for (const RandomState* state : fg->random_states) {
      const auto& made = log.draws();
      auto it = std::find_if(made.begin(), made.end(), [&](const auto& d) { return d.first == state; });
      TG_CHECK(it != made.end(), "a random node of '", cf.function_name, "' made no draw");
      draws.push_back(constant(static_cast<int64_t>(it->second)));
    }
  }
  for (std::size_t i : read_after) var_values[i] = apply_op1(OpId::ReadVariable, {}, VariableAttrs{fg->variables[i]});
  for (std::size_t i : state_after) state_values[i] = value_now(fg->state_variables[i]);
  std::vector<Tensor> all_inputs = inputs;
  all_inputs.insert(all_inputs.end(), var_values.begin(), var_values.end());
  const std::size_t n_inputs = inputs.size();
  // The backward runs after this call returned: it needs the call's Variable bindings again
  // (the forward graph's Variable parameters stand for the Variables of *this* call).
  std::vector<VariableBinding> bindings = current_variable_bindings();
  std::vector<const VariableState*> inner_variables;
  for (const VariableState* v : fg->inner_variables) inner_variables.push_back(bound_variable_or_self(v));
  record_custom_on_tapes(all_inputs, outputs,
                         [fg, all_inputs, n_inputs, bindings, draws, state_values](const std::vector<Tensor>& out_grads) {
                           std::vector<Tensor> ins(all_inputs.begin(), all_inputs.begin() + static_cast<std::ptrdiff_t>(n_inputs));
                           std::vector<Tensor> vars(all_inputs.begin() + static_cast<std::ptrdiff_t>(n_inputs), all_inputs.end());
                           VariableBindingScope bound(bindings);
                           std::vector<Tensor> grads = fg->backward(ins, vars, out_grads, draws, state_values);
                           for (std::size_t i = 0; i < grads.size(); ++i)
                             if (!is_floating(all_inputs[i].dtype())) grads[i] = Tensor();
                           return grads;
                         },
                         inner_variables);
  return outputs;
}

namespace {

// How tapes hear of ops and of calls of traced functions, without the op and tracing layers
// knowing about tapes. Stateless: the tapes themselves are thread-local.
class TapeObserver final : public OpObserver, public CallObserver {
 public:
  void on_op(OpId id, const std::vector<Tensor>& inputs, const OpAttrs& attrs,
             const std::vector<Tensor>& outputs) override {
    record_op_on_tapes(id, inputs, attrs, outputs);
  }
  std::vector<Tensor> run_call(const ConcreteImpl& cf, const std::vector<Tensor>& inputs) override {
    return run_call_under_tapes(cf, inputs);
  }
};
TapeObserver g_tape_observer;

void observe_for_tapes(bool on) {
  set_op_observer(on ? &g_tape_observer : nullptr);
  set_call_observer(on ? &g_tape_observer : nullptr);
}

}  // namespace

int64_t backward_tracing_count(const ConcreteImpl& cf) {
  std::lock_guard lock(cf.gradient_mu);
  if (!cf.gradient) return 0;
  return cf.gradient->tracing_count();
}

// ---- the public tape -------------------------------------------------------------------------

namespace {
// Per source, the tensors that stand for it on the tape.
std::vector<std::vector<const TensorImpl*>> source_keys(const TapeState& s, const std::vector<Tensor>& sources) {
  std::vector<std::vector<const TensorImpl*>> keys;
  for (const Tensor& src : sources) {
    // A tensor the tape never tracked - neither watched nor made by a recorded op - has no
    // gradient (None), as in TF, even where a recorded op read it next to a watched input.
    std::vector<const TensorImpl*> group;
    if (s.is_tracked(src)) group.push_back(src.impl().get());
    for (const auto& [var, read] : s.variable_reads)
      if (read.impl() == src.impl())
        for (const auto& [var2, read2] : s.variable_reads)
          if (var2 == var) group.push_back(read2.impl().get());
    keys.push_back(std::move(group));
  }
  return keys;
}

// Several sparse gradients of one source: their indices and values concatenated (TF's sum of
// IndexedSlices), the indices widened to int64 when their dtypes differ.
IndexedSlices concat_slices(const std::vector<IndexedSlices>& parts) {
  if (parts.size() == 1) return parts[0];
  bool mixed = false;
  for (const IndexedSlices& p : parts) mixed |= p.indices().dtype() != parts[0].indices().dtype();
  std::vector<Tensor> indices, values;
  for (const IndexedSlices& p : parts) {
    indices.push_back(mixed ? cast(p.indices(), int64) : p.indices());
    values.push_back(p.values());
  }
  return IndexedSlices(concat(indices, 0), concat(values, 0), parts[0].dense_shape());
}
}  // namespace

std::vector<Tensor> tape_gradient(GradientTape& tape, const std::vector<Tensor>& targets,
                                  const std::vector<Tensor>& target_grads,
                                  const std::vector<Tensor>& sources) {
  TapeState& s = *tape.state_;
  std::optional<TapeRecordingScope> pause;
  if (!s.persistent) pause.emplace(s, false);
  const auto keys = source_keys(s, sources);
  check_no_variable_read_in_control_flow(s, targets, keys);
  return walk_back(s, targets, target_grads, keys);
}

// gradient() with TF's sparse gradients kept (GradientTape::sparse_gradient): a source with only
// sparse parts gets them concatenated; one with a dense part too gets the dense sum.
std::vector<Gradient> tape_sparse_gradient(TapeState& s, const Tensor& target, const std::vector<Tensor>& sources) {
  std::optional<TapeRecordingScope> pause;
  if (!s.persistent) pause.emplace(s, false);
  const auto keys = source_keys(s, sources);
  check_no_variable_read_in_control_flow(s, {target}, keys);
  std::vector<std::vector<IndexedSlices>> sparse;
  std::vector<Tensor> dense = walk_back(s, {target}, {ones_like(target)}, keys, &sparse);
  std::vector<Gradient> out;
  out.reserve(dense.size());
  for (std::size_t i = 0; i < dense.size(); ++i) {
    if (sparse[i].empty()) {
      out.emplace_back(dense[i]);
    } else if (!dense[i].defined()) {
      out.emplace_back(concat_slices(sparse[i]));
    } else {
      Tensor sum = dense[i];
      for (const IndexedSlices& slices : sparse[i]) sum = add(sum, slices.to_dense());
      out.emplace_back(sum);
    }
  }
  return out;
}

}  // namespace detail

namespace {

void check_floating(const char* what, const Tensor& t, const std::string& which) {
  if (!t.defined())
    throw ValueError(detail::str_cat("[GradientTape.", what, "] ", which,
                                     " is an empty tg::Tensor; pass a computed tensor"));
  if (!is_floating(t.dtype()))
    throw TypeError(detail::str_cat(
        "[GradientTape.", what, "] ", which, " must be floating-point (float32 or float64) to take "
        "gradients, but it is ", to_string(t.dtype()), ". Cast it with tg::cast(x, tg::float32) "
        "before the computation you differentiate"));
}

void check_usable(const detail::TapeState& state) {
  if (state.spent)
    throw ValueError(
        "[GradientTape.gradient] this non-persistent GradientTape already computed its "
        "gradients; a non-persistent tape allows one gradient() call. Create it as "
        "tg::GradientTape(/*persistent=*/true) to call gradient() several times, or use a new tape");
}

// A non-persistent tape is done after its one gradient computation.
void spend(detail::TapeState& state) {
  if (state.persistent) return;
  state.spent = true;
  state.set_recording(false);
  state.entries.clear();
  state.tracked.clear();
  state.variable_reads.clear();
}

}  // namespace

GradientTape::GradientTape(bool persistent) : state_(std::make_shared<detail::TapeState>()) {
  state_->persistent = persistent;
  state_->context = detail::current_recorder();
  detail::t_tapes.push_back(state_.get());
  state_->set_recording(true);
}

GradientTape::~GradientTape() {
  state_->set_recording(false);
  auto& tapes = detail::t_tapes;
  tapes.erase(std::remove(tapes.begin(), tapes.end(), state_.get()), tapes.end());
}

void GradientTape::watch(const Tensor& t) {
  check_floating("watch", t, "the watched tensor");
  state_->track(t);
}

void GradientTape::watch(const Variable& v) {
  if (!is_floating(v.dtype()))
    throw TypeError(detail::str_cat("[GradientTape.watch] variable '", v.name(), "' is ",
                                    to_string(v.dtype()), "; only floating-point variables have gradients"));
  Tensor r;
  {
    detail::TapeRecordingScope recording(*state_, true);  // the read registers the variable with this tape
    r = v.read_value();
  }
  state_->track(r);
}

std::vector<Tensor> GradientTape::gradient(const Tensor& target, const std::vector<Tensor>& sources,
                                           UnconnectedGradients unconnected) {
  check_usable(*state_);
  check_floating("gradient", target, "the target");
  for (std::size_t i = 0; i < sources.size(); ++i)
    check_floating("gradient", sources[i], "source " + std::to_string(i));
  std::vector<Tensor> grads = detail::tape_gradient(*this, {target}, {ones_like(target)}, sources);
  spend(*state_);
  for (std::size_t i = 0; i < grads.size(); ++i)
    if (!grads[i].defined() && unconnected == UnconnectedGradients::kZero)
      grads[i] = zeros_like(sources[i]);
  return grads;
}

std::vector<Gradient> GradientTape::sparse_gradient(const Tensor& target, const std::vector<Tensor>& sources,
                                                    UnconnectedGradients unconnected) {
  check_usable(*state_);
  check_floating("sparse_gradient", target, "the target");
  for (std::size_t i = 0; i < sources.size(); ++i)
    check_floating("sparse_gradient", sources[i], "source " + std::to_string(i));
  std::vector<Gradient> grads = detail::tape_sparse_gradient(*state_, target, sources);
  spend(*state_);
  for (std::size_t i = 0; i < grads.size(); ++i)
    if (!grads[i].defined() && unconnected == UnconnectedGradients::kZero) grads[i] = zeros_like(sources[i]);
  return grads;
}

namespace {
// A read that stands for the variable: any read this tape recorded, else the current value.
Tensor read_standing_for(detail::TapeState& state, const Variable& v) {
  if (!is_floating(v.dtype()))
    throw TypeError(detail::str_cat("[GradientTape.gradient] variable '", v.name(), "' is ",
                                    to_string(v.dtype()), "; only floating-point variables have gradients"));
  Tensor r;
  for (const auto& [var, read] : state.variable_reads)
    if (var == v.state().get()) r = read;
  if (!r.defined()) {
    detail::TapeRecordingScope recording(state, true);
    r = v.read_value();
  }
  return r;
}
}  // namespace

namespace {
// The tensors a gradient is taken with respect to: each Variable stands for its recorded read
// (read_standing_for), a tensor for itself. One resolution for gradient() and sparse_gradient().
std::vector<Tensor> source_tensors(detail::TapeState& state, const std::vector<Variable>& sources) {
  std::vector<Tensor> reads;
  reads.reserve(sources.size());
  for (const Variable& v : sources) reads.push_back(read_standing_for(state, v));
  return reads;
}
std::vector<Tensor> source_tensors(detail::TapeState& state, std::initializer_list<GradientSource> sources) {
  std::vector<Tensor> tensors;
  tensors.reserve(sources.size());
  for (const GradientSource& s : sources) {
    if (const Variable* v = std::get_if<Variable>(&s.get())) tensors.push_back(read_standing_for(state, *v));
    else tensors.push_back(std::get<Tensor>(s.get()));
  }
  return tensors;
}
}  // namespace

std::vector<Tensor> GradientTape::gradient(const Tensor& target, const std::vector<Variable>& sources,
                                           UnconnectedGradients unconnected) {
  return gradient(target, source_tensors(*state_, sources), unconnected);
}

std::vector<Tensor> GradientTape::gradient(const Tensor& target,
                                           std::initializer_list<GradientSource> sources,
                                           UnconnectedGradients unconnected) {
  return gradient(target, source_tensors(*state_, sources), unconnected);
}

std::vector<Gradient> GradientTape::sparse_gradient(const Tensor& target, const std::vector<Variable>& sources,
                                                    UnconnectedGradients unconnected) {
  return sparse_gradient(target, source_tensors(*state_, sources), unconnected);
}

std::vector<Gradient> GradientTape::sparse_gradient(const Tensor& target,
                                                    std::initializer_list<GradientSource> sources,
                                                    UnconnectedGradients unconnected) {
  return sparse_gradient(target, source_tensors(*state_, sources), unconnected);
}

void GradientTape::stop_recording() { state_->set_recording(false); }
void GradientTape::resume_recording() {
  if (!state_->spent) state_->set_recording(true);
}

Tensor stop_gradient(const Tensor& x) { return detail::apply_op1(detail::OpId::StopGradient, {x}); }

}  // namespace tg
