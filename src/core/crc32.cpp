// crc32: picks the folding implementation once by CPU features; zlib for short inputs and
// for machines without PCLMULQDQ.
#include "core/crc32.h"

#include <zlib.h>

#include <array>

#include "core/check.h"

namespace tg::detail {

namespace crc32_pclmul {
uint32_t run(uint32_t crc, const unsigned char* p, std::size_t n);  // n >= 16
}
namespace crc32_vpclmul {
uint32_t run(uint32_t crc, const unsigned char* p, std::size_t n);  // n >= 256
}

namespace {

// The folding paths' shortest inputs (one 128-bit block; four 512-bit ones). Both are faster
// than zlib from there on: 16 bytes take zlib ~35 ns, PCLMUL ~15 ns.
constexpr std::size_t kPclmulMinBytes = 16;
constexpr std::size_t kVpclmulMinBytes = 256;

Crc32Impl detect() {
  if (crc32_impl_supported(Crc32Impl::kVpclmul)) return Crc32Impl::kVpclmul;
  if (crc32_impl_supported(Crc32Impl::kPclmul)) return Crc32Impl::kPclmul;
  return Crc32Impl::kZlib;
}
// kZlib (0) until dynamic initialisation runs, so a call from another static initialiser is
// still correct.
const Crc32Impl kBest = detect();

uint32_t zlib_crc32(uint32_t crc, const unsigned char* p, std::size_t n) {
  return n == 0 ? crc : static_cast<uint32_t>(crc32_z(crc, p, n));
}

uint32_t run(Crc32Impl impl, uint32_t crc, const unsigned char* p, std::size_t n) {
  switch (impl) {
    case Crc32Impl::kVpclmul:
      if (n >= kVpclmulMinBytes) return crc32_vpclmul::run(crc, p, n);
      [[fallthrough]];
    case Crc32Impl::kPclmul:
      if (n >= kPclmulMinBytes) return crc32_pclmul::run(crc, p, n);
      [[fallthrough]];
    case Crc32Impl::kZlib:
      break;
  }
  return zlib_crc32(crc, p, n);
}

// x^(2^k) mod P for k = 0..66: x^(8 n) for any 64-bit n is a product of these.
constexpr std::array<uint32_t, 67> kXPow2k = [] {
  std::array<uint32_t, 67> t{};
  t[0] = crc32_poly::mul_x(crc32_poly::kOne);
  for (std::size_t k = 1; k < t.size(); ++k) t[k] = crc32_poly::mul_mod(t[k - 1], t[k - 1]);
  return t;
}();

}  // namespace

uint32_t crc32(uint32_t crc, const void* data, std::size_t n) {
  return run(kBest, crc, static_cast<const unsigned char*>(data), n);
}

uint32_t crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
  // crc(A B) = crc(A) x^(8 |B|) + crc(B) mod P: zlib's pre- and post-inversions cancel.
  uint32_t shift = crc32_poly::kOne;
  for (std::size_t k = 3; len_b != 0; ++k, len_b >>= 1)
    if (len_b & 1u) shift = crc32_poly::mul_mod(shift, kXPow2k[k]);
  return crc32_poly::mul_mod(shift, crc_a) ^ crc_b;
}

Crc32Impl crc32_impl() { return kBest; }

bool crc32_impl_supported(Crc32Impl impl) {
  __builtin_cpu_init();
  switch (impl) {
    case Crc32Impl::kZlib:
      return true;
    case Crc32Impl::kPclmul:
      return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("ssse3");
    case Crc32Impl::kVpclmul:
      return crc32_impl_supported(Crc32Impl::kPclmul) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("vpclmulqdq");
  }
  return false;
}

const char* crc32_impl_name(Crc32Impl impl) {
  switch (impl) {
    case Crc32Impl::kZlib: return "zlib";
    case Crc32Impl::kPclmul: return "pclmul";
    case Crc32Impl::kVpclmul: return "vpclmul";
  }
  return "?";
}

uint32_t crc32_with(Crc32Impl impl, uint32_t crc, const void* data, std::size_t n) {
  TG_CHECK(crc32_impl_supported(impl), "crc32 implementation ", crc32_impl_name(impl),
           " is not supported by this CPU");
  return run(impl, crc, static_cast<const unsigned char*>(data), n);
}

}  // namespace tg::detail
