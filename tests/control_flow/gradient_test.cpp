// Gradients through tg::cond against central finite differences in float64: inside a traced
// function, and through a call of a traced function under an eager tape.
#include <cmath>
#include <functional>

#include "support/test_util.h"

namespace tg {
namespace {

// The model: a cond on a data-dependent predicate, with captures used by one branch or both.
Tensor model(const Tensor& x, const Tensor& w) {
  Tensor h = x * w;  // captured by both branches
  return cond(reduce_sum(x) > 0.0,
              [&] { return reduce_sum(h * h + sin(w)); },
              [&] { return reduce_sum(exp(h) * 3.0); });
}

// Central differences of model(x, w) with respect to x.
std::vector<double> numeric_grad_x(const std::vector<double>& x, const std::vector<double>& w) {
  const double eps = 1e-6;
  std::vector<double> g(x.size());
  auto eval = [&](const std::vector<double>& xv) {
    return model(constant(xv, {static_cast<int64_t>(xv.size())}, float64),
                 constant(w, {static_cast<int64_t>(w.size())}, float64)).item<double>();
  };
  for (std::size_t i = 0; i < x.size(); ++i) {
    auto p = x, m = x;
    p[i] += eps;
    m[i] -= eps;
    g[i] = (eval(p) - eval(m)) / (2 * eps);
  }
  return g;
}

TEST(CondGradient, InsideATracedFunctionMatchesFiniteDifferences) {
  auto grad_fn = function([](const Tensor& x, const Tensor& w) {
    GradientTape tape;
    tape.watch(x);
    tape.watch(w);
    Tensor y = model(x, w);
    return tape.gradient(y, std::vector<Tensor>{x, w});
  });
  const std::vector<double> w{0.5, -1.5, 2.0};
  for (const std::vector<double>& x : {std::vector<double>{0.3, 0.7, -0.2}, std::vector<double>{-0.3, -0.7, 0.2}}) {
    const Tensor xt = constant(x, {3}, float64), wt = constant(w, {3}, float64);
    auto g = grad_fn(xt, wt);
    EXPECT_TENSOR_NEAR(g[0], constant(numeric_grad_x(x, w), {3}, float64), 1e-6);
    // The same gradient eagerly (there the tape sees the taken branch's ops directly).
    GradientTape tape;
    tape.watch(xt);
    Tensor y = model(xt, wt);
    EXPECT_TENSOR_NEAR(g[0], tape.gradient(y, xt), 1e-12);
  }
  EXPECT_EQ(grad_fn.tracing_count(), 1);
}

TEST(CondGradient, ThroughATracedFunctionCalledUnderAnEagerTape) {
  auto f = function(model);
  const std::vector<double> w{0.25, 1.0, -0.5};
  for (const std::vector<double>& x : {std::vector<double>{1.0, 0.5, -0.1}, std::vector<double>{-1.0, 0.5, -0.1}}) {
    const Tensor xt = constant(x, {3}, float64);
    GradientTape tape;
    tape.watch(xt);
    Tensor y = f(xt, constant(w, {3}, float64));
    EXPECT_TENSOR_NEAR(tape.gradient(y, xt), constant(numeric_grad_x(x, w), {3}, float64), 1e-6);
  }
}

TEST(CondGradient, UnusedCapturesGetZeros) {
  auto f = function([](const Tensor& p, const Tensor& a, const Tensor& b) {
    GradientTape tape;
    tape.watch(a);
    tape.watch(b);
    Tensor y = cond(p, [&] { return a * 2.0; }, [&] { return b * 3.0; });
    return tape.gradient(y, std::vector<Tensor>{a, b});
  });
  auto g = f(constant(true), constant(1.0, float64), constant(1.0, float64));
  EXPECT_TENSOR_EQ(g[0], constant(2.0, float64));
  EXPECT_TENSOR_EQ(g[1], constant(0.0, float64));
  g = f(constant(false), constant(1.0, float64), constant(1.0, float64));
  EXPECT_TENSOR_EQ(g[0], constant(0.0, float64));
  EXPECT_TENSOR_EQ(g[1], constant(3.0, float64));
}

// A loop with a data-dependent trip count, an integer counter used by the body, and a captured
// weight: d/dx and d/dw against finite differences.
Tensor loop_model(const Tensor& x, const Tensor& w) {
  auto [i, y] = while_loop(
      [](const Tensor& i, const Tensor& y) { return (i < 4) && (reduce_sum(y) < 50.0); },
      [&](const Tensor& i, const Tensor& y) { return std::tuple{i + 1, sin(y) * w + y * cast(i, float64)}; },
      std::tuple{constant(0), x});
  return reduce_sum(y * y);
}

std::vector<double> numeric_grad(const std::function<double(const std::vector<double>&)>& f, const std::vector<double>& x) {
  const double eps = 1e-6;
  std::vector<double> g(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    auto p = x, m = x;
    p[i] += eps;
    m[i] -= eps;
    g[i] = (f(p) - f(m)) / (2 * eps);
  }
  return g;
}

TEST(WhileGradient, InsideATracedFunctionMatchesFiniteDifferences) {
  auto grad_fn = function([](const Tensor& x, const Tensor& w) {
    GradientTape tape;
    tape.watch(x);
    tape.watch(w);
    return tape.gradient(loop_model(x, w), std::vector<Tensor>{x, w});
  });
  const std::vector<double> x{0.3, -0.4, 0.9}, w{1.5, 0.5, -0.7};
  auto vec = [](const std::vector<double>& v) { return constant(v, {static_cast<int64_t>(v.size())}, float64); };
  auto g = grad_fn(vec(x), vec(w));
  auto fx = [&](const std::vector<double>& xv) { return loop_model(vec(xv), vec(w)).item<double>(); };
  auto fw = [&](const std::vector<double>& wv) { return loop_model(vec(x), vec(wv)).item<double>(); };
  EXPECT_TENSOR_NEAR(g[0], vec(numeric_grad(fx, x)), 1e-6);
  EXPECT_TENSOR_NEAR(g[1], vec(numeric_grad(fw, w)), 1e-6);
  // Eagerly the loop is a C++ loop the tape sees op by op: the same numbers.
  GradientTape tape;
  const Tensor xt = vec(x), wt = vec(w);
  tape.watch(xt);
  tape.watch(wt);
  auto ge = tape.gradient(loop_model(xt, wt), std::vector<Tensor>{xt, wt});
  EXPECT_TENSOR_NEAR(g[0], ge[0], 1e-10);
  EXPECT_TENSOR_NEAR(g[1], ge[1], 1e-10);
}

TEST(WhileGradient, ForRangeThroughATracedFunctionUnderAnEagerTape) {
  auto f = function([](const Tensor& x) {
    return for_range(3, x, [](const Tensor&, const Tensor& s) { return tanh(s) * 2.0; });
  });
  const std::vector<double> x{0.1, -0.5};
  const Tensor xt = constant(x, {2}, float64);
  GradientTape tape;
  tape.watch(xt);
  Tensor y = reduce_sum(f(xt));
  auto fx = [&](const std::vector<double>& xv) { return reduce_sum(f(constant(xv, {2}, float64))).item<double>(); };
  EXPECT_TENSOR_NEAR(tape.gradient(y, xt), constant(numeric_grad(fx, x), {2}, float64), 1e-6);
}

// A Variable read inside a branch or loop body is not an input of the cond / while node, so
// its gradient cannot flow through the node: gradient() refuses it (never a silent zero), and
// the workaround it names - read before, capture the value - gives the right gradient.
TEST(ControlFlowGradients, VariablesReadInsideABranchOrBodyAreRefusedWithTheWorkaround) {
  Variable w(constant(3.0, float64));
  auto in_branch = function([&](const Tensor& x) {
    GradientTape tape;
    Tensor y = cond(x > 0.0, [&] { return x * w.read_value(); }, [&] { return x; });
    return tape.gradient(y, w);
  });
  EXPECT_THROW_MSG(in_branch(constant(2.0, float64)), InvalidArgumentError, "[gradient]",
                   "branches read the Variable", "w.read_value()");
  auto in_body = function([&](const Tensor& x) {
    GradientTape tape;
    auto [i, y] = while_loop([](const Tensor& i, const Tensor&) { return i < 2; },
                             [&](const Tensor& i, const Tensor& y) {
                               return std::tuple{i + 1, y * w.read_value()};
                             },
                             std::tuple{constant(0), x});
    return tape.gradient(y, w);
  });
  EXPECT_THROW_MSG(in_body(constant(2.0, float64)), InvalidArgumentError, "body reads the Variable");

  auto read_before = function([&](const Tensor& x) {
    GradientTape tape;
    const Tensor w_value = w.read_value();
    // std::get, not a structured binding: clang 14 cannot capture one in the lambdas below.
    const auto loop = while_loop([](const Tensor& i, const Tensor&) { return i < 2; },
                                 [&](const Tensor& i, const Tensor& y) {
                                   return std::tuple{i + 1, y * w_value};
                                 },
                                 std::tuple{constant(0), x});
    const Tensor y = std::get<1>(loop);
    Tensor z = cond(x > 0.0, [&] { return y * w_value; }, [&] { return y; });
    return tape.gradient(z, w);
  });
  // z = x * w^3 for x > 0: dz/dw = 3 x w^2 = 54.
  EXPECT_NEAR(read_before(constant(2.0, float64)).item<double>(), 54.0, 1e-9);
  // Reading a Variable inside is fine when its gradient is not asked for.
  auto other_source = function([&](const Tensor& x) {
    GradientTape tape;
    tape.watch(x);
    Tensor y = cond(x > 0.0, [&] { return x * w.read_value(); }, [&] { return x; });
    return tape.gradient(y, x);
  });
  EXPECT_NEAR(other_source(constant(2.0, float64)).item<double>(), 3.0, 1e-12);

  // The same through a call of a traced function under an eager tape.
  auto f = function([&](const Tensor& x) {
    return cond(x > 0.0, [&] { return x * w.read_value(); }, [&] { return x; });
  });
  const Tensor x = constant(2.0, float64);
  {
    GradientTape tape;
    tape.watch(x);
    EXPECT_NEAR(tape.gradient(f(x), x).item<double>(), 3.0, 1e-12);
  }
  GradientTape tape;
  const Tensor y = f(x);
  EXPECT_THROW_MSG(tape.gradient(y, w), InvalidArgumentError, "branches read the Variable");
}

}  // namespace
}  // namespace tg
