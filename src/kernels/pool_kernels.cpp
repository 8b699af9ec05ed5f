#include "kernels/pool_kernels.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/bf16.h"
#include "kernels/gemm.h"
#include "kernels/gemm_epilogue.h"
#include "kernels/pool_grad_avx512.h"
#include "kernels/simd_math.h"

namespace tg::detail {
namespace {

// Runs fn(image) for every image, on the pool when the tensors are large. By image, so that
// the gradient kernels, whose windows overlap within an image, never share an output element.
template <class Fn>
void for_each_image(const PoolGeom& g, Fn&& fn) {
  const int64_t per_image = std::max<int64_t>(1, (g.h * g.w + g.oh * g.ow) * g.c);
  parallel_for(g.n, std::max<int64_t>(1, kParallelMinElements / per_image), [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) fn(n);
  });
}

// Whether v replaces the window's best so far: strictly larger (ties keep the first, rows
// first), and a NaN beats every number but not an earlier NaN, like argmax. The forward value and
// the gradient's routing both use it, so they always agree.
// Bitwise, not short-circuit, operators: no branch for the compiler to keep.
template <class T>
inline bool replaces(T v, T best) {
  return (v > best) | ((v != v) & (best == best));
}

template <class T>
void general_max_pool(const PoolGeom& g, const T* x, T* y) {
  for_each_image(g, [&](int64_t n) {
    const T* img = x + n * g.h * g.w * g.c;
    T* o = y + n * g.oh * g.ow * g.c;
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox, o += g.c) {
        int64_t y0, y1, x0, x1;
        g.window(oy, ox, y0, y1, x0, x1);
        std::fill_n(o, g.c, -std::numeric_limits<T>::infinity());
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = x0; ix < x1; ++ix) {
            const T* p = img + (iy * g.w + ix) * g.c;
            for (int64_t ch = 0; ch < g.c; ++ch) o[ch] = replaces(p[ch], o[ch]) ? p[ch] : o[ch];
          }
      }
  });
}

// Calls begin(n) for every image, then pixel(n, o, at) for each of its output pixels, then
// end(n), on the thread that ran them: o is the
// pixel's offset in the pooled tensor, at[ch] the input pixel (iy * w + ix) of channel ch's first
// maximum in the window, by `replaces`. Per image on the pool. The selection is branch-free and
// its index has the value's width (int32 for float when the image allows), so that the loop
// over channels vectorises: with data in no particular order a branch per element mispredicts
// half the time. The geometry is copied into the task: index stores could otherwise alias the
// shared struct's fields, and the compiler would reload them for every element.
template <class I, class T, class Begin, class Pixel, class End>
void for_each_max_as(const PoolGeom& geom, const T* x, Begin& begin, Pixel& pixel, End& end) {
  for_each_image(geom, [&](int64_t n) {
    const PoolGeom g = geom;
    const int64_t c = g.c;
    begin(n);
    const T* img = x + n * g.h * g.w * c;
    std::vector<T> best(static_cast<std::size_t>(c));
    std::vector<I> at(static_cast<std::size_t>(c));
    T* __restrict const b = best.data();
    I* __restrict const a = at.data();
    int64_t o = n * g.oh * g.ow * c;
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox, o += c) {
        int64_t y0, y1, x0, x1;
        g.window(oy, ox, y0, y1, x0, x1);
        const int64_t first = y0 * g.w + x0;
        std::copy_n(img + first * c, c, b);
        std::fill_n(a, c, static_cast<I>(first));
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = x0; ix < x1; ++ix) {
            const I pix = static_cast<I>(iy * g.w + ix);
            const T* __restrict p = img + static_cast<int64_t>(pix) * c;
            for (int64_t ch = 0; ch < c; ++ch) {
              const T v = p[ch];
              const bool r = replaces(v, b[ch]);
              b[ch] = r ? v : b[ch];
              a[ch] = r ? pix : a[ch];
            }
          }
        pixel(n, o, a);
      }
    end(n);
  });
}

template <class T, class Begin, class Pixel, class End>
void for_each_max(const PoolGeom& g, const T* x, Begin&& begin, Pixel&& pixel, End&& end) {
  if (sizeof(T) == 4 && g.h * g.w <= std::numeric_limits<int32_t>::max())
    for_each_max_as<int32_t>(g, x, begin, pixel, end);
  else
    for_each_max_as<int64_t>(g, x, begin, pixel, end);
}

// ---- max pooling over windows that tile the input ----
// Windows as wide as their strides, without padding (the 2 x 2 pool of stride 2, VALID or SAME on
// even sizes): each window lies inside the input, so the forward starts from the window's first
// pixel instead of clipping it and filling -inf, and runs as one loop per pixel over the
// channels. That loop has AVX-512 and AVX2 copies (the library is built for baseline x86-64).
// Alone, the CNN demo's first pool (128 x 28 x 28 x 32) went 680-860 -> 170-310 us on two
// threads and the second 180-300 -> 77-105 us; in the demo's step, 405 -> 239 and 341 -> 270
// us. Same values as the general kernel: the same `replaces` order from the first pixel (which
// always replaces the general kernel's -inf, or equals it).
//
// The float32 gradient over such windows has an AVX-512 kernel written with intrinsics
// (pool_grad_avx512.h): each window read once, 16 channels to a vector, every element of dx
// written once. Written in C++ the same way it ran no faster than the general kernel (1,073
// against 946 us on two threads): gcc 12 kept the selection and the scatter scalar.
// The window must fit the input: its size kh * kw is then at most the image's h * w, which the
// input tensor's own size bounds (a window of INT64_MAX squared overflowed here).
bool tiles_input(const PoolGeom& g) {
  return g.kh == g.sh && g.kw == g.sw && g.pt == 0 && g.pl == 0 && g.kh <= g.h && g.kw <= g.w &&
         g.oh <= g.h / g.kh && g.ow <= g.w / g.kw;
}

template <class T>
[[gnu::always_inline]] inline void tiled_max_pool_images(const PoolGeom& g, const T* x, T* y, int64_t n0, int64_t n1) {
  const int64_t c = g.c, window = g.kh * g.kw;
  for (int64_t n = n0; n < n1; ++n) {
    const T* img = x + n * g.h * g.w * c;
    T* o = y + n * g.oh * g.ow * c;
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox, o += c) {
        const T* win = img + (oy * g.kh * g.w + ox * g.kw) * c;
        T* __restrict best = o;
        for (int64_t ch = 0; ch < c; ++ch) best[ch] = win[ch];
        for (int64_t j = 1; j < window; ++j) {
          const T* __restrict p = win + ((j / g.kw) * g.w + j % g.kw) * c;
          for (int64_t ch = 0; ch < c; ++ch) best[ch] = replaces(p[ch], best[ch]) ? p[ch] : best[ch];
        }
      }
  }
}

#define TG_TILED_MAX_POOL(suffix, target)                                                                       \
  template <class T>                                                                                            \
  target void tiled_max_pool_##suffix(const PoolGeom& g, const T* x, T* y, int64_t n0, int64_t n1) {           \
    tiled_max_pool_images(g, x, y, n0, n1);                                                                     \
  }
TG_TILED_MAX_POOL(avx512, __attribute__((target("avx512f"))))
TG_TILED_MAX_POOL(avx2, __attribute__((target("avx2"))))
TG_TILED_MAX_POOL(baseline, )
#undef TG_TILED_MAX_POOL

template <class T>
void tiled_max_pool(const PoolGeom& g, const T* x, T* y) {
  if constexpr (std::is_same_v<T, float>) {
    if (g.kh * g.kw <= 16 && own_avx512_kernels() && simd::cpu_has_avx512_bw_vl()) {
      const pool_avx512::TiledPool p{g.h, g.w, g.c, g.kh, g.kw, g.oh, g.ow};
      for_each_image(g, [&](int64_t n) { pool_avx512::tiled_max_pool(p, x + n * g.h * g.w * g.c, y + n * g.oh * g.ow * g.c); });
      return;
    }
  }
  static const auto fn = simd::cpu_has(simd::Isa::kAvx512) ? &tiled_max_pool_avx512<T>
                         : simd::cpu_has(simd::Isa::kAvx2) ? &tiled_max_pool_avx2<T>
                                                           : &tiled_max_pool_baseline<T>;
  for_each_image(g, [&](int64_t n) { fn(g, x, y, n, n + 1); });
}

}  // namespace

template <class T>
void max_pool_forward(const PoolGeom& g, const T* x, T* y) {
  if (tiles_input(g)) return tiled_max_pool<T>(g, x, y);
  general_max_pool<T>(g, x, y);
}

// dx of max_pool2d from dy: dy added at each window's first maximum, then zeroed where `mask`
// (when not null; dx's shape) is false - relu's gradient taken in by max_pool2d_grad_masked. An
// add of +0 to dx's +0 or to a sum of dy's leaves it, so masking each addition gives
// where(mask, dx, 0)'s bits. With `sums` (float32), each image's rows of dx (a pixel's channels
// each) are added to their leaves of the sums over rows, by the thread that wrote them, while
// they are in its cache.
template <class T>
void max_pool_backward(const PoolGeom& g, const T* x, const T* dy, const bool* mask, T* dx, ColumnSumLeaves* sums) {
  const int64_t pixels = g.h * g.w, image = pixels * g.c;
  auto add_sums = [&](int64_t n) {
    if constexpr (std::is_same_v<T, float>) {
      if (!sums) return;
      // This thread wrote all of image n's rows, and only those here: a leaf that reaches
      // into another image is summed after, from dx.
      GemmEpilogue e;
      e.column_sums = sums;
      e = e.owning(n * pixels, (n + 1) * pixels);
      add_rows_to_column_sums(e, dx, g.c, n * pixels, pixels, 0, g.c);
    }
  };
  if constexpr (std::is_same_v<T, float>) {
    if (tiles_input(g) && g.kh * g.kw <= 16 && own_avx512_kernels() && simd::cpu_has_avx512_bw_vl()) {
      const pool_avx512::TiledPool p{g.h, g.w, g.c, g.kh, g.kw, g.oh, g.ow};
      for_each_image(g, [&](int64_t n) {
        pool_avx512::tiled_max_pool_grad(p, x + n * image, dy + n * g.oh * g.ow * g.c, mask ? mask + n * image : nullptr,
                                         dx + n * image);
        add_sums(n);
      });
      return;
    }
  }
  // The mask read as bytes, as kernel_where does, so that the select needs no branch.
  const auto* m = reinterpret_cast<const unsigned char*>(mask);
  for_each_max(
      g, x, [&](int64_t n) { std::fill_n(dx + n * image, image, T(0)); },
      [&, c = g.c](int64_t n, int64_t o, const auto* at) {
        T* d = dx + n * image;
        if (!m) {
          for (int64_t ch = 0; ch < c; ++ch) d[static_cast<int64_t>(at[ch]) * c + ch] += dy[o + ch];
          return;
        }
        const unsigned char* mn = m + n * image;
        for (int64_t ch = 0; ch < c; ++ch) {
          const int64_t i = static_cast<int64_t>(at[ch]) * c + ch;
          d[i] += mn[i] != 0 ? dy[o + ch] : T(0);
        }
      },
      add_sums);
}

namespace {
// Whether the bfloat16 kernels run on bfloat16 directly: pool_avx512's conditions for float32.
bool native_bf16_pool(const PoolGeom& g) {
  return tiles_input(g) && g.kh * g.kw <= 16 && own_avx512_kernels() && simd::cpu_has_avx512_bw_vl();
}
std::vector<float> widened(const bfloat16_t* x, int64_t n) {
  std::vector<float> w(static_cast<std::size_t>(n));
  bf16_to_f32(x, w.data(), n);
  return w;
}
}  // namespace

void max_pool_forward_bf16(const PoolGeom& g, const bfloat16_t* x, bfloat16_t* y) {
  const int64_t image = g.h * g.w * g.c, pooled = g.oh * g.ow * g.c;
  if (native_bf16_pool(g)) {
    const pool_avx512::TiledPool p{g.h, g.w, g.c, g.kh, g.kw, g.oh, g.ow};
    for_each_image(g, [&](int64_t n) { pool_avx512::tiled_max_pool_bf16(p, x + n * image, y + n * pooled); });
    return;
  }
  const std::vector<float> wx = widened(x, g.n * image);
  std::vector<float> wy(static_cast<std::size_t>(g.n * pooled));
  max_pool_forward<float>(g, wx.data(), wy.data());
  f32_to_bf16(wy.data(), y, g.n * pooled);
}

void max_pool_backward_bf16(const PoolGeom& g, const bfloat16_t* x, const bfloat16_t* dy, const bool* mask,
                            bfloat16_t* dx, ColumnSumLeaves* sums, bool positive_mask) {
  const int64_t pixels = g.h * g.w, image = pixels * g.c, pooled = g.oh * g.ow * g.c;
  std::unique_ptr<bool[]> positive;  // x > 0, where the kernel below does not read it off the maximum
  if (positive_mask && !native_bf16_pool(g)) {
    positive.reset(new bool[static_cast<std::size_t>(g.n * image)]);
    for (int64_t i = 0; i < g.n * image; ++i) positive[static_cast<std::size_t>(i)] = static_cast<float>(x[i]) > 0.0f;
    mask = positive.get();
  }
  if (native_bf16_pool(g)) {
    const pool_avx512::TiledPool p{g.h, g.w, g.c, g.kh, g.kw, g.oh, g.ow};
    for_each_image(g, [&](int64_t n) {
      pool_avx512::tiled_max_pool_grad_bf16(p, x + n * image, dy + n * pooled, mask ? mask + n * image : nullptr,
                                            dx + n * image, positive_mask);
      if (!sums) return;
      // As max_pool_backward's: this thread wrote image n's rows, and only those.
      GemmEpilogue e;
      e.column_sums = sums;
      e = e.owning(n * pixels, (n + 1) * pixels);
      add_rows_to_column_sums(e, dx, g.c, n * pixels, pixels, 0, g.c);
    });
    return;
  }
  // Overlapping windows add several dy into one element: summed in float32, rounded once. The
  // sums (of the rounded dx) are left to the caller's finish, which sums unsummed leaves from dx.
  const std::vector<float> wx = widened(x, g.n * image), wdy = widened(dy, g.n * pooled);
  std::vector<float> wdx(static_cast<std::size_t>(g.n * image));
  max_pool_backward<float>(g, wx.data(), wdy.data(), mask, wdx.data());
  f32_to_bf16(wdx.data(), dx, g.n * image);
}

bool pool_winners_fit(const PoolGeom& g) { return tiles_input(g) && g.kh * g.kw <= 16; }

namespace {
bool native_winners() { return own_avx512_kernels() && simd::cpu_has_avx512_bw_vl(); }

// One image's winners without AVX-512: the selection of max_pool_forward<float> on the widened
// values (exact), the maximum's bits kept, a NaN made quiet as rounding it back would.
void winners_image(const PoolGeom& g, const bfloat16_t* x, bfloat16_t* y, uint8_t* winners) {
  const int64_t c = g.c;
  for (int64_t oy = 0; oy < g.oh; ++oy)
    for (int64_t ox = 0; ox < g.ow; ++ox) {
      const int64_t o = (oy * g.ow + ox) * c;
      for (int64_t ch = 0; ch < c; ++ch) {
        bfloat16_t best = x[(oy * g.kh * g.w + ox * g.kw) * c + ch];
        int64_t won = 0;
        for (int64_t j = 1; j < g.kh * g.kw; ++j) {
          const bfloat16_t v = x[((oy * g.kh + j / g.kw) * g.w + ox * g.kw + j % g.kw) * c + ch];
          if (replaces(static_cast<float>(v), static_cast<float>(best))) best = v, won = j;
        }
        const float b = static_cast<float>(best);
        y[o + ch] = b != b ? bfloat16_t::from_bits(static_cast<uint16_t>(best.bits | 0x40)) : best;
        winners[o + ch] = b > 0.0f ? static_cast<uint8_t>(won) : uint8_t{255};
      }
    }
}

void grad_winners_image(const PoolGeom& g, const uint8_t* winners, const bfloat16_t* dy, bfloat16_t* dx) {
  const int64_t c = g.c;
  std::fill_n(dx, g.h * g.w * c, bfloat16_t{});
  for (int64_t oy = 0; oy < g.oh; ++oy)
    for (int64_t ox = 0; ox < g.ow; ++ox) {
      const int64_t o = (oy * g.ow + ox) * c;
      for (int64_t ch = 0; ch < c; ++ch) {
        const int64_t j = winners[o + ch];
        if (j >= g.kh * g.kw) continue;
        uint16_t d = dy[o + ch].bits;
        if (d == 0x8000) d = 0;                   // 0 + -0 is +0
        if ((d & 0x7fff) > 0x7f80) d |= 0x40;     // a NaN made quiet
        dx[((oy * g.kh + j / g.kw) * g.w + ox * g.kw + j % g.kw) * c + ch] = bfloat16_t::from_bits(d);
      }
    }
}
}  // namespace

void max_pool_winners_bf16(const PoolGeom& g, const bfloat16_t* x, bfloat16_t* y, uint8_t* winners, int64_t n0,
                           int64_t n1) {
  const int64_t image = g.h * g.w * g.c, pooled = g.oh * g.ow * g.c;
  const pool_avx512::TiledPool p{g.h, g.w, g.c, g.kh, g.kw, g.oh, g.ow};
  for (int64_t n = n0; n < n1; ++n) {
    if (native_winners()) pool_avx512::tiled_max_pool_winners_bf16(p, x + n * image, y + n * pooled, winners + n * pooled);
    else winners_image(g, x + n * image, y + n * pooled, winners + n * pooled);
  }
}

void max_pool_backward_winners_bf16(const PoolGeom& g, const uint8_t* winners, const bfloat16_t* dy, bfloat16_t* dx,
                                    ColumnSumLeaves* sums) {
  const int64_t pixels = g.h * g.w, image = pixels * g.c, pooled = g.oh * g.ow * g.c;
  const pool_avx512::TiledPool p{g.h, g.w, g.c, g.kh, g.kw, g.oh, g.ow};
  const bool native = native_winners();
  for_each_image(g, [&](int64_t n) {
    if (native) pool_avx512::tiled_max_pool_grad_winners_bf16(p, winners + n * pooled, dy + n * pooled, dx + n * image);
    else grad_winners_image(g, winners + n * pooled, dy + n * pooled, dx + n * image);
    if (!sums) return;
    // As max_pool_backward_bf16's: this thread wrote image n's rows, and only those.
    GemmEpilogue e;
    e.column_sums = sums;
    e = e.owning(n * pixels, (n + 1) * pixels);
    add_rows_to_column_sums(e, dx, g.c, n * pixels, pixels, 0, g.c);
  });
}

template <class T>
void max_pool_gather(const PoolGeom& g, const T* x, const T* src, T* y) {
  const int64_t image = g.h * g.w * g.c;
  for_each_max(
      g, x, [](int64_t) {},
      [&, c = g.c](int64_t n, int64_t o, const auto* at) {
        const T* s = src + n * image;
        for (int64_t ch = 0; ch < c; ++ch) y[o + ch] = s[static_cast<int64_t>(at[ch]) * c + ch];
      },
      [](int64_t) {});
}

template <class T>
void avg_pool_forward(const PoolGeom& g, const T* x, T* y) {
  for_each_image(g, [&](int64_t n) {
    const T* img = x + n * g.h * g.w * g.c;
    T* o = y + n * g.oh * g.ow * g.c;
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox, o += g.c) {
        int64_t y0, y1, x0, x1;
        g.window(oy, ox, y0, y1, x0, x1);
        std::fill_n(o, g.c, T(0));
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = x0; ix < x1; ++ix) {
            const T* p = img + (iy * g.w + ix) * g.c;
            for (int64_t ch = 0; ch < g.c; ++ch) o[ch] += p[ch];
          }
        // Only the elements inside the input count (TF's SAME average).
        const T count = static_cast<T>((y1 - y0) * (x1 - x0));
        for (int64_t ch = 0; ch < g.c; ++ch) o[ch] /= count;
      }
  });
}

template <class T>
void avg_pool_backward(const PoolGeom& g, const T* dy, T* dx) {
  for_each_image(g, [&](int64_t n) {
    T* img = dx + n * g.h * g.w * g.c;
    std::fill_n(img, g.h * g.w * g.c, T(0));
    const T* d = dy + n * g.oh * g.ow * g.c;
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox, d += g.c) {
        int64_t y0, y1, x0, x1;
        g.window(oy, ox, y0, y1, x0, x1);
        const T count = static_cast<T>((y1 - y0) * (x1 - x0));
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = x0; ix < x1; ++ix) {
            T* p = img + (iy * g.w + ix) * g.c;
            for (int64_t ch = 0; ch < g.c; ++ch) p[ch] += d[ch] / count;
          }
      }
  });
}

#define TG_POOL_KERNELS(T)                                                                             \
  template void max_pool_forward<T>(const PoolGeom&, const T*, T*);                                    \
  template void max_pool_backward<T>(const PoolGeom&, const T*, const T*, const bool*, T*, ColumnSumLeaves*); \
  template void max_pool_gather<T>(const PoolGeom&, const T*, const T*, T*);                           \
  template void avg_pool_forward<T>(const PoolGeom&, const T*, T*);                                    \
  template void avg_pool_backward<T>(const PoolGeom&, const T*, T*);
TG_POOL_KERNELS(float)
TG_POOL_KERNELS(double)
#undef TG_POOL_KERNELS

}  // namespace tg::detail
