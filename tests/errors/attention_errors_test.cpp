// scaled_dot_product_attention: every validation throws a typed error naming what was expected and
// what was received, eagerly, while tracing, and when a traced graph with None dims runs.
#include <limits>
#include <vector>

#include "ops/op.h"
#include "support/test_util.h"

namespace tg {
namespace {

const Tensor q = ones({2, 3, 4, 8}), k = ones({2, 3, 5, 8}), v = ones({2, 3, 5, 6});

TEST(AttentionErrors, RanksNameTheLayout) {
  EXPECT_THROW_MSG(scaled_dot_product_attention(ones({3, 4, 8}), k, v), InvalidArgumentError,
                   "[scaled_dot_product_attention]", "q must have rank 4", "(3, 4, 8)", "(batch, heads, Tq, D)",
                   "perm {0, 2, 1, 3}");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, ones({2, 3, 5, 8, 1}), v), InvalidArgumentError,
                   "k must have rank 4", "(2, 3, 5, 8, 1)");
}

TEST(AttentionErrors, SizesMustAgree) {
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, ones({2, 3, 5, 4}), v), InvalidArgumentError,
                   "the head sizes (axis 3 of q and k) differ", "q has 8 but k has 4", "(2, 3, 4, 8)", "(2, 3, 5, 4)");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, ones({2, 3, 6, 6})), InvalidArgumentError,
                   "the key counts", "k has 5 but v has 6");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, ones({1, 3, 5, 8}), v), InvalidArgumentError, "the batch sizes",
                   "q has 2 but k has 1");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, ones({2, 2, 5, 6})), InvalidArgumentError, "the head counts",
                   "q has 3 but v has 2");
}

TEST(AttentionErrors, DtypesMustBeOneFloatingType) {
  EXPECT_THROW_MSG(scaled_dot_product_attention(ones({2, 3, 4, 8}, int32), k, v), TypeError,
                   "q must be float32 or float64, got int32");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, ones({2, 3, 5, 8}, float64), v), TypeError,
                   "one dtype", "k float64", "tg::cast");
}

TEST(AttentionErrors, MaskMustBroadcastAndBeBoolOrTheScoresDtype) {
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, v, {.mask = ones({4, 5}, int32)}), TypeError,
                   "the mask must be bool", "float32", "got int32");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, v, {.mask = ones({4, 5}, float64)}), TypeError, "got float64");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, v, {.mask = ones({2, 3, 4, 4}, bool_)}), InvalidArgumentError,
                   "broadcast to (batch, heads, Tq, Tk) = (2, 3, 4, 5)", "(2, 3, 4, 4)");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, v, {.mask = ones({1, 2, 3, 4, 5}, bool_)}),
                   InvalidArgumentError, "rank 5");
}

TEST(AttentionErrors, OptionsAreChecked) {
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, v, {.dropout = 1.0}), InvalidArgumentError,
                   "dropout must be in [0, 1)", "got 1");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, v, {.dropout = -0.1}), InvalidArgumentError, "got -0.1");
  EXPECT_THROW_MSG(scaled_dot_product_attention(q, k, v, {.scale = std::numeric_limits<double>::infinity()}),
                   InvalidArgumentError, "scale must be a finite number");
  EXPECT_THROW_MSG(scaled_dot_product_attention(Tensor(), k, v), ValueError, "q is an empty tg::Tensor");
  // Inputs that do not match the attributes (a hand-built node, or a file).
  EXPECT_THROW_MSG(detail::apply_op(detail::OpId::ScaledDotProductAttention, {q, k, v},
                                    detail::AttentionAttrs{.has_mask = true}),
                   InvalidArgumentError, "expected 4 inputs (q, k, v, the mask)", "got 3");
  EXPECT_THROW_MSG(detail::apply_op(detail::OpId::ScaledDotProductAttention, {q, k, v, constant({1, 2})},
                                    detail::AttentionAttrs{.dropout = 0.5}),
                   TypeError, "seed pair must be int64", "int32");
}

TEST(AttentionErrors, NoneDimsAreCheckedWhenTheGraphRuns) {
  const TensorSpec any({None, None, None, None}, float32);
  auto f = function([](const Tensor& a, const Tensor& b, const Tensor& c) { return scaled_dot_product_attention(a, b, c); },
                    {.input_signature = std::vector<TensorSpec>{any, any, any}});
  EXPECT_TRUE(testing::tensors_near(f(q, k, v), scaled_dot_product_attention(q, k, v), 0.0));
  EXPECT_THROW_MSG(f(q, ones({2, 3, 5, 4}), v), InvalidArgumentError, "[scaled_dot_product_attention]",
                   "q has 8 but k has 4");
  auto masked = function([](const Tensor& a, const Tensor& m) { return scaled_dot_product_attention(a, a, a, {.mask = m}); },
                         {.input_signature = std::vector<TensorSpec>{any, TensorSpec({None, None}, bool_)}});
  EXPECT_THROW_MSG(masked(q, ones({3, 4}, bool_)), InvalidArgumentError, "(2, 3, 4, 4)", "(3, 4)");
}

TEST(AttentionErrors, SecondOrderGradientsAreRefused) {
  const Tensor x = ones({1, 1, 2, 2}, float64);
  GradientTape outer;
  outer.watch(x);
  GradientTape inner;
  inner.watch(x);
  const Tensor y = scaled_dot_product_attention(x, x, x);
  const Tensor g = inner.gradient(reduce_sum(y * y), {x})[0];
  EXPECT_THROW_MSG(outer.gradient(reduce_sum(g), {x}), InvalidArgumentError, "[scaled_dot_product_attention_grad]",
                   "second-order gradients", "tg::matmul");
}

TEST(AttentionErrors, AFloatMaskIsNotDifferentiated) {
  const Tensor m = zeros({4, 5});
  GradientTape tape;
  tape.watch(m);
  const Tensor y = scaled_dot_product_attention(q, k, v, {.mask = m});
  EXPECT_THROW_MSG(tape.gradient(reduce_sum(y), {m}), InvalidArgumentError, "float mask", "tg::stop_gradient");
}

}  // namespace
}  // namespace tg
