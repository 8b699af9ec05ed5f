// Elementwise throughput: tg::add against memcpy of the same bytes (the bandwidth ceiling) in
// the same run, and the libmvec-backed tanh / exp against a scalar libm loop and the newer
// vectorised ops against their own scalar path (information only).
// Rows ending in "(info)" in bench/run's table explain the gap rather than set a target.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "bench_util.h"
#include "core/tensor_impl.h"
#include "kernels/simd_math.h"
#include "tracegraph/tracegraph.h"

namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using AlignedFloats = std::unique_ptr<float[], FreeDeleter>;

// A 64-byte aligned buffer (like tensor storage), touched so that its pages are mapped.
AlignedFloats warm_buffer(int64_t n) {
  const std::size_t bytes = (static_cast<std::size_t>(n) * sizeof(float) + 63) / 64 * 64;
  AlignedFloats p(static_cast<float*>(std::aligned_alloc(64, bytes)));
  std::memset(p.get(), 0, bytes);
  return p;
}

const float* data(const tg::Tensor& t) { return tg::detail::data_of<float>(t); }

// bench/run derives throughput from this per-iteration amount and the clock it reports on;
// the rate counters are for reading tg_bench's own console output.
void set_bytes(benchmark::State& state, long faults, int64_t bytes_per_iter) {
  tg_bench::report_faults(state, faults);
  state.counters["work_per_iter"] = static_cast<double>(bytes_per_iter);
  state.SetBytesProcessed(state.iterations() * bytes_per_iter);
}
void set_items(benchmark::State& state, long faults, int64_t items_per_iter) {
  tg_bench::report_faults(state, faults);
  state.counters["work_per_iter"] = static_cast<double>(items_per_iter);
  state.SetItemsProcessed(state.iterations() * items_per_iter);
}

void add_tracegraph(benchmark::State& state, int64_t n) {
  const tg::Tensor a = tg::random_uniform({n}, -1, 1, 1);
  const tg::Tensor b = tg::random_uniform({n}, -1, 1, 2);
  tg_bench::reach_steady_state([&] { benchmark::DoNotOptimize(tg::add(a, b)); });
  const long faults = tg_bench::minor_faults();
  for (auto _ : state) {
    tg::Tensor c = tg::add(a, b);  // allocates its output, as every eager op does
    benchmark::DoNotOptimize(c);
  }
  set_bytes(state, faults, 3 * n * int64_t{sizeof(float)});
}

void add_memcpy(benchmark::State& state, int64_t n) {
  const tg::Tensor a = tg::random_uniform({n}, -1, 1, 1);
  AlignedFloats dst = warm_buffer(n);
  const long faults = tg_bench::minor_faults();
  for (auto _ : state) {
    std::memcpy(dst.get(), data(a), static_cast<std::size_t>(n) * sizeof(float));
    benchmark::ClobberMemory();
  }
  set_bytes(state, faults, 2 * n * int64_t{sizeof(float)});
}

// The add kernel's ceiling without the allocation: a plain loop into a reused buffer.
void add_cpp_loop_prealloc(benchmark::State& state, int64_t n) {
  const tg::Tensor a = tg::random_uniform({n}, -1, 1, 1);
  const tg::Tensor b = tg::random_uniform({n}, -1, 1, 2);
  AlignedFloats dst = warm_buffer(n);
  const float* x = data(a);
  const float* y = data(b);
  float* z = dst.get();
  const long faults = tg_bench::minor_faults();
  for (auto _ : state) {
    for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
    benchmark::ClobberMemory();
  }
  set_bytes(state, faults, 3 * n * int64_t{sizeof(float)});
}

// memcpy into a fresh allocation per iteration: what a new output buffer's page faults cost.
void add_memcpy_fresh_alloc(benchmark::State& state, int64_t n) {
  const tg::Tensor a = tg::random_uniform({n}, -1, 1, 1);
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
  const auto copy_fresh = [&] {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    std::memcpy(p, data(a), bytes);
    benchmark::DoNotOptimize(p);
    std::free(p);
  };
  tg_bench::reach_steady_state(copy_fresh);
  const long faults = tg_bench::minor_faults();
  for (auto _ : state) copy_fresh();
  set_bytes(state, faults, 2 * n * int64_t{sizeof(float)});
}

template <tg::Tensor (*Op)(const tg::Tensor&)>
void unary_tracegraph(benchmark::State& state, int64_t n, float lo, float hi) {
  const tg::Tensor x = tg::random_uniform({n}, lo, hi, 3);
  tg_bench::reach_steady_state([&] { benchmark::DoNotOptimize(Op(x)); });
  const long faults = tg_bench::minor_faults();
  for (auto _ : state) {
    tg::Tensor y = Op(x);
    benchmark::DoNotOptimize(y);
  }
  set_items(state, faults, n);
}

template <float (*F)(float)>
void unary_libm(benchmark::State& state, int64_t n, float lo, float hi) {
  const tg::Tensor x = tg::random_uniform({n}, lo, hi, 3);
  AlignedFloats dst = warm_buffer(n);
  const float* px = data(x);
  float* py = dst.get();
  const long faults = tg_bench::minor_faults();
  for (auto _ : state) {
    for (int64_t i = 0; i < n; ++i) py[i] = F(px[i]);
    benchmark::ClobberMemory();
  }
  set_items(state, faults, n);
}

// An op's scalar path (its functor per element, what every CPU ran before issue 13 vectorised
// it) over the same input into a reused buffer.
void unary_scalar_path(benchmark::State& state, tg::detail::simd::MathFn f, int64_t n,
                       float lo, float hi) {
  const tg::Tensor x = tg::random_uniform({n}, lo, hi, 3);
  AlignedFloats dst = warm_buffer(n);
  const long faults = tg_bench::minor_faults();
  for (auto _ : state) {
    f(data(x), dst.get(), n);
    benchmark::ClobberMemory();
  }
  set_items(state, faults, n);
}

tg::Tensor gelu_exact(const tg::Tensor& x) { return tg::gelu(x, false); }
tg::Tensor gelu_tanh(const tg::Tensor& x) { return tg::gelu(x, true); }

float libm_tanh(float x) { return std::tanh(x); }
float libm_exp(float x) { return std::exp(x); }

template <class Fn, class... Args>
void add_bench(const std::string& name, Fn fn, Args... args) {
  benchmark::RegisterBenchmark(name.c_str(), fn, args...)
      ->UseRealTime()
      ->MinTime(0.2)
      ->MinWarmUpTime(0.05)
      ->Unit(benchmark::kMicrosecond);
}

const bool registered = [] {
  for (const auto& [label, n] : {std::pair<std::string, int64_t>{"1M", int64_t{1} << 20},
                                 std::pair<std::string, int64_t>{"16M", int64_t{1} << 24}}) {
    add_bench("add/" + label + "/tracegraph", add_tracegraph, n);
    add_bench("add/" + label + "/memcpy", add_memcpy, n);
    add_bench("add/" + label + "/cpp_loop_prealloc", add_cpp_loop_prealloc, n);
    add_bench("add/" + label + "/memcpy_fresh_alloc", add_memcpy_fresh_alloc, n);
  }
  const int64_t n = int64_t{1} << 20;
  add_bench("tanh/1M/tracegraph", unary_tracegraph<&tg::tanh>, n, -3.f, 3.f);
  add_bench("tanh/1M/libm", unary_libm<&libm_tanh>, n, -3.f, 3.f);
  add_bench("exp/1M/tracegraph", unary_tracegraph<&tg::exp>, n, -10.f, 10.f);
  add_bench("exp/1M/libm", unary_libm<&libm_exp>, n, -10.f, 10.f);
  namespace simd = tg::detail::simd;
  const simd::MathFns& scalar = simd::math_fns(simd::Isa::kScalar);
  add_bench("log1p/1M/tracegraph", unary_tracegraph<&tg::log1p>, n, -0.99f, 10.f);
  add_bench("log1p/1M/scalar", unary_scalar_path, scalar.log1p, n, -0.99f, 10.f);
  add_bench("expm1/1M/tracegraph", unary_tracegraph<&tg::expm1>, n, -5.f, 5.f);
  add_bench("expm1/1M/scalar", unary_scalar_path, scalar.expm1, n, -5.f, 5.f);
  add_bench("erf/1M/tracegraph", unary_tracegraph<&tg::erf>, n, -5.f, 5.f);
  add_bench("erf/1M/scalar", unary_scalar_path, scalar.erf, n, -5.f, 5.f);
  add_bench("softplus/1M/tracegraph", unary_tracegraph<&tg::softplus>, n, -5.f, 5.f);
  add_bench("softplus/1M/scalar", unary_scalar_path, scalar.softplus, n, -5.f, 5.f);
  add_bench("gelu/1M/tracegraph", unary_tracegraph<&gelu_exact>, n, -5.f, 5.f);
  add_bench("gelu/1M/scalar", unary_scalar_path, scalar.gelu, n, -5.f, 5.f);
  add_bench("gelu_tanh/1M/tracegraph", unary_tracegraph<&gelu_tanh>, n, -5.f, 5.f);
  add_bench("gelu_tanh/1M/scalar", unary_scalar_path, scalar.gelu_tanh, n, -5.f, 5.f);
  add_bench("elu/1M/tracegraph", unary_tracegraph<&tg::elu>, n, -5.f, 5.f);
  add_bench("elu/1M/scalar", unary_scalar_path, scalar.elu, n, -5.f, 5.f);
  return true;
}();

}  // namespace
