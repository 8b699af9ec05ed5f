// The two convolutions of a small Fashion-MNIST CNN at batch 128 (3x3, stride 1, SAME: 28x28x1
// -> 32 channels, and 14x14x32 -> 64 after a 2x2 pool), forward and forward + backward (both
// filter gradients and the second layer's input gradient: the first layer's input is data),
// through tracegraph eagerly and traced, and through two hand-written references
// (reference_cpp.cpp): im2col + cblas_sgemm, and direct loop nests. bench/torch_bench.py runs
// the same in PyTorch.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.h"
#include "kernels/conv_kernels.h"
#include "kernels/onednn_conv.h"
#include "reference_cpp.h"
#include "tracegraph/tracegraph.h"
#include "workloads.h"

namespace {

using tg::Tensor;

constexpr int64_t kConvBatch = 128;

struct CnnConvs {
  Tensor x1 = tg_bench::random_tensor({kConvBatch, 28, 28, 1}, 1.0f, 11);
  Tensor w1 = tg_bench::random_tensor({3, 3, 1, 32}, 0.3f, 12);
  Tensor x2 = tg_bench::random_tensor({kConvBatch, 14, 14, 32}, 1.0f, 13);
  Tensor w2 = tg_bench::random_tensor({3, 3, 32, 64}, 0.06f, 14);
  Tensor dy1 = tg_bench::random_tensor({kConvBatch, 28, 28, 32}, 1.0f, 15);
  Tensor dy2 = tg_bench::random_tensor({kConvBatch, 14, 14, 64}, 1.0f, 16);
};

std::vector<Tensor> forward(const Tensor& x1, const Tensor& w1, const Tensor& x2, const Tensor& w2) {
  return {tg::conv2d(x1, w1, {1, 1}, tg::Padding::Same), tg::conv2d(x2, w2, {1, 1}, tg::Padding::Same)};
}

// The outputs and the gradients a train step needs, given the outputs' gradients: Y1, Y2, dW1,
// dW2, dX2. The outputs are returned because a step computes its loss from them; without them
// the traced graph would drop both forward convolutions (no gradient reads them).
std::vector<Tensor> forward_backward(const Tensor& x1, const Tensor& w1, const Tensor& x2, const Tensor& w2,
                                     const Tensor& dy1, const Tensor& dy2) {
  tg::GradientTape tape;
  tape.watch(w1);
  tape.watch(x2);
  tape.watch(w2);
  std::vector<Tensor> y = forward(x1, w1, x2, w2);
  for (Tensor& g : tg::detail::tape_gradient(tape, y, {dy1, dy2}, {w1, w2, x2})) y.push_back(g);
  return y;
}

template <bool kTraced>
void BM_ConvForward(benchmark::State& state) {
  tg_bench::guarded(state, [&] {
    CnnConvs c;
    auto f = tg::function([](const Tensor& a, const Tensor& b, const Tensor& c2, const Tensor& d) { return forward(a, b, c2, d); });
    auto step = [&] { return kTraced ? f(c.x1, c.w1, c.x2, c.w2) : forward(c.x1, c.w1, c.x2, c.w2); };
    tg_bench::reach_steady_state([&] { benchmark::DoNotOptimize(step()); });
    for (auto _ : state) benchmark::DoNotOptimize(step());
  });
}
BENCHMARK(BM_ConvForward<false>)->Name("cnn/conv2d/forward/eager")->MinTime(0.5)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ConvForward<true>)->Name("cnn/conv2d/forward/traced")->MinTime(0.5)->Unit(benchmark::kMillisecond);

template <bool kTraced>
void BM_ConvForwardBackward(benchmark::State& state) {
  tg_bench::guarded(state, [&] {
    CnnConvs c;
    auto f = tg::function([](const Tensor& a, const Tensor& b, const Tensor& c2, const Tensor& d, const Tensor& e, const Tensor& g) {
      return forward_backward(a, b, c2, d, e, g);
    });
    auto step = [&] {
      return kTraced ? f(c.x1, c.w1, c.x2, c.w2, c.dy1, c.dy2)
                     : forward_backward(c.x1, c.w1, c.x2, c.w2, c.dy1, c.dy2);
    };
    tg_bench::reach_steady_state([&] { benchmark::DoNotOptimize(step()); });
    for (auto _ : state) benchmark::DoNotOptimize(step());
  });
}
BENCHMARK(BM_ConvForwardBackward<false>)->Name("cnn/conv2d/forward_backward/eager")->MinTime(0.5)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ConvForwardBackward<true>)->Name("cnn/conv2d/forward_backward/traced")->MinTime(0.5)
    ->Unit(benchmark::kMillisecond);

// The references on plain buffers allocated and touched once, outside the timed loop (they get
// what a hand-written program would keep between steps; tracegraph allocates per call):
// im2col + cblas_sgemm, or the direct loop nests (kDirect).
template <bool kBackward, bool kDirect>
void BM_ConvReference(benchmark::State& state) {
  const int threads = tg::config::num_threads();
  auto buf = [](int64_t n) { return std::vector<float>(static_cast<std::size_t>(n), 0.01f); };
  const int n = static_cast<int>(kConvBatch);
  auto x1 = buf(n * 28 * 28), w1 = buf(9 * 32), x2 = buf(n * 14 * 14 * 32), w2 = buf(9 * 32 * 64);
  auto y1 = buf(n * 28 * 28 * 32), y2 = buf(n * 14 * 14 * 64), dw1 = buf(9 * 32), dw2 = buf(9 * 32 * 64),
       dx2 = buf(n * 14 * 14 * 32);
  // im2col's blocks, or the direct loops' per-thread filter-gradient partials.
  auto scratch = buf(kDirect ? int64_t{threads} * 9 * 32 * 64 : int64_t{n} * 14 * 14 * 9 * 32);
  namespace ref = tg_bench::reference;
  auto conv = [&](const float* x, int hw, int c, const float* w, int oc, float* y) {
    if constexpr (kDirect) ref::conv2d_same_direct(x, n, hw, hw, c, w, 3, 3, oc, y, threads);
    else ref::conv2d_same(x, n, hw, hw, c, w, 3, 3, oc, y, scratch.data(), threads);
  };
  auto backward = [&](const float* x, int hw, int c, const float* w, int oc, const float* dy, float* dw, float* dx) {
    if constexpr (kDirect) ref::conv2d_same_direct_backward(x, n, hw, hw, c, w, 3, 3, oc, dy, dw, dx, scratch.data(), threads);
    else ref::conv2d_same_backward(x, n, hw, hw, c, w, 3, 3, oc, dy, dw, dx, scratch.data(), threads);
  };
  for (auto _ : state) {
    conv(x1.data(), 28, 1, w1.data(), 32, y1.data());
    conv(x2.data(), 14, 32, w2.data(), 64, y2.data());
    if (kBackward) {
      // y1 and y2 stand in for the output gradients: same shapes, and the arithmetic does not
      // depend on the values.
      backward(x1.data(), 28, 1, w1.data(), 32, y1.data(), dw1.data(), nullptr);
      backward(x2.data(), 14, 32, w2.data(), 64, y2.data(), dw2.data(), dx2.data());
    }
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_ConvReference<false, false>)->Name("cnn/conv2d/forward/reference")->MinTime(0.5)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ConvReference<true, false>)->Name("cnn/conv2d/forward_backward/reference")->MinTime(0.5)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ConvReference<false, true>)->Name("cnn/conv2d/forward/reference_direct")->MinTime(0.5)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ConvReference<true, true>)->Name("cnn/conv2d/forward_backward/reference_direct")->MinTime(0.5)
    ->Unit(benchmark::kMillisecond);

}  // namespace

// ---- Per layer: the own kernels against oneDNN's (issue 36) ----
// The CNN's two convolutions and resnet18's layers, each direction on raw buffers through the
// kernel entry points (no op dispatch), at the thread count given as the argument:
// "own" forces the own kernels, "onednn" oneDNN on NHWC as stored, "onednn_blocked" oneDNN on
// its blocked layouts with reorders on every call. conv_kernels.cpp's onednn_wins comes from
// these medians. They set the thread count per run, and 360 of them take minutes, so they are
// registered only on request: TG_BENCH_CONV_LAYERS=1 tg_bench --benchmark_filter=conv_layers/
namespace {

struct LayerShape {
  const char* name;
  int64_t n, hw, c, k, oc, stride, pad;  // square images and windows, explicit padding each side
};

constexpr LayerShape kLayers[] = {
    {"cnn1_b128", 128, 28, 1, 3, 32, 1, 1},     {"cnn2_b128", 128, 14, 32, 3, 64, 1, 1},
    {"cnn1_b256", 256, 28, 1, 3, 32, 1, 1},     {"cnn2_b256", 256, 14, 32, 3, 64, 1, 1},
    {"r18stem_b1", 1, 224, 3, 7, 64, 2, 3},     {"r18stem_b32", 32, 224, 3, 7, 64, 2, 3},
    {"r18l1_b1", 1, 56, 64, 3, 64, 1, 1},       {"r18l1_b32", 32, 56, 64, 3, 64, 1, 1},
    {"r18l2s2_b1", 1, 56, 64, 3, 128, 2, 1},    {"r18l2s2_b32", 32, 56, 64, 3, 128, 2, 1},
    {"r18l2_b1", 1, 28, 128, 3, 128, 1, 1},     {"r18l2_b32", 32, 28, 128, 3, 128, 1, 1},
    {"r18l3_b1", 1, 14, 256, 3, 256, 1, 1},     {"r18l3_b32", 32, 14, 256, 3, 256, 1, 1},
    {"r18l4_b1", 1, 7, 512, 3, 512, 1, 1},      {"r18l4_b32", 32, 7, 512, 3, 512, 1, 1},
    {"r18ds2_b1", 1, 56, 64, 1, 128, 2, 0},     {"r18ds2_b32", 32, 56, 64, 1, 128, 2, 0},
    {"r18ds4_b1", 1, 14, 256, 1, 512, 2, 0},    {"r18ds4_b32", 32, 14, 256, 1, 512, 2, 0},
};

tg::detail::ConvGeom layer_geom(const LayerShape& s) {
  const int64_t out = (s.hw + 2 * s.pad - s.k) / s.stride + 1;
  return {s.n, s.hw, s.hw, s.c, s.k, s.k, s.oc, out, out, s.stride, s.stride, 1, 1, s.pad, s.pad};
}

enum class LayerBackend { own, onednn, onednn_blocked };
enum class LayerDirection { forward, backprop_input, backprop_filter };

void BM_ConvLayer(benchmark::State& state, LayerShape shape, LayerDirection dir, LayerBackend backend) {
  namespace d = tg::detail;
  namespace dnn = tg::detail::onednn;
  // The process's count comes back afterwards: the rows run after this one must not inherit
  // this row's threads (a 1-thread column measures the calling thread's CPU time).
  struct RestoreThreads {
    int count = tg::config::num_threads();
    ~RestoreThreads() { tg::config::set_num_threads(count); }
  } restore;
  tg::config::set_num_threads(static_cast<int>(state.range(0)));
  const d::ConvGeom g = layer_geom(shape);
  // Buffers aligned to 64 bytes, as tracegraph's tensors are.
  std::vector<std::vector<float>> storage;
  auto buf = [&](int64_t n, float v) {
    storage.emplace_back(static_cast<std::size_t>(n + 16), v);
    const auto at = reinterpret_cast<std::uintptr_t>(storage.back().data());
    return reinterpret_cast<float*>((at + 63) & ~std::uintptr_t{63});
  };
  float* x = buf(g.n * g.h * g.w * g.c, 0.5f);
  float* f = buf(g.k() * g.oc, 0.01f);
  float* y = buf(g.n * g.oh * g.ow * g.oc, 0.25f);
  const auto layout = backend == LayerBackend::onednn_blocked ? dnn::ActivationLayout::blocked : dnn::ActivationLayout::nhwc;
  // One call: false when oneDNN has no optimised kernel for it.
  auto run = [&] {
    if (backend == LayerBackend::own) {
      d::set_conv_backend(d::ConvBackend::own);
      if (dir == LayerDirection::forward) d::conv_forward<float>(g, x, f, y);
      else if (dir == LayerDirection::backprop_input) d::conv_backprop_input<float>(g, f, y, x);
      else d::conv_backprop_filter<float>(g, x, y, f);
      d::set_conv_backend(d::ConvBackend::automatic);
      return true;
    }
    if (dir == LayerDirection::forward) return dnn::conv_forward(g, x, f, y, nullptr, layout);
    if (dir == LayerDirection::backprop_input) return dnn::conv_backprop_input(g, f, y, x, layout);
    return dnn::conv_backprop_filter(g, x, y, f, layout);
  };
  if (!run()) {  // also creates oneDNN's primitives, outside the timed loop
    state.SkipWithError("oneDNN has no optimised kernel for this convolution");
    return;
  }
  for (auto _ : state) {
    run();
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * static_cast<double>(g.n * g.pixels() * g.k() * g.oc),
                                                benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
}

const bool kLayersRegistered = [] {
  if (std::getenv("TG_BENCH_CONV_LAYERS") == nullptr) return false;
  const std::pair<LayerDirection, const char*> dirs[] = {
      {LayerDirection::forward, "forward"}, {LayerDirection::backprop_input, "backprop_input"},
      {LayerDirection::backprop_filter, "backprop_filter"}};
  const std::pair<LayerBackend, const char*> backends[] = {
      {LayerBackend::own, "own"}, {LayerBackend::onednn, "onednn"}, {LayerBackend::onednn_blocked, "onednn_blocked"}};
  for (const LayerShape& s : kLayers)
    for (const auto& dir : dirs)
      for (const auto& backend : backends)
        benchmark::RegisterBenchmark(
            (std::string("conv_layers/") + s.name + "/" + dir.second + "/" + backend.second).c_str(),
            [s, dir, backend](benchmark::State& st) { BM_ConvLayer(st, s, dir.first, backend.first); })
            ->ArgName("threads")->Arg(1)->Arg(2)->MinTime(0.1)->Repetitions(5)->ReportAggregatesOnly(true)
            ->Unit(benchmark::kMillisecond);
  return true;
}();

}  // namespace
