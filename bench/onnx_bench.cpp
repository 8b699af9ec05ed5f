// The ONNX import rows (issue 37): torchvision's resnet18 and mobilenet_v2 as PyTorch exports them
// (bench/onnx_models.py writes them into $TG_BENCH_ONNX_DIR), imported with tg::import_onnx and
// called at batch 1 (latency) and batch 32 (throughput). bench/ort_bench.mjs times ONNX Runtime
// and torch_bench.py PyTorch on the same models and inputs; bench/run sets them side by side.
#include <cstdlib>
#include <filesystem>
#include <string>

#include "bench_util.h"
#include "tracegraph/tracegraph.h"
#if TG_BENCH_HAVE_ONNX
#include "tracegraph/npy.h"
#include "tracegraph/onnx.h"

namespace {

void BM_ImportedModel(benchmark::State& state, const char* model, int batch) {
  tg_bench::guarded(state, [&] {
    const char* dir = std::getenv("TG_BENCH_ONNX_DIR");
    const std::filesystem::path base = dir ? dir : "";
    const std::filesystem::path file = base / (std::string(model) + ".onnx");
    const std::filesystem::path input = base / (std::string(model) + ".b" + std::to_string(batch) + ".npy");
    if (!dir || !std::filesystem::exists(file) || !std::filesystem::exists(input)) {
      state.SkipWithError("no model file: set TG_BENCH_ONNX_DIR to bench/onnx_models.py's output (bench/run does)");
      return;
    }
    const tg::LoadedFunction f = tg::import_onnx(file.string());
    const tg::Tensor x = tg::load_npy(input.string());
    tg_bench::reach_steady_state([&] { benchmark::DoNotOptimize(f(x)); });
    for (auto _ : state) benchmark::DoNotOptimize(f(x));
  });
}

BENCHMARK_CAPTURE(BM_ImportedModel, resnet18_b1, "resnet18", 1)
    ->Name("onnx/resnet18/b1/imported")->MinTime(0.5)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ImportedModel, resnet18_b32, "resnet18", 32)
    ->Name("onnx/resnet18/b32/imported")->MinTime(1.0)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ImportedModel, mobilenet_v2_b1, "mobilenet_v2", 1)
    ->Name("onnx/mobilenet_v2/b1/imported")->MinTime(0.5)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ImportedModel, mobilenet_v2_b32, "mobilenet_v2", 32)
    ->Name("onnx/mobilenet_v2/b32/imported")->MinTime(1.0)->Unit(benchmark::kMillisecond);

}  // namespace
#endif
