// Hand-written C++ references and the machine-limit loops (see reference_cpp.h). Compiled with
// -O3 -march=native -ffast-math -fopenmp (besides tg_bench's warning flags): this is the code a
// C++ programmer who wants speed writes, and the compiler is allowed everything that programmer
// would allow it. Only this object gets -ffast-math; the link does not, so crtfastmath.o (which
// sets flush-to-zero for the whole process) is not linked into tg_bench.
#include "reference_cpp.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>

namespace tg_bench::reference {
namespace {

// Inputs up to one block take the per-element loop below; longer ones go block by block, and
// from kParallelMin elements on several threads (waking an OpenMP team costs a few
// microseconds, which the relu chain spends on about 16K elements on one core).
constexpr std::int64_t kBlock = 256;
constexpr std::int64_t kParallelMin = std::int64_t{1} << 14;

// One round of the chain. relu as tracegraph defines it: x < 0 ? 0 : x.
inline float tanh_step(float v) { return std::tanh(v * 1.01f + 0.5f); }
inline float relu_step(float v) {
  v = v * 1.01f + 0.5f;
  return v < 0.0f ? 0.0f : v;
}

// One element through all 99 ops, unrolled: gcc does not vectorise an outer loop whose inner
// loop calls a function (tanhf), and the straight-line body lets it vectorise the element loop.
template <float (*kStep)(float)>
inline float all_rounds(float v) {
#pragma GCC unroll 33
  for (int r = 0; r < kChainRounds; ++r) v = kStep(v);
  return v;
}

// Two shapes, each the faster where it is used (measured on the 2-core AVX-512 VM):
// - a few floats: each element in a register through all 99 ops, one zmm register per 16
//   (simdlen(16): gcc's default tuning prefers 256-bit vectors and would otherwise call libmvec's
//   8-lane tanhf on half-width registers);
// - many: 256 floats (1 KiB, in L1) at a time, every op over the block before the next. The
//   block's 16 registers' worth of elements are independent, so the core overlaps 16 tanh calls
//   or FMA chains where the per-element loop waits on one; 3x faster for the 1M tanh chain.
template <float (*kStep)(float)>
inline void block(const float* __restrict x, float* __restrict y, std::int64_t m) {
  alignas(64) float v[kBlock];
#pragma omp simd
  for (std::int64_t j = 0; j < m; ++j) v[j] = x[j];
  for (int r = 0; r < kChainRounds; ++r) {
#pragma omp simd simdlen(16)
    for (std::int64_t j = 0; j < m; ++j) v[j] = kStep(v[j]);
  }
#pragma omp simd
  for (std::int64_t j = 0; j < m; ++j) y[j] = v[j];
}

template <float (*kStep)(float)>
void chain(const float* __restrict x, float* __restrict y, std::int64_t n, int threads) {
  if (n <= kBlock) {
#pragma omp simd simdlen(16)
    for (std::int64_t i = 0; i < n; ++i) y[i] = all_rounds<kStep>(x[i]);
    return;
  }
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) num_threads(threads) \
    if (threads > 1 && n >= kParallelMin)
  for (std::int64_t k = 0; k < blocks; ++k) {
    const std::int64_t b = k * kBlock;
    block<kStep>(x + b, y + b, n - b < kBlock ? n - b : kBlock);
  }
}

#if defined(__AVX512F__)
constexpr int kLanes = 16;
#elif defined(__AVX2__)
constexpr int kLanes = 8;
#else
constexpr int kLanes = 1;
#endif
using Vec = float __attribute__((vector_size(kLanes * sizeof(float))));

// Two FMA units with a 4-cycle latency keep 8 independent chains in flight; 12 leave slack for
// a longer latency and still fit the 16 (AVX2) or 32 (AVX-512) vector registers.
constexpr int kChains = 12;

}  // namespace

void tanh_chain(const float* x, float* y, std::int64_t n, int threads) {
  chain<tanh_step>(x, y, n, threads);
}

void relu_chain(const float* x, float* y, std::int64_t n, int threads) {
  chain<relu_step>(x, y, n, threads);
}

void scale_copy(const float* __restrict x, float* __restrict y, std::int64_t n, float s,
                int threads) {
#pragma omp parallel for simd schedule(static) num_threads(threads)
  for (std::int64_t i = 0; i < n; ++i) y[i] = s * x[i];
}

double fma_loop(std::int64_t iterations, int threads, float* sink) {
  float total = 0.0f;
  double flops = 0.0;  // counted by the threads that ran, in case OpenMP gave fewer
#pragma omp parallel num_threads(threads) reduction(+ : total, flops)
  {
    // A multiplier just below 1 keeps the values finite however long the loop runs.
    const Vec m = Vec{} + 0.999999f, a = Vec{} + 1e-7f;
    Vec acc[kChains];
    for (int k = 0; k < kChains; ++k) acc[k] = Vec{} + static_cast<float>(omp_get_thread_num() + k);
    for (std::int64_t it = 0; it < iterations; ++it)
      for (int k = 0; k < kChains; ++k) acc[k] = acc[k] * m + a;
    Vec sum = Vec{};
    for (int k = 0; k < kChains; ++k) sum += acc[k];
    for (int l = 0; l < kLanes; ++l) total += sum[l];
    flops += 2.0 * kLanes * kChains * static_cast<double>(iterations);
  }
  *sink = total;
  return flops;
}

int fma_lanes() { return kLanes; }

namespace {

// One image's im2col (forward) or col2im (adjoint, adding into x): rows (y, x), columns
// (ky, kx, c), SAME padding at stride 1.
template <bool kAdjoint>
void im2col_image(float* __restrict x, int h, int w, int c, int kh, int kw, float* __restrict col) {
  const int pt = (kh - 1) / 2, pl = (kw - 1) / 2;
  for (int oy = 0; oy < h; ++oy)
    for (int ox = 0; ox < w; ++ox)
      for (int ky = 0; ky < kh; ++ky)
        for (int kx = 0; kx < kw; ++kx, col += c) {
          const int iy = oy - pt + ky, ix = ox - pl + kx;
          if (iy < 0 || iy >= h || ix < 0 || ix >= w) {
            if (!kAdjoint)
              for (int ch = 0; ch < c; ++ch) col[ch] = 0.0f;
            continue;
          }
          float* p = x + (static_cast<std::int64_t>(iy) * w + ix) * c;
          for (int ch = 0; ch < c; ++ch) {
            if (kAdjoint) p[ch] += col[ch];
            else col[ch] = p[ch];
          }
        }
}

// Images per im2col block: the block's matrix (about 200 KB per 14x14x32 image) stays in cache
// for the GEMM that reads it, as a whole-batch im2col (29 MB here) would not.
constexpr int kBlockImages = 4;

}  // namespace

void conv2d_same(const float* x, int n, int h, int w, int c, const float* f, int kh, int kw, int oc,
                 float* y, float* col, int threads) {
  const int k = kh * kw * c, rows = h * w;
  const std::int64_t image = static_cast<std::int64_t>(rows) * c;
  openblas_set_num_threads(1);  // one BLAS thread per OpenMP thread
#pragma omp parallel num_threads(threads)
  {
    float* mine = col + static_cast<std::int64_t>(omp_get_thread_num()) * kBlockImages * rows * k;
#pragma omp for schedule(static)
    for (int i0 = 0; i0 < n; i0 += kBlockImages) {
      const int count = std::min(kBlockImages, n - i0);
      for (int j = 0; j < count; ++j)
        im2col_image<false>(const_cast<float*>(x) + (i0 + j) * image, h, w, c, kh, kw,
                            mine + static_cast<std::int64_t>(j) * rows * k);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, count * rows, oc, k, 1.0f, mine, k, f, oc, 0.0f,
                  y + static_cast<std::int64_t>(i0) * rows * oc, oc);
    }
  }
}

void conv2d_same_backward(const float* x, int n, int h, int w, int c, const float* f, int kh, int kw,
                          int oc, const float* dy, float* df, float* dx, float* col, int threads) {
  const int k = kh * kw * c, rows = h * w;
  const std::int64_t image = static_cast<std::int64_t>(rows) * c;
  const std::int64_t per_thread = static_cast<std::int64_t>(kBlockImages) * rows * k + k * oc;
  openblas_set_num_threads(1);
#pragma omp parallel num_threads(threads)
  {
    float* mine = col + omp_get_thread_num() * per_thread;
    float* partial = mine + static_cast<std::int64_t>(kBlockImages) * rows * k;  // this thread's dW
    for (int j = 0; j < k * oc; ++j) partial[j] = 0.0f;
#pragma omp for schedule(static)
    for (int i0 = 0; i0 < n; i0 += kBlockImages) {
      const int count = std::min(kBlockImages, n - i0);
      const float* dy_block = dy + static_cast<std::int64_t>(i0) * rows * oc;
      for (int j = 0; j < count; ++j)
        im2col_image<false>(const_cast<float*>(x) + (i0 + j) * image, h, w, c, kh, kw,
                            mine + static_cast<std::int64_t>(j) * rows * k);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, oc, count * rows, 1.0f, mine, k, dy_block, oc,
                  1.0f, partial, oc);
      if (!dx) continue;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, count * rows, k, oc, 1.0f, dy_block, oc, f, oc, 0.0f,
                  mine, k);
      for (int j = 0; j < count; ++j) {
        float* xi = dx + (i0 + j) * image;
        for (std::int64_t e = 0; e < image; ++e) xi[e] = 0.0f;
        im2col_image<true>(xi, h, w, c, kh, kw, mine + static_cast<std::int64_t>(j) * rows * k);
      }
    }
  }
  for (int j = 0; j < k * oc; ++j) {
    float sum = 0.0f;
    for (int t = 0; t < threads; ++t) sum += col[t * per_thread + kBlockImages * rows * k + j];
    df[j] = sum;
  }
}

// Calls fn(input pixel offset, filter offset of the tap) for every tap of output pixel (b, oy,
// ox) that lands inside the image (SAME, stride 1: (k - 1) / 2 rows and columns before).
template <class Fn>
inline void each_tap_inside(int b, int oy, int ox, int h, int w, int c, int kh, int kw, int oc, Fn&& fn) {
  for (int ky = 0; ky < kh; ++ky) {
    const int iy = oy + ky - (kh - 1) / 2;
    if (iy < 0 || iy >= h) continue;
    for (int kx = 0; kx < kw; ++kx) {
      const int ix = ox + kx - (kw - 1) / 2;
      if (ix < 0 || ix >= w) continue;
      fn(((static_cast<std::int64_t>(b) * h + iy) * w + ix) * c, static_cast<std::int64_t>(ky * kw + kx) * c * oc);
    }
  }
}

void conv2d_same_direct(const float* x, int n, int h, int w, int c, const float* f, int kh, int kw, int oc,
                        float* y, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int b = 0; b < n; ++b)
    for (int oy = 0; oy < h; ++oy)
      for (int ox = 0; ox < w; ++ox) {
        float* out = y + ((static_cast<std::int64_t>(b) * h + oy) * w + ox) * oc;
        for (int o = 0; o < oc; ++o) out[o] = 0.0f;
        each_tap_inside(b, oy, ox, h, w, c, kh, kw, oc, [&](std::int64_t in, std::int64_t tap) {
          for (int ci = 0; ci < c; ++ci) {
            const float v = x[in + ci];
            const float* row = f + tap + static_cast<std::int64_t>(ci) * oc;
#pragma omp simd
            for (int o = 0; o < oc; ++o) out[o] += v * row[o];
          }
        });
      }
}

void conv2d_same_direct_backward(const float* x, int n, int h, int w, int c, const float* f, int kh, int kw,
                                 int oc, const float* dy, float* df, float* dx, float* scratch, int threads) {
  const std::int64_t fsize = static_cast<std::int64_t>(kh) * kw * c * oc;
  const std::int64_t image = static_cast<std::int64_t>(h) * w * c;
#pragma omp parallel num_threads(threads)
  {
    float* partial = scratch + omp_get_thread_num() * fsize;
    for (std::int64_t j = 0; j < fsize; ++j) partial[j] = 0.0f;
#pragma omp for schedule(static)
    for (int b = 0; b < n; ++b) {
      if (dx)
        for (std::int64_t e = 0; e < image; ++e) dx[b * image + e] = 0.0f;
      for (int oy = 0; oy < h; ++oy)
        for (int ox = 0; ox < w; ++ox) {
          const float* g = dy + ((static_cast<std::int64_t>(b) * h + oy) * w + ox) * oc;
          each_tap_inside(b, oy, ox, h, w, c, kh, kw, oc, [&](std::int64_t in, std::int64_t tap) {
            for (int ci = 0; ci < c; ++ci) {
              const float v = x[in + ci];
              float* drow = partial + tap + static_cast<std::int64_t>(ci) * oc;
#pragma omp simd
              for (int o = 0; o < oc; ++o) drow[o] += v * g[o];
              if (!dx) continue;
              const float* frow = f + tap + static_cast<std::int64_t>(ci) * oc;
              float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
              for (int o = 0; o < oc; ++o) sum += frow[o] * g[o];
              dx[in + ci] += sum;
            }
          });
        }
    }
  }
  for (std::int64_t j = 0; j < fsize; ++j) {
    float sum = 0.0f;
    for (int t = 0; t < threads; ++t) sum += scratch[t * fsize + j];
    df[j] = sum;
  }
}

}  // namespace tg_bench::reference
