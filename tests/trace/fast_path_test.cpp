// The cached-call path: allocation-free dispatch, and its invalidation.
#include <cstdlib>
#include <new>

#include <unistd.h>

#include <cstdio>

#include "export/loaded.h"
#include "runtime/executor.h"
#include "support/allocation_counter.h"
#include "trace/function_core.h"
#include "support/test_util.h"

namespace tg {
namespace {

template <class... Args>
detail::ConcreteImpl* fast_dispatch_core(const detail::FunctionCore& core, long* allocations, const Args&... args) {
  testing::CountAllocations counter;
  std::size_t h = 0x7467;
  const bool ok = (detail::ArgTraits<Args>::fast_hash(args, h) && ...);
  auto match = [&](const std::vector<TraceTypePtr>& types) {
    std::size_t i = 0;
    return types.size() == sizeof...(Args) && (detail::ArgTraits<Args>::fast_equal(args, *types[i++]) && ...);
  };
  detail::ConcreteImpl* cf = ok ? detail::fast_lookup(core, h, detail::FastMatch(match)).cf : nullptr;
  *allocations = counter.count();
  return cf;
}

// The first step of the cached path: a repeat of this thread's last call, found by comparison.
template <class... Args>
detail::ConcreteImpl* repeat_dispatch_core(const detail::FunctionCore& core, long* allocations, const Args&... args) {
  testing::CountAllocations counter;
  auto match = [&](const std::vector<TraceTypePtr>& types) {
    std::size_t i = 0;
    return types.size() == sizeof...(Args) && (detail::ArgTraits<Args>::fast_equal(args, *types[i++]) && ...);
  };
  detail::ConcreteImpl* cf = detail::repeat_call(core, detail::FastMatch(match)).cf;
  *allocations = counter.count();
  return cf;
}

template <class F, class... Args>
detail::ConcreteImpl* fast_dispatch(F& f, long* allocations, const Args&... args) {
  return fast_dispatch_core(detail::FunctionAccess::core(f), allocations, args...);
}

TEST(FastPath, CachedDispatchDoesNotAllocate) {
  auto add = function([](const Tensor& a, const Tensor& b, int k, std::vector<Tensor> more) {
    return a + b * k + more[0];
  });
  Tensor a = constant(1.0f), b = constant(2.0f);
  std::vector<Tensor> more{constant(3.0f)};
  EXPECT_EQ(add(a, b, 2, more).item<float>(), 8.0f);  // traces, and records the fast entry
  long allocations = -1;
  auto cf = fast_dispatch(add, &allocations, a, b, 2, more);
  ASSERT_NE(cf, nullptr) << "the repeated call type is found on the fast path";
  EXPECT_EQ(allocations, 0) << "dispatching a cached call must not allocate";
  EXPECT_EQ(fast_dispatch(add, &allocations, a, b, 3, more), nullptr) << "another literal is another type";
  EXPECT_EQ(fast_dispatch(add, &allocations, a, ones({2}), 2, more), nullptr) << "another shape too";
  EXPECT_EQ(add(a, b, 2, more).item<float>(), 8.0f);
  EXPECT_EQ(add.tracing_count(), 1);
  // The same call again is this thread's last call: found without hashing or allocating; any
  // other argument type is not.
  const detail::FunctionCore& core = detail::FunctionAccess::core(add);
  EXPECT_EQ(repeat_dispatch_core(core, &allocations, a, b, 2, more), cf);
  EXPECT_EQ(allocations, 0) << "a repeated call must not allocate";
  EXPECT_EQ(repeat_dispatch_core(core, &allocations, a, b, 3, more), nullptr);
  EXPECT_EQ(repeat_dispatch_core(core, &allocations, a, ones({2}), 2, more), nullptr);
  // Another function's last call is not this one's.
  auto other = function([](const Tensor& a, const Tensor& b, int k, std::vector<Tensor> more) {
    return a - b * k + more[0];
  });
  EXPECT_EQ(other(a, b, 2, more).item<float>(), 0.0f);
  EXPECT_EQ(repeat_dispatch_core(core, &allocations, a, b, 2, more), nullptr);
  EXPECT_EQ(add(a, b, 2, more).item<float>(), 8.0f);
  EXPECT_EQ(other(a, b, 2, more).item<float>(), 0.0f);
  EXPECT_EQ(add.tracing_count(), 1);
  EXPECT_EQ(other.tracing_count(), 1);
}

TEST(FastPath, ALoadedFunctionTakesTheSameCachedPath) {
  auto add = function([](const Tensor& a, const Tensor& b, int k) { return a + b * k; }, {.name = "add"});
  Tensor a = constant(1.0f), b = constant(2.0f);
  add(a, b, 2);
  const std::string path = ::testing::TempDir() + "fast_" + std::to_string(::getpid()) + ".tgx";
  save(path, add);
  LoadedFunction loaded = load(path);
  std::remove(path.c_str());
  const detail::FunctionCore& core = detail::loaded_core(*detail::LoadedAccess::state(loaded));
  long allocations = -1;
  EXPECT_EQ(fast_dispatch_core(core, &allocations, a, b, 2), nullptr) << "not called yet";
  EXPECT_EQ(Tensor(loaded(a, b, 2)).item<float>(), 5.0f);  // finds the saved trace, records the fast entry
  ASSERT_NE(fast_dispatch_core(core, &allocations, a, b, 2), nullptr);
  EXPECT_EQ(allocations, 0) << "dispatching a cached call of a loaded function must not allocate";
  EXPECT_EQ(fast_dispatch_core(core, &allocations, a, b, 3), nullptr) << "another literal is another type";
}

TEST(FastPath, EvictionInvalidatesCachedCalls) {
  int traces = 0;
  auto f = function([&](const Tensor& x) {
    ++traces;
    return x * 2.0f;
  }, {.max_cached_traces = 1});
  f(ones({3}));
  f(ones({3}));  // served by the fast path
  f(ones({4}));  // evicts the (3,) trace
  EXPECT_EQ(f.concrete_functions().size(), 1u);
  EXPECT_EQ(f(ones({3})).to_vector<float>(), (std::vector<float>{2.0f, 2.0f, 2.0f}));
  EXPECT_EQ(traces, 3) << "a call whose trace was evicted must trace again, not run the evicted graph";
}

// The cached path takes no reference to the concrete function when the cache never evicts (the
// function holds it for its whole life), and one when it may: an eviction while the call runs
// must not free the graph under it.
TEST(FastPath, CachedCallsHoldTheirConcreteFunctionOnlyWhenTheCacheEvicts) {
  auto repeat = [](auto& f, const Tensor& x) {
    auto match = [&](const std::vector<TraceTypePtr>& types) {
      return types.size() == 1 && detail::ArgTraits<Tensor>::fast_equal(x, *types[0]);
    };
    return detail::repeat_call(detail::FunctionAccess::core(f), detail::FastMatch(match));
  };
  const Tensor x3 = ones({3}), x4 = ones({4});
  auto unbounded = function([](const Tensor& x) { return x * 2.0f; });
  unbounded(x3);
  unbounded(x3);
  const detail::CalledConcrete plain = repeat(unbounded, x3);
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain.keep, nullptr);

  auto bounded = function([](const Tensor& x) { return x * 2.0f; }, {.max_cached_traces = 1});
  bounded(x3);
  bounded(x3);
  const detail::CalledConcrete held = repeat(bounded, x3);
  ASSERT_TRUE(held);
  EXPECT_EQ(held.keep.get(), held.cf);
  bounded(x4);  // evicts the (3,) trace, which `held` still keeps alive
  EXPECT_EQ(bounded.concrete_functions().size(), 1u);
  EXPECT_EQ(detail::execute(*held.cf->plan, {x3})[0].to_vector<float>(), (std::vector<float>{2, 2, 2}));
}

TEST(FastPath, LiteralTypesAreComparedExactly) {
  auto f = function([](const Tensor& x, auto k) { return x * static_cast<float>(k); });
  EXPECT_EQ(f(ones({1}), 2).item<float>(), 2.0f);
  EXPECT_EQ(f(ones({1}), int64_t{2}).item<float>(), 2.0f);
  EXPECT_EQ(f(ones({1}), 2.0).item<float>(), 2.0f);
  EXPECT_EQ(f(ones({1}), 2).item<float>(), 2.0f);
  EXPECT_EQ(f.tracing_count(), 3);  // int, int64_t and double 2 are three types
  auto g = function([](const Tensor& x, const std::string& tag, std::optional<Tensor> y) {
    return y ? x + *y : x * static_cast<float>(tag.size());
  });
  EXPECT_EQ(g(ones({1}), std::string("ab"), std::nullopt).item<float>(), 2.0f);
  EXPECT_EQ(g(ones({1}), std::string("abc"), std::nullopt).item<float>(), 3.0f);
  EXPECT_EQ(g(ones({1}), std::string("abc"), std::optional<Tensor>(ones({1}))).item<float>(), 2.0f);
  EXPECT_EQ(g(ones({1}), std::string("abc"), std::nullopt).item<float>(), 3.0f);
  EXPECT_EQ(g.tracing_count(), 3);
}

}  // namespace
}  // namespace tg
