// Reductions, argmax/argmin, softmax/log_softmax: every validation throws InvalidArgumentError
// naming the op, what was expected and what was received.
#include "ops/op.h"
#include "support/test_util.h"

namespace tg {
namespace {

TEST(ReduceErrors, NumericReductionsRejectBoolAndString) {
  const Tensor b = constant({true, false});
  const Tensor s = constant(std::vector<std::string>{"a", "b"}, {2});
  EXPECT_THROW_MSG(reduce_sum(b), InvalidArgumentError, "[reduce_sum]",
                   "float32, float64, int32, int64", "got bool", "tg::cast");
  EXPECT_THROW_MSG(reduce_mean(b, {0}), InvalidArgumentError, "[reduce_mean]",
                   "float32, float64, int32, int64", "got bool");
  EXPECT_THROW_MSG(reduce_max(s), InvalidArgumentError, "[reduce_max]",
                   "float32, float64, int32, int64", "got string");
  EXPECT_THROW_MSG(reduce_min(b), InvalidArgumentError, "[reduce_min]", "got bool");
  EXPECT_THROW_MSG(reduce_prod(s, {}, true), InvalidArgumentError, "[reduce_prod]",
                   "got string");
}

TEST(ReduceErrors, AnyAndAllTakeBoolOnly) {
  EXPECT_THROW_MSG(reduce_any(ones({2})), InvalidArgumentError, "[reduce_any]",
                   "dtype bool", "got float32", "tg::cast");
  EXPECT_THROW_MSG(reduce_all(constant({1, 0})), InvalidArgumentError, "[reduce_all]",
                   "dtype bool", "got int32");
}

TEST(ReduceErrors, AxisOutOfRangeNamesTheRank) {
  EXPECT_THROW_MSG(reduce_sum(ones({2, 3}), {2}), InvalidArgumentError, "[reduce_sum]",
                   "axis 2 is out of range", "rank 2", "[-2, 2)");
  EXPECT_THROW_MSG(reduce_max(ones({2, 3}), {0, -3}), InvalidArgumentError, "[reduce_max]",
                   "axis -3 is out of range", "rank 2");
  EXPECT_THROW_MSG(reduce_any(constant(true), {0}), InvalidArgumentError, "[reduce_any]",
                   "axis 0 is out of range", "rank 0");
}

TEST(ReduceErrors, RepeatedAxes) {
  EXPECT_THROW_MSG(reduce_sum(ones({2, 3}), {1, 1}), InvalidArgumentError, "[reduce_sum]",
                   "axis 1 appears more than once", "[1, 1]", "list each axis once");
  // -1 and 1 are the same dim of a rank-2 tensor.
  EXPECT_THROW_MSG(reduce_mean(ones({2, 3}), {1, -1}), InvalidArgumentError, "[reduce_mean]",
                   "axis -1 appears more than once", "[1, -1]", "dimension 1", "rank-2");
  // Without a rank only literal repeats can be seen.
  const detail::ReduceAttrs a{{0, 0}, false};
  EXPECT_THROW_MSG(detail::op_def(detail::OpId::ReduceProd)
                       .infer({detail::ValueType{float32, TensorShape::unknown_rank()}}, a),
                   InvalidArgumentError, "[reduce_prod]", "axis 0 appears more than once",
                   "[0, 0]");
}

TEST(ArgMaxErrors, EmptyDimension) {
  EXPECT_THROW_MSG(argmax(zeros({2, 0}), 1), InvalidArgumentError, "[argmax]",
                   "cannot take argmax of an empty dimension", "axis 1", "(2, 0)", "size 0");
  EXPECT_THROW_MSG(argmin(zeros({0}, int32)), InvalidArgumentError, "[argmin]",
                   "cannot take argmin of an empty dimension", "(0,)");
  // A None dim passes shape inference; the kernel then sees the 0.
  const detail::ArgReduceAttrs a{0, int64};
  std::vector<Tensor> out(1);
  EXPECT_THROW_MSG(detail::op_def(detail::OpId::ArgMax).kernel({zeros({0, 3})}, a, out),
                   InvalidArgumentError, "[argmax]", "cannot take argmax of an empty dimension",
                   "(0, 3)");
}

TEST(ArgMaxErrors, ScalarsBadAxesAndDtypes) {
  EXPECT_THROW_MSG(argmax(constant(3.f)), InvalidArgumentError, "[argmax]", "rank >= 1",
                   "rank 0");
  EXPECT_THROW_MSG(argmin(ones({2, 3}), 2), InvalidArgumentError, "[argmin]",
                   "axis 2 is out of range", "rank 2");
  EXPECT_THROW_MSG(argmax(ones({2, 3}), -3), InvalidArgumentError, "[argmax]",
                   "axis -3 is out of range", "rank 2");
  EXPECT_THROW_MSG(argmax(constant({true, false})), InvalidArgumentError, "[argmax]",
                   "float32, float64, int32, int64", "got bool");
  const detail::ArgReduceAttrs a{0, float32};  // a float index dtype
  EXPECT_THROW_MSG(
      detail::op_def(detail::OpId::ArgMin).infer({detail::ValueType{float32, {3}}}, a),
      InvalidArgumentError, "[argmin]", "output dtype must be int32 or int64", "got float32");
}

TEST(SoftmaxErrors, FloatsOnly) {
  EXPECT_THROW_MSG(softmax(constant({1, 2})), InvalidArgumentError, "[softmax]",
                   "float32, float64", "got int32", "tg::cast");
  EXPECT_THROW_MSG(log_softmax(constant({1, 2}, int64)), InvalidArgumentError, "[log_softmax]",
                   "float32, float64", "got int64");
  EXPECT_THROW_MSG(softmax(constant({true})), InvalidArgumentError, "[softmax]", "got bool");
}

TEST(SoftmaxErrors, RankAndAxis) {
  EXPECT_THROW_MSG(softmax(constant(1.f)), InvalidArgumentError, "[softmax]", "rank >= 1",
                   "rank 0", "expand_dims");
  EXPECT_THROW_MSG(log_softmax(ones({2, 3}), 2), InvalidArgumentError, "[log_softmax]",
                   "axis 2 is out of range", "rank 2", "[-2, 2)");
  EXPECT_THROW_MSG(softmax(ones({2, 3}), -3), InvalidArgumentError, "[softmax]",
                   "axis -3 is out of range");
}

}  // namespace
}  // namespace tg
