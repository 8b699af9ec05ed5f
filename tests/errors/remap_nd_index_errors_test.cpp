// tile, pad, split / unstack, reverse, gather_nd, scatter_nd, tensor_scatter_nd_add, where and
// boolean_mask: every refusal throws a typed error naming what was expected, what was received
// and what to do, eagerly and (for the static ones) while tracing.
#include "ops/op.h"
#include "ops/remap.h"
#include "support/test_util.h"

namespace tg {
namespace {

TEST(TileErrors, MultiplesMustFitTheRankAndBeNonNegative) {
  EXPECT_THROW_MSG(tile(zeros({2, 3}), {2}), InvalidArgumentError, "[tile]", "multiples [2] has 1 entries",
                   "rank 2", "one multiple per dimension");
  EXPECT_THROW_MSG(tile(zeros({2}), {-1}), InvalidArgumentError, "[tile]", "multiples[0] = -1 is negative",
                   ">= 0");
  EXPECT_THROW_MSG(tile(zeros({2}), {int64_t{1} << 62}), InvalidArgumentError, "[tile]", "more elements than int64");
  auto f = function([](const Tensor& x) { return tile(x, {1, 2, 3}); });
  EXPECT_THROW_MSG(f.get_concrete_function(TensorSpec({None, None}, float32)), InvalidArgumentError, "[tile]",
                   "3 entries", "rank 2");
}

TEST(TileErrors, TheGradientOpChecksTheTiledShape) {
  EXPECT_THROW_MSG(detail::tile_grad(zeros({4, 3}), zeros({2, 2}), {2, 1}), InvalidArgumentError, "[tile_grad]",
                   "the gradient has shape (4, 3)", "gives (4, 2)");
  EXPECT_THROW_MSG(detail::tile_grad(constant({"a"}), constant({"a"}), {1}), InvalidArgumentError, "[tile_grad]",
                   "gradient");
}

TEST(PadErrors, PaddingsMustFitTheRankAndBeNonNegative) {
  EXPECT_THROW_MSG(pad(zeros({2, 3}), {{1, 1}}), InvalidArgumentError, "[pad]", "1 (before, after) pairs",
                   "rank 2", "one pair per dimension");
  EXPECT_THROW_MSG(pad(zeros({2}), {{-1, 0}}), InvalidArgumentError, "[pad]", "are (-1, 0)", ">= 0");
  EXPECT_THROW_MSG(pad(zeros({2}), {{0, 1}}, static_cast<PadMode>(5)), InvalidArgumentError, "[pad]",
                   "mode 5 is not a tg::PadMode");
}

TEST(PadErrors, MirrorLimitsAreTensorFlowsAndTyped) {
  // Reflect: at most dim - 1 on a side (the edge is not repeated); symmetric: at most dim.
  EXPECT_THROW_MSG(pad(zeros({2, 3}), {{0, 0}, {3, 0}}, PadMode::Reflect), InvalidArgumentError, "[pad]",
                   "REFLECT padding of dimension 1 by (3, 0) needs at most 2", "size 3", "leaves out the edge",
                   "PadMode::Constant");
  EXPECT_THROW_MSG(pad(zeros({2, 3}), {{0, 3}, {0, 0}}, PadMode::Symmetric), InvalidArgumentError, "[pad]",
                   "SYMMETRIC padding of dimension 0 by (0, 3) needs at most 2");
  EXPECT_THROW_MSG(pad(zeros({0}), {{0, 0}}, PadMode::Reflect), InvalidArgumentError, "[pad]", "needs at most -1");
  EXPECT_NO_THROW(pad(zeros({2, 3}), {{2, 2}, {3, 3}}, PadMode::Symmetric));
}

TEST(PadErrors, ConstantValuesMustFitTheDtype) {
  EXPECT_THROW_MSG(pad(constant({1, 2}), {{1, 0}}, PadMode::Constant, 0.5), InvalidArgumentError, "[pad]",
                   "constant_values 0.5 cannot be represented exactly as int32");
  EXPECT_THROW_MSG(pad(constant({1, 2}), {{1, 0}}, PadMode::Constant, 3e9), InvalidArgumentError, "[pad]",
                   "int32");
  EXPECT_THROW_MSG(pad(constant({"a"}), {{1, 0}}, PadMode::Constant, 1.0), InvalidArgumentError, "[pad]",
                   "pads with \"\" only");
  EXPECT_THROW_MSG(detail::mirror_pad_grad(zeros({3}), zeros({2}), detail::PadAttrs{{2, 0}, 1, 0.0}),
                   InvalidArgumentError, "[mirror_pad_grad]", "needs at most 1");
  EXPECT_THROW_MSG(detail::mirror_pad_grad(zeros({5}), zeros({3}), detail::PadAttrs{{1, 0}, 1, 0.0}),
                   InvalidArgumentError, "[mirror_pad_grad]", "the gradient has shape (5,)", "gives (4,)");
}

TEST(SplitErrors, CountsAndSizesFollowTensorFlow) {
  EXPECT_THROW_MSG(split(zeros({5}), 2), InvalidArgumentError, "[split]", "size 5", "not divisible into 2",
                   "list of piece sizes");
  EXPECT_THROW_MSG(split(zeros({4}), 0), InvalidArgumentError, "[split]", ">= 1, got 0");
  EXPECT_THROW_MSG(split(zeros({4}), std::vector<int64_t>{}), InvalidArgumentError, "[split]", "empty size list");
  EXPECT_THROW_MSG(split(zeros({4}), {-1, -1}), InvalidArgumentError, "[split]", "at most one size may be -1");
  EXPECT_THROW_MSG(split(zeros({4}), {2, -2}), InvalidArgumentError, "[split]", "size 1 is -2", ">= 0, or -1");
  EXPECT_THROW_MSG(split(zeros({4}), {2, 3}), InvalidArgumentError, "[split]", "add up to 5", "size 4");
  EXPECT_THROW_MSG(split(zeros({4}), {2, 3, -1}), InvalidArgumentError, "[split]", "besides the -1, more than");
  EXPECT_THROW_MSG(split(zeros({2, 4}), 2, 2), InvalidArgumentError, "[split]", "axis 2 is out of range");
  EXPECT_THROW_MSG(split(constant(1.f), 1), InvalidArgumentError, "[split]", "cannot split a scalar");
  EXPECT_THROW_MSG(split(zeros({4}), int64_t{1} << 40), InvalidArgumentError, "[split]", "more than 1048576 pieces");
  EXPECT_THROW_MSG(detail::apply_op(detail::OpId::Split, {zeros({4})}, detail::SplitAttrs{2, {2, 2}, 0}),
                   InvalidArgumentError, "[split]", "both a number of pieces (2) and piece sizes [2, 2]");
}

TEST(SplitErrors, UnstackNeedsAKnownDim) {
  auto f = function([](const Tensor& x) { return unstack(x)[0]; });
  EXPECT_THROW_MSG(f.get_concrete_function(TensorSpec({None, 2}, float32)), ValueError, "[unstack]",
                   "dimension 0 of shape (None, 2)", "None while tracing", "input signature");
  EXPECT_THROW_MSG(f.get_concrete_function(TensorSpec(TensorShape::unknown_rank(), float32)), ValueError,
                   "[unstack]", "unknown rank");
  EXPECT_THROW_MSG(unstack(constant(1)), InvalidArgumentError, "[unstack]", "cannot unstack a scalar");
  EXPECT_THROW_MSG(unstack(zeros({2}), 1), InvalidArgumentError, "[unstack]", "axis 1 is out of range");
  EXPECT_THROW_MSG(unstack(Tensor()), ValueError, "[unstack]", "empty tg::Tensor");
}

TEST(ReverseErrors, AxesMustBeInRangeAndDistinct) {
  EXPECT_THROW_MSG(reverse(zeros({2, 3}), {2}), InvalidArgumentError, "[reverse]", "axis 2 is out of range");
  EXPECT_THROW_MSG(reverse(zeros({2, 3}), {1, -1}), InvalidArgumentError, "[reverse]", "name dimension 1 more than once");
}

TEST(GatherNdErrors, IndicesAreCheckedStaticallyAndByValue) {
  const Tensor p = zeros({2, 3});
  EXPECT_THROW_MSG(gather_nd(p, constant({{0.5f}})), InvalidArgumentError, "[gather_nd]", "indices", "int32", "int64");
  EXPECT_THROW_MSG(gather_nd(p, constant(1)), InvalidArgumentError, "[gather_nd]", "rank >= 1", "got a scalar",
                   "expand_dims");
  EXPECT_THROW_MSG(gather_nd(p, constant({{0, 0, 0}})), InvalidArgumentError, "[gather_nd]",
                   "index tuples have 3 entries", "params has rank 2");
  EXPECT_THROW_MSG(gather_nd(p, constant({{0, 3}})), InvalidArgumentError, "[gather_nd]", "indices[0] = [0, 3]",
                   "params of shape (2, 3)", "3 is not in [0, 3) along dimension 1");
  EXPECT_THROW_MSG(gather_nd(p, constant({{{1}}, {{-2}}}, int64)), InvalidArgumentError, "[gather_nd]",
                   "indices[1, 0] = [-2]", "-2 is not in [0, 2)");
}

TEST(ScatterNdErrors, RefusalsNameWhatWasExpected) {
  const Tensor i = constant({{1}, {0}});
  EXPECT_THROW_MSG(scatter_nd(i, constant({1.f, 2.f, 3.f}), constant({4})), InvalidArgumentError, "[scatter_nd]",
                   "updates has shape (3,)", "need updates of shape (2,)");
  EXPECT_THROW_MSG(scatter_nd(i, constant({true, false}), constant({4})), InvalidArgumentError, "[scatter_nd]",
                   "updates");
  EXPECT_THROW_MSG(scatter_nd(constant({{4}}), constant({1.f}), constant({4})), InvalidArgumentError,
                   "[scatter_nd]", "indices[0] = [4]", "the output of shape (4,)");
  EXPECT_THROW_MSG(scatter_nd(i, constant({1.f, 2.f}), constant({{4}})), InvalidArgumentError, "[scatter_nd]",
                   "1-D tensor");
  EXPECT_THROW_MSG(scatter_nd(i, constant({1.f, 2.f}), constant({-4})), InvalidArgumentError, "[scatter_nd]",
                   "negative");
  EXPECT_THROW_MSG(scatter_nd(i, constant({1.f, 2.f}), TensorShape({None})), InvalidArgumentError, "[scatter_nd]",
                   "not fully defined");
  EXPECT_THROW_MSG(scatter_nd(constant({{0}}), constant(1.f), constant(std::vector<int32_t>{}, TensorShape{0}, int32)),
                   InvalidArgumentError, "[scatter_nd]", "rank >= 1");
  EXPECT_THROW_MSG(tensor_scatter_nd_add(zeros({3}), i, constant({1, 2})), InvalidArgumentError,
                   "[tensor_scatter_nd_add]", "float32", "int32");
  EXPECT_THROW_MSG(tensor_scatter_nd_add(zeros({3}), constant({{0, 0}}), zeros({1})), InvalidArgumentError,
                   "[tensor_scatter_nd_add]", "index tuples have 2 entries", "rank 1");
}

TEST(WhereErrors, StringsHaveNoTruth) {
  EXPECT_THROW_MSG(where(constant({"a"})), InvalidArgumentError, "[where]", "condition", "bool");
}

TEST(BooleanMaskErrors, TheMaskMustBeBoolAndFitTheMaskedDims) {
  const Tensor x = zeros({2, 3});
  EXPECT_THROW_MSG(boolean_mask(x, constant({1, 0})), InvalidArgumentError, "[boolean_mask]", "mask", "bool");
  EXPECT_THROW_MSG(boolean_mask(x, constant(true)), InvalidArgumentError, "[boolean_mask]", "rank >= 1",
                   "got a scalar");
  EXPECT_THROW_MSG(boolean_mask(x, constant({true, false, true})), InvalidArgumentError, "[boolean_mask]",
                   "mask shape (3,) does not match dims 0..0", "(2, 3)");
  EXPECT_THROW_MSG(boolean_mask(x, constant({true, false}), 2), InvalidArgumentError, "[boolean_mask]",
                   "at axis 2 does not fit a tensor of rank 2", "0 <= axis <= 1");
  EXPECT_THROW_MSG(boolean_mask(x, zeros({2, 3, 1}, bool_)), InvalidArgumentError, "[boolean_mask]",
                   "rank 3", "does not fit");
  auto f = function([](const Tensor& t, const Tensor& m) { return boolean_mask(t, m, 1); });
  EXPECT_THROW_MSG(f.get_concrete_function(TensorSpec({None, 4}, float32), TensorSpec({3}, bool_)),
                   InvalidArgumentError, "[boolean_mask]", "mask shape (3,) does not match dims 1..1");
}

// The copy kernels' index maps have an entry per index of each dim, not per element: an empty
// tensor's other dims may be huge, and building the maps for one (pad of a (0, 3) tensor by 2^40:
// 8 TiB) was the only large allocation. Nothing is copied then, so nothing is built; a result
// that does hold 2^41 elements is refused by its own allocation, before anything else.
TEST(PadErrors, EmptyTensorsWithHugeDimsBuildNoIndexMaps) {
  const int64_t big = int64_t{1} << 40;
  EXPECT_EQ(pad(zeros({0, 3}), {{0, 0}, {big, big}}).shape(), (TensorShape{0, 2 * big + 3}));
  EXPECT_EQ(pad(zeros({0, big}), {{0, 0}, {1, 1}}, PadMode::Symmetric).shape(), (TensorShape{0, big + 2}));
  EXPECT_EQ(tile(zeros({0, 3}), {1, big}).shape(), (TensorShape{0, 3 * big}));
  EXPECT_EQ(reverse(zeros({0, big}), {1}).shape(), (TensorShape{0, big}));
  auto f = function([](const Tensor& x) { return pad(x, {{0, 0}, {int64_t{1} << 40, 0}}); },
                    {.input_signature = std::vector<TensorSpec>{TensorSpec({None, 3}, float32)}});
  EXPECT_EQ(f(zeros({0, 3})).shape(), (TensorShape{0, big + 3}));
  EXPECT_THROW_MSG(pad(zeros({0}), {{big, big}}), ResourceExhaustedError, "[allocate]", "2199023255552 float32");
  // The adjoints: an empty gradient adds nothing (zeros), an empty result needs nothing.
  const Tensor x = constant({{1.0f, 2.0f, 3.0f}, {4.0f, 5.0f, 6.0f}});
  EXPECT_TENSOR_EQ(detail::tile_grad(zeros({0, 3 * big}), x, {0, big}), zeros({2, 3}));
  EXPECT_EQ(detail::mirror_pad_grad(zeros({0, big + 2}), zeros({0, big}), detail::PadAttrs{{0, 0, 1, 1}, 2, 0.0}).shape(),
            (TensorShape{0, big}));
  GradientTape tape;
  const Tensor v = constant({{1.0f, 2.0f, 3.0f}, {4.0f, 5.0f, 6.0f}});
  tape.watch(v);
  const Tensor y = reduce_sum(tile(v, {0, big}));
  EXPECT_TENSOR_EQ(tape.gradient(y, v), zeros({2, 3}));
}

}  // namespace
}  // namespace tg
