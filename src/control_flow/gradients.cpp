// Gradients of the control-flow ops. A cond's gradient is itself a cond: each branch replays its
// forward sub-graph under a GradientTape and returns the vector-Jacobian product for the node's
// captured inputs, so the backward pass also runs only the branch that was taken. A while's
// gradient is two loops: the forward loop again, stacking each iteration's variables, then the
// body's vector-Jacobian product applied in reverse.
#include "runtime/replay.h"
#include "control_flow/subgraph.h"
#include "core/check.h"
#include "core/tensor_impl.h"
#include "tracegraph/control_flow.h"
#include "tracegraph/gradient.h"
#include "tracegraph/ops.h"

namespace tg::detail {

namespace {

// Runs a sub-graph with the public ops, so that a tape records it (Variables as
// ReplayVariables documents: the real ones are never changed, reads see the replay's assigns).
std::vector<Tensor> replay_subgraph(const GraphIR& g, const std::vector<Tensor>& inputs) {
  ReplayVariables variables;
  return replay_graph(g, inputs, &variables);
}

// d(sum_i <outputs_i, out_grads_i>)/d(inputs) for one sub-graph; empty for non-float inputs.
std::vector<Tensor> subgraph_vjp(const GraphIR& g, const std::vector<Tensor>& inputs,
                                 const std::vector<Tensor>& out_grads) {
  GradientTape tape;
  std::vector<Tensor> sources;
  for (const Tensor& x : inputs)
    if (is_floating(x.dtype())) {
      tape.watch(x);
      sources.push_back(x);
    }
  const std::vector<Tensor> outs = replay_subgraph(g, inputs);
  TG_CHECK(outs.size() == out_grads.size(), "sub-graph outputs and their gradients differ in number");
  std::vector<Tensor> terms;
  bool mixed = false;
  for (std::size_t i = 0; i < outs.size(); ++i) {
    if (!is_floating(outs[i].dtype())) continue;
    terms.push_back(reduce_sum(outs[i] * out_grads[i]));
    mixed |= terms.back().dtype() != terms.front().dtype();
  }
  std::vector<Tensor> grads(inputs.size());
  if (terms.empty() || sources.empty()) return grads;
  Tensor target;
  for (const Tensor& t : terms) {
    const Tensor term = mixed ? cast(t, float64) : t;
    target = target.defined() ? target + term : term;
  }
  const std::vector<Tensor> g_src = tape.gradient(target, sources);
  for (std::size_t i = 0, s = 0; i < inputs.size(); ++i)
    if (is_floating(inputs[i].dtype())) grads[i] = g_src[s++];
  return grads;
}

std::vector<Tensor> grad_cond(const GradInputs& g) {
  const ControlFlowPayload& p = payload_of(g.attrs);
  std::vector<std::size_t> diff;  // the node inputs that get a gradient
  for (std::size_t i = 1; i < g.inputs.size(); ++i)
    if (is_floating(g.inputs[i].dtype())) diff.push_back(i);
  std::vector<Tensor> result(g.inputs.size());
  if (diff.empty()) return result;
  auto branch = [&](std::size_t b) {
    std::vector<Tensor> args;
    for (int k : p.capture_inputs[b]) args.push_back(g.inputs[static_cast<std::size_t>(k)]);
    const std::vector<Tensor> ga = subgraph_vjp(*p.subgraphs[b].graph, args, g.grads);
    std::vector<Tensor> out;
    for (std::size_t i : diff) {
      Tensor sum;
      for (std::size_t j = 0; j < args.size(); ++j)
        if (static_cast<std::size_t>(p.capture_inputs[b][j]) == i && ga[j].defined())
          sum = sum.defined() ? sum + ga[j] : ga[j];
      out.push_back(sum.defined() ? sum : zeros_like(g.inputs[i]));
    }
    return out;
  };
  const std::vector<Tensor> r = cond(g.inputs[0], [&] { return branch(0); }, [&] { return branch(1); });
  for (std::size_t k = 0; k < diff.size(); ++k) result[diff[k]] = r[k];
  return result;
}

// The loop runs again, storing every iteration's loop variables in TensorArrays; a reverse loop
// then applies the body's vector-Jacobian product from the last iteration to the first.
std::vector<Tensor> grad_while(const GradInputs& g) {
  const ControlFlowPayload& p = payload_of(g.attrs);
  const auto n = static_cast<std::size_t>(p.num_loop_vars);
  std::vector<Tensor> result(g.inputs.size());
  std::vector<Tensor> cond_caps, body_caps;
  for (int k : p.capture_inputs[0]) cond_caps.push_back(g.inputs[static_cast<std::size_t>(k)]);
  for (int k : p.capture_inputs[1]) body_caps.push_back(g.inputs[static_cast<std::size_t>(k)]);
  for (std::size_t k = 0; k < n; ++k)
    if (g.inputs[k].dtype() == DType::String)
      throw InvalidArgumentError("[gradient] differentiating a tg::while_loop with string loop variables is not supported");

  // Each iteration's loop variables are stored in arrays of one element shape, so a variable
  // must keep its shape. A TensorArray without a full element_shape starts as a scalar marker and
  // becomes the whole array at its first write: refused here, with the fix, before anything runs.
  for (std::size_t k = 0; k < n; ++k) {
    const TensorShape& start = detail::static_shape(g.inputs[k]);
    const TensorShape& after = p.output_types[k].shape;
    if (is_floating(g.inputs[k].dtype()) && start.has_rank() && start.rank() == 0 &&
        !(after.has_rank() && after.rank() == 0))
      throw InvalidArgumentError(str_cat(
          "[gradient] loop variable ", k, " of while loop '", p.name, "' starts as a scalar and has shape ",
          after.to_string(), " after the body; a gradient through a loop needs every loop variable to keep "
          "one shape. A tg::TensorArray written in the loop is such a variable until its first write: create "
          "it with its full element_shape (TensorArray(dtype, size, false, element_shape)) so that it exists "
          "whole from the start"));
  }

  // 1. Forward again, recording each iteration's inputs.
  using Fwd = std::pair<std::vector<Tensor>, std::vector<TensorArray>>;
  Fwd init;
  init.first.push_back(constant(0));
  for (std::size_t k = 0; k < n; ++k) {
    init.first.push_back(g.inputs[k]);
    init.second.emplace_back(g.inputs[k].dtype(), 0, true);
  }
  WhileOptions fo;
  fo.maximum_iterations = p.maximum_iterations;
  fo.name = p.name + "_grad_forward";
  fo.shape_invariants.push_back(TensorShape{});
  for (std::size_t k = 0; k < n; ++k) fo.shape_invariants.push_back(p.output_types[k].shape);
  for (std::size_t k = 0; k < n; ++k) fo.shape_invariants.push_back(TensorShape::unknown_rank());
  auto with_caps = [](std::vector<Tensor> vars, const std::vector<Tensor>& caps) {
    vars.insert(vars.end(), caps.begin(), caps.end());
    return vars;
  };
  const Fwd fwd = while_loop(
      [&](const Fwd& s) {
        return replay_subgraph(*p.subgraphs[0].graph, with_caps({s.first.begin() + 1, s.first.end()}, cond_caps))[0];
      },
      [&](const Fwd& s) {
        const std::vector<Tensor> vars(s.first.begin() + 1, s.first.end());
        Fwd next;
        next.first.push_back(s.first[0] + 1);
        for (const Tensor& v : replay_subgraph(*p.subgraphs[1].graph, with_caps(vars, body_caps))) next.first.push_back(v);
        for (std::size_t k = 0; k < n; ++k) next.second.push_back(s.second[k].write(s.first[0], vars[k]));
        return next;
      },
      init, fo);

  // 2. Backward: loop variables are the iteration index and the gradients of the float loop
  // variables and float body captures.
  std::vector<std::size_t> fv, fc;
  for (std::size_t k = 0; k < n; ++k)
    if (is_floating(g.inputs[k].dtype())) fv.push_back(k);
  for (std::size_t c = 0; c < body_caps.size(); ++c)
    if (is_floating(body_caps[c].dtype())) fc.push_back(c);
  if (fv.empty() && fc.empty()) return result;
  std::vector<Tensor> rinit{fwd.first[0] - 1};
  WhileOptions ro;
  ro.name = p.name + "_grad";
  ro.shape_invariants.push_back(TensorShape{});
  for (std::size_t k : fv) {
    rinit.push_back(g.grads[k]);
    ro.shape_invariants.push_back(p.output_types[k].shape);
  }
  for (std::size_t c : fc) {
    rinit.push_back(zeros_like(body_caps[c]));
    ro.shape_invariants.push_back(detail::static_shape(body_caps[c]));
  }
  const std::vector<TensorArray>& stored = fwd.second;
  const std::vector<Tensor> rev = while_loop(
      [](const std::vector<Tensor>& s) { return s[0] >= 0; },
      [&](const std::vector<Tensor>& s) {
        std::vector<Tensor> vars, out_grads;
        for (std::size_t k = 0; k < n; ++k) vars.push_back(stored[k].read(s[0]));
        out_grads = vars;  // placeholders for non-float outputs (ignored)
        for (std::size_t i = 0; i < fv.size(); ++i) out_grads[fv[i]] = s[1 + i];
        const std::vector<Tensor> vjp = subgraph_vjp(*p.subgraphs[1].graph, with_caps(vars, body_caps), out_grads);
        std::vector<Tensor> next{s[0] - 1};
        for (std::size_t k : fv) next.push_back(vjp[k].defined() ? vjp[k] : zeros_like(vars[k]));
        for (std::size_t i = 0; i < fc.size(); ++i) {
          const Tensor& d = vjp[n + fc[i]];
          next.push_back(d.defined() ? s[1 + fv.size() + i] + d : s[1 + fv.size() + i]);
        }
        return next;
      },
      rinit, ro);
  for (std::size_t i = 0; i < fv.size(); ++i) result[fv[i]] = rev[1 + i];
  for (std::size_t i = 0; i < fc.size(); ++i) {
    const auto idx = static_cast<std::size_t>(p.capture_inputs[1][fc[i]]);
    const Tensor& d = rev[1 + fv.size() + i];
    result[idx] = result[idx].defined() ? result[idx] + d : d;
  }
  return result;
}

// ---- stateful cond / while: effects replayed, never run again ----------------------------------

// Whether sub-graph `g` (nested ones included) writes Variable `v`.
bool writes_variable(const GraphIR& g, const VariableState* v) {
  for (const GraphNode& node : g.nodes) {
    if (node.kind != NodeKind::kOp) continue;
    const uint32_t traits = op_def(node.op).traits;
    if (traits & kSubgraphs)
      for (const NamedSubgraph& sg : subgraphs_of(node))
        if (writes_variable(*sg.graph, v)) return true;
    if (traits & kWritesVariable)
      for (const auto& named : variables_named(node.attrs))
        if (named.get() == v) return true;
  }
  return false;
}

// The replay of one sub-graph run: every Variable it uses starts at `values` (one per `used`).
ReplayVariables seeded(const std::vector<std::shared_ptr<VariableState>>& used, const std::vector<Tensor>& values) {
  ReplayVariables vars;
  for (std::size_t k = 0; k < used.size(); ++k) vars.set_value(used[k].get(), values[k]);
  return vars;
}

// A stateful cond / while computed again without touching a real Variable: a plain cond / while
// whose branches or body replay the node's sub-graphs, with the Variables they use as values -
// read from `replay` before the node, those the sub-graphs write carried out as extra results
// (loop variables of a while) and written back to `replay`. The new node has no effects, so a
// tape differentiates it like any cond / while; a random op inside is refused by the replay (its
// draw is unknown), as in any gradient of a cond or loop.
std::vector<Tensor> replay_stateful_control_flow(OpId op, ReplayContext& replay, const std::vector<Tensor>& in,
                                                 const OpAttrs& attrs) {
  const ControlFlowPayload& p = payload_of(attrs);
  const std::vector<std::shared_ptr<VariableState>> used = variables_used_inside(attrs);
  std::vector<Tensor> entry;
  for (const auto& v : used) entry.push_back(replay.read(v));
  std::vector<std::size_t> written;  // indices into `used`
  const bool is_while = op == OpId::StatefulWhile;
  for (std::size_t k = 0; k < used.size(); ++k) {
    if (is_while && writes_variable(*p.subgraphs[0].graph, used[k].get()))
      throw InvalidArgumentError(str_cat(
          "[gradient] the condition of the tg::while_loop '", p.name, "' writes the Variable '", used[k]->name,
          "'; its gradient cannot replay that loop exactly. Write the Variable in the loop body instead"));
    const bool writes = is_while ? writes_variable(*p.subgraphs[1].graph, used[k].get())
                                 : writes_variable(*p.subgraphs[0].graph, used[k].get()) ||
                                       writes_variable(*p.subgraphs[1].graph, used[k].get());
    if (writes) written.push_back(k);
  }
  auto with_captures = [&](std::vector<Tensor> args, std::size_t g) {
    for (int k : p.capture_inputs[g]) args.push_back(in[static_cast<std::size_t>(k)]);
    return args;
  };
  auto run = [&](std::size_t g, const std::vector<Tensor>& args, const std::vector<Tensor>& values, bool carry) {
    ReplayVariables vars = seeded(used, values);
    std::vector<Tensor> out = replay_graph(*p.subgraphs[g].graph, args, &vars);
    if (carry)
      for (std::size_t k : written) out.push_back(vars.read(used[k].get(), VariableAttrs{used[k]}));
    return out;
  };
  const std::size_t n_out = p.output_types.size();
  std::vector<Tensor> out;
  if (!is_while) {
    out = cond_flat(in[0], [&] { return run(0, with_captures({}, 0), entry, true); },
                    [&] { return run(1, with_captures({}, 1), entry, true); });
  } else {
    const auto n = static_cast<std::size_t>(p.num_loop_vars);
    // The Variables' values as of an iteration: the written ones are the extra loop variables.
    auto values_at = [&](const std::vector<Tensor>& vars) {
      std::vector<Tensor> values = entry;
      for (std::size_t j = 0; j < written.size(); ++j) values[written[j]] = vars[n + j];
      return values;
    };
    std::vector<Tensor> init(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(n));
    std::vector<FlatLeaf> leaves;
    WhileOptions options;
    options.maximum_iterations = p.maximum_iterations;
    options.name = p.name;
    for (std::size_t k = 0; k < n; ++k) {
      leaves.push_back(FlatLeaf{p.var_paths[k], false});
      options.shape_invariants.push_back(p.output_types[k].shape);
    }
    for (std::size_t k : written) {
      init.push_back(entry[k]);
      leaves.push_back(FlatLeaf{"Variable '" + used[k]->name + "'", false});
      options.shape_invariants.push_back(used[k]->shape);
    }
    auto loop_vars = [n](const std::vector<Tensor>& vars) {
      return std::vector<Tensor>(vars.begin(), vars.begin() + static_cast<std::ptrdiff_t>(n));
    };
    out = while_loop_flat(
        [&](const std::vector<Tensor>& vars) { return run(0, with_captures(loop_vars(vars), 0), values_at(vars), false); },
        [&](const std::vector<Tensor>& vars) { return run(1, with_captures(loop_vars(vars), 1), values_at(vars), true); },
        init, leaves, options);
  }
  TG_CHECK(out.size() == n_out + written.size(), "a replayed ", op_def(op).name, " gave ", out.size(), " values for ",
           n_out + written.size());
  for (std::size_t j = 0; j < written.size(); ++j) replay.write(used[written[j]], out[n_out + j]);
  out.resize(n_out);
  return out;
}

// A ReplayContext over Variable values of its own (a stateful node's snapshots).
class SnapshotReplay final : public ReplayContext {
 public:
  explicit SnapshotReplay(ReplayVariables& vars) : vars_(vars) {}
  Tensor read(const std::shared_ptr<VariableState>& v) override { return vars_.read(v.get(), VariableAttrs{v}); }
  void write(const std::shared_ptr<VariableState>& v, Tensor value) override { vars_.write(v.get(), std::move(value)); }
  Tensor repeat_draw(const Tensor&) override {
    throw InternalError("a stateful cond / while replay asked for a random draw of its own");
  }

 private:
  ReplayVariables& vars_;
};

// The gradient of a stateful cond / while: the vector-Jacobian product of its replay from the
// Variable values it had before it ran (its snapshot inputs, add_variable_snapshots), not from
// the values at gradient time, which its own writes (and any later ones) have changed.
std::vector<Tensor> grad_stateful(OpId op, const GradInputs& g) {
  const std::vector<std::shared_ptr<VariableState>> used = variables_used_inside(g.attrs);
  const std::size_t first = first_variable_snapshot(op, g.attrs);
  if (g.inputs.size() != first + used.size())
    throw InvalidArgumentError(str_cat(
        "[gradient] this ", op_def(op).name, " node was recorded without the values of the Variables its ",
        op == OpId::StatefulCond ? "branches use" : "condition and body use", " (", used.size(),
        " expected, ", g.inputs.size() > first ? g.inputs.size() - first : 0,
        " given), so its gradient cannot replay it exactly. Trace the function again while the tape records"));
  std::vector<Tensor> snapshot(g.inputs.begin() + static_cast<std::ptrdiff_t>(first), g.inputs.end());
  ReplayVariables vars = seeded(used, snapshot);
  SnapshotReplay replay(vars);
  const std::vector<Tensor> node_inputs(g.inputs.begin(), g.inputs.begin() + static_cast<std::ptrdiff_t>(first));
  // Each distinct floating-point input once (a tensor may feed a loop variable and a capture):
  // its whole gradient goes to its first slot, which the tape sums per tensor anyway.
  GradientTape tape;
  std::vector<Tensor> sources;
  std::vector<std::size_t> slots;
  for (std::size_t i = op == OpId::StatefulCond ? 1 : 0; i < first; ++i) {
    const Tensor& x = g.inputs[i];
    if (!is_floating(x.dtype())) continue;
    bool seen = false;
    for (std::size_t s : slots) seen |= g.inputs[s].impl() == x.impl();
    if (seen) continue;
    tape.watch(x);
    sources.push_back(x);
    slots.push_back(i);
  }
  std::vector<Tensor> result(g.inputs.size());
  if (sources.empty()) return result;
  const std::vector<Tensor> outs = replay_stateful_control_flow(op, replay, node_inputs, g.attrs);
  std::vector<Tensor> terms;
  bool mixed = false;
  for (std::size_t i = 0; i < outs.size(); ++i) {
    if (!is_floating(outs[i].dtype()) || !g.got_gradient(i)) continue;
    terms.push_back(reduce_sum(outs[i] * g.grads[i]));
    mixed |= terms.back().dtype() != terms.front().dtype();
  }
  if (terms.empty()) return result;
  Tensor target;
  for (const Tensor& t : terms) {
    const Tensor term = mixed ? cast(t, float64) : t;
    target = target.defined() ? target + term : term;
  }
  const std::vector<Tensor> grads = tape.gradient(target, sources);
  for (std::size_t s = 0; s < slots.size(); ++s) result[slots[s]] = grads[s];
  return result;
}

std::vector<Tensor> grad_stateful_cond(const GradInputs& g) { return grad_stateful(OpId::StatefulCond, g); }
std::vector<Tensor> grad_stateful_while(const GradInputs& g) { return grad_stateful(OpId::StatefulWhile, g); }

}  // namespace

void register_control_flow_gradients(OpDef* t) {
  set_grad(t, OpId::Cond, &grad_cond);
  set_grad(t, OpId::StatefulCond, &grad_stateful_cond);
  set_grad(t, OpId::While, &grad_while);
  set_grad(t, OpId::StatefulWhile, &grad_stateful_while);
  set_subgraph_replay(&replay_stateful_control_flow);
}

}  // namespace tg::detail
