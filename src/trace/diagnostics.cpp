#include "trace/diagnostics.h"

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "core/check.h"
#include "core/json.h"
#include "core/sink.h"
#include "trace/trace_diff.h"

namespace tg {

namespace detail {
namespace {

constexpr std::size_t kWarningTraces = 5;   // TF: 5 traces ...
constexpr uint64_t kWarningWindow = 10;     // ... within the last 10 calls
constexpr int kMaxWarnings = 2;             // at most twice per function
constexpr int kLoopInstances = 5;           // re-created this often: "created in a loop"
constexpr std::size_t kShownValues = 8;     // values listed in messages before "..."

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

template <class T>
std::string list_values(const Sample<T>& sample) {
  std::vector<std::string> out;
  std::size_t i = 0;
  for (const auto& v : sample.values) {
    if (i++ == kShownValues) break;
    if constexpr (std::is_same_v<T, std::string>) out.push_back(v);
    else out.push_back(std::to_string(v));
  }
  if (sample.values.size() > kShownValues || sample.more) out.push_back("...");
  return join(out, ", ");
}

// A value's text as kept in a Sample: a long literal (a string argument) is cut, so that one
// argument cannot make the statistics large; its length and hash keep cut values distinct.
constexpr std::size_t kMaxValueChars = 64;
std::string kept_text(const std::string& text) {
  if (text.size() <= kMaxValueChars) return text;
  char hash[24];
  std::snprintf(hash, sizeof hash, "%016zx", std::hash<std::string>{}(text));
  std::string s = text.substr(0, kMaxValueChars);
  s += "... (";
  s += std::to_string(text.size());
  s += " chars, hash ";
  s += hash;
  s += ")";
  return s;
}

// ---- the advice in the function's language ----------------------------------------------------
//
// Diagnostics::advise decides which fixes apply; these write them. The C++ texts are the code a
// tg::function's user writes (tests/trace/retracing_test.cpp compiles them); the Python texts
// are what a tg.function's user pastes (tests/python/test_function.py runs them).

// The names that differ between the languages, in reasons and messages.
struct Words {
  const char* language;       // "C++": "a C++ integer", "the C++ code"
  const char* function;       // a function object of the frontend
  const char* functions;
  const char* callable;       // what a function wraps
  const char* integer_read;   // a dim read as an integer
  const char* tensor_read;    // a dim read as a tensor
  const char* report;         // the call that gives the JSON report
  const char* max_traces;     // the limit's option, as the code names it
  const char* max_traces_option;  // ... and as prose names it
};
const Words& words(AdviceLanguage language) {
  static const Words cpp{"C++", "tg::function", "tg::functions", "C++ callable", "x.shape().dim(i)",
                         "tg::shape(x)[i]", "retracing_report()", "max_traces", "FunctionOptions::max_traces"};
  static const Words python{"Python", "tg.function", "tg.functions", "Python function", "x.shape[i]",
                            "tg.shape(x)[i]", "f.experimental_retracing_report()", "experimental_max_traces",
                            "experimental_max_traces"};
  return language == AdviceLanguage::kPython ? python : cpp;
}

// Argument paths as prose: bare in C++ ("x, y"), as code in Python ("`x`, `y`").
std::string paths_text(const std::vector<std::string>& paths, AdviceLanguage language) {
  if (language == AdviceLanguage::kCpp) return join(paths, ", ");
  std::vector<std::string> quoted;
  for (const auto& p : paths) quoted.push_back("`" + p + "`");
  return join(quoted, ", ");
}

std::string cpp_signature(const std::vector<TensorSpec>& sig) {
  std::vector<std::string> specs;
  for (const auto& s : sig) specs.push_back("tg::TensorSpec(" + [&] {
    if (!s.shape.has_rank()) return std::string("tg::TensorShape::unknown_rank()");
    std::vector<std::string> d;
    for (int64_t x : s.shape.dims()) d.push_back(x == None ? "tg::None" : std::to_string(x));
    return "{" + join(d, ", ") + "}";
  }() + ", tg::" + (s.dtype == DType::Bool ? std::string("bool_") : s.dtype == DType::String ? std::string("string_") : to_string(s.dtype)) + ")");
  // Printed as the code to write: it compiles as written, with `f` the wrapped callable (a bare
  // `input_signature = {...}` does not compile in the designated-initialiser style of the docs).
  std::string text = "tg::function(f, {.input_signature = std::vector<tg::TensorSpec>{";
  text.append(join(specs, ", ")).append("}})");
  return text;
}

std::string python_signature(const std::vector<TensorSpec>& sig) {
  std::vector<std::string> specs;
  for (const auto& s : sig) {
    std::string shape = "None";
    if (s.shape.has_rank()) {
      std::vector<std::string> d;
      for (int64_t x : s.shape.dims()) d.push_back(x == None ? "None" : std::to_string(x));
      shape = "[" + join(d, ", ") + "]";
    }
    specs.push_back("tg.TensorSpec(shape=" + shape + ", dtype=tg." + to_string(s.dtype) + ")");
  }
  return "@tg.function(input_signature=[" + join(specs, ", ") + "])";
}

// A literal argument's Python type from its literals' type names: equal numbers are one literal
// (1, 1.0 and True are the int 1), so ints and floats together are "number".
std::string python_literal_type(const std::vector<std::string>& types) {
  const std::set<std::string> kinds(types.begin(), types.end());
  if (kinds.size() == 1) return *kinds.begin();
  if (kinds == std::set<std::string>{"int", "float"}) return "number";
  return "value";
}

using Advised = std::pair<std::string, std::string>;  // action, why (or why it fails)

Advised render_fix(const Fix& fix, AdviceLanguage language) {
  const Words& w = words(language);
  const bool py = language == AdviceLanguage::kPython;
  const std::string paths = paths_text(fix.paths, language);
  switch (fix.kind) {
    case Fix::Kind::kReadDimAsTensor:
      return {str_cat("in the function, read ", join(fix.paths, ", "), " as a tensor (", w.tensor_read,
                      ") instead of a ", w.language, " integer (", w.integer_read, ")"),
              str_cat("the ", w.language, " code reads that size as an integer, so every size needs its own "
                      "trace and neither a None dimension nor reduce_retracing can serve them (a None there "
                      "raises ValueError); as a tensor it may vary at run time")};
    case Fix::Kind::kInputSignature:
      return {py ? python_signature(fix.signature) : cpp_signature(fix.signature),
              "one FunctionType with None dimensions covers every call seen so far, so the function traces once"};
    case Fix::Kind::kLiteralAsTensor: {
      if (!py)
        return {"pass " + paths + " as a tg::Tensor (e.g. tg::constant(value)) instead of a C++ literal",
                "a C++ value is part of the trace type, so every new value traces a new graph; a tensor's value is not"};
      std::string values;  // "the Python int `step`", "..., the Python int `i` and the Python str `s`"
      for (std::size_t i = 0; i < fix.paths.size(); ++i)
        values += str_cat(i == 0 ? "" : i + 1 == fix.paths.size() ? " and " : ", ", "the Python ",
                          python_literal_type(fix.literal_types[i]), " `", fix.paths[i], "`");
      return {str_cat("pass ", fix.paths.size() == 1 ? "a tensor" : "tensors", " instead of ", values,
                      " (e.g. tg.constant(", fix.paths[0], "))"),
              "a Python value is part of the trace type, so every new value traces a new graph; a tensor's value is not"};
    }
    case Fix::Kind::kSameObject:
      return {"pass the same object for " + paths +
                  (py ? ", or give its class __eq__ and __hash__ (or a __tf_tracing_type__ method returning a "
                        "tg.types.experimental.TraceType)"
                      : ", or give its type operator== or a custom tracing_type()"),
              "objects are matched by identity, then ==; a new unequal object is a new trace type"};
    case Fix::Kind::kSameVariables:
      return {"pass Variables of one dtype and shape for " + paths +
                  ", and the same aliasing (no Variable passed twice where others were not)",
              "a Variable argument's trace type is its dtype, shape and which arguments are the same Variable; "
              "any Variables that agree on those share one trace"};
    case Fix::Kind::kReduceRetracing:
      return {py ? "@tg.function(reduce_retracing=True)" : "tg::function(f, {.reduce_retracing = true})",
              str_cat("differing dimensions are generalised to None after the first retrace (",
                      py ? "Python values" : "literals", " never generalise)")};
    case Fix::Kind::kPadOrBucket:
      return {"pad or bucket " + paths + " to a few fixed sizes",
              "a handful of shapes means a handful of traces, each fully specialised and fast"};
    case Fix::Kind::kCastToOneDtype:
      return {str_cat(py ? "tg.cast " : "tg::cast ", paths, " to one dtype before the call"),
              "a dtype change always needs a new graph"};
    case Fix::Kind::kCreateOnce:
      return {str_cat("create the ", w.function, " once, outside the loop, and reuse it"),
              str_cat("a new ", w.function, " has an empty trace cache")};
    case Fix::Kind::kNoTraceLimit:
      return {str_cat(py ? "@tg.function(experimental_max_traces=0)"
                         : str_cat("tg::FunctionOptions{.max_traces = 0, .max_cached_traces = ", fix.max_cached_traces, "}"),
                      " (0 = no limit), if new inputs are expected for as long as the program runs"),
              str_cat("the cache is already bounded (", fix.evictions, " trace", fix.evictions == 1 ? "" : "s",
                      " evicted so far) and so are the trace history and this report, but ", w.max_traces,
                      " counts every trace ever made; each new input still pays for a trace")};
  }
  return {};
}

Advised render_dead_end(DeadEnd dead_end, AdviceLanguage language) {
  const Words& w = words(language);
  const bool py = language == AdviceLanguage::kPython;
  switch (dead_end) {
    case DeadEnd::kRaiseBoundedLimit:
      return {str_cat("raising ", w.max_traces_option, " to a larger number"),
              str_cat("only delays the error while the inputs keep producing new trace types; ", w.max_traces,
                      py ? "=0" : " = 0", " is the setting for inputs that never stop varying")};
    case DeadEnd::kRaiseLimit:
      // A Python tg.function has no max_cached_traces: every trace it makes stays in memory.
      return {str_cat("raising ", w.max_traces_option),
              py ? "only delays the error: the inputs keep producing new trace types (experimental_max_traces=0 "
                   "lifts the limit, but every trace then stays in memory)"
                 : "only delays the error: the inputs keep producing new trace types (max_traces = 0 lifts the "
                   "limit, but without max_cached_traces every trace stays in memory)"};
    case DeadEnd::kRunEagerly:
      return {py ? "tg.config.run_functions_eagerly(True)" : "tg::config::run_functions_eagerly(true)",
              "avoids tracing but gives up the graph's speed, which is why the function exists"};
    case DeadEnd::kReduceRetracingAlone:
      return {py ? "reduce_retracing=True alone" : "reduce_retracing alone",
              py ? "Python values never generalise, so varying values still trace every time"
                 : "literals never generalise, so varying C++ values still trace every time"};
  }
  return {};
}

// A record as history keeps it: a call with a huge type (a list of hundreds of tensors, a long
// string literal) must not make 64 records large.
constexpr std::size_t kMaxRecordChars = 1024;
constexpr std::size_t kMaxChangedArguments = 32;
void cut_text(std::string& text) {
  if (text.size() <= kMaxRecordChars) return;
  const std::size_t n = text.size();
  text.resize(kMaxRecordChars);
  text += "... (";
  text += std::to_string(n);
  text += " chars)";
}
TraceRecord kept_record(TraceRecord r) {
  cut_text(r.function_type);
  cut_text(r.reason);
  if (r.changed_arguments.size() > kMaxChangedArguments) {
    r.changed_arguments.resize(kMaxChangedArguments);
    r.changed_arguments.push_back("...");
  }
  return r;
}

}  // namespace

namespace {
std::atomic<bool>& retrace_logging() {
  static std::atomic<bool> enabled{[] {
    const char* v = std::getenv("TG_LOG");
    return v && std::string(v).find("retrace") != std::string::npos;
  }()};
  return enabled;
}
}  // namespace

bool retrace_logging_enabled() { return retrace_logging().load(std::memory_order_relaxed); }

int register_callable(const std::string& callable_type) {
  static std::mutex mu;
  static std::unordered_map<std::string, int> counts;
  std::lock_guard lock(mu);
  return ++counts[callable_type];
}

Diagnostics::Diagnostics(std::string function_name, std::string callable_type, int instance,
                         int64_t max_traces, int64_t max_cached_traces, AdviceLanguage language)
    : name_(std::move(function_name)),
      callable_type_(std::move(callable_type)),
      instance_(instance),
      max_traces_(max_traces),
      max_cached_traces_(max_cached_traces),
      language_(language) {
  const Words& w = words(language_);
  if (instance_ == kLoopInstances)
    log_message(str_cat("tracegraph warning: ", instance_, " ", w.functions, " have been created from the same ",
                        w.callable, " (", callable_type_, "), the latest named '", name_, "'. Each new ", w.function,
                        " starts with an empty trace cache, so creating one per call (e.g. inside a loop) "
                        "retraces every time. Fix: create the function once, outside the loop, and reuse it."));
}

void Diagnostics::observe(const FunctionTypeKey& call) {
  std::lock_guard lock(mu_);
  if (top_level_names_.empty()) top_level_names_ = call.names;
  for (std::size_t i = 0; i < call.params.size(); ++i) {
    for_each_leaf(*call.params[i], call.names[i], [&](const std::string& path, const LeafInfo& leaf) {
      auto it = leaves_.find(path);
      if (it == leaves_.end()) {
        if (leaves_.size() >= kMaxLeafPaths) {  // e.g. lists of ever new lengths
          ++leaf_paths_omitted_;
          return;
        }
        it = leaves_.emplace(path, LeafStats{}).first;
      }
      LeafStats& st = it->second;
      if (leaf.kind == LeafKind::kTensor) {
        st.tensor = true;
        st.kind = "tensor";
        st.dtypes.insert(to_string(leaf.dtype));
        st.shapes.insert(leaf.shape.to_string());
        if (leaf.shape.has_rank()) {
          st.ranks.insert(leaf.shape.rank());
          const std::size_t n = std::min(leaf.shape.dims().size(), kMaxTrackedDims);
          for (std::size_t d = 0; d < n; ++d) st.dims[d].insert(leaf.shape.dims()[d]);
        }
      } else {
        st.kind = leaf.kind == LeafKind::kLiteral ? "literal"
                  : leaf.kind == LeafKind::kObject ? "object"
                  : leaf.kind == LeafKind::kVariable ? "variable" : "custom";
        st.values.insert(kept_text(leaf.text));
        if (leaf.kind == LeafKind::kLiteral) st.literal_types.insert(leaf.type_name);
      }
    });
  }
}

TraceRecord Diagnostics::explain(const FunctionTypeKey& call,
                                 const std::vector<std::shared_ptr<ConcreteImpl>>& existing,
                                 bool reduce_retracing, int64_t max_cached_traces) const {
  TraceRecord rec;
  std::lock_guard lock(mu_);
  rec.index = traces_recorded_;
  // The closest trace: fewest changed leaves; ties go to the latest.
  const FunctionTypeKey* best = nullptr;
  int64_t best_index = -1;
  std::size_t best_score = 0;
  std::vector<TypeChange> best_changes;
  auto consider = [&](const FunctionTypeKey& t, int64_t index) {
    if (t.params.size() != call.params.size()) return;
    std::vector<TypeChange> changes;
    for (std::size_t i = 0; i < call.params.size(); ++i)
      for (auto& c : diff_types(*t.params[i], *call.params[i], call.names[i])) changes.push_back(std::move(c));
    std::size_t score = 0;
    for (const auto& c : changes) score += c.structural ? 3 : 1;
    if (!best || score <= best_score) {
      best = &t;
      best_index = index;
      best_score = score;
      best_changes = std::move(changes);
    }
  };
  for (const auto& c : existing) consider(c->input_type, c->index);
  for (const auto& [t, index] : evicted_) {
    if (call.is_subtype_of(t.params)) {
      rec.reason = "the matching trace #" + std::to_string(index) + " " + t.to_string() +
                   " was evicted from the cache (max_cached_traces = " + std::to_string(max_cached_traces) +
                   "); raise max_cached_traces if this input recurs often";
      return rec;
    }
  }
  if (!best) {
    rec.reason = "first call";
    if (instance_ > 1)
      rec.reason += str_cat("; note: this is ", words(language_).function, " #", instance_, " created from the same ",
                            words(language_).callable, " (", callable_type_,
                            "). A function re-created for each call (e.g. in a loop) retraces every time: "
                            "create it once and reuse it");
    return rec;
  }
  std::vector<std::string> parts;
  for (const auto& c : best_changes) {
    parts.push_back(c.path + ": " + c.what);
    if (std::find(rec.changed_arguments.begin(), rec.changed_arguments.end(), c.path) == rec.changed_arguments.end())
      rec.changed_arguments.push_back(c.path);
  }
  if (parts.empty()) parts.push_back("no single argument differs, but the call fits no trace as a whole");
  rec.reason = join(parts, "; ") + " (closest trace: #" + std::to_string(best_index) + ")";
  if (reduce_retracing) rec.reason += "; reduce_retracing generalises against earlier traces";
  return rec;
}

void Diagnostics::on_traced(TraceRecord record, const FunctionTypeKey& traced, bool generalised, uint64_t call) {
  std::string log_line, warning;
  {
    std::lock_guard lock(mu_);
    record.function_type = traced.to_string();
    if (generalised) record.reason += "; traced as " + traced.to_string();
    // The running supertype of all traced types: an input_signature covering every call.
    if (signature_possible_) {
      for (const auto& p : traced.params) {
        DType d;
        if (!as_tensor_type(*p, &d, nullptr)) signature_possible_ = false;
      }
      if (signature_possible_) {
        if (signature_.empty()) {
          signature_ = traced.params;
        } else if (signature_.size() != traced.params.size()) {
          signature_possible_ = false;
        } else {
          for (std::size_t i = 0; i < signature_.size(); ++i) {
            TraceTypePtr sup = signature_[i]->most_specific_common_supertype({traced.params[i].get()});
            if (!sup) {
              signature_possible_ = false;  // e.g. two dtypes: no one signature covers both
              break;
            }
            signature_[i] = std::move(sup);
          }
        }
      }
    }
    if (call > 0) {
      // TF's rule (polymorphic_function.py, _FrequentTracingDetector): a trace owns the counted
      // calls from it to the next one; the oldest trace is forgotten once the calls owned by
      // the later ones number more than kWarningWindow, and kWarningTraces remembered traces
      // warn. A function whose first counted call did not trace (get_concrete_function traced
      // first) remembers those calls as one entry, as TF's does.
      if (recent_trace_calls_.empty() && call > 1) recent_trace_calls_.push_back(1);
      // Kept in call order: another thread's call may finish tracing first.
      recent_trace_calls_.insert(std::upper_bound(recent_trace_calls_.begin(), recent_trace_calls_.end(), call), call);
      const uint64_t now = recent_trace_calls_.back();
      while (recent_trace_calls_.size() > 1 && now - recent_trace_calls_[1] + 1 > kWarningWindow)
        recent_trace_calls_.erase(recent_trace_calls_.begin());
    }
    if (record.index > 0 && retrace_logging_enabled())
      log_line = "tracegraph: retrace '" + name_ + "' #" + std::to_string(record.index) + ": " + record.reason;
    history_.push_back(kept_record(std::move(record)));
    ++traces_recorded_;
    if (history_.size() > kHistoryRecords) history_.pop_front();
    if (call > 0 && recent_trace_calls_.size() >= kWarningTraces && warnings_ < kMaxWarnings) {
      ++warnings_;
      const uint64_t window = recent_trace_calls_.back() - recent_trace_calls_.front() + 1;
      const bool py = language_ == AdviceLanguage::kPython;
      warning = str_cat("tracegraph warning: ", recent_trace_calls_.size(), " out of the last ", window,
                        " calls to ", py ? "<tg.function " + name_ + ">" : "'" + name_ + "'", " triggered ",
                        py ? "tg.function " : "", "retracing. Tracing is expensive and the cached graphs are not "
                        "being reused. What varied: ", varying_summary(), ". Fix: ", quick_fix(advise()),
                        py ? "." : "");
    }
  }
  if (!log_line.empty()) log_message(log_line);
  if (!warning.empty()) log_message(warning);
}

void Diagnostics::on_evicted(const FunctionTypeKey& type, int64_t index) {
  std::lock_guard lock(mu_);
  ++evictions_;
  evicted_.emplace_back(type, index);
  if (evicted_.size() > 64) evicted_.erase(evicted_.begin());  // a bounded memory of evictions
}

std::vector<TraceRecord> Diagnostics::history() const {
  std::lock_guard lock(mu_);
  return {history_.begin(), history_.end()};
}

Diagnostics::Footprint Diagnostics::footprint() const {
  std::lock_guard lock(mu_);
  Footprint f;
  f.history_records = history_.size();
  f.leaf_paths = leaves_.size();
  f.evicted_types = evicted_.size();
  f.recent_trace_calls = recent_trace_calls_.size();
  for (const auto& [path, st] : leaves_) {
    for (std::size_t n : {st.dtypes.values.size(), st.ranks.values.size(), st.shapes.values.size(),
                          st.values.values.size()})
      f.largest_sample = std::max(f.largest_sample, n);
    f.largest_sample = std::max(f.largest_sample, st.literal_types.values.size());
    for (const auto& [d, sizes] : st.dims) f.largest_sample = std::max(f.largest_sample, sizes.values.size());
  }
  return f;
}

void Diagnostics::note_static_dims(const StaticDimReads& dims) {
  std::lock_guard lock(mu_);
  static_dims_ = dims;
}

std::string Diagnostics::kept_static_dims_note(const std::vector<std::string>& kept) const {
  const Words& w = words(language_);
  return str_cat("; reduce_retracing kept ", join(kept, ", "), " as traced: the function's ", w.language,
                 " code reads those dims as integers (", w.integer_read, "); read them with ", w.tensor_read,
                 " to let them vary");
}

// Called with mu_ held.
std::vector<std::string> Diagnostics::varying_static_dims() const {
  std::vector<std::string> out;
  for (const auto& [path, d] : static_dims_) {
    const auto leaf = leaves_.find(path);
    if (leaf == leaves_.end()) continue;
    const auto dim = leaf->second.dims.find(static_cast<std::size_t>(d));
    if ((dim != leaf->second.dims.end() && dim->second.varies()) || leaf->second.ranks.varies())
      out.push_back("dim " + std::to_string(d) + " of '" + path + "'");
  }
  return out;
}

std::optional<std::vector<TensorSpec>> Diagnostics::suggested_input_signature() const {
  std::lock_guard lock(mu_);
  // A None where the code reads an integer would raise: no one signature serves those calls.
  if (!signature_possible_ || signature_.empty() || !varying_static_dims().empty()) return std::nullopt;
  std::vector<TensorSpec> sig;
  for (const auto& t : signature_) {
    DType d;
    TensorShape s;
    as_tensor_type(*t, &d, &s);
    sig.emplace_back(s, d);
  }
  return sig;
}

// Called with mu_ held.
std::string Diagnostics::varying_summary() const {
  std::vector<std::string> parts;
  for (const auto& [path, st] : leaves_) {
    if (st.tensor) {
      if (st.dtypes.varies()) parts.push_back(path + " dtype (" + list_values(st.dtypes) + ")");
      if (st.ranks.varies()) parts.push_back(path + " rank (" + list_values(st.ranks) + ")");
      for (const auto& [d, values] : st.dims)
        if (values.varies()) parts.push_back(path + " dim " + std::to_string(d) + " (" + list_values(values) + ")");
    } else if (st.values.varies()) {
      parts.push_back(path + " " + st.kind + " (" + list_values(st.values) + ")");
    }
  }
  if (parts.empty())
    return instance_ > 1 ? str_cat("nothing within this function: it is ", words(language_).function, " #",
                                   instance_, " made from the same ", words(language_).callable)
                         : "no argument (see trace_history())";
  return join(parts, "; ");
}

Advice Diagnostics::advice() const {
  std::lock_guard lock(mu_);
  return advise();
}

// Called with mu_ held.
Advice Diagnostics::advise() const {
  Advice a;
  const Words& w = words(language_);
  std::vector<std::string> literal_paths, flag_paths, shape_paths, dtype_paths, object_paths, variable_paths, causes;
  for (const auto& [path, st] : leaves_) {
    if (st.tensor) {
      if (st.dtypes.varies()) {
        dtype_paths.push_back(path);
        causes.push_back("'" + path + "' came with " + st.dtypes.count_text() + " dtypes (" + list_values(st.dtypes) + ")");
      }
      if (st.shapes.varies()) {
        shape_paths.push_back(path);
        std::vector<std::string> dims;
        for (const auto& [d, values] : st.dims)
          if (values.varies()) dims.push_back("dim " + std::to_string(d) + " took " + values.count_text() + " values: " + list_values(values));
        if (st.ranks.varies()) dims.push_back("rank took " + list_values(st.ranks));
        causes.push_back("'" + path + "' came in " + st.shapes.count_text() + " distinct shapes (" + join(dims, "; ") + ")");
      }
    } else if (st.values.varies()) {
      // A literal of two values (a bool `training` flag) costs at most one more trace: when
      // shapes vary too, they are the retraces, and their fixes come first.
      const bool flag = st.kind == "literal" && !st.values.more && st.values.values.size() <= 2;
      (st.kind == "literal" ? (flag ? flag_paths : literal_paths)
                            : st.kind == "variable" ? variable_paths : object_paths).push_back(path);
      causes.push_back("'" + path + "' took " + st.values.count_text() + " distinct " + st.kind +
                       " values (" + list_values(st.values) + ")");
    }
  }
  if (instance_ > 1)
    causes.push_back(str_cat("the function was created ", instance_, " times from the same ", w.callable,
                             ", and each new ", w.function, " traces anew"));
  a.root_cause = causes.empty() ? "no varying argument was recorded" : join(causes, "; ");

  const auto add = [&](Fix::Kind kind, std::vector<std::string> paths = {}) -> Fix& {
    Fix& f = a.fixes.emplace_back();
    f.kind = kind;
    f.paths = std::move(paths);
    return f;
  };
  const std::vector<std::string> read_dims = varying_static_dims();
  if (!read_dims.empty()) add(Fix::Kind::kReadDimAsTensor, read_dims);
  if (signature_possible_ && !signature_.empty() && !shape_paths.empty() && read_dims.empty()) {
    Fix& f = add(Fix::Kind::kInputSignature);
    for (const auto& t : signature_) {
      DType d;
      TensorShape s;
      as_tensor_type(*t, &d, &s);
      f.signature.emplace_back(s, d);
    }
  }
  const auto literal_fix = [&](const std::vector<std::string>& paths) {
    Fix& f = add(Fix::Kind::kLiteralAsTensor, paths);
    for (const auto& p : paths) {
      const auto& types = leaves_.at(p).literal_types.values;
      f.literal_types.emplace_back(types.begin(), types.end());
    }
  };
  if (!literal_paths.empty()) literal_fix(literal_paths);
  if (!flag_paths.empty() && shape_paths.empty()) literal_fix(flag_paths);
  if (!object_paths.empty()) add(Fix::Kind::kSameObject, object_paths);
  if (!variable_paths.empty()) add(Fix::Kind::kSameVariables, variable_paths);
  // reduce_retracing first: one line, and it serves every shape seen and to come.
  if (!shape_paths.empty()) add(Fix::Kind::kReduceRetracing);
  if (!shape_paths.empty()) add(Fix::Kind::kPadOrBucket, shape_paths);
  if (!flag_paths.empty() && !shape_paths.empty()) literal_fix(flag_paths);
  if (!dtype_paths.empty()) add(Fix::Kind::kCastToOneDtype, dtype_paths);
  if (instance_ > 1) add(Fix::Kind::kCreateOnce);
  // A service that bounds its cache on purpose: the limit, not the memory, is what stops it.
  const bool bounded_cache = max_cached_traces_ > 0 && max_traces_ > 0;
  if (bounded_cache) {
    Fix& f = add(Fix::Kind::kNoTraceLimit);
    f.max_cached_traces = max_cached_traces_;
    f.evictions = evictions_;
    a.dead_ends.push_back(DeadEnd::kRaiseBoundedLimit);
  } else if (max_traces_ > 0) {
    a.dead_ends.push_back(DeadEnd::kRaiseLimit);
  }
  a.dead_ends.push_back(DeadEnd::kRunEagerly);
  if (!literal_paths.empty() || (!flag_paths.empty() && shape_paths.empty()))
    a.dead_ends.push_back(DeadEnd::kReduceRetracingAlone);
  return a;
}

std::string Diagnostics::quick_fix(const Advice& a) const {
  if (a.fixes.empty()) return str_cat("see ", words(language_).report, " for the recorded traces");
  const auto [action, why] = render_fix(a.fixes.front(), language_);
  std::string text = action + " (" + why + ")";
  // The others by name, so that a one-line fix (reduce_retracing) is seen when it is not first.
  for (std::size_t i = 1; i < a.fixes.size() && i < 4; ++i)
    text += (i == 1 ? ". Other fixes: " : "; ") + render_fix(a.fixes[i], language_).first;
  return text;
}

std::string Diagnostics::limit_message(int64_t traces, const FunctionTypeKey& call) const {
  std::lock_guard lock(mu_);
  const Advice a = advise();
  const Words& w = words(language_);
  std::ostringstream os;
  os << "The function '" << name_ << "' has been retraced " << traces
     << " times. The tracing limit has been reached. This call would need trace " << traces + 1
     << " for " << call.to_string() << ".";
  if (max_cached_traces_ > 0)
    os << "\nThe cache is bounded (max_cached_traces = " << max_cached_traces_ << "; " << evictions_
       << " traces were evicted), but " << w.max_traces << " counts every trace made, evicted ones included: a "
       << "long-running service whose inputs keep varying sets " << w.max_traces
       << (language_ == AdviceLanguage::kPython ? "=0" : " = 0") << " (no limit).";
  os << "\nRoot cause: " << a.root_cause << ".\nWorkarounds, most effective first:";
  int i = 1;
  for (const Fix& fix : a.fixes) {
    const auto [action, why] = render_fix(fix, language_);
    os << "\n  " << i++ << ". " << action << " - " << why << ".";
  }
  os << "\nDead ends:";
  for (DeadEnd d : a.dead_ends) {
    const auto [action, why] = render_dead_end(d, language_);
    os << "\n  - " << action << ": " << why << ".";
  }
  os << "\nExisting traces keep working; " << w.report << " has the details.";
  return os.str();
}

std::string Diagnostics::report_json(int64_t trace_count, std::size_t cached) const {
  std::lock_guard lock(mu_);
  const Advice a = advise();
  std::ostringstream os;
  os << "{\n  \"schema\": \"tracegraph.retracing_report\",\n  \"version\": 1,\n";
  os << "  \"function\": " << json_string(name_) << ",\n";
  os << "  \"callable_type\": " << json_string(callable_type_) << ",\n";
  os << "  \"instances_of_callable\": " << instance_ << ",\n";
  os << "  \"calls\": " << calls() << ",\n  \"trace_count\": " << trace_count << ",\n";
  os << "  \"cached_traces\": " << cached << ",\n  \"evictions\": " << evictions_ << ",\n";
  os << "  \"max_traces\": " << max_traces_ << ",\n  \"max_cached_traces\": " << max_cached_traces_ << ",\n";
  os << "  \"traces_omitted\": " << traces_recorded_ - static_cast<int64_t>(history_.size()) << ",\n";
  os << "  \"arguments_truncated\": " << (leaf_paths_omitted_ > 0 ? "true" : "false") << ",\n";
  os << "  \"arguments\": [";
  bool first = true;
  for (const auto& [path, st] : leaves_) {
    os << (first ? "\n" : ",\n") << "    {\"path\": " << json_string(path) << ", \"kind\": " << json_string(st.kind);
    first = false;
    if (st.tensor) {
      os << ", \"dtypes\": [";
      bool f2 = true;
      for (const auto& d : st.dtypes.values) os << (f2 ? "" : ", ") << json_string(d), f2 = false;
      os << "], \"ranks\": [";
      f2 = true;
      for (int64_t r : st.ranks.values) os << (f2 ? "" : ", ") << r, f2 = false;
      os << "], \"distinct_shapes\": " << st.shapes.values.size() << ", \"varying_dims\": [";
      f2 = true;
      for (const auto& [d, values] : st.dims) {
        if (!values.varies()) continue;
        os << (f2 ? "" : ", ") << "{\"dim\": " << d << ", \"values\": [";
        bool f3 = true;
        for (int64_t v : values.values) os << (f3 ? "" : ", ") << (v == None ? std::string("null") : std::to_string(v)), f3 = false;
        os << "]}";
        f2 = false;
      }
      os << "]";
    } else {
      os << ", \"distinct_values\": " << st.values.values.size() << ", \"values\": [";
      bool f2 = true;
      for (const auto& v : st.values.values) os << (f2 ? "" : ", ") << json_string(v), f2 = false;
      os << "]";
    }
    bool truncated = st.dtypes.more || st.ranks.more || st.shapes.more || st.values.more;
    for (const auto& [d, values] : st.dims) truncated = truncated || values.more;
    if (truncated) os << ", \"truncated\": true";
    os << "}";
  }
  os << (first ? "" : "\n  ") << "],\n  \"traces\": [";
  first = true;
  for (const auto& r : history_) {
    os << (first ? "\n" : ",\n") << "    {\"index\": " << r.index << ", \"function_type\": " << json_string(r.function_type)
       << ", \"reason\": " << json_string(r.reason) << ", \"changed_arguments\": [";
    for (std::size_t i = 0; i < r.changed_arguments.size(); ++i) os << (i ? ", " : "") << json_string(r.changed_arguments[i]);
    os << "]}";
    first = false;
  }
  os << (first ? "" : "\n  ") << "],\n  \"suggested_input_signature\": ";
  if (signature_possible_ && !signature_.empty()) {
    os << "[";
    for (std::size_t i = 0; i < signature_.size(); ++i) {
      DType d;
      TensorShape s;
      as_tensor_type(*signature_[i], &d, &s);
      os << (i ? ", " : "") << "{\"name\": " << json_string(i < top_level_names_.size() ? top_level_names_[i] : "")
         << ", \"dtype\": " << json_string(to_string(d)) << ", \"shape\": ";
      if (!s.has_rank()) {
        os << "null";
      } else {
        os << "[";
        for (std::size_t k = 0; k < s.dims().size(); ++k)
          os << (k ? ", " : "") << (s.dims()[k] == None ? std::string("null") : std::to_string(s.dims()[k]));
        os << "]";
      }
      os << "}";
    }
    os << "]";
  } else {
    os << "null";
  }
  os << ",\n  \"root_cause\": " << json_string(a.root_cause) << ",\n  \"workarounds\": [";
  for (std::size_t i = 0; i < a.fixes.size(); ++i) {
    const auto [action, why] = render_fix(a.fixes[i], language_);
    os << (i ? ", " : "") << "\n    {\"rank\": " << i + 1 << ", \"action\": " << json_string(action)
       << ", \"why\": " << json_string(why) << "}";
  }
  os << (a.fixes.empty() ? "" : "\n  ") << "],\n  \"dead_ends\": [";
  for (std::size_t i = 0; i < a.dead_ends.size(); ++i) {
    const auto [action, why] = render_dead_end(a.dead_ends[i], language_);
    os << (i ? ", " : "") << "\n    {\"action\": " << json_string(action)
       << ", \"why_it_fails\": " << json_string(why) << "}";
  }
  os << (a.dead_ends.empty() ? "" : "\n  ") << "]\n}\n";
  return os.str();
}

}  // namespace detail

namespace config {
void log_retraces(bool enabled) { detail::retrace_logging().store(enabled); }
void set_log_sink(void (*sink)(const std::string&, void*), void* user) { detail::log_sink().set(sink, user); }
}  // namespace config

}  // namespace tg
