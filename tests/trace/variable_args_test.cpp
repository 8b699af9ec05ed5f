// Variables passed as arguments: TF's VariableSpec semantics (dtype + shape + which arguments
// are the same Variable), Variable parameters bound per call, and what stays by reference.
#include <optional>

#include "support/test_util.h"

namespace tg {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(VariableArguments, OneTracePerSpecAndAliasingPattern) {
  // TF's test of VariableSpec aliasing: (x, y, z) and (z, y, x) share a trace; (x, x, z) does
  // not; (y, y, z) then reuses (x, x, z)'s.
  Variable x(constant(1.0f), "x"), y(constant(10.0f), "y"), z(constant(100.0f), "z");
  // Assigning through the first argument and reading the second tells aliasing apart.
  auto f = function([](Variable a, Variable b, Variable c) {
    a.assign_add(1.0f);
    return b.read_value() * 2.0f + c.read_value();
  });
  EXPECT_EQ(f(x, y, z).item<float>(), 120.0f);  // x = 2
  EXPECT_EQ(f(z, y, x).item<float>(), 22.0f);   // z = 101, 2*10 + 2
  EXPECT_EQ(f.tracing_count(), 1);
  EXPECT_EQ(f(x, x, z).item<float>(), 107.0f);  // x = 3, read after the assign: 2*3 + 101
  EXPECT_EQ(f.tracing_count(), 2);
  EXPECT_EQ(f(y, y, z).item<float>(), 123.0f);  // y = 11: 2*11 + 101
  EXPECT_EQ(f.tracing_count(), 2);
  EXPECT_EQ(x.read_value().item<float>(), 3.0f);
  EXPECT_EQ(y.read_value().item<float>(), 11.0f);
  EXPECT_EQ(z.read_value().item<float>(), 101.0f);
  // The types as printed, and why the aliased call traced.
  const auto history = f.trace_history();
  ASSERT_EQ(history.size(), 2u);
  EXPECT_TRUE(contains(history[0].function_type, "(arg0: VariableSpec(shape=(), dtype=tg.float32, alias_id=0), arg1: VariableSpec(shape=(), dtype=tg.float32, alias_id=1)"))
      << history[0].function_type;
  EXPECT_TRUE(contains(history[1].function_type, "arg1: VariableSpec(shape=(), dtype=tg.float32, alias_id=0), arg2: VariableSpec(shape=(), dtype=tg.float32, alias_id=1)"))
      << history[1].function_type;
  EXPECT_TRUE(contains(history[1].reason, "Variable aliasing: alias_id 1 -> 0")) << history[1].reason;
}

TEST(VariableArguments, ADifferentDtypeOrShapeIsADifferentTrace) {
  Variable s(constant(1.0f)), v(constant({1.0f, 2.0f})), d(constant(1.0, float64));
  auto twice = function([](const Variable& w) { return w.read_value() * 2; });
  twice(s);
  twice(v);
  twice(d);
  EXPECT_EQ(twice.tracing_count(), 3);
  const auto history = twice.trace_history();
  EXPECT_TRUE(contains(history[1].reason, "Variable shape () -> (2,)")) << history[1].reason;
  EXPECT_TRUE(contains(history[2].reason, "Variable dtype float32 -> float64")) << history[2].reason;
}

TEST(VariableArguments, TheReportAdvisesOnVaryingVariableSpecs) {
  auto twice = function([](const Variable& w) { return w.read_value() * 2; }, {.arg_names = {"w"}});
  Variable s(constant(1.0f)), v(constant({1.0f, 2.0f}));
  twice(s);
  twice(v);
  const std::string report = twice.retracing_report();
  EXPECT_TRUE(contains(report, "pass Variables of one dtype and shape for w")) << report;
  EXPECT_FALSE(contains(report, "operator==")) << report;  // not the advice for objects
}

TEST(VariableArguments, AConcreteFunctionTracedForOneVariableRunsWithAnother) {
  Variable v(constant(2.0f)), w(constant(5.0f)), other_shape(constant({1.0f}));
  auto f = function([](Variable var, const Tensor& x) { return var.assign_add(x); });
  auto cf = f.get_concrete_function(v, TensorSpec({}, float32));
  EXPECT_EQ(cf(w, constant(1.0f)).item<float>(), 6.0f);
  EXPECT_EQ(w.read_value().item<float>(), 6.0f);
  EXPECT_EQ(v.read_value().item<float>(), 2.0f);  // traced with v, never ran on it
  EXPECT_EQ(cf(v, constant(1.0f)).item<float>(), 3.0f);
  EXPECT_THROW_MSG(cf(other_shape, constant(1.0f)), TypeError, "Can not cast", "VariableSpec(shape=(1,)");
  // call_flat has no way to pass the Variable.
  EXPECT_THROW_MSG(cf.call_flat({constant(1.0f)}), TypeError, "takes Variable arguments", "call the concrete function");
}

TEST(VariableArguments, AClosedOverVariableStaysByReference) {
  // The body reads `captured` by reference and its argument through the parameter: passing
  // `captured` itself at the first call must not make later calls read the argument there.
  Variable captured(constant(1.0f), "captured"), other(constant(10.0f), "other");
  auto f = function([&](const Variable& arg) { return arg.read_value() + captured.read_value(); });
  EXPECT_EQ(f(captured).item<float>(), 2.0f);
  EXPECT_EQ(f(other).item<float>(), 11.0f);
  EXPECT_EQ(f.tracing_count(), 1);
  captured.assign(3.0f);
  EXPECT_EQ(f(other).item<float>(), 13.0f);
}

TEST(VariableArguments, AnEagerTapeDifferentiatesTheCallersVariable) {
  Variable a(constant(3.0f), "a"), b(constant(5.0f), "b");
  auto f = function([](const Variable& w, const Tensor& x) { return w.read_value() * w.read_value() * x; });
  for (Variable* v : {&a, &b}) {
    GradientTape tape;
    const Tensor y = f(*v, constant(2.0f));
    const std::vector<Tensor> g = tape.gradient(y, {*v});
    ASSERT_TRUE(g[0].defined());
    EXPECT_EQ(g[0].item<float>(), 4.0f * v->read_value().item<float>());  // d(w^2 x)/dw = 2wx
  }
  EXPECT_EQ(f.tracing_count(), 1);
}

TEST(VariableArguments, ATrainStepUpdatesTheVariableItIsGiven) {
  // A tape and an optimizer inside the trace, the Variables passed as arguments.
  optim::SGD sgd(0.1);
  auto step = function([&](const Variable& w, const Tensor& x, const Tensor& y) {
    GradientTape tape;
    const Tensor loss = reduce_mean(square(w * x - y));
    const std::vector<Tensor> grads = tape.gradient(loss, {w});
    sgd.apply_gradients(grads, {w});
    return loss;
  });
  Variable a(constant(0.0f)), b(constant(1.0f));
  step(a, constant({1.0f}), constant({2.0f}));  // grad = 2(w x - y) x = -4: w = 0.4
  EXPECT_NEAR(a.read_value().item<float>(), 0.4f, 1e-6);
  step(b, constant({1.0f}), constant({2.0f}));  // grad = -2: w = 1.2
  EXPECT_NEAR(b.read_value().item<float>(), 1.2f, 1e-6);
  EXPECT_NEAR(a.read_value().item<float>(), 0.4f, 1e-6);
  EXPECT_EQ(step.tracing_count(), 1);
}

TEST(VariableArguments, SlotsMadeForOneVariableAreNotLentToAnother) {
  // Adam's moments are made in the first trace, for the Variable that trace was given. Another
  // Variable of the same spec would share the trace - and those moments: refused, not silent.
  optim::Adam adam(0.1);
  auto step = function([&](const Variable& w, const Tensor& x) {
    GradientTape tape;
    const Tensor loss = reduce_sum(w * x);
    adam.apply_gradients(tape.gradient(loss, {w}), {w});
    return loss;
  });
  Variable a(constant(1.0f), "a"), b(constant(1.0f), "b");
  step(a, constant(1.0f));
  step(a, constant(1.0f));
  EXPECT_EQ(adam.iterations(), 2);
  // The slot is found through the Variable it belongs to.
  EXPECT_NE(adam.slot(a, "m").read_value().item<float>(), 0.0f);
  const float before = b.read_value().item<float>();
  EXPECT_THROW_MSG(step(b, constant(1.0f)), ValueError, "another Variable ('b'", "an optimizer's slots",
                   "Pass the same Variables on every call");
  EXPECT_EQ(b.read_value().item<float>(), before);
  EXPECT_EQ(adam.iterations(), 2);
}

TEST(VariableArguments, ANestedFunctionBindsItsParameterToTheOuterVariable) {
  // The inner function is its own function (its own trace, with a parameter); inlined into the
  // outer trace, its Variable ops name what the outer body passed - also inside a cond branch.
  auto inner = function([](Variable v, const Tensor& flag) {
    return cond(
        flag, [&] { return v.assign_add(1.0f); }, [&] { return v.read_value(); });
  });
  auto outer = function([&](Variable v, const Tensor& flag) { return inner(v, flag) * 10.0f; });
  Variable a(constant(1.0f)), b(constant(5.0f));
  EXPECT_EQ(outer(a, constant(true)).item<float>(), 20.0f);
  EXPECT_EQ(outer(b, constant(true)).item<float>(), 60.0f);
  EXPECT_EQ(outer(b, constant(false)).item<float>(), 60.0f);
  EXPECT_EQ(a.read_value().item<float>(), 2.0f);
  EXPECT_EQ(b.read_value().item<float>(), 6.0f);
  EXPECT_EQ(outer.tracing_count(), 1);
  EXPECT_EQ(inner.tracing_count(), 1);
  // Called directly, the inner trace runs on the Variable it is given.
  EXPECT_EQ(inner(b, constant(true)).item<float>(), 7.0f);
  EXPECT_EQ(inner.tracing_count(), 1);
}

}  // namespace
}  // namespace tg
