// host_call: a graph node that calls a host function each time the graph runs.
#include <atomic>
#include <string>

#include "ops/op.h"
#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

TG_OP_CASES(host_call) {
  return {
      {"host_call", "doubles through the host", [](const std::vector<Tensor>& in) {
         return host_call([](const std::vector<Tensor>& x) { return std::vector<Tensor>{x[0] * 2.0f}; }, in,
                          {float32}, "double")[0];
       }, {constant({1.0f, -2.5f})}, constant({2.0f, -5.0f})},
  };
}

TEST(HostCall, EagerlyItCallsTheFunctionNow) {
  int calls = 0;
  const std::vector<Tensor> out = host_call([&](const std::vector<Tensor>& x) {
    ++calls;
    return std::vector<Tensor>{x[0] + x[1], cast(x[0], int32)};
  }, {constant({1.5f, 2.0f}), constant(1.0f)}, {float32, int32});
  EXPECT_EQ(calls, 1);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{2.5f, 3.0f}));
  EXPECT_EQ(out[1].to_vector<int32_t>(), (std::vector<int32_t>{1, 2}));
}

TEST(HostCall, InAGraphItRunsAtEveryCallWithEagerInputsAndUnknownShapes) {
  std::atomic<int> calls{0};
  std::string seen_rank;
  auto f = function([&](const Tensor& x) {
    std::vector<Tensor> y = host_call([&](const std::vector<Tensor>& in) {
      ++calls;
      seen_rank = std::to_string(in[0].shape().rank());
      EXPECT_FALSE(in[0].is_symbolic());
      return std::vector<Tensor>{reduce_sum(in[0])};
    }, {x * 3.0f}, {float32}, "total");
    EXPECT_FALSE(y[0].shape().has_rank());  // only the run knows it
    return y[0] + 1.0f;
  });
  EXPECT_EQ(f(constant({1.0f, 2.0f})).to_vector<float>(), std::vector<float>{10.0f});
  EXPECT_EQ(f(constant({1.0f, 1.0f})).to_vector<float>(), std::vector<float>{7.0f});
  EXPECT_EQ(calls.load(), 2);  // tracing does not call it; each run does, once
  EXPECT_EQ(seen_rank, "1");
  EXPECT_EQ(f.tracing_count(), 1);
}

TEST(HostCall, RunsInProgramOrderWithPrintAndIsNeverRemoved) {
  std::string log;
  config::set_print_sink([](const std::string& s, void* user) { *static_cast<std::string*>(user) += s; }, &log);
  auto f = function([&](const Tensor& x) {
    print("before");
    // No output used: the node must still run (stateful), between the two prints.
    host_call([&](const std::vector<Tensor>&) { log += "host\n"; return std::vector<Tensor>{}; }, {x}, {}, "note");
    print("after");
    return x;
  });
  f(constant(1.0f));
  f(constant(2.0f));
  config::set_print_sink(nullptr);
  EXPECT_EQ(log, "before\nhost\nafter\nbefore\nhost\nafter\n");
}

TEST(HostCall, TwoIdenticalCallsStayTwoNodes) {
  int calls = 0;
  auto fn = [&](const std::vector<Tensor>& in) { ++calls; return std::vector<Tensor>{in[0]}; };
  auto f = function([&](const Tensor& x) {
    return host_call(fn, {x}, {float32})[0] + host_call(fn, {x}, {float32})[0];
  });
  EXPECT_EQ(f(constant(2.0f)).to_vector<float>(), std::vector<float>{4.0f});
  EXPECT_EQ(calls, 2);  // neither CSE'd nor folded
  EXPECT_EQ(f(constant(2.0f)).to_vector<float>(), std::vector<float>{4.0f});
  EXPECT_EQ(calls, 4);
}

TEST(HostCall, IsStatefulNotDifferentiableAndReplaysWithoutCallingTheHost) {
  const detail::OpDef& d = detail::op_def(detail::OpId::HostCall);
  EXPECT_TRUE(d.traits & detail::kStateful);
  EXPECT_TRUE(d.traits & detail::kNotDifferentiable);
  EXPECT_NE(d.replay, nullptr);
  // A gradient of a function whose host call has no outputs replays it as nothing.
  int calls = 0;
  auto f = function([&](const Tensor& x) {
    host_call([&](const std::vector<Tensor>&) { ++calls; return std::vector<Tensor>{}; }, {x}, {}, "log");
    return x * x;
  });
  const Tensor x = constant(3.0f);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = f(x);
  EXPECT_EQ(tape.gradient(y, x).to_vector<float>(), std::vector<float>{6.0f});
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace tg
