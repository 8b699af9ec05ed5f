#include "core/buffer.h"

#include <cstdlib>
#include <new>
#include <string>

#include "core/check.h"

namespace tg::detail {

std::shared_ptr<Buffer> Buffer::allocate(DType dtype, int64_t n) {
  TG_CHECK(n >= 0);
  const std::size_t elem = dtype_size(dtype);
  if (static_cast<uint64_t>(n) > (uint64_t{1} << 40) / elem)
    throw InvalidArgumentError(str_cat("[allocate] a tensor of ", n, " ", to_string(dtype),
                                       " elements is too large to allocate"));
  // aligned_alloc needs a size that is a multiple of the alignment (and non-zero).
  std::size_t bytes = static_cast<std::size_t>(n) * elem;
  bytes = (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
  if (bytes == 0) bytes = kBufferAlignment;
  void* p = std::aligned_alloc(kBufferAlignment, bytes);
  if (!p) throw std::bad_alloc();
  if (dtype == DType::String) {
    auto* s = static_cast<std::string*>(p);
    for (int64_t i = 0; i < n; ++i) new (s + i) std::string();
  }
  return std::make_shared<Buffer>(dtype, n, p);
}

Buffer::~Buffer() {
  if (dtype_ == DType::String) {
    auto* s = static_cast<std::string*>(data_);
    for (int64_t i = 0; i < count_; ++i) s[i].~basic_string();
  }
  std::free(data_);
}

}  // namespace tg::detail
