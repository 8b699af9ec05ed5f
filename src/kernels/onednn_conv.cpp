#include "kernels/onednn_conv.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <list>
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
#include "kernels/conv_kernels.h"
#include "kernels/onednn_runtime.h"
#include "kernels/simd_math.h"
#include "kernels/gemm_epilogue.h"

namespace tg::detail::onednn {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr auto kF32 = memory::data_type::f32;

using onednn_runtime::cpu_engine;
using onednn_runtime::kActivationsIn;
using onednn_runtime::kActivationsOut;
using onednn_runtime::kFilterOut;
using onednn_runtime::kScratchpad;
using onednn_runtime::OneOmpThread;
using onednn_runtime::thread_buffer;
using onednn_runtime::thread_stream;

// ---- the parts of a convolution ----

// One oneDNN convolution: `n` images of `h` input and `oh` output rows (widths as the
// geometry's), with oneDNN's paddings and strides.
struct Sub {
  int64_t n = 0, h = 0, oh = 0;
  int64_t pt = 0, pb = 0, pl = 0, pr = 0;
  int64_t sh = 1, sw = 1;
};

// A part: its convolution, where its input (x or dx) and output (y or dy) start, and the rows
// of the whole output (pixels) it covers.
struct Part {
  Sub sub;
  int64_t in_offset = 0, out_offset = 0;
};

int64_t span(int64_t k, int64_t d) { return (k - 1) * d + 1; }

// oneDNN's stride along a dim with `out` outputs: one output never steps (TF allows any stride
// there, INT64_MAX included).
int64_t stride_for(int64_t out, int64_t s) { return out <= 1 ? 1 : s; }

// The padding after the input that oneDNN's size check wants, given the padding before. Input
// past the last window (VALID with a remainder) makes it negative; any value up to stride - 1
// larger gives the same output size, so a negative one is raised to 0 when it can be.
int64_t pad_after(int64_t in, int64_t out, int64_t window, int64_t stride, int64_t before) {
  const int64_t needed = (out - 1) * stride + window - in - before;
  return needed < 0 && needed + stride - 1 >= 0 ? 0 : needed;
}

Sub whole_sub(const ConvGeom& g, int64_t n) {
  Sub s;
  s.n = n, s.h = g.h, s.oh = g.oh;
  s.sh = stride_for(g.oh, g.sh), s.sw = stride_for(g.ow, g.sw);
  s.pt = g.pt, s.pl = g.pl;
  s.pb = pad_after(g.h, g.oh, span(g.kh, g.dh), s.sh, g.pt);
  s.pr = pad_after(g.w, g.ow, span(g.kw, g.dw), s.sw, g.pl);
  return s;
}

// Images in at most kMaxParts groups; a single image in bands of rows. Fixed by the shapes
// alone: the filter gradient's partial sums, and so its bits, never depend on the thread count.
constexpr int64_t kMaxParts = 8;
int64_t band_count(int64_t rows) { return rows >= 16 ? 4 : rows >= 4 ? 2 : 1; }

std::vector<Part> image_groups(const ConvGeom& g, int64_t max_parts = kMaxParts) {
  const int64_t per = (g.n + max_parts - 1) / max_parts;
  std::vector<Part> parts;
  for (int64_t n0 = 0; n0 < g.n; n0 += per) {
    const int64_t n1 = std::min(g.n, n0 + per);
    parts.push_back({whole_sub(g, n1 - n0), n0 * g.h * g.w * g.c, n0 * g.oh * g.ow * g.oc});
  }
  return parts;
}

// The parts over output rows (forward, filter gradient): each band of output rows reads the
// band of input rows its windows reach. Empty when a band's windows lie in the padding alone.
std::vector<Part> plan_over_output(const ConvGeom& g, bool banded) {
  if (g.n > 1 || !banded || band_count(g.oh) == 1) return image_groups(g);
  const int64_t bands = band_count(g.oh), window = span(g.kh, g.dh);
  const Sub whole = whole_sub(g, 1);
  std::vector<Part> parts;
  for (int64_t b = 0; b < bands; ++b) {
    const int64_t r0 = b * g.oh / bands, r1 = (b + 1) * g.oh / bands;
    const int64_t first = r0 * g.sh - g.pt;  // input row of the band's first window
    const int64_t ia = std::max<int64_t>(0, first), ib = std::min(g.h, (r1 - 1) * g.sh - g.pt + window);
    if (ib <= ia) return {};
    Sub s = whole;
    s.h = ib - ia, s.oh = r1 - r0;
    s.sh = stride_for(s.oh, g.sh);
    s.pt = ia - first;
    s.pb = pad_after(s.h, s.oh, window, s.sh, s.pt);
    parts.push_back({s, ia * g.w * g.c, r0 * g.ow * g.oc});
  }
  return parts;
}

// The parts over input rows (input gradient): each band of dx rows gets the dy rows whose
// windows reach it. Band boundaries sit where a window starts (a row + pt a multiple of the
// stride), so that no band needs negative padding before it.
std::vector<Part> plan_over_input(const ConvGeom& g) {
  if (g.n > 1 || !bands_read_filter_cheaply(g) || band_count(g.h) == 1) return image_groups(g);
  const int64_t bands = band_count(g.h), window = span(g.kh, g.dh), sh = stride_for(g.oh, g.sh);
  const Sub whole = whole_sub(g, 1);
  std::vector<int64_t> bounds{0};
  for (int64_t b = 1; b < bands; ++b) {
    const int64_t a = b * g.h / bands;
    const int64_t aligned = a - (a + g.pt) % sh;
    if (aligned > bounds.back()) bounds.push_back(aligned);
  }
  bounds.push_back(g.h);
  std::vector<Part> parts;
  for (std::size_t b = 0; b + 1 < bounds.size(); ++b) {
    const int64_t a = bounds[b], e = bounds[b + 1];
    const int64_t reach = a + g.pt - window + 1;  // windows starting at or after this reach row a
    const int64_t o0 = reach <= 0 ? 0 : (reach + sh - 1) / sh;
    const int64_t o1 = std::min(g.oh, (e - 1 + g.pt) / sh + 1);
    if (o1 <= o0 || a + g.pt - o0 * sh < 0) return {};
    Sub s = whole;
    s.h = e - a, s.oh = o1 - o0;
    s.sh = stride_for(s.oh, g.sh);
    s.pt = a + g.pt - o0 * sh;
    s.pb = pad_after(s.h, s.oh, window, s.sh, s.pt);
    parts.push_back({s, a * g.w * g.c, o0 * g.ow * g.oc});
  }
  return parts;
}

std::vector<Part> plan(ConvDirection d, const ConvGeom& g) {
  if (d == ConvDirection::backprop_input) return plan_over_input(g);
  // The filter gradient writes a partial filter per band instead: bands paid off there.
  return plan_over_output(g, d == ConvDirection::backprop_filter || bands_read_filter_cheaply(g));
}

// ---- primitives ----

// A part's primitive with the layouts it runs on (a: src or diff_src, w: weights or
// diff_weights, d: dst or diff_dst), and the reorders from and to the layouts tracegraph stores
// (none where they are the same).
struct Prim {
  dnnl::primitive conv;
  memory::desc a, w, d, scratchpad;
  memory::desc user_a, user_w, user_d;
  std::optional<dnnl::reorder> reorder_a, reorder_w, reorder_d;
  bool winograd = false;
  // Whether a forward's activations are copied to and from oneDNN's layout by own loops
  // (nhwc_to_nchw16c, nchw16c_pixel_to_nhwc) in place of reorder_a and reorder_d.
  bool own_copy_a = false, own_copy_d = false;
  bool direct_a() const { return !reorder_a; }
  bool direct_w() const { return !reorder_w; }
  bool direct_d() const { return !reorder_d; }
};

memory::desc nhwc(int64_t n, int64_t c, int64_t h, int64_t w) { return memory::desc({n, c, h, w}, kF32, Tag::nhwc); }

std::optional<dnnl::reorder> reorder_between(const memory::desc& from, const memory::desc& to) {
  if (from == to) return std::nullopt;
  return dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), from, cpu_engine(), to));
}

// Activations between NHWC and nChw16c (channels a multiple of 16, so no padding): plain copies
// of 64-byte rows. oneDNN 2.6's jit reorders for these layouts took 17% of the CNN inference
// step on an Emerald Rapids core (the Winograd layer's, 3.5 of 20 ms); the output is copied one
// image at a time, which its epilogue and reader then find in cache.
bool is_nchw16c(const memory::desc& d, int64_t n, int64_t c, int64_t h, int64_t w) {
  return c % 16 == 0 && d == memory::desc({n, c, h, w}, kF32, Tag::nChw16c);
}

void nhwc_to_nchw16c(const float* from, float* to, int64_t images, int64_t pixels, int64_t c) {
  const int64_t blocks = c / 16;
  for (int64_t n = 0; n < images; ++n)
    for (int64_t b = 0; b < blocks; ++b) {
      const float* src = from + n * pixels * c + b * 16;
      float* dst = to + (n * blocks + b) * pixels * 16;
      for (int64_t i = 0; i < pixels; ++i) std::memcpy(dst + i * 16, src + i * c, 16 * sizeof(float));
    }
}

// One pixel's c channels, at `from` in the first of its image's blocks of `pixels` pixels each.
void nchw16c_pixel_to_nhwc(const float* from, float* to, int64_t pixels, int64_t c) {
  for (int64_t b = 0; b < c / 16; ++b) std::memcpy(to + b * 16, from + b * pixels * 16, 16 * sizeof(float));
}

// The algorithm a forward runs: oneDNN's direct kernels, or its Winograd F(4x4, 3x3)
// (jit_wino_4x3), which makes 36 products per 4x4 tile of outputs where direct makes 144.
// Winograd runs on oneDNN's blocked layouts only (activations are reordered to and from NHWC
// per part, the filter into its transformed layout: TransformedFilters).
enum class Algorithm { direct, winograd };

// The primitive, or null where oneDNN has only its reference kernel (or none) for it, or where
// Winograd was asked for and oneDNN offers no Winograd kernel.
std::shared_ptr<const Prim> make_prim(ConvDirection dir, ActivationLayout layout, const ConvGeom& g, const Sub& s,
                                      Algorithm algorithm) {
  const OneOmpThread one;
  const bool winograd = algorithm == Algorithm::winograd;
  const Tag act = layout == ActivationLayout::nhwc && !winograd ? Tag::nhwc : Tag::any;
  const memory::desc a({s.n, g.c, s.h, g.w}, kF32, act), w({g.oc, g.c, g.kh, g.kw}, kF32, Tag::any),
      d({s.n, g.oc, s.oh, g.ow}, kF32, act);
  const memory::dims strides{s.sh, s.sw}, dilations{g.kh > 1 ? g.dh - 1 : 0, g.kw > 1 ? g.dw - 1 : 0},
      before{s.pt, s.pl}, after{s.pb, s.pr};
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const auto algo = winograd ? dnnl::algorithm::convolution_winograd : dnnl::algorithm::convolution_direct;
  auto p = std::make_shared<Prim>();
  p->winograd = winograd;
  p->user_a = nhwc(s.n, g.c, s.h, g.w);
  p->user_w = memory::desc({g.oc, g.c, g.kh, g.kw}, kF32, Tag::hwio);
  p->user_d = nhwc(s.n, g.oc, s.oh, g.ow);
  std::string impl;
  try {
    const dnnl::convolution_forward::desc fwd(dir == ConvDirection::forward ? dnnl::prop_kind::forward_inference
                                                                            : dnnl::prop_kind::forward_training,
                                              algo, a, w, d, strides, dilations, before, after);
    if (dir == ConvDirection::forward) {
      const dnnl::convolution_forward::primitive_desc pd(fwd, attr, cpu_engine());
      impl = pd.impl_info_str();
      p->a = pd.src_desc(), p->w = pd.weights_desc(), p->d = pd.dst_desc(), p->scratchpad = pd.scratchpad_desc();
      p->conv = dnnl::convolution_forward(pd);
    } else {
      const dnnl::convolution_forward::primitive_desc hint(fwd, cpu_engine());
      if (dir == ConvDirection::backprop_input) {
        const dnnl::convolution_backward_data::primitive_desc pd(
            dnnl::convolution_backward_data::desc(algo, a, w, d, strides, dilations, before, after), attr, cpu_engine(),
            hint);
        impl = pd.impl_info_str();
        p->a = pd.diff_src_desc(), p->w = pd.weights_desc(), p->d = pd.diff_dst_desc();
        p->scratchpad = pd.scratchpad_desc();
        p->conv = dnnl::convolution_backward_data(pd);
      } else {
        const dnnl::convolution_backward_weights::primitive_desc pd(
            dnnl::convolution_backward_weights::desc(algo, a, w, d, strides, dilations, before, after), attr,
            cpu_engine(), hint);
        impl = pd.impl_info_str();
        p->a = pd.src_desc(), p->w = pd.diff_weights_desc(), p->d = pd.diff_dst_desc();
        p->scratchpad = pd.scratchpad_desc();
        p->conv = dnnl::convolution_backward_weights(pd);
      }
    }
    // Reorders in the direction the data flows: into oneDNN's layouts for what it reads, out
    // of them for what it writes.
    const bool writes_a = dir == ConvDirection::backprop_input, writes_w = dir == ConvDirection::backprop_filter,
               writes_d = dir == ConvDirection::forward;
    p->reorder_a = writes_a ? reorder_between(p->a, p->user_a) : reorder_between(p->user_a, p->a);
    p->reorder_w = writes_w ? reorder_between(p->w, p->user_w) : reorder_between(p->user_w, p->w);
    p->reorder_d = writes_d ? reorder_between(p->d, p->user_d) : reorder_between(p->user_d, p->d);
    if (dir == ConvDirection::forward) {
      p->own_copy_a = p->reorder_a && is_nchw16c(p->a, s.n, g.c, s.h, g.w);
      p->own_copy_d = p->reorder_d && is_nchw16c(p->d, s.n, g.oc, s.oh, g.ow);
    }
  } catch (const dnnl::error&) {
    return nullptr;  // no implementation for these sizes
  }
  if (impl.find("ref") != std::string::npos) return nullptr;
  if (winograd && impl.find("wino") == std::string::npos) return nullptr;
  return p;
}

using Key = std::array<int64_t, 18>;

std::shared_ptr<const Prim> primitive_for(ConvDirection dir, ActivationLayout layout, const ConvGeom& g, const Sub& s,
                                          Algorithm algorithm) {
  static std::mutex mu;
  static std::map<Key, std::shared_ptr<const Prim>> cache;  // null: oneDNN has no fast kernel
  // A program that runs ever new shapes would grow the cache without bound: past this many
  // geometries it starts afresh (parts running elsewhere hold their primitives).
  constexpr std::size_t kMaxCached = 512;
  const Key key{(static_cast<int64_t>(dir) * 2 + static_cast<int64_t>(layout)) * 2 + static_cast<int64_t>(algorithm),
                s.n, s.h, g.w, g.c, g.kh, g.kw, g.oc, s.oh, g.ow, s.sh, s.sw, g.dh, g.dw, s.pt, s.pb, s.pl, s.pr};
  {
    std::lock_guard lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  std::shared_ptr<const Prim> p = make_prim(dir, layout, g, s, algorithm);  // slow: outside the lock
  std::lock_guard lock(mu);
  if (cache.size() >= kMaxCached) cache.clear();
  cache.emplace(key, p);
  return p;
}

// oneDNN's kernels index with 32-bit integers in places: larger tensors stay with ours.
bool fits_int32(const ConvGeom& g) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  auto fits = [&](int64_t a, int64_t b, int64_t c, int64_t d) {
    int64_t r = 0;
    return !__builtin_mul_overflow(a, b, &r) && !__builtin_mul_overflow(r, c, &r) &&
           !__builtin_mul_overflow(r, d, &r) && r <= kMax;
  };
  return fits(g.n, g.h, g.w, g.c) && fits(g.n, g.oh, g.ow, g.oc) && fits(g.kh, g.kw, g.c, g.oc) &&
         stride_for(g.oh, g.sh) <= kMax && stride_for(g.ow, g.sw) <= kMax && g.dh <= kMax && g.dw <= kMax && g.pt <= kMax && g.pl <= kMax;
}

// Winograd forwards run one image a part on Intel's cores: on an Emerald Rapids core the CNN
// inference step (its 14x14 32->64 layer) took 17.2 against 18.0 ms with parts of 32 images
// (whose transformed tiles, ~7 MB, overflow its 2 MB L2). Zen 4 was not measured so: it keeps
// the parts of the other directions.
bool winograd_by_single_images() {
  static const bool intel = simd::cpu_is_intel();
  return intel;
}

// The parts and their primitives, or nothing when oneDNN does not run every part.
struct Planned {
  std::vector<Part> parts;
  std::vector<std::shared_ptr<const Prim>> prims;
};

std::optional<Planned> plan_with_primitives(ConvDirection dir, const ConvGeom& g, ActivationLayout layout,
                                           Algorithm algorithm = Algorithm::direct) {
  if (!onednn_runtime::omp_controllable() || g.n <= 0 || g.oh <= 0 || g.ow <= 0 || g.c <= 0 || g.oc <= 0 || !fits_int32(g))
    return std::nullopt;
  Planned p;
  p.parts = algorithm == Algorithm::winograd && winograd_by_single_images() ? image_groups(g, g.n) : plan(dir, g);
  if (p.parts.empty()) return std::nullopt;
  for (const Part& part : p.parts) {
    p.prims.push_back(primitive_for(dir, layout, g, part.sub, algorithm));
    if (!p.prims.back()) return std::nullopt;
  }
  return p;
}

// Whether a forward runs Winograd. Measured with oneDNN 2.6 on one thread of this project's
// AVX-512 machine (Zen 4), a part of 32 images of the CNN's 14x14 32->64 layer took 1.17 ms
// against direct's 1.95 (reorders to and from NHWC included; 4 images of resnet's 56x56x64,
// 28x28x128 and 7x7x512 layers: 3.7, 3.6 and 6.3 against 8.0, 7.8 and 7.8 ms). Its filter
// transform is slow (~25-50 ns a weight, one thread: 0.44 ms for that 3x3x32x64 filter, 82 ms
// for 3x3x512x512), so it is kept across calls (TransformedFilters) and Winograd is only taken
// where a call has enough output pixels to repay a fresh transform (training changes the filter
// every step). Image groups only: a single image's bands would be a few rows of 4x4 tiles.
// The rule reads the shapes alone, so the bits still do not depend on the thread count; they
// differ from direct's by Winograd's rounding (~1e-6 of the result's magnitude; the tests'
// bound is 1e-5 of the sum of the products' magnitudes).
bool winograd_pays(const ConvGeom& g) {
  constexpr int64_t kMinOutputPixels = 16384;
  return g.kh == 3 && g.kw == 3 && g.dh == 1 && g.dw == 1 && stride_for(g.oh, g.sh) == 1 &&
         stride_for(g.ow, g.sw) == 1 && g.c % 16 == 0 && g.oc % 16 == 0 && g.n >= 2 &&
         g.n * g.oh * g.ow >= kMinOutputPixels;
}

// ---- running the parts ----

// User memory at p (oneDNN reads or writes through it; const only in our signatures).
memory user_memory(const memory::desc& d, const float* p) { return memory(d, cpu_engine(), const_cast<float*>(p)); }

// What the primitive reads, in its layout: the user's buffer itself, or a reordered copy.
memory readable(const memory::desc& want, const memory::desc& user, const float* p,
                const std::optional<dnnl::reorder>& reorder, onednn_runtime::ScratchSlot slot, dnnl::stream& s) {
  memory from = user_memory(user, p);
  if (!reorder) return from;
  memory to(want, cpu_engine(), thread_buffer(slot, want.get_size()));
  reorder->execute(s, from, to);
  return to;
}

// Where the primitive writes, in its layout: the user's buffer itself, or a buffer reordered
// into it afterwards (finish()).
memory writable(const memory::desc& have, const memory::desc& user, float* p, const std::optional<dnnl::reorder>& reorder,
                onednn_runtime::ScratchSlot slot) {
  if (!reorder) return user_memory(user, p);
  return memory(have, cpu_engine(), thread_buffer(slot, have.get_size()));
}

void finish(const memory& written, const memory::desc& user, float* p, const std::optional<dnnl::reorder>& reorder,
            dnnl::stream& s) {
  if (!reorder) return;
  memory to = user_memory(user, p);
  reorder->execute(s, const_cast<memory&>(written), to);
}

void add_scratchpad(const Prim& p, std::unordered_map<int, memory>& args) {
  if (p.scratchpad.get_size() == 0) return;
  args.emplace(DNNL_ARG_SCRATCHPAD, memory(p.scratchpad, cpu_engine(), thread_buffer(kScratchpad, p.scratchpad.get_size())));
}

// A filter reordered into a primitive's layout, in a 64-byte aligned buffer.
struct ReorderedFilter {
  std::vector<float> buffer;
  float* data = nullptr;

  ReorderedFilter(const Prim& p, const float* f) : buffer(p.w.get_size() / sizeof(float) + 16) {
    const auto at = reinterpret_cast<std::uintptr_t>(buffer.data());
    data = reinterpret_cast<float*>((at + 63) & ~std::uintptr_t{63});
    memory from = user_memory(p.user_w, f), to(p.w, cpu_engine(), data);
    const OneOmpThread one;
    p.reorder_w->execute(thread_stream(), from, to);
    thread_stream().wait();
  }
  // Move-only: data points into buffer, whose storage a move keeps and a copy would not.
  ReorderedFilter(ReorderedFilter&&) = default;
  ReorderedFilter(const ReorderedFilter&) = delete;
  ReorderedFilter& operator=(const ReorderedFilter&) = delete;
};

// Winograd's transformed filters, kept across calls: each with a copy of the HWIO filter it was
// made from, and reused only when the filter's bytes are those (compared in full, so the result
// is always the transform of exactly this filter). An inference program reads the same
// filters on every call; a training step changes them and pays the transform (winograd_pays).
// At most kMaxBytes are kept, the most recently used first.
class TransformedFilters {
 public:
  struct Entry {
    memory::desc layout;
    std::vector<float> source;
    ReorderedFilter filter;
  };

  static TransformedFilters& instance() {
    static TransformedFilters cache;
    return cache;
  }

  std::shared_ptr<const Entry> get(const Prim& p, const float* f, std::size_t count) {
    {
      std::lock_guard lock(mu_);
      for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        const Entry& e = **it;
        if (e.layout == p.w && e.source.size() == count && std::memcmp(e.source.data(), f, count * sizeof(float)) == 0) {
          entries_.splice(entries_.begin(), entries_, it);
          return entries_.front();
        }
      }
    }
    auto made = std::make_shared<const Entry>(Entry{p.w, std::vector<float>(f, f + count), ReorderedFilter(p, f)});
    const std::size_t bytes = bytes_of(*made);
    std::lock_guard lock(mu_);
    if (bytes > kMaxBytes) return made;  // used by this call only
    entries_.push_front(made);
    bytes_ += bytes;
    while (bytes_ > kMaxBytes) {
      bytes_ -= bytes_of(*entries_.back());
      entries_.pop_back();
    }
    return made;
  }

 private:
  static constexpr std::size_t kMaxBytes = std::size_t{64} << 20;
  static std::size_t bytes_of(const Entry& e) { return (e.source.size() + e.filter.buffer.size()) * sizeof(float); }

  std::mutex mu_;
  std::list<std::shared_ptr<const Entry>> entries_;
  std::size_t bytes_ = 0;
};

// The filter (read by every part) in each distinct layout the parts' primitives want,
// reordered once on the calling thread (Winograd's: from TransformedFilters).
struct FilterCopies {
  std::vector<memory::desc> layouts;
  std::vector<const float*> data;
  std::vector<std::unique_ptr<ReorderedFilter>> copies;
  std::vector<std::shared_ptr<const TransformedFilters::Entry>> kept;

  const float* for_prim(const Prim& p, const float* f, std::size_t count) {
    if (p.direct_w()) return f;
    for (std::size_t i = 0; i < layouts.size(); ++i)
      if (layouts[i] == p.w) return data[i];
    layouts.push_back(p.w);
    if (p.winograd) {
      kept.push_back(TransformedFilters::instance().get(p, f, count));
      data.push_back(kept.back()->filter.data);
    } else {
      copies.push_back(std::make_unique<ReorderedFilter>(p, f));
      data.push_back(copies.back()->data);
    }
    return data.back();
  }
};

// Runs fn(part index) for every part on the pool, each under one OpenMP thread, with oneDNN's
// errors (which should not happen once a primitive exists) as tracegraph internal errors.
template <class Fn>
void run_parts(std::size_t count, Fn&& fn) {
  parallel_parts(static_cast<int>(count), [&](int i) {
    const OneOmpThread one;
    try {
      fn(static_cast<std::size_t>(i));
      thread_stream().wait();
    } catch (const dnnl::error& err) {
      TG_CHECK(false, "oneDNN failed on a convolution it accepted: ", err.what());
    }
  });
}

}  // namespace

bool bands_read_filter_cheaply(const ConvGeom& g) {
  return g.kh * g.kw * g.c * g.oc <= 2 * std::max(g.h * g.w * g.c, g.oh * g.ow * g.oc);
}

bool supports(ConvDirection d, const ConvGeom& g, ActivationLayout layout) {
  return plan_with_primitives(d, g, layout).has_value();
}

bool runs_winograd_forward(const ConvGeom& g) {
  return winograd_pays(g) && plan_with_primitives(ConvDirection::forward, g, ActivationLayout::nhwc, Algorithm::winograd);
}

namespace {

// conv_forward, with conv_forward_by_image's image_done when not null.
bool forward(const ConvGeom& g, const float* x, const float* f, float* y, const GemmEpilogue* epilogue,
             ActivationLayout layout, void (*image_done)(void*, int64_t, const float*), void* ctx) {
  if (epilogue && epilogue->column_sums) return false;
  std::optional<Planned> planned;
  if (winograd_pays(g)) planned = plan_with_primitives(ConvDirection::forward, g, layout, Algorithm::winograd);
  if (!planned) planned = plan_with_primitives(ConvDirection::forward, g, layout);
  if (!planned) return false;
  if (image_done && g.oh * g.ow == 0) return false;
  if (image_done)
    for (const Part& part : planned->parts)
      if (part.sub.oh != g.oh) return false;
  const auto filter_size = static_cast<std::size_t>(g.kh * g.kw * g.c * g.oc);
  FilterCopies filters;
  std::vector<const float*> filter_of;
  for (const auto& p : planned->prims) filter_of.push_back(filters.for_prim(*p, f, filter_size));
  const EpilogueRowFn row_fn = epilogue ? widest_epilogue_row_fn(*epilogue) : nullptr;
  run_parts(planned->parts.size(), [&](std::size_t i) {
    const Part& part = planned->parts[i];
    const Prim& p = *planned->prims[i];
    dnnl::stream& s = thread_stream();
    const float* in = x + part.in_offset;
    const int64_t in_pixels = part.sub.h * g.w, out_pixels = part.sub.oh * g.ow;
    // By image: each image out of the blocked layout into this thread's scratch, or the part's
    // NHWC result there whole where oneDNN writes NHWC itself.
    thread_local std::vector<float> scratch;
    if (image_done)
      scratch.resize(static_cast<std::size_t>((p.own_copy_d ? 1 : part.sub.n) * out_pixels * g.oc));
    float* out = image_done ? scratch.data() : y + part.out_offset;
    memory src = p.own_copy_a ? memory(p.a, cpu_engine(), thread_buffer(kActivationsIn, p.a.get_size()))
                              : readable(p.a, p.user_a, in, p.reorder_a, kActivationsIn, s);
    if (p.own_copy_a) nhwc_to_nchw16c(in, static_cast<float*>(src.get_data_handle()), part.sub.n, in_pixels, g.c);
    memory dst = p.own_copy_d ? memory(p.d, cpu_engine(), thread_buffer(kActivationsOut, p.d.get_size()))
                              : writable(p.d, p.user_d, out, p.reorder_d, kActivationsOut);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, user_memory(p.w, filter_of[i])}, {DNNL_ARG_DST, dst}};
    add_scratchpad(p, args);
    p.conv.execute(s, args);
    if (!p.own_copy_d) finish(dst, p.user_d, out, p.reorder_d, s);
    s.wait();
    const auto* blocked = static_cast<const float*>(dst.get_data_handle());
    const int64_t r0 = part.out_offset / g.oc;
    // Image by image: its copy out of the blocked layout (if any), its epilogue, its reader.
    for (int64_t image = 0; image < part.sub.n; ++image) {
      float* y_image = out + (image_done && p.own_copy_d ? 0 : image * out_pixels * g.oc);
      const int64_t ra = r0 + image * out_pixels;
      if (p.own_copy_d) {  // pixel by pixel, each one's epilogue while it is in L1
        const float* from = blocked + image * out_pixels * g.oc;
        for (int64_t r = 0; r < out_pixels; ++r) {
          nchw16c_pixel_to_nhwc(from + r * 16, y_image + r * g.oc, out_pixels, g.oc);
          if (row_fn) row_fn(*epilogue, y_image + r * g.oc, ra + r, 0, g.oc);
        }
      } else if (row_fn) {
        for (int64_t r = 0; r < out_pixels; ++r) row_fn(*epilogue, y_image + r * g.oc, ra + r, 0, g.oc);
      }
      if (image_done) image_done(ctx, ra / (g.oh * g.ow), y_image);  // whole images only (checked above)
    }
  });
  return true;
}

}  // namespace

bool conv_forward(const ConvGeom& g, const float* x, const float* f, float* y, const GemmEpilogue* epilogue,
                  ActivationLayout layout) {
  return forward(g, x, f, y, epilogue, layout, nullptr, nullptr);
}

bool conv_forward_by_image(const ConvGeom& g, const float* x, const float* f, const GemmEpilogue* epilogue,
                           void (*image_done)(void* ctx, int64_t n, const float* image), void* ctx) {
  return forward(g, x, f, nullptr, epilogue, ActivationLayout::nhwc, image_done, ctx);
}

bool conv_backprop_input(const ConvGeom& g, const float* f, const float* dy, float* dx, ActivationLayout layout) {
  std::optional<Planned> planned = plan_with_primitives(ConvDirection::backprop_input, g, layout);
  if (!planned) return false;
  FilterCopies filters;
  std::vector<const float*> filter_of;
  const auto filter_size = static_cast<std::size_t>(g.kh * g.kw * g.c * g.oc);
  for (const auto& p : planned->prims) filter_of.push_back(filters.for_prim(*p, f, filter_size));
  run_parts(planned->parts.size(), [&](std::size_t i) {
    const Part& part = planned->parts[i];
    const Prim& p = *planned->prims[i];
    dnnl::stream& s = thread_stream();
    float* out = dx + part.in_offset;
    memory diff_src = writable(p.a, p.user_a, out, p.reorder_a, kActivationsOut);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_DIFF_DST, readable(p.d, p.user_d, dy + part.out_offset, p.reorder_d, kActivationsIn, s)},
        {DNNL_ARG_WEIGHTS, user_memory(p.w, filter_of[i])},
        {DNNL_ARG_DIFF_SRC, diff_src}};
    add_scratchpad(p, args);
    p.conv.execute(s, args);
    finish(diff_src, p.user_a, out, p.reorder_a, s);
  });
  return true;
}

bool conv_backprop_filter(const ConvGeom& g, const float* x, const float* dy, float* df, ActivationLayout layout) {
  std::optional<Planned> planned = plan_with_primitives(ConvDirection::backprop_filter, g, layout);
  if (!planned) return false;
  const int64_t fsize = g.kh * g.kw * g.c * g.oc;
  const std::size_t parts = planned->parts.size();
  // Part 0 writes df, the others partials, added in part order afterwards.
  std::vector<float> partials(static_cast<std::size_t>(parts - 1) * static_cast<std::size_t>(fsize));
  run_parts(parts, [&](std::size_t i) {
    const Part& part = planned->parts[i];
    const Prim& p = *planned->prims[i];
    dnnl::stream& s = thread_stream();
    float* out = i == 0 ? df : partials.data() + (i - 1) * fsize;
    memory diff_w = writable(p.w, p.user_w, out, p.reorder_w, kFilterOut);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, readable(p.a, p.user_a, x + part.in_offset, p.reorder_a, kActivationsIn, s)},
        {DNNL_ARG_DIFF_DST, readable(p.d, p.user_d, dy + part.out_offset, p.reorder_d, kActivationsOut, s)},
        {DNNL_ARG_DIFF_WEIGHTS, diff_w}};
    add_scratchpad(p, args);
    p.conv.execute(s, args);
    finish(diff_w, p.user_w, out, p.reorder_w, s);
  });
  for (std::size_t i = 1; i < parts; ++i) {
    const float* partial = partials.data() + (i - 1) * fsize;
    for (int64_t j = 0; j < fsize; ++j) df[j] += partial[j];
  }
  return true;
}

}  // namespace tg::detail::onednn
