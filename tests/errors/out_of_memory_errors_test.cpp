// Memory the system refuses inside an op - a kernel's scratch, not a result tensor, which its
// allocation refuses by size - is a ResourceExhaustedError that names the op, never a bare
// std::bad_alloc: eagerly, in a traced function's graph (and its control-flow sub-graphs), and
// in a loaded one. The refusal is simulated (support/allocation_counter.h) rather than
// provoked: the sanitizers' allocators abort on requests of terabytes instead of failing them.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

#include "ops/conv.h"
#include "support/allocation_counter.h"
#include "support/test_util.h"
#include "tracegraph/tracegraph.h"

namespace tg {
namespace {

// max_pool2d_grad_grad keeps each window's best value and its index per channel: 1 MiB each
// for 2^18 float32 channels, from operator new (tensor buffers come from elsewhere).
const detail::Pool2DAttrs kPool{{1, 1}, {1, 1}, 0};
Tensor needs_scratch(const Tensor& x) { return detail::max_pool2d_grad_grad(x, x, kPool); }
Tensor scratch_input() { return zeros({1, 1, 1, 1 << 18}); }

// Runs `call` while operator new refuses more than 512 KiB; the error it raised (a failure
// when it raised none, or another exception).
ResourceExhaustedError refused(const std::function<void()>& call) {
  try {
    testing::RefuseAllocationsOver refuse(std::size_t{512} << 10);
    call();
    ADD_FAILURE() << "no error";
  } catch (const ResourceExhaustedError& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw another exception: " << e.what();
  }
  return ResourceExhaustedError("none", 0);
}

void expect_refused_in_op(const ResourceExhaustedError& e) {
  EXPECT_EQ(e.code(), "ERESOURCE");
  EXPECT_EQ(e.bytes_requested(), SIZE_MAX);
  EXPECT_TRUE(::testing::IsSubstring("", "", "[max_pool2d_grad_grad] the system refused memory", e.what()));
}

TEST(OutOfMemoryErrors, AnOpsRefusedScratchMemoryIsResourceExhausted) {
  const Tensor x = scratch_input();
  EXPECT_TENSOR_EQ(needs_scratch(x), x);
  expect_refused_in_op(refused([&] { needs_scratch(x); }));
}

// The executor calls kernels itself, not through eager dispatch: one handler around a run's
// steps names the op and its node, the same error as eagerly.
TEST(OutOfMemoryErrors, ATracedFunctionsRefusedScratchIsTheEagerError) {
  const Tensor x = scratch_input();
  auto f = function([](const Tensor& v) { return needs_scratch(v) + 1.0f; }, {.name = "f"});
  EXPECT_TENSOR_EQ(f(x), x + 1.0f);  // traced and planned before memory is refused
  const ResourceExhaustedError eager = refused([&] { needs_scratch(x); });
  const ResourceExhaustedError traced = refused([&] { f(x); });
  expect_refused_in_op(traced);
  EXPECT_TRUE(::testing::IsSubstring("", "", "running node '", traced.what()));
  EXPECT_EQ(std::string(traced.what()).substr(0, 40), std::string(eager.what()).substr(0, 40));
  EXPECT_TENSOR_EQ(f(x), x + 1.0f);  // the plan runs again once memory is there
  EXPECT_EQ(f.tracing_count(), 1);
}

TEST(OutOfMemoryErrors, ARefusalInsideACondBranchNamesTheBranchsOp) {
  const Tensor x = scratch_input();
  auto f = function([](const Tensor& v, const Tensor& p) {
    return cond(p, [&] { return needs_scratch(v); }, [&] { return v; });
  });
  EXPECT_TENSOR_EQ(f(x, constant(true)), x);
  expect_refused_in_op(refused([&] { f(x, constant(true)); }));
  EXPECT_TENSOR_EQ(f(x, constant(false)), x);
}

TEST(OutOfMemoryErrors, ALoadedFunctionsRefusedScratchIsResourceExhausted) {
  const Tensor x = scratch_input();
  auto f = function([](const Tensor& v) { return needs_scratch(v); }, {.name = "f"});
  f(x);
  const std::string path = ::testing::TempDir() + "tg_oom_" + std::to_string(::getpid()) + ".tgx";
  save(path, f);
  const LoadedFunction loaded = load(path);
  std::remove(path.c_str());
  EXPECT_TENSOR_EQ(Tensor(loaded(x)), x);
  const ResourceExhaustedError e = refused([&] { loaded(x); });
  expect_refused_in_op(e);
  EXPECT_TRUE(::testing::IsSubstring("", "", "running node '", e.what()));
}

}  // namespace
}  // namespace tg
