// Product epilogues (passes/fuse_product_epilogues.cpp): a dense or convolution layer's product
// takes in its bias, relu and gradient masks, with the bits of the unoptimised graph; what is not
// an epilogue stays.
#include <cstring>

#include "graph/verify.h"
#include "kernels/bf16.h"
#include "kernels/gemm.h"
#include "ops/op.h"
#include "passes/passes.h"
#include "support/graph_util.h"
#include "support/test_util.h"

namespace tg {
namespace {

using testing::count_op;
using testing::same_bits;

// Two dense relu layers and a logits layer, and the gradients of a loss with respect to each
// weight and bias: the forward products take bias + relu (+ the mask) and the bias, the backward
// one relu's gradient and the sum over rows that is b1's gradient.
std::vector<Tensor> dense_step(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2) {
  GradientTape tape;
  for (const Tensor& v : {w1, b1, w2, b2}) tape.watch(v);
  const Tensor h = relu(matmul(x, w1) + b1);
  const Tensor logits = matmul(h, w2) + b2;
  const Tensor loss = reduce_sum(logits);
  std::vector<Tensor> out = tape.gradient(loss, std::vector<Tensor>{w1, b1, w2, b2});
  out.push_back(logits);
  return out;
}

template <class F>
std::vector<Tensor> run(F& f, const std::vector<Tensor>& in) { return f(in[0], in[1], in[2], in[3], in[4]); }

std::vector<Tensor> dense_inputs(int64_t batch) {
  return {random_uniform({batch, 300}, -1, 1, 1), random_uniform({300, 64}, -0.2, 0.2, 2), random_uniform({64}, -0.2, 0.2, 3),
          random_uniform({64, 10}, -0.2, 0.2, 4), random_uniform({10}, -0.2, 0.2, 5)};
}

// At batch 1024 two threads split x w1 by rows, in blocks claimed from each thread's range.
TEST(ProductEpilogues, ADenseLayersProductsTakeInTheirElementwiseWorkWithTheSameBits) {
  detail::set_verify_graphs(true);
  const int threads_before = config::num_threads();
  for (const int threads : {1, 2})
    for (const int64_t batch : {96, 1024}) {
      config::set_num_threads(threads);
      SCOPED_TRACE(::testing::Message() << threads << " threads, batch " << batch);
      const std::vector<Tensor> in = dense_inputs(batch);
      auto optimised = function(dense_step);
      auto plain = function(dense_step, {.optimize = false});
      const std::vector<Tensor> got = run(optimised, in), want = run(plain, in);
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same_bits(got[k], want[k])) << "output " << k;
      const Graph g = optimised.get_concrete_function(in[0], in[1], in[2], in[3], in[4]).optimized_graph();
      // x w1 (+ b1, relu, mask), h w2 (+ b2), and dlogits w2^T (relu's gradient, and its sum over
      // rows for b1). The two weight gradients are products nothing elementwise follows; b2's
      // gradient sums the loss's gradient, not a product.
      EXPECT_EQ(count_op(g, "matmul_epilogue"), 3) << g.to_string();
      EXPECT_EQ(count_op(g, "matmul"), 2) << g.to_string();
      EXPECT_EQ(count_op(g, "sum_to_like"), 1) << g.to_string();
    }
  config::set_num_threads(threads_before);
}

// A convolution layer's forward (relu(conv2d + b) and the mask its gradient reads) on every
// path of the convolution: own kernels (direct windows) and im2col with OpenBLAS, a 1x1 filter
// (a plain product), stride 2, a depthwise filter, one thread and two.
TEST(ProductEpilogues, AConvolutionLayerTakesInItsBiasReluAndMaskWithTheSameBits) {
  detail::set_verify_graphs(true);
  auto layer = [](const Tensor& x, const Tensor& f, const Tensor& b, int64_t stride) {
    GradientTape tape;
    tape.watch(f);
    const Tensor y = relu(conv2d(x, f, {stride, stride}, Padding::Same) + b);
    std::vector<Tensor> out = tape.gradient(reduce_sum(y), std::vector<Tensor>{f});
    out.push_back(y);
    return out;
  };
  struct Case { int64_t k, stride; bool depthwise = false; };
  const int threads_before = config::num_threads();
  for (const bool own : {true, false})
    for (const int threads : {1, 2})
      for (const Case c : {Case{3, 1}, Case{1, 1}, Case{3, 2}, Case{3, 1, true}, Case{3, 2, true}}) {
        SCOPED_TRACE(::testing::Message() << "own " << own << " threads " << threads << " filter " << c.k << " stride "
                                          << c.stride << " depthwise " << c.depthwise);
        const bool was = detail::set_own_avx512_kernels(own);
        config::set_num_threads(threads);
        // Depthwise: the grouped form, one input channel per group (the depthwise kernel's epilogue).
        const int64_t out = c.depthwise ? 5 : 24;
        const Tensor x = random_uniform({9, 12, 12, 5}, -1, 1, 1);
        const Tensor f = random_uniform({c.k, c.k, c.depthwise ? 1 : 5, out}, -0.5, 0.5, 2);
        const Tensor b = random_uniform({out}, -0.5, 0.5, 3);
        auto optimised = function(layer);
        auto plain = function(layer, {.optimize = false});
        const std::vector<Tensor> got = optimised(x, f, b, c.stride), want = plain(x, f, b, c.stride);
        for (std::size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same_bits(got[k], want[k])) << "output " << k;
        EXPECT_EQ(count_op(optimised.get_concrete_function(x, f, b, c.stride).optimized_graph(), "conv2d_epilogue"), 1);
        detail::set_own_avx512_kernels(was);
      }
  config::set_num_threads(threads_before);
}

// ONNX's Clip after a convolution and its bias (maximum, then minimum, with constant bounds;
// relu6 among them), or a relu, is taken in by the convolution, dense or depthwise, on every path: the own
// kernels (in registers) and the other ones (after the stores), one thread and two, 1x1 filters
// and stride 2, a max pool after it (taken in too); NaN inputs (one with a payload) give the
// ops' quiet NaN. A single 56 x 56 image's 1x1 filters are products that two threads split by
// rows (halves, and blocks claimed from each thread's range). Eager, traced and
// traced+optimised agree bit for bit.
TEST(ProductEpilogues, AConvolutionTakesInAClipAfterItsBiasWithTheSameBits) {
  detail::set_verify_graphs(true);
  struct Bounds { float lower, upper; bool relu_only = false; };  // relu_only: relu(y), no clip
  struct Case {
    int64_t k, stride;
    bool depthwise, pool = false;
    int64_t images = 9, size = 12, channels = 5, out = 24;  // depthwise: 40 channels in and out
  };
  const int threads_before = config::num_threads();
  for (const bool own : {true, false})
    for (const int threads : {1, 2})
      for (const Case c : {Case{3, 1, false}, Case{1, 1, false}, Case{3, 2, false}, Case{3, 1, true}, Case{3, 2, true},
                           Case{3, 1, false, true}, Case{1, 1, false, false, 1, 56, 24, 144},
                           Case{1, 1, false, false, 1, 56, 96, 128}})
        for (const Bounds bounds : {Bounds{0.0f, 6.0f}, Bounds{-0.5f, 0.25f}, Bounds{0.0f, 0.0f, true}}) {
          SCOPED_TRACE(::testing::Message() << "own " << own << " threads " << threads << " filter " << c.k << " stride "
                                            << c.stride << " depthwise " << c.depthwise << " pool " << c.pool
                                            << " images " << c.images << " size " << c.size << " bounds "
                                            << bounds.lower << " relu only " << bounds.relu_only);
          auto layer = [bounds, pool = c.pool](const Tensor& x, const Tensor& f, const Tensor& b, int64_t stride) {
            const Tensor y = conv2d(x, f, {stride, stride}, Padding::Same) + b;
            const Tensor clipped =
                bounds.relu_only ? relu(y) : minimum(maximum(y, constant(bounds.lower)), constant(bounds.upper));
            return pool ? max_pool2d(clipped, {2, 2}, {2, 2}, Padding::Same) : clipped;
          };
          const bool was = detail::set_own_avx512_kernels(own);
          config::set_num_threads(threads);
          const int64_t channels = c.depthwise ? 40 : c.channels, out = c.depthwise ? 40 : c.out;
          const TensorShape x_shape({c.images, c.size, c.size, channels});
          std::vector<float> xs = random_uniform(x_shape, -4, 4, 1).to_vector<float>();
          xs[7] = testing::values::kNanF;
          uint32_t payload = 0x7fc01234u;
          std::memcpy(&xs[xs.size() / 2], &payload, sizeof payload);
          const Tensor x = constant(xs, x_shape);
          const Tensor f = random_uniform({c.k, c.k, c.depthwise ? 1 : channels, out}, -2, 2, 2);
          const Tensor b = random_uniform({out}, -0.5, 0.5, 3);
          auto optimised = function(layer);
          auto plain = function(layer, {.optimize = false});
          const Tensor got = optimised(x, f, b, c.stride), traced = plain(x, f, b, c.stride);
          const Tensor eager = layer(x, f, b, c.stride);
          EXPECT_TRUE(same_bits(got, eager));
          EXPECT_TRUE(same_bits(traced, eager));
          const Graph g = optimised.get_concrete_function(x, f, b, c.stride).optimized_graph();
          EXPECT_EQ(count_op(g, "conv2d_epilogue"), 1) << g.to_string();
          EXPECT_EQ(count_op(g, "fused_elementwise"), 0) << g.to_string();
          EXPECT_EQ(count_op(g, "max_pool2d"), 0) << g.to_string();
          detail::set_own_avx512_kernels(was);
        }
  config::set_num_threads(threads_before);
}

// A convolution layer followed by a max pool: relu's gradient (where(mask, dx, 0)) is taken in
// by the pooling gradient before it, and the bias gradient (its sums over all but the channels)
// by that node, with the bits of the unfused graph, for pools that tile the input and pools that
// overlap, one thread and two.
TEST(ProductEpilogues, APoolingGradientTakesInReluGradient) {
  detail::set_verify_graphs(true);
  auto layer = [](const Tensor& x, const Tensor& f, const Tensor& b, int64_t stride) {
    GradientTape tape;
    tape.watch(f);
    tape.watch(b);
    const Tensor h = relu(conv2d(x, f, {1, 1}, Padding::Same) + b);
    const Tensor p = max_pool2d(h, {2, 2}, {stride, stride}, Padding::Same);
    return tape.gradient(reduce_sum(p * p), std::vector<Tensor>{f, b});
  };
  auto optimised = function(layer);
  auto plain = function(layer, {.optimize = false});
  const int threads_before = config::num_threads();
  // 64 images of 12 x 12 are split across two threads (the sums' leaves then straddle threads).
  for (const int threads : {1, 2})
    for (const int64_t stride : {int64_t{2}, int64_t{1}})
      for (const std::vector<int64_t>& shape : {std::vector<int64_t>{6, 10, 10, 3}, std::vector<int64_t>{64, 12, 12, 3}}) {
      SCOPED_TRACE(::testing::Message() << "threads " << threads << " stride " << stride << " batch " << shape[0]);
      config::set_num_threads(threads);
      const Tensor x = random_uniform(shape, -1, 1, 1), f = random_uniform({3, 3, 3, 16}, -0.5, 0.5, 2);
      const Tensor b = random_uniform({16}, -0.5, 0.5, 3);
      const std::vector<Tensor> got = optimised(x, f, b, stride), want = plain(x, f, b, stride);
      for (std::size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same_bits(got[k], want[k])) << "output " << k;
      const Graph g = optimised.get_concrete_function(x, f, b, stride).optimized_graph();
      EXPECT_EQ(count_op(g, "max_pool2d_grad_masked"), 1) << g.to_string();
      EXPECT_EQ(count_op(g, "max_pool2d_grad"), 0) << g.to_string();
      EXPECT_EQ(count_op(g, "sum_to_like"), 0) << g.to_string();  // the bias gradient, taken in
    }
  config::set_num_threads(threads_before);
}

// Over a None batch the node runs at every batch size; a mask that broadcasts at run time (one
// row against four) leaves the product's shape, and the ops then run one by one, as unfused.
TEST(ProductEpilogues, NoneDimsRunAtAnySizeAndBroadcastingRunsTheOpsOneByOne) {
  const std::vector<TensorSpec> specs = {TensorSpec({None, 300}, float32), TensorSpec({300, 64}, float32),
                                         TensorSpec({64}, float32), TensorSpec({64, 10}, float32),
                                         TensorSpec({10}, float32)};
  auto optimised = function(dense_step, {.input_signature = specs});
  auto plain = function(dense_step, {.input_signature = specs, .optimize = false});
  for (const int64_t batch : {int64_t{96}, int64_t{1}, int64_t{7}}) {
    SCOPED_TRACE(::testing::Message() << "batch " << batch);
    const std::vector<Tensor> in = dense_inputs(batch);
    const std::vector<Tensor> got = run(optimised, in), want = run(plain, in);
    for (std::size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same_bits(got[k], want[k])) << "output " << k;
  }
  const std::vector<Tensor> three = dense_inputs(3);
  EXPECT_EQ(count_op(optimised.get_concrete_function(three[0], three[1], three[2], three[3], three[4]).optimized_graph(),
                     "matmul_epilogue"),
            3);

  auto masked = [](const Tensor& x, const Tensor& w, const Tensor& mask) {
    const Tensor z = matmul(x, w);
    return where(mask, z, zeros_like(z));
  };
  const std::vector<TensorSpec> masked_specs = {TensorSpec({None, 8}, float32), TensorSpec({8, 5}, float32),
                                                TensorSpec({None, 5}, bool_)};
  auto fused = function(masked, {.input_signature = masked_specs});
  auto unfused = function(masked, {.input_signature = masked_specs, .optimize = false});
  const Tensor a = random_uniform({4, 8}, -1, 1, 6), b = random_uniform({8, 5}, -1, 1, 7);
  for (const Tensor& mask : {greater(random_uniform({4, 5}, -1, 1, 8), constant(0.0f)),
                             greater(random_uniform({1, 5}, -1, 1, 9), constant(0.0f))}) {
    SCOPED_TRACE("mask " + mask.shape().to_string());
    EXPECT_TRUE(same_bits(fused(a, b, mask), unfused(a, b, mask)));
  }
  const Tensor mask = greater(random_uniform({4, 5}, -1, 1, 10), constant(0.0f));
  EXPECT_EQ(count_op(fused.get_concrete_function(a, b, mask).optimized_graph(), "matmul_epilogue"), 1);
}

// A dense layer's bias gradient, the sum over rows of relu's gradient, is added up inside the
// product that makes it, with reduce_sum's bits: biases shaped (n) and (1, n), batches whose
// leaves of reduce_sum's order split unevenly, one thread and two, own kernels and OpenBLAS. A
// layer of one unit, and a batch of one, keep their sum_to_like (reduce_sum sums those
// differently).
TEST(ProductEpilogues, ABiasGradientIsSummedInTheProductThatMakesIt) {
  detail::set_verify_graphs(true);
  auto layer = [](const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2) {
    GradientTape tape;
    tape.watch(b1);
    const Tensor h = relu(matmul(x, w1) + b1);
    const Tensor out = matmul(h, w2);
    return tape.gradient(reduce_sum(out * out), b1);
  };
  struct Case { int64_t batch, units; bool keepdims; int sums_left; };
  auto optimised = function(layer);
  auto plain = function(layer, {.optimize = false});
  const int threads_before = config::num_threads();
  for (const bool own : {true, false})
    for (const int threads : {1, 2})
      for (const Case c : {Case{128, 256, false, 0}, Case{91, 96, true, 0}, Case{33, 40, false, 0}, Case{16, 1, false, 1},
                           Case{1, 40, false, 1}}) {
        SCOPED_TRACE(::testing::Message() << "own " << own << " threads " << threads << " batch " << c.batch << " units "
                                          << c.units << " keepdims " << c.keepdims);
        const bool was = detail::set_own_avx512_kernels(own);
        config::set_num_threads(threads);
        const Tensor x = random_uniform({c.batch, 300}, -1, 1, 1), w1 = random_uniform({300, c.units}, -0.2, 0.2, 2);
        const Tensor b1 = random_uniform(c.keepdims ? TensorShape{1, c.units} : TensorShape{c.units}, -0.2, 0.2, 3);
        const Tensor w2 = random_uniform({c.units, 10}, -0.2, 0.2, 4);
        EXPECT_TRUE(same_bits(optimised(x, w1, b1, w2), plain(x, w1, b1, w2)));
        const Graph g = optimised.get_concrete_function(x, w1, b1, w2).optimized_graph();
        EXPECT_EQ(count_op(g, "sum_to_like"), c.sums_left) << g.to_string();
        detail::set_own_avx512_kernels(was);
      }
  config::set_num_threads(threads_before);
}

// What is not an epilogue stays as it was: a product read twice, a bias added on the left, a
// bias that broadcasts, an op the epilogue does not have, float64, a mask before the bias.
TEST(ProductEpilogues, WhatIsNotAnEpilogueStaysAsItWas) {
  const Tensor x = random_uniform({6, 8}, -1, 1, 1), w = random_uniform({8, 4}, -1, 1, 2);
  const Tensor b = random_uniform({4}, -1, 1, 3), one = random_uniform({1}, -1, 1, 4);
  using Body = std::function<Tensor(const std::vector<Tensor>&)>;
  const std::vector<std::pair<const char*, Body>> bodies = {
      {"product read twice", [](const std::vector<Tensor>& in) { const Tensor z = matmul(in[0], in[1]); return relu(z + in[2]) + z; }},
      {"bias on the left", [](const std::vector<Tensor>& in) { return relu(in[2] + matmul(in[0], in[1])); }},
      {"a bias of one value", [](const std::vector<Tensor>& in) { return relu(matmul(in[0], in[1]) + in[3]); }},
      {"tanh", [](const std::vector<Tensor>& in) { return tanh(matmul(in[0], in[1]) + in[2]); }},
      {"float64", [](const std::vector<Tensor>& in) { return relu(matmul(cast(in[0], float64), cast(in[1], float64)) + cast(in[2], float64)); }},
      {"mask before the bias", [](const std::vector<Tensor>& in) {
         const Tensor z = matmul(in[0], in[1]);
         return where(greater(z, zeros_like(z)), z + in[2], zeros_like(z));
       }},
  };
  for (const auto& [label, body] : bodies) {
    SCOPED_TRACE(label);
    const std::vector<Tensor> in = {x, w, b, one};
    auto optimised = function(body);
    auto plain = function(body, {.optimize = false});
    EXPECT_TRUE(same_bits(optimised(in), plain(in)));
    const Graph g = optimised.get_concrete_function(in).optimized_graph();
    EXPECT_EQ(count_op(g, "matmul_epilogue"), 0) << g.to_string();
  }
}

// bfloat16 dense layers (elementwise ops not fused): the products take in the bias, relu and its
// mask, and relu's gradient, rounding as the ops apart do (each op rounds its own result), on one
// thread and two and with rows split over the pool (batch 600).
TEST(ProductEpilogues, BFloat16DenseLayersTakeInBiasReluAndMasksWithTheBitsOfTheOpsApart) {
  detail::set_verify_graphs(true);
  const int threads_before = config::num_threads();
  for (const int threads : {1, 2})
    for (const int64_t batch : {96, 600}) {
      config::set_num_threads(threads);
      SCOPED_TRACE(::testing::Message() << threads << " threads, batch " << batch);
      std::vector<Tensor> in = dense_inputs(batch);
      for (Tensor& t : in) t = cast(t, bfloat16);
      auto optimised = function(dense_step);
      auto plain = function(dense_step, {.optimize = false});
      const std::vector<Tensor> got = run(optimised, in), want = run(plain, in), eager = dense_step(in[0], in[1], in[2], in[3], in[4]);
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t k = 0; k < got.size(); ++k) {
        EXPECT_EQ(got[k].dtype(), bfloat16);
        EXPECT_TRUE(same_bits(got[k], want[k])) << "output " << k;
        EXPECT_TRUE(same_bits(got[k], eager[k])) << "output " << k;
      }
      const Graph g = optimised.get_concrete_function(in[0], in[1], in[2], in[3], in[4]).optimized_graph();
      // x w1 (+ b1, relu, mask), h w2 (+ b2), dlogits w2^T (relu's gradient and its sums, b1's
      // gradient); b2's gradient, the sum of dlogits (no product's result), stays a node.
      EXPECT_EQ(count_op(g, "matmul_epilogue"), 3) << g.to_string();
      EXPECT_EQ(count_op(g, "matmul"), 2) << g.to_string();
      EXPECT_EQ(count_op(g, "sum_to_like"), 1) << g.to_string();
      for (const char* op : {"relu", "greater", "where", "add"}) EXPECT_EQ(count_op(g, op), 0) << op << "\n" << g.to_string();
    }
  config::set_num_threads(threads_before);
}

// A mixed-precision layer's bias gradient (bfloat16 compute, float32 weights cast at use) is
// summed in the bfloat16 product that makes it, by the part that stores each leaf's rows, with
// the bits of the unoptimised graph and of eager: rows split over two threads with every leaf in
// one part (128, 600) or one leaf across both (300 by 96: the parts meet at row 148, inside
// the leaf of rows 112-149, which the product leaves to be summed after), one thread, the
// instructions off (the float32 fallback), a (1, n) bias, an empty batch; one row or one column
// stays a sum_to_like.
TEST(ProductEpilogues, BFloat16BiasGradientIsSummedInTheProductThatMakesIt) {
  detail::set_verify_graphs(true);
  auto layer = [](const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2) {
    GradientTape tape;
    tape.watch(b1);
    const Tensor h = relu(matmul(x, cast(w1, bfloat16)) + cast(b1, bfloat16));
    const Tensor out = matmul(h, cast(w2, bfloat16));
    return tape.gradient(reduce_sum(out * out), b1);
  };
  struct Case { int64_t batch, units; bool keepdims; int sums_left; };
  auto optimised = function(layer);
  auto plain = function(layer, {.optimize = false});
  const int threads_before = config::num_threads();
  for (const bool instructions : {true, false})
    for (const int threads : {1, 2})
      for (const Case c : {Case{128, 256, false, 0}, Case{91, 96, true, 0}, Case{300, 96, false, 0}, Case{600, 64, false, 0},
                           Case{33, 40, false, 0}, Case{16, 1, false, 1}, Case{1, 40, false, 1}, Case{0, 40, false, 0}}) {
        SCOPED_TRACE(::testing::Message() << "instructions " << instructions << " threads " << threads << " batch "
                                          << c.batch << " units " << c.units << " keepdims " << c.keepdims);
        const bool was = detail::set_bf16_gemm_instructions(instructions);
        config::set_num_threads(threads);
        const Tensor x = cast(random_uniform({c.batch, 300}, -1, 1, 1), bfloat16);
        const Tensor w1 = random_uniform({300, c.units}, -0.2, 0.2, 2);
        const Tensor b1 = random_uniform(c.keepdims ? TensorShape{1, c.units} : TensorShape{c.units}, -0.2, 0.2, 3);
        const Tensor w2 = random_uniform({c.units, 10}, -0.2, 0.2, 4);
        const Tensor got = optimised(x, w1, b1, w2);
        EXPECT_EQ(got.dtype(), float32);
        EXPECT_TRUE(same_bits(got, plain(x, w1, b1, w2)));
        EXPECT_TRUE(same_bits(got, layer(x, w1, b1, w2)));
        const Graph g = optimised.get_concrete_function(x, w1, b1, w2).optimized_graph();
        EXPECT_EQ(count_op(g, "sum_to_like"), c.sums_left) << g.to_string();
        // w2's cast is taken into the packing of the product with the sums (w1's into x w1's; w2's
        // stays for h w2, a plain matmul): b1's, w2's and the gradient's to float32 stay. A (1, n)
        // bias is not taken into x w1 (bfloat16 products take (n) biases): w1's cast stays too.
        EXPECT_EQ(count_op(g, "cast"), c.keepdims ? 4 : 3) << g.to_string();
        EXPECT_EQ(count_op(g, "matmul_epilogue"), c.keepdims ? 1 : 2) << g.to_string();
        detail::set_bf16_gemm_instructions(was);
      }
  config::set_num_threads(threads_before);
}

// Sums that round to zero in bfloat16 but not in float32 (the mask looks at the rounded value),
// negative zeros and ties: the bits of the ops apart.
TEST(ProductEpilogues, BFloat16EpilogueMasksTheRoundedValues) {
  detail::set_verify_graphs(true);
  // x: tiny values whose products (1e-42) are float32 subnormals that round to zero in bfloat16.
  const float tiny = 1e-21f;
  const Tensor x = cast(constant(std::vector<float>{tiny, 0.0f, -0.0f, 1.0f, tiny, -tiny, 3.0f, -1.0f}, {4, 2}), bfloat16);
  const Tensor w = cast(constant(std::vector<float>{tiny, -tiny, 1.0f, 0.0f, 1.00390625f, -2.0f}, {2, 3}), bfloat16);
  const Tensor b = cast(constant(std::vector<float>{0.0f, -0.0f, 0.00390625f}, {3}), bfloat16);
  auto body = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    GradientTape tape;
    tape.watch(w);
    const Tensor y = relu(matmul(x, w) + b);
    std::vector<Tensor> out = tape.gradient(reduce_sum(y), std::vector<Tensor>{w});
    out.push_back(y);
    return out;
  };
  auto optimised = function(body);
  auto plain = function(body, {.optimize = false});
  const std::vector<Tensor> got = optimised(x, w, b), want = plain(x, w, b);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same_bits(got[k], want[k])) << "output " << k;
  EXPECT_EQ(count_op(optimised.get_concrete_function(x, w, b).optimized_graph(), "matmul_epilogue"), 1);
}

// A bfloat16 layer whose value before relu is read elsewhere takes in its bias only; a product
// read twice, a bias of one value or of float32 takes in nothing.
TEST(ProductEpilogues, BFloat16WhatIsNotAnEpilogueStays) {
  const Tensor x = cast(random_uniform({6, 8}, -1, 1, 1), bfloat16), w = cast(random_uniform({8, 4}, -1, 1, 2), bfloat16);
  const Tensor b = cast(random_uniform({4}, -1, 1, 3), bfloat16), one = cast(random_uniform({1}, -1, 1, 4), bfloat16);
  using Body = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
  struct Case { const char* label; Body body; int epilogues; };
  const std::vector<Case> cases = {
      {"value before relu read", [](const std::vector<Tensor>& in) {
         const Tensor z = matmul(in[0], in[1]) + in[2];
         return std::vector<Tensor>{relu(z), z};
       }, 1},
      {"product read twice", [](const std::vector<Tensor>& in) {
         const Tensor z = matmul(in[0], in[1]);
         return std::vector<Tensor>{relu(z + in[2]) + z};
       }, 0},
      {"a bias of one value", [](const std::vector<Tensor>& in) { return std::vector<Tensor>{relu(matmul(in[0], in[1]) + in[3])}; }, 0},
      {"mask before the bias", [](const std::vector<Tensor>& in) {
         const Tensor z = matmul(in[0], in[1]);
         return std::vector<Tensor>{where(greater(z, zeros_like(z)), z + in[2], zeros_like(z))};
       }, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.label);
    const std::vector<Tensor> in = {x, w, b, one};
    auto optimised = function(c.body);
    auto plain = function(c.body, {.optimize = false});
    const std::vector<Tensor> got = optimised(in), want = plain(in);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same_bits(got[k], want[k])) << "output " << k;
    const Graph g = optimised.get_concrete_function(in).optimized_graph();
    EXPECT_EQ(count_op(g, "matmul_epilogue"), c.epilogues) << g.to_string();
  }
  // An epilogue node of bfloat16 operands and a float32 bias is refused, as add refuses it.
  EXPECT_THROW(detail::apply_op1(detail::OpId::MatMulEpilogue, {x, w, cast(b, float32)},
                                 detail::MatMulEpilogueAttrs{false, false, true, false, false, false}),
               InvalidArgumentError);
}

}  // namespace
}  // namespace tg
