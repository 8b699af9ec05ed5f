// The AVX512_BF16 matrix product behind bf16_gemm (kernels/bf16.h). Compiled with
// -mavx512bf16: call only where cpu_has_avx512_bf16().
#pragma once
#include <cstdint>

namespace tg::detail::bf16_avx512 {

/// Columns of C per panel of packed B, and rows of C per block of packed A.
inline constexpr int kPanelCols = 32;
inline constexpr int kBlockRows = 12;

/// bf16_to_f32 and f32_to_bf16 (kernels/bf16.h) sixteen lanes at a time, with the rounding of
/// bfloat16_t: vcvtne2ps2bf16 where a block of 32 has no subnormal (it reads them as zero), else
/// the same integer rounding.
void widen(const uint16_t* x, float* y, int64_t n);
void narrow(const float* x, uint16_t* y, int64_t n);

/// Packs panels [p0, p1) of op(B) (k x n bfloat16 bits, leading dim ldb, transposed when tb) in
/// vdpbf16ps order: panel p, pair q holds (B[2q][j], B[2q+1][j]) for its 32 columns j, zeros
/// past k and n. `out` holds ceil(n / 32) panels of ceil(k / 2) * 64 values.
void pack_b(int n, int k, const uint16_t* b, int ldb, bool tb, uint16_t* out, int p0, int p1);

/// C rows of row blocks [r0, r1), columns of panels [q0, q1) = op(A) B, float32 sums of exact
/// products. A is m x k bfloat16 bits (leading dim lda, transposed when ta); `packed` from pack_b.
void multiply(int m, int n, int k, const uint16_t* a, int lda, bool ta, const uint16_t* packed, float* c, int ldc,
              int r0, int r1, int q0, int q1);

}  // namespace tg::detail::bf16_avx512
