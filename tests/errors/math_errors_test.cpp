// The math ops of issue 14: every validation throws a typed error naming what was expected,
// what was received and what to do, eagerly and while tracing (None dims, unknown rank).
#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

// Runs fn on its inputs traced over generalised specs: the shape rules must reject the same
// inputs (the error is raised by tracing or by the run, never as a crash).
template <class E>
void expect_traced_throw(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                         const std::vector<Tensor>& inputs, const std::vector<std::string>& fragments) {
  testing::for_each_generalised_trace(fn, inputs, [&](const std::function<Tensor()>& run, const char* label) {
    EXPECT_TRUE(testing::throws_with<E>(run, fragments)) << label;
  });
}

TEST(MathErrors, FloatOnlyOpsRefuseOtherDtypes) {
  using Unary = Tensor (*)(const Tensor&);
  // The vectorised activations: tests/errors/elementwise_errors_test.cpp.
  const std::pair<const char*, Unary> ops[] = {{"[floor]", &floor}, {"[ceil]", &ceil}};
  for (const auto& entry : ops) {  // not a structured binding: clang 14 cannot capture one
    const char* name = entry.first;
    const Unary op = entry.second;
    SCOPED_TRACE(name);
    EXPECT_THROW_MSG(op(constant({1, 2})), InvalidArgumentError, name, "does not support dtype int32",
                     "float32, float64", "tg::cast");
    EXPECT_THROW_MSG(op(constant({true})), InvalidArgumentError, name, "bool");
    EXPECT_THROW_MSG(op(constant("a")), InvalidArgumentError, name, "string");
    expect_traced_throw<InvalidArgumentError>([op](const std::vector<Tensor>& in) { return op(in[0]); },
                                              {constant({1, 2})}, {name, "int32"});
  }
  EXPECT_THROW_MSG(leaky_relu(constant({1, 2})), InvalidArgumentError, "[leaky_relu]", "int32", "float32");
  EXPECT_THROW_MSG(leaky_relu(constant("s")), InvalidArgumentError, "[leaky_relu]", "string");
  // round takes integers too, but not bool or strings
  EXPECT_THROW_MSG(round(constant({true})), InvalidArgumentError, "[round]", "bool", "int32, int64");
  EXPECT_THROW_MSG(round(constant("a")), InvalidArgumentError, "[round]", "string");
}

TEST(MathErrors, ScansCheckDtypeRankAndAxis) {
  EXPECT_THROW_MSG(cumsum(constant(1.f)), InvalidArgumentError, "[cumsum]", "rank >= 1", "scalar", "reshape");
  EXPECT_THROW_MSG(cumprod(constant({1.f, 2.f}), 1), InvalidArgumentError, "[cumprod]", "axis 1 is out of range",
                   "rank 1", "[-1, 1)");
  EXPECT_THROW_MSG(cumsum(zeros({2, 3}), -3), InvalidArgumentError, "[cumsum]", "axis -3");
  EXPECT_THROW_MSG(cumsum(constant({true, false})), InvalidArgumentError, "[cumsum]", "bool", "float32");
  EXPECT_THROW_MSG(cumprod(constant({"a"})), InvalidArgumentError, "[cumprod]", "string");
  expect_traced_throw<InvalidArgumentError>([](const std::vector<Tensor>& in) { return cumsum(in[0], 2); },
                                            {zeros({2, 3})}, {"[cumsum]", "axis 2", "rank 2"});
  expect_traced_throw<InvalidArgumentError>([](const std::vector<Tensor>& in) { return cumprod(in[0]); },
                                            {constant(1.0, float64)}, {"[cumprod]", "rank >= 1"});
}

TEST(MathErrors, LinspaceChecksItsArguments) {
  EXPECT_THROW_MSG(linspace(constant(0.f), constant(1.f), -1), InvalidArgumentError, "[linspace]", "num must be >= 0",
                   "got -1");
  EXPECT_THROW_MSG(linspace(constant(0), constant(1), 3), InvalidArgumentError, "[linspace]", "start", "int32",
                   "float32, float64");
  EXPECT_THROW_MSG(linspace(constant(0.f), constant(1.0, float64), 3), InvalidArgumentError, "[linspace]",
                   "start and stop of one dtype", "float32 and float64", "tg::cast");
  EXPECT_THROW_MSG(linspace(constant({0.f, 1.f}), constant(1.f), 3), InvalidArgumentError, "[linspace]",
                   "start to be a scalar", "(2,)");
  EXPECT_THROW_MSG(linspace(constant(0.f), constant(1.f), constant(2.5f)), InvalidArgumentError, "[linspace]", "num",
                   "int32, int64");
  EXPECT_THROW_MSG(linspace(constant(0.f), constant(1.f), constant({2, 3})), InvalidArgumentError, "[linspace]",
                   "num to be a scalar");
  EXPECT_THROW_MSG(linspace(0.0, 1.0, 3, int32), InvalidArgumentError, "[linspace]", "float32 or float64", "int32");
  EXPECT_THROW_MSG(linspace(Tensor(), constant(1.f), 3), ValueError, "[linspace]", "start", "empty");
  // A negative num known only at run time is refused by the kernel.
  auto f = function([](const Tensor& n) { return linspace(constant(0.f), constant(1.f), n); });
  EXPECT_THROW_MSG(f(constant(-2)), InvalidArgumentError, "[linspace]", "num must be >= 0", "got -2");
  expect_traced_throw<InvalidArgumentError>(
      [](const std::vector<Tensor>& in) { return linspace(in[0], in[1], in[2]); },
      {constant(0.f), constant(1.0, float64), constant(3)}, {"[linspace]", "one dtype"});
}

TEST(MathErrors, ClipByValueChecksDtypesAndShapes) {
  EXPECT_THROW_MSG(clip_by_value(constant({1.f, 2.f}), constant(0), constant(1)), InvalidArgumentError,
                   "[clip_by_value]", "one dtype", "float32, int32 and int32", "tg::cast");
  EXPECT_THROW_MSG(clip_by_value(constant({true}), constant(false), constant(true)), InvalidArgumentError,
                   "[clip_by_value]", "bool", "number dtype");
  // lo / hi may not make x larger (TF's ValueError)
  EXPECT_THROW_MSG(clip_by_value(constant({1.f, 2.f}), constant(0.f), constant({{1.f}, {2.f}})), ValueError,
                   "[clip_by_value]", "hi of shape (2, 1)", "x of shape (2,)", "(2, 2)");
  EXPECT_THROW_MSG(clip_by_value(constant({1.f, 2.f}), constant({{0.f, 1.f}, {0.f, 1.f}}), constant(3.f)),
                   ValueError, "[clip_by_value]", "lo of shape (2, 2)");
  EXPECT_THROW_MSG(clip_by_value(constant({1.f, 2.f, 3.f}), constant({0.f, 1.f}), constant(3.f)),
                   InvalidArgumentError, "[maximum]", "cannot be broadcast");  // not at all: the part's error
  EXPECT_THROW_MSG(clip_by_value(Tensor(), constant(0.f), constant(1.f)), ValueError, "[clip_by_value]", "empty");
}

TEST(MathErrors, CompositesCheckDtypeAndAxes) {
  EXPECT_THROW_MSG(reduce_logsumexp(constant({1, 2})), InvalidArgumentError, "[reduce_logsumexp]", "int32",
                   "float32 or float64");
  EXPECT_THROW_MSG(reduce_logsumexp(zeros({2, 3}), {2}), InvalidArgumentError, "[reduce_logsumexp]", "axis 2",
                   "rank 2");
  EXPECT_THROW_MSG(l2_normalize(constant({1, 2}), 0), InvalidArgumentError, "[l2_normalize]", "int32");
  EXPECT_THROW_MSG(l2_normalize(zeros({2, 3}), -3), InvalidArgumentError, "[l2_normalize]", "axis -3");
  EXPECT_THROW_MSG(reduce_logsumexp(Tensor()), ValueError, "[reduce_logsumexp]", "empty");
}

}  // namespace
}  // namespace tg
