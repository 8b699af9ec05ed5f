// How tg::save, tg::save_variables, tg::load and tg::restore_variables meet the file system:
// saves are atomic per call (concurrent saves to one path never mix, a failed one leaves
// nothing), a FIFO or other non-file is refused without waiting on it, and what save writes
// load reads (the format's limits are checked at save time).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <functional>
#include <latch>
#include <map>
#include <stdexcept>
#include <thread>
#include <typeinfo>
#include <utility>

#include "data/file_bytes.h"
#include "export/tgx_format.h"
#include "support/fifo.h"
#include "support/test_util.h"

namespace tg {
namespace {

using testing::throws_with;

// A fresh directory, removed with its files at the end of the test.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    dir_ = std::filesystem::temp_directory_path() /
           ("tg_file_io_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(dir_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  /// The names of the files in the directory (a leftover temporary shows here).
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::filesystem::path dir_;
};

// ---- atomic saves ------------------------------------------------------------------------------

// Runs fn(0) ... fn(n - 1) on n threads released at the same moment; what each raised, or "".
std::vector<std::string> run_at_once(int n, const std::function<void(int)>& fn) {
  std::latch start(n);
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t)
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      try {
        fn(t);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(t)] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  return errors;
}

TEST(AtomicSave, ConcurrentCheckpointsToOnePathNeverMix) {
  // Each thread saves its own Variable "w" (every element its number) to the same path, all
  // at once; whatever the order, the file must then be one of them, whole.
  constexpr int kThreads = 4, kRounds = 150;
  constexpr int64_t kElements = 1 << 15;  // 128 KiB: writes long enough to overlap
  TempDir dir;
  const std::string path = dir.path("ckpt.tgx");
  std::vector<Variable> values;
  for (int t = 0; t < kThreads; ++t) values.emplace_back(fill(TensorShape({kElements}), static_cast<float>(t + 1)), "w");
  Variable restored(zeros({kElements}), "w");
  for (int round = 0; round < kRounds; ++round) {
    const std::vector<std::string> errors = run_at_once(kThreads, [&](int t) { save_variables(path, {values[t]}); });
    for (int t = 0; t < kThreads; ++t) ASSERT_EQ(errors[t], "") << "round " << round << ", thread " << t;
    ASSERT_NO_THROW(restore_variables(path, {restored})) << "round " << round;
    const std::vector<float> got = restored.read_value().to_vector<float>();
    ASSERT_GE(got[0], 1.0f) << "round " << round;
    ASSERT_LE(got[0], static_cast<float>(kThreads)) << "round " << round;
    for (int64_t i = 0; i < kElements; ++i) ASSERT_EQ(got[i], got[0]) << "round " << round << ", element " << i;
    ASSERT_EQ(dir.entries(), std::vector<std::string>{"ckpt.tgx"}) << "round " << round << ": a temporary was left";
  }
}

TEST(AtomicSave, CheckpointsFromSeveralProcessesToOnePathNeverMix) {
  // Two child processes save their own values while this one saves and restores: every restore
  // sees one whole checkpoint.
  constexpr int kChildren = 2, kRounds = 60;
  constexpr int64_t kElements = 1 << 14;
  TempDir dir;
  const std::string path = dir.path("ckpt.tgx");
  std::vector<Variable> values;
  for (int c = 0; c <= kChildren; ++c) values.emplace_back(fill(TensorShape({kElements}), static_cast<float>(c + 1)), "w");
  save_variables(path, {values[0]});
  std::vector<pid_t> children;
  for (int c = 1; c <= kChildren; ++c) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::alarm(60);  // a child that never finishes fails the test rather than hangs it
      int failed = 0;
      for (int r = 0; r < kRounds; ++r) {
        try {
          save_variables(path, {values[c]});
        } catch (...) {
          failed = 1;
        }
      }
      ::_exit(failed);
    }
    children.push_back(pid);
  }
  Variable restored(zeros({kElements}), "w");
  for (int r = 0; r < kRounds; ++r) {
    EXPECT_NO_THROW(save_variables(path, {values[0]}));
    EXPECT_NO_THROW(restore_variables(path, {restored}));
    const std::vector<float> got = restored.read_value().to_vector<float>();
    EXPECT_TRUE(got[0] >= 1.0f && got[0] <= static_cast<float>(kChildren + 1)) << got[0];
    EXPECT_EQ(std::count(got.begin(), got.end(), got[0]), kElements) << "round " << r << ": a mixed file";
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a child's save failed (status " << status << ")";
  }
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"ckpt.tgx"});
}

TEST(AtomicSave, ConcurrentSavesOfFunctionsToOnePathNeverMix) {
  constexpr int kThreads = 3, kRounds = 40;
  TempDir dir;
  const std::string path = dir.path("f.tgx");
  auto f0 = function([](const Tensor& x) { return x + 0.0f; }, {.name = "f0"});
  auto f1 = function([](const Tensor& x) { return x + 1.0f; }, {.name = "f1"});
  auto f2 = function([](const Tensor& x) { return x + 2.0f; }, {.name = "f2"});
  f0(constant(0.0f));
  f1(constant(0.0f));
  f2(constant(0.0f));
  const std::vector<std::function<void()>> saves = {[&] { save(path, f0); }, [&] { save(path, f1); },
                                                    [&] { save(path, f2); }};
  for (int round = 0; round < kRounds; ++round) {
    const std::vector<std::string> errors = run_at_once(kThreads, [&](int t) { saves[t](); });
    for (int t = 0; t < kThreads; ++t) ASSERT_EQ(errors[t], "") << "round " << round << ", thread " << t;
    LoadedFunction loaded = load(path);
    const std::string name = loaded.name();
    ASSERT_TRUE(name == "f0" || name == "f1" || name == "f2") << name;
    const Tensor y = loaded(constant(0.0f));
    EXPECT_EQ(y.item<float>(), static_cast<float>(name[1] - '0')) << "round " << round;
  }
}

TEST(AtomicSave, AFailedWriteLeavesTheOldFileAndNoTemporary) {
  TempDir dir;
  const std::string path = dir.path("data.bin");
  detail::write_file_bytes("test", path, "old contents");
  // The writer fails half-way: its exception comes through, the old file stays whole.
  EXPECT_THROW(detail::write_file("test", path, [](std::ostream& out) {
                 out << "half of the new contents";
                 throw std::runtime_error("the writer failed");
               }),
               std::runtime_error);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"data.bin"});
  // The rename fails (the target is a directory with a file in it): an InvalidArgumentError that
  // says so, and the temporary is removed.
  std::filesystem::create_directories(dir.path("model.tgx/inside"));
  Variable w(constant({1.0f}), "w");
  EXPECT_TRUE(throws_with<InvalidArgumentError>([&] { save_variables(dir.path("model.tgx"), {w}); },
                                                {"[tg::save_variables]", "cannot replace", "model.tgx"}));
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"data.bin", "model.tgx"}));
  // A directory that does not exist: nothing to create the temporary in.
  EXPECT_TRUE(throws_with<InvalidArgumentError>([&] { save_variables(dir.path("no/such/dir/w.tgx"), {w}); },
                                                {"[tg::save_variables]", "cannot create", "no/such/dir/w.tgx"}));
}

// ---- non-files are refused without waiting on them ---------------------------------------------

TEST(NonRegularFiles, LoadRefusesAFifoAtOnce) {
  testing::TempFifo fifo("model.tgx");
  EXPECT_TRUE(testing::refuses_fifo_at_once(fifo.path(), [&] { load(fifo.path()); },
                                            {"[tg::load]", fifo.path(), "is a FIFO (named pipe), not a regular file",
                                             "expected a .tgx file"}));
}

TEST(NonRegularFiles, RestoreVariablesRefusesAFifoAtOnce) {
  testing::TempFifo fifo("ckpt.tgx");
  Variable w(constant({1.0f}), "w");
  EXPECT_TRUE(testing::refuses_fifo_at_once(fifo.path(), [&] { restore_variables(fifo.path(), {w}); },
                                            {"[tg::restore_variables]", fifo.path(), "is a FIFO"}));
  EXPECT_EQ(w.read_value().item<float>(), 1.0f);
}

TEST(NonRegularFiles, DirectoriesAndDevicesAreNamed) {
  TempDir dir;
  EXPECT_TRUE(throws_with<InvalidArgumentError>([&] { load(dir.path("")); }, {"is a directory, not a regular file"}));
  if (std::filesystem::exists("/dev/null")) {
    EXPECT_TRUE(throws_with<InvalidArgumentError>([&] { load("/dev/null"); },
                                                  {"'/dev/null' is a character device, not a regular file"}));
  }
}

// ---- what save writes, load reads ----------------------------------------------------------------

TEST(SaveLoadLimits, ARankPastTheFormatsLimitIsRefusedAtSave) {
  // A traced reshape to 300 dims of 1: a graph tracegraph runs, but a .tgx file holds ranks up
  // to 254 (TensorFlow's limit). Saving refuses it with the loader's own words, and writes nothing.
  auto f = function([](const Tensor& x) { return reduce_sum(reshape(x, std::vector<int64_t>(300, 1))); }, {.name = "deep"});
  EXPECT_EQ(f(constant(2.0f)).item<float>(), 2.0f);
  TempDir dir;
  const std::string loader_words = detail::tgx::rank_defect("an output", 300);
  EXPECT_EQ(loader_words, "an output has rank 300; at most 254 is supported");
  EXPECT_TRUE(throws_with<ValueError>([&] { save(dir.path("deep.tgx"), f); },
                                      {"[tg::save]", loader_words, "nothing was written", "(op reshape)",
                                       "of function 'deep'"}));
  EXPECT_TRUE(dir.entries().empty());
  // Rank 254 itself is within the limit: saved and loaded.
  auto g = function([](const Tensor& x) { return reduce_sum(reshape(x, std::vector<int64_t>(254, 1))); }, {.name = "ok"});
  g(constant(3.0f));
  save(dir.path("ok.tgx"), g);
  const Tensor y = load(dir.path("ok.tgx"))(constant(3.0f));
  EXPECT_EQ(y.item<float>(), 3.0f);
}

TEST(SaveLoadLimits, AVariableOfTooHighARankIsRefusedAtSaveVariables) {
  Variable deep(zeros(TensorShape(std::vector<int64_t>(255, 1))), "deep");
  TempDir dir;
  EXPECT_TRUE(throws_with<ValueError>([&] { save_variables(dir.path("ckpt.tgx"), {deep}); },
                                      {detail::tgx::rank_defect("a Variable", 255), "(Variable 'deep')"}));
  EXPECT_TRUE(dir.entries().empty());
}

// An enum whose C++ type name is longer than a file may carry (kMaxTypeName).
template <int... I>
struct LongName {
  enum class Mode { kA, kB };
};
using LongMode = LongName<1000000, 1000001, 1000002, 1000003, 1000004, 1000005, 1000006, 1000007, 1000008, 1000009,
                          1000010, 1000011, 1000012, 1000013, 1000014, 1000015, 1000016, 1000017, 1000018, 1000019,
                          1000020, 1000021, 1000022, 1000023, 1000024, 1000025, 1000026, 1000027, 1000028,
                          1000029>::Mode;

TEST(SaveLoadLimits, ALiteralTypeNameTooLongForTheFileIsRefusedAtSave) {
  const std::size_t length = std::strlen(typeid(LongMode).name());
  ASSERT_GT(length, detail::tgx::kMaxTypeName);
  auto f = function([](const Tensor& x, LongMode m) { return m == LongMode::kA ? x : -x; }, {.name = "moded"});
  f(constant(1.0f), LongMode::kB);
  TempDir dir;
  EXPECT_TRUE(throws_with<ValueError>([&] { save(dir.path("moded.tgx"), f); },
                                      {"[tg::save]", detail::tgx::type_name_defect(length), "argument 'arg1'",
                                       "nothing was written"}));
  EXPECT_TRUE(dir.entries().empty());
}

enum class Color { kRed, kBlue };

TEST(SaveLoadLimits, AMapWithEnumKeysIsRefusedAtSave) {
  // Today's behaviour: a std::map's enum keys are literals without their type's name, which the
  // loader requires of an enum literal (the file used to save and then never load). Refused at
  // save, with the way out; it should round-trip once trace types name enum keys.
  auto f = function([](const std::map<Color, Tensor>& m) { return m.at(Color::kRed) - m.at(Color::kBlue); }, {.name = "m"});
  const std::map<Color, Tensor> in{{Color::kRed, constant(5.0f)}, {Color::kBlue, constant(2.0f)}};
  f(in);
  TempDir dir;
  EXPECT_TRUE(throws_with<ValueError>([&] { save(dir.path("m.tgx"), f); },
                                      {"[tg::save]", "std::map keyed by the enum", "Key the map by integers",
                                       "argument 'arg0' of function 'm'"}));
  EXPECT_TRUE(dir.entries().empty());
}

}  // namespace
}  // namespace tg
