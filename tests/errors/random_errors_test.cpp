// Expected failures of the random ops and dropout: each names the op, what was expected and what
// was received.
#include <limits>

#include "support/test_util.h"

namespace tg {
namespace {

TEST(RandomErrors, Distributions) {
  EXPECT_THROW_MSG(random_normal({2}, 0.0, 1.0, int32), TypeError, "[random_normal]", "float32 or float64", "int32");
  EXPECT_THROW_MSG(truncated_normal({2}, 0.0, -1.0), InvalidArgumentError, "[truncated_normal]", "stddev >= 0",
                   "stddev=-1");
  EXPECT_THROW_MSG(random_normal({2}, std::numeric_limits<double>::quiet_NaN()), InvalidArgumentError,
                   "[random_normal]", "finite mean");
  EXPECT_THROW_MSG(random_uniform({2}, 0.0, 1.0, bool_), TypeError, "[random_uniform]", "bool");
  EXPECT_THROW_MSG(random_uniform({2}, 0.5, 3.0, int32), InvalidArgumentError, "[random_uniform]", "whole numbers",
                   "0.5");
  EXPECT_THROW_MSG(random_uniform({2}, 0.0, 4294967296.0, int32), InvalidArgumentError, "[random_uniform]",
                   "within", "int32");
  EXPECT_THROW_MSG(random_uniform({2}, 3.0, 3.0, int64), InvalidArgumentError, "[random_uniform]",
                   "minval < maxval", "must not be empty");
  EXPECT_THROW_MSG(stateless_random_normal({2}, constant({1, 2}), 0.0, 1.0, int64), TypeError,
                   "[stateless_random_normal]", "int64");
}

TEST(RandomErrors, Shapes) {
  EXPECT_THROW_MSG(random_normal({None, 2}), InvalidArgumentError, "[random_normal]", "(None, 2)", "tg::shape(x)");
  EXPECT_THROW_MSG(random_normal(constant({2.0f})), TypeError, "[random_normal]", "int32 or int64", "float32");
  EXPECT_THROW_MSG(random_uniform(constant({{2, 3}})), InvalidArgumentError, "[random_uniform]", "1-D");
  EXPECT_THROW_MSG(truncated_normal(constant({2, -1})), InvalidArgumentError, "[truncated_normal]", "negative");
  // A runtime shape that contradicts the value the graph was built with is caught at run time.
  auto f = function([](const Tensor& n) { return random_uniform(stack({n, constant(2)})); });
  EXPECT_THROW_MSG(f(constant(-3)), InvalidArgumentError, "[random_uniform]", "negative");
}

TEST(RandomErrors, StatelessSeeds) {
  EXPECT_THROW_MSG(stateless_random_uniform({2}, constant({1, 2, 3})), InvalidArgumentError,
                   "[stateless_random_uniform]", "shape (2,)", "(3,)");
  EXPECT_THROW_MSG(stateless_random_normal({2}, constant({1.0f, 2.0f})), TypeError, "[stateless_random_normal]",
                   "int32 or int64", "float32");
  EXPECT_THROW_MSG(stateless_truncated_normal({2}, Tensor()), ValueError, "[stateless_truncated_normal]", "empty");
  // With a None-length seed the rule passes while tracing; the kernel checks the value.
  auto f = function([](const Tensor& seed) { return stateless_random_uniform({2}, seed); },
                    {.input_signature = std::vector<TensorSpec>{TensorSpec({None}, int32)}});
  EXPECT_THROW_MSG(f(constant({1})), InvalidArgumentError, "[stateless_random_uniform]", "shape (2,)", "(1,)");
}

TEST(DropoutErrors, RateAndInputs) {
  const Tensor x = ones({4});
  for (double rate : {1.0, -0.1, 1.5, std::numeric_limits<double>::quiet_NaN()})
    EXPECT_THROW_MSG(dropout(x, rate), InvalidArgumentError, "[dropout]", "[0, 1)");
  EXPECT_THROW_MSG(dropout(x, 1.0, false), InvalidArgumentError, "[dropout]", "[0, 1)");  // checked in inference too
  EXPECT_THROW_MSG(dropout(constant({1, 2}), 0.5), TypeError, "[dropout]", "float32 or float64", "int32");
  EXPECT_THROW_MSG(dropout(x, 0.5, constant(1)), TypeError, "[dropout]", "bool scalar");
  EXPECT_THROW_MSG(dropout(x, 0.5, constant({true, false})), TypeError, "[dropout]", "bool scalar");
  EXPECT_THROW_MSG(nn::Dropout(1.0), InvalidArgumentError, "[Dropout]", "[0, 1)");
}

TEST(RandomErrors, InitializersNeedAFullShapeAndAFloatingDtype) {
  EXPECT_THROW_MSG(nn::he_normal({None, 3}, 1), InvalidArgumentError, "[he_normal]", "(None, 3)");
  EXPECT_THROW_MSG(nn::glorot_normal({3, 3}, 1, int32), TypeError, "[glorot_normal]", "int32");
  EXPECT_THROW_MSG(nn::truncated_normal({3}, 1, 0.0, 1.0, int64), TypeError, "[truncated_normal]", "int64");
}

TEST(RandomErrors, ARandomOpInsideADifferentiatedCondIsRefusedNotRedrawn) {
  // The cond's gradient runs the branch again; a mask drawn anew there would be a wrong gradient.
  auto f = function([](const Tensor& x, const Tensor& flag) {
    GradientTape tape;
    tape.watch(x);
    const Tensor y = cond(flag, [&] { return dropout(x, 0.5); }, [&] { return x; });
    return tape.gradient(reduce_sum(y), x);
  });
  EXPECT_THROW_MSG(f(ones({4}), constant(true)), InvalidArgumentError, "[gradient]", "random_uniform",
                   "tg::cond branch", "stateless_");
}

}  // namespace
}  // namespace tg
