// bfloat16 convolution layers in optimised graphs: conv2d + bias add + relu (and relu's gradient
// mask) become one conv2d_epilogue, which rounds each op's result as the ops apart do - the bits
// of the unoptimised graph and of eager, forward and through the tape, for SAME and VALID
// padding, strides, odd sizes, channel counts that are not multiples of 16, one thread and two.
// Random values: the convolution's sums and the bias additions need rounding.
#include <cmath>
#include <string>
#include <vector>

#include "graph/verify.h"
#include "ops/op.h"
#include "passes/passes.h"
#include "support/graph_util.h"
#include "support/test_util.h"

namespace tg {
namespace {

using testing::count_op;
using testing::same_bits;
using Dims = std::vector<int64_t>;

struct LayerCase {
  std::string label;
  Dims x, f;
  int64_t stride;
  Padding padding;
};

const std::vector<LayerCase>& layer_cases() {
  static const std::vector<LayerCase> c{
      {"3x3 SAME 1->32 (the CNN's first layer)", {8, 12, 12, 1}, {3, 3, 1, 32}, 1, Padding::Same},
      {"3x3 SAME 32->64, 70 images", {70, 7, 7, 32}, {3, 3, 32, 64}, 1, Padding::Same},
      {"3x3 VALID stride 2, 9x7, 5->20", {3, 9, 7, 5}, {3, 3, 5, 20}, 2, Padding::Valid},
      {"1x1 SAME 8->3", {2, 5, 6, 8}, {1, 1, 8, 3}, 1, Padding::Same},
  };
  return c;
}

Tensor bf(const Dims& d, double scale, uint64_t seed) { return cast(random_uniform(d, -scale, scale, seed), bfloat16); }

// The layer's output, and the gradients of a loss through it and a max pool (as in the CNN:
// relu's result read by no other elementwise op) with respect to x, f and b.
std::vector<Tensor> layer_step(const Tensor& x, const Tensor& f, const Tensor& b, const Tensor& w, int64_t stride,
                               int64_t padding) {
  GradientTape tape;
  tape.watch(x);
  tape.watch(f);
  tape.watch(b);
  const Tensor h = relu(conv2d(x, f, {stride, stride}, static_cast<Padding>(padding)) + b);
  const Tensor p = max_pool2d(h, {2}, {2}, Padding::Same);
  const std::vector<Tensor> g = tape.gradient(reduce_sum(p * w), std::vector<Tensor>{x, f, b});
  return {h, g[0], g[1], g[2]};
}
Dims pooled(const Dims& y) { return {y[0], (y[1] + 1) / 2, (y[2] + 1) / 2, y[3]}; }

TEST(ConvEpilogueBFloat16, ALayerTakesInBiasReluAndMaskWithTheBitsOfTheOpsApart) {
  detail::set_verify_graphs(true);
  auto optimised = function(layer_step);
  auto plain = function(layer_step, {.optimize = false});
  const int threads_before = config::num_threads();
  for (const int threads : {1, 2})
    for (const LayerCase& c : layer_cases()) {
      config::set_num_threads(threads);
      SCOPED_TRACE(::testing::Message() << c.label << ", " << threads << " threads");
      const Tensor x = bf(c.x, 1.0, 1), f = bf(c.f, 0.5, 2), b = bf({c.f[3]}, 0.5, 3);
      const int64_t pad = static_cast<int64_t>(c.padding);
      const Tensor y = conv2d(x, f, {c.stride, c.stride}, c.padding);
      const Tensor w = bf(pooled(y.shape().dims()), 1.0, 4);
      const std::vector<Tensor> got = optimised(x, f, b, w, c.stride, pad), want = plain(x, f, b, w, c.stride, pad),
                                eager = layer_step(x, f, b, w, c.stride, pad);
      ASSERT_EQ(got.size(), 4u);
      for (std::size_t k = 0; k < got.size(); ++k) {
        EXPECT_EQ(got[k].dtype(), bfloat16);
        EXPECT_TRUE(same_bits(got[k], want[k])) << "output " << k;
        EXPECT_TRUE(same_bits(got[k], eager[k])) << "output " << k;
      }
      // The forward by hand: conv2d rounded, + b rounded, relu.
      EXPECT_TRUE(same_bits(got[0], relu(y + b)));
      const Graph g = optimised.get_concrete_function(x, f, b, w, c.stride, pad).optimized_graph();
      EXPECT_EQ(count_op(g, "conv2d_epilogue"), 1) << g.to_string();
      for (const char* op : {"conv2d", "relu", "greater"}) EXPECT_EQ(count_op(g, op), 0) << op << "\n" << g.to_string();
    }
  config::set_num_threads(threads_before);
}

// Special values through the epilogue's single pass: infinities and NaNs in x (products of inf
// and NaN), a bias with a NaN, an infinity, -0 and values whose sums round to ties; the
// forward's relu, mask and rounding keep the bits of the ops apart.
TEST(ConvEpilogueBFloat16, SpecialValuesKeepTheBitsOfTheOpsApart) {
  detail::set_verify_graphs(true);
  auto optimised = function(layer_step);
  auto plain = function(layer_step, {.optimize = false});
  const int threads_before = config::num_threads();
  const Dims xd{6, 8, 8, 3}, fd{3, 3, 3, 19};
  std::vector<float> xv = cast(bf(xd, 1.0, 21), float32).to_vector<float>();
  for (std::size_t i = 0; i < xv.size(); i += 97) xv[i] = INFINITY;
  for (std::size_t i = 40; i < xv.size(); i += 131) xv[i] = -INFINITY;
  for (std::size_t i = 7; i < xv.size(); i += 211) xv[i] = std::nanf("");
  std::vector<float> bv = cast(bf({fd[3]}, 0.5, 22), float32).to_vector<float>();
  bv[1] = std::nanf(""), bv[2] = INFINITY, bv[3] = -0.0f, bv[4] = 1.0f + 1.0f / 256.0f, bv[5] = -3.0f;
  const Tensor x = cast(constant(xv, TensorShape(xd)), bfloat16), f = bf(fd, 0.5, 23);
  const Tensor b = cast(constant(bv, TensorShape({fd[3]})), bfloat16);
  for (const int threads : {1, 2}) {
    config::set_num_threads(threads);
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    const Tensor y = conv2d(x, f, {1, 1}, Padding::Same);
    const Tensor w = bf(pooled(y.shape().dims()), 1.0, 24);
    const int64_t pad = static_cast<int64_t>(Padding::Same);
    const std::vector<Tensor> got = optimised(x, f, b, w, 1, pad), want = plain(x, f, b, w, 1, pad);
    ASSERT_EQ(got.size(), 4u);
    for (std::size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same_bits(got[k], want[k])) << "output " << k;
    EXPECT_TRUE(same_bits(got[0], relu(y + b)));
    EXPECT_EQ(count_op(optimised.get_concrete_function(x, f, b, w, 1, pad).optimized_graph(), "conv2d_epilogue"), 1);
  }
  config::set_num_threads(threads_before);
}

// Without relu the bias alone is taken in; where the sum before relu is read by another op too,
// relu is not taken in. Same bits either way.
TEST(ConvEpilogueBFloat16, TheBiasAloneWhenReluIsNotTheOnlyReader) {
  detail::set_verify_graphs(true);
  auto bias_only = [](const Tensor& x, const Tensor& f, const Tensor& b) { return conv2d(x, f, {1, 1}, Padding::Same) + b; };
  auto shared = [](const Tensor& x, const Tensor& f, const Tensor& b) {
    const Tensor s = conv2d(x, f, {2, 2}, Padding::Valid) + b;
    return std::vector<Tensor>{relu(s), s * s};
  };
  const Tensor x = bf({3, 9, 8, 4}, 1.0, 11), f = bf({3, 3, 4, 24}, 0.5, 12), b = bf({24}, 0.5, 13);
  auto o1 = function(bias_only);
  auto p1 = function(bias_only, {.optimize = false});
  EXPECT_TRUE(same_bits(o1(x, f, b), p1(x, f, b)));
  EXPECT_TRUE(same_bits(o1(x, f, b), bias_only(x, f, b)));
  EXPECT_EQ(count_op(o1.get_concrete_function(x, f, b).optimized_graph(), "conv2d_epilogue"), 1);
  auto o2 = function(shared);
  auto p2 = function(shared, {.optimize = false});
  const std::vector<Tensor> got = o2(x, f, b), want = p2(x, f, b);
  for (std::size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same_bits(got[k], want[k])) << "output " << k;
  const Graph g = o2.get_concrete_function(x, f, b).optimized_graph();
  EXPECT_EQ(count_op(g, "relu") + count_op(g, "fused_elementwise"), 1) << g.to_string();
}

// Over the layer's op nodes (bfloat16 elementwise ops left unfused): add(conv2d, b) read by relu
// and by greater(add, zeros_like(add)) becomes one conv2d_epilogue with the bias and relu; the
// pooling gradient that took in relu's gradient reads its mask off relu's result (mask source =
// the epilogue's output 0), so the epilogue writes no mask; the graph stays well formed.
TEST(ConvEpilogueBFloat16, TheLayersOpNodesBecomeOneEpilogueNode) {
  const LayerCase& c = layer_cases()[0];
  const Tensor x = bf(c.x, 1.0, 1), f = bf(c.f, 0.5, 2), b = bf({c.f[3]}, 0.5, 3);
  const Tensor w = bf(pooled(conv2d(x, f, {1, 1}, c.padding).shape().dims()), 1.0, 4);
  auto ir = testing::trace_graph(
      [](const std::vector<Tensor>& in) { return layer_step(in[0], in[1], in[2], in[3], 1, static_cast<int64_t>(Padding::Same)); },
      {x, f, b, w});
  ASSERT_EQ(count_op(*ir, "conv2d"), 1);
  ASSERT_EQ(count_op(*ir, "relu"), 1);
  detail::fuse_product_epilogues(*ir);
  detail::eliminate_dead_code(*ir);
  detail::verify_graph(*ir, "fuse_product_epilogues");
  EXPECT_EQ(count_op(*ir, "conv2d_epilogue"), 1);
  for (const char* op : {"conv2d", "relu", "greater", "add"}) EXPECT_EQ(count_op(*ir, op), 0) << op;
  for (const auto& node : ir->nodes) {
    if (node.op_name() != "conv2d_epilogue") continue;
    const auto& a = node.attrs.get<detail::Conv2DEpilogueAttrs>();
    EXPECT_TRUE(a.bias && a.relu && !a.mask_out && !a.mask_in);
    EXPECT_EQ(node.outputs.size(), 1u);
  }
  int masked = 0;
  for (const auto& node : ir->nodes) {
    if (node.op_name() != "max_pool2d_grad_masked") continue;
    ++masked;
    ASSERT_EQ(node.inputs.size(), 3u);
    EXPECT_TRUE(node.inputs[2] == node.inputs[0]);
    EXPECT_EQ(ir->node_of(node.inputs[0]).op_name(), "conv2d_epilogue");
  }
  EXPECT_EQ(masked, 1);
}

// The masked pooling gradient with its mask's source a floating tensor m (mask m > 0): the same
// bits as with the bool mask, whether m is x itself (the bfloat16 kernel reads m > 0 off each
// window's maximum) or another tensor; windows that tile and overlapping ones; NaN and -0 in x.
TEST(ConvEpilogueBFloat16, AMaskReadOffItsSourceGivesTheBoolMasksBits) {
  for (const bool tiled : {true, false}) {
    SCOPED_TRACE(tiled ? "tiled" : "overlapping");
    const detail::Pool2DAttrs pa{{2, 2}, {tiled ? 2 : 1, tiled ? 2 : 1}, static_cast<int64_t>(Padding::Same)};
    std::vector<float> xv = cast(bf({5, 6, 7, 19}, 1.0, 31), float32).to_vector<float>();
    for (std::size_t i = 0; i < xv.size(); i += 13) xv[i] = -0.0f;
    for (std::size_t i = 5; i < xv.size(); i += 101) xv[i] = std::nanf("");
    for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = xv[i] < 0.0f ? 0.0f : xv[i];  // relu's result
    const Tensor x = cast(constant(xv, TensorShape({5, 6, 7, 19})), bfloat16);
    const Tensor dy = bf(max_pool2d(x, {2}, {tiled ? 2 : 1}, Padding::Same).shape().dims(), 1.0, 32);
    const Tensor m = greater(x, cast(zeros({5, 6, 7, 19}), bfloat16));
    for (const bool sums : {false, true}) {
      const detail::MaxPoolGradMaskedAttrs a{pa, sums};
      const auto& def = detail::op_def(detail::OpId::MaxPool2DGradMasked);
      const std::vector<Tensor> want = detail::run_op_eager(def, {x, dy, m}, a);
      const std::vector<Tensor> self = detail::run_op_eager(def, {x, dy, x}, a);
      const Tensor copy = cast(cast(x, float32), bfloat16);  // the same bits in another tensor
      const std::vector<Tensor> other = detail::run_op_eager(def, {x, dy, copy}, a);
      for (std::size_t k = 0; k < want.size(); ++k) {
        EXPECT_TRUE(same_bits(self[k], want[k])) << "output " << k;
        EXPECT_TRUE(same_bits(other[k], want[k])) << "output " << k;
      }
    }
  }
}

}  // namespace
}  // namespace tg
