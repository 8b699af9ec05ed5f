// A bfloat16 matmul's float32 cast taken into the product (take_bf16_product_casts): the
// optimised graph stores the product's sums rounded to bfloat16 and widened, with the bits of the
// matmul and the cast apart (eager on one thread), on one and two threads; a product others read
// too keeps its own node; the fused node refuses what its kernel cannot compute.
#include <string>
#include <vector>

#include "ops/op.h"
#include "support/graph_util.h"
#include "support/test_util.h"

namespace tg {
namespace {

using testing::count_op;

Tensor bf16_values(const std::vector<int64_t>& dims, uint64_t seed) {
  return cast(testing::seeded_values(dims, float32, seed), bfloat16);
}

struct ThreeRuns {
  std::vector<Tensor> eager, traced, optimised;
  Graph graph{nullptr};  // the optimised graph
};

template <class F>
ThreeRuns run_three_ways(F fn, const std::vector<Tensor>& in) {
  ThreeRuns r;
  r.eager = fn(in);
  auto traced = function([&](const std::vector<Tensor>& xs) { return fn(xs); }, {.optimize = false});
  r.traced = traced(in);
  auto optimised = function([&](const std::vector<Tensor>& xs) { return fn(xs); });
  r.optimised = optimised(in);
  r.graph = optimised.get_concrete_function(in).optimized_graph();
  return r;
}

void expect_all_same_bits(const ThreeRuns& r, const std::vector<Tensor>& want, const std::string& what) {
  ASSERT_EQ(r.eager.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(testing::same_bits(r.eager[i], want[i])) << what << ", eager, output " << i;
    EXPECT_TRUE(testing::same_bits(r.traced[i], want[i])) << what << ", traced, output " << i;
    EXPECT_TRUE(testing::same_bits(r.optimised[i], want[i])) << what << ", optimised, output " << i;
  }
}

// Every transpose, at sizes that split over two threads (and one small product): the cast and the
// matmul become one matmul_epilogue, with the bits of eager execution on one thread.
TEST(Bf16ProductCasts, CastOfAProductBecomesOneNodeWithTheSameBits) {
  const int threads_before = config::num_threads();
  struct Case {
    int64_t m, n, k;
  };
  for (const Case c : {Case{192, 160, 256}, Case{7, 5, 3}})
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      const Tensor a = bf16_values(ta ? std::vector<int64_t>{c.k, c.m} : std::vector<int64_t>{c.m, c.k}, 3 + t);
      const Tensor b = bf16_values(tb ? std::vector<int64_t>{c.n, c.k} : std::vector<int64_t>{c.k, c.n}, 11 + t);
      auto fn = [ta, tb](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{cast(matmul(in[0], in[1], ta, tb), float32)};
      };
      config::set_num_threads(1);
      const std::vector<Tensor> want = fn({a, b});
      const std::string what = "m " + std::to_string(c.m) + ", ta " + std::to_string(ta) + ", tb " + std::to_string(tb);
      ASSERT_EQ(want[0].dtype(), float32);
      for (int threads : {1, 2}) {
        config::set_num_threads(threads);
        const ThreeRuns r = run_three_ways(fn, {a, b});
        expect_all_same_bits(r, want, what + ", threads " + std::to_string(threads));
        EXPECT_EQ(count_op(r.graph, "matmul_epilogue"), 1) << what << "\n" << r.graph.to_string();
        EXPECT_EQ(count_op(r.graph, "matmul"), 0) << what << "\n" << r.graph.to_string();
        EXPECT_EQ(count_op(r.graph, "cast"), 0) << what << "\n" << r.graph.to_string();
      }
    }
  config::set_num_threads(threads_before);
}

// A cast that several nodes read is taken in all the same (its readers read the fused node).
TEST(Bf16ProductCasts, CastReadBySeveralNodes) {
  const Tensor a = bf16_values({40, 24}, 5), b = bf16_values({24, 33}, 6);
  auto fn = [](const std::vector<Tensor>& in) {
    const Tensor wide = cast(matmul(in[0], in[1]), float32);
    return std::vector<Tensor>{wide, add(wide, constant(1.0f)), mul(wide, wide)};
  };
  const std::vector<Tensor> want = fn({a, b});
  const ThreeRuns r = run_three_ways(fn, {a, b});
  expect_all_same_bits(r, want, "a cast with three readers");
  EXPECT_EQ(count_op(r.graph, "matmul"), 0) << r.graph.to_string();
  EXPECT_EQ(count_op(r.graph, "cast"), 0) << r.graph.to_string();
}

// A product that something else reads too keeps its bfloat16 node, and its cast stays apart.
TEST(Bf16ProductCasts, ProductReadElsewhereIsLeftAlone) {
  const Tensor a = bf16_values({40, 24}, 7), b = bf16_values({24, 33}, 8);
  auto fn = [](const std::vector<Tensor>& in) {
    const Tensor p = matmul(in[0], in[1]);
    return std::vector<Tensor>{cast(p, float32), p};
  };
  const std::vector<Tensor> want = fn({a, b});
  const ThreeRuns r = run_three_ways(fn, {a, b});
  expect_all_same_bits(r, want, "a product read twice");
  EXPECT_EQ(count_op(r.graph, "matmul"), 1) << r.graph.to_string();
  EXPECT_EQ(count_op(r.graph, "cast"), 1) << r.graph.to_string();
  EXPECT_EQ(count_op(r.graph, "matmul_epilogue"), 0) << r.graph.to_string();
}

// float32 products and their casts to float64 are not bfloat16 products: left alone.
TEST(Bf16ProductCasts, Float32ProductsAreLeftAlone) {
  const Tensor a = testing::seeded_values({12, 9}, float32, 9), b = testing::seeded_values({9, 10}, float32, 10);
  auto fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{cast(matmul(in[0], in[1]), float64)}; };
  const std::vector<Tensor> want = fn({a, b});
  const ThreeRuns r = run_three_ways(fn, {a, b});
  expect_all_same_bits(r, want, "float32 product");
  EXPECT_EQ(count_op(r.graph, "cast"), 1) << r.graph.to_string();
}

// A mixed_bfloat16 Dense stack's gradients: every weight gradient's product writes float32 for
// its Variable (no bfloat16 matmul and its cast are left; the forward products write bfloat16).
TEST(Bf16ProductCasts, MixedPrecisionWeightGradientsWriteFloat32) {
  const Tensor x = testing::seeded_values({32, 50}, float32, 12);
  const Tensor y = cast(greater(reduce_sum(x, {1}), constant(0.0f)), int32);
  nn::set_global_policy("mixed_bfloat16");
  const nn::Dense hidden(50, 40, relu, 1), head(40, 6, nullptr, 2);
  nn::set_global_policy("float32");
  const std::vector<Variable> vars = {hidden.kernel(), hidden.bias(), head.kernel(), head.bias()};
  auto grads = [&](const Tensor& xs, const Tensor& ys) {
    GradientTape tape;
    const Tensor loss = nn::sparse_softmax_cross_entropy(head(hidden(xs)), ys);
    return tape.gradient(loss, vars);
  };
  const std::vector<Tensor> want = grads(x, y);
  auto optimised = function(grads);
  const std::vector<Tensor> got = optimised(x, y);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(testing::same_bits(got[i], want[i])) << "gradient " << i;
  const Graph g = optimised.get_concrete_function(x, y).optimized_graph();
  EXPECT_EQ(count_op(g, "matmul"), 0) << g.to_string();
  int wide = 0;
  for (const auto& node : g.nodes()) wide += node.op == "matmul_epilogue" && node.outputs.at(0).dtype == float32;
  EXPECT_EQ(wide, 2) << g.to_string();
}

// The fused node's kernel takes bfloat16 operands and no other epilogue part.
TEST(Bf16ProductCasts, FusedNodeRefusesWhatItCannotCompute) {
  const Tensor a32 = testing::seeded_values({4, 3}, float32, 1), b32 = testing::seeded_values({3, 2}, float32, 2);
  const Tensor a = cast(a32, bfloat16), b = cast(b32, bfloat16);
  auto run = [](const std::vector<Tensor>& in, detail::MatMulEpilogueAttrs attrs) {
    return detail::apply_op(detail::OpId::MatMulEpilogue, in, attrs);
  };
  EXPECT_TRUE(testing::throws_with<InvalidArgumentError>([&] { run({a32, b32}, {.rounded_to_f32 = true}); },
                                                         {"expected bfloat16 operands", "float32"}));
  EXPECT_TRUE(testing::throws_with<InvalidArgumentError>(
      [&] { run({a, b, cast(testing::seeded_values({2}, float32, 3), bfloat16)}, {.bias = true, .rounded_to_f32 = true}); },
      {"rounded_to_f32 alone"}));
  // Eagerly the node computes what the graph's does.
  const std::vector<Tensor> got = run({a, b}, {.rounded_to_f32 = true});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(testing::same_bits(got[0], cast(matmul(a, b), float32)));
}

}  // namespace
}  // namespace tg
