// GradientTape misuse and the gradient helper ops' validation: typed errors naming the API or
// op, what was expected and what was received.
#include "ops/grad_helpers.h"
#include "support/test_util.h"

namespace tg {
namespace {

TEST(AutodiffErrors, NonPersistentTapeAllowsOneGradientCall) {
  const Tensor x = constant(2.0, float64);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = x * x;
  EXPECT_TENSOR_EQ(tape.gradient(y, x), constant(4.0, float64));
  EXPECT_THROW_MSG(tape.gradient(y, x), ValueError, "[GradientTape.gradient]", "non-persistent",
                   "one gradient() call", "persistent=*/true");
}

TEST(AutodiffErrors, IntegerSourcesAndTargetsAreTypeErrors) {
  const Tensor i = constant({1, 2});
  const Tensor x = constant({1.0, 2.0}, float64);
  GradientTape tape(true);
  tape.watch(x);
  const Tensor y = reduce_sum(x);
  EXPECT_THROW_MSG(tape.gradient(y, i), TypeError, "[GradientTape.gradient]", "source 0",
                   "floating-point", "int32", "tg::cast");
  EXPECT_THROW_MSG(tape.gradient(i, x), TypeError, "[GradientTape.gradient]", "the target", "int32");
  EXPECT_THROW_MSG(tape.watch(i), TypeError, "[GradientTape.watch]", "int32");
  Variable counter(constant(int64_t{3}));
  EXPECT_THROW_MSG(tape.watch(counter), TypeError, "[GradientTape.watch]", "int64");
  EXPECT_THROW_MSG(tape.gradient(y, counter), TypeError, "[GradientTape.gradient]", "int64");
  EXPECT_THROW_MSG(tape.gradient(Tensor(), x), ValueError, "[GradientTape.gradient]", "empty");
}

TEST(AutodiffErrors, SumToLikeAndBroadcastLikeNeedBroadcastableShapes) {
  const Tensor g = zeros({2, 3});
  EXPECT_THROW_MSG(detail::sum_to_like(g, zeros({2})), InvalidArgumentError, "[sum_to_like]",
                   "shape (2,) does not broadcast to (2, 3)");
  EXPECT_THROW_MSG(detail::sum_to_like(g, zeros({1, 2, 3})), InvalidArgumentError,
                   "[sum_to_like]", "(1, 2, 3) does not broadcast to (2, 3)");
  EXPECT_THROW_MSG(detail::sum_to_like(constant({true, false}), constant(true)), InvalidArgumentError,
                   "[sum_to_like]", "bool");
  EXPECT_THROW_MSG(detail::broadcast_like(zeros({3}), zeros({2, 2})), InvalidArgumentError,
                   "[broadcast_like]", "shape (3,) does not broadcast to (2, 2)");
}

TEST(AutodiffErrors, UnreduceLikeChecksTheReducedShape) {
  EXPECT_THROW_MSG(detail::unreduce_like(zeros({3}), zeros({2, 3}), {1}, false),
                   InvalidArgumentError, "[unreduce_like]", "shape (3,)", "gives (2,)");
  EXPECT_THROW_MSG(detail::unreduce_like(zeros({2}), zeros({2, 3}), {5}, false),
                   InvalidArgumentError, "[unreduce_like]", "axis 5 is out of range");
}

TEST(AutodiffErrors, ShapeHelpersCheckSizes) {
  EXPECT_THROW_MSG(detail::reshape_like(zeros({2, 3}), zeros({4})), InvalidArgumentError,
                   "[reshape_like]", "6 elements", "4 elements");
  EXPECT_THROW_MSG(detail::split_like(zeros({2, 5}), {zeros({2, 2}), zeros({2, 2})}, 1),
                   InvalidArgumentError, "[split_like]", "add up to 4", "has 5");
  EXPECT_THROW_MSG(detail::split_like(zeros({2, 5}), {zeros({3, 5})}, 1), InvalidArgumentError,
                   "[split_like]", "piece 0 has shape (3, 5)");
  EXPECT_THROW_MSG(detail::split_like(zeros({2}), {}, 0), InvalidArgumentError, "[split_like]",
                   "at least one");
  EXPECT_THROW_MSG(detail::slice_like(zeros({3, 4}), zeros({2, 2}), {2, 0}), InvalidArgumentError,
                   "[slice_like]", "does not fit in shape (3, 4)", "dimension 0");
  EXPECT_THROW_MSG(detail::pad_like(zeros({2, 2}), zeros({3}), {}), InvalidArgumentError,
                   "[pad_like]", "expected equal ranks");
  EXPECT_THROW_MSG(detail::pad_like(zeros({2}), zeros({3}), {0, 0}), InvalidArgumentError,
                   "[pad_like]", "more entries than the rank");
}

TEST(AutodiffErrors, ScatterAddLikeChecksIndicesAndShapes) {
  EXPECT_THROW_MSG(detail::scatter_add_like(zeros({2, 2}), constant({0, 3}), zeros({3, 2}), 0),
                   InvalidArgumentError, "[scatter_add_like]", "= 3 is not in [0, 3)");
  EXPECT_THROW_MSG(detail::scatter_add_like(zeros({3, 2}), constant({0, 1}), zeros({3, 2}), 0),
                   InvalidArgumentError, "[scatter_add_like]", "gradient has shape (3, 2)",
                   "gives (2, 2)");
  EXPECT_THROW_MSG(detail::scatter_add_like(zeros({2, 2}), constant({0.f, 1.f}), zeros({3, 2}), 0),
                   InvalidArgumentError, "[scatter_add_like]", "indices");
}

// With None dims the shapes are only known at run time: the kernels check them again.
TEST(AutodiffErrors, HelperKernelsRecheckShapesSeenAsNoneWhileTracing) {
  auto f = function([](const Tensor& g, const Tensor& like) { return detail::sum_to_like(g, like); });
  auto cf = f.get_concrete_function(TensorSpec({None, None}, float32), TensorSpec({None}, float32));
  EXPECT_TENSOR_EQ(cf(ones({2, 3}), zeros({3})), constant({2.f, 2.f, 2.f}));
  EXPECT_THROW_MSG(cf(ones({2, 3}), zeros({2})), InvalidArgumentError, "[sum_to_like]",
                   "does not broadcast");
}

}  // namespace
}  // namespace tg
