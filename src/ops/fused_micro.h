// The fused kernel's table of micro-op loops (see fused_micro.inc), one per ISA build.
#pragma once
#include <cstdint>

#include "ops/op.h"

namespace tg::detail {

/// Runs one micro-op over n elements: args are the operands (a one-element operand of a
/// broadcasting pattern points at its single value), out never aliases them.
using MicroFn = void (*)(const void* const* args, void* out, int64_t n);

/// The loops of one op on one operand dtype: fn[0] all operands vectors; for binary ops fn[1]
/// the first operand a scalar, fn[2] the second a scalar.
struct MicroSet {
  MicroFn fn[3] = {nullptr, nullptr, nullptr};
  DType out = DType::String;  // String: no loops for this op and dtype
};

struct MicroTable {
  MicroSet ops[kNumOps][6];
  MicroFn cast[6][6] = {};  // [from][to]
  // (x * m + c), then relu when [.][1]: args x (vector), m, c (scalars); [0] float32, [1] float64.
  // The same two roundings as mul then add (no FMA), so results equal the three steps'.
  MicroFn affine[2][2] = {};
};

namespace fused_baseline {
void fill_micro_table(MicroTable& t);
}
namespace fused_avx512 {
void fill_micro_table(MicroTable& t);
}

}  // namespace tg::detail
