// The FunctionCore itself: one tg::function's state (FunctionCore::State, function_state.h) -
// the cache of concrete functions with its LRU eviction, the reduce_retracing generalisation
// over the cached traces, the options and limits checked when the function is made - and what
// reads that state (the trace count, the concrete functions, the trace history and diagnostics,
// the retracing report), with the functions the PolymorphicFunction template reaches them
// through. Finding a call's concrete function is function_dispatch.cpp; making a new one,
// function_compile.cpp; running one, concrete_function.cpp.
#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "core/check.h"
#include "trace/concrete.h"
#include "trace/diagnostics.h"
#include "trace/function_core.h"
#include "trace/function_state.h"
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

void add_eager_context(const FunctionCore& core, Error& e) {
  std::string s = "(in function '";
  s += core.name();
  s += "', run eagerly: tg::config::run_functions_eagerly is on)";
  e.add_context(s);
}

uint64_t next_core_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

namespace {
// Dim d of a trace type's shape; None when it is unknown or the rank is unknown or smaller.
int64_t dim_or_none(const TensorShape& s, std::size_t d) { return s.has_rank() && d < s.dims().size() ? s.dims()[d] : None; }
}  // namespace

void FunctionCore::State::evict_one() {
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

std::vector<TraceTypePtr> FunctionCore::State::generalise(const std::vector<TraceTypePtr>& types,
                                                          std::vector<std::string>& kept) const {
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

TraceTypePtr FunctionCore::State::keep_static_dims(TraceTypePtr sup, const TraceType& call, const std::string& path,
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

FunctionCore::FunctionCore(FunctionOptions options, std::string callable_type, AdviceLanguage language)
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
                                               state_->options.max_cached_traces, language);
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

void FunctionCore::adopt(std::shared_ptr<ConcreteImpl> cf) {
  State& s = *state_;
  std::unique_lock lock(s.mu);
  s.concretes.push_back(cf);
  s.clear_fast();
  s.exact.emplace(cf->input_type.hash, cf.get());
  s.tracing_count.fetch_add(1);
}

// ---- the interface the PolymorphicFunction template reaches the core through -----------------

std::shared_ptr<FunctionCore> make_function_core(FunctionOptions options, std::string callable_type) {
  return std::make_shared<FunctionCore>(std::move(options), std::move(callable_type));
}
const FunctionOptions& options_of(const FunctionCore& core) { return core.options(); }
std::string parameter_name(const FunctionCore& core, std::size_t index) { return core.parameter_name(index); }
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

}  // namespace detail
}  // namespace tg
