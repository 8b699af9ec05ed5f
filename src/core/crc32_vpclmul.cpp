// crc32 by VPCLMULQDQ folding over 512-bit registers: the folding of core/crc32_clmul.cpp
// (whose comment has the math) on four 128-bit blocks per register. Compiled with -mavx512f
// -mvpclmulqdq -mpclmul; only called after a run-time CPU check (core/crc32.cpp).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "core/crc32.h"

namespace tg::detail {

namespace crc32_pclmul {
uint32_t finish(uint64_t lo, uint64_t hi, const unsigned char* p, std::size_t n);
}

namespace crc32_vpclmul {

namespace {

using namespace crc32_poly;

// The R64 lanes (low, high) that fold a 128-bit block forward by `bits` (see crc32_clmul.cpp),
// as the intrinsics' signed type.
consteval long long lane_x_pow(uint64_t e) { return static_cast<long long>(uint64_t{x_pow_mod(e)} << 32); }
consteval long long fold_lo(uint64_t bits) { return lane_x_pow(bits + 63); }
consteval long long fold_hi(uint64_t bits) { return lane_x_pow(bits - 1); }

// The same (lo, hi) pair in every 128-bit lane.
inline __m512i broadcast(long long lo, long long hi) { return _mm512_set_epi64(hi, lo, hi, lo, hi, lo, hi, lo); }

inline __m512i load(const unsigned char* p) { return _mm512_loadu_si512(p); }
// a x^D for the D of k, lane by lane.
inline __m512i fold(__m512i a, __m512i k) {
  return _mm512_xor_si512(_mm512_clmulepi64_epi128(a, k, 0x00), _mm512_clmulepi64_epi128(a, k, 0x11));
}
// fold(a, k) ^ b in one XOR instruction.
inline __m512i fold_xor(__m512i a, __m512i k, __m512i b) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(a, k, 0x00),
                                   _mm512_clmulepi64_epi128(a, k, 0x11), b, 0x96);
}

}  // namespace

// crc32 of n >= 256 bytes.
uint32_t run(uint32_t crc, const unsigned char* p, std::size_t n) {
  __m512i a0 = _mm512_xor_si512(load(p), _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(~crc))));
  __m512i a1 = load(p + 64), a2 = load(p + 128), a3 = load(p + 192);
  p += 256;
  n -= 256;
  const __m512i k2048 = broadcast(fold_lo(2048), fold_hi(2048));
  for (; n >= 256; p += 256, n -= 256) {
    a0 = fold_xor(a0, k2048, load(p));
    a1 = fold_xor(a1, k2048, load(p + 64));
    a2 = fold_xor(a2, k2048, load(p + 128));
    a3 = fold_xor(a3, k2048, load(p + 192));
  }
  const __m512i k512 = broadcast(fold_lo(512), fold_hi(512));
  __m512i a = _mm512_ternarylogic_epi64(fold(a0, broadcast(fold_lo(1536), fold_hi(1536))),
                                        fold(a1, broadcast(fold_lo(1024), fold_hi(1024))),
                                        fold_xor(a2, k512, a3), 0x96);
  for (; n >= 64; p += 64, n -= 64) a = fold_xor(a, k512, load(p));

  // The four lanes into one: lane i folds forward by 384 - 128 i bits, lane 3 stays; then the
  // lanes are XORed (through memory: GCC 12 warns on its own lane-extract intrinsics).
  const __m512i k_lanes = _mm512_set_epi64(0, 0, fold_hi(128), fold_lo(128), fold_hi(256), fold_lo(256),
                                           fold_hi(384), fold_lo(384));
  const __m512i t = fold(a, k_lanes);  // lane 3: 0
  alignas(64) uint64_t q[8];
  _mm512_store_si512(q, _mm512_mask_xor_epi64(t, 0xC0, t, a));
  return crc32_pclmul::finish(q[0] ^ q[2] ^ q[4] ^ q[6], q[1] ^ q[3] ^ q[5] ^ q[7], p, n);
}

}  // namespace crc32_vpclmul

}  // namespace tg::detail
