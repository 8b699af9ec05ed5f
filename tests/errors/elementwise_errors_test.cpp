// Expected failures of the elementwise ops: each message starts with "[op]" and names what was
// expected and what was received.
#include <limits>

#include "support/activations.h"
#include "support/test_util.h"

namespace tg {
namespace {

using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);
using UnaryFn = Tensor (*)(const Tensor&);

struct Named2 {
  const char* name;
  BinaryFn fn;
};
const Named2 kBinary[] = {
    {"add", &add}, {"sub", &sub}, {"mul", &mul}, {"div", &div}, {"floordiv", &floordiv},
    {"mod", &mod}, {"pow", &pow}, {"maximum", &maximum}, {"minimum", &minimum},
    {"equal", &equal}, {"not_equal", &not_equal}, {"less", &less}, {"less_equal", &less_equal},
    {"greater", &greater}, {"greater_equal", &greater_equal}, {"logical_and", &logical_and},
    {"logical_or", &logical_or},
};

struct Named1 {
  const char* name;
  UnaryFn fn;
};
const Named1 kUnary[] = {
    {"neg", &neg},         {"abs", &abs},         {"sign", &sign},
    {"square", &square},   {"relu", &relu},       {"exp", &exp},
    {"log", &log},         {"sqrt", &sqrt},       {"rsqrt", &rsqrt},
    {"tanh", &tanh},       {"sigmoid", &sigmoid}, {"sin", &sin},
    {"cos", &cos},         {"logical_not", &logical_not}, {"identity", &identity},
    {"zeros_like", &zeros_like}, {"ones_like", &ones_like},
};

TEST(ElementwiseErrors, MixingDtypesNamesBothDtypesAndTheOp) {
  for (const auto& op : kBinary) {
    const std::string tag = std::string("[") + op.name + "]";
    EXPECT_THROW_MSG(op.fn(constant({1.f}), constant({1})), InvalidArgumentError, tag,
                     "float32", "int32", "tg::cast");
    EXPECT_THROW_MSG(op.fn(constant(int64_t{1}), constant(1)), InvalidArgumentError, tag,
                     "int64", "int32");
    EXPECT_THROW_MSG(op.fn(constant(1.0, float64), constant(1.f)), InvalidArgumentError, tag,
                     "float64", "float32");
    EXPECT_THROW_MSG(op.fn(constant(true), constant("a")), InvalidArgumentError, tag, "bool",
                     "string");
  }
}

TEST(ElementwiseErrors, UnsupportedDtypesNameTheOpAndTheAllowedDtypes) {
  EXPECT_THROW_MSG(tanh(constant({1})), InvalidArgumentError, "[tanh]", "int32",
                   "float32, float64");
  EXPECT_THROW_MSG(add(constant(true), constant(false)), InvalidArgumentError, "[add]", "bool",
                   "float32, float64, int32, int64, uint8, string");
  EXPECT_THROW_MSG(sub(constant("a"), constant("b")), InvalidArgumentError, "[sub]", "string",
                   "float32, float64, int32, int64");
  EXPECT_THROW_MSG(less(constant("a"), constant("b")), InvalidArgumentError, "[less]", "string");
  EXPECT_THROW_MSG(greater_equal(constant(true), constant(true)), InvalidArgumentError,
                   "[greater_equal]", "bool");
  EXPECT_THROW_MSG(logical_and(constant(1), constant(1)), InvalidArgumentError, "[logical_and]",
                   "int32", "expected one of: bool");
  EXPECT_THROW_MSG(logical_or(constant(1.f), constant(0.f)), InvalidArgumentError,
                   "[logical_or]", "float32", "bool");
  EXPECT_THROW_MSG(logical_not(constant(1.f)), InvalidArgumentError, "[logical_not]", "float32",
                   "bool");
  EXPECT_THROW_MSG(neg(constant(true)), InvalidArgumentError, "[neg]", "bool");
  EXPECT_THROW_MSG(abs(constant("a")), InvalidArgumentError, "[abs]", "string");
  EXPECT_THROW_MSG(relu(constant(false)), InvalidArgumentError, "[relu]", "bool");
  EXPECT_THROW_MSG(pow(constant(true), constant(true)), InvalidArgumentError, "[pow]", "bool");
  EXPECT_THROW_MSG(mod(constant("a"), constant("b")), InvalidArgumentError, "[mod]", "string");
  EXPECT_THROW_MSG(maximum(constant("a"), constant("b")), InvalidArgumentError, "[maximum]",
                   "string");
  EXPECT_THROW_MSG(mul(constant("a"), constant("b")), InvalidArgumentError, "[mul]", "string");
  EXPECT_THROW_MSG(div(constant(true), constant(true)), InvalidArgumentError, "[div]", "bool");
  // The floating-only ops reject every other dtype: sqrt, rsqrt and every vectorised activation
  // (tests/support/activations.cpp), eagerly and when traced.
  std::vector<std::pair<std::string, UnaryFn>> float_only = {{"sqrt", &sqrt}, {"rsqrt", &rsqrt}};
  for (const testing::Activation& a : testing::activations()) float_only.emplace_back(a.op, a.apply);
  for (const auto& entry : float_only) {  // not a structured binding: clang 14 cannot capture one
    const UnaryFn fn = entry.second;
    const std::string tag = "[" + entry.first + "]";
    SCOPED_TRACE(tag);
    EXPECT_THROW_MSG(fn(constant(int64_t{1})), InvalidArgumentError, tag, "int64",
                     "float32, float64");
    EXPECT_THROW_MSG(fn(constant(1)), InvalidArgumentError, tag, "int32", "tg::cast");
    EXPECT_THROW_MSG(fn(constant(true)), InvalidArgumentError, tag, "bool");
    EXPECT_THROW_MSG(fn(constant("s")), InvalidArgumentError, tag, "string");
    auto traced = function([fn](const Tensor& x) { return fn(x); });
    EXPECT_THROW_MSG(traced(constant({1, 2})), InvalidArgumentError, tag, "int32");
  }
}

TEST(ElementwiseErrors, CastsBetweenStringsAndOtherDtypes) {
  EXPECT_THROW_MSG(cast(constant("1"), int32), InvalidArgumentError, "[cast]", "string",
                   "int32");
  EXPECT_THROW_MSG(cast(constant(1.f), string_), InvalidArgumentError, "[cast]", "float32",
                   "string");
  EXPECT_THROW_MSG(cast(constant(true), string_), InvalidArgumentError, "[cast]", "bool");
}

TEST(ElementwiseErrors, OnesLikeOfStrings) {
  EXPECT_THROW_MSG(ones_like(constant({"a"})), InvalidArgumentError, "[ones_like]", "string",
                   "tg::fill");
}

TEST(ElementwiseErrors, Where) {
  EXPECT_THROW_MSG(where(constant({1}), constant({1}), constant({2})), InvalidArgumentError,
                   "[where]", "condition", "bool", "int32");
  EXPECT_THROW_MSG(where(constant({true}), constant({1}), constant({2.f})), InvalidArgumentError,
                   "[where]", "int32", "float32");
  EXPECT_THROW_MSG(where(constant({true, false}), constant({1, 2, 3}), constant(0)),
                   InvalidArgumentError, "[where]", "(2,)", "(3,)", "broadcast");
  EXPECT_THROW_MSG(where(constant(true), constant({1, 2}), constant({1, 2, 3})),
                   InvalidArgumentError, "[where]", "(2,)", "(3,)");
}

TEST(ElementwiseErrors, ShapesThatDoNotBroadcast) {
  EXPECT_THROW_MSG(add(zeros({2, 3}), zeros({4})), InvalidArgumentError, "[add]", "(2, 3)",
                   "(4,)", "cannot be broadcast", "3 == 4");
  EXPECT_THROW_MSG(mul(zeros({2, 1, 3}), zeros({5, 2})), InvalidArgumentError, "[mul]",
                   "(2, 1, 3)", "(5, 2)");
  EXPECT_THROW_MSG(equal(zeros({0}), zeros({2})), InvalidArgumentError, "[equal]", "(0,)",
                   "(2,)");
  EXPECT_THROW_MSG(constant({1, 2}) + constant({1, 2, 3}), InvalidArgumentError, "[add]");
}

TEST(ElementwiseErrors, IntegerDivisionByZero) {
  EXPECT_THROW_MSG(div(constant({1, 2}), constant({1, 0})), InvalidArgumentError, "[div]",
                   "division by zero", "2 / 0");
  EXPECT_THROW_MSG(floordiv(constant({-3}), constant(0)), InvalidArgumentError, "[floordiv]",
                   "division by zero", "-3 / 0");
  EXPECT_THROW_MSG(floordiv(constant(int64_t{5}), constant(int64_t{0})), InvalidArgumentError,
                   "[floordiv]", "division by zero");
  EXPECT_THROW_MSG(mod(constant({4}), constant({0})), InvalidArgumentError, "[mod]",
                   "modulo by zero", "4 % 0");
  EXPECT_THROW_MSG(mod(constant(int64_t{4}), constant(int64_t{0})), InvalidArgumentError,
                   "[mod]", "by zero");
  EXPECT_THROW_MSG(constant(7) / 0, InvalidArgumentError, "[div]", "by zero");
  EXPECT_THROW_MSG(constant(7) % 0, InvalidArgumentError, "[mod]", "by zero");
}

TEST(ElementwiseErrors, IntegerPowWithNegativeExponent) {
  EXPECT_THROW_MSG(pow(constant({2, 2}), constant({1, -1})), InvalidArgumentError, "[pow]",
                   "negative", "-1", "float");
  EXPECT_THROW_MSG(pow(constant(int64_t{1}), constant(int64_t{-3})), InvalidArgumentError,
                   "[pow]", "-3");
}

TEST(ElementwiseErrors, EmptyTensorHandles) {
  const Tensor e;
  for (const auto& op : kBinary) {
    const std::string tag = std::string("[") + op.name + "]";
    EXPECT_THROW_MSG(op.fn(e, constant(1)), ValueError, tag, "input 0", "empty tg::Tensor");
    EXPECT_THROW_MSG(op.fn(constant(1), e), ValueError, tag, "input 1", "empty");
  }
  for (const auto& op : kUnary)
    EXPECT_THROW_MSG(op.fn(e), ValueError, std::string("[") + op.name + "]", "input 0", "empty");
  EXPECT_THROW_MSG(cast(e, int32), ValueError, "[cast]", "empty");
  EXPECT_THROW_MSG(where(constant(true), constant(1), e), ValueError, "[where]", "input 2");
  EXPECT_THROW_MSG(e + 1, ValueError, "empty tg::Tensor");
  EXPECT_THROW_MSG(1.5 * e, ValueError, "empty tg::Tensor");
  EXPECT_THROW_MSG(-e, ValueError, "[neg]");
  EXPECT_THROW_MSG(!e, ValueError, "[logical_not]");
}

TEST(ElementwiseErrors, CppScalarsThatDoNotFitTheTensorsDtype) {
  EXPECT_THROW_MSG(constant({1, 2}) + 1.5, InvalidArgumentError, "1.5", "int32");
  EXPECT_THROW_MSG(2.5 * constant(int64_t{1}), InvalidArgumentError, "2.5", "int64");
  EXPECT_THROW_MSG(constant(1) + 5000000000LL, InvalidArgumentError, "5000000000", "int32",
                   "int64");
  EXPECT_THROW_MSG(constant(true) + 1, TypeError, "integer", "bool");
  EXPECT_THROW_MSG(constant(1.f) + true, TypeError, "bool", "float32");
  EXPECT_THROW_MSG(constant("a") + 1, TypeError, "integer", "string");
  EXPECT_THROW_MSG(constant(1) == "a", TypeError, "string", "int32");
  EXPECT_THROW_MSG(constant(1) && true, TypeError, "bool", "int32");
}

}  // namespace
}  // namespace tg
