// Tracing footguns: behaviour of tg::function that surprises users, one test each (after
// tinygrad's test/test_jit_footguns.py).
//
// Every test asserts what tracegraph does TODAY, so that a change of behaviour shows up here.
// Its comment says what is surprising and what to do instead. Tests named `Today...` pin a known
// bug or a gap to TensorFlow: the comment says what TF does, and the fix is expected to flip the
// test (update it then, and its line in the "Tracing footguns" section of docs/user-guide.md).
//
// Most of these are inherent to tracing (the C++ body runs once per trace, not once per call)
// and are also in the "Limitations" and "Known Issues" sections of TF's tf.function guide.
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "support/test_util.h"

namespace tg {
namespace {

using testing::PrintCapture;

// Redirects std::cout for its lifetime (restored even when an assertion fails).
class CoutCapture {
 public:
  CoutCapture() : old_(std::cout.rdbuf(text_.rdbuf())) {}
  ~CoutCapture() { std::cout.rdbuf(old_); }
  CoutCapture(const CoutCapture&) = delete;
  CoutCapture& operator=(const CoutCapture&) = delete;
  std::string text() const { return text_.str(); }

 private:
  std::ostringstream text_;
  std::streambuf* old_;
};

// run_functions_eagerly is process-global: a failing test must not leave it on for the others.
class EagerMode {
 public:
  EagerMode() { config::run_functions_eagerly(true); }
  ~EagerMode() { config::run_functions_eagerly(false); }
  EagerMode(const EagerMode&) = delete;
  EagerMode& operator=(const EagerMode&) = delete;
};

// Collects tracegraph's diagnostics (retrace warnings) instead of writing them to stderr.
class LogCapture {
 public:
  LogCapture() {
    config::set_log_sink([](const std::string& m, void* self) {
      static_cast<LogCapture*>(self)->text_ += m + "\n";
    }, this);
  }
  ~LogCapture() { config::set_log_sink(nullptr); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// ---- The body is C++ that runs while tracing ------------------------------------------------

TEST(Footguns, CppSideEffectsRunOnlyWhileTracing) {
  // Surprise: a counter, a push_back and std::cout in the body run once (at the trace), not at
  // every call; std::cout even shows the symbolic placeholder instead of the value.
  // Instead: tg::print and Variable updates are graph ops and run at every call.
  PrintCapture printed;
  CoutCapture cout;
  int calls = 0;
  std::vector<int> seen;
  auto f = function([&](const Tensor& x) {
    ++calls;
    seen.push_back(calls);
    std::cout << "cout: " << x << "\n";
    print("print:", x);
    return x + 1;
  }, {.arg_names = {"x"}});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(f(constant(i)).item<int32_t>(), i + 1);
  EXPECT_EQ(calls, 1);  // would be 3 without tg::function
  EXPECT_EQ(seen, std::vector<int>{1});
  EXPECT_EQ(cout.text(), "cout: Tensor(\"x:0\", shape=(), dtype=int32)\n");
  EXPECT_EQ(printed.take(), "print: 0\nprint: 1\nprint: 2\n");
}

TEST(Footguns, PrintRunsAfterAllCppCodeOfTheFirstCall) {
  // Surprise: on the call that traces, every line of C++ output comes first (the whole body runs
  // to build the graph), and tg::print only afterwards, when the graph runs; later calls show
  // only tg::print. Eagerly the lines interleave in program order.
  // Instead: do not mix the two for ordering; log with tg::print only.
  std::vector<std::string> log;
  config::set_print_sink([](const std::string& line, void* user) {
    static_cast<std::vector<std::string>*>(user)->push_back("print " + line.substr(0, line.size() - 1));
  }, &log);
  auto f = function([&](const Tensor& x) {
    log.push_back("cpp before");
    print("graph", x);
    log.push_back("cpp after");
    return x;
  });
  f(constant(1));
  f(constant(2));
  {
    EagerMode eager;
    f(constant(3));
  }
  config::set_print_sink(nullptr);
  EXPECT_EQ(log, (std::vector<std::string>{"cpp before", "cpp after", "print graph 1",  // trace
                                           "print graph 2",                             // cached
                                           "cpp before", "print graph 3", "cpp after"}));  // eager
}

TEST(Footguns, CppGuardAroundAnAssignIsRecordedUnconditionally) {
  // TF's Model example. Surprise: the C++ counter meant to run the assign once only guards the
  // *recording*; the recorded assign_add then runs at every call (1, 2, 3; expected 1, 1, 1).
  // Instead: do one-time work outside the function, or guard it with tg::cond on a Variable.
  Variable v(constant(0));
  int counter = 0;
  auto call = function([&] {
    if (counter == 0) {
      ++counter;
      v.assign_add(1);
    }
    return v.read_value();
  });
  std::vector<int32_t> seen;
  for (int n = 0; n < 3; ++n) seen.push_back(call().item<int32_t>());
  EXPECT_EQ(seen, (std::vector<int32_t>{1, 2, 3}));
}

TEST(Footguns, CppIteratorAdvancesOnlyWhileTracing) {
  // TF's buggy_consume_next. Surprise: the C++ position advances once, at the trace, so every
  // call prints the first element (1 1 1, expected 1 2 3).
  // Instead: keep the position in a Variable and index a tensor with it.
  PrintCapture printed;
  const std::vector<int> data{1, 2, 3};
  std::size_t pos = 0;
  auto buggy_consume_next = function([&] { print("Value:", data[pos++]); });
  for (int i = 0; i < 3; ++i) buggy_consume_next();
  EXPECT_EQ(printed.take(), "Value: 1\nValue: 1\nValue: 1\n");
  EXPECT_EQ(pos, 1u);

  const Tensor data_t = constant({1, 2, 3});
  Variable next(constant(0));
  auto good_consume_next = function([&] {
    print("Value:", gather(data_t, next.read_value()));
    next.assign_add(1);
  });
  for (int i = 0; i < 3; ++i) good_consume_next();
  EXPECT_EQ(printed.take(), "Value: 1\nValue: 2\nValue: 3\n");
}

TEST(Footguns, CapturedCppValuesAreFrozenAtTraceTime) {
  // tinygrad's python_constants_frozen / conditional_branches_frozen, TF's buggy_add. Surprise:
  // a C++ int or bool the body reads by reference is read once, at the trace; changing it later
  // changes nothing (and no retrace happens, the captured value is not part of the trace type).
  // Instead: pass it as an argument (a literal: one trace per value) or hold it in a Variable.
  int scale = 2;
  bool use_square = false;
  auto f = function([&](const Tensor& x) { return use_square ? x * x : x * scale; });
  EXPECT_EQ(f(constant(3)).item<int32_t>(), 6);
  scale = 10;
  EXPECT_EQ(f(constant(3)).item<int32_t>(), 6);  // should be 30
  use_square = true;
  EXPECT_EQ(f(constant(3)).item<int32_t>(), 6);  // should be 9
  EXPECT_EQ(f.tracing_count(), 1);

  auto g = function([](const Tensor& x, bool square, int k) { return square ? x * x : x * k; });
  EXPECT_EQ(g(constant(3), false, 10).item<int32_t>(), 30);
  EXPECT_EQ(g(constant(3), true, 10).item<int32_t>(), 9);
  EXPECT_EQ(g.tracing_count(), 2);
}

TEST(Footguns, CapturedEagerTensorIsAConstantButAVariableIsReadByReference) {
  // Surprise: a tg::Tensor the body uses is baked into the graph as a Const at the trace;
  // re-assigning the C++ handle afterwards is not seen. A Variable is read at every call.
  // Instead: keep values that change in a Variable (assign), or pass them as arguments.
  Tensor scale = constant(2.0f);
  Variable vscale(constant(2.0f));
  auto by_tensor = function([&](const Tensor& x) { return x * scale; });
  auto by_variable = function([&](const Tensor& x) { return x * vscale; });
  EXPECT_EQ(by_tensor(constant(1.0f)).item<float>(), 2.0f);
  EXPECT_EQ(by_variable(constant(1.0f)).item<float>(), 2.0f);
  scale = constant(10.0f);
  vscale.assign(10.0f);
  EXPECT_EQ(by_tensor(constant(1.0f)).item<float>(), 2.0f);  // should be 10
  EXPECT_EQ(by_variable(constant(1.0f)).item<float>(), 10.0f);
  EXPECT_EQ(by_tensor.tracing_count(), 1);
  EXPECT_EQ(by_variable.tracing_count(), 1);
}

struct EqualityConfig {
  int k;
  bool operator==(const EqualityConfig&) const = default;
};

TEST(Footguns, ASharedPtrArgumentWithoutEqualityIsMatchedByIdentity) {
  // TF's SimpleModel. Surprise: a std::shared_ptr argument whose type has no operator== is typed
  // by the object itself (held weakly), not by its fields. After `m->bias += 5` the same object
  // still matches the old trace, which holds bias = 0 as a constant (20, expected 25); an equal
  // copy retraces.
  // Instead: make the fields Variables (TF's BetterModel), give the type operator== (a trace then
  // keeps a copy of the value and compares calls with it), or pass a new object when a value
  // changes.
  struct PlainModel {
    float weight = 2.0f;
    float bias = 0.0f;
  };
  auto evaluate = function([](std::shared_ptr<PlainModel> m, const Tensor& x) { return x * m->weight + m->bias; });
  auto model = std::make_shared<PlainModel>();
  EXPECT_EQ(evaluate(model, constant(10.0f)).item<float>(), 20.0f);
  model->bias += 5.0f;
  EXPECT_EQ(evaluate(model, constant(10.0f)).item<float>(), 20.0f);  // should be 25
  EXPECT_EQ(evaluate.tracing_count(), 1);
  auto twin = std::make_shared<PlainModel>(*model);
  EXPECT_EQ(evaluate(twin, constant(10.0f)).item<float>(), 25.0f);
  EXPECT_EQ(evaluate.tracing_count(), 2);  // equal fields, no operator==: a new trace per object

  // With operator==, a trace keeps a copy of the value it was made for and compares calls with
  // that copy, so the traced object mutated to k = 5 retraces (5, not the 2 the first graph
  // holds), and fresh objects go to the trace of their value.
  auto scale = function([](std::shared_ptr<EqualityConfig> c, const Tensor& x) { return x * c->k; });
  auto traced = std::make_shared<EqualityConfig>(EqualityConfig{2});
  EXPECT_EQ(scale(traced, constant(1)).item<int32_t>(), 2);
  traced->k = 5;
  EXPECT_EQ(scale(traced, constant(1)).item<int32_t>(), 5);
  EXPECT_EQ(scale.tracing_count(), 2);
  EXPECT_TRUE(contains(scale.trace_history()[1].reason, "changed since it was traced")) << scale.trace_history()[1].reason;
  EXPECT_EQ(scale(std::make_shared<EqualityConfig>(EqualityConfig{5}), constant(1)).item<int32_t>(), 5);
  EXPECT_EQ(scale(std::make_shared<EqualityConfig>(EqualityConfig{2}), constant(1)).item<int32_t>(), 2);
  EXPECT_EQ(scale.tracing_count(), 2);
}

TEST(Footguns, AnOpSeedDoesNotMeanTheSameNumbersOnEveryCall) {
  // Surprise (TF's rule, kept): an op seed names a stream, and every call of the op takes the
  // stream's next draw, eagerly and in a traced function; only set_random_seed restarts it.
  // For numbers that depend on the seed alone use the stateless_ ops (Keras's seeded
  // initializers, tg::nn::he_normal and friends, do).
  set_random_seed(1);
  const Tensor a = random_uniform({4}, 0.f, 1.f, 42);
  EXPECT_FALSE(testing::tensors_near(random_uniform({4}, 0.f, 1.f, 42), a));
  EXPECT_TENSOR_EQ(stateless_random_uniform({4}, constant({42, 0})), stateless_random_uniform({4}, constant({42, 0})));
  // In one traced function, two ops with the same op seed draw the same numbers (each node has a
  // stream of its own, from the same seeds).
  auto twice = function([](const Tensor& x) {
    return std::make_pair(x + random_normal({4}, 0.0, 1.0, float32, 7), x + random_normal({4}, 0.0, 1.0, float32, 7));
  });
  const auto [p, q] = twice(zeros({4}));
  EXPECT_TENSOR_EQ(p, q);
}

TEST(Footguns, ATracedFunctionKeepsTheGlobalSeedItWasTracedWith) {
  // Surprise: the seeds are read when the op is built, so a function traced under seed 1 keeps
  // seed 1's numbers after set_random_seed(2); set_random_seed only restarts its streams. Set the
  // seed before the first call (or make a new tg::function) to change a function's numbers.
  set_random_seed(1);
  auto noisy = function([](const Tensor& x) { return x + random_normal(shape(x)); });
  const Tensor under_1 = noisy(zeros({4}));
  set_random_seed(2);
  // TF keeps the traced seeds too (they are attributes in the graph); its kernels keep counting
  // instead of restarting, which tracegraph does so that set_random_seed(s) twice repeats a run.
  EXPECT_TENSOR_EQ(noisy(zeros({4})), under_1);
  auto fresh = function([](const Tensor& x) { return x + random_normal(shape(x)); });
  EXPECT_FALSE(testing::tensors_near(fresh(zeros({4})), under_1));
}

TEST(Footguns, TodayDropoutWithATrainingTensorDrawsItsMaskInInferenceCallsToo) {
  // Surprise: with `training` a tensor, one trace serves both modes by computing both results
  // and selecting one (tg::where), so inference calls advance the mask stream too: the masks of
  // the training calls depend on how many inference calls came between. TF (Keras's smart_cond
  // builds a tf.cond) draws only while training. Values are still valid masks; pass a C++ bool
  // to get one trace per mode that draws only while training.
  set_random_seed(3);
  auto step = function([](const Tensor& x, const Tensor& training) { return dropout(x, 0.5, training); });
  const Tensor x = ones({32});
  const Tensor first = step(x, constant(true));
  const Tensor second = step(x, constant(true));
  set_random_seed(3);
  EXPECT_TENSOR_EQ(step(x, constant(true)), first);
  step(x, constant(false));  // an evaluation call in between
  EXPECT_FALSE(testing::tensors_near(step(x, constant(true)), second));  // TF: == second
}

// ---- Control flow on tensors -----------------------------------------------------------------

TEST(Footguns, CppIfOnATensorWorksEagerlyButThrowsWhileTracing) {
  // Surprise: `if (x > 0)` is fine eagerly (and under run_functions_eagerly) but a symbolic
  // tensor has no C++ truth value, so tracing throws. Instead: tg::cond (one trace, the branch is
  // chosen in the graph at every call).
  auto cpp_if = function([](const Tensor& x) {
    if (x > 0) return x;
    return -x;
  }, {.name = "cpp_if"});
  EXPECT_THROW_MSG(cpp_if(constant(-3)), TypeError, "[operator bool]", "symbolic tensor",
                   "tg::cond(pred, true_fn, false_fn)", "tg::while_loop");
  EXPECT_EQ(cpp_if.tracing_count(), 0);
  {
    EagerMode eager;
    EXPECT_EQ(cpp_if(constant(-3)).item<int32_t>(), 3);
  }
  // Reading the value (item, to_vector) to branch on it is refused the same way.
  auto cpp_item = function([](const Tensor& x) { return x.item<int32_t>() > 0 ? x : -x; });
  EXPECT_THROW_MSG(cpp_item(constant(-3)), TypeError, "symbolic");

  auto staged = function([](const Tensor& x) { return cond(x > 0, [&] { return x; }, [&] { return -x; }); });
  EXPECT_EQ(staged(constant(-3)).item<int32_t>(), 3);
  EXPECT_EQ(staged(constant(4)).item<int32_t>(), 4);
  EXPECT_EQ(staged.tracing_count(), 1);
}

TEST(Footguns, CppLoopUnrollsIntoTheGraphButForRangeDoesNot) {
  // Surprise: a C++ `for` over a count runs while tracing, so the graph gets one copy of the body
  // per iteration (its size grows with the count) and, with the count a C++ argument, each count
  // is another trace. Instead: tg::for_range over a tensor count: one loop node, one trace.
  auto unrolled = function([](const Tensor& x, int n) {
    Tensor acc = x;
    for (int i = 0; i < n; ++i) acc = acc * 2 + 1;
    return acc;
  }, {.optimize = false});
  auto staged = function([](const Tensor& x, const Tensor& n) {
    return for_range(Range(n), x, [](const Tensor&, const Tensor& acc) { return acc * 2 + 1; });
  }, {.optimize = false});
  auto nodes = [](const ConcreteFunction& cf) { return cf.graph().nodes().size(); };
  const auto unrolled_3 = nodes(unrolled.get_concrete_function(constant(1), 3));
  const auto unrolled_30 = nodes(unrolled.get_concrete_function(constant(1), 30));
  EXPECT_GE(unrolled_30, unrolled_3 + 27 * 4);  // mul, add and their two constants per iteration
  EXPECT_EQ(unrolled.tracing_count(), 2);
  const auto staged_3 = nodes(staged.get_concrete_function(constant(1), constant(3)));
  const auto staged_30 = nodes(staged.get_concrete_function(constant(1), constant(30)));
  EXPECT_EQ(staged_3, staged_30);
  EXPECT_EQ(staged.tracing_count(), 1);
  EXPECT_LT(staged_30, unrolled_30);
  EXPECT_EQ(unrolled(constant(1), 3).item<int32_t>(), 15);
  EXPECT_EQ(staged(constant(1), constant(3)).item<int32_t>(), 15);
}

// ---- Trace types: what makes a new trace ----------------------------------------------------

TEST(Footguns, CppScalarArgumentsRetraceForEveryValue) {
  // Surprise: int, double, bool and string arguments are literal trace types; a training loop
  // that passes its step counter traces once per step (and stops at max_traces), and
  // reduce_retracing does not help (literals never generalise).
  // Instead: pass numbers that vary as tensors (tg::constant(step)).
  auto step_fn = function([](const Tensor& x, int step) { return x + step; },
                          {.name = "train_step", .reduce_retracing = true, .arg_names = {"x", "step"},
                           .max_traces = 4});
  for (int step = 0; step < 4; ++step) EXPECT_EQ(step_fn(constant(1), step).item<int32_t>(), 1 + step);
  EXPECT_EQ(step_fn.tracing_count(), 4);
  EXPECT_TRUE(contains(step_fn.trace_history()[1].reason, "step: literal value 0 -> 1"))
      << step_fn.trace_history()[1].reason;
  EXPECT_THROW_MSG(step_fn(constant(1), 4), RetracingLimitError, "'train_step' has been retraced 4 times",
                   "pass step as a tg::Tensor");

  auto scale = function([](const Tensor& x, double k) { return x * k; });
  scale(constant(1.0f), 0.1);
  scale(constant(1.0f), 0.2);
  EXPECT_EQ(scale.tracing_count(), 2);

  auto tensor_step = function([](const Tensor& x, const Tensor& step) { return x + step; });
  for (int step = 0; step < 4; ++step) EXPECT_EQ(tensor_step(constant(1), constant(step)).item<int32_t>(), 1 + step);
  EXPECT_EQ(tensor_step.tracing_count(), 1);
}

TEST(Footguns, StdVectorOfNumbersIsBakedIntoTheGraph) {
  // Surprise: a std::vector<float> argument is a container of literals, not data: every new
  // content is a new trace with the numbers as constants of the graph.
  // Instead: pass the data as a tg::Tensor (tg::constant(values, shape)).
  auto total = function([](const std::vector<float>& xs) {
    return reduce_sum(constant(xs, TensorShape{static_cast<int64_t>(xs.size())}));
  });
  EXPECT_EQ(total(std::vector<float>{1, 2, 3}).item<float>(), 6.0f);
  EXPECT_EQ(total(std::vector<float>{4, 5, 6}).item<float>(), 15.0f);
  EXPECT_EQ(total(std::vector<float>{1, 2, 3}).item<float>(), 6.0f);
  EXPECT_EQ(total.tracing_count(), 2);

  auto total_t = function([](const Tensor& xs) { return reduce_sum(xs); });
  total_t(constant({1.0f, 2.0f, 3.0f}));
  total_t(constant({4.0f, 5.0f, 6.0f}));
  EXPECT_EQ(total_t.tracing_count(), 1);
}

TEST(Footguns, NewShapeRetracesUnlessSignatureOrReduceRetracing) {
  // Surprise: every new batch size is a new trace (shapes are part of the trace type).
  // Instead: input_signature with None dims (one trace), or reduce_retracing (one extra trace,
  // then a generalised (None,) trace serves all sizes).
  auto per_shape = function([](const Tensor& x) { return x * 2; }, {.arg_names = {"x"}});
  auto with_signature = function([](const Tensor& x) { return x * 2; },
                                 {.input_signature = std::vector<TensorSpec>{TensorSpec({None}, float32)}});
  auto reducing = function([](const Tensor& x) { return x * 2; }, {.reduce_retracing = true});
  for (int64_t n = 2; n <= 5; ++n) {
    per_shape(ones({n}));
    with_signature(ones({n}));
    reducing(ones({n}));
  }
  EXPECT_EQ(per_shape.tracing_count(), 4);
  EXPECT_EQ(per_shape.trace_history()[1].reason, "x: shape (2,) -> (3,), dim 0: 2 -> 3 (closest trace: #0)");
  EXPECT_EQ(with_signature.tracing_count(), 1);
  EXPECT_EQ(reducing.tracing_count(), 2);
}

TEST(Footguns, ANoneDimIsNotAnInteger) {
  // While tracing with a None dim, reading it as a C++ integer cannot give the right answer for
  // every size: a mean written as sum / dim(0) used to divide by -1 (-6 for [1, 2, 3]). It
  // raises ValueError naming the tensor, the dim and the fix instead (TF hands out None, so
  // Python code fails loudly too).
  auto mean = function([](const Tensor& x) { return reduce_sum(x) / static_cast<float>(x.shape().dim(0)); },
                       {.input_signature = std::vector<TensorSpec>{TensorSpec({None}, float32)}, .arg_names = {"x"}});
  EXPECT_THROW_MSG(mean(constant({1.0f, 2.0f, 3.0f})), ValueError, "dimension 0", "'x:0'", "is unknown (None)",
                   "tg::shape(tensor)[0]");
  // Instead: tg::shape(x)[i], a run-time value.
  auto good_mean = function([](const Tensor& x) { return reduce_sum(x) / cast(shape(x)[0], float32); },
                            {.input_signature = std::vector<TensorSpec>{TensorSpec({None}, float32)}});
  EXPECT_EQ(good_mean(constant({1.0f, 2.0f, 3.0f})).item<float>(), 2.0f);
}

TEST(Footguns, AVariableArgumentIsAParameterOfTheTrace) {
  // A Variable passed as an argument is typed like TF's VariableSpec (dtype, shape, aliasing),
  // so every Variable of that spec shares one trace - and the Variable the body receives is a
  // parameter standing for whichever Variable the call passes. Surprise: keeping that one (in a
  // global, a captured reference) and reading it after the call is an OutOfScopeError, not a
  // read of the first Variable. Instead: keep the Variable you passed.
  Variable a(constant(1.0f)), b(constant(2.0f));
  std::optional<Variable> kept;
  auto scale = function([&](const Variable& w, const Tensor& x) {
    kept = w;
    return x * w;
  });
  EXPECT_EQ(scale(a, constant(3.0f)).item<float>(), 3.0f);
  EXPECT_EQ(scale(b, constant(3.0f)).item<float>(), 6.0f);
  EXPECT_EQ(scale.tracing_count(), 1);
  EXPECT_THROW_MSG(kept->read_value(), OutOfScopeError, "is the parameter that function", "Use the Variable you passed");
}

TEST(Footguns, FunctionCreatedInALoopRetracesEveryTime) {
  // Surprise: each tg::function starts with an empty trace cache, so one created per call (in a
  // loop, or in a helper called per step) traces at every call. tracegraph notes it in the trace
  // reason and warns at the 5th instance. Instead: create the function once and reuse it.
  LogCapture log;
  auto body = [](const Tensor& x) { return x + 1; };
  int traces = 0;
  std::string last_reason;
  for (int i = 0; i < 5; ++i) {
    auto f = function(body, {.name = "step"});
    f(constant(1));
    traces += static_cast<int>(f.tracing_count());
    last_reason = f.trace_history().back().reason;
  }
  EXPECT_EQ(traces, 5);
  EXPECT_TRUE(contains(last_reason, "this is tg::function #5 created from the same C++ callable")) << last_reason;
  EXPECT_TRUE(contains(log.text(), "5 tg::functions have been created from the same C++ callable")) << log.text();
}

// ---- Scope and state -------------------------------------------------------------------------

TEST(Footguns, SymbolicTensorKeptAfterTheTraceIsOutOfScope) {
  // TF's leaky_function. Surprise: a tensor stored into an outside variable during the trace is
  // a symbolic graph value, not a result; it cannot be read or used after the call.
  // Instead: return every value you need.
  std::vector<Tensor> kept;
  auto leaky = function([&](const Tensor& a) {
    kept.push_back(a + 1);
    return a + 2;
  }, {.name = "leaky"});
  EXPECT_EQ(leaky(constant(1)).item<int32_t>(), 3);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_TRUE(kept[0].is_symbolic());
  EXPECT_THROW_MSG(kept[0].item<int32_t>(), TypeError, "of function 'leaky'", "leaked out of its trace");
  EXPECT_THROW_MSG(kept[0] + 1, OutOfScopeError, "of function 'leaky'");
  auto captures_leaked = function([&](const Tensor& b) { return b + kept[0]; }, {.name = "captures_leaked"});
  EXPECT_THROW_MSG(captures_leaked(constant(2)), OutOfScopeError, "of function 'leaky'",
                   "while tracing function 'captures_leaked'");
}

TEST(Footguns, VariableCreatedInTheBodyAtEveryCallIsAnError) {
  // Surprise: `Variable v(...)` in the body is fine eagerly but refused in a function (it would
  // make a new Variable per trace; tests/trace/state_test.cpp's SingletonRule pins that case).
  // A lazily built model works for the first object but fails for a second one, whose
  // Variables would be created in a later trace (TF's "different model instances" case).
  // Instead: create Variables outside, or build each model before passing it.
  struct LazyLayer {
    std::optional<Variable> w;
  };
  auto apply = function([](std::shared_ptr<LazyLayer> layer, const Tensor& x) {
    if (!layer->w) layer->w.emplace(constant(2.0f));
    return x * *layer->w;
  }, {.name = "apply"});
  auto first = std::make_shared<LazyLayer>(), second = std::make_shared<LazyLayer>();
  EXPECT_EQ(apply(first, constant(3.0f)).item<float>(), 6.0f);
  EXPECT_THROW_MSG(apply(second, constant(3.0f)), ValueError, "singleton", "'apply'");
}

TEST(Footguns, RecursionOverALiteralTracesOncePerLevel) {
  // As in TF: a tg::function may call itself while tracing when a C++ literal argument changes
  // (n = 3, 2, 1, 0): each level is a new trace type and traces once (4 traces here, and TF's
  // "multiple tracings" warning can follow). Only a call with the very types of a trace in
  // progress - recursion that ends on a tensor's value - is a StagingError: use tg::while_loop.
  std::function<Tensor(const Tensor&, int)> recurse;
  auto count_down = function([&](const Tensor& x, int n) { return n == 0 ? x : recurse(x, n - 1) + 1; },
                             {.name = "count_down"});
  recurse = [&](const Tensor& x, int n) { return count_down(x, n); };
  EXPECT_EQ(count_down(constant(0), 3).item<int32_t>(), 3);
  EXPECT_EQ(count_down.tracing_count(), 4);

  std::function<Tensor(const Tensor&)> forever;
  auto endless = function([&](const Tensor& x) { return forever(x - 1); }, {.name = "endless"});
  forever = [&](const Tensor& x) { return endless(x); };
  EXPECT_THROW_MSG(endless(constant(3)), StagingError, "'endless' called itself while it was being traced",
                   "tg::while_loop");
}

TEST(Footguns, ANestedFunctionIsItsOwnFunction) {
  // A tg::function called while another is traced traces itself (its own cache, its
  // input_signature binds the call) and its graph is inlined: its C++ code runs once per trace
  // of its own, not once per call site. As in TF, a call that does not bind is a TypeError.
  int inner_runs = 0;
  auto inner = function([&](const Tensor& x) {
    ++inner_runs;
    return x * 2;
  }, {.name = "inner", .input_signature = std::vector<TensorSpec>{TensorSpec({None}, int32)}});
  auto outer = function([&](const Tensor& x) { return inner(x) + inner(x); }, {.name = "outer"});
  EXPECT_THROW_MSG(outer(constant(1.5f)), TypeError, "Binding inputs to function failed",
                   "Can not cast TensorSpec(shape=(), dtype=tg.float32, name=None) to "
                   "TensorSpec(shape=(None,), dtype=tg.int32, name=None)");
  EXPECT_EQ(outer(constant({1, 2})).to_vector<int32_t>(), (std::vector<int32_t>{4, 8}));
  EXPECT_EQ(inner.tracing_count(), 1);
  EXPECT_EQ(inner_runs, 1);
}

// ---- Gradients and debugging ------------------------------------------------------------------

TEST(Footguns, APersistentTapeRecordsItsOwnGradientCalls) {
  // As in TF: while a persistent tape records, its gradient() computations are recorded on it
  // too, so the gradient of a gradient is the second derivative (6x = [6, -12] for sum(x^3)).
  // The surprise is the cost: every gradient() call grows the tape. Call stop_recording() first
  // when no higher-order gradient is wanted (TF warns about gradient() inside the tape's context).
  const Tensor x = constant({1.0, -2.0}, float64);
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  const Tensor dy = tape.gradient(reduce_sum(x * x * x), x);  // 3x^2
  EXPECT_EQ(dy.to_vector<double>(), (std::vector<double>{3.0, 12.0}));
  const Tensor d2y = tape.gradient(reduce_sum(dy), x);
  EXPECT_EQ(d2y.to_vector<double>(), (std::vector<double>{6.0, -12.0}));
}

TEST(Footguns, RunFunctionsEagerlyIsGlobalAndChangesWhatCppCodeDoes) {
  // Surprise: the debugging switch is process-wide (every tg::function, every thread), skips the
  // trace cache (tracing_count stays put) and runs C++ side effects at every call, so a bug that
  // comes from tracing (a frozen capture, a C++ counter) disappears while debugging.
  // Instead: switch it on only around the code being debugged, and test with it off.
  int calls = 0;
  int scale = 2;
  auto f = function([&](const Tensor& x) {
    ++calls;
    return x * scale;
  });
  EXPECT_EQ(f(constant(1)).item<int32_t>(), 2);
  scale = 3;
  {
    EagerMode eager;
    EXPECT_TRUE(config::functions_run_eagerly());
    EXPECT_EQ(f(constant(1)).item<int32_t>(), 3);  // the frozen capture looks fine here ...
    EXPECT_EQ(f(constant(1)).item<int32_t>(), 3);
    auto other = function([](const Tensor& x) { return x; });
    other(constant(1));
    EXPECT_EQ(other.tracing_count(), 0);  // ... and every other function is eager too
  }
  EXPECT_EQ(f(constant(1)).item<int32_t>(), 2);  // ... but not once tracing is back
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(f.tracing_count(), 1);
}

}  // namespace
}  // namespace tg
