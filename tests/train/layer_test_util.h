// Shared checks of the layer, loss and optimizer tests: one computation eagerly, traced and traced
// with the graph optimiser; gradients with respect to Variables against central differences.
#pragma once
#include <functional>
#include <vector>

#include "support/test_util.h"

namespace tg::testing {

using TensorsFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// f eagerly, traced without the optimiser and traced with it (each trace called twice): every
/// result within tol (relative, as tensors_near). `reset` runs before each call (for layers
/// with state, so each mode starts from the same Variables).
inline void expect_modes_agree(const TensorsFn& f, const std::vector<Tensor>& inputs, double tol,
                               const std::function<void()>& reset = [] {}) {
  reset();
  const std::vector<Tensor> eager = f(inputs);
  for (bool optimize : {false, true}) {
    auto traced = function([&](const std::vector<Tensor>& in) { return f(in); }, {.optimize = optimize});
    for (int call = 0; call < 2; ++call) {
      reset();
      const std::vector<Tensor> got = traced(inputs);
      ASSERT_EQ(got.size(), eager.size());
      for (std::size_t i = 0; i < got.size(); ++i)
        EXPECT_TENSOR_NEAR(got[i], eager[i], tol) << (optimize ? "traced+optimised" : "traced") << " output " << i;
    }
    EXPECT_EQ(traced.tracing_count(), 1);
  }
}

/// d loss / d var by central differences, element by element, for float64 Variables; each
/// Variable is restored afterwards.
inline std::vector<Tensor> variable_numeric_gradients(const std::function<Tensor()>& loss,
                                                      std::vector<Variable> vars, double eps = 1e-6) {
  std::vector<Tensor> out;
  for (Variable& v : vars) {
    const Tensor saved = v.read_value();
    std::vector<double> x = saved.to_vector<double>(), g(x.size());
    for (std::size_t j = 0; j < x.size(); ++j) {
      auto at = [&](double delta) {
        std::vector<double> p = x;
        p[j] += delta;
        v.assign(constant(p, saved.shape(), float64));
        return loss().item<double>();
      };
      g[j] = (at(eps) - at(-eps)) / (2 * eps);
    }
    v.assign(saved);
    out.push_back(constant(g, saved.shape(), float64));
  }
  return out;
}

/// The tape's gradients of loss() for the Variables, eagerly and inside a tg::function, both
/// against central differences (tol relative to 1 + |numeric|).
inline void check_variable_gradients(const std::function<Tensor()>& loss, const std::vector<Variable>& vars,
                                     double tol = 1e-6) {
  const std::vector<Tensor> numeric = variable_numeric_gradients(loss, vars);
  auto tape_grads = [&] {
    GradientTape tape;
    return tape.gradient(loss(), vars);
  };
  const std::vector<Tensor> eager = tape_grads();
  auto traced = function([&] { return tape_grads(); });
  const std::vector<Tensor> in_graph = traced();
  ASSERT_EQ(eager.size(), numeric.size());
  ASSERT_EQ(in_graph.size(), numeric.size());
  for (std::size_t i = 0; i < numeric.size(); ++i) {
    EXPECT_TENSOR_NEAR(eager[i], numeric[i], tol) << "eager gradient of variable " << vars[i].name();
    EXPECT_TENSOR_NEAR(in_graph[i], numeric[i], tol) << "traced gradient of variable " << vars[i].name();
  }
}

}  // namespace tg::testing
