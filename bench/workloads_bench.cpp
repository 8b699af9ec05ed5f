// The workloads of the benchmark table (issues 5 and 13), eager and traced: the 100-op
// elementwise chains (16 floats and 1M floats, tanh and relu variants), an MLP train step and its
// GEMMs called through cblas directly, the cost of tracing and optimising long chains, and the
// peak memory of the traced 1M chain. The chains' hand-written references are in
// reference_bench.cpp; bench/torch_bench.py runs the same workloads in PyTorch; bench/run puts
// them in one table.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_util.h"
#include "core/buffer.h"
#include "core/tensor_impl.h"
#include "kernels/simd_math.h"
#include "tracegraph/tracegraph.h"
#include "workloads.h"
#if TG_BENCH_HAVE_TAPE
#include "demo_util.h"  // examples/: the flagship demo's model and train step
#endif

namespace {

using tg::Tensor;

using namespace tg_bench;  // the workloads: input_of, chain, Mlp, train_step_* (workloads.h)

constexpr int64_t kSmall = 16;
constexpr int64_t kLarge = int64_t{1} << 20;

void set_items(benchmark::State& state, int64_t n) {
  state.SetItemsProcessed(state.iterations() * n * 3 * kChainRounds);
}

template <Act kAct, int64_t kN>
void BM_ChainEager(benchmark::State& state) {
  tg_bench::guarded(state, [&] {
    const Tensor x = input_of(kN);
    tg_bench::reach_steady_state([&] { benchmark::DoNotOptimize(chain<kAct>(x)); });
    const long faults = tg_bench::minor_faults();
    for (auto _ : state) benchmark::DoNotOptimize(chain<kAct>(x));
    tg_bench::report_faults(state, faults);
    set_items(state, kN);
  });
}

template <Act kAct, int64_t kN>
void BM_ChainTraced(benchmark::State& state) {
  tg_bench::guarded(state, [&] {
    const Tensor x = input_of(kN);
    auto f = tg::function([](const Tensor& t) { return chain<kAct>(t); });
    tg_bench::reach_steady_state([&] { benchmark::DoNotOptimize(f(x)); });
    const long faults = tg_bench::minor_faults();
    for (auto _ : state) benchmark::DoNotOptimize(f(x));
    tg_bench::report_faults(state, faults);
    set_items(state, kN);
  });
}

// One full pass per op into a reused buffer: what an unfused interpreter without allocation does.
template <Act kAct>
void unfused_loop(const float* x, float* y, int64_t n) {
  std::memcpy(y, x, static_cast<std::size_t>(n) * sizeof(float));
  for (int r = 0; r < kChainRounds; ++r) {
    for (int64_t i = 0; i < n; ++i) y[i] = y[i] * 1.01f;
    for (int64_t i = 0; i < n; ++i) y[i] = y[i] + 0.5f;
    if constexpr (kAct == Act::kTanh) tg::detail::simd::tanh_f32(y, y, n);
    else for (int64_t i = 0; i < n; ++i) y[i] = std::max(y[i], 0.0f);
  }
}

template <Act kAct, int64_t kN>
void BM_ChainUnfused(benchmark::State& state) {
  const int64_t n = kN;
  const Tensor x = input_of(n);
  Tensor y = tg::zeros({n});
  const float* px = tg::detail::data_of<float>(x);
  float* py = tg::detail::data_of<float>(y);
  const long faults = tg_bench::minor_faults();
  for (auto _ : state) {
    unfused_loop<kAct>(px, py, n);
    benchmark::DoNotOptimize(py);
    benchmark::ClobberMemory();
  }
  tg_bench::report_faults(state, faults);
  set_items(state, n);
}

#define TG_CHAIN_BENCH(act_name, act, n, n_name, min_time)                                   \
  BENCHMARK(BM_ChainEager<act, n>)->Name("chain/" act_name "/" n_name "/eager")              \
      ->MinTime(min_time)->Unit(benchmark::kMicrosecond);                                    \
  BENCHMARK(BM_ChainTraced<act, n>)->Name("chain/" act_name "/" n_name "/traced")            \
      ->MinTime(min_time)->Unit(benchmark::kMicrosecond);                                    \
  BENCHMARK(BM_ChainUnfused<act, n>)->Name("chain/" act_name "/" n_name "/unfused_cpp")      \
      ->MinTime(min_time)->Unit(benchmark::kMicrosecond);

TG_CHAIN_BENCH("tanh", Act::kTanh, kSmall, "16", 0.1)
TG_CHAIN_BENCH("relu", Act::kRelu, kSmall, "16", 0.1)
TG_CHAIN_BENCH("tanh", Act::kTanh, kLarge, "1M", 0.3)
TG_CHAIN_BENCH("relu", Act::kRelu, kLarge, "1M", 0.3)

// One add on two 1-element float32 tensors through a traced function's cached call (the eager
// side is overhead/add_f32_1elem/tracegraph).
void BM_Add1Traced(benchmark::State& state) {
  tg_bench::guarded(state, [&] {
    auto add = tg::function([](const Tensor& a, const Tensor& b) { return a + b; });
    const Tensor a = tg::constant({1.5f}), b = tg::constant({2.5f});
    tg_bench::reach_steady_state([&] { benchmark::DoNotOptimize(add(a, b)); });
    for (auto _ : state) benchmark::DoNotOptimize(add(a, b));
  });
}
BENCHMARK(BM_Add1Traced)->Name("call/add_f32_1elem/traced")->MinTime(0.2)
    ->Unit(benchmark::kNanosecond);

// ---- MLP train step: batch 64, 784-256-256-10, softmax cross-entropy, SGD -------------------
template <bool kTraced>
void BM_MlpManual(benchmark::State& state) {
  tg_bench::guarded(state, [&] {
    Mlp m;
    auto f = tg::function([&m](const Tensor& x, const Tensor& y) { return train_step_manual(m, x, y); });
    auto step = [&] { return kTraced ? f(m.x, m.y) : train_step_manual(m, m.x, m.y); };
    tg_bench::reach_steady_state([&] { benchmark::DoNotOptimize(step()); });
    for (auto _ : state) benchmark::DoNotOptimize(step());
  });
}
BENCHMARK(BM_MlpManual<false>)->Name("mlp/train_step_manual/eager")->MinTime(0.3)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MlpManual<true>)->Name("mlp/train_step_manual/traced")->MinTime(0.3)
    ->Unit(benchmark::kMicrosecond);

#if TG_BENCH_HAVE_TAPE
template <bool kTraced>
void BM_MlpTape(benchmark::State& state) {
  tg_bench::guarded(state, [&] {
    Mlp m;
    auto f = tg::function([&m](const Tensor& x, const Tensor& y) { return train_step_tape(m, x, y); });
    auto step = [&] { return kTraced ? f(m.x, m.y) : train_step_tape(m, m.x, m.y); };
    tg_bench::reach_steady_state([&] { benchmark::DoNotOptimize(step()); });
    for (auto _ : state) benchmark::DoNotOptimize(step());
  });
}
BENCHMARK(BM_MlpTape<false>)->Name("mlp/train_step/eager")->MinTime(0.3)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MlpTape<true>)->Name("mlp/train_step/traced")->MinTime(0.3)->Unit(benchmark::kMicrosecond);

// The same step traced once for any batch size (the batch dim None, as the demo's train_step),
// run at batch 64: what a graph that cannot see the batch size costs over one that can.
void BM_MlpTapeNoneBatch(benchmark::State& state) {
  tg_bench::guarded(state, [&] {
    Mlp m;
    auto f = tg::function([&m](const Tensor& x, const Tensor& y) { return train_step_tape(m, x, y); },
                          {.input_signature = std::vector<tg::TensorSpec>{tg::TensorSpec({tg::None, kIn}, tg::float32),
                                                                          tg::TensorSpec({tg::None, kOut}, tg::float32)}});
    tg_bench::reach_steady_state([&] { benchmark::DoNotOptimize(f(m.x, m.y)); });
    for (auto _ : state) benchmark::DoNotOptimize(f(m.x, m.y));
  });
}
BENCHMARK(BM_MlpTapeNoneBatch)->Name("mlp/train_step/traced_none_batch")->MinTime(0.3)->Unit(benchmark::kMicrosecond);

// The flagship demo's train step (examples/demo.cpp), built from the demo's own code
// (examples/demo_util.h): its 784-256-256-10 MLP of tg::nn::Dense layers, sparse softmax
// cross-entropy under a tape, Adam(1e-3), traced with the None-batch input signature and called
// at batch 128. As in the demo, one eager step first creates Adam's slot Variables. The same
// step driven from Python is bench/python_bench.py's python/demo/train_step/traced; bench/run
// puts the two side by side. kMixedBf16: the same model built under Keras's mixed_bfloat16
// policy (float32 Variables, bfloat16 compute), against the float32 step.
template <bool kMixedBf16>
void BM_DemoTrainStep(benchmark::State& state) {
  tg_bench::guarded(state, [&] {
    const tg::nn::DTypePolicy before = tg::nn::global_policy();
    if (kMixedBf16) tg::nn::set_global_policy("mixed_bfloat16");
    demo::Mlp model;
    tg::nn::set_global_policy(before);
    tg::optim::Adam opt(demo::kMlpLearningRate);
    constexpr auto kDemoBatch = static_cast<int64_t>(demo::kMlpBatch);
    const Tensor x = random_tensor({kDemoBatch, kIn}, 0.5f, 5) + 0.5f;  // pixels in [0, 1]
    std::vector<int32_t> labels(demo::kMlpBatch);
    for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>(i % kOut);
    const Tensor y = tg::constant(labels, tg::TensorShape({kDemoBatch}), tg::int32);
    (void)demo::mlp_train_step(model, opt, x, y);
    auto train_step = tg::function(
        [&](const Tensor& xs, const Tensor& ys) { return demo::mlp_train_step(model, opt, xs, ys); },
        {.name = "train_step", .input_signature = demo::mlp_train_step_signature(), .arg_names = {"x", "y"}});
    tg_bench::reach_steady_state([&] { benchmark::DoNotOptimize(train_step(x, y)); });
    for (auto _ : state) benchmark::DoNotOptimize(train_step(x, y));
    if (train_step.tracing_count() != 1)
      throw std::runtime_error("demo/train_step/traced: the step was traced " +
                              std::to_string(train_step.tracing_count()) + " times, expected once");
  });
}
BENCHMARK(BM_DemoTrainStep<false>)->Name("demo/train_step/traced")->MinTime(0.3)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DemoTrainStep<true>)->Name("demo/train_step/mixed_bfloat16")->MinTime(0.3)->Unit(benchmark::kMicrosecond);

// The CNN demo's train step (examples/cnn_demo.cpp, its network and step from demo_util.h):
// two 3x3 SAME conv + max-pool blocks, dense 128 with dropout, dense 10, Adam(1e-3), traced with
// a None batch and called at batch 128 after one eager step. kMixedBf16: built under
// mixed_bfloat16 (float32 Variables; convolutions and products in bfloat16 on AVX512_BF16).
template <bool kMixedBf16>
void BM_CnnDemoTrainStep(benchmark::State& state) {
  tg_bench::guarded(state, [&] {
    const tg::nn::DTypePolicy before = tg::nn::global_policy();
    if (kMixedBf16) tg::nn::set_global_policy("mixed_bfloat16");
    demo::Cnn model;
    tg::nn::set_global_policy(before);
    tg::optim::Adam opt(demo::kCnnLearningRate);
    constexpr auto kB = static_cast<int64_t>(demo::kCnnBatch);
    const Tensor x = random_tensor({kB, 784}, 0.5f, 7) + 0.5f;  // pixels in [0, 1]
    std::vector<int32_t> labels(demo::kCnnBatch);
    for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>(i % 10);
    const Tensor y = tg::constant(labels, tg::TensorShape({kB}), tg::int32);
    (void)demo::cnn_train_step(model, opt, x, y);
    auto train_step = tg::function(
        [&](const Tensor& xs, const Tensor& ys) { return demo::cnn_train_step(model, opt, xs, ys); },
        {.name = "cnn_train_step", .input_signature = demo::mlp_train_step_signature(), .arg_names = {"x", "y"}});
    tg_bench::reach_steady_state([&] { benchmark::DoNotOptimize(train_step(x, y)); });
    for (auto _ : state) benchmark::DoNotOptimize(train_step(x, y));
    if (train_step.tracing_count() != 1)
      throw std::runtime_error("demo/cnn_train_step: the step was traced " + std::to_string(train_step.tracing_count()) +
                               " times, expected once");
  });
}
BENCHMARK(BM_CnnDemoTrainStep<false>)->Name("demo/cnn_train_step/traced")->MinTime(0.5)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CnnDemoTrainStep<true>)->Name("demo/cnn_train_step/mixed_bfloat16")->MinTime(0.5)
    ->Unit(benchmark::kMillisecond);
#endif

// The step's eight GEMMs (three forward; dW3, dH2, dW2, dH1, dW1 backward) through cblas
// directly into pre-touched buffers: the floor a train step cannot go below. On the column's
// threads (bench/run sets TG_NUM_THREADS and OPENBLAS_NUM_THREADS alike; set here too, so that
// the reference follows tracegraph's count even when only TG_NUM_THREADS was given).
void BM_MlpGemms(benchmark::State& state) {
  openblas_set_num_threads(tg::config::num_threads());
  auto buf = [](int64_t n) { return std::vector<float>(static_cast<std::size_t>(n), 0.01f); };
  auto x = buf(kBatch * kIn), w1 = buf(kIn * kHidden), w2 = buf(kHidden * kHidden),
       w3 = buf(kHidden * kOut), h1 = buf(kBatch * kHidden), h2 = buf(kBatch * kHidden),
       lo = buf(kBatch * kOut), dw1 = buf(kIn * kHidden), dw2 = buf(kHidden * kHidden),
       dw3 = buf(kHidden * kOut), dh1 = buf(kBatch * kHidden), dh2 = buf(kBatch * kHidden);
  // C[m,n] = op(A) op(B), row-major.
  auto gemm = [](bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a,
                static_cast<int>(ta ? m : k), b, static_cast<int>(tb ? k : n), 0.0f, c, static_cast<int>(n));
  };
  for (auto _ : state) {
    gemm(false, false, kBatch, kHidden, kIn, x.data(), w1.data(), h1.data());
    gemm(false, false, kBatch, kHidden, kHidden, h1.data(), w2.data(), h2.data());
    gemm(false, false, kBatch, kOut, kHidden, h2.data(), w3.data(), lo.data());
    gemm(true, false, kHidden, kOut, kBatch, h2.data(), lo.data(), dw3.data());
    gemm(false, true, kBatch, kHidden, kOut, lo.data(), w3.data(), dh2.data());
    gemm(true, false, kHidden, kHidden, kBatch, h1.data(), dh2.data(), dw2.data());
    gemm(false, true, kBatch, kHidden, kHidden, dh2.data(), w2.data(), dh1.data());
    gemm(true, false, kIn, kHidden, kBatch, x.data(), dh1.data(), dw1.data());
    benchmark::ClobberMemory();
  }
  tg_bench::let_openblas_workers_sleep(tg::config::num_threads());
}
BENCHMARK(BM_MlpGemms)->Name("mlp/train_step/gemms_cblas")->MinTime(0.3)->Unit(benchmark::kMicrosecond);

// ---- tracing + optimising cost ---------------------------------------------------------------
// A fresh function per iteration, so every iteration traces and optimises a chain of n ops
// (the tanh chain's pattern repeated). "us_per_op" must stay flat as n grows. One untimed
// trace first, as the other rows reach their steady state before timing: the 1k row averages
// hundreds of traces, and a first trace of a size pays the kernel's page faults for memory the
// next ones reuse. The process's first trace of each size is reported as "first_us_per_op"
// (the same figure in every repetition; bench/run prints it beside the row).
template <int64_t kOps>
void BM_TraceChain(benchmark::State& state) {
  tg_bench::guarded(state, [&] {
    const int64_t n = kOps;
    const Tensor x = input_of(kSmall);
    auto trace = [&] {
      auto f = tg::function([n](const Tensor& t) {
        Tensor y = t;
        for (int64_t i = 0; i < n; i += 3) y = tg::tanh(y * 1.01f + 0.5f);
        return y;
      });
      benchmark::DoNotOptimize(f.get_concrete_function(x));
    };
    const auto start = std::chrono::steady_clock::now();
    trace();
    static const double first_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    for (auto _ : state) trace();
    state.counters["us_per_op"] = benchmark::Counter(
        static_cast<double>(n) * 1e-6, benchmark::Counter::kIsIterationInvariantRate |
                                           benchmark::Counter::kInvert);
    state.counters["first_us_per_op"] = first_us / static_cast<double>(n);
  });
}
BENCHMARK(BM_TraceChain<99>)->Name("trace/chain/100")->Unit(benchmark::kMillisecond)
    ->MinTime(0.2);
BENCHMARK(BM_TraceChain<1000>)->Name("trace/chain/1k")->Unit(benchmark::kMillisecond)
    ->MinTime(0.2);
BENCHMARK(BM_TraceChain<10000>)->Name("trace/chain/10k")->Unit(benchmark::kMillisecond)
    ->MinTime(0.2);
// Two iterations, after the untimed one.
BENCHMARK(BM_TraceChain<100000>)->Name("trace/chain/100k")->Unit(benchmark::kMillisecond)
    ->Iterations(2);

// ---- peak memory of the traced 1M chain ---------------------------------------------------------
// Bytes of Buffers alive at the peak of one call beyond what was alive before it (the input) and
// the call's result: the intermediates (arena included, as the first call after tracing
// allocates it). Reported in units of the 4 MiB tensor as "extra_tensors".
template <Act kAct>
void BM_ChainPeakMemory(benchmark::State& state) {
  tg_bench::guarded(state, [&] {
    const Tensor x = input_of(kLarge);
    const double tensor_bytes = static_cast<double>(kLarge) * sizeof(float);
    double extra = 0;
    for (auto _ : state) {
      state.PauseTiming();
      auto f = tg::function([](const Tensor& t) { return chain<kAct>(t); });
      benchmark::DoNotOptimize(f.get_concrete_function(x));
      tg::config::release_cached_memory();
      const std::size_t before = tg::detail::live_buffer_bytes();
      tg::detail::reset_peak_buffer_bytes();
      state.ResumeTiming();
      Tensor y = f(x);
      state.PauseTiming();
      extra = static_cast<double>(tg::detail::peak_buffer_bytes() - before) - tensor_bytes;
      state.ResumeTiming();
    }
    state.counters["extra_bytes"] = extra;
    state.counters["extra_tensors"] = extra / tensor_bytes;
  });
}
BENCHMARK(BM_ChainPeakMemory<Act::kRelu>)->Name("memory/chain/relu/1M/traced")->Iterations(3)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ChainPeakMemory<Act::kTanh>)->Name("memory/chain/tanh/1M/traced")->Iterations(3)
    ->Unit(benchmark::kMillisecond);

}  // namespace
