// A long-running service: a function whose inputs never stop varying, with a bounded cache and
// no trace limit, keeps everything it records bounded (cache, history, statistics, report).
#include <string>

#include "support/json_check.h"
#include "support/test_util.h"
#include "trace/diagnostics.h"
#include "trace/function_core.h"

namespace tg {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Silences the frequent-retracing warnings (a service retraces on purpose) for its lifetime.
class QuietLog {
 public:
  QuietLog() { config::set_log_sink([](const std::string&, void*) {}, nullptr); }
  ~QuietLog() { config::set_log_sink(nullptr); }
};

template <class F>
detail::Diagnostics::Footprint footprint(const PolymorphicFunction<F>& f) {
  return detail::FunctionAccess::core(f).diagnostics().footprint();
}

TEST(Service, ThousandsOfShapesWithABoundedCacheAndNoLimitStayBounded) {
  QuietLog quiet;
  // The documented service setting: a bounded cache and no hard limit.
  auto f = function([](const Tensor& x) { return x * 2.0f; },
                    tg::FunctionOptions{.name = "serve", .arg_names = {"x"}, .max_traces = 0,
                                        .max_cached_traces = 8});
  constexpr int kShapes = 3000;
  detail::Diagnostics::Footprint early;
  std::size_t early_report = 0;
  for (int i = 1; i <= kShapes; ++i) {
    const Tensor y = f(ones({1, int64_t{i}}));
    ASSERT_EQ(y.shape().dim(1), i);
    if (i == 200) {
      early = footprint(f);
      early_report = f.retracing_report().size();
    }
  }
  EXPECT_EQ(f.tracing_count(), kShapes) << "no RetracingLimitError with max_traces = 0";
  EXPECT_EQ(f.concrete_functions().size(), 8u);

  const auto history = f.trace_history();
  ASSERT_EQ(history.size(), detail::Diagnostics::kHistoryRecords);
  EXPECT_EQ(history.front().index, kShapes - 64);
  EXPECT_EQ(history.back().index, kShapes - 1);

  const std::string report = f.retracing_report();
  EXPECT_EQ(testing::json_error(report), "");
  EXPECT_LT(report.size(), 32u * 1024) << "a 3000-trace report stays small";
  EXPECT_LT(report.size(), early_report + early_report / 10) << "and does not grow with the traces";
  EXPECT_TRUE(contains(report, "\"max_traces\": 0")) << report;
  EXPECT_TRUE(contains(report, "\"arguments_truncated\": false")) << report;
  EXPECT_TRUE(contains(report, "\"traces_omitted\": 2936")) << report;
  EXPECT_TRUE(contains(report, "\"evictions\": 2992")) << report;
  EXPECT_TRUE(contains(report, "\"truncated\": true")) << report;
  EXPECT_TRUE(contains(report, "came in more than 32 distinct shapes")) << report;
  EXPECT_FALSE(contains(report, "raising FunctionOptions::max_traces")) << "there is no limit to raise";

  // Memory: every container the function records into has the size it had at trace 200.
  const auto late = footprint(f);
  EXPECT_EQ(late.history_records, early.history_records);
  EXPECT_EQ(late.leaf_paths, early.leaf_paths);
  EXPECT_EQ(late.largest_sample, early.largest_sample);
  EXPECT_LE(late.largest_sample, detail::Sample<int64_t>::kMax);
  EXPECT_EQ(late.evicted_types, early.evicted_types);
  // TF's window: the traces of the last 10 calls, and the one before them.
  EXPECT_LE(late.recent_trace_calls, 11u);
}

TEST(Service, VaryingLiteralsAndListLengthsStayBounded) {
  QuietLog quiet;
  auto f = function([](const std::vector<Tensor>& xs, const std::string&) { return xs[0]; },
                    {.name = "tagged", .arg_names = {"xs", "tag"}, .max_traces = 0});
  const std::string long_tag(10000, 't');
  for (int i = 1; i <= 270; ++i)
    f(std::vector<Tensor>(static_cast<std::size_t>(i), constant(1.0f)), long_tag + std::to_string(i));
  const auto fp = footprint(f);
  EXPECT_EQ(fp.leaf_paths, detail::Diagnostics::kMaxLeafPaths) << "xs[0] ... xs[269] are not all kept";
  EXPECT_LE(fp.largest_sample, detail::Sample<std::string>::kMax);
  const std::string report = f.retracing_report();
  EXPECT_EQ(testing::json_error(report), "");
  EXPECT_LT(report.size(), 256u * 1024) << "long literal values are cut";
  EXPECT_TRUE(contains(report, "\"arguments_truncated\": true")) << report.substr(0, 2000);
  EXPECT_TRUE(contains(report, "'tag' took more than 32 distinct literal values")) << report.substr(0, 2000);
}

TEST(Service, TheLimitErrorOfABoundedCacheSaysHowToRunWithoutTheLimit) {
  QuietLog quiet;
  auto f = function([](const Tensor& x) { return x + 1.0f; },
                    {.name = "serve", .arg_names = {"x"}, .max_traces = 20, .max_cached_traces = 4});
  for (int i = 1; i <= 20; ++i) f(ones({int64_t{i}}));
  try {
    f(ones({21}));
    FAIL() << "expected RetracingLimitError";
  } catch (const RetracingLimitError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("The function 'serve' has been retraced 20 times.", 0), 0u) << m;
    EXPECT_TRUE(contains(m, "The cache is bounded (max_cached_traces = 4; 16 traces were evicted), but "
                            "max_traces counts every trace made, evicted ones included")) << m;
    EXPECT_TRUE(contains(m, "tg::FunctionOptions{.max_traces = 0, .max_cached_traces = 4} (0 = no limit)")) << m;
    EXPECT_TRUE(contains(m, "raising FunctionOptions::max_traces to a larger number")) << m;
    EXPECT_TRUE(contains(m, "{.input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None}, tg::float32)}}"))
        << "the fix that avoids retracing altogether still comes first: " << m;
  }
  // The option the message prints compiles as written and runs past the old limit.
  auto g = function([](const Tensor& x) { return x + 1.0f; },
                    tg::FunctionOptions{.max_traces = 0, .max_cached_traces = 4});
  for (int i = 1; i <= 30; ++i) g(ones({int64_t{i}}));
  EXPECT_EQ(g.tracing_count(), 30);
  EXPECT_THROW_MSG(function([](const Tensor& x) { return x; }, {.max_traces = -1}), ValueError,
                   "max_traces must be >= 0 (0 = no limit)");
}

TEST(Service, WithoutABoundedCacheTheDeadEndSaysWhatNoLimitCosts) {
  QuietLog quiet;
  auto f = function([](const Tensor& x) { return x; }, {.name = "f", .max_traces = 3});
  for (int i = 1; i <= 3; ++i) f(ones({int64_t{i}}));
  EXPECT_THROW_MSG(f(ones({4})), RetracingLimitError,
                   "raising FunctionOptions::max_traces: only delays the error",
                   "without max_cached_traces every trace stays in memory");
}

}  // namespace
}  // namespace tg
