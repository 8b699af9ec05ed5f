// Argument checks shared by the layers and losses of src/nn: each throws a typed tg:: error whose
// message starts with "[<layer>]" and says what was expected and what was received.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "tracegraph/tensor.h"

namespace tg::nn {

/// tg::InvalidArgumentError unless every (name, value) size is > 0.
void check_sizes(const char* layer, const std::string& name,
                 std::initializer_list<std::pair<const char*, int64_t>> sizes);
/// tg::TypeError unless dtype is float32 or float64.
void check_float_dtype(const char* layer, DType dtype);
/// `name` after check_sizes and check_float_dtype. A layer initialises its name_ with it: members
/// are made in order and name_ comes before the Variables, so no Variable is made from
/// arguments that have not been checked.
std::string checked_layer_name(const char* layer, std::string name,
                               std::initializer_list<std::pair<const char*, int64_t>> sizes, DType dtype);
/// x defined (tg::ValueError), of `dtype` (tg::InvalidArgumentError, as Dense), of known rank
/// >= min_rank whose last dim is `features` or None (tg::InvalidArgumentError).
void check_features_input(const char* layer, const std::string& name, const Tensor& x, DType dtype,
                          int64_t features, int64_t min_rank);

}  // namespace tg::nn
