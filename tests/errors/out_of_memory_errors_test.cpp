// Memory the system refuses inside an op - a kernel's scratch, not a result tensor, which its
// allocation refuses by size - is a ResourceExhaustedError that names the op, never a bare
// std::bad_alloc. The refusal is simulated (support/allocation_counter.h) rather than provoked:
// the sanitizers' allocators abort on requests of terabytes instead of failing them.
#include <cstdint>

#include "ops/conv.h"
#include "support/allocation_counter.h"
#include "support/test_util.h"

namespace tg {
namespace {

TEST(OutOfMemoryErrors, AnOpsRefusedScratchMemoryIsResourceExhausted) {
  // max_pool2d_grad_grad keeps each window's best value and its index per channel: 1 MiB each
  // for 2^18 float32 channels, from operator new (tensor buffers come from elsewhere).
  const Tensor x = zeros({1, 1, 1, 1 << 18});
  const detail::Pool2DAttrs pool{{1, 1}, {1, 1}, 0};
  EXPECT_TENSOR_EQ(detail::max_pool2d_grad_grad(x, x, pool), x);
  try {
    testing::RefuseAllocationsOver refuse(std::size_t{512} << 10);
    detail::max_pool2d_grad_grad(x, x, pool);
    ADD_FAILURE() << "no error";
  } catch (const ResourceExhaustedError& e) {
    EXPECT_EQ(e.code(), "ERESOURCE");
    EXPECT_EQ(e.bytes_requested(), SIZE_MAX);
    EXPECT_TRUE(::testing::IsSubstring("", "", "[max_pool2d_grad_grad] the system refused memory", e.what()));
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw another exception: " << e.what();
  }
}

}  // namespace
}  // namespace tg
