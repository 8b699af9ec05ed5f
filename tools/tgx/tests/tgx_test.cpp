// tgx's parts (the signature parser, the output comparison), the thread setting it uses, and
// what its output documents hold (run as a separate process on the tgx_files fixture).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "compare.h"
#include "signature.h"
#include "support/json_check.h"
#include "tracegraph/tracegraph.h"

namespace {

using tgx::Parameter;

struct Process {
  int exit_code = -1;
  std::string out;  // stdout only; stderr is left to the test log
};

// `prefix` goes before tgx on the command line (e.g. "timeout 30").
Process run_tgx(const std::string& args, const std::string& prefix = "") {
  const std::string command = "cd '" TGX_FILES_DIR "' && " + prefix + " '" TGX_EXECUTABLE "' " + args;
  Process p;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return p;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) p.out.append(buf, n);
  const int status = ::pclose(pipe);
  p.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return p;
}

std::string files(const std::string& name) { return std::string(TGX_FILES_DIR) + "/" + name; }

// --- The FunctionType parser --------------------------------------------------------------

TEST(TgxSignature, ReadsTensorParametersWithNamesDtypesAndShapes) {
  const auto params = tgx::parse_parameters(
      "(x: TensorSpec(shape=(None, 4), dtype=tg.float32, name=None), y: TensorSpec(shape=(), dtype=tg.int64, "
      "name='y'), z: TensorSpec(shape=<unknown>, dtype=tg.bool, name=None)) -> TensorSpec(shape=(None, 8), "
      "dtype=tg.float32, name=None)");
  ASSERT_EQ(params.size(), 3u);
  EXPECT_EQ(params[0].name, "x");
  EXPECT_EQ(params[0].kind, Parameter::Kind::kTensor);
  EXPECT_EQ(params[0].dtype, tg::float32);
  EXPECT_EQ(params[0].shape, tg::TensorShape({tg::None, 4}));
  EXPECT_EQ(params[1].dtype, tg::int64);
  EXPECT_EQ(params[1].shape, tg::TensorShape(std::vector<int64_t>{}));
  EXPECT_FALSE(params[2].shape.has_rank());
  EXPECT_EQ(params[2].dtype, tg::bool_);
}

TEST(TgxSignature, SkipsQuotedTextAndNestedBrackets) {
  const auto params = tgx::parse_parameters(
      "(s: Literal['a, b) c'], t: Tuple[TensorSpec(shape=(2,), dtype=tg.int32, name=None), Literal[1]], "
      "v: VariableSpec(shape=(3, 3), dtype=tg.float64, alias_id=0)) -> None");
  ASSERT_EQ(params.size(), 3u);
  EXPECT_EQ(params[0].kind, Parameter::Kind::kLiteral);
  EXPECT_EQ(params[0].type, "Literal['a, b) c']");
  EXPECT_EQ(params[1].kind, Parameter::Kind::kOther);
  EXPECT_EQ(params[2].kind, Parameter::Kind::kVariable);
  EXPECT_EQ(params[2].dtype, tg::float64);
  EXPECT_EQ(params[2].shape, tg::TensorShape({3, 3}));
}

TEST(TgxSignature, NoParametersAndMalformedText) {
  EXPECT_TRUE(tgx::parse_parameters("() -> TensorSpec(shape=(), dtype=tg.int32, name=None)").empty());
  EXPECT_THROW(tgx::parse_parameters("x: TensorSpec"), std::invalid_argument);
  EXPECT_THROW(tgx::parse_parameters("(x TensorSpec(shape=(), dtype=tg.int32, name=None))"), std::invalid_argument);
  EXPECT_THROW(tgx::parse_parameters("(x: TensorSpec(shape=(), dtype=tg.int32, name=None)"), std::invalid_argument);
  EXPECT_THROW(tgx::parse_parameters("(x: TensorSpec(shape=(2), dtype=tg.int32, name=None))"),
               std::invalid_argument);
  EXPECT_THROW(tgx::parse_parameters("(x: TensorSpec(shape=(2,), dtype=tg.complex64, name=None))"),
               std::invalid_argument);
}

TEST(TgxSignature, ShapesRoundTripThroughTheLibrarysText) {
  for (const tg::TensorShape& s : {tg::TensorShape(std::vector<int64_t>{}), tg::TensorShape({7}),
                                   tg::TensorShape({tg::None, 3, 0}), tg::TensorShape::unknown_rank()}) {
    const auto parsed = tgx::parse_shape(s.to_string());
    ASSERT_TRUE(parsed) << s.to_string();
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_FALSE(tgx::parse_shape("(3)"));
  EXPECT_FALSE(tgx::parse_shape("(-2,)"));
  EXPECT_FALSE(tgx::parse_shape("(a, 2)"));
}

// --- Comparing outputs ----------------------------------------------------------------------

TEST(TgxCompare, FloatsWithinTheToleranceMatch) {
  const tg::Tensor e = tg::constant({1.0f, -2.0f, 100.0f});
  const tg::Tensor g = tg::constant({1.0f, -2.0f, 100.002f});
  EXPECT_FALSE(tgx::compare(g, e, {}).ok);                        // 2e-3 > 1e-8 + 1e-5 * 100
  EXPECT_TRUE(tgx::compare(g, e, {1e-5, 1e-2}).ok);               // atol covers it
  EXPECT_TRUE(tgx::compare(g, e, {1e-4, 0}).ok);                  // rtol covers it
  EXPECT_TRUE(tgx::compare(tg::cast(e, tg::float64), e, {}).ok);  // float32 vs float64
}

TEST(TgxCompare, ReportsTheWorstElementByIndex) {
  const tg::Tensor e = tg::constant({{0.0f, 0.0f}, {0.0f, 0.0f}, {0.0f, 0.0f}});
  const tg::Tensor g = tg::constant({{0.0f, 0.1f}, {0.0f, 0.0f}, {0.0f, -0.3f}});
  const tgx::Comparison c = tgx::compare(g, e, {});
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.mismatches, 2);
  EXPECT_NE(c.message.find("2 of 6 elements differ"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find("worst at [2, 1]: got -0.300000012, expected 0"), std::string::npos) << c.message;
}

TEST(TgxCompare, NanMatchesNanAndInfinitiesMustAgree) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(tgx::compare(tg::constant({nan, inf}), tg::constant({nan, inf}), {}).ok);
  const tgx::Comparison c = tgx::compare(tg::constant({1.0f, inf}), tg::constant({nan, -inf}), {});
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.mismatches, 2);
}

TEST(TgxCompare, IntegersAndBoolsMustBeEqualAndKindsMustAgree) {
  EXPECT_TRUE(tgx::compare(tg::constant({1, 2, 3}), tg::cast(tg::constant({1, 2, 3}), tg::int64), {}).ok);
  const tgx::Comparison c = tgx::compare(tg::constant({1, 2, 3}), tg::constant({1, 2, 4}), {0.5, 10});
  EXPECT_FALSE(c.ok);  // no tolerance for integers
  EXPECT_NE(c.message.find("first at [2]: got 3, expected 4"), std::string::npos) << c.message;
  EXPECT_FALSE(tgx::compare(tg::constant({true, false}), tg::constant({true, true}), {}).ok);
  const tgx::Comparison kinds = tgx::compare(tg::constant({1.0f}), tg::constant({1}), {});
  EXPECT_FALSE(kinds.ok);
  EXPECT_NE(kinds.message.find("dtype float32 but the expected file holds int32"), std::string::npos);
  const tgx::Comparison shapes = tgx::compare(tg::constant({1.0f, 2.0f}), tg::constant({{1.0f, 2.0f}}), {});
  EXPECT_FALSE(shapes.ok);
  EXPECT_NE(shapes.message.find("shape (2,) but the expected file has shape (1, 2)"), std::string::npos);
}

// --- tg::config::set_num_threads (what tgx bench --threads uses) ----------------------------

TEST(ConfigNumThreads, SetsTheIntraOpPoolAndRefusesZero) {
  const int saved = tg::config::num_threads();
  tg::config::set_num_threads(3);
  EXPECT_EQ(tg::config::num_threads(), 3);
  tg::config::set_num_threads(1);
  EXPECT_EQ(tg::config::num_threads(), 1);
  EXPECT_THROW(tg::config::set_num_threads(0), tg::ValueError);
  EXPECT_EQ(tg::config::num_threads(), 1);
  tg::config::set_num_threads(saved);
}

TEST(ConfigNumThreads, ResizingWhileAnotherThreadCallsGivesTheSameResults) {
  const int saved = tg::config::num_threads();
  // Large enough for the executor to split the elementwise kernel across the pool.
  const int64_t n = int64_t{1} << 18;
  auto f = tg::function([](const tg::Tensor& x) { return tg::tanh(x) * 2.0f + x; }, {.optimize = false});
  const tg::Tensor x = tg::random_uniform({n}, -3, 3, 5);
  tg::config::set_num_threads(1);
  const std::vector<float> want = f(x).to_vector<float>();
  std::atomic<bool> done{false};
  std::atomic<int> wrong{0};
  std::thread caller([&] {
    for (int i = 0; i < 30; ++i)
      if (f(x).to_vector<float>() != want) ++wrong;
    done = true;
  });
  for (int k = 0; !done; ++k) tg::config::set_num_threads(1 + k % 3);
  caller.join();
  EXPECT_EQ(wrong.load(), 0);
  tg::config::set_num_threads(saved);
}

// --- tgx as a process --------------------------------------------------------------------------

TEST(TgxProcess, InspectJsonIsOneValidDocumentWithTheSchemaFields) {
  for (const char* model : {"mlp.tgx", "scaled.tgx", "pair.tgx"}) {
    const Process p = run_tgx(std::string("inspect ") + model + " --json");
    ASSERT_EQ(p.exit_code, 0) << model;
    EXPECT_EQ(tg::testing::json_error(p.out), "") << p.out;
    for (const char* key : {"\"schema\": \"tgx-inspect/1\"", "\"file_bytes\": ", "\"producer\": \"tracegraph ",
                            "\"signatures\": [", "\"variables\": [", "\"concrete_functions\": [", "\"nodes\": ",
                            "\"optimized_nodes\": ", "\"parameters\": ["})
      EXPECT_NE(p.out.find(key), std::string::npos) << model << " lacks " << key << "\n" << p.out;
  }
  const Process mlp = run_tgx("inspect mlp.tgx --json");
  EXPECT_NE(mlp.out.find("{\"name\": \"dense1/kernel\", \"dtype\": \"float32\", \"shape\": [4, 8], \"elements\": 32}"),
            std::string::npos)
      << mlp.out;
  EXPECT_NE(mlp.out.find("{\"name\": \"x\", \"kind\": \"tensor\", \"type\": \"TensorSpec(shape=(None, 4), dtype=tg."
                         "float32, name=None)\", \"dtype\": \"float32\", \"shape\": [null, 4]}"),
            std::string::npos)
      << mlp.out;
  const Process scaled = run_tgx("inspect scaled.tgx --json");
  EXPECT_NE(scaled.out.find("{\"name\": \"n\", \"kind\": \"literal\", \"type\": \"Literal[3]\"}"), std::string::npos)
      << scaled.out;
}

TEST(TgxProcess, InvalidFileInJsonModeWritesNothingToStdout) {
  const Process p = run_tgx("inspect truncated.tgx --json 2>/dev/null");
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_EQ(p.out, "");
}

TEST(TgxProcess, RunWritesEachOutputAsNpyEqualToTheOriginalFunctionsResult) {
  std::filesystem::remove_all(files("out_gtest"));
  const Process p = run_tgx("run pair.tgx --input a=a.npy --input b=b.npy --output-dir out_gtest");
  ASSERT_EQ(p.exit_code, 0) << p.out;
  const tgx::Comparison c0 =
      tgx::compare(tg::load_npy(files("out_gtest/output_0.npy")), tg::load_npy(files("pair_out0.npy")), {0, 0});
  EXPECT_TRUE(c0.ok) << c0.message;
  const tg::Tensor out1 = tg::load_npy(files("out_gtest/output_1.npy"));
  EXPECT_EQ(out1.dtype(), tg::int32);
  EXPECT_EQ(out1.item<int32_t>(), 2);  // 3 + 4 - 5
  EXPECT_FALSE(std::filesystem::exists(files("out_gtest/output_2.npy")));
}

TEST(TgxProcess, AFifoAsAnInputOrExpectedFileIsRefusedWithoutWaitingForAWriter) {
  // tg::load_npy checks the file type before anything could block; `timeout` ends a tgx that
  // waits for a writer anyway (exit code 124), so that a regression fails instead of hanging.
  char dir[] = "/tmp/tg_tgx_fifo_XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string fifo = std::string(dir) + "/x.npy";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const Process input = run_tgx("run mlp.tgx --input x=" + fifo + " 2>&1", "timeout 30");
  EXPECT_EQ(input.exit_code, 1) << input.out;
  EXPECT_NE(input.out.find("'" + fifo + "' is a FIFO (named pipe), not a regular file"), std::string::npos) << input.out;
  const Process expect = run_tgx("run mlp.tgx --input x=x.npy --expect " + fifo + " 2>&1", "timeout 30");
  EXPECT_EQ(expect.exit_code, 1) << expect.out;
  EXPECT_NE(expect.out.find("is a FIFO"), std::string::npos) << expect.out;
  std::filesystem::remove_all(dir);
}

TEST(TgxProcess, ExitCodesOfEachKindOfFailure) {
  EXPECT_EQ(run_tgx("run mlp.tgx --input x=x.npy --expect expected.npy 2>/dev/null").exit_code, 0);
  EXPECT_EQ(run_tgx("run mlp.tgx --bogus 2>/dev/null").exit_code, 1);
  EXPECT_EQ(run_tgx("validate corrupted.tgx 2>/dev/null").exit_code, 2);
  EXPECT_EQ(run_tgx("run scaled.tgx --input x.npy 2>/dev/null").exit_code, 3);
  EXPECT_EQ(run_tgx("run mlp.tgx --input x=x.npy --expect wrong.npy 2>/dev/null").exit_code, 4);
}

}  // namespace
