// tg::dist across two ranks (CTest runs this binary under `mpirun -np 2`): the collectives'
// values, their gradients, the data-parallel gradient against the single-process one, and the
// two desync checks (a mismatch at run time, and ranks that traced different collectives).
#include <tracegraph/dist.h>
#include <tracegraph/tracegraph.h>

#include "support/graph_util.h"
#include "support/test_util.h"

namespace tg {
namespace {

class TwoRanks : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(dist::size(), 2) << "run with mpirun -np 2";
  }
};

float r() { return static_cast<float>(dist::rank()); }

TEST_F(TwoRanks, AllReduceSumsMeansAndExtremes) {
  const Tensor x = constant({1.0f + r(), -2.0f * (1.0f + r()), 10.0f * r()});
  EXPECT_TRUE(testing::tensors_near(dist::all_reduce(x), constant({3.0f, -6.0f, 10.0f})));
  EXPECT_TRUE(testing::tensors_near(dist::all_reduce(x, dist::ReduceOp::kMean), constant({1.5f, -3.0f, 5.0f})));
  EXPECT_TRUE(testing::tensors_near(dist::all_reduce(x, dist::ReduceOp::kMax), constant({2.0f, -2.0f, 10.0f})));
  EXPECT_TRUE(testing::tensors_near(dist::all_reduce(x, dist::ReduceOp::kMin), constant({1.0f, -4.0f, 0.0f})));
  const Tensor i = constant({int64_t{1} << 40, int64_t{dist::rank()}});
  EXPECT_TRUE(testing::tensors_near(dist::all_reduce(i), constant({int64_t{2} << 40, int64_t{1}})));
  // A bucket: one collective, each tensor reduced on its own.
  const std::vector<Tensor> both = dist::all_reduce({x, constant({{r()}, {1.0f}})});
  EXPECT_TRUE(testing::tensors_near(both[0], constant({3.0f, -6.0f, 10.0f})));
  EXPECT_TRUE(testing::tensors_near(both[1], constant({{1.0f}, {2.0f}})));
}

TEST_F(TwoRanks, BroadcastAndAllGather) {
  const Tensor x = constant({{r(), r() + 0.5f}});
  EXPECT_TRUE(testing::tensors_near(dist::broadcast(x, 1), constant({{1.0f, 1.5f}})));
  EXPECT_TRUE(testing::tensors_near(dist::broadcast(constant({dist::rank() == 0}), 0), constant({true})));
  // Rank 0 sends one row, rank 1 two.
  const Tensor rows = dist::rank() == 0 ? constant({{1.0f, 2.0f}}) : constant({{3.0f, 4.0f}, {5.0f, 6.0f}});
  EXPECT_TRUE(testing::tensors_near(dist::all_gather(rows), constant({{1.0f, 2.0f}, {3.0f, 4.0f}, {5.0f, 6.0f}})));
  auto gather = function([](const Tensor& t) { return dist::all_gather(t) * 2.0f; });
  EXPECT_TRUE(testing::tensors_near(gather(rows), constant({{2.0f, 4.0f}, {6.0f, 8.0f}, {10.0f, 12.0f}})));
}

TEST_F(TwoRanks, GradientsFlowThroughTheCollectives) {
  // loss_r = sum(w_r * all_reduce(x)) on each rank; the gradient of the job's total loss with
  // respect to rank r's x is the sum over ranks of w: the all_reduce of the incoming gradient.
  const Tensor x = constant({1.0f, 2.0f});
  const Tensor w = constant({1.0f + r(), 3.0f});
  auto grad_of = [&](auto&& collective) {
    GradientTape tape;
    tape.watch(x);
    const Tensor loss = reduce_sum(w * collective(x));
    return tape.gradient(loss, x);
  };
  EXPECT_TRUE(testing::tensors_near(grad_of([](const Tensor& t) { return dist::all_reduce(t); }), constant({3.0f, 6.0f})));
  EXPECT_TRUE(testing::tensors_near(grad_of([](const Tensor& t) { return dist::all_reduce(t, dist::ReduceOp::kMean); }),
                                    constant({1.5f, 3.0f})));
  // broadcast from 0: only the root's x reaches any loss; its gradient sums every rank's w.
  EXPECT_TRUE(testing::tensors_near(grad_of([](const Tensor& t) { return dist::broadcast(t, 0); }),
                                    dist::rank() == 0 ? constant({3.0f, 6.0f}) : constant({0.0f, 0.0f})));
  // all_gather: rank r's x is rows r of every rank's result.
  const Tensor row = constant({{1.0f + r(), 1.0f}});
  const Tensor weights = constant({{1.0f + r(), 2.0f}, {10.0f * (1.0f + r()), 20.0f}});
  GradientTape tape;
  tape.watch(row);
  const Tensor g = tape.gradient(reduce_sum(weights * dist::all_gather(row)), row);
  EXPECT_TRUE(testing::tensors_near(g, dist::rank() == 0 ? constant({{3.0f, 4.0f}}) : constant({{30.0f, 40.0f}})));
}

// The deterministic batch of 8 examples both ranks know; each trains on its half.
std::pair<Tensor, Tensor> full_batch() {
  set_random_seed(11);
  return {random_normal({8, 5}, 0.0, 1.0, float32, 1), random_uniform({8, 3}, 0.0, 1.0, float32, 2)};
}

TEST_F(TwoRanks, AveragedGradientsEqualTheSingleProcessGradientOfTheWholeBatch) {
  auto [x, y] = full_batch();
  nn::Dense layer(5, 3, tanh, /*seed=*/4);
  const std::vector<Variable> vars = layer.trainable_variables();
  dist::broadcast_variables(vars);
  auto loss_of = [&](const Tensor& xs, const Tensor& ys) { return reduce_mean(square(layer(xs) - ys)); };
  std::vector<Tensor> whole;
  {
    GradientTape tape;
    whole = tape.gradient(loss_of(x, y), vars);
  }
  const int64_t half = 4 * dist::rank();
  const Tensor mine_x = slice(x, {half, 0}, {4, 5}), mine_y = slice(y, {half, 0}, {4, 3});
  auto step = function([&](const Tensor& xs, const Tensor& ys) {
    dist::DistributedGradientTape tape;
    return tape.gradient(loss_of(xs, ys), vars);
  });
  const std::vector<Tensor> averaged = step(mine_x, mine_y);
  ASSERT_EQ(averaged.size(), whole.size());
  for (std::size_t i = 0; i < whole.size(); ++i) EXPECT_TRUE(testing::tensors_near(averaged[i], whole[i], 1e-5)) << i;
  // One collective per step for both gradients (one bucket).
  const ConcreteFunction traced = step.get_concrete_function(TensorSpec({4, 5}, float32), TensorSpec({4, 3}, float32));
  EXPECT_EQ(testing::count_op(traced.graph(), "all_reduce"), 1);
}

TEST_F(TwoRanks, CollectivesRunInsideAGraphLoopAndCond) {
  // The loop runs n times on every rank (n is a tensor: a while node), each iteration an
  // all_reduce; the cond's taken branch holds one more.
  auto f = function([](const Tensor& n, const Tensor& x) {
    const Tensor summed = for_range(n, x, [](const Tensor&, const Tensor& s) { return dist::all_reduce(s); });
    return cond(reduce_sum(summed) > 0.0f, [&] { return dist::all_reduce(summed, dist::ReduceOp::kMax); },
                [&] { return summed; });
  }, {.name = "looped"});
  // x = 1 + rank: after one all_reduce 3, after two 6, after three 12; the max keeps 12.
  EXPECT_TRUE(testing::tensors_near(f(constant(3), constant({1.0f + r()})), constant({12.0f})));
  EXPECT_TRUE(testing::tensors_near(f(constant(1), constant({1.0f + r()})), constant({3.0f})));
}

TEST_F(TwoRanks, BroadcastVariablesStartsEveryRankFromTheRootsWeights) {
  Variable v(constant({r(), 2.0f * r()}));
  dist::broadcast_variables({v}, 1);
  EXPECT_TRUE(testing::tensors_near(v.read_value(), constant({1.0f, 2.0f})));
}

TEST_F(TwoRanks, AJobResumesFromRankZerosCheckpoint) {
  // Rank 0 saves; at the restart it restores and hands the weights to every rank.
  const std::string path = ::testing::TempDir() + "/dist_resume.ckpt.tgx";
  Variable trained(constant({{1.5f, -2.0f}}), "w");
  if (dist::rank() == 0) save_variables(path, {trained});
  dist::all_reduce(constant(0.0f));  // the file is written before anyone reads it
  Variable fresh(constant({{r(), r()}}), "w");
  if (dist::rank() == 0) restore_variables(path, {fresh});
  dist::broadcast_variables({fresh});
  EXPECT_TRUE(testing::tensors_near(fresh.read_value(), constant({{1.5f, -2.0f}})));
}

TEST_F(TwoRanks, RanksAtDifferentCollectivesGetAnErrorNotAHang) {
  const Tensor x = dist::rank() == 0 ? constant({1.0f, 2.0f, 3.0f}) : constant({1.0f, 2.0f, 3.0f, 4.0f});
  EXPECT_THROW_MSG(dist::all_reduce(x), CollectiveMismatchError, "rank 0: all_reduce(sum) of float32 (3,)",
                   "(3 elements) run eagerly [eager collective #", "rank 1: all_reduce(sum) of float32 (4,)",
                   "(4 elements) run eagerly");
  try {
    dist::all_reduce(x);
    ADD_FAILURE() << "the second mismatched all_reduce ran";
  } catch (const CollectiveMismatchError& e) {
    EXPECT_EQ(e.code(), "EDESYNC");
  }
  // Nothing moved: the job goes on.
  EXPECT_TRUE(testing::tensors_near(dist::all_reduce(constant(1.0f)), constant(2.0f)));
}

TEST_F(TwoRanks, RanksThatTracedDifferentCollectivesFailOnTheFirstCall) {
  // The classic hang: one rank retraced for another batch size. Both ranks are at the first call
  // of their concrete function, so the desync check compares what each traced.
  auto train_step = function([](const Tensor& x) { return dist::all_reduce(reduce_sum(x, {1}), dist::ReduceOp::kMean); },
                             {.name = "train_step"});
  const Tensor x = dist::rank() == 0 ? ones({4, 3}) : ones({2, 3});
  EXPECT_THROW_MSG(train_step(x), CollectiveMismatchError,
                   "function 'train_step': the ranks traced different collectives",
                   "first difference is traced collective #1", "rank 0: all_reduce(reduction=1, root=0) of float32 (4,)",
                   "rank 1: all_reduce(reduction=1, root=0) of float32 (2,)", "input_signature");
  // Same shapes on both ranks: the check passes and the values are the mean.
  EXPECT_TRUE(testing::tensors_near(train_step(ones({3, 3}) * (1.0f + r())), constant({4.5f, 4.5f, 4.5f})));
}

TEST_F(TwoRanks, ACheckedFunctionAgainstAnotherCollectiveIsAMismatchToo) {
  // Rank 0 runs a function that passed its check already; rank 1 runs it for the first time
  // with a new shape, so only rank 1 checks: both see the other one's description.
  auto f = function([](const Tensor& x) { return dist::all_reduce(x); }, {.name = "f"});
  f(ones({2}));
  EXPECT_THROW_MSG(f(dist::rank() == 0 ? ones({2}) : ones({5})), CollectiveMismatchError,
                   "the ranks reached different collectives", "the check of function 'f' before its first run",
                   "all_reduce(sum) of float32 (2,) (2 elements) in function 'f'");
}

// Equal element counts are not enough: each case below pairs unrelated elements (or returns
// differently shaped results on the two ranks) unless the shapes are compared.
TEST_F(TwoRanks, CollectivesOfOtherShapesWithEqualCountsAreAMismatch) {
  const bool zero = dist::rank() == 0;
  EXPECT_THROW_MSG(dist::all_reduce(zero ? ones({2, 3}) : ones({3, 2})), CollectiveMismatchError,
                   "rank 0: all_reduce(sum) of float32 (2, 3)", "rank 1: all_reduce(sum) of float32 (3, 2)");
  EXPECT_THROW_MSG(dist::broadcast(zero ? ones({4}) : ones({2, 2})), CollectiveMismatchError,
                   "rank 0: collective_broadcast from rank 0 of float32 (4,)", "rank 1: collective_broadcast from rank 0 of float32 (2, 2)");
  EXPECT_THROW_MSG(dist::all_reduce(zero ? std::vector<Tensor>{ones({2}), ones({3})}
                                         : std::vector<Tensor>{ones({3}), ones({2})}),
                   CollectiveMismatchError, "2 float32 tensors [(2,), (3,)]", "2 float32 tensors [(3,), (2,)]");
  EXPECT_THROW_MSG(dist::all_gather(zero ? ones({2, 6}) : ones({2, 3, 2})), CollectiveMismatchError,
                   "all_gather of float32 (None, 6)", "all_gather of float32 (None, 3, 2)");
  // The same through a traced function whose signature leaves every dim None.
  auto reduce = function([](const Tensor& t) { return dist::all_reduce(t); },
                         {.name = "reduce", .input_signature = std::vector<TensorSpec>{TensorSpec({None, None}, float32)}});
  EXPECT_THROW_MSG(reduce(zero ? ones({2, 3}) : ones({3, 2})), CollectiveMismatchError,
                   "all_reduce(sum) of float32 (2, 3) (6 elements) in function 'reduce'",
                   "all_reduce(sum) of float32 (3, 2) (6 elements) in function 'reduce'");
  auto gather = function([](const Tensor& t) { return dist::all_gather(t); },
                         {.name = "gather", .input_signature = std::vector<TensorSpec>{TensorSpec({None, None}, float32)}});
  EXPECT_THROW_MSG(gather(zero ? ones({2, 6}) : ones({3, 4})), CollectiveMismatchError, "(None, 6)", "(None, 4)");
  // Nothing moved: the job goes on, and equal shapes still work.
  EXPECT_TRUE(testing::tensors_near(reduce(ones({2, 3})), fill({2, 3}, 2.0f)));
}

// A rank whose traced step raises before its all_reduce, and whose loop goes on to the next
// batch, is a call ahead of the other rank: the next collective fails on both ranks instead of
// averaging the gradients of two different steps.
TEST_F(TwoRanks, ARankThatSkipsAStepsCollectiveFailsAtTheNextOne) {
  auto step = function([](const Tensor& x, const Tensor& bad) {
    // The check raises on rank 1's second call only, before the all_reduce.
    const Tensor checked = x + reshape(bad, {-1})[0];
    return dist::all_reduce(checked, dist::ReduceOp::kMean);
  }, {.name = "step", .input_signature = std::vector<TensorSpec>{TensorSpec({2}, float32), TensorSpec({None}, float32)}});
  EXPECT_TRUE(testing::tensors_near(step(ones({2}), constant({0.0f})), ones({2})));
  const bool raises_here = dist::rank() == 1;
  if (raises_here) {
    EXPECT_THROW(step(ones({2}), zeros({0})), Error);  // an empty batch: the gather of element 0 fails
  }
  // Rank 1 moved on to its next batch (call #3); rank 0 is in call #2.
  EXPECT_THROW_MSG(step(ones({2}) * (1.0f + r()), constant({0.0f})), CollectiveMismatchError,
                   "rank 0: all_reduce(mean) of float32 (2,) (2 elements) in function 'step' [collective #1 of call #2",
                   "rank 1: all_reduce(mean) of float32 (2,) (2 elements) in function 'step' [collective #1 of call #3",
                   "out of step");
}

}  // namespace
}  // namespace tg

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // A test that fails on one rank must not leave the other waiting for the whole CTest timeout.
  tg::dist::init({.collective_timeout_seconds = 60});
  const int failed = RUN_ALL_TESTS();
  tg::dist::finalize();
  return failed;
}
