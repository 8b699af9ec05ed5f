#include "kernels/onednn_conv_bf16.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cpuid.h>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/check.h"
#include "core/thread_pool.h"
#include "kernels/bf16.h"
#include "kernels/conv_kernels.h"
#include "kernels/onednn_runtime.h"
#include "kernels/simd_math.h"

namespace tg::detail::onednn_bf16 {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr auto kBf16 = memory::data_type::bf16;
constexpr auto kF32 = memory::data_type::f32;

// On where oneDNN's bfloat16 kernels beat the float32 ones on widened operands: with AMX, or on a
// core that issues vdpbf16ps at its FMAs' flop rate (Zen 4). Intel's cores without AMX issue it
// at half that rate (bf16.cpp's widened_fma): there the float32 kernels win (the mixed CNN demo
// step 45.0-45.4 -> 38.4-39.2 ms at 1 thread, 23.1-23.7 -> 21.4-21.7 ms at 2).
bool native_by_default() {
  if (!simd::cpu_is_intel()) return true;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  constexpr unsigned kAmxBf16 = 1u << 22;  // CPUID leaf 7, sub-leaf 0, EDX
  return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (edx & kAmxBf16) != 0;
}

std::atomic<bool> enabled{native_by_default()};

using onednn_runtime::cpu_engine;
using onednn_runtime::kFilterOut;
using onednn_runtime::kScratchpad;
using onednn_runtime::OneOmpThread;
using onednn_runtime::thread_buffer;
using onednn_runtime::thread_stream;

// ---- parts: groups of images, fixed by the batch size alone ----

constexpr int64_t kMaxParts = 8;

struct Part {
  int64_t n0 = 0, n = 0;  // first image, images
};

std::vector<Part> image_groups(int64_t images) {
  const int64_t per = (images + kMaxParts - 1) / kMaxParts;
  std::vector<Part> parts;
  for (int64_t n0 = 0; n0 < images; n0 += per) parts.push_back({n0, std::min(images, n0 + per) - n0});
  return parts;
}

// oneDNN's stride along a dim with one output never steps (TF allows any stride there).
int64_t stride_for(int64_t out, int64_t s) { return out <= 1 ? 1 : s; }

// The padding after the input that oneDNN's size check wants (a negative one raised to 0 where
// any value up to stride - 1 larger gives the same output size).
int64_t pad_after(int64_t in, int64_t out, int64_t window, int64_t stride, int64_t before) {
  const int64_t needed = (out - 1) * stride + window - in - before;
  return needed < 0 && needed + stride - 1 >= 0 ? 0 : needed;
}

// ---- primitives ----

enum class Dir { forward, backprop_input, backprop_filter };

// A primitive over `n` images, its layouts (a: src or diff_src, w: weights or diff_weights, d:
// dst or diff_dst) and the filter's reorder from or to HWIO (none where oneDNN reads HWIO).
struct Prim {
  dnnl::primitive conv;
  memory::desc a, w, d, scratchpad, user_w;
  std::optional<dnnl::reorder> reorder_w;
};

// Native: oneDNN's AVX512_BF16 or AMX kernels, not its reference or emulating ones.
bool native_impl(const std::string& impl) {
  return impl.find("ref") == std::string::npos &&
         (impl.find("avx512_core_bf16") != std::string::npos || impl.find("amx") != std::string::npos);
}

std::shared_ptr<const Prim> make_prim(Dir dir, const ConvGeom& g, int64_t n) {
  const OneOmpThread one;
  const int64_t sh = stride_for(g.oh, g.sh), sw = stride_for(g.ow, g.sw);
  const int64_t pb = pad_after(g.h, g.oh, (g.kh - 1) * g.dh + 1, sh, g.pt);
  const int64_t pr = pad_after(g.w, g.ow, (g.kw - 1) * g.dw + 1, sw, g.pl);
  const auto wdt = dir == Dir::backprop_filter ? kF32 : kBf16;  // the filter gradient sums in float32
  const memory::desc a({n, g.c, g.h, g.w}, kBf16, Tag::nhwc), w({g.oc, g.c, g.kh, g.kw}, wdt, Tag::any),
      d({n, g.oc, g.oh, g.ow}, kBf16, Tag::nhwc);
  const memory::dims strides{sh, sw}, dilations{g.kh > 1 ? g.dh - 1 : 0, g.kw > 1 ? g.dw - 1 : 0},
      before{g.pt, g.pl}, after{pb, pr};
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const auto algo = dnnl::algorithm::convolution_direct;
  auto p = std::make_shared<Prim>();
  p->user_w = memory::desc({g.oc, g.c, g.kh, g.kw}, wdt, Tag::hwio);
  std::string impl;
  try {
    const dnnl::convolution_forward::desc fwd(
        dir == Dir::forward ? dnnl::prop_kind::forward_inference : dnnl::prop_kind::forward_training, algo, a,
        memory::desc({g.oc, g.c, g.kh, g.kw}, kBf16, Tag::any), d, strides, dilations, before, after);
    if (dir == Dir::forward) {
      const dnnl::convolution_forward::primitive_desc pd(fwd, attr, cpu_engine());
      impl = pd.impl_info_str();
      p->a = pd.src_desc(), p->w = pd.weights_desc(), p->d = pd.dst_desc(), p->scratchpad = pd.scratchpad_desc();
      p->conv = dnnl::convolution_forward(pd);
    } else if (dir == Dir::backprop_input) {
      const dnnl::convolution_forward::primitive_desc hint(fwd, cpu_engine());
      const dnnl::convolution_backward_data::primitive_desc pd(
          dnnl::convolution_backward_data::desc(algo, a, w, d, strides, dilations, before, after), attr, cpu_engine(),
          hint);
      impl = pd.impl_info_str();
      p->a = pd.diff_src_desc(), p->w = pd.weights_desc(), p->d = pd.diff_dst_desc();
      p->scratchpad = pd.scratchpad_desc();
      p->conv = dnnl::convolution_backward_data(pd);
    } else {
      const dnnl::convolution_forward::primitive_desc hint(fwd, cpu_engine());
      const dnnl::convolution_backward_weights::primitive_desc pd(
          dnnl::convolution_backward_weights::desc(algo, a, w, d, strides, dilations, before, after), attr,
          cpu_engine(), hint);
      impl = pd.impl_info_str();
      p->a = pd.src_desc(), p->w = pd.diff_weights_desc(), p->d = pd.diff_dst_desc();
      p->scratchpad = pd.scratchpad_desc();
      p->conv = dnnl::convolution_backward_weights(pd);
    }
    // Activations stay NHWC (asked for, not "any"): only a primitive that takes them as stored.
    if (p->a != a || p->d != d) return nullptr;
    if (p->w != p->user_w) {
      p->reorder_w = dir == Dir::backprop_filter
                         ? dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), p->w, cpu_engine(), p->user_w))
                         : dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), p->user_w, cpu_engine(), p->w));
    }
  } catch (const dnnl::error&) {
    return nullptr;  // no implementation for these sizes
  }
  if (!native_impl(impl)) return nullptr;
  return p;
}

using Key = std::array<int64_t, 16>;

std::shared_ptr<const Prim> primitive_for(Dir dir, const ConvGeom& g, int64_t n) {
  static std::mutex mu;
  static std::map<Key, std::shared_ptr<const Prim>> cache;  // null: no native kernel
  constexpr std::size_t kMaxCached = 512;  // a program of ever new shapes starts afresh past this
  const Key key{static_cast<int64_t>(dir), n, g.h, g.w, g.c, g.kh, g.kw, g.oc, g.oh, g.ow, g.sh, g.sw, g.dh, g.dw,
                g.pt, g.pl};
  {
    std::lock_guard lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  std::shared_ptr<const Prim> p = make_prim(dir, g, n);  // slow: outside the lock
  std::lock_guard lock(mu);
  if (cache.size() >= kMaxCached) cache.clear();
  cache.emplace(key, p);
  return p;
}

// oneDNN indexes with 32-bit integers in places: larger tensors stay with the float32 path.
bool fits_int32(const ConvGeom& g) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  auto fits = [&](int64_t a, int64_t b, int64_t c, int64_t d) {
    int64_t r = 0;
    return !__builtin_mul_overflow(a, b, &r) && !__builtin_mul_overflow(r, c, &r) &&
           !__builtin_mul_overflow(r, d, &r) && r <= kMax;
  };
  return fits(g.n, g.h, g.w, g.c) && fits(g.n, g.oh, g.ow, g.oc) && fits(g.kh, g.kw, g.c, g.oc) &&
         stride_for(g.oh, g.sh) <= kMax && stride_for(g.ow, g.sw) <= kMax && g.dh <= kMax && g.dw <= kMax &&
         g.pt <= kMax && g.pl <= kMax;
}

struct Planned {
  std::vector<Part> parts;
  std::vector<std::shared_ptr<const Prim>> prims;
};

std::optional<Planned> plan(Dir dir, const ConvGeom& g) {
  if (!available() || !onednn_runtime::omp_controllable() || g.n <= 0 || g.oh <= 0 || g.ow <= 0 || g.c <= 0 || g.oc <= 0 ||
      !fits_int32(g))
    return std::nullopt;
  Planned p;
  p.parts = image_groups(g.n);
  for (const Part& part : p.parts) {
    p.prims.push_back(primitive_for(dir, g, part.n));
    if (!p.prims.back()) return std::nullopt;
  }
  return p;
}

memory user_memory(const memory::desc& d, const void* p) { return memory(d, cpu_engine(), const_cast<void*>(p)); }

// The filter in each layout the parts' primitives read, reordered once on the calling thread.
struct FilterCopies {
  std::vector<memory::desc> layouts;
  std::vector<std::vector<float>> copies;
  std::vector<void*> aligned;

  const void* for_prim(const Prim& p, const bfloat16_t* f) {
    if (!p.reorder_w) return f;
    for (std::size_t i = 0; i < layouts.size(); ++i)
      if (layouts[i] == p.w) return aligned[i];
    layouts.push_back(p.w);
    copies.emplace_back(p.w.get_size() / sizeof(float) + 16);
    const auto at = reinterpret_cast<std::uintptr_t>(copies.back().data());
    aligned.push_back(reinterpret_cast<void*>((at + 63) & ~std::uintptr_t{63}));
    memory from = user_memory(p.user_w, f), to(p.w, cpu_engine(), aligned.back());
    const OneOmpThread one;
    p.reorder_w->execute(thread_stream(), from, to);
    thread_stream().wait();
    return aligned.back();
  }
};

void add_scratchpad(const Prim& p, std::unordered_map<int, memory>& args) {
  if (p.scratchpad.get_size() == 0) return;
  args.emplace(DNNL_ARG_SCRATCHPAD, memory(p.scratchpad, cpu_engine(), thread_buffer(kScratchpad, p.scratchpad.get_size())));
}

// fn(part) for every part on the pool, each under one OpenMP thread.
template <class Fn>
void run_parts(std::size_t count, Fn&& fn) {
  parallel_parts(static_cast<int>(count), [&](int i) {
    const OneOmpThread one;
    try {
      fn(static_cast<std::size_t>(i));
      thread_stream().wait();
    } catch (const dnnl::error& err) {
      TG_CHECK(false, "oneDNN failed on a bfloat16 convolution it accepted: ", err.what());
    }
  });
}

}  // namespace

bool available() {
  static const bool has = cpu_has_avx512_bf16();
  return has && enabled.load(std::memory_order_relaxed);
}

bool set_enabled(bool on) { return enabled.exchange(on); }

bool conv_forward(const ConvGeom& g, const bfloat16_t* x, const bfloat16_t* f, bfloat16_t* y, const PartFinish& finish) {
  const std::optional<Planned> planned = plan(Dir::forward, g);
  if (!planned) return false;
  FilterCopies filters;
  std::vector<const void*> filter_of;
  for (const auto& p : planned->prims) filter_of.push_back(filters.for_prim(*p, f));
  run_parts(planned->parts.size(), [&](std::size_t i) {
    const Part& part = planned->parts[i];
    const Prim& p = *planned->prims[i];
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, user_memory(p.a, x + part.n0 * g.h * g.w * g.c)},
                                         {DNNL_ARG_WEIGHTS, user_memory(p.w, filter_of[i])},
                                         {DNNL_ARG_DST, user_memory(p.d, y + part.n0 * g.oh * g.ow * g.oc)}};
    add_scratchpad(p, args);
    p.conv.execute(thread_stream(), args);
    if (finish) {
      thread_stream().wait();
      finish(part.n0, part.n);
    }
  });
  return true;
}

bool conv_backprop_input(const ConvGeom& g, const bfloat16_t* f, const bfloat16_t* dy, bfloat16_t* dx) {
  const std::optional<Planned> planned = plan(Dir::backprop_input, g);
  if (!planned) return false;
  FilterCopies filters;
  std::vector<const void*> filter_of;
  for (const auto& p : planned->prims) filter_of.push_back(filters.for_prim(*p, f));
  run_parts(planned->parts.size(), [&](std::size_t i) {
    const Part& part = planned->parts[i];
    const Prim& p = *planned->prims[i];
    std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, user_memory(p.d, dy + part.n0 * g.oh * g.ow * g.oc)},
                                         {DNNL_ARG_WEIGHTS, user_memory(p.w, filter_of[i])},
                                         {DNNL_ARG_DIFF_SRC, user_memory(p.a, dx + part.n0 * g.h * g.w * g.c)}};
    add_scratchpad(p, args);
    p.conv.execute(thread_stream(), args);
  });
  return true;
}

bool conv_backprop_filter(const ConvGeom& g, const bfloat16_t* x, const bfloat16_t* dy, bfloat16_t* df) {
  const std::optional<Planned> planned = plan(Dir::backprop_filter, g);
  if (!planned) return false;
  const int64_t fsize = g.kh * g.kw * g.c * g.oc;
  const std::size_t parts = planned->parts.size();
  // One float32 partial per part (HWIO), added in part order, then rounded once.
  std::vector<float> partials(parts * static_cast<std::size_t>(fsize));
  run_parts(parts, [&](std::size_t i) {
    const Part& part = planned->parts[i];
    const Prim& p = *planned->prims[i];
    dnnl::stream& s = thread_stream();
    float* out = partials.data() + i * static_cast<std::size_t>(fsize);
    memory diff_w = p.reorder_w ? memory(p.w, cpu_engine(), thread_buffer(kFilterOut, p.w.get_size()))
                                : user_memory(p.user_w, out);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, user_memory(p.a, x + part.n0 * g.h * g.w * g.c)},
                                         {DNNL_ARG_DIFF_DST, user_memory(p.d, dy + part.n0 * g.oh * g.ow * g.oc)},
                                         {DNNL_ARG_DIFF_WEIGHTS, diff_w}};
    add_scratchpad(p, args);
    p.conv.execute(s, args);
    if (p.reorder_w) {
      memory to = user_memory(p.user_w, out);
      p.reorder_w->execute(s, diff_w, to);
    }
  });
  float* sum = partials.data();
  for (std::size_t i = 1; i < parts; ++i) {
    const float* partial = partials.data() + i * static_cast<std::size_t>(fsize);
    for (int64_t j = 0; j < fsize; ++j) sum[j] += partial[j];
  }
  f32_to_bf16(sum, df, fsize);
  return true;
}

}  // namespace tg::detail::onednn_bf16
