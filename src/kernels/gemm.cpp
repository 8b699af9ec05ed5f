// float32 products run on implicit_gemm.h's AVX-512 kernels where the CPU has them: on this
// project's machines OpenBLAS 0.3.21 runs AVX2 kernels at half the vector width (DECISIONS,
// "Matrix products"). Everything else goes to OpenBLAS.
//
// OpenBLAS runs on one thread, and tracegraph splits a large product across its own pool
// instead: one set of threads for every kernel, which sleep when idle. With OpenBLAS's threads
// as well, two pools share the cores, and OpenBLAS's idle workers spin on a core where the
// pool's next chunk then waits for the scheduler.
#include "kernels/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <mutex>
#include <type_traits>
#include <unistd.h>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"
#include "kernels/implicit_gemm.h"

namespace tg::detail {
namespace {

// Declared weak: with another BLAS behind libblas.so the symbol is absent, and that BLAS's own
// threading stands.
extern "C" void openblas_set_num_threads(int) __attribute__((weak));
extern "C" int openblas_get_num_threads() __attribute__((weak));
// Ends OpenBLAS's worker threads (its fork handler's call); a later call for more threads starts them again.
extern "C" int blas_thread_shutdown_() __attribute__((weak));

// Checked per product, not once: the setting is process-wide, and other code in the process (a
// benchmark's reference, another library) may change it. Its pool is ended too: started when the
// library loads, and woken by whoever asked for more threads, an idle OpenBLAS worker spins in
// sched_yield for a while, on the core our pool's worker needs.
void use_one_blas_thread() {
  if (openblas_get_num_threads && openblas_set_num_threads && openblas_get_num_threads() != 1) {
    static std::mutex one_at_a_time;  // two products must not end the pool together
    std::lock_guard<std::mutex> lock(one_at_a_time);
    if (openblas_get_num_threads() == 1) return;
    openblas_set_num_threads(1);
    if (blas_thread_shutdown_) blas_thread_shutdown_();
  }
}

// At load as well: the pool OpenBLAS started when it loaded spins from the start.
[[maybe_unused]] const bool one_blas_thread_at_load = (use_one_blas_thread(), true);

// A product worth splitting: each thread's share is large enough to pay for waking it.
constexpr int64_t kParallelGemmFlops = int64_t{1} << 22;

std::atomic<bool> own_kernels_enabled{true};  // set_own_avx512_kernels

// Blocking of own_sgemm's larger products: B is copied, kPanelK rows at a time, into panels of
// kPanelColumns columns side by side (kPanelK x 64 floats = 32 KiB, which stays in L1 while
// every block of rows runs over it), and the rows run in blocks of kPanelRows (their A, 192 x
// 128 floats, stays in L2 across the panels). Read in place, B's rows are n floats apart, and a
// 64-column block of them falls on few L1 sets (docs/DECISIONS.md has the figures). Each
// element's sum keeps its order (k in turn, the partial sum stored and loaded back between the
// blocks of k), so the bits are those of one call over all of k. Measured on a 48 KiB L1: where
// L1 is smaller (Zen 4's 32 KiB) a panel would fill it alone, so products keep the path measured
// there.
constexpr int kPanelK = 128, kPanelColumns = 64, kPanelRows = 192, kPanelMinRows = 64;
const bool panels_fit_l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE) >= 48 * 1024;

// `need` floats of `buffer` starting on a cache line, the buffer grown only (resize zero-fills
// what it adds, and a thread alternates between small and large packings). A vector's storage is
// 16-byte aligned at best (glibc's large blocks sit 16 bytes past a page), and a packed row that
// starts off a line makes every 64-byte load of it span two lines.
float* grown_line_aligned(std::vector<float>& buffer, std::size_t need) {
  constexpr std::size_t kLineFloats = 64 / sizeof(float);
  if (buffer.size() < need + kLineFloats) buffer.resize(need + kLineFloats);
  const std::size_t misaligned = reinterpret_cast<std::uintptr_t>(buffer.data()) / sizeof(float) % kLineFloats;
  return buffer.data() + (kLineFloats - misaligned) % kLineFloats;
}

// op(A) B through implicit_gemm: A's row p, entry i is at a[p * lda + i], or a[i * lda + p]
// when transposed; B is not transposed (gemm packs a transposed B first).
void own_sgemm(int m, int n, int k, const float* a, int lda, bool ta, const float* b, int ldb, float* c, int ldc,
               bool accumulate, const GemmEpilogue* epilogue = nullptr, int64_t first_column = 0) {
  thread_local std::vector<int64_t> taps;
  taps.resize(static_cast<std::size_t>(k));
  for (int i = 0; i < k; ++i) taps[static_cast<std::size_t>(i)] = ta ? int64_t{i} * lda : i;
  implicit_gemm::Layout l;
  l.out_h = 1, l.out_w = m, l.col_step = ta ? 1 : lda;
  l.taps = taps.data(), l.k = k, l.n = n, l.b_stride = ldb, l.c_stride = ldc;
  // A B that fits L1 as it is (an attention tile's), or too few rows to pay for the copy.
  if (!panels_fit_l1 || m < kPanelMinRows || int64_t{k} * n <= int64_t{kPanelK} * kPanelColumns) {
    implicit_gemm::multiply(l, a, b, c, accumulate, epilogue, first_column);
    return;
  }
  // The epilogue's elementwise parts, by the rows of each block (gemm adds the column sums).
  GemmEpilogue parts;
  if (epilogue) {
    parts = *epilogue;
    parts.column_sums = nullptr;
  }
  const int panels = (n + kPanelColumns - 1) / kPanelColumns;
  thread_local std::vector<float> buffer;
  float* const packed_data =
      grown_line_aligned(buffer, static_cast<std::size_t>(std::min(kPanelK, k)) * panels * kPanelColumns);
  for (int k0 = 0; k0 < k; k0 += kPanelK) {
    const int nk = std::min(kPanelK, k - k0);
    for (int p = 0; p < panels; ++p) {
      const int64_t width = std::min(kPanelColumns, n - p * kPanelColumns);
      const float* src = b + int64_t{k0} * ldb + int64_t{p} * kPanelColumns;
      float* dst = packed_data + static_cast<std::size_t>(p) * nk * kPanelColumns;
      for (int i = 0; i < nk; ++i) std::copy_n(src + int64_t{i} * ldb, width, dst + int64_t{i} * kPanelColumns);
    }
    const bool last = k0 + nk == k;
    for (int m0 = 0; m0 < m; m0 += kPanelRows) {
      const GemmEpilogue rows_parts = epilogue && last ? parts.from_row(m0) : GemmEpilogue{};
      l.out_w = std::min(kPanelRows, m - m0);
      l.taps = taps.data() + k0, l.k = nk, l.b_stride = kPanelColumns;
      const float* a_rows = ta ? a + m0 : a + int64_t{m0} * lda;
      for (int p = 0; p < panels; ++p) {
        l.n = std::min(kPanelColumns, n - p * kPanelColumns);
        implicit_gemm::multiply(l, a_rows, packed_data + static_cast<std::size_t>(p) * nk * kPanelColumns,
                                c + int64_t{m0} * ldc + int64_t{p} * kPanelColumns, accumulate || k0 > 0,
                                epilogue && last ? &rows_parts : nullptr, first_column + int64_t{p} * kPanelColumns);
      }
    }
  }
}

// Blocks [0, blocks) in one contiguous range per part, each run from its front by its own
// part's thread; a thread that finishes its range takes blocks from the back of the others'. With
// even speeds each thread runs its own range, the rows its core wrote in the node before (which
// split its rows the same way); when one core runs slower (a VM's vCPU sharing its core, for
// minutes at a time on this project's Intel VM), the other takes over its last blocks instead of
// waiting for them.
class BlockRanges {
 public:
  BlockRanges(int64_t blocks, int parts) : ranges_(static_cast<std::size_t>(parts)) {
    for (int p = 0; p < parts; ++p)
      ranges_[static_cast<std::size_t>(p)].store(pack(blocks * p / parts, blocks * (p + 1) / parts));
  }
  /// The next block for part p's thread, or -1 when none is left.
  int64_t next(int p) {
    const int parts = static_cast<int>(ranges_.size());
    for (int i = 0; i < parts; ++i) {
      std::atomic<uint64_t>& r = ranges_[static_cast<std::size_t>((p + i) % parts)];
      uint64_t v = r.load();
      while (front(v) < back(v)) {
        const uint64_t taken = i == 0 ? pack(front(v) + 1, back(v)) : pack(front(v), back(v) - 1);
        if (r.compare_exchange_weak(v, taken)) return i == 0 ? front(v) : back(v) - 1;
      }
    }
    return -1;
  }

 private:
  static uint64_t pack(int64_t front, int64_t back) { return static_cast<uint64_t>(front) << 32 | static_cast<uint64_t>(back); }
  static int64_t front(uint64_t v) { return static_cast<int64_t>(v >> 32); }
  static int64_t back(uint64_t v) { return static_cast<int64_t>(v & 0xffffffffu); }
  std::vector<std::atomic<uint64_t>> ranges_;
};

// Whether own_sgemm takes its panel path for these sizes (and own_sgemm_claimed may run them).
bool takes_panels(int m, int n, int k) {
  return panels_fit_l1 && m >= kPanelMinRows && int64_t{k} * n > int64_t{kPanelK} * kPanelColumns;
}

// Rows of the blocks BlockRanges hands out: 16 for 1024 rows, 8 a thread, so that a thread that
// takes over the other's last block shifts an eighth of its share.
constexpr int kClaimRows = 64;

// The elementwise parts of epilogue e (none when null) for C's rows from `first` on, computed
// as rows 0, 1, ... of a product of their own: applied in the AVX-512 kernels' registers, where
// gemm.cpp's own pass over the finished rows (this file's baseline ISA) took 18% of imported
// mobilenet_v2 at batch 1 on 2 threads for its Clip alone. Column sums are added apart.
const GemmEpilogue* elementwise_from_row(const GemmEpilogue* e, int64_t first, GemmEpilogue& storage) {
  if (!e) return nullptr;
  storage = *e;
  storage.column_sums = nullptr;
  storage = storage.from_row(first);
  return &storage;
}

// own_sgemm's panel path for the blocks of kClaimRows rows that `ranges` hands part p's thread,
// the epilogue's elementwise parts on each block's last chunk, `finish(r0, r1)` after each: all
// of B is packed first (each k chunk's panels one after the other; a thread's own copy), then
// each block runs over the chunks in k order and their panels as own_sgemm runs them, so every
// element's sum is own_sgemm's: the same bits.
template <class Finish>
void own_sgemm_claimed(int m, int n, int k, const float* a, int lda, bool ta, const float* b, int ldb, float* c,
                       int ldc, bool accumulate, const GemmEpilogue* epilogue, BlockRanges& ranges, int p,
                       Finish&& finish) {
  thread_local std::vector<int64_t> taps;
  taps.resize(static_cast<std::size_t>(k));
  for (int i = 0; i < k; ++i) taps[static_cast<std::size_t>(i)] = ta ? int64_t{i} * lda : i;
  const int panels = (n + kPanelColumns - 1) / kPanelColumns;
  const std::size_t chunk_floats = static_cast<std::size_t>(panels) * kPanelK * kPanelColumns;
  thread_local std::vector<float> buffer;
  const int chunks = (k + kPanelK - 1) / kPanelK;
  float* const packed = grown_line_aligned(buffer, chunk_floats * static_cast<std::size_t>(chunks));
  for (int k0 = 0; k0 < k; k0 += kPanelK) {
    const int nk = std::min(kPanelK, k - k0);
    float* const chunk = packed + chunk_floats * static_cast<std::size_t>(k0 / kPanelK);
    for (int q = 0; q < panels; ++q) {
      const int64_t width = std::min(kPanelColumns, n - q * kPanelColumns);
      const float* src = b + int64_t{k0} * ldb + int64_t{q} * kPanelColumns;
      float* dst = chunk + static_cast<std::size_t>(q) * nk * kPanelColumns;
      for (int i = 0; i < nk; ++i) std::copy_n(src + int64_t{i} * ldb, width, dst + int64_t{i} * kPanelColumns);
    }
  }
  implicit_gemm::Layout l;
  l.out_h = 1, l.col_step = ta ? 1 : lda, l.c_stride = ldc, l.b_stride = kPanelColumns;
  for (int64_t block; (block = ranges.next(p)) >= 0;) {
    const int m0 = static_cast<int>(block * kClaimRows), rows = std::min(kClaimRows, m - m0);
    const float* a_rows = ta ? a + m0 : a + int64_t{m0} * lda;
    l.out_w = rows;
    GemmEpilogue storage;
    const GemmEpilogue* rows_parts = elementwise_from_row(epilogue, m0, storage);
    for (int k0 = 0; k0 < k; k0 += kPanelK) {
      const int nk = std::min(kPanelK, k - k0);
      const float* chunk = packed + chunk_floats * static_cast<std::size_t>(k0 / kPanelK);
      const bool last = k0 + nk == k;
      l.taps = taps.data() + k0, l.k = nk;
      for (int q = 0; q < panels; ++q) {
        l.n = std::min(kPanelColumns, n - q * kPanelColumns);
        implicit_gemm::multiply(l, a_rows, chunk + static_cast<std::size_t>(q) * nk * kPanelColumns,
                                c + int64_t{m0} * ldc + int64_t{q} * kPanelColumns, accumulate || k0 > 0,
                                last ? rows_parts : nullptr, int64_t{q} * kPanelColumns);
      }
    }
    finish(m0, m0 + rows);
  }
}

// B^T (k x n) of a transposed right operand b (n x k, leading dim ldb), in this thread's buffer,
// with its leading dimension.
struct PackedB {
  const float* data;
  int ld;
};
PackedB transposed_copy(int n, int k, const float* b, int ldb) {
  thread_local std::vector<float> buffer;
  // Rows a multiple of 256 bytes apart put a 16 x 16 tile's stores at the same offsets modulo
  // 4 KiB as the next tile's loads, which the core then waits on (4K aliasing): 256 x 256 took
  // 27 us, 6 us with rows padded by one cache line.
  const int ld = n % 64 == 0 ? n + 16 : n;
  // Grown only: the transformer step's attention tiles (64 x 32) and its w2^T (128 x 512)
  // alternate, and growing each time was a 260 KB memset per step, 0.5% of it.
  float* const packed = grown_line_aligned(buffer, static_cast<std::size_t>(ld) * static_cast<std::size_t>(k));
  implicit_gemm::transpose(n, k, b, ldb, packed, ld);
  return {packed, ld};
}

// The epilogue on rows [r0, r1), columns [c0, c1) of C (none when null), all of them finished
// by the calling thread: its elementwise parts unless the kernels applied them, then its column
// sums.
void epilogue_rows(const GemmEpilogue* e, float* c, int ldc, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                   bool elementwise_applied = false) {
  if (!e) return;
  const GemmEpilogue owned = e->owning(r0, r1);
  if (!elementwise_applied) {
    const EpilogueRowFn row = widest_epilogue_row_fn(owned);
    for (int64_t r = r0; r < r1; ++r) row(owned, c + r * ldc, r, c0, c1);
  }
  if (e->column_sums) add_rows_to_column_sums(owned, c, ldc, r0, r1 - r0, c0, c1);
}

// A product split over k into `parts` partial products, added by rows at the end: part p
// multiplies A's columns [k_p, k_p+1) by B's rows [k_p, k_p+1), into C itself (part 0) or a
// partial of its own. Only the m x n partials cross between the threads' caches, where a split
// by rows hands every thread all of B (k x n) and one by columns all of A (m x k); the partials
// are the smallest of the three when k >= 2 max(m, n). For the MLP's x W1 (128 x 784 times
// 784 x 256) the slices of W1 are also the rows its optimizer update writes on each core, so W1
// stays in one core's cache from the update to the next product (see gemm()).
void own_sgemm_split_k(int parts, int m, int n, int k, const float* a, int lda, bool ta, const float* b, int ldb,
                       bool tb, float* c, int ldc, bool accumulate, const GemmEpilogue* epilogue) {
  // The calling thread's: the parts' threads write it, and it is added up here after they finish.
  thread_local std::vector<float> partials;
  const std::size_t mn = static_cast<std::size_t>(m) * static_cast<std::size_t>(n);
  partials.resize(mn * static_cast<std::size_t>(parts - 1));
  float* const partial = partials.data();
  parallel_parts(parts, [&](int p) {
    const int k0 = static_cast<int>(int64_t{k} * p / parts), k1 = static_cast<int>(int64_t{k} * (p + 1) / parts);
    const float* a_part = ta ? a + int64_t{k0} * lda : a + k0;
    // B's rows k0..k1 (columns of a transposed B, packed by the thread that multiplies them).
    const PackedB b_part = tb ? transposed_copy(n, k1 - k0, b + k0, ldb) : PackedB{b + int64_t{k0} * ldb, ldb};
    if (p == 0) own_sgemm(m, n, k1 - k0, a_part, lda, ta, b_part.data, b_part.ld, c, ldc, accumulate);
    else own_sgemm(m, n, k1 - k0, a_part, lda, ta, b_part.data, b_part.ld, partial + mn * (p - 1), n, false);
  });
  // Whole rows of C per thread, in halves as the next elementwise node splits them.
  parallel_for(m, std::max<int64_t>(1, kParallelMinElements / 16 / n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* row = c + r * ldc;
      for (int p = 1; p < parts; ++p) {
        const float* add = partial + mn * static_cast<std::size_t>(p - 1) + static_cast<std::size_t>(r) * n;
        for (int j = 0; j < n; ++j) row[j] += add[j];
      }
    }
    epilogue_rows(epilogue, c, ldc, r0, r1, 0, n);
  });
}

template <class T>
void gemm_call(int m, int n, int k, const T* a, int lda, bool ta, const T* b, int ldb, bool tb, T* c,
               int ldc, bool accumulate) {
  if constexpr (std::is_same_v<T, float>) {
    if (!tb && own_avx512_kernels()) {
      own_sgemm(m, n, k, a, lda, ta, b, ldb, c, ldc, accumulate);
      return;
    }
  }
  const CBLAS_TRANSPOSE opa = ta ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE opb = tb ? CblasTrans : CblasNoTrans;
  const T beta = accumulate ? T(1) : T(0);
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, opa, opb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
  else
    cblas_dgemm(CblasRowMajor, opa, opb, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace

bool own_avx512_kernels() {
  static const bool available = implicit_gemm::available();
  return available && own_kernels_enabled.load(std::memory_order_relaxed);
}

bool set_own_avx512_kernels(bool enabled) { return own_kernels_enabled.exchange(enabled); }

int blas_int(const char* op, int64_t v) {
  if (v > INT_MAX)
    op_error<InvalidArgumentError>(op, "a matrix dimension of ", v,
                                   " exceeds what the BLAS interface accepts (", INT_MAX,
                                   "); split the work into smaller blocks");
  return static_cast<int>(v);
}

namespace {

// How gemm() shares an m x n x k product (B transposed: tb) among `threads` threads; own: on
// the AVX-512 kernels (float32 only).
struct GemmSplit {
  bool by_columns = false, few_rows = false, few_rows_small_b = false, few_rows_by_rows = false;
  bool serial = false;
  int64_t k_parts = 1;
  bool over_k = false;  // the parts' sums over k added at the end: another order than one thread's
};
GemmSplit split_of(int64_t m, int64_t n, int64_t k, bool tb, bool own, int threads) {
  GemmSplit s;
  // A split by rows gives every thread all of B, a split by columns all of A, and a split over
  // k (the AVX-512 kernels only) every thread an m x n partial to add. What one thread reads
  // that another wrote is the cost to keep small on this machine (DECISIONS, "Threads
  // and matrix products"), so the smallest of the three decides. Rows and columns sum each element the
  // same way; a split over k does not, and is taken only when it saves the most: k >= 2 max(m, n)
  // (the MLP's x W1, 128 x 784 times 784 x 256: 149-160 -> 138 us on two threads, and W1's
  // Adam update 84 -> 50 us, since the update's halves of W1 are the product's). For x W1 split
  // by rows instead, each thread streamed the whole 800 KB of W1 and ran 1.7x slower per flop
  // than one thread. (OpenBLAS's bits change with a column split, so it keeps rows.)
  s.by_columns = own && n > m;
  const int64_t flops = int64_t{2} * m * n * k;
  // A product of few rows split by columns gives each thread all of A, which is small: its
  // halves pay from kParallelGemmFlops / 2 each (an LSTM step's products, 4.2 MFLOP, are the
  // kind; its B32 T32 train step 8.3 -> 7.5 ms on two threads against running them whole).
  s.few_rows = s.by_columns && m <= 64 && flops >= kParallelGemmFlops;
  // Those of at least 32 rows by a small B (at most 64K floats) are never split over k: an
  // untransposed B splits by rows (every thread reads all of B, which stays in each core's cache
  // from one step to the next, and no thread reads what another wrote but its rows of A), a
  // transposed one by columns as above. Both keep one thread's bits, so a product by B^T and
  // one by B's transpose made beforehand (a loop gradient's) stay equal, and no partial sums
  // wait for the calling thread to add them. An LSTM step's 32 x 128 times 128 x 512 and its
  // gradient's 32 x 512 times 512 x 128: the B32 T32 step's 2-thread medians 4-10% lower than
  // with the split over k as the layer's loop, 1% as the cell unrolled (whose gradient
  // multiplies by U^T, by columns).
  s.few_rows_small_b = s.few_rows && m >= 32 && int64_t{k} * n <= (int64_t{1} << 16);
  s.few_rows_by_rows = s.few_rows_small_b && !tb;
  const bool too_small = (flops < 2 * kParallelGemmFlops && !s.few_rows) || (m < 32 && !(s.by_columns && n >= 128));
  s.serial = threads == 1 || (too_small && !s.few_rows_by_rows);
  // Parts of at least 128 of k, and partials of at most 4 MB in all (the calling thread keeps
  // its buffer for the next product).
  s.k_parts = std::min<int64_t>({int64_t{threads}, k / 128, 1 + (int64_t{1} << 20) / (int64_t{m} * n)});
  s.over_k = own && !s.serial && !s.few_rows_small_b && s.k_parts >= 2 && k >= 2 * std::max(m, n);
  return s;
}

}  // namespace

bool own_sgemm_sums_over_k_in_parts(int64_t m, int64_t n, int64_t k, bool transpose_b) {
  return split_of(m, n, k, transpose_b, own_avx512_kernels(), std::max(2, num_threads())).over_k;
}

// Between thread counts the last bits can differ: OpenBLAS packs and blocks a smaller product
// differently (as it does when its own threads split one), and a split over k adds its parts'
// sums at the end. For a given thread count the bits are always the same.
template <class T>
void gemm(int m, int n, int k, const T* a, int lda, bool ta, const T* b, int ldb, bool tb, T* c,
          int ldc, bool accumulate, const GemmEpilogue* epilogue) {
  if (m == 0 || n == 0) return;
  // The rows [r0, r1) and columns [c0, c1) a thread has just computed get the epilogue.
  auto finish = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    if constexpr (std::is_same_v<T, float>) epilogue_rows(epilogue, c, ldc, r0, r1, c0, c1);
    else TG_CHECK(!epilogue, "a gemm epilogue on float64");
  };
  if (k == 0) {  // an empty sum; BLAS must not see K = 0 with a zero leading dim
    if (!accumulate)
      for (int i = 0; i < m; ++i) std::fill(c + int64_t{i} * ldc, c + int64_t{i} * ldc + n, T(0));
    finish(0, m, 0, n);
    return;
  }
  use_one_blas_thread();
  // The AVX-512 kernels read B untransposed: a transposed B is packed first, by the thread that
  // multiplies it (packed on one thread and read on another, it crossed between the cores'
  // caches, and the MLP's dz W2^T ran slower on two threads than on one).
  bool own = false;
  if constexpr (std::is_same_v<T, float>) own = own_avx512_kernels();
  const GemmSplit split = split_of(m, n, k, tb, own, num_threads());
  const bool by_columns = split.by_columns, few_rows = split.few_rows, few_rows_by_rows = split.few_rows_by_rows;
  const bool serial = split.serial;
  if constexpr (std::is_same_v<T, float>) {
    if (split.over_k) {
      own_sgemm_split_k(static_cast<int>(split.k_parts), m, n, k, a, lda, ta, b, ldb, tb, c, ldc, accumulate, epilogue);
      return;
    }
    if (own && (serial || (by_columns && !few_rows_by_rows))) {
      // Columns c0..c1 of C: B's columns, or rows of a transposed B packed into columns.
      auto columns = [&](int64_t c0, int64_t c1) {
        const int w = static_cast<int>(c1 - c0);
        const PackedB bp = tb ? transposed_copy(w, k, b + c0 * ldb, ldb) : PackedB{b + c0, ldb};
        own_sgemm(m, w, k, a, lda, ta, bp.data, bp.ld, c + c0, ldc, accumulate, epilogue, c0);
        // The column sums of these columns, while they are in this core's cache. Added per
        // block of 16 rows inside the kernels they cost 2.4 us more for 128 x 256 on one
        // thread (and 8 us more added row by row), against 1-2 us here.
        if (epilogue && epilogue->column_sums) add_rows_to_column_sums(*epilogue, c, ldc, 0, m, c0, c1);
      };
      if (serial) columns(0, n);
      else parallel_for(n, std::max<int64_t>(64, (few_rows ? kParallelGemmFlops / 2 : kParallelGemmFlops) / (int64_t{2} * m * k)) / 16 * 16, columns);
      return;
    }
    if (own && tb) {  // rows: packed once here, not per row block
      const PackedB packed = transposed_copy(n, k, b, ldb);
      b = packed.data, ldb = packed.ld, tb = false;
    }
  }
  if (serial) {
    gemm_call(m, n, k, a, lda, ta, b, ldb, tb, c, ldc, accumulate);
    finish(0, m, 0, n);
    return;
  }
  const int64_t grain = few_rows_by_rows ? 16 : std::max<int64_t>(16, kParallelGemmFlops / (int64_t{2} * n * k));
  if constexpr (std::is_same_v<T, float>) {
    // Rows in blocks claimed from each thread's range (BlockRanges) where the panel path runs
    // them (this machine's 48 KiB L1; Zen 4 keeps the halves below), at least four per thread.
    const int parts = num_threads();
    if (own && !few_rows_by_rows && takes_panels(m, n, k) && m >= 4 * parts * kClaimRows && m / parts >= grain) {
      BlockRanges ranges((m + kClaimRows - 1) / kClaimRows, parts);
      parallel_parts(parts, [&](int p) {
        own_sgemm_claimed(m, n, k, a, lda, ta, b, ldb, c, ldc, accumulate, epilogue, ranges, p,
                          [&](int64_t r0, int64_t r1) { epilogue_rows(epilogue, c, ldc, r0, r1, 0, n, true); });
      });
      return;
    }
  }
  parallel_for(m, grain, [&](int64_t r0, int64_t r1) {
    // Rows r0..r1 of op(A): rows of A, or columns of a transposed A.
    const T* a_rows = ta ? a + r0 : a + r0 * lda;
    if constexpr (std::is_same_v<T, float>) {
      if (own) {  // B is untransposed here (packed above)
        GemmEpilogue storage;
        own_sgemm(static_cast<int>(r1 - r0), n, k, a_rows, lda, ta, b, ldb, c + r0 * ldc, ldc, accumulate,
                  elementwise_from_row(epilogue, r0, storage));
        epilogue_rows(epilogue, c, ldc, r0, r1, 0, n, true);
        return;
      }
    }
    gemm_call(static_cast<int>(r1 - r0), n, k, a_rows, lda, ta, b, ldb, tb, c + r0 * ldc, ldc,
              accumulate);
    finish(r0, r1, 0, n);
  });
}

template void gemm<float>(int, int, int, const float*, int, bool, const float*, int, bool, float*, int, bool,
                          const GemmEpilogue*);
template void gemm<double>(int, int, int, const double*, int, bool, const double*, int, bool, double*, int,
                           bool, const GemmEpilogue*);

}  // namespace tg::detail
