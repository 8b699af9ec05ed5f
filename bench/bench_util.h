// Helpers shared by the benchmark files.
#pragma once
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <chrono>
#include <exception>
#include <thread>

namespace tg_bench {

// Minor page faults of the calling thread so far (first touches of freshly mapped memory).
inline long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_minflt;
}

// Records the page faults per timed iteration since `start` (taken just before the timed loop)
// as the "faults_per_iter" counter: an output buffer that the OS maps afresh page by page on
// every call shows up here, and explains a throughput gap that the kernel itself does not.
inline void report_faults(benchmark::State& state, long start) {
  const auto iters = static_cast<double>(state.iterations());
  state.counters["faults_per_iter"] =
      iters > 0 ? static_cast<double>(minor_faults() - start) / iters : 0.0;
}

// Runs fn twice, untimed, so that the timed loop sees malloc's steady state for a benchmark
// that allocates a large output per call: glibc serves the first one by mmap and, when it is
// freed, raises its mmap threshold (up to 32 MiB); the second then comes from the heap, where
// later calls reuse it without page faults. Outputs above 32 MiB are mapped afresh every call,
// and that cost stays in the measurement because a real program pays it too.
template <class Fn>
void reach_steady_state(Fn&& fn) {
  fn();
  fn();
}

// Called at the end of a benchmark that ran OpenBLAS on several threads (a cblas reference):
// OpenBLAS 0.3.21's idle workers spin in sched_yield for about 2^28 TSC cycles before they sleep
// (measured: 0.12 s of a core's time after each multi-threaded call, on this 2-core VM), and
// setting its thread count to 1 does not stop them. Sleeping past that, untimed, keeps the
// spin out of the next benchmark (with random interleaving, a different one each repetition).
inline void let_openblas_workers_sleep(int threads_used) {
  if (threads_used > 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
}

// Runs a benchmark body and turns a tg:: error into a skipped benchmark with its message, so that
// one broken workload (e.g. a pass under development) shows up as an error row in bench/run's
// table instead of ending the whole run.
template <class Fn>
void guarded(benchmark::State& state, Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

}  // namespace tg_bench
