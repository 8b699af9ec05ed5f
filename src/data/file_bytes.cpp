#include "data/file_bytes.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>
#include <random>
#include <streambuf>

#include "core/check.h"

namespace tg::detail {

namespace {

// What a file that is not a regular file is, for messages.
const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

[[noreturn]] void not_regular(const char* op, const std::string& path, mode_t mode, const std::string& what) {
  const char* kind = file_kind(mode);
  if (std::strcmp(kind, "not a regular file") == 0)
    op_error<InvalidArgumentError>(op, "'", path, "' is not a regular file; expected ", what);
  op_error<InvalidArgumentError>(op, "'", path, "' is ", kind, ", not a regular file; expected ", what);
}

// An output stream's bytes to a file descriptor, through a buffer; large writes (a tensor's
// data) go straight to the file. The first failed write's errno is kept for the message.
class FdStreambuf : public std::streambuf {
 public:
  explicit FdStreambuf(int fd) : fd_(fd) { setp(buffer_, buffer_ + sizeof buffer_); }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    if (!flush_buffer()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    if (n < static_cast<std::streamsize>(sizeof buffer_)) return std::streambuf::xsputn(s, n);
    if (!flush_buffer() || !write_all(s, static_cast<std::size_t>(n))) return 0;
    return n;
  }
  int sync() override { return flush_buffer() ? 0 : -1; }

 private:
  bool flush_buffer() {
    const bool ok = write_all(pbase(), static_cast<std::size_t>(pptr() - pbase()));
    setp(buffer_, buffer_ + sizeof buffer_);
    return ok;
  }
  bool write_all(const char* p, std::size_t n) {
    if (error_) return false;
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        error_ = errno;
        return false;
      }
      p += w;
      n -= static_cast<std::size_t>(w);
    }
    return true;
  }
  int fd_;
  int error_ = 0;
  char buffer_[1 << 16];
};

// Per-process random bits for temporary names: the pid and a counter already make a name
// unique among this machine's live writers; these keep it so across pid namespaces sharing a
// directory (containers), where O_EXCL would otherwise only retry.
uint64_t process_salt() {
  static const uint64_t salt = [] {
    uint64_t s = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    try {
      std::random_device rd;
      s ^= (uint64_t{rd()} << 32) ^ rd();
    } catch (...) {  // no entropy source: the clock will do, O_EXCL keeps names unique anyway
    }
    return s;
  }();
  return salt;
}

// Creates a temporary file beside `path` that no other writer uses (O_EXCL), and returns its
// descriptor; `temp` receives its name. 0666 before the umask, as the file it replaces got.
int create_temp(const char* op, const std::string& path, std::string& temp) {
  static std::atomic<uint64_t> counter{0};
  for (int attempt = 0;; ++attempt) {
    const uint64_t n = counter.fetch_add(1, std::memory_order_relaxed);
    char suffix[64];
    std::snprintf(suffix, sizeof suffix, ".tmp%ld.%llx%04llx", static_cast<long>(::getpid()),
                  static_cast<unsigned long long>(n), static_cast<unsigned long long>((process_salt() + n * 0x9E3779B97F4A7C15ull) >> 48));
    temp = path + suffix;
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) return fd;
    if (errno != EEXIST || attempt == 100)
      op_error<InvalidArgumentError>(op, "cannot create '", path, "' (its temporary file '", temp, "'): ", std::strerror(errno));
  }
}

}  // namespace

RegularFile::RegularFile(const char* op, const std::string& path, const std::string& what, const std::string& hint) {
  // O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd_ < 0) {
    const int err = errno;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) not_regular(op, path, st.st_mode, what);  // a socket: ENXIO
    op_error<InvalidArgumentError>(op, "cannot open '", path, "': ", std::strerror(err), hint);
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    op_error<InvalidArgumentError>(op, "cannot read '", path, "': ", std::strerror(err), hint);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    not_regular(op, path, st.st_mode, what);
  }
  // A regular file: reads block as usual again (they never wait on one, but say so).
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    const int err = errno;
    ::close(fd_);
    op_error<InvalidArgumentError>(op, "cannot read '", path, "': ", std::strerror(err), hint);
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<uint8_t> read_file_bytes(const char* op, const std::string& path, const std::string& what,
                                     const std::string& hint) {
  const RegularFile file(op, path, what, hint);
  const uint64_t size = file.size();
  std::vector<uint8_t> bytes;
  try {
    if (size > bytes.max_size()) throw std::bad_alloc();
    bytes.resize(static_cast<std::size_t>(size));
  } catch (const std::bad_alloc&) {
    throw ResourceExhaustedError(str_cat("[", op, "] cannot hold the ", size, " bytes of '", path, "' in memory; expected ",
                                         what, " that fits in memory"),
                                 static_cast<std::size_t>(size));
  }
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(file.fd(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) op_error<InvalidArgumentError>(op, "reading '", path, "' failed after ", done, " of ", size, " bytes: ", std::strerror(errno));
    if (n == 0)
      op_error<InvalidArgumentError>(op, "reading '", path, "' failed after ", done, " of ", size,
                                     " bytes: the file became shorter while it was read");
    done += static_cast<std::size_t>(n);
  }
  return bytes;
}

void write_file_bytes(const char* op, const std::string& path, const std::string& bytes) {
  write_file(op, path, [&](std::ostream& out) { out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); });
}

void write_file(const char* op, const std::string& path, const std::function<void(std::ostream&)>& write) {
  // Written beside the target and renamed over it: a reader never sees half a file, and a file
  // that is memory-mapped (a loaded model saved again to its own path) keeps its old pages. The
  // temporary is this call's own: two calls sharing one would write into each other.
  std::string temp;
  int fd = create_temp(op, path, temp);
  auto fail = [&](int err, const char* what) {
    if (fd >= 0) ::close(fd);
    ::unlink(temp.c_str());
    op_error<InvalidArgumentError>(op, what, " '", path, "' failed: ", std::strerror(err));
  };
  {
    FdStreambuf buffer(fd);
    std::ostream out(&buffer);
    try {
      write(out);
      out.flush();
    } catch (...) {
      ::close(fd);
      ::unlink(temp.c_str());
      throw;
    }
    if (buffer.error() != 0 || !out) fail(buffer.error() ? buffer.error() : EIO, "writing");
  }
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) fail(errno, "writing");  // NFS and full disks may report here
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    op_error<InvalidArgumentError>(op, "cannot replace '", path, "': ", std::strerror(err));
  }
}

}  // namespace tg::detail
