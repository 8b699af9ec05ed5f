// A bfloat16 matmul's float32 cast taken into the product (take_bf16_product_casts): the
// optimised graph stores the product's sums rounded to bfloat16 and widened, with the bits of the
// matmul and the cast apart (eager on one thread), on one and two threads; a product others read
// too keeps its own node; the fused node refuses what its kernel cannot compute.
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/bf16.h"
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

// Float32 values whose rounding to bfloat16 takes every path: ties to even, zeros of both signs,
// float32 subnormals (which vcvtneps2bf16 would read as zero), the smallest normal; with
// `non_finite`, NaNs of both signs (a signalling one quietened), infinities and values that round
// up to infinity too (a gradient then is NaN throughout, which would hide the other values).
Tensor float32_with_specials(const std::vector<int64_t>& dims, uint64_t seed, bool non_finite) {
  Tensor t = testing::seeded_values(dims, float32, seed);
  std::vector<float> v(static_cast<std::size_t>(t.num_elements()));
  std::memcpy(v.data(), detail::data_of<float>(t), v.size() * sizeof(float));
  const std::vector<uint32_t> finite = {0x80000000u, 0x00000000u, 0x00000001u, 0x807fffffu, 0x3f808000u,
                                        0x3f818000u, 0x00800000u, 0x3f80ffffu, 0xbf808000u};
  const std::vector<uint32_t> other = {0x7fc00000u, 0xff800001u, 0x7f800000u, 0xff800000u, 0x7f7fffffu};
  std::vector<uint32_t> specials = finite;
  if (non_finite) specials.insert(specials.end(), other.begin(), other.end());
  for (std::size_t i = 5; i < v.size(); i += 13) std::memcpy(&v[i], &specials[(i / 13) % specials.size()], 4);
  return constant(v, TensorShape(dims));
}

// Whether a cast node of the graph reads the graph input `name`.
bool casts_input(const Graph& g, const std::string& name) {
  for (const auto& node : g.nodes())
    if (node.op == "cast" && node.inputs.size() == 1 && node.inputs[0] == name) return true;
  return false;
}

// A mixed_bfloat16 Dense layer of a float32 input: the input's cast to bfloat16, read by the
// forward product (+ bias, relu) and by the weight gradient's product (x^T dz, float32 for the
// Variable), is taken into both: each rounds x's rows as it packs them. The bits of eager and
// of the unoptimised graph, on one and two threads, with the instructions and without them (the
// float32 fallback rounds x first), at sizes that split over the pool and odd ones (a lone last
// value of k, rows past a block), with special values in x.
TEST(Bf16ProductCasts, AnInputsCastIsTakenIntoTheProductsThatReadIt) {
  const int threads_before = config::num_threads();
  struct Case { int64_t batch, in, units; };
  for (const bool instructions : {true, false})
    for (const int threads : {1, 2})
      for (const Case c : {Case{128, 300, 64}, Case{37, 49, 20}, Case{13, 33, 70}}) {
        SCOPED_TRACE(::testing::Message() << "instructions " << instructions << " threads " << threads << " batch "
                                          << c.batch << " in " << c.in << " units " << c.units);
        const bool was = detail::set_bf16_gemm_instructions(instructions);
        config::set_num_threads(threads);
        const Tensor x = float32_with_specials({c.batch, c.in}, 21, false);
        const Tensor y = cast(greater(reduce_sum(testing::seeded_values({c.batch, 3}, float32, 22), {1}), constant(0.0f)), int32);
        nn::set_global_policy("mixed_bfloat16");
        const nn::Dense hidden(c.in, c.units, relu, 1), head(c.units, 2, nullptr, 2);
        nn::set_global_policy("float32");
        const std::vector<Variable> vars = {hidden.kernel(), hidden.bias(), head.kernel(), head.bias()};
        auto step = [&](const std::vector<Tensor>& in) {
          GradientTape tape;
          const Tensor h = hidden(in[0]);
          std::vector<Tensor> out = tape.gradient(nn::sparse_softmax_cross_entropy(head(h), in[1]), vars);
          out.push_back(h);
          return out;
        };
        const ThreeRuns r = run_three_ways(step, {x, y});
        expect_all_same_bits(r, r.eager, "mixed Dense layer");
        EXPECT_FALSE(casts_input(r.graph, r.graph.nodes().at(0).name)) << r.graph.to_string();
        int from_x = 0;
        for (const auto& node : r.graph.nodes())
          from_x += node.op == "matmul_epilogue" && node.inputs.at(0) == r.graph.nodes().at(0).name;
        EXPECT_EQ(from_x, 2) << r.graph.to_string();
        // The forward product alone, over NaNs and infinities too.
        auto forward = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{hidden(in[0])}; };
        const ThreeRuns f = run_three_ways(forward, {float32_with_specials({c.batch, c.in}, 23, true)});
        expect_all_same_bits(f, f.eager, "mixed Dense layer's forward, non-finite values");
        EXPECT_FALSE(casts_input(f.graph, f.graph.nodes().at(0).name)) << f.graph.to_string();
        detail::set_bf16_gemm_instructions(was);
      }
  config::set_num_threads(threads_before);
}

// A cast that another op reads too, or that a product reads where nothing else tells it from a
// float32 product (a float32 weight taken in, no bfloat16 bias), is not taken into the product.
TEST(Bf16ProductCasts, AnInputsCastReadElsewhereStays) {
  const Tensor x = float32_with_specials({24, 40}, 31, true), w = testing::seeded_values({40, 16}, float32, 32);
  const Tensor b = testing::seeded_values({16}, float32, 33);
  using Body = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
  const std::vector<std::pair<const char*, Body>> bodies = {
      {"cast read by an add too", [](const std::vector<Tensor>& in) {
         const Tensor xb = cast(in[0], bfloat16);
         return std::vector<Tensor>{relu(matmul(xb, cast(in[1], bfloat16)) + cast(in[2], bfloat16)), xb + xb};
       }},
      {"only a mask besides", [](const std::vector<Tensor>& in) {
         const Tensor z = matmul(cast(in[0], bfloat16), cast(in[1], bfloat16));
         const Tensor mask = greater(matmul(in[0], in[1]), constant(0.0f));
         return std::vector<Tensor>{where(mask, z, zeros_like(z))};
       }},
  };
  for (const auto& [label, body] : bodies) {
    SCOPED_TRACE(label);
    const ThreeRuns r = run_three_ways(body, {x, w, b});
    expect_all_same_bits(r, r.eager, label);
    EXPECT_GE(count_op(r.graph, "matmul_epilogue"), 1) << r.graph.to_string();
    for (const auto& node : r.graph.nodes())
      EXPECT_FALSE(node.op == "matmul_epilogue" && node.inputs.at(0) == r.graph.nodes().at(0).name) << r.graph.to_string();
  }
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
