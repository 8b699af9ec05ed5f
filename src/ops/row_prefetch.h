// Prefetching the rows a gather or a scatter will visit next.
//
// An embedding's lookup and its sparse update touch a few thousand rows scattered over a table
// larger than the L2 cache. The hardware prefetcher follows a row once its first line is read,
// but cannot guess where the next row lies, so each row starts with a miss the core waits for.
// Asking for the row a few indices ahead overlaps those misses.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace tg::detail {

/// How many rows ahead a gather or a scatter asks for: far enough that a miss to memory
/// (~100 ns) is served before the row is reached, near enough that the rows still fit in L1.
inline constexpr int64_t kRowPrefetchDistance = 8;

/// Asks for the first lines of a row that is read (`for_write` false) or updated in place. Only
/// the first 512 bytes: longer rows are streamed by the hardware prefetcher once they start.
inline void prefetch_row(const void* row, std::size_t bytes, bool for_write) {
  constexpr std::size_t kLine = 64, kMaxBytes = 512;
  const char* p = static_cast<const char*>(row);
  const std::size_t n = std::min(bytes, kMaxBytes);
  for (std::size_t b = 0; b < n; b += kLine) {
    if (for_write) __builtin_prefetch(p + b, 1, 3);
    else __builtin_prefetch(p + b, 0, 3);
  }
}

}  // namespace tg::detail
