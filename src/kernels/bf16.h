// bfloat16 conversions in bulk and the bfloat16 matrix product. Every rounding here is
// bfloat16_t's (tracegraph/dtype.h): to nearest, ties to even, NaN kept, subnormals kept.
#pragma once
#include <cstdint>

#include "kernels/bf16_avx512.h"
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

/// The elementwise ops a bfloat16 product's result passes through, each rounding its own result
/// to bfloat16 as the op apart does: + bias, the mask out > 0, relu, where(mask_in, out, 0).
using Bf16Epilogue = bf16_avx512::Epilogue;
/// C (bfloat16) = the epilogue of op(A) op(B), each sum rounded to bfloat16 first: the bits of
/// bf16_gemm, f32_to_bf16 and the epilogue's ops one after another, in the product's own pass
/// (each block of sums goes through the ops while in registers).
void bf16_gemm_epilogue(int m, int n, int k, const bfloat16_t* a, int lda, bool ta, const bfloat16_t* b, int ldb,
                        bool tb, bfloat16_t* c, int ldc, const Bf16Epilogue& epilogue);
/// The same with float32 B, each value rounded to bfloat16 as the product packs it: the bits of
/// f32_to_bf16 on B and then the bfloat16 product, without the rounded copy of B.
void bf16_gemm_epilogue(int m, int n, int k, const bfloat16_t* a, int lda, bool ta, const float* b, int ldb, bool tb,
                        bfloat16_t* c, int ldc, const Bf16Epilogue& epilogue);

/// bf16_gemm with each sum then rounded to bfloat16 in the product's own pass: the bits of
/// bf16_gemm followed by f32_to_bf16 on C (a bfloat16 matmul's result, TensorFlow's rounding).
void bf16_gemm_rounded(int m, int n, int k, const bfloat16_t* a, int lda, bool ta, const bfloat16_t* b, int ldb,
                       bool tb, bfloat16_t* c, int ldc);
/// The same rounded sums stored widened to float32: the bits of a bfloat16 matmul whose result
/// is cast to float32 (a mixed-precision weight gradient on its way to a float32 Variable).
void bf16_gemm_rounded_to_f32(int m, int n, int k, const bfloat16_t* a, int lda, bool ta, const bfloat16_t* b,
                              int ldb, bool tb, float* c, int ldc);

/// Turns the AVX512_BF16 path of bf16_gemm on or off (on where the CPU has it); returns the
/// previous setting. Tests compare the two paths.
bool set_bf16_gemm_instructions(bool enabled);
/// Makes the AVX512_BF16 path's sums with FMAs on widened pairs (true: the default on Intel's
/// cores) or with vdpbf16ps (elsewhere), the same bits either way (bf16_avx512::Products); returns
/// the previous setting. Tests compare the two.
bool set_bf16_gemm_widened_fma(bool enabled);

}  // namespace tg::detail
