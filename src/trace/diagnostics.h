// Retracing diagnostics of one tg::function: why each trace happened, what varied across
// calls, the frequent-retracing warning, the retracing-limit message and the JSON report.
// Everything here runs when a call traces; the cached-call path only bumps a call counter.
#pragma once
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#if defined(__GLIBC__) && __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>  // __libc_single_threaded (glibc 2.32)
#define TG_HAS_SINGLE_THREADED_FLAG 1
#else
#define TG_HAS_SINGLE_THREADED_FLAG 0
#endif

#include "core/sink.h"  // log_message: TG_LOG=retrace lines and warnings
#include "trace/advice.h"
#include "trace/concrete.h"
#include "trace/recorder.h"
#include "tracegraph/function.h"

namespace tg::detail {

/// True when TG_LOG (read once) contains "retrace".
bool retrace_logging_enabled();

/// How many tg::functions have been created over the same C++ callable type so far, counting
/// this one (1 for the first). A lambda re-wrapped in a loop keeps its type, so a growing count
/// is the "function created in a loop" cause.
int register_callable(const std::string& callable_type);

/// Up to kMax distinct values of one argument property, and whether more were seen: what a
/// function records about its calls stays bounded however long it lives (a service).
template <class T>
struct Sample {
  static constexpr std::size_t kMax = 32;
  std::set<T> values;  // the first kMax distinct values seen, in value order
  bool more = false;   // a value outside `values` came after it was full
  void insert(const T& v) {
    if (values.size() < kMax) values.insert(v);
    else if (!more && !values.count(v)) more = true;
  }
  bool varies() const { return values.size() + (more ? 1 : 0) > 1; }
  /// "3", or "more than 32" once the sample is full and another value came.
  std::string count_text() const {
    std::string s = more ? "more than " : "";
    s += std::to_string(values.size());
    return s;
  }
};

class Diagnostics {
 public:
  /// Records kept in history() (the most recent); older ones are counted, not kept.
  static constexpr std::size_t kHistoryRecords = 64;
  /// Argument paths with per-argument statistics; paths first seen after that are counted.
  static constexpr std::size_t kMaxLeafPaths = 256;
  /// Dimensions per tensor argument whose sizes are recorded.
  static constexpr std::size_t kMaxTrackedDims = 16;

  /// `max_traces` and `max_cached_traces` as the function's options give them (0 = none), for
  /// the advice of a bounded-cache service. `language`: what the reasons, the warnings, the
  /// limit message and the report write their code and names in.
  Diagnostics(std::string function_name, std::string callable_type, int instance, int64_t max_traces,
              int64_t max_cached_traces, AdviceLanguage language = AdviceLanguage::kCpp);

  /// What its messages write code and names in.
  AdviceLanguage language() const { return language_; }

  /// Counts a call (the cached path: one relaxed increment). `counted`: a call the frequent-
  /// retracing warning counts, as TF's detector does - one the program makes itself, not
  /// get_concrete_function and not a call made while a trace records on this thread (a nested
  /// function runs inside its caller's graph; the caller's calls are what repeat). Returns the
  /// call's number among the counted calls (from 1), or 0 for another call.
  uint64_t on_call(bool counted) {
    if (counted) return count(calls_);
    count(other_calls_);
    return 0;
  }
  /// Every call so far, counted or not (the LRU stamp of a bounded cache, the report's "calls").
  uint64_t calls() const {
    return calls_.load(std::memory_order_relaxed) + other_calls_.load(std::memory_order_relaxed);
  }

  /// Records what a call that misses the cache looked like (before tracing or failing).
  void observe(const FunctionTypeKey& call);
  /// Why `call` needs a trace, relative to the closest existing (or evicted) trace.
  TraceRecord explain(const FunctionTypeKey& call, const std::vector<std::shared_ptr<ConcreteImpl>>& existing,
                      bool reduce_retracing, int64_t max_cached_traces) const;
  /// Bookkeeping after a successful trace: history, signature, logging and the warning.
  /// `call`: the number on_call gave the call that traced (not the count now: another thread may
  /// call meanwhile); 0 for a trace the warning does not count (see on_call).
  void on_traced(TraceRecord record, const FunctionTypeKey& traced, bool generalised, uint64_t call);
  void on_evicted(const FunctionTypeKey& type, int64_t index);
  /// The argument dims the traced code reads as integers (see StaticDimReads): the suggested
  /// signature and the advice never relax them.
  void note_static_dims(const StaticDimReads& dims);
  /// What a trace record adds when reduce_retracing kept dims the body reads as integers
  /// (`kept`: "dim 0 of 'x' (5)").
  std::string kept_static_dims_note(const std::vector<std::string>& kept) const;
  /// The advice as data: which fixes apply, in which order, and the dead ends.
  Advice advice() const;

  std::vector<TraceRecord> history() const;
  std::optional<std::vector<TensorSpec>> suggested_input_signature() const;
  /// "The function 'f' has been retraced N times. The tracing limit has been reached. ..."
  std::string limit_message(int64_t traces, const FunctionTypeKey& call) const;
  std::string report_json(int64_t trace_count, std::size_t cached) const;
  int64_t evictions() const { return evictions_; }

  /// The sizes of everything kept, for tests that check it stays bounded.
  struct Footprint {
    std::size_t history_records = 0;
    std::size_t leaf_paths = 0;
    std::size_t largest_sample = 0;  // values kept for one property of one argument
    std::size_t evicted_types = 0;
    std::size_t recent_trace_calls = 0;
  };
  Footprint footprint() const;

 private:
  struct LeafStats {
    bool tensor = false;
    Sample<std::string> dtypes;
    Sample<int64_t> ranks;
    std::map<std::size_t, Sample<int64_t>> dims;  // dim index -> sizes seen
    Sample<std::string> shapes;
    Sample<std::string> values;  // literals, objects, custom types
    Sample<std::string> literal_types;  // the literals' type names (LiteralValue::cpp_type)
    std::string kind;
  };
  // Called with mu_ held.
  Advice advise() const;
  /// What the warning shows: the first fix with its reason, then the others' actions.
  std::string quick_fix(const Advice& a) const;
  /// "dim 0 of 'x'" for each dim the code reads as an integer whose size varied across calls.
  std::vector<std::string> varying_static_dims() const;
  std::string varying_summary() const;

  std::string name_;
  std::string callable_type_;
  int instance_;
  int64_t max_traces_;
  int64_t max_cached_traces_;
  AdviceLanguage language_;
  // Adds one to a call count and returns the new count. While the process has one thread, no
  // other can be counting (glibc clears the flag before it starts a second thread), so a plain
  // load and store does, as libstdc++'s shared_ptr counts: the cached call spares a locked add
  // (about 20 cycles on Intel cores).
  static uint64_t count(std::atomic<uint64_t>& n) {
#if TG_HAS_SINGLE_THREADED_FLAG
    if (__libc_single_threaded) {
      const uint64_t v = n.load(std::memory_order_relaxed) + 1;
      n.store(v, std::memory_order_relaxed);
      return v;
    }
#endif
    return n.fetch_add(1, std::memory_order_relaxed) + 1;
  }

  std::atomic<uint64_t> calls_{0};        // counted calls (on_call)
  std::atomic<uint64_t> other_calls_{0};  // the rest: get_concrete_function, calls inside traces
  // Guarded by the function's trace lock (only touched while tracing) and mu_ for readers.
  mutable std::mutex mu_;
  std::deque<TraceRecord> history_;  // the last kHistoryRecords
  int64_t traces_recorded_ = 0;      // every trace, kept in history_ or not
  std::map<std::string, LeafStats> leaves_;  // by argument path, in path order
  int64_t leaf_paths_omitted_ = 0;           // new paths seen after kMaxLeafPaths
  std::vector<std::string> top_level_names_;
  std::vector<TraceTypePtr> signature_;       // running supertype of every traced type
  StaticDimReads static_dims_;
  bool signature_possible_ = true;
  // TF's _FrequentTracingDetector: the counted-call numbers of the recent counted traces, oldest
  // first (TF keeps the calls between them as counts; these numbers give the same counts).
  std::vector<uint64_t> recent_trace_calls_;
  int warnings_ = 0;
  int64_t evictions_ = 0;
  std::vector<std::pair<FunctionTypeKey, int64_t>> evicted_;
};

}  // namespace tg::detail
