// Running concrete functions, and the public tg::ConcreteFunction. A concrete function runs
// by the executor on its plan, through the tapes' call observer while a GradientTape records, or
// inlined into the trace being recorded; a tg::function's call (FunctionCore::run, the cached
// path's last step), a ConcreteFunction's call_flat and a TypedConcreteFunction's call all end
// in run_graph here, which stays in this file with its callers so that the cached path reaches
// the executor through no call it did not make before. Also the ConcreteFunction's signature,
// graphs and printing, and the C++ numbers its tensor parameters accept.
#include <cstdint>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "graph/graph_ir.h"
#include "ops/collective.h"
#include "ops/op.h"
#include "runtime/executor.h"
#include "runtime/replay.h"
#include "trace/concrete.h"
#include "trace/function_core.h"
#include "trace/function_state.h"
#include "tracegraph/ops.h"

namespace tg {

namespace detail {

bool tracing_active() { return trace_recording(); }

namespace {
// What runs calls of concrete functions on this thread: the tapes' observer while one records.
thread_local CallObserver* t_call_observer = nullptr;
}  // namespace

void set_call_observer(CallObserver* o) { t_call_observer = o; }

namespace {
// The desync check: before the first run of a concrete function that holds collectives, every
// rank must have traced the same ones (a rank that retraced for another shape would otherwise
// wait forever in a collective the others never reach). Once per concrete function; a failed
// check is tried again at the next call.
void check_collectives_once(const ConcreteImpl& cf) {
  Communicator* comm = communicator();
  if (!comm || comm->size() == 1) return;
  std::call_once(cf.collectives_checked, [&] {
    comm->check_traced_collectives(cf.function_name, cf.input_type.to_string(), cf.collective_sequence);
  });
}

using LentSpan = std::span<const Tensor* const>;
std::vector<Tensor> owned(LentSpan lent) {
  std::vector<Tensor> out;
  out.reserve(lent.size());
  for (const Tensor* t : lent) out.push_back(*t);
  return out;
}
std::vector<Tensor>&& owned(std::vector<Tensor>&& inputs) { return std::move(inputs); }

// The inputs of graph `g` inlined into the trace being recorded, each symbolic one that is less
// specific than the placeholder it feeds (castable_to bound it: an unknown rank or None dims of
// the enclosing trace) checked to have the placeholder's shape when the enclosing graph runs,
// since `g` was traced for that shape. (TF casts it with set_shape and checks nothing; a value
// of another shape would run ops specialised to the traced one.) The check is broadcast_to the
// value's own shape, whose kernel compares that shape with the known one: InvalidArgumentError
// when they differ.
std::vector<Tensor> checked_inputs(const GraphIR& g, std::vector<Tensor> inputs) {
  for (std::size_t i = 0; i < inputs.size() && i < g.placeholders.size(); ++i) {
    Tensor& in = inputs[i];
    const TensorShape& want = g.node(g.placeholders[i]).outputs[0].shape;
    if (!in.defined() || !in.is_symbolic() || !want.has_rank() || static_shape(in).is_subtype_of(want)) continue;
    ShapeValueAttrs known;
    known.known = true;
    known.dims = want.dims();
    in = apply_op1(OpId::BroadcastTo, {in, tg::shape(in)}, known);
  }
  return inputs;
}

// Runs a concrete function whose Variable parameters (if any) are bound already: inlined into
// the trace being recorded on this thread - its graph as traced, its ops and side effects
// recorded there, as TF's call of a function inside a tf.function runs at every call of the
// outer one -, else through the call observer (a tape), else by the executor. `inputs` are owned
// handles or the cached path's lent ones; only the executor takes lent handles as they are (a
// trace or a tape may keep its inputs, so they get owned copies).
template <class Inputs>
std::vector<Tensor> run_graph(const ConcreteImpl& cf, const GraphIR& traced, Inputs inputs) {
  if (tracing_active()) return replay_graph(traced, checked_inputs(traced, owned(std::move(inputs))), nullptr);
  // What the collectives' errors name; a function without any leaves the enclosing one's (and
  // the cached call skips the scope's two thread-local copies).
  std::optional<CollectiveFunctionScope> in_function;
  if (!cf.collective_sequence.empty()) {
    check_collectives_once(cf);
    in_function.emplace(&cf.function_name);
  }
  if (CallObserver* o = t_call_observer) return o->run_call(cf, owned(std::move(inputs)));
  if constexpr (std::is_same_v<Inputs, LentSpan>) return execute_lent(*cf.plan, inputs);
  else return execute(*cf.plan, std::move(inputs));
}
}  // namespace

std::vector<Tensor> run_concrete(const ConcreteImpl& cf, std::vector<Tensor> inputs,
                                 const std::vector<Variable>& variables) {
  TG_CHECK(variables.size() == cf.variable_parameters.size(), "concrete function '", cf.function_name,
           "' has ", cf.variable_parameters.size(), " Variable parameters but the call bound ",
           variables.size());
  const GraphIR& traced = cf.unoptimized_ir ? *cf.unoptimized_ir : *cf.ir;
  if (variables.empty()) return run_graph(cf, traced, std::move(inputs));  // most functions take no Variable
  std::vector<VariableBinding> bindings;
  for (std::size_t i = 0; i < variables.size(); ++i)
    bindings.push_back({cf.variable_parameters[i].get(), variables[i].state()});
  // Inlined into another trace, the parameters become the Variables the outer body passed
  // (themselves parameters of the outer trace, or not); run, they are bound for the call.
  if (tracing_active()) {
    const auto& traced_ir = cf.unoptimized_ir ? cf.unoptimized_ir : cf.ir;
    return replay_graph(*with_variables_bound(traced_ir, bindings), checked_inputs(*traced_ir, std::move(inputs)), nullptr);
  }
  VariableBindingScope bound(std::move(bindings));
  return run_graph(cf, traced, std::move(inputs));
}

const std::any& skeleton_of(const ConcreteImpl& cf) { return cf.skeleton; }

std::vector<Tensor> FunctionCore::run(const ConcreteImpl& cf, CallInputs&& inputs) const {
  const std::size_t n = inputs.lent ? inputs.lent_tensors.size() : inputs.tensors.size();
  if (n != cf.ir->placeholders.size())
    throw TypeError(str_cat(
        "function '", cf.function_name, "' was called with ", n, " tensor", n == 1 ? "" : "s",
        " but its trace takes ", cf.ir->placeholders.size(),
        ". TensorSpec arguments only describe inputs for get_concrete_function; call the "
        "function with tensors"));
  if (inputs.lent) {  // the cached path: no Variable parameters
    TG_CHECK(cf.variable_parameters.empty(), "a call with Variables took the cached path");
    return run_graph(cf, cf.unoptimized_ir ? *cf.unoptimized_ir : *cf.ir, inputs.lent_tensors.view());
  }
  return run_concrete(cf, std::move(inputs.tensors), inputs.variables);
}

std::vector<Tensor> run(const FunctionCore& core, const ConcreteImpl& cf, CallInputs&& inputs) {
  return core.run(cf, std::move(inputs));
}

// ---- ConcreteFunction ----------------------------------------------------------------------
}  // namespace detail

std::string ConcreteFunction::function_type() const {
  return impl_->input_type.to_string() + " -> " + impl_->output_description;
}

std::string ConcreteFunction::pretty_printed_signature() const {
  std::string s = "Input Parameters:\n";
  const auto& t = impl_->input_type;
  for (std::size_t i = 0; i < t.params.size(); ++i)
    s += "  " + t.names[i] + " (POSITIONAL_OR_KEYWORD): " + t.params[i]->to_string() + "\n";
  return s + "Output Type:\n  " + impl_->output_description;
}

const Graph& ConcreteFunction::graph() const { return *impl_->graph; }
const Graph& ConcreteFunction::optimized_graph() const { return *impl_->optimized_graph; }

namespace detail {
Tensor scalar_for_tensor_param(const ConcreteImpl& cf, std::size_t index, double value, const int64_t* integer) {
  const auto& params = cf.input_type.params;
  DType dtype;
  TensorShape shape;
  if (index >= params.size() || !as_tensor_type(*params[index], &dtype, &shape)) return Tensor();
  bool exact = false;
  switch (dtype) {
    case DType::Float32:
    case DType::Float64:
    case DType::BFloat16: exact = true; break;  // a float parameter rounds as tg::cast does
    case DType::Bool: exact = value == 0 || value == 1; break;
    case DType::Int32: exact = integer && *integer >= INT32_MIN && *integer <= INT32_MAX; break;
    case DType::Int64: exact = integer != nullptr; break;
    case DType::UInt8: exact = integer && *integer >= 0 && *integer <= 255; break;
    case DType::String: break;
  }
  if (!exact)
    throw TypeError(str_cat("Binding inputs to function failed due to `Can not cast ", value, " to ",
                            TensorSpec(shape, dtype).to_string(), "`: the C++ number does not convert to the "
                            "parameter's dtype exactly; pass a tg::Tensor of that dtype"));
  if (integer) return tg::cast(tg::constant(*integer), dtype);
  return tg::cast(tg::constant(value, float64), dtype);
}
}  // namespace detail

namespace detail {
std::vector<Tensor> call_bound(const ConcreteImpl& cf, const std::vector<Tensor>& inputs,
                               const std::vector<Variable>& variables) {
  const auto& ir = *cf.ir;
  if (inputs.size() != ir.placeholders.size())
    throw TypeError(str_cat("concrete function of '", cf.function_name, "' takes ", ir.placeholders.size(),
                            " tensors, got ", inputs.size()));
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const auto& node = ir.node(ir.placeholders[i]);
    const ValueType& want = node.outputs[0];
    // Inside a trace a symbolic input only has to be compatible (its None dims are checked when
    // the inlined ops run); outside one it has no value (reject_leaked_tensors says why).
    const bool symbolic = inputs[i].defined() && inputs[i].is_symbolic();
    if (symbolic && !tracing_active())
      throw OutOfScopeError(str_cat(
          "the concrete function of '", cf.function_name, "' was called with the symbolic tensor ",
          inputs[i].impl()->symbolic->origin(), " outside the trace that created it. Symbolic tensors "
          "only exist while their function is traced; pass the tensor that function returned"));
    if (!inputs[i].defined() || inputs[i].dtype() != want.dtype ||
        !(symbolic ? static_shape(inputs[i]).is_compatible_with(want.shape)
                   : static_shape(inputs[i]).is_subtype_of(want.shape)))
      throw TypeError(str_cat(
          "Binding inputs to function failed due to `Can not cast ",
          inputs[i].defined() ? TensorSpec(static_shape(inputs[i]), inputs[i].dtype()).to_string()
                              : std::string("an empty tensor"),
          " to ", TensorSpec(want.shape, want.dtype).to_string(), "` for input '", node.name,
          "' of ", cf.input_type.to_string(), " -> ", cf.output_description));
  }
  return run_concrete(cf, inputs, variables);
}
}  // namespace detail

std::vector<Tensor> ConcreteFunction::call_flat(const std::vector<Tensor>& inputs) const {
  if (!impl_->variable_parameters.empty())
    throw TypeError(detail::str_cat(
        "the concrete function of '", impl_->function_name, "' takes Variable arguments ",
        function_type(), ", which call_flat cannot pass; call the concrete function with its "
        "arguments instead"));
  return detail::call_bound(*impl_, inputs, {});
}

std::ostream& operator<<(std::ostream& os, const ConcreteFunction& cf) {
  return os << "ConcreteFunction " << cf.pretty_printed_signature();
}

}  // namespace tg
