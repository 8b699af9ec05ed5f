#include "autodiff/grad_check.h"

#include <cmath>

#include "support/op_case.h"

namespace tg::testing {

Tensor Random::uniform(const TensorShape& shape, double lo, double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(static_cast<std::size_t>(shape.num_elements()));
  for (double& x : v) x = d(gen_);
  return constant(v, shape, float64);
}

Tensor Random::away_from_zero(const TensorShape& shape, double lo, double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::bernoulli_distribution sign(0.5);
  std::vector<double> v(static_cast<std::size_t>(shape.num_elements()));
  for (double& x : v) x = sign(gen_) ? d(gen_) : -d(gen_);
  return constant(v, shape, float64);
}

Tensor weighted_loss(const CaseFn& fn, const std::vector<Tensor>& inputs, const Tensor& w) {
  return reduce_sum(mul(fn(inputs), w));
}

std::vector<std::size_t> floating_inputs(const std::vector<Tensor>& inputs) {
  std::vector<std::size_t> idx;
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (is_floating(inputs[i].dtype())) idx.push_back(i);
  return idx;
}

std::vector<Tensor> numeric_gradients(const GradCase& c, const Tensor& w) {
  std::vector<Tensor> grads;
  for (std::size_t i : floating_inputs(c.inputs)) {
    const Tensor& x = c.inputs[i];
    std::vector<double> base = x.to_vector<double>();
    std::vector<double> g(base.size());
    std::vector<Tensor> in = c.inputs;
    for (std::size_t j = 0; j < base.size(); ++j) {
      std::vector<double> v = base;
      v[j] = base[j] + c.eps;
      in[i] = constant(v, x.shape(), float64);
      const double up = weighted_loss(c.fn, in, w).item<double>();
      v[j] = base[j] - c.eps;
      in[i] = constant(v, x.shape(), float64);
      const double down = weighted_loss(c.fn, in, w).item<double>();
      g[j] = (up - down) / (2 * c.eps);
    }
    grads.push_back(constant(g, x.shape(), float64));
  }
  return grads;
}

std::vector<Tensor> tape_gradients_eager(const GradCase& c, const Tensor& w) {
  GradientTape tape;
  std::vector<Tensor> sources;
  for (std::size_t i : floating_inputs(c.inputs)) {
    tape.watch(c.inputs[i]);
    sources.push_back(c.inputs[i]);
  }
  const Tensor loss = weighted_loss(c.fn, c.inputs, w);
  return tape.gradient(loss, sources);
}

::testing::AssertionResult gradients_close(const std::vector<Tensor>& actual,
                                           const std::vector<Tensor>& expected, double tol) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure() << actual.size() << " gradients, expected " << expected.size();
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const Tensor& a = actual[i];
    const Tensor& e = expected[i];
    if (!a.defined()) return ::testing::AssertionFailure() << "gradient " << i << " is empty";
    if (a.dtype() != e.dtype() || a.shape() != e.shape())
      return ::testing::AssertionFailure()
             << "gradient " << i << " is " << to_string(a.dtype()) << " " << a.shape().to_string()
             << ", expected " << to_string(e.dtype()) << " " << e.shape().to_string();
    const std::vector<double> av = a.to_vector<double>(), ev = e.to_vector<double>();
    for (std::size_t j = 0; j < av.size(); ++j)
      if (!(std::abs(av[j] - ev[j]) <= tol * (1 + std::abs(ev[j]))))
        return ::testing::AssertionFailure() << "gradient " << i << " element " << j << ": tape "
                                             << av[j] << ", finite differences " << ev[j]
                                             << "\n tape: " << a << "\n numeric: " << e;
  }
  return ::testing::AssertionSuccess();
}

namespace {

// The traced version: the tape lives inside the function body; w is the last input.
auto traced_gradients(const GradCase& c) {
  const CaseFn fn = c.fn;
  const std::vector<std::size_t> idx = floating_inputs(c.inputs);
  return function(
      [fn, idx](const std::vector<Tensor>& in) {
        GradientTape tape;
        std::vector<Tensor> sources;
        for (std::size_t i : idx) {
          tape.watch(in[i]);
          sources.push_back(in[i]);
        }
        const std::vector<Tensor> xs(in.begin(), in.end() - 1);
        return tape.gradient(weighted_loss(fn, xs, in.back()), sources);
      },
      {.name = "grad_check_" + c.op});
}

}  // namespace

void check_gradients(const GradCase& c, uint64_t seed) {
  SCOPED_TRACE(c.op + ": " + c.label);
  const Tensor y = c.fn(c.inputs);
  ASSERT_TRUE(is_floating(y.dtype()));
  Random rng(seed);
  const Tensor w = rng.uniform(y.shape(), 0.5, 1.5);
  const std::vector<Tensor> numeric = numeric_gradients(c, w);
  EXPECT_TRUE(gradients_close(tape_gradients_eager(c, w), numeric, c.tol)) << "(eager)";

  std::vector<Tensor> all = c.inputs;
  all.push_back(w);
  auto traced = traced_gradients(c);
  EXPECT_TRUE(gradients_close(traced(all), numeric, c.tol)) << "(traced)";
  EXPECT_TRUE(gradients_close(traced(all), numeric, c.tol)) << "(traced, second call)";
  EXPECT_EQ(traced.tracing_count(), 1);

  // Every dim None: rules must take shapes from the runtime values, not the static ones.
  auto traced_none = traced_gradients(c);
  try {
    auto cf = traced_none.get_concrete_function(generalised_specs(all, /*unknown_rank=*/false));
    EXPECT_TRUE(gradients_close(cf(all), numeric, c.tol)) << "(traced, None dims)";
  } catch (const Error& e) {
    ADD_FAILURE() << "(traced, None dims) failed: " << e.what();
  }
}

}  // namespace tg::testing
