// The AVX512_BF16 matrix product behind bf16_gemm (kernels/bf16.h). Compiled with
// -mavx512bf16: call only where cpu_has_avx512_bf16().
#pragma once
#include <cstdint>

namespace tg::detail {
struct ColumnSumLeaves;  // kernels/gemm_epilogue.h
}  // namespace tg::detail

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
/// The same from float32 B, each value rounded to bfloat16 (bfloat16_t::round_from) as it is
/// packed: the panels f32_to_bf16 on B and pack_b would make.
void pack_b(int n, int k, const float* b, int ldb, bool tb, uint16_t* out, int p0, int p1);

/// How multiply stores C: the float32 sums; each sum rounded to bfloat16 (bfloat16_t::round_from)
/// and stored as bfloat16 bits (`c` a uint16_t*); rounded so and stored widened back to float32
/// (`c` a float*), the bits a cast to bfloat16 and back to float32 would give; or rounded, then
/// passed through an Epilogue, and stored as bfloat16 bits.
enum class Store : uint8_t { kSums, kRounded, kRoundedWide, kEpilogue };

/// The elementwise ops after a bfloat16 product, each rounding its own result to bfloat16 as
/// the op apart does (the next computes in float32 on that rounded value): + bias (n float32
/// values, each a widened bfloat16), the mask out > 0 (bytes, 0 or 1), relu, where(mask_in,
/// out, 0) (a byte not 0 is true). Null pointers and false skip a part; the masks have leading
/// dim ld_mask.
struct Epilogue {
  const float* bias = nullptr;
  bool* mask_out = nullptr;
  bool relu = false;
  const bool* mask_in = nullptr;
  int64_t ld_mask = 0;
  /// The column sums of the stored result (a dense layer's bias gradient), by leaves of
  /// reduce_sum's order over rows; null: none. Not read by multiply: bf16_gemm_epilogue
  /// (kernels/bf16.h) adds each block of rows to them after multiply stored it.
  ColumnSumLeaves* column_sums = nullptr;
};

/// How multiply makes the sums, with the same bits either way (a NaN's payload aside: each
/// addition keeps one NaN operand's, chosen by operand order): vdpbf16ps on the packed pairs, or
/// each pair widened to float32 and added by two FMAs (vfmadd231ps) in the instruction's own
/// order (the pair's second product first, then its first) with its treatment of subnormals (read
/// as zero, results flushed to zero: MXCSR's DAZ and FTZ around the sums). Intel's cores issue
/// vdpbf16ps at half the FMAs' flop rate, AMD's Zen 4 at twice it (docs/DECISIONS.md).
enum class Products : uint8_t { kDotProducts, kWidenedFma };

/// C rows [i0, i1), columns of panels [q0, q1) = op(A) B, float32 sums of exact products made
/// as `products` says, stored as `store` says (`epilogue` for Store::kEpilogue). A is m x k bfloat16 bits (leading
/// dim lda, transposed when ta); `packed` from pack_b. Rows go in blocks of kBlockRows from i0,
/// the last one of fewer rows where i1 - i0 is not a multiple; each element's sum is the same
/// for any i0, i1, q0, q1.
void multiply(int m, int n, int k, const uint16_t* a, int lda, bool ta, const uint16_t* packed, void* c, int ldc,
              Store store, const Epilogue* epilogue, int i0, int i1, int q0, int q1, Products products);

}  // namespace tg::detail::bf16_avx512
