// SGD and Adam: updates against independent double-precision references, eagerly and traced, and
// slot creation inside traced functions (the guide's singleton-Variable rule for optimizers).
#include <cmath>
#include <memory>

#include "support/test_util.h"

namespace tg {
namespace {

using Vec = std::vector<double>;

// Plain-C++ references of the two update rules (Keras' definitions).
struct RefSGD {
  double lr, momentum;
  bool nesterov;
  Vec velocity;
  void step(Vec& x, const Vec& g) {
    velocity.resize(x.size(), 0.0);
    for (std::size_t i = 0; i < x.size(); ++i) {
      velocity[i] = momentum * velocity[i] - lr * g[i];
      x[i] += nesterov ? momentum * velocity[i] - lr * g[i] : velocity[i];
    }
  }
};
struct RefAdam {
  double lr, b1, b2, eps;
  int t = 0;
  Vec m, v;
  void step(Vec& x, const Vec& g) {
    m.resize(x.size(), 0.0);
    v.resize(x.size(), 0.0);
    ++t;
    for (std::size_t i = 0; i < x.size(); ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      const double alpha = lr * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t));
      x[i] -= alpha * m[i] / (std::sqrt(v[i]) + eps);
    }
  }
};

// Gradients that change sign and size from step to step.
Vec grad_at(int step, std::size_t n) {
  Vec g(n);
  for (std::size_t i = 0; i < n; ++i)
    g[i] = std::sin(1.3 * step + 0.7 * static_cast<double>(i)) * (1.0 + 0.5 * static_cast<double>(i));
  return g;
}

Tensor to_tensor(const Vec& v, DType dtype) {
  return constant(v, {static_cast<int64_t>(v.size())}, dtype);
}

void expect_near(const Tensor& t, const Vec& expected, double tol) {
  const Vec got = t.dtype() == float64 ? t.to_vector<double>() : [&] {
    Vec out;
    for (float f : t.to_vector<float>()) out.push_back(f);
    return out;
  }();
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], expected[i], tol * (1 + std::abs(expected[i]))) << "element " << i;
}

TEST(SGD, PlainStepsMatchHandComputedValues) {
  Variable x(constant({1.0, -2.0}, float64), "x");
  optim::SGD opt(0.1);
  opt.apply_gradients({constant({0.5, -1.0}, float64)}, {x});
  // 1 - 0.1 * 0.5 = 0.95; -2 - 0.1 * -1 = -1.9
  EXPECT_TENSOR_NEAR(x.read_value(), constant({0.95, -1.9}, float64), 1e-15);
  opt.apply_gradients({constant({1.0, 2.0}, float64)}, {x});
  EXPECT_TENSOR_NEAR(x.read_value(), constant({0.85, -2.1}, float64), 1e-15);
  EXPECT_EQ(opt.iterations(), 2);
  EXPECT_TRUE(opt.slot_names().empty());
  EXPECT_EQ(opt.variables().size(), 2u) << "learning rate and step counter only";
}

TEST(SGD, MomentumMatchesHandComputedValues) {
  Variable x(constant({1.0}, float64));
  optim::SGD opt(0.1, 0.9);
  opt.apply_gradients({constant({1.0}, float64)}, {x});
  // v = -0.1, x = 0.9
  EXPECT_NEAR(x.read_value().to_vector<double>()[0], 0.9, 1e-15);
  opt.apply_gradients({constant({1.0}, float64)}, {x});
  // v = 0.9 * -0.1 - 0.1 = -0.19, x = 0.71
  EXPECT_NEAR(x.read_value().to_vector<double>()[0], 0.71, 1e-15);
  EXPECT_NEAR(opt.slot(x, "momentum").read_value().to_vector<double>()[0], -0.19, 1e-15);
}

TEST(SGD, NesterovMatchesHandComputedValues) {
  Variable x(constant({1.0}, float64));
  optim::SGD opt(0.1, 0.9, /*nesterov=*/true);
  opt.apply_gradients({constant({1.0}, float64)}, {x});
  // v = -0.1; x += 0.9 * -0.1 - 0.1 = -0.19 -> 0.81
  EXPECT_NEAR(x.read_value().to_vector<double>()[0], 0.81, 1e-15);
  opt.apply_gradients({constant({1.0}, float64)}, {x});
  // v = -0.19; x += 0.9 * -0.19 - 0.1 = -0.271 -> 0.539
  EXPECT_NEAR(x.read_value().to_vector<double>()[0], 0.539, 1e-14);
}

TEST(Adam, FirstStepMovesEachElementByAboutTheLearningRate) {
  // With bias correction the first step is lr * g / (|g| + eps / sqrt(1 - beta2)).
  Variable x(constant({1.0, 1.0, 1.0}, float64));
  optim::Adam opt(0.01);
  opt.apply_gradients({constant({4.0, -0.5, 0.0}, float64)}, {x});
  const double e = 1e-7 / std::sqrt(1 - 0.999);
  EXPECT_TENSOR_NEAR(x.read_value(),
                     constant({1 - 0.01 * 4 / (4 + e), 1 + 0.01 * 0.5 / (0.5 + e), 1.0}, float64),
                     1e-14);
  EXPECT_EQ(opt.slot_names(), (std::vector<std::string>{"m", "v"}));
  EXPECT_TENSOR_NEAR(opt.slot(x, "m").read_value(), constant({0.4, -0.05, 0.0}, float64), 1e-15);
  EXPECT_TENSOR_NEAR(opt.slot(x, "v").read_value(), constant({0.016, 0.00025, 0.0}, float64), 1e-14);
}

struct RuleCase {
  const char* name;
  std::function<std::unique_ptr<optim::Optimizer>()> make;
  std::function<void(Vec&, const Vec&)> ref_step;
};

std::vector<RuleCase> rule_cases() {
  auto sgd = std::make_shared<RefSGD>(RefSGD{0.05, 0.0, false, {}});
  auto mom = std::make_shared<RefSGD>(RefSGD{0.05, 0.8, false, {}});
  auto nest = std::make_shared<RefSGD>(RefSGD{0.05, 0.8, true, {}});
  auto adam = std::make_shared<RefAdam>(RefAdam{0.02, 0.8, 0.95, 1e-3, 0, {}, {}});
  return {
      {"sgd", [] { return std::make_unique<optim::SGD>(0.05); },
       [sgd](Vec& x, const Vec& g) { sgd->step(x, g); }},
      {"momentum", [] { return std::make_unique<optim::SGD>(0.05, 0.8); },
       [mom](Vec& x, const Vec& g) { mom->step(x, g); }},
      {"nesterov", [] { return std::make_unique<optim::SGD>(0.05, 0.8, true); },
       [nest](Vec& x, const Vec& g) { nest->step(x, g); }},
      {"adam", [] { return std::make_unique<optim::Adam>(0.02, 0.8, 0.95, 1e-3); },
       [adam](Vec& x, const Vec& g) { adam->step(x, g); }},
  };
}

// Several steps on two variables, eagerly and through a traced function: both follow the
// reference, step by step.
TEST(Optimizers, EagerAndTracedFollowTheReferenceForSeveralSteps) {
  for (DType dtype : {float64, float32}) {
    const double tol = dtype == float64 ? 1e-12 : 2e-5;
    for (auto& rc : rule_cases()) {
      SCOPED_TRACE(std::string(rc.name) + " " + to_string(dtype));
      const Vec a0{0.5, -1.5, 2.0}, b0{3.0, -0.25};
      Vec ra = a0, rb = b0;
      Variable ea(to_tensor(a0, dtype), "a"), eb(to_tensor(b0, dtype), "b");
      Variable ta(to_tensor(a0, dtype), "a"), tb(to_tensor(b0, dtype), "b");
      auto eager_opt = rc.make();
      auto traced_opt = rc.make();
      auto step = function([&](const std::vector<Tensor>& grads) {
        traced_opt->apply_gradients(grads, {ta, tb});
      });
      // The references are stateful per variable: run a and b through separate copies.
      auto rules_b = rule_cases();
      auto& rc_b = *std::find_if(rules_b.begin(), rules_b.end(),
                                 [&](const RuleCase& r) { return std::string(r.name) == rc.name; });
      for (int k = 1; k <= 6; ++k) {
        const Vec ga = grad_at(k, 3), gb = grad_at(10 + k, 2);
        rc.ref_step(ra, ga);
        rc_b.ref_step(rb, gb);
        eager_opt->apply_gradients({to_tensor(ga, dtype), to_tensor(gb, dtype)}, {ea, eb});
        step(std::vector<Tensor>{to_tensor(ga, dtype), to_tensor(gb, dtype)});
        expect_near(ea.read_value(), ra, tol);
        expect_near(eb.read_value(), rb, tol);
        expect_near(ta.read_value(), ra, tol);
        expect_near(tb.read_value(), rb, tol);
      }
      EXPECT_EQ(step.tracing_count(), 1);
      EXPECT_EQ(eager_opt->iterations(), 6);
      EXPECT_EQ(traced_opt->iterations(), 6);
    }
  }
}

TEST(Optimizers, PairsOverloadAndUndefinedGradientsLeaveTheirVariable) {
  Variable a(constant({1.0f}), "a"), b(constant({1.0f}), "b");
  optim::SGD opt(0.5);
  opt.apply_gradients(std::vector<std::pair<Tensor, Variable>>{{constant({1.0f}), a}, {Tensor(), b}});
  EXPECT_TENSOR_EQ(a.read_value(), constant({0.5f}));
  EXPECT_TENSOR_EQ(b.read_value(), constant({1.0f}));
}

TEST(Optimizers, LearningRateIsAVariableThatTracedFunctionsSee) {
  Variable x(constant({1.0f}));
  optim::SGD opt(0.5);
  auto step = function([&](const Tensor& g) { opt.apply_gradients({g}, {x}); });
  step(constant({1.0f}));
  EXPECT_TENSOR_EQ(x.read_value(), constant({0.5f}));
  opt.set_learning_rate(0.25);
  EXPECT_DOUBLE_EQ(opt.learning_rate(), 0.25);
  step(constant({1.0f}));
  EXPECT_TENSOR_EQ(x.read_value(), constant({0.25f}));
  EXPECT_EQ(step.tracing_count(), 1);
}

// ---- slot Variables inside traced functions (the guide's "Creating tf.Variables" section) ----

// The guide's train_step: L = sum((w * x - y)^2); its gradient written out by hand so that
// these tests do not depend on the tape.
Tensor hand_gradient(const Tensor& w, const Tensor& x, const Tensor& y) {
  return reduce_sum(2 * (w * x - y) * x);
}

TEST(OptimizerTracing, FirstTraceCreatesTheSlots) {
  Variable w(constant(2.0f), "w");
  optim::Adam opt(1e-2);
  auto train_step = function([&](const Tensor& x, const Tensor& y) {
    opt.apply_gradients({hand_gradient(w, x, y)}, {w});
  }, {.name = "train_step"});
  EXPECT_EQ(opt.variables().size(), 1u) << "only the learning rate before the first step";
  train_step(constant({-1.0f}), constant({2.0f}));
  EXPECT_EQ(opt.variables().size(), 4u) << "learning rate, iterations, m, v";
  EXPECT_EQ(opt.iterations(), 1);
  // Different shapes retrace; the slots exist already, so the new trace creates nothing.
  train_step(constant({-1.0f, 1.0f}), constant({2.0f, 0.0f}));
  EXPECT_EQ(train_step.tracing_count(), 2);
  EXPECT_EQ(opt.iterations(), 2);
  EXPECT_EQ(opt.variables().size(), 4u);
}

TEST(OptimizerTracing, SecondOptimizerInTheSameFunctionIsTheSingletonError) {
  Variable w(constant(2.0f), "w");
  const Tensor x = constant({-1.0f}), y = constant({2.0f});
  auto opt1 = std::make_shared<optim::Adam>(1e-2);
  auto opt2 = std::make_shared<optim::Adam>(1e-3);
  auto train_step = function(
      [](Variable w, const Tensor& x, const Tensor& y, std::shared_ptr<optim::Adam> optimizer) {
        optimizer->apply_gradients({hand_gradient(w, x, y)}, {w});
      },
      {.name = "train_step"});
  train_step(w, x, y, opt1);
  const float after_one = w.read_value().item<float>();
  EXPECT_NEAR(after_one, 2.0f - 0.01f, 1e-6) << "Adam's first step is about lr * sign(g)";
  EXPECT_THROW_MSG(train_step(w, x, y, opt2), ValueError,
                   "only supports singleton tg::Variables created on the first call",
                   "train_step");
  EXPECT_EQ(w.read_value().item<float>(), after_one) << "the failed trace ran nothing";
  EXPECT_EQ(opt2->iterations(), 0);
}

TEST(OptimizerTracing, OneFunctionPerOptimizerWorks) {
  Variable w(constant(2.0f), "w");
  const Tensor x = constant({-1.0f}), y = constant({2.0f});
  optim::Adam opt1(1e-2), opt2(1e-3);
  // Not a tg::function: one function is made from it per optimizer.
  auto step_body = [](Variable w, const Tensor& x, const Tensor& y, optim::Optimizer* opt) {
    opt->apply_gradients({hand_gradient(w, x, y)}, {w});
  };
  auto train_step_1 = function([&](Variable w, const Tensor& x, const Tensor& y) {
    step_body(w, x, y, &opt1);
  });
  auto train_step_2 = function([&](Variable w, const Tensor& x, const Tensor& y) {
    step_body(w, x, y, &opt2);
  });
  for (int i = 0; i < 10; ++i) {
    if (i % 2 == 0) {
      train_step_1(w, x, y);
      train_step_2(w, x, y);
    }
  }
  EXPECT_EQ(train_step_1.tracing_count(), 1);
  EXPECT_EQ(train_step_2.tracing_count(), 1);
  EXPECT_EQ(opt1.iterations(), 5);
  EXPECT_EQ(opt2.iterations(), 5);
  EXPECT_LT(w.read_value().item<float>(), 2.0f) << "w moves towards -2";
}

TEST(OptimizerTracing, SameOptimizerInASecondFunctionReusesItsSlots) {
  Variable w(constant(2.0f), "w");
  optim::SGD opt(0.1, 0.5);
  auto f1 = function([&](const Tensor& g) { opt.apply_gradients({g}, {w}); });
  auto f2 = function([&](const Tensor& g) { opt.apply_gradients({g * 2.0f}, {w}); });
  f1(constant(1.0f));  // v = -0.1, w = 1.9
  f2(constant(1.0f));  // v = 0.5 * -0.1 - 0.2 = -0.25, w = 1.65
  EXPECT_NEAR(w.read_value().item<float>(), 1.65f, 1e-6);
  EXPECT_EQ(opt.variables().size(), 3u);
}

TEST(OptimizerTracing, EagerStepsFirstThenTracedCreatesNothingInTheTrace) {
  Variable w(constant({1.0f, 2.0f}), "w");
  optim::Adam opt(0.1);
  opt.apply_gradients({constant({1.0f, 1.0f})}, {w});
  const auto vars_before = opt.variables().size();
  auto step = function([&](const Tensor& g) { opt.apply_gradients({g}, {w}); });
  step(constant({1.0f, 1.0f}));
  step(constant({1.0f, 1.0f}));
  EXPECT_EQ(opt.variables().size(), vars_before);
  EXPECT_EQ(opt.iterations(), 3);
  EXPECT_EQ(step.tracing_count(), 1);
}

TEST(OptimizerTracing, ANewVariableInALaterTraceIsTheSingletonError) {
  Variable a(constant(1.0f), "a"), b(constant({1.0f, 1.0f}), "b");
  optim::SGD opt(0.1, 0.9);
  auto step = function([&](const Tensor& g, bool use_b) {
    if (use_b) opt.apply_gradients({g}, {b});
    else opt.apply_gradients({g}, {a});
  }, {.name = "step"});
  step(constant(1.0f), false);
  EXPECT_THROW_MSG(step(constant({1.0f, 1.0f}), true), ValueError, "singleton", "'step'");
}

}  // namespace
}  // namespace tg

namespace tg {
namespace {

TEST(Optimizers, OptionsStructs) {
  optim::Adam adam({.learning_rate = 0.5, .beta2 = 0.99});
  EXPECT_DOUBLE_EQ(adam.learning_rate(), 0.5);
  EXPECT_DOUBLE_EQ(adam.options().beta1, 0.9);
  EXPECT_DOUBLE_EQ(adam.options().beta2, 0.99);
  EXPECT_DOUBLE_EQ(adam.options().epsilon, 1e-7);
  optim::SGD sgd({.learning_rate = 0.2, .momentum = 0.5, .nesterov = true});
  EXPECT_DOUBLE_EQ(sgd.momentum(), 0.5);
  EXPECT_TRUE(sgd.nesterov());
  EXPECT_EQ(sgd.slot_names(), (std::vector<std::string>{"momentum"}));
  EXPECT_EQ(sgd.name(), "SGD");
}

}  // namespace
}  // namespace tg
