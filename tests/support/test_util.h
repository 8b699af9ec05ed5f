// Shared assertions for tracegraph tests.
#pragma once
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/float_environment.h"
#include "tracegraph/tracegraph.h"

namespace tg::testing {

/// Captures tg::print output for the lifetime of the object.
class PrintCapture {
 public:
  PrintCapture() {
    config::set_print_sink([](const std::string& line, void* self) {
      static_cast<PrintCapture*>(self)->text_ += line;
    }, this);
  }
  ~PrintCapture() { config::set_print_sink(nullptr); }
  PrintCapture(const PrintCapture&) = delete;
  PrintCapture& operator=(const PrintCapture&) = delete;
  /// The text printed since construction or the last take().
  std::string take() { return std::exchange(text_, ""); }

 private:
  std::string text_;
};

/// Leaves the kernels in the test thread's IEEE environment (subnormals read and produced as
/// they are) for its lifetime, instead of TensorFlow's flush to zero (core/float_environment.h):
/// for the tests that pin the math routines' bits and accuracy through the ops, subnormal
/// inputs and results included.
class IeeeKernelFloatEnvironment {
 public:
  IeeeKernelFloatEnvironment() : was_(detail::set_kernel_float_environment(false)) {}
  ~IeeeKernelFloatEnvironment() { detail::set_kernel_float_environment(was_); }
  IeeeKernelFloatEnvironment(const IeeeKernelFloatEnvironment&) = delete;
  IeeeKernelFloatEnvironment& operator=(const IeeeKernelFloatEnvironment&) = delete;

 private:
  bool was_;
};

/// Checks dtype, shape and every element; floats compare with |a - e| <= tol * (1 + |e|), NaN
/// equals NaN, and infinities must match exactly.
::testing::AssertionResult tensors_near(const Tensor& actual, const Tensor& expected,
                                        double tol = 0.0);

/// Checks dtype, shape and every byte: -0.0 against +0.0 and NaN payloads count as differences
/// (what "the same bits" means for an optimised graph against its unoptimised one).
::testing::AssertionResult same_bits(const Tensor& actual, const Tensor& expected);

/// Runs `fn` and checks that it throws E with a message that contains every fragment.
template <class E, class Fn>
::testing::AssertionResult throws_with(Fn&& fn, const std::vector<std::string>& fragments) {
  try {
    fn();
  } catch (const E& e) {
    const std::string msg = e.what();
    for (const auto& f : fragments)
      if (msg.find(f) == std::string::npos)
        return ::testing::AssertionFailure() << "message lacks \"" << f << "\": " << msg;
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a different exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

/// How seeded_values shapes its draws: each is rounded to a multiple of `step` (0 keeps every
/// bit; a power-of-two step gives ties, and sums and products that float32 holds exactly), then
/// multiplied by `scale`.
struct ValueGrid {
  double step = 0.0;
  double scale = 1.0;
};

/// Deterministic test values in [-scale, scale], the same for the same dims and seed on every
/// platform (a 64-bit linear congruential generator, not the library's random ops, so that a
/// change there cannot move a test's inputs), drawn in float64 and cast to dtype.
Tensor seeded_values(const std::vector<int64_t>& dims, DType dtype, uint64_t seed, ValueGrid grid = {});

/// An empty tensor (a 0 in its shape) of C++ element type T and the given dtype.
template <class T>
Tensor empty(const TensorShape& shape, DType dtype) {
  return constant(std::vector<T>{}, shape, dtype);
}

/// Special values for op cases (`using namespace tg::testing::values;`).
namespace values {
inline constexpr float kNanF = std::numeric_limits<float>::quiet_NaN();
inline constexpr float kInfF = std::numeric_limits<float>::infinity();
inline constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr int32_t kI32Min = std::numeric_limits<int32_t>::min();
inline constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();
inline constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
inline constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
}  // namespace values

}  // namespace tg::testing

#define EXPECT_TENSOR_EQ(actual, expected) \
  EXPECT_TRUE(::tg::testing::tensors_near((actual), (expected), 0.0))
#define EXPECT_TENSOR_NEAR(actual, expected, tol) \
  EXPECT_TRUE(::tg::testing::tensors_near((actual), (expected), (tol)))
#define EXPECT_THROW_MSG(stmt, E, ...) \
  EXPECT_TRUE(::tg::testing::throws_with<E>([&] { (void)(stmt); }, {__VA_ARGS__}))
