// Batch splitting (passes/split_batch.cpp): on two threads, an unrolled cell's steps and their
// gradient run as two halves of the batch side by side, with the bits of the whole batch.
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/thread_pool.h"
#include "ops/control_flow_attrs.h"
#include "ops/matmul.h"
#include "passes/split_batch.h"
#include "support/graph_util.h"
#include "support/unrolled_lstm.h"
#include "support/test_util.h"
#include "tracegraph/gradient.h"

namespace tg {
namespace {

using testing::count_op;
using testing::same_bits;

// The thread count while tracing and running; the one before afterwards.
class Threads {
 public:
  explicit Threads(int n) : saved_(detail::num_threads()) { detail::set_num_threads(n); }
  ~Threads() { detail::set_num_threads(saved_); }
  Threads(const Threads&) = delete;
  Threads& operator=(const Threads&) = delete;

 private:
  int saved_;
};

constexpr int64_t kBatch = 32, kSteps = 24, kIn = 8, kUnits = 16;

// Concatenations of exactly two outputs of cond nodes: the halves of a result joined.
int joined_halves(const Graph& g) {
  std::map<std::string, std::string> op_of;
  for (const Graph::Node& node : g.nodes()) op_of[node.name] = node.op;
  int n = 0;
  for (const Graph::Node& node : g.nodes()) {
    if (node.op != "concat" || node.inputs.size() != 2) continue;
    bool halves = true;
    for (const std::string& in : node.inputs) halves &= op_of[in.substr(0, in.find(':'))] == "cond";
    n += halves;
  }
  return n;
}

// Slices of all the columns (rows copied) in the sub-graphs of the graph's cond nodes.
int row_copies_in_halves(const Graph& view) {
  int n = 0;
  for (const detail::GraphNode& node : detail::GraphAccess::ir(view).nodes) {
    if (node.kind != detail::NodeKind::kOp || node.op != detail::OpId::Cond) continue;
    for (const detail::NamedSubgraph& sub : detail::subgraphs_of(node.attrs))
      for (const detail::GraphNode& s : sub.graph->nodes)
        n += s.kind == detail::NodeKind::kOp && s.op == detail::OpId::Slice &&
             s.attrs.get<detail::SliceAttrs>().size.back() == -1;
  }
  return n;
}

// Float32 values in [-scale, scale], the same on every run.
Tensor values(const TensorShape& shape, int seed, float scale = 1.0f) {
  std::vector<float> v(static_cast<std::size_t>(shape.num_elements()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = scale * std::sin(0.37f * static_cast<float>(i) + static_cast<float>(seed));
  return constant(v, shape);
}

TEST(SplitBatch, AnUnrolledCellsStepsAndGradientRunInHalvesWithTheWholeBatchsBits) {
  const nn::LSTMCell cell(kIn, kUnits, 5);
  const Tensor x = values({kBatch, kSteps, kIn}, 3);
  auto step = [&](const Tensor& in) { return testing::unrolled_lstm_step(cell, in, kUnits); };
  const std::vector<Tensor> eager = step(x);
  std::vector<Tensor> one, two, two_run_on_one;
  int conds_one = 0, conds_two = 0, joins_two = 0, row_copies_two = 0;
  {
    Threads threads(1);
    auto f = function(step);
    one = f(x);
    conds_one = count_op(f.concrete_functions()[0].optimized_graph(), "cond");
  }
  {
    Threads threads(2);
    auto f = function(step);
    two = f(x);
    conds_two = count_op(f.concrete_functions()[0].optimized_graph(), "cond");
    joins_two = joined_halves(f.concrete_functions()[0].optimized_graph());
    row_copies_two = row_copies_in_halves(f.concrete_functions()[0].optimized_graph());
    detail::set_num_threads(1);  // the halves one after the other
    two_run_on_one = f(x);
  }
  EXPECT_EQ(conds_one, 0);
  // Two chains (the steps, their gradient) in two halves each; products split by rows keep
  // their bits only on the own AVX-512 kernels, so without them the products stay whole.
  if (detail::matmul_on_own_kernels()) {
    EXPECT_EQ(conds_two, 4);
    // Each step's gradient by the gate inputs goes into the stacked operand of the weight
    // gradients as its halves, and the bias gradient reads its rows of that operand: no join
    // but the last h's (which the loss reads).
    EXPECT_EQ(joins_two, 1);
    // Each half reads its rows of the steps' inputs as views, not slices' copies.
    EXPECT_EQ(row_copies_two, 0);
  }
  ASSERT_EQ(two.size(), one.size());
  for (std::size_t k = 0; k < one.size(); ++k) {
    EXPECT_TRUE(same_bits(two[k], one[k])) << k;
    EXPECT_TRUE(same_bits(two_run_on_one[k], one[k])) << k;
    // The optimiser's merged weight-gradient products sum in another order than eager.
    EXPECT_TENSOR_NEAR(two[k], eager[k], 1e-4) << k;
  }
}

// A node that mixes rows (a mean over the batch) ends a chain: the nodes after it read its
// result whole. The results keep their bits whatever is split.
TEST(SplitBatch, RowsMeetOnlyOutsideTheHalves) {
  const Tensor x = values({kBatch, kUnits}, 4);
  const Tensor w = values({kUnits, kUnits}, 5, 0.3f);
  auto chain = [&](const Tensor& in) {
    Tensor h = in;
    for (int t = 0; t < 80; ++t) {
      h = tanh(matmul(h, w) + 0.1f) * 0.9f;
      if (t == 40) h = h - reduce_mean(h, {0}, true);
    }
    return h;
  };
  Tensor one, two;
  int conds = 0;
  {
    Threads threads(1);
    one = function(chain)(x);
  }
  {
    Threads threads(2);
    auto f = function(chain);
    two = f(x);
    conds = count_op(f.concrete_functions()[0].optimized_graph(), "cond");
  }
  if (detail::matmul_on_own_kernels()) {
    EXPECT_EQ(conds, 4);  // the nodes before the mean and those after it
  }
  EXPECT_TRUE(same_bits(two, one));
  EXPECT_TENSOR_NEAR(two, chain(x), 1e-5);
}

// A product whose half would split its sums over k where the whole product does not (a half of
// 192 x 64 x 512 on the own kernels, the whole 384 x 64 x 512) is never split: its bits would
// then be another order's than one thread's.
TEST(SplitBatch, ProductsWhoseHalvesWouldSumOverKInPartsStayWhole) {
  constexpr int64_t kRows = 384, kWide = 512, kNarrow = 64;
  if (detail::matmul_on_own_kernels()) {
    Threads threads(2);
    EXPECT_TRUE(detail::matmul_sums_over_k_in_parts(kRows / 2, kNarrow, kWide, false));
    EXPECT_FALSE(detail::matmul_sums_over_k_in_parts(kRows, kNarrow, kWide, false));
  }
  const Tensor x = values({kRows, kWide}, 6);
  const Tensor w1 = values({kWide, kNarrow}, 7, 0.05f), w2 = values({kNarrow, kWide}, 8, 0.1f);
  auto chain = [&](const Tensor& in) {
    Tensor h = in;
    for (int t = 0; t < 40; ++t) h = tanh(matmul(tanh(matmul(h, w1)), w2) + 0.1f);
    return h;
  };
  Tensor one, two;
  {
    Threads threads(1);
    one = function(chain)(x);
  }
  {
    Threads threads(2);
    two = function(chain)(x);
  }
  EXPECT_TRUE(same_bits(two, one));
}

}  // namespace
}  // namespace tg
