// bfloat16 conversions in bulk and the bfloat16 matrix product. Every rounding here is
// bfloat16_t's (tracegraph/dtype.h): to nearest, ties to even, NaN kept, subnormals kept.
#pragma once
#include <cstdint>

#include "tracegraph/dtype.h"

namespace tg::detail {

/// y[i] = x[i] widened to float32 (exact).
void bf16_to_f32(const bfloat16_t* x, float* y, int64_t n);
/// y[i] = x[i] rounded to bfloat16.
void f32_to_bf16(const float* x, bfloat16_t* y, int64_t n);

/// Whether the CPU has the AVX512_BF16 instructions (vdpbf16ps), which bf16_gemm runs on.
bool cpu_has_avx512_bf16();

/// C (m x n, row-major, leading dim ldc, float32) = op(A) op(B) with A and B bfloat16: every
/// product of two bfloat16 values is exact in float32, and sums accumulate in float32. On the
/// AVX512_BF16 instructions where the CPU has them (and set_bf16_gemm_instructions has not
/// turned them off), else the operands are widened and the float32 gemm (kernels/gemm.h) runs.
/// Large products are split over tracegraph's pool by column panels or row blocks fixed by the sizes.
void bf16_gemm(int m, int n, int k, const bfloat16_t* a, int lda, bool ta, const bfloat16_t* b, int ldb, bool tb,
               float* c, int ldc);

/// Turns the AVX512_BF16 path of bf16_gemm on or off (on where the CPU has it); returns the
/// previous setting. Tests compare the two paths.
bool set_bf16_gemm_instructions(bool enabled);

}  // namespace tg::detail
