// Comparing a function's output with an expected tensor (tgx run --expect).
#pragma once
#include <cstdint>
#include <string>

#include "tracegraph/tensor.h"

namespace tgx {

struct Tolerance {
  double rtol = 1e-5;  // NumPy's allclose defaults
  double atol = 1e-8;
};

struct Comparison {
  bool ok = false;
  /// One line: why they differ (shape, dtype kind, the worst element), or how close they are.
  std::string message;
  int64_t mismatches = 0;  // elements beyond the tolerance
  double max_abs_diff = 0;
};

/// Floating outputs match when |got - expected| <= atol + rtol * |expected| for every element
/// (NaN matches NaN, an infinity the same infinity); float32 against float64 is compared in
/// float64. Integers (int32 and int64 mixed) and bools must be equal. Shapes must be equal.
Comparison compare(const tg::Tensor& got, const tg::Tensor& expected, const Tolerance& tolerance);

/// "[1, 3]": the multi-index of flat element `flat` of `shape` (fully defined).
std::string index_text(const tg::TensorShape& shape, int64_t flat);

}  // namespace tgx
