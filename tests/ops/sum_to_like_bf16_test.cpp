// sum_to_like on bfloat16 tensors (a layer's bias gradient under mixed_bfloat16): the column sums
// read off the bfloat16 values, widened in registers, against a double loop written here (every
// path of the op harness) and bit for bit against the float32 op on the widened tensor, rounded
// (the float32 rule it replaces): column counts that hit every block of the kernel (32, 16, one),
// rows enough for several leaves of the pairwise order, NaNs, infinities and zeros of both signs,
// one thread and two (a sum split over the pool by columns); the reductions the column kernel
// does not take (to (n, 1), to a scalar) keep the float32 rule; mixed dtypes are refused.
#include <cmath>
#include <string>
#include <vector>

#include "ops/grad_helpers.h"
#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

using testing::same_bits;
using Dims = std::vector<int64_t>;

// Values in [-3, 3) rounded to bfloat16: sums that need rounding once widened and added.
Tensor bf16_values(const Dims& d, uint64_t seed) { return cast(random_uniform(d, -3.0, 3.0, seed), bfloat16); }

// The sum over every leading dim of x (rows x c), in double row after row, rounded to float32
// and then bfloat16: what the kernel computes up to the order of its additions.
Tensor ref_column_sums(const Tensor& x, int64_t c) {
  const std::vector<float> v = cast(x, float32).to_vector<float>();
  const int64_t rows = static_cast<int64_t>(v.size()) / c;
  std::vector<float> sums(static_cast<std::size_t>(c));
  for (int64_t k = 0; k < c; ++k) {
    double s = 0.0;
    for (int64_t r = 0; r < rows; ++r) s += static_cast<double>(v[static_cast<std::size_t>(r * c + k)]);
    sums[static_cast<std::size_t>(k)] = static_cast<float>(s);
  }
  return cast(constant(sums, TensorShape({c})), bfloat16);
}

Tensor sum_to(const Tensor& g, const Tensor& like) { return detail::sum_to_like(g, like); }

TG_OP_CASES(sum_to_like_bf16) {
  std::vector<testing::OpCase> cases;
  auto fn = [](const std::vector<Tensor>& in) { return sum_to(in[0], in[1]); };
  uint64_t seed = 3100;
  for (const Dims& d : std::vector<Dims>{{4, 3, 5, 32}, {2, 7, 7, 64}, {3, 5, 5, 17}, {96, 40}, {5, 3}}) {
    const Tensor x = bf16_values(d, seed++);
    const int64_t c = d.back();
    cases.push_back({"sum_to_like", "bfloat16 " + TensorShape(d).to_string() + " to (" + std::to_string(c) + ",)", fn,
                     {x, cast(zeros({c}), bfloat16)}, ref_column_sums(x, c), 1e-2});
  }
  // Not a sum over leading dims only: the float32 rule.
  const Tensor x = cast(constant({{1.5f, 2.0f, -0.25f}, {4.0f, 0.5f, 8.0f}}), bfloat16);
  cases.push_back({"sum_to_like", "bfloat16 (2,3) to (2,1)", fn, {x, cast(zeros({2, 1}), bfloat16)},
                   cast(constant({{3.25f}, {12.5f}}), bfloat16)});
  cases.push_back({"sum_to_like", "bfloat16 (2,3) to a scalar", fn, {x, cast(constant(0.f), bfloat16)},
                   cast(constant(15.75f), bfloat16)});
  return cases;
}

// x with NaN, infinities and zeros of both signs in some columns (one column all -0).
Tensor special_values(const Dims& d, uint64_t seed) {
  std::vector<float> v = cast(bf16_values(d, seed), float32).to_vector<float>();
  const std::size_t c = static_cast<std::size_t>(d.back());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::size_t k = i % c;
    if (k == 0) v[i] = -0.0f;
    if (k == 1 && i / c == 3) v[i] = std::nanf("");
    if (k == 2 && i / c == 5) v[i] = INFINITY;
    if (k == 3 && i / c % 2 == 0) v[i] = INFINITY;
    if (k == 3 && i / c % 2 == 1) v[i] = -INFINITY;
    if (k == 4 && i / c == 1) v[i] = 0.0f;
  }
  return cast(constant(v, TensorShape(d)), bfloat16);
}

TEST(SumToLikeBFloat16, ColumnSumsHaveTheBitsOfTheFloat32RuleAtAnyThreadCount) {
  const int threads_before = config::num_threads();
  const std::vector<Dims> shapes{{3, 9, 9, 1},   {2, 5, 5, 8},   {2, 5, 5, 16},  {64, 5, 5, 17}, {16, 7, 7, 32},
                                 {16, 7, 7, 40}, {8, 14, 14, 64}, {2100, 64},    {3000, 70},     {2, 3}};
  for (const int threads : {1, 2})
    for (const Dims& d : shapes) {
      config::set_num_threads(threads);
      SCOPED_TRACE(::testing::Message() << TensorShape(d).to_string() << ", " << threads << " threads");
      const int64_t c = d.back();
      for (const Tensor& x : {bf16_values(d, 41), special_values(d, 42)}) {
        const Tensor like = cast(zeros({c}), bfloat16);
        const Tensor got = sum_to(x, like);
        EXPECT_EQ(got.dtype(), bfloat16);
        EXPECT_TRUE(same_bits(got, cast(sum_to(cast(x, float32), zeros({c})), bfloat16)));
      }
      // Kept leading 1s, as a bias of (1, c) has them.
      const Tensor x = bf16_values(d, 43);
      const Tensor like = cast(zeros({1, c}), bfloat16);
      EXPECT_TRUE(same_bits(sum_to(x, like), cast(sum_to(cast(x, float32), zeros({1, c})), bfloat16)));
    }
  config::set_num_threads(threads_before);
}

TEST(SumToLikeBFloat16, SpecialValuesGiveTheFloat32RulesResults) {
  const Tensor x = special_values({4, 3, 3, 8}, 44);
  const std::vector<float> got = cast(sum_to(x, cast(zeros({8}), bfloat16)), float32).to_vector<float>();
  ASSERT_EQ(got.size(), 8u);
  EXPECT_EQ(got[0], 0.0f);
  EXPECT_FALSE(std::signbit(got[0]));  // 0.0 + -0 + ... is +0
  EXPECT_TRUE(std::isnan(got[1]));
  EXPECT_EQ(got[2], INFINITY);
  EXPECT_TRUE(std::isnan(got[3]));  // inf + -inf
}

TEST(SumToLikeBFloat16, MixedFloatingDtypesAreRefused) {
  const Tensor x = cast(zeros({4, 3}), bfloat16);
  EXPECT_THROW(sum_to(x, zeros({3})), InvalidArgumentError);
  EXPECT_THROW(sum_to(zeros({4, 3}), cast(zeros({3}), bfloat16)), InvalidArgumentError);
  EXPECT_THROW(sum_to(x, zeros({3}, float64)), InvalidArgumentError);
  EXPECT_EQ(sum_to(x, zeros({3}, int32)).dtype(), bfloat16);  // a non-float like lends its shape only
}

}  // namespace
}  // namespace tg
