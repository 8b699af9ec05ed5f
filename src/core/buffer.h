// Reference-counted, 64-byte aligned element storage shared by tensors (and views of them).
#pragma once
#include <cstdint>
#include <memory>

#include "tracegraph/dtype.h"

namespace tg::detail {

class Buffer {
 public:
  /// Storage for n elements of dtype; numeric memory is uninitialised, strings are empty.
  static std::shared_ptr<Buffer> allocate(DType dtype, int64_t n);
  Buffer(DType dtype, int64_t n, void* data) : dtype_(dtype), count_(n), data_(data) {}
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  int64_t count() const { return count_; }
  DType dtype() const { return dtype_; }

 private:
  DType dtype_;
  int64_t count_;
  void* data_;
};

inline constexpr std::size_t kBufferAlignment = 64;

}  // namespace tg::detail
