// Epilogue fusion (src/passes/fuse_matmul.cpp, the fused_matmul kernel in src/ops/matmul.cpp):
// which graphs it rewrites, and that the rewritten ones give the unfused bits on every path the
// gemm takes (one thread or a split by rows or columns, tracegraph's AVX-512 kernels or
// OpenBLAS, float32 or float64, static or None batch dims).
#include <cstring>

#include "core/tensor_impl.h"
#include "ops/gemm.h"
#include "support/test_util.h"
#include "tracegraph/tracegraph.h"

namespace tg {
namespace {

int count_ops(const Graph& g, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node.op == op;
  return n;
}

::testing::AssertionResult same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || !(a.shape() == b.shape()))
    return ::testing::AssertionFailure() << a.shape().to_string() << " vs " << b.shape().to_string();
  const std::size_t bytes = static_cast<std::size_t>(a.num_elements()) * dtype_size(a.dtype());
  if (bytes && std::memcmp(detail::data_of<char>(a), detail::data_of<char>(b), bytes) != 0)
    return ::testing::AssertionFailure() << "values differ";
  return ::testing::AssertionSuccess();
}

// Restores the thread count and the gemm kernels a test changes.
struct GemmSettings {
  int threads = config::num_threads();
  bool own = detail::set_own_avx512_kernels(true);
  ~GemmSettings() {
    config::set_num_threads(threads);
    detail::set_own_avx512_kernels(own);
  }
};

// A dense layer as a training step traces it: the activation, and the mask its gradient reads.
std::vector<Tensor> dense_relu(const Tensor& x, const Tensor& w, const Tensor& b, bool ta, bool tb) {
  const Tensor z = matmul(x, w, ta, tb) + b;
  return {relu(z), greater(z, zeros_like(z))};
}

struct Layer {
  int64_t m, k, n;
  bool ta, tb;
};

TEST(FuseMatMul, DenseLayersBecomeOneNodeWithTheUnfusedBits) {
  GemmSettings restore;
  // 64 x 784 x 256 splits by columns on two threads, 512 x 256 x 64 by rows; 16 x 2048 x 256
  // and x 200 by columns into blocks small enough for the program's register chains, the last
  // block of 200 columns 8 wide; the rest run on one thread (small), transposed, or with an
  // empty sum (k = 0).
  const std::vector<Layer> layers = {{64, 784, 256, false, false}, {512, 256, 64, false, false},
                                     {16, 2048, 256, false, false}, {16, 2048, 200, false, true},
                                     {300, 96, 200, false, true},  {256, 64, 300, true, false},
                                     {7, 5, 3, true, true},        {4, 0, 6, false, false}};
  for (const DType dtype : {float32, float64}) {
    for (const bool own : {true, false}) {
      detail::set_own_avx512_kernels(own);
      for (const int threads : {1, 2}) {
        config::set_num_threads(threads);
        for (const Layer& l : layers) {
          SCOPED_TRACE(::testing::Message() << to_string(dtype) << " own kernels " << own << " threads " << threads
                                            << " m " << l.m << " k " << l.k << " n " << l.n << " ta " << l.ta
                                            << " tb " << l.tb);
          const Tensor x = cast(random_uniform(l.ta ? std::vector<int64_t>{l.k, l.m} : std::vector<int64_t>{l.m, l.k}, -1, 1, 3), dtype);
          const Tensor w = cast(random_uniform(l.tb ? std::vector<int64_t>{l.n, l.k} : std::vector<int64_t>{l.k, l.n}, -1, 1, 4), dtype);
          const Tensor b = cast(random_uniform({l.n}, -0.5f, 0.5f, 5), dtype);
          auto layer = [&](const Tensor& xx, const Tensor& ww, const Tensor& bb) { return dense_relu(xx, ww, bb, l.ta, l.tb); };
          auto fused = function(layer);
          auto plain = function(layer, {.optimize = false});
          const std::vector<Tensor> got = fused(x, w, b), want = plain(x, w, b), eager = layer(x, w, b);
          ASSERT_EQ(got.size(), 2u);
          for (std::size_t i = 0; i < got.size(); ++i) {
            EXPECT_TRUE(same_bits(got[i], want[i])) << "output " << i;
            EXPECT_TRUE(same_bits(got[i], eager[i])) << "output " << i << " against eager";
          }
          const Graph g = fused.get_concrete_function(x, w, b).optimized_graph();
          EXPECT_EQ(count_ops(g, "fused_matmul"), 1) << g.to_string();
          EXPECT_EQ(count_ops(g, "matmul"), 0) << g.to_string();
        }
      }
    }
  }
}

// Over a None batch the program's plan is found per run-time shape. When the product's batch
// of 1 broadcasts against a bias of 5 rows, the product is not every step's shape: the gemm
// then finishes before the program runs, which must still give the unfused values (and the
// unfused error where the shapes do not broadcast).
TEST(FuseMatMul, NoneBatchDimsGiveTheUnfusedResultsAtEveryRunTimeShape) {
  GemmSettings restore;
  auto layer = [](const Tensor& x, const Tensor& w, const Tensor& b) { return relu(matmul(x, w) + b) * 2.0f; };
  const std::vector<TensorSpec> signature = {TensorSpec({None, 96}, float32), TensorSpec({96, 128}, float32),
                                             TensorSpec({None, 128}, float32)};
  auto fused = function(layer, {.input_signature = signature});
  auto plain = function(layer, {.input_signature = signature, .optimize = false});
  const Tensor w = random_uniform({96, 128}, -1, 1, 8);
  EXPECT_EQ(count_ops(fused.get_concrete_function(signature[0], signature[1], signature[2]).optimized_graph(), "fused_matmul"), 1);
  const std::vector<std::pair<int64_t, int64_t>> batches = {{64, 64}, {1, 1}, {300, 300}, {0, 0}, {1, 5}, {5, 1}};
  for (const int threads : {1, 2}) {
    config::set_num_threads(threads);
    for (const auto& [rows, bias_rows] : batches) {
      SCOPED_TRACE(::testing::Message() << "threads " << threads << " x rows " << rows << " bias rows " << bias_rows);
      const Tensor x = random_uniform({rows, 96}, -1, 1, 9);
      const Tensor b = random_uniform({bias_rows, 128}, -1, 1, 10);
      for (int round = 0; round < 2; ++round)  // the second run finds the plan the first built
        EXPECT_TRUE(same_bits(fused(x, w, b), plain(x, w, b)));
    }
  }
  const Tensor x = zeros({5, 96}), b = zeros({3, 128});
  std::string unfused_message;
  try {
    plain(x, w, b);
  } catch (const InvalidArgumentError& e) {
    unfused_message = e.what();
  }
  ASSERT_FALSE(unfused_message.empty());
  EXPECT_THROW_MSG(fused(x, w, b), InvalidArgumentError, unfused_message);
}

// A product read by anything besides the one fused node (a second reader, a function result),
// a batched product and an integer one stay matmul nodes.
TEST(FuseMatMul, ProductsReadElsewhereBatchedOrIntegerAreNotFused) {
  const Tensor x = random_uniform({8, 6}, -1, 1, 1), w = random_uniform({6, 4}, -1, 1, 2);
  auto check = [](auto fn, const std::vector<Tensor>& in) {
    auto f = function(fn);
    const Graph g = f.get_concrete_function(in).optimized_graph();
    EXPECT_EQ(count_ops(g, "fused_matmul"), 0) << g.to_string();
    EXPECT_GE(count_ops(g, "matmul"), 1) << g.to_string();
    auto plain = function(fn, {.optimize = false});
    const std::vector<Tensor> got = f(in), want = plain(in);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(same_bits(got[i], want[i]));
  };
  check([](const std::vector<Tensor>& in) { const Tensor p = matmul(in[0], in[1]); return std::vector<Tensor>{relu(p), p}; },
        {x, w});
  check([](const std::vector<Tensor>& in) { const Tensor p = matmul(in[0], in[1]); return std::vector<Tensor>{tanh(p) + reduce_sum(p)}; },
        {x, w});
  check([](const std::vector<Tensor>& in) { return std::vector<Tensor>{relu(matmul(in[0], in[1]))}; },
        {random_uniform({3, 8, 6}, -1, 1, 3), random_uniform({3, 6, 4}, -1, 1, 4)});
  check([](const std::vector<Tensor>& in) { return std::vector<Tensor>{relu(matmul(in[0], in[1]) + 1)}; },
        {constant({{1, -2}, {3, 4}}), constant({{5, 6}, {-7, 8}})});
}

// The MLP train step of the benchmarks (forward epilogues, relu-gradient epilogues) gives the
// unoptimised graph's losses and weights, step after step.
TEST(FuseMatMul, ATrainStepKeepsTheUnfusedBitsStepAfterStep) {
  GemmSettings restore;
  for (const int threads : {1, 2}) {
    config::set_num_threads(threads);
    // Drawn once: a seeded random op gives a new draw at every call, as in TensorFlow.
    const Tensor w1 = random_uniform({96, 64}, -0.1f, 0.1f, 1), w2 = random_uniform({64, 10}, -0.1f, 0.1f, 2);
    auto make = [&] { return std::vector<Variable>{Variable(w1), Variable(zeros({64})), Variable(w2), Variable(zeros({10}))}; };
    std::vector<Variable> pa = make(), pb = make();
    auto step_of = [](std::vector<Variable>& p) {
      return [&p](const Tensor& x, const Tensor& y) {
        GradientTape tape;
        const Tensor h = relu(matmul(x, p[0].read_value()) + p[1].read_value());
        const Tensor logits = matmul(h, p[2].read_value()) + p[3].read_value();
        const Tensor loss = -reduce_mean(reduce_sum(y * log_softmax(logits), {1}));
        const std::vector<Tensor> grads = tape.gradient(loss, p);
        for (std::size_t i = 0; i < p.size(); ++i) p[i].assign_sub(grads[i] * 0.1f);
        return loss;
      };
    };
    auto fused = function(step_of(pa));
    auto plain = function(step_of(pb), {.optimize = false});
    const Tensor x = random_uniform({32, 96}, -1, 1, 5);
    const Tensor y = one_hot(cast(random_uniform({32}, 0, 10, 6), int32), 10);
    for (int step = 0; step < 3; ++step) EXPECT_TRUE(same_bits(fused(x, y), plain(x, y))) << "step " << step;
    for (std::size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(same_bits(pa[i].read_value(), pb[i].read_value())) << i;
    EXPECT_GE(count_ops(fused.get_concrete_function(x, y).optimized_graph(), "fused_matmul"), 2);
  }
}

}  // namespace
}  // namespace tg
