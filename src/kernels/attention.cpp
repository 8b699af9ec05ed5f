// The tiled attention kernels (attention.h). Work splits over (batch, head, tile of rows) on the
// thread pool; every output row is computed by one task, in an order fixed by the sizes, so the
// bits do not depend on the thread count. Products of tiles go through gemm, on the calling
// thread.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/gemm.h"
#include "kernels/simd_math.h"
#include "kernels/softmax_rows.h"

#if defined(__GNUC__) && defined(__x86_64__)
#define TG_ATTENTION_AVX512 1
#include <immintrin.h>
#endif

namespace tg::detail {

namespace {

// Query rows and keys per tile: a 64 x 128 score tile (32 KiB in float32) stays in L2 with its
// operands for head sizes up to a few hundred.
constexpr int64_t kRowTile = 64;
constexpr int64_t kKeyTile = 128;

// splitmix64's finaliser: a bijection whose output bits all depend on every input bit.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

int ld(int64_t n) { return static_cast<int>(std::max<int64_t>(1, n)); }

template <class T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();

// The maximum and the sum of a row, over 16 partial results (independent chains the compiler
// turns into vector lanes) combined in a fixed order. A NaN is never the maximum.
constexpr int kLanes = 16;
template <class T>
T row_max(const T* row, int64_t n) {
  T m[kLanes];
  std::fill(m, m + kLanes, kNegInf<T>);
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes)
    for (int l = 0; l < kLanes; ++l) m[l] = row[c + l] > m[l] ? row[c + l] : m[l];
  for (int l = 0; c < n; ++c, ++l) m[l] = row[c] > m[l] ? row[c] : m[l];
  T out = kNegInf<T>;
  for (int l = 0; l < kLanes; ++l) out = m[l] > out ? m[l] : out;
  return out;
}
template <class T>
T row_sum(const T* row, int64_t n) {
  T s[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes)
    for (int l = 0; l < kLanes; ++l) s[l] += row[c + l];
  for (int l = 0; c < n; ++c, ++l) s[l] += row[c];
  T out = 0;
  for (int l = 0; l < kLanes; ++l) out += s[l];
  return out;
}

#ifdef TG_ATTENTION_AVX512
// The float32 row passes on AVX-512 registers of kLanes floats, with the portable loops' bits
// (the loops are built for the baseline x86-64, SSE2): lane l does what partial l of row_max and
// row_sum does, in the same order, and the lanes are combined as there; the elementwise passes
// are the portable loops' single operations (no product here feeds a sum, so nothing can be
// contracted into an FMA). exp stays one exp_in_place call over the tile: simd::exp_f32's loop
// is faster than its routine called per register. Compiled for AVX-512 by the target attribute
// and called only after the run-time check (use_avx512).
static_assert(kLanes == 16, "one AVX-512 register holds the kLanes partial results");
#define TG_AVX512_FN __attribute__((target("avx512f")))
constexpr __mmask16 kAllLanes = 0xffff;

TG_AVX512_FN __mmask16 first_lanes(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }

// row_max(row, n). (The max is masked with all lanes set: GCC 12's unmasked form reads an
// undefined register that -Wmaybe-uninitialized reports, GCC bug 105593.)
TG_AVX512_FN float row_max_avx512(const float* row, int64_t n) {
  const __m512 neg_inf = _mm512_set1_ps(kNegInf<float>);
  __m512 m = neg_inf;
  int64_t c = 0;
  // vmaxps gives its first operand where it is greater, else its second: row[c + l] > m[l] ? ...
  for (; c + kLanes <= n; c += kLanes) m = _mm512_mask_max_ps(m, kAllLanes, _mm512_loadu_ps(row + c), m);
  if (c < n) m = _mm512_mask_max_ps(m, kAllLanes, _mm512_mask_loadu_ps(neg_inf, first_lanes(n - c), row + c), m);
  alignas(64) float part[kLanes];
  _mm512_store_ps(part, m);
  float out = kNegInf<float>;
  for (int l = 0; l < kLanes; ++l) out = part[l] > out ? part[l] : out;
  return out;
}

// row_sum(row, n).
TG_AVX512_FN float row_sum_avx512(const float* row, int64_t n) {
  __m512 s = _mm512_setzero_ps();
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes) s = _mm512_add_ps(s, _mm512_loadu_ps(row + c));
  if (c < n) {
    const __mmask16 k = first_lanes(n - c);
    s = _mm512_mask_add_ps(s, k, s, _mm512_maskz_loadu_ps(k, row + c));
  }
  alignas(64) float part[kLanes];
  _mm512_store_ps(part, s);
  float out = 0;
  for (int l = 0; l < kLanes; ++l) out += part[l];
  return out;
}

// ds = p * (ds - d) over a row.
TG_AVX512_FN void score_gradients_avx512(const float* p, float* ds, int64_t n, float d) {
  const __m512 dd = _mm512_set1_ps(d);
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes)
    _mm512_storeu_ps(ds + c, _mm512_mul_ps(_mm512_loadu_ps(p + c), _mm512_sub_ps(_mm512_loadu_ps(ds + c), dd)));
  if (c < n) {
    const __mmask16 k = first_lanes(n - c);
    const __m512 g = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, ds + c), dd);
    _mm512_mask_storeu_ps(ds + c, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, p + c), g));
  }
}

// The partial results of a dot product of n floats: lane l sums x[e] * y[e] for e = l mod kLanes,
// in order, as the portable loop's acc[l] does. The empty asm keeps each product a rounded value
// of its own, so that it is not contracted with the sum into an FMA.
TG_AVX512_FN void dot_lanes_avx512(const float* x, const float* y, int64_t n, float* part) {
  __m512 acc = _mm512_setzero_ps();
  int64_t e = 0;
  for (; e + kLanes <= n; e += kLanes) {
    __m512 prod = _mm512_mul_ps(_mm512_loadu_ps(x + e), _mm512_loadu_ps(y + e));
    asm("" : "+v"(prod));
    acc = _mm512_add_ps(acc, prod);
  }
  if (e < n) {
    const __mmask16 k = first_lanes(n - e);
    __m512 prod = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + e), _mm512_maskz_loadu_ps(k, y + e));
    asm("" : "+v"(prod));
    acc = _mm512_mask_add_ps(acc, k, acc, prod);
  }
  _mm512_storeu_ps(part, acc);
}

// y = x - v (kScale false: a row shifted by its max or log-sum-exp) or y = x * v (kScale true)
// over n floats; y may be x.
template <bool kScale>
TG_AVX512_FN __m512 with_scalar(__m512 x, __m512 v) {
  if constexpr (kScale) return _mm512_mul_ps(x, v);
  else return _mm512_sub_ps(x, v);
}
template <bool kScale>
TG_AVX512_FN void with_scalar_avx512(const float* x, float v, float* y, int64_t n) {
  const __m512 b = _mm512_set1_ps(v);
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes) _mm512_storeu_ps(y + c, with_scalar<kScale>(_mm512_loadu_ps(x + c), b));
  if (c < n) {
    const __mmask16 k = first_lanes(n - c);
    _mm512_mask_storeu_ps(y + c, k, with_scalar<kScale>(_mm512_maskz_loadu_ps(k, x + c), b));
  }
}
#undef TG_AVX512_FN
#endif

// Whether T's row passes run on AVX-512: float32 on an AVX-512 CPU, unless the caller asks for
// the portable loops.
template <class T>
bool use_avx512(const AttentionParams& p) {
#ifdef TG_ATTENTION_AVX512
  if constexpr (std::is_same_v<T, float>) {
    static const bool has = simd::cpu_has(simd::Isa::kAvx512);
    return has && !p.portable;
  }
#endif
  (void)p;
  return false;
}

// y = x * f over n entries (y may be x).
template <class T>
void scale_row(const T* x, T f, T* y, int64_t n, bool fast) {
#ifdef TG_ATTENTION_AVX512
  if constexpr (std::is_same_v<T, float>)
    if (fast) return with_scalar_avx512<true>(x, f, y, n);
#endif
  (void)fast;
  for (int64_t e = 0; e < n; ++e) y[e] = x[e] * f;
}

// The per-thread scratch of one kernel call: three tiles.
template <class T>
struct Scratch {
  T* qs;    // kRowTile x d: the tile's query rows times the scale
  T* s;     // kRowTile x kKeyTile: scores, then weights
  T* aux;   // forward: kRowTile x dv accumulators, then the rows' max, sum and rescale factor;
            // backward: kRowTile x kKeyTile, the weights' gradients
};

template <class T>
Scratch<T> scratch_for(int64_t d, int64_t aux) {
  thread_local std::vector<T> buffer;
  const std::size_t need = static_cast<std::size_t>(kRowTile * d + kRowTile * kKeyTile + aux);
  if (buffer.size() < need) buffer.resize(need);
  T* base = buffer.data();
  return {base, base + kRowTile * d, base + kRowTile * d + kRowTile * kKeyTile};
}

// Where one (batch, head) pair's rows start.
struct HeadView {
  int64_t b, h, bh;
};
HeadView head_of(const AttentionSizes& s, int64_t bh) { return {bh / s.heads, bh % s.heads, bh}; }

// Where row t of one head of a tensor with `count` rows per head and `width` entries per row
// starts, and how far apart the head's rows are: (batch, heads, count, width), or interleaved
// (batch, count, heads, width).
int64_t row_at(const AttentionSizes& sz, const HeadView& hv, int64_t count, int64_t width, int64_t t) {
  return sz.interleaved ? ((hv.b * count + t) * sz.heads + hv.h) * width : (hv.bh * count + t) * width;
}
int64_t row_step(const AttentionSizes& sz, int64_t width) { return sz.interleaved ? sz.heads * width : width; }

// qs = q rows [i0, i0 + rows) of the head, times the scale.
template <class T>
void scaled_rows(const AttentionSizes& sz, const AttentionParams& p, const T* q, const HeadView& hv, int64_t i0,
                 int64_t rows, T* qs) {
  const T scale = static_cast<T>(p.scale);
  const T* src = q + row_at(sz, hv, sz.tq, sz.d, i0);
  const int64_t step = row_step(sz, sz.d);
  const bool fast = use_avx512<T>(p);
  for (int64_t r = 0; r < rows; ++r) scale_row(src + r * step, scale, qs + r * sz.d, sz.d, fast);
}

// s (rows x cols) = the scores of query rows [i0, i0 + rows) against keys [j0, j0 + cols): the
// scaled rows times the keys, plus an additive mask, -inf where the causal or a bool mask hides
// the key.
template <class T>
void tile_scores(const AttentionSizes& sz, const AttentionParams& p, const HeadView& hv, const T* qs, int64_t i0,
                 int64_t rows, const T* k, int64_t j0, int64_t cols, T* s) {
  if (sz.d > 0)
    gemm<T>(static_cast<int>(rows), static_cast<int>(cols), static_cast<int>(sz.d), qs, ld(sz.d), false,
            k + row_at(sz, hv, sz.tk, sz.d, j0), ld(row_step(sz, sz.d)), true, s, ld(cols));
  else
    std::fill(s, s + rows * cols, T(0));
  const AttentionMaskView& m = p.mask;
  // Without a mask, a tile wholly on or below the diagonal hides nothing from anyone.
  if (!m.data && (!p.causal || j0 + cols - 1 <= i0)) return;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = i0 + r;
    T* row = s + r * cols;
    const int64_t base = hv.b * m.strides[0] + hv.h * m.strides[1] + i * m.strides[2];
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t j = j0 + c;
      if (p.causal && j > i) {
        row[c] = kNegInf<T>;
      } else if (m.data) {
        const int64_t at = base + j * m.strides[3];
        if (m.is_bool) {
          if (!static_cast<const bool*>(m.data)[at]) row[c] = kNegInf<T>;
        } else {
          row[c] += static_cast<const T*>(m.data)[at];
        }
      }
    }
  }
}

// The flat index of weight (b, h, i, j) for the dropout hash.
uint64_t flat_index(const AttentionSizes& sz, const HeadView& hv, int64_t i, int64_t j) {
  return static_cast<uint64_t>((hv.bh * sz.tq + i) * sz.tk + j);
}

// The keys a tile of query rows [i0, i0 + rows) can see: all, or under the causal mask those up
// to its last row.
int64_t keys_seen(const AttentionSizes& sz, const AttentionParams& p, int64_t i0, int64_t rows) {
  return p.causal ? std::min(sz.tk, i0 + rows) : sz.tk;
}

template <class T>
void forward_rows(const AttentionSizes& sz, const AttentionParams& p, const T* q, const T* k, const T* v, T* out,
                  T* lse, int64_t task) {
  const int64_t row_tiles = (sz.tq + kRowTile - 1) / kRowTile;
  const HeadView hv = head_of(sz, task / row_tiles);
  const int64_t i0 = (task % row_tiles) * kRowTile;
  const int64_t rows = std::min(kRowTile, sz.tq - i0);
  const Scratch<T> w = scratch_for<T>(sz.d, kRowTile * sz.dv + 3 * kRowTile);
  T* acc = w.aux;
  T* mx = acc + kRowTile * sz.dv;
  T* sum = mx + kRowTile;
  T* rescale = sum + kRowTile;
  std::fill(acc, acc + rows * sz.dv, T(0));
  std::fill(mx, mx + rows, kNegInf<T>);
  std::fill(sum, sum + rows, T(0));
  const bool fast = use_avx512<T>(p);
  scaled_rows(sz, p, q, hv, i0, rows, w.qs);
  const T keep_scale = static_cast<T>(1.0 / (1.0 - p.dropout));
  const int64_t seen = keys_seen(sz, p, i0, rows);
  for (int64_t j0 = 0; j0 < seen; j0 += kKeyTile) {
    const int64_t cols = std::min(kKeyTile, seen - j0);
    tile_scores(sz, p, hv, w.qs, i0, rows, k, j0, cols, w.s);
    // The online softmax: a new running maximum rescales what the row has summed so far. A row
    // that has seen no key yet (maximum -inf) keeps its -inf scores, whose exp is 0; a NaN score
    // is never the maximum and comes out as a NaN weight.
#ifdef TG_ATTENTION_AVX512
    if constexpr (std::is_same_v<T, float>) {
      if (fast) {  // the portable steps with AVX-512 row passes
        for (int64_t r = 0; r < rows; ++r) {
          T* row = w.s + r * cols;
          const T m_new = std::max(mx[r], row_max_avx512(row, cols));
          rescale[r] = T(1);
          if (m_new == kNegInf<T>) continue;
          with_scalar_avx512<false>(row, m_new, row, cols);
          rescale[r] = std::exp(mx[r] - m_new);
          mx[r] = m_new;
        }
        exp_in_place(w.s, rows * cols);
        for (int64_t r = 0; r < rows; ++r) sum[r] = sum[r] * rescale[r] + row_sum_avx512(w.s + r * cols, cols);
      }
    }
#endif
    if (!fast) {
      for (int64_t r = 0; r < rows; ++r) {
        T* row = w.s + r * cols;
        const T tile_max = row_max(row, cols);
        const T m_new = std::max(mx[r], tile_max);
        rescale[r] = T(1);
        if (m_new == kNegInf<T>) continue;
        for (int64_t c = 0; c < cols; ++c) row[c] -= m_new;
        rescale[r] = std::exp(mx[r] - m_new);
        mx[r] = m_new;
      }
      exp_in_place(w.s, rows * cols);
      for (int64_t r = 0; r < rows; ++r) sum[r] = sum[r] * rescale[r] + row_sum(w.s + r * cols, cols);
    }
    for (int64_t r = 0; r < rows; ++r) {
      T* row = w.s + r * cols;
      if (rescale[r] != T(1)) scale_row(acc + r * sz.dv, rescale[r], acc + r * sz.dv, sz.dv, fast);
      if (p.dropout > 0)
        for (int64_t c = 0; c < cols; ++c)
          row[c] = attention_keeps(p, flat_index(sz, hv, i0 + r, j0 + c)) ? row[c] * keep_scale : T(0);
    }
    if (sz.dv > 0)
      gemm<T>(static_cast<int>(rows), static_cast<int>(sz.dv), static_cast<int>(cols), w.s, ld(cols), false,
              v + row_at(sz, hv, sz.tk, sz.dv, j0), ld(row_step(sz, sz.dv)), false, acc, ld(sz.dv), true);
  }
  T* o = out + row_at(sz, hv, sz.tq, sz.dv, i0);
  const int64_t o_step = row_step(sz, sz.dv);
  T* l = lse + hv.bh * sz.tq + i0;
  for (int64_t r = 0; r < rows; ++r) {
    // A row that saw no key: zeros (PyTorch's rule), and -inf for its log-sum-exp.
    if (sum[r] == T(0)) {
      std::fill(o + r * o_step, o + r * o_step + sz.dv, T(0));
      l[r] = kNegInf<T>;
      continue;
    }
    const T inv = T(1) / sum[r];
    scale_row(acc + r * sz.dv, inv, o + r * o_step, sz.dv, fast);
    l[r] = mx[r] + std::log(sum[r]);
  }
}

// The weights' gradients of one tile, recomputed: on return s holds the weights as the output
// used them (after dropout) and ds the scores' gradients, P * (dP - delta) with dP the kept
// weights' gradients.
template <class T>
void tile_gradients(const AttentionSizes& sz, const AttentionParams& p, const HeadView& hv, const T* qs, int64_t i0,
                    int64_t rows, const T* k, const T* v, int64_t j0, int64_t cols, const T* lse, const T* dout,
                    const T* delta, T* s, T* ds) {
  tile_scores(sz, p, hv, qs, i0, rows, k, j0, cols, s);
  const T* l = lse + hv.bh * sz.tq + i0;
  const bool fast = use_avx512<T>(p);
  for (int64_t r = 0; r < rows; ++r) {
    T* row = s + r * cols;
    if (l[r] == kNegInf<T>) {
      std::fill(row, row + cols, kNegInf<T>);  // a row that sees no key has no weights
      continue;
    }
#ifdef TG_ATTENTION_AVX512
    if constexpr (std::is_same_v<T, float>)
      if (fast) {
        with_scalar_avx512<false>(row, l[r], row, cols);
        continue;
      }
#endif
    for (int64_t c = 0; c < cols; ++c) row[c] -= l[r];
  }
  exp_in_place(s, rows * cols);
  if (sz.dv > 0)
    gemm<T>(static_cast<int>(rows), static_cast<int>(cols), static_cast<int>(sz.dv),
            dout + row_at(sz, hv, sz.tq, sz.dv, i0), ld(row_step(sz, sz.dv)), false,
            v + row_at(sz, hv, sz.tk, sz.dv, j0), ld(row_step(sz, sz.dv)), true, ds, ld(cols));
  else
    std::fill(ds, ds + rows * cols, T(0));
  const T keep_scale = static_cast<T>(1.0 / (1.0 - p.dropout));
  const T* dl = delta + hv.bh * sz.tq + i0;
  for (int64_t r = 0; r < rows; ++r) {
    T* pr = s + r * cols;
    T* dr = ds + r * cols;
    if (p.dropout > 0) {
      for (int64_t c = 0; c < cols; ++c) {
        const T z = attention_keeps(p, flat_index(sz, hv, i0 + r, j0 + c)) ? keep_scale : T(0);
        dr[c] = pr[c] * (dr[c] * z - dl[r]);
        pr[c] *= z;
      }
    } else {
      const T d = dl[r];
#ifdef TG_ATTENTION_AVX512
      if constexpr (std::is_same_v<T, float>)
        if (fast) {
          score_gradients_avx512(pr, dr, cols, d);
          continue;
        }
#endif
      for (int64_t c = 0; c < cols; ++c) dr[c] = pr[c] * (dr[c] - d);
    }
  }
}

// dk and dv rows [j0, j0 + cols) of one head: every query row that sees them, tile by tile.
// dq non-null (only when the keys fit one tile, so that this task sees every key of each row):
// dq's rows too, from the same recomputed tiles, and backward_queries is not run.
template <class T>
void backward_keys(const AttentionSizes& sz, const AttentionParams& p, const T* q, const T* k, const T* v,
                   const T* lse, const T* dout, const T* delta, T* dq, T* dk, T* dv, int64_t task) {
  const int64_t key_tiles = (sz.tk + kKeyTile - 1) / kKeyTile;
  const HeadView hv = head_of(sz, task / key_tiles);
  const int64_t j0 = (task % key_tiles) * kKeyTile;
  const int64_t cols = std::min(kKeyTile, sz.tk - j0);
  T* dk_rows = dk + row_at(sz, hv, sz.tk, sz.d, j0);
  T* dv_rows = dv + row_at(sz, hv, sz.tk, sz.dv, j0);
  const int64_t d_step = row_step(sz, sz.d), dv_step = row_step(sz, sz.dv);
  const Scratch<T> w = scratch_for<T>(sz.d, kRowTile * kKeyTile);
  // The first row tile's products store dk and dv, the later ones add to them: a sum started
  // from nothing, as from stored zeros (+0.0 + x is x, and -0.0 comes out +0.0 either way), so
  // the rows are not zeroed first, a write of every row before the products' own.
  const int64_t first_i0 = p.causal ? std::min(j0, sz.tq) : 0;  // rows before j0 see none of these keys
  if (first_i0 >= sz.tq)
    for (int64_t c = 0; c < cols; ++c) {
      std::fill(dk_rows + c * d_step, dk_rows + c * d_step + sz.d, T(0));
      std::fill(dv_rows + c * dv_step, dv_rows + c * dv_step + sz.dv, T(0));
    }
  for (int64_t i0 = first_i0; i0 < sz.tq; i0 += kRowTile) {
    const int64_t rows = std::min(kRowTile, sz.tq - i0);
    const bool add = i0 > first_i0;
    scaled_rows(sz, p, q, hv, i0, rows, w.qs);
    tile_gradients(sz, p, hv, w.qs, i0, rows, k, v, j0, cols, lse, dout, delta, w.s, w.aux);
    if (sz.dv > 0)  // dv += P^T dout
      gemm<T>(static_cast<int>(cols), static_cast<int>(sz.dv), static_cast<int>(rows), w.s, ld(cols), true,
              dout + row_at(sz, hv, sz.tq, sz.dv, i0), ld(dv_step), false, dv_rows, ld(dv_step), add);
    if (sz.d > 0)  // dk += dS^T (q * scale)
      gemm<T>(static_cast<int>(cols), static_cast<int>(sz.d), static_cast<int>(rows), w.aux, ld(cols), true, w.qs,
              ld(sz.d), false, dk_rows, ld(d_step), add);
    if (dq && sz.d > 0) {  // dq = dS k times the scale: these are all the keys the rows see
      T* dq_rows = dq + row_at(sz, hv, sz.tq, sz.d, i0);
      gemm<T>(static_cast<int>(rows), static_cast<int>(sz.d), static_cast<int>(cols), w.aux, ld(cols), false,
              k + row_at(sz, hv, sz.tk, sz.d, j0), ld(d_step), false, dq_rows, ld(d_step), false);
      const T scale = static_cast<T>(p.scale);
      const bool fast = use_avx512<T>(p);
      for (int64_t r = 0; r < rows; ++r) scale_row(dq_rows + r * d_step, scale, dq_rows + r * d_step, sz.d, fast);
    }
  }
}

// dq rows [i0, i0 + rows) of one head: every key they see, tile by tile.
template <class T>
void backward_queries(const AttentionSizes& sz, const AttentionParams& p, const T* q, const T* k, const T* v,
                      const T* lse, const T* dout, const T* delta, T* dq, int64_t task) {
  const int64_t row_tiles = (sz.tq + kRowTile - 1) / kRowTile;
  const HeadView hv = head_of(sz, task / row_tiles);
  const int64_t i0 = (task % row_tiles) * kRowTile;
  const int64_t rows = std::min(kRowTile, sz.tq - i0);
  T* dq_rows = dq + row_at(sz, hv, sz.tq, sz.d, i0);
  const int64_t d_step = row_step(sz, sz.d);
  for (int64_t r = 0; r < rows; ++r) std::fill(dq_rows + r * d_step, dq_rows + r * d_step + sz.d, T(0));
  const Scratch<T> w = scratch_for<T>(sz.d, kRowTile * kKeyTile);
  scaled_rows(sz, p, q, hv, i0, rows, w.qs);
  const int64_t seen = keys_seen(sz, p, i0, rows);
  for (int64_t j0 = 0; j0 < seen; j0 += kKeyTile) {
    const int64_t cols = std::min(kKeyTile, seen - j0);
    tile_gradients(sz, p, hv, w.qs, i0, rows, k, v, j0, cols, lse, dout, delta, w.s, w.aux);
    if (sz.d > 0)  // dq += dS k (times the scale below)
      gemm<T>(static_cast<int>(rows), static_cast<int>(sz.d), static_cast<int>(cols), w.aux, ld(cols), false,
              k + row_at(sz, hv, sz.tk, sz.d, j0), ld(d_step), false, dq_rows, ld(d_step), true);
  }
  const T scale = static_cast<T>(p.scale);
  const bool fast = use_avx512<T>(p);
  for (int64_t r = 0; r < rows; ++r) scale_row(dq_rows + r * d_step, scale, dq_rows + r * d_step, sz.d, fast);
}

}  // namespace

bool attention_keeps(const AttentionParams& p, uint64_t flat_index) {
  const uint64_t x = mix64(mix64(flat_index * 0x9e3779b97f4a7c15ULL ^ p.seed0) + p.seed1);
  const double u = static_cast<double>(x >> 11) * 0x1.0p-53;  // uniform in [0, 1)
  return u >= p.dropout;  // tg::dropout's rule: keep where the noise is at least the rate
}

template <class T>
void attention_forward(const AttentionSizes& s, const AttentionParams& p, const T* q, const T* k, const T* v,
                       T* out, T* lse) {
  const int64_t tasks = s.batch * s.heads * ((s.tq + kRowTile - 1) / kRowTile);
  parallel_for(tasks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) forward_rows(s, p, q, k, v, out, lse, t);
  });
}

template <class T>
void attention_backward(const AttentionSizes& s, const AttentionParams& p, const T* q, const T* k, const T* v,
                        const T* out, const T* lse, const T* dout, const T* dlse, T* dq, T* dk, T* dv) {
  // delta_i = sum(dout_i * out_i) - dlse_i: what every weight of row i subtracts from its
  // gradient (the softmax's own term, and the log-sum-exp's).
  const int64_t n_rows = s.batch * s.heads * s.tq;
  std::vector<T> delta(static_cast<std::size_t>(n_rows));
  const int64_t out_step = row_step(s, s.dv);
  const bool fast = use_avx512<T>(p);
  // Heads across the pool (each row's delta is its own): on one thread this was the serial part
  // of the gradient.
  const int64_t head_grain = std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, s.tq * s.dv));
  parallel_for(s.batch * s.heads, head_grain, [&](int64_t bh0, int64_t bh1) {
    for (int64_t bh = bh0; bh < bh1; ++bh) {
      // Row i of lse's (batch, heads, tq) order; its output row is out_step past the previous one.
      const int64_t first = row_at(s, head_of(s, bh), s.tq, s.dv, 0);
      for (int64_t t = 0; t < s.tq; ++t) {
        const int64_t i = bh * s.tq + t;
        const T* dr = dout + first + t * out_step;
        const T* orow = out + first + t * out_step;
        T acc[kLanes] = {};
#ifdef TG_ATTENTION_AVX512
        if constexpr (std::is_same_v<T, float>)
          if (fast) dot_lanes_avx512(dr, orow, s.dv, acc);
#endif
        if (!fast) {
          int64_t e = 0;
          for (; e + kLanes <= s.dv; e += kLanes)
            for (int l = 0; l < kLanes; ++l) acc[l] += dr[e + l] * orow[e + l];
          for (int l = 0; e < s.dv; ++e, ++l) acc[l] += dr[e] * orow[e];
        }
        delta[static_cast<std::size_t>(i)] = row_sum(acc, kLanes) - (dlse ? dlse[i] : T(0));
      }
    }
  });
  // Keys in one tile: each key task sees every key of its rows and computes dq as well, which
  // saves recomputing every tile's weights and their gradients a second time.
  const int64_t key_tiles = (s.tk + kKeyTile - 1) / kKeyTile;
  T* dq_in_keys = key_tiles == 1 ? dq : nullptr;
  parallel_for(s.batch * s.heads * key_tiles, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t)
      backward_keys(s, p, q, k, v, lse, dout, delta.data(), dq_in_keys, dk, dv, t);
  });
  if (dq_in_keys) return;  // the one key tile's loop starts at row 0: every dq row is written
  const int64_t row_tasks = s.batch * s.heads * ((s.tq + kRowTile - 1) / kRowTile);
  parallel_for(row_tasks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) backward_queries(s, p, q, k, v, lse, dout, delta.data(), dq, t);
  });
}

template void attention_forward<float>(const AttentionSizes&, const AttentionParams&, const float*, const float*,
                                       const float*, float*, float*);
template void attention_forward<double>(const AttentionSizes&, const AttentionParams&, const double*,
                                        const double*, const double*, double*, double*);
template void attention_backward<float>(const AttentionSizes&, const AttentionParams&, const float*, const float*,
                                        const float*, const float*, const float*, const float*, const float*,
                                        float*, float*, float*);
template void attention_backward<double>(const AttentionSizes&, const AttentionParams&, const double*,
                                         const double*, const double*, const double*, const double*,
                                         const double*, const double*, double*, double*, double*);

}  // namespace tg::detail
