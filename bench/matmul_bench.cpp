// Square float32 GEMM through tg::matmul against cblas_sgemm called directly on the same
// input buffers in the same process (so with the same OpenBLAS and thread count).
// Target: tracegraph >= 90% of direct OpenBLAS throughput.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "bench_util.h"
#include "core/tensor_impl.h"
#include "tracegraph/tracegraph.h"

namespace {

// bench/run derives GFLOP/s from work_per_iter and the clock it reports on.
void set_flops(benchmark::State& state, long faults, int64_t n) {
  tg_bench::report_faults(state, faults);
  const double nd = static_cast<double>(n);
  const double flops = 2.0 * nd * nd * nd;
  state.counters["work_per_iter"] = flops;
  state.counters["FLOPS"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate,
                                               benchmark::Counter::kIs1000);
}

void sgemm_tracegraph(benchmark::State& state, int64_t n) {
  const tg::Tensor a = tg::random_uniform({n, n}, -1, 1, 1);
  const tg::Tensor b = tg::random_uniform({n, n}, -1, 1, 2);
  // The baseline's output buffer is pre-touched; this is tracegraph's equivalent.
  tg_bench::reach_steady_state([&] { benchmark::DoNotOptimize(tg::matmul(a, b)); });
  const long faults = tg_bench::minor_faults();
  for (auto _ : state) {
    tg::Tensor c = tg::matmul(a, b);
    benchmark::DoNotOptimize(c);
  }
  set_flops(state, faults, n);
}

void sgemm_cblas(benchmark::State& state, int64_t n) {
  // OpenBLAS's own threads at the column's count (tracegraph sets them to 1 for its own calls
  // and splits products across its pool instead; the setting is process-wide).
  openblas_set_num_threads(tg::config::num_threads());
  const tg::Tensor a = tg::random_uniform({n, n}, -1, 1, 1);
  const tg::Tensor b = tg::random_uniform({n, n}, -1, 1, 2);
  const std::size_t bytes = static_cast<std::size_t>(n * n) * sizeof(float);
  std::unique_ptr<void, void (*)(void*)> c(std::aligned_alloc(64, bytes), &std::free);
  std::memset(c.get(), 0, bytes);
  const int ni = static_cast<int>(n);
  const auto sgemm = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0f,
                tg::detail::data_of<float>(a), ni, tg::detail::data_of<float>(b), ni, 0.0f,
                static_cast<float*>(c.get()), ni);
    benchmark::ClobberMemory();
  };
  tg_bench::reach_steady_state(sgemm);
  const long faults = tg_bench::minor_faults();
  for (auto _ : state) sgemm();
  set_flops(state, faults, n);
  tg_bench::let_openblas_workers_sleep(tg::config::num_threads());
}

const bool registered = [] {
  for (int64_t n : {256, 1024, 2048}) {
    for (auto [side, fn] :
         {std::pair{"tracegraph", &sgemm_tracegraph}, std::pair{"cblas", &sgemm_cblas}}) {
      benchmark::RegisterBenchmark(("sgemm/" + std::to_string(n) + "/" + side).c_str(), fn, n)
          ->UseRealTime()
          ->MinTime(n >= 2048 ? 0.5 : 0.2)
          ->MinWarmUpTime(0.05)
          ->Unit(benchmark::kMillisecond);
    }
  }
  return true;
}();

}  // namespace
