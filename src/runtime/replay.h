// The one graph interpreter that runs a recorded graph node by node through the public ops, so
// that whatever is listening sees each op: a GradientTape (the backward of a traced function,
// the gradients of cond branches and while bodies) or an enclosing trace (a tg::function or
// ConcreteFunction called while another function is traced is inlined this way). The executor
// runs graphs fast; this runs them visibly.
#pragma once
#include <unordered_map>
#include <vector>

#include "graph/graph_ir.h"
#include "ops/variable_state.h"

namespace tg::detail {

/// Variables as one replay sees them. The forward call already ran every side effect, so a
/// replay never changes a real Variable and never prints:
/// - a read returns the replay's own value of the Variable: the one the caller gave with
///   set_value (a traced function's backward passes the values its call read, so that the tape
///   differentiates them), else the value the replay assigned last, else the Variable's value
///   now (read once, then kept);
/// - assign / assign_add / assign_sub compute the new value and keep it for later reads of the
///   same replay, exactly as the forward call saw it;
/// - initialize_variable does nothing: the forward call set the value it reads.
/// A stateful random op repeats the draw the forward call made (set_random_draw: a traced
/// function's backward passes the draw numbers its call made), since a mask drawn anew would give
/// silently wrong gradients; a random op whose draw is unknown (inside a cond branch or a loop
/// body) throws InvalidArgumentError.
class ReplayVariables {
 public:
  void set_random_draw(const RandomState* state, Tensor draw) { draws_[state] = std::move(draw); }
  Tensor random(const GraphNode& node, const Tensor& shape);
  void set_value(const VariableState* v, Tensor value) { values_[v] = std::move(value); }
  Tensor read(const VariableState* v, const OpAttrs& read_attrs);
  void write(const VariableState* v, Tensor value) { values_[v] = std::move(value); }

 private:
  std::unordered_map<const VariableState*, Tensor> values_;
  std::unordered_map<const RandomState*, Tensor> draws_;
};

/// How a replay runs a stateful_cond / stateful_while node (sub-graphs with effects): installed
/// by the control-flow layer (set_subgraph_replay), which the runtime cannot include. It must
/// compute the node's outputs from the replay's Variables and leave its writes in the replay,
/// never run them for real (the forward call did).
using SubgraphReplayFn = std::vector<Tensor> (*)(OpId op, ReplayContext& replay, const std::vector<Tensor>& inputs,
                                                 const OpAttrs& attrs);
void set_subgraph_replay(SubgraphReplayFn fn);

/// The Variables a control-flow node's sub-graphs (nested ones included) read or write, in
/// first-use order, without those they create (they have no value before the node runs).
std::vector<std::shared_ptr<VariableState>> variables_used_inside(const OpAttrs& attrs);

/// A stateful control-flow node recorded while a tape observes gets, after its own inputs (cond:
/// pred, captures; while: loop vars, captures), one more per variables_used_inside: the
/// Variable's value just before the node ran. Its gradient replays the sub-graphs from those
/// values (a read at gradient time would see the node's own writes and any later ones). The
/// kernels ignore these inputs. The index of the first one:
std::size_t first_variable_snapshot(OpId op, const OpAttrs& attrs);
/// Appends those snapshots (read_variable ops, recorded where the node is about to be) to a
/// stateful control-flow node's `inputs` when a tape observes ops on this thread and the node has
/// none yet.
void add_variable_snapshots(OpId op, const OpAttrs& attrs, std::vector<Tensor>& inputs);

/// Runs `g` on `inputs` (one per placeholder) through the public ops and returns its outputs.
/// With `variables`, side effects are replayed as ReplayVariables says (never real); without,
/// every op runs as itself - prints print, assigns assign (or are recorded by a trace).
std::vector<Tensor> replay_graph(const GraphIR& g, const std::vector<Tensor>& inputs,
                                 ReplayVariables* variables);

}  // namespace tg::detail
