// A loaded function takes string literal arguments as the original does: `served(x, "relu")`
// compiles and dispatches by the string's value (issue 33).
#include <unistd.h>

#include <cstdio>
#include <string>

#include "support/test_util.h"

namespace tg {
namespace {

using testing::tensors_near;
using testing::throws_with;

TEST(ExportStrings, ALoadedFunctionTakesStringLiteralsByValue) {
  auto forward = function([](const Tensor& x, const std::string& activation) {
    return activation == "relu" ? relu(x) : tanh(x);
  }, {.name = "forward", .arg_names = {"x", "activation"}});
  const Tensor x = constant({-1.0f, 2.0f});
  forward(x, "relu");
  forward(x, "tanh");
  ASSERT_EQ(forward.tracing_count(), 2);
  const std::string path = ::testing::TempDir() + "tg_export_" + std::to_string(::getpid()) + "_strings.tgx";
  save(path, forward);
  LoadedFunction served = load(path);
  std::remove(path.c_str());

  EXPECT_TRUE(tensors_near(served(x, "relu"), constant({0.0f, 2.0f}), 0.0));
  EXPECT_TRUE(tensors_near(served(x, "tanh"), tanh(x), 1e-6));
  char buffer[] = "relu";  // another array of the same value
  EXPECT_TRUE(tensors_near(served(x, buffer), constant({0.0f, 2.0f}), 0.0));
  EXPECT_TRUE(tensors_near(served(x, std::string("tanh")), tanh(x), 1e-6));
  EXPECT_TRUE(throws_with<TypeError>([&] { served(x, "gelu"); }, {"'gelu'", "Literal['relu']", "Literal['tanh']"}));
}

}  // namespace
}  // namespace tg
