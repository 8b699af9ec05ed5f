// Building tensors: constant (C++ values map to dtypes as Python values do in TensorFlow),
// zeros / ones / fill, range and random_uniform.
#include <cmath>
#include <limits>

#include "support/test_util.h"

namespace tg {
namespace {

constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

TEST(Constant, ScalarsTakeTheirDtypeFromTheCppType) {
  const Tensor i = constant(1);
  EXPECT_EQ(i.dtype(), int32);
  EXPECT_EQ(i.shape(), TensorShape{});
  EXPECT_EQ(i.item<int32_t>(), 1);
  EXPECT_EQ(constant(static_cast<int16_t>(-3)).dtype(), int32);
  const Tensor l = constant(int64_t{1} << 40);
  EXPECT_EQ(l.dtype(), int64);
  EXPECT_EQ(l.item<int64_t>(), int64_t{1} << 40);
  EXPECT_EQ(constant(1.5f).dtype(), float32);
  const Tensor d = constant(1.1);  // like TF: Python floats become float32
  EXPECT_EQ(d.dtype(), float32);
  EXPECT_EQ(d.item<float>(), 1.1f);
  EXPECT_EQ(constant(true).dtype(), bool_);
  EXPECT_TRUE(constant(true).item<bool>());
  EXPECT_FALSE(constant(false).item<bool>());
  EXPECT_EQ(constant("ab").dtype(), string_);
  EXPECT_EQ(constant("ab").item<std::string>(), "ab");
  EXPECT_EQ(constant(std::string("xyz")).item<std::string>(), "xyz");
  char buf[] = "mutable";
  EXPECT_EQ(constant(static_cast<char*>(buf)).item<std::string>(), "mutable");
  EXPECT_EQ(constant(std::string("a\0b", 3)).item<std::string>(), std::string("a\0b", 3));
}

TEST(Constant, ExplicitDtype) {
  const Tensor d = constant(1.1, float64);
  EXPECT_EQ(d.dtype(), float64);
  EXPECT_EQ(d.item<double>(), 1.1);  // not 1.1f widened
  EXPECT_EQ(constant(3, float32).item<float>(), 3.0f);
  EXPECT_EQ(constant(3, float64).item<double>(), 3.0);
  EXPECT_EQ(constant(3, int64).item<int64_t>(), 3);
  EXPECT_EQ(constant(2.0, int32).item<int32_t>(), 2);  // integral values convert exactly
  EXPECT_EQ(constant(-7.0f, int64).item<int64_t>(), -7);
  EXPECT_EQ(constant(int64_t{3}, int32).dtype(), int32);
  EXPECT_EQ(constant(1.5f, float64).item<double>(), 1.5);
}

TEST(Constant, IntegerBoundariesAreExact) {
  EXPECT_EQ(constant(int64_t{2147483647}, int32).item<int32_t>(), 2147483647);
  EXPECT_EQ(constant(int64_t{-2147483648LL}, int32).item<int32_t>(), -2147483647 - 1);
  EXPECT_EQ(constant(2147483647.0, int32).item<int32_t>(), 2147483647);
  EXPECT_EQ(constant(-2147483648.0, int32).item<int32_t>(), -2147483647 - 1);
  EXPECT_EQ(constant(kI64Max).item<int64_t>(), kI64Max);
  EXPECT_EQ(constant(kI64Min).item<int64_t>(), kI64Min);
  EXPECT_EQ(constant(-9223372036854775808.0, int64).item<int64_t>(), kI64Min);
  EXPECT_EQ(constant(9007199254740993LL, float64).item<double>(), 9007199254740992.0);
}

TEST(Constant, NestedBraces) {
  const Tensor v = constant({1, 2, 3});
  EXPECT_EQ(v.dtype(), int32);
  EXPECT_EQ(v.shape(), TensorShape{3});
  EXPECT_EQ(v.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3}));

  const Tensor m = constant({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}});
  EXPECT_EQ(m.dtype(), float32);
  EXPECT_EQ(m.shape(), TensorShape({2, 3}));
  EXPECT_EQ(m.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));

  const Tensor c = constant({{{1, 2}, {3, 4}, {5, 6}}, {{7, 8}, {9, 10}, {11, 12}}});
  EXPECT_EQ(c.shape(), TensorShape({2, 3, 2}));
  EXPECT_EQ(c.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));

  const Tensor cd = constant({{{1.5}, {2.5}}}, float64);
  EXPECT_EQ(cd.dtype(), float64);
  EXPECT_EQ(cd.shape(), TensorShape({1, 2, 1}));
  EXPECT_EQ(cd.to_vector<double>(), (std::vector<double>{1.5, 2.5}));

  const Tensor cs = constant({{{"a"}, {"b"}}, {{"c"}, {"d"}}});
  EXPECT_EQ(cs.dtype(), string_);
  EXPECT_EQ(cs.shape(), TensorShape({2, 2, 1}));
  EXPECT_EQ(cs.to_vector<std::string>(), (std::vector<std::string>{"a", "b", "c", "d"}));

  const Tensor cb = constant({{{true, false}}});
  EXPECT_EQ(cb.shape(), TensorShape({1, 1, 2}));
  EXPECT_EQ(cb.to_vector<bool>(), (std::vector<bool>{true, false}));

  const Tensor b = constant({{true}, {false}});
  EXPECT_EQ(b.dtype(), bool_);
  EXPECT_EQ(b.shape(), TensorShape({2, 1}));

  const Tensor s = constant({"x", "yy"});
  EXPECT_EQ(s.dtype(), string_);
  EXPECT_EQ(s.to_vector<std::string>(), (std::vector<std::string>{"x", "yy"}));

  EXPECT_EQ(constant({int64_t{5}, int64_t{6}}).dtype(), int64);
  EXPECT_EQ(constant({{1, 2}}, float64).to_vector<double>(), (std::vector<double>{1, 2}));
  EXPECT_EQ(constant({1.5, 2.5}).dtype(), float32);
}

TEST(Constant, FromAVectorAndAShape) {
  const Tensor t = constant(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2});
  EXPECT_EQ(t.shape(), TensorShape({3, 2}));
  EXPECT_EQ(t.dtype(), float32);
  EXPECT_EQ(t.to_vector<float>()[5], 6.0f);
  EXPECT_EQ(constant(std::vector<double>{0.5}, {1, 1, 1}).dtype(), float32);
  EXPECT_EQ(constant(std::vector<double>{0.1}, {1}, float64).to_vector<double>()[0], 0.1);
  EXPECT_EQ(constant(std::vector<int64_t>{1, 2}, {2}).dtype(), int64);
  EXPECT_EQ(constant(std::vector<int32_t>{1, 2}, {2}).dtype(), int32);
  EXPECT_EQ(constant(std::vector<int32_t>{1, 2}, {2}, int64).dtype(), int64);
  EXPECT_EQ(constant(std::vector<bool>{true, false, true}, {3}).to_vector<bool>(),
            (std::vector<bool>{true, false, true}));
  EXPECT_EQ(constant(std::vector<std::string>{"p", "q"}, {2, 1}).shape(), TensorShape({2, 1}));
  EXPECT_EQ(constant(std::vector<int32_t>{7}, TensorShape{}).shape(), TensorShape{});
  const Tensor e = constant(std::vector<float>{}, {0, 3});
  EXPECT_EQ(e.shape(), TensorShape({0, 3}));
  EXPECT_EQ(e.num_elements(), 0);
  EXPECT_TRUE(e.to_vector<float>().empty());
}

TEST(Zeros, EveryDtype) {
  EXPECT_TENSOR_EQ(zeros({2, 2}), constant({{0.f, 0.f}, {0.f, 0.f}}));
  EXPECT_TENSOR_EQ(zeros({2}, float64), constant({0.0, 0.0}, float64));
  EXPECT_TENSOR_EQ(zeros({3}, int32), constant({0, 0, 0}));
  EXPECT_TENSOR_EQ(zeros({1}, int64), constant({0}, int64));
  EXPECT_TENSOR_EQ(zeros({2}, bool_), constant({false, false}));
  EXPECT_TENSOR_EQ(zeros({2}, string_), constant({"", ""}));
  EXPECT_TENSOR_EQ(zeros({}), constant(0.f));
  EXPECT_EQ(zeros({0, 4}).shape(), TensorShape({0, 4}));
}

TEST(Ones, EveryDtypeButString) {
  EXPECT_TENSOR_EQ(ones({2}), constant({1.f, 1.f}));
  EXPECT_TENSOR_EQ(ones({1, 2}, float64), constant({{1.0, 1.0}}, float64));
  EXPECT_TENSOR_EQ(ones({3}, int32), constant({1, 1, 1}));
  EXPECT_TENSOR_EQ(ones({2}, int64), constant({1, 1}, int64));
  EXPECT_TENSOR_EQ(ones({2}, bool_), constant({true, true}));
  EXPECT_TENSOR_EQ(ones({}), constant(1.f));
  EXPECT_EQ(ones({3, 0}, int32).shape(), TensorShape({3, 0}));
}

TEST(Fill, FromCppScalarsAndScalarTensors) {
  EXPECT_TENSOR_EQ(fill({2}, 2.5f), constant({2.5f, 2.5f}));
  EXPECT_TENSOR_EQ(fill({2}, 2.5, float64), constant({2.5, 2.5}, float64));
  EXPECT_TENSOR_EQ(fill({2, 1}, 7), constant({{7}, {7}}));
  EXPECT_TENSOR_EQ(fill({2}, int64_t{-9}), constant({-9, -9}, int64));
  EXPECT_TENSOR_EQ(fill({3}, true), constant({true, true, true}));
  EXPECT_TENSOR_EQ(fill({2}, false), constant({false, false}));
  EXPECT_TENSOR_EQ(fill({2}, "ab"), constant({"ab", "ab"}));
  EXPECT_TENSOR_EQ(fill({2}, constant(3, int64)), constant({3, 3}, int64));
  EXPECT_TENSOR_EQ(fill({}, 4), constant(4));
  EXPECT_TENSOR_EQ(fill({2}, std::numeric_limits<float>::infinity()),
                   constant({std::numeric_limits<float>::infinity(),
                             std::numeric_limits<float>::infinity()}));
  const Tensor n = fill({2}, std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(std::isnan(n.to_vector<float>()[1]));
  EXPECT_EQ(fill({0, 2}, 1.f).shape(), TensorShape({0, 2}));
}

TEST(Range, Integers) {
  EXPECT_TENSOR_EQ(range(5), constant({0, 1, 2, 3, 4}));
  EXPECT_TENSOR_EQ(range(2, 11, 3), constant({2, 5, 8}));
  EXPECT_TENSOR_EQ(range(-3, 3), constant({-3, -2, -1, 0, 1, 2}));
  EXPECT_TENSOR_EQ(range(5, 0, -2), constant({5, 3, 1}));
  EXPECT_TENSOR_EQ(range(0, -3, -1), constant({0, -1, -2}));
  EXPECT_TENSOR_EQ(range(int64_t{0}, int64_t{10}, int64_t{3}), constant({0, 3, 6, 9}, int64));
  EXPECT_TENSOR_EQ(range(int64_t{4}), constant({0, 1, 2, 3}, int64));
  EXPECT_TENSOR_EQ(range(int64_t{1}, int64_t{3}, int64_t{1}, float32), constant({1.f, 2.f}));
  EXPECT_TENSOR_EQ(range(kI64Max - 2, kI64Max, int64_t{1}, int64),
                   constant({kI64Max - 2, kI64Max - 1}));
  EXPECT_TENSOR_EQ(range(kI64Min, kI64Max, kI64Max, int64),
                   constant({kI64Min, int64_t{-1}, kI64Max - 1}));
}

TEST(Range, EmptyWhenTheLimitIsBehindTheStart) {
  EXPECT_TENSOR_EQ(range(0), zeros({0}, int32));
  EXPECT_TENSOR_EQ(range(0, 0), zeros({0}, int32));
  EXPECT_TENSOR_EQ(range(3, 1), zeros({0}, int32));
  EXPECT_TENSOR_EQ(range(1, 3, -1), zeros({0}, int32));
  EXPECT_TENSOR_EQ(range(1.0f, 0.0f), zeros({0}));
}

TEST(Range, Floats) {
  EXPECT_TENSOR_EQ(range(0.0f, 1.0f, 0.25f), constant({0.f, 0.25f, 0.5f, 0.75f}));
  EXPECT_TENSOR_EQ(range(1.0, 0.0, -0.5), constant({1.f, 0.5f}));  // double args: float32
  EXPECT_TENSOR_EQ(range(0.5f, 3.0f), constant({0.5f, 1.5f, 2.5f}));
  const Tensor t = range(0.0, 1.0, 0.1, float64);
  EXPECT_EQ(t.dtype(), float64);
  EXPECT_EQ(t.num_elements(), 10);
  EXPECT_TENSOR_NEAR(t, constant({0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}, float64),
                     1e-15);
  EXPECT_TENSOR_EQ(range(-1.0, 2.0, 1.0, int32), constant({-1, 0, 1}));
  EXPECT_EQ(range(0.0f, 1.0f, 0.1f).num_elements(), 10);
  EXPECT_EQ(range(0.0f, 1.0f, 0.3f).num_elements(), 4);  // ceil((limit - start) / delta)
}

TEST(RandomUniform, ValuesLieInTheRange) {
  const Tensor t = random_uniform({50, 40}, -2.0f, 3.0f, 1);
  EXPECT_EQ(t.dtype(), float32);
  EXPECT_EQ(t.shape(), TensorShape({50, 40}));
  for (float v : t.to_vector<float>()) {
    EXPECT_GE(v, -2.0f);
    EXPECT_LT(v, 3.0f);
  }
  for (float v : random_uniform({1000}).to_vector<float>()) {
    EXPECT_GE(v, 0.0f);
    EXPECT_LT(v, 1.0f);
  }
  // A range narrower than one float step still stays below hi.
  for (float v : random_uniform({100}, 1.0f, std::nextafter(1.0f, 2.0f), 3).to_vector<float>())
    EXPECT_EQ(v, 1.0f);
  EXPECT_EQ(random_uniform({0, 3}, 0.0f, 1.0f, 5).shape(), TensorShape({0, 3}));
}

TEST(RandomUniform, SeededCallsAreReproducibleAfterSetRandomSeed) {
  // TF's rule: an op seed names a stream that every call advances; set_random_seed restarts it.
  set_random_seed(1);
  const Tensor first = random_uniform({64}, 0.0f, 1.0f, 42);
  EXPECT_FALSE(testing::tensors_near(random_uniform({64}, 0.0f, 1.0f, 42), first));
  set_random_seed(1);
  EXPECT_TENSOR_EQ(random_uniform({64}, 0.0f, 1.0f, 42), first);
  EXPECT_FALSE(testing::tensors_near(random_uniform({64}, 0.0f, 1.0f, 43), first));
}

TEST(RandomUniform, SetRandomSeedMakesUnseededCallsReproducible) {
  set_random_seed(7);
  const Tensor a1 = random_uniform({16});
  const Tensor a2 = random_uniform({16});
  EXPECT_FALSE(testing::tensors_near(a1, a2));  // the global generator advances
  set_random_seed(7);
  EXPECT_TENSOR_EQ(random_uniform({16}), a1);
  EXPECT_TENSOR_EQ(random_uniform({16}), a2);
  set_random_seed(8);
  EXPECT_FALSE(testing::tensors_near(random_uniform({16}), a1));
}

TEST(RandomUniform, MomentsOf100kValues) {
  const auto v = random_uniform({100000}, 0.0f, 1.0f, 123).to_vector<float>();
  double sum = 0, sq = 0;
  int low_half = 0;
  for (float x : v) {
    sum += x;
    sq += static_cast<double>(x) * x;
    low_half += x < 0.5f;
  }
  const double mean = sum / static_cast<double>(v.size());
  EXPECT_NEAR(mean, 0.5, 0.005);
  EXPECT_NEAR(sq / static_cast<double>(v.size()) - mean * mean, 1.0 / 12.0, 0.002);
  EXPECT_NEAR(low_half, 50000, 600);
  const auto w = random_uniform({100000}, 10.0f, 20.0f, 321).to_vector<float>();
  double wsum = 0;
  for (float x : w) wsum += x;
  EXPECT_NEAR(wsum / static_cast<double>(w.size()), 15.0, 0.05);
}

}  // namespace
}  // namespace tg

namespace tg {
namespace {
TEST(Creation, RangeWithPlainIntsAndAnExplicitDtype) {
  EXPECT_EQ(range(0, 5, 1, float32).to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4}));
  EXPECT_EQ(range(0.0, 1.0, 0.5, float64).to_vector<double>(), (std::vector<double>{0.0, 0.5}));
}
}  // namespace
}  // namespace tg
