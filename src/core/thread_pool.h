// One process-wide pool of worker threads for intra-op parallelism (large elementwise kernels in
// the executor; any kernel may use it). Partitioning is fixed by the sizes alone, never by
// timing, so a kernel that combines per-chunk partial results in chunk order gets the same bits
// on every run and at every thread count it chooses chunks for.
#pragma once
#include <cstdint>
#include <type_traits>

namespace tg::detail {

/// Threads the pool runs work on, the calling thread included: TG_NUM_THREADS when set (1 turns
/// intra-op parallelism off), else the number of cores. Changed with set_num_threads().
int num_threads();
/// Resizes the pool (n >= 1; 1 = everything runs on the calling thread). Not to be called while
/// work runs on the pool.
void set_num_threads(int n);

/// Below this many elements an elementwise kernel runs on the calling thread alone: splitting
/// costs a few microseconds of wake-up, which only pays off for large tensors.
inline constexpr int64_t kParallelMinElements = int64_t{1} << 16;

/// Calls fn(begin, end) for consecutive chunks of [0, n), each at least `grain` long (except the
/// last), on up to num_threads() threads, and returns when all are done. The chunk boundaries
/// depend only on n, grain and num_threads(): with grain >= 16 (elements) the inner ones fall on
/// multiples of 16, with a smaller grain (rows, images, heads) they split n evenly. The first
/// exception thrown by fn is rethrown here. Nested calls (from inside fn) run serially on the
/// calling thread.
void parallel_for(int64_t n, int64_t grain, void (*fn)(void* ctx, int64_t begin, int64_t end),
                  void* ctx);

/// The same with any callable (a thin wrapper: no allocation).
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  parallel_for(
      n, grain,
      [](void* ctx, int64_t b, int64_t e) { (*static_cast<std::remove_reference_t<F>*>(ctx))(b, e); },
      static_cast<void*>(&f));
}

/// Calls fn(p) once for each part p in [0, parts), whole parts per thread: with parts <=
/// num_threads(), each part on a thread of its own. Part p runs on the calling thread when the
/// pool runs serially.
template <class F>
void parallel_parts(int parts, F&& fn) {
  parallel_for(parts, 1, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) fn(static_cast<int>(p));
  });
}

}  // namespace tg::detail
