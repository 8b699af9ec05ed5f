// tg::function: trace C++ tensor code into graphs, cached per input trace type (tf.function).
#pragma once
#include <any>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "tracegraph/concrete_function.h"
#include "tracegraph/config.h"
#include "tracegraph/structure.h"
#include "tracegraph/tensor.h"
#include "tracegraph/trace_type.h"

namespace tg {

struct FunctionOptions {
  std::string name = "function";                          // used in messages and reports
  std::optional<std::vector<TensorSpec>> input_signature{};  // one FunctionType only
  bool reduce_retracing = false;  // generalise shapes (dims -> None) instead of retracing
  std::vector<std::string> arg_names{};  // names in graphs, signatures and messages
  /// Hard limit on traces made, evicted ones included -> tg::RetracingLimitError; 0 = no limit
  /// (tf.function's behaviour: it only warns). Set 0 together with max_cached_traces for a
  /// long-running service whose inputs keep varying.
  int64_t max_traces = 1000;
  /// Bound on the concrete functions kept (least recently used are evicted); 0 = unbounded.
  /// For long-running services whose inputs have unbounded shapes. The trace history and the
  /// retracing report are bounded whatever this is (docs/retracing.md).
  int64_t max_cached_traces = 0;
  /// Run the graph optimiser on each trace: algebraic simplification, constant folding, CSE,
  /// dead-code elimination and elementwise fusion (src/passes/pipeline.cpp lists the order).
  bool optimize = true;
};

/// Why one trace happened (see PolymorphicFunction::trace_history).
struct TraceRecord {
  int64_t index = 0;          // 0 for the first trace
  std::string function_type;  // the FunctionType that was traced
  /// "first call", or why no existing trace fit, naming the argument and what changed:
  /// "x: shape (3,) -> (5,), dim 0: 3 -> 5 (closest trace: #0)".
  std::string reason;
  std::vector<std::string> changed_arguments;  // names, or paths like "batch[1]", "config['lr']"
};

namespace detail {

/// What a traced body produced: flat outputs, the C++ result holding symbolic tensors (used to
/// rebuild results), and its printed type.
struct TraceOutput {
  std::vector<Tensor> outputs;
  std::any skeleton;
  std::string description;
};

/// A non-owning reference to a callable (no allocation on the call path).
template <class Sig>
class FunctionRef;
template <class R, class... A>
class FunctionRef<R(A...)> {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cv_t<F>, FunctionRef>)
  FunctionRef(F& f) : obj_(&f), call_([](void* o, A... a) -> R { return (*static_cast<F*>(o))(std::forward<A>(a)...); }) {}
  R operator()(A... a) const { return call_(obj_, std::forward<A>(a)...); }

 private:
  void* obj_;
  R (*call_)(void*, A...);
};
using TraceBody = FunctionRef<TraceOutput(const std::vector<TraceTypePtr>&, PlaceholderContext&)>;
/// Does the call match this recorded call type exactly? (the allocation-free check)
using FastMatch = FunctionRef<bool(const std::vector<TraceTypePtr>&)>;

/// Everything about a tg::function that does not depend on its C++ types: the cache of
/// concrete functions, dispatch, tracing, limits and diagnostics. Opaque here; defined in
/// src/trace/function_core.h. The template below reaches it through these functions only.
class FunctionCore;
std::shared_ptr<FunctionCore> make_function_core(FunctionOptions options, std::string callable_type);
const FunctionOptions& options_of(const FunctionCore& core);
/// Parameter `index`'s name in FunctionTypes, graphs and messages: its input_signature spec's
/// name, else FunctionOptions::arg_names', else "arg<index>". A tensor argument's graph input is
/// named after it (or after its TensorSpec's name, given to get_concrete_function).
std::string parameter_name(const FunctionCore& core, std::size_t index);
/// The concrete function a call runs, and what keeps it alive until the call returns. On the
/// cached path of a function whose cache never evicts (max_cached_traces = 0), nothing: the
/// function holds every concrete function it made for its whole life, so a pointer is enough
/// and the call takes no reference (a locked increment and decrement once the process has a
/// second thread). Otherwise a reference.
struct CalledConcrete {
  ConcreteImpl* cf = nullptr;
  std::shared_ptr<ConcreteImpl> keep;
  explicit operator bool() const { return cf != nullptr; }
};
/// The cached-call path: the concrete function an earlier call of exactly this type went to,
/// found by `fast_hash` and confirmed by `match`, without building trace types. Empty if there
/// is none (then dispatch_or_trace decides).
CalledConcrete fast_lookup(const FunctionCore& core, std::size_t fast_hash, FastMatch match);
/// Before any hashing: the concrete function of this thread's last cached call, when it was a
/// call of `core` with argument types `match` confirms. Empty otherwise.
CalledConcrete repeat_call(const FunctionCore& core, FastMatch match);
/// Finds the concrete function for a call's argument types, or traces one with `body`. With
/// a fast hash, the result is remembered for fast_lookup. `is_call` is false for
/// get_concrete_function, which the frequent-retracing warning does not count (as in TF).
std::shared_ptr<ConcreteImpl> dispatch_or_trace(FunctionCore& core, std::vector<TraceTypePtr> arg_types,
                                                TraceBody body, const std::size_t* fast_hash, bool is_call);
/// A call's tensors and Variables as resolve_call found them: lent by the caller on the cached
/// path (no Variable takes it), collected as owned handles with the trace types otherwise.
struct CallInputs {
  bool lent = false;
  LentTensors lent_tensors;
  std::vector<Tensor> tensors;
  std::vector<Variable> variables;  // distinct, in order (ArgContext::variables)
};
/// Runs a concrete function of `core` on the call's flat tensors, its Variable parameters bound
/// to the call's distinct Variables.
std::vector<Tensor> run(const FunctionCore& core, const ConcreteImpl& cf, CallInputs&& inputs);
std::vector<ConcreteFunction> concrete_functions(const FunctionCore& core);
int64_t tracing_count(const FunctionCore& core);
std::vector<TraceRecord> trace_history(const FunctionCore& core);
std::optional<std::vector<TensorSpec>> suggested_input_signature(const FunctionCore& core);
std::string retracing_report(const FunctionCore& core);

bool tracing_active();  // a trace is being recorded on this thread
/// Says in `e`'s message that it escaped `core`'s body run eagerly (config::run_functions_eagerly).
void add_eager_context(const FunctionCore& core, Error& e);
/// An OutOfScopeError when a call's tensors include a symbolic one while no trace records on
/// this thread (a tensor kept after its trace): it has no value to run the function on.
void reject_leaked_tensors(const FunctionCore& core, const std::vector<Tensor>& leaves);
std::string demangle(const char* mangled);

template <std::size_t... I, class... Args>
bool fast_equal_all(const std::vector<TraceTypePtr>& types, std::index_sequence<I...>, const Args&... args) {
  return types.size() == sizeof...(Args) && (ArgTraits<std::decay_t<Args>>::fast_equal(args, *types[I]) && ...);
}

/// The concrete function a call goes to, with the call's tensors and distinct Variables in
/// `inputs`: the cached path first - an earlier call of exactly these types, found by a hash and
/// confirmed without allocating, its tensors lent -, else `resolve(ctx, fast_hash)`, which builds
/// the trace types into `ctx` and dispatches (a tg::function may trace; a loaded function never
/// does). Written once for tg::function and tg::LoadedFunction.
template <class Resolve, class... Args>
CalledConcrete resolve_call(const FunctionCore& core, CallInputs& inputs, Resolve&& resolve, const Args&... args) {
  auto match = [&](const std::vector<TraceTypePtr>& types) {
    return fast_equal_all(types, std::index_sequence_for<Args...>{}, args...);
  };
  auto lend = [&] {
    inputs.lent = true;
    (ArgTraits<std::decay_t<Args>>::leaves(args, inputs.lent_tensors), ...);
  };
  // A repeat of this thread's last call: compared, not hashed (fast_equal is false for any
  // argument the cached path cannot compare, so a match is exact).
  if (CalledConcrete called = repeat_call(core, FastMatch(match))) {
    lend();
    return called;
  }
  std::size_t fast_hash = 0x7467;
  const bool fast = (ArgTraits<std::decay_t<Args>>::fast_hash(args, fast_hash) && ...);
  if (fast) {
    if (CalledConcrete called = fast_lookup(core, fast_hash, FastMatch(match))) {
      lend();
      return called;  // only the general path sees Variables (no Variable takes the fast path)
    }
  }
  ArgContext ctx;
  std::shared_ptr<ConcreteImpl> cf = resolve(ctx, fast ? &fast_hash : nullptr);
  inputs.tensors = std::move(ctx.leaves);
  inputs.variables = std::move(ctx.variables);
  ConcreteImpl* raw = cf.get();
  return CalledConcrete{raw, std::move(cf)};
}

}  // namespace detail

template <class F>
class PolymorphicFunction;
namespace detail {
/// The core of a tg::function (for export, which saves its concrete functions).
template <class F>
const FunctionCore& core_of(const PolymorphicFunction<F>& f);
}  // namespace detail

/// A tg::function: callable like `fn`, tracing it once per new input trace type.
template <class F>
class PolymorphicFunction {
 public:
  PolymorphicFunction(F fn, FunctionOptions options)
      : fn_(std::make_shared<F>(std::move(fn))),
        core_(detail::make_function_core(std::move(options), detail::demangle(typeid(F).name()))) {}

  template <class... Args>
  auto operator()(Args&&... args)
      -> std::invoke_result_t<F&, detail::placeholder_t<std::decay_t<Args>>&...> {
    using R = std::invoke_result_t<F&, detail::placeholder_t<std::decay_t<Args>>&...>;
    if (config::functions_run_eagerly()) {
      // Eager mode runs the body directly. (Called while another function is traced, the call
      // takes the path below: this function traces for its own types, with its own signature
      // and cache, and its graph is inlined into the other trace.)
      if constexpr (std::is_invocable_v<F&, Args&&...>) {
        try {
          return (*fn_)(std::forward<Args>(args)...);
        } catch (Error& e) {
          detail::add_eager_context(*core_, e);  // the innermost function first
          throw;
        }
      } else
        throw TypeError("function '" + name() + "' was called with a TensorSpec while running "
                        "eagerly; TensorSpecs only describe inputs for get_concrete_function. "
                        "Call it with tensors");
    }
    detail::CallInputs inputs;
    const detail::CalledConcrete called = detail::resolve_call(
        *core_, inputs,
        [&](detail::ArgContext& ctx, const std::size_t* fast_hash) { return concrete_for(ctx, fast_hash, true, args...); },
        args...);
    const detail::ConcreteImpl& cf = *called.cf;
    std::vector<Tensor> out = detail::run(*core_, cf, std::move(inputs));
    if constexpr (std::is_void_v<R>) {
      return;
    } else {
      std::size_t i = 0;
      return detail::TensorStructure<R>::rebuild(std::any_cast<const R&>(detail::skeleton_of(cf)), out, i);
    }
  }

  /// The concrete function for these arguments (tracing if needed). Any tensor may be replaced
  /// by a TensorSpec.
  template <class... Args>
  auto get_concrete_function(const Args&... args) {
    using R = std::invoke_result_t<F&, detail::placeholder_t<std::decay_t<Args>>&...>;
    detail::ArgContext ctx;
    return TypedConcreteFunction<R>(concrete_for(ctx, nullptr, false, args...));
  }

  std::vector<ConcreteFunction> concrete_functions() const { return detail::concrete_functions(*core_); }
  int64_t tracing_count() const { return detail::tracing_count(*core_); }
  std::string pretty_printed_concrete_signatures() const {
    std::string s;
    for (const auto& c : concrete_functions()) s += c.pretty_printed_signature() + "\n";
    if (!s.empty()) s.pop_back();
    return s;
  }
  const std::string& name() const { return detail::options_of(*core_).name; }

  /// Why each trace happened, oldest first: the most recent 64 records (TraceRecord::index
  /// keeps counting, so the first kept record's index says how many were dropped).
  std::vector<TraceRecord> trace_history() const { return detail::trace_history(*core_); }
  /// An input_signature that covers every call seen so far, when all arguments are tensors of
  /// one dtype each; std::nullopt otherwise (e.g. a varying C++ literal).
  std::optional<std::vector<TensorSpec>> suggested_input_signature() const {
    return detail::suggested_input_signature(*core_);
  }
  /// A JSON document (schema in docs/retracing.md) with the trace count, per-argument
  /// variation, the records, the suggested signature, and ranked workarounds and dead ends.
  std::string retracing_report() const { return detail::retracing_report(*core_); }

 private:
  template <class... Args>
  std::shared_ptr<detail::ConcreteImpl> concrete_for(detail::ArgContext& ctx, const std::size_t* fast_hash,
                                                     bool is_call, const Args&... args) {
    using R = std::invoke_result_t<F&, detail::placeholder_t<std::decay_t<Args>>&...>;
    std::vector<TraceTypePtr> types{detail::ArgTraits<std::decay_t<Args>>::trace_type(args, ctx)...};
    detail::reject_leaked_tensors(*core_, ctx.leaves);
    auto body = [&](const std::vector<TraceTypePtr>& traced, detail::PlaceholderContext& pc) {
      return trace_body<R>(traced, pc, std::index_sequence_for<Args...>{}, args...);
    };
    return detail::dispatch_or_trace(*core_, std::move(types), detail::TraceBody(body), fast_hash, is_call);
  }

  template <class R, std::size_t... I, class... Args>
  detail::TraceOutput trace_body(const std::vector<TraceTypePtr>& traced, detail::PlaceholderContext& pc,
                                 std::index_sequence<I...>, const Args&... args) {
    std::tuple<detail::placeholder_t<std::decay_t<Args>>...> ph{detail::ArgTraits<std::decay_t<Args>>::placeholder(
        args, *traced[I], pc, detail::parameter_name(*core_, I))...};
    detail::TraceOutput out;
    if constexpr (std::is_void_v<R>) {
      std::apply(*fn_, ph);
      out.description = "None";
    } else {
      R result = std::apply(*fn_, ph);
      detail::TensorStructure<R>::flatten(result, out.outputs);
      out.description = detail::TensorStructure<R>::describe(result);
      out.skeleton = std::move(result);
    }
    return out;
  }

  friend struct detail::FunctionAccess;
  template <class G>
  friend const detail::FunctionCore& detail::core_of(const PolymorphicFunction<G>& f);
  std::shared_ptr<F> fn_;
  std::shared_ptr<detail::FunctionCore> core_;
};

template <class F>
const detail::FunctionCore& detail::core_of(const PolymorphicFunction<F>& f) {
  return *f.core_;
}

/// Wraps a callable into a PolymorphicFunction (tf.function).
template <class F>
auto function(F fn, FunctionOptions options = {}) {
  return PolymorphicFunction<F>(std::move(fn), std::move(options));
}

}  // namespace tg
