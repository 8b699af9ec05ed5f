// The fused kernel's table of micro-op loops (see fused_micro.inc), one per ISA build.
#pragma once
#include <cstdint>
#include <vector>

#include "core/buffer.h"
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

/// One op of a register chain: `op` applied to the previous op's result (or the chain's input),
/// with `constant` as its first (constant_side 0) or second (1) operand; unary ops have -1.
/// A Mul by a constant may carry the Add of a constant that follows it, and a Relu after that
/// (`then`): x * m + c, relu, the pattern of the benchmark chains, in one dispatch of the chain
/// loop instead of three. The same operations in the same order: two roundings, never an FMA.
struct ChainOp {  // 16 bytes: a traced chain may hold 100k of them
  enum Then : uint8_t { kNothing, kAdd, kAddRelu };
  OpId op = OpId::Identity;
  int8_t constant_side = -1;
  Then then = kNothing;  // op == Mul only
  float constant = 0.0f;
  union {
    void (*routine)(const float*, float*, int64_t) = nullptr;  // then == kNothing: the op's vectorised routine, if any
    float added;  // then != kNothing: the Add's constant, its second operand
  };
};
/// A run of float32 elementwise ops, each reading only the one before it and a constant, applied
/// to a block of values kept in registers through the whole run (see fused_plan.cpp's planner).
struct RegisterChain {
  CachedVector<ChainOp> ops;
};
/// Whether the register chain loop applies `op` (the arithmetic ops whose functors work on whole
/// registers, and the float32 ops with a vectorised routine).
bool chainable_op(OpId op);

struct MicroTable {
  MicroSet ops[kNumOps][kNumDTypes];
  MicroFn cast[kNumDTypes][kNumDTypes] = {};  // [from][to]; uint8 has no loops (never fused)
  // (x * m + c), then relu when [.][1]: args x (vector), m, c (scalars); [0] float32, [1] float64.
  // The same two roundings as mul then add (no FMA), so results equal the three steps'.
  MicroFn affine[2][2] = {};
  // A RegisterChain over float32: args x (vector) and the chain itself. AVX-512 builds only.
  MicroFn chain_f32 = nullptr;
  // gelu(x) and gelu_grad(x) of one float32 x (simd::gelu_with_grad_f32): args x and, in the place
  // of a second operand, where gelu_grad's values go; out gets gelu's.
  MicroFn gelu_with_grad = nullptr;
};

namespace fused_baseline {
void fill_micro_table(MicroTable& t);
}
namespace fused_avx512 {
void fill_micro_table(MicroTable& t);
}

}  // namespace tg::detail
