// tg::cond and tg::while_loop: eager C++ control flow, or cond / while nodes whose sub-graphs the
// kernels run through the executor.
#include "tracegraph/control_flow.h"

#include <algorithm>
#include <cctype>

#include "control_flow/subgraph.h"
#include "core/check.h"
#include "core/tensor_impl.h"
#include "passes/passes.h"
#include "runtime/executor.h"
#include "runtime/replay.h"
#include "tracegraph/ops.h"

namespace tg {
namespace detail {

namespace {

void check_pred(const char* api, const char* what, const Tensor& pred) {
  if (!pred.defined())
    op_error<ValueError>(api, what, " is an empty tg::Tensor; pass a scalar bool tensor");
  if (pred.dtype() != DType::Bool)
    op_error<TypeError>(api, what, " must be a scalar bool tensor, got ", describe(ValueType{pred.dtype(), detail::static_shape(pred)}),
                        "; compare it to get one (e.g. x > 0)");
  const TensorShape s = detail::static_shape(pred);
  if (s.has_rank() && s.rank() != 0)
    op_error<InvalidArgumentError>(api, what, " must be a scalar bool tensor, got shape ", s.to_string(),
                                   "; reduce it with tg::reduce_any or tg::reduce_all");
}

// Rank 0, as check_pred asks eagerly (and TF's Switch and LoopCond): a predicate of unknown rank
// while tracing that turns out (1,) is refused here too, rather than taken for its one element.
bool runtime_pred(const char* api, const Tensor& pred) {
  if (pred.impl()->shape.rank() != 0)
    op_error<InvalidArgumentError>(api, "the condition must be a scalar bool, got shape ",
                                   pred.impl()->shape.to_string(), " when the graph ran; reduce it with "
                                   "tg::reduce_any or tg::reduce_all");
  return *data_of<bool>(pred);
}

// A result that is one of the node's inputs (a branch returning a capture as is) becomes a view
// of it: a tape takes an op whose output is its input for an identity and would skip the node.
Tensor distinct_from_inputs(Tensor t, const std::vector<Tensor>& in) {
  for (const Tensor& x : in)
    if (x.impl() == t.impl()) return make_view(t, t.impl()->shape);
  return t;
}

// ---- the cond and while ops -----------------------------------------------------------------

std::vector<ValueType> infer_cond(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const ControlFlowPayload& p = payload_of(attrs);
  TG_CHECK(!in.empty(), "cond without a predicate");
  if (in[0].dtype != DType::Bool || (in[0].shape.has_rank() && in[0].shape.rank() != 0))
    op_error<TypeError>("cond", "the predicate must be a scalar bool tensor, got ", describe(in[0]));
  return p.output_types;
}

void kernel_cond(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const ControlFlowPayload& p = payload_of(attrs);
  const std::size_t b = runtime_pred("cond", in[0]) ? 0 : 1;
  std::vector<Tensor> args;
  for (int k : p.capture_inputs[b]) args.push_back(in[static_cast<std::size_t>(k)]);
  std::vector<Tensor> res = run_subgraph(*p.subgraphs[b].graph, args);
  TG_CHECK(res.size() == out.size(), "cond branch returned ", res.size(), " values for ", out.size(), " outputs");
  for (std::size_t i = 0; i < res.size(); ++i) out[i] = distinct_from_inputs(std::move(res[i]), in);
}

std::vector<ValueType> infer_while(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const ControlFlowPayload& p = payload_of(attrs);
  TG_CHECK(in.size() >= static_cast<std::size_t>(p.num_loop_vars), "while with too few inputs");
  for (std::size_t k = 0; k < static_cast<std::size_t>(p.num_loop_vars); ++k)
    if (in[k].dtype != p.output_types[k].dtype)
      op_error<TypeError>("while_loop", "loop variable ", p.var_paths[k], " must have dtype ",
                          to_string(p.output_types[k].dtype), ", got ", describe(in[k]));
  return p.output_types;
}

void kernel_while(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const ControlFlowPayload& p = payload_of(attrs);
  const auto n = static_cast<std::size_t>(p.num_loop_vars);
  std::vector<Tensor> vars(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(n));
  std::vector<Tensor> args;
  auto with_captures = [&](std::size_t g) {
    args = vars;
    for (int k : p.capture_inputs[g]) args.push_back(in[static_cast<std::size_t>(k)]);
  };
  for (int64_t iter = 0; p.maximum_iterations < 0 || iter < p.maximum_iterations; ++iter) {
    with_captures(0);
    if (!runtime_pred("while_loop", run_subgraph(*p.subgraphs[0].graph, args).at(0))) break;
    with_captures(1);
    vars = run_subgraph(*p.subgraphs[1].graph, args);
    TG_CHECK(vars.size() == n, "while body returned ", vars.size(), " values for ", n, " loop variables");
  }
  for (std::size_t i = 0; i < n; ++i) out[i] = distinct_from_inputs(std::move(vars[i]), in);
}

// ---- building the nodes ---------------------------------------------------------------------

thread_local std::shared_ptr<const ControlFlowPayload> t_last_while_payload;


// Body results against the loop variables' dtypes and shape invariants.
void check_body_results(const std::vector<Tensor>& got, const std::vector<Tensor>& entry,
                        const std::vector<TensorShape>& invariants, const std::vector<FlatLeaf>& leaves,
                        bool explicit_invariants) {
  if (got.size() != entry.size())
    op_error<ValueError>("while_loop", "the body returned ", got.size(), " tensors ", describe_tensors(got),
                         " but the loop has ", entry.size(), " loop variables ", describe_tensors(entry),
                         "; return the loop variables in the same structure");
  for (std::size_t k = 0; k < got.size(); ++k) {
    if (!got[k].defined())
      op_error<ValueError>("while_loop", "the body returned an empty tg::Tensor for loop variable ", leaves[k].path);
    if (got[k].dtype() != entry[k].dtype())
      op_error<TypeError>("while_loop", "loop variable ", leaves[k].path, " has dtype ", to_string(entry[k].dtype()),
                          " on entry but the body returns ", to_string(got[k].dtype()),
                          "; tg::cast it in the body so that its dtype stays the same");
    if (leaves[k].tensor_array) continue;
    if (!detail::static_shape(got[k]).is_subtype_of(invariants[k]))
      op_error<ValueError>(
          "while_loop", "loop variable ", leaves[k].path, " has shape ", invariants[k].to_string(),
          explicit_invariants ? " (its shape invariant)" : " on entry", " but shape ", detail::static_shape(got[k]).to_string(),
          " after an iteration of the body. Declare the dims that change as tg::None in "
          "WhileOptions::shape_invariants (e.g. ",
          TensorShape(std::vector<int64_t>(static_cast<std::size_t>(std::max<int64_t>(detail::static_shape(got[k]).rank(), 1)), None)).to_string(),
          "), or keep the shape fixed");
  }
}

}  // namespace

std::vector<Tensor> cond_flat(const Tensor& pred, const std::function<std::vector<Tensor>()>& true_fn,
                              const std::function<std::vector<Tensor>()>& false_fn) {
  check_pred("cond", "pred", pred);
  if (!pred.is_symbolic()) return pred.item<bool>() ? true_fn() : false_fn();

  GraphRecorder then_tracer(CapturePolicy::kCapture, "cond/then_branch");
  GraphRecorder else_tracer(CapturePolicy::kCapture, "cond/else_branch");
  const std::vector<Tensor> t = then_tracer.trace(true_fn);
  const std::vector<Tensor> f = else_tracer.trace(false_fn);
  bool same = t.size() == f.size();
  for (std::size_t i = 0; same && i < t.size(); ++i) same = t[i].dtype() == f[i].dtype();
  if (!same)
    op_error<TypeError>("cond", "true_fn returned ", describe_tensors(t), " but false_fn returned ",
                        describe_tensors(f), "; both branches must return the same structure of tensors "
                        "with the same dtypes (tg::cast one of them, or return the same number of values)");
  auto payload = std::make_shared<ControlFlowPayload>();
  for (std::size_t i = 0; i < t.size(); ++i)
    payload->output_types.push_back(ValueType{t[i].dtype(), detail::static_shape(t[i]).most_specific_common_supertype(detail::static_shape(f[i]))});
  optimize_subgraph(*then_tracer.graph());
  optimize_subgraph(*else_tracer.graph());
  std::vector<Tensor> inputs{pred};
  merge_captures({&then_tracer, &else_tracer}, 1, inputs, *payload);
  const OpAttrs attrs = ControlFlowAttrs{payload};
  payload->subgraphs = {{"then_branch", then_tracer.graph()}, {"else_branch", else_tracer.graph()}};
  payload->name = "cond";  // also for stateful_cond: users see one name
  const bool stateful = then_tracer.stateful() || else_tracer.stateful();
  if (stateful) add_variable_snapshots(OpId::StatefulCond, attrs, inputs);  // for a tape's gradient
  return apply_op(stateful ? OpId::StatefulCond : OpId::Cond, inputs, attrs);
}

std::vector<Tensor> while_loop_flat(const FlatFn& cond, const FlatFn& body, const std::vector<Tensor>& init,
                                    const std::vector<FlatLeaf>& leaves, const WhileOptions& options) {
  const std::size_t n = init.size();
  TG_CHECK(leaves.size() == n, "loop leaves do not match the loop variables");
  if (n == 0)
    throw ValueError("[while_loop] loop_vars is empty; pass at least one loop variable (a tensor the "
                     "condition depends on)");
  for (std::size_t k = 0; k < n; ++k)
    if (!init[k].defined())
      op_error<ValueError>("while_loop", "loop variable ", leaves[k].path, " is an empty tg::Tensor; give it a value");
  const bool explicit_invariants = !options.shape_invariants.empty();
  if (explicit_invariants && options.shape_invariants.size() != n)
    op_error<ValueError>("while_loop", "WhileOptions::shape_invariants has ", options.shape_invariants.size(),
                         " shapes but there are ", n, " loop variables ", describe_tensors(init),
                         "; give one shape per flattened loop variable");
  std::vector<TensorShape> invariants;
  for (std::size_t k = 0; k < n; ++k) {
    if (leaves[k].tensor_array) {
      invariants.push_back(TensorShape::unknown_rank());
      continue;
    }
    invariants.push_back(explicit_invariants ? options.shape_invariants[k] : detail::static_shape(init[k]));
    if (!detail::static_shape(init[k]).is_subtype_of(invariants[k]))
      op_error<ValueError>("while_loop", "loop variable ", leaves[k].path, " has shape ", detail::static_shape(init[k]).to_string(),
                           " on entry, which does not fit its shape invariant ", invariants[k].to_string());
  }

  bool staged = current_recorder() != nullptr;
  for (const Tensor& t : init) staged |= t.is_symbolic();
  if (!staged) {
    std::vector<Tensor> vars = init;
    for (int64_t iter = 0; options.maximum_iterations < 0 || iter < options.maximum_iterations; ++iter) {
      const std::vector<Tensor> c = cond(vars);
      TG_CHECK(c.size() == 1);
      check_pred("while_loop", "cond", c[0]);
      if (!c[0].item<bool>()) break;
      std::vector<Tensor> next = body(vars);
      check_body_results(next, init, invariants, leaves, explicit_invariants);
      vars = std::move(next);
    }
    return vars;
  }

  const std::string name = options.name.empty() ? "while" : options.name;
  GraphRecorder cond_tracer(CapturePolicy::kCapture, name + "/cond");
  GraphRecorder body_tracer(CapturePolicy::kCapture, name + "/body");
  std::vector<Tensor> cond_vars, body_vars;
  for (std::size_t k = 0; k < n; ++k) {
    const ValueType type{init[k].dtype(), invariants[k]};
    cond_vars.push_back(cond_tracer.add_input(type, placeholder_name(leaves[k].path, "loop_var")));
    body_vars.push_back(body_tracer.add_input(type, placeholder_name(leaves[k].path, "loop_var")));
  }
  const std::vector<Tensor> c = cond_tracer.trace([&] { return cond(cond_vars); });
  TG_CHECK(c.size() == 1);
  check_pred("while_loop", "cond", c[0]);
  const std::vector<Tensor> next = body_tracer.trace([&] { return body(body_vars); });
  check_body_results(next, init, invariants, leaves, explicit_invariants);

  auto payload = std::make_shared<ControlFlowPayload>();
  for (std::size_t k = 0; k < n; ++k) {
    payload->output_types.push_back(ValueType{init[k].dtype(), invariants[k]});
    payload->var_paths.push_back(leaves[k].path);
  }
  payload->num_loop_vars = static_cast<int>(n);
  payload->maximum_iterations = options.maximum_iterations;
  optimize_subgraph(*cond_tracer.graph());
  optimize_subgraph(*body_tracer.graph());
  std::vector<Tensor> inputs = init;
  merge_captures({&cond_tracer, &body_tracer}, static_cast<int>(n), inputs, *payload);
  const OpAttrs attrs = ControlFlowAttrs{payload};
  payload->subgraphs = {{"cond", cond_tracer.graph()}, {"body", body_tracer.graph()}};
  payload->name = name;
  const bool stateful = cond_tracer.stateful() || body_tracer.stateful();
  // Under a tape, the loop stores what its gradient needs as it runs (TF's while_v2
  // accumulators), so that the gradient does not run the loop again.
  if (!stateful && current_op_observer() != nullptr)
    if (std::optional<std::vector<Tensor>> stored = while_storing_gradient_values(*payload, inputs)) return *stored;
  t_last_while_payload = payload;
  const OpId op = stateful ? OpId::StatefulWhile : OpId::While;
  if (stateful) add_variable_snapshots(op, attrs, inputs);  // for a tape's gradient
  // Inside a trace the loop is recorded even when every input is eager: it must run at every
  // call, not once at trace time.
  return apply_op_in_trace(op, inputs, attrs);
}

std::shared_ptr<const ControlFlowPayload> last_while_payload() { return t_last_while_payload; }

// ---- tg::for_range --------------------------------------------------------------------------

namespace {

constexpr const char* kZeroDelta = "[for_range] delta must not be zero (the loop would never end)";

std::vector<ValueType> infer_check_range_delta(const std::vector<ValueType>& in, const OpAttrs&) {
  // range_tensors has checked what is known statically; the kernel checks an unknown rank.
  return {ValueType{in[0].dtype, TensorShape{}}};
}

void kernel_check_range_delta(const std::vector<Tensor>& in, const OpAttrs&, std::vector<Tensor>& out) {
  const TensorShape& shape = in[0].impl()->shape;
  if (shape.rank() != 0)  // traced with an unknown rank, its shape is first known here
    op_error<InvalidArgumentError>("for_range", "delta must be a scalar, got shape ", shape.to_string());
  const int64_t delta = scalar_index(in[0]);
  if (delta == 0) throw ValueError(kZeroDelta);
  if (in[0].impl()->dtype == DType::Int64) *data_of<int64_t>(out[0]) = delta;
  else *data_of<int32_t>(out[0]) = static_cast<int32_t>(delta);
}

}  // namespace

std::array<Tensor, 3> range_tensors(const Range& r) {
  const RangeBound* bounds[3] = {&r.start, &r.limit, &r.delta};
  const char* names[3] = {"start", "limit", "delta"};
  DType dtype = DType::Int32;
  for (const RangeBound* b : bounds)
    if (b->tensor.defined()) {
      dtype = b->tensor.dtype();
      break;
    }
  std::array<Tensor, 3> out;
  for (int i = 0; i < 3; ++i) {
    const RangeBound& b = *bounds[i];
    if (!b.tensor.defined()) {
      out[static_cast<std::size_t>(i)] = constant(b.value, dtype);
      continue;
    }
    const Tensor& t = b.tensor;
    if (t.dtype() != DType::Int32 && t.dtype() != DType::Int64)
      op_error<TypeError>("for_range", names[i], " must be an int32 or int64 scalar, got ",
                          describe(ValueType{t.dtype(), detail::static_shape(t)}), "; tg::cast it to an integer dtype");
    if (t.dtype() != dtype)
      op_error<TypeError>("for_range", names[i], " is ", to_string(t.dtype()), " but another bound is ",
                          to_string(dtype), "; tg::cast the bounds to one integer dtype");
    if (detail::static_shape(t).has_rank() && detail::static_shape(t).rank() != 0)
      op_error<InvalidArgumentError>("for_range", names[i], " must be a scalar, got shape ", detail::static_shape(t).to_string());
    out[static_cast<std::size_t>(i)] = t;
  }
  if (!out[2].is_symbolic() && scalar_index(out[2]) == 0)
    throw ValueError(kZeroDelta);
  // A delta known only at run time is checked there, by the node the loop reads it through.
  if (out[2].is_symbolic()) out[2] = apply_op1(OpId::CheckRangeDelta, {out[2]});
  return out;
}

bool loop_is_staged(const std::array<Tensor, 3>& bounds) {
  bool staged = current_recorder() != nullptr;
  for (const Tensor& t : bounds) staged |= t.is_symbolic();
  return staged;
}

Tensor range_continues(const Tensor& i, const Tensor& limit, const Tensor& delta) {
  if (!delta.is_symbolic()) return scalar_index(delta) > 0 ? i < limit : i > limit;
  return ((delta > 0) && (i < limit)) || ((delta < 0) && (i > limit));
}

void register_control_flow_ops(OpDef* t) {
  set_op(t, OpId::Cond, &infer_cond, &kernel_cond);
  set_op(t, OpId::StatefulCond, &infer_cond, &kernel_cond);
  set_op(t, OpId::While, &infer_while, &kernel_while);
  set_op(t, OpId::StatefulWhile, &infer_while, &kernel_while);
  set_op(t, OpId::CheckRangeDelta, &infer_check_range_delta, &kernel_check_range_delta);
}

}  // namespace detail
}  // namespace tg
