// Retracing diagnostics of one tg::function: why each trace happened, what varied across
// calls, the frequent-retracing warning, the retracing-limit message and the JSON report.
// Everything here runs when a call traces; the cached-call path only bumps a call counter.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "trace/concrete.h"
#include "tracegraph/function.h"

namespace tg::detail {

/// Log output (TG_LOG=retrace lines and warnings) goes through here.
void log_message(const std::string& message);
/// True when TG_LOG (read once) contains "retrace".
bool retrace_logging_enabled();

/// How many tg::functions have been created over the same C++ callable type so far, counting
/// this one (1 for the first). A lambda re-wrapped in a loop keeps its type, so a growing count
/// is the "function created in a loop" cause.
int register_callable(const std::string& callable_type);

class Diagnostics {
 public:
  Diagnostics(std::string function_name, std::string callable_type, int instance);

  /// The cached-call path: one relaxed increment.
  void on_call() { calls_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t calls() const { return calls_.load(std::memory_order_relaxed); }

  /// Records what a call that misses the cache looked like (before tracing or failing).
  void observe(const FunctionTypeKey& call);
  /// Why `call` needs a trace, relative to the closest existing (or evicted) trace.
  TraceRecord explain(const FunctionTypeKey& call, const std::vector<std::shared_ptr<ConcreteImpl>>& existing,
                      bool reduce_retracing, int64_t max_cached_traces) const;
  /// Bookkeeping after a successful trace: history, signature, logging and the warning.
  void on_traced(TraceRecord record, const FunctionTypeKey& traced, bool generalised);
  void on_evicted(const FunctionTypeKey& type, int64_t index);

  std::vector<TraceRecord> history() const;
  std::optional<std::vector<TensorSpec>> suggested_input_signature() const;
  /// "The function 'f' has been retraced N times. The tracing limit has been reached. ..."
  std::string limit_message(int64_t traces, const FunctionTypeKey& call) const;
  std::string report_json(int64_t trace_count, std::size_t cached) const;
  int64_t evictions() const { return evictions_; }

 private:
  struct LeafStats {
    bool tensor = false;
    std::set<std::string> dtypes;
    std::set<int64_t> ranks;
    std::map<std::size_t, std::set<int64_t>> dims;  // dim index -> values seen
    std::set<std::string> shapes;
    std::set<std::string> values;  // literals, objects, custom types
    std::string kind;
  };
  struct Advice {
    std::vector<std::pair<std::string, std::string>> workarounds;  // action, why
    std::vector<std::pair<std::string, std::string>> dead_ends;    // action, why it fails
    std::string root_cause;
    std::string quick_fix;  // the single fix the warning shows
  };
  Advice advise() const;
  std::string varying_summary() const;

  std::string name_;
  std::string callable_type_;
  int instance_;
  std::atomic<uint64_t> calls_{0};
  // Guarded by the function's trace lock (only touched while tracing) and mu_ for readers.
  mutable std::mutex mu_;
  std::vector<TraceRecord> history_;
  std::map<std::string, LeafStats> leaves_;  // by argument path, in path order
  std::vector<std::string> top_level_names_;
  std::vector<TraceTypePtr> signature_;       // running supertype of every traced type
  bool signature_possible_ = true;
  std::vector<uint64_t> recent_trace_calls_;  // call numbers of the last traces
  int warnings_ = 0;
  int64_t evictions_ = 0;
  std::vector<std::pair<FunctionTypeKey, int64_t>> evicted_;
};

}  // namespace tg::detail
