// Gradients of traced code that writes Variables - inside tg::cond branches and tg::while_loop
// bodies, or with assign_add and no read - against the same code run eagerly, which is the
// reference: the outputs, the gradients and the Variables' values after the step must all match.
// A gradient replays the forward graph; these tests pin that the replay neither runs a write a
// second time nor reads a Variable after the forward call (or the node itself) changed it.
#include "support/test_util.h"

namespace tg {
namespace {

// The Variables the steps use: a float one and an integer counter.
struct State {
  Variable v{constant(1.5, float64), "v"};
  Variable c{constant(0), "c"};
  void reset() {
    v.assign(constant(1.5, float64));
    c.assign(constant(0));
  }
  double v_now() { return v.read_value().item<double>(); }
  int32_t c_now() { return c.read_value().item<int32_t>(); }
};

struct Outcome {
  double y = 0, g = 0, v = 0;
  int32_t c = 0;
};

void expect_same(const Outcome& got, const Outcome& want, const std::string& how) {
  EXPECT_NEAR(got.y, want.y, 1e-12) << how << ": output";
  EXPECT_NEAR(got.g, want.g, 1e-12) << how << ": gradient";
  EXPECT_NEAR(got.v, want.v, 1e-12) << how << ": Variable v after the step";
  EXPECT_EQ(got.c, want.c) << how << ": Variable c after the step";
}

// Runs `step` (a Tensor(const Tensor&) that uses `s`) eagerly as the reference, then traced in
// every way a gradient can be taken of it, and compares.
template <class Step>
void expect_traced_gradients_match_eager(State& s, Step step) {
  for (double xv : {2.0, -1.0}) {
    SCOPED_TRACE("x = " + std::to_string(xv));
    const Tensor x = constant(xv, float64);
    auto outcome = [&](const Tensor& y, const Tensor& g) {
      return Outcome{y.item<double>(), g.item<double>(), s.v_now(), s.c_now()};
    };

    s.reset();
    Outcome want;
    {
      GradientTape tape;
      tape.watch(x);
      const Tensor y = step(x);
      want = outcome(y, tape.gradient(y, x));
    }
    // Called twice under one tape, eagerly.
    s.reset();
    Outcome want_twice;
    {
      GradientTape tape;
      tape.watch(x);
      const Tensor y = step(x) + step(x);
      want_twice = outcome(y, tape.gradient(y, x));
    }

    auto f = function(step);
    s.reset();
    f(x);  // traced once with no tape about: its graph has no snapshots (inlined below)

    // An eager tape over a call; twice, the second with the backward graph cached.
    for (int rep = 0; rep < 2; ++rep) {
      s.reset();
      GradientTape tape;
      tape.watch(x);
      const Tensor y = f(x);
      expect_same(outcome(y, tape.gradient(y, x)), want, "eager tape over a traced call #" + std::to_string(rep));
    }
    // A persistent tape asked twice: the Variables changed once, by the forward call.
    {
      s.reset();
      GradientTape tape(true);
      tape.watch(x);
      const Tensor y = f(x);
      const Tensor g1 = tape.gradient(y, x);
      expect_same(outcome(y, tape.gradient(y, x)), want, "persistent tape, second gradient");
      EXPECT_NEAR(g1.item<double>(), want.g, 1e-12) << "persistent tape, first gradient";
    }
    // One tape over two calls.
    {
      s.reset();
      GradientTape tape;
      tape.watch(x);
      const Tensor y = f(x) + f(x);
      expect_same(outcome(y, tape.gradient(y, x)), want_twice, "eager tape over two traced calls");
    }
    // The gradient taken inside a traced function: of the code itself, and of a call of `f`.
    auto inside = function([&](const Tensor& x) {
      GradientTape tape;
      tape.watch(x);
      const Tensor y = step(x);
      return std::vector<Tensor>{y, tape.gradient(y, x)};
    });
    auto around_call = function([&](const Tensor& x) {
      GradientTape tape;
      tape.watch(x);
      const Tensor y = f(x);
      return std::vector<Tensor>{y, tape.gradient(y, x)};
    });
    for (int rep = 0; rep < 2; ++rep) {
      s.reset();
      std::vector<Tensor> r = inside(x);
      expect_same(outcome(r[0], r[1]), want, "tape inside a traced function #" + std::to_string(rep));
      s.reset();
      r = around_call(x);
      expect_same(outcome(r[0], r[1]), want, "tape inside a traced function around a traced call #" + std::to_string(rep));
    }
  }
}

// Suspicion 1: a cond whose branch writes a Variable and reads it back. Before the fix, a
// gradient through a traced call ran the branch's assign_add again (v changed twice) and the
// branch's gradient read v after the writes.
TEST(StatefulControlFlowGradient, CondBranchThatWritesAndReadsAVariable) {
  State s;
  expect_traced_gradients_match_eager(s, [&](const Tensor& x) {
    return cond(x > 0.0,
                [&] {
                  s.v.assign_add(constant(1.0, float64));
                  return x * x * s.v.read_value();
                },
                [&] {
                  s.c.assign_add(constant(5));
                  return x * tg::cast(s.c.read_value(), float64);
                });
  });
}

// The Variable written in the branch and read after the cond.
TEST(StatefulControlFlowGradient, CondBranchWritesAVariableReadAfterTheCond) {
  State s;
  expect_traced_gradients_match_eager(s, [&](const Tensor& x) {
    const Tensor y = cond(x > 0.0,
                          [&] {
                            s.v.assign(s.v.read_value() * 3.0);
                            return x;
                          },
                          [&] { return x * 2.0; });
    return y * s.v.read_value();
  });
}

// Suspicion 1 for loops: a body that increments a counter Variable the math reads.
TEST(StatefulControlFlowGradient, WhileBodyIncrementsACounterTheMathReads) {
  State s;
  expect_traced_gradients_match_eager(s, [&](const Tensor& x) {
    const auto loop = while_loop([](const Tensor& i, const Tensor&) { return i < 3; },
                                 [&](const Tensor& i, const Tensor& y) {
                                   s.c.assign_add(constant(1));
                                   return std::tuple{i + 1, y * tg::cast(s.c.read_value(), float64) + x};
                                 },
                                 std::tuple{constant(0), x});
    return std::get<1>(loop);
  });
}

// The loop's condition reads the counter its body increments: a replay that read the counter
// after the forward loop would run no iteration at all.
TEST(StatefulControlFlowGradient, WhileConditionReadsACounterTheBodyIncrements) {
  State s;
  expect_traced_gradients_match_eager(s, [&](const Tensor& x) {
    return while_loop([&](const Tensor&) { return s.c.read_value() < 3; },
                      [&](const Tensor& y) {
                        s.c.assign_add(constant(1));
                        s.v.assign_add(constant(0.5, float64));
                        return y * s.v.read_value();
                      },
                      x);
  });
}

// A stateful cond nested in a loop body, writing the float Variable.
TEST(StatefulControlFlowGradient, CondInsideAWhileBodyWritesAVariable) {
  State s;
  expect_traced_gradients_match_eager(s, [&](const Tensor& x) {
    const auto loop = while_loop([](const Tensor& i, const Tensor&) { return i < 2; },
                                 [&](const Tensor& i, const Tensor& y) {
                                   const Tensor z = cond(y > 0.0,
                                                         [&] {
                                                           s.v.assign_add(constant(1.0, float64));
                                                           return y * s.v.read_value();
                                                         },
                                                         [&] { return y - s.v.read_value(); });
                                   return std::tuple{i + 1, z};
                                 },
                                 std::tuple{constant(0), x});
    return std::get<1>(loop);
  });
}

// Suspicion 2: assign_add with no read_variable in the graph, its result used by the math (the
// replay read v after the forward update and added again).
TEST(StatefulControlFlowGradient, AssignAddWithoutAReadFeedsTheMath) {
  State s;
  expect_traced_gradients_match_eager(s, [&](const Tensor& x) { return x * s.v.assign_add(constant(1.0, float64)); });
  expect_traced_gradients_match_eager(s, [&](const Tensor& x) { return x * x * s.v.assign_sub(constant(0.25, float64)); });
}

// An integer Variable is not differentiated, but its value still scales the gradient: read
// after an increment, and read before one.
TEST(StatefulControlFlowGradient, IntegerCounterReadAroundAnIncrement) {
  State s;
  expect_traced_gradients_match_eager(s, [&](const Tensor& x) {
    s.c.assign_add(constant(2));
    return x * x * tg::cast(s.c.read_value(), float64);
  });
  expect_traced_gradients_match_eager(s, [&](const Tensor& x) {
    const Tensor y = x * tg::cast(s.c.read_value() + 1, float64);
    s.c.assign_add(constant(4));
    return y;
  });
}

// A random op inside a branch: its gradient would need the forward's draw, which a branch
// replay does not know. Refused with a typed error - through a call and inside a function - and
// the refusal draws nothing and writes nothing.
TEST(StatefulControlFlowGradient, RandomOpsInsideABranchStayRefused) {
  State s;
  auto step = [&](const Tensor& x) {
    return cond(x > 0.0,
                [&] {
                  s.v.assign_add(constant(1.0, float64));
                  return x * tg::cast(random_uniform(TensorShape{}, 0.5f, 1.0f), float64);
                },
                [&] { return x; });
  };
  auto f = function(step);
  const Tensor x = constant(2.0, float64);
  s.reset();
  {
    GradientTape tape;
    tape.watch(x);
    const Tensor y = f(x);
    EXPECT_EQ(s.v_now(), 2.5);
    EXPECT_THROW_MSG(tape.gradient(y, x), InvalidArgumentError, "[gradient]", "random_uniform",
                     "stateless_");
    EXPECT_EQ(s.v_now(), 2.5) << "the refused gradient wrote v";
  }
  auto inside = function([&](const Tensor& x) {
    GradientTape tape;
    tape.watch(x);
    return tape.gradient(step(x), x);
  });
  EXPECT_THROW_MSG(inside(x), InvalidArgumentError, "[gradient]", "random_uniform");
}

}  // namespace
}  // namespace tg
