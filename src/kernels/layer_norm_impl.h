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

// sum(f(q, j)) over j in [0, c) for each of K rows q: per row 16 partial sums in T (independent
// chains the compiler turns into vector lanes), added up in double in lane order. Each partial
// sums c / 16 terms, in an order fixed by c, so a row's sum does not depend on K; the K rows'
// chains interleave, which hides the latency of the double adds (a row of 128 floats is mostly
// that latency).
constexpr int kLanes = 16;
template <class T, class F>
void lane_sums(int64_t c, F f, T (&s)[kLanes]) {
  for (int l = 0; l < kLanes; ++l) s[l] = T(0);
  int64_t j = 0;
  for (; j + kLanes <= c; j += kLanes)
    for (int l = 0; l < kLanes; ++l) s[l] += f(j + l);
  for (int l = 0; j < c; ++j, ++l) s[l] += f(j);
}
template <class T, int K, class F>
void row_sums(int64_t c, F f, double (&total)[K]) {
  T s[K][kLanes];
  for (int q = 0; q < K; ++q) lane_sums<T>(c, [&](int64_t j) { return f(q, j); }, s[q]);
  for (int q = 0; q < K; ++q) total[q] = 0;
  for (int l = 0; l < kLanes; ++l)
    for (int q = 0; q < K; ++q) total[q] += static_cast<double>(s[q][l]);
}

// Rows taken together by the kernels below (row_sums's K).
constexpr int kRowGroup = 4;

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

// K rows from r: their means and rstds, then each row's y.
template <class T, int K>
void forward_rows(int64_t r, int64_t c, double epsilon, const T* x, const T* gamma, const T* beta, T* y, T* mean,
                  T* rstd) {
  const T* __restrict xr = x + r * c;
  double sum[K], sq[K];
  row_sums<T, K>(c, [&](int q, int64_t j) { return xr[q * c + j]; }, sum);
  T mt[K], it[K];
  for (int q = 0; q < K; ++q) mt[q] = static_cast<T>(sum[q] / static_cast<double>(c));
  row_sums<T, K>(c, [&](int q, int64_t j) {
                   const T d = xr[q * c + j] - mt[q];
                   return d * d;
                 }, sq);
  for (int q = 0; q < K; ++q) {
    const double var = sq[q] / static_cast<double>(c);
    it[q] = static_cast<T>(1.0 / std::sqrt(var + epsilon));
  }
  for (int q = 0; q < K; ++q) {
    const T* __restrict xq = xr + q * c;
    T* __restrict yq = y + (r + q) * c;
    const T m = mt[q], i = it[q];
    for (int64_t j = 0; j < c; ++j) yq[j] = (xq[j] - m) * i * gamma[j] + beta[j];
    mean[r + q] = m;
    rstd[r + q] = i;
  }
}

template <class T>
void forward_impl(int64_t rows, int64_t c, double epsilon, const T* x, const T* gamma, const T* beta, T* y,
                        T* mean, T* rstd) {
  parallel_for(rows, row_grain(c), [&](int64_t begin, int64_t end) {
    int64_t r = begin;
    for (; r + kRowGroup <= end; r += kRowGroup) forward_rows<T, kRowGroup>(r, c, epsilon, x, gamma, beta, y, mean, rstd);
    for (; r < end; ++r) forward_rows<T, 1>(r, c, epsilon, x, gamma, beta, y, mean, rstd);
  });
}

// K rows from r of the gradient: their xhat (into xh, K rows of c), the two row sums of each,
// then each row's dx and its terms of the column sums, in row order.
template <class T, int K>
void backward_rows(int64_t r, int64_t c, const T* x, const T* __restrict gm, const T* mean, const T* rstd,
                   const T* dy, T* dx, T* __restrict xh, T* __restrict cg, T* __restrict cb) {
  // One sweep per row: xhat, and the lane sums of dy * gamma and dy * gamma * xhat (the terms
  // and their order of row_sums, so the same sums).
  T pa[K][kLanes], pb[K][kLanes];
  for (int q = 0; q < K; ++q) {
    const T* __restrict xr = x + (r + q) * c;
    const T* __restrict dyr = dy + (r + q) * c;
    T* __restrict xq = xh + q * c;
    T* __restrict sa = pa[q];
    T* __restrict sb = pb[q];
    const T m = mean[r + q], inv = rstd[r + q];
    for (int l = 0; l < kLanes; ++l) sa[l] = sb[l] = T(0);
    int64_t j = 0;
    for (; j + kLanes <= c; j += kLanes)
      for (int l = 0; l < kLanes; ++l) {
        const T v = (xr[j + l] - m) * inv;
        xq[j + l] = v;
        const T g = dyr[j + l] * gm[j + l];
        sa[l] += g;
        sb[l] += g * v;
      }
    for (int l = 0; j < c; ++j, ++l) {
      const T v = (xr[j] - m) * inv;
      xq[j] = v;
      const T g = dyr[j] * gm[j];
      sa[l] += g;
      sb[l] += g * v;
    }
  }
  double ta[K] = {}, tb[K] = {};
  for (int l = 0; l < kLanes; ++l)
    for (int q = 0; q < K; ++q) {
      ta[q] += static_cast<double>(pa[q][l]);
      tb[q] += static_cast<double>(pb[q][l]);
    }
  for (int q = 0; q < K; ++q) {
    const T a = static_cast<T>(ta[q] / static_cast<double>(c));
    const T bb = static_cast<T>(tb[q] / static_cast<double>(c));
    gradient_row<T>(c, xh + q * c, dy + (r + q) * c, gm, a, bb, rstd[r + q], dx + (r + q) * c, cg, cb);
  }
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
  // 16 units a block, so that chunk boundaries (multiples of 16 units for a grain of 16 or more)
  // fall between blocks; chunks of about row_grain's rows.
  const int64_t grain_blocks = std::max<int64_t>(1, row_grain(c) / per_block);
  parallel_for(blocks * 16, grain_blocks * 16, [&](int64_t u0, int64_t u1) {
    const int64_t b0 = u0 / 16, b1 = u1 / 16;
    // xhat of the row, then the chunk's column sums of dy * xhat and of dy, in T.
    // Every pointer of the loops below names memory no other one does (__restrict), so that they
    // vectorise without run-time overlap checks.
    std::vector<T> scratch(static_cast<std::size_t>((kRowGroup + 2) * c));
    T* __restrict xh = scratch.data();
    T* __restrict cg = xh + kRowGroup * c;
    T* __restrict cb = cg + c;
    for (int64_t b = b0; b < b1; ++b) {
      double* pg = partial.data() + b * 2 * c;
      double* pb = pg + c;
      const int64_t r_end = std::min(rows, (b + 1) * per_block);
      for (int64_t r0 = b * per_block; r0 < r_end; r0 += kColumnChunk) {
        std::fill(cg, cg + 2 * c, T(0));
        const int64_t r1 = std::min(r_end, r0 + kColumnChunk);
        int64_t r = r0;
        for (; r + kRowGroup <= r1; r += kRowGroup)
          backward_rows<T, kRowGroup>(r, c, x, gamma, mean, rstd, dy, dx, xh, cg, cb);
        for (; r < r1; ++r) backward_rows<T, 1>(r, c, x, gamma, mean, rstd, dy, dx, xh, cg, cb);
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
