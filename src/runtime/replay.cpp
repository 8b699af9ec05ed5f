#include "runtime/replay.h"

#include "core/check.h"
#include "ops/optimizer_updates.h"
#include "ops/random.h"
#include "tracegraph/ops.h"

namespace tg::detail {

namespace {
const VariableState* variable_of(const GraphNode& node) {
  const VariableState* v = node.attrs.get<VariableAttrs>().variable.get();
  TG_CHECK(v != nullptr, "variable op ", node.name, " without its Variable");
  return v;
}
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
      case NodeKind::kOp:
        if (!variables_or_null) {
          values[n] = apply_op(node.op, args, node.attrs);
          break;
        }
        switch (ReplayVariables& variables = *variables_or_null; node.op) {
          case OpId::Print:
          case OpId::InitializeVariable:  // the forward call gave the Variable its value
            break;
          case OpId::ReadVariable:
            values[n] = {variables.read(variable_of(node), node.attrs)};
            break;
          case OpId::RandomUniform:
          case OpId::RandomNormal:
          case OpId::TruncatedNormal:
            values[n] = {variables.random(node, args[0])};
            break;
          case OpId::AssignVariable:
            variables.write(variable_of(node), args[0]);
            values[n] = {args[0]};
            break;
          case OpId::AssignAddVariable:
          case OpId::AssignSubVariable: {
            const VariableState* v = variable_of(node);
            const Tensor old = variables.read(v, node.attrs);
            Tensor updated = node.op == OpId::AssignAddVariable ? add(old, args[0]) : sub(old, args[0]);
            variables.write(v, updated);
            values[n] = {std::move(updated)};
            break;
          }
          case OpId::ApplyGradientDescent: {
            const VariableState* v = variable_of(node);
            variables.write(v, sub(variables.read(v, node.attrs), mul(args[0], args[1])));
            break;
          }
          case OpId::ApplyAdam: {
            const AdamSlotsAttrs& a = node.attrs.get<AdamSlotsAttrs>();
            const std::shared_ptr<VariableState>* vars[3] = {&a.variable, &a.m, &a.v};
            Tensor old[3];
            for (int k = 0; k < 3; ++k) old[k] = variables.read(vars[k]->get(), VariableAttrs{*vars[k]});
            const std::vector<Tensor> updated = adam_values(old[0], old[1], old[2], args[0], {args.begin() + 1, args.end()});
            for (int k = 0; k < 3; ++k) variables.write(vars[k]->get(), updated[static_cast<std::size_t>(k)]);
            break;
          }
          case OpId::ApplyGradientDescentGroup:
          case OpId::ApplyAdamGroup:
            // Only the optimiser makes these, and replays run graphs as traced: running one here
            // would change the real Variables.
            throw InternalError(str_cat("a replay reached the optimiser's ", op_def(node.op).name, " node '", node.name,
                                        "'; replays run graphs as traced"));
          default:
            values[n] = apply_op(node.op, args, node.attrs);
        }
        break;
    }
  }
  return outputs;
}

}  // namespace tg::detail
