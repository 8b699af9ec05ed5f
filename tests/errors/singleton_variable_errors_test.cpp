// The singleton-Variable error names the Variable a later trace tried to create (name, dtype,
// shape) and what made it, with the fix that fits that maker.
#include <memory>

#include "support/test_util.h"

namespace tg {
namespace {

TEST(SingletonVariableErrors, ASecondOptimizerNamesItsStepCounterAndTheFix) {
  Variable w(constant({2.0f, 1.0f}), "w");
  const Tensor x = constant({-1.0f, 1.0f}), y = constant({2.0f, 0.0f});
  auto opt1 = std::make_shared<optim::Adam>(1e-2);
  auto opt2 = std::make_shared<optim::Adam>(1e-3);
  auto train_step = function(
      [](Variable w, const Tensor& x, const Tensor& y, std::shared_ptr<optim::Adam> optimizer) {
        optimizer->apply_gradients({(w.read_value() * x - y) * x}, {w});
      },
      {.name = "train_step"});
  train_step(w, x, y, opt1);
  EXPECT_THROW_MSG(train_step(w, x, y, opt2), ValueError,
                   "only supports singleton tg::Variables created on the first call",
                   "function 'train_step' tried to create tg::Variable 'Adam/iterations' (int64, shape ())",
                   "made by optimizer 'Adam' (its step counter) in a later trace (trace 2)",
                   "one tg::function per optimizer", "(while tracing function 'train_step', trace 2");
}

TEST(SingletonVariableErrors, AnOptimizerSlotForANewVariableIsNamed) {
  // The step counter exists: the first Variable the later trace makes is the slot.
  Variable a(constant(1.0f), "a"), b(constant({1.0f, 1.0f}), "b");
  optim::Adam opt(0.1);
  auto step = function([&](const Tensor& g, bool use_b) {
    if (use_b) opt.apply_gradients({g}, {b});
    else opt.apply_gradients({g}, {a});
  }, {.name = "step"});
  step(constant(1.0f), false);
  EXPECT_THROW_MSG(step(constant({1.0f, 1.0f}), true), ValueError,
                   "tried to create tg::Variable 'b/m' (float32, shape (2,))",
                   "made by optimizer 'Adam' (its slot 'm' for tg::Variable 'b')",
                   "(while tracing function 'step', trace 2");
  EXPECT_EQ(opt.variables().size(), 4u) << "learning rate, step counter, a/m, a/v: nothing half-built";
}

TEST(SingletonVariableErrors, AVariableInTheBodyIsNamedWithItsShapeAndDtype) {
  auto f = function([](const Tensor& x) {
    Variable v(zeros({3}, float64), "counter");
    return x + 1.0f;
  }, {.name = "f"});
  // The first trace is traced a second time to check the body: the error says so, not "a later
  // trace", which trace 1 is not.
  EXPECT_THROW_MSG(f(constant(1.0f)), ValueError,
                   "function 'f' tried to create tg::Variable 'counter' (float64, shape (3,)) again when its first "
                   "trace was traced a second time",
                   "creates a new Variable on every call",
                   "Make sure the tg::Variable is only created once or created outside tg::function",
                   "(while tracing function 'f', trace 1");
  try {
    f(constant(1.0f));
  } catch (const ValueError& e) {
    EXPECT_EQ(std::string(e.what()).find("later trace"), std::string::npos) << e.what();
  }
  auto g = function([](const Tensor& x) {
    Variable v(constant(1));  // unnamed: TF's default name
    return x;
  }, {.name = "g"});
  EXPECT_THROW_MSG(g(constant(1.0f)), ValueError, "tg::Variable 'Variable' (int32, shape ())");
}

}  // namespace
}  // namespace tg
