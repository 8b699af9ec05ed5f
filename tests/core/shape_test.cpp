// TensorShape, TensorSpec and DType: printing and the subtype lattice tracing relies on.
#include <limits>

#include "support/test_util.h"

namespace tg {
namespace {

const TensorShape kUnknown = TensorShape::unknown_rank();

TEST(DType, ToStringNamesEveryDtype) {
  EXPECT_EQ(to_string(float32), "float32");
  EXPECT_EQ(to_string(float64), "float64");
  EXPECT_EQ(to_string(int32), "int32");
  EXPECT_EQ(to_string(int64), "int64");
  EXPECT_EQ(to_string(bool_), "bool");
  EXPECT_EQ(to_string(string_), "string");
}

TEST(DType, SizesAndClasses) {
  EXPECT_EQ(dtype_size(float32), 4u);
  EXPECT_EQ(dtype_size(float64), 8u);
  EXPECT_EQ(dtype_size(int32), 4u);
  EXPECT_EQ(dtype_size(int64), 8u);
  EXPECT_EQ(dtype_size(bool_), 1u);
  EXPECT_EQ(dtype_size(string_), sizeof(std::string));
  EXPECT_TRUE(is_floating(float32) && is_floating(float64));
  EXPECT_FALSE(is_floating(int32) || is_floating(bool_) || is_floating(string_));
  EXPECT_TRUE(is_integer(int32) && is_integer(int64));
  EXPECT_FALSE(is_integer(float32) || is_integer(bool_) || is_integer(string_));
  EXPECT_TRUE(is_numeric(float64) && is_numeric(int64));
  EXPECT_FALSE(is_numeric(bool_) || is_numeric(string_));
  EXPECT_EQ(dtype_of_v<float>, float32);
  EXPECT_EQ(dtype_of_v<double>, float64);
  EXPECT_EQ(dtype_of_v<int32_t>, int32);
  EXPECT_EQ(dtype_of_v<int64_t>, int64);
  EXPECT_EQ(dtype_of_v<bool>, bool_);
  EXPECT_EQ(dtype_of_v<std::string>, string_);
}

TEST(TensorShape, ToString) {
  EXPECT_EQ(TensorShape{}.to_string(), "()");
  EXPECT_EQ(TensorShape{3}.to_string(), "(3,)");
  EXPECT_EQ(TensorShape({2, 3}).to_string(), "(2, 3)");
  EXPECT_EQ(TensorShape({None, 3}).to_string(), "(None, 3)");
  EXPECT_EQ(TensorShape{None}.to_string(), "(None,)");
  EXPECT_EQ(TensorShape({0, 1, None}).to_string(), "(0, 1, None)");
  EXPECT_EQ(kUnknown.to_string(), "<unknown>");
}

TEST(TensorShape, RankDimsAndElements) {
  const TensorShape s({2, 3, 4});
  EXPECT_TRUE(s.has_rank());
  EXPECT_EQ(s.rank(), 3);
  EXPECT_EQ(s.dims(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(s.dim(0), 2);
  EXPECT_EQ(s.dim(-1), 4);
  EXPECT_EQ(s.dim(-3), 2);
  EXPECT_EQ(s.num_elements(), 24);
  EXPECT_TRUE(s.is_fully_defined());

  EXPECT_EQ(TensorShape{}.rank(), 0);
  EXPECT_EQ(TensorShape{}.num_elements(), 1);
  EXPECT_TRUE(TensorShape{}.is_fully_defined());
  EXPECT_EQ(TensorShape({0, 5}).num_elements(), 0);
  EXPECT_EQ(TensorShape(std::vector<int64_t>{7}).dims(), (std::vector<int64_t>{7}));

  EXPECT_FALSE(TensorShape({None, 2}).is_fully_defined());
  EXPECT_EQ(TensorShape({None, 2}).num_elements(), -1);
  EXPECT_FALSE(kUnknown.has_rank());
  EXPECT_EQ(kUnknown.rank(), -1);
  EXPECT_FALSE(kUnknown.is_fully_defined());
  EXPECT_EQ(kUnknown.num_elements(), -1);
}

TEST(TensorShape, Equality) {
  EXPECT_EQ(TensorShape({2, None}), TensorShape({2, None}));
  EXPECT_NE(TensorShape({2, None}), TensorShape({2, 3}));
  EXPECT_EQ(kUnknown, TensorShape::unknown_rank());
  EXPECT_NE(kUnknown, TensorShape{});
  EXPECT_NE(TensorShape{1}, TensorShape{});
}

TEST(TensorShape, IsSubtypeOf) {
  const TensorShape s23({2, 3}), n3({None, 3}), nn({None, None});
  EXPECT_TRUE(s23.is_subtype_of(s23));
  EXPECT_TRUE(s23.is_subtype_of(n3));
  EXPECT_TRUE(n3.is_subtype_of(nn));
  EXPECT_TRUE(s23.is_subtype_of(kUnknown));
  EXPECT_TRUE(n3.is_subtype_of(kUnknown));
  EXPECT_TRUE(kUnknown.is_subtype_of(kUnknown));
  EXPECT_TRUE(TensorShape{}.is_subtype_of(TensorShape{}));
  EXPECT_TRUE(TensorShape{}.is_subtype_of(kUnknown));
  EXPECT_TRUE(TensorShape{None}.is_subtype_of(TensorShape{None}));

  EXPECT_FALSE(n3.is_subtype_of(s23));  // None is not known to be 2
  EXPECT_FALSE(nn.is_subtype_of(n3));
  EXPECT_FALSE(s23.is_subtype_of(TensorShape({2, 4})));
  EXPECT_FALSE(s23.is_subtype_of(TensorShape({2, 3, 1})));
  EXPECT_FALSE(s23.is_subtype_of(TensorShape{None}));
  EXPECT_FALSE(kUnknown.is_subtype_of(nn));
  EXPECT_FALSE(kUnknown.is_subtype_of(TensorShape{}));
  EXPECT_FALSE(TensorShape{}.is_subtype_of(TensorShape{1}));
}

TEST(TensorShape, IsCompatibleWith) {
  EXPECT_TRUE(TensorShape({2, None}).is_compatible_with(TensorShape({None, 3})));
  EXPECT_TRUE(TensorShape({2, 3}).is_compatible_with(TensorShape({2, 3})));
  EXPECT_TRUE(TensorShape({2, 3}).is_compatible_with(kUnknown));
  EXPECT_TRUE(kUnknown.is_compatible_with(TensorShape{}));
  EXPECT_TRUE(kUnknown.is_compatible_with(kUnknown));
  EXPECT_TRUE(TensorShape{}.is_compatible_with(TensorShape{}));
  EXPECT_FALSE(TensorShape({2, 3}).is_compatible_with(TensorShape({2, 4})));
  EXPECT_FALSE(TensorShape({None, 3}).is_compatible_with(TensorShape({None, 4})));
  EXPECT_FALSE(TensorShape({2, 3}).is_compatible_with(TensorShape{None}));
  EXPECT_FALSE(TensorShape{}.is_compatible_with(TensorShape{1}));
}

TEST(TensorShape, MostSpecificCommonSupertype) {
  auto sup = [](const TensorShape& a, const TensorShape& b) {
    return a.most_specific_common_supertype(b);
  };
  EXPECT_EQ(sup({2, 3}, {2, 3}), TensorShape({2, 3}));
  EXPECT_EQ(sup({2, 3}, {2, 4}), TensorShape({2, None}));
  EXPECT_EQ(sup({2, 3}, {5, 4}), TensorShape({None, None}));
  EXPECT_EQ(sup({None, 3}, {2, 3}), TensorShape({None, 3}));
  EXPECT_EQ(sup({2, 3}, {None, 3}), TensorShape({None, 3}));
  EXPECT_EQ(sup({}, {}), TensorShape{});
  EXPECT_EQ(sup({3}, {5}), TensorShape{None});
  EXPECT_EQ(sup({2, 3}, {2, 3, 1}), kUnknown);  // ranks differ
  EXPECT_EQ(sup({}, {1}), kUnknown);
  EXPECT_EQ(sup({2, 3}, kUnknown), kUnknown);
  EXPECT_EQ(sup(kUnknown, {2, 3}), kUnknown);
  EXPECT_EQ(sup(kUnknown, kUnknown), kUnknown);
  // Both inputs are subtypes of the result.
  const TensorShape a({4, 1, 7}), b({4, 2, 7});
  EXPECT_TRUE(a.is_subtype_of(sup(a, b)));
  EXPECT_TRUE(b.is_subtype_of(sup(a, b)));
}

TEST(TensorSpec, ToStringAndEquality) {
  EXPECT_EQ(TensorSpec(TensorShape{None}, int32).to_string(),
            "TensorSpec(shape=(None,), dtype=tg.int32, name=None)");
  EXPECT_EQ(TensorSpec(TensorShape{}, string_).to_string(),
            "TensorSpec(shape=(), dtype=tg.string, name=None)");
  EXPECT_EQ(TensorSpec(TensorShape({2, None}), float32, "x").to_string(),
            "TensorSpec(shape=(2, None), dtype=tg.float32, name='x')");
  EXPECT_EQ(TensorSpec(kUnknown, bool_).to_string(),
            "TensorSpec(shape=<unknown>, dtype=tg.bool, name=None)");
  const TensorSpec s(TensorShape{3}, float64, "a");
  EXPECT_EQ(s.shape, TensorShape{3});
  EXPECT_EQ(s.dtype, float64);
  EXPECT_EQ(s.name, "a");
  EXPECT_EQ(s, TensorSpec(TensorShape{3}, float64, "a"));
  EXPECT_NE(s, TensorSpec(TensorShape{3}, float64, "b"));
  EXPECT_NE(s, TensorSpec(TensorShape{3}, float32, "a"));
  EXPECT_NE(s, TensorSpec(TensorShape{None}, float64, "a"));
}

}  // namespace
}  // namespace tg
