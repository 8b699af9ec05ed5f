// float32 matrix products for AVX-512 (implicit_gemm_avx512.cpp), whose left operand is read
// through a table of offsets instead of being stored as a matrix: an "implicit GEMM". The
// convolutions use it to read every window of a zero-padded image in place (no im2col), and
// gemm.h uses it for plain products (the offsets are then a row's or a column's elements).
//
// Why our own kernels and not only OpenBLAS: OpenBLAS 0.3.21 does not know every AVX-512 CPU
// (on this project's AMD family-26 machines it runs its Haswell AVX2 kernels, at half the
// vector width), and im2col costs as much again as the product for small windows. See
// docs/DECISIONS.md, "Convolution and pooling".
//
// Every output element is summed in k order within blocks fixed by the shapes: the bits depend
// on the shapes alone, never on the thread count or on how the rows were split.
#pragma once
#include <cstdint>

namespace tg::detail {
struct GemmEpilogue;  // kernels/gemm_epilogue.h
}

namespace tg::detail::implicit_gemm {

/// The operands' layout. Output row p = (oy, ox), p = oy * out_w + ox, reads entry k of the
/// left operand at a[oy * row_step + ox * col_step + taps[k]]; entry k of the right operand's
/// column o is b[k * b_stride + o]; the output's row p column o is c[p * c_stride + o].
struct Layout {
  int64_t out_h = 0, out_w = 0;   // output rows, as (oy, ox); a plain product has out_h = 1
  int64_t row_step = 0;           // offset between the left operand's rows oy and oy + 1
  int64_t col_step = 0;           // offset between its rows ox and ox + 1
  const int64_t* taps = nullptr;  // k -> offset from a row's base
  int64_t k = 0;                  // the sum's length
  int64_t n = 0;                  // output columns
  int64_t b_stride = 0;           // offset between the right operand's rows k and k + 1
  int64_t c_stride = 0;           // offset between the output's rows p and p + 1
};

/// Whether this CPU runs the kernels (AVX-512F).
bool available();

/// c[p, o] = sum over k of A(p, k) * b[k * b_stride + o] (added to c's values when accumulate).
/// With an epilogue, each block of finished rows gets it right after its last store, while the
/// block is in L1; c's row p is the epilogue's row p, and its column o the epilogue's column
/// first_column + o.
void multiply(const Layout& l, const float* a, const float* b, float* c, bool accumulate,
              const GemmEpilogue* epilogue = nullptr, int64_t first_column = 0);

/// g_b[k * b_stride + o] += sum over rows p of A(p, k) * g_c[p * c_stride + o]: the product's
/// gradient with respect to its right operand, given the gradient g_c of its output.
void add_right_gradient(const Layout& l, const float* a, const float* g_c, float* g_b);

/// gemm_epilogue.h's row function for e's elementwise parts, compiled for AVX-512: what code
/// built for the baseline ISA calls per row on a CPU that runs these kernels (same operations,
/// same bits; gemm_epilogue.h's widest_epilogue_row_fn picks it).
using EpilogueRow = void (*)(const GemmEpilogue&, float*, int64_t, int64_t, int64_t);
EpilogueRow epilogue_row(const GemmEpilogue& e);

/// dst[c * ld_dst + r] = src[r * ld_src + c] for a (rows x cols) src: the copy that makes a
/// transposed right operand one multiply reads by rows.
void transpose(int64_t rows, int64_t cols, const float* src, int64_t ld_src, float* dst, int64_t ld_dst);

}  // namespace tg::detail::implicit_gemm
