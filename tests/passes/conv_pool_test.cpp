// A convolution layer's max pool taken into its conv2d_epilogue (passes/fuse_conv_pool.cpp) in
// inference: the bits of relu(conv2d + b) then max_pool2d apart, on the own implicit GEMM (one
// input channel), oneDNN (eight) and im2col, for pools that tile the result and pools that do not
// (odd sizes, overlapping windows, SAME padding), with NaN in windows, on one thread and two;
// training graphs, which keep the activation for the gradient, are not fused.
#include <cmath>
#include <limits>

#include "graph/verify.h"
#include "kernels/gemm.h"
#include "ops/op.h"
#include "passes/passes.h"
#include "support/graph_util.h"
#include "support/test_util.h"

namespace tg {
namespace {

using testing::count_op;
using testing::same_bits;
using testing::seeded_values;

struct PoolCase {
  int64_t k, s;
  Padding padding;
};

// x (n, h, w, c) with NaNs of two payloads at a few pixels (each NaN enters the windows of its
// 3 x 3 neighbourhood in every channel), when asked.
Tensor input_with_nans(int64_t n, int64_t h, int64_t w, int64_t c, uint64_t seed, bool nans) {
  std::vector<float> v = seeded_values({n, h, w, c}, DType::Float32, seed).to_vector<float>();
  if (nans) {
    const float quiet = std::numeric_limits<float>::quiet_NaN();
    v[static_cast<std::size_t>(((0 * h + 2) * w + 3) * c)] = quiet;
    v[static_cast<std::size_t>(((0 * h + 2) * w + 4) * c)] = -quiet;
    v[static_cast<std::size_t>(((n - 1) * h + h - 1) * w * c + (w - 1) * c)] = std::nanf("7");
  }
  return constant(v, {n, h, w, c});
}

TEST(ConvMaxPool, InferenceTakesThePoolInWithTheBitsOfTheOpsApart) {
  detail::set_verify_graphs(true);
  const int threads_before = config::num_threads();
  for (const bool own : {true, false})
    for (const int64_t c : {int64_t{1}, int64_t{8}})
      for (const PoolCase p : {PoolCase{2, 2, Padding::Valid}, PoolCase{2, 2, Padding::Same}, PoolCase{3, 2, Padding::Valid}})
        for (const bool nans : {false, true})
          for (const int threads : {1, 2}) {
            SCOPED_TRACE(::testing::Message() << "own " << own << " channels " << c << " pool " << p.k << "/" << p.s
                                              << (p.padding == Padding::Same ? " same" : " valid") << " nans " << nans
                                              << " threads " << threads);
            const bool was = detail::set_own_avx512_kernels(own);
            config::set_num_threads(threads);
            auto layer = [p](const Tensor& x, const Tensor& f, const Tensor& b) {
              return max_pool2d(relu(conv2d(x, f, {1, 1}, Padding::Same) + b), {p.k, p.k}, {p.s, p.s}, p.padding);
            };
            // 13 x 11: a 2 x 2 VALID pool leaves the last row and column out.
            const Tensor x = input_with_nans(5, 13, 11, c, 71 + static_cast<uint64_t>(c), nans);
            const Tensor f = seeded_values({3, 3, c, 37}, DType::Float32, 72), b = seeded_values({37}, DType::Float32, 73);
            auto optimised = function(layer);
            auto plain = function(layer, {.optimize = false});
            const Tensor got = optimised(x, f, b);
            EXPECT_TRUE(same_bits(got, plain(x, f, b)));
            EXPECT_TRUE(same_bits(got, layer(x, f, b)));
            if (nans) {
              const std::vector<float> v = got.to_vector<float>();
              EXPECT_TRUE(std::any_of(v.begin(), v.end(), [](float e) { return std::isnan(e); }));
            }
            const Graph g = optimised.get_concrete_function(x, f, b).optimized_graph();
            EXPECT_EQ(count_op(g, "conv2d_epilogue"), 1) << g.to_string();
            EXPECT_EQ(count_op(g, "max_pool2d"), 0) << g.to_string();
            detail::set_own_avx512_kernels(was);
          }
  config::set_num_threads(threads_before);
}

// The benchmark's CNN: two layers, each pooled, then a dense layer, all in one function.
TEST(ConvMaxPool, BothLayersOfASmallCnnTakeTheirPools) {
  auto net = [](const Tensor& x, const Tensor& f1, const Tensor& b1, const Tensor& f2, const Tensor& b2) {
    const Tensor h1 = max_pool2d(relu(conv2d(x, f1, {1, 1}, Padding::Same) + b1), {2, 2}, {2, 2}, Padding::Valid);
    const Tensor h2 = max_pool2d(relu(conv2d(h1, f2, {1, 1}, Padding::Same) + b2), {2, 2}, {2, 2}, Padding::Valid);
    return reduce_sum(h2, {1, 2});
  };
  const Tensor x = seeded_values({6, 28, 28, 1}, DType::Float32, 81), f1 = seeded_values({3, 3, 1, 32}, DType::Float32, 82);
  const Tensor b1 = seeded_values({32}, DType::Float32, 83), f2 = seeded_values({3, 3, 32, 64}, DType::Float32, 84);
  const Tensor b2 = seeded_values({64}, DType::Float32, 85);
  auto optimised = function(net);
  auto plain = function(net, {.optimize = false});
  EXPECT_TRUE(same_bits(optimised(x, f1, b1, f2, b2), plain(x, f1, b1, f2, b2)));
  const Graph g = optimised.get_concrete_function(x, f1, b1, f2, b2).optimized_graph();
  EXPECT_EQ(count_op(g, "conv2d_epilogue"), 2) << g.to_string();
  EXPECT_EQ(count_op(g, "max_pool2d"), 0) << g.to_string();
}

// One image: oneDNN splits it into bands of rows, which are not whole images, so the node
// convolves into a temporary and pools that; the bits stay the ops' apart, on 1 and 2 threads.
TEST(ConvMaxPool, OneImageInBandsKeepsTheBits) {
  const int threads_before = config::num_threads();
  auto layer = [](const Tensor& x, const Tensor& f, const Tensor& b) {
    return max_pool2d(relu(conv2d(x, f, {1, 1}, Padding::Same) + b), {2, 2}, {2, 2}, Padding::Valid);
  };
  const Tensor x = input_with_nans(1, 21, 18, 8, 94, true), f = seeded_values({3, 3, 8, 16}, DType::Float32, 95);
  const Tensor b = seeded_values({16}, DType::Float32, 96);
  for (const int threads : {1, 2}) {
    config::set_num_threads(threads);
    auto optimised = function(layer);
    EXPECT_TRUE(same_bits(optimised(x, f, b), layer(x, f, b))) << threads << " threads";
    EXPECT_EQ(count_op(optimised.get_concrete_function(x, f, b).optimized_graph(), "max_pool2d"), 0);
  }
  config::set_num_threads(threads_before);
}

// A training step reads the activation again (max_pool2d_grad, the relu mask): the pool stays a
// node of its own, and the step keeps its bits.
TEST(ConvMaxPool, ATrainingGraphKeepsItsPool) {
  auto step = [](const Tensor& x, const Tensor& f, const Tensor& b) {
    GradientTape tape;
    tape.watch(f);
    tape.watch(b);
    const Tensor y = max_pool2d(relu(conv2d(x, f, {1, 1}, Padding::Same) + b), {2, 2}, {2, 2}, Padding::Valid);
    std::vector<Tensor> out = tape.gradient(reduce_sum(y), std::vector<Tensor>{f, b});
    out.push_back(y);
    return out;
  };
  const Tensor x = seeded_values({4, 12, 12, 1}, DType::Float32, 91), f = seeded_values({3, 3, 1, 16}, DType::Float32, 92);
  const Tensor b = seeded_values({16}, DType::Float32, 93);
  auto optimised = function(step);
  auto plain = function(step, {.optimize = false});
  const std::vector<Tensor> got = optimised(x, f, b), want = plain(x, f, b);
  for (std::size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same_bits(got[k], want[k])) << "output " << k;
  const Graph g = optimised.get_concrete_function(x, f, b).optimized_graph();
  EXPECT_EQ(count_op(g, "max_pool2d"), 1) << g.to_string();
}

// An activation with a second reader (here a function output) is not pooled inside the node.
TEST(ConvMaxPool, AnActivationReadElsewhereKeepsItsPool) {
  auto layer = [](const Tensor& x, const Tensor& f, const Tensor& b) {
    const Tensor h = relu(conv2d(x, f, {1, 1}, Padding::Same) + b);
    return std::vector<Tensor>{max_pool2d(h, {2, 2}, {2, 2}, Padding::Valid), h};
  };
  const Tensor x = seeded_values({2, 8, 8, 1}, DType::Float32, 95), f = seeded_values({3, 3, 1, 16}, DType::Float32, 96);
  const Tensor b = seeded_values({16}, DType::Float32, 97);
  auto optimised = function(layer);
  const Graph g = optimised.get_concrete_function(x, f, b).optimized_graph();
  EXPECT_EQ(count_op(g, "max_pool2d"), 1) << g.to_string();
}

// Run-time shapes the kernel does not cover (a bias of one value, broadcast): the node runs its
// ops one by one and gives their bits.
TEST(ConvMaxPool, ABroadcastBiasRunsTheOpsApart) {
  detail::Conv2DEpilogueAttrs a;
  a.padding = static_cast<int64_t>(Padding::Same);
  a.bias = a.relu = a.max_pool = true;
  a.pool_ksize = {2, 2}, a.pool_strides = {2, 2}, a.pool_padding = static_cast<int64_t>(Padding::Valid);
  const Tensor x = seeded_values({3, 9, 7, 1}, DType::Float32, 98), f = seeded_values({3, 3, 1, 20}, DType::Float32, 99);
  for (const std::vector<int64_t>& bias_shape : {std::vector<int64_t>{1}, std::vector<int64_t>{20}}) {
    const Tensor b = seeded_values(bias_shape, DType::Float32, 100);
    const Tensor got = detail::apply_op(detail::OpId::Conv2DEpilogue, {x, f, b}, a).at(0);
    EXPECT_TRUE(same_bits(got, max_pool2d(relu(conv2d(x, f, {1, 1}, Padding::Same) + b), {2, 2}, {2, 2}, Padding::Valid)));
  }
}

}  // namespace
}  // namespace tg
