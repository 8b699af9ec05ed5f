// Product batching (passes/batch_products.cpp): the independent products x_t W of an unrolled
// recurrent cell become one product of the stacked x_t, with the bits of the products apart.
#include <tuple>

#include "graph/verify.h"
#include "passes/batch_products.h"
#include "passes/passes.h"
#include "support/graph_util.h"
#include "support/test_util.h"
#include "tracegraph/gradient.h"

namespace tg {
namespace {

using testing::count_op;
using testing::same_bits;

bool have_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") != 0;
}

constexpr int64_t kBatch = 32, kSteps = 5, kIn = 16, kUnits = 64;  // the batch: 160 x 256

// An LSTM cell called in a C++ loop, its loss and gradients (as the models benchmark's unrolled
// train step records them; the steps' inputs are a function argument, so nothing folds them).
std::vector<Tensor> unrolled_step(const nn::LSTMCell& cell, const Tensor& x) {
  const std::vector<Variable> vars = cell.trainable_variables();
  GradientTape tape;
  const Tensor steps = transpose(x, {1, 0, 2});
  Tensor h = zeros({kBatch, kUnits}), c = zeros({kBatch, kUnits});
  for (int64_t t = 0; t < kSteps; ++t) std::tie(h, c) = cell(steps[t], h, c);
  const Tensor loss = reduce_sum(h * h);
  std::vector<Tensor> out = tape.gradient(loss, vars);
  out.insert(out.begin(), loss);
  return out;
}

TEST(BatchProducts, AnUnrolledCellsInputProductsBecomeOneWithTheirBits) {
  if (!have_avx512()) GTEST_SKIP() << "the pass batches only on the AVX-512 kernels";
  detail::set_verify_graphs(true);
  const int threads_before = config::num_threads();
  const nn::LSTMCell cell(kIn, kUnits, 3);
  const Tensor x = random_uniform({kBatch, kSteps, kIn}, -1, 1, 7);
  auto optimised = function([&](const Tensor& in) { return unrolled_step(cell, in); });
  auto plain = function([&](const Tensor& in) { return unrolled_step(cell, in); }, {.optimize = false});
  for (const int threads : {1, 2}) {
    config::set_num_threads(threads);
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    const std::vector<Tensor> fast = optimised(x), expected = plain(x);
    ASSERT_EQ(fast.size(), expected.size());
    for (std::size_t k = 0; k < fast.size(); ++k) EXPECT_TRUE(same_bits(fast[k], expected[k])) << "result " << k;
  }
  config::set_num_threads(threads_before);
  // Forward: one x W for all steps and one h U per step (the first h is zeros but still a
  // product); backward: per step h^T dz and x^T dz, and dz U^T but for the first step. The steps' x W are index views.
  const Graph graph = optimised.get_concrete_function(x).optimized_graph();
  EXPECT_EQ(count_op(graph, "matmul"), 1 + kSteps + 3 * kSteps - 1) << graph.to_string();
  EXPECT_GE(count_op(graph, "index"), kSteps) << graph.to_string();
}

// The pass on a graph of its own: products of one Variable's reads with no write between them
// batch, in batches of bounded size; a write between two reads, a left operand made from another
// product, or a k that could split over k keep them apart.
TEST(BatchProducts, OnlyIndependentProductsOfOneValueBatch) {
  if (!have_avx512()) GTEST_SKIP() << "the pass batches only on the AVX-512 kernels";
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

}  // namespace
}  // namespace tg
