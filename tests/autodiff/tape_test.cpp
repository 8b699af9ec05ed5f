// GradientTape behaviour: composite functions against finite differences, higher-order
// gradients, persistence, unconnected sources, stop_gradient, Variables, and calls of traced
// functions under a tape (whose backward graph is built once and cached).
#include <cmath>
#include <optional>

#include "autodiff/grad_check.h"
#include "autodiff/tape.h"
#include "core/thread_pool.h"
#include "support/graph_util.h"
#include "support/test_util.h"
#include "trace/function_core.h"

namespace tg {
namespace {

using testing::CaseFn;
using testing::GradCase;

// ---- composite functions ----

// Mean softmax cross-entropy of a dense layer relu(x @ W + b) against one-hot labels.
Tensor dense_softmax_xent(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& labels) {
  const Tensor logits = relu(matmul(x, w) + b);
  return -reduce_mean(reduce_sum(labels * log_softmax(logits), {1}));
}

TEST(CompositeGradients, DenseLayerWithSoftmaxCrossEntropy) {
  testing::Random r(11);
  const Tensor labels = one_hot(constant({0, 2, 1, 2}), 3, 1.0, 0.0, -1, float64);
  testing::check_gradients(
      {"", "relu(x@W+b) softmax cross-entropy",
       [labels](const std::vector<Tensor>& in) { return dense_softmax_xent(in[0], in[1], in[2], labels); },
       {r.uniform({4, 5}), r.uniform({5, 3}), r.uniform({3}, 0.1, 0.5)}});
}

TEST(CompositeGradients, TwoLayerMlp) {
  testing::Random r(12);
  testing::check_gradients(
      {"", "tanh MLP",
       [](const std::vector<Tensor>& in) {
         const Tensor h = tanh(matmul(in[0], in[1]) + in[2]);
         return sigmoid(matmul(h, in[3]) + in[4]);
       },
       {r.uniform({3, 4}), r.uniform({4, 5}), r.uniform({5}), r.uniform({5, 2}), r.uniform({2})}});
}

TEST(CompositeGradients, LogSumExp) {
  testing::Random r(13);
  testing::check_gradients({"", "stable log-sum-exp over axis 1",
                            [](const std::vector<Tensor>& in) {
                              const Tensor m = reduce_max(in[0], {1}, true);
                              return squeeze(log(reduce_sum(exp(in[0] - m), {1}, true)) + m, {1});
                            },
                            {r.uniform({3, 4}, -3, 3)}});
}

TEST(CompositeGradients, Normalisation) {
  testing::Random r(14);
  testing::check_gradients({"", "(x - mean) / sqrt(var + eps) over axis 0, scaled and shifted",
                            [](const std::vector<Tensor>& in) {
                              const Tensor mean = reduce_mean(in[0], {0}, true);
                              const Tensor var = reduce_mean(square(in[0] - mean), {0}, true);
                              return (in[0] - mean) * rsqrt(var + 1e-3) * in[1] + in[2];
                            },
                            {r.uniform({5, 3}), r.uniform({3}), r.uniform({3})}});
}

TEST(CompositeGradients, SharedInputsAndSlicing) {
  testing::Random r(15);
  testing::check_gradients({"", "x used by several ops, concat/slice/gather mixed",
                            [](const std::vector<Tensor>& in) {
                              const Tensor x = in[0];
                              const Tensor c = concat({x * x, slice(x, {0, 1}, {-1, 2})}, 1);
                              return gather(c, constant({1, 1, 0})) / (x[0][1] + 3.0);
                            },
                            {r.uniform({2, 3})}});
}

// ---- second order: the inner tape's gradient computation is recorded by the outer tape ----

// The first-order gradient of sum(f(x) * w) as a function of x (so the harness checks its
// gradient, the second-order one, against finite differences of the first-order gradient).
CaseFn first_order(CaseFn f, Tensor w) {
  return [f, w](const std::vector<Tensor>& in) {
    GradientTape inner;
    inner.watch(in[0]);
    std::vector<Tensor> rest = in;
    const Tensor y = reduce_sum(f(rest) * w);
    return inner.gradient(y, in[0]);
  };
}

TEST(SecondOrder, KnownDerivativesOfCubeAndTanh) {
  const Tensor x = constant({-1.0, 0.5, 2.0}, float64);
  GradientTape outer;
  outer.watch(x);
  Tensor dy;
  {
    GradientTape inner;
    inner.watch(x);
    dy = inner.gradient(reduce_sum(x * x * x), x);  // 3x^2
  }
  EXPECT_TENSOR_NEAR(dy, constant({3.0, 0.75, 12.0}, float64), 1e-12);
  EXPECT_TENSOR_NEAR(outer.gradient(reduce_sum(dy), x), constant({-6.0, 3.0, 12.0}, float64), 1e-12);

  GradientTape outer2;
  outer2.watch(x);
  GradientTape inner2;
  inner2.watch(x);
  const Tensor t = tanh(x);
  const Tensor dt = inner2.gradient(reduce_sum(t), x);  // 1 - tanh^2
  const Tensor d2 = outer2.gradient(reduce_sum(dt), x);  // -2 tanh (1 - tanh^2)
  std::vector<double> want;
  for (double v : {-1.0, 0.5, 2.0}) want.push_back(-2 * std::tanh(v) * (1 - std::tanh(v) * std::tanh(v)));
  EXPECT_TENSOR_NEAR(d2, constant(want, {3}, float64), 1e-12);
}

TEST(SecondOrder, MatchFiniteDifferencesOfTheFirstOrderGradient) {
  testing::Random r(21);
  const Tensor w23 = r.uniform({2, 3}, 0.5, 1.5);
  const Tensor w2 = r.uniform({2}, 0.5, 1.5);
  const Tensor b3 = r.uniform({3});
  const Tensor m34 = r.uniform({3, 4});
  const std::vector<std::pair<std::string, std::pair<CaseFn, Tensor>>> fns = {
      {"tanh", {[](const std::vector<Tensor>& in) { return tanh(in[0]); }, w23}},
      {"sigmoid", {[](const std::vector<Tensor>& in) { return sigmoid(in[0]); }, w23}},
      {"exp * sin", {[](const std::vector<Tensor>& in) { return exp(in[0]) * sin(in[0]); }, w23}},
      {"broadcast mul/div", {[b3](const std::vector<Tensor>& in) { return in[0] * b3 / (in[0] * in[0] + 2.0); }, w23}},
      {"softmax", {[](const std::vector<Tensor>& in) { return softmax(in[0]); }, w23}},
      {"log_softmax", {[](const std::vector<Tensor>& in) { return log_softmax(in[0]); }, w23}},
      {"matmul tanh", {[m34](const std::vector<Tensor>& in) { return reduce_sum(tanh(matmul(in[0], m34)), {1}); }, w2}},
      {"reduce_mean of square", {[](const std::vector<Tensor>& in) { return reduce_mean(square(in[0]), {1}); }, w2}},
      {"sqrt", {[](const std::vector<Tensor>& in) { return sqrt(in[0] * in[0] + 1.0); }, w23}},
  };
  for (const auto& [name, fw] : fns) {
    GradCase c{"", "second order of " + name, first_order(fw.first, fw.second), {r.uniform({2, 3})}};
    c.tol = 1e-5;
    testing::check_gradients(c);
  }
}

// ---- tape semantics ----

TEST(Tape, PersistentTapeAllowsSeveralGradientCalls) {
  const Tensor x = constant({1.0, 2.0}, float64);
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  const Tensor y = x * x;
  const Tensor z = y * x;
  EXPECT_TENSOR_NEAR(tape.gradient(reduce_sum(y), x), constant({2.0, 4.0}, float64), 1e-12);
  EXPECT_TENSOR_NEAR(tape.gradient(reduce_sum(z), x), constant({3.0, 12.0}, float64), 1e-12);
  EXPECT_TENSOR_NEAR(tape.gradient(reduce_sum(y), x), constant({2.0, 4.0}, float64), 1e-12);
}

TEST(Tape, UnconnectedSourcesGiveZerosOrNone) {
  const Tensor x = constant({1.0, 2.0}, float64);
  const Tensor u = constant({{1.f, 2.f}, {3.f, 4.f}});
  GradientTape tape(true);
  tape.watch(x);
  tape.watch(u);
  const Tensor y = reduce_sum(x * 3.0);
  const auto zero = tape.gradient(y, {x, u});
  EXPECT_TENSOR_NEAR(zero[0], constant({3.0, 3.0}, float64), 1e-12);
  EXPECT_TENSOR_EQ(zero[1], zeros({2, 2}));
  const auto none = tape.gradient(y, {x, u}, UnconnectedGradients::kNone);
  EXPECT_TRUE(none[0].defined());
  EXPECT_FALSE(none[1].defined());
}

TEST(Tape, UnwatchedTensorsAreNotTracked) {
  const Tensor x = constant(2.0, float64);
  GradientTape tape;
  const Tensor y = x * x;
  EXPECT_FALSE(tape.gradient(y, x, UnconnectedGradients::kNone).defined());
}

// TF's rule: only tensors the tape tracks (watched, or made by a recorded op) get a gradient;
// an unwatched constant read by a recorded op next to a watched tensor gets None, not the number
// the op's gradient rule would give it.
TEST(Tape, AnUnwatchedInputOfARecordedOpHasNoGradient) {
  const Tensor x = constant({1.0, 2.0}, float64);
  const Tensor c = constant({5.0, 7.0}, float64);
  GradientTape tape(true);
  tape.watch(x);
  const Tensor h = x * c;  // recorded: x is watched
  const Tensor y = reduce_sum(h * h);
  const auto g = tape.gradient(y, {x, c, h}, UnconnectedGradients::kNone);
  EXPECT_TENSOR_NEAR(g[0], constant({2.0 * 25.0, 2.0 * 2.0 * 49.0}, float64), 1e-12);
  EXPECT_FALSE(g[1].defined());  // c was never watched
  EXPECT_TENSOR_NEAR(g[2], constant({10.0, 28.0}, float64), 1e-12);  // h: made by a recorded op
  EXPECT_TENSOR_EQ(tape.gradient(y, {c})[0], zeros_like(c));         // kZero: zeros, as TF
}

TEST(Tape, StopGradientBlocksThePath) {
  const Tensor x = constant({1.0, 3.0}, float64);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = reduce_sum(x * stop_gradient(x));  // d/dx = stop_gradient(x) = x, not 2x
  EXPECT_TENSOR_NEAR(tape.gradient(y, x), constant({1.0, 3.0}, float64), 1e-12);
}

TEST(Tape, StopRecordingPausesTheTape) {
  const Tensor x = constant(2.0, float64);
  GradientTape tape;
  tape.watch(x);
  const Tensor a = x * x;  // recorded
  tape.stop_recording();
  const Tensor b = a * x;  // not recorded: b is a constant to the tape
  tape.resume_recording();
  const Tensor c = b + a;
  EXPECT_TENSOR_NEAR(tape.gradient(c, x), constant(4.0, float64), 1e-12);
}

TEST(Tape, AWatchThatRaisesLeavesAPausedTapePaused) {
  // watch(Variable) records the Variable's read even on a paused tape; a read that raises (the
  // parameter a trace handed its body, kept past the call) must not leave the tape recording.
  Variable a(constant(1.0, float64));
  std::optional<Variable> kept;
  auto scale = function([&](const Variable& w, const Tensor& x) {
    kept = w;
    return x * w;
  });
  scale(a, constant(3.0, float64));
  const Tensor x = constant(2.0, float64);
  GradientTape tape;
  tape.watch(x);
  tape.stop_recording();
  EXPECT_THROW(tape.watch(*kept), OutOfScopeError);
  const Tensor y = x * x;  // not recorded: the tape is still paused
  EXPECT_FALSE(tape.gradient(y, {x}, UnconnectedGradients::kNone)[0].defined());
}

TEST(Tape, NonDifferentiableOpsCutThePath) {
  const Tensor x = constant({1.5, -2.5}, float64);
  GradientTape tape;
  tape.watch(x);
  // floor division and comparisons have no gradient: only the x * 2 term contributes
  const Tensor y = reduce_sum(x * 2.0 + cast(greater(x, zeros_like(x)), float64) + floordiv(x, constant(1.0, float64)));
  EXPECT_TENSOR_NEAR(tape.gradient(y, x), constant({2.0, 2.0}, float64), 1e-12);
}

TEST(Tape, IntegerPathsStopAtTheCast) {
  const Tensor x = constant({1.5, 2.5}, float64);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = reduce_sum(cast(cast(x, int32), float64) * x);
  // the int32 round trip is a constant to the tape: d/dx = cast(cast(x)) = [1, 2]
  EXPECT_TENSOR_NEAR(tape.gradient(y, x), constant({1.0, 2.0}, float64), 1e-12);
}

TEST(Tape, Float32GradientsKeepTheDtype) {
  const Tensor x = constant({{1.f, 2.f}, {3.f, 4.f}});
  const Tensor b = constant({1.f, -1.f});
  GradientTape tape;
  tape.watch(x);
  tape.watch(b);
  const auto g = tape.gradient(reduce_mean(square(x + b)), {x, b});
  EXPECT_TENSOR_NEAR(g[0], constant({{1.f, 0.5f}, {2.f, 1.5f}}), 1e-6);
  EXPECT_TENSOR_NEAR(g[1], constant({3.f, 2.f}), 1e-6);
}

// ---- the spellings of gradient() a user writes (the API contract: each compiles, picks a vector) ----

TEST(GradientSpellings, BraceListOfOneTensorGivesAVector) {
  const Tensor x = constant({1.0, 2.0}, float64);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = reduce_sum(x * x);
  std::vector<Tensor> g1 = tape.gradient(y, {x});
  ASSERT_EQ(g1.size(), 1u);
  EXPECT_TENSOR_NEAR(g1[0], constant({2.0, 4.0}, float64), 1e-12);
}

TEST(GradientSpellings, BraceListOfVariablesGivesAVector) {
  Variable w(constant({2.0, 3.0}, float64), "w");
  Variable b(constant(1.0, float64), "b");
  GradientTape tape;
  const Tensor loss = reduce_sum(w * w) + b * 4.0;
  std::vector<Tensor> g2 = tape.gradient(loss, {w, b});
  ASSERT_EQ(g2.size(), 2u);
  EXPECT_TENSOR_NEAR(g2[0], constant({4.0, 6.0}, float64), 1e-12);
  EXPECT_TENSOR_NEAR(g2[1], constant(4.0, float64), 1e-12);
}

TEST(GradientSpellings, MixedBraceListGivesAVector) {
  Variable w(constant({2.0, 3.0}, float64), "w");
  const Tensor x = constant({5.0, 7.0}, float64);
  GradientTape tape;
  tape.watch(x);
  const Tensor loss = reduce_sum(w * x);
  std::vector<Tensor> g3 = tape.gradient(loss, {w, x});
  ASSERT_EQ(g3.size(), 2u);
  EXPECT_TENSOR_NEAR(g3[0], constant({5.0, 7.0}, float64), 1e-12);
  EXPECT_TENSOR_NEAR(g3[1], constant({2.0, 3.0}, float64), 1e-12);
  // a mixed list keeps the unconnected policy
  const Tensor u = constant(1.0, float64);
  GradientTape tape2;
  tape2.watch(u);
  const Tensor loss2 = reduce_sum(w * 2.0);
  std::vector<Tensor> g = tape2.gradient(loss2, {w, u}, UnconnectedGradients::kNone);
  EXPECT_TENSOR_NEAR(g[0], constant({2.0, 2.0}, float64), 1e-12);
  EXPECT_FALSE(g[1].defined());
}

TEST(GradientSpellings, SingleSourceWithoutBracesGivesATensor) {
  const Tensor x = constant(3.0, float64);
  Variable v(constant(2.0, float64), "v");
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  const Tensor y = x * x * v;
  Tensor g4 = tape.gradient(y, x);
  EXPECT_TENSOR_NEAR(g4, constant(12.0, float64), 1e-12);
  Tensor gv = tape.gradient(y, v);
  EXPECT_TENSOR_NEAR(gv, constant(9.0, float64), 1e-12);
  // named vectors keep working
  EXPECT_EQ(tape.gradient(y, std::vector<Variable>{v}).size(), 1u);
  EXPECT_EQ(tape.gradient(y, std::vector<Tensor>{x, x}).size(), 2u);
}

TEST(GradientSpellings, BraceListsWorkWhileTracing) {
  Variable w(constant({2.0, 3.0}, float64), "w");
  auto f = function([&](const Tensor& x) {
    GradientTape tape;
    tape.watch(x);
    const Tensor loss = reduce_sum(w * x * x);
    std::vector<Tensor> g = tape.gradient(loss, {w, x});
    return g[0] + g[1];
  });
  // d/dw = x^2, d/dx = 2 w x
  EXPECT_TENSOR_NEAR(f(constant({1.0, 2.0}, float64)), constant({1.0 + 4.0, 4.0 + 12.0}, float64), 1e-12);
}

// ---- Variables ----

TEST(VariableGradients, VariablesAreWatchedAutomatically) {
  Variable v(constant({1.0, -2.0}, float64));
  GradientTape tape;
  const Tensor y = reduce_sum(v * v) + reduce_sum(Tensor(v) * 3.0);  // two reads
  EXPECT_TENSOR_NEAR(tape.gradient(y, v), constant({5.0, -1.0}, float64), 1e-12);
}

TEST(VariableGradients, ReadVariableMatchesFiniteDifferences) {
  testing::Random r(31);
  Variable v(r.uniform({2, 3}));
  const Tensor m = r.uniform({3, 2});
  auto loss = [&] { return reduce_sum(tanh(matmul(v, m))) * reduce_sum(v.read_value()[0]); };
  GradientTape tape;
  const Tensor analytic = tape.gradient(loss(), v);
  const Tensor base = v.read_value();
  std::vector<double> vals = base.to_vector<double>(), numeric(vals.size());
  const double eps = 1e-6;
  for (std::size_t j = 0; j < vals.size(); ++j) {
    std::vector<double> p = vals;
    p[j] += eps;
    v.assign(constant(p, {2, 3}, float64));
    const double up = loss().item<double>();
    p[j] -= 2 * eps;
    v.assign(constant(p, {2, 3}, float64));
    numeric[j] = (up - loss().item<double>()) / (2 * eps);
  }
  v.assign(base);
  EXPECT_TRUE(testing::gradients_close({analytic}, {constant(numeric, {2, 3}, float64)}, 1e-6));
}

TEST(VariableGradients, IntegerVariablesAreNotWatched) {
  Variable counter(constant(3));
  Variable w(constant(2.0, float64));
  GradientTape tape;
  const Tensor y = w * cast(Tensor(counter), float64);
  EXPECT_TENSOR_NEAR(tape.gradient(y, w), constant(3.0, float64), 1e-12);
}

TEST(VariableGradients, InsideATracedTrainStep) {
  Variable w(constant({{0.5, -0.5}, {0.25, 1.0}}, float64));
  Variable b(constant({0.1, -0.1}, float64));
  const Tensor x = constant({{1.0, 2.0}, {-1.0, 0.5}, {0.3, 0.3}}, float64);
  auto grads_of = [&](const Tensor& in) {
    GradientTape tape;
    const Tensor loss = reduce_mean(square(relu(matmul(in, w) + b)));
    return tape.gradient(loss, std::vector<Variable>{w, b});
  };
  const std::vector<Tensor> eager = grads_of(x);
  auto step = function([&](const Tensor& in) { return grads_of(in); }, {.name = "train_step"});
  const std::vector<Tensor> traced = step(x);
  EXPECT_TRUE(testing::gradients_close(traced, eager, 1e-12));
  EXPECT_TRUE(testing::gradients_close(step(x), eager, 1e-12));
  EXPECT_EQ(step.tracing_count(), 1);
}

// ---- calling traced functions under a tape ----

TEST(FunctionUnderTape, GuideExampleAddOfAVariable) {
  auto add = function([](const Variable& a, double b) { return Tensor(a) + b; }, {.name = "add"});
  Variable v(constant(1.0f));
  GradientTape tape;
  const Tensor result = add(v, 1.0);
  EXPECT_TENSOR_EQ(result, constant(2.0f));
  EXPECT_TENSOR_EQ(tape.gradient(result, v), constant(1.0f));
}

TEST(FunctionUnderTape, TensorArgumentsAndTheBackwardGraphIsCached) {
  int traces = 0;
  auto f = function(
      [&](const Tensor& a, const Tensor& b) {
        ++traces;
        return a * b + sin(a);
      },
      {.name = "f"});
  const Tensor a = constant({0.5, 1.0}, float64);
  const Tensor b = constant({2.0, -1.0}, float64);
  for (int call = 0; call < 3; ++call) {
    GradientTape tape;
    tape.watch(a);
    tape.watch(b);
    const auto g = tape.gradient(reduce_sum(f(a, b)), {a, b});
    EXPECT_TENSOR_NEAR(g[0], constant({2.0 + std::cos(0.5), -1.0 + std::cos(1.0)}, float64), 1e-12);
    EXPECT_TENSOR_NEAR(g[1], a, 1e-12);
  }
  EXPECT_EQ(traces, 1);
  EXPECT_EQ(f.tracing_count(), 1);
  auto cf = f.get_concrete_function(a, b);
  EXPECT_EQ(detail::backward_tracing_count(*detail::FunctionAccess::impl(cf)), 1) << "the backward graph was retraced";
}

// The backward pass replays the forward graph to differentiate it; it must not repeat the
// forward call's side effects. An integer step counter (not differentiated, so not a replay
// input) once got incremented again by every backward pass.
TEST(FunctionUnderTape, TheBackwardPassDoesNotRepeatAssigns) {
  Variable step(constant(int64_t{0}), "step");
  Variable w(constant(3.0f), "w");
  auto f = function([&](const Tensor& x) {
    step.assign_add(int64_t{1});
    return Tensor(w) * x;
  }, {.name = "f"});
  const Tensor x = constant(2.0f);
  for (int call = 1; call <= 3; ++call) {
    GradientTape tape;
    const Tensor y = f(x);
    EXPECT_TENSOR_EQ(tape.gradient(y, w), constant(2.0f));
    EXPECT_EQ(step.read_value().item<int64_t>(), call) << "after call " << call;
  }
}

// Inside one replay, a read after an assign sees the assigned value, as the forward call did:
// here y = (2x) * x, so dy/dx = 4x (reading the Variable's stored value would give 2x).
TEST(FunctionUnderTape, ReadsAfterAnAssignSeeTheAssignedValueInCondBranches) {
  Variable v(constant(0.0f), "v");
  auto f = function([&](const Tensor& x) {
    return cond(x > 0.0f, [&] {
      v.assign(x * 2.0f);
      return Tensor(v) * x;
    }, [&] { return x; });
  }, {.name = "f"});
  const Tensor x = constant(3.0f);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = f(x);
  EXPECT_TENSOR_EQ(y, constant(18.0f));
  EXPECT_TENSOR_EQ(tape.gradient(y, x), constant(12.0f));
}

TEST(FunctionUnderTape, DenseLayerThroughATracedFunction) {
  testing::Random r(41);
  const Tensor x = r.uniform({4, 3});
  Variable w(r.uniform({3, 2}));
  Variable b(r.uniform({2}, 0.1, 0.3));
  auto dense = function([&](const Tensor& in) { return relu(matmul(in, w) + b); }, {.name = "dense"});
  auto loss_of = [](const Tensor& y) { return reduce_sum(square(y)); };
  GradientTape eager_tape;
  const auto want = eager_tape.gradient(loss_of(relu(matmul(x, w) + b)), std::vector<Variable>{w, b});
  for (int call = 0; call < 2; ++call) {
    GradientTape tape;
    tape.watch(x);
    const Tensor loss = loss_of(dense(x));
    const auto got = tape.gradient(loss, std::vector<Variable>{w, b});
    EXPECT_TRUE(testing::gradients_close(got, want, 1e-12));
  }
  // d loss / d x through the function as well
  GradientTape tape;
  tape.watch(x);
  const Tensor gx = tape.gradient(loss_of(dense(x)), x);
  GradientTape tape2;
  tape2.watch(x);
  EXPECT_TRUE(testing::gradients_close({gx}, {tape2.gradient(loss_of(relu(matmul(x, w) + b)), x)}, 1e-12));
  EXPECT_EQ(dense.tracing_count(), 1);
}

TEST(FunctionUnderTape, SecondOrderThroughATracedFunction) {
  auto cube = function([](const Tensor& a) { return a * a * a; }, {.name = "cube"});
  const Tensor x = constant({1.0, -2.0}, float64);
  GradientTape outer;
  outer.watch(x);
  GradientTape inner;
  inner.watch(x);
  const Tensor dy = inner.gradient(reduce_sum(cube(x)), x);
  EXPECT_TENSOR_NEAR(dy, constant({3.0, 12.0}, float64), 1e-12);
  EXPECT_TENSOR_NEAR(outer.gradient(reduce_sum(dy), x), constant({6.0, -12.0}, float64), 1e-12);
}

// TensorFlow: a persistent tape records its own gradient() computation while it records, so a
// second gradient() of the first one is the second derivative (this used to come back 0).
TEST(HigherOrder, APersistentTapeRecordsItsOwnGradientComputation) {
  auto f = function([](const Tensor& x) { return cos(x); }, {.name = "f"});
  for (const bool traced : {false, true}) {
    SCOPED_TRACE(traced ? "through a tg::function" : "eagerly");
    const Tensor x = constant(1.0, float64);
    GradientTape tape(/*persistent=*/true);
    tape.watch(x);
    const Tensor y = traced ? f(x) : cos(x);
    const Tensor dy = tape.gradient(y, x);
    const Tensor d2 = tape.gradient(dy, x);
    const Tensor d3 = tape.gradient(d2, x);
    EXPECT_NEAR(dy.item<double>(), -std::sin(1.0), 1e-12);
    EXPECT_NEAR(d2.item<double>(), -std::cos(1.0), 1e-12);
    EXPECT_NEAR(d3.item<double>(), std::sin(1.0), 1e-12);
  }
  // A tape that stopped recording does not record its gradient computation (TF: outside the
  // tape's context): its second gradient is unconnected.
  const Tensor x = constant(1.0, float64);
  GradientTape tape(true);
  tape.watch(x);
  const Tensor y = cos(x);
  tape.stop_recording();
  const Tensor dy = tape.gradient(y, x);
  EXPECT_EQ(tape.gradient(dy, x).item<double>(), 0.0);
}

TEST(HigherOrder, ThirdDerivativeThroughNestedTapesAroundATracedFunction) {
  auto f = function([](const Tensor& x) { return cos(x); }, {.name = "f"});
  const Tensor x = constant(1.0, float64);
  GradientTape t3, t2, t1;
  t3.watch(x);
  t2.watch(x);
  t1.watch(x);
  const Tensor d1 = t1.gradient(f(x), x);
  const Tensor d2 = t2.gradient(d1, x);
  const Tensor d3 = t3.gradient(d2, x);
  EXPECT_NEAR(d1.item<double>(), -std::sin(1.0), 1e-12);
  EXPECT_NEAR(d2.item<double>(), -std::cos(1.0), 1e-12);
  EXPECT_NEAR(d3.item<double>(), std::sin(1.0), 1e-12);
}


// ---- the gradient of side-by-side slices ----

// d/dx of sum_k <slice_k(x), g_k> for x (2, width), slice k taking columns [begin, begin + cols),
// under a tape: eagerly, or inside a traced function (optimised or not).
Tensor slices_gradient(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& ranges,
                       const std::vector<Tensor>& gs) {
  GradientTape tape;
  tape.watch(x);
  Tensor target;
  for (std::size_t k = 0; k < ranges.size(); ++k) {
    const Tensor term = reduce_sum(slice(x, {0, ranges[k].first}, {-1, ranges[k].second}) * gs[k]);
    target = target.defined() ? target + term : term;
  }
  return tape.gradient(target, x);
}

// The sum of the slices' gradients padded with zeros, added in the tape's order (the last
// slice's first), element by element in float.
std::vector<float> padded_sum(int64_t width, const std::vector<std::pair<int64_t, int64_t>>& ranges,
                              const std::vector<std::vector<float>>& gs) {
  std::vector<float> sum;
  for (std::size_t k = ranges.size(); k-- > 0;) {
    std::vector<float> padded(static_cast<std::size_t>(2 * width), 0.0f);
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t c = 0; c < ranges[k].second; ++c)
        padded[static_cast<std::size_t>(r * width + ranges[k].first + c)] =
            gs[k][static_cast<std::size_t>(r * ranges[k].second + c)];
    if (sum.empty()) sum = padded;
    else for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += padded[i];
  }
  return sum;
}

// Slices that tile x along one axis (an LSTM's gates) get their gradients concatenated instead
// of padded and added; both give the same bits, -0.0 (which the padded sum turns into +0.0),
// NaN and infinities included. Slices that overlap, leave a gap or stand alone keep the padded
// sum (a lone slice keeps its -0.0). Eager, traced and traced-and-optimised at 1 and 2 threads.
TEST(SliceGradients, SideBySideSlicesGiveThePaddedSumBitForBit) {
  const float nz = -0.0f;
  const int64_t width = 8;
  const Tensor x = constant(std::vector<float>(16, 1.5f), {2, width});
  struct Case {
    const char* what;
    std::vector<std::pair<int64_t, int64_t>> ranges;
  };
  const std::vector<Case> cases = {
      {"four slices tiling the columns, out of order", {{3, 3}, {0, 2}, {6, 2}, {2, 1}}},
      {"two slices that overlap", {{0, 5}, {3, 5}}},
      {"two slices with a gap", {{0, 3}, {5, 3}}},
      {"one slice", {{2, 4}}},
  };
  const std::vector<float> pool = {nz, 2.5f, -1.25f, nz, testing::values::kInfF, 0.0f, -3.0f, 7.0f, nz, 0.5f};
  const int threads = detail::num_threads();
  for (const Case& c : cases) {
    std::vector<Tensor> gs;
    std::vector<std::vector<float>> values;
    std::size_t next = 0;
    for (const auto& [begin, cols] : c.ranges) {
      std::vector<float> v;
      for (int64_t i = 0; i < 2 * cols; ++i) v.push_back(pool[next++ % pool.size()]);
      // NaN only where no other slice adds to the element (its payload is not in question).
      if (c.ranges.size() != 2 || begin != 3) v[0] = testing::values::kNanF;
      values.push_back(v);
      gs.push_back(constant(v, {2, cols}));
    }
    const Tensor expected = constant(padded_sum(width, c.ranges, values), {2, width});
    const std::vector<Tensor> in = {x};
    const auto ranges = c.ranges;
    auto run = [&](const std::vector<Tensor>& args) { return std::vector<Tensor>{slices_gradient(args[0], ranges, gs)}; };
    for (int n : {1, 2}) {
      detail::set_num_threads(n);
      EXPECT_TRUE(testing::same_bits(run(in)[0], expected)) << c.what << ", eager, " << n << " threads";
      for (bool optimize : {false, true}) {
        auto traced = function(run, {.optimize = optimize});
        EXPECT_TRUE(testing::same_bits(traced(in)[0], expected))
            << c.what << (optimize ? ", traced and optimised, " : ", traced, ") << n << " threads";
        // The bits alone cannot tell the two forms apart: the graph says which one was built.
        const bool tiles = c.ranges.size() == 4;
        const auto& graph = traced.get_concrete_function(in).optimized_graph();
        EXPECT_EQ(testing::count_op(graph, "concat"), tiles ? 1 : 0) << c.what;
        EXPECT_EQ(testing::count_op(graph, "pad_like"), tiles ? 0 : static_cast<int>(c.ranges.size())) << c.what;
      }
    }
    detail::set_num_threads(threads);
  }
  // The tiling case's gradient has no -0.0 left, the lone slice's keeps it.
  const std::vector<float> lone = slices_gradient(x, {{2, 4}}, {constant(std::vector<float>(8, nz), {2, 4})}).to_vector<float>();
  EXPECT_TRUE(std::signbit(lone[2]));
  const std::vector<float> tiled = slices_gradient(x, {{0, 4}, {4, 4}}, {constant(std::vector<float>(8, nz), {2, 4}),
                                                                      constant(std::vector<float>(8, nz), {2, 4})})
                                       .to_vector<float>();
  for (float v : tiled) EXPECT_FALSE(std::signbit(v));
}

}  // namespace
}  // namespace tg
