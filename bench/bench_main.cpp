// tg_bench's entry point: Google Benchmark's main, plus the facts a reader of the numbers needs
// (OpenBLAS build and thread count) recorded in the JSON context; bench/run adds the CPU's.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <tracegraph/function.h>

#include <string>

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  // OpenBLAS reads OPENBLAS_NUM_THREADS when it loads; both the tracegraph side and the direct
  // baseline run in this process, so they share this one setting.
  benchmark::AddCustomContext("openblas_threads", std::to_string(openblas_get_num_threads()));
  benchmark::AddCustomContext("openblas_config", openblas_get_config());
  benchmark::AddCustomContext("openblas_core", openblas_get_corename());
  // The benchmarks create tg::functions in loops on purpose (tracing cost, repetitions); the
  // warning that this retraces is right, and noise in the table's output.
  tg::config::set_log_sink([](const std::string&, void*) {});
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
