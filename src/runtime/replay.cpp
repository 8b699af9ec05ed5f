#include "runtime/replay.h"

#include <algorithm>

#include "core/check.h"
#include "ops/control_flow_attrs.h"
#include "ops/random.h"
#include "tracegraph/ops.h"

namespace tg::detail {

namespace {
// A replay as an op's replay hook sees it, while it replays `node`.
class NodeReplay final : public ReplayContext {
 public:
  NodeReplay(ReplayVariables& variables, const GraphNode& node) : variables_(variables), node_(node) {}
  Tensor read(const std::shared_ptr<VariableState>& v) override { return variables_.read(checked(v), VariableAttrs{v}); }
  void write(const std::shared_ptr<VariableState>& v, Tensor value) override { variables_.write(checked(v), std::move(value)); }
  Tensor repeat_draw(const Tensor& shape) override { return variables_.random(node_, shape); }

 private:
  const VariableState* checked(const std::shared_ptr<VariableState>& v) const {
    TG_CHECK(v != nullptr, "variable op ", node_.name, " without its Variable");
    return v.get();
  }
  ReplayVariables& variables_;
  const GraphNode& node_;
};
}  // namespace

namespace {
SubgraphReplayFn g_subgraph_replay = nullptr;

void collect_used(const OpAttrs& attrs, std::vector<std::shared_ptr<VariableState>>& used,
                  std::vector<const VariableState*>& created) {
  for (const NamedSubgraph& sg : subgraphs_of(attrs))
    for (const GraphNode& node : sg.graph->nodes) {
      if (node.kind != NodeKind::kOp) continue;
      const uint32_t traits = op_def(node.op).traits;
      if (traits & kSubgraphs) collect_used(node.attrs, used, created);
      if (!(traits & (kReadsVariable | kWritesVariable | kCreatesVariable))) continue;
      for (const auto& v : variables_named(node.attrs)) {
        if (traits & kCreatesVariable) created.push_back(v.get());
        if (std::none_of(used.begin(), used.end(), [&](const auto& u) { return u.get() == v.get(); }))
          used.push_back(v);
      }
    }
}
}  // namespace

void set_subgraph_replay(SubgraphReplayFn fn) { g_subgraph_replay = fn; }

std::vector<std::shared_ptr<VariableState>> variables_used_inside(const OpAttrs& attrs) {
  std::vector<std::shared_ptr<VariableState>> used;
  std::vector<const VariableState*> created;
  collect_used(attrs, used, created);
  std::erase_if(used, [&](const auto& v) { return std::count(created.begin(), created.end(), v.get()) != 0; });
  return used;
}

std::size_t first_variable_snapshot(OpId op, const OpAttrs& attrs) {
  const ControlFlowAttrs& cf = attrs.get<ControlFlowAttrs>();
  TG_CHECK(cf.payload != nullptr, "control-flow op without its payload");
  const bool is_while = op == OpId::While || op == OpId::StatefulWhile;
  std::size_t first = is_while ? static_cast<std::size_t>(cf.payload->num_loop_vars) : 1;
  for (const auto& caps : cf.payload->capture_inputs)
    for (int c : caps) first = std::max(first, static_cast<std::size_t>(c) + 1);
  return first;
}

void add_variable_snapshots(OpId op, const OpAttrs& attrs, std::vector<Tensor>& inputs) {
  if (current_op_observer() == nullptr || !(op_def(op).traits & kStateful)) return;
  if (inputs.size() != first_variable_snapshot(op, attrs)) return;  // it has them already
  for (const auto& v : variables_used_inside(attrs)) inputs.push_back(apply_op1(OpId::ReadVariable, {}, VariableAttrs{v}));
}

Tensor ReplayVariables::read(const VariableState* v, const OpAttrs& read_attrs) {
  auto it = values_.find(v);
  if (it != values_.end()) return it->second;
  Tensor now = apply_op1(OpId::ReadVariable, {}, read_attrs);
  values_.emplace(v, now);
  return now;
}

Tensor ReplayVariables::random(const GraphNode& node, const Tensor& shape) {
  const RandomAttrs& attrs = node.attrs.get<RandomAttrs>();
  auto it = draws_.find(attrs.state.get());
  if (it == draws_.end())
    throw InvalidArgumentError(str_cat(
        "[gradient] the ", op_def(node.op).name, " node '", node.name, "' is inside a tg::cond branch or a "
        "tg::while_loop body, whose gradient runs the branch or body again: it would draw new values, not "
        "the ones the forward pass used, and the gradient would be wrong. Draw the random values before "
        "the cond / loop and pass them in, or use a stateless_ random op with a seed tensor"));
  Tensor values = repeat_random_draw(node.op, attrs, shape, it->second);
  it->second = it->second + int64_t{1};  // a node that runs again makes the next draw
  return values;
}

std::vector<Tensor> replay_graph(const GraphIR& g, const std::vector<Tensor>& inputs,
                                 ReplayVariables* variables_or_null) {
  std::vector<std::vector<Tensor>> values(g.nodes.size());
  std::vector<Tensor> outputs;
  std::vector<Tensor> args;
  for (std::size_t n = 0; n < g.nodes.size(); ++n) {
    const GraphNode& node = g.nodes[n];
    args.clear();
    for (const ValueRef& in : node.inputs)
      args.push_back(values[static_cast<std::size_t>(in.node)][static_cast<std::size_t>(in.output)]);
    switch (node.kind) {
      case NodeKind::kPlaceholder:
        values[n] = {inputs.at(static_cast<std::size_t>(node.input_index))};
        break;
      case NodeKind::kConst:
        values[n] = {node.value};
        break;
      case NodeKind::kOutput:
        outputs.push_back(args[0]);
        break;
      case NodeKind::kOp: {
        // The registry says which ops have effects a replay must not run for real
        // (kReplayedEffects), and each such op's replay hook computes its outputs instead.
        const OpDef& def = op_def(node.op);
        const bool effects_inside = (def.traits & kStateful) && (def.traits & kSubgraphs);
        if (effects_inside && variables_or_null) {
          // A stateful cond / while: its sub-graphs' effects are replayed like the graph's own.
          TG_CHECK(g_subgraph_replay != nullptr, "no replay installed for the ", def.name, " node '", node.name, "'");
          NodeReplay replay(*variables_or_null, node);
          values[n] = g_subgraph_replay(node.op, replay, args, node.attrs);
          break;
        }
        if (!variables_or_null || !(def.traits & kReplayedEffects)) {
          // Inlined into a trace while a tape observes: the node takes the Variables' values
          // before it, which its gradient needs (add_variable_snapshots).
          if (effects_inside) add_variable_snapshots(node.op, node.attrs, args);
          values[n] = apply_op(node.op, args, node.attrs);
          break;
        }
        if (def.traits & kOptimizerOnly)
          // Running one here would change the real Variables.
          throw InternalError(str_cat("a replay reached the optimiser's ", def.name, " node '", node.name,
                                      "'; replays run graphs as traced"));
        TG_CHECK(def.replay != nullptr, "the ", def.name, " node '", node.name,
                 "' has effects that a replay must not run for real, and its op no replay hook (set_replay)");
        NodeReplay replay(*variables_or_null, node);
        values[n] = def.replay(replay, args, node.attrs);
        break;
      }
    }
  }
  return outputs;
}

}  // namespace tg::detail
