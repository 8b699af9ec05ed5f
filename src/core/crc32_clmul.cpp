// crc32 by PCLMULQDQ folding over 128-bit lanes. Compiled with -mpclmul -mssse3; only called
// after a run-time CPU check (core/crc32.cpp).
//
// The math. With zlib's bit order, a message of L bits m_0 m_1 ... (m_0 = bit 0 of byte 0) is
// the polynomial M = sum of m_j x^(L-1-j), and crc32 works on a 32-bit state S:
//   S' = S x^L + M x^32  (mod P),
// zlib's crc being ~S (so the start state for crc c is ~c). Adding S x^L is the same as XORing
// S into the message's first 32 bits, which is how the state enters the first block below.
//
// Bit orders of the vector registers (coefficient of bit i):
//   R64:  a 64-bit lane v stands for  sum of v_i x^(63-i)
//   R128: a 128-bit register w for    sum of w_i x^(127-i) (low qword = bits 0..63)
// so 16 message bytes loaded as they are form an R128 polynomial, and the carry-less product
// of two R64 lanes a, b (bit i = XOR of a_j b_k, j + k = i), read as R128, is x * a * b.
//
// Folding. Block A (R128) = H x^64 + Lo, H and Lo its low and high qwords (R64). When the
// message goes on for another D bits after A ends, A counts as A x^D, and
//   A x^D = H x^(D+64) + Lo x^D = x*H*k1 + x*Lo*k2  (mod P),  k1 = x^(D+63), k2 = x^(D-1) mod P
// which is clmul(H, k1) ^ clmul(Lo, k2), an R128 value of degree <= 95 that is XORed into
// the block D bits ahead. k1 and k2 are 32-bit residues, placed as R64 lanes (bits 32..63).
// Four accumulators fold by D = 512 bits, so their multiplies overlap; they merge by folding
// by 384, 256 and 128 bits, then single blocks fold by 128. A last partial block of t bytes
// is made whole by zero bytes in front (which add nothing): X and those t bytes are the two
// blocks [16 - t zeros, first t bytes of X] [rest of X, the t bytes].
//
// Final reduction of the last block X = H x^64 + Lo (no data after it): the new state is
// X x^32 mod P.
//   1. Y = X x^32 = x*H*x^95 + Lo x^32: clmul(H, x^95 mod P) ^ (Lo placed at R128 bits 32..95),
//      degree <= 95, so Y = Yh x^64 + Yl with Yh < x^32 in bits 32..63.
//   2. Z = Yh x^64 + Yl = x*Yh*x^63 + Yl: the high qword of clmul(Yh, x^63 mod P) ^ Y, degree
//      <= 63 (an R64 lane).
//   3. Barrett: Z = Zh x^32 + Zl; the quotient Z div P is q = (Zh * mu) div x^32 with
//      mu = x^64 div P, exact for deg Z < 64; and Z mod P = Zl + (q * P mod x^32). With mu
//      and P placed as R64 lanes times x^31 (33 bits in bits 0..32), clmul(Zh, mu x^31) is
//      Zh*mu*x^32 whose low qword is q, and clmul(q, P x^31) = q*P*x^32 whose bits 64..95
//      are q * P mod x^32 in zlib's order.
#include <tmmintrin.h>
#include <wmmintrin.h>

#include <cstddef>
#include <cstdint>

#include "core/crc32.h"

namespace tg::detail::crc32_pclmul {

namespace {

using namespace crc32_poly;

// An R64 lane standing for x^e mod P.
consteval uint64_t lane_x_pow(uint64_t e) { return uint64_t{x_pow_mod(e)} << 32; }

// A degree-32 polynomial given in normal order (bit k = coefficient of x^k) as an R64 lane
// times x^31: coefficient k goes to bit 32 - k.
consteval uint64_t lane_times_x31(uint64_t normal) {
  uint64_t lane = 0;
  for (int k = 0; k <= 32; ++k)
    if ((normal >> k) & 1u) lane |= uint64_t{1} << (32 - k);
  return lane;
}

// P in normal order: x^32 plus kPoly's coefficients reversed.
consteval uint64_t poly_normal() {
  uint64_t p = uint64_t{1} << 32;
  for (int j = 0; j < 32; ++j)
    if ((kPoly >> j) & 1u) p |= uint64_t{1} << (31 - j);
  return p;
}

// mu = x^64 div P in normal order, by long division. The first step (x^64 - x^32 P) is done
// by hand so that the remainder fits 64 bits.
consteval uint64_t barrett_mu() {
  const uint64_t p = poly_normal();
  uint64_t quotient = uint64_t{1} << 32;
  uint64_t rest = (p ^ (uint64_t{1} << 32)) << 32;
  for (int d = 63; d >= 32; --d) {
    if ((rest >> d) & 1u) {
      quotient |= uint64_t{1} << (d - 32);
      rest ^= p << (d - 32);
    }
  }
  return quotient;
}

struct Lanes {
  uint64_t lo, hi;
};
// The multipliers that fold a block forward by `bits`.
consteval Lanes fold_by(uint64_t bits) { return {lane_x_pow(bits + 63), lane_x_pow(bits - 1)}; }

constexpr Lanes kFold512 = fold_by(512);
constexpr Lanes kFold384 = fold_by(384);
constexpr Lanes kFold256 = fold_by(256);
constexpr Lanes kFold128 = fold_by(128);
constexpr Lanes kReduce = {lane_x_pow(95), lane_x_pow(63)};  // steps 1 and 2
constexpr Lanes kBarrett = {lane_times_x31(barrett_mu()), lane_times_x31(poly_normal())};

inline __m128i vec(Lanes k) {
  return _mm_set_epi64x(static_cast<long long>(k.hi), static_cast<long long>(k.lo));
}
inline __m128i load(const unsigned char* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
// a x^D for the D of k (an R128 value to XOR into the block D bits ahead).
inline __m128i fold(__m128i a, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), _mm_clmulepi64_si128(a, k, 0x11));
}

// The state X x^32 mod P of a last block X (the steps in the comment above).
uint32_t reduce(__m128i x) {
  const __m128i k = vec(kReduce);
  const __m128i y = _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00),
                                  _mm_slli_si128(_mm_unpackhi_epi64(x, _mm_setzero_si128()), 4));
  const __m128i z = _mm_srli_si128(_mm_xor_si128(_mm_clmulepi64_si128(y, k, 0x10), y), 8);
  const __m128i b = vec(kBarrett);
  const __m128i q = _mm_clmulepi64_si128(_mm_slli_epi64(z, 32), b, 0x00);
  const __m128i qp = _mm_clmulepi64_si128(q, b, 0x10);
  return static_cast<uint32_t>(_mm_cvtsi128_si32(_mm_srli_si128(_mm_xor_si128(qp, _mm_slli_si128(z, 4)), 8)));
}

// Byte-shuffle masks for the last partial block: kShift[16 + i] = i for i in 0..15, and 0x80
// (pshufb's "zero this byte") elsewhere, so the 16 bytes at kShift + m shift a block by m - 16.
alignas(16) constexpr unsigned char kShift[48] = {
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80};

// The zlib crc after the folded block `a` and the n bytes at p; the 16 bytes before p belong
// to the input (a's own bytes, or earlier ones).
uint32_t finish_block(__m128i a, const unsigned char* p, std::size_t n) {
  const __m128i k128 = vec(kFold128);
  for (; n >= 16; p += 16, n -= 16) a = _mm_xor_si128(fold(a, k128), load(p));
  if (n != 0) {
    // a and the last t = n bytes B, padded in front with zeros, as two blocks
    //   [16 - t zeros, a_0 .. a_(t-1)]  [a_t .. a_15, B]
    // B taken from the 16 input bytes ending at p + n.
    const __m128i front = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kShift + n));
    const __m128i back = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kShift + 16 + n));
    const __m128i from_a = _mm_cmplt_epi8(front, _mm_setzero_si128());  // the first 16 - t bytes
    const __m128i second = _mm_or_si128(_mm_shuffle_epi8(a, back),
                                        _mm_andnot_si128(from_a, load(p + n - 16)));
    a = _mm_xor_si128(fold(_mm_shuffle_epi8(a, front), k128), second);
  }
  return ~reduce(a);
}

}  // namespace

// finish_block for the VPCLMUL path, which hands over its folded block as two qwords.
uint32_t finish(uint64_t lo, uint64_t hi, const unsigned char* p, std::size_t n) {
  return finish_block(_mm_set_epi64x(static_cast<long long>(hi), static_cast<long long>(lo)), p, n);
}

// crc32 of n >= 16 bytes.
uint32_t run(uint32_t crc, const unsigned char* p, std::size_t n) {
  const __m128i first = _mm_xor_si128(load(p), _mm_cvtsi32_si128(static_cast<int>(~crc)));
  if (n < 64) return finish_block(first, p + 16, n - 16);
  __m128i a0 = first, a1 = load(p + 16), a2 = load(p + 32), a3 = load(p + 48);
  p += 64;
  n -= 64;
  const __m128i k512 = vec(kFold512);
  for (; n >= 64; p += 64, n -= 64) {
    a0 = _mm_xor_si128(fold(a0, k512), load(p));
    a1 = _mm_xor_si128(fold(a1, k512), load(p + 16));
    a2 = _mm_xor_si128(fold(a2, k512), load(p + 32));
    a3 = _mm_xor_si128(fold(a3, k512), load(p + 48));
  }
  return finish_block(_mm_xor_si128(_mm_xor_si128(fold(a0, vec(kFold384)), fold(a1, vec(kFold256))),
                                    _mm_xor_si128(fold(a2, vec(kFold128)), a3)),
                      p, n);
}

}  // namespace tg::detail::crc32_pclmul
