// Shared assertions for tracegraph tests.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tracegraph/tracegraph.h"

namespace tg::testing {

/// Checks dtype, shape and every element; floats compare with |a - e| <= tol * (1 + |e|), NaN
/// equals NaN, and infinities must match exactly.
::testing::AssertionResult tensors_near(const Tensor& actual, const Tensor& expected,
                                        double tol = 0.0);

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

}  // namespace tg::testing

#define EXPECT_TENSOR_EQ(actual, expected) \
  EXPECT_TRUE(::tg::testing::tensors_near((actual), (expected), 0.0))
#define EXPECT_TENSOR_NEAR(actual, expected, tol) \
  EXPECT_TRUE(::tg::testing::tensors_near((actual), (expected), (tol)))
#define EXPECT_THROW_MSG(stmt, E, ...) \
  EXPECT_TRUE(::tg::testing::throws_with<E>([&] { (void)(stmt); }, {__VA_ARGS__}))
