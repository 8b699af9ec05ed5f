// Reading a symbolic tensor's shape as C++ integers while tracing: known dims read as numbers,
// unknown ones (None, an unknown rank) raise ValueError instead of reading as -1.
#include "support/test_util.h"
#include "tracegraph/tracegraph.h"

namespace tg {
namespace {

const std::vector<TensorSpec> kNoneByThree{TensorSpec({None, 3}, float32)};

TEST(StaticDims, KnownDimsReadAsIntegersWhileTracing) {
  std::vector<int64_t> seen;
  auto f = function([&](const Tensor& x) {
    const TensorShape s = x.shape();
    seen = {s.rank(), s.dim(1), s.dim(-1)};
    return x * 2.0f;
  }, {.input_signature = kNoneByThree});
  f(zeros({2, 3}));
  EXPECT_EQ(seen, (std::vector<int64_t>{2, 3, 3}));
}

TEST(StaticDims, EveryIntegerReadOfANoneDimRaises) {
  using Read = std::function<void(const Tensor&)>;
  const std::vector<std::pair<const char*, Read>> reads = {
      {"dim()", [](const Tensor& x) { (void)x.shape().dim(0); }},
      {"dim()", [](const Tensor& x) { (void)x.shape().dim(-2); }},
      {"dims()", [](const Tensor& x) { (void)x.shape().dims(); }},
      {"num_elements()", [](const Tensor& x) { (void)x.shape().num_elements(); }},
      {"num_elements()", [](const Tensor& x) { (void)x.num_elements(); }},
  };
  for (const auto& entry : reads) {
    const char* what = entry.first;  // not a structured binding: clang 14 cannot capture one
    const Read& read = entry.second;
    SCOPED_TRACE(what);
    auto f = function([&](const Tensor& x) {
      read(x);
      return x;
    }, {.name = "loop_body", .input_signature = kNoneByThree, .arg_names = {"batch"}});
    EXPECT_THROW_MSG(f(zeros({2, 3})), ValueError, what, "dimension 0", "'batch:0' of function 'loop_body'",
                     "(None, 3)", "tg::shape(tensor)[0]", "tg::for_range", "none_aware()");
  }
}

TEST(StaticDims, AnUnknownRankRaisesOnRank) {
  auto f = function([](const Tensor& x) {
    for (int64_t i = 0; i < x.shape().rank(); ++i) (void)i;  // would loop zero times silently
    return x;
  }, {.input_signature = std::vector<TensorSpec>{TensorSpec(TensorShape::unknown_rank(), float32)}});
  EXPECT_THROW_MSG(f(zeros({2})), ValueError, "rank()", "the rank of the symbolic tensor", "is unknown");
  auto g = function([](const Tensor& x) { return constant(x.rank()); },
                    {.input_signature = std::vector<TensorSpec>{TensorSpec(TensorShape::unknown_rank(), float32)}});
  EXPECT_THROW(g(zeros({2})), ValueError);
}

TEST(StaticDims, TheNoneAwareViewHandsOutNoneOnPurpose) {
  std::vector<int64_t> dims;
  bool known = true;
  auto f = function([&](const Tensor& x) {
    const TensorShape s = x.shape();
    dims = s.none_aware().dims();
    known = s.is_fully_defined();
    EXPECT_EQ(s.as_list(), dims);
    EXPECT_EQ(s.to_string(), "(None, 3)");
    EXPECT_EQ(s.none_aware().num_elements(), -1);
    return x;
  }, {.input_signature = kNoneByThree});
  f(zeros({2, 3}));
  EXPECT_EQ(dims, (std::vector<int64_t>{None, 3}));
  EXPECT_FALSE(known);
}

TEST(StaticDims, SpecsAndEagerShapesKeepNoneAsAValue) {
  const TensorSpec spec({None, 3}, float32);
  EXPECT_EQ(spec.shape.dims(), (std::vector<int64_t>{None, 3}));
  EXPECT_EQ(TensorShape({None}).num_elements(), -1);
  EXPECT_EQ(zeros({2, 3}).shape().dims(), (std::vector<int64_t>{2, 3}));
  // A spec made from a traced tensor's shape keeps its None too.
  std::optional<TensorSpec> made;
  auto f = function([&](const Tensor& x) {
    made = TensorSpec(x.shape(), x.dtype());
    return x;
  }, {.input_signature = kNoneByThree});
  f(zeros({2, 3}));
  ASSERT_TRUE(made.has_value());
  EXPECT_EQ(made->shape.dims(), (std::vector<int64_t>{None, 3}));
}

TEST(StaticDims, ShapesDerivedInsideTheTraceAreCheckedToo) {
  auto f = function([](const Tensor& x) {
    const Tensor y = reduce_sum(x, {1});  // shape (None,)
    return zeros({y.shape().dim(0)});
  }, {.input_signature = kNoneByThree});
  EXPECT_THROW_MSG(f(zeros({2, 3})), ValueError, "dimension 0", "reduce_sum");
}

TEST(StaticDims, NoneDimCodeWorksThroughRunTimeShapes) {
  // The fix the message names: the dim as a tensor.
  auto mean_rows = function([](const Tensor& x) { return reduce_sum(x, {0}) / cast(shape(x)[0], float32); },
                            {.input_signature = kNoneByThree});
  const Tensor out = mean_rows(constant({{1.0f, 2.0f, 3.0f}, {3.0f, 4.0f, 5.0f}}));
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{2.0f, 3.0f, 4.0f}));
}

}  // namespace
}  // namespace tg

namespace tg {
namespace {

// Like torch.compile's size specialisation: a dim the body reads as an integer is part of what
// the trace computes, so reduce_retracing and the suggested signature never relax it.
TEST(StaticDims, ReduceRetracingNeverRelaxesADimTheCodeReadAsAnInteger) {
  auto f = function([](const Tensor& x) {
    Tensor total = zeros({x.shape().dim(1)});
    for (int64_t i = 0; i < x.shape().dim(0); ++i) total = total + x[i];  // unrolled: reads dim 0
    return total;
  }, {.name = "row_sum", .reduce_retracing = true, .arg_names = {"x"}});
  EXPECT_EQ(f(ones({2, 3})).to_vector<float>(), (std::vector<float>{2, 2, 2}));
  EXPECT_EQ(f(ones({5, 3})).to_vector<float>(), (std::vector<float>{5, 5, 5}));
  EXPECT_EQ(f(ones({7, 3})).to_vector<float>(), (std::vector<float>{7, 7, 7}));
  ASSERT_EQ(f.tracing_count(), 3);
  const auto traces = f.concrete_functions();
  EXPECT_EQ(traces[1].function_type().substr(0, 40), "(x: TensorSpec(shape=(5, 3), dtype=tg.fl");
  const auto history = f.trace_history();
  EXPECT_NE(history[1].reason.find("reduce_retracing kept dim 0 of 'x' (5)"), std::string::npos) << history[1].reason;
  EXPECT_NE(history[1].reason.find("tg::shape(x)[i]"), std::string::npos);
  // No signature with a None there could serve these calls: none is suggested, and the advice
  // names the read instead.
  EXPECT_FALSE(f.suggested_input_signature().has_value());
  EXPECT_NE(f.retracing_report().find("read dim 0 of 'x' as a tensor"), std::string::npos);
}

TEST(StaticDims, DimsTheCodeDoesNotReadStillGeneralise) {
  auto f = function([](const Tensor& x) { return zeros({x.shape().dim(0)}) + reduce_sum(x, {1}); },
                    {.reduce_retracing = true, .arg_names = {"x"}});
  f(ones({2, 3}));
  f(ones({2, 4}));  // dim 1 varies and is never read: relaxed to None
  f(ones({2, 9}));  // served by the generalised trace
  EXPECT_EQ(f.tracing_count(), 2);
  EXPECT_NE(f.concrete_functions()[1].function_type().find("shape=(2, None)"), std::string::npos);
  ASSERT_TRUE(f.suggested_input_signature().has_value());
  EXPECT_EQ(f.suggested_input_signature()->at(0).shape.dims(), (std::vector<int64_t>{2, None}));
}

TEST(StaticDims, ARelaxedRankKeepsTheCallsShapeWhereADimWasRead) {
  // (2,) then (3, 4): reduce_retracing would relax to an unknown rank, which the body's
  // dim(0) read could not serve; the call's own shape is traced instead.
  auto f = function([](const Tensor& x) { return x * static_cast<float>(x.shape().dim(0)); },
                    {.reduce_retracing = true, .arg_names = {"x"}});
  EXPECT_EQ(f(ones({2})).to_vector<float>(), (std::vector<float>{2, 2}));
  EXPECT_EQ(f(ones({3, 4})).to_vector<float>()[0], 3.0f);
  EXPECT_EQ(f.tracing_count(), 2);
  EXPECT_NE(f.concrete_functions()[1].function_type().find("shape=(3, 4)"), std::string::npos)
      << f.concrete_functions()[1].function_type();
  EXPECT_NE(f.trace_history()[1].reason.find("kept dim 0 of 'x' (3)"), std::string::npos) << f.trace_history()[1].reason;
}

TEST(StaticDims, NestedArgumentsAreNotRelaxedWhereRead) {
  auto f = function([](const std::vector<Tensor>& xs) {
    Tensor t = xs[0];
    for (int64_t i = 1; i < xs[1].shape().dim(0); ++i) t = t + 1.0f;
    return t;
  }, {.reduce_retracing = true, .arg_names = {"xs"}});
  EXPECT_EQ(f(std::vector<Tensor>{ones({2}), ones({3})}).to_vector<float>(), (std::vector<float>{3, 3}));
  EXPECT_EQ(f(std::vector<Tensor>{ones({2}), ones({5})}).to_vector<float>(), (std::vector<float>{5, 5}));
  EXPECT_EQ(f.tracing_count(), 2);
  EXPECT_EQ(f.concrete_functions()[1].function_type().find("shape=(None"), std::string::npos)
      << f.concrete_functions()[1].function_type();
  EXPECT_NE(f.trace_history()[1].reason.find("kept dim 0 of 'xs[1]' (5)"), std::string::npos)
      << f.trace_history()[1].reason;
}

}  // namespace
}  // namespace tg
