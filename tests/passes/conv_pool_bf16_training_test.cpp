// A bfloat16 training layer's max pool taken into its conv2d_epilogue with pool_winners
// (passes/fuse_conv_pool.cpp): the node pools and notes each window's winner, and the masked
// pooling gradient routes dy by those winners without reading the activation again. The bits of
// eager, the unoptimised graph and the optimised one agree - forward and every gradient - for
// pools that tile with rows and columns left out, channel counts off multiples of 16, ties,
// NaN, infinities and -0, on one thread and two, on the AVX-512 kernels and the portable ones.
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "graph/verify.h"
#include "kernels/gemm.h"
#include "kernels/pool_kernels.h"
#include "ops/op.h"
#include "passes/passes.h"
#include "support/graph_util.h"
#include "support/test_util.h"

namespace tg {
namespace {

using testing::count_op;
using testing::same_bits;
using testing::seeded_values;
using Dims = std::vector<int64_t>;

enum class Specials { kNone, kZeros, kAll };

// bfloat16 values on a grid of 1/4 (ties in most windows), with zeros of both signs at a few
// places when asked, and NaNs of two signs and infinities too with kAll.
Tensor grid_bf16(const Dims& d, uint64_t seed, Specials specials) {
  std::vector<float> v = seeded_values(d, DType::Float32, seed, {.step = 0.25, .scale = 2.0}).to_vector<float>();
  if (specials == Specials::kAll) {
    for (std::size_t i = 3; i < v.size(); i += 89) v[i] = std::nanf("");
    for (std::size_t i = 41; i < v.size(); i += 97) v[i] = -std::nanf("");
    for (std::size_t i = 11; i < v.size(); i += 53) v[i] = INFINITY;
    for (std::size_t i = 23; i < v.size(); i += 59) v[i] = -INFINITY;
  }
  if (specials != Specials::kNone)
    for (std::size_t i = 5; i < v.size(); i += 7) v[i] = -0.0f;
  return cast(constant(v, TensorShape(d)), bfloat16);
}

std::vector<uint16_t> bits_of(const std::vector<bfloat16_t>& v) {
  std::vector<uint16_t> b(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) b[i] = v[i].bits;
  return b;
}

struct LayerCase {
  std::string label;
  Dims x, f;
  int64_t pool;  // window = strides, VALID
};

const std::vector<LayerCase>& layer_cases() {
  static const std::vector<LayerCase> c{
      {"the CNN's first layer, 1->32, 12x12", {6, 12, 12, 1}, {3, 3, 1, 32}, 2},
      {"the CNN's second layer, 32->64, 7x7 (last row and column left out)", {5, 7, 7, 32}, {3, 3, 32, 64}, 2},
      {"5->20, 9x10, 3x3 windows", {3, 9, 10, 5}, {3, 3, 5, 20}, 3},
      {"1x1 filter 4->3, 6x8", {2, 6, 8, 4}, {1, 1, 4, 3}, 2},
  };
  return c;
}

// relu(conv2d + b) pooled, and the gradients of a weighted sum of the pool through it with
// respect to x, f and b (the masked pooling gradient with the bias sums, as in the CNN step).
std::vector<Tensor> layer_step(const Tensor& x, const Tensor& f, const Tensor& b, const Tensor& w, int64_t k) {
  GradientTape tape;
  tape.watch(x);
  tape.watch(f);
  tape.watch(b);
  const Tensor p = max_pool2d(relu(conv2d(x, f, {1, 1}, Padding::Same) + b), {k, k}, {k, k}, Padding::Valid);
  const std::vector<Tensor> g = tape.gradient(reduce_sum(p * w), std::vector<Tensor>{x, f, b});
  return {p, g[0], g[1], g[2]};
}

TEST(ConvMaxPoolBFloat16Training, TheLayerPoolsInItsEpilogueWithTheBitsOfTheOpsApart) {
  detail::set_verify_graphs(true);
  auto optimised = function(layer_step);
  auto plain = function(layer_step, {.optimize = false});
  const int threads_before = config::num_threads();
  for (const bool own : {true, false})
    for (const bool specials : {false, true})
      for (const int threads : {1, 2})
        for (const LayerCase& c : layer_cases()) {
          SCOPED_TRACE(::testing::Message() << c.label << ", own kernels " << own << ", specials " << specials << ", "
                                            << threads << " threads");
          const bool was = detail::set_own_avx512_kernels(own);
          config::set_num_threads(threads);
          const Tensor x = grid_bf16(c.x, 1, specials ? Specials::kAll : Specials::kNone);
          const Tensor f = grid_bf16(c.f, 2, Specials::kNone), b = grid_bf16({c.f[3]}, 3, Specials::kNone);
          const Dims pooled{c.x[0], c.x[1] / c.pool, c.x[2] / c.pool, c.f[3]};
          // Zeros of both signs in dy; no NaN, whose sign in the bias sums is the compiler's
          // operand order where two NaNs meet (DECISIONS: some NaN).
          const Tensor w = grid_bf16(pooled, 4, specials ? Specials::kZeros : Specials::kNone);
          const std::vector<Tensor> got = optimised(x, f, b, w, c.pool), want = plain(x, f, b, w, c.pool),
                                    eager = layer_step(x, f, b, w, c.pool);
          ASSERT_EQ(got.size(), 4u);
          for (std::size_t k = 0; k < got.size(); ++k) {
            EXPECT_EQ(got[k].dtype(), bfloat16);
            EXPECT_TRUE(same_bits(got[k], want[k])) << "output " << k;
            EXPECT_TRUE(same_bits(got[k], eager[k])) << "output " << k;
          }
          const Graph g = optimised.get_concrete_function(x, f, b, w, c.pool).optimized_graph();
          EXPECT_EQ(count_op(g, "max_pool2d"), 0) << g.to_string();
          EXPECT_EQ(count_op(g, "conv2d_epilogue"), 1) << g.to_string();
          EXPECT_EQ(count_op(g, "max_pool2d_grad_masked"), 1) << g.to_string();
          detail::set_own_avx512_kernels(was);
        }
  config::set_num_threads(threads_before);
}

// The graph after fuse_product_epilogues: the pool node is the conv2d_epilogue with
// pool_winners (pooled, activation, winners as uint8), and the gradient reads the activation
// (its shape) and the winners; the layer's first conv2d_epilogue is swept; the graph is well formed.
TEST(ConvMaxPoolBFloat16Training, TheGradientReadsTheWinners) {
  const LayerCase& c = layer_cases()[0];
  const Tensor x = grid_bf16(c.x, 1, Specials::kNone), f = grid_bf16(c.f, 2, Specials::kNone), b = grid_bf16({c.f[3]}, 3, Specials::kNone);
  const Tensor w = grid_bf16({c.x[0], 6, 6, c.f[3]}, 4, Specials::kNone);
  auto ir = testing::trace_graph(
      [](const std::vector<Tensor>& in) { return layer_step(in[0], in[1], in[2], in[3], 2); }, {x, f, b, w});
  detail::fuse_product_epilogues(*ir);
  detail::eliminate_dead_code(*ir);
  detail::verify_graph(*ir, "fuse_product_epilogues");
  int epilogues = 0, grads = 0;
  for (const auto& node : ir->nodes) {
    if (node.op_name() == "conv2d_epilogue") {
      ++epilogues;
      const auto& a = node.attrs.get<detail::Conv2DEpilogueAttrs>();
      EXPECT_TRUE(a.max_pool && a.pool_winners && a.bias && a.relu && !a.mask_out);
      ASSERT_EQ(node.outputs.size(), 3u);
      EXPECT_EQ(node.outputs[0].dtype, DType::BFloat16);
      EXPECT_EQ(node.outputs[1].dtype, DType::BFloat16);
      EXPECT_EQ(node.outputs[2].dtype, DType::UInt8);
    }
    if (node.op_name() == "max_pool2d_grad_masked") {
      ++grads;
      ASSERT_EQ(node.inputs.size(), 3u);
      EXPECT_EQ(node.inputs[0].output, 1);
      EXPECT_EQ(node.inputs[2].output, 2);
      EXPECT_EQ(ir->node_of(node.inputs[2]).op_name(), "conv2d_epilogue");
    }
  }
  EXPECT_EQ(epilogues, 1);
  EXPECT_EQ(grads, 1);
  EXPECT_EQ(count_op(*ir, "max_pool2d"), 0);
}

// Sums that would be subnormal (a bias of bfloat16 subnormals where the filter's column is zero,
// so the product is 0) are zero on every path, fused or not, as the kernels' float environment
// reads and flushes them (core/float_environment.h); 40 channels: a step of 32 and a tail of 8.
TEST(ConvMaxPoolBFloat16Training, SubnormalSumsAreZeroOnEveryPath) {
  detail::set_verify_graphs(true);
  auto optimised = function(layer_step);
  auto plain = function(layer_step, {.optimize = false});
  auto forward = [](const Tensor& x, const Tensor& f, const Tensor& b) {
    return relu(conv2d(x, f, {1, 1}, Padding::Same) + b);
  };
  auto forward_optimised = function(forward);
  const Dims xd{4, 8, 6, 3}, fd{3, 3, 3, 40};
  std::vector<float> fv = cast(grid_bf16(fd, 31, Specials::kNone), float32).to_vector<float>();
  for (std::size_t i = 0; i < fv.size(); ++i)
    if (i % 40 % 3 == 0) fv[i] = 0.0f;  // these channels' products are 0
  std::vector<bfloat16_t> bv = grid_bf16({40}, 32, Specials::kNone).to_vector<bfloat16_t>();
  const uint16_t subnormals[] = {0x0001, 0x8001, 0x007f, 0x8040, 0x0035};
  for (std::size_t k = 0; k < bv.size(); k += 3) bv[k] = bfloat16_t::from_bits(subnormals[k / 3 % 5]);
  std::vector<float> bf32(bv.size());
  for (std::size_t k = 0; k < bv.size(); ++k) bf32[k] = static_cast<float>(bv[k]);
  const Tensor x = grid_bf16(xd, 30, Specials::kNone), f = cast(constant(fv, TensorShape(fd)), bfloat16);
  const Tensor b = cast(constant(bf32, TensorShape({40})), bfloat16);
  EXPECT_EQ(bits_of(b.to_vector<bfloat16_t>()), bits_of(bv));  // the subnormals survive the casts
  const Tensor w = grid_bf16({4, 4, 3, 40}, 33, Specials::kNone);
  const Tensor h = forward_optimised(x, f, b), want_h = forward(x, f, b);
  EXPECT_TRUE(same_bits(h, want_h));
  const std::vector<bfloat16_t> hv = h.to_vector<bfloat16_t>();
  int subnormal = 0;
  for (const bfloat16_t v : hv) subnormal += (v.bits & 0x7f80) == 0 && (v.bits & 0x7f) != 0;
  EXPECT_EQ(subnormal, 0);
  const std::vector<Tensor> got = optimised(x, f, b, w, 2), want = plain(x, f, b, w, 2), eager = layer_step(x, f, b, w, 2);
  for (std::size_t k = 0; k < got.size(); ++k) {
    EXPECT_TRUE(same_bits(got[k], want[k])) << "output " << k;
    EXPECT_TRUE(same_bits(got[k], eager[k])) << "output " << k;
  }
}

// Pools whose windows do not tile (SAME, overlapping) and float32 layers keep their pool node;
// the bits stay those of the graph apart.
TEST(ConvMaxPoolBFloat16Training, PoolsThatDoNotTileKeepTheirNode) {
  auto step = [](const Tensor& x, const Tensor& f, const Tensor& b, int64_t k, int64_t s, int64_t padding) {
    GradientTape tape;
    tape.watch(f);
    tape.watch(b);
    const Tensor p = max_pool2d(relu(conv2d(x, f, {1, 1}, Padding::Same) + b), {k, k}, {s, s}, static_cast<Padding>(padding));
    std::vector<Tensor> out = tape.gradient(reduce_sum(p), std::vector<Tensor>{f, b});
    out.push_back(p);
    return out;
  };
  const Tensor x = grid_bf16({3, 7, 9, 2}, 5, Specials::kAll), f = grid_bf16({3, 3, 2, 17}, 6, Specials::kNone), b = grid_bf16({17}, 7, Specials::kNone);
  auto optimised = function(step);
  auto plain = function(step, {.optimize = false});
  for (const auto& [k, s, padding] : {std::tuple<int64_t, int64_t, Padding>{2, 2, Padding::Same},
                                      std::tuple<int64_t, int64_t, Padding>{3, 2, Padding::Valid}}) {
    const int64_t pad = static_cast<int64_t>(padding);
    const std::vector<Tensor> got = optimised(x, f, b, k, s, pad), want = plain(x, f, b, k, s, pad);
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(same_bits(got[i], want[i])) << "output " << i;
    EXPECT_EQ(count_op(optimised.get_concrete_function(x, f, b, k, s, pad).optimized_graph(), "max_pool2d"), 1);
  }
  const Tensor xf = cast(x, float32), ff = cast(f, float32), bf = cast(b, float32);
  const int64_t valid = static_cast<int64_t>(Padding::Valid);
  const std::vector<Tensor> got = optimised(xf, ff, bf, 2, 2, valid), want = plain(xf, ff, bf, 2, 2, valid);
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(same_bits(got[i], want[i])) << "output " << i;
  EXPECT_EQ(count_op(optimised.get_concrete_function(xf, ff, bf, 2, 2, valid).optimized_graph(), "max_pool2d"), 1);
}

// An activation smaller than the window pools to nothing (TF's VALID size), which the winners
// kernels do not take: the layer keeps its pool node, and the empty pool and zero gradients
// come out as the ops apart give them (the fused node once raised an internal error here).
TEST(ConvMaxPoolBFloat16Training, AnActivationSmallerThanTheWindowKeepsItsPool) {
  auto step = [](const Tensor& x, const Tensor& f, const Tensor& b) {
    GradientTape tape;
    tape.watch(x);
    tape.watch(f);
    tape.watch(b);
    const Tensor p = max_pool2d(relu(conv2d(x, f, {1, 1}, Padding::Same) + b), {2, 2}, {2, 2}, Padding::Valid);
    std::vector<Tensor> out = tape.gradient(reduce_sum(p), std::vector<Tensor>{x, f, b});
    out.push_back(p);
    return out;
  };
  const Tensor x = grid_bf16({2, 1, 3, 3}, 8, Specials::kNone), f = grid_bf16({3, 3, 3, 4}, 9, Specials::kNone),
               b = grid_bf16({4}, 10, Specials::kNone);
  auto optimised = function(step);
  auto plain = function(step, {.optimize = false});
  const std::vector<Tensor> got = optimised(x, f, b), want = plain(x, f, b), eager = step(x, f, b);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[3].shape(), TensorShape({2, 0, 1, 4}));
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(same_bits(got[i], want[i])) << "output " << i;
    EXPECT_TRUE(same_bits(got[i], eager[i])) << "output " << i;
  }
  EXPECT_EQ(count_op(optimised.get_concrete_function(x, f, b).optimized_graph(), "max_pool2d"), 1);
}

// The kernels on their own, over any values (not only relu's): the pool of
// max_pool_forward_bf16 and the gradient of max_pool_backward_bf16 with the mask x > 0, windows
// of 1 x 2 to 4 x 4, NaNs (a signalling payload too), infinities, zeros of both signs, ties.
TEST(ConvMaxPoolBFloat16Training, TheWinnersKernelsGiveThePoolsAndTheMaskedGradientsBits) {
  struct Case {
    int64_t n, h, w, c, kh, kw;
  };
  for (const bool own : {true, false})
    for (const Case& k : {Case{3, 7, 9, 19, 2, 2}, Case{2, 6, 6, 32, 2, 2}, Case{2, 10, 9, 40, 3, 3},
                          Case{2, 4, 7, 3, 1, 2}, Case{1, 8, 8, 64, 4, 4}}) {
      SCOPED_TRACE(::testing::Message() << "own " << own << " " << k.h << "x" << k.w << "x" << k.c << " window "
                                        << k.kh << "x" << k.kw);
      const bool was = detail::set_own_avx512_kernels(own);
      const detail::PoolGeom g{k.n, k.h, k.w, k.c, k.kh, k.kw, k.kh, k.kw, k.h / k.kh, k.w / k.kw, 0, 0};
      ASSERT_TRUE(detail::pool_winners_fit(g));
      const int64_t image = k.n * k.h * k.w * k.c, pooled = k.n * g.oh * g.ow * k.c;
      std::vector<bfloat16_t> x = grid_bf16({image}, 8, Specials::kAll).to_vector<bfloat16_t>();
      x[static_cast<std::size_t>(image / 2)] = bfloat16_t::from_bits(0x7f81);  // signalling
      std::vector<bfloat16_t> dy = grid_bf16({pooled}, 9, Specials::kAll).to_vector<bfloat16_t>();
      std::vector<bfloat16_t> want_y(static_cast<std::size_t>(pooled)), got_y(want_y.size());
      std::vector<bfloat16_t> want_dx(static_cast<std::size_t>(image)), got_dx(want_dx.size(), bfloat16_t(7.0f));
      std::vector<uint8_t> winners(static_cast<std::size_t>(pooled));
      detail::max_pool_forward_bf16(g, x.data(), want_y.data());
      detail::max_pool_backward_bf16(g, x.data(), dy.data(), nullptr, want_dx.data(), nullptr, true);
      detail::max_pool_winners_bf16(g, x.data(), got_y.data(), winners.data(), 0, k.n);
      detail::max_pool_backward_winners_bf16(g, winners.data(), dy.data(), got_dx.data());
      EXPECT_EQ(bits_of(got_y), bits_of(want_y));
      EXPECT_EQ(bits_of(got_dx), bits_of(want_dx));
      int routed = 0;
      for (const uint8_t v : winners) {
        EXPECT_TRUE(v < k.kh * k.kw || v == 255) << int{v};
        routed += v != 255;
      }
      EXPECT_GT(routed, 0);
      EXPECT_LT(routed, pooled);
      detail::set_own_avx512_kernels(was);
    }
}

// The masked gradient op with uint8 winners: a byte past the window routes nowhere, as 255 does;
// winners of another shape, another input dtype and pools that do not tile are refused.
TEST(ConvMaxPoolBFloat16Training, TheMaskedGradientTakesWinnersAndRefusesWhatDoesNotFit) {
  const auto& def = detail::op_def(detail::OpId::MaxPool2DGradMasked);
  const detail::MaxPoolGradMaskedAttrs a{{{2, 2}, {2, 2}, static_cast<int64_t>(Padding::Valid)}, true};
  const Tensor x = grid_bf16({1, 2, 4, 2}, 10, Specials::kNone), dy = grid_bf16({1, 1, 2, 2}, 11, Specials::kNone);
  const std::vector<uint8_t> wv{0, 3, 4, 255};  // window 0: positions 0 and 3; window 1: none
  const Tensor winners = constant(wv, TensorShape({1, 1, 2, 2}));
  const std::vector<Tensor> got = detail::run_op_eager(def, {x, dy, winners}, a);
  const std::vector<float> d = cast(dy, float32).to_vector<float>();
  std::vector<float> want(16, 0.0f);
  want[0] = d[0] + 0.0f;               // pixel (0, 0), channel 0
  want[(1 * 4 + 1) * 2 + 1] = d[1] + 0.0f;  // pixel (1, 1), channel 1
  EXPECT_TRUE(same_bits(got[0], cast(constant(want, TensorShape({1, 2, 4, 2})), bfloat16)));
  EXPECT_TRUE(same_bits(got[1], cast(reduce_sum(cast(got[0], float32), {0, 1, 2}), bfloat16)));
  const Tensor wrong_shape = constant(std::vector<uint8_t>(8, 0), TensorShape({1, 2, 2, 2}));
  EXPECT_THROW(detail::run_op_eager(def, {x, dy, wrong_shape}, a), InvalidArgumentError);
  EXPECT_THROW(detail::run_op_eager(def, {cast(x, float32), cast(dy, float32), winners}, a), InvalidArgumentError);
  const detail::MaxPoolGradMaskedAttrs same{{{2, 2}, {2, 2}, static_cast<int64_t>(Padding::Same)}, false};
  EXPECT_THROW(detail::run_op_eager(def, {x, dy, winners}, same), InvalidArgumentError);
  // conv2d_epilogue's pool_winners needs a tiling pool of bfloat16 operands.
  detail::Conv2DEpilogueAttrs e;
  e.max_pool = e.pool_winners = true;
  e.pool_ksize = {2, 2}, e.pool_strides = {1, 1};
  const Tensor f = grid_bf16({1, 1, 2, 2}, 12, Specials::kNone);
  EXPECT_THROW(detail::apply_op(detail::OpId::Conv2DEpilogue, {x, f}, e), InvalidArgumentError);
  e.pool_strides = {2, 2};
  EXPECT_THROW(detail::apply_op(detail::OpId::Conv2DEpilogue, {cast(x, float32), cast(f, float32)}, e),
               InvalidArgumentError);
  const std::vector<Tensor> fused = detail::apply_op(detail::OpId::Conv2DEpilogue, {x, f}, e);
  ASSERT_EQ(fused.size(), 3u);
  const Tensor activation = conv2d(x, f, {1, 1}, Padding::Valid);
  EXPECT_TRUE(same_bits(fused[1], activation));
  EXPECT_TRUE(same_bits(fused[0], max_pool2d(activation, {2, 2}, {2, 2}, Padding::Valid)));
  EXPECT_EQ(fused[2].dtype(), uint8);
}

}  // namespace
}  // namespace tg
