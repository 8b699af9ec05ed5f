// The layer-norm kernels (layer_norm.h). Each row's sums run in double over four partial sums
// (independent chains the compiler can overlap), in an order fixed by c alone.
#include "kernels/layer_norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/thread_pool.h"

namespace tg::detail {

namespace {

// Rows per task: about 16K elements, so that a small tensor runs on the calling thread.
int64_t row_grain(int64_t c) { return std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, c)); }

// sum(f(j)) over j in [0, c), in double.
template <class F>
double row_sum(int64_t c, F f) {
  double s[4] = {0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 4 <= c; j += 4)
    for (int l = 0; l < 4; ++l) s[l] += f(j + l);
  for (; j < c; ++j) s[0] += f(j);
  return (s[0] + s[1]) + (s[2] + s[3]);
}

}  // namespace

template <class T>
void layer_norm_forward(int64_t rows, int64_t c, double epsilon, const T* x, const T* gamma, const T* beta, T* y,
                        T* mean, T* rstd) {
  parallel_for(rows, row_grain(c), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* xr = x + r * c;
      T* yr = y + r * c;
      const double m = row_sum(c, [&](int64_t j) { return static_cast<double>(xr[j]); }) / static_cast<double>(c);
      const double var = row_sum(c, [&](int64_t j) {
                           const double d = static_cast<double>(xr[j]) - m;
                           return d * d;
                         }) / static_cast<double>(c);
      const double inv = 1.0 / std::sqrt(var + epsilon);
      const T mt = static_cast<T>(m), it = static_cast<T>(inv);
      for (int64_t j = 0; j < c; ++j) yr[j] = (xr[j] - mt) * it * gamma[j] + beta[j];
      mean[r] = mt;
      rstd[r] = it;
    }
  });
}

template <class T>
void layer_norm_backward(int64_t rows, int64_t c, const T* x, const T* gamma, const T* mean, const T* rstd,
                         const T* dy, T* dx, T* dgamma, T* dbeta) {
  // Blocks of rows, each with its own column sums of dy * xhat and dy, added in block order: at
  // least 64 rows a block, at most 64 blocks, and at most 4 MiB of partial sums.
  const int64_t cap = std::max<int64_t>(1, (int64_t{1} << 22) / (16 * std::max<int64_t>(1, c)));
  const int64_t blocks = std::max<int64_t>(1, std::min({(rows + 63) / 64, int64_t{64}, cap}));
  const int64_t per_block = (rows + blocks - 1) / blocks;
  std::vector<double> partial(static_cast<std::size_t>(blocks * 2 * c), 0.0);
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    std::vector<T> xhat(static_cast<std::size_t>(c));
    for (int64_t b = b0; b < b1; ++b) {
      double* pg = partial.data() + b * 2 * c;
      double* pb = pg + c;
      for (int64_t r = b * per_block; r < std::min(rows, (b + 1) * per_block); ++r) {
        const T* xr = x + r * c;
        const T* dyr = dy + r * c;
        T* dxr = dx + r * c;
        const T m = mean[r], inv = rstd[r];
        for (int64_t j = 0; j < c; ++j) xhat[static_cast<std::size_t>(j)] = (xr[j] - m) * inv;
        const T* xh = xhat.data();
        const double mg =
            row_sum(c, [&](int64_t j) { return static_cast<double>(dyr[j] * gamma[j]); }) / static_cast<double>(c);
        const double mgx = row_sum(c, [&](int64_t j) { return static_cast<double>(dyr[j] * gamma[j] * xh[j]); }) /
                           static_cast<double>(c);
        const T a = static_cast<T>(mg), bb = static_cast<T>(mgx);
        for (int64_t j = 0; j < c; ++j) {
          dxr[j] = inv * (dyr[j] * gamma[j] - a - xh[j] * bb);
          pg[j] += static_cast<double>(dyr[j] * xh[j]);
          pb[j] += static_cast<double>(dyr[j]);
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

template void layer_norm_forward<float>(int64_t, int64_t, double, const float*, const float*, const float*, float*,
                                        float*, float*);
template void layer_norm_forward<double>(int64_t, int64_t, double, const double*, const double*, const double*,
                                         double*, double*, double*);
template void layer_norm_backward<float>(int64_t, int64_t, const float*, const float*, const float*, const float*,
                                         const float*, float*, float*, float*);
template void layer_norm_backward<double>(int64_t, int64_t, const double*, const double*, const double*,
                                          const double*, const double*, double*, double*, double*);

}  // namespace tg::detail
