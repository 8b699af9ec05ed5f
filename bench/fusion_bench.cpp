// Elementwise fusion against hand-fused C++: the 100-op chain (x * 1.01, x + 0.5, act) x 33, act
// tanh or relu, on 16 and 1M floats. "traced" is a tg::function (optimised: one fused node);
// "traced_unfused" the same function with optimize = false; "hand_fused_avx512" keeps the values
// in registers through all 99 ops, 8 independent registers at a time (tanh via the libmvec routine
// tracegraph's tanh uses): what a C++ programmer writing the chain for this CPU by hand would do.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>

#include "bench_util.h"
#include "core/tensor_impl.h"
#include "tracegraph/tracegraph.h"

#include <immintrin.h>

// From glibc's libmvec (linked through tracegraph); math.h declares it only under -ffast-math,
// and this file runs on any x86-64 (the CPU is checked before use).
extern "C" __m512 _ZGVeN16v_tanhf(__m512);

namespace {

using tg::Tensor;

constexpr int kRounds = 33;

template <bool kTanh>
Tensor chain(const Tensor& x0) {
  Tensor x = x0;
  for (int r = 0; r < kRounds; ++r) {
    x = x * 1.01f;
    x = x + 0.5f;
    x = kTanh ? tg::tanh(x) : tg::relu(x);
  }
  return x;
}

#pragma GCC push_options
#pragma GCC target("avx512f")
// kLanes registers of 16 floats go through all 99 ops together: independent chains, so the
// core overlaps their latencies. Then single registers, then a padded tail.
template <bool kTanh, int kLanes>
__attribute__((target("avx512f"))) inline void chain_regs(__m512* v) {
  const __m512 a = _mm512_set1_ps(1.01f);
  const __m512 b = _mm512_set1_ps(0.5f);
  const __m512 zero = _mm512_set1_ps(0.0f);
  for (int r = 0; r < kRounds; ++r) {
    for (int k = 0; k < kLanes; ++k) v[k] = _mm512_add_ps(_mm512_mul_ps(v[k], a), b);
    for (int k = 0; k < kLanes; ++k)
      // relu as tracegraph defines it: x < 0 ? 0 : x (NaN passes through).
      v[k] = kTanh ? _ZGVeN16v_tanhf(v[k])
                   : _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v[k], zero, _CMP_LT_OQ), v[k], zero);
  }
}
template <bool kTanh>
__attribute__((target("avx512f"))) void hand_fused(const float* x, float* y, int64_t n) {
  constexpr int kLanes = 8;
  int64_t i = 0;
  for (; i + 16 * kLanes <= n; i += 16 * kLanes) {
    __m512 v[kLanes];
    for (int k = 0; k < kLanes; ++k) v[k] = _mm512_loadu_ps(x + i + 16 * k);
    chain_regs<kTanh, kLanes>(v);
    for (int k = 0; k < kLanes; ++k) _mm512_storeu_ps(y + i + 16 * k, v[k]);
  }
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_loadu_ps(x + i);
    chain_regs<kTanh, 1>(&v);
    _mm512_storeu_ps(y + i, v);
  }
  if (i < n) {
    alignas(64) float buf[16] = {};
    std::memcpy(buf, x + i, static_cast<std::size_t>(n - i) * sizeof(float));
    __m512 v = _mm512_load_ps(buf);
    chain_regs<kTanh, 1>(&v);
    _mm512_store_ps(buf, v);
    std::memcpy(y + i, buf, static_cast<std::size_t>(n - i) * sizeof(float));
  }
}
#pragma GCC pop_options

Tensor input_of(int64_t n) { return tg::random_uniform({n}, -2.0f, 2.0f, 11); }

void set_items(benchmark::State& state, int64_t n) {
  state.counters["work_per_iter"] = static_cast<double>(n);
  state.SetItemsProcessed(state.iterations() * n);
}

template <bool kTanh, bool kOptimize>
void traced(benchmark::State& state, int64_t n) {
  auto f = tg::function([](const Tensor& t) { return chain<kTanh>(t); }, {.optimize = kOptimize});
  const Tensor x = input_of(n);
  tg_bench::reach_steady_state([&] { benchmark::DoNotOptimize(f(x)); });
  const long faults = tg_bench::minor_faults();
  for (auto _ : state) benchmark::DoNotOptimize(f(x));
  tg_bench::report_faults(state, faults);
  set_items(state, n);
}

template <bool kTanh>
void hand(benchmark::State& state, int64_t n) {
  const Tensor x = input_of(n);
  Tensor y = tg::zeros({n});
  const float* px = tg::detail::data_of<float>(x);
  float* py = tg::detail::data_of<float>(y);
  const long faults = tg_bench::minor_faults();
  for (auto _ : state) {
    hand_fused<kTanh>(px, py, n);
    benchmark::DoNotOptimize(py);
    benchmark::ClobberMemory();
  }
  tg_bench::report_faults(state, faults);
  set_items(state, n);
}

template <class Fn>
void add_bench(const std::string& name, Fn fn, int64_t n) {
  benchmark::RegisterBenchmark(name.c_str(), fn, n)
      ->UseRealTime()
      ->MinTime(0.2)
      ->MinWarmUpTime(0.05)
      ->Unit(benchmark::kMicrosecond);
}

const bool registered = [] {
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f");
  for (const auto& [label, n] : {std::pair<std::string, int64_t>{"16", 16},
                                 std::pair<std::string, int64_t>{"1M", int64_t{1} << 20}}) {
    add_bench("fusion/tanh_chain/" + label + "/traced", traced<true, true>, n);
    add_bench("fusion/relu_chain/" + label + "/traced", traced<false, true>, n);
    add_bench("fusion/tanh_chain/" + label + "/traced_unfused", traced<true, false>, n);
    add_bench("fusion/relu_chain/" + label + "/traced_unfused", traced<false, false>, n);
    if (avx512) {
      add_bench("fusion/tanh_chain/" + label + "/hand_fused_avx512", hand<true>, n);
      add_bench("fusion/relu_chain/" + label + "/hand_fused_avx512", hand<false>, n);
    }
  }
  return true;
}();

}  // namespace
