// Every validation of the shape and index ops: the error type, the "[op]" prefix, and the facts
// a user needs (what was expected, what was received).
#include <limits>

#include "ops/grad_helpers.h"
#include "ops/op.h"
#include "support/test_util.h"

namespace tg {
namespace {

using detail::OpAttrs;
using detail::OpId;
using detail::ValueType;

std::vector<ValueType> infer(OpId id, std::vector<ValueType> in, const OpAttrs& attrs) {
  return detail::op_def(id).infer(in, attrs);
}

TEST(ShapeErrors, Reshape) {
  Tensor x = reshape(range(6), {2, 3});
  EXPECT_THROW_MSG(reshape(x, {3, -2}), InvalidArgumentError, "[reshape]",
                   "target dimension 1 is -2", "[3, -2]", "-1 (once)");
  EXPECT_THROW_MSG(reshape(x, {-1, -1}), InvalidArgumentError, "[reshape]", "at most one",
                   "[-1, -1]", "dimensions 0 and 1");
  EXPECT_THROW_MSG(reshape(x, {4}), InvalidArgumentError, "[reshape]", "6 elements",
                   "(2, 3)", "shape [4], which has 4 elements", "must match");
  EXPECT_THROW_MSG(reshape(x, {4, -1}), InvalidArgumentError, "[reshape]", "6 elements",
                   "4 elements besides the -1", "not divisible");
  EXPECT_THROW_MSG(reshape(x, {0, -1}), InvalidArgumentError, "[reshape]", "6 elements",
                   "0 elements besides the -1");
  Tensor empty = constant(std::vector<float>{}, {0, 3});
  EXPECT_THROW_MSG(reshape(empty, {0, -1}), InvalidArgumentError, "[reshape]",
                   "cannot infer the -1", "0 elements", "(0, 3)");
  EXPECT_THROW_MSG(reshape(empty, {3, 1}), InvalidArgumentError, "[reshape]", "0 elements",
                   "3 elements");
  EXPECT_THROW_MSG(reshape(x, {int64_t{1} << 40, int64_t{1} << 40}), InvalidArgumentError,
                   "[reshape]", "the target shape", "overflows int64");
  // With None dims, what is knowable is still checked.
  detail::ReshapeAttrs a{{4}};
  EXPECT_THROW_MSG(infer(OpId::Reshape, {{float32, {None, 3}}}, a), InvalidArgumentError,
                   "[reshape]", "a multiple of 3 elements", "(None, 3)", "[4]");
  a.shape = {-1, 0};
  EXPECT_THROW_MSG(infer(OpId::Reshape, {{float32, {None, 0}}}, a), InvalidArgumentError,
                   "[reshape]", "cannot infer the -1");
}

TEST(ShapeErrors, Transpose) {
  Tensor x = constant({{1, 2}, {3, 4}});
  EXPECT_THROW_MSG(transpose(x, {0}), InvalidArgumentError, "[transpose]", "perm [0] has 1",
                   "rank 2", "(2, 2)");
  EXPECT_THROW_MSG(transpose(x, {0, 2}), InvalidArgumentError, "[transpose]",
                   "not a permutation of 0..1", "entry 2 is out of range");
  EXPECT_THROW_MSG(transpose(x, {-1, 0}), InvalidArgumentError, "[transpose]",
                   "entry -1 is out of range");
  EXPECT_THROW_MSG(transpose(x, {0, 0}), InvalidArgumentError, "[transpose]", "[0, 0]",
                   "entry 0 is repeated");
  const detail::TransposeAttrs a{{1, 1}};
  EXPECT_THROW_MSG(infer(OpId::Transpose, {{float32, TensorShape::unknown_rank()}}, a),
                   InvalidArgumentError, "[transpose]", "entry 1 is repeated");
}

TEST(ShapeErrors, ExpandDims) {
  Tensor x = constant({1, 2});
  EXPECT_THROW_MSG(expand_dims(x, 2), InvalidArgumentError, "[expand_dims]", "axis 2",
                   "rank 1", "[-2, 1]");
  EXPECT_THROW_MSG(expand_dims(x, -3), InvalidArgumentError, "[expand_dims]", "axis -3",
                   "[-2, 1]");
  EXPECT_THROW_MSG(expand_dims(constant(1), 1), InvalidArgumentError, "[expand_dims]", "axis 1",
                   "rank 0", "[-1, 0]");
}

TEST(ShapeErrors, Squeeze) {
  Tensor x = constant({{1, 2}});
  EXPECT_THROW_MSG(squeeze(x, {2}), InvalidArgumentError, "[squeeze]", "axis 2", "rank 2",
                   "[-2, 2)");
  EXPECT_THROW_MSG(squeeze(x, {-3}), InvalidArgumentError, "[squeeze]", "axis -3");
  EXPECT_THROW_MSG(squeeze(x, {1}), InvalidArgumentError, "[squeeze]", "axis 1",
                   "dimension 1 has size 2", "(1, 2)", "expected size 1");
  EXPECT_THROW_MSG(squeeze(x, {-1}), InvalidArgumentError, "[squeeze]", "dimension 1 has size 2");
}

TEST(ShapeErrors, Concat) {
  Tensor a = constant({{1, 2}});
  EXPECT_THROW_MSG(concat({}, 0), InvalidArgumentError, "[concat]", "at least one tensor");
  EXPECT_THROW_MSG(concat({a, constant({{1.f, 2.f}})}, 0), InvalidArgumentError, "[concat]",
                   "int32", "float32");
  EXPECT_THROW_MSG(concat({a, constant({1, 2})}, 0), InvalidArgumentError, "[concat]",
                   "one rank", "(1, 2)", "(2,)");
  EXPECT_THROW_MSG(concat({a, constant({{1, 2, 3}})}, 0), InvalidArgumentError, "[concat]",
                   "dimension 1 differs", "(1, 2)", "(1, 3)", "input 1",
                   "except the concat axis");
  EXPECT_THROW_MSG(concat({constant(1), constant(2)}, 0), InvalidArgumentError, "[concat]",
                   "cannot concatenate scalars", "tg::stack");
  EXPECT_THROW_MSG(concat({a, a}, 2), InvalidArgumentError, "[concat]", "axis 2", "rank 2");
  EXPECT_THROW_MSG(concat({a, a}, -3), InvalidArgumentError, "[concat]", "axis -3");
  // A traced concat that saw None dims re-checks the concrete shapes in its kernel.
  std::vector<Tensor> out(1);
  const OpAttrs attrs = detail::AxisAttrs{0};
  EXPECT_THROW_MSG(detail::op_def(OpId::Concat).kernel({a, constant({{1, 2, 3}})}, attrs, out),
                   InvalidArgumentError, "[concat]", "dimension 1 differs");
}

TEST(ShapeErrors, Stack) {
  Tensor a = constant({1, 2});
  EXPECT_THROW_MSG(stack({}), InvalidArgumentError, "[stack]", "at least one tensor");
  EXPECT_THROW_MSG(stack({a, constant({true, false})}), InvalidArgumentError, "[stack]", "int32",
                   "bool");
  EXPECT_THROW_MSG(stack({a, constant({1, 2, 3})}), InvalidArgumentError, "[stack]",
                   "dimension 0 differs", "(2,)", "(3,)", "one shape");
  EXPECT_THROW_MSG(stack({a, constant({{1, 2}})}), InvalidArgumentError, "[stack]", "one rank",
                   "(2,)", "(1, 2)");
  EXPECT_THROW_MSG(stack({a, a}, 2), InvalidArgumentError, "[stack]", "axis 2", "[-2, 1]");
  EXPECT_THROW_MSG(stack({a, a}, -3), InvalidArgumentError, "[stack]", "axis -3", "[-2, 1]");
}

TEST(ShapeErrors, Index) {
  Tensor x = constant({{1, 2}, {3, 4}, {5, 6}});
  EXPECT_THROW_MSG(x[3], InvalidArgumentError, "[index]", "index 3", "dimension 0 of size 3",
                   "[-3, 3)");
  EXPECT_THROW_MSG(x[-4], InvalidArgumentError, "[index]", "index -4", "size 3");
  EXPECT_THROW_MSG(x[0][2], InvalidArgumentError, "[index]", "index 2", "size 2");
  EXPECT_THROW_MSG(constant(1)[0], InvalidArgumentError, "[index]", "cannot index a scalar");
  EXPECT_THROW_MSG(x[1][0][0], InvalidArgumentError, "[index]", "cannot index a scalar");
  Tensor empty = constant(std::vector<int32_t>{}, {0, 2});
  EXPECT_THROW_MSG(empty[0], InvalidArgumentError, "[index]", "index 0", "size 0");
  // With dim 0 unknown while tracing, the bound is checked by the kernel.
  const OpAttrs attrs = detail::IndexAttrs{5};
  EXPECT_NO_THROW(infer(OpId::Index, {{int32, {None, 2}}}, attrs));
  std::vector<Tensor> out(1);
  EXPECT_THROW_MSG(detail::op_def(OpId::Index).kernel({x}, attrs, out), InvalidArgumentError,
                   "[index]", "index 5", "size 3");
}

TEST(ShapeErrors, ShapeOfHugeDimension) {
  // A 0-element tensor may have a dim that int32 cannot hold.
  Tensor x = constant(std::vector<float>{}, {0, int64_t{3} << 30});
  EXPECT_THROW_MSG(shape(x), InvalidArgumentError, "[shape]", "dimension 3221225472",
                   "int32");
  EXPECT_EQ(size(x).item<int32_t>(), 0);
}

TEST(IndexErrors, Slice) {
  Tensor x = reshape(range(12), {3, 4});
  EXPECT_THROW_MSG(slice(x, {0, 0}, {1}), InvalidArgumentError, "[slice]", "begin [0, 0] has 2",
                   "size [1] has 1");
  EXPECT_THROW_MSG(slice(x, {0}, {1}), InvalidArgumentError, "[slice]", "1 entries",
                   "rank 2", "(3, 4)");
  EXPECT_THROW_MSG(slice(x, {0, -1}, {1, 1}), InvalidArgumentError, "[slice]",
                   "begin[1] = -1 is negative");
  EXPECT_THROW_MSG(slice(x, {0, 0}, {-2, 1}), InvalidArgumentError, "[slice]",
                   "size[0] = -2");
  EXPECT_THROW_MSG(slice(x, {0, 2}, {1, 3}), InvalidArgumentError, "[slice]",
                   "dimension 1 has size 4", "begin 2 + size 3 = 5", "<= 4");
  EXPECT_THROW_MSG(slice(x, {4, 0}, {-1, -1}), InvalidArgumentError, "[slice]",
                   "dimension 0 has size 3", "begin 4 to the end");
  EXPECT_THROW_MSG(slice(x, {0, 1}, {1, int64_t{1} << 62}), InvalidArgumentError, "[slice]",
                   "dimension 1 has size 4");
  const detail::SliceAttrs a{{-1}, {1}};
  EXPECT_THROW_MSG(infer(OpId::Slice, {{float32, {None}}}, a), InvalidArgumentError, "[slice]",
                   "begin[0] = -1");
}

TEST(IndexErrors, SliceBoundsNearInt64MaxDoNotOverflow) {
  // begin + size past INT64_MAX was signed overflow (UB) in the message; UBSan builds catch it.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  Tensor x = reshape(range(12), {3, 4});
  EXPECT_THROW_MSG(slice(x, {kMax, 0}, {1, 1}), InvalidArgumentError, "[slice]",
                   "dimension 0 has size 3", "begin 9223372036854775807 + size 1 = more than int64");
  EXPECT_THROW_MSG(slice(x, {1, 0}, {kMax, 1}), InvalidArgumentError, "[slice]",
                   "begin 1 + size 9223372036854775807");
  EXPECT_THROW_MSG(slice(x, {kMax, 0}, {-1, 1}), InvalidArgumentError, "[slice]", "to the end");
  // With a None dim the bound is checked when the graph runs.
  auto f = function([](const Tensor& v) { return slice(v, {kMax}, {2}); },
                    {.input_signature = std::vector<TensorSpec>{TensorSpec({None}, int32)}});
  EXPECT_THROW_MSG(f(constant({1, 2, 3})), InvalidArgumentError, "[slice]", "more than int64");
  EXPECT_THROW_MSG(detail::slice_like(zeros({3}), zeros({2}), {kMax}), InvalidArgumentError,
                   "[slice_like]", "does not fit");
}

TEST(IndexErrors, Gather) {
  Tensor p = constant({{1, 2}, {3, 4}, {5, 6}});
  EXPECT_THROW_MSG(gather(p, constant({0.f})), InvalidArgumentError, "[gather]",
                   "indices of dtype int32, int64", "float32");
  EXPECT_THROW_MSG(gather(constant(1), constant(0)), InvalidArgumentError, "[gather]",
                   "rank >= 1", "scalar");
  EXPECT_THROW_MSG(gather(p, constant({0}), 2), InvalidArgumentError, "[gather]", "axis 2",
                   "rank 2");
  EXPECT_THROW_MSG(gather(p, constant({0, 3})), InvalidArgumentError, "[gather]",
                   "indices[1] = 3 is not in [0, 3)", "axis 0", "(3, 2)");
  EXPECT_THROW_MSG(gather(p, constant({-1}, int64)), InvalidArgumentError, "[gather]",
                   "indices[0] = -1 is not in [0, 3)");
  EXPECT_THROW_MSG(gather(p, constant({{0, 1}, {2, 0}}), 1), InvalidArgumentError, "[gather]",
                   "indices[1, 0] = 2 is not in [0, 2)", "axis 1");
  EXPECT_THROW_MSG(gather(p, constant(7)), InvalidArgumentError, "[gather]",
                   "indices = 7 is not in [0, 3)");
  EXPECT_THROW_MSG(gather(constant(std::vector<float>{}, {0}), constant({0})),
                   InvalidArgumentError, "[gather]", "is not in [0, 0)");
}

TEST(IndexErrors, OneHot) {
  Tensor i = constant({0, 1});
  EXPECT_THROW_MSG(one_hot(constant({0.f}), 2), InvalidArgumentError, "[one_hot]",
                   "indices of dtype int32, int64", "float32");
  EXPECT_THROW_MSG(one_hot(i, -1), InvalidArgumentError, "[one_hot]", "depth must be >= 0",
                   "got -1");
  EXPECT_THROW_MSG(one_hot(i, 2, 1, 0, -1, string_), InvalidArgumentError, "[one_hot]",
                   "dtype string is not supported", "numeric dtype or bool");
  EXPECT_THROW_MSG(one_hot(i, 2, 1, 0, -2), InvalidArgumentError, "[one_hot]", "axis -2",
                   "rank 1", "[0, 1]");
  EXPECT_THROW_MSG(one_hot(i, 2, 1, 0, 2), InvalidArgumentError, "[one_hot]", "axis 2",
                   "[0, 1]");
  EXPECT_THROW_MSG(one_hot(i, 2, 1.5, 0, -1, int32), InvalidArgumentError, "[one_hot]",
                   "on_value 1.5", "int32");
  EXPECT_THROW_MSG(one_hot(i, 2, 1, 3e9, -1, int32), InvalidArgumentError, "[one_hot]",
                   "off_value 3e+09", "int32");
  EXPECT_THROW_MSG(one_hot(i, int64_t{1} << 62, 1, 0, -1, float32), InvalidArgumentError,
                   "[one_hot]", "more elements than int64");
}

TEST(ShapeErrors, ShapesAtRunTime) {
  EXPECT_THROW_MSG(zeros(constant({2.f, 3.f})), TypeError, "[fill]", "int32 or int64", "float32");
  EXPECT_THROW_MSG(zeros(constant({{2, 3}})), InvalidArgumentError, "[fill]", "1-D tensor", "(1, 2)");
  EXPECT_THROW_MSG(zeros(constant({2, -3})), InvalidArgumentError, "[fill]", "[2, -3]", "negative");
  EXPECT_THROW_MSG(fill(constant({2}), constant({1, 2})), InvalidArgumentError, "[fill]", "scalar");
  EXPECT_THROW_MSG(zeros(Tensor()), ValueError, "[fill]", "empty tg::Tensor");
  EXPECT_THROW_MSG(ones(constant({2}), string_), TypeError, "[ones]", "no 'one'");
  EXPECT_THROW_MSG(broadcast_to(constant({1, 2, 3}), constant({2, 2})), InvalidArgumentError,
                   "[broadcast_to]", "cannot broadcast shape (3,) to (2, 2)");
  EXPECT_THROW_MSG(broadcast_to(constant({{1, 2}}), constant({2})), InvalidArgumentError,
                   "[broadcast_to]", "more dims than the target");
  EXPECT_THROW_MSG(broadcast_to(constant(1), constant({1, 1}, float64)), TypeError, "[broadcast_to]",
                   "int32 or int64");
  // known only at run time: the kernel checks what the shape rule could not
  auto f = function([](const Tensor& x, const Tensor& s) { return broadcast_to(x, s); },
                    {.input_signature = std::vector<TensorSpec>{TensorSpec({None}, int32), TensorSpec({None}, int32)}});
  EXPECT_THROW_MSG(f(constant({1, 2, 3}), constant({2, 2})), InvalidArgumentError, "[broadcast_to]",
                   "cannot broadcast shape (3,) to (2, 2)");
  EXPECT_THROW_MSG(f(constant({1}), constant({2, -1})), InvalidArgumentError, "[broadcast_to]", "negative");
  auto g = function([](const Tensor& s) { return zeros(s); },
                    {.input_signature = std::vector<TensorSpec>{TensorSpec(TensorShape::unknown_rank(), int32)}});
  EXPECT_THROW_MSG(g(constant({{1}})), InvalidArgumentError, "[fill]", "1-D tensor");
  EXPECT_TENSOR_EQ(g(constant({1})), constant({0.f}));
}

// A shape tensor gives the result one dim per element, so its length is bounded by the rank limit
// (TensorFlow's 254) before anything is allocated per dim: a traced spec of (2^40,) once made a
// vector of 2^40 None dims (8 TiB).
TEST(ShapeErrors, AShapeTensorsLengthIsBoundedByTheRankLimit) {
  const TensorSpec huge(TensorShape{int64_t{1} << 40}, int32);
  auto refused = [&](auto body, const char* op) {
    auto f = function(body, {.input_signature = std::vector<TensorSpec>{huge}});
    EXPECT_THROW_MSG(f.get_concrete_function(huge), InvalidArgumentError, op, "1099511627776 elements",
                     "at most 254 dimensions");
  };
  refused([](const Tensor& s) { return fill(s, 1.0f); }, "[fill]");
  refused([](const Tensor& s) { return zeros(s); }, "[fill]");
  refused([](const Tensor& s) { return broadcast_to(constant(1.0f), s); }, "[broadcast_to]");
  refused([](const Tensor& s) { return random_uniform(s, 0.0, 1.0, float32, uint64_t{7}); }, "[random_uniform]");
  refused([](const Tensor& s) { return scatter_nd(constant({{0}}), constant({1.0f}), s); }, "[scatter_nd]");
  // Eagerly the same limit: 255 sizes of 1 would be a valid element count.
  const Tensor ones255 = constant(std::vector<int32_t>(255, 1), {255});
  EXPECT_THROW_MSG(zeros(ones255), InvalidArgumentError, "[fill]", "255 elements", "at most 254");
  EXPECT_THROW_MSG(random_uniform(ones255), InvalidArgumentError, "[random_uniform]", "at most 254");
  // 254 is allowed, traced (None dims) and eagerly.
  const Tensor ones254 = constant(std::vector<int32_t>(254, 1), {254});
  EXPECT_EQ(zeros(ones254).shape().rank(), 254);
  auto g = function([](const Tensor& s) { return zeros(s); },
                    {.input_signature = std::vector<TensorSpec>{TensorSpec({254}, int32)}});
  EXPECT_EQ(g(ones254).shape().rank(), 254);
}

}  // namespace
}  // namespace tg
