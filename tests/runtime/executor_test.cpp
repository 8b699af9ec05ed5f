// The planned executor: arena reuse and in-place, fresh outputs, values that escape into
// Variables, None dims, exceptions, concurrent calls, and allocations on the cached path.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <new>
#include <thread>
#include <tuple>

#include "core/buffer.h"
#include "core/tensor_impl.h"
#include "runtime/plan.h"
#include "core/thread_pool.h"
#include "support/allocation_counter.h"
#include "support/test_util.h"
#include "trace/function_core.h"
#include "tracegraph/control_flow.h"
#include "tracegraph/gradient.h"

namespace tg {
namespace {

// The plan a concrete function runs.
const detail::Plan& plan_of(const ConcreteFunction& cf) { return *detail::FunctionAccess::impl(cf)->plan; }

std::vector<float> iota_values(int64_t n) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 13) * 0.1f - 0.6f;
  return v;
}

Tensor chain(const Tensor& x0, int rounds) {
  Tensor x = x0;
  for (int r = 0; r < rounds; ++r) x = tanh(x * 1.01f + 0.5f);
  return x;
}

std::vector<float> chain_reference(std::vector<float> v, int rounds) {
  for (float& e : v)
    for (int r = 0; r < rounds; ++r) e = std::tanh(e * 1.01f + 0.5f);
  return v;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5f) << "at " << i;
}

// A graph whose two placeholders read the same input index (the executor takes one input per
// placeholder, so input 1 goes unread): a run on moved-in inputs must not move input 0 into the
// first placeholder and leave the second an empty handle.
TEST(PlannedExecutor, PlaceholdersSharingAnInputBothGetItFromMovedInputs) {
  detail::GraphIR g{detail::new_graph_id()};
  const detail::ValueType f32_3{float32, TensorShape({3})};
  for (int k = 0; k < 2; ++k) {
    detail::GraphNode p;
    p.kind = detail::NodeKind::kPlaceholder;
    p.name = g.unique_name("x");
    p.input_index = 0;
    p.outputs = {f32_3};
    g.placeholders.push_back(g.add_node(std::move(p)));
  }
  detail::GraphNode add;
  add.op = detail::OpId::Add;
  add.name = g.unique_name("add");
  add.inputs = {detail::ValueRef{0, 0}, detail::ValueRef{1, 0}};
  add.outputs = {f32_3};
  const int sum = g.add_node(std::move(add));
  detail::GraphNode out;
  out.kind = detail::NodeKind::kOutput;
  out.name = g.unique_name("Identity");
  out.inputs = {detail::ValueRef{sum, 0}};
  out.outputs = {f32_3};
  g.outputs.push_back(g.add_node(std::move(out)));
  const detail::Plan plan(g);
  for (int call = 0; call < 2; ++call) {
    std::vector<Tensor> inputs{constant({1.0f, 2.0f, 3.0f}), constant({7.0f, 7.0f, 7.0f})};
    EXPECT_EQ(plan.run(std::move(inputs)).at(0).to_vector<float>(), (std::vector<float>{2.0f, 4.0f, 6.0f}));
  }
}

TEST(PlannedExecutor, ChainRunsInOneArenaBufferInPlace) {
  auto f = function([](const Tensor& x) { return chain(x, 10); }, {.optimize = false});
  const Tensor x = constant(iota_values(1000), TensorShape({1000}));
  auto cf = f.get_concrete_function(x);
  const detail::PlanStats& st = plan_of(cf).stats();
  EXPECT_EQ(st.steps, 30);
  EXPECT_EQ(st.arena_buffers, 1) << "every intermediate of a chain fits one reused buffer";
  EXPECT_EQ(st.arena_bytes, 1000 * 4);
  EXPECT_EQ(st.in_place, 28) << "all but the first op (reads the input) and the last (output)";
  EXPECT_FALSE(st.dynamic);
  expect_near(f(x).to_vector<float>(), chain_reference(iota_values(1000), 10));
  expect_near(f(x).to_vector<float>(), chain_reference(iota_values(1000), 10));
}

TEST(PlannedExecutor, ValuesStillReadLaterAreNotOverwritten) {
  // y is read after tanh(y): tanh must not write into y's buffer.
  auto f = function([](const Tensor& x) {
    Tensor y = x * 2.0f;
    Tensor z = tanh(y);
    Tensor w = z * 3.0f;
    return w + y;
  }, {.optimize = false});
  const std::vector<float> v = iota_values(64);
  std::vector<float> want(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) want[i] = std::tanh(v[i] * 2.0f) * 3.0f + v[i] * 2.0f;
  const Tensor x = constant(v, TensorShape({64}));
  expect_near(f(x).to_vector<float>(), want);
  expect_near(f(x).to_vector<float>(), want);
}

TEST(PlannedExecutor, OutputsAreFreshEveryCall) {
  auto f = function([](const Tensor& x) {
    Tensor h = x * 2.0f + 1.0f;
    return std::vector<Tensor>{h * 1.0f, reshape(h, {2, 2})};
  }, {.optimize = false});
  const Tensor a = constant({1.0f, 2.0f, 3.0f, 4.0f});
  const Tensor b = constant({10.0f, 20.0f, 30.0f, 40.0f});
  std::vector<Tensor> first = f(a);
  std::vector<Tensor> second = f(b);
  EXPECT_EQ(first[0].to_vector<float>(), (std::vector<float>{3, 5, 7, 9}));
  EXPECT_EQ(first[1].to_vector<float>(), (std::vector<float>{3, 5, 7, 9})) << "a view output too";
  EXPECT_EQ(second[0].to_vector<float>(), (std::vector<float>{21, 41, 61, 81}));
  EXPECT_NE(detail::data_of<float>(first[0]), detail::data_of<float>(second[0]));
  EXPECT_NE(detail::data_of<float>(first[1]), detail::data_of<float>(second[1]));
}

// A small result's tensor is reused by a later call only once nothing holds it or a view of it
// (Plan's reuses_results): results still held, views of dropped ones, results fed back as the
// next call's input, and results kept by a Variable keep their values, traced and optimised,
// and equal the eager run's.
TEST(PlannedExecutor, ResultsStillHeldAreNeverReusedByLaterCalls) {
  const auto body = [](const Tensor& x) {
    Tensor h = x * 2.0f + 1.0f;
    return std::vector<Tensor>{relu(h), h * h};
  };
  const auto want = [](float x, int k) { const float h = x * 2.0f + 1.0f; return k == 0 ? std::max(h, 0.0f) : h * h; };
  const auto input = [](float base) { return constant({base, base - 1.0f, base - 2.0f, base - 3.0f}); };
  const auto expect_results = [&](const std::vector<Tensor>& got, float base, const char* what) {
    for (int k = 0; k < 2; ++k)
      for (int i = 0; i < 4; ++i)
        EXPECT_EQ(got[static_cast<std::size_t>(k)].to_vector<float>()[static_cast<std::size_t>(i)],
                  want(base - static_cast<float>(i), k))
            << what << ", output " << k << ", element " << i;
  };
  for (const bool eager : {false, true}) {
    for (const bool optimize : {false, true}) {
      config::run_functions_eagerly(eager);
      auto f = function(body, {.optimize = optimize});
      // Held results: every later call writes elsewhere.
      std::vector<std::vector<Tensor>> held;
      for (int call = 0; call < 4; ++call) held.push_back(f(input(static_cast<float>(call))));
      for (int call = 0; call < 4; ++call) expect_results(held[static_cast<std::size_t>(call)], static_cast<float>(call), "held");
      // A view of a dropped result keeps its storage from reuse.
      Tensor view = reshape(f(input(10.0f))[0], {2, 2});
      for (int call = 0; call < 3; ++call) f(input(20.0f));
      EXPECT_EQ(view.to_vector<float>(), (std::vector<float>{21, 19, 17, 15}));
      // Results fed back as the next call's input, the last one held meanwhile (y = f(y)).
      std::vector<Tensor> y = f(input(0.5f));
      std::vector<float> expected = {0.5f, -0.5f, -1.5f, -2.5f};
      for (float& e : expected) e = want(e, 0);
      for (int call = 0; call < 5; ++call) {
        y = f(y[0]);
        for (float& e : expected) e = want(e, 0);
        EXPECT_EQ(y[0].to_vector<float>(), expected) << "fed back, call " << call;
      }
      // A result a Variable keeps.
      Variable v(zeros({4}));
      v.assign(f(input(3.0f))[1]);
      for (int call = 0; call < 3; ++call) f(input(-7.0f));
      EXPECT_EQ(v.read_value().to_vector<float>(), (std::vector<float>{49, 25, 9, 1}));
      // Dropped results: a later call may take their storage, and its values are its own.
      for (int call = 0; call < 3; ++call) expect_results(f(input(static_cast<float>(call))), static_cast<float>(call), "dropped");
    }
  }
  config::run_functions_eagerly(false);
  // Traced, a dropped result's storage is what the next call returns: no allocation per call.
  auto g = function([](const Tensor& x) { return x * 2.0f; });
  const Tensor x = constant({1.0f, 2.0f});
  g(x);  // traces
  const float* first = detail::data_of<float>(g(x));
#if !defined(__SANITIZE_THREAD__)  // a ThreadSanitizer build allocates every result (executor.cpp)
  EXPECT_EQ(detail::data_of<float>(g(x)), first);
#else
  EXPECT_NE(first, nullptr);
#endif
}

TEST(PlannedExecutor, ValuesStoredInVariablesAreNotArenaMemory) {
  Variable v(zeros({3}));
  auto f = function([&](const Tensor& x) {
    v.assign(x * 2.0f);
    return x + 1.0f;
  }, {.optimize = false});
  f(constant({1.0f, 2.0f, 3.0f}));
  const Tensor snapshot = v.read_value();
  f(constant({5.0f, 6.0f, 7.0f}));
  EXPECT_EQ(snapshot.to_vector<float>(), (std::vector<float>{2, 4, 6}))
      << "a later call must not overwrite the tensor an earlier call stored";
  EXPECT_EQ(v.read_value().to_vector<float>(), (std::vector<float>{10, 12, 14}));
}

TEST(PlannedExecutor, NoneDimsInferShapesPerCall) {
  auto f = function([](const Tensor& x) { return chain(x, 3) + reduce_sum(x); },
                    {.input_signature = std::vector<TensorSpec>{TensorSpec(TensorShape({None}), float32)},
                     .optimize = false});
  for (int64_t n : {3, 17, 5}) {
    const std::vector<float> v = iota_values(n);
    float sum = 0;
    for (float e : v) sum += e;
    std::vector<float> want = chain_reference(v, 3);
    for (float& e : want) e += sum;
    expect_near(f(constant(v, TensorShape({n}))).template to_vector<float>(), want);
  }
  EXPECT_EQ(f.tracing_count(), 1);
  EXPECT_TRUE(plan_of(f.concrete_functions()[0]).stats().dynamic);
}

TEST(PlannedExecutor, KernelErrorsLeaveThePlanUsable) {
  auto f = function([](const Tensor& p, const Tensor& i) { return gather(p * 2.0f, i) + 1.0f; },
                    {.optimize = false});
  const Tensor p = constant({1.0f, 2.0f, 3.0f});
  EXPECT_EQ(f(p, constant({2, 0})).to_vector<float>(), (std::vector<float>{7, 3}));
  EXPECT_THROW(f(p, constant({5, 0})), InvalidArgumentError);
  EXPECT_EQ(f(p, constant({1, 1})).to_vector<float>(), (std::vector<float>{5, 5}));
}

TEST(PlannedExecutor, ConcurrentCallsGetTheirOwnFrames) {
  auto f = function([](const Tensor& x) { return chain(x, 5); }, {.optimize = false});
  const Tensor warm = constant(iota_values(256), TensorShape({256}));
  f(warm);
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<float> v = iota_values(256);
      for (float& e : v) e += static_cast<float>(t);
      const std::vector<float> want = chain_reference(v, 5);
      const Tensor x = constant(v, TensorShape({256}));
      for (int i = 0; i < 200; ++i) {
        const std::vector<float> got = f(x).to_vector<float>();
        for (std::size_t k = 0; k < got.size(); ++k) bad[static_cast<std::size_t>(t)] += std::fabs(got[k] - want[k]) > 1e-5f;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad, (std::vector<int>{0, 0, 0, 0}));
}

// The cached call path lends the caller's tensors to the plan without copying their handles. An
// input that a kernel may keep (a Variable, a view, control flow) or that is itself a result is
// copied instead. Each function below runs on the cached path (its second call), and the
// caller's tensor dies before the result is read: under ASan a lent handle that escaped would be
// a use after free.
template <class F>
std::vector<float> cached_call_after_input_dies(F& f, const std::vector<float>& values) {
  {
    const Tensor warm = constant(values, TensorShape({static_cast<int64_t>(values.size())}));
    f(warm);  // traces
  }
  Tensor result;
  {
    const Tensor x = constant(values, TensorShape({static_cast<int64_t>(values.size())}));
    result = f(x);  // the cached path: x is lent
  }
  return result.to_vector<float>();
}

int lent_inputs(const ConcreteFunction& cf) { return plan_of(cf).stats().lent_inputs; }

TEST(PlannedExecutor, PureReadersBorrowTheCallersTensors) {
  auto add = function([](const Tensor& a, const Tensor& b) { return a * b + a; });
  const Tensor a = constant({1.0f, 2.0f}), b = constant({3.0f, 4.0f});
  EXPECT_EQ(lent_inputs(add.get_concrete_function(a, b)), 2);
  EXPECT_EQ(add(a, b).to_vector<float>(), (std::vector<float>{4, 10}));
  EXPECT_EQ(add(a, b).to_vector<float>(), (std::vector<float>{4, 10}));
  EXPECT_EQ(a.impl().use_count(), 1) << "the calls kept no handle of the caller's tensor";
}

TEST(PlannedExecutor, AnInputReturnedAsIsIsCopiedNotLent) {
  auto identity = function([](const Tensor& x) { return x; });
  auto both = function([](const Tensor& x) { return std::vector<Tensor>{x, x * 2.0f}; });
  EXPECT_EQ(cached_call_after_input_dies(identity, {1, 2, 3}), (std::vector<float>{1, 2, 3}));
  {
    const Tensor warm = constant({1.0f});
    both(warm);
  }
  std::vector<Tensor> r;
  {
    const Tensor x = constant({5.0f});
    r = both(x);
  }
  EXPECT_EQ(r[0].to_vector<float>(), (std::vector<float>{5}));
  EXPECT_EQ(r[1].to_vector<float>(), (std::vector<float>{10}));
  EXPECT_EQ(lent_inputs(identity.get_concrete_function(constant({1.0f}))), 0);
  EXPECT_EQ(lent_inputs(both.get_concrete_function(constant({1.0f}))), 0);
}

TEST(PlannedExecutor, InputsAKernelMayKeepAreCopiedNotLent) {
  Variable v(zeros({3}));
  auto store = function([&](const Tensor& x) {
    v.assign(x);
    return x + 1.0f;
  });
  auto view = function([](const Tensor& x) { return reshape(x, {3, 1}); });
  auto branch = function([](const Tensor& p, const Tensor& x) {
    return cond(p, [&] { return x; }, [&] { return x * 2.0f; });
  });
  auto loop = function([](const Tensor& n, const Tensor& x) {
    auto [i, y] = while_loop([&](const Tensor& i, const Tensor&) { return i < n; },
                             [](const Tensor& i, const Tensor& y) { return std::tuple{i + 1, y}; },
                             std::tuple{constant(0), x});
    return y;
  });
  EXPECT_EQ(cached_call_after_input_dies(store, {1, 2, 3}), (std::vector<float>{2, 3, 4}));
  EXPECT_EQ(v.read_value().to_vector<float>(), (std::vector<float>{1, 2, 3})) << "the Variable owns what it was given";
  EXPECT_EQ(cached_call_after_input_dies(view, {1, 2, 3}), (std::vector<float>{1, 2, 3}));
  const Tensor yes = constant(true), three = constant(3);
  auto branch_of = [&](const Tensor& x) { return branch(yes, x); };
  auto loop_of = [&](const Tensor& x) { return loop(three, x); };
  EXPECT_EQ(cached_call_after_input_dies(branch_of, {4, 5}), (std::vector<float>{4, 5}));
  EXPECT_EQ(cached_call_after_input_dies(loop_of, {6, 7}), (std::vector<float>{6, 7}));
  const Tensor x3 = constant({1.0f, 2.0f, 3.0f});
  EXPECT_EQ(lent_inputs(store.get_concrete_function(x3)), 0);
  EXPECT_EQ(lent_inputs(view.get_concrete_function(x3)), 0);
  EXPECT_EQ(lent_inputs(branch.get_concrete_function(yes, x3)), 0) << "the cond node reads both";
}

// A tape observing a call, and a trace inlining one, may keep the call's inputs: the cached path
// gives them owned handles.
TEST(PlannedExecutor, TapesAndTracesGetOwnedInputsFromTheCachedPath) {
  auto square = function([](const Tensor& x) { return x * x; });
  square(constant({1.0f, 2.0f}));
  const Tensor x = constant({3.0f, 4.0f});
  GradientTape tape;
  tape.watch(x);
  Tensor y;
  {
    const Tensor z = x * 1.0f;  // dies before the tape reads it back
    y = square(z);
  }
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{9, 16}));
  EXPECT_EQ(tape.gradient(reduce_sum(y), x).to_vector<float>(), (std::vector<float>{6, 8}));
  auto outer = function([&](const Tensor& x) { return square(x) + 1.0f; });
  EXPECT_EQ(cached_call_after_input_dies(outer, {2, 3}), (std::vector<float>{5, 10}));
}

// More tensors than the call's inline room (eight): the lent pointers move to the heap.
TEST(PlannedExecutor, CallsOfManyTensorsLendThemAll) {
  auto sum = function([](const std::vector<Tensor>& xs) {
    Tensor s = xs[0];
    for (std::size_t i = 1; i < xs.size(); ++i) s = s + xs[i] * static_cast<float>(i + 1);
    return s;
  });
  std::vector<Tensor> xs;
  float want = 0;
  for (int i = 0; i < 12; ++i) {
    xs.push_back(constant(static_cast<float>(i)));
    want += static_cast<float>(i) * static_cast<float>(i + 1);
  }
  EXPECT_EQ(sum(xs).item<float>(), want);
  EXPECT_EQ(sum(xs).item<float>(), want);
  EXPECT_EQ(lent_inputs(sum.get_concrete_function(xs)), 12);
}

long allocations_of_run(const ConcreteFunction& cf, const std::vector<Tensor>& inputs) {
  const detail::Plan& plan = plan_of(cf);
  plan.run(inputs);  // the first run builds the frame
  long n = 0;
  {
    testing::CountAllocations counter;
    std::vector<Tensor> out = plan.run(inputs);
    n = counter.count();
  }
  return n;
}

Tensor unary_chain(const Tensor& x0, int rounds) {
  Tensor x = x0;
  for (int r = 0; r < rounds; ++r) x = abs(neg(tanh(x)));
  return x;
}

TEST(PlannedExecutor, CachedRunAllocatesOnlyItsOutputs) {
  auto add = function([](const Tensor& a, const Tensor& b) { return a + b; }, {.optimize = false});
  // Unary ops: their kernels allocate nothing themselves (binary ones with a broadcast operand
  // build small stride vectors inside the kernel, which is the op's business, not the plan's).
  auto ops_99 = function([](const Tensor& x) { return unary_chain(x, 33); }, {.optimize = false});
  auto ops_198 = function([](const Tensor& x) { return unary_chain(x, 66); }, {.optimize = false});
  const Tensor a = constant(1.0f), b = constant(2.0f);
  const Tensor x = constant(iota_values(16), TensorShape({16}));
  const long one_op = allocations_of_run(add.get_concrete_function(a, b), {a, b});
  const long n99 = allocations_of_run(ops_99.get_concrete_function(x), {x});
  const long n198 = allocations_of_run(ops_198.get_concrete_function(x), {x});
  // The result vector: the output's TensorImpl, its Buffer and its element storage come from
  // the per-thread lists of small blocks (or aligned_alloc), not operator new.
  EXPECT_EQ(one_op, 1);
  EXPECT_LE(n99, 2);
  EXPECT_EQ(n99, n198) << "intermediates must come from the arena, not the heap";
}

// A while node's condition and body run through plans its step made once: an iteration costs
// the tensors it returns, never a new plan or frame.
TEST(PlannedExecutor, LoopBodiesRunThroughPlansMadeOnce) {
  auto f = function([](const Tensor& n, const Tensor& x) {
    auto [i, y] = while_loop([&](const Tensor& i, const Tensor&) { return i < n; },
                             [](const Tensor& i, const Tensor& y) {
                               return std::tuple{i + 1, unary_chain(y, 5)};
                             },
                             std::tuple{constant(0), x});
    return y;
  }, {.optimize = false});
  const Tensor x = constant(iota_values(64), TensorShape({64}));
  auto allocations = [&](int iterations) {
    const Tensor n = constant(iterations);
    f(n, x);
    testing::CountAllocations counter;
    const Tensor y = f(n, x);
    return counter.count();
  };
  const long per_iteration = (allocations(40) - allocations(20)) / 20;
  EXPECT_LE(per_iteration, 20);
}

// A None-dim graph cannot have a static arena, but its frame keeps each step's buffer: a
// repeated call allocates only its result, and a smaller input reuses the bigger buffers.
TEST(PlannedExecutor, NoneDimGraphsReuseTheirBuffersAcrossCalls) {
  auto f = function([](const Tensor& x) { return unary_chain(x, 10); },
                    {.input_signature = std::vector<TensorSpec>{TensorSpec(TensorShape({None}), float32)},
                     .optimize = false});
  const int64_t n = 4096;
  const std::size_t bytes = n * sizeof(float);
  const Tensor x = constant(iota_values(n), TensorShape({n}));
  const std::vector<float> want = f(x).to_vector<float>();
  for (const Tensor& input : {x, constant(iota_values(n / 2), TensorShape({n / 2}))}) {
    const std::size_t before = detail::live_buffer_bytes();
    detail::reset_peak_buffer_bytes();
    const Tensor y = f(input);
    EXPECT_LT(detail::peak_buffer_bytes() - before, 2 * bytes) << "intermediates were reallocated";
    const std::vector<float> got = y.to_vector<float>();
    EXPECT_EQ(got, std::vector<float>(want.begin(), want.begin() + input.shape().dims()[0]));
  }
  EXPECT_GT(plan_of(f.concrete_functions()[0]).stats().reused_per_call, 0);
}

TEST(PlannedExecutor, LargeElementwiseOpsGiveTheSameBitsOnAnyThreadCount) {
  const int64_t n = 3 * detail::kParallelMinElements + 5;
  auto f = function([](const Tensor& x) { return chain(x, 4) * 0.5f; }, {.optimize = false});
  const Tensor x = constant(iota_values(n), TensorShape({n}));
  const int saved = detail::num_threads();
  detail::set_num_threads(1);
  const std::vector<float> serial = f(x).to_vector<float>();
  detail::set_num_threads(3);
  const std::vector<float> parallel = f(x).to_vector<float>();
  detail::set_num_threads(saved);
  EXPECT_EQ(serial, parallel);
  std::vector<float> want = chain_reference(iota_values(n), 4);
  for (float& e : want) e *= 0.5f;
  expect_near(serial, want);
}

// A fused node splits its tiles (and whole rows of a folded reduction) across the pool; each
// element and each row is still computed by one thread in the same order, so the bits cannot
// depend on the thread count.
TEST(PlannedExecutor, FusedNodesGiveTheSameBitsOnAnyThreadCount) {
  const int64_t rows = 300, cols = 1000;
  auto f = function([](const Tensor& x) {
    const Tensor y = tanh(chain(x, 4) * 0.01f);
    return std::make_tuple(y, reduce_sum(y * y, {1}));
  });
  const Tensor x = constant(iota_values(rows * cols), TensorShape({rows, cols}));
  const int saved = detail::num_threads();
  detail::set_num_threads(1);
  const auto [y1, s1] = f(x);
  detail::set_num_threads(2);
  const auto [y2, s2] = f(x);
  detail::set_num_threads(3);
  const auto [y3, s3] = f(x);
  detail::set_num_threads(saved);
  EXPECT_EQ(y1.to_vector<float>(), y2.to_vector<float>());
  EXPECT_EQ(y1.to_vector<float>(), y3.to_vector<float>());
  EXPECT_EQ(s1.to_vector<float>(), s2.to_vector<float>());
  EXPECT_EQ(s1.to_vector<float>(), s3.to_vector<float>());
  // The graph really is one fused node with its reduction folded in.
  int fused = 0;
  for (const auto& node : f.concrete_functions()[0].optimized_graph().nodes())
    fused += node.op == "fused_elementwise";
  EXPECT_EQ(fused, 1);
  // And the same values as eager.
  const auto [ye, se] = std::make_tuple(tanh(chain(x, 4) * 0.01f), reduce_sum(tanh(chain(x, 4) * 0.01f) * tanh(chain(x, 4) * 0.01f), {1}));
  EXPECT_EQ(y1.to_vector<float>(), ye.to_vector<float>());
  EXPECT_EQ(s1.to_vector<float>(), se.to_vector<float>());
}

// Large matrix products are split across the pool by rows of the result, in blocks fixed by
// the sizes and the thread count: a thread count always gives the same bits; other counts agree
// to rounding (OpenBLAS blocks a smaller product differently). Transposes included.
TEST(PlannedExecutor, MatrixProductsAreReproducibleAtEachThreadCount) {
  struct Case { int64_t m, n, k; bool ta, tb; };
  const Case cases[] = {{300, 130, 200, false, false}, {130, 300, 200, true, false},
                        {257, 129, 97, false, true}, {64, 784, 256, true, true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k));
    const Tensor a = constant(iota_values(c.m * c.k), c.ta ? TensorShape({c.k, c.m}) : TensorShape({c.m, c.k})) * 0.01f;
    const Tensor b = constant(iota_values(c.k * c.n), c.tb ? TensorShape({c.n, c.k}) : TensorShape({c.k, c.n})) * 0.02f;
    const int saved = detail::num_threads();
    std::vector<std::vector<float>> results;
    for (int threads : {1, 2, 2, 3, 3}) {
      detail::set_num_threads(threads);
      results.push_back(matmul(a, b, c.ta, c.tb).to_vector<float>());
    }
    detail::set_num_threads(saved);
    EXPECT_EQ(results[1], results[2]);
    EXPECT_EQ(results[3], results[4]);
    // Every count against a double-precision loop.
    const std::vector<float> va = a.to_vector<float>(), vb = b.to_vector<float>();
    for (int64_t i : {int64_t{0}, c.m / 2, c.m - 1})
      for (int64_t j : {int64_t{0}, c.n / 3, c.n - 1}) {
        double want = 0, scale = 0;
        for (int64_t p = 0; p < c.k; ++p) {
          const double t = double(va[static_cast<std::size_t>(c.ta ? p * c.m + i : i * c.k + p)]) *
                           double(vb[static_cast<std::size_t>(c.tb ? j * c.k + p : p * c.n + j)]);
          want += t;
          scale += std::abs(t);
        }
        for (const auto& r : results) EXPECT_NEAR(r[static_cast<std::size_t>(i * c.n + j)], want, 1e-5 * scale + 1e-6);
      }
  }
}

TEST(ThreadPool, CoversTheRangeOnceInFixedChunks) {
  const int saved = detail::num_threads();
  detail::set_num_threads(4);
  std::vector<int> hits(100000, 0);
  std::vector<std::pair<int64_t, int64_t>> chunks(8, {-1, -1});
  std::atomic<int> calls{0};
  detail::parallel_for(100000, 1000, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) ++hits[static_cast<std::size_t>(i)];
    chunks[static_cast<std::size_t>(calls.fetch_add(1))] = {b, e};
  });
  EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), 100000);
  EXPECT_EQ(calls.load(), 4);
  std::sort(chunks.begin(), chunks.begin() + 4);
  EXPECT_EQ(chunks[0], (std::pair<int64_t, int64_t>{0, 24992}));   // 25000 rounded down to 16
  EXPECT_EQ(chunks[3].second, 100000);
  EXPECT_THROW(detail::parallel_for(100000, 10, [](int64_t b, int64_t) {
                 if (b > 0) throw std::runtime_error("chunk failed");
               }),
               std::runtime_error);
  std::atomic<int> nested_calls{0};  // the outer chunks run on several threads
  detail::parallel_for(4, 1, [&](int64_t, int64_t) {
    detail::parallel_for(100000, 10, [&](int64_t b, int64_t e) {
      if (b == 0 && e == 100000) ++nested_calls;  // serial: one call with the whole range
    });
  });
  EXPECT_GE(nested_calls.load(), 1);
  detail::set_num_threads(saved);
}

// Jobs handed out back to back (a worker may still be leaving one as the next is published):
// each runs every chunk exactly once, and a job's error reaches its own caller only.
TEST(ThreadPool, BackToBackJobsEachRunEveryChunkOnce) {
  const int saved = detail::num_threads();
  detail::set_num_threads(2);
  std::vector<int64_t> sums(2, 0);
  for (int job = 0; job < 20000; ++job) {
    std::atomic<int64_t> covered{0};
    detail::parallel_for(64, 16, [&](int64_t b, int64_t e) { covered.fetch_add(e - b + 1000 * (b == 0)); });
    ASSERT_EQ(covered.load(), 64 + 1000) << "job " << job;
    if (job % 1000 == 0) {
      EXPECT_THROW(detail::parallel_for(64, 16, [](int64_t b, int64_t) {
                     if (b > 0) throw std::runtime_error("chunk failed");
                   }),
                   std::runtime_error);
    }
  }
  detail::set_num_threads(saved);
}

// Two loops that do not depend on each other run side by side on two threads, their gradients'
// loops too (the nodes between them in node order move before or after the pair); each keeps
// the bits it has on one thread. A third loop that reads the first's result waits for it.
TEST(PlannedExecutor, IndependentLoopsRunSideBySideWithTheirSerialBits) {
  auto loop = [](const Tensor& start, float scale) {
    return for_range(constant(int32_t{40}), start, [&](const Tensor&, const Tensor& a) { return tanh(a * scale + 0.1f); });
  };
  const Tensor x = constant(iota_values(96), TensorShape({8, 12})) * 0.01f;
  const Tensor y = x * -0.5f;
  auto f = function([&](const Tensor& a, const Tensor& b) {
    GradientTape tape;
    tape.watch(a);
    tape.watch(b);
    const Tensor p = loop(a, 1.01f), q = loop(b * 2.0f, 0.97f);
    const Tensor r = loop(p, 0.9f);  // needs p
    const Tensor loss = reduce_sum(r * q) + reduce_sum(q);
    std::vector<Tensor> out = tape.gradient(loss, {a, b});
    out.push_back(loss);
    return out;
  });
  const int saved = detail::num_threads();
  detail::set_num_threads(1);
  const std::vector<Tensor> serial = f(x, y);
  detail::set_num_threads(2);
  const std::vector<Tensor> beside = f(x, y), again = f(x, y);
  detail::set_num_threads(saved);
  EXPECT_EQ(f.tracing_count(), 1);
  EXPECT_GE(plan_of(f.concrete_functions()[0]).stats().pairs_beside, 2);  // the loops and their gradients
  ASSERT_EQ(serial.size(), 3u);
  for (std::size_t k = 0; k < serial.size(); ++k) {
    EXPECT_EQ(serial[k].to_vector<float>(), beside[k].to_vector<float>()) << k;
    EXPECT_EQ(serial[k].to_vector<float>(), again[k].to_vector<float>()) << k;
  }
}

}  // namespace
}  // namespace tg
