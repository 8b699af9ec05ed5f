// Reference-counted, 64-byte aligned element storage shared by tensors (and views of them).
#pragma once
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "tracegraph/dtype.h"

namespace tg::detail {

class Buffer {
 public:
  /// Storage for n elements of dtype; numeric memory is uninitialised, strings are empty.
  /// ResourceExhaustedError when the bytes overflow, exceed physical memory, or malloc fails.
  static std::shared_ptr<Buffer> allocate(DType dtype, int64_t n);
  Buffer(DType dtype, int64_t n, void* data, std::size_t bytes)
      : dtype_(dtype), count_(n), data_(data), bytes_(bytes) {}
  /// Storage that lives elsewhere - a tensor of a memory-mapped model file, or a caller's memory
  /// (tg::from_blob) - kept alive by `owner` and never freed here. Numeric dtypes only; `data`
  /// must be aligned to the element size (views of tracegraph's own buffers start at any
  /// element too, so no kernel counts on more).
  static std::shared_ptr<Buffer> wrap(DType dtype, int64_t n, void* data, std::shared_ptr<const void> owner);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  int64_t count() const { return count_; }
  DType dtype() const { return dtype_; }
  /// False for wrapped memory (another object's storage, which others may also read).
  bool owns_memory() const { return !owner_; }

 private:
  DType dtype_;
  int64_t count_;
  void* data_;
  std::size_t bytes_;  // allocated size (its size class), for the block cache
  std::shared_ptr<const void> owner_;  // set for wrapped memory
};

/// Large blocks are parked in a size-class cache when freed and handed out again (tensor
/// buffers from 1 MiB, CachedVector arrays from 64 KiB, ChunkedVector's huge blocks), so a
/// tensor that is recomputed every call, or a graph that is traced again, reuses warm memory
/// instead of paying the kernel's page faults for a fresh mapping each time. Returns the bytes
/// released.
std::size_t release_cached_blocks();
/// Bytes currently parked in the cache.
std::size_t cached_block_bytes();

/// Bytes held by live Buffers larger than 1 KiB (their size classes; cached blocks not included),
/// and the highest value since the last reset_peak_buffer_bytes(). For memory benchmarks and
/// tests of large tensors (counting the small ones would put two atomic operations on every
/// scalar op); relaxed atomics, so concurrent callers see approximate peaks.
std::size_t live_buffer_bytes();
std::size_t peak_buffer_bytes();
void reset_peak_buffer_bytes();

inline constexpr std::size_t kBufferAlignment = 64;

/// Memory for the small objects every op call makes - a tensor's handle, a buffer's bookkeeping
/// - from the same per-thread lists as small buffers (a list push or pop, where glibc's malloc
/// and free cost a tenth of a cached scalar call each). Not counted as buffer bytes.
void* acquire_object_memory(std::size_t bytes);
void release_object_memory(void* p, std::size_t bytes);

/// A std::allocator for std::allocate_shared over those lists (one object per allocation;
/// arrays fall back to operator new).
template <class T>
struct RecyclingAllocator {
  using value_type = T;
  RecyclingAllocator() = default;
  template <class U>
  RecyclingAllocator(const RecyclingAllocator<U>&) {}  // NOLINT: rebinding, as allocators do
  T* allocate(std::size_t n) {
    if (n != 1 || alignof(T) > kBufferAlignment) return std::allocator<T>().allocate(n);
    return static_cast<T*>(acquire_object_memory(sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) {
    if (n != 1 || alignof(T) > kBufferAlignment) return std::allocator<T>().deallocate(p, n);
    release_object_memory(p, sizeof(T));
  }
  template <class U>
  bool operator==(const RecyclingAllocator<U>&) const { return true; }
};

/// Memory for the large arrays tracing builds: a pass's per-node tables, a fused program's
/// steps, a megabyte each at 100k nodes. Blocks of 64 KiB or more are parked in the same cache
/// as large tensor buffers when freed, so that the next trace (a retrace, another function)
/// reuses pages that are already mapped. glibc hands large blocks back to the kernel on free,
/// and a fresh page costs microseconds on a paravirtualised VM: a warm 100k-op trace spent a
/// quarter of its time faulting them in. Smaller ones come from operator new. Not counted as
/// buffer bytes.
inline constexpr std::size_t kCachedArrayMinBytes = std::size_t{64} << 10;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kParkCachedArrays = false;  // sanitizers see every array freed and reused
#else
inline constexpr bool kParkCachedArrays = true;
#endif
void* acquire_cached_array(std::size_t bytes);
void release_cached_array(void* p, std::size_t bytes);

template <class T>
struct CachedAllocator {
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "small arrays come from plain operator new");
  using value_type = T;
  CachedAllocator() = default;
  template <class U>
  CachedAllocator(const CachedAllocator<U>&) {}  // NOLINT: rebinding, as allocators do
  T* allocate(std::size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(acquire_cached_array(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) { release_cached_array(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const CachedAllocator<U>&) const { return true; }
};
/// A std::vector over CachedAllocator, for arrays sized by a graph (see above).
template <class T>
using CachedVector = std::vector<T, CachedAllocator<T>>;

}  // namespace tg::detail
