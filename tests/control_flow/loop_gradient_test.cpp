// A loop's gradient from stored forward values: the backward loop runs the gradient's products
// only (the body is not computed again there), a captured sequence read one step at a time and
// a weight's product are gathered after the loop, and the numbers match finite differences and
// the same computation unrolled. Also the in-place append of dynamic TensorArrays it relies on.
#include <array>
#include <cmath>
#include <functional>
#include <string>

#include "control_flow/subgraph.h"
#include "core/tensor_impl.h"
#include "kernels/gemm.h"
#include "support/test_util.h"
#include "trace/concrete.h"
#include "trace/function_core.h"
#include "tracegraph/graph.h"

namespace tg {
namespace {

using detail::GraphIR;
using detail::NodeKind;
using detail::OpId;

constexpr int64_t kBatch = 3, kIn = 4, kUnits = 5, kTime = 4;

// An LSTM-like step: z = x_t K + h U + b, gates by slices, as nn::LSTMCell computes it.
std::pair<Tensor, Tensor> cell(const Tensor& xt, const Tensor& h, const Tensor& c, const Tensor& k, const Tensor& u,
                               const Tensor& b) {
  const Tensor z = matmul(xt, k) + matmul(h, u) + b;
  auto gate = [&](int64_t g) { return slice(z, {0, g * kUnits}, {-1, kUnits}); };
  const Tensor c_new = sigmoid(gate(1)) * c + sigmoid(gate(0)) * tanh(gate(2));
  return {sigmoid(gate(3)) * tanh(c_new), c_new};
}

// The sequence x (time, batch, in) through the cell in one tg::for_range, or in a C++ loop.
Tensor looped(const Tensor& x, const Tensor& k, const Tensor& u, const Tensor& b) {
  const Tensor h0 = zeros({kBatch, kUnits}, x.dtype());
  using State = std::tuple<Tensor, Tensor>;
  auto [h, c] = for_range(shape(x)[0], State{h0, h0}, [&](const Tensor& i, const State& s) {
    auto [h2, c2] = cell(gather(x, i), std::get<0>(s), std::get<1>(s), k, u, b);
    return State{h2, c2};
  });
  return reduce_sum(h * h) + reduce_sum(c);
}
Tensor unrolled(const Tensor& x, const Tensor& k, const Tensor& u, const Tensor& b) {
  Tensor h = zeros({kBatch, kUnits}, x.dtype()), c = h;
  for (int64_t t = 0; t < x.shape().dims()[0]; ++t) std::tie(h, c) = cell(x[t], h, c, k, u, b);
  return reduce_sum(h * h) + reduce_sum(c);
}

Tensor seeded(TensorShape s, uint64_t seed, double scale) {
  return random_uniform(std::move(s), -scale, scale, float64, seed);
}

struct Inputs {
  Tensor x = seeded({kTime, kBatch, kIn}, 1, 1.0);
  Tensor k = seeded({kIn, 4 * kUnits}, 2, 0.5);
  Tensor u = seeded({kUnits, 4 * kUnits}, 3, 0.5);
  Tensor b = seeded({4 * kUnits}, 4, 0.5);
};

std::vector<Tensor> gradients_of(Tensor (*model)(const Tensor&, const Tensor&, const Tensor&, const Tensor&),
                                 const Tensor& x, const Tensor& k, const Tensor& u, const Tensor& b) {
  GradientTape tape;
  for (const Tensor* t : {&x, &k, &u, &b}) tape.watch(*t);
  return tape.gradient(model(x, k, u, b), std::vector<Tensor>{x, k, u, b});
}

// MatMul nodes of g's while nodes whose name ends with `suffix`, in their bodies (nested too).
int matmuls_in(const GraphIR& g, bool inside) {
  int n = 0;
  for (const auto& node : g.nodes) {
    if (node.kind != NodeKind::kOp) continue;
    n += inside && node.op == OpId::MatMul;
    for (const auto& sub : detail::subgraphs_of(node)) n += matmuls_in(*sub.graph, true);
  }
  return n;
}
int body_matmuls(const GraphIR& g, const std::string& suffix) {
  int n = 0;
  for (const auto& node : g.nodes) {
    if (node.kind != NodeKind::kOp || (node.op != OpId::While && node.op != OpId::StatefulWhile)) continue;
    const auto& p = *node.attrs.get<detail::ControlFlowAttrs>().payload;
    if (p.name.size() >= suffix.size() && p.name.compare(p.name.size() - suffix.size(), suffix.size(), suffix) == 0)
      n += matmuls_in(*p.subgraphs[1].graph, true);
  }
  return n;
}
// TensorArray writes in the body of g's while node named `name`: the values it stores per iteration.
int body_writes(const GraphIR& g, const std::string& name) {
  int n = 0;
  for (const auto& node : g.nodes) {
    if (node.kind != NodeKind::kOp || node.op != OpId::While) continue;
    const auto& p = *node.attrs.get<detail::ControlFlowAttrs>().payload;
    if (p.name != name) continue;
    for (const auto& b : p.subgraphs[1].graph->nodes) n += b.kind == NodeKind::kOp && b.op == OpId::TensorArrayWrite;
  }
  return n;
}
int top_matmuls(const GraphIR& g) {
  int n = 0;
  for (const auto& node : g.nodes) n += node.kind == NodeKind::kOp && node.op == OpId::MatMul;
  return n;
}

TEST(LoopGradient, MatchesTheUnrolledComputationAndFiniteDifferences) {
  const Inputs in;
  auto traced = function([](const Tensor& x, const Tensor& k, const Tensor& u, const Tensor& b) {
    return gradients_of(looped, x, k, u, b);
  });
  const std::vector<Tensor> got = traced(in.x, in.k, in.u, in.b);
  const std::vector<Tensor> want = gradients_of(unrolled, in.x, in.k, in.u, in.b);
  ASSERT_EQ(got.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_TENSOR_NEAR(got[i], want[i], 1e-12);
  // Central differences on a few elements of each input.
  const double eps = 1e-6;
  std::vector<Tensor> args{in.x, in.k, in.u, in.b};
  for (std::size_t a = 0; a < 4; ++a) {
    const std::vector<double> base = args[a].to_vector<double>();
    const std::vector<double> g = got[a].to_vector<double>();
    for (std::size_t e : {std::size_t{0}, base.size() / 2, base.size() - 1}) {
      auto at = [&](double delta) {
        std::vector<double> v = base;
        v[e] += delta;
        std::vector<Tensor> moved = args;
        moved[a] = constant(v, args[a].shape(), float64);
        return looped(moved[0], moved[1], moved[2], moved[3]).item<double>();
      };
      EXPECT_NEAR(g[e], (at(eps) - at(-eps)) / (2 * eps), 1e-6) << "input " << a << " element " << e;
    }
  }
}

TEST(LoopGradient, TheBackwardLoopRunsOnlyTheGradientProducts) {
  const Inputs in;
  // The sequence is data (no gradient asked for it); the weights' gradients are asked for.
  auto traced = function([](const Tensor& x, const Tensor& k, const Tensor& u, const Tensor& b) {
    GradientTape tape;
    for (const Tensor* t : {&k, &u, &b}) tape.watch(*t);
    return tape.gradient(looped(x, k, u, b), std::vector<Tensor>{k, u, b});
  }, {.optimize = false});
  const GraphIR& g = *detail::FunctionAccess::impl(traced.get_concrete_function(in.x, in.k, in.u, in.b))->ir;
  // Per iteration the backward loop multiplies dz by U^T (the state's gradient) and nothing
  // else: the loop traced under the tape stores the values its gradient needs, so nothing runs
  // the forward again; the weights' gradients are two products after the loop, and the
  // sequence's gradient is not computed.
  EXPECT_EQ(body_matmuls(g, "_grad"), 1) << Graph(detail::FunctionAccess::impl(traced.get_concrete_function(in.x, in.k, in.u, in.b))->ir).to_string();
  EXPECT_EQ(body_matmuls(g, "_grad_forward"), 0);
  EXPECT_EQ(body_matmuls(g, ""), 3);  // the forward loop's two and the backward loop's one
  EXPECT_EQ(top_matmuls(g), 2);
  // Per iteration the forward loop stores h, c, x_t, the four gates and the step's index (the
  // row of x a gradient of x would go to); c', tanh(c') and the gates' derivatives are
  // computed again backward, from those.
  EXPECT_EQ(body_writes(g, "while"), 8);
  const std::vector<Tensor> got = traced(in.x, in.k, in.u, in.b);
  const std::vector<Tensor> want = gradients_of(unrolled, in.x, in.k, in.u, in.b);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_TENSOR_NEAR(got[i], want[i + 1], 1e-12);
}

TEST(LoopGradient, ALoopTracedWithoutATapeStoresItsValuesInItsGradient) {
  // The loop is traced alone; the eager tape differentiates the call, whose gradient runs the
  // forward part again to store the values, then the same backward loop.
  const Inputs in;
  auto f = function(looped);
  GradientTape tape;
  for (const Tensor* t : {&in.x, &in.k, &in.u, &in.b}) tape.watch(*t);
  const Tensor y = f(in.x, in.k, in.u, in.b);
  const std::vector<Tensor> got = tape.gradient(y, std::vector<Tensor>{in.x, in.k, in.u, in.b});
  const std::vector<Tensor> want = gradients_of(unrolled, in.x, in.k, in.u, in.b);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_TENSOR_NEAR(got[i], want[i], 1e-12);
}

TEST(LoopGradient, NoIterationGivesThePassThroughAndZeros) {
  const Inputs in;
  auto traced = function([](const Tensor& x, const Tensor& k, const Tensor& u, const Tensor& b) {
    return gradients_of(looped, x, k, u, b);
  });
  const Tensor empty = zeros({0, kBatch, kIn}, float64);
  const std::vector<Tensor> got = traced(empty, in.k, in.u, in.b);
  EXPECT_TENSOR_EQ(got[0], empty);
  EXPECT_TENSOR_EQ(got[1], zeros_like(in.k));
  EXPECT_TENSOR_EQ(got[2], zeros_like(in.u));
  EXPECT_TENSOR_EQ(got[3], zeros_like(in.b));
}

TEST(LoopGradient, ABodyWithACondAndANestedLoopMatchesTheEagerTape) {
  // y_{t+1} = cond(sum(y) > 0, sin(y) * w, y * y) then three times y = tanh(y * w) inside.
  auto model = [](const Tensor& x, const Tensor& w) {
    const Tensor y = for_range(4, x, [&](const Tensor&, const Tensor& s) {
      const Tensor c = cond(reduce_sum(s) > 0.0, [&] { return sin(s) * w; }, [&] { return s * s; });
      return for_range(3, c, [&](const Tensor&, const Tensor& v) { return tanh(v * w); });
    });
    return reduce_sum(y * y);
  };
  auto grads = [&](const Tensor& x, const Tensor& w) {
    GradientTape tape;
    tape.watch(x);
    tape.watch(w);
    return tape.gradient(model(x, w), std::vector<Tensor>{x, w});
  };
  auto traced = function(grads);
  for (const std::vector<double>& xv : {std::vector<double>{0.3, -0.2, 0.5}, std::vector<double>{-0.4, -0.3, 0.1}}) {
    const Tensor x = constant(xv, {3}, float64), w = constant(std::vector<double>{0.9, -1.2, 1.4}, {3}, float64);
    const std::vector<Tensor> got = traced(x, w), want = grads(x, w);  // eagerly: C++ loops
    EXPECT_TENSOR_NEAR(got[0], want[0], 1e-12);
    EXPECT_TENSOR_NEAR(got[1], want[1], 1e-12);
  }
}

TEST(LoopGradient, ASecondOrderGradientIsRefused) {
  // d/dw of dy/dx through a loop: refused with a typed error, never a wrong number.
  auto second = function([](const Tensor& x, const Tensor& w) {
    GradientTape outer;
    outer.watch(w);
    Tensor first;
    {
      GradientTape tape;
      tape.watch(x);
      const Tensor y = reduce_sum(for_range(3, x, [&](const Tensor&, const Tensor& s) { return s * s * w; }));
      first = reduce_sum(tape.gradient(y, x));
    }
    return outer.gradient(first, w);
  });
  const Tensor x = constant(std::vector<double>{0.7, -0.4}, {2}, float64);
  EXPECT_TRUE(testing::throws_with<InvalidArgumentError>([&] { (void)second(x, constant(std::vector<double>{0.9, 1.1}, {2}, float64)); },
                                                         {"gradient of the gradient", "C++ loop"}));
}

// MatMul nodes with transpose_b == tb in the bodies of g's while nodes whose name ends with `suffix`.
int body_products_transposing_b(const GraphIR& g, const std::string& suffix, bool tb) {
  int n = 0;
  for (const auto& node : g.nodes) {
    if (node.kind != NodeKind::kOp || (node.op != OpId::While && node.op != OpId::StatefulWhile)) continue;
    const auto& p = *node.attrs.get<detail::ControlFlowAttrs>().payload;
    if (p.name.size() < suffix.size() || p.name.compare(p.name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    for (const auto& b : p.subgraphs[1].graph->nodes)
      n += b.kind == NodeKind::kOp && b.op == OpId::MatMul && b.attrs.get<detail::MatMulAttrs>().transpose_b == tb;
  }
  return n;
}

// What the backward loop's dh = dz U^T relies on: a float32 product by a transposed B gives the
// bits of the product by B's transpose made first, on one thread and on two (split by columns,
// over k, and by rows).
TEST(LoopGradient, AProductByATransposedMatrixHasTheBitsOfOneByItsTranspose) {
  const int threads_before = config::num_threads();
  for (int threads : {1, 2}) {
    config::set_num_threads(threads);
    const std::array<std::array<int64_t, 3>, 4> shapes{{{32, 128, 512}, {3, 5, 20}, {33, 70, 100}, {256, 64, 48}}};
    for (const auto& [m, n, k] : shapes) {
      const Tensor a = random_uniform({m, k}, -1.0, 1.0, float32, 11);
      const Tensor b = random_uniform({n, k}, -1.0, 1.0, float32, 12);
      EXPECT_TRUE(testing::same_bits(matmul(a, b, false, true), matmul(a, transpose(b, {1, 0}))))
          << m << " x " << k << " times (" << n << " x " << k << ")^T on " << threads << " threads";
      const Tensor at = random_uniform({k, m}, -1.0, 1.0, float32, 13);
      EXPECT_TRUE(testing::same_bits(matmul(at, b, true, true), matmul(at, transpose(b, {1, 0}), true, false)))
          << "transposed a, " << threads << " threads";
    }
  }
  config::set_num_threads(threads_before);
}

// A float32 loop's backward loop multiplies dz by U^T and K^T made once before it (not by U and
// K transposed in every iteration), and its gradients keep their bits: traced and
// traced-and-optimised give the same, and the gradients summed in the loop (x's rows and b's)
// those of the eager tape, on one thread and on two. (The weights' gradients, one product over
// all iterations after a traced loop, are summed in another order than the eager tape's.)
TEST(LoopGradient, TheBackwardLoopMultipliesByATransposeMadeBeforeIt) {
  const Inputs in64;
  const Tensor x = cast(in64.x, float32), k = cast(in64.k, float32), u = cast(in64.u, float32),
               b = cast(in64.b, float32);
  auto step = [](const Tensor& x, const Tensor& k, const Tensor& u, const Tensor& b) {
    GradientTape tape;
    for (const Tensor* t : {&x, &k, &u, &b}) tape.watch(*t);
    return tape.gradient(looped(x, k, u, b), std::vector<Tensor>{x, k, u, b});
  };
  auto plain = function(step, {.optimize = false});
  auto optimised = function(step);
  if (detail::own_avx512_kernels()) {
    const GraphIR& g = *detail::FunctionAccess::impl(plain.get_concrete_function(x, k, u, b))->ir;
    EXPECT_EQ(body_products_transposing_b(g, "_grad", true), 0);
    EXPECT_EQ(body_products_transposing_b(g, "_grad", false), 2);
  }
  const int threads_before = config::num_threads();
  for (int threads : {1, 2}) {
    config::set_num_threads(threads);
    const std::vector<Tensor> want = step(x, k, u, b);
    const std::vector<Tensor> got_plain = plain(x, k, u, b), got_optimised = optimised(x, k, u, b);
    ASSERT_EQ(want.size(), 4u);
    ASSERT_EQ(got_plain.size(), 4u);
    ASSERT_EQ(got_optimised.size(), 4u);
    for (std::size_t i = 0; i < 4; ++i) {
      EXPECT_TRUE(testing::same_bits(got_optimised[i], got_plain[i])) << "input " << i << ", " << threads << " threads";
      if (i == 0 || i == 3)
        EXPECT_TRUE(testing::same_bits(got_plain[i], want[i])) << "input " << i << ", " << threads << " threads";
      else
        EXPECT_TENSOR_NEAR(got_plain[i], want[i], 1e-5);
    }
    // And the numbers of the unrolled computation, to float32's rounding.
    const std::vector<Tensor> unrolled_grads = gradients_of(unrolled, x, k, u, b);
    for (std::size_t i = 0; i < 4; ++i) EXPECT_TENSOR_NEAR(want[i], unrolled_grads[i], 1e-5);
  }
  config::set_num_threads(threads_before);
}

TEST(TensorArrayAppend, WritesInPlaceOnlyWhereNoOtherArraySeesTheRow) {
  TensorArray a(float32, 0, true, TensorShape{2});
  a = a.write(0, constant(std::vector<float>{1, 2}, {2}));
  const TensorArray b = a.write(1, constant(std::vector<float>{3, 4}, {2}));
  const TensorArray c = a.write(1, constant(std::vector<float>{5, 6}, {2}));  // the same row again: a copy
  const TensorArray d = b.write(2, constant(std::vector<float>{7, 8}, {2}));
  EXPECT_TENSOR_EQ(a.stack(), constant(std::vector<float>{1, 2}, {1, 2}));
  EXPECT_TENSOR_EQ(b.stack(), constant(std::vector<float>{1, 2, 3, 4}, {2, 2}));
  EXPECT_TENSOR_EQ(c.stack(), constant(std::vector<float>{1, 2, 5, 6}, {2, 2}));
  EXPECT_TENSOR_EQ(d.stack(), constant(std::vector<float>{1, 2, 3, 4, 7, 8}, {3, 2}));
  // b and d were written in place, in a's buffer; c, a second write of row 1, is a copy.
  auto buffer = [](const TensorArray& t) { return t.stack().impl()->buffer.get(); };
  EXPECT_EQ(buffer(b), buffer(a));
  EXPECT_EQ(buffer(d), buffer(a));
  EXPECT_NE(buffer(c), buffer(a));
  // Appends of a long run keep every element (the buffer grows by doubling).
  TensorArray e(int32, 0, true, TensorShape{});
  for (int i = 0; i < 100; ++i) e = e.write(i, constant(i * 3));
  std::vector<int32_t> want(100);
  for (int i = 0; i < 100; ++i) want[static_cast<std::size_t>(i)] = i * 3;
  EXPECT_TENSOR_EQ(e.stack(), constant(want, {100}, int32));
  // A write past the end fills the rows between with zeros.
  const TensorArray f = b.write(4, constant(std::vector<float>{9, 9}, {2}));
  EXPECT_TENSOR_EQ(f.stack(), constant(std::vector<float>{1, 2, 3, 4, 0, 0, 0, 0, 9, 9}, {5, 2}));
  EXPECT_TENSOR_EQ(d.stack(), constant(std::vector<float>{1, 2, 3, 4, 7, 8}, {3, 2}));
}

}  // namespace
}  // namespace tg
