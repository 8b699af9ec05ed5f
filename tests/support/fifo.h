// FIFOs (named pipes) for the tests of the file readers: each must refuse one with
// tg::InvalidArgumentError at once, never wait in open() or read() for a writer. A reader that
// does wait fails its test after a timeout instead of hanging it.
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "support/test_util.h"

namespace tg::testing {

/// A FIFO named `name` in a fresh temporary directory, removed with it.
class TempFifo {
 public:
  explicit TempFifo(const std::string& name) {
    static std::atomic<int> counter{0};
    dir_ = std::filesystem::temp_directory_path() /
           ("tg_fifo_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / name).string();
    if (::mkfifo(path_.c_str(), 0600) != 0) ADD_FAILURE() << "mkfifo " << path_ << " failed";
  }
  ~TempFifo() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TempFifo(const TempFifo&) = delete;
  TempFifo& operator=(const TempFifo&) = delete;
  const std::string& path() const { return path_; }
  std::string dir() const { return dir_.string(); }

 private:
  std::filesystem::path dir_;
  std::string path_;
};

/// Runs `call`, which reads the FIFO at `fifo`, on another thread, and checks that it throws
/// tg::InvalidArgumentError with every fragment within `limit`. A call still blocked by then is
/// a failure; it is released (a writer opens the FIFO and closes it: open() returns and read()
/// sees end of file) so that the test ends rather than hangs.
template <class Fn>
::testing::AssertionResult refuses_fifo_at_once(const std::string& fifo, Fn call, const std::vector<std::string>& fragments,
                                                std::chrono::seconds limit = std::chrono::seconds(20)) {
  auto result = std::async(std::launch::async, [&] { return throws_with<InvalidArgumentError>(call, fragments); });
  if (result.wait_for(limit) == std::future_status::ready) return result.get();
  while (result.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  }
  const ::testing::AssertionResult released = result.get();
  return ::testing::AssertionFailure() << "the call was still blocked on FIFO '" << fifo << "' after " << limit.count()
                                       << " s (released by opening it for writing; then: "
                                       << (released ? "it threw the expected error" : released.message()) << ")";
}

}  // namespace tg::testing
