// Every op case through export: traced, saved to a .tgx file, loaded back (re-validated and
// re-optimised by the loader) and run. The results must be the eager ones exactly.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "ops/op.h"
#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

bool optimizer_only(const std::string& op) { return detail::find_op(op)->traits & detail::kOptimizerOnly; }
// A host_call node calls a function of this process, which no file can hold: save refuses it by name.
bool calls_host(const std::string& op) { return detail::find_op(op)->id == detail::OpId::HostCall; }

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
      if (optimizer_only(c.op)) {
        // Only the optimiser makes these nodes, and files hold graphs as traced (the loader
        // optimises again); one recorded by hand is refused by name.
        EXPECT_TRUE(testing::throws_with<ValueError>([&] { save(path, traced); }, {c.op, "by hand"}));
        continue;
      }
      if (calls_host(c.op)) {
        EXPECT_TRUE(testing::throws_with<ValueError>([&] { save(path, traced); }, {c.op, "cannot leave this process"}));
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

// Across two processes (CTest runs these as a fixture pair with TG_EXPORT_CASES_DIR set): one
// process saves every case's function, another - which never traced them - loads each file and
// must compute the eager result exactly. Without the variable (the plain module run) they skip.
const char* cases_dir() { return std::getenv("TG_EXPORT_CASES_DIR"); }
std::string case_file(std::size_t i) { return std::string(cases_dir()) + "/case_" + std::to_string(i) + ".tgx"; }

TEST(OpCasesAcrossProcesses, SaveEveryCase) {
  if (!cases_dir()) GTEST_SKIP() << "run by CTest (op_cases_saved) with TG_EXPORT_CASES_DIR";
  std::filesystem::create_directories(cases_dir());
  config::set_print_sink([](const std::string&, void*) {});
  const auto& cases = testing::op_cases();
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    if (optimizer_only(c.op) || calls_host(c.op)) continue;  // never in a file (see above)
    auto traced = function([&](const std::vector<Tensor>& in) { return c.fn(in); }, {.name = "op_case_" + c.op});
    traced(c.inputs);
    save(case_file(i), traced);
  }
  config::set_print_sink(nullptr);
}

TEST(OpCasesAcrossProcesses, LoadEveryCaseSavedByAnotherProcess) {
  if (!cases_dir()) GTEST_SKIP() << "run by CTest (op_cases_loaded) with TG_EXPORT_CASES_DIR";
  config::set_print_sink([](const std::string&, void*) {});
  const auto& cases = testing::op_cases();
  int loaded_cases = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    if (optimizer_only(c.op) || calls_host(c.op)) continue;
    SCOPED_TRACE(c.op + ": " + c.label);
    LoadedFunction loaded = load(case_file(i));
    EXPECT_EQ(loaded.name(), "op_case_" + c.op);
    const Tensor out = loaded(c.inputs);
    EXPECT_TRUE(testing::tensors_near(out, c.fn(c.inputs), 0.0)) << "loaded result differs from eager";
    EXPECT_TRUE(testing::tensors_near(out, c.expected, c.tol));
    ++loaded_cases;
  }
  config::set_print_sink(nullptr);
  EXPECT_GT(loaded_cases, 100);
}

}  // namespace
}  // namespace tg
