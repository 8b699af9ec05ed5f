// Elementwise fusion: random elementwise DAGs run unfused and fused must agree bit for bit.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "core/tensor_impl.h"
#include "trace/function_core.h"
#include "ops/fused.h"
#include "passes/passes.h"
#include "graph/verify.h"
#include "runtime/executor.h"
#include "support/graph_util.h"
#include "support/test_util.h"
#include "trace/concrete.h"

namespace tg {
namespace {

using detail::GraphIR;
using detail::NodeKind;
using detail::OpId;

using testing::trace_graph;

int count_fused(const GraphIR& g) {
  int n = 0;
  for (const auto& node : g.nodes) n += node.kind == NodeKind::kOp && node.op == OpId::FusedElementwise;
  return n;
}

// Same dtype, shape and bytes (so -0.0 vs +0.0 and NaN payloads count as differences).
::testing::AssertionResult bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || !(a.shape() == b.shape()))
    return ::testing::AssertionFailure() << "type " << to_string(a.dtype()) << a.shape().to_string() << " vs "
                                         << to_string(b.dtype()) << b.shape().to_string();
  const std::size_t bytes = static_cast<std::size_t>(a.num_elements()) * dtype_size(a.dtype());
  if (bytes && std::memcmp(detail::data_of<char>(a), detail::data_of<char>(b), bytes) != 0) {
    auto failure = ::testing::AssertionFailure();
    failure << "values differ\n  fused:   " << a.to_string() << "\n  unfused: " << b.to_string();
    if (a.dtype() == DType::Float32) {
      const float* pa = detail::data_of<float>(a);
      const float* pb = detail::data_of<float>(b);
      for (int64_t i = 0, shown = 0; i < a.num_elements() && shown < 3; ++i)
        if (std::memcmp(pa + i, pb + i, sizeof(float)) != 0) {
          failure << "\n  first differences: [" << i << "] " << pa[i] << " vs " << pb[i];
          ++shown;
        }
    }
    return failure;
  }
  return ::testing::AssertionSuccess();
}

// The same values, any NaN matching any NaN. When both operands of an add or a multiply are NaNs,
// IEEE 754 leaves open which one the result carries, and compilers swap the operands of these
// commutative ops freely, so the eager and fused builds of one functor may pick differently.
::testing::AssertionResult equal_up_to_nan_payload(const Tensor& a, const Tensor& b) {
  const std::vector<float> va = a.to_vector<float>(), vb = b.to_vector<float>();
  if (va.size() != vb.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (std::size_t i = 0; i < va.size(); ++i)
    if (!(std::isnan(va[i]) && std::isnan(vb[i])) && std::memcmp(&va[i], &vb[i], sizeof(float)) != 0)
      return ::testing::AssertionFailure() << "[" << i << "] " << va[i] << " vs " << vb[i];
  return ::testing::AssertionSuccess();
}

// A random DAG of elementwise ops over `in` (all of one dtype), built the same way for a seed
// whether `in` is eager or symbolic. Returns the last value and some intermediates.
std::vector<Tensor> random_dag(const std::vector<Tensor>& in, uint32_t seed, int num_ops) {
  std::mt19937 rng(seed);
  const DType dt = in[0].dtype();
  const bool fp = is_floating(dt);
  std::vector<Tensor> pool = in;
  auto pick = [&]() -> const Tensor& {
    // Mostly recent values, so that chains form; sometimes any value (DAG joins).
    if (rng() % 2) return pool.back();
    return pool[rng() % pool.size()];
  };
  auto scalar = [&]() {
    const int v = static_cast<int>(rng() % 7) - 3;
    return fp ? cast(constant(v * 0.75 + 0.5, float64), dt) : cast(constant(v), dt);
  };
  for (int k = 0; k < num_ops; ++k) {
    const unsigned choice = rng() % (fp ? 41 : 17);
    const Tensor& a = pick();
    const Tensor b = rng() % 4 == 0 ? scalar() : pick();
    Tensor r;
    switch (choice) {
      case 0: r = add(a, b); break;
      case 1: r = sub(a, b); break;
      case 2: r = mul(a, b); break;
      case 3: r = maximum(a, b); break;
      case 4: r = minimum(a, b); break;
      case 5: r = neg(a); break;
      case 6: r = abs(a); break;
      case 7: r = sign(a); break;
      case 8: r = square(a); break;
      case 9: r = relu(a); break;
      case 10: r = where(less(a, b), a, b); break;
      case 11: r = where(greater_equal(a, b), scalar(), a); break;  // a scalar operand of where
      case 12: r = cast(logical_or(equal(a, b), logical_not(not_equal(a, b))), dt); break;
      case 13: r = cast(logical_and(less_equal(a, b), greater(b, a)), dt) + a; break;
      case 14: r = cast(cast(a, fp ? int32 : float64), dt); break;
      case 15: r = identity(a) + ones_like(b) - zeros_like(a); break;
      case 16: r = cast(cast(a, bool_), dt); break;
      case 17: r = div(a, b); break;
      case 18: r = floordiv(a, b); break;
      case 19: r = mod(a, b); break;
      case 20: r = pow(a, b); break;
      case 21: r = exp(a); break;
      case 22: r = log(a); break;
      case 23: r = sqrt(a); break;
      case 24: r = rsqrt(a); break;
      case 25: r = tanh(a); break;
      case 26: r = sigmoid(a); break;
      case 27: r = sin(a); break;
      case 28: r = cos(a); break;
      case 29: r = log1p(a); break;
      case 30: r = expm1(a); break;
      case 31: r = softplus(a); break;
      case 32: r = gelu(a); break;
      case 33: r = gelu(a, true); break;
      case 34: r = elu(a); break;
      case 35: r = leaky_relu(a, 0.25); break;
      case 36: r = erf(a); break;
      case 37: r = floor(a); break;
      case 38: r = ceil(a); break;
      case 39: r = round(a); break;
      default: r = cast(cast(a, float32), dt); break;
    }
    pool.push_back(r);
  }
  std::vector<Tensor> out{pool.back()};
  out.push_back(pool[pool.size() / 2]);  // an intermediate (or an input) that is also a result
  return out;
}

Tensor random_input(DType dt, const TensorShape& shape, uint32_t seed) {
  Tensor u = random_uniform(shape, -4.0f, 4.0f, seed);
  if (dt == int32) return cast(u * 3.0f, int32);
  Tensor x = cast(u, dt);
  // Special values at a few positions when there is room.
  if (shape.num_elements() >= 6) {
    std::vector<double> v = cast(x, float64).to_vector<double>();
    v[0] = std::numeric_limits<double>::quiet_NaN();
    v[1] = std::numeric_limits<double>::infinity();
    v[2] = -0.0;
    v[3] = 0.0;
    v[4] = -std::numeric_limits<double>::infinity();
    x = cast(constant(v, shape, float64), dt);
  }
  return x;
}

struct DagCase {
  DType dtype;
  std::vector<int64_t> domain;
  std::vector<int64_t> second;  // the second input's shape, broadcast against the domain
};

TEST(Fusion, RandomElementwiseDagsGiveTheUnfusedResultsBitForBit) {
  detail::set_verify_graphs(true);
  const std::vector<DagCase> cases = {
      {float32, {16}, {16}},         {float32, {1000}, {}},         {float32, {1025}, {1025}},
      {float32, {3, 700}, {1, 700}}, {float32, {700, 3}, {700, 1}}, {float32, {2, 3, 5}, {3, 1}},
      {float32, {0}, {0}},           {float32, {1}, {}},            {float32, {2049}, {1}},
      {float64, {16}, {}},           {float64, {1031}, {1031}},     {float64, {4, 513}, {4, 1}},
      {int32, {16}, {16}},           {int32, {1030}, {}},           {int32, {5, 300}, {300}},
      {int32, {0, 4}, {4}},          {float32, {}, {}},             {int32, {7}, {7}},
  };
  int fused_nodes = 0;
  for (const DagCase& c : cases) {
    for (uint32_t seed = 1; seed <= 12; ++seed) {
      SCOPED_TRACE(to_string(c.dtype) + " " + TensorShape(c.domain).to_string() + " x " +
                   TensorShape(c.second).to_string() + " seed " + std::to_string(seed));
      const std::vector<Tensor> inputs{random_input(c.dtype, TensorShape(c.domain), seed),
                                       random_input(c.dtype, TensorShape(c.second), seed + 100),
                                       random_input(c.dtype, TensorShape{}, seed + 200)};
      const int num_ops = 3 + static_cast<int>(seed * 7 % 40);
      auto g = trace_graph([&](const std::vector<Tensor>& in) { return random_dag(in, seed, num_ops); }, inputs);
      const std::vector<Tensor> unfused = detail::execute(*g, inputs);
      detail::optimize_graph(g, "fusion_test");
      fused_nodes += count_fused(*g);
      const std::vector<Tensor> fused = detail::execute(*g, inputs);
      ASSERT_EQ(fused.size(), unfused.size());
      for (std::size_t k = 0; k < fused.size(); ++k)
        EXPECT_TRUE(bitwise_equal(fused[k], unfused[k])) << "output " << k << "\n" << Graph(g).to_string();
    }
  }
  EXPECT_GT(fused_nodes, 100) << "the DAGs should mostly fuse";
}

TEST(Fusion, TheTanhChainBecomesOneNodeThatPrintsItsOps) {
  auto g = trace_graph([](const std::vector<Tensor>& in) {
    Tensor x = in[0];
    for (int i = 0; i < 33; ++i) x = tanh(x * 1.01f + 0.5f);
    return x;
  }, {random_uniform({16}, -1, 1, 3)});
  const Tensor x = random_uniform({16}, -1, 1, 3);
  const Tensor before = detail::execute(*g, {x})[0];
  detail::optimize_graph(g, "chain");
  // Placeholder, one fused node, output: the constants live in the program.
  ASSERT_EQ(g->nodes.size(), 3u) << Graph(g).to_string();
  EXPECT_EQ(count_fused(*g), 1);
  const std::string text = Graph(g).to_string();
  EXPECT_NE(text.find("[arg0_0] -> fused_elementwise{mul,add,tanh,mul,add,tanh,mul,add,tanh,...(99 ops)}"), std::string::npos)
      << text;
  EXPECT_NE(Graph(g).to_dot().find("fused_elementwise{mul,add,tanh"), std::string::npos);
  EXPECT_TRUE(bitwise_equal(detail::execute(*g, {x})[0], before));
}

TEST(Fusion, IntermediatesUsedOutsideTheGroupBecomeOutputs) {
  // y feeds a matmul (not fusable) and the fused group; both results must be right.
  const std::vector<Tensor> inputs{random_uniform({4, 4}, -1, 1, 5)};
  auto g = trace_graph([](const std::vector<Tensor>& in) {
    Tensor y = relu(in[0] * 2.0f);
    Tensor z = matmul(y, y);
    return std::vector<Tensor>{exp(y) + 1.0f, z, y};
  }, inputs);
  const auto before = detail::execute(*g, inputs);
  detail::optimize_graph(g, "outputs");
  EXPECT_EQ(count_fused(*g), 1) << Graph(g).to_string();
  int fused_outputs = 0;
  for (const auto& node : g->nodes)
    if (node.kind == NodeKind::kOp && node.op == OpId::FusedElementwise) fused_outputs = static_cast<int>(node.outputs.size());
  EXPECT_EQ(fused_outputs, 2) << "y (used by matmul and returned) and the final add";
  const auto after = detail::execute(*g, inputs);
  for (std::size_t k = 0; k < after.size(); ++k) EXPECT_TRUE(bitwise_equal(after[k], before[k])) << k;
}

TEST(Fusion, AGroupNeverSwallowsAPathThroughAnUnfusedOp) {
  // a -> matmul -> b, and a -> b directly: fusing a and b would need matmul inside the node.
  const std::vector<Tensor> inputs{random_uniform({3, 3}, -1, 1, 6)};
  auto g = trace_graph([](const std::vector<Tensor>& in) {
    Tensor a = tanh(in[0] + 1.0f);
    Tensor m = matmul(a, in[0]);
    return (a * m) - 2.0f;
  }, inputs);
  const auto before = detail::execute(*g, inputs);
  detail::optimize_graph(g, "cycle");  // the verifier checks the order of the result
  EXPECT_EQ(count_fused(*g), 2) << Graph(g).to_string();
  EXPECT_TRUE(bitwise_equal(detail::execute(*g, inputs)[0], before[0]));
}

// Two groups that each read the other (through members added at different times) would be one
// cycle once each is one node. This is the graph of a third derivative of cos(x) through a traced
// function, which used to stop with "fusion made a cycle".
TEST(Fusion, GroupsThatWouldReadEachOtherAreNotBothFused) {
  detail::set_verify_graphs(true);
  auto g = trace_graph([](const std::vector<Tensor>& in) {
    const Tensor &a0 = in[0], &a1 = in[1], &a2 = in[2], &b0 = in[3], &b1 = in[4];
    Tensor c = cos(a0), s = sin(a0), neg1 = -a2, mul2 = neg1 * a1, mul4 = b0 * c, mul5 = b0 * mul2;
    Tensor neg2 = -(mul5 * s), mul7 = mul4 * a1, mul8 = mul4 * neg1, mul9 = b1 * s, mul10 = b1 * neg1;
    Tensor neg3 = -(mul7 + mul9), add1 = neg2 + mul10 * c;
    return std::vector<Tensor>{add1, mul8, neg3};
  }, std::vector<Tensor>(5, constant(1.0, float64)));
  const std::vector<Tensor> inputs{constant(0.3, float64), constant(-1.5, float64), constant(2.0, float64),
                                   constant(0.7, float64), constant(1.1, float64)};
  const std::vector<Tensor> unfused = detail::execute(*g, inputs);
  detail::optimize_graph(g, "two_groups");
  EXPECT_GE(count_fused(*g), 1);
  const std::vector<Tensor> fused = detail::execute(*g, inputs);
  for (std::size_t k = 0; k < fused.size(); ++k) EXPECT_TRUE(bitwise_equal(fused[k], unfused[k])) << k;
}

// A cycle the grouping's search cuts short: K = {u, k} depends on G through k, and G's second
// member reads a matmul of u. The emission then leaves one group unfused instead of failing.
TEST(Fusion, ACycleThroughAnUnfusedOpLeavesOneGroupUnfused) {
  detail::set_verify_graphs(true);
  auto g = trace_graph([](const std::vector<Tensor>& in) {
    const Tensor u = exp(in[0]);
    const Tensor p = matmul(u, u);
    const Tensor g1 = -in[1];
    const Tensor k = u * g1;
    const Tensor i = g1 + p;
    return std::vector<Tensor>{k, i};
  }, {random_uniform({2, 2}, -1, 1, 1), random_uniform({2, 2}, -1, 1, 2)});
  const std::vector<Tensor> inputs{random_uniform({2, 2}, -1, 1, 5), random_uniform({2, 2}, -1, 1, 6)};
  const std::vector<Tensor> unfused = detail::execute(*g, inputs);
  detail::optimize_graph(g, "cycle_through_matmul");
  EXPECT_EQ(count_fused(*g), 1) << Graph(g).to_string();
  const std::vector<Tensor> fused = detail::execute(*g, inputs);
  for (std::size_t k = 0; k < fused.size(); ++k) EXPECT_TRUE(bitwise_equal(fused[k], unfused[k])) << k;
}

TEST(Fusion, StatefulOpsStayOutOfGroups) {
  Variable v(constant({1.0f, 2.0f}));
  auto f = function([&](const Tensor& x) {
    Tensor y = x * 2.0f + v.read_value();
    v.assign(y + 1.0f);
    return tanh(y) * 3.0f;
  });
  const Tensor x = constant({0.5f, -0.5f});
  const Tensor r1 = f(x);  // v = [1, 2] -> y = [2, 1]
  EXPECT_TRUE(testing::tensors_near(r1, constant({std::tanh(2.0f) * 3.0f, std::tanh(1.0f) * 3.0f}), 1e-6));
  EXPECT_TRUE(testing::tensors_near(v.read_value(), constant({3.0f, 2.0f}), 0.0));
  const auto& g = *detail::FunctionAccess::impl(f.concrete_functions()[0])->ir;
  int stateful = 0;
  for (const auto& node : g.nodes)
    stateful += node.kind == NodeKind::kOp && (detail::op_def(node.op).traits & detail::kStateful);
  EXPECT_EQ(stateful, 2);
}

TEST(Fusion, TheAffinePeepholeMatchesTheSeparateSteps) {
  // x * m + c (+ relu) runs as one loop; variants where the pattern must not apply: the product
  // used elsewhere, the scalar on the other side of the add, and float64 / int32.
  auto body = [](const std::vector<Tensor>& in) {
    const DType dt = in[0].dtype();
    const Tensor m = cast(constant(1.01), dt), c = cast(constant(-0.5), dt);
    Tensor a = relu(in[0] * m + c);          // the full pattern
    Tensor b = m * a + c;                     // scalar first in the mul, no relu
    Tensor p = b * m;                         // product used twice: not folded
    Tensor d = relu(p + c) + p;
    Tensor e = c + d * m;                     // add with the scalar first: separate steps
    return std::vector<Tensor>{relu(e), a};
  };
  for (DType dt : {float32, float64, int32}) {
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1500}}) {
      SCOPED_TRACE(to_string(dt) + " n=" + std::to_string(n));
      const std::vector<Tensor> inputs{random_input(dt, TensorShape({n}), 21)};
      auto g = trace_graph(body, inputs);
      const auto before = detail::execute(*g, inputs);
      detail::optimize_graph(g, "affine");
      EXPECT_EQ(count_fused(*g), 1) << Graph(g).to_string();
      const auto after = detail::execute(*g, inputs);
      for (std::size_t k = 0; k < after.size(); ++k) EXPECT_TRUE(bitwise_equal(after[k], before[k])) << k;
    }
  }
}

TEST(Fusion, RegisterChainsMatchTheSeparateSteps) {
  // Every op a register chain applies, constants on both sides, special values in the input
  // (NaN, infinities, -0.0 through relu and neg); chains broken by a value used twice and by a
  // non-constant operand. Sizes around the 16-lane registers and the 8-register blocks, and
  // past the size where tile loops take over.
  auto body = [](const std::vector<Tensor>& in) {
    // x * m + c (+ relu) runs as one op of the chain when the Add takes its constant second;
    // each form here, and ones that do not merge (constant first, nothing after the Mul).
    const Tensor x = relu(0.5f + relu((2.0f * in[0] + 0.5f) * 1.01f + -0.25f) * 3.0f) * 0.5f;
    Tensor a = tanh(relu(0.75f - x * 1.5f) / 3.0f + 0.25f);
    Tensor b = square(-exp(a - 1.0f)) * 2.0f;
    Tensor c = sigmoid(2.0f / (b + 1.0f));
    Tensor d = log(c + 0.5f) - sin(c) + cos(c * c);  // c used three times: chains end at it
    Tensor e = relu(-(d * in[1]));                   // a tensor operand: not a chain op
    return std::vector<Tensor>{e * 4.0f - 1.0f, a};
  };
  for (int64_t n : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{128}, int64_t{200},
                    int64_t{4096}, int64_t{5000}}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    Tensor x = random_input(float32, TensorShape({n}), 5);
    std::vector<float> v = x.to_vector<float>();
    const float specials[] = {std::nanf(""), INFINITY, -INFINITY, -0.0f, 0.0f, 1e30f, -1e-40f};
    for (std::size_t i = 0; i < v.size() && i < std::size(specials); ++i) v[i * 3 % v.size()] = specials[i];
    const std::vector<Tensor> inputs{constant(v, TensorShape({n})), random_input(float32, TensorShape({n}), 6)};
    auto g = trace_graph(body, inputs);
    const auto before = detail::execute(*g, inputs);
    detail::optimize_graph(g, "chain");
    EXPECT_EQ(count_fused(*g), 1) << Graph(g).to_string();
    const auto after = detail::execute(*g, inputs);
    for (std::size_t k = 0; k < after.size(); ++k) EXPECT_TRUE(equal_up_to_nan_payload(after[k], before[k])) << k;
  }
}

// relu is x < 0 ? 0 : x: NaN and -0.0 pass through; a subnormal x reads as the zero of its sign
// (the kernels' float environment). Checked against the definition in register chains (constants
// in the program), in the x * m + c, relu loop (m and c scalar inputs, which a chain cannot
// take) and eagerly, at sizes around the chain's blocks.
TEST(Fusion, ReluPassesNaNAndNegativeZeroThroughOnEveryPath) {
  auto body = [](const std::vector<Tensor>& in) {
    const Tensor r = relu(in[0]);  // read from memory, one output of a chain
    return std::vector<Tensor>{relu(in[0] * 1.0f + -0.0f), relu(in[0] * 2.0f) * 0.5f,
                               relu(in[0] * in[1] + in[2]), r, r * 2.0f + 1.0f};
  };
  for (int64_t n : {int64_t{16}, int64_t{100}, int64_t{300}, int64_t{5000}}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<float> v = random_input(float32, TensorShape({n}), 11).to_vector<float>();
    const float specials[] = {std::nanf(""), -std::nanf(""), -0.0f, 0.0f, INFINITY, -INFINITY, -1e-40f, 1e-40f};
    for (std::size_t i = 0; i < v.size(); ++i)
      if (i % 3 == 0) v[i] = specials[(i / 3) % std::size(specials)];
    const std::vector<Tensor> inputs{constant(v, TensorShape({n})), constant(1.0f), constant(-0.0f)};
    auto g = trace_graph(body, inputs);
    detail::optimize_graph(g, "relu");
    EXPECT_GE(count_fused(*g), 1) << Graph(g).to_string();
    std::vector<Tensor> out = detail::execute(*g, inputs);
    out.pop_back();  // r * 2 + 1: there to put r in a register chain
    out.push_back(relu(inputs[0]));
    for (const Tensor& t : out) {
      const std::vector<float> got = t.to_vector<float>();
      for (std::size_t i = 0; i < v.size(); ++i) {
        const float x = std::fpclassify(v[i]) == FP_SUBNORMAL ? std::copysign(0.0f, v[i]) : v[i];
        const float want = x < 0.0f ? 0.0f : x;
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got[i])) << i;
        } else {
          EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want)) << i << ": " << v[i];
        }
      }
    }
  }
}

TEST(Fusion, TheMathOpsOfIssue14FuseAndMatchTheSeparateSteps) {
  // Each new elementwise op in one group with register-chain ops around it, over special values
  // (NaN, infinities, signed zeros, halves for the rounding ops, huge values for softplus), in
  // both float dtypes and at sizes around the chain's blocks.
  auto body = [](const std::vector<Tensor>& in) {
    Tensor a = log1p(abs(in[0]));
    a = softplus(expm1(a * 0.5f) * 3.0f - 2.0f);
    a = gelu(gelu(a - 1.0f), true);
    a = erf(leaky_relu(elu(a - 0.5f), 0.1)) * 2.0f;
    Tensor b = round(ceil(floor(a * 1.5f) * 0.3f) * 2.5f);
    return std::vector<Tensor>{b, relu(a) / 3.0f};
  };
  for (DType dt : {float32, float64}) {
    for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{200}, int64_t{5000}}) {
      SCOPED_TRACE(to_string(dt) + " n=" + std::to_string(n));
      std::vector<double> v = cast(random_input(float32, TensorShape({n}), 9), float64).to_vector<double>();
      const double specials[] = {std::nan(""), INFINITY, -INFINITY, -0.0, 0.0, 0.5, -2.5, 1e30, -1e30, 40.0, -40.0};
      for (std::size_t i = 0; i < v.size() && i < std::size(specials); ++i) v[i * 7 % v.size()] = specials[i];
      const std::vector<Tensor> inputs{cast(constant(v, TensorShape({n}), float64), dt)};
      auto g = trace_graph(body, inputs);
      const auto before = detail::execute(*g, inputs);
      detail::optimize_graph(g, "math ops");
      EXPECT_EQ(count_fused(*g), 1) << Graph(g).to_string();
      std::string fused_names = ",";
      for (const auto& node : g->nodes)
        if (node.kind == NodeKind::kOp && node.op == OpId::FusedElementwise)
          for (OpId id : detail::fused_ops(node.attrs)) fused_names += std::string(detail::op_def(id).name) + ",";
      for (const char* op : {"log1p", "expm1", "softplus", "gelu", "gelu_approximate", "elu", "leaky_relu", "erf",
                             "floor", "ceil", "round"}) {
        std::string needle = ",";
        needle.append(op).push_back(',');
        EXPECT_NE(fused_names.find(needle), std::string::npos) << op << " not fused: " << fused_names;
      }
      const auto after = detail::execute(*g, inputs);
      for (std::size_t k = 0; k < after.size(); ++k) {
        // Bit for bit but for NaN payloads (see equal_up_to_nan_payload), in either dtype.
        const std::vector<double> va = cast(after[k], float64).to_vector<double>();
        const std::vector<double> vb = cast(before[k], float64).to_vector<double>();
        ASSERT_EQ(va.size(), vb.size());
        for (std::size_t i = 0; i < va.size(); ++i)
          EXPECT_TRUE((std::isnan(va[i]) && std::isnan(vb[i])) || std::memcmp(&va[i], &vb[i], sizeof(double)) == 0)
              << "output " << k << " [" << i << "] fused " << va[i] << " vs unfused " << vb[i];
      }
    }
  }
}

TEST(Fusion, ResultsMatchThroughTgFunctionEndToEnd) {
  auto chain = [](const Tensor& x) {
    Tensor y = x;
    for (int i = 0; i < 33; ++i) y = relu(y * 1.01f + 0.5f);
    return y;
  };
  auto opt = function(chain);
  auto plain = function(chain, {.optimize = false});
  for (int64_t n : {int64_t{0}, int64_t{5}, int64_t{1024}, int64_t{4097}}) {
    const Tensor x = random_uniform({n}, -3, 3, 9);
    EXPECT_TRUE(bitwise_equal(opt(x), plain(x))) << n;
    EXPECT_TRUE(bitwise_equal(opt(x), chain(x))) << "eager, n = " << n;
  }
}

// ---- reductions folded into fused nodes ----

int count_fused_reductions(const GraphIR& g) {
  int n = 0;
  for (const auto& node : g.nodes)
    n += node.kind == NodeKind::kOp && node.op == OpId::FusedElementwise && detail::fused_program(node.attrs).has_reduce();
  return n;
}

Tensor apply_reduction(OpId op, const Tensor& x, std::vector<int> axes, bool keepdims) {
  switch (op) {
    case OpId::ReduceSum: return reduce_sum(x, axes, keepdims);
    case OpId::ReduceMean: return reduce_mean(x, axes, keepdims);
    case OpId::ReduceMax: return reduce_max(x, axes, keepdims);
    default: return reduce_min(x, axes, keepdims);
  }
}

// Fused and unfused reductions may add in different orders. Floating sums/means accumulate in
// double either way, so they may differ by |a - b| <= 1e-13 * scale + 2 ulp of the result's dtype,
// where scale is the same reduction of |x| (the float64 accumulators' rounding); max/min and
// integers must be equal (-0.0 == +0.0), and NaN where the other is NaN.
::testing::AssertionResult reduction_close(const Tensor& fused, const Tensor& unfused, const Tensor& scale) {
  if (fused.dtype() != unfused.dtype() || !(fused.shape() == unfused.shape()))
    return ::testing::AssertionFailure() << "type " << fused.shape().to_string() << " vs " << unfused.shape().to_string();
  const auto a = cast(fused, float64).to_vector<double>(), b = cast(unfused, float64).to_vector<double>();
  const auto s = cast(scale, float64).to_vector<double>();
  const double ulp = fused.dtype() == float32 ? 2.0 * std::numeric_limits<float>::epsilon()
                                              : 2.0 * std::numeric_limits<double>::epsilon();
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) {
      if (std::isnan(a[i]) != std::isnan(b[i])) return ::testing::AssertionFailure() << "NaN at " << i << ": " << a[i] << " vs " << b[i];
      continue;
    }
    if (a[i] == b[i]) continue;
    const double tol = 1e-13 * s[i] + ulp * std::abs(b[i]);
    if (!(std::abs(a[i] - b[i]) <= tol))
      return ::testing::AssertionFailure() << "element " << i << ": fused " << a[i] << " vs unfused " << b[i] << " (tolerance " << tol << ")";
  }
  return ::testing::AssertionSuccess();
}

TEST(FusedReduction, RandomDagsFollowedByEachReductionMatchTheUnfusedGraph) {
  detail::set_verify_graphs(true);
  const std::vector<DagCase> cases = {
      {float32, {}, {}},          {float32, {7}, {}},          {float32, {1025}, {1025}},   {float32, {2049}, {1}},
      {float32, {0}, {}},         {float32, {3, 700}, {700}},  {float32, {700, 3}, {700, 1}}, {float32, {5, 0}, {}},
      {float32, {0, 4}, {4}},     {float32, {2, 3, 5}, {3, 1}}, {float32, {2, 1, 1030}, {}}, {float64, {4, 513}, {4, 1}},
      {float64, {1031}, {}},      {int32, {5, 300}, {300}},    {int32, {1030}, {}},         {int32, {2, 0, 3}, {}},
  };
  const OpId ops[] = {OpId::ReduceSum, OpId::ReduceMean, OpId::ReduceMax, OpId::ReduceMin};
  int folded = 0, graphs = 0;
  for (const DagCase& c : cases) {
    const int rank = static_cast<int>(c.domain.size());
    for (uint32_t seed = 1; seed <= 3; ++seed) {
      const std::vector<Tensor> inputs{random_input(c.dtype, TensorShape(c.domain), seed),
                                       random_input(c.dtype, TensorShape(c.second), seed + 100),
                                       random_input(c.dtype, TensorShape{}, seed + 200)};
      const int num_ops = 1 + static_cast<int>(seed * 11 % 25);
      const Tensor x = random_dag(inputs, seed, num_ops)[0];  // eagerly: the reduced values
      for (OpId op : ops) {
        for (int last = 0; last <= (rank > 0 ? 1 : 0); ++last) {
          for (bool keepdims : {false, true}) {
            // The DAG's last op may only have read the scalar inputs: then only "all" applies.
            const std::vector<int> axes = last && x.shape().rank() > 0 ? std::vector<int>{-1} : std::vector<int>{};
            SCOPED_TRACE(to_string(c.dtype) + " " + TensorShape(c.domain).to_string() + " seed " + std::to_string(seed) +
                         " " + detail::op_def(op).name + (last ? " last" : " all") + (keepdims ? " keepdims" : ""));
            auto g = trace_graph([&](const std::vector<Tensor>& in) {
              const std::vector<Tensor> dag = random_dag(in, seed, num_ops);
              return std::vector<Tensor>{apply_reduction(op, dag[0], axes, keepdims), dag[1]};
            }, inputs);
            const std::vector<Tensor> unfused = detail::execute(*g, inputs);
            detail::optimize_graph(g, "fused_reduction_test");
            folded += count_fused_reductions(*g);
            ++graphs;
            const std::vector<Tensor> fused = detail::execute(*g, inputs);
            ASSERT_EQ(fused.size(), 2u);
            const bool is_sum = op == OpId::ReduceSum || op == OpId::ReduceMean;
            const Tensor scale = is_sum && is_floating(c.dtype) ? apply_reduction(op, abs(x), axes, keepdims)
                                                                : zeros_like(unfused[0]);
            EXPECT_TRUE(reduction_close(fused[0], unfused[0], scale)) << Graph(g).to_string();
            EXPECT_TRUE(bitwise_equal(fused[1], unfused[1]));
          }
        }
      }
    }
  }
  // A DAG whose last op CSE or simplification turns into an input cannot fold; most do.
  EXPECT_GT(folded, graphs * 3 / 4) << folded << " of " << graphs;
}

TEST(FusedReduction, TheGraphPrintsTheReductionInsideTheFusedNode) {
  const std::vector<Tensor> inputs{random_uniform({4, 1000}, -1, 1, 3)};
  auto g = trace_graph([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{reduce_mean(tanh(in[0] * 2.0f) + 1.0f, {-1}, true), reduce_max(exp(in[0]))};
  }, inputs);
  const auto before = detail::execute(*g, inputs);
  detail::optimize_graph(g, "print");
  EXPECT_EQ(count_fused(*g), 2);
  EXPECT_EQ(count_fused_reductions(*g), 2);
  int reductions = 0;
  for (const auto& node : g->nodes) reductions += node.kind == NodeKind::kOp && node.op == OpId::ReduceMean;
  EXPECT_EQ(reductions, 0) << Graph(g).to_string();
  const std::string text = Graph(g).to_string();
  EXPECT_NE(text.find("fused_elementwise{mul,tanh,add->reduce_mean(last)}"), std::string::npos) << text;
  EXPECT_NE(text.find("{exp->reduce_max(all)}"), std::string::npos) << text;
  const auto after = detail::execute(*g, inputs);
  EXPECT_TRUE(testing::tensors_near(after[0], before[0], 1e-6));
  EXPECT_TRUE(bitwise_equal(after[1], before[1]));
}

TEST(FusedReduction, AValueUsedElsewhereOrAMiddleAxisIsNotFolded) {
  const std::vector<Tensor> inputs{random_uniform({3, 4, 5}, -1, 1, 4)};
  auto g = trace_graph([](const std::vector<Tensor>& in) {
    Tensor y = exp(in[0]) + 1.0f;
    Tensor z = tanh(in[0]) * 3.0f;
    return std::vector<Tensor>{reduce_sum(y), y, reduce_sum(z, {1}), reduce_sum(z * z, {0, 1, 2}, true)};
  }, inputs);
  const auto before = detail::execute(*g, inputs);
  detail::optimize_graph(g, "not_folded");
  EXPECT_EQ(count_fused_reductions(*g), 1) << Graph(g).to_string();  // only the explicit all-axes one
  const auto after = detail::execute(*g, inputs);
  for (std::size_t k = 0; k < after.size(); ++k) EXPECT_TRUE(testing::tensors_near(after[k], before[k], 1e-5)) << k;
}

// ---- programs over None dims ----

// The unoptimised graph of fn traced over three inputs described by specs.
template <class F>
std::shared_ptr<GraphIR> trace_graph_over(F fn, const TensorSpec& a, const TensorSpec& b, const TensorSpec& c) {
  auto f = function([&](const Tensor& x, const Tensor& y, const Tensor& z) { return fn(std::vector<Tensor>{x, y, z}); },
                    {.optimize = false});
  auto cf = f.get_concrete_function(a, b, c);
  return std::make_shared<GraphIR>(*detail::FunctionAccess::impl(cf)->ir);
}

struct NoneCase {
  std::vector<int64_t> domain, second;  // static shapes, -1 = None
  std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> runs;  // run-time shapes
};

TEST(Fusion, ProgramsOverNoneDimsGiveTheUnfusedResultsAtEveryRunTimeShape) {
  detail::set_verify_graphs(true);
  // The last runs of the first cases let a None dim broadcast (1 against b): some steps then
  // have a smaller shape than others, and the program runs step by step.
  const std::vector<NoneCase> cases = {
      {{None, 7}, {7}, {{{1, 7}, {7}}, {{3, 7}, {7}}, {{0, 7}, {7}}, {{20000, 7}, {7}}}},
      {{None, 7}, {None, 1}, {{{5, 7}, {5, 1}}, {{4000, 7}, {4000, 1}}, {{5, 7}, {1, 1}}}},
      {{None, 7}, {None, 7}, {{{2, 7}, {2, 7}}, {{1, 7}, {6, 7}}, {{6, 7}, {1, 7}}}},
      {{None}, {None}, {{{1}, {1}}, {{1030}, {1030}}, {{70000}, {70000}}, {{1}, {9}}}},
      {{2, None, 3}, {None, 1}, {{{2, 4, 3}, {4, 1}}, {{2, 600, 3}, {600, 1}}}},
  };
  int fused_nodes = 0;
  for (const NoneCase& c : cases) {
    for (uint32_t seed = 1; seed <= 8; ++seed) {
      const int num_ops = 3 + static_cast<int>(seed * 7 % 40);
      auto g = trace_graph_over([&](const std::vector<Tensor>& in) { return random_dag(in, seed, num_ops); },
                                TensorSpec(TensorShape(c.domain), float32), TensorSpec(TensorShape(c.second), float32),
                                TensorSpec(TensorShape{}, float32));
      auto optimized = std::make_shared<GraphIR>(*g);
      detail::optimize_graph(optimized, "fusion_none_test");
      fused_nodes += count_fused(*optimized);
      for (const auto& [domain, second] : c.runs) {
        SCOPED_TRACE(TensorShape(domain).to_string() + " x " + TensorShape(second).to_string() + " seed " +
                     std::to_string(seed));
        const std::vector<Tensor> inputs{random_input(float32, TensorShape(domain), seed),
                                         random_input(float32, TensorShape(second), seed + 100),
                                         random_input(float32, TensorShape{}, seed + 200)};
        const std::vector<Tensor> unfused = detail::execute(*g, inputs);
        // Twice: the second run finds the plan built by the first.
        for (int round = 0; round < 2; ++round) {
          const std::vector<Tensor> fused = detail::execute(*optimized, inputs);
          ASSERT_EQ(fused.size(), unfused.size());
          for (std::size_t k = 0; k < fused.size(); ++k)
            EXPECT_TRUE(bitwise_equal(fused[k], unfused[k])) << "output " << k << "\n" << Graph(optimized).to_string();
        }
      }
    }
  }
  EXPECT_GT(fused_nodes, 30) << "the DAGs should mostly fuse";
}

TEST(Fusion, RunTimeShapesThatDoNotBroadcastRaiseTheUnfusedOpsError) {
  auto g = trace_graph_over([](const std::vector<Tensor>& in) { return std::vector<Tensor>{tanh(in[0] * 2.0f + in[1]) - in[2]}; },
                            TensorSpec(TensorShape({None, 4}), float32), TensorSpec(TensorShape({None, 4}), float32),
                            TensorSpec(TensorShape{}, float32));
  auto optimized = std::make_shared<GraphIR>(*g);
  detail::optimize_graph(optimized, "fusion_none_error");
  ASSERT_EQ(count_fused(*optimized), 1) << Graph(optimized).to_string();
  const std::vector<Tensor> inputs{zeros({2, 4}), zeros({3, 4}), zeros({})};
  std::string unfused_message;
  try {
    detail::execute(*g, inputs);
  } catch (const InvalidArgumentError& e) {
    unfused_message = e.what();
  }
  ASSERT_FALSE(unfused_message.empty());
  try {
    detail::execute(*optimized, inputs);
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgumentError& e) {
    EXPECT_EQ(std::string(e.what()), unfused_message);
  }
}

TEST(Fusion, ReductionsFoldOverNoneDims) {
  const OpId ops[] = {OpId::ReduceSum, OpId::ReduceMean, OpId::ReduceMax, OpId::ReduceMin};
  for (OpId op : ops) {
    for (bool last : {false, true}) {
      for (bool keepdims : {false, true}) {
        SCOPED_TRACE(std::string(detail::op_def(op).name) + (last ? " last" : " all") + (keepdims ? " keepdims" : ""));
        const std::vector<int> axes = last ? std::vector<int>{-1} : std::vector<int>{};
        auto g = trace_graph_over([&](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{apply_reduction(op, exp(in[0] * in[2]) - in[1], axes, keepdims)};
        }, TensorSpec(TensorShape({None, 5}), float32), TensorSpec(TensorShape({5}), float32), TensorSpec(TensorShape{}, float32));
        auto optimized = std::make_shared<GraphIR>(*g);
        detail::optimize_graph(optimized, "fusion_none_reduce");
        EXPECT_EQ(count_fused_reductions(*optimized), 1) << Graph(optimized).to_string();
        for (int64_t batch : {0, 1, 3, 30000}) {
          const std::vector<Tensor> inputs{random_input(float32, TensorShape({batch, 5}), 7),
                                           random_input(float32, TensorShape({5}), 8), constant(0.5f)};
          const Tensor unfused = detail::execute(*g, inputs)[0];
          const Tensor fused = detail::execute(*optimized, inputs)[0];
          const bool is_sum = op == OpId::ReduceSum || op == OpId::ReduceMean;
          const Tensor x = exp(inputs[0] * inputs[2]) - inputs[1];
          const Tensor scale = is_sum ? apply_reduction(op, abs(x), axes, keepdims) : zeros_like(unfused);
          EXPECT_TRUE(reduction_close(fused, unfused, scale)) << batch;
        }
      }
    }
  }
}

}  // namespace
}  // namespace tg
