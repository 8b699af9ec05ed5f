// tg::range over scalar tensors (the "range" op) and tg::sequence_mask.
#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

TG_OP_CASES(sequence) {
  return {
      {"range", "int32 0..5 step 2", [](const std::vector<Tensor>& in) { return range(in[0], in[1], in[2]); },
       {constant(0), constant(5), constant(2)}, constant({0, 2, 4})},
      {"range", "float64 down by 0.5", [](const std::vector<Tensor>& in) { return range(in[0], in[1], in[2]); },
       {constant(1.0), constant(-0.5), constant(-0.5)}, constant({1.0, 0.5, 0.0})},
      {"range", "int64 limit only", [](const std::vector<Tensor>& in) { return range(in[0]); },
       {constant(int64_t{3})}, constant({int64_t{0}, int64_t{1}, int64_t{2}})},
      {"range", "start past limit: empty, as the eager range", [](const std::vector<Tensor>& in) {
         return range(in[0], in[1], in[2]);
       }, {constant(4), constant(1), constant(1)}, zeros({0}, int32)},
  };
}

TEST(Range, TracedOverARunTimeLengthGivesTheEagerElements) {
  std::string traced_shape;
  auto f = function([&](const Tensor& x) {
    const Tensor r = range(shape(x)[0]);
    traced_shape = r.shape().to_string();
    return r;
  }, {.input_signature = std::vector<TensorSpec>{TensorSpec({None}, float32)}});
  EXPECT_TENSOR_EQ(f(ones({4})), constant({0, 1, 2, 3}));
  EXPECT_TENSOR_EQ(f(ones({0})), zeros({0}, int32));
  EXPECT_EQ(traced_shape, "(None,)");
  auto g = function([](const Tensor& a, const Tensor& b, const Tensor& d) { return range(a, b, d); });
  EXPECT_TENSOR_EQ(g(constant(2.0f), constant(3.0f), constant(0.25f)), range(2.0f, 3.0f, 0.25f));
  EXPECT_THROW_MSG(g(constant(0), constant(3), constant(0)), InvalidArgumentError, "[range]", "delta");
}

TEST(Range, TypedErrorsForBadBounds) {
  EXPECT_THROW_MSG(range(constant(0), constant(int64_t{3}), constant(1)), TypeError, "[range]", "limit is int64",
                   "tg::cast");
  EXPECT_THROW_MSG(range(constant({3})), InvalidArgumentError, "[range]", "limit must be a scalar");
  EXPECT_THROW_MSG(range(constant(true)), InvalidArgumentError, "[range]", "got bool");
  EXPECT_THROW_MSG(range(Tensor()), ValueError, "[range]", "empty");
  EXPECT_THROW_MSG(range(constant(int64_t{0}), constant(int64_t{1} << 40), constant(int64_t{1})), InvalidArgumentError,
                   "[range]", "elements");
  // A None-shaped bound that is not a scalar when the graph runs.
  auto f = function([](const Tensor& n) { return range(n); },
                    {.input_signature = std::vector<TensorSpec>{TensorSpec(TensorShape::unknown_rank(), int32)}});
  EXPECT_THROW_MSG(f(constant({2, 3})), InvalidArgumentError, "must be a scalar");
}

TEST(SequenceMask, MatchesTfSequenceMask) {
  // tf.sequence_mask([1, 3, 2], 5)
  EXPECT_TENSOR_EQ(sequence_mask(constant({1, 3, 2}), 5),
                   constant({{true, false, false, false, false},
                             {true, true, true, false, false},
                             {true, true, false, false, false}}));
  // maxlen left out: the longest length; a float dtype gives 1 and 0.
  EXPECT_TENSOR_EQ(sequence_mask(constant({{1, 3}, {2, 0}}), Tensor(), float32),
                   constant({{{1.0f, 0.0f, 0.0f}, {1.0f, 1.0f, 1.0f}}, {{1.0f, 1.0f, 0.0f}, {0.0f, 0.0f, 0.0f}}}));
  // Traced with a None batch and a maxlen tensor.
  auto f = function([](const Tensor& lengths, const Tensor& maxlen) { return sequence_mask(lengths, maxlen); },
                    {.input_signature = std::vector<TensorSpec>{TensorSpec({None}, int64), TensorSpec({}, int32)}});
  EXPECT_TENSOR_EQ(f(constant({int64_t{2}, int64_t{0}}), constant(3)),
                   constant({{true, true, false}, {false, false, false}}));
  EXPECT_THROW_MSG(sequence_mask(constant({1.0f}), 2), TypeError, "[sequence_mask]", "int32 or int64");
  EXPECT_THROW_MSG(sequence_mask(constant({1}), -1), InvalidArgumentError, "maxlen must be >= 0");
}

}  // namespace
}  // namespace tg
