// Elementwise fusion over bfloat16: a fused program computes each op in float32 and rounds each
// bfloat16 result, as each op apart does, so eager, traced and traced-and-optimised runs agree bit
// for bit (NaN payloads, signs of zero, subnormals included); and the unfused elementwise ops'
// blocked path gives the bits of float32 arithmetic rounded once per op.
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/fused.h"
#include "passes/passes.h"
#include "runtime/executor.h"
#include "support/graph_util.h"
#include "support/test_util.h"

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

// Ops of fused programs that compute on bfloat16 operands.
int fused_bf16_steps(const GraphIR& g) {
  int n = 0;
  for (const auto& node : g.nodes)
    if (node.kind == NodeKind::kOp && node.op == OpId::FusedElementwise)
      for (const detail::FusedStep& st : detail::fused_program(node.attrs).steps) n += st.in_dtype == DType::BFloat16;
  return n;
}

uint16_t bits(bfloat16_t v) { return v.bits; }

// Random bfloat16 values from these bits: most random floats (rounded), then the special values at
// fixed places: quiet and signalling NaNs of both signs, infinities, zeros, subnormals, the largest.
Tensor bf16_input(const TensorShape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  const uint16_t specials[] = {0x7fc0, 0xffc1, 0x7f81, 0xff80, 0x7f80, 0x8000, 0x0000, 0x0001, 0x807f, 0x7f7f, 0x0080};
  std::vector<bfloat16_t> v(static_cast<std::size_t>(shape.num_elements()));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = i % 7 == 3 ? bfloat16_t::from_bits(specials[(i / 7) % std::size(specials)]) : bfloat16_t(u(rng));
  Tensor t = zeros(shape, bfloat16);
  if (!v.empty()) std::memcpy(detail::data_of<bfloat16_t>(t), v.data(), v.size() * sizeof(bfloat16_t));
  return t;
}

// A random DAG of the elementwise ops bfloat16 computes (via float32), and comparisons with
// where over them; the same for a seed whether the inputs are eager or symbolic.
std::vector<Tensor> random_bf16_dag(const std::vector<Tensor>& in, uint32_t seed, int num_ops) {
  std::mt19937 rng(seed);
  std::vector<Tensor> pool = in;
  auto pick = [&]() -> const Tensor& { return rng() % 2 ? pool.back() : pool[rng() % pool.size()]; };
  auto scalar = [&]() { return cast(constant((static_cast<int>(rng() % 7) - 3) * 0.75f + 0.5f), bfloat16); };
  for (int k = 0; k < num_ops; ++k) {
    const unsigned choice = rng() % 24;
    const Tensor& a = pick();
    const Tensor b = rng() % 4 == 0 ? scalar() : pick();
    Tensor r;
    switch (choice) {
      case 0: r = add(a, b); break;
      case 1: r = sub(a, b); break;
      case 2: r = mul(a, b); break;
      case 3: r = div(a, b); break;
      case 4: r = maximum(a, b); break;
      case 5: r = minimum(a, b); break;
      case 6: r = neg(a); break;
      case 7: r = abs(a); break;
      case 8: r = square(a); break;
      case 9: r = relu(a); break;
      case 10: r = where(greater(a, zeros_like(a)), b, zeros_like(b)); break;  // relu's gradient
      case 11: r = where(less_equal(a, b), scalar(), a); break;
      case 12: r = exp(a); break;
      case 13: r = tanh(a); break;
      case 14: r = sigmoid(a); break;
      case 15: r = sqrt(a); break;
      case 16: r = add(mul(a, scalar()), scalar()); break;
      case 17: r = ones_like(a) - a; break;
      case 18: r = cast(cast(a, float32) * 1.5f, bfloat16); break;
      case 19: r = leaky_relu(a, 0.25); break;
      case 20: r = sign(a); break;
      case 21: r = floor(a); break;
      case 22: r = pow(a, b); break;
      default: r = gelu(a); break;
    }
    pool.push_back(r);
  }
  return {pool.back(), pool[pool.size() / 2]};
}

struct Shapes {
  std::vector<int64_t> domain, second;
};

TEST(FusionBFloat16, RandomDagsGiveTheBitsOfEagerAndOfTheUnfusedGraph) {
  detail::set_verify_graphs(true);
  const std::vector<Shapes> cases = {{{16}, {16}},       {{1000}, {}},        {{1025}, {1025}}, {{3, 700}, {1, 700}},
                                     {{700, 3}, {700, 1}}, {{2, 3, 5}, {3, 1}}, {{2049}, {1}},    {{4, 9, 9, 16}, {16}},
                                     {{0}, {0}},           {{}, {}}};
  int fused_nodes = 0, bf16_steps = 0;
  for (const Shapes& c : cases) {
    for (uint32_t seed = 1; seed <= 10; ++seed) {
      SCOPED_TRACE(TensorShape(c.domain).to_string() + " x " + TensorShape(c.second).to_string() + " seed " +
                   std::to_string(seed));
      const std::vector<Tensor> inputs{bf16_input(TensorShape(c.domain), seed),
                                       bf16_input(TensorShape(c.second), seed + 100)};
      const int num_ops = 2 + static_cast<int>(seed * 7 % 30);
      auto body = [&](const std::vector<Tensor>& in) { return random_bf16_dag(in, seed, num_ops); };
      const std::vector<Tensor> eager = body(inputs);
      auto g = trace_graph(body, inputs);
      const std::vector<Tensor> unfused = detail::execute(*g, inputs);
      detail::optimize_graph(g, "fusion_bf16_test");
      fused_nodes += count_fused(*g);
      bf16_steps += fused_bf16_steps(*g);
      const std::vector<Tensor> fused = detail::execute(*g, inputs);
      ASSERT_EQ(fused.size(), eager.size());
      for (std::size_t k = 0; k < fused.size(); ++k) {
        EXPECT_TRUE(testing::same_bits(unfused[k], eager[k])) << "output " << k;
        EXPECT_TRUE(testing::same_bits(fused[k], eager[k])) << "output " << k << "\n" << Graph(g).to_string();
      }
    }
  }
  EXPECT_GT(fused_nodes, 50) << "the bfloat16 DAGs should fuse";
  EXPECT_GT(bf16_steps, 300);
}

// where(greater(x, 0), dy, 0), relu and a bias: bfloat16 operands and a bool mask in one program.
TEST(FusionBFloat16, AReluGradientBecomesOneProgramOverBFloat16AndBool) {
  auto body = [](const std::vector<Tensor>& in) {
    const Tensor h = relu(in[0] + in[2]);
    const Tensor mask = greater(h, zeros_like(h));
    return std::vector<Tensor>{h, where(mask, in[1], zeros_like(in[1]))};
  };
  const std::vector<Tensor> inputs{bf16_input(TensorShape({8, 5, 5, 32}), 1), bf16_input(TensorShape({8, 5, 5, 32}), 2),
                                   bf16_input(TensorShape({32}), 3)};
  const std::vector<Tensor> eager = body(inputs);
  auto g = trace_graph(body, inputs);
  detail::optimize_graph(g, "relu_grad");
  // The zeros_like of an input starts a program of its own (a node joins a group it reads).
  EXPECT_LE(count_fused(*g), 2) << Graph(g).to_string();
  for (const char* op : {"where", "greater", "relu", "add"}) EXPECT_EQ(testing::count_op(*g, op), 0) << op;
  const std::vector<Tensor> fused = detail::execute(*g, inputs);
  for (std::size_t k = 0; k < fused.size(); ++k) EXPECT_TRUE(testing::same_bits(fused[k], eager[k])) << "output " << k;
}

// Chains of ops with bfloat16 constants (which over float32 run in registers, not over bfloat16:
// see fused_plan.cpp): the bits of the ops run one by one, on every tile size and remainder.
TEST(FusionBFloat16, ChainsWithConstantsRoundEachOpAsTheOpsApart) {
  auto bfc = [](float v) { return cast(constant(v), bfloat16); };
  auto body = [&](const std::vector<Tensor>& in) {
    Tensor x = in[0];
    for (int i = 0; i < 3; ++i) x = relu(x * bfc(1.0078125f) + bfc(0.3f));
    x = tanh(x - bfc(0.5f));
    x = square(neg(x)) / bfc(3.0f);
    x = sigmoid(bfc(2.0f) - exp(x));
    return std::vector<Tensor>{sqrt(x * bfc(0.1f) + bfc(1e-3f)), -(x * bfc(7.0f))};
  };
  for (int64_t n : {int64_t{1}, int64_t{16}, int64_t{100}, int64_t{300}, int64_t{5000}, int64_t{70001}}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<Tensor> inputs{bf16_input(TensorShape({n}), 9)};
    const std::vector<Tensor> eager = body(inputs);
    auto g = trace_graph(body, inputs);
    detail::optimize_graph(g, "bf16_chain");
    EXPECT_EQ(count_fused(*g), 1) << Graph(g).to_string();
    const std::vector<Tensor> fused = detail::execute(*g, inputs);
    for (std::size_t k = 0; k < fused.size(); ++k) EXPECT_TRUE(testing::same_bits(fused[k], eager[k])) << "output " << k;
  }
}

// The reference: each op on the float32 values, rounded by bfloat16_t's own rule.
float wide(bfloat16_t v) { return static_cast<float>(v); }

// Unfused bfloat16 ops on tensors large enough to split over the pool: the bits of float32
// arithmetic on the widened values in the kernels' float environment (subnormals flushed),
// rounded once per op, at 1 and 2 threads; zeros_like and ones_like never read their operand's
// values (NaNs in it change nothing).
TEST(FusionBFloat16, UnfusedOpsOnLargeTensorsRoundEachResultOnce) {
  const int threads_before = config::num_threads();
  const int64_t n = 7 * 42858;
  const Tensor a = bf16_input(TensorShape({n}), 5);
  Tensor b = bf16_input(TensorShape({n}), 6);
  b = where(equal(b, b), b, cast(constant(1.0f), bfloat16));  // no NaN in b: which of two NaNs an add keeps is open
  Tensor bias = bf16_input(TensorShape({7}), 7);
  bias = where(equal(bias, bias), bias, cast(constant(-2.0f), bfloat16));
  const Tensor rows = reshape(a, {-1, 7});
  const auto* pa = detail::data_of<bfloat16_t>(a);
  for (const int threads : {1, 2}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    config::set_num_threads(threads);
    const Tensor sum = add(a, b), prod = mul(a, b), r = relu(a), gt = greater(a, b), z = zeros_like(a), o = ones_like(a);
    const Tensor w = where(gt, a, b), biased = add(rows, bias);
    const auto* pb = detail::data_of<bfloat16_t>(b);
    const auto* pbias = detail::data_of<bfloat16_t>(bias);
    int bad = 0;
    const detail::KernelFloatEnvironment kernels;  // the reference's arithmetic below
    for (int64_t i = 0; i < n && bad < 5; ++i) {
      const float x = wide(pa[i]), y = wide(pb[i]);
      auto check = [&](const Tensor& t, float want, const char* what) {
        const uint16_t got = bits(detail::data_of<bfloat16_t>(t)[i]), expected = bits(bfloat16_t(want));
        if (got != expected) {
          ++bad;
          ADD_FAILURE() << what << " [" << i << "] of " << x << ", " << y << ": bits " << got << " want " << expected;
        }
      };
      check(sum, x + y, "add");
      check(prod, x * y, "mul");
      // relu reads a subnormal as the zero of its sign (found from the bits: DAZ is on here)
      const uint32_t x_bits = std::bit_cast<uint32_t>(x);
      const float x_read = (x_bits & 0x7f800000u) == 0 ? std::bit_cast<float>(x_bits & 0x80000000u) : x;
      check(r, x_read < 0.0f ? 0.0f : x_read, "relu");
      check(z, 0.0f, "zeros_like");
      check(o, 1.0f, "ones_like");
      check(w, x > y ? x : y, "where");
      check(biased, x + wide(pbias[i % 7]), "bias add");
      if (detail::data_of<bool>(gt)[i] != (x > y)) {
        ++bad;
        ADD_FAILURE() << "greater [" << i << "]";
      }
    }
  }
  config::set_num_threads(threads_before);
}

}  // namespace
}  // namespace tg
