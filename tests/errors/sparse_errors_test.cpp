// Expected failures of sparse gradients: IndexedSlices that do not fit, indices out of range
// (eagerly and in graphs), repeated indices in scatter_update, and slices given where a dense
// tensor was asked for.
#include "ops/op.h"
#include "support/test_util.h"

namespace tg {
namespace {

TEST(SparseErrors, SlicesMustFitTheirDenseShape) {
  EXPECT_THROW_MSG(IndexedSlices(constant({0, 1}), constant({{1.0f, 2.0f}}), TensorShape{3, 2}), InvalidArgumentError,
                   "[IndexedSlices]", "values have shape (1, 2)", "need values of shape (2, 2)");
  EXPECT_THROW_MSG(IndexedSlices(constant({{0, 1}}), constant({{1.0f}, {2.0f}}), TensorShape{3, 1}),
                   InvalidArgumentError, "indices must be a vector", "(1, 2)");
  EXPECT_THROW_MSG(IndexedSlices(constant({0.0f}), constant({{1.0f}}), TensorShape{3, 1}), InvalidArgumentError,
                   "indices must be int32 or int64", "float32");
  EXPECT_THROW_MSG(IndexedSlices(constant({0}), constant({1}), TensorShape{3}), InvalidArgumentError,
                   "values must be float32 or float64", "int32");
  EXPECT_THROW_MSG(IndexedSlices(constant({0}), constant({1.0f}), TensorShape{None}), InvalidArgumentError,
                   "dense_shape must be fully known", "(None,)");
}

TEST(SparseErrors, AnIndexOutOfRangeIsAnInvalidArgumentEagerlyAndInAGraph) {
  const IndexedSlices bad(constant({0, 3}), constant({{1.0f}, {2.0f}}), TensorShape{3, 1});
  EXPECT_THROW_MSG(bad.to_dense(), InvalidArgumentError, "3 is not in [0, 3)");
  Variable v(zeros({3, 1}), "v");
  EXPECT_THROW_MSG(v.scatter_add(bad), InvalidArgumentError, "[scatter_add_variable]", "indices[1] = 3",
                   "not in [0, 3)", "variable 'v'");
  EXPECT_THROW_MSG(v.scatter_sub(IndexedSlices(constant({-1}), constant({{1.0f}}), TensorShape{3, 1})),
                   InvalidArgumentError, "indices[0] = -1");
  EXPECT_TRUE(testing::same_bits(v.read_value(), zeros({3, 1})));  // nothing was written
  auto f = function([&](const Tensor& idx) {
    v.scatter_add(IndexedSlices(idx, ones({2, 1}), TensorShape{3, 1}));
    return v.read_value();
  });
  EXPECT_THROW_MSG(f(constant({2, 7})), InvalidArgumentError, "[scatter_add_variable]", "indices[1] = 7");
  EXPECT_TRUE(testing::same_bits(f(constant({2, 2})), constant({{0.0f}, {0.0f}, {2.0f}})));
  Variable rows(zeros({4, 2}), "rows");
  optim::SGD opt(0.1);
  EXPECT_THROW_MSG(opt.apply_gradients(std::vector<Gradient>{IndexedSlices(constant({4}), ones({1, 2}), TensorShape{4, 2})},
                                       {rows}),
                   InvalidArgumentError, "4 is not in [0, 4)");
}

TEST(SparseErrors, RowUpdatesTakeNumericVariables) {
  Variable flags(constant({true, false}), "flags");
  EXPECT_THROW_MSG(detail::apply_op(detail::OpId::ScatterUpdateVariable, {constant({0}), constant({false})},
                                    detail::VariableAttrs{flags.state()}),
                   InvalidArgumentError, "[scatter_update_variable]", "variable 'flags' has dtype bool",
                   "numeric Variables");
  EXPECT_TRUE(testing::same_bits(flags.read_value(), constant({true, false})));
}

TEST(SparseErrors, ScatterUpdateRefusesRepeatedIndices) {
  Variable v(zeros({3, 1}), "v");
  EXPECT_THROW_MSG(v.scatter_update(IndexedSlices(constant({1, 1}), constant({{1.0f}, {2.0f}}), TensorShape{3, 1})),
                   InvalidArgumentError, "[scatter_update_variable]", "index 1 appears more than once",
                   "deduplicated()");
}

TEST(SparseErrors, SlicesMustMatchTheirVariable) {
  Variable v(zeros({3, 2}), "v");
  EXPECT_THROW_MSG(v.scatter_add(IndexedSlices(constant({0}), ones({1, 2}), TensorShape{4, 2})), InvalidArgumentError,
                   "dense_shape (4, 2)", "variable 'v' (3, 2)");
  EXPECT_THROW_MSG(v.scatter_add(IndexedSlices(constant({0}), ones({1, 2}, float64), TensorShape{3, 2})),
                   InvalidArgumentError, "float32", "float64");
  optim::Adam opt(0.1);
  EXPECT_THROW_MSG(opt.apply_gradients(std::vector<Gradient>{IndexedSlices(constant({0}), ones({1, 2}), TensorShape{5, 2})},
                                       {v}),
                   InvalidArgumentError, "[Adam.apply_gradients]", "dense_shape (5, 2)", "shape (3, 2)");
}

TEST(SparseErrors, ADenseOrSparseReadOfTheOtherKindIsATypeError) {
  const Gradient sparse(IndexedSlices(constant({0}), ones({1, 1}), TensorShape{2, 1}));
  const Gradient dense(ones({2, 1}));
  EXPECT_THROW_MSG(sparse.dense(), TypeError, "is an IndexedSlices", "to_dense()");
  EXPECT_THROW_MSG(dense.slices(), TypeError, "is a dense tensor");
  EXPECT_THROW_MSG(Gradient().dtype(), ValueError, "undefined");
  EXPECT_FALSE(Gradient().to_dense().defined());
}

}  // namespace
}  // namespace tg
