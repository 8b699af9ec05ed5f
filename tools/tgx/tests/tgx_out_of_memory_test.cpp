// tgx run when the system refuses memory a model's call needs: a typed error and exit code 3
// ("a call failed"), never "internal error" (5). In process, through the run command itself,
// with operator new refusing large requests (support/allocation_counter.h; the sanitizers'
// allocators abort on real terabyte requests instead of failing them).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cli.h"
#include "commands.h"
#include "ops/conv.h"
#include "support/allocation_counter.h"
#include "tracegraph/tracegraph.h"

namespace {

TEST(TgxOutOfMemory, ACallWhoseKernelIsRefusedMemoryFailsWithResourceExhausted) {
  const std::string dir = ::testing::TempDir() + "tgx_oom_" + std::to_string(::getpid()) + "_";
  const std::string model = dir + "model.tgx", input = dir + "x.npy";
  // max_pool2d_grad_grad keeps 1 MiB of scratch per 2^18 float32 channels, from operator new.
  const tg::detail::Pool2DAttrs pool{{1, 1}, {1, 1}, 0};
  auto f = tg::function(
      [&](const tg::Tensor& x) {
        const tg::Tensor wide = x + tg::zeros({1, 1, 1, 1 << 18});
        return tg::detail::max_pool2d_grad_grad(wide, wide, pool);
      },
      {.name = "wide_pool", .arg_names = {"x"}});
  const tg::Tensor x = tg::ones({1, 1, 1, 1});
  f(x);
  tg::save(model, f);
  tg::save_npy(input, x);
  EXPECT_EQ(tgx::run_command({model, "--input", "x=" + input}), tgx::kOk);
  try {
    tg::testing::RefuseAllocationsOver refuse(std::size_t{512} << 10);
    tgx::run_command({model, "--input", "x=" + input});
    ADD_FAILURE() << "no error";
  } catch (const tgx::Failure& e) {
    EXPECT_EQ(e.code(), tgx::kCallFailed) << e.what();
    EXPECT_TRUE(::testing::IsSubstring("", "", "calling 'wide_pool' failed (ERESOURCE): [max_pool2d_grad_grad]",
                                       e.what()));
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw another exception (tgx main reports it as an internal error): " << e.what();
  }
  std::remove(model.c_str());
  std::remove(input.c_str());
}

}  // namespace
