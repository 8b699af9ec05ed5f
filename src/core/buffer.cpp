#include "core/buffer.h"

#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <sys/mman.h>
#include <unistd.h>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/check.h"
#include "core/chunked_vector.h"
#include "tracegraph/tensor.h"

namespace tg::detail {

namespace {

// Cache blocks from 256 KiB. Blocks below go to glibc, which hands back to the system the
// top of its heap when more than twice its mmap threshold is free there: an embedding step's
// three fresh 800 KB outputs were trimmed and faulted in again at every step in some processes
// (600 KB of page faults a step, 200 -> 560 us), by the allocation history alone.
constexpr std::size_t kCacheMinBytes = std::size_t{256} << 10;
constexpr std::size_t kSmallMaxBytes = 1024;                 // per-thread lists up to 1 KiB
constexpr std::size_t kCacheMaxBytes = std::size_t{512} << 20;  // park at most 512 MiB

// A cached block's size class: a multiple of an eighth of the power of two below, so that a
// reused block wastes at most 12.5%.
std::size_t cached_class(std::size_t bytes) {
  const std::size_t step = std::bit_floor(bytes) / 8;
  return (bytes + step - 1) / step * step;
}
// Rounds a buffer request to its size class: multiples of 64 bytes below the cached sizes.
std::size_t size_class(std::size_t bytes) {
  if (bytes < kCacheMinBytes) return (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
  return cached_class(bytes);
}

struct BlockCache {
  std::mutex mu;
  std::unordered_map<std::size_t, std::vector<void*>> free_blocks;  // by size class
  std::vector<void*> huge_blocks;  // acquire_huge_block's, kept apart: mapped, and aligned to 2 MiB
  std::size_t bytes = 0;           // of both

  // Under mu: a block taken from `list`, whose blocks are `size` bytes each (null when it is
  // empty), and one parked in it (false when that would pass kCacheMaxBytes).
  void* pop(std::vector<void*>& list, std::size_t size) {
    if (list.empty()) return nullptr;
    void* p = list.back();
    list.pop_back();
    bytes -= size;
    return p;
  }
  bool push(std::vector<void*>& list, void* p, std::size_t size) {
    if (bytes + size > kCacheMaxBytes) return false;
    list.push_back(p);
    bytes += size;
    return true;
  }
};
// Never destroyed: buffers owned by static tensors may be freed after other statics are gone.
BlockCache& cache() {
  static BlockCache* c = new BlockCache;
  return *c;
}

std::atomic<std::size_t> g_live_bytes{0};
std::atomic<std::size_t> g_peak_bytes{0};

// Blocks of the small size classes are not counted: the two atomic operations would cost a tenth
// of a cached scalar call once the process has threads, and the counts serve memory benchmarks
// and tests of large tensors.
void count_acquired(std::size_t bytes) {
  if (bytes <= kSmallMaxBytes) return;
  const std::size_t live = g_live_bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  if (live > g_peak_bytes.load(std::memory_order_relaxed))
    g_peak_bytes.store(live, std::memory_order_relaxed);
}

// The most one buffer may ask for: the machine's physical memory (1 TiB if unknown). A larger
// request can never be backed, yet Linux's overcommit (or ASan's allocator) may still hand out
// the address space, and the failure would then be the OOM killer on first touch rather than an
// error; refused here, it is a ResourceExhaustedError before anything is mapped.
std::size_t max_buffer_bytes() {
  static const std::size_t limit = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return std::size_t{1} << 40;
    return static_cast<std::size_t>(pages) * static_cast<std::size_t>(page);
  }();
  return limit;
}

[[noreturn]] void exhausted(DType dtype, int64_t n, std::size_t bytes, const std::string& why) {
  throw ResourceExhaustedError(
      str_cat("[allocate] cannot allocate a tensor of ", n, " ", to_string(dtype), " elements (",
              bytes == SIZE_MAX ? std::string("more than 2^64") : std::to_string(bytes), " bytes): ",
              why, "; use a smaller shape or batch size, or a smaller dtype"),
      bytes);
}

// Small blocks (up to kSmallMaxBytes) are kept per thread for reuse: glibc's aligned
// allocation path is slow for them (it consolidates the heap), and a traced function's cached
// call allocates little else than its small results. Each size class keeps at most
// kSmallPerClass blocks; a block freed on another thread joins that thread's lists.
constexpr std::size_t kSmallClasses = kSmallMaxBytes / kBufferAlignment;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr std::size_t kSmallPerClass = 0;  // sanitizers see every block freed and reused
#else
constexpr std::size_t kSmallPerClass = 32;
#endif

struct SmallBlocks {
  void* blocks[kSmallClasses][kSmallPerClass + 1];
  std::size_t count[kSmallClasses] = {};
  SmallBlocks();
  ~SmallBlocks();
};
// Set once this thread's lists are destroyed (thread exit, or static destruction on the main
// thread): blocks freed after that go straight back to the system.
thread_local bool t_small_blocks_gone = false;
SmallBlocks::SmallBlocks() = default;
SmallBlocks::~SmallBlocks() {
  t_small_blocks_gone = true;
  for (std::size_t c = 0; c < kSmallClasses; ++c)
    for (std::size_t i = 0; i < count[c]; ++i) std::free(blocks[c][i]);
}
SmallBlocks* small_blocks() {
  if (t_small_blocks_gone) return nullptr;
  thread_local SmallBlocks lists;
  return &lists;
}
std::size_t small_class(std::size_t bytes) { return bytes / kBufferAlignment - 1; }  // bytes: a size class

// A block of a small size class from this thread's list, or null.
void* take_small(std::size_t bytes) {
  SmallBlocks* s = small_blocks();
  if (!s || s->count[small_class(bytes)] == 0) return nullptr;
  return s->blocks[small_class(bytes)][--s->count[small_class(bytes)]];
}
// Keeps a block of a small size class on this thread's list; false when the list is full.
bool keep_small(void* p, std::size_t bytes) {
  SmallBlocks* s = small_blocks();
  if (!s || s->count[small_class(bytes)] >= kSmallPerClass) return false;
  s->blocks[small_class(bytes)][s->count[small_class(bytes)]++] = p;
  return true;
}

// A fresh block, after emptying the cache if the system is out of memory; null if even that
// fails.
void* allocate_block(std::size_t bytes) {
  void* p = std::aligned_alloc(kBufferAlignment, bytes);
  if (!p && release_cached_blocks() > 0) p = std::aligned_alloc(kBufferAlignment, bytes);
  return p;
}

// A parked block of exactly `bytes` (a cached size class), else a fresh one.
void* take_cached(std::size_t bytes) {
  {
    BlockCache& c = cache();
    std::lock_guard lock(c.mu);
    if (auto it = c.free_blocks.find(bytes); it != c.free_blocks.end())
      if (void* p = c.pop(it->second, bytes)) return p;
  }
  return allocate_block(bytes);
}

// Parks a block of a cached size class, or frees it when the cache is full.
void park(void* p, std::size_t bytes) {
  {
    BlockCache& c = cache();
    std::lock_guard lock(c.mu);
    if (c.push(c.free_blocks[bytes], p, bytes)) return;
  }
  std::free(p);
}

void* acquire(std::size_t bytes) {
  if (bytes <= kSmallMaxBytes) {
    if (void* p = take_small(bytes)) {
      count_acquired(bytes);
      return p;
    }
  }
  void* p = bytes >= kCacheMinBytes ? take_cached(bytes) : allocate_block(bytes);
  if (p) count_acquired(bytes);
  return p;
}

void release(void* p, std::size_t bytes) {
  if (bytes > kSmallMaxBytes) g_live_bytes.fetch_sub(bytes, std::memory_order_relaxed);
  if (bytes <= kSmallMaxBytes && keep_small(p, bytes)) return;
  if (bytes >= kCacheMinBytes) return park(p, bytes);
  std::free(p);
}

}  // namespace

void* acquire_object_memory(std::size_t bytes) {
  const std::size_t rounded = size_class(bytes);
  if (rounded <= kSmallMaxBytes)
    if (void* p = take_small(rounded)) return p;
  void* p = std::aligned_alloc(kBufferAlignment, rounded);
  if (!p) throw std::bad_alloc();
  return p;
}

void release_object_memory(void* p, std::size_t bytes) {
  const std::size_t rounded = size_class(bytes);
  if (rounded <= kSmallMaxBytes && keep_small(p, rounded)) return;
  std::free(p);
}

void* acquire_cached_array(std::size_t bytes) {
  if (bytes < kCachedArrayMinBytes || !kParkCachedArrays) return ::operator new(bytes);
  void* p = take_cached(cached_class(bytes));
  if (!p) throw std::bad_alloc();
  return p;
}

void release_cached_array(void* p, std::size_t bytes) {
  if (bytes < kCachedArrayMinBytes || !kParkCachedArrays) return ::operator delete(p);
  park(p, cached_class(bytes));
}

std::shared_ptr<Buffer> Buffer::allocate(DType dtype, int64_t n) {
  TG_CHECK(n >= 0);
  std::size_t requested = 0;
  if (__builtin_mul_overflow(static_cast<std::size_t>(n), dtype_size(dtype), &requested))
    exhausted(dtype, n, SIZE_MAX, "the size overflows size_t");
  if (requested > max_buffer_bytes())
    exhausted(dtype, n, requested,
              str_cat("that is more than this machine's ", max_buffer_bytes(), " bytes of memory"));
  std::size_t bytes = size_class(requested);
  if (bytes == 0) bytes = kBufferAlignment;
  void* p = acquire(bytes);
  if (!p) exhausted(dtype, n, requested, "the system allocator is out of memory");
  if (dtype == DType::String) {
    auto* s = static_cast<std::string*>(p);
    for (int64_t i = 0; i < n; ++i) new (s + i) std::string();
  }
  return std::allocate_shared<Buffer>(RecyclingAllocator<Buffer>(), dtype, n, p, bytes);
}

std::shared_ptr<Buffer> Buffer::wrap(DType dtype, int64_t n, void* data, std::shared_ptr<const void> owner) {
  TG_CHECK(n >= 0 && dtype != DType::String && owner, "Buffer::wrap of ", n, " ", to_string(dtype), " elements");
  TG_CHECK(reinterpret_cast<uintptr_t>(data) % dtype_size(dtype) == 0, "Buffer::wrap of unaligned memory");
  auto b = std::make_shared<Buffer>(dtype, n, data, 0);
  b->owner_ = std::move(owner);
  return b;
}

Buffer::~Buffer() {
  if (owner_) return;  // wrapped memory: its owner frees it
  if (dtype_ == DType::String) {
    auto* s = static_cast<std::string*>(data_);
    for (int64_t i = 0; i < count_; ++i) s[i].~basic_string();
  }
  release(data_, bytes_);
}

std::size_t release_cached_blocks() {
  BlockCache& c = cache();
  std::lock_guard lock(c.mu);
  const std::size_t released = c.bytes;
  for (auto& [size, blocks] : c.free_blocks)
    for (void* p : blocks) std::free(p);
  c.free_blocks.clear();
  for (void* block : c.huge_blocks) munmap(block, kHugeBlockBytes);
  c.huge_blocks.clear();
  c.bytes = 0;
  return released;
}

std::size_t cached_block_bytes() {
  BlockCache& c = cache();
  std::lock_guard lock(c.mu);
  return c.bytes;
}

std::size_t live_buffer_bytes() { return g_live_bytes.load(std::memory_order_relaxed); }
std::size_t peak_buffer_bytes() { return g_peak_bytes.load(std::memory_order_relaxed); }
void reset_peak_buffer_bytes() {
  g_peak_bytes.store(g_live_bytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

void* acquire_huge_block() {
  {
    BlockCache& c = cache();
    std::lock_guard lock(c.mu);
    if (void* block = c.pop(c.huge_blocks, kHugeBlockBytes)) return block;
  }
  // Twice the size, trimmed to the aligned 2 MiB inside: mmap aligns to pages only.
  const std::size_t span = 2 * kHugeBlockBytes;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (start + kHugeBlockBytes - 1) & ~(kHugeBlockBytes - 1);
  if (aligned > start) munmap(raw, aligned - start);
  const std::uintptr_t end = aligned + kHugeBlockBytes;
  if (start + span > end) munmap(reinterpret_cast<void*>(end), start + span - end);
  void* block = reinterpret_cast<void*>(aligned);
  madvise(block, kHugeBlockBytes, MADV_HUGEPAGE);  // a hint: without it, 4 KiB pages as before
  return block;
}

void release_huge_block(void* block) {
  {
    BlockCache& c = cache();
    std::lock_guard lock(c.mu);
    if (kParkCachedArrays && c.push(c.huge_blocks, block, kHugeBlockBytes)) return;
  }
  munmap(block, kHugeBlockBytes);
}

}  // namespace tg::detail

namespace tg::config {
std::size_t release_cached_memory() { return detail::release_cached_blocks(); }
}  // namespace tg::config
