// The collective ops in one process (no communicator installed): each is the identity, on every
// execution path of the op-case harness (eager, traced, optimised, None dims, unknown rank, saved
// and loaded), and their shape and dtype errors. tests/dist runs them across two ranks.
#include "ops/collective.h"
#include "ops/op.h"
#include "support/op_case.h"
#include "support/graph_util.h"
#include "support/test_util.h"

namespace tg {
namespace {

using detail::CollectiveAttrs;
using detail::OpId;
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

Fn one(OpId op, int64_t reduction = 0, int64_t root = 0) {
  return [=](const std::vector<Tensor>& in) { return detail::apply_op1(op, {in[0]}, CollectiveAttrs{reduction, root}); };
}

TG_OP_CASES(collective) {
  const Tensor x = constant({{1.5f, -2.0f, 3.25f}, {0.0f, 4.0f, -1.0f}});
  const Tensor d = cast(constant({{1.5f, -2.0f}, {0.5f, 8.0f}}), float64);
  const Tensor i = constant({3, -7, 11});
  return {
      {"all_reduce", "sum of one float32 tensor", one(OpId::AllReduce, 0), {x}, x},
      {"all_reduce", "mean of float64", one(OpId::AllReduce, 1), {d}, d},
      {"all_reduce", "max of int32", one(OpId::AllReduce, 2), {i}, i},
      {"all_reduce", "min of int32", one(OpId::AllReduce, 3), {i}, i},
      {"all_reduce", "a bucket of two tensors",
       [](const std::vector<Tensor>& in) { return detail::apply_op(OpId::AllReduce, in, CollectiveAttrs{})[1]; },
       {x, x * 2.0f}, x * 2.0f},
      {"collective_broadcast", "from rank 0", one(OpId::CollectiveBroadcast), {x}, x},
      {"collective_broadcast", "int32", one(OpId::CollectiveBroadcast), {i}, i},
      {"all_gather", "rows of float32", one(OpId::AllGather), {x}, x},
      {"reduce_to_root", "to rank 0", one(OpId::ReduceToRoot), {d}, d},
      {"all_gather_grad", "this rank's rows",
       [](const std::vector<Tensor>& in) {
         return detail::apply_op1(OpId::AllGatherGrad, {in[0], in[1]}, CollectiveAttrs{});
       },
       {d, d * 3.0}, d},
  };
}

TEST(Collectives, ShapeAndDtypeErrorsNameTheOpAndTheFix) {
  const Tensor x = constant({1.0f, 2.0f});
  EXPECT_THROW_MSG(detail::apply_op(OpId::AllReduce, {}, CollectiveAttrs{}), InvalidArgumentError, "[all_reduce]",
                   "at least one tensor");
  EXPECT_THROW_MSG(detail::apply_op(OpId::AllReduce, {x, cast(x, float64)}, CollectiveAttrs{}), TypeError,
                   "[all_reduce]", "tensor 1 is float64", "each dtype in its own");
  EXPECT_THROW_MSG(detail::apply_op1(OpId::AllReduce, {constant({1, 2})}, CollectiveAttrs{1, 0}), TypeError,
                   "a mean needs floating-point", "int32");
  EXPECT_THROW_MSG(detail::apply_op1(OpId::AllReduce, {x}, CollectiveAttrs{7, 0}), InvalidArgumentError,
                   "reduction 7 is not one of");
  EXPECT_THROW_MSG(detail::apply_op1(OpId::AllReduce, {constant({true})}, CollectiveAttrs{}), InvalidArgumentError,
                   "[all_reduce]");
  EXPECT_THROW_MSG(detail::apply_op1(OpId::CollectiveBroadcast, {x}, CollectiveAttrs{0, 1}), InvalidArgumentError,
                   "root 1 is not a rank of this job", "ranks 0 to 0");
  EXPECT_THROW_MSG(detail::apply_op1(OpId::CollectiveBroadcast, {x}, CollectiveAttrs{0, -1}), InvalidArgumentError,
                   "root must be a rank");
  EXPECT_THROW_MSG(detail::apply_op1(OpId::AllGather, {constant(2.0f)}, CollectiveAttrs{}), InvalidArgumentError,
                   "[all_gather]", "got a scalar");
  EXPECT_THROW_MSG(detail::apply_op1(OpId::AllGatherGrad, {constant({{1.0f, 2.0f}}), constant({{1.0f}, {2.0f}})},
                                     CollectiveAttrs{}),
                   InvalidArgumentError, "[all_gather_grad]", "does not hold rows");
}

TEST(Collectives, AMaxAcrossRanksHasNoGradient) {
  const Tensor x = constant({1.0f, 2.0f});
  GradientTape tape;
  tape.watch(x);
  const Tensor y = detail::apply_op1(OpId::AllReduce, {x}, CollectiveAttrs{2, 0});
  EXPECT_THROW_MSG(tape.gradient(reduce_sum(y), x), InvalidArgumentError, "max across ranks has no gradient",
                   "tg::stop_gradient");
}

TEST(Collectives, TheOptimiserNeverMergesFoldsOrRemovesThem) {
  // Two equal all_reduces of a constant, one of them unused: every rank must still run both,
  // in order, or the ranks' sequences would differ.
  auto f = function([](const Tensor& x) {
    detail::apply_op1(OpId::AllReduce, {constant({1.0f, 2.0f})}, CollectiveAttrs{});
    const Tensor a = detail::apply_op1(OpId::AllReduce, {x}, CollectiveAttrs{});
    const Tensor b = detail::apply_op1(OpId::AllReduce, {x}, CollectiveAttrs{});
    return a + b;
  });
  const ConcreteFunction cf = f.get_concrete_function(TensorSpec({2}, float32));
  EXPECT_EQ(testing::count_op(cf.graph(), "all_reduce"), 3);
  EXPECT_EQ(testing::count_op(cf.optimized_graph(), "all_reduce"), 3);
  EXPECT_TRUE(testing::tensors_near(f(constant({1.0f, 2.0f})), constant({2.0f, 4.0f})));
}

}  // namespace
}  // namespace tg
