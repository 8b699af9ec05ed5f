// Numbering the distinct values of an index vector in order of first appearance, for the ops
// that sum or check repeated rows (deduplicate_slices, scatter_update's uniqueness check).
//
// An open-addressing table in one allocation: a sparse gradient's few thousand indices are
// numbered in microseconds, where std::unordered_map allocated a node per index and was 13% of
// an embedding model's train step.
#pragma once
#include <bit>
#include <cstdint>
#include <vector>

namespace tg::detail {

template <class I>
class DistinctIndices {
 public:
  /// Room for `n` distinct indices without growing (the table is at most half full).
  explicit DistinctIndices(int64_t n) {
    const uint64_t want = std::bit_ceil(static_cast<uint64_t>(n < 8 ? 16 : 2 * n));
    mask_ = want - 1;
    slots_.assign(want, Slot{0, -1});
  }
  /// The number of `index` among the distinct indices seen so far (0, 1, ... in order of first
  /// appearance), and whether this call saw it first.
  std::pair<int64_t, bool> number(I index) {
    for (uint64_t h = mix(index) & mask_;; h = (h + 1) & mask_) {
      Slot& s = slots_[h];
      if (s.number < 0) {
        s = Slot{index, count_};
        return {count_++, true};
      }
      if (s.index == index) return {s.number, false};
    }
  }
  int64_t size() const { return count_; }

 private:
  struct Slot {
    I index;
    int64_t number;  // -1: empty
  };
  // Indices are often consecutive or strided: multiply by an odd constant (Fibonacci hashing)
  // and take the high bits down, so neighbours spread over the table.
  static uint64_t mix(I index) {
    const uint64_t x = static_cast<uint64_t>(static_cast<int64_t>(index)) * 0x9E3779B97F4A7C15ull;
    return x ^ (x >> 29);
  }
  std::vector<Slot> slots_;
  uint64_t mask_ = 0;
  int64_t count_ = 0;
};

}  // namespace tg::detail
