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

// fn eagerly and as a traced function both throw E (the traced one while tracing or running).
template <class E>
void expect_error_eager_and_traced(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                                   const std::vector<Tensor>& args) {
  EXPECT_THROW(fn(args), E);
  auto traced = function([&](const std::vector<Tensor>& v) { return fn(v); });
  EXPECT_THROW(traced(args), E);
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

// einsum merges the contracted letters j and k into one dim of 2^80 here: the merged size
// saturates (UB before), and the product of two empty operands is the empty (0, 0).
TEST(EmptyHugeShapes, EinsumMergingHugeLetters) {
  expect_eager_and_traced([](const auto& v) { return einsum("ijk,jkl->il", v[0], v[1]); },
                          {zeros({0, kHuge, kHuge}), zeros({kHuge, kHuge, 0})}, TensorShape({0, 0}));
}

// Ops along one axis view their input as [outer, n, inner]; for these shapes outer or inner
// multiplied out overflows.
TEST(EmptyHugeShapes, OpsAlongAnAxis) {
  const Tensor x = zeros({kHuge, kHuge, 0});
  const Tensor y = zeros({0, kHuge, kHuge});
  expect_eager_and_traced([](const auto& v) { return argmax(v[0], 0); }, {x}, TensorShape({kHuge, 0}));
  expect_eager_and_traced([](const auto& v) { return argmin(v[0], 1); }, {x}, TensorShape({kHuge, 0}));
  expect_eager_and_traced([](const auto& v) { return argmax(v[0], 2); }, {y}, TensorShape({0, kHuge}));
  // Along the empty axis there is no element to point at.
  expect_error_eager_and_traced<InvalidArgumentError>([](const auto& v) { return argmax(v[0], 2); }, {x});
  for (int axis : {0, 1, 2}) {
    expect_eager_and_traced([axis](const auto& v) { return softmax(v[0], axis); }, {x}, x.shape());
    expect_eager_and_traced([axis](const auto& v) { return log_softmax(v[0], axis); }, {y}, y.shape());
    expect_eager_and_traced([axis](const auto& v) { return cumsum(v[0], axis); }, {x}, x.shape());
    expect_eager_and_traced([axis](const auto& v) { return cumprod(v[0], axis, true, true); }, {y}, y.shape());
  }
  expect_eager_and_traced([](const auto& v) { return cumsum(v[0], 1); }, {zeros({kHuge, kHuge, 0}, int32)},
                          x.shape());
  expect_eager_and_traced([](const auto& v) { return sort(v[0]); }, {x}, x.shape());
  expect_eager_and_traced([](const auto& v) { return sort(v[0], 0, SortDirection::Descending); },
                          {zeros({0, kHuge, 3})}, TensorShape({0, kHuge, 3}));
  expect_eager_and_traced([](const auto& v) { return argsort(v[0], 1); }, {zeros({3, 0, 5})},
                          TensorShape({3, 0, 5}));
  expect_eager_and_traced([](const auto& v) { return top_k(v[0], 0).values; }, {x}, x.shape());
  expect_eager_and_traced([](const auto& v) { return top_k(v[0], 2).indices; }, {zeros({0, kHuge, 5})},
                          TensorShape({0, kHuge, 2}));
}

TEST(EmptyHugeShapes, GradientsOfScans) {
  // cumprod's gradient is written with affine_scan, whose kernel views dims as the scans' do.
  const Tensor x = zeros({kHuge, 0, kHuge});
  for (int axis : {0, 1, 2}) {
    GradientTape tape;
    tape.watch(x);
    const Tensor loss = reduce_sum(cumprod(x, axis));
    const Tensor g = tape.gradient(loss, x);
    EXPECT_EQ(g.shape(), x.shape());
  }
}

TEST(EmptyHugeShapes, Indexing) {
  const Tensor x = zeros({kHuge, kHuge, 0});
  const Tensor ix = constant({1, 0});
  expect_eager_and_traced([](const auto& v) { return gather(v[0], v[1], 1); }, {x, ix}, TensorShape({kHuge, 2, 0}));
  expect_eager_and_traced([](const auto& v) { return gather(v[0], v[1], 2); }, {x, zeros({0, 4}, int32)},
                          TensorShape({kHuge, kHuge, 0, 4}));
  expect_eager_and_traced([](const auto& v) { return gather(v[0], v[1], 0); }, {zeros({0, kHuge, kHuge}), zeros({0}, int64)},
                          TensorShape({0, kHuge, kHuge}));
  // An index out of range is refused even when nothing would be copied.
  expect_error_eager_and_traced<InvalidArgumentError>(
      [](const auto& v) { return gather(v[0], v[1], 1); }, {x, constant(std::vector<int64_t>{kHuge}, {1}, int64)});
  expect_eager_and_traced([](const auto& v) { return one_hot(v[0], 3); }, {zeros({kHuge, kHuge, 0}, int32)},
                          TensorShape({kHuge, kHuge, 0, 3}));
  expect_eager_and_traced([](const auto& v) { return one_hot(v[0], 3, 1.0, 0.0, 2); }, {zeros({kHuge, kHuge, 0}, int64)},
                          TensorShape({kHuge, kHuge, 3, 0}));
  expect_eager_and_traced([](const auto& v) { return one_hot(v[0], kHuge, 1.0, 0.0, 1); }, {zeros({kHuge, 0}, int32)},
                          TensorShape({kHuge, kHuge, 0}));
  expect_eager_and_traced([](const auto& v) { return slice(v[0], {1, 2, 0}, {3, -1, 0}); }, {x},
                          TensorShape({3, kHuge - 2, 0}));
}

TEST(EmptyHugeShapes, GradientOfGather) {
  // gather's gradient scatters into zeros shaped like params: (2^40, 2^40, 0).
  const Tensor x = zeros({kHuge, kHuge, 0});
  GradientTape tape;
  tape.watch(x);
  const Tensor loss = reduce_sum(gather(x, constant({1, 0, 1}), 1));
  EXPECT_EQ(tape.gradient(loss, x).shape(), x.shape());
}

TEST(EmptyHugeShapes, NdIndexing) {
  // Index tuples of K = 0 entries: indices (2^40, 2^40, 0) hold no element but name 2^80 tuples.
  const Tensor none = zeros({kHuge, kHuge, 0}, int32);
  expect_eager_and_traced([](const auto& v) { return gather_nd(v[0], v[1]); }, {zeros({0}), none},
                          TensorShape({kHuge, kHuge, 0}));
  expect_eager_and_traced([](const auto& v) { return gather_nd(v[0], v[1]); }, {zeros({3, 0}), none},
                          TensorShape({kHuge, kHuge, 3, 0}));
  expect_eager_and_traced([](const auto& v) { return gather_nd(v[0], v[1]); }, {zeros({kHuge, 0}), constant({{1}, {2}})},
                          TensorShape({2, 0}));
  expect_error_eager_and_traced<InvalidArgumentError>([](const auto& v) { return gather_nd(v[0], v[1]); },
                                                      {zeros({kHuge, 0}), constant(std::vector<int64_t>{kHuge}, {1, 1}, int64)});
  expect_eager_and_traced([](const auto& v) { return scatter_nd(v[0], v[1], TensorShape({3, 0})); },
                          {none, zeros({kHuge, kHuge, 3, 0})}, TensorShape({3, 0}));
  expect_eager_and_traced([](const auto& v) { return scatter_nd(v[0], v[1], TensorShape({kHuge, kHuge, 0})); },
                          {constant({{5, 7}}), zeros({1, 0})}, TensorShape({kHuge, kHuge, 0}));
  expect_eager_and_traced([](const auto& v) { return tensor_scatter_nd_add(v[0], v[1], v[2]); },
                          {zeros({0, 4}), none, zeros({kHuge, kHuge, 0, 4})}, TensorShape({0, 4}));
  expect_eager_and_traced([](const auto& v) { return boolean_mask(v[0], v[1], 2); },
                          {zeros({kHuge, kHuge, 0}), zeros({0}, bool_)}, TensorShape({kHuge, kHuge, 0}));
  expect_eager_and_traced([](const auto& v) { return boolean_mask(v[0], v[1], 0); },
                          {zeros({0, kHuge, kHuge}), zeros({0}, bool_)}, TensorShape({0, kHuge, kHuge}));
  expect_eager_and_traced([](const auto& v) { return where(v[0]); }, {zeros({kHuge, kHuge, 0}, bool_)},
                          TensorShape({0, 3}));
}

TEST(EmptyHugeShapes, TilePadReverse) {
  const Tensor x = zeros({kHuge, kHuge, 0});
  expect_eager_and_traced([](const auto& v) { return tile(v[0], {1, 1, 5}); }, {x}, x.shape());
  expect_eager_and_traced([](const auto& v) { return tile(v[0], {3, 1}); }, {zeros({0, kHuge})}, TensorShape({0, kHuge}));
  // A dim itself past int64 is refused.
  EXPECT_THROW(tile(x, {kHuge, 1, 1}), InvalidArgumentError);
  expect_eager_and_traced([](const auto& v) { return pad(v[0], {{0, 0}, {1, 1}, {0, 0}}); }, {zeros({0, kHuge, kHuge})},
                          TensorShape({0, kHuge + 2, kHuge}));
  expect_eager_and_traced([](const auto& v) { return reverse(v[0], {0, 2}); }, {x}, x.shape());
}

// Shapes given as values (reshape targets, shape tensors) with a zero dim count no element.
TEST(EmptyHugeShapes, ShapesGivenAsValues) {
  const Tensor x = zeros({kHuge, kHuge, 0});
  expect_eager_and_traced([](const auto& v) { return reshape(v[0], {0, 5}); }, {x}, TensorShape({0, 5}));
  expect_eager_and_traced([](const auto& v) { return reshape(v[0], {kHuge, 0, kHuge}); }, {x},
                          TensorShape({kHuge, 0, kHuge}));
  expect_eager_and_traced([](const auto& v) { return reshape(v[0], v[1]); },
                          {zeros({3, 0}), constant(std::vector<int64_t>{kHuge, 0, kHuge}, {3}, int64)},
                          TensorShape({kHuge, 0, kHuge}));
  // Which size -1 stands for is still ambiguous, and a count past int64 still refused.
  expect_error_eager_and_traced<InvalidArgumentError>([](const auto& v) { return reshape(v[0], {kHuge, -1, 0}); }, {x});
  expect_error_eager_and_traced<InvalidArgumentError>([](const auto& v) { return reshape(v[0], {kHuge, kHuge, 1}); },
                                                      {zeros({0})});
  const Tensor dims = constant(std::vector<int64_t>{kHuge, kHuge, 0}, {3}, int64);
  expect_eager_and_traced([](const auto& v) { return zeros(v[0]); }, {dims}, TensorShape({kHuge, kHuge, 0}));
  expect_eager_and_traced([](const auto& v) { return fill(v[0], 2.0f); }, {dims}, TensorShape({kHuge, kHuge, 0}));
  expect_error_eager_and_traced<InvalidArgumentError>(
      [](const auto& v) { return zeros(v[0]); }, {constant(std::vector<int64_t>{kHuge, kHuge, 1}, {3}, int64)});
}

// An empty input whose result has elements: a result too large for memory is refused with a
// typed error before anything is allocated or written.
TEST(EmptyHugeShapes, NonemptyResultsOfEmptyInputsAreRefusedWhenTooLarge) {
  constexpr int64_t kMega = int64_t{1} << 20;
  const Tensor x = zeros({0, kMega, kMega});  // a result (kMega, kMega) of float32 is 4 TiB
  expect_error_eager_and_traced<ResourceExhaustedError>([](const auto& v) { return reduce_sum(v[0], {0}); }, {x});
  expect_error_eager_and_traced<ResourceExhaustedError>([](const auto& v) { return reduce_max(v[0], {0}, true); }, {x});
  expect_error_eager_and_traced<ResourceExhaustedError>(
      [](const auto& v) { return pad(v[0], {{1, 0}, {0, 0}, {0, 0}}); }, {x});
  // A result whose element count does not fit int64.
  const Tensor y = zeros({kHuge, kHuge, 0});
  expect_error_eager_and_traced<InvalidArgumentError>([](const auto& v) { return reduce_prod(v[0], {2}); }, {y});
  expect_error_eager_and_traced<InvalidArgumentError>(
      [](const auto& v) { return pad(v[0], {{0, 0}, {0, 0}, {1, 1}}); }, {y});
  expect_error_eager_and_traced<InvalidArgumentError>(
      [](const auto& v) { return scatter_nd(v[0], v[1], TensorShape({kHuge, kHuge, 1})); },
      {zeros({0, 2}, int32), zeros({0, 1})});
}

}  // namespace
}  // namespace tg
