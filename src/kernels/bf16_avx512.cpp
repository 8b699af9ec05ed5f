// vdpbf16ps: each float32 lane adds the two products of a pair of bfloat16 values. op(A)'s rows
// are packed as pairs (A[i][2q], A[i][2q+1]) broadcast to every lane; B's panels hold the matching
// pairs of 32 columns (pack_b). A block of 12 rows by 32 columns keeps its 24 sums in registers
// for the whole of k, as the float32 kernels do (implicit_gemm.h). The instruction treats
// subnormal inputs as zero and rounds each step to nearest even, as oneDNN's bf16 kernels do.
#include "kernels/bf16_avx512.h"

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

namespace tg::detail::bf16_avx512 {
namespace {

// Rows [row0, row0 + kBlockRows) of op(A) as pairs: out[q * kBlockRows + r], zeros past m and k.
void pack_a(int m, int k, const uint16_t* a, int lda, bool ta, int row0, uint32_t* out) {
  const int64_t pairs = (k + 1) / 2;
  if (ta) {
    // A's rows are stored as columns: pair q of the block's rows lies in stored rows 2q and
    // 2q + 1, side by side, so read them in that order.
    const int rows = std::min(kBlockRows, m - row0);
    for (int64_t q = 0; q < pairs; ++q) {
      const uint16_t* lo = a + 2 * q * lda + row0;
      const uint16_t* hi = 2 * q + 1 < k ? lo + lda : nullptr;
      uint32_t* dst = out + q * kBlockRows;
      for (int r = 0; r < rows; ++r) dst[r] = lo[r] | (hi ? static_cast<uint32_t>(hi[r]) << 16 : 0u);
      for (int r = rows; r < kBlockRows; ++r) dst[r] = 0;
    }
    return;
  }
  for (int r = 0; r < kBlockRows; ++r) {
    const int64_t i = row0 + r;
    if (i >= m) {
      for (int64_t q = 0; q < pairs; ++q) out[q * kBlockRows + r] = 0;
      continue;
    }
    {
      const uint16_t* row = a + i * lda;
      for (int64_t q = 0; q < k / 2; ++q) {
        uint32_t v;
        std::memcpy(&v, row + 2 * q, 4);
        out[q * kBlockRows + r] = v;
      }
      if (k % 2) out[(pairs - 1) * kBlockRows + r] = row[k - 1];
    }
  }
}

__mmask16 lanes(int count) { return count >= 16 ? __mmask16(0xFFFF) : count <= 0 ? __mmask16(0) : __mmask16((1u << count) - 1); }

void block(int64_t pairs, const uint32_t* ap, const uint16_t* bp, float* c, int ldc, int rows, int cols) {
  __m512 acc[kBlockRows][2];
  for (auto& row : acc) row[0] = row[1] = _mm512_setzero_ps();
  for (int64_t q = 0; q < pairs; ++q) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp + q * 2 * kPanelCols);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(bp + q * 2 * kPanelCols + kPanelCols);
    const uint32_t* aq = ap + q * kBlockRows;
#pragma GCC unroll 12
    for (int r = 0; r < kBlockRows; ++r) {
      const __m512bh x = (__m512bh)_mm512_set1_epi32(static_cast<int>(aq[r]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], x, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], x, b1);
    }
  }
  const __mmask16 m0 = lanes(cols), m1 = lanes(cols - 16);
  for (int r = 0; r < rows; ++r) {
    _mm512_mask_storeu_ps(c + static_cast<int64_t>(r) * ldc, m0, acc[r][0]);
    _mm512_mask_storeu_ps(c + static_cast<int64_t>(r) * ldc + 16, m1, acc[r][1]);
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
// Sixteen floats' bits rounded to their upper halves as bfloat16_t::round_from does.
inline __m256i round_lanes(__m512i u) {
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
}
}  // namespace

void narrow(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), round_lanes(_mm512_loadu_si512(x + i)));
  if (i < n) {
    const __mmask16 m = lanes(static_cast<int>(n - i));
    _mm256_mask_storeu_epi16(y + i, m, round_lanes(_mm512_maskz_loadu_epi32(m, x + i)));
  }
}

void pack_b(int n, int k, const uint16_t* b, int ldb, bool tb, uint16_t* out, int p0, int p1) {
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
    for (int64_t q = 0; q < pairs; ++q) {
      uint16_t* dst = panel + q * 2 * kPanelCols;
      const bool two = 2 * q + 1 < k;
      if (!tb) {
        const __mmask32 mask = cols >= 32 ? __mmask32(0xFFFFFFFFu) : __mmask32((1u << cols) - 1);
        const __m512i r0 = _mm512_maskz_loadu_epi16(mask, b + 2 * q * ldb + j0);
        const __m512i r1 = two ? _mm512_maskz_loadu_epi16(mask, b + (2 * q + 1) * ldb + j0) : _mm512_setzero_si512();
        _mm512_storeu_si512(dst, _mm512_permutex2var_epi16(r0, lo, r1));
        _mm512_storeu_si512(dst + kPanelCols, _mm512_permutex2var_epi16(r0, hi, r1));
      } else {
        for (int j = 0; j < kPanelCols; ++j) {
          if (j < cols) {
            const uint16_t* row = b + static_cast<int64_t>(j0 + j) * ldb;
            dst[2 * j] = row[2 * q];
            dst[2 * j + 1] = two ? row[2 * q + 1] : uint16_t{0};
          } else {
            dst[2 * j] = dst[2 * j + 1] = 0;
          }
        }
      }
    }
  }
}

void multiply(int m, int n, int k, const uint16_t* a, int lda, bool ta, const uint16_t* packed, float* c, int ldc,
              int r0, int r1, int q0, int q1) {
  const int64_t pairs = (k + 1) / 2;
  thread_local std::vector<uint32_t> ap;
  ap.resize(static_cast<std::size_t>(pairs * kBlockRows));
  for (int rb = r0; rb < r1; ++rb) {
    const int row0 = rb * kBlockRows;
    pack_a(m, k, a, lda, ta, row0, ap.data());
    const int rows = std::min(kBlockRows, m - row0);
    for (int p = q0; p < q1; ++p) {
      const int j0 = p * kPanelCols;
      block(pairs, ap.data(), packed + static_cast<int64_t>(p) * pairs * 2 * kPanelCols,
            c + static_cast<int64_t>(row0) * ldc + j0, ldc, rows, std::min(kPanelCols, n - j0));
    }
  }
}

}  // namespace tg::detail::bf16_avx512
