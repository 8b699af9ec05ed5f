// The Tensor handle: metadata, element access, truth value, and symbolic tensors' guards.
#include <cmath>
#include <limits>

#include "core/tensor_impl.h"
#include "support/test_util.h"

namespace tg {
namespace {

TEST(Tensor, DefaultConstructedIsEmpty) {
  Tensor t;
  EXPECT_FALSE(t.defined());
  EXPECT_EQ(t.impl(), nullptr);
  EXPECT_TRUE(constant(1).defined());
}

TEST(Tensor, Metadata) {
  const Tensor t = zeros({2, 3, 4}, int64);
  EXPECT_EQ(t.dtype(), int64);
  EXPECT_EQ(t.shape(), TensorShape({2, 3, 4}));
  EXPECT_EQ(t.rank(), 3);
  EXPECT_EQ(t.num_elements(), 24);
  EXPECT_FALSE(t.is_symbolic());
  EXPECT_EQ(constant(1.f).rank(), 0);
  EXPECT_EQ(constant(1.f).num_elements(), 1);
  EXPECT_EQ(zeros({5, 0}).num_elements(), 0);
}

TEST(Tensor, CopiesShareStorage) {
  const Tensor a = constant({1, 2, 3});
  const Tensor b = a;  // NOLINT: the copy is the point
  EXPECT_EQ(a.impl(), b.impl());
  EXPECT_EQ(detail::data_of<int32_t>(a), detail::data_of<int32_t>(b));
}

TEST(Tensor, ToVectorForEveryDtype) {
  EXPECT_EQ(constant({1.5f, -2.f}).to_vector<float>(), (std::vector<float>{1.5f, -2.f}));
  EXPECT_EQ(constant({1.5, 0.1}, float64).to_vector<double>(), (std::vector<double>{1.5, 0.1}));
  EXPECT_EQ(constant({{1, 2}, {3, 4}}).to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(constant({int64_t{1} << 50}).to_vector<int64_t>(),
            (std::vector<int64_t>{int64_t{1} << 50}));
  EXPECT_EQ(constant({true, false}).to_vector<bool>(), (std::vector<bool>{true, false}));
  EXPECT_EQ(constant({"a", ""}).to_vector<std::string>(), (std::vector<std::string>{"a", ""}));
  EXPECT_EQ(constant(5).to_vector<int32_t>(), (std::vector<int32_t>{5}));
  EXPECT_TRUE(zeros({0}, string_).to_vector<std::string>().empty());
}

TEST(Tensor, ItemForEveryDtypeAndAnyRank) {
  EXPECT_EQ(constant(2.5f).item<float>(), 2.5f);
  EXPECT_EQ(constant(0.1, float64).item<double>(), 0.1);
  EXPECT_EQ(constant(-4).item<int32_t>(), -4);
  EXPECT_EQ(constant(int64_t{-4}).item<int64_t>(), -4);
  EXPECT_EQ(constant(true).item<bool>(), true);
  EXPECT_EQ(constant("s").item<std::string>(), "s");
  EXPECT_EQ(constant({{{9}}}).item<int32_t>(), 9);  // one element, rank 3
}

TEST(Tensor, OperatorBoolOnSingleElements) {
  EXPECT_TRUE(static_cast<bool>(constant(true)));
  EXPECT_FALSE(static_cast<bool>(constant(false)));
  EXPECT_TRUE(static_cast<bool>(constant(-1)));
  EXPECT_FALSE(static_cast<bool>(constant(0)));
  EXPECT_FALSE(static_cast<bool>(constant(int64_t{0})));
  EXPECT_TRUE(static_cast<bool>(constant(int64_t{1} << 40)));
  EXPECT_TRUE(static_cast<bool>(constant(0.5f)));
  EXPECT_FALSE(static_cast<bool>(constant(-0.0f)));
  EXPECT_FALSE(static_cast<bool>(constant({{0.0}}, float64)));
  EXPECT_TRUE(static_cast<bool>(constant(std::numeric_limits<float>::quiet_NaN())));
  if (constant({1}) > 0) SUCCEED();
  else ADD_FAILURE() << "constant({1}) > 0 should be true";
}

struct FakeSymbol : detail::SymbolicValue {
  std::string name() const override { return "y:0"; }
  std::string origin() const override { return "'y:0' of function 'f' (trace 0)"; }
};

Tensor symbolic(DType dtype, TensorShape shape) {
  auto impl = std::make_shared<detail::TensorImpl>();
  impl->dtype = dtype;
  impl->shape = std::move(shape);
  impl->symbolic = std::make_shared<FakeSymbol>();
  return Tensor(impl);
}

TEST(Tensor, SymbolicTensorsKnowOnlyTheirType) {
  const Tensor s = symbolic(float32, TensorShape({None, 3}));
  EXPECT_TRUE(s.is_symbolic());
  EXPECT_EQ(s.dtype(), float32);
  EXPECT_EQ(s.shape(), TensorShape({None, 3}));
  EXPECT_EQ(s.rank(), 2);
  EXPECT_EQ(s.shape().dim(1), 3);
  // An unknown is never read as a plain integer (-1) while tracing.
  EXPECT_THROW_MSG(s.num_elements(), ValueError, "dimension 0", "'y:0'", "is unknown (None)");
  EXPECT_THROW_MSG(symbolic(int32, TensorShape::unknown_rank()).rank(), ValueError, "rank", "is unknown");
  EXPECT_EQ(s.shape().none_aware().num_elements(), -1);
  EXPECT_EQ(symbolic(int32, TensorShape({2, 2})).num_elements(), 4);
}

TEST(Tensor, SymbolicTensorsHaveNoValue) {
  const Tensor s = symbolic(int32, TensorShape{None});
  EXPECT_THROW_MSG(s.to_vector<int32_t>(), TypeError, "[to_vector]", "symbolic", "y:0");
  EXPECT_THROW_MSG(s.item<int32_t>(), TypeError, "[item]", "symbolic");
  EXPECT_THROW_MSG(static_cast<bool>(s), TypeError, "[operator bool]", "tg::cond",
                   "tg::while_loop");
}

}  // namespace
}  // namespace tg

#include "core/buffer.h"

namespace tg {
namespace {
TEST(BufferCache, LargeBuffersAreReusedAndCanBeReleased) {
  config::release_cached_memory();
  const void* first = nullptr;
  {
    Tensor a = zeros({1 << 19});  // 2 MiB
    first = a.impl()->buffer->data();
  }
  EXPECT_GE(detail::cached_block_bytes(), std::size_t{2} << 20);
  Tensor b = zeros({1 << 19});  // one allocation (ones() would be zeros + 1: two)
  EXPECT_EQ(b.impl()->buffer->data(), first) << "a freed block of the same size class is reused";
  EXPECT_EQ(b.to_vector<float>()[12345], 0.0f);
  Tensor small = ones({3});
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(small.impl()->buffer->data()) % 64, 0u);
  b = Tensor();
  EXPECT_GE(config::release_cached_memory(), std::size_t{2} << 20);
  EXPECT_EQ(detail::cached_block_bytes(), 0u);
}

// The large arrays tracing builds (CachedVector) go through the same cache from 64 KiB, so a
// retrace reuses mapped pages; smaller ones, and every one in a sanitized build, do not.
TEST(BufferCache, LargeArraysOfTracingAreReusedAndCanBeReleased) {
  config::release_cached_memory();
  const std::size_t ints = detail::kCachedArrayMinBytes / sizeof(int) * 3;  // 192 KiB
  const void* first = nullptr;
  {
    detail::CachedVector<int> a(ints, 7);
    first = a.data();
  }
  {
    detail::CachedVector<int> small(100, 1);
  }
  if (!detail::kParkCachedArrays) {
    EXPECT_EQ(detail::cached_block_bytes(), 0u);
    return;
  }
  EXPECT_EQ(detail::cached_block_bytes(), ints * sizeof(int)) << "only the large array is parked";
  detail::CachedVector<int> b(ints, 0);
  EXPECT_EQ(b.data(), first) << "a freed array of the same size class is reused";
  EXPECT_EQ(b[ints - 1], 0);
  EXPECT_EQ(detail::cached_block_bytes(), 0u);
  b = detail::CachedVector<int>();
  EXPECT_EQ(config::release_cached_memory(), ints * sizeof(int));
  EXPECT_EQ(detail::cached_block_bytes(), 0u);
}
}  // namespace
}  // namespace tg
