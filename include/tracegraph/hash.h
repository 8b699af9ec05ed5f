// The one hash combiner tracegraph uses (trace types, the cached-call path, CSE). Internal, but
// in include/ because the argument-walking templates of structure.h hash on the call path.
#pragma once
#include <cstddef>

namespace tg::detail {

/// Mixes `v` into the running hash `h` (the boost::hash_combine recipe).
constexpr std::size_t hash_combine(std::size_t h, std::size_t v) {
  return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
}
inline void hash_mix(std::size_t& h, std::size_t v) { h = hash_combine(h, v); }

}  // namespace tg::detail
