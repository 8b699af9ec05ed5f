// The seed tensor of tg::nn's seeded initializers, shared by the files of src/nn.
#pragma once
#include <cstdint>

#include "tracegraph/ops.h"

namespace tg::detail {

/// The stateless random ops' seed (seed, 0): a seeded Keras initializer gives the same values
/// on every call.
inline Tensor seed_tensor(uint64_t seed) { return constant({static_cast<int64_t>(seed), int64_t{0}}); }

}  // namespace tg::detail
