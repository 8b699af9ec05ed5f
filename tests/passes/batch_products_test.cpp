// Product batching (passes/batch_products.cpp): the independent products x_t W of an unrolled
// recurrent cell become one product of the stacked x_t, with the bits of the products apart.
#include <cmath>
#include <tuple>

#include "graph/verify.h"
#include "passes/batch_products.h"
#include "passes/passes.h"
#include "ops/matmul.h"
#include "support/graph_util.h"
#include "support/unrolled_lstm.h"
#include "support/test_util.h"
#include "tracegraph/gradient.h"

namespace tg {
namespace {

using testing::count_op;
using testing::same_bits;

constexpr int64_t kBatch = 32, kSteps = 5, kIn = 16, kUnits = 64;  // the batch: 160 x 256

// The same steps with the cell's arithmetic written out (nn/recurrent.cpp's lstm_step), so that
// the tape also gives the pre-activations' gradients dz_t: {loss, stacked x_t, stacked h_{t-1},
// stacked dz_t}, the operands of the weight gradients' sums.
std::vector<Tensor> unrolled_step_operands(const nn::LSTMCell& cell, const Tensor& x) {
  const std::vector<Variable> vars = cell.trainable_variables();
  GradientTape tape;
  const Tensor kernel = vars[0].read_value(), recurrent = vars[1].read_value(), bias = vars[2].read_value();
  const Tensor steps = transpose(x, {1, 0, 2});
  Tensor h = zeros({kBatch, kUnits}), c = zeros({kBatch, kUnits});
  std::vector<Tensor> xs, hs, zs;
  auto gate = [](const Tensor& z, int64_t k) { return slice(z, {0, k * kUnits}, {-1, kUnits}); };
  for (int64_t t = 0; t < kSteps; ++t) {
    xs.push_back(steps[t]);
    hs.push_back(h);
    const Tensor z = matmul(steps[t], kernel) + matmul(h, recurrent) + bias;
    tape.watch(z);
    zs.push_back(z);
    c = sigmoid(gate(z, 1)) * c + sigmoid(gate(z, 0)) * tanh(gate(z, 2));
    h = sigmoid(gate(z, 3)) * tanh(c);
  }
  const Tensor loss = reduce_sum(h * h);
  const std::vector<Tensor> dz = tape.gradient(loss, zs);
  return {loss, concat(xs, 0), concat(hs, 0), concat(dz, 0)};
}

// Both results are float32 sums of the same n products a_i b_j in some order, each within
// gamma_n (|a|^T |b|) of the exact sum (gamma_n = n u / (1 - n u), u = 2^-24): they differ by at
// most twice that. |a|^T |b| is computed in float32 (a sum of non-negative terms, at least
// (1 - gamma_n) times its exact value), which the bound divides out.
void expect_within_sum_bound(const Tensor& fast, const Tensor& expected, const Tensor& a, const Tensor& b, bool transpose_a,
                             int64_t n) {
  ASSERT_EQ(fast.shape(), expected.shape());
  const double u = std::ldexp(1.0, -24), gamma = static_cast<double>(n) * u / (1 - static_cast<double>(n) * u);
  const Tensor magnitude = matmul(abs(a), abs(b), transpose_a);
  ASSERT_EQ(magnitude.shape(), expected.shape());
  const std::vector<float> got = fast.to_vector<float>(), want = expected.to_vector<float>(), m = magnitude.to_vector<float>();
  int outside = 0;
  double worst = 0;  // the largest |difference| / bound
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double bound = 2 * gamma * static_cast<double>(m[i]) / (1 - gamma);
    const double diff = std::fabs(static_cast<double>(got[i]) - static_cast<double>(want[i]));
    if (!(diff <= bound)) ++outside;
    if (bound > 0) worst = std::max(worst, diff / bound);
  }
  EXPECT_EQ(outside, 0) << "elements outside 2 gamma_" << n << " |a|^T |b|; worst ratio " << worst;
}

TEST(BatchProducts, AnUnrolledCellsProductsBecomeOne) {
  if (!detail::matmul_on_own_kernels()) GTEST_SKIP() << "the pass batches only on the AVX-512 kernels";
  detail::set_verify_graphs(true);
  const int threads_before = config::num_threads();
  const nn::LSTMCell cell(kIn, kUnits, 3);
  const Tensor x = random_uniform({kBatch, kSteps, kIn}, -1, 1, 7);
  auto optimised = function([&](const Tensor& in) { return testing::unrolled_lstm_step(cell, in, kUnits); });
  auto plain = function([&](const Tensor& in) { return testing::unrolled_lstm_step(cell, in, kUnits); }, {.optimize = false});
  auto plain_operands = function([&](const Tensor& in) { return unrolled_step_operands(cell, in); }, {.optimize = false});
  for (const int threads : {1, 2}) {
    config::set_num_threads(threads);
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    const std::vector<Tensor> fast = optimised(x), expected = plain(x);
    ASSERT_EQ(fast.size(), 4u);  // loss, then the gradients of kernel, recurrent_kernel, bias
    ASSERT_EQ(expected.size(), 4u);
    // The forward batch and the sums of the bias gradient keep their bits.
    EXPECT_TRUE(same_bits(fast[0], expected[0])) << "loss";
    EXPECT_TRUE(same_bits(fast[3], expected[3])) << "bias gradient";
    // The weight gradients, sum_t x_t^T dz_t and sum_t h_{t-1}^T dz_t, are one product each.
    const std::vector<Tensor> operands = plain_operands(x);
    ASSERT_TRUE(same_bits(operands[0], expected[0])) << "the written-out step is not the cell's";
    expect_within_sum_bound(fast[1], expected[1], operands[1], operands[3], true, kSteps * kBatch);
    expect_within_sum_bound(fast[2], expected[2], operands[2], operands[3], true, kSteps * kBatch);
  }
  config::set_num_threads(threads_before);
  // Forward: one x W for all steps and one h U per step (the first h is zeros but still a
  // product); backward: one product for each weight's gradient, and dz U^T but for the first
  // step. The steps' x W are index views, and x^T dz stacks x_t as the forward batch does: one
  // concatenation of x_t (the stacked dz_t are shared too). Each step's dz is the concatenation
  // of its four gates' gradients.
  const Graph graph = optimised.get_concrete_function(x).optimized_graph();
  EXPECT_EQ(count_op(graph, "matmul"), 1 + kSteps + 2 + kSteps - 1) << graph.to_string();
  EXPECT_EQ(count_op(graph, "concat"), 3 + kSteps) << graph.to_string();
  EXPECT_GE(count_op(graph, "index"), kSteps) << graph.to_string();
}

// The pass on a graph of its own: products of one Variable's reads with no write between them
// batch, in batches of bounded size; a write between two reads, a left operand made from another
// product, or a k that could split over k keep them apart.
TEST(BatchProducts, OnlyIndependentProductsOfOneValueBatch) {
  if (!detail::matmul_on_own_kernels()) GTEST_SKIP() << "the pass batches only on the AVX-512 kernels";
  detail::set_verify_graphs(true);
  Variable w(random_uniform({16, 24}, -1, 1, 1), "w");
  const Tensor a = random_uniform({4, 16}, -1, 1, 2), b = random_uniform({4, 16}, -1, 1, 3);
  const Tensor wide = random_uniform({64, 24}, -1, 1, 4);
  auto count_after_pass = [](auto fn, const std::vector<Tensor>& args) {
    std::shared_ptr<detail::GraphIR> g =
        testing::trace_graph([&](const std::vector<Tensor>& in) { return fn(in[0], in[1]); }, args);
    const int merged = detail::batch_independent_products(*g);
    detail::verify_graph(*g, "batch_products");
    return merged;
  };
  // Two reads, no write between: one batch.
  EXPECT_EQ(count_after_pass([&](const Tensor& p, const Tensor& q) {
              return matmul(p, w.read_value()) + matmul(q, w.read_value());
            }, {a, b}), 1);
  // A write between the reads.
  EXPECT_EQ(count_after_pass([&](const Tensor& p, const Tensor& q) {
              const Tensor first = matmul(p, w.read_value());
              w.assign_add(ones({16, 24}));
              return first + matmul(q, w.read_value());
            }, {a, b}), 0);
  // The second left operand depends on the first product.
  EXPECT_EQ(count_after_pass([&](const Tensor& p, const Tensor& q) {
              const Tensor first = matmul(p, w.read_value());
              return matmul(slice(first, {0, 0}, {-1, 16}) + q, w.read_value());
            }, {a, b}), 0);
  // Batches hold at most 2^22 elements: five 2048-row products of 1024 columns make two
  // batches of two and one product left alone.
  Variable wide_out(random_uniform({16, 1024}, -1, 1, 7), "wide_out");
  EXPECT_EQ(count_after_pass([&](const Tensor& p, const Tensor&) {
              Tensor sum = matmul(p, wide_out.read_value());
              for (int t = 1; t < 5; ++t) sum = sum + matmul(p, wide_out.read_value());
              return sum;
            }, {random_uniform({2048, 16}, -1, 1, 8), b}), 2);
  // k = 64 >= 2 n = 48: a product that could split over k.
  EXPECT_EQ(count_after_pass([&](const Tensor& p, const Tensor& q) {
              return matmul(p, wide) + matmul(q, wide);
            }, {random_uniform({4, 64}, -1, 1, 5), random_uniform({4, 64}, -1, 1, 6)}), 0);
}

// A sum of products of one orientation becomes one product of the stacked operands; products
// or partial sums read elsewhere, other orientations, broadcasting adds and other dtypes stay.
TEST(BatchProducts, SumsOfProductsBecomeOneProduct) {
  detail::set_verify_graphs(true);
  auto rows = [](int64_t r, int64_t c, uint64_t seed) { return random_uniform({r, c}, -1, 1, seed); };
  struct After {
    int merged, products, adds;
  };
  auto after_pass = [](auto fn, const std::vector<Tensor>& args) {
    std::shared_ptr<detail::GraphIR> g = testing::trace_graph(fn, args);
    const int merged = detail::merge_product_sums(*g);
    detail::verify_graph(*g, "merge_product_sums");
    return After{merged, testing::count_op(*g, "matmul"), testing::count_op(*g, "add")};
  };
  const std::vector<Tensor> xs = {rows(32, 24, 1), rows(32, 24, 2), rows(32, 24, 3), rows(32, 24, 4)};
  const std::vector<Tensor> ds = {rows(32, 40, 5), rows(32, 40, 6), rows(32, 40, 7), rows(32, 40, 8)};
  std::vector<Tensor> args = xs;
  args.insert(args.end(), ds.begin(), ds.end());
  // sum_t x_t^T d_t, added in a chain as the tape accumulates: one product, no add.
  auto chain = [](const std::vector<Tensor>& in) {
    Tensor sum = matmul(in[0], in[4], true);
    for (int t = 1; t < 4; ++t) sum = sum + matmul(in[t], in[4 + t], true);
    return std::vector<Tensor>{sum};
  };
  After a = after_pass(chain, args);
  EXPECT_EQ(a.merged, 3);
  EXPECT_EQ(a.products, 1);
  EXPECT_EQ(a.adds, 0);
  // A balanced tree, not transposed (k stacks along the columns of the left operands).
  a = after_pass([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{(matmul(in[4], in[0], true, false) + matmul(in[5], in[1], true, false)) +
                               (matmul(in[6], in[2], true, false) + matmul(in[7], in[3], true, false))};
  }, args);
  EXPECT_EQ(a.merged, 3);
  EXPECT_EQ(a.products, 1);
  // A product also returned stays, added to the merged rest.
  a = after_pass([](const std::vector<Tensor>& in) {
    const Tensor shared = matmul(in[1], in[5], true);
    return std::vector<Tensor>{matmul(in[0], in[4], true) + shared + matmul(in[2], in[6], true) + matmul(in[3], in[7], true),
                               shared};
  }, args);
  EXPECT_EQ(a.merged, 2);
  EXPECT_EQ(a.products, 2);
  EXPECT_EQ(a.adds, 1);
  // A partial sum also returned ends the tree: it and the rest are two sums of two.
  a = after_pass([](const std::vector<Tensor>& in) {
    const Tensor partial = matmul(in[0], in[4], true) + matmul(in[1], in[5], true);
    return std::vector<Tensor>{partial + matmul(in[2], in[6], true) + matmul(in[3], in[7], true), partial};
  }, args);
  EXPECT_EQ(a.merged, 2);
  EXPECT_EQ(a.products, 2);
  EXPECT_EQ(a.adds, 1);
  // Two orientations: the x_t^T d_t products merge, (x_2^T) d_2 stays beside them.
  a = after_pass([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{matmul(in[0], in[4], true) + matmul(transpose(in[2]), in[6]) + matmul(in[1], in[5], true)};
  }, args);
  EXPECT_EQ(a.merged, 1);
  EXPECT_EQ(a.products, 2);
  EXPECT_EQ(a.adds, 1);
  // A broadcasting add (a column of products plus a matrix of them) is not a plain sum.
  a = after_pass([](const std::vector<Tensor>& in) {
    const Tensor column = matmul(in[0], slice(in[4], {0, 0}, {-1, 1}), true) + matmul(in[1], slice(in[5], {0, 0}, {-1, 1}), true);
    return std::vector<Tensor>{column + (matmul(in[2], in[6], true) + matmul(in[3], in[7], true))};
  }, args);
  EXPECT_EQ(a.merged, 2) << "each operand of the broadcasting add is a sum of its own";
  EXPECT_EQ(a.products, 2);
  // Float64 products stay.
  a = after_pass([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{matmul(cast(in[0], DType::Float64), cast(in[4], DType::Float64), true) +
                               matmul(cast(in[1], DType::Float64), cast(in[5], DType::Float64), true)};
  }, args);
  EXPECT_EQ(a.merged, 0);

  // Values: the optimised chain against the unoptimised one, at 1 and 2 threads, within the
  // float sum's bound over all n = 4 x 32 products.
  const int threads_before = config::num_threads();
  auto optimised = function(chain);
  auto plain = function(chain, {.optimize = false});
  for (const int threads : {1, 2}) {
    config::set_num_threads(threads);
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    const Tensor fast = optimised(args)[0], expected = plain(args)[0];
    expect_within_sum_bound(fast, expected, concat(xs, 0), concat(ds, 0), true, 4 * 32);
  }
  config::set_num_threads(threads_before);
  EXPECT_EQ(count_op(optimised.get_concrete_function(args).optimized_graph(), "matmul"), 1);
}

}  // namespace
}  // namespace tg