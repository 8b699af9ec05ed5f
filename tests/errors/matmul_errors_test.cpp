// matmul: every validation throws InvalidArgumentError naming what was expected and received.
#include "ops/op.h"
#include "support/test_util.h"

namespace tg {
namespace {

TEST(MatMulErrors, RankOneOperandSuggestsExpandDims) {
  EXPECT_THROW_MSG(matmul(constant({1.f, 2.f}), ones({2, 2})), InvalidArgumentError, "[matmul]",
                   "expected a of rank >= 2", "got rank 1", "(2,)", "expand_dims", "reshape");
  EXPECT_THROW_MSG(matmul(ones({2, 2}), constant({1.f, 2.f})), InvalidArgumentError, "[matmul]",
                   "expected b of rank >= 2", "got rank 1", "(2,)", "expand_dims");
}

TEST(MatMulErrors, ScalarOperand) {
  EXPECT_THROW_MSG(matmul(constant(2.f), ones({2, 2})), InvalidArgumentError, "[matmul]",
                   "expected a of rank >= 2", "got rank 0", "()");
}

TEST(MatMulErrors, DtypesMustMatch) {
  EXPECT_THROW_MSG(matmul(ones({2, 2}), ones({2, 2}, float64)), InvalidArgumentError,
                   "[matmul]", "one dtype", "float32", "float64", "tg::cast");
  EXPECT_THROW_MSG(matmul(ones({2, 2}, int32), ones({2, 2}, int64)), InvalidArgumentError,
                   "[matmul]", "int32", "int64");
}

TEST(MatMulErrors, BoolAndStringAreNotSupported) {
  Tensor t = constant({{true, false}, {false, true}});
  EXPECT_THROW_MSG(matmul(t, t), InvalidArgumentError, "[matmul]",
                   "float32, float64, int32, int64", "got bool", "tg::cast");
  Tensor s = constant(std::vector<std::string>{"a", "b", "c", "d"}, {2, 2});
  EXPECT_THROW_MSG(matmul(s, s), InvalidArgumentError, "[matmul]",
                   "float32, float64, int32, int64", "got string");
}

TEST(MatMulErrors, InnerDimsMustAgree) {
  EXPECT_THROW_MSG(matmul(ones({2, 3}), ones({4, 5})), InvalidArgumentError, "[matmul]",
                   "inner dimensions must agree", "(2, 3)", "(4, 5)", "K = 3", "K = 4",
                   "3 != 4");
}

TEST(MatMulErrors, InnerDimsAfterTranspose) {
  // (3, 2)^T is (2, 3): K = 3 against b's 2 rows.
  EXPECT_THROW_MSG(matmul(ones({3, 2}), ones({2, 2}), true, false), InvalidArgumentError,
                   "[matmul]", "(3, 2)", "transpose_a=true", "(2, 2)", "3 != 2");
  // Without the transpose (2, 3) x (2, 3) does not fit, with transpose_b it does.
  EXPECT_THROW_MSG(matmul(ones({2, 3}), ones({2, 3})), InvalidArgumentError, "[matmul]",
                   "transpose_b=false", "3 != 2");
  EXPECT_NO_THROW(matmul(ones({2, 3}), ones({2, 3}), false, true));
  EXPECT_THROW_MSG(matmul(ones({2, 3}), ones({2, 3}), false, false), InvalidArgumentError,
                   "set transpose_a/transpose_b");
}

TEST(MatMulErrors, BatchDimsMustBroadcast) {
  EXPECT_THROW_MSG(matmul(ones({2, 3, 4}), ones({5, 4, 6})), InvalidArgumentError, "[matmul]",
                   "batch dims", "(2, 3, 4)", "(5, 4, 6)", "2 == 5");
  EXPECT_THROW_MSG(matmul(ones({2, 3, 3, 4}), ones({4, 1, 4, 6}), false, false),
                   InvalidArgumentError, "[matmul]", "(2, 3, 3, 4)", "(4, 1, 4, 6)", "2 == 4");
}

// Static validation also works on partially known shapes (what tracing will hand the rule).
std::vector<detail::ValueType> infer(const TensorShape& a, const TensorShape& b,
                                     DType da = float32, DType db = float32) {
  return detail::op_def(detail::OpId::MatMul)
      .infer({detail::ValueType{da, a}, detail::ValueType{db, b}}, detail::MatMulAttrs{});
}

TEST(MatMulErrors, PartiallyKnownShapes) {
  EXPECT_THROW_MSG(infer({None, 3}, {4, None}), InvalidArgumentError, "[matmul]",
                   "(None, 3)", "(4, None)", "3 != 4");
  EXPECT_THROW_MSG(infer({None}, {4, 5}), InvalidArgumentError, "[matmul]", "rank >= 2",
                   "(None,)");
  EXPECT_THROW_MSG(infer({2, None, 3}, {3, 3, 4}), InvalidArgumentError, "[matmul]",
                   "batch dims", "2 == 3");
  // The rank check applies to the known side even when the other rank is unknown.
  EXPECT_THROW_MSG(infer(TensorShape::unknown_rank(), {4}), InvalidArgumentError, "[matmul]",
                   "expected b of rank >= 2");
  EXPECT_THROW_MSG(infer(TensorShape::unknown_rank(), TensorShape::unknown_rank(), bool_, bool_),
                   InvalidArgumentError, "[matmul]", "got bool");
}

}  // namespace
}  // namespace tg
