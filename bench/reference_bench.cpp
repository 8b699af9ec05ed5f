// The hand-written C++ references of the workload table and this machine's limits, as
// benchmarks. The code they time is in reference_cpp.cpp (its own compiler flags); this file,
// compiled like the rest of tg_bench, gives it tracegraph's inputs and checks its answers.
//
// Every benchmark here runs on tg::config::num_threads() threads: bench/run starts one tg_bench
// per column of the table with TG_NUM_THREADS (and OPENBLAS_NUM_THREADS, OMP_NUM_THREADS) set
// to the column's count, so a reference always uses exactly the threads tracegraph has.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <utility>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "bench_util.h"
#include "core/tensor_impl.h"
#include "reference_cpp.h"
#include "tracegraph/tracegraph.h"
#include "workloads.h"

namespace {

using tg::Tensor;
using namespace tg_bench;  // input_of, chain, Act (workloads.h)

constexpr int64_t kSmall = 16;
constexpr int64_t kLarge = int64_t{1} << 20;
// Large enough that neither array stays in any cache level (128 MiB each).
constexpr int64_t kMemory = int64_t{1} << 25;

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using Floats = std::unique_ptr<float[], FreeDeleter>;

// 64-byte aligned like a tensor's storage, and touched, so that no page is mapped while timed.
Floats floats(int64_t n, float value) {
  const std::size_t bytes = (static_cast<std::size_t>(n) * sizeof(float) + 63) / 64 * 64;
  Floats p(static_cast<float*>(std::aligned_alloc(64, bytes)));
  if (!p) throw std::bad_alloc();
  for (int64_t i = 0; i < n; ++i) p[i] = value;
  return p;
}

template <Act kAct>
void reference_chain(const float* x, float* y, int64_t n, int threads) {
  if constexpr (kAct == Act::kTanh) reference::tanh_chain(x, y, n, threads);
  else reference::relu_chain(x, y, n, threads);
}

// A reference that computes something else (a lost round, a wrong constant) could look fast, so
// its output is compared with the traced tracegraph chain's before it is timed. The tolerance
// covers libmvec's and SLEEF's different tanh roundings and the FMA contraction -ffast-math
// allows; a changed op moves values by far more.
template <Act kAct>
void check_against_tracegraph(const Tensor& x, const float* y, int64_t n) {
  auto f = tg::function([](const Tensor& t) { return chain<kAct>(t); });
  const Tensor want = f(x);
  const float* w = tg::detail::data_of<float>(want);
  for (int64_t i = 0; i < n; ++i) {
    const float tol = 1e-4f * std::max(1.0f, std::fabs(w[i]));
    if (!(std::fabs(y[i] - w[i]) <= tol))
      throw std::runtime_error("reference disagrees with tracegraph at element " +
                               std::to_string(i) + ": " + std::to_string(y[i]) + " vs " +
                               std::to_string(w[i]));
  }
}

template <Act kAct, int64_t kN>
void BM_ChainReference(benchmark::State& state) {
  tg_bench::guarded(state, [&] {
    const int threads = tg::config::num_threads();
    const Tensor x = input_of(kN);
    const float* px = tg::detail::data_of<float>(x);
    const Floats y = floats(kN, 0.0f);
    reference_chain<kAct>(px, y.get(), kN, threads);
    check_against_tracegraph<kAct>(x, y.get(), kN);
    const long faults = tg_bench::minor_faults();
    for (auto _ : state) {
      reference_chain<kAct>(px, y.get(), kN, threads);
      benchmark::DoNotOptimize(y.get());
      benchmark::ClobberMemory();
    }
    tg_bench::report_faults(state, faults);
    state.counters["threads"] = threads;
  });
}
// The same reference with each call fed the last one's output (information beside the 16-float
// rows): the calls above all read the same input, so the core overlaps several calls' chains of
// 33 dependent rounds, and their time per call is a throughput. A traced call, a function call
// with its own bookkeeping, cannot overlap the next one that way; this is the reference's time
// when it cannot either (its latency). The values grow to inf after a few hundred calls, which
// costs the arithmetic nothing.
template <Act kAct>
void BM_ChainReferenceChained(benchmark::State& state) {
  tg_bench::guarded(state, [&] {
    const int threads = tg::config::num_threads();
    const Tensor x = input_of(kSmall);
    Floats a = floats(kSmall, 0.0f), b = floats(kSmall, 0.0f);
    std::copy_n(tg::detail::data_of<float>(x), kSmall, a.get());
    for (auto _ : state) {
      reference_chain<kAct>(a.get(), b.get(), kSmall, threads);
      benchmark::DoNotOptimize(b.get());
      benchmark::ClobberMemory();
      std::swap(a, b);
    }
    state.counters["threads"] = threads;
  });
}

BENCHMARK(BM_ChainReferenceChained<Act::kTanh>)->Name("chain/tanh/16/reference_chained")
    ->MinTime(0.1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ChainReferenceChained<Act::kRelu>)->Name("chain/relu/16/reference_chained")
    ->MinTime(0.1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ChainReference<Act::kTanh, kSmall>)->Name("chain/tanh/16/reference")
    ->MinTime(0.1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ChainReference<Act::kRelu, kSmall>)->Name("chain/relu/16/reference")
    ->MinTime(0.1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ChainReference<Act::kTanh, kLarge>)->Name("chain/tanh/1M/reference")
    ->MinTime(0.3)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ChainReference<Act::kRelu, kLarge>)->Name("chain/relu/1M/reference")
    ->MinTime(0.3)->Unit(benchmark::kMicrosecond);

// ---- the machine's limits ------------------------------------------------------------------
// Bandwidth: y = s * x over n floats, counted as 2 * 4n bytes (the read and the write a kernel
// asks for; the cache's write-allocate read is the hardware's business). At 1M floats it is the
// 1M chains' own footprint (their data may sit partly in the last-level cache, and a floor for
// them must allow for that); at 32M floats it is main memory.
void BM_Bandwidth(benchmark::State& state, int64_t n) {
  tg_bench::guarded(state, [&] {
    const int threads = tg::config::num_threads();
    const Floats x = floats(n, 1.0f), y = floats(n, 0.0f);
    reference::scale_copy(x.get(), y.get(), n, 1.0001f, threads);
    for (auto _ : state) {
      reference::scale_copy(x.get(), y.get(), n, 1.0001f, threads);
      benchmark::DoNotOptimize(y.get());
      benchmark::ClobberMemory();
    }
    const int64_t bytes = 2 * n * static_cast<int64_t>(sizeof(float));
    state.counters["work_per_iter"] = static_cast<double>(bytes);
    state.SetBytesProcessed(state.iterations() * bytes);
    state.counters["threads"] = threads;
  });
}
BENCHMARK_CAPTURE(BM_Bandwidth, 1M, kLarge)->Name("limit/bandwidth/1M")->MinTime(0.3)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Bandwidth, 32M, kMemory)->Name("limit/bandwidth/32M")->MinTime(0.5)
    ->Unit(benchmark::kMillisecond);

// FMA peak: independent register-resident FMA chains on every thread of the column.
void BM_FmaPeak(benchmark::State& state) {
  tg_bench::guarded(state, [&] {
    const int threads = tg::config::num_threads();
    constexpr int64_t kSteps = int64_t{1} << 16;
    float sink = 0.0f;
    double flops = reference::fma_loop(kSteps, threads, &sink);
    for (auto _ : state) {
      flops = reference::fma_loop(kSteps, threads, &sink);
      benchmark::DoNotOptimize(sink);
    }
    state.counters["work_per_iter"] = flops;
    state.counters["FLOPS"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
    state.counters["lanes"] = reference::fma_lanes();
    state.counters["threads"] = threads;
  });
}
BENCHMARK(BM_FmaPeak)->Name("limit/fma")->MinTime(0.3)->Unit(benchmark::kMicrosecond);

}  // namespace
