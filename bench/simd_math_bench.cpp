// Float32 math throughput on an L1-resident buffer (4096 floats, in place of a kernel's tile):
// tracegraph's routines on each instruction-set path against libmvec called directly (where
// libmvec has the function; softplus, gelu and elu are built on its routines) and, when
// the build finds libsleef, SLEEF's 1.0-ULP (u10) and 3.5-ULP (u35) routines, the library used
// before (docs/DECISIONS.md). Items are elements: items_per_second / 1e9 is elements/ns.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/simd_math.h"

extern "C" {
__m512 _ZGVeN16v_expf(__m512);
__m512 _ZGVeN16v_logf(__m512);
__m512 _ZGVeN16v_tanhf(__m512);
__m512 _ZGVeN16v_sinf(__m512);
__m512 _ZGVeN16v_cosf(__m512);
__m512 _ZGVeN16v_log1pf(__m512);
__m512 _ZGVeN16v_expm1f(__m512);
__m512 _ZGVeN16v_erff(__m512);
__m256 _ZGVdN8v_expf(__m256);
__m256 _ZGVdN8v_logf(__m256);
__m256 _ZGVdN8v_tanhf(__m256);
__m256 _ZGVdN8v_sinf(__m256);
__m256 _ZGVdN8v_cosf(__m256);
__m256 _ZGVdN8v_log1pf(__m256);
__m256 _ZGVdN8v_expm1f(__m256);
__m256 _ZGVdN8v_erff(__m256);
#if TG_BENCH_HAVE_SLEEF
// Declared here: sleef.h declares the vector forms only when the whole file targets the ISA.
#define TG_SLEEF_DECLARE(f)                                                         \
  __m512 Sleef_##f##f16_u10(__m512);                                                \
  __m256 Sleef_##f##f8_u10(__m256);
#define TG_SLEEF_DECLARE_U35(f)                                                     \
  __m512 Sleef_##f##f16_u35(__m512);                                                \
  __m256 Sleef_##f##f8_u35(__m256);
TG_SLEEF_DECLARE(exp)
TG_SLEEF_DECLARE(log)
TG_SLEEF_DECLARE(tanh)
TG_SLEEF_DECLARE(sin)
TG_SLEEF_DECLARE(cos)
TG_SLEEF_DECLARE_U35(log)  // SLEEF has no u35 expf
TG_SLEEF_DECLARE_U35(tanh)
TG_SLEEF_DECLARE_U35(sin)
TG_SLEEF_DECLARE_U35(cos)
#undef TG_SLEEF_DECLARE
#undef TG_SLEEF_DECLARE_U35
#endif
}

namespace {

namespace simd = tg::detail::simd;
constexpr int64_t kN = 4096;

struct Range {
  float lo, hi;
};

std::vector<float> inputs(Range r) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(r.lo, r.hi);
  std::vector<float> x(kN);
  for (float& v : x) v = dist(gen);
  return x;
}

void set_items(benchmark::State& state) {
  state.counters["work_per_iter"] = static_cast<double>(kN);
  state.SetItemsProcessed(state.iterations() * kN);
}

// Out of place, so that every iteration sees the same inputs.
void run_tracegraph(benchmark::State& state, simd::MathFn f, Range r) {
  const std::vector<float> x = inputs(r);
  std::vector<float> y(kN);
  for (auto _ : state) {
    f(x.data(), y.data(), kN);
    benchmark::ClobberMemory();
  }
  set_items(state);
}

template <__m512 (*F)(__m512)>
__attribute__((target("avx512f"))) void run16(benchmark::State& state, Range r) {
  const std::vector<float> x = inputs(r);
  std::vector<float> y(kN);
  for (auto _ : state) {
    for (int64_t i = 0; i < kN; i += 16) _mm512_storeu_ps(&y[i], F(_mm512_loadu_ps(&x[i])));
    benchmark::ClobberMemory();
  }
  set_items(state);
}

template <__m256 (*F)(__m256)>
__attribute__((target("avx2,fma"))) void run8(benchmark::State& state, Range r) {
  const std::vector<float> x = inputs(r);
  std::vector<float> y(kN);
  for (auto _ : state) {
    for (int64_t i = 0; i < kN; i += 8) _mm256_storeu_ps(&y[i], F(_mm256_loadu_ps(&x[i])));
    benchmark::ClobberMemory();
  }
  set_items(state);
}

// The sigmoid tracegraph had with SLEEF, 1 / (1 + e^-x), as a comparison for its own form.
template <__m512 (*Exp)(__m512)>
__attribute__((target("avx512f"))) __m512 sigmoid_naive16(__m512 v) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(one, _mm512_add_ps(one, Exp(_mm512_sub_ps(_mm512_setzero_ps(), v))));
}

void add(const std::string& name, auto fn, auto... args) {
  benchmark::RegisterBenchmark(name.c_str(), fn, args...)
      ->MinTime(0.2)
      ->MinWarmUpTime(0.05)
      ->Unit(benchmark::kMicrosecond);
}

const bool registered = [] {
  const Range exp_r{-10.f, 10.f}, log_r{0.01f, 100.f}, tanh_r{-5.f, 5.f}, trig_r{-100.f, 100.f};
  // "tracegraph": the dispatched functions every kernel calls; the other paths by name.
  const Range log1p_r{-0.99f, 10.f};
  const simd::MathFns dispatched = {
      .name = "tracegraph",
#define TG_DISPATCHED(Op, F, routine, ...) .routine = &simd::routine##_f32,
      TG_SIMD_MATH_ROUTINES(TG_DISPATCHED)
#undef TG_DISPATCHED
  };
  std::vector<const simd::MathFns*> paths = {&dispatched};
  for (simd::Isa isa : {simd::Isa::kAvx2, simd::Isa::kScalar})
    if (simd::cpu_has(isa)) paths.push_back(&simd::math_fns(isa));
  for (const simd::MathFns* f : paths) {
    const std::string s = f == &dispatched ? "/tracegraph" : std::string("/tracegraph_") + f->name;
    add("simd_math/exp" + s, run_tracegraph, f->exp, exp_r);
    add("simd_math/log" + s, run_tracegraph, f->log, log_r);
    add("simd_math/tanh" + s, run_tracegraph, f->tanh, tanh_r);
    add("simd_math/sigmoid" + s, run_tracegraph, f->sigmoid, tanh_r);
    add("simd_math/sin" + s, run_tracegraph, f->sin, trig_r);
    add("simd_math/cos" + s, run_tracegraph, f->cos, trig_r);
    add("simd_math/log1p" + s, run_tracegraph, f->log1p, log1p_r);
    add("simd_math/expm1" + s, run_tracegraph, f->expm1, tanh_r);
    add("simd_math/erf" + s, run_tracegraph, f->erf, tanh_r);
    add("simd_math/softplus" + s, run_tracegraph, f->softplus, tanh_r);
    add("simd_math/gelu" + s, run_tracegraph, f->gelu, tanh_r);
    add("simd_math/gelu_tanh" + s, run_tracegraph, f->gelu_tanh, tanh_r);
    add("simd_math/elu" + s, run_tracegraph, f->elu, tanh_r);
  }
  if (simd::cpu_has(simd::Isa::kAvx512)) {
    add("simd_math/exp/libmvec", run16<_ZGVeN16v_expf>, exp_r);
    add("simd_math/log/libmvec", run16<_ZGVeN16v_logf>, log_r);
    add("simd_math/tanh/libmvec", run16<_ZGVeN16v_tanhf>, tanh_r);
    add("simd_math/sigmoid/libmvec_naive", run16<sigmoid_naive16<_ZGVeN16v_expf>>, tanh_r);
    add("simd_math/sin/libmvec", run16<_ZGVeN16v_sinf>, trig_r);
    add("simd_math/cos/libmvec", run16<_ZGVeN16v_cosf>, trig_r);
    add("simd_math/log1p/libmvec", run16<_ZGVeN16v_log1pf>, log1p_r);
    add("simd_math/expm1/libmvec", run16<_ZGVeN16v_expm1f>, tanh_r);
    add("simd_math/erf/libmvec", run16<_ZGVeN16v_erff>, tanh_r);
  }
  if (simd::cpu_has(simd::Isa::kAvx2)) {
    add("simd_math/exp/libmvec_avx2", run8<_ZGVdN8v_expf>, exp_r);
    add("simd_math/log/libmvec_avx2", run8<_ZGVdN8v_logf>, log_r);
    add("simd_math/tanh/libmvec_avx2", run8<_ZGVdN8v_tanhf>, tanh_r);
    add("simd_math/sin/libmvec_avx2", run8<_ZGVdN8v_sinf>, trig_r);
    add("simd_math/cos/libmvec_avx2", run8<_ZGVdN8v_cosf>, trig_r);
    add("simd_math/log1p/libmvec_avx2", run8<_ZGVdN8v_log1pf>, log1p_r);
    add("simd_math/expm1/libmvec_avx2", run8<_ZGVdN8v_expm1f>, tanh_r);
    add("simd_math/erf/libmvec_avx2", run8<_ZGVdN8v_erff>, tanh_r);
  }
#if TG_BENCH_HAVE_SLEEF
  if (simd::cpu_has(simd::Isa::kAvx512)) {
    add("simd_math/exp/sleef_u10", run16<Sleef_expf16_u10>, exp_r);
    add("simd_math/log/sleef_u10", run16<Sleef_logf16_u10>, log_r);
    add("simd_math/log/sleef_u35", run16<Sleef_logf16_u35>, log_r);
    add("simd_math/tanh/sleef_u10", run16<Sleef_tanhf16_u10>, tanh_r);
    add("simd_math/tanh/sleef_u35", run16<Sleef_tanhf16_u35>, tanh_r);
    add("simd_math/sigmoid/sleef_u10_naive", run16<sigmoid_naive16<Sleef_expf16_u10>>, tanh_r);
    add("simd_math/sin/sleef_u10", run16<Sleef_sinf16_u10>, trig_r);
    add("simd_math/sin/sleef_u35", run16<Sleef_sinf16_u35>, trig_r);
    add("simd_math/cos/sleef_u10", run16<Sleef_cosf16_u10>, trig_r);
    add("simd_math/cos/sleef_u35", run16<Sleef_cosf16_u35>, trig_r);
  }
  if (simd::cpu_has(simd::Isa::kAvx2)) {
    add("simd_math/exp/sleef_u10_avx2", run8<Sleef_expf8_u10>, exp_r);
    add("simd_math/log/sleef_u10_avx2", run8<Sleef_logf8_u10>, log_r);
    add("simd_math/log/sleef_u35_avx2", run8<Sleef_logf8_u35>, log_r);
    add("simd_math/tanh/sleef_u10_avx2", run8<Sleef_tanhf8_u10>, tanh_r);
    add("simd_math/tanh/sleef_u35_avx2", run8<Sleef_tanhf8_u35>, tanh_r);
    add("simd_math/sin/sleef_u10_avx2", run8<Sleef_sinf8_u10>, trig_r);
    add("simd_math/sin/sleef_u35_avx2", run8<Sleef_sinf8_u35>, trig_r);
    add("simd_math/cos/sleef_u10_avx2", run8<Sleef_cosf8_u10>, trig_r);
    add("simd_math/cos/sleef_u35_avx2", run8<Sleef_cosf8_u35>, trig_r);
  }
#endif
  return true;
}();

}  // namespace
