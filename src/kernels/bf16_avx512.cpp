// vdpbf16ps: each float32 lane adds the two products of a pair of bfloat16 values. op(A)'s rows
// are packed as pairs (A[i][2q], A[i][2q+1]) broadcast to every lane; B's panels hold the matching
// pairs of 32 columns (pack_b). A block of 12 rows by 32 columns keeps its 24 sums in registers
// for the whole of k, as the float32 kernels do (implicit_gemm.h). The instruction treats
// subnormal inputs as zero and rounds each step to nearest even, as oneDNN's bf16 kernels do.
#include "kernels/bf16_avx512.h"

#include "core/unroll.h"

// GCC 12 reports the intrinsics' own _mm512_undefined_* placeholders as maybe uninitialised
// when they are inlined here; the warning is about the header, not this code.
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__  // clang has no such group (and no such false positive)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "tracegraph/dtype.h"

namespace tg::detail::bf16_avx512 {
namespace {

__mmask16 lanes(int count) { return count >= 16 ? __mmask16(0xFFFF) : count <= 0 ? __mmask16(0) : __mmask16((1u << count) - 1); }

// v[c][r] = v[r][c] for 32-bit lanes: pairs of rows interleaved, then pairs of pairs (each
// 128-bit lane then holds a 4 x 4 block transposed), then the 128-bit lanes gathered.
inline void transpose_16x16(__m512i* v) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
  }
  // u[4i + j], lane L: column 4L + j of rows 4i .. 4i + 3.
  __m512i u[16];
  for (int i = 0; i < 16; i += 4) {
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512i w0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44), w1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xEE);
    const __m512i w2 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44);
    const __m512i w3 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xEE);
    v[j] = _mm512_shuffle_i32x4(w0, w2, 0x88);
    v[4 + j] = _mm512_shuffle_i32x4(w0, w2, 0xDD);
    v[8 + j] = _mm512_shuffle_i32x4(w1, w3, 0x88);
    v[12 + j] = _mm512_shuffle_i32x4(w1, w3, 0xDD);
  }
}

// Rows [row0, row0 + kBlockRows) of op(A) as pairs: out[q * kBlockRows + r], zeros past m and k.
void pack_a(int m, int k, const uint16_t* a, int lda, bool ta, int row0, uint32_t* out) {
  const int64_t pairs = (k + 1) / 2;
  if (ta) {
    // A's rows are stored as columns: pair q of the block's rows lies in stored rows 2q and
    // 2q + 1, side by side, so read them in that order.
    // Sixteen lanes each: the block's values of both stored rows widened to 32 bits, the second
    // shifted into the upper halves; lanes past m load as zeros.
    const __mmask16 valid = lanes(std::min(kBlockRows, m - row0));
    const __mmask16 block_lanes = lanes(kBlockRows);
    for (int64_t q = 0; q < pairs; ++q) {
      const uint16_t* lo = a + 2 * q * lda + row0;
      const __m512i low = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(valid, lo));
      const __m512i high = 2 * q + 1 < k ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(valid, lo + lda))
                                         : _mm512_setzero_si512();
      _mm512_mask_storeu_epi32(out + q * kBlockRows, block_lanes, _mm512_or_si512(low, _mm512_slli_epi32(high, 16)));
    }
    return;
  }
  // Sixteen pairs of every row at a time, transposed in registers (rows past m are zeros); the
  // pairs past the last sixteen, and the lone value of an odd k, one by one.
  const int rows = std::min(kBlockRows, m - row0);
  const int64_t whole = k / 2, vector_end = whole / 16 * 16;
  const __mmask16 block_lanes = lanes(kBlockRows);
  for (int64_t q0 = 0; q0 < vector_end; q0 += 16) {
    __m512i v[16];
    for (int r = 0; r < 16; ++r)
      v[r] = r < rows ? _mm512_loadu_si512(a + static_cast<int64_t>(row0 + r) * lda + 2 * q0) : _mm512_setzero_si512();
    transpose_16x16(v);
    for (int t = 0; t < 16; ++t) _mm512_mask_storeu_epi32(out + (q0 + t) * kBlockRows, block_lanes, v[t]);
  }
  for (int r = 0; r < kBlockRows; ++r) {
    const uint16_t* row = r < rows ? a + static_cast<int64_t>(row0 + r) * lda : nullptr;
    for (int64_t q = vector_end; q < whole; ++q) {
      uint32_t v = 0;
      if (row) std::memcpy(&v, row + 2 * q, 4);
      out[q * kBlockRows + r] = v;
    }
    if (k % 2) out[whole * kBlockRows + r] = row ? row[k - 1] : 0u;
  }
}


// Sixteen floats' bits rounded to their upper halves as bfloat16_t::round_from does.
inline __m256i round_lanes(__m512i u) {
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
}

// Whether any of sixteen floats is subnormal: 0 < |x| < 2^-126 (vcvtne2ps2bf16 reads those as zero).
inline __mmask16 subnormal_lanes(__m512i u) {
  const __m512i magnitude_less_one = _mm512_sub_epi32(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(1));
  return _mm512_cmplt_epu32_mask(magnitude_less_one, _mm512_set1_epi32(0x007fffff));
}

// round_lanes of sixteen floats, by vcvtneps2bf16 where none is subnormal (it reads those as
// zero; otherwise it rounds as round_lanes does, NaN quietened by the same bit).
inline __m256i round_floats(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  if (subnormal_lanes(u) == 0) return (__m256i)_mm512_cvtneps_pbh(v);
  return round_lanes(u);
}

// The upper halves of sixteen floats that are widened bfloat16 values: their bfloat16 bits,
// which round_lanes would give too (the lower halves are zeros; a NaN's quiet bit is set).
inline __m256i upper_halves(__m512 v) { return _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(v), 16)); }

// Sixteen widened bfloat16 values (bits in the upper halves of 32-bit lanes) as float32.
inline __m512 widened(__m256i bits) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16)); }

// The epilogue of sixteen sums of row `row`, columns [col, col + 16) (`valid` of them), as the
// ops apart compute it (ops/matmul.cpp's bf16 epilogue rows did it in passes over whole rows):
// the product rounded; + bias, rounded; the mask out > 0; relu (MAXPS returns its second operand
// unless the first is greater: x < 0 ? 0 : x, NaN and -0.0 included); where(mask, out, 0).
// relu and where of a bfloat16 value are bfloat16 values: their rounding keeps their bits.
inline __m256i epilogue_lanes(__m512 sums, const Epilogue& e, int64_t row, int64_t col, __mmask16 valid) {
  __m256i bits = round_floats(sums);
  if (!e.bias && !e.mask_out && !e.relu && !e.mask_in) return bits;
  __m512 w = widened(bits);
  if (e.bias) {
    bits = round_floats(_mm512_add_ps(w, _mm512_maskz_loadu_ps(valid, e.bias + col)));
    if (!e.mask_out && !e.relu && !e.mask_in) return bits;
    w = widened(bits);
  }
  const int64_t at = row * e.ld_mask + col;
  if (e.mask_out) {
    const __mmask16 positive = _mm512_cmp_ps_mask(w, _mm512_setzero_ps(), _CMP_GT_OQ);
    _mm_mask_storeu_epi8(e.mask_out + at, valid, _mm_maskz_mov_epi8(positive, _mm_set1_epi8(1)));
  }
  if (e.relu) w = _mm512_max_ps(_mm512_setzero_ps(), w);
  if (e.mask_in) {
    const __m128i m = _mm_maskz_loadu_epi8(valid, e.mask_in + at);
    w = _mm512_maskz_mov_ps(_mm_test_epi8_mask(m, m), w);
  }
  return upper_halves(w);
}

// MXCSR's flush-to-zero (bit 15) and denormals-are-zero (bit 6), its rounding control (bits 13-14;
// zero: to nearest even) and its exception masks (bits 7-12): how vdpbf16ps computes whatever
// MXCSR says, for the FMAs that stand in for it.
constexpr unsigned kFlushSubnormals = 0x8040, kRoundingControl = 0x6000, kAllExceptionsMasked = 0x1F80;

// Keeps the compiler from moving the computation of v across this point (MXCSR changes are
// invisible to it).
inline void fence(__m512& v) { asm volatile("" : "+v"(v)); }

// kHalves: 2 for a whole panel, 1 where the panel's last 16 columns lie past n (their packed
// values are zeros, and their sums would be stored nowhere). kRows: the block's rows rounded up
// to 4 (rows past `rows` are zeros in `ap` and not stored), so that a block of 4 or 8 rows costs
// a third or two thirds of a whole one. Each sum adds the pairs in order q = 0, 1, ..., whatever
// the block's shape. C's block starts at row `row0`, column `col0`. `ap` is pack_a's pairs, or
// for Products::kWidenedFma widen_pairs' floats.
template <int kHalves, int kRows, Store kStore, Products kProducts>
void block(int64_t pairs, const void* ap, const uint16_t* bp, void* c, int ldc, const Epilogue* e, int row0,
           int col0, int rows, int cols) {
  __m512 acc[kRows][kHalves];
  for (auto& row : acc)
    for (__m512& v : row) v = _mm512_setzero_ps();
  if constexpr (kProducts == Products::kDotProducts) {
    for (int64_t q = 0; q < pairs; ++q) {
      __m512bh b[kHalves];
      for (int h = 0; h < kHalves; ++h) b[h] = (__m512bh)_mm512_loadu_si512(bp + q * 2 * kPanelCols + h * kPanelCols);
      const uint32_t* aq = static_cast<const uint32_t*>(ap) + q * kBlockRows;
TG_UNROLL(12)
      for (int r = 0; r < kRows; ++r) {
        const __m512bh x = (__m512bh)_mm512_set1_epi32(static_cast<int>(aq[r]));
        for (int h = 0; h < kHalves; ++h) acc[r][h] = _mm512_dpbf16_ps(acc[r][h], x, b[h]);
      }
    }
  } else {
    // vdpbf16ps's steps as FMAs: per pair, acc += second * second', then acc += first * first',
    // each rounded once as the instruction rounds it. The instruction ignores MXCSR (nearest
    // even, subnormals read and written as zero, no exception raised), so the sums run under
    // exactly that, whatever the caller set; MXCSR is as it was for the stores.
    const unsigned csr = _mm_getcsr();
    _mm_setcsr((csr & ~kRoundingControl) | kAllExceptionsMasked | kFlushSubnormals);
    for (auto& row : acc)
      for (__m512& v : row) fence(v);
    const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
    for (int64_t q = 0; q < pairs; ++q) {
      __m512 second[kHalves], first[kHalves];
      for (int h = 0; h < kHalves; ++h) {
        const __m512i w = _mm512_loadu_si512(bp + q * 2 * kPanelCols + h * kPanelCols);
        second[h] = _mm512_castsi512_ps(_mm512_and_si512(w, high));
        first[h] = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
      }
      const float* aq = static_cast<const float*>(ap) + q * 2 * kBlockRows;
TG_UNROLL(12)
      for (int r = 0; r < kRows; ++r) {
        const __m512 x = _mm512_set1_ps(aq[r]);
        for (int h = 0; h < kHalves; ++h) acc[r][h] = _mm512_fmadd_ps(x, second[h], acc[r][h]);
      }
TG_UNROLL(12)
      for (int r = 0; r < kRows; ++r) {
        const __m512 x = _mm512_set1_ps(aq[kBlockRows + r]);
        for (int h = 0; h < kHalves; ++h) acc[r][h] = _mm512_fmadd_ps(x, first[h], acc[r][h]);
      }
    }
    for (auto& row : acc)
      for (__m512& v : row) fence(v);
    _mm_setcsr(csr);
  }
  for (int r = 0; r < std::min(rows, kRows); ++r)
    for (int h = 0; h < kHalves; ++h) {
      const int64_t row = row0 + r, col = col0 + 16 * h;
      const int64_t at = row * ldc + col;
      const __mmask16 m = lanes(cols - 16 * h);
      if constexpr (kStore == Store::kSums) {
        _mm512_mask_storeu_ps(static_cast<float*>(c) + at, m, acc[r][h]);
      } else if constexpr (kStore == Store::kEpilogue) {
        _mm256_mask_storeu_epi16(static_cast<uint16_t*>(c) + at, m, epilogue_lanes(acc[r][h], *e, row, col, m));
      } else {
        const __m256i bits = round_floats(acc[r][h]);
        if constexpr (kStore == Store::kRounded)
          _mm256_mask_storeu_epi16(static_cast<uint16_t*>(c) + at, m, bits);
        else
          _mm512_mask_storeu_ps(static_cast<float*>(c) + at, m, widened(bits));
      }
    }
}

using BlockFn = void (*)(int64_t, const void*, const uint16_t*, void*, int, const Epilogue*, int, int, int, int);

template <Store kStore, Products kProducts>
BlockFn block_for(int rows, int cols) {
  const bool whole = cols > 16;
  if (rows > 8) return whole ? &block<2, 12, kStore, kProducts> : &block<1, 12, kStore, kProducts>;
  if (rows > 4) return whole ? &block<2, 8, kStore, kProducts> : &block<1, 8, kStore, kProducts>;
  return whole ? &block<2, 4, kStore, kProducts> : &block<1, 4, kStore, kProducts>;
}

template <Products kProducts>
BlockFn block_for(Store store, int rows, int cols) {
  switch (store) {
    case Store::kSums: return block_for<Store::kSums, kProducts>(rows, cols);
    case Store::kRounded: return block_for<Store::kRounded, kProducts>(rows, cols);
    case Store::kEpilogue: return block_for<Store::kEpilogue, kProducts>(rows, cols);
    case Store::kRoundedWide: break;
  }
  return block_for<Store::kRoundedWide, kProducts>(rows, cols);
}

BlockFn block_for(Products products, Store store, int rows, int cols) {
  return products == Products::kDotProducts ? block_for<Products::kDotProducts>(store, rows, cols)
                                            : block_for<Products::kWidenedFma>(store, rows, cols);
}

// pack_a's pairs of a block as the FMA blocks read them: for pair q, the rows' second values
// widened (out[2q * kBlockRows + r]), then their first values (out[(2q + 1) * kBlockRows + r]).
void widen_pairs(const uint32_t* ap, int64_t pairs, float* out) {
  const __mmask16 block_lanes = lanes(kBlockRows);
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  for (int64_t q = 0; q < pairs; ++q) {
    const __m512i w = _mm512_maskz_loadu_epi32(block_lanes, ap + q * kBlockRows);
    _mm512_mask_storeu_epi32(out + 2 * q * kBlockRows, block_lanes, _mm512_and_si512(w, high));
    _mm512_mask_storeu_epi32(out + (2 * q + 1) * kBlockRows, block_lanes, _mm512_slli_epi32(w, 16));
  }
}

}  // namespace

void widen(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)));
    _mm512_storeu_si512(y + i, _mm512_slli_epi32(h, 16));
  }
  if (i < n) {
    const __mmask16 m = lanes(static_cast<int>(n - i));
    const __m512i h = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, x + i));
    _mm512_mask_storeu_epi32(y + i, m, _mm512_slli_epi32(h, 16));
  }
}

namespace {

}  // namespace

// vcvtne2ps2bf16 rounds as bfloat16_t does (to nearest even, NaN quietened by the same bit) except
// that it reads subnormal inputs as zero: blocks of 32 without one (every block of a layer's
// values, in practice) take the instruction, the others the integer rounding.
void narrow(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512i lo = _mm512_loadu_si512(x + i), hi = _mm512_loadu_si512(x + i + 16);
    if (_kortestz_mask16_u8(subnormal_lanes(lo), subnormal_lanes(hi))) {
      const __m512bh both = _mm512_cvtne2ps_pbh(_mm512_castsi512_ps(hi), _mm512_castsi512_ps(lo));
      _mm512_storeu_si512(y + i, (__m512i)both);
    } else {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), round_lanes(lo));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i + 16), round_lanes(hi));
    }
  }
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), round_lanes(_mm512_loadu_si512(x + i)));
  if (i < n) {
    const __mmask16 m = lanes(static_cast<int>(n - i));
    _mm256_mask_storeu_epi16(y + i, m, round_lanes(_mm512_maskz_loadu_epi32(m, x + i)));
  }
}

namespace {

// Thirty-two values of a row of B as bfloat16 bits, lanes past `mask` zero: loaded as they are,
// or (float32 B) rounded as bfloat16_t::round_from does.
inline __m512i row32(const uint16_t* p, __mmask32 mask) { return _mm512_maskz_loadu_epi16(mask, p); }
inline __m512i row32(const float* p, __mmask32 mask) {
  const __m256i lo = round_floats(_mm512_maskz_loadu_ps(static_cast<__mmask16>(mask), p));
  const __m256i hi = round_floats(_mm512_maskz_loadu_ps(static_cast<__mmask16>(mask >> 16), p + 16));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
inline uint32_t bits_of(uint16_t v) { return v; }
inline uint32_t bits_of(float v) { return bfloat16_t::round_from(v); }

template <class T>
void pack_panels(int n, int k, const T* b, int ldb, bool tb, uint16_t* out, int p0, int p1) {
  const int64_t pairs = (k + 1) / 2;
  // Interleaves the low and the high 16 values of two rows: r0[0], r1[0], r0[1], r1[1], ...
  alignas(64) uint16_t lo_idx[32], hi_idx[32];
  for (int j = 0; j < 16; ++j) {
    lo_idx[2 * j] = static_cast<uint16_t>(j), lo_idx[2 * j + 1] = static_cast<uint16_t>(32 + j);
    hi_idx[2 * j] = static_cast<uint16_t>(16 + j), hi_idx[2 * j + 1] = static_cast<uint16_t>(48 + j);
  }
  const __m512i lo = _mm512_load_si512(lo_idx), hi = _mm512_load_si512(hi_idx);
  for (int p = p0; p < p1; ++p) {
    uint16_t* panel = out + static_cast<int64_t>(p) * pairs * 2 * kPanelCols;
    const int j0 = p * kPanelCols;
    const int cols = std::min(kPanelCols, n - j0);
    if (!tb) {
      const __mmask32 mask = cols >= 32 ? __mmask32(0xFFFFFFFFu) : __mmask32((1u << cols) - 1);
      for (int64_t q = 0; q < pairs; ++q) {
        uint16_t* dst = panel + q * 2 * kPanelCols;
        const __m512i r0 = row32(b + 2 * q * ldb + j0, mask);
        const __m512i r1 = 2 * q + 1 < k ? row32(b + (2 * q + 1) * ldb + j0, mask) : _mm512_setzero_si512();
        _mm512_storeu_si512(dst, _mm512_permutex2var_epi16(r0, lo, r1));
        _mm512_storeu_si512(dst + kPanelCols, _mm512_permutex2var_epi16(r0, hi, r1));
      }
      continue;
    }
    // op(B)'s columns are stored rows: pair q of column j is the 32-bit word q of stored row
    // j0 + j. Sixteen words of sixteen rows at a time are transposed in registers (rows past n
    // are zeros); the words past the last sixteen, and the lone value of an odd k, one by one.
    const int64_t whole = k / 2, vector_end = whole / 16 * 16;
    for (int half = 0; half < 2; ++half)
      for (int64_t q0 = 0; q0 < vector_end; q0 += 16) {
        __m512i v[16];
        for (int j = 0; j < 16; ++j)
          v[j] = 16 * half + j < cols ? row32(b + static_cast<int64_t>(j0 + 16 * half + j) * ldb + 2 * q0, ~__mmask32(0))
                                      : _mm512_setzero_si512();
        transpose_16x16(v);
        for (int t = 0; t < 16; ++t) _mm512_storeu_si512(panel + 2 * ((q0 + t) * kPanelCols + 16 * half), v[t]);
      }
    auto put = [panel](int64_t q, int j, uint32_t v) { std::memcpy(panel + 2 * (q * kPanelCols + j), &v, 4); };
    for (int j = 0; j < kPanelCols; ++j) {
      const T* row = j < cols ? b + static_cast<int64_t>(j0 + j) * ldb : nullptr;
      for (int64_t q = vector_end; q < whole; ++q) put(q, j, row ? bits_of(row[2 * q]) | bits_of(row[2 * q + 1]) << 16 : 0u);
      if (k % 2) put(whole, j, row ? bits_of(row[k - 1]) : 0u);
    }
  }
}

}  // namespace

void pack_b(int n, int k, const uint16_t* b, int ldb, bool tb, uint16_t* out, int p0, int p1) {
  pack_panels(n, k, b, ldb, tb, out, p0, p1);
}

void pack_b(int n, int k, const float* b, int ldb, bool tb, uint16_t* out, int p0, int p1) {
  pack_panels(n, k, b, ldb, tb, out, p0, p1);
}

void multiply(int m, int n, int k, const uint16_t* a, int lda, bool ta, const uint16_t* packed, void* c, int ldc,
              Store store, const Epilogue* epilogue, int i0, int i1, int q0, int q1, Products products) {
  const int64_t pairs = (k + 1) / 2;
  thread_local std::vector<uint32_t> ap;
  thread_local std::vector<float> wide;
  ap.resize(static_cast<std::size_t>(pairs * kBlockRows));
  if (products == Products::kWidenedFma) wide.resize(static_cast<std::size_t>(2 * pairs * kBlockRows));
  i1 = std::min(i1, m);
  for (int row0 = i0; row0 < i1; row0 += kBlockRows) {
    // Rows past i1 belong to another part: packed as zeros, as rows past m are.
    pack_a(i1, k, a, lda, ta, row0, ap.data());
    const void* block_a = ap.data();
    if (products == Products::kWidenedFma) widen_pairs(ap.data(), pairs, wide.data()), block_a = wide.data();
    const int rows = std::min(kBlockRows, i1 - row0);
    for (int p = q0; p < q1; ++p) {
      const int j0 = p * kPanelCols;
      const int cols = std::min(kPanelCols, n - j0);
      block_for(products, store, rows, cols)(pairs, block_a, packed + static_cast<int64_t>(p) * pairs * 2 * kPanelCols,
                                             c, ldc, epilogue, row0, j0, rows, cols);
    }
  }
}

}  // namespace tg::detail::bf16_avx512
