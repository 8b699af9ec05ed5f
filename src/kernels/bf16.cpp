// bfloat16 conversions, and the dispatch of bf16_gemm between the AVX512_BF16 kernel
// (bf16_avx512.cpp) and float32 gemm on widened operands.
#include "kernels/bf16.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/bf16_avx512.h"
#include "kernels/gemm.h"

namespace tg::detail {

bool cpu_has_avx512_bf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
}

namespace {

// The conversions' AVX-512 loops need only AVX-512BW/VL, which every AVX512_BF16 CPU has; the
// check is shared so that one file decides.
bool vector_conversions() {
  static const bool has = cpu_has_avx512_bf16();
  return has;
}

}  // namespace

namespace {

void widen_serial(const uint16_t* in, float* y, int64_t n) {
  if (vector_conversions()) return bf16_avx512::widen(in, y, n);
  auto* out = reinterpret_cast<uint32_t*>(y);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<uint32_t>(in[i]) << 16;
}

void narrow_serial(const float* x, uint16_t* out, int64_t n) {
  if (vector_conversions()) return bf16_avx512::narrow(x, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] = bfloat16_t::round_from(x[i]);
}

}  // namespace

// Each element converts alone, so large conversions (a layer's weights: 200K values, cast every
// step) split over the pool with the same bits.
void bf16_to_f32(const bfloat16_t* x, float* y, int64_t n) {
  const auto* in = reinterpret_cast<const uint16_t*>(x);
  if (n < kParallelMinElements) return widen_serial(in, y, n);
  parallel_for(n, kParallelMinElements / 4, [&](int64_t b, int64_t e) { widen_serial(in + b, y + b, e - b); });
}

void f32_to_bf16(const float* x, bfloat16_t* y, int64_t n) {
  auto* out = reinterpret_cast<uint16_t*>(y);
  if (n < kParallelMinElements) return narrow_serial(x, out, n);
  parallel_for(n, kParallelMinElements / 4, [&](int64_t b, int64_t e) { narrow_serial(x + b, out + b, e - b); });
}

namespace {

std::atomic<bool> instructions_enabled{true};

bool use_instructions() {
  static const bool has = cpu_has_avx512_bf16();
  return has && instructions_enabled.load(std::memory_order_relaxed);
}

// op(X) of a stored bfloat16 matrix as a rows x cols float32 matrix.
std::vector<float> widened(int rows, int cols, const bfloat16_t* x, int ld, bool transposed) {
  std::vector<float> out(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j)
      out[static_cast<std::size_t>(i) * cols + j] =
          static_cast<float>(transposed ? x[static_cast<int64_t>(j) * ld + i] : x[static_cast<int64_t>(i) * ld + j]);
  return out;
}

template <class T>
void grow_to(std::vector<T>& v, std::size_t size) {
  if (v.size() < size) v.resize(size);
}

}  // namespace

bool set_bf16_gemm_instructions(bool enabled) { return instructions_enabled.exchange(enabled); }

void bf16_gemm(int m, int n, int k, const bfloat16_t* a, int lda, bool ta, const bfloat16_t* b, int ldb, bool tb,
               float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int i = 0; i < m; ++i) std::fill_n(c + static_cast<int64_t>(i) * ldc, n, 0.0f);
    return;
  }
  const auto* au = reinterpret_cast<const uint16_t*>(a);
  const auto* bu = reinterpret_cast<const uint16_t*>(b);
  if (!use_instructions()) {
    const std::vector<float> wa = widened(m, k, a, lda, ta), wb = widened(k, n, b, ldb, tb);
    gemm<float>(m, n, k, wa.data(), k, false, wb.data(), n, false, c, ldc);
    return;
  }
  using namespace bf16_avx512;
  const int panels = (n + kPanelCols - 1) / kPanelCols;
  const int row_blocks = (m + kBlockRows - 1) / kBlockRows;
  const int64_t panel_size = (k + 1) / 2 * 2 * kPanelCols;
  const int64_t flops = int64_t{2} * m * n * k;
  const int threads = num_threads();
  // Each part packs the panels of B it multiplies, into a buffer of the thread that runs it, and
  // multiplies them in the same pass: no wait between packing and multiplying, and the packed
  // panels stay in the cache of the core that reads them. Each element of C is computed whole by
  // one part, so the bits never depend on the split.
  auto run_part = [&](int r0, int r1, int p0, int p1) {
    // Kept per thread between calls (a fresh buffer of this size costs page faults every step),
    // grown only (resizing up after a smaller product would zero the new part: a memset of up
    // to megabytes per call, every step). Panels are indexed from 0, so the buffer holds p1.
    thread_local std::vector<uint16_t> packed_buffer;
    grow_to(packed_buffer, static_cast<std::size_t>(p1 * panel_size));
    pack_b(n, k, bu, ldb, tb, packed_buffer.data(), p0, p1);
    multiply(m, n, k, au, lda, ta, packed_buffer.data(), c, ldc, r0, r1, p0, p1);
  };
  // Split from 2^19 flops: the demo's 128 x 10 x 256 products (6.6e5) gain from two parts.
  if (threads == 1 || flops < (int64_t{1} << 19)) return run_part(0, row_blocks, 0, panels);
  // One part per thread, of whole panels or of whole row blocks: each part then packs all of A
  // or all of B, so the split leaves the smaller one to pack twice (a layer's forward product
  // and dX have fewer rows than columns, its weight gradient X^T dY as many or more; at m = n
  // splitting rows measured faster). parallel_for would keep fewer than 16 units in one chunk.
  auto share = [](int count, int parts, int p) { return static_cast<int>(int64_t{count} * p / parts); };
  if (panels >= threads && (m < n || row_blocks < threads)) {
    parallel_parts(threads, [&](int p) {
      run_part(0, row_blocks, share(panels, threads, p), share(panels, threads, p + 1));
    });
  } else {
    const int parts = std::min(threads, row_blocks);
    parallel_parts(parts, [&](int p) {
      run_part(share(row_blocks, parts, p), share(row_blocks, parts, p + 1), 0, panels);
    });
  }
}

}  // namespace tg::detail
