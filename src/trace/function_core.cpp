// tg::function's non-template core: the cache of concrete functions, dispatch by trace type,
// tracing into a graph, and binding calls to concrete functions.
#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <ostream>
#include <shared_mutex>
#include <unordered_map>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "graph/graph_ir.h"
#include "ops/collective.h"
#include "ops/op.h"
#include "passes/passes.h"
#include "runtime/executor.h"
#include "runtime/replay.h"
#include "tracegraph/ops.h"
#include "trace/concrete.h"
#include "trace/diagnostics.h"
#include "ops/variable_creation.h"
#include "trace/function_core.h"
#include "trace/recorder.h"
#include "trace/trace_diff.h"

namespace tg {

namespace config {
namespace {
std::atomic<bool> g_run_eagerly{false};
}
void run_functions_eagerly(bool enabled) { g_run_eagerly.store(enabled); }
bool functions_run_eagerly() { return g_run_eagerly.load(std::memory_order_relaxed); }
}  // namespace config

namespace detail {

std::string demangle(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string out = status == 0 && d ? d : mangled;
  std::free(d);
  return out;
}

std::string indexed_path(const std::string& path, std::size_t i) {
  return path + "[" + std::to_string(i) + "]";
}
std::string keyed_path(const std::string& path, const LiteralValue& key) {
  return path + "[" + key.to_string() + "]";
}

std::string describe_output(const Tensor& t) {
  if (!t.defined()) return "None";
  return TensorSpec(detail::static_shape(t), t.dtype()).to_string();
}

bool tracing_active() { return current_recorder() != nullptr; }

void add_eager_context(const FunctionCore& core, Error& e) {
  std::string s = "(in function '";
  s += core.name();
  s += "', run eagerly: tg::config::run_functions_eagerly is on)";
  e.add_context(s);
}

void reject_leaked_tensors(const FunctionCore& core, const std::vector<Tensor>& leaves) {
  if (tracing_active()) return;  // get_concrete_function in a trace may be given its tensors
  for (const Tensor& t : leaves)
    if (t.impl() && t.impl()->symbolic)
      throw OutOfScopeError(str_cat(
          "function '", core.name(), "' was called with the symbolic tensor ",
          t.impl()->symbolic->origin(), " as an argument, outside the trace that created it. "
          "Symbolic tensors only exist while their function is traced; return the value from "
          "that function and pass the returned tensor instead of keeping the symbolic one (e.g. "
          "in a global or a captured variable)"));
}

TraceTypePtr checked_custom_trace_type(TraceTypePtr type, const char* mangled_name) {
  if (!type)
    throw TypeError(str_cat(
        "[tg::function] an argument of type '", demangle(mangled_name), "' returned a null "
        "tg::TraceTypePtr from tracing_type(); expected a tg::TraceType that describes the value "
        "(e.g. std::make_shared<MyTraceType>(...)). See \"Your own types\" in docs/user-guide.md"));
  return type;
}

namespace {
// What runs calls of concrete functions on this thread: the tapes' observer while one records.
thread_local CallObserver* t_call_observer = nullptr;
}  // namespace

void set_call_observer(CallObserver* o) { t_call_observer = o; }

namespace {
// One line per collective, in the order the ranks run them; a cond's or a while loop's
// sub-graphs are listed under their node, indented.
void describe_collectives(const GraphIR& g, const std::string& indent, std::string& out) {
  for (const GraphNode& node : g.nodes) {
    if (node.kind != NodeKind::kOp) continue;
    if (is_collective(node.op)) {
      out += str_cat(indent, op_def(node.op).name, "(", format_attrs(node.attrs), ")");
      for (std::size_t i = 0; i < node.inputs.size(); ++i) {
        ValueType t = g.type_of(node.inputs[i]);
        // The rows each rank gathers may differ; only the rest of the shape must agree.
        const bool rows_differ = (node.op == OpId::AllGather && i == 0) || (node.op == OpId::AllGatherGrad && i == 1);
        if (rows_differ && t.shape.has_rank() && t.shape.rank() > 0) {
          std::vector<int64_t> dims = t.shape.dims();
          dims[0] = None;
          t.shape = TensorShape(dims);
        }
        out += str_cat(i ? ", " : " of ", to_string(t.dtype), " ", t.shape.to_string());
      }
      out += "\n";
    }
    for (const NamedSubgraph& sub : subgraphs_of(node)) {
      std::string inner;
      describe_collectives(*sub.graph, indent + "  ", inner);
      if (!inner.empty()) out += str_cat(indent, node.name, " ", sub.role, ":\n", inner);
    }
  }
}

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
  const bool collectives = !cf.collective_sequence.empty();
  if (collectives) check_collectives_once(cf);
  // What the collectives' errors name; a function without any leaves the enclosing one's.
  CollectiveFunctionScope in_function(collectives ? &cf.function_name : current_collective_function());
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

std::size_t tensor_type_hash(const Tensor& t) {
  // Must agree with tensor_type_equals, not with TraceType::hash (the tables are separate).
  const auto& impl = t.impl();
  if (!impl) return 0;
  std::size_t h = static_cast<std::size_t>(impl->dtype) + 1;
  hash_mix(h, static_cast<std::size_t>(impl->shape.rank()));
  for (int64_t d : impl->shape.dims()) hash_mix(h, static_cast<std::size_t>(d));
  return h;
}

bool tensor_type_equals(const Tensor& t, const TraceType& type) {
  const auto& impl = t.impl();
  if (!impl || impl->symbolic) return false;  // leaked symbolic tensors take the general path
  return tensor_type_is(type, impl->dtype, impl->shape);
}

const std::any& skeleton_of(const ConcreteImpl& cf) { return cf.skeleton; }

std::string FunctionTypeKey::to_string() const {
  std::string s = "(";
  for (std::size_t i = 0; i < params.size(); ++i)
    s += (i ? ", " : "") + names[i] + ": " + params[i]->to_string();
  return s + ")";
}

bool FunctionTypeKey::is_subtype_of(const std::vector<TraceTypePtr>& other) const {
  if (other.size() != params.size()) return false;
  for (std::size_t i = 0; i < params.size(); ++i)
    if (!params[i]->is_subtype_of(*other[i])) return false;
  return true;
}

std::size_t hash_types(const std::vector<TraceTypePtr>& types) {
  std::size_t h = types.size();
  for (const auto& t : types) hash_mix(h, t->hash());
  return h;
}

namespace {

// Marks a trace of `core` for `types` as in progress on this thread while it lives; the marks
// link the enclosing ones, innermost first.
class TraceInProgress {
 public:
  TraceInProgress(const FunctionCore* core, const std::vector<TraceTypePtr>* types);
  const FunctionCore* core() const { return core_; }
  const std::vector<TraceTypePtr>& types() const { return *types_; }
  const TraceInProgress* enclosing() const { return installed_.previous(); }

 private:
  const FunctionCore* core_;
  const std::vector<TraceTypePtr>* types_;
  ScopedThreadValue<const TraceInProgress*> installed_;
};

// The innermost trace being recorded on this thread (TraceInProgress).
thread_local const TraceInProgress* t_traces_in_progress = nullptr;

TraceInProgress::TraceInProgress(const FunctionCore* core, const std::vector<TraceTypePtr>* types)
    : core_(core), types_(types), installed_(t_traces_in_progress, this) {}

// The innermost mismatch between a call's argument type and a parameter type, as TF words it:
// "Can not cast 3 to Literal[2]".
std::string cast_message(const TraceType& arg, const TraceType& param) {
  auto [value, target] = innermost_uncastable(arg, param);
  if (!value) value = &arg, target = &param;
  std::string a = value->to_string();
  if (a.rfind("Literal[", 0) == 0 && a.back() == ']') a = a.substr(8, a.size() - 9);
  return "Can not cast " + a + " to " + target->to_string();
}

std::string args_text(const std::vector<TraceTypePtr>& args) {
  std::string s = "(";
  for (const auto& a : args) s += a->to_string() + ", ";
  if (args.size() > 1) s.resize(s.size() - 2);
  else if (args.size() == 1) s.resize(s.size() - 1);
  return s + ")";
}

[[noreturn]] void binding_error(const FunctionTypeKey& sig, const std::vector<TraceTypePtr>& args,
                                const std::string& output_suffix) {
  if (args.size() != sig.params.size())
    throw TypeError(str_cat("Binding inputs to function failed: the signature ", sig.to_string(),
                            " takes ", sig.params.size(), " argument", sig.params.size() == 1 ? "" : "s",
                            " but ", args.size(), " were given. Received args: ", args_text(args)));
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (!castable_to(*args[i], *sig.params[i]))
      throw TypeError(str_cat("Binding inputs to function failed due to `",
                              cast_message(*args[i], *sig.params[i]), "`. Received args: ",
                              args_text(args), " for signature: ", sig.to_string(), output_suffix,
                              "."));
  }
  throw InternalError("binding_error called for a call that binds");
}

// Where an error escaping a traced body came from: C++ has no user frames to print (TF's
// tracebacks), so the message carries them. `index` counts from 0 like trace_history().
std::string trace_context(const std::string& function, int64_t index, const FunctionTypeKey& type) {
  std::string s = "(while tracing function '";
  s += function;
  s += "', trace ";
  s += std::to_string(index + 1);
  s += ", for ";
  s += type.to_string();
  s += ")";
  return s;
}

}  // namespace

void bind_concrete(const ConcreteImpl& cf, const std::vector<TraceTypePtr>& arg_types) {
  // A concrete function is called with values, cast to its parameters as TF casts them: a tensor
  // binds whatever the parameter spec's name (the name named the graph input when it traced),
  // at any depth of a structure; a symbolic one less specific than its parameter binds too, and
  // its shape is checked when the graph runs (checked_inputs).
  const auto& params = cf.input_type.params;
  bool binds = arg_types.size() == params.size();
  for (std::size_t i = 0; binds && i < params.size(); ++i) binds = castable_to(*arg_types[i], *params[i]);
  if (!binds) binding_error(cf.input_type, arg_types, " -> " + cf.output_description);
}

namespace {
// Dim d of a trace type's shape; None when it is unknown or the rank is unknown or smaller.
int64_t dim_or_none(const TensorShape& s, std::size_t d) { return s.has_rank() && d < s.dims().size() ? s.dims()[d] : None; }
}  // namespace

namespace {
uint64_t next_core_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// The last cached call this thread made, of any function: a loop calling one function with the
// same argument types finds it with direct comparisons, before any hashing or locking. Weak, so
// that a destroyed function's graphs are not kept alive by the record; `raw` is read only when
// core_id names the function being called and its cache never evicts (CalledConcrete).
struct LastCall {
  uint64_t core_id = 0;
  uint64_t epoch = 0;
  std::vector<TraceTypePtr> call_types;
  std::weak_ptr<ConcreteImpl> cf;
  ConcreteImpl* raw = nullptr;
};
thread_local LastCall t_last_call;

// Field by field, so that a record of as many arguments reuses the vector's storage: the cached
// path's fast_lookup records a hit without allocating.
void record_last_call(uint64_t core_id, uint64_t epoch, const std::vector<TraceTypePtr>& call_types,
                      const std::shared_ptr<ConcreteImpl>& cf) {
  LastCall& last = t_last_call;
  last.core_id = core_id;
  last.epoch = epoch;
  last.call_types.assign(call_types.begin(), call_types.end());
  last.cf = cf;
  last.raw = cf.get();
}
}  // namespace

struct FunctionCore::State {
  FunctionOptions options;
  std::string callable_type;
  std::optional<FunctionTypeKey> signature;
  mutable std::shared_mutex mu;  // guards concretes / exact
  // Serialises tracing of this function across threads; recursive, because a body may call its
  // own function with other argument types (recursion over literals), which traces too.
  std::recursive_mutex trace_mu;
  std::vector<std::shared_ptr<ConcreteImpl>> concretes;
  std::unordered_multimap<std::size_t, ConcreteImpl*> exact;
  std::atomic<int64_t> tracing_count{0};
  std::unique_ptr<Diagnostics> diag;
  // Exact call types already dispatched, by their fast hash: the allocation-free cached path.
  // Cleared whenever the set of concrete functions changes (the best match may change).
  struct FastEntry {
    std::vector<TraceTypePtr> call_types;
    std::shared_ptr<ConcreteImpl> cf;
  };
  std::unordered_multimap<std::size_t, FastEntry> fast;
  static constexpr std::size_t kMaxFastEntries = 256;
  // Which function this is, for the per-thread record of the last call (a number, never reused,
  // unlike an address), and a count of the times `fast` was cleared: a record made before the
  // last clear is stale.
  const uint64_t id = next_core_id();
  std::atomic<uint64_t> fast_epoch{0};
  void clear_fast() {
    fast.clear();
    fast_epoch.fetch_add(1, std::memory_order_release);
  }
  // Argument dims some trace's C++ code read as integers (guarded by trace_mu): never relaxed.
  StaticDimReads static_dims;
  std::unique_ptr<VariableParameters> variable_parameters;  // made with the options (the name)

  // Drops the least recently used concrete function (max_cached_traces). Caller holds mu.
  void evict_one() {
    auto lru = std::min_element(concretes.begin(), concretes.end(), [](const auto& a, const auto& b) {
      return a->last_used.load(std::memory_order_relaxed) < b->last_used.load(std::memory_order_relaxed);
    });
    ConcreteImpl* victim = lru->get();
    auto range = exact.equal_range(victim->input_type.hash);
    for (auto it = range.first; it != range.second; ++it)
      if (it->second == victim) {
        exact.erase(it);
        break;
      }
    diag->on_evicted(victim->input_type, victim->index);
    concretes.erase(lru);
    clear_fast();
  }

  // Parameter i's name from the options alone (the input_signature's spec names aside).
  std::string option_name(std::size_t i) const {
    return i < options.arg_names.size() ? options.arg_names[i] : "arg" + std::to_string(i);
  }
  std::vector<std::string> names_for(std::size_t n) const {
    std::vector<std::string> names;
    for (std::size_t i = 0; i < n; ++i) names.push_back(option_name(i));
    return names;
  }

  // Exact match by hash, else the most specific concrete function the call is a subtype of.
  std::shared_ptr<ConcreteImpl> lookup(const std::vector<TraceTypePtr>& types, std::size_t h) const {
    std::shared_lock lock(mu);
    auto range = exact.equal_range(h);
    for (auto it = range.first; it != range.second; ++it)
      if (same_types(it->second->input_type.params, types)) return it->second->self.lock();
    FunctionTypeKey call{types, {}, h};
    std::shared_ptr<ConcreteImpl> best;
    for (const auto& c : concretes) {
      if (!call.is_subtype_of(c->input_type.params)) continue;
      if (!best || c->input_type.is_subtype_of(best->input_type.params)) best = c;
    }
    return best;
  }

  // reduce_retracing: the most specific common supertype of the call with an existing trace,
  // except for dims the body reads as integers (static_dims), which keep the call's size.
  // `kept` receives those, as "dim 0 of 'x' (5)". Caller holds trace_mu.
  std::vector<TraceTypePtr> generalise(const std::vector<TraceTypePtr>& types, std::vector<std::string>& kept) const {
    const std::vector<std::string> names = names_for(types.size());
    std::shared_lock lock(mu);
    std::vector<TraceTypePtr> best;
    std::vector<std::string> best_kept, refused;
    for (const auto& c : concretes) {
      const auto& params = c->input_type.params;
      if (params.size() != types.size()) continue;
      std::vector<TraceTypePtr> sup;
      std::vector<std::string> pinned;
      for (std::size_t i = 0; i < types.size(); ++i) {
        TraceTypePtr s = types[i]->most_specific_common_supertype({params[i].get()});
        if (s) s = keep_static_dims(std::move(s), *types[i], names[i], pinned);
        if (!s) break;
        sup.push_back(std::move(s));
      }
      if (sup.size() != types.size()) {
        for (auto& p : pinned)
          if (std::find(refused.begin(), refused.end(), p) == refused.end()) refused.push_back(std::move(p));
        continue;
      }
      FunctionTypeKey cand{sup, {}, 0};
      if (best.empty() || cand.is_subtype_of(best)) {
        best = std::move(sup);
        best_kept = std::move(pinned);
      }
    }
    if (best.empty()) {
      kept = std::move(refused);
      return types;
    }
    kept = std::move(best_kept);
    return best;
  }

  // `sup` (a supertype of `call`, argument `path`) with the dims the body reads as integers
  // set back to the call's sizes. A tensor argument is rebuilt; for a tensor nested in a
  // container that would need relaxing there, nullptr (no generalisation with this trace).
  TraceTypePtr keep_static_dims(TraceTypePtr sup, const TraceType& call, const std::string& path,
                                std::vector<std::string>& pinned) const {
    DType dtype;
    TensorShape sup_shape, call_shape;
    if (as_tensor_type(*sup, &dtype, &sup_shape) && as_tensor_type(call, &dtype, &call_shape)) {
      // A relaxed rank keeps nothing of the call: the read dims need the call's whole shape.
      std::vector<int64_t> dims = sup_shape.has_rank() ? sup_shape.dims() : std::vector<int64_t>{};
      const bool rank_relaxed = call_shape.has_rank() && dims.size() != call_shape.dims().size();
      bool changed = false;
      for (auto it = static_dims.lower_bound({path, 0}); it != static_dims.end() && it->first == path; ++it) {
        const auto d = static_cast<std::size_t>(it->second);
        const int64_t size = dim_or_none(call_shape, d);
        if (size == None || (!rank_relaxed && dims[d] != None)) continue;
        if (rank_relaxed && !changed) dims = call_shape.dims();
        dims[d] = size;
        changed = true;
        pinned.push_back(str_cat("dim ", d, " of '", path, "' (", size, ")"));
      }
      return changed ? tensor_trace_type(dtype, TensorShape(dims), tensor_type_name(*sup)) : sup;
    }
    // Nested tensors: refuse to relax a read dim rather than rebuild the container type.
    std::map<std::string, TensorShape> relaxed;
    for_each_leaf(*sup, path, [&](const std::string& p, const LeafInfo& leaf) {
      if (leaf.kind == LeafKind::kTensor) relaxed[p] = leaf.shape;
    });
    const std::size_t before = pinned.size();
    for_each_leaf(call, path, [&](const std::string& p, const LeafInfo& leaf) {
      if (leaf.kind != LeafKind::kTensor) return;
      const auto it = relaxed.find(p);
      if (it == relaxed.end()) return;
      for (auto r = static_dims.lower_bound({p, 0}); r != static_dims.end() && r->first == p; ++r) {
        const auto d = static_cast<std::size_t>(r->second);
        const int64_t size = dim_or_none(leaf.shape, d);
        if (size != None && dim_or_none(it->second, d) == None)
          pinned.push_back(str_cat("dim ", d, " of '", p, "' (", size, ")"));
      }
    });
    return pinned.size() > before ? nullptr : sup;
  }
};

FunctionCore::FunctionCore(FunctionOptions options, std::string callable_type)
    : state_(std::make_unique<State>()) {
  if (options.name.empty()) options.name = "function";
  if (options.max_traces < 0)
    throw ValueError(str_cat("FunctionOptions::max_traces must be >= 0 (0 = no limit), got ",
                             options.max_traces, " for function '", options.name, "'"));
  if (options.max_cached_traces < 0)
    throw ValueError(str_cat("FunctionOptions::max_cached_traces must be >= 0 (0 = unbounded), got ",
                             options.max_cached_traces, " for function '", options.name, "'"));
  state_->options = std::move(options);
  state_->callable_type = std::move(callable_type);
  state_->variable_parameters = std::make_unique<VariableParameters>(state_->options.name);
  state_->diag = std::make_unique<Diagnostics>(state_->options.name, state_->callable_type,
                                               // A loaded function has no C++ callable (empty type): never counted.
                                               state_->callable_type.empty() ? 0 : register_callable(state_->callable_type),
                                               state_->options.max_traces,
                                               state_->options.max_cached_traces);
  if (state_->options.input_signature) {
    FunctionTypeKey sig;
    const auto& specs = *state_->options.input_signature;
    sig.names = state_->names_for(specs.size());
    for (std::size_t i = 0; i < specs.size(); ++i) {
      if (!specs[i].name.empty()) sig.names[i] = specs[i].name;
      sig.params.push_back(tensor_trace_type(specs[i].dtype, specs[i].shape));
    }
    sig.hash = hash_types(sig.params);
    state_->signature = std::move(sig);
  }
}

FunctionCore::~FunctionCore() = default;

const FunctionOptions& FunctionCore::options() const { return state_->options; }
std::string FunctionCore::parameter_name(std::size_t index) const {
  const State& s = *state_;
  if (s.signature && index < s.signature->names.size()) return s.signature->names[index];
  return s.option_name(index);
}
const std::string& FunctionCore::name() const { return state_->options.name; }
int64_t FunctionCore::tracing_count() const { return state_->tracing_count.load(); }

std::vector<std::shared_ptr<ConcreteImpl>> FunctionCore::concrete_functions() const {
  std::shared_lock lock(state_->mu);
  return state_->concretes;
}

std::vector<TraceRecord> FunctionCore::trace_history() const { return state_->diag->history(); }
const Diagnostics& FunctionCore::diagnostics() const { return *state_->diag; }

std::optional<std::vector<TensorSpec>> FunctionCore::suggested_input_signature() const {
  if (state_->options.input_signature) return state_->options.input_signature;
  return state_->diag->suggested_input_signature();
}

std::string FunctionCore::retracing_report() const {
  return state_->diag->report_json(tracing_count(), concrete_functions().size());
}

bool same_types(const std::vector<TraceTypePtr>& a, const std::vector<TraceTypePtr>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!a[i]->equals(*b[i])) return false;
  return true;
}

namespace {

// A trace of `core` for these types already in progress on this thread: the body called its
// own function with the arguments it is being traced for, which would trace forever. Other
// types are fine (recursion over a literal traces once per level, as in TF).
void check_not_in_progress(const FunctionCore* core, const std::vector<TraceTypePtr>& types,
                           const std::vector<std::string>& names) {
  for (const TraceInProgress* active = t_traces_in_progress; active; active = active->enclosing())
    if (active->core() == core && same_types(active->types(), types))
      throw StagingError(str_cat(
          "function '", core->name(), "' called itself while it was being traced, with the argument "
          "types of the trace in progress ", FunctionTypeKey{types, names, 0}.to_string(),
          ", so the trace would never end. A recursion that ends on a C++ literal argument (n - 1) "
          "traces once per level; one that ends on a tensor's value needs tg::while_loop"));
}

}  // namespace

// ---- the interface the PolymorphicFunction template reaches the core through -----------------

std::shared_ptr<FunctionCore> make_function_core(FunctionOptions options, std::string callable_type) {
  return std::make_shared<FunctionCore>(std::move(options), std::move(callable_type));
}
const FunctionOptions& options_of(const FunctionCore& core) { return core.options(); }
std::string parameter_name(const FunctionCore& core, std::size_t index) { return core.parameter_name(index); }
CalledConcrete fast_lookup(const FunctionCore& core, std::size_t fast_hash, FastMatch match) {
  return core.fast_lookup(fast_hash, match);
}
CalledConcrete repeat_call(const FunctionCore& core, FastMatch match) { return core.repeat_call(match); }
std::shared_ptr<ConcreteImpl> dispatch_or_trace(FunctionCore& core, std::vector<TraceTypePtr> arg_types,
                                                TraceBody body, const std::size_t* fast_hash, bool is_call) {
  return core.dispatch_or_trace(std::move(arg_types), body, fast_hash, is_call);
}
std::vector<Tensor> run(const FunctionCore& core, const ConcreteImpl& cf, CallInputs&& inputs) {
  return core.run(cf, std::move(inputs));
}
std::vector<ConcreteFunction> concrete_functions(const FunctionCore& core) {
  std::vector<ConcreteFunction> out;
  for (auto& c : core.concrete_functions()) out.emplace_back(c);
  return out;
}
int64_t tracing_count(const FunctionCore& core) { return core.tracing_count(); }
std::vector<TraceRecord> trace_history(const FunctionCore& core) { return core.trace_history(); }
std::optional<std::vector<TensorSpec>> suggested_input_signature(const FunctionCore& core) {
  return core.suggested_input_signature();
}
std::string retracing_report(const FunctionCore& core) { return core.retracing_report(); }

CalledConcrete FunctionCore::repeat_call(FastMatch match) const {
  State& s = *state_;
  LastCall& last = t_last_call;
  if (last.core_id != s.id || last.epoch != s.fast_epoch.load(std::memory_order_acquire) || !match(last.call_types))
    return {};
  CalledConcrete called;
  if (s.options.max_cached_traces > 0) {  // an eviction may drop it while this call runs
    called.keep = last.cf.lock();
    called.cf = called.keep.get();
  } else {
    called.cf = last.raw;  // never evicted: alive as long as this function
  }
  if (called) {
    s.diag->on_call(!tracing_active());
    if (s.options.max_cached_traces > 0) called.cf->last_used.store(s.diag->calls(), std::memory_order_relaxed);
  }
  return called;
}

CalledConcrete FunctionCore::fast_lookup(std::size_t fast_hash, FastMatch match) const {
  State& s = *state_;
  CalledConcrete called;
  {
    std::shared_lock lock(s.mu);
    auto range = s.fast.equal_range(fast_hash);
    for (auto it = range.first; it != range.second; ++it)
      if (match(it->second.call_types)) {
        called.cf = it->second.cf.get();
        if (s.options.max_cached_traces > 0) called.keep = it->second.cf;  // see repeat_call
        // Read under the lock: a clear after this makes the record stale.
        record_last_call(s.id, s.fast_epoch.load(std::memory_order_relaxed), it->second.call_types, it->second.cf);
        break;
      }
  }
  if (called) {
    s.diag->on_call(!tracing_active());  // TF's "5 traces within 10 calls" rule counts calls
    if (s.options.max_cached_traces > 0)  // the LRU stamp only matters with a bounded cache
      called.cf->last_used.store(s.diag->calls(), std::memory_order_relaxed);
  }
  return called;
}

std::shared_ptr<ConcreteImpl> FunctionCore::dispatch_or_trace(std::vector<TraceTypePtr> arg_types,
                                                              TraceBody body, const std::size_t* fast_hash,
                                                              bool is_call) {
  auto cf = dispatch_or_trace_impl(arg_types, body, is_call);
  if (fast_hash) remember_fast(*fast_hash, std::move(arg_types), cf);
  return cf;
}

std::shared_ptr<ConcreteImpl> FunctionCore::dispatch_or_trace_impl(const std::vector<TraceTypePtr>& arg_types,
                                                                   TraceBody body, bool is_call) {
  State& s = *state_;
  std::vector<TraceTypePtr> target = arg_types;
  if (s.signature) {
    // One FunctionType only: the call must bind to it; the trace uses the signature's types.
    bool binds = target.size() == s.signature->params.size();
    for (std::size_t i = 0; binds && i < target.size(); ++i) binds = castable_to(*target[i], *s.signature->params[i]);
    if (!binds) binding_error(*s.signature, target, "");
    target = s.signature->params;
  }
  const uint64_t call_number = s.diag->on_call(is_call && !tracing_active());
  const std::size_t h = hash_types(target);
  if (auto cf = s.lookup(target, h)) {
    cf->last_used.store(s.diag->calls(), std::memory_order_relaxed);
    return cf;
  }

  check_not_in_progress(this, target, s.signature ? s.signature->names : s.names_for(target.size()));
  std::lock_guard trace_lock(s.trace_mu);
  if (auto cf = s.lookup(target, h)) return cf;  // traced by another thread meanwhile
  // Everything below runs only when a call traces: the cached path above stays lean.
  const FunctionTypeKey call{target, s.signature ? s.signature->names : s.names_for(target.size()), h};
  s.diag->observe(call);
  TraceRecord record = s.diag->explain(call, concrete_functions(), s.options.reduce_retracing,
                                       s.options.max_cached_traces);
  bool generalised = false;
  if (s.options.reduce_retracing && !s.signature) {
    std::vector<std::string> kept;
    target = s.generalise(target, kept);
    generalised = !FunctionTypeKey{target, {}, 0}.is_subtype_of(call.params);
    if (generalised) check_not_in_progress(this, target, call.names);
    if (!kept.empty()) {
      record.reason += "; reduce_retracing kept ";
      for (std::size_t k = 0; k < kept.size(); ++k) record.reason += (k ? ", " : "") + kept[k];
      record.reason += " as traced: the function's C++ code reads those dims as integers "
                       "(x.shape().dim(i)); read them with tg::shape(x)[i] to let them vary";
    }
  }

  const int64_t index = s.tracing_count.load();
  if (s.options.max_traces > 0 && index >= s.options.max_traces)  // 0: no limit (services)
    throw RetracingLimitError(s.diag->limit_message(index, call));

  // The singleton-Variable rule (as in TensorFlow): only the first trace may create Variables,
  // and a first trace that did is traced once more, now without creating any, so that a body
  // creating a Variable on *every* call fails at once instead of leaking one per call. The
  // second pass's graph is the one kept - unless the first pass created a Variable from the
  // inputs: only its graph sets that Variable's value (at its first run), so it is kept, and
  // the second pass was the check alone.
  struct Pass {
    std::shared_ptr<GraphIR> graph;
    TraceOutput out;
    StaticDimReads static_reads;
    std::vector<std::shared_ptr<VariableState>> variable_parameters;
  };
  Pass kept;                         // what the concrete function is made of
  std::optional<Pass> initializing;  // a first pass that created Variables from the inputs
  const bool first = index == 0;
  for (int pass = 0; pass < 2; ++pass) {
    GraphRecorder recorder(CapturePolicy::kReject, s.options.name, index, s.variable_parameters.get());
    kept.graph = recorder.graph();
    VariableCreationPolicy policy{first && pass == 0, 0, s.options.name, 0, index + 1};
    try {
      TraceInProgress in_progress(this, &target);
      RecorderScope recording(&recorder);
      VariablePolicyScope variables(&policy);
      kept.out = body(target, recorder);
      recorder.add_outputs(kept.out.outputs, "function output");
    } catch (Error& e) {
      e.add_context(trace_context(s.options.name, index, FunctionTypeKey{target, call.names, 0}));
      throw;
    }
    kept.static_reads = recorder.static_dim_reads();
    kept.variable_parameters = recorder.variable_parameters();
    if (policy.created == 0) break;
    if (policy.initialized_from_inputs > 0) initializing = kept;
  }
  if (initializing) kept = std::move(*initializing);
  for (TraceTypePtr& t : target) t = with_object_snapshots(t);  // the values the graph baked in
  ConcreteParts parts;
  parts.function_name = s.options.name;
  parts.index = index;
  parts.input_type = FunctionTypeKey{target, s.signature ? s.signature->names : s.names_for(target.size()),
                                     hash_types(target)};
  parts.graph = std::move(kept.graph);
  parts.optimize = s.options.optimize;
  parts.variable_parameters = std::move(kept.variable_parameters);
  parts.skeleton = std::move(kept.out.skeleton);
  parts.output_description = kept.out.description;
  std::shared_ptr<ConcreteImpl> cf = make_concrete(std::move(parts));
  cf->last_used.store(s.diag->calls(), std::memory_order_relaxed);
  {
    std::unique_lock lock(s.mu);
    if (s.options.max_cached_traces > 0 &&
        static_cast<int64_t>(s.concretes.size()) >= s.options.max_cached_traces)
      s.evict_one();
    s.concretes.push_back(cf);
    s.clear_fast();
    s.exact.emplace(cf->input_type.hash, cf.get());
    s.tracing_count.fetch_add(1);
  }
  s.static_dims.insert(kept.static_reads.begin(), kept.static_reads.end());
  s.diag->note_static_dims(s.static_dims);
  s.diag->on_traced(std::move(record), cf->input_type, generalised, call_number);
  return cf;
}

void FunctionCore::adopt(std::shared_ptr<ConcreteImpl> cf) {
  State& s = *state_;
  std::unique_lock lock(s.mu);
  s.concretes.push_back(cf);
  s.clear_fast();
  s.exact.emplace(cf->input_type.hash, cf.get());
  s.tracing_count.fetch_add(1);
}

std::shared_ptr<ConcreteImpl> FunctionCore::find(std::vector<TraceTypePtr> arg_types, const std::size_t* fast_hash) const {
  State& s = *state_;
  s.diag->on_call(!tracing_active());
  std::shared_ptr<ConcreteImpl> cf = s.lookup(arg_types, hash_types(arg_types));
  if (cf && fast_hash) remember_fast(*fast_hash, std::move(arg_types), cf);
  return cf;
}

void FunctionCore::remember_fast(std::size_t fast_hash, std::vector<TraceTypePtr> call_types,
                                 std::shared_ptr<ConcreteImpl> cf) const {
  State& s = *state_;
  std::unique_lock lock(s.mu);
  if (s.fast.size() >= State::kMaxFastEntries) s.clear_fast();
  record_last_call(s.id, s.fast_epoch.load(std::memory_order_relaxed), call_types, cf);  // the next call may repeat it
  s.fast.emplace(fast_hash, State::FastEntry{std::move(call_types), std::move(cf)});
}

std::shared_ptr<ConcreteImpl> make_concrete(ConcreteParts parts) {
  std::shared_ptr<GraphIR>& graph = parts.graph;
  std::shared_ptr<const GraphIR> unoptimized;
  if (parts.optimize) {
    unoptimized = graph->copy_without_name_registry();  // only the optimised graph names nodes
    optimize_graph(graph, parts.function_name + ".trace" + std::to_string(parts.index));
  }
  auto cf = std::make_shared<ConcreteImpl>();
  cf->unoptimized_ir = std::move(unoptimized);
  cf->self = cf;
  cf->function_name = std::move(parts.function_name);
  cf->index = parts.index;
  cf->input_type = std::move(parts.input_type);
  cf->ir = graph;
  cf->plan = make_plan(*graph);
  cf->graph = std::make_unique<Graph>(cf->unoptimized_ir ? cf->unoptimized_ir : graph);
  cf->optimized_graph = std::make_unique<Graph>(graph);
  cf->variable_parameters = std::move(parts.variable_parameters);
  cf->skeleton = std::move(parts.skeleton);
  cf->output_description = std::move(parts.output_description);
  describe_collectives(cf->unoptimized_ir ? *cf->unoptimized_ir : *graph, "", cf->collective_sequence);
  return cf;
}

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
    case DType::Float64: exact = true; break;
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
