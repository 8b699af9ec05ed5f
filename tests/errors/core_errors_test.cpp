// Expected failures of tensor construction, element access and shapes: each names what was
// expected and what was received.
#include <unistd.h>

#include <limits>

#include "support/test_util.h"

namespace tg {
namespace {

TEST(ConstantErrors, RaggedBraces) {
  EXPECT_THROW_MSG(constant({{1, 2}, {3}}), InvalidArgumentError, "[constant]", "ragged",
                   "1 elements", "had 2");
  EXPECT_THROW_MSG(constant({{{1.f, 2.f}}, {{3.f}}}), InvalidArgumentError, "[constant]",
                   "ragged", "depth 2");
  EXPECT_THROW_MSG(constant({{{1}, {2}}, {{3}}}), InvalidArgumentError, "[constant]", "ragged",
                   "depth 1");
}

TEST(ConstantErrors, VectorSizeMustMatchTheShape) {
  EXPECT_THROW_MSG(constant(std::vector<float>{1, 2, 3}, {2, 2}), InvalidArgumentError,
                   "[constant]", "3 values", "(2, 2)", "4 elements");
  EXPECT_THROW_MSG(constant(std::vector<int32_t>{}, TensorShape{}), InvalidArgumentError,
                   "[constant]", "0 values", "()");
  EXPECT_THROW_MSG(constant(std::vector<float>{1}, {None}), InvalidArgumentError, "[constant]",
                   "fully defined", "(None,)");
}

TEST(ConstantErrors, ValuesThatDoNotFitTheDtype) {
  EXPECT_THROW_MSG(constant(int64_t{2147483648LL}, int32), InvalidArgumentError, "[constant]",
                   "2147483648", "int32");
  EXPECT_THROW_MSG(constant(int64_t{-2147483649LL}, int32), InvalidArgumentError, "[constant]",
                   "-2147483649", "int32");
  EXPECT_THROW_MSG(constant({1, 2}, int32) + int64_t{1} * 5000000000LL, InvalidArgumentError,
                   "5000000000", "int32");
  EXPECT_THROW_MSG(constant(1.5, int32), InvalidArgumentError, "[constant]", "1.5", "int32");
  EXPECT_THROW_MSG(constant(1e10, int32), InvalidArgumentError, "[constant]", "int32");
  EXPECT_THROW_MSG(constant(9223372036854775808.0, int64), InvalidArgumentError, "[constant]",
                   "int64");
  EXPECT_THROW_MSG(constant(std::numeric_limits<double>::quiet_NaN(), int64),
                   InvalidArgumentError, "[constant]", "nan", "int64");
  EXPECT_THROW_MSG(constant(std::numeric_limits<double>::infinity(), int32),
                   InvalidArgumentError, "[constant]", "inf", "int32");
}

TEST(ConstantErrors, ValuesOfTheWrongKind) {
  EXPECT_THROW_MSG(constant(true, int32), TypeError, "[constant]", "bool", "int32");
  EXPECT_THROW_MSG(constant(1, bool_), TypeError, "[constant]", "integer", "bool");
  EXPECT_THROW_MSG(constant(1.0, string_), TypeError, "[constant]", "floating-point", "string");
  EXPECT_THROW_MSG(constant("a", float32), TypeError, "[constant]", "string", "float32");
  EXPECT_THROW_MSG(constant({1.f, 2.f}, bool_), TypeError, "[constant]", "bool");
}

TEST(CreationErrors, ZerosOnesFill) {
  EXPECT_THROW_MSG(ones({2}, string_), TypeError, "[ones]", "string", "tg::fill");
  EXPECT_THROW_MSG(zeros({None, 2}), InvalidArgumentError, "[zeros]", "fully defined",
                   "(None, 2)");
  EXPECT_THROW_MSG(ones(TensorShape::unknown_rank()), InvalidArgumentError, "[ones]",
                   "<unknown>");
  EXPECT_THROW_MSG(fill({None}, 1.f), InvalidArgumentError, "[fill]", "(None,)");
  EXPECT_THROW_MSG(fill({2}, constant({1, 2})), InvalidArgumentError, "[fill]", "scalar",
                   "(2,)");
  EXPECT_THROW_MSG(fill({2}, Tensor()), InvalidArgumentError, "[fill]", "empty");
}

TEST(CreationErrors, Range) {
  EXPECT_THROW_MSG(range(0, 5, 0), InvalidArgumentError, "[range]", "delta", "0");
  EXPECT_THROW_MSG(range(0.0f, 1.0f, 0.0f), InvalidArgumentError, "[range]", "delta=0");
  EXPECT_THROW_MSG(range(0.0, std::numeric_limits<double>::infinity(), 1.0, float32),
                   InvalidArgumentError, "[range]", "limit=inf");
  EXPECT_THROW_MSG(range(0.0, 1.0, std::numeric_limits<double>::quiet_NaN(), float32),
                   InvalidArgumentError, "[range]", "finite");
  EXPECT_THROW_MSG(range(int64_t{0}, int64_t{3}, int64_t{1}, string_), TypeError, "[range]",
                   "numeric", "string");
  EXPECT_THROW_MSG(range(0.0, 3.0, 1.0, bool_), TypeError, "[range]", "numeric", "bool");
  EXPECT_THROW_MSG(range(0.0, 1e12, 1.0, float32), InvalidArgumentError, "[range]", "elements");
  EXPECT_THROW_MSG(range(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                         int64_t{1}, int64),
                   InvalidArgumentError, "[range]", "elements");
  EXPECT_THROW_MSG(range(int64_t{0}, int64_t{5000000000LL}, int64_t{3000000000LL}, int32),
                   InvalidArgumentError, "[range]", "3000000000", "int32");
  EXPECT_THROW_MSG(range(0.0, 1.0, 0.5, int32), InvalidArgumentError, "[range]", "0.5", "int32");
}

// A count the machine cannot hold is refused by the result's allocation, now range's only one
// (a vector of the values came first, and its std::bad_alloc escaped). 2^34 int64s are 128 GiB,
// 10^10 float64s 80 GB: a machine that has that much memory is not asked for it.
TEST(CreationErrors, RangeLargerThanMemoryIsResourceExhausted) {
  const double memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  if (memory >= 8e10) GTEST_SKIP() << "this machine could hold the ranges";
  EXPECT_THROW_MSG(range(int64_t{0}, int64_t{1} << 34, int64_t{1}, int64), ResourceExhaustedError, "[allocate]",
                   "17179869184 int64 elements");
  EXPECT_THROW_MSG(range(0.0, 1e10, 1.0, float64), ResourceExhaustedError, "[allocate]",
                   "10000000000 float64 elements");
}

TEST(CreationErrors, RandomUniform) {
  EXPECT_THROW_MSG(random_uniform({2}, 1.0f, 1.0f), InvalidArgumentError, "[random_uniform]",
                   "minval < maxval", "minval=1", "maxval=1");
  EXPECT_THROW_MSG(random_uniform({2}, 2.0f, 1.0f, 5), InvalidArgumentError, "[random_uniform]",
                   "minval=2");
  EXPECT_THROW_MSG(random_uniform({2}, 0.0f, std::numeric_limits<float>::infinity(), 5),
                   InvalidArgumentError, "[random_uniform]", "finite");
  EXPECT_THROW_MSG(random_uniform({None}, 0.0f, 1.0f, 5), InvalidArgumentError,
                   "[random_uniform]", "(None,)");
}

TEST(TensorErrors, WrongElementType) {
  EXPECT_THROW_MSG(constant({1, 2}).to_vector<float>(), TypeError, "[to_vector]", "int32",
                   "float32");
  EXPECT_THROW_MSG(constant(1.f).to_vector<double>(), TypeError, "[to_vector]", "float32",
                   "float64");
  EXPECT_THROW_MSG(constant("a").to_vector<bool>(), TypeError, "[to_vector]", "string", "bool");
  EXPECT_THROW_MSG(constant(1).item<int64_t>(), TypeError, "[item]", "int32", "int64");
  EXPECT_THROW_MSG(constant(true).item<std::string>(), TypeError, "[item]", "bool", "string");
}

TEST(TensorErrors, ItemNeedsExactlyOneElement) {
  EXPECT_THROW_MSG(constant({1, 2}).item<int32_t>(), InvalidArgumentError, "[item]",
                   "exactly 1 element", "(2,)", "2 elements");
  EXPECT_THROW_MSG(zeros({0}).item<float>(), InvalidArgumentError, "[item]", "(0,)");
}

TEST(TensorErrors, OperatorBool) {
  EXPECT_THROW_MSG(static_cast<bool>(constant({true, false})), InvalidArgumentError,
                   "[operator bool]", "2 elements", "ambiguous", "reduce_any");
  EXPECT_THROW_MSG(static_cast<bool>(zeros({0}, bool_)), InvalidArgumentError,
                   "[operator bool]", "0 elements");
  EXPECT_THROW_MSG(static_cast<bool>(constant("a")), TypeError, "[operator bool]", "string");
}

TEST(TensorErrors, EmptyHandle) {
  const Tensor t;
  EXPECT_THROW_MSG(t.dtype(), ValueError, "[dtype]", "empty tg::Tensor");
  EXPECT_THROW_MSG(t.shape(), ValueError, "[shape]", "empty");
  EXPECT_THROW_MSG(t.rank(), ValueError, "[rank]");
  EXPECT_THROW_MSG(t.num_elements(), ValueError, "[num_elements]");
  EXPECT_THROW_MSG(t.is_symbolic(), ValueError, "[is_symbolic]");
  EXPECT_THROW_MSG(t.to_vector<float>(), ValueError, "[to_vector]");
  EXPECT_THROW_MSG(t.item<float>(), ValueError, "[item]");
  EXPECT_THROW_MSG(static_cast<bool>(t), ValueError, "[operator bool]");
}

TEST(ShapeErrors, BadDims) {
  EXPECT_THROW_MSG(TensorShape({2, -2}), InvalidArgumentError, "[TensorShape]", "dimension 1",
                   "-2", "None");
  EXPECT_THROW_MSG(TensorShape(std::vector<int64_t>{-5}), InvalidArgumentError, "[TensorShape]",
                   "-5");
  EXPECT_THROW_MSG(TensorShape({2, 3}).dim(2), InvalidArgumentError, "[TensorShape]", "2",
                   "rank 2", "(2, 3)");
  EXPECT_THROW_MSG(TensorShape({2, 3}).dim(-3), InvalidArgumentError, "[TensorShape]", "-3");
  EXPECT_THROW_MSG(TensorShape{}.dim(0), InvalidArgumentError, "[TensorShape]", "rank 0");
  EXPECT_THROW_MSG(TensorShape::unknown_rank().dim(0), InvalidArgumentError, "[TensorShape]",
                   "unknown rank");
  const int64_t big = int64_t{1} << 40;
  EXPECT_THROW_MSG(TensorShape({big, big}).num_elements(), InvalidArgumentError,
                   "[TensorShape]", "int64");
}

// A request above the machine's physical memory is refused before anything is mapped, so these
// are fast and touch no memory, with or without overcommit and under ASan (whose allocator would
// abort on a failed huge malloc). 2^50 float32 elements (4 PiB) exceed the memory and the
// address space of any machine this runs on.
TEST(AllocationErrors, TooLargeIsResourceExhaustedWithTheBytesRequested) {
  const int64_t huge = int64_t{1} << 50;
  EXPECT_THROW_MSG(zeros({huge}), ResourceExhaustedError, "[allocate]", "1125899906842624 float32",
                   "4503599627370496 bytes", "smaller shape");
  try {
    ones({huge, 2}, int64);
    ADD_FAILURE() << "did not throw";
  } catch (const ResourceExhaustedError& e) {
    EXPECT_EQ(e.bytes_requested(), std::size_t{1} << 54);
    EXPECT_EQ(e.code(), "ERESOURCE");
  }
  EXPECT_THROW_MSG(fill({huge}, 1.0), ResourceExhaustedError, "[allocate]");
  EXPECT_THROW_MSG(ones({huge}, float64), ResourceExhaustedError, "[allocate]", "float64");
  // The example: 2^36 float32 (256 GiB), where the machine has less than that.
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0 && static_cast<double>(pages) * static_cast<double>(page) < 0x1p38) {
    EXPECT_THROW_MSG(zeros({int64_t{1} << 36}), ResourceExhaustedError, "[allocate]");
  }
}

TEST(AllocationErrors, ByteCountOverflowIsATypedError) {
  // 2^62 float32 elements need 2^64 bytes: the element count fits int64, the bytes do not.
  try {
    zeros({int64_t{1} << 62});
    ADD_FAILURE() << "did not throw";
  } catch (const ResourceExhaustedError& e) {
    EXPECT_EQ(e.bytes_requested(), std::numeric_limits<std::size_t>::max());
    EXPECT_NE(std::string(e.what()).find("more than 2^64 bytes"), std::string::npos) << e.what();
  }
}

TEST(DTypeErrors, InvalidEnumValue) {
  EXPECT_THROW_MSG(to_string(static_cast<DType>(99)), InvalidArgumentError, "99");
  EXPECT_THROW_MSG(dtype_size(static_cast<DType>(42)), InvalidArgumentError, "42");
}

}  // namespace
}  // namespace tg
