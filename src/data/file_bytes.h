// Reading a whole file into memory for the file parsers (IDX, .npy), with the errors they share.
#pragma once
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace tg::detail {

/// The bytes of the file at `path`. A directory, a missing or unreadable file throws
/// tg::InvalidArgumentError naming `op`, the path and the reason, then `hint` (e.g. which
/// package provides the file); content is never checked here.
std::vector<uint8_t> read_file_bytes(const char* op, const std::string& path, const std::string& what,
                                     const std::string& hint);

/// Writes what `write` puts into the stream to `path`, replacing it atomically (a temporary file
/// beside it, renamed over it); InvalidArgumentError naming `op` when it cannot.
void write_file(const char* op, const std::string& path, const std::function<void(std::ostream&)>& write);
/// write_file of a byte string.
void write_file_bytes(const char* op, const std::string& path, const std::string& bytes);

}  // namespace tg::detail
