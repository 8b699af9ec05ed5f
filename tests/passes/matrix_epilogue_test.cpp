// Matrix epilogues (passes/fuse_product_epilogues.cpp): a float32 product's result, perhaps
// reshaped, added to or multiplied by a value of its static shape takes that value in, with the
// bits of the unoptimised graph; what is not such an epilogue stays.
#include <array>

#include "graph/verify.h"
#include "ops/op.h"
#include "passes/passes.h"
#include "support/graph_util.h"
#include "support/test_util.h"
#include "tracegraph/nn.h"

namespace tg {
namespace {

using testing::count_op;
using testing::same_bits;

struct Case {
  const char* label;
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> body;
  int epilogues;    // matmul_epilogue nodes in the optimised graph
  int elementwise;  // add, sub, mul and fused_elementwise nodes left there (-1: not counted)
};

int elementwise_nodes(const Graph& g) {
  return count_op(g, "add") + count_op(g, "sub") + count_op(g, "mul") + count_op(g, "fused_elementwise");
}

// Each case on the optimised and the plain graph: the same bits, and the nodes the pass left.
void check(const std::vector<Case>& cases, const std::vector<Tensor>& in) {
  detail::set_verify_graphs(true);
  const int threads_before = config::num_threads();
  for (const int threads : {1, 2}) {
    config::set_num_threads(threads);
    for (const Case& c : cases) {
      SCOPED_TRACE(::testing::Message() << c.label << ", " << threads << " threads");
      auto optimised = function(c.body);
      auto plain = function(c.body, {.optimize = false});
      const std::vector<Tensor> got = optimised(in), want = plain(in);
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same_bits(got[k], want[k])) << "output " << k;
      const Graph g = optimised.get_concrete_function(in).optimized_graph();
      EXPECT_EQ(count_op(g, "matmul_epilogue"), c.epilogues) << g.to_string();
      if (c.elementwise >= 0) {
        EXPECT_EQ(elementwise_nodes(g), c.elementwise) << g.to_string();
      }
    }
  }
  config::set_num_threads(threads_before);
}

// 6 x 50 rows: row blocks of every size; 53 columns: a partial vector; k = 600: two passes over k.
std::vector<Tensor> inputs() {
  return {random_uniform({300, 600}, -1, 1, 1), random_uniform({600, 53}, -0.1f, 0.1f, 2),
          random_uniform({53}, -1, 1, 3), random_uniform({6, 50, 53}, -2, 2, 4), random_uniform({300, 53}, -2, 2, 5),
          random_uniform({1, 53}, -2, 2, 6)};
}

Tensor rows3(const Tensor& t) { return reshape(t, {6, 50, 53}); }

TEST(MatrixEpilogues, AProductTakesInAResidualAddOrAGradientProductWithTheSameBits) {
  check(
      {
          {"2-D product * matrix", [](const std::vector<Tensor>& in) { return std::vector<Tensor>{matmul(in[0], in[1]) * in[4]}; }, 1, 0},
          {"matrix + 2-D product", [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[4] + matmul(in[0], in[1])}; }, 1, 0},
          {"reshaped product * matrix",
           [](const std::vector<Tensor>& in) { return std::vector<Tensor>{rows3(matmul(in[0], in[1])) * in[3]}; }, 1, 0},
          {"matrix + reshaped (product + bias)",
           [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[3] + rows3(matmul(in[0], in[1]) + in[2])}; }, 1, 0},
          {"reshaped product + bias + matrix (a fused node)",
           [](const std::vector<Tensor>& in) { return std::vector<Tensor>{rows3(matmul(in[0], in[1])) + in[2] + in[3]}; }, 1, 0},
          {"relu(product + bias) + matrix",
           [](const std::vector<Tensor>& in) { return std::vector<Tensor>{relu(matmul(in[0], in[1]) + in[2]) + in[4]}; }, 1, 0},
          {"transposed operands * matrix",
           [](const std::vector<Tensor>& in) {
             return std::vector<Tensor>{matmul(transpose(in[0]), transpose(in[1]), true, true) * in[4]};
           }, 1, 0},
      },
      inputs());
}

TEST(MatrixEpilogues, WhatIsNotAMatrixEpilogueStays) {
  check(
      {
          // A row that broadcasts is no matrix of the result's shape (and no bias: it is 2-D).
          {"+ a broadcast row", [](const std::vector<Tensor>& in) { return std::vector<Tensor>{matmul(in[0], in[1]) + in[5]}; }, 0, 1},
          {"product read twice",
           [](const std::vector<Tensor>& in) {
             const Tensor z = matmul(in[0], in[1]);
             return std::vector<Tensor>{z * in[4], z};
           }, 0, 1},
          {"product times itself", [](const std::vector<Tensor>& in) {
             const Tensor z = matmul(in[0], in[1]);
             return std::vector<Tensor>{z * z};
           }, 0, -1},
          // One matrix per product: a program with two stays whole.
          {"two matrices",
           [](const std::vector<Tensor>& in) { return std::vector<Tensor>{matmul(in[0], in[1]) * in[4] + in[4]}; }, 0, 1},
          {"sub is no epilogue", [](const std::vector<Tensor>& in) { return std::vector<Tensor>{matmul(in[0], in[1]) - in[4]}; }, 0, 1},
      },
      inputs());
}

// A None batch dim: the shapes are not static, so nothing is taken in (a value that broadcasts at
// run time would be read as a whole matrix), and the result is the ops' at every size.
TEST(MatrixEpilogues, NoneDimsLeaveTheAddAlone) {
  detail::set_verify_graphs(true);
  auto body = [](const Tensor& x, const Tensor& w, const Tensor& r) { return matmul(x, w) + r; };
  const std::vector<TensorSpec> sig = {TensorSpec({None, 600}, float32), TensorSpec({600, 53}, float32),
                                       TensorSpec({None, 53}, float32)};
  auto optimised = function(body, {.input_signature = sig});
  auto plain = function(body, {.input_signature = sig, .optimize = false});
  const std::vector<Tensor> in = inputs();
  for (const int64_t rows : {300, 7}) {
    const Tensor x = slice(in[0], {0, 0}, {rows, 600}), r = slice(in[4], {0, 0}, {rows, 53});
    EXPECT_TRUE(same_bits(optimised(x, in[1], r), plain(x, in[1], r))) << rows << " rows";
  }
  // The residual broadcast at run time: a row of 1 against 300.
  EXPECT_TRUE(same_bits(optimised(in[0], in[1], in[5]), plain(in[0], in[1], in[5])));
  const Graph g = optimised.get_concrete_function(TensorSpec({None, 600}, float32), TensorSpec({600, 53}, float32),
                                                  TensorSpec({None, 53}, float32))
                      .optimized_graph();
  EXPECT_EQ(count_op(g, "matmul_epilogue"), 0) << g.to_string();
}

// A transformer encoder layer's train-step gradients: the residual adds after the output
// projection and the second feed-forward product, GELU's gradient product after the product
// that makes dY, and the residual gradient's add after the first feed-forward product's input
// gradient are taken in; every gradient keeps the plain graph's bits, on one thread and two. At
// the benchmark's size (B16 T64 d128 FFN 512) the products split their rows across the threads.
TEST(MatrixEpilogues, ATransformerLayersStepKeepsItsBits) {
  detail::set_verify_graphs(true);
  for (const auto& [batch, time, model, ffn] : {std::array<int64_t, 4>{3, 10, 32, 64}, {16, 64, 128, 512}}) {
    SCOPED_TRACE(::testing::Message() << "B" << batch << " T" << time << " d" << model);
    nn::TransformerEncoderLayer block(model, 4, ffn, {.dropout = 0.0, .activation = "gelu", .seed = 3});
    const std::vector<Variable> vars = block.trainable_variables();
    const Tensor x = random_uniform({batch, time, model}, -1, 1, 7), target = random_uniform({batch, time, model}, -1, 1, 8);
    auto step = [&](const Tensor& in) {
      GradientTape tape;
      const Tensor loss = reduce_mean(square(block(in) - target));
      std::vector<Tensor> out = tape.gradient(loss, vars);
      out.push_back(loss);
      return out;
    };
    const int threads_before = config::num_threads();
    for (const int threads : {1, 2}) {
      config::set_num_threads(threads);
      SCOPED_TRACE(::testing::Message() << threads << " threads");
      auto optimised = function(step);
      auto plain = function(step, {.optimize = false});
      const std::vector<Tensor> got = optimised(x), want = plain(x);
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same_bits(got[k], want[k])) << "output " << k;
      const Graph g = optimised.get_concrete_function(x).optimized_graph();
      // The forward's five products (q, k, v, the output projection + residual, linear2 + bias +
      // residual), and two of the backward's (dY of GELU, times its derivative; linear1's input
      // gradient + the residual gradient) carry epilogues.
      EXPECT_EQ(count_op(g, "matmul_epilogue"), 7) << g.to_string();
    }
    config::set_num_threads(threads_before);
  }
}

// A GELU layer's gradient: dY w2^T times GELU's derivative is one product, which also sums its
// rows for b1's gradient (column sums with a matrix: the row function's path, not the
// registers'), on one thread and two. Over (batch, time, features), as a Dense layer of rank-3
// input makes it (the product's result reshaped, then the derivative of that shape), the sums
// run over the product's rows: the bits of sum_to_like over the first two dims.
TEST(MatrixEpilogues, AGeluLayersGradientTakesTheDerivativeAndItsBiasGradient) {
  detail::set_verify_graphs(true);
  for (const bool rank3 : {false, true}) {
    auto step = [rank3](const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2) {
      GradientTape tape;
      for (const Tensor& v : {w1, b1, w2}) tape.watch(v);
      Tensor out;
      if (rank3) {
        const Tensor h = reshape(matmul(reshape(x, {200, 48}), w1), {4, 50, 80}) + b1;
        out = reshape(matmul(reshape(gelu(h), {200, 80}), w2), {4, 50, 24});
      } else {
        out = matmul(gelu(matmul(x, w1) + b1), w2);
      }
      return tape.gradient(reduce_sum(out * out), std::vector<Tensor>{w1, b1, w2});
    };
    const Tensor x = random_uniform(rank3 ? TensorShape({4, 50, 48}) : TensorShape({200, 48}), -1, 1, 1);
    const Tensor w1 = random_uniform({48, 80}, -0.3f, 0.3f, 2);
    const Tensor b1 = random_uniform({80}, -0.3f, 0.3f, 3), w2 = random_uniform({80, 24}, -0.3f, 0.3f, 4);
    const int threads_before = config::num_threads();
    for (const int threads : {1, 2}) {
      config::set_num_threads(threads);
      SCOPED_TRACE(::testing::Message() << threads << " threads, " << (rank3 ? "rank 3" : "rank 2"));
      auto optimised = function(step);
      auto plain = function(step, {.optimize = false});
      const std::vector<Tensor> got = optimised(x, w1, b1, w2), want = plain(x, w1, b1, w2);
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(same_bits(got[k], want[k])) << "output " << k;
      const Graph g = optimised.get_concrete_function(x, w1, b1, w2).optimized_graph();
      EXPECT_EQ(count_op(g, "sum_to_like"), 0) << g.to_string();
      EXPECT_EQ(count_op(g, "matmul_epilogue"), 1) << g.to_string();
    }
    config::set_num_threads(threads_before);
  }
}

// Node-level refusals: a matrix on a bfloat16 product, and both flags at once.
TEST(MatrixEpilogues, TheNodeRefusesWhatItCannotCompute) {
  const Tensor a = random_uniform({4, 8}, -1, 1, 1), b = random_uniform({8, 5}, -1, 1, 2), m = random_uniform({4, 5}, -1, 1, 3);
  detail::MatMulEpilogueAttrs both;
  both.add_matrix = both.mul_matrix = true;
  EXPECT_THROW(detail::apply_op1(detail::OpId::MatMulEpilogue, {a, b, m}, both), InvalidArgumentError);
  detail::MatMulEpilogueAttrs add;
  add.add_matrix = true;
  EXPECT_THROW(detail::apply_op1(detail::OpId::MatMulEpilogue, {cast(a, bfloat16), cast(b, bfloat16), m}, add),
               InvalidArgumentError);
  EXPECT_THROW(detail::apply_op1(detail::OpId::MatMulEpilogue, {a, b, cast(m, bfloat16)}, add), InvalidArgumentError);
  EXPECT_THROW(detail::apply_op1(detail::OpId::MatMulEpilogue, {a, b}, add), InvalidArgumentError);
  // Run eagerly, the node is the ops apart.
  EXPECT_TRUE(same_bits(detail::apply_op1(detail::OpId::MatMulEpilogue, {a, b, m}, add), matmul(a, b) + m));
  detail::MatMulEpilogueAttrs mul;
  mul.mul_matrix = true;
  const Tensor m3 = reshape(m, {2, 2, 5});
  EXPECT_TRUE(same_bits(detail::apply_op1(detail::OpId::MatMulEpilogue, {a, b, m3}, mul), reshape(matmul(a, b), {2, 2, 5}) * m3));
  // With column sums, those of the product's rows, whatever the matrix's shape.
  detail::MatMulEpilogueAttrs summed = mul;
  summed.column_sums = true;
  const std::vector<Tensor> out = detail::apply_op(detail::OpId::MatMulEpilogue, {a, b, m3}, summed);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(same_bits(out[1], reduce_sum(reshape(matmul(a, b), {2, 2, 5}) * m3, {0, 1})));
}

}  // namespace
}  // namespace tg
