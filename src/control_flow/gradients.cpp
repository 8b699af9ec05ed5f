// Gradients of the control-flow ops. A cond's gradient is itself a cond: each branch replays its
// forward sub-graph under a GradientTape and returns the vector-Jacobian product for the node's
// captured inputs, so the backward pass also runs only the branch that was taken. A while's
// gradient is a backward loop over the forward values each iteration stored (the loop stores them
// itself when traced under a tape; otherwise its gradient runs the forward part once more to
// store them): it runs only the gradient ops of the body's vector-Jacobian product.
#include <algorithm>
#include <array>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "runtime/replay.h"
#include "passes/passes.h"
#include "control_flow/subgraph.h"
#include "core/check.h"
#include "core/tensor_impl.h"
#include "ops/matmul.h"
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

// Each iteration's values are stored in arrays of one element shape, so a loop variable must
// keep its shape. A TensorArray without a full element_shape starts as a scalar marker and
// becomes the whole array at its first write: refused here, with the fix, before anything runs.
void check_loop_variable_shapes(const GradInputs& g) {
  const ControlFlowPayload& p = payload_of(g.attrs);
  const auto n = static_cast<std::size_t>(p.num_loop_vars);
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
}

// The general form, for bodies split_body_vjp does not split: the loop runs again, storing
// every iteration's loop variables in TensorArrays; a reverse loop then replays the body under a
// tape at each iteration, from the last to the first.
std::vector<Tensor> grad_while_replay(const GradInputs& g) {
  const ControlFlowPayload& p = payload_of(g.attrs);
  const auto n = static_cast<std::size_t>(p.num_loop_vars);
  std::vector<Tensor> result(g.inputs.size());
  std::vector<Tensor> cond_caps, body_caps;
  for (int k : p.capture_inputs[0]) cond_caps.push_back(g.inputs[static_cast<std::size_t>(k)]);
  for (int k : p.capture_inputs[1]) body_caps.push_back(g.inputs[static_cast<std::size_t>(k)]);
  for (std::size_t k = 0; k < n; ++k)
    if (g.inputs[k].dtype() == DType::String)
      throw InvalidArgumentError("[gradient] differentiating a tg::while_loop with string loop variables is not supported");

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

// ---- a loop's gradient from stored forward values -------------------------------------------
//
// The body's vector-Jacobian product is traced once as a graph on placeholders [loop vars,
// captures, output gradients] and split by what each node depends on: the forward part (no
// output gradient in it) runs in the forward loop, which stores, per iteration, the values of it
// that depend on a loop variable and that the gradient part reads (TF's while_v2 accumulators);
// the backward loop reads them back and runs only the gradient part. Values that depend on
// captures alone are computed again where they are needed (they are the same in every
// iteration). Two gradients of a capture are not summed per iteration: a read of one element of
// a captured sequence (a gather along axis 0, whose gradient is a scatter into zeros shaped like
// the whole sequence) stores its rows and indices and scatters all of them after the loop, and a
// product a^T b (a weight's gradient) stores a and b and multiplies them once after the loop.
//
// A loop traced while a tape records stores those values itself (while_storing_gradient_values:
// its node is a loop with the arrays as extra loop variables, known to grad_while by its
// payload); any other loop's gradient runs the forward part again to store them.

enum class CaptureGrad { kNone, kDense, kRows, kProduct };

struct SplitBody {
  std::shared_ptr<GraphIR> graph;
  std::size_t n = 0, m = 0;           // loop variables, captures
  std::vector<std::size_t> fv, fc;    // the float loop variables and captures differentiated
  std::vector<char> dv, dg;           // per node: depends on a loop variable / on an output gradient
  std::vector<ValueRef> body_out;     // per loop variable: its next value
  std::vector<ValueRef> var_grad;     // per fv: its gradient (node -1: none)
  std::vector<CaptureGrad> cap_kind;  // per fc
  std::vector<std::array<ValueRef, 2>> cap_refs;  // kDense: [grad]; kRows: [rows, indices]; kProduct: [a, b]
  std::vector<const GraphNode*> cap_node;          // kRows / kProduct: the node whose inputs are stored
  std::vector<ValueRef> residuals;    // forward values stored per iteration
  std::vector<ValueRef> shapes_only;  // forward values of a fully known shape whose value no gradient op reads
  std::vector<char> recompute;        // per node: a forward elementwise node the backward loop computes again
  std::vector<char> fwd_run;          // per node: run in the forward loop
  bool forward_only(const ValueRef& r) const {
    const auto j = static_cast<std::size_t>(r.node);
    return dv[j] && !dg[j];
  }
};

bool known_matrix(const TensorShape& s) { return s.is_fully_defined() && s.rank() == 2; }

// Runs the nodes marked in `run`, in order, through the public ops; `values` holds the
// placeholders' and residuals' values on entry. With `right_transposed`, a product whose entry
// there is defined multiplies by it untransposed in place of its transposed right operand.
void run_marked(const GraphIR& g, const std::vector<char>& run, std::vector<std::vector<Tensor>>& values,
                const std::vector<Tensor>* right_transposed = nullptr) {
  std::vector<Tensor> args;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    if (!run[i]) continue;
    const GraphNode& node = g.nodes[i];
    if (node.kind == NodeKind::kConst) {
      values[i] = {node.value};
    } else if (right_transposed && (*right_transposed)[i].defined()) {
      const Tensor& a = values[static_cast<std::size_t>(node.inputs[0].node)][static_cast<std::size_t>(node.inputs[0].output)];
      values[i] = {matmul(a, (*right_transposed)[i], node.attrs.get<MatMulAttrs>().transpose_a, false)};
    } else if (node.kind == NodeKind::kOp) {
      args.clear();
      for (const ValueRef& in : node.inputs)
        args.push_back(values[static_cast<std::size_t>(in.node)][static_cast<std::size_t>(in.output)]);
      values[i] = apply_op(node.op, args, node.attrs);
    }
  }
}

const Tensor& value_at(const std::vector<std::vector<Tensor>>& values, const ValueRef& r) {
  return values[static_cast<std::size_t>(r.node)][static_cast<std::size_t>(r.output)];
}

// The backward loop's nodes for the gradients of the loop variables and of the captures marked
// in `caps` (per fc): those they need, down to the stored forward values. With `residuals`,
// the stored values met are added to it; without, they must be there already.
std::vector<char> backward_nodes(const SplitBody& s, const std::vector<char>& caps, std::vector<ValueRef>* residuals) {
  const GraphIR& g = *s.graph;
  std::vector<char> run(g.nodes.size(), 0);
  auto need = [&](const ValueRef& r) {
    if (r.node < 0) return;
    if (s.forward_only(r)) {
      if (!residuals && std::find(s.shapes_only.begin(), s.shapes_only.end(), r) != s.shapes_only.end()) return;
      if (!s.recompute.empty() && s.recompute[static_cast<std::size_t>(r.node)]) {
        run[static_cast<std::size_t>(r.node)] = 1;
        return;
      }
      if (residuals && std::find(residuals->begin(), residuals->end(), r) == residuals->end()) residuals->push_back(r);
      TG_CHECK(residuals || std::find(s.residuals.begin(), s.residuals.end(), r) != s.residuals.end(),
               "a loop gradient needs a forward value its forward loop did not store");
      return;
    }
    run[static_cast<std::size_t>(r.node)] = 1;
  };
  for (const ValueRef& r : s.var_grad) need(r);
  for (std::size_t i = 0; i < s.fc.size(); ++i)
    if (caps[i]) {
      need(s.cap_refs[i][0]);
      need(s.cap_refs[i][1]);
    }
  for (std::size_t i = g.nodes.size(); i-- > 0;)
    if (run[i] && g.nodes[i].kind == NodeKind::kOp)
      for (const ValueRef& in : g.nodes[i].inputs) need(in);
  return run;
}

// Whether input `k` of `node` gives it only a shape (pad_like's, sum_to_like's target,
// zeros_like's input).
bool shape_only_input(const GraphNode& node, std::size_t k) {
  if (node.kind != NodeKind::kOp) return false;
  return (k == 1 && (node.op == OpId::PadLike || node.op == OpId::SumToLike)) || (k == 0 && node.op == OpId::ZerosLike);
}

// Moves the stored values that the backward loop reads only for their (fully known) shape from
// s.residuals to s.shapes_only: the backward loop gets zeros of that shape instead.
void keep_shapes_only(SplitBody& s, const std::vector<char>& bwd_run) {
  const GraphIR& g = *s.graph;
  std::vector<ValueRef> kept;
  for (const ValueRef& r : s.residuals) {
    bool value_read = !g.type_of(r).shape.is_fully_defined();
    for (const ValueRef& out : s.var_grad) value_read |= out == r;
    for (std::size_t i = 0; i < s.fc.size(); ++i) value_read |= s.cap_refs[i][0] == r || s.cap_refs[i][1] == r;
    for (std::size_t i = 0; i < g.nodes.size() && !value_read; ++i) {
      if (!bwd_run[i] || g.nodes[i].kind != NodeKind::kOp) continue;
      for (std::size_t k = 0; k < g.nodes[i].inputs.size(); ++k)
        value_read |= g.nodes[i].inputs[k] == r && !shape_only_input(g.nodes[i], k);
    }
    (value_read ? kept : s.shapes_only).push_back(r);
  }
  s.residuals = std::move(kept);
}

// Stored values that are elementwise functions of other stored values (an LSTM's c' from its
// gates and c, tanh(c'), sigmoid's s (1 - s)) are computed again in the backward loop, where they
// fuse with the gradient ops, instead of being stored: their ops cost about what storing and
// reading them back costs, and the loop keeps less memory per iteration.
void recompute_elementwise(SplitBody& s) {
  const GraphIR& g = *s.graph;
  s.recompute.assign(g.nodes.size(), 0);
  std::vector<char> stored(g.nodes.size(), 0);
  for (const ValueRef& r : s.residuals)
    if (g.nodes[static_cast<std::size_t>(r.node)].outputs.size() == 1) stored[static_cast<std::size_t>(r.node)] = 1;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& node = g.nodes[i];
    if (!s.dv[i] || s.dg[i] || node.kind != NodeKind::kOp || node.outputs.size() != 1) continue;
    const uint32_t traits = op_def(node.op).traits;
    if (!(traits & kElementwise) || (traits & kStateful)) continue;
    bool ok = true;
    for (const ValueRef& in : node.inputs) {
      const auto j = static_cast<std::size_t>(in.node);
      ok &= !s.forward_only(in) || (stored[j] && !s.recompute[j]) || s.recompute[j];
    }
    s.recompute[i] = ok;
  }
  // A stored value is dropped when it can be computed again; what it is computed from stays
  // stored or is itself computed again, down to values that stay stored.
  std::vector<ValueRef> kept;
  for (const ValueRef& r : s.residuals)
    if (!s.recompute[static_cast<std::size_t>(r.node)]) kept.push_back(r);
  s.residuals = std::move(kept);
}

// The split of the body's vector-Jacobian product for the float loop variables `fv` and the
// float captures `fc`, or nothing where the body is not split (its gradient then replays it,
// grad_while_replay).
std::optional<SplitBody> split_body_vjp(const ControlFlowPayload& p, const std::vector<Tensor>& body_caps,
                                        const std::vector<std::size_t>& fv, const std::vector<std::size_t>& fc) {
  const auto n = static_cast<std::size_t>(p.num_loop_vars);
  const std::size_t m = body_caps.size();
  GraphRecorder rec(CapturePolicy::kCapture, p.name + "/gradient");
  std::vector<Tensor> args, grads;
  for (std::size_t k = 0; k < n; ++k) args.push_back(rec.add_input(p.output_types[k], "loop_var"));
  for (const Tensor& c : body_caps) args.push_back(rec.add_input({c.dtype(), detail::static_shape(c)}, "capture"));
  for (std::size_t k : fv) grads.push_back(rec.add_input(p.output_types[k], "grad"));
  std::vector<char> has_var(fv.size()), has_cap(fc.size());
  const std::vector<Tensor> outs = rec.trace([&] {
    GradientTape tape;
    std::vector<Tensor> sources;
    for (std::size_t k : fv) sources.push_back(args[k]);
    for (std::size_t c : fc) sources.push_back(args[n + c]);
    for (const Tensor& x : sources) tape.watch(x);
    const std::vector<Tensor> next = replay_subgraph(*p.subgraphs[1].graph, args);
    TG_CHECK(next.size() == n, "a while body gave ", next.size(), " values for ", n, " loop variables");
    std::vector<Tensor> targets, target_grads;
    for (std::size_t i = 0; i < fv.size(); ++i) {
      targets.push_back(next[fv[i]]);
      target_grads.push_back(grads[i]);
    }
    const std::vector<Tensor> d = detail::tape_gradient(tape, targets, target_grads, sources);
    std::vector<Tensor> result;
    for (std::size_t i = 0; i < d.size(); ++i) {
      char& flag = i < fv.size() ? has_var[i] : has_cap[i - fv.size()];
      flag = d[i].defined();
      if (flag) result.push_back(d[i]);
    }
    result.insert(result.end(), next.begin(), next.end());
    return result;
  });
  if (!rec.captures().empty()) return std::nullopt;
  SplitBody s;
  s.graph = rec.graph();
  s.n = n;
  s.m = m;
  s.fv = fv;
  s.fc = fc;
  optimize_subgraph(*s.graph);
  const GraphIR& g = *s.graph;
  const std::size_t count = g.nodes.size();
  std::vector<ValueRef> out_refs;
  for (int o : g.outputs) out_refs.push_back(g.node(o).inputs[0]);
  TG_CHECK(out_refs.size() == outs.size() && g.placeholders.size() == n + m + fv.size(),
           "the split loop gradient lost inputs or outputs");
  for (const GraphNode& node : g.nodes)
    if (node.kind == NodeKind::kOp && (op_def(node.op).traits & kStateful)) return std::nullopt;

  // What each node depends on.
  s.dv.assign(count, 0);
  s.dg.assign(count, 0);
  for (std::size_t i = 0; i < count; ++i) {
    const GraphNode& node = g.nodes[i];
    if (node.kind == NodeKind::kPlaceholder) {
      const auto k = static_cast<std::size_t>(node.input_index);
      s.dv[i] = k < n;
      s.dg[i] = k >= n + m;
    }
    for (const ValueRef& in : node.inputs) {
      s.dv[i] |= s.dv[static_cast<std::size_t>(in.node)];
      s.dg[i] |= s.dg[static_cast<std::size_t>(in.node)];
    }
  }
  const ValueRef none{-1, 0};
  std::size_t next_out = 0;
  for (std::size_t i = 0; i < fv.size(); ++i) s.var_grad.push_back(has_var[i] ? out_refs[next_out++] : none);
  std::vector<ValueRef> cap_grad;
  for (std::size_t i = 0; i < fc.size(); ++i) cap_grad.push_back(has_cap[i] ? out_refs[next_out++] : none);
  for (std::size_t k = 0; k < n; ++k) s.body_out.push_back(out_refs[next_out++]);

  // How each capture's gradient is gathered over the iterations.
  for (std::size_t i = 0; i < fc.size(); ++i) {
    const ValueRef r = cap_grad[i];
    CaptureGrad kind = r.node < 0 ? CaptureGrad::kNone : CaptureGrad::kDense;
    std::array<ValueRef, 2> refs{r, none};
    const GraphNode* via = nullptr;
    if (kind == CaptureGrad::kDense && !s.forward_only(r)) {
      const GraphNode& src = g.node(r.node);
      if (src.kind == NodeKind::kOp && src.op == OpId::ScatterAddLike && src.attrs.get<AxisAttrs>().axis == 0 &&
          src.inputs[2].node == g.placeholders[n + fc[i]] && g.type_of(src.inputs[0]).shape.is_fully_defined() &&
          g.type_of(src.inputs[1]).shape.is_fully_defined()) {
        kind = CaptureGrad::kRows;
        refs = {src.inputs[0], src.inputs[1]};
        via = &src;
      } else if (src.kind == NodeKind::kOp && src.op == OpId::MatMul && src.attrs.get<MatMulAttrs>().transpose_a &&
                 !src.attrs.get<MatMulAttrs>().transpose_b && known_matrix(g.type_of(src.inputs[0]).shape) &&
                 known_matrix(g.type_of(src.inputs[1]).shape) &&
                 g.type_of(r).shape.is_subtype_of(detail::static_shape(body_caps[fc[i]]))) {
        kind = CaptureGrad::kProduct;
        refs = {src.inputs[0], src.inputs[1]};
        via = &src;
      }
    }
    s.cap_kind.push_back(kind);
    s.cap_refs.push_back(refs);
    s.cap_node.push_back(via);
  }

  // The stored values (for every gradient of the split), and the forward loop's nodes: the next
  // loop variables and the stored values.
  keep_shapes_only(s, backward_nodes(s, std::vector<char>(fc.size(), 1), &s.residuals));
  recompute_elementwise(s);
  s.fwd_run.assign(count, 0);
  for (const ValueRef& r : s.body_out) s.fwd_run[static_cast<std::size_t>(r.node)] = 1;
  for (const ValueRef& r : s.residuals) s.fwd_run[static_cast<std::size_t>(r.node)] = 1;
  for (std::size_t i = count; i-- > 0;)
    if (s.fwd_run[i] && g.nodes[i].kind == NodeKind::kOp)
      for (const ValueRef& in : g.nodes[i].inputs) s.fwd_run[static_cast<std::size_t>(in.node)] = 1;
  return s;
}

// An array for one value per iteration, with the value's static shape as its element shape (its
// reads have that shape; a fully known one exists, empty, before the first write, and stacks to
// (0, ...) after no iteration).
TensorArray per_iteration_array(const ValueType& t) { return TensorArray(t.dtype, 0, true, t.shape); }

std::vector<std::vector<Tensor>> split_values(const SplitBody& s, const std::vector<Tensor>& caps) {
  std::vector<std::vector<Tensor>> values(s.graph->nodes.size());
  for (std::size_t c = 0; c < s.m; ++c) values[static_cast<std::size_t>(s.graph->placeholders[s.n + c])] = {caps[c]};
  return values;
}

// One forward iteration: the next loop variables, and the arrays with this iteration's values.
std::pair<std::vector<Tensor>, std::vector<TensorArray>> forward_step(const SplitBody& s, const std::vector<Tensor>& vars,
                                                                       const std::vector<Tensor>& caps,
                                                                       const std::vector<TensorArray>& arrays,
                                                                       const Tensor& iteration) {
  std::vector<std::vector<Tensor>> values = split_values(s, caps);
  for (std::size_t k = 0; k < s.n; ++k) values[static_cast<std::size_t>(s.graph->placeholders[k])] = {vars[k]};
  run_marked(*s.graph, s.fwd_run, values);
  std::pair<std::vector<Tensor>, std::vector<TensorArray>> next;
  for (const ValueRef& r : s.body_out) next.first.push_back(value_at(values, r));
  for (std::size_t j = 0; j < s.residuals.size(); ++j) next.second.push_back(arrays[j].write(iteration, value_at(values, s.residuals[j])));
  return next;
}

std::vector<TensorArray> empty_arrays(const SplitBody& s) {
  std::vector<TensorArray> arrays;
  for (const ValueRef& r : s.residuals) arrays.push_back(per_iteration_array(s.graph->type_of(r)));
  return arrays;
}

// The backward loop over `iterations` stored iterations: the gradients of the loop variables
// (per fv) and of the captures marked in `caps` (per fc; empty where not computed).
std::pair<std::vector<Tensor>, std::vector<Tensor>> backward_loop(const ControlFlowPayload& p, const SplitBody& s,
                                                                  const std::vector<char>& caps,
                                                                  const std::vector<TensorArray>& stored,
                                                                  const Tensor& iterations,
                                                                  const std::vector<Tensor>& out_grads,
                                                                  const std::vector<Tensor>& body_caps) {
  const GraphIR& graph = *s.graph;
  const std::vector<char> bwd_run = backward_nodes(s, caps, nullptr);
  // A product by a transposed capture (a layer's dh = dz W^T) packed W^T again in every
  // iteration: W^T is made once, before the loop, and the body multiplies by it untransposed.
  // The AVX-512 kernels read a transposed B through the same untransposed copy, so the sums and
  // bits are the same; with other kernels (BLAS, float64; decided as the gradient is built) the
  // body keeps the transposed product.
  std::vector<Tensor> right_transposed(graph.nodes.size());
  bool any_transposed = false;
  if (detail::matmul_on_own_kernels()) {
    std::vector<Tensor> capture_transposed(s.m);
    for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
      const GraphNode& node = graph.nodes[i];
      if (!bwd_run[i] || node.kind != NodeKind::kOp || node.op != OpId::MatMul ||
          !node.attrs.get<MatMulAttrs>().transpose_b)
        continue;
      const GraphNode& right = graph.node(node.inputs[1].node);
      if (right.kind != NodeKind::kPlaceholder) continue;
      const auto k = static_cast<std::size_t>(right.input_index);
      if (k < s.n || k >= s.n + s.m) continue;
      const Tensor& w = body_caps[k - s.n];
      if (w.dtype() != DType::Float32 || !known_matrix(detail::static_shape(w))) continue;
      if (!capture_transposed[k - s.n].defined()) capture_transposed[k - s.n] = transpose(w, {1, 0});
      right_transposed[i] = capture_transposed[k - s.n];
      any_transposed = true;
    }
  }
  // [iteration, store position, loop-variable gradients, dense capture gradients], and the
  // arrays of the captures' gradient parts.
  using Bwd = std::pair<std::vector<Tensor>, std::vector<TensorArray>>;
  Bwd init;
  init.first = {iterations - 1, constant(0)};
  WhileOptions options;
  options.name = p.name + "_grad";
  options.shape_invariants = {TensorShape{}, TensorShape{}};
  const std::size_t nf = s.fv.size();
  for (std::size_t i = 0; i < nf; ++i) {
    init.first.push_back(out_grads[i]);
    options.shape_invariants.push_back(p.output_types[s.fv[i]].shape);
  }
  std::vector<std::size_t> dense, parts;  // indices into fc
  std::vector<ValueRef> part_values;       // the values stored per iteration for `parts`, each once
  std::vector<std::array<std::size_t, 2>> part_arrays;  // per part: its two arrays in part_values
  for (std::size_t i = 0; i < s.fc.size(); ++i) {
    if (!caps[i] || s.cap_kind[i] == CaptureGrad::kNone) continue;
    if (s.cap_kind[i] == CaptureGrad::kDense) {
      dense.push_back(i);
      init.first.push_back(zeros_like(body_caps[s.fc[i]]));
      options.shape_invariants.push_back(detail::static_shape(body_caps[s.fc[i]]));
      continue;
    }
    parts.push_back(i);
    std::array<std::size_t, 2> at{};
    for (std::size_t a = 0; a < 2; ++a) {
      const ValueRef r = s.cap_refs[i][a];
      at[a] = static_cast<std::size_t>(std::find(part_values.begin(), part_values.end(), r) - part_values.begin());
      if (at[a] == part_values.size()) {
        part_values.push_back(r);
        init.second.push_back(per_iteration_array(graph.type_of(r)));
      }
    }
    part_arrays.push_back(at);
  }
  for (std::size_t a = 0; a < init.second.size(); ++a) options.shape_invariants.push_back(TensorShape::unknown_rank());
  const Bwd rev = while_loop(
      [](const Bwd& st) { return st.first[0] >= 0; },
      [&](const Bwd& st) {
        const Tensor& iteration = st.first[0];
        std::vector<std::vector<Tensor>> values = split_values(s, body_caps);
        for (std::size_t i = 0; i < nf; ++i) values[static_cast<std::size_t>(graph.placeholders[s.n + s.m + i])] = {st.first[2 + i]};
        auto give = [&](const ValueRef& r, Tensor t) {
          const auto node = static_cast<std::size_t>(r.node);
          values[node].resize(graph.nodes[node].outputs.size());
          values[node][static_cast<std::size_t>(r.output)] = std::move(t);
        };
        for (std::size_t j = 0; j < s.residuals.size(); ++j) give(s.residuals[j], stored[j].read(iteration));
        for (const ValueRef& r : s.shapes_only) give(r, zeros(graph.type_of(r).shape, graph.type_of(r).dtype));
        run_marked(graph, bwd_run, values, any_transposed ? &right_transposed : nullptr);
        Bwd next;
        next.first = {iteration - 1, st.first[1] + 1};
        for (std::size_t i = 0; i < nf; ++i)
          next.first.push_back(s.var_grad[i].node >= 0 ? value_at(values, s.var_grad[i]) : zeros_like(st.first[2 + i]));
        for (std::size_t d = 0; d < dense.size(); ++d)
          next.first.push_back(st.first[2 + nf + d] + value_at(values, s.cap_refs[dense[d]][0]));
        for (std::size_t j = 0; j < part_values.size(); ++j)
          next.second.push_back(st.second[j].write(st.first[1], value_at(values, part_values[j])));
        return next;
      },
      init, options);

  std::pair<std::vector<Tensor>, std::vector<Tensor>> out;
  out.first.assign(rev.first.begin() + 2, rev.first.begin() + 2 + static_cast<std::ptrdiff_t>(nf));
  out.second.resize(s.fc.size());
  for (std::size_t d = 0; d < dense.size(); ++d) out.second[dense[d]] = rev.first[2 + nf + d];
  for (std::size_t q = 0; q < parts.size(); ++q) {
    const std::size_t i = parts[q];
    const Tensor a = rev.second[part_arrays[q][0]].stack(), b = rev.second[part_arrays[q][1]].stack();
    if (s.cap_kind[i] == CaptureGrad::kRows) {
      out.second[i] = apply_op(OpId::ScatterAddLike, {a, b, body_caps[s.fc[i]]}, s.cap_node[i]->attrs)[0];
    } else {
      // The sum over iterations of a_t^T b_t: every stored row of a against the same row of b.
      const TensorShape& sa = graph.type_of(s.cap_refs[i][0]).shape;
      const TensorShape& sb = graph.type_of(s.cap_refs[i][1]).shape;
      out.second[i] = matmul(reshape(a, {-1, sa.dims()[1]}), reshape(b, {-1, sb.dims()[1]}), true, false);
    }
  }
  return out;
}

// ---- loops that store their values for a gradient ----

// What grad_while knows of a loop built by while_storing_gradient_values. Its node's loop
// variables are [iteration count, the loop's variables (n), its body's captures (m, passed
// through), the arrays of stored values].
struct StoringLoop {
  std::shared_ptr<const SplitBody> split;
  const ControlFlowPayload* original = nullptr;  // kept alive by `keep`
  std::shared_ptr<const ControlFlowPayload> keep;
};

std::mutex& storing_mutex() {
  static std::mutex mu;
  return mu;
}
// Keyed by the storing loop's payload, which the entry watches: an entry whose payload died
// is dropped (and never matches a new payload at the same address).
std::unordered_map<const ControlFlowPayload*, std::pair<std::weak_ptr<const ControlFlowPayload>, StoringLoop>>&
storing_loops() {
  static std::unordered_map<const ControlFlowPayload*, std::pair<std::weak_ptr<const ControlFlowPayload>, StoringLoop>> m;
  return m;
}

std::optional<StoringLoop> storing_loop(const ControlFlowPayload* p) {
  std::lock_guard lock(storing_mutex());
  auto it = storing_loops().find(p);
  if (it == storing_loops().end()) return std::nullopt;
  const std::shared_ptr<const ControlFlowPayload> alive = it->second.first.lock();
  if (alive.get() != p) return std::nullopt;
  return it->second.second;
}

thread_local bool t_building_storing_loop = false;

std::vector<Tensor> grad_storing_while(const GradInputs& g, const StoringLoop& loop) {
  const SplitBody& s = *loop.split;
  const ControlFlowPayload& p = *loop.original;
  std::vector<Tensor> result(g.inputs.size());
  const std::size_t first_cap = 1 + s.n, first_array = first_cap + s.m;
  // Only the loop's own variables are results a user sees; a gradient reaching the iteration
  // count, the captures passed through or the stored values comes from a gradient of this
  // loop's gradient, which would need the gradient of what was stored.
  for (std::size_t j = 0; j < g.outputs.size(); ++j)
    if ((j == 0 || j >= first_cap) && g.got_gradient(j))
      throw InvalidArgumentError(str_cat(
          "[gradient] a gradient of the gradient of the tg::while_loop '", p.name, "' is not supported: the "
          "first gradient reads the values the loop stored per iteration, which have no gradient. For a "
          "higher-order gradient, write the loop as a C++ loop (unrolled into the trace)"));
  std::vector<char> caps(s.fc.size());
  bool any = false;
  for (std::size_t i = 0; i < s.fc.size(); ++i) any |= (caps[i] = g.wants(first_cap + s.fc[i]));
  for (std::size_t k : s.fv) any |= g.wants(1 + k);
  if (!any) return result;
  std::vector<TensorArray> stored = empty_arrays(s);
  for (std::size_t j = 0; j < stored.size(); ++j) stored[j] = stored[j].with_flow(g.outputs[first_array + j]);
  std::vector<Tensor> out_grads, body_caps;
  for (std::size_t k : s.fv) out_grads.push_back(g.grads[1 + k]);
  for (std::size_t c = 0; c < s.m; ++c) body_caps.push_back(g.inputs[first_cap + c]);
  const auto [var_grads, cap_grads] = backward_loop(p, s, caps, stored, g.outputs[0], out_grads, body_caps);
  for (std::size_t i = 0; i < s.fv.size(); ++i) result[1 + s.fv[i]] = var_grads[i];
  for (std::size_t i = 0; i < s.fc.size(); ++i) result[first_cap + s.fc[i]] = cap_grads[i];
  return result;
}

std::optional<std::vector<Tensor>> grad_while_split(const GradInputs& g) {
  const ControlFlowPayload& p = payload_of(g.attrs);
  const auto n = static_cast<std::size_t>(p.num_loop_vars);
  std::vector<Tensor> cond_caps, body_caps;
  for (int k : p.capture_inputs[0]) cond_caps.push_back(g.inputs[static_cast<std::size_t>(k)]);
  for (int k : p.capture_inputs[1]) body_caps.push_back(g.inputs[static_cast<std::size_t>(k)]);
  std::vector<std::size_t> fv, fc;
  for (std::size_t k = 0; k < n; ++k)
    if (is_floating(g.inputs[k].dtype())) fv.push_back(k);
  // Only the captures whose gradient is asked for (a sequence fed as data needs none).
  for (std::size_t c = 0; c < body_caps.size(); ++c)
    if (is_floating(body_caps[c].dtype()) && g.wants(static_cast<std::size_t>(p.capture_inputs[1][c]))) fc.push_back(c);
  std::vector<Tensor> result(g.inputs.size());
  bool var_wanted = false;
  for (std::size_t k : fv) var_wanted |= g.wants(k);
  if (!var_wanted && fc.empty()) return result;
  std::optional<SplitBody> split = split_body_vjp(p, body_caps, fv, fc);
  if (!split) return std::nullopt;
  const SplitBody& s = *split;

  // 1. The forward loop again, storing the values the backward one reads.
  using Fwd = std::pair<std::vector<Tensor>, std::vector<TensorArray>>;
  Fwd init{{constant(0)}, empty_arrays(s)};
  for (std::size_t k = 0; k < n; ++k) init.first.push_back(g.inputs[k]);
  WhileOptions fo;
  fo.maximum_iterations = p.maximum_iterations;
  fo.name = p.name + "_grad_forward";
  fo.shape_invariants.push_back(TensorShape{});
  for (std::size_t k = 0; k < n; ++k) fo.shape_invariants.push_back(p.output_types[k].shape);
  for (std::size_t j = 0; j < s.residuals.size(); ++j) fo.shape_invariants.push_back(TensorShape::unknown_rank());
  auto with_caps = [](std::vector<Tensor> vars, const std::vector<Tensor>& caps) {
    vars.insert(vars.end(), caps.begin(), caps.end());
    return vars;
  };
  const Fwd fwd = while_loop(
      [&](const Fwd& st) {
        return replay_subgraph(*p.subgraphs[0].graph, with_caps({st.first.begin() + 1, st.first.end()}, cond_caps))[0];
      },
      [&](const Fwd& st) {
        auto [vars, arrays] = forward_step(s, {st.first.begin() + 1, st.first.end()}, body_caps, st.second, st.first[0]);
        vars.insert(vars.begin(), st.first[0] + 1);
        return Fwd{std::move(vars), std::move(arrays)};
      },
      init, fo);

  // 2. The backward loop.
  std::vector<Tensor> out_grads;
  for (std::size_t k : fv) out_grads.push_back(g.grads[k]);
  const auto [var_grads, cap_grads] =
      backward_loop(p, s, std::vector<char>(fc.size(), 1), fwd.second, fwd.first[0], out_grads, body_caps);
  for (std::size_t i = 0; i < fv.size(); ++i) result[fv[i]] = var_grads[i];
  for (std::size_t i = 0; i < fc.size(); ++i) {
    if (!cap_grads[i].defined()) continue;
    const auto idx = static_cast<std::size_t>(p.capture_inputs[1][fc[i]]);
    result[idx] = result[idx].defined() ? result[idx] + cap_grads[i] : cap_grads[i];
  }
  return result;
}

std::vector<Tensor> grad_while(const GradInputs& g) {
  const ControlFlowPayload& p = payload_of(g.attrs);
  // The loops a gradient builds store nothing for a gradient of their own.
  ScopedThreadValue<bool> building(t_building_storing_loop, true);
  if (std::optional<StoringLoop> loop = storing_loop(&p)) return grad_storing_while(g, *loop);
  const auto n = static_cast<std::size_t>(p.num_loop_vars);
  for (std::size_t k = 0; k < n; ++k)
    if (g.inputs[k].dtype() == DType::String)
      throw InvalidArgumentError("[gradient] differentiating a tg::while_loop with string loop variables is not supported");
  check_loop_variable_shapes(g);
  if (std::optional<std::vector<Tensor>> r = grad_while_split(g)) return std::move(*r);
  return grad_while_replay(g);
}

}  // namespace

std::optional<std::vector<Tensor>> while_storing_gradient_values(const ControlFlowPayload& p,
                                                                 const std::vector<Tensor>& inputs) {
  if (t_building_storing_loop) return std::nullopt;
  const auto n = static_cast<std::size_t>(p.num_loop_vars);
  std::vector<Tensor> cond_caps, body_caps;
  for (int k : p.capture_inputs[0]) cond_caps.push_back(inputs[static_cast<std::size_t>(k)]);
  for (int k : p.capture_inputs[1]) body_caps.push_back(inputs[static_cast<std::size_t>(k)]);
  std::vector<std::size_t> fv, fc;
  for (std::size_t k = 0; k < n; ++k) {
    if (inputs[k].dtype() == DType::String) return std::nullopt;
    if (!is_floating(inputs[k].dtype())) continue;
    fv.push_back(k);
    // A variable that changes shape cannot be stored per iteration (the gradient refuses it).
    const TensorShape& start = detail::static_shape(inputs[k]);
    if (!start.has_rank() || !p.output_types[k].shape.has_rank() || start.rank() != p.output_types[k].shape.rank())
      return std::nullopt;
  }
  if (fv.empty()) return std::nullopt;
  for (std::size_t c = 0; c < body_caps.size(); ++c)
    if (is_floating(body_caps[c].dtype())) fc.push_back(c);
  std::optional<SplitBody> split;
  try {
    split = split_body_vjp(p, body_caps, fv, fc);
  } catch (const Error&) {
    return std::nullopt;  // a body its gradient cannot differentiate (a random op): the gradient says so
  }
  if (!split) return std::nullopt;
  auto s = std::make_shared<const SplitBody>(std::move(*split));
  const std::size_t m = body_caps.size();

  using Fwd = std::pair<std::vector<Tensor>, std::vector<TensorArray>>;
  Fwd init{{constant(0)}, empty_arrays(*s)};
  init.first.insert(init.first.end(), inputs.begin(), inputs.begin() + static_cast<std::ptrdiff_t>(n));
  init.first.insert(init.first.end(), body_caps.begin(), body_caps.end());
  WhileOptions options;
  options.maximum_iterations = p.maximum_iterations;
  options.name = p.name;
  options.shape_invariants.push_back(TensorShape{});
  for (std::size_t k = 0; k < n; ++k) options.shape_invariants.push_back(p.output_types[k].shape);
  for (const Tensor& c : body_caps) options.shape_invariants.push_back(detail::static_shape(c));
  for (std::size_t j = 0; j < s->residuals.size(); ++j) options.shape_invariants.push_back(TensorShape::unknown_rank());
  std::shared_ptr<const ControlFlowPayload> built;
  {
    ScopedThreadValue<bool> building(t_building_storing_loop, true);
    const Fwd out = while_loop(
        [&](const Fwd& st) {
          std::vector<Tensor> args(st.first.begin() + 1, st.first.begin() + 1 + static_cast<std::ptrdiff_t>(n));
          args.insert(args.end(), cond_caps.begin(), cond_caps.end());
          return replay_subgraph(*p.subgraphs[0].graph, args)[0];
        },
        [&](const Fwd& st) {
          const std::vector<Tensor> vars(st.first.begin() + 1, st.first.begin() + 1 + static_cast<std::ptrdiff_t>(n));
          const std::vector<Tensor> caps(st.first.begin() + 1 + static_cast<std::ptrdiff_t>(n), st.first.end());
          auto [next_vars, arrays] = forward_step(*s, vars, caps, st.second, st.first[0]);
          Fwd next{{st.first[0] + 1}, std::move(arrays)};
          next.first.insert(next.first.end(), next_vars.begin(), next_vars.end());
          next.first.insert(next.first.end(), caps.begin(), caps.end());
          return next;
        },
        init, options);
    built = last_while_payload();
    std::vector<Tensor> result(out.first.begin() + 1, out.first.begin() + 1 + static_cast<std::ptrdiff_t>(n));
    TG_CHECK(built != nullptr && static_cast<std::size_t>(built->num_loop_vars) == 1 + n + m + s->residuals.size(),
             "the loop storing its values for a gradient was not built as one node");
    std::lock_guard lock(storing_mutex());
    auto& loops = storing_loops();
    for (auto it = loops.begin(); it != loops.end();)
      it = it->second.first.expired() ? loops.erase(it) : std::next(it);
    auto original = std::make_shared<const ControlFlowPayload>(p);
    loops[built.get()] = {built, StoringLoop{s, original.get(), original}};
    return result;
  }
}

namespace {

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
