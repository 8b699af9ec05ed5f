// Where tg::function binds, names and counts as TensorFlow's tf.function does (issue 33): named
// specs, tensors of unknown rank, parameter names, the frequent-retracing warning, string
// literal arguments and the identity of concrete functions.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "support/graph_util.h"
#include "support/test_util.h"

namespace tg {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::vector<std::string> placeholder_names(const Graph& g) {
  std::vector<std::string> names;
  for (const auto& node : g.nodes())
    if (node.op == "Placeholder") names.push_back(node.name);
  return names;
}

// ---- 1. a TensorSpec's name names the graph input; binding ignores it ----------------------

TEST(SpecNameBinding, AnInputSignatureOfNamedSpecsTakesTensorsAndNamesTheInputs) {
  // TF's testInputSpecGraphArgNames.
  auto f = function([](const Tensor& a, const Tensor& b) { return matmul(a, b); },
                    {.input_signature = std::vector<TensorSpec>{TensorSpec({None, None}, float32, "first_mat"),
                                                                TensorSpec({None, None}, float32, "second_mat")}});
  const Tensor m = constant({{1.0f, 2.0f}, {3.0f, 4.0f}});
  EXPECT_EQ(f(m, m).to_vector<float>(), (std::vector<float>{7, 10, 15, 22}));
  ASSERT_EQ(f.concrete_functions().size(), 1u);
  EXPECT_EQ(placeholder_names(f.concrete_functions()[0].graph()), (std::vector<std::string>{"first_mat", "second_mat"}));
  // What does not fit still fails, naming the spec.
  EXPECT_THROW_MSG(f(constant({1.0f}), m), TypeError, "Can not cast", "first_mat");
}

TEST(SpecNameBinding, AFlatNamedSpecServesCallsWithTensors) {
  int traces = 0;
  auto f = function([&](const Tensor& a, const Tensor& b) {
    ++traces;
    return matmul(a, b);
  });
  auto cf = f.get_concrete_function(TensorSpec({None, None}, float32, "first_mat"),
                                    TensorSpec({None, None}, float32, "second_mat"));
  const Tensor m = constant({{1.0f, 2.0f}, {3.0f, 4.0f}});
  EXPECT_EQ(cf(m, m).to_vector<float>(), (std::vector<float>{7, 10, 15, 22}));
  // A call with tensors is a subtype of the named trace (TF's TensorSpec.is_subtype_of): no retrace.
  EXPECT_EQ(f(m, m).to_vector<float>(), (std::vector<float>{7, 10, 15, 22}));
  EXPECT_EQ(f.tracing_count(), 1);
  EXPECT_EQ(traces, 1);
  // A spec of another name is another trace type, whose input it names.
  auto renamed = f.get_concrete_function(TensorSpec({None, None}, float32, "a"), TensorSpec({None, None}, float32, "b"));
  EXPECT_EQ(f.tracing_count(), 2);
  EXPECT_EQ(placeholder_names(renamed.graph()), (std::vector<std::string>{"a", "b"}));
}

TEST(SpecNameBinding, NestedNamedSpecsBindTensors) {
  auto f = function([](const std::vector<Tensor>& mats) { return matmul(mats[0], mats[1]); });
  auto cf = f.get_concrete_function(std::vector<TensorSpec>{TensorSpec({None, None}, float32, "first_mat"),
                                                            TensorSpec({None, None}, float32, "second_mat")});
  EXPECT_EQ(placeholder_names(cf.graph()), (std::vector<std::string>{"first_mat", "second_mat"}));
  const Tensor m = constant({{1.0f, 2.0f}, {3.0f, 4.0f}});
  EXPECT_EQ(cf(std::vector<Tensor>{m, m}).to_vector<float>(), (std::vector<float>{7, 10, 15, 22}));
  EXPECT_EQ(f(std::vector<Tensor>{m, m}).to_vector<float>(), (std::vector<float>{7, 10, 15, 22}));
  EXPECT_EQ(f.tracing_count(), 1);
  // The innermost mismatch is named.
  EXPECT_THROW_MSG(cf(std::vector<Tensor>{m, constant({1, 2})}), TypeError,
                   "Can not cast TensorSpec(shape=(2,), dtype=tg.int32, name=None) to "
                   "TensorSpec(shape=(None, None), dtype=tg.float32, name='second_mat')");
}

TEST(SpecNameBinding, NamedSpecsInADictBindTensors) {
  auto f = function([](const std::map<std::string, Tensor>& in) { return matmul(in.at("a"), in.at("b")); });
  auto cf = f.get_concrete_function(std::map<std::string, TensorSpec>{
      {"a", TensorSpec({None, None}, float32, "first_mat")}, {"b", TensorSpec({None, None}, float32, "second_mat")}});
  EXPECT_EQ(placeholder_names(cf.graph()), (std::vector<std::string>{"first_mat", "second_mat"}));
  const Tensor m = constant({{1.0f, 2.0f}, {3.0f, 4.0f}});
  const std::map<std::string, Tensor> in{{"a", m}, {"b", m}};
  EXPECT_EQ(cf(in).to_vector<float>(), (std::vector<float>{7, 10, 15, 22}));
  EXPECT_EQ(f(in).to_vector<float>(), (std::vector<float>{7, 10, 15, 22}));
  EXPECT_EQ(f.tracing_count(), 1);
  EXPECT_THROW_MSG(cf(std::map<std::string, Tensor>{{"a", m}, {"b", constant({1.0f})}}), TypeError,
                   "Can not cast TensorSpec(shape=(1,), dtype=tg.float32, name=None) to "
                   "TensorSpec(shape=(None, None), dtype=tg.float32, name='second_mat')");
}

// ---- 2. a symbolic tensor less specific than the parameter: cast, then checked at run time ---

TEST(UnknownRankBinding, AConcreteFunctionTakesATensorOfUnknownRankInsideATrace) {
  // The inner trace reads dim 0 as an integer: it is specialised to (1,), and would silently
  // scale by 2 whatever the value's length.
  auto inner = function([](const Tensor& x) { return x * static_cast<float>(x.shape().dim(0) + 1); });
  auto cf = inner.get_concrete_function(TensorSpec({1}, float32));
  auto outer = function([&](const Tensor& x) { return cf(x) + 1.0f; },
                        {.name = "outer",
                         .input_signature = std::vector<TensorSpec>{TensorSpec(TensorShape::unknown_rank(), float32)}});
  EXPECT_EQ(outer(constant({3.0f})).to_vector<float>(), std::vector<float>{7.0f});
  EXPECT_EQ(outer.tracing_count(), 1);
  // The value's shape is checked when the graph runs.
  EXPECT_THROW_MSG(outer(constant({1.0f, 2.0f})), InvalidArgumentError, "[2]", "(1,)");
  EXPECT_THROW_MSG(outer(constant(1.0f)), InvalidArgumentError, "0 elements", "[1]");
  EXPECT_EQ(outer(constant({-1.0f})).to_vector<float>(), std::vector<float>{-1.0f});
  // Another dtype still does not bind.
  auto wrong_dtype = function([&](const Tensor& x) { return cf(x); },
                              {.input_signature = std::vector<TensorSpec>{TensorSpec(TensorShape::unknown_rank(), int32)}});
  EXPECT_THROW_MSG(wrong_dtype(constant({1})), TypeError, "Can not cast", "dtype=tg.int32");
}

TEST(UnknownRankBinding, ANoneDimIsCastAndCheckedToo) {
  auto inner = function([](const Tensor& x) { return reduce_sum(x) / static_cast<float>(x.shape().dim(0)); });
  auto cf = inner.get_concrete_function(TensorSpec({3}, float32));
  auto outer = function([&](const Tensor& x) { return cf(x); },
                        {.input_signature = std::vector<TensorSpec>{TensorSpec({None}, float32)}});
  EXPECT_EQ(outer(constant({1.0f, 2.0f, 6.0f})).item<float>(), 3.0f);
  EXPECT_THROW_MSG(outer(constant({1.0f, 2.0f, 3.0f, 4.0f})), InvalidArgumentError, "[4]", "(3,)");
  // A shape that cannot fit is refused when the outer function traces.
  auto rank2 = function([&](const Tensor& x) { return cf(x); },
                        {.input_signature = std::vector<TensorSpec>{TensorSpec({None, 3}, float32)}});
  EXPECT_THROW_MSG(rank2(ones({1, 3})), TypeError, "Can not cast", "shape=(None, 3)");
}

TEST(UnknownRankBinding, AnInputSignatureFunctionCalledInsideATraceCastsTheSameWay) {
  auto inner = function([](const Tensor& x) { return x * static_cast<float>(x.shape().dim(0)); },
                        {.input_signature = std::vector<TensorSpec>{TensorSpec({2}, float32)}});
  auto outer = function([&](const Tensor& x) { return inner(x); },
                        {.input_signature = std::vector<TensorSpec>{TensorSpec(TensorShape::unknown_rank(), float32)}});
  EXPECT_EQ(outer(constant({1.0f, 3.0f})).to_vector<float>(), (std::vector<float>{2.0f, 6.0f}));
  EXPECT_THROW_MSG(outer(constant({1.0f, 2.0f, 3.0f})), InvalidArgumentError, "[3]", "(2,)");
}

// ---- 3. parameter names, and what the frequent-retracing warning counts --------------------

TEST(ParameterNames, AnInputSignatureSpecNamesTheParameterAndItsGraphInput) {
  // TF's testMethodSignature: the spec's name wins over the C++ parameter's.
  auto f = function([](const Tensor& x) { return x * 2.0f; },
                    {.input_signature = std::vector<TensorSpec>{TensorSpec({None}, float32, "y")}, .arg_names = {"x"}});
  f(constant({1.0f}));
  const ConcreteFunction cf = f.concrete_functions()[0];
  EXPECT_EQ(placeholder_names(cf.graph()), std::vector<std::string>{"y"});
  EXPECT_TRUE(contains(cf.function_type(), "(y: TensorSpec(shape=(None,)")) << cf.function_type();
  int muls = 0;
  for (const auto& node : cf.graph().nodes()) {
    if (node.op != "mul") continue;
    ++muls;
    EXPECT_EQ(node.inputs[0], "y");
  }
  EXPECT_EQ(muls, 1);
  // Unnamed specs keep the arg_names.
  auto g = function([](const Tensor& a, const Tensor& b) { return a + b; },
                    {.input_signature = std::vector<TensorSpec>{TensorSpec({}, int32), TensorSpec({}, int32, "second")},
                     .arg_names = {"first", "b"}});
  g(constant(1), constant(2));
  EXPECT_EQ(placeholder_names(g.concrete_functions()[0].graph()), (std::vector<std::string>{"first", "second"}));
}

// Captures log lines for the lifetime of the object.
class LogCapture {
 public:
  LogCapture() {
    config::set_log_sink([](const std::string& m, void* self) { static_cast<LogCapture*>(self)->lines_.push_back(m); },
                         this);
  }
  ~LogCapture() { config::set_log_sink(nullptr); }
  std::vector<std::string> warnings_about(const std::string& name) const {
    std::vector<std::string> w;
    for (const auto& l : lines_)
      if (l.find("tracegraph warning") == 0 && contains(l, "calls to '" + name + "'")) w.push_back(l);
    return w;
  }

 private:
  std::vector<std::string> lines_;
};

TEST(RetracingWarning, ANestedFunctionRetracedByItsCallersTracesDoesNotWarn) {
  LogCapture log;
  auto inner = function([](const Tensor& x) { return x + 1.0f; }, {.name = "inner"});
  auto outer = function([&](const Tensor& x) { return inner(x) * 2.0f; }, {.name = "outer"});
  for (int64_t n = 1; n <= 5; ++n) outer(ones({n}));
  EXPECT_EQ(inner.tracing_count(), 5);
  // TF counts the calls the program makes (the outer function's); the inner one was only called
  // while the outer one traced, and runs inside its graphs.
  EXPECT_TRUE(log.warnings_about("inner").empty());
  ASSERT_EQ(log.warnings_about("outer").size(), 1u);
  EXPECT_TRUE(contains(log.warnings_about("outer")[0], "5 out of the last 5 calls to 'outer'"));
}

TEST(RetracingWarning, GetConcreteFunctionIsNotACall) {
  LogCapture log;
  auto f = function([](const Tensor& x) { return x + 1.0f; }, {.name = "specs"});
  for (int64_t n = 1; n <= 8; ++n) f.get_concrete_function(TensorSpec({n}, float32));
  EXPECT_EQ(f.tracing_count(), 8);
  EXPECT_TRUE(log.warnings_about("specs").empty());
}

TEST(RetracingWarning, TheWindowIsTensorFlows) {
  LogCapture log;
  auto f = function([](const Tensor& x) { return x + 1.0f; }, {.name = "burst"});
  // Six traces in a row: TF warns at the fifth and again at the sixth (at most twice).
  for (int64_t n = 1; n <= 6; ++n) f(ones({n}));
  const auto w = log.warnings_about("burst");
  ASSERT_EQ(w.size(), 2u);
  EXPECT_TRUE(contains(w[0], "5 out of the last 5 calls")) << w[0];
  EXPECT_TRUE(contains(w[1], "6 out of the last 6 calls")) << w[1];

  // A first call that did not trace (get_concrete_function traced first) starts TF's window
  // with one entry, so four traces after it warn.
  auto g = function([](const Tensor& x) { return x * 2.0f; }, {.name = "primed"});
  g.get_concrete_function(TensorSpec({1}, float32));
  g(ones({1}));
  for (int64_t n = 2; n <= 4; ++n) g(ones({n}));
  EXPECT_TRUE(log.warnings_about("primed").empty());
  g(ones({5}));
  ASSERT_EQ(log.warnings_about("primed").size(), 1u);
  EXPECT_TRUE(contains(log.warnings_about("primed")[0], "5 out of the last 5 calls"));
}

// ---- 4. string literals are string arguments, compared by value ----------------------------

TEST(StringLiteralArguments, AStringLiteralCompilesAndTracesOncePerValue) {
  int traces = 0;
  auto forward = function([&](const Tensor& x, const std::string& activation) {
    ++traces;
    return activation == "relu" ? relu(x) : tanh(x);
  }, {.arg_names = {"x", "activation"}});
  const Tensor x = constant({-1.0f, 2.0f});
  EXPECT_EQ(forward(x, "relu").to_vector<float>(), (std::vector<float>{0.0f, 2.0f}));
  EXPECT_EQ(forward(x, std::string("relu")).to_vector<float>(), (std::vector<float>{0.0f, 2.0f}));
  char buffer[] = "relu";  // another array, the same value
  forward(x, buffer);
  const char* pointer = buffer;
  forward(x, pointer);
  EXPECT_EQ(forward.tracing_count(), 1);
  EXPECT_NEAR(forward(x, "tanh").to_vector<float>()[0], std::tanh(-1.0f), 1e-6);
  EXPECT_EQ(forward.tracing_count(), 2);
  EXPECT_EQ(traces, 2);
  EXPECT_TRUE(contains(forward.trace_history()[1].reason, "activation: literal value 'relu' -> 'tanh'"))
      << forward.trace_history()[1].reason;

  auto cf = forward.get_concrete_function(TensorSpec({2}, float32), "relu");
  EXPECT_EQ(forward.tracing_count(), 2);
  EXPECT_EQ(cf(x, "relu").to_vector<float>(), (std::vector<float>{0.0f, 2.0f}));
  EXPECT_THROW_MSG(cf(x, "gelu"), TypeError, "Can not cast 'gelu' to Literal['relu']");
}

TEST(StringLiteralArguments, ConstCharPointerParametersTakeLiteralsToo) {
  auto f = function([](const Tensor& x, const char* mode) { return std::string(mode) == "double" ? x * 2 : x; });
  EXPECT_EQ(f(constant(3), "double").item<int32_t>(), 6);
  EXPECT_EQ(f(constant(3), "same").item<int32_t>(), 3);
  EXPECT_EQ(f(constant(4), std::string("double").c_str()).item<int32_t>(), 8);
  EXPECT_EQ(f.tracing_count(), 2);
}

// ---- 5. concrete functions compare by identity ---------------------------------------------

TEST(ConcreteFunctionIdentity, TheSameTraceIsEqualAnotherIsNot) {
  auto f = function([](const Tensor& x) { return x * 2; });
  auto a = f.get_concrete_function(TensorSpec({None}, int32));
  auto b = f.get_concrete_function(TensorSpec({None}, int32));
  EXPECT_TRUE(a == b);  // TF's assertIs(cf1, cf2)
  EXPECT_FALSE(a != b);
  auto c = f.get_concrete_function(TensorSpec({None}, float32));
  EXPECT_TRUE(a != c);
  EXPECT_FALSE(a == c);
  // A call dispatched to the same trace: the handles the function lists are equal to it.
  f(constant({1, 2}));
  ASSERT_EQ(f.concrete_functions().size(), 2u);
  EXPECT_TRUE(f.concrete_functions()[0] == a);
  EXPECT_TRUE(f.concrete_functions()[1] == c);
  // A copy is the same trace; another function's trace of the same types is not.
  const ConcreteFunction copy = a;
  EXPECT_TRUE(copy == a);
  auto g = function([](const Tensor& x) { return x * 2; });
  EXPECT_TRUE(g.get_concrete_function(TensorSpec({None}, int32)) != a);
}

}  // namespace
}  // namespace tg
