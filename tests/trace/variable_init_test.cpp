// Variables whose initial value depends on the inputs of the function that creates them while
// tracing (TF's variable_initializer_not_constant): the trace sets the value at its first run.
#include <optional>

#include "support/test_util.h"

namespace tg {
namespace {

TEST(VariableFromInputs, TheFirstCallSetsTheValueAndLaterCallsKeepIt) {
  // TF's test, as written there.
  std::optional<Variable> state;
  auto fn = function([&](const Tensor& x) {
    if (!state) state.emplace(2.0f * x);
    return state->read_value() * x;
  });
  EXPECT_EQ(fn(constant(1.0f)).item<float>(), 2.0f);
  EXPECT_EQ(fn(constant(3.0f)).item<float>(), 6.0f);
  EXPECT_EQ(state->read_value().item<float>(), 2.0f);
  EXPECT_EQ(fn.tracing_count(), 1);
  // A later trace (another dtype would be another Variable; another shape reads this one).
  EXPECT_EQ(fn(constant({1.0f, 2.0f})).to_vector<float>(), (std::vector<float>{2.0f, 4.0f}));
  EXPECT_EQ(fn.tracing_count(), 2);
  // The graph that runs sets the value once: the op is in the trace.
  EXPECT_NE(fn.concrete_functions()[0].graph().to_string().find("initialize_variable"), std::string::npos);
}

TEST(VariableFromInputs, ReadBeforeTheTraceRanIsAFailedPrecondition) {
  std::optional<Variable> state;
  auto fn = function([&](const Tensor& x) {
    if (!state) state.emplace(x + 1.0f, "offset");
    return state->assign_add(x);
  });
  auto cf = fn.get_concrete_function(TensorSpec({2}, float32));
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->shape().to_string(), "(2,)");
  EXPECT_THROW_MSG(state->read_value(), FailedPreconditionError, "tg::Variable 'offset' is read before it has a value",
                   "Call the function");
  EXPECT_THROW_MSG(state->assign_add(constant({1.0f, 1.0f})), FailedPreconditionError, "'offset'");
  EXPECT_EQ(cf(constant({1.0f, 2.0f})).to_vector<float>(), (std::vector<float>{3.0f, 5.0f}));  // (x+1) + x
  EXPECT_EQ(cf(constant({1.0f, 2.0f})).to_vector<float>(), (std::vector<float>{4.0f, 7.0f}));  // then + x
  EXPECT_EQ(fn.tracing_count(), 1);
}

TEST(VariableFromInputs, AShapeNotKnownWhileTracingIsAValueError) {
  std::optional<Variable> state;
  auto fn = function([&](const Tensor& x) {
    if (!state) state.emplace(x * 2.0f, "w");
    return state->read_value();
  }, {.input_signature = std::vector<TensorSpec>{TensorSpec({None}, float32)}});
  EXPECT_THROW_MSG(fn(constant({1.0f})), ValueError, "tg::Variable 'w'", "shape is not fully known");
}

TEST(VariableFromInputs, AnEagerTapeAroundTheInitializingCall) {
  // The tape reads the call's Variables; one this call initializes is read after the call. Its
  // initial value is state, not a function of x for the tape: dy/dx = state = 2 (as in TF).
  std::optional<Variable> state;
  auto fn = function([&](const Tensor& x) {
    if (!state) state.emplace(2.0f * x);
    return state->read_value() * x;
  });
  for (float x0 : {1.0f, 3.0f}) {
    const Tensor x = constant(x0);
    GradientTape tape;
    tape.watch(x);
    const Tensor y = fn(x);
    EXPECT_EQ(y.item<float>(), 2.0f * x0);
    EXPECT_EQ(tape.gradient(y, x).item<float>(), 2.0f);
  }
}

}  // namespace
}  // namespace tg
