// What every oneDNN caller in the kernels layer shares (onednn_conv.cpp, onednn_conv_bf16.cpp):
// one engine, a stream per thread, per-thread scratch kept across calls, and the guard that
// makes oneDNN run on the calling thread alone.
//
// tracegraph is not compiled with -fopenmp and does not link libgomp itself (libdnnl brings
// it), so OpenMP's thread-count calls are looked up at run time. Without them oneDNN could
// start a team of OpenMP threads beside the pool's, so callers do not use oneDNN at all.
#pragma once
#include <cstddef>
#include <oneapi/dnnl/dnnl.hpp>

namespace tg::detail::onednn_runtime {

/// Whether OpenMP's thread-count calls were found (else oneDNN must not be called).
bool omp_controllable();

/// oneDNN sizes its work by the calling thread's OpenMP thread count, both when it creates a
/// primitive and when it runs one: this sets that count to 1 for the guard's life and restores
/// the caller's own (a program's OpenMP code on this thread keeps its setting).
class OneOmpThread {
 public:
  OneOmpThread();
  ~OneOmpThread();
  OneOmpThread(const OneOmpThread&) = delete;
  OneOmpThread& operator=(const OneOmpThread&) = delete;

 private:
  int saved_;
};

const dnnl::engine& cpu_engine();
dnnl::stream& thread_stream();

/// The slots of per-thread scratch: each is used within one convolution call only.
enum ScratchSlot { kActivationsIn, kActivationsOut, kFilterOut, kScratchpad, kScratchSlots };

/// A 64-byte aligned scratch buffer of at least `bytes` for this thread and slot, kept across
/// calls (fresh large allocations would page-fault on every call).
void* thread_buffer(ScratchSlot slot, std::size_t bytes);

}  // namespace tg::detail::onednn_runtime
