// crc32 against zlib's crc32_z: every length and alignment of short inputs, multi-megabyte
// buffers, continuation, combine - through each implementation, the zlib fallback included.
#include "core/crc32.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tracegraph/errors.h"

namespace tg::detail {
namespace {

uint32_t zlib_crc(uint32_t crc, const unsigned char* p, std::size_t n) {
  return static_cast<uint32_t>(crc32_z(crc, p, n));
}

// `n` random bytes starting at a 64-byte boundary (so offsets from it are alignments).
class AlignedBytes {
 public:
  AlignedBytes(std::size_t n, uint64_t seed) : storage_(n + 64), n_(n) {
    const auto addr = reinterpret_cast<std::uintptr_t>(storage_.data());
    data_ = storage_.data() + (64 - addr % 64) % 64;
    std::mt19937_64 rng(seed);
    for (std::size_t i = 0; i < n_; ++i) data_[i] = static_cast<unsigned char>(rng());
  }
  unsigned char* data() { return data_; }
  std::size_t size() const { return n_; }

 private:
  std::vector<unsigned char> storage_;
  unsigned char* data_;
  std::size_t n_;
};

class Crc32Impls : public ::testing::TestWithParam<Crc32Impl> {
 protected:
  void SetUp() override {
    if (!crc32_impl_supported(GetParam()))
      GTEST_SKIP() << crc32_impl_name(GetParam()) << " is not supported by this CPU";
  }
  uint32_t crc(uint32_t start, const unsigned char* p, std::size_t n) const {
    return crc32_with(GetParam(), start, p, n);
  }
};

TEST_P(Crc32Impls, CheckValue) {
  const char* digits = "123456789";
  EXPECT_EQ(crc(0, reinterpret_cast<const unsigned char*>(digits), 9), 0xCBF43926u);
}

TEST_P(Crc32Impls, EmptyInputKeepsTheStartValue) {
  const unsigned char byte = 0;
  EXPECT_EQ(crc(0, nullptr, 0), 0u);
  EXPECT_EQ(crc(0x12345678u, nullptr, 0), 0x12345678u);
  EXPECT_EQ(crc(0x12345678u, &byte, 0), 0x12345678u);
}

TEST_P(Crc32Impls, EqualsZlibForEveryLengthUpTo4096AtEveryAlignment) {
  AlignedBytes buf(4096 + 64, 1);
  std::mt19937 rng(2);
  for (std::size_t align = 0; align < 64; ++align) {
    const unsigned char* p = buf.data() + align;
    for (std::size_t len = 0; len <= 4096; ++len) {
      const uint32_t start = (len % 2) ? static_cast<uint32_t>(rng()) : 0u;
      ASSERT_EQ(crc(start, p, len), zlib_crc(start, p, len))
          << "length " << len << ", alignment " << align << ", start " << start;
    }
  }
}

TEST_P(Crc32Impls, EqualsZlibForMultiMegabyteBuffers) {
  const std::size_t mib = std::size_t{1} << 20;
  AlignedBytes buf(9 * mib + 64, 3);
  std::mt19937 rng(4);
  for (std::size_t len : {mib, 3 * mib + 1, 5 * mib + 4097, 8 * mib + 15, 9 * mib}) {
    for (std::size_t align : {std::size_t{0}, std::size_t{7}, std::size_t{48}}) {
      const uint32_t start = static_cast<uint32_t>(rng());
      const unsigned char* p = buf.data() + align;
      EXPECT_EQ(crc(start, p, len), zlib_crc(start, p, len)) << "length " << len << ", alignment " << align;
    }
  }
}

TEST_P(Crc32Impls, EqualsZlibForConstantBytes) {
  for (int value : {0x00, 0xFF}) {
    std::vector<unsigned char> buf((std::size_t{1} << 20) + 13, static_cast<unsigned char>(value));
    for (uint32_t start : {0u, 0xFFFFFFFFu})
      EXPECT_EQ(crc(start, buf.data(), buf.size()), zlib_crc(start, buf.data(), buf.size())) << value;
  }
}

TEST_P(Crc32Impls, ContinuesAcrossRandomSplits) {
  AlignedBytes buf(300000, 5);
  const uint32_t whole = zlib_crc(0, buf.data(), buf.size());
  std::mt19937_64 rng(6);
  for (int i = 0; i < 300; ++i) {
    // Small splits near either end, where the short-input paths take over, and anywhere.
    std::size_t split = rng() % buf.size();
    if (i % 3 == 0) split = rng() % 600;
    if (i % 3 == 1) split = buf.size() - rng() % 600;
    const uint32_t head = crc(0, buf.data(), split);
    ASSERT_EQ(crc(head, buf.data() + split, buf.size() - split), whole) << "split at " << split;
  }
}

TEST_P(Crc32Impls, ContinuesAcrossManyShortPieces) {
  AlignedBytes buf(20000, 7);
  std::mt19937_64 rng(8);
  uint32_t c = 0;
  for (std::size_t at = 0; at < buf.size();) {
    const std::size_t n = std::min<std::size_t>(rng() % 700, buf.size() - at);
    c = crc(c, buf.data() + at, n);
    at += n;
  }
  EXPECT_EQ(c, zlib_crc(0, buf.data(), buf.size()));
}

INSTANTIATE_TEST_SUITE_P(All, Crc32Impls,
                         ::testing::Values(Crc32Impl::kZlib, Crc32Impl::kPclmul, Crc32Impl::kVpclmul),
                         [](const ::testing::TestParamInfo<Crc32Impl>& info) {
                           return std::string(crc32_impl_name(info.param));
                         });

TEST(Crc32, UsesTheFastestSupportedImplementation) {
  EXPECT_TRUE(crc32_impl_supported(Crc32Impl::kZlib));
  const Crc32Impl impl = crc32_impl();
  EXPECT_TRUE(crc32_impl_supported(impl));
  if (crc32_impl_supported(Crc32Impl::kVpclmul)) EXPECT_EQ(impl, Crc32Impl::kVpclmul);
  else if (crc32_impl_supported(Crc32Impl::kPclmul)) EXPECT_EQ(impl, Crc32Impl::kPclmul);
  else EXPECT_EQ(impl, Crc32Impl::kZlib);
}

TEST(Crc32, PublicFunctionEqualsZlib) {
  AlignedBytes buf(100000, 9);
  for (std::size_t len : {std::size_t{0}, std::size_t{5}, std::size_t{16}, std::size_t{255}, std::size_t{256},
                          std::size_t{4099}, buf.size()})
    EXPECT_EQ(crc32(0xDEADBEEFu, buf.data(), len), zlib_crc(0xDEADBEEFu, buf.data(), len)) << len;
}

TEST(Crc32, RejectsAnImplementationTheCpuLacks) {
  for (Crc32Impl impl : {Crc32Impl::kPclmul, Crc32Impl::kVpclmul}) {
    if (crc32_impl_supported(impl)) continue;
    const unsigned char byte = 1;
    EXPECT_THROW(crc32_with(impl, 0, &byte, 1), InternalError);
    return;
  }
  GTEST_SKIP() << "this CPU supports every implementation";
}

TEST(Crc32Combine, EqualsTheCrcOfTheJoinedBuffer) {
  AlignedBytes buf(70000, 10);
  std::mt19937_64 rng(11);
  for (int i = 0; i < 100; ++i) {
    const std::size_t split = (i < 20) ? static_cast<std::size_t>(i) : rng() % buf.size();
    const uint32_t start = static_cast<uint32_t>(rng());
    const uint32_t a = crc32(start, buf.data(), split);
    const uint32_t b = crc32(0, buf.data() + split, buf.size() - split);
    EXPECT_EQ(crc32_combine(a, b, buf.size() - split), zlib_crc(start, buf.data(), buf.size()))
        << "split at " << split;
  }
}

TEST(Crc32Combine, EqualsZlibForHugeLengths) {
  std::mt19937_64 rng(12);
  for (uint64_t len : {uint64_t{0}, uint64_t{1}, uint64_t{3}, uint64_t{1} << 20, (uint64_t{1} << 32) + 5,
                       uint64_t{1} << 40, uint64_t{0x123456789ABCDEF},
                       static_cast<uint64_t>(std::numeric_limits<int64_t>::max())}) {
    const auto a = static_cast<uint32_t>(rng()), b = static_cast<uint32_t>(rng());
    EXPECT_EQ(crc32_combine(a, b, len), static_cast<uint32_t>(crc32_combine64(a, b, static_cast<z_off64_t>(len))))
        << len;
  }
}

// What a caller does to use several threads: a CRC per chunk (each on its own thread), then
// combined in order.
TEST(Crc32Combine, JoinsChunksComputedSeparately) {
  AlignedBytes buf((std::size_t{3} << 20) + 1234, 13);
  const std::size_t chunk = std::size_t{1} << 20;
  const uint32_t start = 0x0BADF00Du;
  uint32_t c = crc32(start, buf.data(), chunk);
  for (std::size_t at = chunk; at < buf.size(); at += chunk) {
    const std::size_t n = std::min(chunk, buf.size() - at);
    c = crc32_combine(c, crc32(0, buf.data() + at, n), n);
  }
  EXPECT_EQ(c, zlib_crc(start, buf.data(), buf.size()));
}

TEST(Crc32Poly, PowersOfXAgreeWithRepeatedMultiplication) {
  uint32_t stepped = crc32_poly::kOne;
  for (uint64_t n = 0; n < 5000; ++n, stepped = crc32_poly::mul_x(stepped))
    ASSERT_EQ(crc32_poly::x_pow_mod(n), stepped) << n;
  // x^(8 len) is what zlib multiplies by to combine.
  for (uint64_t len : {uint64_t{1}, uint64_t{1000}, uint64_t{1} << 33, uint64_t{987654321987}})
    EXPECT_EQ(crc32_poly::x_pow_mod(8 * len), static_cast<uint32_t>(crc32_combine_gen64(static_cast<z_off64_t>(len))))
        << len;
}

TEST(Crc32Poly, MultiplicationIsCommutativeAndDistributive) {
  std::mt19937 rng(14);
  for (int i = 0; i < 1000; ++i) {
    const uint32_t a = static_cast<uint32_t>(rng()), b = static_cast<uint32_t>(rng()), c = static_cast<uint32_t>(rng());
    ASSERT_EQ(crc32_poly::mul_mod(a, b), crc32_poly::mul_mod(b, a));
    ASSERT_EQ(crc32_poly::mul_mod(a, b ^ c), crc32_poly::mul_mod(a, b) ^ crc32_poly::mul_mod(a, c));
    ASSERT_EQ(crc32_poly::mul_mod(a, crc32_poly::kOne), a);
  }
}

}  // namespace
}  // namespace tg::detail
