// bfloat16: an op that does not compute on it raises InvalidArgumentError naming the op and the
// dtype, eagerly, while tracing and for a bfloat16 asked for by a dtype attribute; mixed float
// dtypes are refused, never promoted.
#include "support/test_util.h"

namespace tg {
namespace {

Tensor bf(std::initializer_list<float> v) { return cast(constant(v), bfloat16); }

TEST(BFloat16Errors, OpsThatDoNotComputeOnItSaySo) {
  EXPECT_THROW_MSG(cumprod(bf({1, 2})), InvalidArgumentError, "[cumprod]", "bfloat16", "tg::cast");
  EXPECT_THROW_MSG(floordiv(bf({1}), bf({2})), InvalidArgumentError, "[floordiv]", "bfloat16", "float32");
  EXPECT_THROW_MSG(sort(bf({2, 1})), InvalidArgumentError, "[sort]", "bfloat16");
  // A dtype attribute asking for bfloat16 output is refused as well.
  EXPECT_THROW_MSG(one_hot(constant({1}), 3, 1, 0, -1, bfloat16), InvalidArgumentError, "[one_hot]", "bfloat16");
}

TEST(BFloat16Errors, WhileTracing) {
  auto f = function([](const Tensor& x) { return cumprod(x); });
  EXPECT_THROW_MSG(f.get_concrete_function(TensorSpec({None}, bfloat16)), InvalidArgumentError, "[cumprod]",
                   "bfloat16");
}

TEST(BFloat16Errors, MixedFloatDtypesAreNotPromoted) {
  EXPECT_THROW_MSG(add(bf({1}), constant({1.0f})), InvalidArgumentError, "[add]", "bfloat16", "float32");
  EXPECT_THROW_MSG(matmul(cast(constant({{1.0f}}), bfloat16), constant({{1.0f}})), InvalidArgumentError, "[matmul]",
                   "bfloat16", "float32");
  EXPECT_THROW_MSG(nn::sparse_softmax_cross_entropy(cast(constant({{1.0f, 2.0f}}), bfloat16), constant({0.5f})),
                   TypeError, "labels", "int32");
}

}  // namespace
}  // namespace tg
