// tg::cond, tg::while_loop, tg::for_range and tg::TensorArray: eagerly, traced, and traced +
// optimised, against values computed independently in plain C++.
#include <cmath>
#include <functional>
#include <utility>

#include "graph/graph_ir.h"
#include "trace/function_core.h"
#include "passes/passes.h"
#include "support/graph_util.h"
#include "support/test_util.h"
#include "trace/concrete.h"

namespace tg {
namespace {

using testing::PrintCapture;

struct VerifyOn {
  VerifyOn() { detail::set_verify_graphs(true); }
};
const VerifyOn verify_on;

// ---- cond ----------------------------------------------------------------------------------

TEST(Cond, EagerRunsOnlyTheChosenBranch) {
  int t = 0, f = 0;
  Tensor x = constant(3.0f);
  Tensor y = cond(x > 0, [&] { ++t; return x * 2; }, [&] { ++f; return -x; });
  EXPECT_TENSOR_EQ(y, constant(6.0f));
  EXPECT_EQ(t, 1);
  EXPECT_EQ(f, 0);
  y = cond(x < 0, [&] { ++t; return x * 2; }, [&] { ++f; return -x; });
  EXPECT_TENSOR_EQ(y, constant(-3.0f));
  EXPECT_EQ(f, 1);
}

TEST(Cond, TracedBuildsOneNodeAndChoosesAtRunTime) {
  for (bool optimize : {false, true}) {
    int traced_t = 0, traced_f = 0;
    auto f = function([&](const Tensor& x) {
      return cond(reduce_sum(x) > 0, [&] { ++traced_t; return x * 2.0f; }, [&] { ++traced_f; return x - 1.0f; });
    }, {.name = "f", .optimize = optimize});
    EXPECT_TENSOR_EQ(f(constant({1.0f, 2.0f})), constant({2.0f, 4.0f}));
    EXPECT_TENSOR_EQ(f(constant({-1.0f, -2.0f})), constant({-2.0f, -3.0f}));
    EXPECT_EQ(f.tracing_count(), 1);
    EXPECT_EQ(traced_t, 1);  // both branches traced once, at the first call
    EXPECT_EQ(traced_f, 1);
    const Graph& g = f.get_concrete_function(constant({1.0f, 2.0f})).graph();
    EXPECT_EQ(testing::count_op(g, "cond"), 1) << g.to_string();
    EXPECT_EQ(testing::count_op(g, "mul"), 0) << "branch ops belong to the sub-graphs";
    EXPECT_NE(g.to_string().find("cond/then_branch:"), std::string::npos) << g.to_string();
    EXPECT_NE(g.to_dot().find("subgraph cluster_"), std::string::npos);
  }
}

TEST(Cond, TupleAndVectorResults) {
  auto f = function([](const Tensor& p, const Tensor& a, const Tensor& b) {
    auto [s, d] = cond(p, [&] { return std::tuple{a + b, a - b}; }, [&] { return std::tuple{a * b, a / b}; });
    std::vector<Tensor> v = cond(p, [&] { return std::vector<Tensor>{a}; }, [&] { return std::vector<Tensor>{b}; });
    return std::vector<Tensor>{s, d, v[0]};
  });
  for (bool p : {true, false}) {
    auto out = f(constant(p), constant(6.0f), constant(3.0f));
    EXPECT_TENSOR_EQ(out[0], constant(p ? 9.0f : 18.0f));
    EXPECT_TENSOR_EQ(out[1], constant(p ? 3.0f : 2.0f));
    EXPECT_TENSOR_EQ(out[2], constant(p ? 6.0f : 3.0f));
  }
}

TEST(Cond, BranchShapesMergeToTheMostGeneralShape) {
  auto f = function([](const Tensor& p, const Tensor& x) {
    return cond(p, [&] { return x; }, [&] { return concat({x, x}, 0); });
  });
  auto cf = f.get_concrete_function(TensorSpec({}, bool_), TensorSpec({3}, float32));
  const auto& ir = *detail::FunctionAccess::impl(cf)->ir;
  EXPECT_EQ(ir.nodes[static_cast<std::size_t>(ir.outputs[0])].outputs[0].shape.to_string(), "(None,)");
  EXPECT_EQ(f(constant(true), constant({1.0f, 2.0f, 3.0f})).shape().to_string(), "(3,)");
  EXPECT_EQ(f(constant(false), constant({1.0f, 2.0f, 3.0f})).shape().to_string(), "(6,)");
}

TEST(Cond, CapturesOuterSymbolicTensorsAndNests) {
  auto f = function([](const Tensor& x, const Tensor& y) {
    Tensor z = x * y;  // a value of the enclosing trace, used inside both levels
    return cond(x > 0, [&] {
      return cond(y > 0, [&] { return z + x; }, [&] { return z - y; });
    }, [&] { return z * 10; });
  });
  auto ref = [](int x, int y) { return x > 0 ? (y > 0 ? x * y + x : x * y - y) : x * y * 10; };
  for (int x : {-2, 3})
    for (int y : {-5, 4}) EXPECT_EQ(f(constant(x), constant(y)).item<int32_t>(), ref(x, y)) << x << "," << y;
  EXPECT_EQ(f.tracing_count(), 1);
  const Graph& g = f.get_concrete_function(constant(1), constant(1)).graph();
  EXPECT_EQ(testing::count_op(g, "cond"), 1);
  EXPECT_NE(g.to_string().find("cond/then_branch:"), std::string::npos);
}

TEST(Cond, VoidBranchesWithPrintsRunAtEveryCall) {
  PrintCapture out;
  auto f = function([](const Tensor& x) {
    cond(x > 0, [&] { print("positive", x); }, [&] { print("not positive"); });
    print("after");
  });
  f(constant(1));
  f(constant(-1));
  f(constant(5));
  EXPECT_EQ(out.take(), "positive 1\nafter\nnot positive\nafter\npositive 5\nafter\n");
  EXPECT_EQ(f.tracing_count(), 1);
  const Graph& g = f.get_concrete_function(constant(1)).graph();
  EXPECT_EQ(testing::count_op(g, "stateful_cond"), 1) << g.to_string();
}

TEST(Cond, VariableAssignsInBranchesAreKeptAndOrdered) {
  Variable v(constant(0));
  auto f = function([&](const Tensor& x) {
    v.assign_add(1);
    cond(x > 0, [&] { v.assign_add(x); }, [&] { v.assign_sub(x); });
    return v.read_value() * 2;  // reads after the cond's update
  });
  EXPECT_EQ(f(constant(3)).item<int32_t>(), 8);   // (0 + 1 + 3) * 2
  EXPECT_EQ(f(constant(-2)).item<int32_t>(), 14);  // (4 + 1 + 2) * 2
  EXPECT_EQ(v.read_value().item<int32_t>(), 7);
}

TEST(Cond, ConstantPredicateFoldsWhenOptimised) {
  auto f = function([](const Tensor& x) {
    Tensor p = constant(true);
    return x + cond(p, [] { return constant(1); }, [] { return constant(2); });
  });
  EXPECT_EQ(f(constant(10)).item<int32_t>(), 11);
}

// ---- while_loop ----------------------------------------------------------------------------

TEST(WhileLoop, EagerIsACppLoop) {
  auto [i, total] = while_loop([](const Tensor& i, const Tensor&) { return i < 5; },
                               [](const Tensor& i, const Tensor& t) { return std::tuple{i + 1, t + i}; },
                               std::tuple{constant(0), constant(0)});
  EXPECT_EQ(i.item<int32_t>(), 5);
  EXPECT_EQ(total.item<int32_t>(), 10);
}

TEST(WhileLoop, TracedBodyAppearsOnceWhateverTheTripCount) {
  for (bool optimize : {false, true}) {
    int body_traces = 0;
    auto f = function([&](const Tensor& n) {
      auto [i, acc] = while_loop([&](const Tensor& i, const Tensor&) { return i < n; },
                                 [&](const Tensor& i, const Tensor& acc) { ++body_traces; return std::tuple{i + 1, acc * 2}; },
                                 std::tuple{constant(0), constant(int64_t{1})});
      return acc;
    }, {.name = "pow2", .optimize = optimize});
    for (int n : {0, 1, 5, 40}) EXPECT_EQ(f(constant(n)).item<int64_t>(), int64_t{1} << n) << n;
    EXPECT_EQ(body_traces, 1);
    const Graph& g = f.get_concrete_function(constant(3)).graph();
    EXPECT_EQ(testing::count_op(g, "while"), 1) << g.to_string();
    EXPECT_NE(g.to_string().find("while/body:"), std::string::npos);
  }
}

TEST(WhileLoop, VectorLoopVarsAndCaptures) {
  auto f = function([](const Tensor& x, const Tensor& step) {
    auto out = while_loop([&](const std::vector<Tensor>& v) { return reduce_sum(v[0]) < 100.0f; },
                          [&](const std::vector<Tensor>& v) { return std::vector<Tensor>{v[0] + step, v[1] + 1}; },
                          std::vector<Tensor>{x, constant(0)});
    return out;
  });
  auto out = f(constant({1.0f, 2.0f}), constant(7.0f));
  // reduce_sum grows by 14 per iteration from 3: 3 + 14k >= 100 first at k = 7.
  EXPECT_TENSOR_EQ(out[0], constant({50.0f, 51.0f}));
  EXPECT_EQ(out[1].item<int32_t>(), 7);
}

TEST(WhileLoop, ShapeInvariantsAllowDeclaredDimsToChange) {
  WhileOptions opts;
  opts.shape_invariants = {TensorShape{}, TensorShape{None}};
  auto grow = [&](const Tensor& n) {
    return while_loop([&](const Tensor& i, const Tensor&) { return i < n; },
                      [](const Tensor& i, const Tensor& x) { return std::tuple{i + 1, concat({x, x}, 0)}; },
                      std::tuple{constant(0), constant({1})}, opts);
  };
  auto f = function([&](const Tensor& n) { return std::get<1>(grow(n)); });
  EXPECT_EQ(f(constant(3)).shape().to_string(), "(8,)");
  EXPECT_EQ(std::get<1>(grow(constant(2))).shape().to_string(), "(4,)");  // eagerly too
  auto cf = f.get_concrete_function(constant(1));
  const auto& ir = *detail::FunctionAccess::impl(cf)->ir;
  EXPECT_EQ(ir.nodes[static_cast<std::size_t>(ir.outputs[0])].outputs[0].shape.to_string(), "(None,)");
}

TEST(WhileLoop, PrintAndAssignInTheBodyRunEveryIteration) {
  PrintCapture out;
  Variable v(constant(0));
  auto f = function([&](const Tensor& n) {
    return while_loop([&](const Tensor& i) { return i < n; },
                      [&](const Tensor& i) { print("i =", i); v.assign_add(i); return i + 1; }, constant(0));
  });
  EXPECT_EQ(f(constant(3)).item<int32_t>(), 3);
  EXPECT_EQ(out.take(), "i = 0\ni = 1\ni = 2\n");
  f(constant(2));
  EXPECT_EQ(out.take(), "i = 0\ni = 1\n");
  EXPECT_EQ(v.read_value().item<int32_t>(), 4);
  EXPECT_EQ(testing::count_op(f.get_concrete_function(constant(1)).graph(), "stateful_while"), 1);
}

TEST(WhileLoop, MaximumIterations) {
  WhileOptions opts;
  opts.maximum_iterations = 4;
  auto body = [](const Tensor& i) { return i + 1; };
  auto always = [](const Tensor& i) { return i >= 0; };
  EXPECT_EQ(while_loop(always, body, constant(0), opts).item<int32_t>(), 4);
  auto f = function([&](const Tensor& x) { return while_loop(always, body, x, opts); });
  EXPECT_EQ(f(constant(10)).item<int32_t>(), 14);
}

TEST(WhileLoop, NestedLoopsInsideCond) {
  auto f = function([](const Tensor& n) {
    return cond(n > 0, [&] {
      // sum over i < n, j < i of 1 = n(n-1)/2
      return for_range(n, constant(0), [](const Tensor& i, const Tensor& s) {
        return for_range(i, s, [](const Tensor&, const Tensor& t) { return t + 1; });
      });
    }, [] { return constant(-1); });
  });
  for (int n : {0, 1, 4, 7}) EXPECT_EQ(f(constant(n)).item<int32_t>(), n > 0 ? n * (n - 1) / 2 : -1) << n;
}

TEST(WhileLoop, AConstantLoopStaysInTheGraphAndIsNotFolded) {
  int body_traces = 0;
  auto f = function([&] {
    return while_loop([](const Tensor& i) { return i < 5; }, [&](const Tensor& i) { ++body_traces; return i + 1; },
                      constant(0));
  });
  EXPECT_EQ(f().item<int32_t>(), 5);
  EXPECT_EQ(f().item<int32_t>(), 5);
  EXPECT_EQ(body_traces, 1);
  EXPECT_EQ(testing::count_op(f.get_concrete_function().graph(), "while"), 1) << f.get_concrete_function().graph().to_string();
}

TEST(Passes, DeadStatelessCondIsRemovedAStatefulOneIsKept) {
  PrintCapture out;
  auto f = function([](const Tensor& x) {
    (void)cond(x > 0, [&] { return x * 2; }, [&] { return x; });  // result unused
    cond(x > 0, [] { print("p"); }, [] {});
    return x + 1;
  });
  EXPECT_EQ(f(constant(1)).item<int32_t>(), 2);
  EXPECT_EQ(out.take(), "p\n");
  const Graph& g = f.get_concrete_function(constant(1)).optimized_graph();  // what the passes left
  EXPECT_EQ(testing::count_op(g, "cond"), 0) << g.to_string();
  EXPECT_EQ(testing::count_op(g, "stateful_cond"), 1) << g.to_string();
}

// ---- for_range and the guide's examples ----------------------------------------------------

std::string fizzbuzz_reference(int n) {
  std::string s;
  for (int i = 1; i <= n; ++i)
    s += i % 15 == 0 ? "fizzbuzz\n" : i % 3 == 0 ? "fizz\n" : i % 5 == 0 ? "buzz\n" : std::to_string(i) + "\n";
  return s;
}

TEST(ForRange, FizzBuzzTracesOnceAndPrintsAtEveryCall) {
  PrintCapture out;
  int loop_traces = 0;
  auto fizzbuzz = function([&](const Tensor& n) {
    for_range({1, n + 1}, [&](const Tensor& i) {
      ++loop_traces;
      cond(i % 15 == 0, [] { print("fizzbuzz"); }, [&] {
        cond(i % 3 == 0, [] { print("fizz"); }, [&] {
          cond(i % 5 == 0, [] { print("buzz"); }, [&] { print(i); });
        });
      });
    });
  });
  fizzbuzz(constant(5));
  EXPECT_EQ(out.take(), fizzbuzz_reference(5));
  fizzbuzz(constant(20));
  EXPECT_EQ(out.take(), fizzbuzz_reference(20));
  EXPECT_EQ(loop_traces, 1);
  EXPECT_EQ(fizzbuzz.tracing_count(), 1);
}

TEST(ForRange, EagerAndTracedAgreeWithNegativeAndSymbolicSteps) {
  auto sum = [](const Tensor& a, const Tensor& b, const Tensor& d) {
    return for_range({a, b, d}, constant(0), [](const Tensor& i, const Tensor& s) { return s + i; });
  };
  auto f = function(sum);
  auto ref = [](int a, int b, int d) {
    int s = 0;
    for (int i = a; d > 0 ? i < b : i > b; i += d) s += i;
    return s;
  };
  for (auto [a, b, d] : {std::tuple{0, 10, 3}, std::tuple{10, 0, -2}, std::tuple{5, 5, 1}, std::tuple{-3, 4, 1}}) {
    EXPECT_EQ(sum(constant(a), constant(b), constant(d)).item<int32_t>(), ref(a, b, d));
    EXPECT_EQ(f(constant(a), constant(b), constant(d)).item<int32_t>(), ref(a, b, d));
  }
}

TEST(ForRange, TanhLoopMatchesAPlainLoop) {
  auto tanh_loop = [](Tensor x) {
    return while_loop([](const Tensor& x) { return reduce_sum(x) > 1.0f; }, [](const Tensor& x) { return tanh(x); }, x);
  };
  auto f = function(tanh_loop);
  std::vector<float> v{0.72f, 0.64f, 0.73f, 0.90f, 0.87f};
  std::vector<float> ref = v;
  auto sum = [](const std::vector<float>& a) { float s = 0; for (float e : a) s += e; return s; };
  while (sum(ref) > 1.0f)
    for (float& e : ref) e = std::tanh(e);
  const Tensor x = constant(v, {5});
  EXPECT_TENSOR_NEAR(f(x), constant(ref, {5}), 1e-5);
  EXPECT_TENSOR_NEAR(tanh_loop(x), constant(ref, {5}), 1e-5);
}

Tensor dynamic_rnn(const Tensor& input_data, const Tensor& initial_state) {
  Tensor data = transpose(input_data, {1, 0, 2});  // [batch, time, features] -> [time, batch, features]
  const int64_t max_seq_len = data.shape().dims()[0];
  TensorArray states(float32, max_seq_len);
  auto [state, out] = for_range(Range(max_seq_len), std::pair{initial_state, states},
                                [&](const Tensor& i, const std::pair<Tensor, TensorArray>& s) {
                                  Tensor next = gather(data, i, 0) + s.first;
                                  return std::pair{next, s.second.write(i, next)};
                                });
  return transpose(out.stack(), {1, 0, 2});
}

TEST(ForRange, DynamicRnnWithATensorArray) {
  const Tensor input = random_uniform({2, 3, 4}, 0.0f, 1.0f, 7);
  const Tensor init = zeros({2, 4});
  // Reference: running sums over the time axis.
  std::vector<float> in = input.to_vector<float>(), ref(in.size());
  for (int b = 0; b < 2; ++b)
    for (int f = 0; f < 4; ++f) {
      float acc = 0;
      for (int t = 0; t < 3; ++t) ref[static_cast<std::size_t>((b * 3 + t) * 4 + f)] = acc += in[static_cast<std::size_t>((b * 3 + t) * 4 + f)];
    }
  EXPECT_TENSOR_NEAR(dynamic_rnn(input, init), constant(ref, {2, 3, 4}), 1e-6);
  auto f = function(dynamic_rnn);
  EXPECT_TENSOR_NEAR(f(input, init), constant(ref, {2, 3, 4}), 1e-6);
  auto cf = f.get_concrete_function(input, init);
  const auto& ir = *detail::FunctionAccess::impl(cf)->ir;
  EXPECT_EQ(ir.nodes[static_cast<std::size_t>(ir.outputs[0])].outputs[0].shape.to_string(), "(2, 3, 4)");
}

// The docs' dynamic_rnn (control-flow.md, examples/guide/autograph.cpp) as written there: the
// time dim read as a tensor, so that it may be None.
tg::Tensor docs_dynamic_rnn(const tg::Tensor& input_data, const tg::Tensor& initial_state) {
  const tg::Tensor data = tg::transpose(input_data, {1, 0, 2});  // [time, batch, features]
  const tg::Tensor max_seq_len = tg::shape(data)[0];
  auto [state, states] = tg::for_range(
      max_seq_len, std::pair{initial_state, tg::TensorArray(tg::float32, max_seq_len)},
      [&](const tg::Tensor& i, const std::pair<tg::Tensor, tg::TensorArray>& s) {
        tg::Tensor next = tg::gather(data, i) + s.first;
        return std::pair{next, s.second.write(i, next)};
      });
  return tg::transpose(states.stack(), {1, 0, 2});
}

TEST(ForRange, DocsDynamicRnnRunsWithANoneTimeDim) {
  auto f = function(docs_dynamic_rnn,
                    {.input_signature = std::vector<TensorSpec>{TensorSpec({2, None, 4}, float32),
                                                                TensorSpec({2, 4}, float32)}});
  for (int64_t t : {1, 3, 6}) {
    const Tensor input = random_uniform({2, t, 4}, 0.0f, 1.0f, 11);
    const Tensor init = random_uniform({2, 4}, 0.0f, 1.0f, 12);
    EXPECT_TENSOR_NEAR(f(input, init), dynamic_rnn(input, init), 1e-6) << "time " << t;
    EXPECT_TENSOR_NEAR(docs_dynamic_rnn(input, init), dynamic_rnn(input, init), 1e-6) << "eager, time " << t;
  }
  EXPECT_EQ(f.tracing_count(), 1);
  auto cf = f.get_concrete_function(TensorSpec({2, None, 4}, float32), TensorSpec({2, 4}, float32));
  const auto& ir = *detail::FunctionAccess::impl(cf)->ir;
  EXPECT_EQ(ir.nodes[static_cast<std::size_t>(ir.outputs[0])].outputs[0].shape.to_string(), "(2, None, 4)");
}

TEST(TensorArraySizedByATensor, RunTimeSizePadsUnwrittenElementsWithZeros) {
  auto f = function([](const Tensor& n) {
    TensorArray ta(int32, n);
    EXPECT_THROW(ta.size(), ValueError);
    ta = ta.write(0, constant({7, 8}));  // one of n elements written
    return std::pair{ta.stack(), ta.size_tensor()};
  }, {.input_signature = std::vector<TensorSpec>{TensorSpec({}, int64)}});
  const auto [stacked, size] = f(constant(int64_t{3}));
  EXPECT_TENSOR_EQ(stacked, constant({{7, 8}, {0, 0}, {0, 0}}));
  EXPECT_TENSOR_EQ(size, constant(3));
  EXPECT_TENSOR_EQ(f(constant(int64_t{1})).first, constant({{7, 8}}));
}

TEST(TensorArraySizedByATensor, KnownElementShapeAndEagerSizes) {
  auto f = function([](const Tensor& x) {
    TensorArray ta(float32, shape(x)[0], false, TensorShape{2});
    return for_range(shape(x)[0], ta, [&](const Tensor& i, const TensorArray& a) {
      return a.write(i, gather(x, i) * 2.0f);
    }).stack();
  }, {.input_signature = std::vector<TensorSpec>{TensorSpec({None, 2}, float32)}});
  EXPECT_TENSOR_EQ(f(constant({{1.f, 2.f}, {3.f, 4.f}, {5.f, 6.f}})),
                   constant({{2.f, 4.f}, {6.f, 8.f}, {10.f, 12.f}}));
  // an eager size is read at once, as the int64_t form
  TensorArray eager(float32, constant(2));
  EXPECT_EQ(eager.size(), 2);
  EXPECT_FALSE(eager.dynamic_size());
  EXPECT_THROW(eager.write(2, constant(1.f)), InvalidArgumentError);
  EXPECT_THROW_MSG(TensorArray(float32, constant(2.f)), TypeError, "[TensorArray]", "int32 or int64 scalar");
  EXPECT_THROW_MSG(TensorArray(float32, constant({2})), TypeError, "[TensorArray]", "int32 or int64 scalar");
}

// The guide's measure_graph_size: an unrolled C++ loop grows the graph with the trip count, a
// for_range loop does not.
TEST(ForRange, GraphSizeDoesNotGrowWithTheTripCount) {
  // The pairs are tensors, so that the loop's ops are recorded (C++ ints would be computed at
  // trace time).
  using Data = std::vector<std::pair<Tensor, Tensor>>;
  auto unrolled = function([](const Data& data) {
    Tensor loss = constant(0);
    for (const auto& [x, y] : data) loss = loss + abs(y - x);
    return loss;
  }, {.optimize = false});
  auto staged = function([](const Tensor& xs, const Tensor& ys) {
    return for_range(Range(size(xs)), constant(0), [&](const Tensor& i, const Tensor& loss) {
      return loss + abs(gather(ys, i, 0) - gather(xs, i, 0));
    });
  }, {.optimize = false});
  auto nodes = [](const ConcreteFunction& cf) { return cf.graph().nodes().size(); };
  const Data small(3, {constant(1), constant(1)}), big(10, {constant(1), constant(1)});
  const auto unrolled_small = nodes(unrolled.get_concrete_function(small));
  const auto unrolled_big = nodes(unrolled.get_concrete_function(big));
  EXPECT_GT(unrolled_big, unrolled_small + 10);
  const auto staged_small = nodes(staged.get_concrete_function(TensorSpec({3}, int32), TensorSpec({3}, int32)));
  const auto staged_big = nodes(staged.get_concrete_function(TensorSpec({10}, int32), TensorSpec({10}, int32)));
  EXPECT_EQ(staged_small, staged_big);
  EXPECT_LT(staged_big, unrolled_big);
  EXPECT_EQ(staged(constant({1, 5, 2}), constant({4, 1, 2})).item<int32_t>(), 7);
}

// ---- TensorArray ---------------------------------------------------------------------------

TEST(TensorArray, EagerFixedAndDynamic) {
  TensorArray ta(float32, 3);
  ta = ta.write(0, constant({1.0f, 2.0f})).write(2, constant({5.0f, 6.0f}));
  EXPECT_TENSOR_EQ(ta.read(2), constant({5.0f, 6.0f}));
  EXPECT_TENSOR_EQ(ta.stack(), constant({{1.0f, 2.0f}, {0.0f, 0.0f}, {5.0f, 6.0f}}));
  TensorArray d(int32, 0, true);
  for (int i = 0; i < 4; ++i) d = d.write(i, constant(i * i));
  EXPECT_TENSOR_EQ(d.stack(), constant({0, 1, 4, 9}));
  TensorArray e(float32, 2, false, TensorShape{3});
  EXPECT_TENSOR_EQ(e.stack(), zeros({2, 3}));
}

TEST(TensorArray, WritesAreValues) {
  TensorArray a(int32, 2);
  TensorArray b = a.write(0, constant(7));
  TensorArray c = b.write(0, constant(8));
  EXPECT_TENSOR_EQ(b.stack(), constant({7, 0}));
  EXPECT_TENSOR_EQ(c.stack(), constant({8, 0}));
}

TEST(TensorArray, DynamicArrayInATracedLoop) {
  auto squares = function([](const Tensor& n) {
    return for_range(n, TensorArray(int32, 0, true), [](const Tensor& i, const TensorArray& ta) {
      return ta.write(i, i * i);
    }).stack();
  });
  EXPECT_TENSOR_EQ(squares(constant(5)), constant({0, 1, 4, 9, 16}));
  EXPECT_TENSOR_EQ(squares(constant(2)), constant({0, 1}));
  EXPECT_EQ(squares.tracing_count(), 1);
}

// Gradients through TensorArrays: they were marked not differentiable, so a gradient through a
// stack() came back as zeros (a plausible wrong number). Each case is checked against the same
// computation written with tg::stack / indexing, whose gradients are known good.
std::vector<Tensor> gradients_of(const std::function<Tensor()>& loss, const std::vector<Tensor>& sources) {
  GradientTape tape;
  for (const Tensor& s : sources) tape.watch(s);
  return tape.gradient(loss(), sources);
}

TEST(TensorArrayGradient, DynamicRnnMatchesTheUnrolledStack) {
  const Tensor input = random_uniform({2, 3, 4}, -1.0f, 1.0f, 21);
  const Tensor init = random_uniform({2, 4}, -1.0f, 1.0f, 22);
  const Tensor weights = random_uniform({2, 3, 4}, -1.0f, 1.0f, 23);
  auto unrolled = [&](const Tensor& x, const Tensor& h0) {
    Tensor h = h0;
    std::vector<Tensor> states;
    for (int64_t t = 0; t < 3; ++t) states.push_back(h = gather(x, constant(static_cast<int32_t>(t)), 1) + h);
    return stack(states, 1);
  };
  const std::vector<Tensor> want = gradients_of(
      [&] { return reduce_sum(tanh(unrolled(input, init)) * weights); }, {input, init});
  auto loss_eager = [&] { return reduce_sum(tanh(dynamic_rnn(input, init)) * weights); };
  const std::vector<Tensor> eager = gradients_of(loss_eager, {input, init});
  // Traced, the TensorArray is a loop variable: it needs its element shape to be differentiated.
  auto traced_rnn = [](const Tensor& x, const Tensor& h0) {
    const Tensor data = transpose(x, {1, 0, 2});
    const Tensor steps = shape(data)[0];
    auto [state, states] = for_range(
        steps, std::pair{h0, TensorArray(float32, steps, false, TensorShape{2, 4})},
        [&](const Tensor& i, const std::pair<Tensor, TensorArray>& s) {
          Tensor next = gather(data, i) + s.first;
          return std::pair{next, s.second.write(i, next)};
        });
    return transpose(states.stack(), {1, 0, 2});
  };
  auto traced_grads = function([&](const Tensor& x, const Tensor& h0) {
    return gradients_of([&] { return reduce_sum(tanh(traced_rnn(x, h0)) * weights); }, {x, h0});
  });
  const std::vector<Tensor> traced = traced_grads(input, init);
  auto without_element_shape = function([&](const Tensor& x, const Tensor& h0) {
    return gradients_of([&] { return reduce_sum(tanh(docs_dynamic_rnn(x, h0)) * weights); }, {x, h0});
  });
  EXPECT_THROW_MSG(without_element_shape(input, init), InvalidArgumentError, "starts as a scalar",
                   "element_shape");
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_GT(reduce_max(abs(want[i])).item<float>(), 0.1f);
    EXPECT_TENSOR_NEAR(eager[i], want[i], 1e-5) << "eager, source " << i;
    EXPECT_TENSOR_NEAR(traced[i], want[i], 1e-5) << "traced, source " << i;
  }
}

TEST(TensorArrayGradient, ReadsAddUpAndOverwrittenRowsGetNone) {
  const Tensor a = constant({1.0f, 2.0f}), b = constant({3.0f, 4.0f}), c = constant({5.0f, 6.0f});
  for (bool dynamic : {false, true}) {
    auto loss = [&] {
      TensorArray ta = TensorArray(float32, 2, dynamic).write(0, a).write(1, b);
      ta = ta.write(1, c);  // b is overwritten: no gradient reaches it
      return reduce_sum(ta.read(0) * 2.0f + ta.read(0) * 3.0f) + reduce_sum(ta.stack() * constant({{1.0f, 1.0f}, {7.0f, 7.0f}}));
    };
    const std::vector<Tensor> g = gradients_of(loss, {a, b, c});
    EXPECT_TENSOR_EQ(g[0], constant({6.0f, 6.0f})) << "dynamic " << dynamic;
    EXPECT_TENSOR_EQ(g[1], constant({0.0f, 0.0f})) << "dynamic " << dynamic;
    EXPECT_TENSOR_EQ(g[2], constant({7.0f, 7.0f})) << "dynamic " << dynamic;
    auto traced = function([&](const Tensor& x, const Tensor& y, const Tensor& z) {
      return gradients_of([&] {
        TensorArray ta = TensorArray(float32, 2, dynamic).write(0, x).write(1, y).write(1, z);
        return reduce_sum(ta.read(0) * 2.0f + ta.read(0) * 3.0f) + reduce_sum(ta.stack() * constant({{1.0f, 1.0f}, {7.0f, 7.0f}}));
      }, {x, y, z});
    });
    const std::vector<Tensor> t = traced(a, b, c);
    for (std::size_t i = 0; i < 3; ++i) EXPECT_TENSOR_EQ(t[i], g[i]) << "traced, dynamic " << dynamic << ", " << i;
  }
}

}  // namespace
}  // namespace tg
