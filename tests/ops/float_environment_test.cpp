// Kernels run in TensorFlow's floating-point environment (core/float_environment.h): subnormal
// inputs read as zero, subnormal results flushed to zero, rounding to nearest, eagerly, traced,
// traced and optimised, and on every thread of the pool; the caller's own environment is back
// after each op and each call.
#include <gtest/gtest.h>
#include <xmmintrin.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/float_environment.h"
#include "support/test_util.h"
#include "tracegraph/tracegraph.h"

namespace tg {
namespace {

constexpr uint32_t kFlagBits = 0x003F;  // the exception flags, which a kernel may raise
const float kTiny = std::ldexp(1.0f, -140);  // subnormal
const float kSmall = std::ldexp(1.0f, -70);  // normal; its square is subnormal

// The three results below are 0 in TF's environment and nonzero in IEEE's. (Not x * 1: the
// optimiser removes it, as grappler does, and then x keeps its bits.)
std::vector<Tensor> flushed(const Tensor& tiny, const Tensor& small) {
  return {tiny * 1.5f, small * small, tiny + tiny};
}

void expect_zeros(const std::vector<Tensor>& got, const std::string& where) {
  for (std::size_t k = 0; k < got.size(); ++k)
    for (const float v : got[k].to_vector<float>()) EXPECT_EQ(std::bit_cast<uint32_t>(v), 0u) << where << " output " << k;
}

TEST(FloatEnvironment, SubnormalsAreFlushedEagerlyTracedAndOptimised) {
  const Tensor tiny = fill({40}, kTiny), small = fill({40}, kSmall);
  expect_zeros(flushed(tiny, small), "eager");
  auto plain = function([](const Tensor& t, const Tensor& s) { return flushed(t, s); }, {.optimize = false});
  auto optimised = function([](const Tensor& t, const Tensor& s) { return flushed(t, s); });
  expect_zeros(plain(tiny, small), "traced");
  expect_zeros(optimised(tiny, small), "traced and optimised");
  // A negative subnormal reads as -0.0, as the hardware keeps the sign.
  EXPECT_EQ(std::bit_cast<uint32_t>((fill({1}, -kTiny) * 1.0f).to_vector<float>()[0]), 0x80000000u);
  // float64 too.
  const Tensor tiny64 = fill({3}, std::ldexp(1.0, -1060), float64);
  EXPECT_EQ(tiny64.to_vector<double>()[0], std::ldexp(1.0, -1060)) << "fill copies the value's bits";
  EXPECT_EQ((tiny64 * 1.0).to_vector<double>()[0], 0.0);
}

TEST(FloatEnvironment, PoolThreadsRunInIt) {
  const int threads_before = config::num_threads();
  config::set_num_threads(2);
  const int64_t n = 1 << 20;  // split over the pool
  const Tensor tiny = fill({n}, kTiny), small = fill({n}, kSmall);
  expect_zeros(flushed(tiny, small), "eager, 2 threads");
  auto optimised = function([](const Tensor& t, const Tensor& s) { return flushed(t, s); });
  expect_zeros(optimised(tiny, small), "traced and optimised, 2 threads");
  // ... and a product's threads: a subnormal row times 1 gives zeros.
  const Tensor a = fill({256, 256}, kTiny), eye = cast(equal(expand_dims(range(0, 256), 1), expand_dims(range(0, 256), 0)), float32);
  expect_zeros({matmul(a, eye)}, "matmul, 2 threads");
  config::set_num_threads(threads_before);
}

TEST(FloatEnvironment, RoundsToNearestWhateverTheCallerSet) {
  const Tensor one = constant(1.0f), eps = constant(std::ldexp(1.0f, -24) * 1.5f);  // 1 + 1.5 ulp/2
  const float nearest = (one + eps).item<float>();
  const unsigned caller = _mm_getcsr();
  _mm_setcsr((caller & ~0x6000u) | 0x6000u);  // round toward zero
  const float eager = (one + eps).item<float>();
  auto f = function([](const Tensor& a, const Tensor& b) { return a + b; });
  const float traced = f(one, eps).item<float>();
  const unsigned after = _mm_getcsr();
  _mm_setcsr(caller);
  EXPECT_EQ(nearest, std::nextafter(1.0f, 2.0f));
  EXPECT_EQ(eager, nearest);
  EXPECT_EQ(traced, nearest);
  EXPECT_EQ(after & ~kFlagBits, ((caller & ~0x6000u) | 0x6000u) & ~kFlagBits) << "the caller's rounding is back";
}

// The caller's own arithmetic keeps IEEE subnormals after ops, calls and failed ops.
TEST(FloatEnvironment, TheCallersEnvironmentIsBackAfterEveryOpAndCall) {
  const unsigned before = _mm_getcsr() & ~kFlagBits;
  const Tensor tiny = fill({4}, kTiny);
  (void)(tiny * 1.0f);
  EXPECT_EQ(_mm_getcsr() & ~kFlagBits, before);
  auto f = function([](const Tensor& t) { return t * 2.0f; });
  (void)f(tiny);
  EXPECT_EQ(_mm_getcsr() & ~kFlagBits, before);
  EXPECT_THROW((void)matmul(tiny, tiny), InvalidArgumentError);
  EXPECT_EQ(_mm_getcsr() & ~kFlagBits, before);
  volatile float x = kTiny;
  EXPECT_NE(x * 1.0f, 0.0f) << "the test thread's arithmetic keeps subnormals";
}

TEST(FloatEnvironment, TheIeeeSwitchKeepsSubnormalsForTheTestsThatPinThem) {
  const Tensor tiny = fill({40}, kTiny);
  {
    const testing::IeeeKernelFloatEnvironment ieee;
    EXPECT_EQ((tiny * 1.0f).to_vector<float>()[0], kTiny);
  }
  EXPECT_EQ((tiny * 1.0f).to_vector<float>()[0], 0.0f);
}

}  // namespace
}  // namespace tg
