// Every op case through export: traced, saved to a .tgx file, loaded back (re-validated and
// re-optimised by the loader) and run. The results must be the eager ones exactly.
#include <unistd.h>

#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

TEST(OpCases, EveryCaseGivesTheSameResultSavedAndLoaded) {
  config::set_print_sink([](const std::string&, void*) {});
  const std::string path = ::testing::TempDir() + "op_case_" + std::to_string(::getpid()) + ".tgx";
  int saved = 0;
  for (const bool optimize : {false, true}) {
    for (const auto& c : testing::op_cases()) {
      SCOPED_TRACE(c.op + ": " + c.label + (optimize ? " (optimised)" : " (not optimised)"));
      auto traced = function([&](const std::vector<Tensor>& in) { return c.fn(in); },
                             {.name = "op_case_" + c.op, .optimize = optimize});
      const Tensor original = traced(c.inputs);
      if (c.op == "fused_elementwise") {
        // Only the optimiser makes fused nodes, and files hold graphs as traced (the loader fuses
        // again); a fused node recorded by hand is refused by name.
        EXPECT_TRUE(testing::throws_with<ValueError>([&] { save(path, traced); }, {"fused_elementwise", "by hand"}));
        continue;
      }
      save(path, traced);
      LoadedFunction loaded = load(path);
      const Tensor out = loaded(c.inputs);
      EXPECT_TRUE(testing::tensors_near(out, c.fn(c.inputs), 0.0)) << "loaded result differs from eager";
      EXPECT_TRUE(testing::tensors_near(out, original, 0.0)) << "loaded result differs from the original";
      EXPECT_EQ(loaded.signatures().size(), 1u);
      ++saved;
    }
  }
  config::set_print_sink(nullptr);
  std::remove(path.c_str());
  EXPECT_GT(saved, 100);
}

}  // namespace
}  // namespace tg
