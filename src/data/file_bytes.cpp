#include "data/file_bytes.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/check.h"

namespace tg::detail {



std::vector<uint8_t> read_file_bytes(const char* op, const std::string& path, const std::string& what,
                                     const std::string& hint) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    op_error<InvalidArgumentError>(op, "'", path, "' is a directory; expected ", what);
  std::ifstream in(path, std::ios::binary);
  if (!in) op_error<InvalidArgumentError>(op, "cannot open '", path, "': ", std::strerror(errno), hint);
  std::vector<uint8_t> bytes;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size > 0) {
    bytes.resize(static_cast<std::size_t>(size));
    in.read(reinterpret_cast<char*>(bytes.data()), size);
    if (in.gcount() != size)
      op_error<InvalidArgumentError>(op, "reading '", path, "' failed after ", in.gcount(), " of ", size,
                                     " bytes");
  }
  return bytes;
}

void write_file_bytes(const char* op, const std::string& path, const std::string& bytes) {
  write_file(op, path, [&](std::ostream& out) { out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); });
}

void write_file(const char* op, const std::string& path, const std::function<void(std::ostream&)>& write) {
  // Written beside the target and renamed over it: a reader never sees half a file, and a file
  // that is memory-mapped (a loaded model saved again to its own path) keeps its old pages.
  const std::string temp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) op_error<InvalidArgumentError>(op, "cannot create '", path, "': ", std::strerror(errno));
    try {
      write(out);
    } catch (...) {
      out.close();
      std::remove(temp.c_str());
      throw;
    }
    out.close();
    if (!out) {
      const int err = errno;
      std::remove(temp.c_str());
      op_error<InvalidArgumentError>(op, "writing '", path, "' failed: ", std::strerror(err));
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(temp.c_str());
    op_error<InvalidArgumentError>(op, "cannot replace '", path, "': ", std::strerror(err));
  }
}

}  // namespace tg::detail
