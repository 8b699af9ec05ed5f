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
#include "core/thread_context.h"
#include "tracegraph/config.h"
#include "tracegraph/errors.h"

namespace tg::detail {
namespace {

// True while this thread runs a job (a pool thread: always): nested parallel_for calls run serially.
thread_local bool t_in_pool_job = false;

// How long a thread spins for work (a worker) or for the other chunks (the caller) before it
// sleeps on a condition variable: 185-250 us here (a PAUSE measured 18-25 ns on this EPYC). Waking
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
    {
      std::lock_guard lock(mu_);
      fn_ = fn;
      ctx_ = ctx;
      n_ = n;
      chunks_ = chunks;
      next_.store(0, std::memory_order_relaxed);
      error_ = nullptr;
      ++generation_;
      published_.store(generation_, std::memory_order_release);
    }
    // Workers still spinning from the last job see published_ change; only sleeping ones need
    // the (on a VM, expensive) futex wake. A worker counts itself a sleeper under mu_, so it
    // either is counted here or sees the new generation before it sleeps.
    if (sleepers_.load() > 0) wake_.notify_all();
    {
      ScopedThreadValue<bool> in_job(t_in_pool_job, true);
      work();
    }
    // Spin for the other chunks before sleeping on done_: they are usually as short as ours.
    for (int i = 0; i < kSpinIterations && !(active_.load() == 0 && finished_.load() == chunks_); ++i) spin_pause();
    std::unique_lock lock(mu_);
    done_.wait(lock, [&] { return active_.load() == 0 && finished_.load() == chunks_; });
    finished_.store(0);
    fn_ = nullptr;
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  // Chunk i covers [n*i/k, n*(i+1)/k) with inner boundaries rounded down to 16 elements (whole
  // cache lines of float32): fixed by n and k alone.
  int64_t boundary(int i) const {
    if (i >= chunks_) return n_;
    return (n_ * i / chunks_) & ~int64_t{15};
  }

  void work() {
    int done_here = 0;
    for (int i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < chunks_;) {
      try {
        fn_(ctx_, boundary(i), boundary(i + 1));
      } catch (...) {
        std::lock_guard lock(mu_);
        if (!error_) error_ = std::current_exception();
      }
      ++done_here;
    }
    if (done_here) {
      std::lock_guard lock(mu_);
      finished_.fetch_add(done_here);
    }
  }

  void worker() {
    uint64_t seen = 0;
    t_in_pool_job = true;
    for (;;) {
      // The next parallel kernel usually comes within microseconds (the next op of the same
      // step): spin for it a while before sleeping, as OpenMP runtimes do.
      for (int i = 0; i < kSpinIterations && published_.load(std::memory_order_acquire) == seen &&
                      !stopping_flag_.load(std::memory_order_relaxed);
           ++i)
        spin_pause();
      {
        std::unique_lock lock(mu_);
        if (!stopping_ && generation_ != seen && !fn_) {
          seen = generation_;  // that job finished without us: spin for the next one
          continue;
        }
        auto ready = [&] { return stopping_ || (generation_ != seen && fn_); };
        if (!ready()) {
          sleepers_.fetch_add(1);
          wake_.wait(lock, ready);
          sleepers_.fetch_sub(1);
        }
        if (stopping_) return;
        seen = generation_;
        active_.fetch_add(1);
      }
      work();
      {
        std::lock_guard lock(mu_);
        active_.fetch_sub(1);
      }
      done_.notify_all();
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
      stopping_flag_.store(true, std::memory_order_relaxed);
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
  std::mutex mu_;
  std::condition_variable wake_, done_;
  bool stopping_ = false;
  uint64_t generation_ = 0;
  std::atomic<int> active_{0};    // workers inside the current job (changed under mu_)
  std::atomic<int> finished_{0};  // chunks completed (changed under mu_)
  // Lock-free views for spinning: the last job's generation, whether stop() began, and how many
  // workers sleep on wake_ (changed under mu_).
  std::atomic<uint64_t> published_{0};
  std::atomic<bool> stopping_flag_{false};
  std::atomic<int> sleepers_{0};
  std::exception_ptr error_;
  void (*fn_)(void*, int64_t, int64_t) = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0;
  int chunks_ = 0;
  std::atomic<int> next_{0};
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
