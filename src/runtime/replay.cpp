#include "runtime/replay.h"

#include "core/check.h"
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
        if (!variables_or_null || !(def.traits & kReplayedEffects)) {
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
