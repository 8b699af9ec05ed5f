// CRC-32 of the gzip/zlib polynomial (the section checksums of .tgx files): zlib's crc32()
// bit for bit, folded with carry-less multiplies where the CPU has them.
#pragma once
#include <cstddef>
#include <cstdint>

namespace tg::detail {

/// zlib's crc32 (gzip polynomial) of `n` bytes, continuing from `crc` (0 to start): equal to
/// crc32_z(crc, data, n) bit for bit, at the machine's speed. One difference: `n == 0` returns
/// `crc` even when `data` is null (zlib returns 0 for a null buffer, its "initial value" idiom).
/// Thread-safe; one thread. To use several threads on a large buffer, see crc32_combine.
uint32_t crc32(uint32_t crc, const void* data, std::size_t n);

/// The crc32 of A followed by B, given crc32(0 or any start, A) as `crc_a`, crc32(0, B) as
/// `crc_b` and B's length in bytes: equal to zlib's crc32_combine64, O(log len_b).
/// Splitting a buffer across threads: crc_i = crc32(0, chunk_i) on each thread, then
/// crc = crc_0 and crc = crc32_combine(crc, crc_i, len_i) for i = 1, 2, ... in order.
uint32_t crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

/// The implementations behind crc32(); every one gives the same results.
enum class Crc32Impl {
  kZlib,     // zlib's crc32_z (any machine; also every implementation's path for short inputs)
  kPclmul,   // PCLMULQDQ folding over 128-bit lanes
  kVpclmul,  // VPCLMULQDQ folding over 512-bit lanes (AVX-512)
};
/// The implementation crc32() uses on this machine, chosen once by CPU features.
Crc32Impl crc32_impl();
bool crc32_impl_supported(Crc32Impl impl);
const char* crc32_impl_name(Crc32Impl impl);
/// crc32() through a given implementation (tests, benchmarks); InternalError when this CPU
/// does not support it.
uint32_t crc32_with(Crc32Impl impl, uint32_t crc, const void* data, std::size_t n);

/// Arithmetic modulo the CRC polynomial P = x^32 + x^26 + x^23 + x^22 + x^16 + x^12 + x^11 +
/// x^10 + x^8 + x^7 + x^5 + x^4 + x^2 + x + 1, in zlib's bit order: a uint32_t c stands for
/// the polynomial sum of c_j * x^(31-j), so bit 0 is the x^31 coefficient and bit 31 the
/// constant term. A crc32 value (before zlib's final inversion) is such a polynomial.
/// The folding code derives its constants from these at compile time; crc32_combine uses them
/// at run time.
namespace crc32_poly {

/// P without its x^32 term, in the order above.
inline constexpr uint32_t kPoly = 0xEDB88320u;
/// The polynomial 1 (x^0).
inline constexpr uint32_t kOne = 0x80000000u;

/// a * x mod P: the x^31 coefficient (bit 0) becomes x^32, which is congruent to P - x^32.
constexpr uint32_t mul_x(uint32_t a) { return (a >> 1) ^ ((a & 1u) ? kPoly : 0u); }

/// a * b mod P (shift and add, one coefficient of a at a time).
constexpr uint32_t mul_mod(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t m = kOne; a != 0; m >>= 1, b = mul_x(b)) {  // b = (original b) * x^k at x^k
    if (a & m) {
      product ^= b;
      a ^= m;
    }
  }
  return product;
}

/// x^n mod P, by squaring and multiplying.
constexpr uint32_t x_pow_mod(uint64_t n) {
  uint32_t result = kOne;
  for (uint32_t square = mul_x(kOne); n != 0; n >>= 1, square = mul_mod(square, square))
    if (n & 1u) result = mul_mod(result, square);
  return result;
}

}  // namespace crc32_poly

}  // namespace tg::detail
