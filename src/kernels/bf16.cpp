// bfloat16 conversions, and the dispatch of bf16_gemm between the AVX512_BF16 kernel
// (bf16_avx512.cpp) and float32 gemm on widened operands.
#include "kernels/bf16.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <type_traits>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/bf16_avx512.h"
#include "kernels/column_sums.h"
#include "kernels/gemm.h"
#include "kernels/gemm_epilogue.h"
#include "kernels/simd_math.h"

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

namespace {

// Where vdpbf16ps runs at half the FMAs' rate (bf16_avx512::Products): Intel's cores.
std::atomic<bool> widened_fma{simd::cpu_is_intel()};

}  // namespace

bool set_bf16_gemm_widened_fma(bool enabled) { return widened_fma.exchange(enabled); }

namespace {

using bf16_avx512::Products;
using bf16_avx512::Store;

// The float32 sums (rows x cols, contiguous) rounded to bfloat16 into C (leading dim ldc), stored
// as `store` says: bfloat16 bits, widened back to float32, or through the epilogue `e` (the
// same ops, in the same order, as bf16_avx512's epilogue_lanes).
void round_rows(const float* sums, int rows, int cols, int ldc, Store store, const Bf16Epilogue* e, void* c) {
  for (int i = 0; i < rows; ++i) {
    const float* row = sums + static_cast<int64_t>(i) * cols;
    if (store == Store::kRoundedWide) {
      float* out = static_cast<float*>(c) + static_cast<int64_t>(i) * ldc;
      for (int j = 0; j < cols; ++j) out[j] = static_cast<float>(bfloat16_t(row[j]));
      continue;
    }
    bfloat16_t* out = static_cast<bfloat16_t*>(c) + static_cast<int64_t>(i) * ldc;
    for (int j = 0; j < cols; ++j) {
      bfloat16_t v(row[j]);
      if (store == Store::kEpilogue) {
        const int64_t at = i * e->ld_mask + j;
        if (e->bias) v = bfloat16_t(static_cast<float>(v) + e->bias[j]);
        float w = static_cast<float>(v);
        if (e->mask_out) e->mask_out[at] = w > 0.0f;
        if (e->relu) w = w < 0.0f ? 0.0f : w;
        if (e->mask_in) w = e->mask_in[at] ? w : 0.0f;
        v = bfloat16_t(w);
      }
      out[j] = v;
    }
  }
}

// The products the instructions do not make: empty sums (k = 0: +0) and every product where
// the CPU lacks them or they are turned off (operands widened, float32 gemm), then stored as
// `store` says.
void gemm_serial_or_empty(int m, int n, int k, const bfloat16_t* a, int lda, bool ta, const bfloat16_t* b, int ldb,
                          bool tb, void* c, int ldc, Store store, const Bf16Epilogue* epilogue) {
  if (store == Store::kSums) {
    if (k <= 0) {
      for (int i = 0; i < m; ++i) std::fill_n(static_cast<float*>(c) + static_cast<int64_t>(i) * ldc, n, 0.0f);
      return;
    }
    const std::vector<float> wa = widened(m, k, a, lda, ta), wb = widened(k, n, b, ldb, tb);
    gemm<float>(m, n, k, wa.data(), k, false, wb.data(), n, false, static_cast<float*>(c), ldc);
    return;
  }
  std::vector<float> sums(static_cast<std::size_t>(m) * static_cast<std::size_t>(n));  // the empty sums of k = 0
  if (k > 0) {
    const std::vector<float> wa = widened(m, k, a, lda, ta), wb = widened(k, n, b, ldb, tb);
    gemm<float>(m, n, k, wa.data(), k, false, wb.data(), n, false, sums.data(), n);
  }
  round_rows(sums.data(), m, n, ldc, store, epilogue, c);
}

// The panels of one packed B shared by the parts of a split product: a panel is free, being
// packed (by the part that claimed it), or packed. A part claims what is free and waits only for
// panels another part is packing now, so the parts never wait for one that has not started (a
// serial pool runs the parts one after another: the first packs everything).
class SharedPanels {
 public:
  template <class Pack>
  SharedPanels(int panels, const Pack& pack) : pack_(&call<Pack>), pack_ctx_(&pack), states_(free_states(panels)) {}

  // Packs panel p if no part has claimed it; returns at once otherwise.
  void pack_unless_taken(int p) {
    uint8_t expected = kFree;
    if (!states_[p].compare_exchange_strong(expected, kPacking, std::memory_order_acquire)) return;
    pack_(pack_ctx_, p);
    states_[p].store(kPacked, std::memory_order_release);
  }

  // Returns once panel p is packed (by this part, if nobody had claimed it).
  void ensure_packed(int p) {
    pack_unless_taken(p);
    for (int spins = 0; states_[p].load(std::memory_order_acquire) != kPacked; ++spins) {
      if (spins < 4096) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      } else {
        std::this_thread::yield();  // the packing part lost its core: let it run
      }
    }
  }

 private:
  static constexpr uint8_t kFree = 0, kPacking = 1, kPacked = 2;
  // The calling thread's states (kept between calls), the first `panels` set free.
  static std::atomic<uint8_t>* free_states(int panels) {
    thread_local std::vector<std::atomic<uint8_t>> states;
    if (states.size() < static_cast<std::size_t>(panels)) states = std::vector<std::atomic<uint8_t>>(panels);
    for (int p = 0; p < panels; ++p) states[p].store(kFree, std::memory_order_relaxed);
    return states.data();
  }
  template <class Pack>
  static void call(const void* ctx, int p) {
    (*static_cast<const Pack*>(ctx))(p);
  }
  void (*pack_)(const void*, int);
  const void* pack_ctx_;
  std::atomic<uint8_t>* states_;
};

// Products from this many flops split over the pool.
constexpr int64_t kSplitFlops = int64_t{1} << 19;

// B's bits as pack_b reads them: bfloat16 bits, or float32 values it rounds.
const uint16_t* packed_source(const bfloat16_t* b) { return reinterpret_cast<const uint16_t*>(b); }
const float* packed_source(const float* b) { return b; }

// `b` bfloat16, or float32 to be rounded to bfloat16 as it is packed (TB = float).
template <class TB>
void gemm_stored(int m, int n, int k, const bfloat16_t* a, int lda, bool ta, const TB* b, int ldb, bool tb, void* c,
                 int ldc, Store store, const Bf16Epilogue* epilogue = nullptr) {
  if (m <= 0 || n <= 0) return;
  const int64_t flops = int64_t{2} * m * n * k;
  if constexpr (std::is_same_v<TB, float>) {
    // B rounded first, then the bfloat16 path, where the instructions do not run. Elsewhere B is
    // rounded as it is packed, once, also where the product splits (the parts share the packing).
    if (k <= 0 || !use_instructions()) {
      const int rows = tb ? n : k, cols = tb ? k : n;
      thread_local std::vector<bfloat16_t> rounded;
      grow_to(rounded, static_cast<std::size_t>(std::max(rows, 0)) * static_cast<std::size_t>(cols));
      if (ldb == cols) {
        f32_to_bf16(b, rounded.data(), int64_t{rows} * cols);
      } else {
        for (int i = 0; i < rows; ++i)
          f32_to_bf16(b + static_cast<int64_t>(i) * ldb, rounded.data() + static_cast<int64_t>(i) * cols, cols);
      }
      return gemm_stored(m, n, k, a, lda, ta, rounded.data(), cols, tb, c, ldc, store, epilogue);
    }
  } else if (k <= 0 || !use_instructions()) {
    return gemm_serial_or_empty(m, n, k, a, lda, ta, b, ldb, tb, c, ldc, store, epilogue);
  }
  const auto* au = reinterpret_cast<const uint16_t*>(a);
  const auto* bu = packed_source(b);
  using namespace bf16_avx512;
  const int panels = (n + kPanelCols - 1) / kPanelCols;
  const int64_t panel_size = (k + 1) / 2 * 2 * kPanelCols;
  const int threads = num_threads();
  const Products products = widened_fma.load(std::memory_order_relaxed) ? Products::kWidenedFma : Products::kDotProducts;
  // Each part packs the panels of B it multiplies, into a buffer of the thread that runs it, and
  // multiplies them in the same pass: no wait between packing and multiplying, and the packed
  // panels stay in the cache of the core that reads them. Each element of C is computed whole by
  // one part, so the bits never depend on the split.
  // Column sums (Store::kEpilogue only) are added by the part that finishes whole rows, one
  // block of rows at a time while the block is in its cache; each element of C is the same for
  // any row range multiply is given.
  ColumnSumLeaves* const sums = store == Store::kEpilogue && epilogue ? epilogue->column_sums : nullptr;
  auto multiply_rows = [&](const uint16_t* packed, int i0, int i1) {
    if (!sums) return multiply(m, n, k, au, lda, ta, packed, c, ldc, store, epilogue, i0, i1, 0, panels, products);
    // Each block's rows go to the leaves wholly among [i0, i1) as they are stored, in row order,
    // which gives a leaf summed in parts the bits of one sum over it (column_sums.h); the leaves
    // two parts share are left to EpilogueColumnSums::finish, which sums them from C.
    GemmEpilogue owner;
    owner.column_sums = sums;
    owner.rows_begin = i0, owner.rows_end = i1;
    for (int r0 = i0; r0 < i1; r0 += kBlockRows) {
      const int r1 = std::min(i1, r0 + kBlockRows);
      multiply(m, n, k, au, lda, ta, packed, c, ldc, store, epilogue, r0, r1, 0, panels, products);
      add_rows_to_column_sums(owner, static_cast<const bfloat16_t*>(c), ldc, r0, r1 - r0, 0, n);
    }
  };
  auto run_part = [&](int i0, int i1, int p0, int p1) {
    // Kept per thread between calls (a fresh buffer of this size costs page faults every step),
    // grown only (resizing up after a smaller product would zero the new part: a memset of up
    // to megabytes per call, every step). Panels are indexed from 0, so the buffer holds p1.
    thread_local std::vector<uint16_t> packed_buffer;
    grow_to(packed_buffer, static_cast<std::size_t>(p1 * panel_size));
    pack_b(n, k, bu, ldb, tb, packed_buffer.data(), p0, p1);
    if (p0 == 0 && p1 == panels) return multiply_rows(packed_buffer.data(), i0, i1);
    multiply(m, n, k, au, lda, ta, packed_buffer.data(), c, ldc, store, epilogue, i0, i1, p0, p1, products);
  };
  // Split from 2^19 flops: the demo's 128 x 10 x 256 products (6.6e5) gain from two parts.
  if (threads == 1 || flops < kSplitFlops) return run_part(0, m, 0, panels);
  auto share = [](int count, int parts, int p) { return static_cast<int>(int64_t{count} * p / parts); };
  // One part per thread, of rows where each gets a whole block of them: every part writes rows
  // of C no other part writes, and multiplies all of B. Parts that split C's rows by columns
  // (whole panels each) ran at 1.0-1.6x one thread on the demo's 128-row products against
  // 1.7-1.9x for rows: the two cores' stores to the same rows of C slow both. Rows go by fours,
  // which the kernel's blocks of 4 and 8 rows cover at their cost (128 rows: 64 and 64).
  // B is packed once, into the calling thread's buffer, by the parts together (SharedPanels):
  // each packs its share of the panels, then takes the panels still unpacked itself and waits
  // only for those another part is packing at that moment.
  if (m >= kBlockRows * threads) {
    // A pointer, not the thread_local itself: named inside the parts, that would be each
    // thread's own buffer.
    thread_local std::vector<uint16_t> shared_buffer;
    grow_to(shared_buffer, static_cast<std::size_t>(panels * panel_size));
    uint16_t* const packed = shared_buffer.data();
    const auto pack_panel = [&](int p) { pack_b(n, k, bu, ldb, tb, packed, p, p + 1); };
    SharedPanels shared(panels, pack_panel);
    const int quads = (m + 3) / 4;
    parallel_parts(threads, [&](int p) {
      const int first = share(panels, threads, p), last = share(panels, threads, p + 1);
      for (int q = first; q < last; ++q) shared.pack_unless_taken(q);
      for (int q = 0; q < panels; ++q) shared.ensure_packed((last + q) % panels);
      multiply_rows(packed, std::min(m, 4 * share(quads, threads, p)), std::min(m, 4 * share(quads, threads, p + 1)));
    });
    return;
  }
  if (panels < 2) return run_part(0, m, 0, panels);
  const int parts = std::min(threads, panels);
  parallel_parts(parts, [&](int p) { run_part(0, m, share(panels, parts, p), share(panels, parts, p + 1)); });
}

}  // namespace

void bf16_gemm(int m, int n, int k, const bfloat16_t* a, int lda, bool ta, const bfloat16_t* b, int ldb, bool tb,
               float* c, int ldc) {
  gemm_stored(m, n, k, a, lda, ta, b, ldb, tb, c, ldc, bf16_avx512::Store::kSums);
}

void bf16_gemm_epilogue(int m, int n, int k, const bfloat16_t* a, int lda, bool ta, const bfloat16_t* b, int ldb,
                        bool tb, bfloat16_t* c, int ldc, const Bf16Epilogue& epilogue) {
  gemm_stored(m, n, k, a, lda, ta, b, ldb, tb, c, ldc, bf16_avx512::Store::kEpilogue, &epilogue);
}

void bf16_gemm_epilogue(int m, int n, int k, const bfloat16_t* a, int lda, bool ta, const float* b, int ldb, bool tb,
                        bfloat16_t* c, int ldc, const Bf16Epilogue& epilogue) {
  gemm_stored(m, n, k, a, lda, ta, b, ldb, tb, c, ldc, bf16_avx512::Store::kEpilogue, &epilogue);
}

void bf16_gemm_rounded(int m, int n, int k, const bfloat16_t* a, int lda, bool ta, const bfloat16_t* b, int ldb,
                       bool tb, bfloat16_t* c, int ldc) {
  gemm_stored(m, n, k, a, lda, ta, b, ldb, tb, c, ldc, bf16_avx512::Store::kRounded);
}

void bf16_gemm_rounded_to_f32(int m, int n, int k, const bfloat16_t* a, int lda, bool ta, const bfloat16_t* b,
                              int ldb, bool tb, float* c, int ldc) {
  gemm_stored(m, n, k, a, lda, ta, b, ldb, tb, c, ldc, bf16_avx512::Store::kRoundedWide);
}

}  // namespace tg::detail
