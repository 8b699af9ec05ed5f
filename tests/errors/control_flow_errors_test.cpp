// Expected failures of tg::cond, tg::while_loop, tg::for_range and tg::TensorArray: each is a
// typed tg:: error whose message names the API, what was received and what to do.
#include <limits>

#include "support/test_util.h"

namespace tg {
namespace {

TEST(ControlFlowErrors, CondPredicateMustBeAScalarBool) {
  EXPECT_THROW_MSG(cond(constant(1), [] { return constant(1); }, [] { return constant(2); }), TypeError,
                   "[cond] pred must be a scalar bool tensor, got int32 ()", "compare it");
  EXPECT_THROW_MSG(cond(constant({true, false}), [] { return constant(1); }, [] { return constant(2); }),
                   InvalidArgumentError, "[cond] pred must be a scalar bool tensor, got shape (2,)", "reduce_any");
  auto f = function([](const Tensor& x) { return cond(x, [&] { return x; }, [&] { return x; }); });
  EXPECT_THROW_MSG(f(constant(1.5f)), TypeError, "[cond] pred", "float32");
}

TEST(ControlFlowErrors, CondBranchesMustMatch) {
  auto dtypes = function([](const Tensor& p) {
    return cond(p, [] { return constant(1); }, [] { return constant(1.0f); });
  });
  EXPECT_THROW_MSG(dtypes(constant(true)), TypeError, "[cond] true_fn returned (int32 (),) but false_fn returned (float32 (),)",
                   "same dtypes");
  auto counts = function([](const Tensor& p) {
    return cond(p, [] { return std::vector<Tensor>{constant(1), constant(2)}; },
                [] { return std::vector<Tensor>{constant(1)}; });
  });
  EXPECT_THROW_MSG(counts(constant(true)), TypeError, "true_fn returned (int32 (), int32 ())",
                   "false_fn returned (int32 (),)");
}

TEST(ControlFlowErrors, SymbolicConditionInACppIfPointsToCond) {
  auto f = function([](const Tensor& x) {
    if (x > 0) return x;
    return -x;
  });
  EXPECT_THROW_MSG(f(constant(1)), TypeError, "tg::cond");
}

TEST(ControlFlowErrors, WhileShapeChangeWithoutInvariantNamesTheVariableAndBothShapes) {
  auto body = [](const Tensor& i, const Tensor& x) { return std::tuple{i + 1, concat({x, x}, 0)}; };
  auto cond_fn = [](const Tensor& i, const Tensor&) { return i < 3; };
  auto f = function([&](const Tensor& x) { return std::get<1>(while_loop(cond_fn, body, std::tuple{constant(0), x})); });
  EXPECT_THROW_MSG(f(constant({1, 2})), ValueError, "[while_loop] loop variable loop_vars[1] has shape (2,) on entry",
                   "shape (4,) after an iteration", "shape_invariants");
  // Eagerly the same loop fails the same way, so code that runs eagerly also traces.
  EXPECT_THROW_MSG(while_loop(cond_fn, body, std::tuple{constant(0), constant({1, 2})}), ValueError,
                   "loop_vars[1] has shape (2,) on entry");
}

TEST(ControlFlowErrors, WhileDtypeChangeAndBadCondition) {
  auto f = function([](const Tensor& x) {
    return while_loop([](const Tensor& v) { return v < 3; }, [](const Tensor& v) { return cast(v, float32); }, x);
  });
  EXPECT_THROW_MSG(f(constant(0)), TypeError, "loop variable loop_vars has dtype int32 on entry but the body returns float32");
  auto g = function([](const Tensor& x) {
    return while_loop([](const Tensor& v) { return v; }, [](const Tensor& v) { return v + 1; }, x);
  });
  EXPECT_THROW_MSG(g(constant(0)), TypeError, "[while_loop] cond must be a scalar bool tensor, got int32 ()");
  WhileOptions opts;
  opts.shape_invariants = {TensorShape{}, TensorShape{}};
  EXPECT_THROW_MSG(while_loop([](const Tensor& v) { return v < 3; }, [](const Tensor& v) { return v + 1; }, constant(0), opts),
                   ValueError, "shape_invariants has 2 shapes but there are 1 loop variables");
}

TEST(ControlFlowErrors, BranchValuesDoNotLeakOutOfTheirSubGraph) {
  Tensor leaked;
  auto f = function([&](const Tensor& x) {
    Tensor y = cond(x > 0, [&] { leaked = x * 2; return leaked; }, [&] { return x; });
    return y + leaked;
  });
  EXPECT_THROW_MSG(f(constant(1)), OutOfScopeError, "then_branch");
}

TEST(ControlFlowErrors, TensorArrayBoundsDtypesAndShapes) {
  TensorArray ta(float32, 2);
  EXPECT_THROW_MSG(ta.write(2, constant(1.0f)), InvalidArgumentError,
                   "[TensorArray.write] index 2 is out of range for a TensorArray of size 2", "dynamic_size=true");
  EXPECT_THROW_MSG(ta.write(-1, constant(1.0f)), InvalidArgumentError, "index -1 is out of range");
  EXPECT_THROW_MSG(ta.write(0, constant(1)), TypeError, "[TensorArray.write] the array holds float32 but the value is int32");
  TensorArray one = ta.write(0, constant({1.0f, 2.0f}));
  EXPECT_THROW_MSG(one.write(1, constant({1.0f, 2.0f, 3.0f})), InvalidArgumentError,
                   "the value has shape (3,) but the array's elements have shape (2,)");
  EXPECT_THROW_MSG(one.read(5), InvalidArgumentError, "[TensorArray.read] index 5 is out of range for a TensorArray of size 2");
  EXPECT_THROW_MSG(ta.read(0), InvalidArgumentError, "nothing has been written");
  EXPECT_THROW_MSG(TensorArray(float32, 0, true).stack(), InvalidArgumentError, "[TensorArray.stack]", "element_shape");
  EXPECT_THROW_MSG(TensorArray(string_, 1), TypeError, "[TensorArray] string arrays are not supported");
  EXPECT_THROW_MSG(one.write(constant(0.5f), constant({1.0f, 2.0f})), TypeError, "index must be an int32 or int64 scalar");
  // Traced, the bound is checked when the graph runs.
  auto f = function([](const Tensor& i) { return TensorArray(int32, 3).write(i, constant(1)).stack(); });
  EXPECT_TENSOR_EQ(f(constant(1)), constant({0, 1, 0}));
  EXPECT_THROW_MSG(f(constant(3)), InvalidArgumentError, "index 3 is out of range");
}

TEST(ControlFlowErrors, ForRangeBounds) {
  EXPECT_THROW_MSG(for_range({constant(0.0f), constant(3.0f)}, [](const Tensor&) {}), TypeError,
                   "[for_range] start must be an int32 or int64 scalar");
  EXPECT_THROW_MSG(for_range({constant(0), constant(int64_t{3})}, [](const Tensor&) {}), TypeError,
                   "[for_range] limit is int64 but another bound is int32");
  EXPECT_THROW_MSG(for_range({0, 3, 0}, [](const Tensor&) {}), ValueError, "delta must not be zero");
}

TEST(ControlFlowErrors, ForRangeRunTimeDeltaOfZeroIsAValueErrorAsEagerly) {
  // Traced, a delta known only at run time made a loop that ran zero times.
  auto add = [](const Tensor& i, const Tensor& s) { return s + i; };
  auto sum = function([&](const Tensor& delta) { return for_range({constant(0), constant(6), delta}, constant(0), add); });
  EXPECT_TENSOR_EQ(sum(constant(2)), constant(6));
  EXPECT_TENSOR_EQ(sum(constant(-1)), constant(0));
  EXPECT_THROW_MSG(sum(constant(0)), ValueError, "[for_range] delta must not be zero");
  EXPECT_THROW_MSG(for_range({constant(0), constant(6), constant(0)}, [](const Tensor&) {}), ValueError,
                   "[for_range] delta must not be zero");
  auto effects = function([](const Tensor& delta) {
    for_range({constant(int64_t{0}), constant(int64_t{3}), delta}, [](const Tensor& i) { print(i); });
  });
  EXPECT_THROW_MSG(effects(constant(int64_t{0})), ValueError, "[for_range] delta must not be zero");
  // An unknown-rank delta is checked for being a scalar when it arrives.
  auto unranked = function([&](const Tensor& delta) { return for_range({0, 3, delta}, constant(0), add); },
                           {.input_signature = std::vector<TensorSpec>{TensorSpec(TensorShape::unknown_rank(), int32)}});
  EXPECT_TENSOR_EQ(unranked(constant(1)), constant(3));
  EXPECT_THROW_MSG(unranked(constant({1, 2})), InvalidArgumentError, "[for_range] delta must be a scalar", "(2,)");
}

TEST(ControlFlowErrors, TensorArrayIndexNearInt64Max) {
  // index + 1 (the grown size) overflowed int64: UB, caught by UBSan builds.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  TensorArray grows(float32, 0, true);
  EXPECT_THROW_MSG(grows.write(kMax, constant(1.0f)), InvalidArgumentError, "[TensorArray.write] index "
                   "9223372036854775807 is too large", "smaller index");
  EXPECT_THROW_MSG(grows.write(kMax - 1, constant(1.0f)), ResourceExhaustedError, "[allocate]");
  auto f = function([](const Tensor& i) { return TensorArray(float32, 0, true).write(i, constant(1.0f)).stack(); });
  EXPECT_TENSOR_EQ(f(constant(int64_t{1})), constant({0.0f, 1.0f}));
  EXPECT_THROW_MSG(f(constant(kMax)), InvalidArgumentError, "is too large");
  EXPECT_THROW_MSG(TensorArray(float32, 2).write(kMax, constant(1.0f)), InvalidArgumentError,
                   "index 9223372036854775807 is out of range");
}

TEST(ControlFlowErrors, TracedTensorArrayIndexOfTheWrongShapeIsTheEagerError) {
  // Eagerly the index is checked when the op is built; traced with an unknown rank, when it runs
  // (it was a TG_CHECK there, an InternalError).
  TensorArray ta = TensorArray(float32, 2).write(0, constant(1.0f));
  EXPECT_THROW_MSG(ta.read(constant({0, 1})), TypeError, "[TensorArray.read] the index must be an int32 or int64 scalar",
                   "(2,)");
  const auto spec = std::vector<TensorSpec>{TensorSpec(TensorShape::unknown_rank(), int32)};
  auto write = function([](const Tensor& i) { return TensorArray(float32, 2).write(i, constant(1.0f)).stack(); },
                        {.input_signature = spec});
  auto read = function([](const Tensor& i) { return TensorArray(float32, 2).write(0, constant(5.0f)).read(i); },
                       {.input_signature = spec});
  EXPECT_TENSOR_EQ(write(constant(1)), constant({0.0f, 1.0f}));
  EXPECT_TENSOR_EQ(read(constant(0)), constant(5.0f));
  EXPECT_THROW_MSG(write(constant({0, 1})), TypeError,
                   "[TensorArray.write] the index must be an int32 or int64 scalar, got int32 (2,)");
  EXPECT_THROW_MSG(read(constant({0, 1})), TypeError,
                   "[TensorArray.read] the index must be an int32 or int64 scalar, got int32 (2,)");
  EXPECT_THROW_MSG(read(constant(std::vector<int32_t>{}, {0})), TypeError, "[TensorArray.read] the index must be");
}

}  // namespace
}  // namespace tg
