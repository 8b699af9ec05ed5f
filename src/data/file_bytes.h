// Reading and writing whole files for the file parsers (IDX, .npy) and the .tgx container, with
// the errors they share.
#pragma once
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace tg::detail {

/// A regular file open for reading (closed by the destructor), and its size. The file's type is
/// checked before anything can block: the path is opened with O_NONBLOCK - a FIFO without a
/// writer would otherwise hang in open(), a device in read() - and anything but a regular file
/// (a directory, a FIFO, a device, a socket) is a tg::InvalidArgumentError naming `op`, the path,
/// what it is and `what` was expected; so is a missing or unreadable path (then `hint` follows).
class RegularFile {
 public:
  RegularFile(const char* op, const std::string& path, const std::string& what, const std::string& hint = "");
  ~RegularFile();
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  int fd() const { return fd_; }
  uint64_t size() const { return size_; }

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
};

/// The bytes of the regular file at `path` (RegularFile's checks and errors). Memory for them
/// that cannot be had is a tg::ResourceExhaustedError; content is never checked here.
std::vector<uint8_t> read_file_bytes(const char* op, const std::string& path, const std::string& what,
                                     const std::string& hint);

/// Writes what `write` puts into the stream to `path`, replacing it atomically: a temporary file
/// of its own beside it (created with O_EXCL under a name no other call - thread or process - is
/// using), renamed over it. A reader never sees half a file, concurrent calls never share a
/// temporary (the last rename wins, whole), and the temporary is removed when anything fails.
/// InvalidArgumentError naming `op` when it cannot write; an exception from `write` propagates.
void write_file(const char* op, const std::string& path, const std::function<void(std::ostream&)>& write);
/// write_file of a byte string.
void write_file_bytes(const char* op, const std::string& path, const std::string& bytes);

}  // namespace tg::detail
