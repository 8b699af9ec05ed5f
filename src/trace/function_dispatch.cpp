// Dispatch: which concrete function a call of a tg::function goes to. The cached path (this
// thread's last call, then the fast-hash table) confirms an earlier exact match without building
// trace types; otherwise the call's trace types are built and matched - the exact FunctionType,
// else the most specific one the call is a subtype of - and only a miss reaches the compile
// driver (FunctionCore::trace, function_compile.cpp). Also the trace-type arithmetic dispatch
// rests on (FunctionTypeKey, hashing, subtypes, binding a call to a FunctionType) and the
// structure walker's out-of-line helpers for the call's argument types. The cached path's
// functions (repeat_call, fast_lookup and their free wrappers) stay in this one file, so that
// each call of the template reaches them through a single out-of-line call.
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "trace/concrete.h"
#include "trace/diagnostics.h"
#include "trace/function_core.h"
#include "trace/function_state.h"
#include "trace/trace_diff.h"

namespace tg::detail {

// ---- the call's argument types (the structure walker's out-of-line helpers) ----------------

std::string indexed_path(const std::string& path, std::size_t i) {
  return path + "[" + std::to_string(i) + "]";
}
std::string keyed_path(const std::string& path, const LiteralValue& key) {
  return path + "[" + key.to_string() + "]";
}

TraceTypePtr checked_custom_trace_type(TraceTypePtr type, const char* mangled_name) {
  if (!type)
    throw TypeError(str_cat(
        "[tg::function] an argument of type '", demangle(mangled_name), "' returned a null "
        "tg::TraceTypePtr from tracing_type(); expected a tg::TraceType that describes the value "
        "(e.g. std::make_shared<MyTraceType>(...)). See \"Your own types\" in docs/user-guide.md"));
  return type;
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

void reject_leaked_tensors(const FunctionCore& core, const std::vector<Tensor>& leaves) {
  if (trace_recording()) return;  // get_concrete_function in a trace may be given its tensors
  for (const Tensor& t : leaves)
    if (t.impl() && t.impl()->symbolic)
      throw OutOfScopeError(str_cat(
          "function '", core.name(), "' was called with the symbolic tensor ",
          t.impl()->symbolic->origin(), " as an argument, outside the trace that created it. "
          "Symbolic tensors only exist while their function is traced; return the value from "
          "that function and pass the returned tensor instead of keeping the symbolic one (e.g. "
          "in a global or a captured variable)"));
}

// ---- FunctionTypes: equality, hashing, subtypes ---------------------------------------------

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

bool same_types(const std::vector<TraceTypePtr>& a, const std::vector<TraceTypePtr>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!a[i]->equals(*b[i])) return false;
  return true;
}

// ---- binding a call to a FunctionType ------------------------------------------------------

namespace {

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

// ---- the cached path -----------------------------------------------------------------------

namespace {
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
    s.diag->on_call(!trace_recording());
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
    s.diag->on_call(!trace_recording());  // TF's "5 traces within 10 calls" rule counts calls
    if (s.options.max_cached_traces > 0)  // the LRU stamp only matters with a bounded cache
      called.cf->last_used.store(s.diag->calls(), std::memory_order_relaxed);
  }
  return called;
}

void FunctionCore::remember_fast(std::size_t fast_hash, std::vector<TraceTypePtr> call_types,
                                 std::shared_ptr<ConcreteImpl> cf) const {
  State& s = *state_;
  std::unique_lock lock(s.mu);
  if (s.fast.size() >= State::kMaxFastEntries) s.clear_fast();
  record_last_call(s.id, s.fast_epoch.load(std::memory_order_relaxed), call_types, cf);  // the next call may repeat it
  s.fast.emplace(fast_hash, State::FastEntry{std::move(call_types), std::move(cf)});
}

// ---- the general path ----------------------------------------------------------------------

std::shared_ptr<ConcreteImpl> FunctionCore::State::lookup(const std::vector<TraceTypePtr>& types,
                                                          std::size_t h) const {
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
  const uint64_t call_number = s.diag->on_call(is_call && !trace_recording());
  const std::size_t h = hash_types(target);
  if (auto cf = s.lookup(target, h)) {
    cf->last_used.store(s.diag->calls(), std::memory_order_relaxed);
    return cf;
  }
  // No concrete function fits: trace one (function_compile.cpp).
  return trace(std::move(target), h, call_number, body);
}

std::shared_ptr<ConcreteImpl> FunctionCore::find(std::vector<TraceTypePtr> arg_types, const std::size_t* fast_hash) const {
  State& s = *state_;
  s.diag->on_call(!trace_recording());
  std::shared_ptr<ConcreteImpl> cf = s.lookup(arg_types, hash_types(arg_types));
  if (cf && fast_hash) remember_fast(*fast_hash, std::move(arg_types), cf);
  return cf;
}

// ---- the interface the PolymorphicFunction template reaches dispatch through ----------------

CalledConcrete fast_lookup(const FunctionCore& core, std::size_t fast_hash, FastMatch match) {
  return core.fast_lookup(fast_hash, match);
}
CalledConcrete repeat_call(const FunctionCore& core, FastMatch match) { return core.repeat_call(match); }
std::shared_ptr<ConcreteImpl> dispatch_or_trace(FunctionCore& core, std::vector<TraceTypePtr> arg_types,
                                                TraceBody body, const std::size_t* fast_hash, bool is_call) {
  return core.dispatch_or_trace(std::move(arg_types), body, fast_hash, is_call);
}

}  // namespace tg::detail
