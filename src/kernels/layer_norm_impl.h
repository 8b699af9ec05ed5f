// The layer-norm kernels' code (layer_norm.h), compiled twice: by layer_norm.cpp for the baseline
// ISA and by layer_norm_avx512.cpp for AVX-512F (-ffp-contract=off: no multiply-add is fused, so
// both give the same bits; the sums keep their order, 16 partial sums being one vector). An
// unnamed namespace keeps the two copies apart. Each row's sums run over 16 partial sums in the
// element type, added up in double; the column sums over chunks of 32 rows, likewise.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"

namespace tg::detail {

/// The AVX-512F build of the kernels (layer_norm_avx512.cpp); layer_norm.h's functions call it
/// where the CPU has AVX-512F.
template <class T>
void layer_norm_forward_avx512(int64_t rows, int64_t c, double epsilon, const T* x, const T* gamma, const T* beta,
                               T* y, T* mean, T* rstd);
template <class T>
void layer_norm_backward_avx512(int64_t rows, int64_t c, const T* x, const T* gamma, const T* mean, const T* rstd,
                                const T* dy, T* dx, T* dgamma, T* dbeta);

namespace {

// Rows per task: about 16K elements, so that a small tensor runs on the calling thread.
int64_t row_grain(int64_t c) { return std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, c)); }

// sum(f(j)) over j in [0, c): 16 partial sums in T (independent chains the compiler turns into
// vector lanes), added up in double. Each partial sums c / 16 terms, in an order fixed by c.
constexpr int kLanes = 16;
template <class T, class F>
double row_sum(int64_t c, F f) {
  T s[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= c; j += kLanes)
    for (int l = 0; l < kLanes; ++l) s[l] += f(j + l);
  for (int l = 0; j < c; ++j, ++l) s[l] += f(j);
  double total = 0;
  for (int l = 0; l < kLanes; ++l) total += static_cast<double>(s[l]);
  return total;
}

// Rows whose column sums a block adds up in T before adding them into its double sums.
constexpr int64_t kColumnChunk = 32;

// One row's dx, and its terms of the column sums: a function of its own so that __restrict on
// its parameters lets the loop vectorise without run-time overlap checks.
template <class T>
void gradient_row(int64_t c, const T* __restrict xh, const T* __restrict dy, const T* __restrict gamma, T a, T b,
                  T inv, T* __restrict dx, T* __restrict sum_g, T* __restrict sum_b) {
  for (int64_t j = 0; j < c; ++j) {
    dx[j] = inv * (dy[j] * gamma[j] - a - xh[j] * b);
    sum_g[j] += dy[j] * xh[j];
    sum_b[j] += dy[j];
  }
}

template <class T>
void forward_impl(int64_t rows, int64_t c, double epsilon, const T* x, const T* gamma, const T* beta, T* y,
                        T* mean, T* rstd) {
  parallel_for(rows, row_grain(c), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* __restrict xr = x + r * c;
      T* __restrict yr = y + r * c;
      const T mt = static_cast<T>(row_sum<T>(c, [&](int64_t j) { return xr[j]; }) / static_cast<double>(c));
      const double var = row_sum<T>(c, [&](int64_t j) {
                           const T d = xr[j] - mt;
                           return d * d;
                         }) / static_cast<double>(c);
      const T it = static_cast<T>(1.0 / std::sqrt(var + epsilon));
      for (int64_t j = 0; j < c; ++j) yr[j] = (xr[j] - mt) * it * gamma[j] + beta[j];
      mean[r] = mt;
      rstd[r] = it;
    }
  });
}

template <class T>
void backward_impl(int64_t rows, int64_t c, const T* x, const T* gamma, const T* mean, const T* rstd,
                         const T* dy, T* dx, T* dgamma, T* dbeta) {
  // Blocks of rows, each with its own column sums of dy * xhat and dy, added in block order: at
  // least 64 rows a block, at most 64 blocks, and at most 4 MiB of partial sums.
  const int64_t cap = std::max<int64_t>(1, (int64_t{1} << 22) / (16 * std::max<int64_t>(1, c)));
  const int64_t blocks = std::max<int64_t>(1, std::min({(rows + 63) / 64, int64_t{64}, cap}));
  const int64_t per_block = (rows + blocks - 1) / blocks;
  std::vector<double> partial(static_cast<std::size_t>(blocks * 2 * c), 0.0);
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    // xhat of the row, then the chunk's column sums of dy * xhat and of dy, in T.
    // Every pointer of the loops below names memory no other one does (__restrict), so that they
    // vectorise without run-time overlap checks.
    std::vector<T> scratch(static_cast<std::size_t>(3 * c));
    T* __restrict xh = scratch.data();
    T* __restrict cg = xh + c;
    T* __restrict cb = cg + c;
    const T* __restrict gm = gamma;
    for (int64_t b = b0; b < b1; ++b) {
      double* pg = partial.data() + b * 2 * c;
      double* pb = pg + c;
      const int64_t r_end = std::min(rows, (b + 1) * per_block);
      for (int64_t r0 = b * per_block; r0 < r_end; r0 += kColumnChunk) {
        std::fill(cg, cg + 2 * c, T(0));
        for (int64_t r = r0; r < std::min(r_end, r0 + kColumnChunk); ++r) {
          const T* __restrict xr = x + r * c;
          const T* __restrict dyr = dy + r * c;
          T* __restrict dxr = dx + r * c;
          const T m = mean[r], inv = rstd[r];
          for (int64_t j = 0; j < c; ++j) xh[j] = (xr[j] - m) * inv;
          const T a = static_cast<T>(row_sum<T>(c, [&](int64_t j) { return dyr[j] * gm[j]; }) /
                                     static_cast<double>(c));
          const T bb = static_cast<T>(row_sum<T>(c, [&](int64_t j) { return dyr[j] * gm[j] * xh[j]; }) /
                                      static_cast<double>(c));
          gradient_row<T>(c, xh, dyr, gm, a, bb, inv, dxr, cg, cb);
        }
        for (int64_t j = 0; j < c; ++j) {
          pg[j] += static_cast<double>(cg[j]);
          pb[j] += static_cast<double>(cb[j]);
        }
      }
    }
  });
  for (int64_t j = 0; j < c; ++j) {
    double sg = 0, sb = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      sg += partial[static_cast<std::size_t>(b * 2 * c + j)];
      sb += partial[static_cast<std::size_t>(b * 2 * c + c + j)];
    }
    dgamma[j] = static_cast<T>(sg);
    dbeta[j] = static_cast<T>(sb);
  }
}

}  // namespace

}  // namespace tg::detail
