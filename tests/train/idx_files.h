// Writing synthetic IDX files (plain or gzipped) into a per-test temporary directory.
#pragma once
#include <zlib.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

namespace tg::testing {

/// The bytes of an IDX file: magic 0x0000TTNN, big-endian dims, then `data` as given.
inline std::vector<uint8_t> idx_bytes(uint8_t type_code, const std::vector<uint32_t>& dims,
                                      const std::vector<uint8_t>& data) {
  std::vector<uint8_t> b{0, 0, type_code, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(d >> s));
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// A fresh directory, removed with its files at the end of the test.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    dir_ = std::filesystem::temp_directory_path() /
           ("tg_idx_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(dir_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  /// Writes `bytes` to `name`, gzip-compressed when `gzip` is set; returns the path.
  std::string write(const std::string& name, const std::vector<uint8_t>& bytes, bool gzip = false) const {
    const std::string p = path(name);
    if (gzip) {
      gzFile f = gzopen(p.c_str(), "wb");
      if (!f) throw std::runtime_error("gzopen failed: " + p);
      if (!bytes.empty()) gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
      gzclose(f);
    } else {
      std::ofstream out(p, std::ios::binary);
      out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    }
    return p;
  }

 private:
  std::filesystem::path dir_;
};

}  // namespace tg::testing
