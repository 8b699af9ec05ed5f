// Expected failures of host_call: a result that does not match the declared dtypes, a function
// that throws, a gradient that would call the host again, and a file or model that would need
// the function outside this process.
#include <filesystem>

#include "support/test_util.h"

namespace tg {
namespace {

std::vector<Tensor> one_float(const std::vector<Tensor>& in) { return {cast(in[0], float32)}; }

TEST(HostCallErrors, WrongResultCountOrDtype) {
  EXPECT_THROW_MSG(host_call(&one_float, {constant(1)}, {float32, int32}, "f"), InvalidArgumentError,
                   "[host_call]", "'f' returned 1 tensor(s)", "2 output dtype(s) [float32, int32]");
  EXPECT_THROW_MSG(host_call(&one_float, {constant(1)}, {int64}, "f"), InvalidArgumentError, "[host_call]",
                   "output 0", "dtype float32", "declared int64");
  auto g = function([](const Tensor& x) { return host_call(&one_float, {x}, {float64}, "f")[0]; });
  EXPECT_THROW_MSG(g(constant(1)), InvalidArgumentError, "[host_call]", "output 0", "float32", "float64");
  EXPECT_THROW_MSG(host_call(HostFunctionFn{}, {}, {}, "nothing"), ValueError, "[host_call]", "'nothing' is empty");
}

TEST(HostCallErrors, WhatTheFunctionThrowsReachesTheCaller) {
  auto g = function([](const Tensor& x) {
    return host_call([](const std::vector<Tensor>&) -> std::vector<Tensor> { throw ValueError("host says no"); },
                     {x}, {float32}, "refuser")[0];
  });
  EXPECT_THROW_MSG(g(constant(1.0f)), ValueError, "host says no");
}

TEST(HostCallErrors, AGradientThroughOutputsIsRefused) {
  auto g = function([](const Tensor& x) { return host_call(&one_float, {x}, {float32}, "cb")[0] * x; });
  const Tensor x = constant(2.0f);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = g(x);
  EXPECT_THROW_MSG(tape.gradient(y, x), InvalidArgumentError, "[gradient]", "'cb'", "second time");
}

TEST(HostCallErrors, SaveRefusesIt) {
  auto g = function([](const Tensor& x) { return host_call(&one_float, {x}, {float32}, "cb")[0]; }, {.name = "uses_host"});
  g(constant(1.0f));
  const std::string path = ::testing::TempDir() + "host_call_refused.tgx";
  std::filesystem::remove(path);
  EXPECT_THROW_MSG(save(path, g), ValueError, "[tg::save]", "host_call", "'cb'", "cannot leave this process");
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace tg
