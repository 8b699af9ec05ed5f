// AdamW, RMSprop, gradient clipping and learning-rate schedules against hand-written references,
// eagerly and in a traced train_step that must not retrace as the step advances.
#include <cmath>
#include <numbers>

#include "train/layer_test_util.h"

namespace tg {
namespace {

// A fixed gradient per step (float64, shape (3,)) so the references need no autodiff.
std::vector<double> grad_at(int step) {
  return {0.5 - 0.1 * step, -1.0 + 0.3 * step, 2.0 / (1 + step)};
}
const std::vector<double> kStart{1.0, -2.0, 0.5};

// Runs `steps` updates of opt on a fresh float64 Variable, eagerly or in one traced step.
std::vector<double> run(optim::Optimizer& opt, int steps, bool traced) {
  Variable w(constant(kStart, {3}, float64), "w");
  auto step_fn = [&](const Tensor& g) { opt.apply_gradients({g}, {w}); };
  auto traced_step = function([&](const Tensor& g) { step_fn(g); });
  for (int t = 0; t < steps; ++t) {
    const Tensor g = constant(grad_at(t), {3}, float64);
    if (traced) traced_step(g);
    else step_fn(g);
  }
  if (traced) {
    EXPECT_EQ(traced_step.tracing_count(), 1);
  }
  return w.read_value().to_vector<double>();
}

std::vector<double> adamw_reference(double lr, double wd, double b1, double b2, double eps, int steps) {
  std::vector<double> x = kStart, m(3, 0.0), v(3, 0.0);
  for (int t = 0; t < steps; ++t) {
    const auto g = grad_at(t);
    const double alpha = lr * std::sqrt(1 - std::pow(b2, t + 1)) / (1 - std::pow(b1, t + 1));
    for (int i = 0; i < 3; ++i) {
      x[i] -= x[i] * wd * lr;  // decoupled decay first, from the same call's learning rate
      m[i] += (g[i] - m[i]) * (1 - b1);
      v[i] += (g[i] * g[i] - v[i]) * (1 - b2);
      x[i] -= m[i] * alpha / (std::sqrt(v[i]) + eps);
    }
  }
  return x;
}

TEST(AdamW, MatchesTheKerasUpdateOverSeveralStepsEagerAndTraced) {
  for (bool traced : {false, true}) {
    optim::AdamW opt({.learning_rate = 0.05, .weight_decay = 0.1});
    const auto got = run(opt, 6, traced);
    const auto expected = adamw_reference(0.05, 0.1, 0.9, 0.999, 1e-7, 6);
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(got[i], expected[i], 1e-12) << (traced ? "traced " : "eager ") << i;
    EXPECT_EQ(opt.iterations(), 6);
    EXPECT_EQ(opt.name(), "AdamW");
    EXPECT_EQ(opt.slot_names(), (std::vector<std::string>{"m", "v"}));
  }
  // weight_decay 0 is Adam exactly.
  optim::AdamW no_decay(0.05, 0.0);
  optim::Adam adam(0.05);
  EXPECT_EQ(run(no_decay, 4, false), run(adam, 4, false));
  EXPECT_THROW_MSG(optim::AdamW(0.01, -0.1), ValueError, "[AdamW]", "weight_decay");
  EXPECT_THROW_MSG(optim::AdamW(0.01, 0.1, 1.0), ValueError, "beta1");
}

std::vector<double> rmsprop_reference(double lr, double rho, double momentum, double eps, bool centered, int steps) {
  std::vector<double> x = kStart, vel(3, 0.0), mom(3, 0.0), avg(3, 0.0);
  for (int t = 0; t < steps; ++t) {
    const auto g = grad_at(t);
    for (int i = 0; i < 3; ++i) {
      vel[i] = rho * vel[i] + (1 - rho) * g[i] * g[i];
      double denominator = vel[i] + eps;
      if (centered) {
        avg[i] = rho * avg[i] + (1 - rho) * g[i];
        denominator = vel[i] - avg[i] * avg[i] + eps;
      }
      const double increment = lr * g[i] / std::sqrt(denominator);
      if (momentum > 0) {
        mom[i] = momentum * mom[i] + increment;
        x[i] -= mom[i];
      } else {
        x[i] -= increment;
      }
    }
  }
  return x;
}

TEST(RMSprop, MatchesTheKerasUpdateWithAndWithoutMomentumAndCentering) {
  for (bool centered : {false, true})
    for (double momentum : {0.0, 0.8})
      for (bool traced : {false, true}) {
        optim::RMSprop opt({.learning_rate = 0.01, .rho = 0.8, .momentum = momentum, .epsilon = 1e-6,
                            .centered = centered});
        const auto got = run(opt, 7, traced);
        const auto expected = rmsprop_reference(0.01, 0.8, momentum, 1e-6, centered, 7);
        for (int i = 0; i < 3; ++i)
          EXPECT_NEAR(got[i], expected[i], 1e-12)
              << "centered " << centered << " momentum " << momentum << " traced " << traced;
        std::vector<std::string> slots{"velocity"};
        if (momentum > 0) slots.emplace_back("momentum");
        if (centered) slots.emplace_back("average_gradient");
        EXPECT_EQ(opt.slot_names(), slots);
      }
  // Keras's documented example: var 10, loss var^2 / 2, one step at lr 0.1 gives 9.683772.
  optim::RMSprop keras_example(0.1);
  Variable v(constant(10.0f));
  keras_example.apply_gradients({v.read_value()}, {v});
  EXPECT_NEAR(v.read_value().item<float>(), 9.683772f, 1e-5);
  EXPECT_THROW_MSG(optim::RMSprop(0.01, 1.5), ValueError, "[RMSprop]", "rho");
  EXPECT_THROW_MSG(optim::RMSprop(0.01, 0.9, -0.1), ValueError, "momentum");
  EXPECT_THROW_MSG(optim::RMSprop(0.01, 0.9, 0.0, -1.0), ValueError, "epsilon");
}

// ---- clipping ----

TEST(ClipByValue, ClipsEachGradientAndPassesUndefinedOnes) {
  const std::vector<Tensor> grads{constant({-3.0f, 0.5f, 2.0f}), Tensor{}, constant({{-0.1, 7.0}})};
  const auto clipped = optim::clip_by_value(grads, -1.0, 1.0);
  ASSERT_EQ(clipped.size(), 3u);
  EXPECT_TENSOR_EQ(clipped[0], constant({-1.0f, 0.5f, 1.0f}));
  EXPECT_FALSE(clipped[1].defined());
  EXPECT_TENSOR_EQ(clipped[2], constant({{-0.1, 1.0}}));
  auto f = function([](const Tensor& g) { return optim::clip_by_value({g}, 0.0, 0.25)[0]; });
  EXPECT_TENSOR_EQ(f(constant({-3.0f, 0.1f, 2.0f})), constant({0.0f, 0.1f, 0.25f}));
  EXPECT_THROW_MSG(optim::clip_by_value(grads, 1.0, -1.0), InvalidArgumentError, "[clip_by_value]", "<=");
  EXPECT_THROW_MSG(optim::clip_by_value(grads, std::nan(""), 1.0), InvalidArgumentError, "clip_value_min");
  EXPECT_THROW_MSG(optim::clip_by_value({constant({1, 2})}, 0.0, 1.0), TypeError, "gradient 0", "int32");
}

TEST(ClipByGlobalNorm, ScalesEveryGradientByOneFactorAndReturnsTheNorm) {
  // Norm sqrt(9 + 16 + 144) = 13.
  const std::vector<Tensor> grads{constant({3.0, 4.0}, float64), Tensor{}, constant({{12.0}}, float64)};
  auto [clipped, norm] = optim::clip_by_global_norm(grads, 6.5);
  EXPECT_DOUBLE_EQ(norm.item<double>(), 13.0);
  EXPECT_TENSOR_NEAR(clipped[0], constant({1.5, 2.0}, float64), 1e-15);
  EXPECT_FALSE(clipped[1].defined());
  EXPECT_TENSOR_NEAR(clipped[2], constant({{6.0}}, float64), 1e-15);
  EXPECT_NEAR(optim::global_norm(clipped).item<double>(), 6.5, 1e-12);
  // Below the limit: unchanged (scale clip * (1 / clip)).
  auto [same, n2] = optim::clip_by_global_norm(grads, 100.0);
  EXPECT_TENSOR_NEAR(same[0], grads[0], 1e-15);
  EXPECT_DOUBLE_EQ(n2.item<double>(), 13.0);
  // An inf or NaN anywhere: the norm is non-finite and every clipped value NaN, as in TF.
  const float inf = std::numeric_limits<float>::infinity();
  auto [bad, bad_norm] = optim::clip_by_global_norm({constant({1.0f, inf}), constant({2.0f})}, 1.0);
  EXPECT_TRUE(std::isinf(bad_norm.item<float>()));
  for (const Tensor& t : bad)
    for (float v : t.to_vector<float>()) EXPECT_TRUE(std::isnan(v));
  auto [nan_clipped, nan_norm] = optim::clip_by_global_norm({constant({1.0f, std::nanf("")})}, 1.0);
  EXPECT_TRUE(std::isnan(nan_norm.item<float>()));
  EXPECT_TRUE(std::isnan(nan_clipped[0].to_vector<float>()[0]));
  // Traced: the same numbers.
  auto f = function([](const Tensor& a, const Tensor& b) {
    auto [c, n] = optim::clip_by_global_norm({a, b}, 6.5);
    return std::vector<Tensor>{c[0], c[1], n};
  });
  const auto out = f(grads[0], grads[2]);
  EXPECT_TENSOR_NEAR(out[0], constant({1.5, 2.0}, float64), 1e-15);
  EXPECT_DOUBLE_EQ(out[2].item<double>(), 13.0);
  EXPECT_THROW_MSG(optim::clip_by_global_norm(grads, 0.0), ValueError, "[clip_by_global_norm]", "clip_norm");
  EXPECT_THROW_MSG(optim::clip_by_global_norm({Tensor{}}, 1.0), ValueError, "[global_norm]", "undefined");
  EXPECT_THROW_MSG(optim::global_norm({constant({1.0f}), constant({1.0}, float64)}), TypeError, "mix", "float32", "float64");
}

// ---- learning-rate schedules ----

double exponential_ref(int64_t step, double lr, double steps, double rate, bool staircase) {
  const double p = static_cast<double>(step) / steps;
  return lr * std::pow(rate, staircase ? std::floor(p) : p);
}
double cosine_ref(int64_t step, double lr, double decay_steps, double alpha, std::optional<double> target,
                  double warmup) {
  auto decayed = [&](double s, double from) {
    return from * ((1 - alpha) * 0.5 * (1 + std::cos(std::numbers::pi * s / decay_steps)) + alpha);
  };
  const double s = static_cast<double>(step);
  if (!target) return decayed(std::min(s, decay_steps), lr);
  const double t = std::min(s, decay_steps + warmup);
  if (t < warmup) return (*target - lr) * (t / warmup) + lr;
  return decayed(t - warmup, *target);
}

TEST(Schedules, ClosedFormsAtEveryStep) {
  const optim::ExponentialDecay smooth(0.1, 4, 0.5), stairs(0.1, 4, 0.5, true);
  const optim::CosineDecay cosine(0.2, 10, 0.1), warm(0.0, 10, 0.0, 0.4, 5);
  for (int64_t s = 0; s < 25; ++s) {
    EXPECT_NEAR(smooth.value_at(s), exponential_ref(s, 0.1, 4, 0.5, false), 1e-15) << s;
    EXPECT_NEAR(stairs.value_at(s), exponential_ref(s, 0.1, 4, 0.5, true), 1e-15) << s;
    EXPECT_NEAR(cosine.value_at(s), cosine_ref(s, 0.2, 10, 0.1, std::nullopt, 0), 1e-15) << s;
    EXPECT_NEAR(warm.value_at(s), cosine_ref(s, 0.0, 10, 0.0, 0.4, 5), 1e-15) << s;
  }
  EXPECT_DOUBLE_EQ(warm.value_at(5), 0.4);   // the end of the warm-up is the target
  EXPECT_DOUBLE_EQ(warm.value_at(15), 0.0);  // then cosine to alpha * target, and it stays
  EXPECT_DOUBLE_EQ(optim::CosineDecay(0.3, 10, 0.0, 0.5, 0).value_at(0), 0.5);  // no warm-up steps
  EXPECT_DOUBLE_EQ(stairs(constant(int64_t{9})).item<double>(), 0.025);         // a tensor step
  EXPECT_THROW_MSG(optim::ExponentialDecay(0.1, 0, 0.5), ValueError, "[ExponentialDecay]", "decay_steps");
  EXPECT_THROW_MSG(optim::CosineDecay(0.1, 10, 0.0, 0.2, -1), ValueError, "[CosineDecay]", "warmup_steps");
  EXPECT_THROW_MSG(optim::CosineDecay(std::nan(""), 10), ValueError, "initial_learning_rate");
  EXPECT_THROW_MSG(stairs(constant(true)), TypeError, "numeric scalar");
}

// SGD with gradient 1 moves each step by exactly the step's learning rate, so the Variable's
// trajectory shows which rate every call of a traced step used.
TEST(Schedules, ATracedTrainStepReadsTheRateFromTheStepCounterWithoutRetracing) {
  for (const bool warmup : {false, true}) {
    std::shared_ptr<const optim::LearningRateSchedule> schedule;
    if (warmup) schedule = std::make_shared<optim::CosineDecay>(0.01, 20, 0.1, 0.5, 8);
    else schedule = std::make_shared<optim::ExponentialDecay>(0.5, 3, 0.7, true);
    optim::SGD opt(0.0);
    opt.set_learning_rate_schedule(schedule);
    Variable w(constant(0.0, float64), "w");
    auto train_step = function([&](const Tensor& g) {
      opt.apply_gradients({g}, {w});
      return w.read_value();
    }, {.name = "train_step"});
    double expected = 0;
    for (int64_t step = 0; step < 40; ++step) {
      EXPECT_NEAR(opt.learning_rate(), schedule->value_at(step), 1e-15);
      expected -= schedule->value_at(step);
      EXPECT_NEAR(train_step(constant(1.0, float64)).item<double>(), expected, 1e-12) << "step " << step;
    }
    EXPECT_EQ(train_step.tracing_count(), 1);
    EXPECT_EQ(opt.iterations(), 40);
    EXPECT_THROW_MSG(opt.set_learning_rate(0.1), TypeError, "schedule", "not settable");
    EXPECT_THROW_MSG(opt.set_learning_rate_schedule(schedule), ValueError, "before the first apply_gradients");
  }
  // AdamW's decay follows the schedule's rate too (checked against a hand-written step).
  optim::AdamW opt(0.0, 0.5);
  opt.set_learning_rate_schedule(std::make_shared<optim::ExponentialDecay>(0.2, 1, 0.5));
  Variable w(constant(2.0, float64));
  opt.apply_gradients({constant(0.0, float64)}, {w});  // zero gradient: only the decay moves w
  EXPECT_NEAR(w.read_value().item<double>(), 2.0 - 2.0 * 0.5 * 0.2, 1e-15);
  opt.apply_gradients({constant(0.0, float64)}, {w});  // step 1: rate 0.1
  EXPECT_NEAR(w.read_value().item<double>(), 1.8 - 1.8 * 0.5 * 0.1, 1e-15);
  EXPECT_THROW_MSG(optim::SGD(0.1).set_learning_rate_schedule(nullptr), ValueError, "null");
}

}  // namespace
}  // namespace tg
