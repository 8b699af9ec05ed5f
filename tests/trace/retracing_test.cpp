// Retracing that explains itself: one test per cause, the warning rule, the limit, the report.
#include <functional>
#include <map>

#include "support/json_check.h"
#include "support/test_util.h"

namespace tg {
namespace {

// Captures diagnostics for the lifetime of the object.
class LogCapture {
 public:
  LogCapture() {
    config::set_log_sink([](const std::string& m, void* self) {
      static_cast<LogCapture*>(self)->lines_.push_back(m);
    }, this);
  }
  ~LogCapture() {
    config::set_log_sink(nullptr);
    config::log_retraces(false);
  }
  std::vector<std::string> warnings() const {
    std::vector<std::string> w;
    for (const auto& l : lines_)
      if (l.find("tracegraph warning") == 0) w.push_back(l);
    return w;
  }
  const std::vector<std::string>& lines() const { return lines_; }

 private:
  std::vector<std::string> lines_;
};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// ---- the fixes tracegraph prints compile as written ----

// Compiles its argument (with `f` the callable) and gives its text as the preprocessor spells it:
// the same characters the fix must print, so a printed fix that drifts from code that compiles
// fails the comparison.
#define TG_COMPILED_FIX(...) std::pair{[&] { return __VA_ARGS__; }, std::string(#__VA_ARGS__)}

// The printed fixes of `step` after it traced for `inputs`: warning, ERTL message and report.
struct PrintedFixes {
  std::string warning, limit_message, report;
};
template <class F, class... Args>
PrintedFixes printed_fixes(F body, const std::vector<std::tuple<Args...>>& inputs) {
  LogCapture log;
  auto step = function(body, {.name = "step", .max_traces = static_cast<int64_t>(inputs.size()) - 1});
  PrintedFixes p;
  for (const auto& in : inputs) {
    try {
      std::apply(step, in);
    } catch (const RetracingLimitError& e) {
      p.limit_message = e.what();
    }
  }
  if (!log.warnings().empty()) p.warning = log.warnings()[0];
  p.report = step.retracing_report();
  return p;
}

TEST(PrintedFixes, TheSuggestedSignatureCompilesAsPrinted) {
  const auto body = [](const Tensor& x) { return reduce_sum(x, {1}); };
  std::vector<std::tuple<Tensor>> inputs;
  for (int64_t b : {1, 2, 3, 4, 5, 6, 7}) inputs.emplace_back(ones({b, 4}));
  const PrintedFixes p = printed_fixes(body, inputs);

  const auto f = body;
  auto [make, text] = TG_COMPILED_FIX(tg::function(f, {.input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None, 4}, tg::float32)}}));
  EXPECT_TRUE(contains(p.warning, "Fix: " + text + " (")) << p.warning << "\nexpected: " << text;
  EXPECT_TRUE(contains(p.limit_message, "1. " + text + " - ")) << p.limit_message;
  EXPECT_TRUE(contains(p.report, "\"action\": \"" + text + "\"")) << p.report;
  // and the compiled fix does what it says: one trace for every batch size
  auto fixed = make();
  for (int64_t b : {1, 5, 9}) fixed(ones({b, 4}));
  EXPECT_EQ(fixed.tracing_count(), 1);
}

TEST(PrintedFixes, SignaturesOfSeveralArgumentsScalarsAndUnknownRanksCompileAsPrinted) {
  const auto body = [](const Tensor& x, const Tensor& s, const Tensor& m) {
    return reduce_sum(x) + s + cast(reduce_sum(cast(m, int32)), float64);
  };
  std::vector<std::tuple<Tensor, Tensor, Tensor>> inputs;
  const std::vector<TensorShape> shapes = {{2}, {2, 3}, {1, 1, 1}, {4}, {5, 2}, {3, 3, 3}};
  for (const auto& shape : shapes)
    inputs.emplace_back(ones(shape, float64), constant(1.0, float64), ones({shape.dim(0)}, bool_));
  const PrintedFixes p = printed_fixes(body, inputs);

  const auto f = body;
  auto [make, text] = TG_COMPILED_FIX(tg::function(f, {.input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec(tg::TensorShape::unknown_rank(), tg::float64), tg::TensorSpec({}, tg::float64), tg::TensorSpec({tg::None}, tg::bool_)}}));
  EXPECT_TRUE(contains(p.warning, "Fix: " + text + " (")) << p.warning << "\nexpected: " << text;
  EXPECT_TRUE(contains(p.limit_message, "1. " + text + " - ")) << p.limit_message;
  EXPECT_TRUE(contains(p.report, "\"action\": \"" + text + "\"")) << p.report;
  auto fixed = make();
  for (const auto& shape : shapes) fixed(ones(shape, float64), constant(2.0, float64), ones({shape.dim(0)}, bool_));
  EXPECT_EQ(fixed.tracing_count(), 1);
}

TEST(PrintedFixes, ReduceRetracingCompilesAsPrinted) {
  const auto body = [](const Tensor& x) { return x * 2.0f; };
  std::vector<std::tuple<Tensor>> inputs;
  for (int64_t n : {1, 2, 3, 4, 5, 6}) inputs.emplace_back(ones({n}));
  const PrintedFixes p = printed_fixes(body, inputs);

  const auto f = body;
  auto [make, text] = TG_COMPILED_FIX(tg::function(f, {.reduce_retracing = true}));
  EXPECT_TRUE(contains(p.limit_message, ". " + text + " - ")) << p.limit_message;
  EXPECT_TRUE(contains(p.report, "\"action\": \"" + text + "\"")) << p.report;
  auto fixed = make();
  for (int64_t n : {1, 2, 3, 4}) fixed(ones({n}));
  EXPECT_EQ(fixed.tracing_count(), 2);  // the second trace generalises dim 0 to None
}

TEST(Retracing, TheWarningCountsTheProgramsCallsNotTheRecursiveOnes) {
  // A recursive body calls its function again while its own trace records: as in TF, whose
  // detector counts only calls made eagerly, those calls and their traces are not counted - the
  // program made one call. Its own calls are.
  LogCapture log;
  std::function<Tensor(const Tensor&, int)> recurse;
  auto count_down = function([&](const Tensor& x, int n) { return n == 0 ? x : recurse(x, n - 1) + 1; },
                             {.name = "count_down"});
  recurse = [&](const Tensor& x, int n) { return count_down(x, n); };
  EXPECT_EQ(count_down(constant(0), 4).item<int32_t>(), 4);
  EXPECT_EQ(count_down.tracing_count(), 5);
  EXPECT_TRUE(log.warnings().empty());
  for (int n = 5; n <= 8; ++n) EXPECT_EQ(count_down(constant(0), n).item<int32_t>(), n);  // one new trace each
  ASSERT_EQ(log.warnings().size(), 1u);
  EXPECT_TRUE(contains(log.warnings()[0], "5 out of the last 5 calls to 'count_down' triggered retracing"))
      << log.warnings()[0];
}

TEST(Retracing, BatchSizeVaryingNamesTheDimAndSuggestsASignature) {
  LogCapture log;
  auto step = function([](const Tensor& x) { return reduce_sum(x, {1}); }, {.name = "step", .arg_names = {"x"}});
  for (int64_t b : {3, 5, 7, 9}) step(ones({b, 4}));
  EXPECT_TRUE(log.warnings().empty()) << "4 traces must not warn yet";
  step(ones({11, 4}));  // the 5th trace within 10 calls: TF's rule
  ASSERT_EQ(log.warnings().size(), 1u);
  const std::string w = log.warnings()[0];
  EXPECT_TRUE(contains(w, "5 out of the last 5 calls to 'step' triggered retracing")) << w;
  EXPECT_TRUE(contains(w, "x dim 0 (3, 5, 7, 9, 11)")) << w;
  EXPECT_TRUE(contains(w, "tg::function(f, {.input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None, 4}, tg::float32)}})")) << w;

  auto history = step.trace_history();
  ASSERT_EQ(history.size(), 5u);
  EXPECT_EQ(history[0].reason, "first call");
  EXPECT_EQ(history[0].index, 0);
  EXPECT_EQ(history[1].reason, "x: shape (3, 4) -> (5, 4), dim 0: 3 -> 5 (closest trace: #0)");
  EXPECT_EQ(history[1].changed_arguments, std::vector<std::string>{"x"});
  EXPECT_EQ(history[1].function_type, "(x: TensorSpec(shape=(5, 4), dtype=tg.float32, name=None))");

  auto sig = step.suggested_input_signature();
  ASSERT_TRUE(sig.has_value());
  ASSERT_EQ(sig->size(), 1u);
  EXPECT_EQ((*sig)[0].to_string(), "TensorSpec(shape=(None, 4), dtype=tg.float32, name=None)");
  // The suggestion really covers every call: a function built with it traces once.
  auto fixed = function([](const Tensor& x) { return reduce_sum(x, {1}); }, {.input_signature = sig});
  for (int64_t b : {3, 5, 7, 9, 11}) fixed(ones({b, 4}));
  EXPECT_EQ(fixed.tracing_count(), 1);
}

TEST(Retracing, SequenceLengthVaryingInDimOne) {
  auto f = function([](const Tensor& tokens) { return tokens * 2; }, {.arg_names = {"tokens"}});
  f(zeros({8, 10}, int32));
  f(zeros({8, 12}, int32));
  auto h = f.trace_history();
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[1].reason, "tokens: shape (8, 10) -> (8, 12), dim 1: 10 -> 12 (closest trace: #0)");
  EXPECT_EQ((*f.suggested_input_signature())[0].to_string(), "TensorSpec(shape=(8, None), dtype=tg.int32, name=None)");
}

TEST(Retracing, DtypeChangeHasNoCoveringSignature) {
  auto f = function([](const Tensor& x) { return x + x; }, {.arg_names = {"x"}});
  f(constant({1, 2}));
  f(constant({1.0f, 2.0f}));
  auto h = f.trace_history();
  EXPECT_EQ(h[1].reason, "x: dtype int32 -> float32 (closest trace: #0)");
  EXPECT_FALSE(f.suggested_input_signature().has_value()) << "no one dtype covers both";
  EXPECT_TRUE(contains(f.retracing_report(), "tg::cast x to one dtype"));
}

TEST(Retracing, RankChange) {
  auto f = function([](const Tensor& x) { return x + 1; }, {.arg_names = {"x"}});
  f(ones({3}));
  f(ones({3, 1}));
  EXPECT_EQ(f.trace_history()[1].reason, "x: rank 1 -> 2 (shape (3,) -> (3, 1)) (closest trace: #0)");
  EXPECT_EQ((*f.suggested_input_signature())[0].to_string(), "TensorSpec(shape=<unknown>, dtype=tg.float32, name=None)");
}

TEST(Retracing, LiteralStepCounterSuggestsATensor) {
  LogCapture log;
  auto train_step = function([](const Tensor& w, int step) { return w * static_cast<float>(step); },
                             {.name = "train_step", .arg_names = {"w", "step"}});
  for (int step = 0; step < 5; ++step) train_step(ones({2}), step);
  auto h = train_step.trace_history();
  EXPECT_EQ(h[1].reason, "step: literal value 0 -> 1 (closest trace: #0)");
  EXPECT_EQ(h[4].changed_arguments, std::vector<std::string>{"step"});
  EXPECT_FALSE(train_step.suggested_input_signature().has_value());
  ASSERT_EQ(log.warnings().size(), 1u);
  EXPECT_TRUE(contains(log.warnings()[0], "step literal (0, 1, 2, 3, 4)")) << log.warnings()[0];
  EXPECT_TRUE(contains(log.warnings()[0], "Fix: pass step as a tg::Tensor")) << log.warnings()[0];
}

// A bool `training` literal costs at most one more trace; the varying batch is what retraces.
// The warning leads with the one-line fix that serves every batch, and names the others.
TEST(Retracing, ABoolFlagBesideAVaryingBatchLeadsWithReduceRetracing) {
  LogCapture log;
  auto train_step = function([](const Tensor& x, bool training) { return training ? x * 2.0f : x; },
                             {.name = "train_step", .arg_names = {"x", "training"}});
  for (int i = 1; i <= 6; ++i) train_step(ones({i, 3}), i % 2 == 0);
  ASSERT_GE(log.warnings().size(), 1u);
  const std::string w = log.warnings()[0];
  EXPECT_TRUE(contains(w, "Fix: tg::function(f, {.reduce_retracing = true}) (")) << w;
  EXPECT_TRUE(contains(w, "Other fixes: pad or bucket x to a few fixed sizes; pass training as a tg::Tensor")) << w;
  // A batch alone: reduce_retracing is in the warning too, after the input_signature.
  LogCapture log2;
  auto step = function([](const Tensor& x) { return x * 2.0f; }, {.name = "step", .arg_names = {"x"}});
  for (int i = 1; i <= 6; ++i) step(ones({i, 3}));
  ASSERT_GE(log2.warnings().size(), 1u);
  EXPECT_TRUE(contains(log2.warnings()[0], "Fix: tg::function(f, {.input_signature = ")) << log2.warnings()[0];
  EXPECT_TRUE(contains(log2.warnings()[0], "Other fixes: tg::function(f, {.reduce_retracing = true})"))
      << log2.warnings()[0];
}

TEST(Retracing, ListLengthAndMapKeys) {
  auto f = function([](const std::vector<Tensor>& batch) { return batch[0]; }, {.arg_names = {"batch"}});
  f(std::vector<Tensor>{constant(1), constant(2)});
  f(std::vector<Tensor>{constant(1), constant(2), constant(3)});
  f(std::vector<Tensor>{constant(1), constant(2.0f)});
  auto h = f.trace_history();
  EXPECT_EQ(h[1].reason, "batch: length 2 -> 3 (closest trace: #0)");
  EXPECT_EQ(h[2].reason, "batch[1]: dtype int32 -> float32 (closest trace: #0)");
  EXPECT_EQ(h[2].changed_arguments, std::vector<std::string>{"batch[1]"});

  using Config = std::map<std::string, Tensor>;
  auto g = function([](const Config& config) { return config.at("lr"); }, {.arg_names = {"config"}});
  g(Config{{"lr", constant(0.1f)}});
  g(Config{{"lr", constant(0.1f)}, {"momentum", constant(0.9f)}});
  g(Config{{"lr", constant(1)}, {"momentum", constant(0.9f)}});
  auto hg = g.trace_history();
  EXPECT_EQ(hg[1].reason, "config: keys {'lr'} -> {'lr', 'momentum'} (closest trace: #0)");
  EXPECT_EQ(hg[2].reason, "config['lr']: dtype float32 -> int32 (closest trace: #1)");
  EXPECT_EQ(hg[2].changed_arguments, std::vector<std::string>{"config['lr']"});
}

struct Model {
  float scale = 2.0f;
};

TEST(Retracing, NewSharedPtrObjectEachCall) {
  LogCapture log;
  auto f = function([](const Tensor& x, std::shared_ptr<Model> m) { return x * m->scale; },
                    {.name = "apply", .arg_names = {"x", "model"}});
  for (int i = 0; i < 5; ++i) f(constant(1.0f), std::make_shared<Model>());
  auto h = f.trace_history();
  ASSERT_EQ(h.size(), 5u);
  EXPECT_TRUE(contains(h[1].reason, "model: a different object")) << h[1].reason;
  EXPECT_TRUE(contains(h[1].reason, "was deleted")) << h[1].reason;
  ASSERT_EQ(log.warnings().size(), 1u);
  EXPECT_TRUE(contains(log.warnings()[0], "pass the same object for model")) << log.warnings()[0];
}

TEST(Retracing, FunctionRecreatedInALoop) {
  LogCapture log;
  std::vector<TraceRecord> firsts;
  for (int i = 0; i < 5; ++i) {
    auto f = function([](const Tensor& x) { return x + 1; }, {.name = "in_loop"});
    f(constant(1));
    firsts.push_back(f.trace_history()[0]);
  }
  EXPECT_EQ(firsts[0].reason, "first call");
  EXPECT_TRUE(contains(firsts[4].reason, "this is tg::function #5 created from the same C++ callable")) << firsts[4].reason;
  EXPECT_TRUE(contains(firsts[4].reason, "create it once and reuse it"));
  ASSERT_EQ(log.warnings().size(), 1u);
  EXPECT_TRUE(contains(log.warnings()[0], "5 tg::functions have been created from the same C++ callable")) << log.warnings()[0];
  EXPECT_TRUE(contains(log.warnings()[0], "create the function once"));
}

class ShapeKindType : public TraceType {
 public:
  explicit ShapeKindType(std::string k) : k_(std::move(k)) {}
  bool is_subtype_of(const TraceType& o) const override { return equals(o); }
  TraceTypePtr most_specific_common_supertype(const std::vector<const TraceType*>&) const override { return nullptr; }
  bool equals(const TraceType& o) const override {
    auto* t = dynamic_cast<const ShapeKindType*>(&o);
    return t && t->k_ == k_;
  }
  std::size_t hash() const override { return std::hash<std::string>{}(k_); }
  std::string to_string() const override { return "Fruit[" + k_ + "]"; }

 private:
  std::string k_;
};
struct Fruit {
  std::string kind;
  TraceTypePtr tracing_type() const { return std::make_shared<ShapeKindType>(kind); }
};

TEST(Retracing, CustomTraceTypeMismatch) {
  auto f = function([](const Fruit&, const Tensor& x) { return x; }, {.arg_names = {"fruit", "x"}});
  f(Fruit{"apple"}, constant(1));
  f(Fruit{"mango"}, constant(1));
  EXPECT_EQ(f.trace_history()[1].reason, "fruit: custom trace type Fruit[apple] -> Fruit[mango] (closest trace: #0)");
}

TEST(Retracing, WarningRuleFollowsTensorFlow) {
  LogCapture log;
  auto f = function([](const Tensor& x) { return x; }, {.name = "spread"});
  // Five traces spread over more than 10 calls: no warning.
  for (int64_t n = 1; n <= 5; ++n) {
    f(ones({n}));
    for (int k = 0; k < 3; ++k) f(ones({1}));
  }
  EXPECT_TRUE(log.warnings().empty());
  // Bursts of retracing: warned, but at most twice per function.
  for (int64_t n = 10; n < 40; ++n) f(ones({n}));
  EXPECT_EQ(log.warnings().size(), 2u);
}

TEST(Retracing, LogsOneLinePerRetraceWhenAsked) {
  LogCapture log;
  config::log_retraces(true);
  auto f = function([](const Tensor& x) { return x; }, {.name = "logged", .arg_names = {"x"}});
  f(ones({2}));
  f(ones({2}));
  f(ones({3}));
  ASSERT_EQ(log.lines().size(), 1u);
  EXPECT_EQ(log.lines()[0], "tracegraph: retrace 'logged' #1: x: shape (2,) -> (3,), dim 0: 2 -> 3 (closest trace: #0)");
}

TEST(Retracing, LimitErrorExplainsRootCauseWorkaroundsAndDeadEnds) {
  LogCapture log;
  auto f = function([](const Tensor& x, int k) { return x * k; },
                    {.name = "train_step", .arg_names = {"x", "k"}, .max_traces = 6});
  for (int i = 0; i < 3; ++i) f(ones({int64_t{i} + 1}), 0);
  for (int k = 1; k < 4; ++k) f(ones({1}), k);
  try {
    f(ones({9}), 7);
    FAIL() << "expected RetracingLimitError";
  } catch (const RetracingLimitError& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.code(), "ERTL");
    EXPECT_EQ(m.rfind("The function 'train_step' has been retraced 6 times. The tracing limit has been reached.", 0), 0u) << m;
    EXPECT_TRUE(contains(m, "Root cause: 'k' took 5 distinct literal values (0, 1, 2, 3, 7)")) << m;
    EXPECT_TRUE(contains(m, "'x' came in 4 distinct shapes (dim 0 took 4 values: 1, 2, 3, 9)")) << m;
    EXPECT_TRUE(contains(m, "1. pass k as a tg::Tensor")) << m;
    EXPECT_TRUE(contains(m, "pad or bucket x to a few fixed sizes")) << m;
    EXPECT_TRUE(contains(m, "tg::function(f, {.reduce_retracing = true})")) << m;
    EXPECT_TRUE(contains(m, "Dead ends:")) << m;
    EXPECT_TRUE(contains(m, "raising FunctionOptions::max_traces: only delays the error")) << m;
    EXPECT_TRUE(contains(m, "run_functions_eagerly(true): avoids tracing but gives up the graph's speed")) << m;
    EXPECT_TRUE(contains(m, "reduce_retracing alone: literals never generalise")) << m;
  }
  EXPECT_EQ(f(ones({2}), 0).to_vector<float>(), (std::vector<float>{0.0f, 0.0f})) << "existing traces keep working";
  EXPECT_EQ(f.tracing_count(), 6);
}

TEST(Retracing, BoundedCacheEvictsLeastRecentlyUsed) {
  auto f = function([](const Tensor& x) { return x * 2; }, {.arg_names = {"x"}, .max_cached_traces = 2});
  f(ones({1}));
  f(ones({2}));
  f(ones({1}));  // (1,) is now the most recently used
  f(ones({3}));  // evicts (2,)
  EXPECT_EQ(f.concrete_functions().size(), 2u);
  f(ones({1}));
  EXPECT_EQ(f.tracing_count(), 3);
  f(ones({2}));  // must trace again
  EXPECT_EQ(f.tracing_count(), 4);
  auto h = f.trace_history();
  EXPECT_TRUE(contains(h.back().reason, "the matching trace #1 (x: TensorSpec(shape=(2,), dtype=tg.float32, name=None)) was evicted")) << h.back().reason;
  const std::string report = f.retracing_report();
  EXPECT_TRUE(contains(report, "\"evictions\": 2")) << report;
  EXPECT_TRUE(contains(report, "\"cached_traces\": 2")) << report;
  EXPECT_THROW_MSG(function([](const Tensor& x) { return x; }, {.max_cached_traces = -1}), ValueError, "max_cached_traces");
}

TEST(Retracing, ReportIsValidJsonWithTheSameInformationAsTheError) {
  auto f = function([](const Tensor& x, int k) { return x * k; }, {.name = "r\"eport", .arg_names = {"x", "k"}});
  f(ones({2, 3}), 1);
  f(ones({4, 3}), 1);
  f(ones({4, 3}), 2);
  const std::string report = f.retracing_report();
  EXPECT_EQ(testing::json_error(report), "") << report;
  for (const char* key : {"\"schema\": \"tracegraph.retracing_report\"", "\"version\": 1", "\"function\": \"r\\\"eport\"",
                          "\"trace_count\": 3", "\"calls\": 3", "\"path\": \"x\"", "{\"dim\": 0, \"values\": [2, 4]}",
                          "\"path\": \"k\", \"kind\": \"literal\", \"distinct_values\": 2, \"values\": [\"1\", \"2\"]",
                          "\"suggested_input_signature\": null", "\"workarounds\": [", "\"dead_ends\": [",
                          "\"reason\": \"first call\""})
    EXPECT_TRUE(contains(report, key)) << key << "\n" << report;
  auto g = function([](const Tensor& x) { return x; }, {.arg_names = {"x"}});
  g(ones({2}));
  g(ones({3}));
  const std::string rg = g.retracing_report();
  EXPECT_EQ(testing::json_error(rg), "") << rg;
  EXPECT_TRUE(contains(rg, "\"suggested_input_signature\": [{\"name\": \"x\", \"dtype\": \"float32\", \"shape\": [null]}]")) << rg;
  EXPECT_FALSE(testing::json_error("{\"a\": [1, 2,]}").empty()) << "the validator itself rejects bad JSON";
}

TEST(Retracing, ReduceRetracingRecordsTheGeneralisation) {
  auto f = function([](const Tensor& x) { return x; }, {.reduce_retracing = true, .arg_names = {"x"}});
  f(ones({3}));
  f(ones({5}));
  auto h = f.trace_history();
  EXPECT_TRUE(contains(h[1].reason, "x: shape (3,) -> (5,), dim 0: 3 -> 5")) << h[1].reason;
  EXPECT_TRUE(contains(h[1].reason, "traced as (x: TensorSpec(shape=(None,), dtype=tg.float32, name=None))")) << h[1].reason;
}

}  // namespace
}  // namespace tg
