// tg::dist in a job of one process (no MPI launcher): code written for many ranks runs as is,
// every collective is the identity, and the data-parallel helpers give the single-process
// results. tests/dist_mpi runs the same API across two ranks.
#include <tracegraph/dist.h>
#include <tracegraph/tracegraph.h>

#include "support/graph_util.h"
#include "support/test_util.h"

namespace tg {
namespace {

class SingleProcess : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { dist::init(); }
};

TEST_F(SingleProcess, IsAJobOfOne) {
  EXPECT_TRUE(dist::is_initialized());
  EXPECT_EQ(dist::rank(), 0);
  EXPECT_EQ(dist::size(), 1);
  EXPECT_EQ(dist::local_rank(), 0);
  EXPECT_EQ(dist::local_size(), 1);
  dist::init();  // a second init changes nothing
  EXPECT_EQ(dist::size(), 1);
}

TEST_F(SingleProcess, CollectivesAreIdentitiesEagerlyAndTraced) {
  const Tensor x = constant({{1.0f, 2.0f}, {3.0f, -4.0f}});
  for (auto op : {dist::ReduceOp::kSum, dist::ReduceOp::kMean, dist::ReduceOp::kMax, dist::ReduceOp::kMin})
    EXPECT_TRUE(testing::tensors_near(dist::all_reduce(x, op), x));
  EXPECT_TRUE(testing::tensors_near(dist::broadcast(x, 0), x));
  EXPECT_TRUE(testing::tensors_near(dist::all_gather(x), x));
  auto f = function([](const Tensor& a) { return dist::all_gather(dist::broadcast(dist::all_reduce(a))); });
  EXPECT_TRUE(testing::tensors_near(f(x), x));
  // How many rows all_gather returns is known only when every rank has sent its own.
  EXPECT_NE(f.get_concrete_function(TensorSpec({2, 2}, float32)).function_type().find("shape=(None, 2)"),
            std::string::npos);
}

TEST_F(SingleProcess, DistributedTapeGivesTheTapesGradients) {
  Variable w(constant({{0.5f, -1.0f}, {2.0f, 0.25f}}));
  const Tensor x = constant({{1.0f, 2.0f}, {3.0f, 4.0f}, {-1.0f, 0.5f}});
  std::vector<Tensor> plain, averaged;
  {
    GradientTape tape;
    plain = tape.gradient(reduce_mean(square(matmul(x, w))), {w});
  }
  auto step = function([&](const Tensor& xs) {
    dist::DistributedGradientTape tape;
    return tape.gradient(reduce_mean(square(matmul(xs, w))), {w})[0];
  });
  EXPECT_TRUE(testing::tensors_near(step(x), plain[0], 1e-6));
}

TEST_F(SingleProcess, GradientsTravelInBucketsOfOneDtype) {
  Variable a(constant({1.0f, 2.0f})), b(constant({{1.0f}, {2.0f}})), c(cast(constant({3.0f}), float64));
  auto step = [&](int64_t bucket_bytes) {
    return function([&, bucket_bytes](const Tensor& x) {
      GradientTape tape;
      const Tensor loss = reduce_sum(x * a) + reduce_sum(matmul(reshape(x, {1, 2}), b)) + reduce_sum(cast(c, float32) * x);
      std::vector<Tensor> g = tape.gradient(loss, std::vector<Variable>{a, b, c});
      return dist::all_reduce_gradients(g, {.op = dist::ReduceOp::kMean, .bucket_bytes = bucket_bytes});
    });
  };
  // float32 gradients of a and b share a bucket; c's float64 one travels in its own.
  auto bucketed = step(64 << 20);
  const ConcreteFunction one_bucket = bucketed.get_concrete_function(TensorSpec({2}, float32));
  EXPECT_EQ(testing::count_op(one_bucket.graph(), "all_reduce"), 2);
  auto per_tensor = step(0);
  EXPECT_EQ(testing::count_op(per_tensor.get_concrete_function(TensorSpec({2}, float32)).graph(), "all_reduce"), 3);
  // A bucket of 8 bytes holds a's gradient (8 bytes) but not b's as well.
  auto small = step(8);
  EXPECT_EQ(testing::count_op(small.get_concrete_function(TensorSpec({2}, float32)).graph(), "all_reduce"), 3);
  const std::vector<Tensor> g1 = bucketed(constant({1.0f, 2.0f}));
  const std::vector<Tensor> g2 = per_tensor(constant({1.0f, 2.0f}));
  ASSERT_EQ(g1.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_TRUE(testing::tensors_near(g1[i], g2[i]));
  EXPECT_TRUE(testing::tensors_near(g1[0], constant({1.0f, 2.0f})));
  EXPECT_THROW_MSG(dist::all_reduce_gradients({constant(1.0f)}, {.bucket_bytes = -1}), InvalidArgumentError,
                   "bucket_bytes must be >= 0");
  // Missing gradients (UnconnectedGradients::kNone) stay missing.
  const std::vector<Tensor> with_gap = dist::all_reduce_gradients({Tensor(), constant(2.0f)});
  EXPECT_FALSE(with_gap[0].defined());
  EXPECT_TRUE(testing::tensors_near(with_gap[1], constant(2.0f)));
}

TEST_F(SingleProcess, BroadcastVariablesKeepsTheRootsValues) {
  Variable v(constant({1.0f, 2.0f}));
  dist::broadcast_variables({v});
  EXPECT_TRUE(testing::tensors_near(v.read_value(), constant({1.0f, 2.0f})));
  EXPECT_THROW_MSG(dist::broadcast_variables({v}, 1), InvalidArgumentError, "root 1 is not a rank of this job");
}

TEST_F(SingleProcess, AFunctionWithCollectivesIsSavedAndLoaded) {
  auto f = function([](const Tensor& x) { return dist::all_reduce(x, dist::ReduceOp::kMean) * 2.0f; });
  f(constant({1.0f, 2.0f}));
  const std::string path = ::testing::TempDir() + "/collective.tgx";
  save(path, f);
  LoadedFunction loaded = load(path);
  EXPECT_TRUE(testing::tensors_near(Tensor(loaded(constant({1.0f, 2.0f}))), constant({2.0f, 4.0f})));
}

TEST(Shard, EveryShardGetsAsManyExamplesStrided) {
  data::LabeledImages all{reshape(range(0.0, 14.0, 1.0, float32), {7, 2}), range(int64_t{0}, int64_t{7}, int64_t{1}, int32)};
  const data::LabeledImages s0 = data::shard(all, 2, 0), s1 = data::shard(all, 2, 1);
  EXPECT_EQ(s0.size(), 3);
  EXPECT_EQ(s1.size(), 3);  // the seventh example is dropped: both ranks run 3 examples
  EXPECT_TRUE(testing::tensors_near(s0.labels, constant({0, 2, 4})));
  EXPECT_TRUE(testing::tensors_near(s1.labels, constant({1, 3, 5})));
  EXPECT_TRUE(testing::tensors_near(s1.images, constant({{2.0f, 3.0f}, {6.0f, 7.0f}, {10.0f, 11.0f}})));
  EXPECT_EQ(data::shard(all, 1, 0).size(), 7);
  EXPECT_THROW_MSG(data::shard(all, 2, 2), InvalidArgumentError, "shard 2 of 2 does not exist");
  EXPECT_THROW_MSG(data::shard(all, 0, 0), InvalidArgumentError, "num_shards >= 1");
  EXPECT_EQ(dist::shard(all).size(), 7);
}

TEST(DistOptions, BadOptionsAreRefused) {
  EXPECT_THROW_MSG(dist::init({.collective_timeout_seconds = 0}), InvalidArgumentError, "collective_timeout_seconds");
}

}  // namespace
}  // namespace tg
