// Counts the heap allocations this thread makes while counting is on, and refuses large ones on
// request, by replacing the global operator new. Include it in exactly ONE .cpp of a test binary
// (replacement allocation functions must be defined once per program).
#pragma once
#include <cstdlib>
#include <new>

// The replacement operator new below is malloc-based, so free() in operator delete matches it.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace tg::testing {
inline thread_local bool t_counting_allocations = false;
inline thread_local long t_allocations = 0;

/// Counts the allocations made by this thread during its lifetime.
class CountAllocations {
 public:
  CountAllocations() {
    t_allocations = 0;
    t_counting_allocations = true;
  }
  ~CountAllocations() { t_counting_allocations = false; }
  CountAllocations(const CountAllocations&) = delete;
  CountAllocations& operator=(const CountAllocations&) = delete;
  long count() const { return t_allocations; }
};

inline thread_local std::size_t t_refuse_allocations_over = static_cast<std::size_t>(-1);

/// While alive, this thread's operator new refuses (std::bad_alloc) every request of more than
/// `bytes`, as a system out of memory would: the tests reach those paths without asking for
/// terabytes (which the sanitizers' allocators would abort on). Tensor buffers do not come from
/// operator new.
class RefuseAllocationsOver {
 public:
  explicit RefuseAllocationsOver(std::size_t bytes) { t_refuse_allocations_over = bytes; }
  ~RefuseAllocationsOver() { t_refuse_allocations_over = static_cast<std::size_t>(-1); }
  RefuseAllocationsOver(const RefuseAllocationsOver&) = delete;
  RefuseAllocationsOver& operator=(const RefuseAllocationsOver&) = delete;
};
}  // namespace tg::testing

void* operator new(std::size_t n) {
  if (tg::testing::t_counting_allocations) ++tg::testing::t_allocations;
  if (n > tg::testing::t_refuse_allocations_over) throw std::bad_alloc();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
// The nothrow forms too (std::stable_sort's temporary buffer uses one): left to the sanitizer's
// own operator new, their blocks reached the free() above, an alloc-dealloc mismatch under ASan.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return ::operator new(n);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
