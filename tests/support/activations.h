// The vectorised float32 activations (the routines of TG_SIMD_MATH_ROUTINES in
// src/kernels/simd_math_formulas.h), with everything the tests know of each, written once: a
// routine added to the list gets its row in activations.cpp, and every test below reads the row.
//   - op cases in float32 and float64, eager, traced and optimised (tests/ops/simd_math_test.cpp),
//   - each path's accuracy against the list's ULP bound, special values exactly, lengths that
//     end in a vector tail (simd_math_test.cpp),
//   - the bits of every path and of the float64 kernel (simd_math_golden_test.cpp),
//   - the gradient against finite differences (tests/autodiff/op_gradients_test.cpp),
//   - the dtypes refused (tests/errors/elementwise_errors_test.cpp),
//   - the (op, dtype) pairs that fuse (tests/ops/fused_test.cpp).
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "tracegraph/tensor.h"

namespace tg::testing {

struct Activation {
  /// A float32 input whose result every path must give exactly (bit for bit; NaN-ness for NaN).
  struct Special {
    float x;
    float want;
  };
  const char* routine;             // its name in TG_SIMD_MATH_ROUTINES (and MathFns)
  const char* op;                  // its op's registry name
  Tensor (*apply)(const Tensor&);  // the public op
  double (*exact)(double);         // the function in double: the reference of every check
  std::vector<double> values;      // the op cases' inputs (as float32 and as float64)
  std::vector<Special> specials;
  float lo, hi;                    // a range where float32 is within 1e-6 relative (random tests)
  bool log_spaced;                 // sample [lo, hi] on a log scale
  double grad_lo, grad_hi;         // where the gradient is checked (|x| there, random sign, when
  bool grad_away_from_zero;        // the op has a kink at 0)
  uint64_t f32_hash[3];            // the outputs' hash on the avx512, avx2 and scalar paths
  uint64_t f64_hash;               // and the float64 kernel's (simd_math_golden_test.cpp)
};

/// Every row, in the list's order.
const std::vector<Activation>& activations();

/// The routine's ULP bound on each path (avx512, avx2, scalar), from the list.
const double* ulp_bounds(const Activation& a);

}  // namespace tg::testing
