// A loaded function called from several threads at once (the ThreadSanitizer build runs this
// module): dispatch, the plan and the Variable updates are shared as for a traced function.
#include <unistd.h>

#include <cstdio>
#include <thread>

#include "support/test_util.h"

namespace tg {
namespace {

TEST(LoadedFunctionThreads, ConcurrentCallsDispatchAndUpdateVariablesSafely) {
  Variable calls(constant(0.0f), "calls");
  auto f = function([&](const Tensor& x) {
    calls.assign_add(1.0f);
    return tanh(x) * 2.0f + 1.0f;
  }, {.name = "served"});
  const Tensor small = constant({0.5f, -0.5f}), large = constant({1.0f, 2.0f, 3.0f});
  f(small);
  f(large);
  const std::string path = ::testing::TempDir() + "served_" + std::to_string(::getpid()) + ".tgx";
  save(path, f);
  LoadedFunction loaded = load(path);
  const Variable served_calls = loaded.variables().at(0);
  const float before = served_calls.read_value().item<float>();
  constexpr int kThreads = 4, kCalls = 100;
  std::vector<std::thread> threads;
  std::vector<int> wrong(kThreads, 0);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        const Tensor& x = (i + t) % 2 ? small : large;
        const Tensor y = loaded(x);
        if (!testing::tensors_near(y, tanh(x) * 2.0f + 1.0f, 1e-6)) ++wrong[static_cast<std::size_t>(t)];
      }
    });
  for (auto& th : threads) th.join();
  for (int w : wrong) EXPECT_EQ(w, 0);
  EXPECT_EQ(served_calls.read_value().item<float>(), before + kThreads * kCalls);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tg
