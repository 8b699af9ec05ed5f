// The IDX parser on memory (read_idx adds the file; the fuzz target and the tests call this).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "tracegraph/tensor.h"

namespace tg::detail {

/// What read_idx returns for an IDX image (plain or gzipped) of `size` bytes; `source` names it
/// in errors.
Tensor parse_idx(const uint8_t* data, std::size_t size, const std::string& source);

}  // namespace tg::detail
