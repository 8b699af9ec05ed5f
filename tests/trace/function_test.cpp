// tg::function: tracing, the trace cache, dispatch by trace type, signatures (the guide's rules).
#include <atomic>
#include <cmath>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "graph/graph_ir.h"
#include "support/test_util.h"

namespace tg {
namespace {

using ::tg::testing::tensors_near;

TEST(Function, TracesOncePerInputTypeAndRunsPlainCppOnlyWhileTracing) {
  int traces = 0;
  std::vector<std::string> seen;
  auto dbl = function(
      [&](const Tensor& a) {
        ++traces;
        seen.push_back(a.to_string());
        return a + a;
      },
      {.name = "double", .arg_names = {"a"}});
  EXPECT_EQ(dbl(constant(1)).to_string(), "tg.Tensor(2, shape=(), dtype=int32)");
  EXPECT_EQ(dbl(constant(1.1)).to_string(), "tg.Tensor(2.2, shape=(), dtype=float32)");
  EXPECT_EQ(dbl(constant("a")).to_string(), "tg.Tensor(b'aa', shape=(), dtype=string)");
  EXPECT_EQ(dbl(constant("b")).to_string(), "tg.Tensor(b'bb', shape=(), dtype=string)");
  EXPECT_EQ(traces, 3);
  EXPECT_EQ(dbl.tracing_count(), 3);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], "Tensor(\"a:0\", shape=(), dtype=int32)");
  EXPECT_EQ(seen[1], "Tensor(\"a:0\", shape=(), dtype=float32)");
  EXPECT_EQ(seen[2], "Tensor(\"a:0\", shape=(), dtype=string)");
  EXPECT_EQ(dbl.pretty_printed_concrete_signatures(),
            "Input Parameters:\n"
            "  a (POSITIONAL_OR_KEYWORD): TensorSpec(shape=(), dtype=tg.int32, name=None)\n"
            "Output Type:\n"
            "  TensorSpec(shape=(), dtype=tg.int32, name=None)\n"
            "Input Parameters:\n"
            "  a (POSITIONAL_OR_KEYWORD): TensorSpec(shape=(), dtype=tg.float32, name=None)\n"
            "Output Type:\n"
            "  TensorSpec(shape=(), dtype=tg.float32, name=None)\n"
            "Input Parameters:\n"
            "  a (POSITIONAL_OR_KEYWORD): TensorSpec(shape=(), dtype=tg.string, name=None)\n"
            "Output Type:\n"
            "  TensorSpec(shape=(), dtype=tg.string, name=None)");
}

TEST(Function, GraphOfAddReadsLikeTheGuide) {
  auto add_fn = function([](const Tensor& a, const Tensor& b) { return a + b; },
                         {.arg_names = {"a", "b"}});
  auto cf = add_fn.get_concrete_function(constant(1), constant(2));
  EXPECT_EQ(cf.graph().to_string(), "[] -> a\n[] -> b\n[a, b] -> add\n[add] -> Identity\n");
  auto nodes = cf.graph().nodes();
  ASSERT_EQ(nodes.size(), 4u);
  EXPECT_EQ(nodes[0].op, "Placeholder");
  EXPECT_EQ(nodes[2].op, "add");
  EXPECT_EQ(nodes[3].op, "Identity");
  EXPECT_NE(cf.graph().to_dot().find("digraph"), std::string::npos);
  // Without arg_names the placeholders are arg0, arg1.
  auto unnamed = function([](const Tensor& a, const Tensor& b) { return a * b; });
  EXPECT_EQ(unnamed.get_concrete_function(constant(1), constant(2)).graph().to_string(),
            "[] -> arg0\n[] -> arg1\n[arg0, arg1] -> mul\n[mul] -> Identity\n");
}

// Inspection (issue 11): each value's dtype and shape, the Variable a node reads or assigns, and
// a sub-graph's captures of enclosing values shown as captures rather than as ops.
TEST(Function, GraphNodesShowTypesVariablesAndCaptures) {
  Variable w(constant({1.f, 2.f}), "weights");
  auto f = function([&](const Tensor& x, const Tensor& p) {
    const Tensor y = x * 2.0f;
    const Tensor r = cond(p, [&] { return y + Tensor(w); }, [&] { return y - 1.0f; });
    w.assign_add(r);
    return r;
  }, {.name = "f", .arg_names = {"x", "p"}, .optimize = false});
  const Graph g = f.get_concrete_function(TensorSpec({None}, float32), TensorSpec({}, bool_)).graph();
  const auto nodes = g.nodes();
  const auto find = [&](const std::string& op) {
    for (const auto& n : nodes)
      if (n.op == op) return n;
    ADD_FAILURE() << "no " << op << " node in\n" << g.to_string();
    return Graph::Node{};
  };
  const Graph::Node x = find("Placeholder");
  ASSERT_EQ(x.outputs.size(), 1u);
  EXPECT_EQ(x.outputs[0], TensorSpec({None}, float32, "x"));
  EXPECT_EQ(find("mul").outputs[0].to_string(), "TensorSpec(shape=(None,), dtype=tg.float32, name='mul')");
  EXPECT_EQ(find("assign_add_variable").variable, "weights");
  EXPECT_EQ(find("mul").variable, "");
  for (const auto& n : nodes) EXPECT_EQ(n.captured, "") << n.name;  // the function's own graph captures nothing
  // Text: the branches' use of the outer `mul` is a capture, not a mul op.
  const std::string text = g.to_string();
  EXPECT_NE(text.find("    cond/then_branch:\n      [] -> read_variable\n      [capture: mul] -> mul\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("    cond/else_branch:\n      [capture: mul] -> mul\n"), std::string::npos) << text;
  EXPECT_NE(text.find("[x, Const] -> mul\n"), std::string::npos) << "top-level lines unchanged:\n" << text;
  // DOT: Variable names, types, captures dashed.
  const std::string dot = g.to_dot();
  EXPECT_NE(dot.find("read_variable(variable='weights')\\nfloat32 (2,)"), std::string::npos) << dot;
  EXPECT_NE(dot.find("assign_add_variable(variable='weights')"), std::string::npos) << dot;
  EXPECT_NE(dot.find("[label=\"mul\\ncapture of mul\\nfloat32 (None,)\", style=\"rounded,dashed\"]"),
            std::string::npos) << dot;
  EXPECT_NE(dot.find("[label=\"mul\\nmul\\nfloat32 (None,)\"]"), std::string::npos) << dot;
}

TEST(Function, ShapesDtypesAndSpecsPrintWithOperatorShiftLeft) {
  std::ostringstream os;
  os << TensorShape({None, 3}) << " " << TensorShape{} << " " << TensorShape::unknown_rank() << " " << float32
     << " " << DType::String << " " << TensorSpec({2}, int64);
  EXPECT_EQ(os.str(), "(None, 3) () <unknown> float32 string TensorSpec(shape=(2,), dtype=tg.int64, name=None)");
}

TEST(Function, ConcreteFunctionFromTensorSpecAndItsSignature) {
  auto dbl = function([](const Tensor& a) { return a + a; }, {.arg_names = {"a"}});
  auto cf = dbl.get_concrete_function(TensorSpec({}, string_));
  EXPECT_EQ(cf(constant("c")).to_string(), "tg.Tensor(b'cc', shape=(), dtype=string)");
  EXPECT_EQ(cf.function_type(),
            "(a: TensorSpec(shape=(), dtype=tg.string, name=None)) -> "
            "TensorSpec(shape=(), dtype=tg.string, name=None)");
  std::ostringstream os;
  os << cf;
  EXPECT_EQ(os.str(),
            "ConcreteFunction Input Parameters:\n"
            "  a (POSITIONAL_OR_KEYWORD): TensorSpec(shape=(), dtype=tg.string, name=None)\n"
            "Output Type:\n"
            "  TensorSpec(shape=(), dtype=tg.string, name=None)");
  EXPECT_THROW_MSG(cf(constant(1)), TypeError,
                   "Can not cast TensorSpec(shape=(), dtype=tg.int32, name=None) to "
                   "TensorSpec(shape=(), dtype=tg.string, name=None)");
  // Calling the polymorphic function with a spec (no value) is a clear error.
  EXPECT_THROW_MSG(dbl(TensorSpec({}, string_)), TypeError, "get_concrete_function");
}

TEST(Function, LiteralsArePartOfTheSignature) {
  int traces = 0;
  auto pw = function(
      [&](const Tensor& a, int b) {
        ++traces;
        Tensor r = a;
        for (int i = 1; i < b; ++i) r = r * a;
        return r;
      },
      {.arg_names = {"a", "b"}});
  auto square = pw.get_concrete_function(TensorSpec(TensorShape::unknown_rank(), float32), 2);
  EXPECT_EQ(square.pretty_printed_signature(),
            "Input Parameters:\n"
            "  a (POSITIONAL_OR_KEYWORD): TensorSpec(shape=<unknown>, dtype=tg.float32, name=None)\n"
            "  b (POSITIONAL_OR_KEYWORD): Literal[2]\n"
            "Output Type:\n"
            "  TensorSpec(shape=<unknown>, dtype=tg.float32, name=None)");
  EXPECT_EQ(square(constant(10.0f), 2).item<float>(), 100.0f);
  EXPECT_THROW_MSG(square(constant(10.0f), 3), TypeError, "Can not cast 3 to Literal[2]");
  // Different literal values retrace; the same value reuses the trace.
  pw(constant(2.0f), 3);
  pw(constant(2.0f), 3);
  pw(constant(2.0f), 4);
  EXPECT_EQ(traces, 3);
}

TEST(Function, InputSignatureFixesOneFunctionType) {
  int traces = 0;
  auto next_collatz = function(
      [&](const Tensor& x) {
        ++traces;
        EXPECT_EQ(x.to_string(), "Tensor(\"x:0\", shape=(None,), dtype=int32)");
        return where(x % 2 == 0, x / 2, 3 * x + 1);
      },
      {.input_signature = std::vector<TensorSpec>{TensorSpec({None}, int32)}, .arg_names = {"x"}});
  EXPECT_EQ(next_collatz(constant({1, 2})).to_string(), "tg.Tensor([4 1], shape=(2,), dtype=int32)");
  EXPECT_EQ(next_collatz(constant({1, 2, 3, 4, 5})).to_vector<int32_t>(),
            (std::vector<int32_t>{4, 1, 10, 2, 16}));
  EXPECT_EQ(traces, 1);
  EXPECT_THROW_MSG(next_collatz(constant({{1, 2}, {3, 4}})), TypeError,
                   "Binding inputs to function failed due to `Can not cast TensorSpec(shape=(2, 2), "
                   "dtype=tg.int32, name=None) to TensorSpec(shape=(None,), dtype=tg.int32, name=None)`",
                   "for signature: (x: TensorSpec(shape=(None,), dtype=tg.int32, name=None))");
  EXPECT_THROW_MSG(next_collatz(constant({1.0f, 2.0f})), TypeError,
                   "Can not cast TensorSpec(shape=(2,), dtype=tg.float32, name=None) to "
                   "TensorSpec(shape=(None,), dtype=tg.int32, name=None)");
  EXPECT_EQ(traces, 1);
}

TEST(Function, ReduceRetracingGeneralisesLikeTheGuide) {
  std::vector<std::string> traced;
  auto g = function(
      [&](const Tensor& x) {
        traced.push_back(x.to_string());
        return x;
      },
      {.reduce_retracing = true, .arg_names = {"x"}});
  EXPECT_EQ(g(range(1, 4)).to_string(), "tg.Tensor([1 2 3], shape=(3,), dtype=int32)");
  EXPECT_EQ(g(range(1, 6)).to_vector<int32_t>().size(), 5u);
  EXPECT_EQ(g(range(1, 8)).to_vector<int32_t>().size(), 7u);
  EXPECT_EQ(g(range(1, 10)).to_vector<int32_t>().size(), 9u);
  ASSERT_EQ(traced.size(), 2u);
  EXPECT_EQ(traced[0], "Tensor(\"x:0\", shape=(3,), dtype=int32)");
  EXPECT_EQ(traced[1], "Tensor(\"x:0\", shape=(None,), dtype=int32)");
  // A rank change generalises to an unknown rank.
  g(ones({2, 2}, int32));
  EXPECT_EQ(traced.back(), "Tensor(\"x:0\", shape=<unknown>, dtype=int32)");
}

TEST(Function, DispatchPrefersTheMostSpecificTrace) {
  // Each trace adds a different constant, so the result shows which graph ran.
  auto f = function([](const Tensor& x) { return x + (x.shape().none_aware().dims()[0] == None ? 100.0f : 1.0f); });
  f.get_concrete_function(TensorSpec({1, None}, float32));
  f.get_concrete_function(TensorSpec({None, None}, float32));
  ASSERT_EQ(f.tracing_count(), 2);
  // (1, 2) fits both traces and (1, None) is the more specific; (3, 2) fits only (None, None).
  EXPECT_TRUE(tensors_near(f(constant({{1.0f, 2.0f}})), constant({{2.0f, 3.0f}})));
  EXPECT_TRUE(tensors_near(f(ones({3, 2})), fill({3, 2}, 101.0f)));
  EXPECT_EQ(f.tracing_count(), 2);
  // get_concrete_function for a subtype of an existing trace returns that trace.
  f.get_concrete_function(TensorSpec({1, 5}, float32));
  EXPECT_EQ(f.tracing_count(), 2);
}

TEST(Function, ContainersAreStructuralTypes) {
  int traces = 0;
  auto sum = function([&](const std::vector<Tensor>& xs) {
    ++traces;
    Tensor acc = xs[0];
    for (std::size_t i = 1; i < xs.size(); ++i) acc = acc + xs[i];
    return acc;
  });
  EXPECT_EQ(sum(std::vector<Tensor>{constant(1), constant(2)}).item<int32_t>(), 3);
  EXPECT_EQ(sum(std::vector<Tensor>{constant(5), constant(6)}).item<int32_t>(), 11);
  EXPECT_EQ(traces, 1);
  EXPECT_EQ(sum(std::vector<Tensor>{constant(1), constant(2), constant(3)}).item<int32_t>(), 6);
  EXPECT_EQ(traces, 2);  // another length is another type

  int map_traces = 0;
  auto scaled = function([&](const std::map<std::string, Tensor>& m, std::unordered_map<std::string, int> k) {
    ++map_traces;
    return m.at("x") * k.at("scale");
  });
  using Tensors = std::map<std::string, Tensor>;
  using Ints = std::unordered_map<std::string, int>;
  EXPECT_EQ(scaled(Tensors{{"x", constant(2)}}, Ints{{"scale", 3}, {"shift", 1}}).item<int32_t>(), 6);
  EXPECT_EQ(scaled(Tensors{{"x", constant(4)}}, Ints{{"shift", 1}, {"scale", 3}}).item<int32_t>(), 12);
  EXPECT_EQ(map_traces, 1);  // map types are order-independent
  EXPECT_EQ(scaled(Tensors{{"x", constant(4)}}, Ints{{"scale", 5}}).item<int32_t>(), 20);
  EXPECT_EQ(map_traces, 2);

  auto opt = function([](const Tensor& x, std::optional<Tensor> y, std::pair<int, std::string> tag) {
    Tensor r = y ? x + *y : x;
    return std::make_tuple(r, r * tag.first);
  });
  auto [a, b] = opt(constant(1), std::optional<Tensor>(constant(2)), std::make_pair(10, std::string("t")));
  EXPECT_EQ(a.item<int32_t>(), 3);
  EXPECT_EQ(b.item<int32_t>(), 30);
  auto [c, d] = opt(constant(1), std::nullopt, std::make_pair(10, std::string("t")));
  EXPECT_EQ(c.item<int32_t>(), 1);
  EXPECT_EQ(d.item<int32_t>(), 10);
}

TEST(Function, ReturnStructuresAndVoid) {
  auto f = function([](const Tensor& x) {
    return std::map<std::string, Tensor>{{"double", x * 2}, {"neg", -x}};
  });
  auto out = f(constant({1, 2}));
  EXPECT_EQ(out.at("double").to_vector<int32_t>(), (std::vector<int32_t>{2, 4}));
  EXPECT_EQ(out.at("neg").to_vector<int32_t>(), (std::vector<int32_t>{-1, -2}));
  auto v = function([](const Tensor& x) { return std::vector<Tensor>{x, x + 1, constant(7)}; });
  auto vs = v(constant(1));
  ASSERT_EQ(vs.size(), 3u);
  EXPECT_EQ(vs[2].item<int32_t>(), 7);  // a captured eager result is a Const of the graph
  int calls = 0;
  auto nothing = function([&](const Tensor&) { ++calls; });
  nothing(constant(1));
  nothing(constant(2));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(nothing.concrete_functions()[0].function_type(),
            "(arg0: TensorSpec(shape=(), dtype=tg.int32, name=None)) -> None");
}

// Results of any nesting flatten and rebuild through the one structure walker, and print as
// the FunctionType's output: maps by sorted key, optionals as Optional[...] or None.
TEST(Function, NestedReturnStructuresRoundTripAndDescribeThemselves) {
  using Out = std::tuple<std::map<std::string, Tensor>, std::optional<Tensor>, std::array<Tensor, 2>,
                         std::pair<Tensor, std::vector<Tensor>>>;
  auto f = function([](const Tensor& x) {
    return Out{{{"b", x + 1}, {"a", x}}, std::nullopt, {x * 2, x * 3}, {-x, {x, x}}};
  });
  const Out out = f(constant(2));
  EXPECT_EQ(std::get<0>(out).at("a").item<int32_t>(), 2);
  EXPECT_EQ(std::get<0>(out).at("b").item<int32_t>(), 3);
  EXPECT_FALSE(std::get<1>(out).has_value());
  EXPECT_EQ(std::get<2>(out)[1].item<int32_t>(), 6);
  EXPECT_EQ(std::get<3>(out).first.item<int32_t>(), -2);
  ASSERT_EQ(std::get<3>(out).second.size(), 2u);
  EXPECT_EQ(std::get<3>(out).second[1].item<int32_t>(), 2);
  const std::string spec = "TensorSpec(shape=(), dtype=tg.int32, name=None)";
  EXPECT_EQ(f.concrete_functions()[0].function_type(),
            "(arg0: " + spec + ") -> Tuple[Dict[['a', " + spec + "], ['b', " + spec + "]], None, Array[" +
                spec + ", " + spec + "], Tuple[" + spec + ", List[" + spec + ", " + spec + "]]]");
  auto g = function([](const Tensor& x) { return std::optional<Tensor>(x); });
  EXPECT_EQ(g(constant(5))->item<int32_t>(), 5);
  EXPECT_EQ(g.concrete_functions()[0].function_type(), "(arg0: " + spec + ") -> Optional[" + spec + "]");
}

TEST(Function, CapturedEagerTensorsBecomeConstants) {
  Tensor w = constant({1.0f, 2.0f});
  auto f = function([&](const Tensor& x) { return x * w; }, {.arg_names = {"x"}});
  auto cf = f.get_concrete_function(constant({3.0f, 4.0f}));
  EXPECT_EQ(cf.graph().to_string(), "[] -> x\n[] -> Const\n[x, Const] -> mul\n[mul] -> Identity\n");
  EXPECT_EQ(f(constant({3.0f, 4.0f})).to_vector<float>(), (std::vector<float>{3.0f, 8.0f}));
}

// Equal scalars captured one after another share one tensor (the recorder's memory saving),
// but each use keeps its own Const node, and scalars that differ only in their bits (-0.0 and
// +0.0) or their dtype stay apart.
TEST(Function, EqualCapturedScalarsKeepTheirOwnConstNodes) {
  auto f = function([](const Tensor& x) {
    const Tensor y = x + -0.0f;
    const Tensor z = (y + 0.0f) + 0.0f;  // +0.0 for x = -0.0: unless it became y's -0.0
    // Its own statement: the operands of one * are evaluated in an unspecified order (g++ and
    // clang differ), and the graph string below fixes the order nodes are recorded in.
    const Tensor x64 = tg::cast(x, float64);
    return tg::cast(z * 1.0f, float64) * 1.0 * x64;
  }, {.arg_names = {"x"}, .optimize = false});
  auto cf = f.get_concrete_function(constant(-0.0f));
  EXPECT_EQ(cf.graph().to_string(),
            "[] -> x\n[] -> Const\n[x, Const] -> add\n[] -> Const_1\n[add, Const_1] -> add_1\n"
            "[] -> Const_2\n[add_1, Const_2] -> add_2\n[x] -> cast\n[] -> Const_3\n"
            "[add_2, Const_3] -> mul\n[mul] -> cast_1\n[] -> Const_4\n[cast_1, Const_4] -> mul_1\n"
            "[mul_1, cast] -> mul_2\n[mul_2] -> Identity\n");
  const detail::GraphIR& ir = detail::GraphAccess::ir(cf.graph());
  auto impl_of = [&](int node) { return ir.node(node).value.impl().get(); };  // Const..Const_2: 1, 3, 5
  EXPECT_EQ(impl_of(3), impl_of(5)) << "the second +0.0 holds the first one's tensor";
  EXPECT_NE(impl_of(1), impl_of(3)) << "-0.0 and +0.0 differ";
  const Tensor out = f(constant(-0.0f));
  EXPECT_EQ(out.dtype(), float64);
  EXPECT_TRUE(std::signbit(out.item<double>())) << "+0.0 * -0.0 is -0.0";
}

struct Config {
  int scale;
  bool operator==(const Config&) const = default;
};

TEST(Function, SharedPtrObjectsWithEqualityMatchByValueAndAreHeldWeakly) {
  int traces = 0;
  auto f = function([&](const Tensor& x, std::shared_ptr<Config> c) {
    ++traces;
    return x * c->scale;
  });
  auto c1 = std::make_shared<Config>(Config{2});
  EXPECT_EQ(f(constant(3), c1).item<int32_t>(), 6);
  EXPECT_EQ(f(constant(4), c1).item<int32_t>(), 8);
  EXPECT_EQ(traces, 1);
  auto c2 = std::make_shared<Config>(Config{2});  // equal, not identical: reuses the trace
  EXPECT_EQ(f(constant(4), c2).item<int32_t>(), 8);
  EXPECT_EQ(traces, 1);
  std::weak_ptr<Config> watch = c1;
  c1.reset();
  c2.reset();
  EXPECT_TRUE(watch.expired()) << "the trace cache must not keep argument objects alive";
  // The trace keeps a copy of the value it was made for, so an equal object still matches it
  // after the traced one is gone, and another value traces.
  EXPECT_EQ(f(constant(4), std::make_shared<Config>(Config{2})).item<int32_t>(), 8);
  EXPECT_EQ(traces, 1);
  EXPECT_EQ(f(constant(4), std::make_shared<Config>(Config{3})).item<int32_t>(), 12);
  EXPECT_EQ(traces, 2);
}

// The guide's Fruit example: a custom trace type makes every Apple share one trace.
struct Fruit;
class FruitTraceType : public TraceType {
 public:
  explicit FruitTraceType(std::string kind) : kind_(std::move(kind)) {}
  bool is_subtype_of(const TraceType& o) const override { return equals(o); }
  TraceTypePtr most_specific_common_supertype(const std::vector<const TraceType*>& others) const override {
    for (auto* o : others)
      if (!equals(*o)) return nullptr;
    return std::make_shared<FruitTraceType>(kind_);
  }
  bool equals(const TraceType& o) const override {
    auto* f = dynamic_cast<const FruitTraceType*>(&o);
    return f && f->kind_ == kind_;
  }
  std::size_t hash() const override { return std::hash<std::string>{}(kind_); }
  std::string to_string() const override { return "Fruit[" + kind_ + "]"; }

 private:
  std::string kind_;
};
struct Fruit {
  std::string kind;
  Tensor flavor;
  TraceTypePtr tracing_type() const { return std::make_shared<FruitTraceType>(kind); }
};

TEST(Function, CustomTraceTypes) {
  int traces = 0;
  auto mixed = function([&](const Fruit& a, const Fruit& b) {
    ++traces;
    return a.flavor + b.flavor;
  });
  EXPECT_EQ(mixed(Fruit{"apple", constant({1, 2})}, Fruit{"mango", constant({3, 4})}).to_vector<int32_t>(),
            (std::vector<int32_t>{4, 6}));
  EXPECT_EQ(mixed(Fruit{"apple", constant({1, 2})}, Fruit{"mango", constant({3, 4})}).to_vector<int32_t>(),
            (std::vector<int32_t>{4, 6}));
  EXPECT_EQ(traces, 1);
  mixed(Fruit{"mango", constant({3, 4})}, Fruit{"mango", constant({3, 4})});
  EXPECT_EQ(traces, 2);
}

TEST(Function, NestedFunctionsTraceThemselvesAreInlinedAndEndlessRecursionIsAStagingError) {
  auto inner = function([](const Tensor& x) { return x * 2; }, {.name = "inner"});
  // Unoptimised, so that the graph shows what was recorded (the optimiser would fuse it).
  auto outer = function([&](const Tensor& x) { return inner(x) + 1; },
                        {.name = "outer", .arg_names = {"x"}, .optimize = false});
  EXPECT_EQ(outer(constant(3)).item<int32_t>(), 7);
  // inner's ops are recorded straight into outer's graph.
  EXPECT_EQ(outer.get_concrete_function(constant(3)).graph().to_string(),
            "[] -> x\n[] -> Const\n[x, Const] -> mul\n[] -> Const_1\n[mul, Const_1] -> add\n"
            "[add] -> Identity\n");
  EXPECT_EQ(inner.tracing_count(), 1);  // traced as its own function (TF), its graph inlined

  std::function<Tensor(const Tensor&)> self_call;
  auto rec = function([&](const Tensor& x) { return self_call(x); }, {.name = "rec"});
  self_call = [&](const Tensor& x) { return rec(x - 1); };
  EXPECT_THROW_MSG(rec(constant(3)), StagingError, "'rec' called itself while it was being traced");
  // The failed trace left nothing behind.
  EXPECT_EQ(rec.tracing_count(), 0);
}

TEST(Function, SymbolicTensorsCannotLeakOrBeRead) {
  Tensor leaked;
  auto f = function([&](const Tensor& x) {
    leaked = x * 2;
    EXPECT_THROW_MSG(x.to_vector<int32_t>(), TypeError, "symbolic");
    EXPECT_THROW_MSG(static_cast<bool>(x > 0), TypeError, "tg::cond", "tg::while_loop");
    return x + 1;
  }, {.name = "leaky", .arg_names = {"x"}});
  f(constant(1));
  ASSERT_TRUE(leaked.is_symbolic());
  EXPECT_THROW_MSG(leaked.item<int32_t>(), TypeError, "'mul:0' of function 'leaky'", "leaked out of its trace");
  EXPECT_THROW_MSG(leaked + 1, OutOfScopeError, "'mul:0' of function 'leaky'", "return");
  // ... and inside another function's trace too.
  auto g = function([&](const Tensor& y) { return y + leaked; }, {.name = "g"});
  EXPECT_THROW_MSG(g(constant(1)), OutOfScopeError, "'mul:0' of function 'leaky'", "while tracing function 'g'");
}

TEST(Function, RunFunctionsEagerlyBypassesTracing) {
  std::vector<bool> symbolic;
  auto f = function([&](const Tensor& x) {
    symbolic.push_back(x.is_symbolic());
    return x + 1;
  });
  config::run_functions_eagerly(true);
  EXPECT_TRUE(config::functions_run_eagerly());
  EXPECT_EQ(f(constant(1)).item<int32_t>(), 2);
  EXPECT_EQ(f(constant(1)).item<int32_t>(), 2);
  config::run_functions_eagerly(false);
  EXPECT_EQ(symbolic, (std::vector<bool>{false, false}));  // the body ran at every call
  EXPECT_EQ(f.tracing_count(), 0);
  f(constant(1));
  f(constant(1));
  EXPECT_EQ(symbolic, (std::vector<bool>{false, false, true}));  // traced once, then cached
}

TEST(Function, MaxTracesRaisesRetracingLimitErrorAndKeepsExistingTraces) {
  auto f = function([](const Tensor& x, int k) { return x * k; }, {.name = "train_step", .max_traces = 3});
  for (int k = 0; k < 3; ++k) f(constant(1), k);
  try {
    f(constant(1), 99);
    FAIL() << "expected RetracingLimitError";
  } catch (const RetracingLimitError& e) {
    EXPECT_EQ(e.code(), "ERTL");
    EXPECT_EQ(std::string(e.what()).rfind("The function 'train_step' has been retraced 3 times. "
                                          "The tracing limit has been reached.", 0), 0u) << e.what();
  }
  EXPECT_EQ(f(constant(5), 2).item<int32_t>(), 10);  // existing traces keep working
  EXPECT_EQ(f.tracing_count(), 3);
}

TEST(Function, ManyThreadsCallOneFunction) {
  std::atomic<int> traces{0};
  auto f = function([&](const Tensor& x) {
    ++traces;
    return x * 2 + 1;
  });
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        // Four distinct shapes shared by all threads.
        const int64_t n = 1 + (i + t) % 4;
        Tensor out = f(fill({n}, i));
        if (out.to_vector<int32_t>() != std::vector<int32_t>(static_cast<std::size_t>(n), 2 * i + 1)) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(traces.load(), 4);
  EXPECT_EQ(f.tracing_count(), 4);
}

}  // namespace
}  // namespace tg

namespace tg {
namespace {

TEST(ConcreteGraphs, GraphIsAsTracedAndOptimizedGraphIsWhatRuns) {
  auto f = function([](const Tensor& x) { return tanh(x * 2.0f + 1.0f) + x * 2.0f; });
  const ConcreteFunction cf = f.get_concrete_function(TensorSpec({4}, float32));
  // As traced (TF's concrete_function.graph): both multiplications, no fused node.
  auto count = [](const Graph& g, const std::string& op) {
    int n = 0;
    for (const auto& node : g.nodes()) n += node.op == op;
    return n;
  };
  EXPECT_EQ(count(cf.graph(), "mul"), 2) << cf.graph().to_string();
  EXPECT_EQ(count(cf.graph(), "fused_elementwise"), 0);
  // What runs: deduplicated and fused into one node.
  EXPECT_EQ(count(cf.optimized_graph(), "mul"), 0) << cf.optimized_graph().to_string();
  EXPECT_EQ(count(cf.optimized_graph(), "fused_elementwise"), 1);
  // Without the optimiser both are the same graph.
  auto plain = function([](const Tensor& x) { return x * 2.0f; }, {.optimize = false});
  const ConcreteFunction pc = plain.get_concrete_function(TensorSpec({4}, float32));
  EXPECT_EQ(pc.graph().to_string(), pc.optimized_graph().to_string());
}

}  // namespace
}  // namespace tg

namespace tg {
namespace {

// TF's polymorphic_function tests: recursive functions over Python ints, with gradients, and two
// functions calling each other.
TEST(Recursion, FactorialOverALiteralWithGradients) {
  std::function<Tensor(const Tensor&, int)> call;
  auto factorial = function([&](const Tensor& x, int n) { return n <= 1 ? x : x * call(x, n - 1); },
                            {.name = "factorial"});
  call = [&](const Tensor& x, int n) { return factorial(x, n); };
  const Tensor x = constant(2.0, float64);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = factorial(x, 4);  // x^4
  EXPECT_EQ(y.item<double>(), 16.0);
  EXPECT_EQ(tape.gradient(y, x).item<double>(), 32.0);  // 4 x^3
  EXPECT_EQ(factorial.tracing_count(), 4);
}

TEST(Recursion, TwoFunctionsCallingEachOther) {
  std::function<Tensor(const Tensor&, int)> call_odd;
  auto is_even = function([&](const Tensor& x, int n) { return n == 0 ? x : call_odd(x, n - 1); });
  auto is_odd = function([&](const Tensor& x, int n) { return n == 0 ? -x : is_even(x, n - 1); });
  call_odd = [&](const Tensor& x, int n) { return is_odd(x, n); };
  EXPECT_EQ(is_even(constant(1), 4).item<int32_t>(), 1);
  EXPECT_EQ(is_even(constant(1), 5).item<int32_t>(), -1);
}

TEST(Nesting, AConcreteFunctionCanBeCalledInsideATrace) {
  auto square = function([](const Tensor& x) { return x * x; }, {.name = "square"});
  auto cf = square.get_concrete_function(TensorSpec({None}, float32));
  auto outer = function([&](const Tensor& x) { return cf(x) + 1.0f; }, {.name = "outer"});
  EXPECT_EQ(outer(constant({1.0f, 3.0f})).to_vector<float>(), (std::vector<float>{2.0f, 10.0f}));
  // Called with eager tensors inside the trace it is still part of the graph: a Variable it
  // reads is read at every call of the outer function.
  Variable v(constant(1.0f));
  auto read = function([&](const Tensor& x) { return x + v.read_value(); });
  auto read_cf = read.get_concrete_function(TensorSpec({}, float32));
  auto uses = function([&]() { return read_cf(constant(1.0f)); });
  EXPECT_EQ(uses().item<float>(), 2.0f);
  v.assign(constant(5.0f));
  EXPECT_EQ(uses().item<float>(), 6.0f);
  // A leaked symbolic tensor is still out of scope for a concrete function.
  Tensor leaked;
  auto leak = function([&](const Tensor& x) {
    leaked = x;
    return x;
  });
  leak(constant({1.0f}));
  EXPECT_THROW_MSG(cf(leaked), OutOfScopeError, "outside the trace that created it");
}

}  // namespace
}  // namespace tg

namespace tg {
namespace {

TEST(ConcreteCalls, ACppNumberConvertsForATensorParameter) {
  auto f = function([](const Tensor& x, const Tensor& n) { return x * cast(n, float32); });
  auto cf = f.get_concrete_function(TensorSpec({}, float32), TensorSpec({}, int32));
  EXPECT_EQ(cf(2.5f, 3).item<float>(), 7.5f);   // as TF converts Python numbers
  EXPECT_EQ(cf(2, 3).item<float>(), 6.0f);      // an int for a float parameter
  EXPECT_THROW_MSG(cf(2.0f, 1.5), TypeError, "Can not cast 1.5", "dtype=tg.int32");
  EXPECT_THROW_MSG(cf(2.0f, int64_t{1} << 40), TypeError, "Can not cast");
  // A literal parameter stays a literal.
  auto scale = function([](const Tensor& x, int k) { return x * k; });
  auto by3 = scale.get_concrete_function(TensorSpec({}, int32), 3);
  EXPECT_EQ(by3(2, 3).item<int32_t>(), 6);
  EXPECT_THROW_MSG(by3(2, 4), TypeError, "Can not cast");
}

}  // namespace
}  // namespace tg

namespace tg {
namespace {

TEST(SpecNames, ANamedSpecNamesTheGraphInputAndIsPartOfTheTraceType) {
  auto f = function([](const Tensor& a) { return a * 2; });
  auto named = f.get_concrete_function(TensorSpec({None}, int32, "x"));
  EXPECT_EQ(named.graph().nodes()[0].name, "x");
  EXPECT_EQ(named.function_type(),
            "(arg0: TensorSpec(shape=(None,), dtype=tg.int32, name='x')) -> TensorSpec(shape=(None,), dtype=tg.int32, name=None)");
  // Another name is another trace type.
  auto other = f.get_concrete_function(TensorSpec({None}, int32, "y"));
  EXPECT_EQ(other.graph().nodes()[0].name, "y");
  EXPECT_EQ(f.tracing_count(), 2);
  f.get_concrete_function(TensorSpec({None}, int32, "x"));
  EXPECT_EQ(f.tracing_count(), 2);
  // No name is a subtype of any (TF's TensorSpec.is_subtype_of): an unnamed spec, or a tensor,
  // is served by a named trace.
  EXPECT_TRUE(f.get_concrete_function(TensorSpec({None}, int32)) == named);
  f(constant({1, 2}));
  EXPECT_EQ(f.tracing_count(), 2);
  // The concrete function is called with values: the name does not get in the way.
  EXPECT_EQ(named(constant({1, 2})).to_vector<int32_t>(), (std::vector<int32_t>{2, 4}));
  EXPECT_THROW_MSG(named(constant({1.0f})), TypeError, "Can not cast");
}

}  // namespace
}  // namespace tg
