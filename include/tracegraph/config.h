// tg::config: process-wide settings (debugging, diagnostics and output sinks, memory).
#pragma once
#include <cstddef>
#include <string>

namespace tg::config {

/// Where diagnostics (TG_LOG=retrace lines, frequent-retracing warnings, a tg::from_blob
/// deleter that threw) are written, one call per message. nullptr restores the default, stderr.
void set_log_sink(void (*sink)(const std::string& message, void* user), void* user = nullptr);
/// Logs one line per retrace (function, trace number, reason). Defaults to on when the
/// environment variable TG_LOG contains "retrace" (e.g. TG_LOG=retrace).
void log_retraces(bool enabled);
/// Globally disables tracing: tg::function bodies run eagerly at every call (for debugging).
void run_functions_eagerly(bool enabled);
bool functions_run_eagerly();

/// Where tg::print writes (one call per printed line, newline included). nullptr restores
/// stdout. Tests and applications use it to capture output.
void set_print_sink(void (*sink)(const std::string& line, void* user), void* user = nullptr);

/// Threads tracegraph computes on, the calling thread included: large elementwise and fused
/// kernels and large matrix products split across one pool (OpenBLAS itself runs on the thread
/// that calls it). The default is TG_NUM_THREADS when set, else the number of cores.
int num_threads();
/// Resizes the intra-op pool to `n` threads (1: every kernel runs on the calling thread).
/// Elementwise, fused and reduction results do not depend on it (chunks are fixed by sizes and
/// each element is computed by one thread, in order); matrix products give the same bits for a
/// given count, and may differ in the last bits between counts (OpenBLAS blocks a smaller
/// product differently, and a product with a long inner dimension is split over it, each
/// thread summing a part).
/// Safe while functions run on other threads: a running parallel kernel finishes on the old
/// pool first. n < 1, or a call from inside a kernel, is a tg::ValueError.
void set_num_threads(int n);

/// Frees the memory tracegraph keeps for reuse: large tensor buffers (blocks of 1 MiB or more
/// are cached when freed) and the large arrays tracing builds (a graph's nodes, per-node
/// tables of the optimiser, from 64 KiB), at most 512 MiB in all. Returns the bytes released.
std::size_t release_cached_memory();

}  // namespace tg::config
