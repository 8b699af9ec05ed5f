// FunctionCore::State: what one tg::function holds - its options, the cache of concrete
// functions and the fast-path table in front of it, the trace lock, limits and diagnostics.
// Private to the files of the function core: function_core.cpp (the cache itself and what
// reads it), function_dispatch.cpp (the concrete function of a call) and function_compile.cpp
// (tracing a new one) work on the State; concrete_function.cpp takes trace_recording() alone.
// Neither the public headers nor function_core.h (which tests and export include) need it.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "ops/op.h"
#include "trace/concrete.h"
#include "trace/diagnostics.h"
#include "trace/function_core.h"
#include "trace/recorder.h"

namespace tg::detail {

/// A number for each FunctionCore, never reused (State::id).
uint64_t next_core_id();

/// tracing_active(), inline for the files of the function core: the cached path asks it on every
/// call (tracing_active() itself is out of line in include/tracegraph/function.h).
inline bool trace_recording() { return current_recorder() != nullptr; }

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
  void evict_one();

  // Parameter i's name from the options alone (the input_signature's spec names aside).
  std::string option_name(std::size_t i) const {
    return i < options.arg_names.size() ? options.arg_names[i] : "arg" + std::to_string(i);
  }
  std::vector<std::string> names_for(std::size_t n) const {
    std::vector<std::string> names;
    for (std::size_t i = 0; i < n; ++i) names.push_back(option_name(i));
    return names;
  }

  // Exact match by hash, else the most specific concrete function the call is a subtype of
  // (function_dispatch.cpp).
  std::shared_ptr<ConcreteImpl> lookup(const std::vector<TraceTypePtr>& types, std::size_t h) const;

  // reduce_retracing: the most specific common supertype of the call with an existing trace,
  // except for dims the body reads as integers (static_dims), which keep the call's size.
  // `kept` receives those, as "dim 0 of 'x' (5)". Caller holds trace_mu.
  std::vector<TraceTypePtr> generalise(const std::vector<TraceTypePtr>& types, std::vector<std::string>& kept) const;

  // `sup` (a supertype of `call`, argument `path`) with the dims the body reads as integers
  // set back to the call's sizes. A tensor argument is rebuilt; for a tensor nested in a
  // container that would need relaxing there, nullptr (no generalisation with this trace).
  TraceTypePtr keep_static_dims(TraceTypePtr sup, const TraceType& call, const std::string& path,
                                std::vector<std::string>& pinned) const;
};

}  // namespace tg::detail
