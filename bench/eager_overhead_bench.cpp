// Eager per-op overhead: an op on tiny tensors measures everything around the arithmetic
// (validation, shape inference, output allocation, dispatch). Target: <= 1 microsecond per op.
#include <benchmark/benchmark.h>

#include "bench_util.h"
#include "tracegraph/tracegraph.h"

namespace {

void run_add(benchmark::State& state, const tg::Tensor& a, const tg::Tensor& b) {
  tg_bench::reach_steady_state([&] { benchmark::DoNotOptimize(tg::add(a, b)); });
  const long faults = tg_bench::minor_faults();
  for (auto _ : state) {
    tg::Tensor c = tg::add(a, b);
    benchmark::DoNotOptimize(c);
  }
  tg_bench::report_faults(state, faults);
  state.counters["work_per_iter"] = 1;  // one op
}

void BM_AddOverheadF32(benchmark::State& state) {
  run_add(state, tg::constant({1.5f}), tg::constant({2.5f}));  // shape (1,)
}
BENCHMARK(BM_AddOverheadF32)->Name("overhead/add_f32_1elem/tracegraph")->UseRealTime()
    ->MinTime(0.2)->Unit(benchmark::kNanosecond);

void BM_AddOverheadI32(benchmark::State& state) {
  run_add(state, tg::constant(1), tg::constant(2));  // shape ()
}
BENCHMARK(BM_AddOverheadI32)->Name("overhead/add_i32_scalar/tracegraph")->UseRealTime()
    ->MinTime(0.2)->Unit(benchmark::kNanosecond);

}  // namespace
