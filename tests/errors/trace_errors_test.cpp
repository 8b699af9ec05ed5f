// Expected failures of calling and tracing a tg::function with arguments it cannot work on: each
// is a typed tg:: error (never a crash or a hang) that says what was wrong and what to do.
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <thread>

#include "support/test_util.h"

namespace tg {
namespace {

TEST(TraceErrors, LeakedSymbolicTensorAsAnArgumentIsOutOfScope) {
  // It used to reach the executor, which read the missing buffer of the symbolic tensor.
  std::vector<Tensor> kept;
  auto leaky = function([&](const Tensor& x) {
    kept.push_back(x * 2.0f);
    return x;
  }, {.name = "leaky"});
  leaky(constant(1.0f));
  ASSERT_EQ(kept.size(), 1u);
  auto g = function([](const Tensor& y) { return y + 1.0f; }, {.name = "g"});
  EXPECT_THROW_MSG(g(kept[0]), OutOfScopeError, "function 'g' was called with the symbolic tensor",
                   "'mul:0' of function 'leaky'", "pass the returned tensor");
  EXPECT_EQ(g.tracing_count(), 0) << "no trace is made for a call that cannot run";
  // Also once a trace of the same type exists (the cached-call path), and inside containers.
  EXPECT_TENSOR_EQ(g(constant(2.0f)), constant(3.0f));
  EXPECT_THROW_MSG(g(kept[0]), OutOfScopeError, "'mul:0' of function 'leaky'");
  auto sum = function([](const std::vector<Tensor>& v) { return v[0] + v[1]; }, {.name = "sum"});
  EXPECT_THROW_MSG(sum(std::vector<Tensor>{constant(1.0f), kept[0]}), OutOfScopeError,
                   "function 'sum'", "'mul:0' of function 'leaky'");
  EXPECT_THROW_MSG(g.get_concrete_function(kept[0]), OutOfScopeError, "'mul:0' of function 'leaky'");
}

struct NoTraceType {
  TraceTypePtr tracing_type() const { return nullptr; }
};

TEST(TraceErrors, CustomTracingTypeReturningNullIsATypeError) {
  // It used to be dereferenced while hashing the call's types.
  auto f = function([](const NoTraceType&, const Tensor& x) { return x; }, {.name = "f"});
  EXPECT_THROW_MSG(f(NoTraceType{}, constant(1)), TypeError, "NoTraceType", "null tg::TraceTypePtr",
                   "tracing_type()", "TraceType");
  auto g = function([](const std::vector<NoTraceType>& v, const Tensor& x) { return x + static_cast<int>(v.size()); });
  EXPECT_THROW_MSG(g(std::vector<NoTraceType>(2), constant(1)), TypeError, "NoTraceType", "null");
  EXPECT_EQ(f.tracing_count(), 0);
}

TEST(TraceErrors, GetConcreteFunctionOfItselfWhileTracingIsAStagingErrorNotADeadlock) {
  // The body asked for a concrete function of its own function: the trace re-locked the mutex its
  // own thread held. The call runs on a thread that owns everything it uses, so that a regression
  // fails this test after the timeout instead of hanging the test binary.
  struct Outcome {
    std::string message;
    int64_t tracing_count = -1;
  };
  auto result = std::make_shared<std::promise<Outcome>>();
  std::future<Outcome> done = result->get_future();
  std::thread([result] {
    Outcome out;
    auto self = std::make_shared<std::function<void(const Tensor&)>>();
    auto rec = function([self](const Tensor& x) {
      (*self)(x);
      return x + 1.0f;
    }, {.name = "rec"});
    *self = [&rec](const Tensor& x) { rec.get_concrete_function(x); };
    try {
      rec(constant(1.0f));
      out.message = "no error";
    } catch (const StagingError& e) {
      out.message = e.what();
    } catch (const std::exception& e) {
      out.message = std::string("another error: ") + e.what();
    }
    out.tracing_count = rec.tracing_count();
    *self = nullptr;  // rec's body holds self: break the cycle
    result->set_value(out);
  }).detach();
  ASSERT_EQ(done.wait_for(std::chrono::seconds(60)), std::future_status::ready)
      << "get_concrete_function inside the function's own trace deadlocked";
  const Outcome out = done.get();
  EXPECT_NE(out.message.find("'rec' called itself while it was being traced"), std::string::npos)
      << out.message;
  EXPECT_EQ(out.tracing_count, 0);
}

}  // namespace
}  // namespace tg
