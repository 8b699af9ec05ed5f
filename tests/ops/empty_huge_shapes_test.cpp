// Empty tensors whose other dims are huge - (0, 2^40, 2^40, 3) holds no element and is legal,
// as in TensorFlow - go through reductions, broadcasting, transposes, concats and products,
// eagerly and traced, to correctly shaped results. Multiplying such dims out overflows int64:
// strides, partial products and merged dims. That signed overflow is undefined behaviour the
// Release build cannot see (it wraps, and the wrapped values go unused); these tests are
// meaningful in the ASan+UBSan build, which CI runs them in.
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "ops/broadcast.h"
#include "support/test_util.h"
#include "tracegraph/tracegraph.h"

namespace tg {
namespace {

constexpr int64_t kHuge = int64_t{1} << 40;

// fn eagerly and as a traced function (its optimised graph run by the executor) on `args`:
// both give `shape` and the same elements.
void expect_eager_and_traced(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                             const std::vector<Tensor>& args, const TensorShape& shape) {
  const Tensor eager = fn(args);
  EXPECT_EQ(eager.shape(), shape) << eager.shape().to_string();
  auto traced = function([&](const std::vector<Tensor>& v) { return fn(v); });
  const Tensor graph = traced(args);
  EXPECT_EQ(graph.shape(), shape) << graph.shape().to_string();
  EXPECT_TENSOR_EQ(graph, eager);
}

TEST(EmptyHugeShapes, CountingTheirElementsGivesZeroWhereverTheZeroIs) {
  EXPECT_EQ(TensorShape({0, kHuge, kHuge, 3}).num_elements(), 0);
  EXPECT_EQ(TensorShape({kHuge, kHuge, 3, 0}).num_elements(), 0);
  EXPECT_EQ(zeros({kHuge, kHuge, 0}).num_elements(), 0);
  // A nonzero count that overflows is refused where the tensor would be made.
  EXPECT_THROW(zeros({kHuge, kHuge, 3}), InvalidArgumentError);
}

TEST(EmptyHugeShapes, StridesAndProductsSaturateInsteadOfOverflowing) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const std::vector<int64_t> dims{0, kHuge, kHuge, 3};
  EXPECT_EQ(detail::row_major_strides(dims), (std::vector<int64_t>{kMax, 3 * kHuge, 3, 1}));
  EXPECT_EQ(detail::product(dims, 0, 4), 0);
  EXPECT_EQ(detail::product(dims, 1, 4), kMax);
  EXPECT_EQ(detail::product(dims, 2, 4), 3 * kHuge);
  EXPECT_EQ(detail::product({kHuge, kHuge, 0}, 0, 3), 0);
}

TEST(EmptyHugeShapes, Reductions) {
  const Tensor x = zeros({0, kHuge, kHuge, 3});
  expect_eager_and_traced([](const auto& v) { return reduce_sum(v[0], {1}); }, {x}, TensorShape({0, kHuge, 3}));
  expect_eager_and_traced([](const auto& v) { return reduce_sum(v[0], {1, 2}); }, {x}, TensorShape({0, 3}));
  expect_eager_and_traced([](const auto& v) { return reduce_max(v[0], {-1}, true); }, {x},
                          TensorShape({0, kHuge, kHuge, 1}));
  // The zero last: each output element folds no element (a sum of none is 0, a mean NaN).
  const Tensor y = zeros({kHuge, kHuge, 0});
  expect_eager_and_traced([](const auto& v) { return reduce_sum(v[0], {0, 1}); }, {y}, TensorShape({0}));
  expect_eager_and_traced([](const auto& v) { return reduce_sum(v[0]); }, {y}, TensorShape({}));
  EXPECT_TENSOR_EQ(reduce_sum(y), constant(0.0f));
  EXPECT_TENSOR_EQ(reduce_mean(y), constant(std::numeric_limits<float>::quiet_NaN()));
  EXPECT_TENSOR_EQ(reduce_prod(zeros({kHuge, 0, kHuge}), {0, 1, 2}), constant(1.0f));
}

TEST(EmptyHugeShapes, BroadcastingElementwiseOps) {
  const Tensor a = zeros({0, kHuge, 1, 3});
  const Tensor b = zeros({0, 1, kHuge, 3});
  const TensorShape both({0, kHuge, kHuge, 3});
  expect_eager_and_traced([](const auto& v) { return v[0] + v[1]; }, {a, b}, both);
  expect_eager_and_traced([](const auto& v) { return v[0] * 2.0f; }, {a}, TensorShape({0, kHuge, 1, 3}));
  // A chain the optimiser fuses into one kernel with broadcast inputs.
  expect_eager_and_traced([](const auto& v) { return exp(v[0] - v[1]) * 2.0f + v[1]; }, {a, b}, both);
  expect_eager_and_traced([](const auto& v) { return where(v[0] > 0.0f, v[0], v[1]); }, {a, b}, both);
  const Tensor c = zeros({kHuge, kHuge, 0});
  expect_eager_and_traced([](const auto& v) { return v[0] - v[1]; }, {c, zeros({kHuge, 1, 0})}, c.shape());
}

TEST(EmptyHugeShapes, TransposeAndConcat) {
  const Tensor x = zeros({0, kHuge, kHuge, 3});
  expect_eager_and_traced([](const auto& v) { return transpose(v[0], {3, 2, 1, 0}); }, {x},
                          TensorShape({3, kHuge, kHuge, 0}));
  expect_eager_and_traced([](const auto& v) { return transpose(v[0], {0, 2, 1, 3}); }, {x}, x.shape());
  expect_eager_and_traced([](const auto& v) { return concat({v[0], v[0]}, 3); }, {x}, TensorShape({0, kHuge, kHuge, 6}));
  const Tensor y = zeros({kHuge, kHuge, 0});
  expect_eager_and_traced([](const auto& v) { return concat({v[0], v[0]}, 2); }, {y}, y.shape());
  expect_eager_and_traced([](const auto& v) { return concat({v[0], v[0]}, 0); }, {y}, TensorShape({2 * kHuge, kHuge, 0}));
  expect_eager_and_traced([](const auto& v) { return stack({v[0], v[0]}, 1); }, {y}, TensorShape({kHuge, 2, kHuge, 0}));
}

TEST(EmptyHugeShapes, MatrixProducts) {
  const Tensor a = zeros({0, kHuge, kHuge});
  expect_eager_and_traced([](const auto& v) { return matmul(v[0], v[1]); }, {a, zeros({1, kHuge, 0})},
                          TensorShape({0, kHuge, 0}));
  expect_eager_and_traced([](const auto& v) { return matmul(v[0], v[1]); }, {a, zeros({0, kHuge, 5})},
                          TensorShape({0, kHuge, 5}));
  expect_eager_and_traced([](const auto& v) { return matmul(v[0], v[1], true, false); },
                          {zeros({kHuge, 0}, int32), zeros({kHuge, 0}, int32)}, TensorShape({0, 0}));
}

}  // namespace
}  // namespace tg
