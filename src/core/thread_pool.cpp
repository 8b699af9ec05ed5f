#include "core/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/float_environment.h"
#include "core/thread_context.h"
#include "tracegraph/config.h"
#include "tracegraph/errors.h"

namespace tg::detail {
namespace {

// True while this thread runs a job (a pool thread: always): nested parallel_for calls run serially.
thread_local bool t_in_pool_job = false;

// How long a thread spins for work (a worker) or for the other chunks (the caller) before it
// sleeps on a condition variable: 185-250 us on Zen 4 (a PAUSE measured 18-25 ns there). Waking
// a sleeping thread costs a futex system call on each side, 10-20 us on a VM. The parallel
// kernels of a training step can be 100 us apart (the serial small ops between two products):
// at 37 us of spinning the demo's batch-128 Adam step made 7 futex calls a step, at 185 us
// fewer than one, and ran 887-891 against 953-976 us on 2 threads. An idle pool burns at most
// that long after its last job (OpenMP runtimes spin longer by default).
constexpr int kSpinIterations = 10000;
inline void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

int default_threads() {
  if (const char* env = std::getenv("TG_NUM_THREADS")) {
    const int n = std::atoi(env);
    if (n >= 1) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

class Pool {
 public:
  explicit Pool(int threads) { start(threads); }
  ~Pool() { stop(); }

  int threads() const { return threads_.load(std::memory_order_relaxed); }

  void resize(int threads) {
    std::lock_guard submit(submit_mu_);
    stop();
    start(threads);
  }

  void run(int64_t n, int64_t grain, void (*fn)(void*, int64_t, int64_t), void* ctx) {
    const int64_t max_chunks = std::max<int64_t>(1, (n + grain - 1) / std::max<int64_t>(grain, 1));
    const int chunks = static_cast<int>(std::min<int64_t>(threads(), max_chunks));
    // Serial when there is nothing to split, from inside a job, or while another thread's job
    // holds the pool (two jobs at once would only oversubscribe the cores).
    std::unique_lock submit(submit_mu_, std::defer_lock);
    if (chunks <= 1 || t_in_pool_job || !submit.try_lock()) {
      fn(ctx, 0, n);
      return;
    }
    const uint32_t job = static_cast<uint32_t>(generation_ + 1);
    // The claim counter moves to the new job before its fields change: a worker still holding
    // the last job's fields then fails its claim (this rests on the claim's store and the
    // fields' stores keeping their order, which their sequentially consistent stores give).
    claim_.store(uint64_t{job} << 32);
    csr_.store(_mm_getcsr());
    fn_.store(fn);
    ctx_.store(ctx);
    n_.store(n);
    chunks_.store(chunks);
    by_lines_.store(grain >= 16);
    finished_.store(0);
    error_ = nullptr;
    {
      std::lock_guard lock(mu_);
      ++generation_;
      published_.store(generation_, std::memory_order_release);
    }
    // Workers still spinning from the last job see published_ change; only sleeping ones need
    // the (on a VM, expensive) futex wake. A worker counts itself a sleeper under mu_, so it
    // either is counted here or sees the new generation before it sleeps.
    if (sleepers_.load() > 0) wake_.notify_all();
    {
      ScopedThreadValue<bool> in_job(t_in_pool_job, true);
      work(job);
    }
    // Spin for the other chunks before sleeping on done_: they are usually as short as ours.
    for (int i = 0; i < kSpinIterations && finished_.load() != chunks; ++i) spin_pause();
    if (finished_.load() != chunks) {
      std::unique_lock lock(mu_);
      caller_waiting_.store(true);
      done_.wait(lock, [&] { return finished_.load() == chunks; });
      caller_waiting_.store(false);
    }
    // Every chunk's error was stored before its count reached finished_.
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  // Runs the chunks of job `job` this thread claims, if it is still the current one. The only
  // shared writes are the claims and the count of finished chunks: no lock on the way, since a
  // mutex taken by both threads moves its cache line between the cores several times a job.
  void work(uint32_t job) {
    void (*const fn)(void*, int64_t, int64_t) = fn_.load();
    void* const ctx = ctx_.load();
    const int64_t n = n_.load();
    const int chunks = chunks_.load();
    const bool by_lines = by_lines_.load();
    // A job's chunks run under its caller's floating-point environment (core/float_environment.h):
    // a worker takes it on and keeps it for the next job, which usually has the same.
    const uint32_t csr = csr_.load();
    if (_mm_getcsr() != csr) _mm_setcsr(csr);
    int done_here = 0;
    uint64_t claim = claim_.load();
    while ((claim >> 32) == job && static_cast<int64_t>(claim & 0xffffffffu) < chunks) {
      if (!claim_.compare_exchange_weak(claim, claim + 1)) continue;
      const int i = static_cast<int>(claim & 0xffffffffu);
      try {
        fn(ctx, boundary(n, chunks, i, by_lines), boundary(n, chunks, i + 1, by_lines));
      } catch (...) {
        std::lock_guard lock(mu_);
        if (!error_) error_ = std::current_exception();
      }
      ++done_here;
      claim = claim_.load();
    }
    if (!done_here) return;
    // After this the job's caller may return: only the pool is touched.
    finished_.fetch_add(done_here);
    if (caller_waiting_.load()) {
      std::lock_guard lock(mu_);
      done_.notify_all();
    }
  }

  // Chunk i covers [n*i/k, n*(i+1)/k), fixed by n, k and the grain alone. With a grain of 16 or
  // more the caller splits elements, and the inner boundaries are rounded down to 16 of them
  // (whole cache lines of float32). A smaller grain means coarse units (rows, images, heads): they
  // split exactly, since rounding would hand a range of fewer than 32 units whole to one thread.
  static int64_t boundary(int64_t n, int chunks, int i, bool by_lines) {
    if (i >= chunks) return n;
    const int64_t b = n * i / chunks;
    return by_lines ? b & ~int64_t{15} : b;
  }

  void worker() {
    uint64_t seen = published_.load(std::memory_order_acquire);
    t_in_pool_job = true;
    for (;;) {
      // The next parallel kernel usually comes within microseconds (the next op of the same
      // step): spin for it a while before sleeping, as OpenMP runtimes do.
      for (int i = 0; i < kSpinIterations && published_.load(std::memory_order_acquire) == seen &&
                      !stopping_flag_.load(std::memory_order_relaxed);
           ++i)
        spin_pause();
      if (published_.load(std::memory_order_acquire) == seen && !stopping_flag_.load()) {
        std::unique_lock lock(mu_);
        auto ready = [&] { return stopping_ || generation_ != seen; };
        if (!ready()) {
          sleepers_.fetch_add(1);
          wake_.wait(lock, ready);
          sleepers_.fetch_sub(1);
        }
      }
      if (stopping_flag_.load()) return;
      seen = published_.load(std::memory_order_acquire);
      work(static_cast<uint32_t>(seen));
    }
  }

  void start(int threads) {
    threads = std::max(1, threads);
    threads_.store(threads, std::memory_order_relaxed);
    stopping_ = false;
    stopping_flag_.store(false, std::memory_order_relaxed);
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker(); });
  }

  void stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      stopping_flag_.store(true);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  // Atomic: run() reads it before taking submit_mu_, while resize() may change it under that
  // lock; a job sized for the old count still completes (the caller takes the chunks left).
  std::atomic<int> threads_{1};
  std::vector<std::thread> workers_;
  std::mutex submit_mu_;  // one job at a time
  std::mutex mu_;         // sleeping and waking, errors
  std::condition_variable wake_, done_;
  bool stopping_ = false;
  uint64_t generation_ = 0;  // the last job's number (changed under submit_mu_ and mu_)
  // The current job: its number (low 32 bits) in the high half of claim_, whose low half is the
  // next chunk to claim; its fields, written by the caller before it publishes the number.
  std::atomic<uint64_t> claim_{0};
  std::atomic<uint32_t> csr_{0};  // the caller's MXCSR
  std::atomic<void (*)(void*, int64_t, int64_t)> fn_{nullptr};
  std::atomic<void*> ctx_{nullptr};
  std::atomic<int64_t> n_{0};
  std::atomic<int> chunks_{0};
  std::atomic<bool> by_lines_{true};  // boundaries on multiples of 16 (boundary())
  std::atomic<int> finished_{0};  // chunks of the current job completed
  std::exception_ptr error_;      // the job's first (set under mu_)
  // Lock-free views for spinning: the last job's generation, whether stop() began, how many
  // workers sleep on wake_ (changed under mu_), whether the caller sleeps on done_.
  std::atomic<uint64_t> published_{0};
  std::atomic<bool> stopping_flag_{false};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> caller_waiting_{false};
};

// Never destroyed: static tensors' destructors may still run kernels at exit, and joining
// threads from a static destructor is fragile.
Pool& pool() {
  static Pool* p = new Pool(default_threads());
  return *p;
}

}  // namespace

int num_threads() { return pool().threads(); }

void set_num_threads(int n) {
  TG_CHECK(n >= 1, "set_num_threads needs n >= 1, got ", n);
  if (n != pool().threads()) pool().resize(n);
}

void parallel_for(int64_t n, int64_t grain, void (*fn)(void* ctx, int64_t begin, int64_t end),
                  void* ctx) {
  if (n <= 0) return;
  pool().run(n, grain, fn, ctx);
}

}  // namespace tg::detail

namespace tg::config {

int num_threads() { return detail::num_threads(); }

void set_num_threads(int n) {
  if (n < 1)
    throw ValueError(detail::str_cat("[tg::config::set_num_threads] needs at least 1 thread, got ", n,
                                     "; pass 1 to run every kernel on the calling thread"));
  // resize() waits for the running job, which would be this thread's own: a deadlock.
  if (detail::t_in_pool_job)
    throw ValueError("[tg::config::set_num_threads] was called from inside a parallel kernel (or a pool "
                     "thread); call it from the thread that calls tracegraph functions");
  detail::set_num_threads(n);
}

}  // namespace tg::config
