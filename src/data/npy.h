// The .npy parser and writer on memory (load_npy / save_npy add the file; the fuzz target and the
// tests call these directly).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "tracegraph/tensor.h"

namespace tg::detail {

/// The tensor a .npy image holds; `source` names it in errors (the path).
Tensor parse_npy(const uint8_t* data, std::size_t size, const std::string& source);
/// The .npy image of an eager tensor.
std::string encode_npy(const Tensor& t);

/// The largest header accepted, in bytes (NumPy's numpy.lib.format max_header_size).
inline constexpr std::size_t kMaxNpyHeaderBytes = 10000;

}  // namespace tg::detail
