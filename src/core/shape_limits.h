// Limits on shapes that tracegraph reads from data rather than builds itself.
#pragma once
#include <cstddef>

namespace tg::detail {

/// The largest rank of a shape read from data - the length of a shape tensor (fill,
/// broadcast_to, the random ops), a shape in a .tgx file: TensorFlow's own limit on ranks
/// (TensorShape's MaxDimensions). Checked before anything is allocated per dimension.
inline constexpr std::size_t kMaxRank = 254;

}  // namespace tg::detail
