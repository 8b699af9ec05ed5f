// The oneDNN convolutions (kernels/onednn_conv.h) on the geometries they take: each direction
// against a float64 loop, the bands a single image is cut into, strides, dilations, VALID /
// SAME / explicit padding, the fused epilogue, and bits that depend on the shapes alone.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/conv_kernels.h"
#include "kernels/gemm.h"
#include "kernels/gemm_epilogue.h"
#include "kernels/onednn_conv.h"

namespace tg::detail {
namespace {

using onednn::ConvDirection;

struct Case {
  std::string label;
  int64_t n, h, w, c, kh, kw, oc, sh, sw, dh, dw;
  int64_t pt, pb, pl, pr;  // explicit padding (TF's VALID: zeros; SAME: what TF computes)
  ConvGeom geom() const {
    const int64_t oh = (h + pt + pb - ((kh - 1) * dh + 1)) / sh + 1, ow = (w + pl + pr - ((kw - 1) * dw + 1)) / sw + 1;
    return {n, h, w, c, kh, kw, oc, oh, ow, sh, sw, dh, dw, pt, pl};
  }
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"one image in bands, SAME", 1, 17, 13, 5, 3, 3, 7, 1, 1, 1, 1, 1, 1, 1, 1},
      {"stride 2x1, VALID with an unread last row", 1, 24, 19, 6, 5, 3, 9, 2, 1, 1, 1, 0, 0, 0, 0},
      {"dilation 2, SAME", 3, 12, 11, 4, 3, 3, 5, 1, 1, 2, 2, 2, 2, 2, 2},
      {"stride 2, SAME padding after only", 2, 10, 10, 8, 3, 3, 16, 2, 2, 1, 1, 0, 1, 0, 1},
      {"7x7 stride 2, explicit uneven padding", 1, 20, 20, 3, 7, 7, 8, 2, 2, 1, 1, 3, 2, 1, 3},
      {"1x1 stride 2 downsample", 1, 14, 14, 16, 1, 1, 24, 2, 2, 1, 1, 0, 0, 0, 0},
      {"odd batch, one image per part", 5, 7, 7, 32, 3, 3, 32, 1, 1, 1, 1, 1, 1, 1, 1},
      {"one image, few rows", 1, 5, 6, 3, 3, 3, 4, 1, 1, 1, 1, 0, 0, 0, 0},
      {"one channel in", 10, 28, 28, 1, 3, 3, 32, 1, 1, 1, 1, 1, 1, 1, 1},
      {"stride 3 with bands", 1, 40, 8, 4, 3, 3, 6, 3, 3, 1, 1, 1, 1, 1, 1},
      {"pointwise", 1, 16, 16, 8, 1, 1, 12, 1, 1, 1, 1, 0, 0, 0, 0},
      {"batch 1, 7x7x64 layer", 1, 7, 7, 64, 3, 3, 64, 1, 1, 1, 1, 1, 1, 1, 1},
  };
  return all;
}

// A forward that runs Winograd (the rule: 3x3 stride 1 over multiples of 16 channels, at
// least 16384 output pixels in image groups). Its own tests: its float64 reference is costly.
const Case& winograd_case() {
  static const Case c{"Winograd forward", 86, 14, 14, 16, 3, 3, 16, 1, 1, 1, 1, 1, 1, 1, 1};
  return c;
}

std::vector<float> values(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = u(gen);
  return v;
}

// The float64 sums of one direction, and the sums of the terms' magnitudes (each result's
// rounding error is a small multiple of float's epsilon times that).
struct Reference {
  std::vector<double> value, magnitude;
};

// Calls fn(input index, filter index, output index) for every product of the convolution.
template <class F>
void each_product(const ConvGeom& g, F fn) {
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox)
        for (int64_t ky = 0; ky < g.kh; ++ky)
          for (int64_t kx = 0; kx < g.kw; ++kx) {
            const int64_t iy = oy * g.sh - g.pt + ky * g.dh, ix = ox * g.sw - g.pl + kx * g.dw;
            if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
            for (int64_t ch = 0; ch < g.c; ++ch)
              for (int64_t o = 0; o < g.oc; ++o)
                fn(((b * g.h + iy) * g.w + ix) * g.c + ch, ((ky * g.kw + kx) * g.c + ch) * g.oc + o,
                   ((b * g.oh + oy) * g.ow + ox) * g.oc + o);
          }
}

// The direction's result from its two operands (x and f, f and dy, or x and dy).
Reference reference(ConvDirection d, const ConvGeom& g, const std::vector<float>& a, const std::vector<float>& b,
                    std::size_t size) {
  Reference r{std::vector<double>(size, 0.0), std::vector<double>(size, 0.0)};
  each_product(g, [&](int64_t i, int64_t j, int64_t o) {
    const auto [to, p] = d == ConvDirection::forward          ? std::pair{o, double{a[i]} * b[j]}
                         : d == ConvDirection::backprop_input ? std::pair{i, double{a[j]} * b[o]}
                                                              : std::pair{j, double{a[i]} * b[o]};
    r.value[static_cast<std::size_t>(to)] += p;
    r.magnitude[static_cast<std::size_t>(to)] += std::abs(p);
  });
  return r;
}

struct Sizes {
  int64_t x, f, y;
};
Sizes sizes(const ConvGeom& g) { return {g.n * g.h * g.w * g.c, g.kh * g.kw * g.c * g.oc, g.n * g.oh * g.ow * g.oc}; }

// Runs direction d through oneDNN: the result, or nothing when oneDNN declined.
std::vector<float> run_onednn(ConvDirection d, const ConvGeom& g, const std::vector<float>& a,
                              const std::vector<float>& b, onednn::ActivationLayout layout = onednn::ActivationLayout::nhwc) {
  const Sizes s = sizes(g);
  std::vector<float> out;
  bool ran = false;
  if (d == ConvDirection::forward) {
    out.assign(static_cast<std::size_t>(s.y), NAN);
    ran = onednn::conv_forward(g, a.data(), b.data(), out.data(), nullptr, layout);
  } else if (d == ConvDirection::backprop_input) {
    out.assign(static_cast<std::size_t>(s.x), NAN);
    ran = onednn::conv_backprop_input(g, a.data(), b.data(), out.data(), layout);
  } else {
    out.assign(static_cast<std::size_t>(s.f), NAN);
    ran = onednn::conv_backprop_filter(g, a.data(), b.data(), out.data(), layout);
  }
  return ran ? out : std::vector<float>{};
}

// The operands of direction d for a case (seeded by the case's index).
std::pair<std::vector<float>, std::vector<float>> operands(ConvDirection d, const ConvGeom& g, uint32_t seed) {
  const Sizes s = sizes(g);
  std::vector<float> x = values(s.x, seed), f = values(s.f, seed + 1), dy = values(s.y, seed + 2);
  if (d == ConvDirection::forward) return {x, f};
  if (d == ConvDirection::backprop_input) return {f, dy};
  return {x, dy};
}

const char* name(ConvDirection d) {
  return d == ConvDirection::forward ? "forward" : d == ConvDirection::backprop_input ? "backprop_input" : "backprop_filter";
}

constexpr ConvDirection kDirections[] = {ConvDirection::forward, ConvDirection::backprop_input,
                                         ConvDirection::backprop_filter};

void expect_matches_reference(onednn::ActivationLayout layout) {
  uint32_t seed = 100;
  for (const Case& c : cases()) {
    const ConvGeom g = c.geom();
    for (ConvDirection d : kDirections) {
      seed += 3;
      SCOPED_TRACE(c.label + ", " + name(d));
      ASSERT_TRUE(onednn::supports(d, g, layout));
      const auto [a, b] = operands(d, g, seed);
      const std::vector<float> got = run_onednn(d, g, a, b, layout);
      ASSERT_FALSE(got.empty());
      const Reference want = reference(d, g, a, b, got.size());
      for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want.value[i], 1e-5 * want.magnitude[i] + 1e-6) << "element " << i;
    }
  }
}

TEST(OneDnnConv, EveryDirectionMatchesTheReferenceOnNhwc) { expect_matches_reference(onednn::ActivationLayout::nhwc); }

TEST(OneDnnConv, EveryDirectionMatchesTheReferenceOnBlockedLayouts) {
  expect_matches_reference(onednn::ActivationLayout::blocked);
}

// Parts are fixed by the shapes, each runs on one thread, and the filter gradient adds their
// partials in part order: the same bits on every run and at every thread count.
TEST(OneDnnConv, BitsDependOnTheShapesAlone) {
  const int threads = num_threads();
  uint32_t seed = 500;
  for (const Case& c : cases()) {
    const ConvGeom g = c.geom();
    for (ConvDirection d : kDirections) {
      SCOPED_TRACE(c.label + ", " + name(d));
      const auto [a, b] = operands(d, g, seed += 3);
      set_num_threads(2);
      const std::vector<float> first = run_onednn(d, g, a, b), second = run_onednn(d, g, a, b);
      set_num_threads(1);
      const std::vector<float> serial = run_onednn(d, g, a, b);
      set_num_threads(threads);
      ASSERT_FALSE(first.empty());
      EXPECT_EQ(first, second);
      EXPECT_EQ(first, serial);
    }
  }
}

// The epilogue is applied to each part's rows with the elementwise kernels' own functors: the
// fused result is the unfused one, bit for bit.
TEST(OneDnnConv, FusedEpilogueEqualsTheUnfusedOps) {
  for (const Case& c : cases()) {
    const ConvGeom g = c.geom();
    SCOPED_TRACE(c.label);
    const Sizes s = sizes(g);
    const std::vector<float> x = values(s.x, 7), f = values(s.f, 8), bias = values(g.oc, 9);
    std::vector<float> plain = run_onednn(ConvDirection::forward, g, x, f);
    ASSERT_FALSE(plain.empty());
    std::vector<float> fused(plain.size(), NAN);
    std::vector<char> mask(plain.size(), 2);
    static_assert(sizeof(bool) == 1);
    GemmEpilogue e;
    e.bias = bias.data();
    e.relu = true;
    e.mask_out = reinterpret_cast<bool*>(mask.data());
    e.mask_ld = g.oc;
    ASSERT_TRUE(onednn::conv_forward(g, x.data(), f.data(), fused.data(), &e));
    for (std::size_t i = 0; i < plain.size(); ++i) {
      const float biased = plain[i] + bias[i % static_cast<std::size_t>(g.oc)];
      ASSERT_EQ(mask[i], biased > 0.0f ? 1 : 0) << "element " << i;
      ASSERT_EQ(fused[i], biased > 0.0f ? biased : 0.0f) << "element " << i;
    }
  }
}

// Winograd is taken by the rule's shapes only: 3x3 stride 1 over multiples of 16 channels, in
// image groups with enough output pixels to repay the filter's transform.
TEST(OneDnnConv, WinogradRunsOnlyWhereTheRuleSays) {
  const ConvGeom wino = winograd_case().geom();
  if (!onednn::runs_winograd_forward(wino)) GTEST_SKIP() << "oneDNN has no Winograd kernel for this CPU";
  ConvGeom fewer = wino, strided = wino, odd = wino, single = wino;
  fewer.n = 20;  // 3920 output pixels
  strided.sh = 2, strided.oh = 7;
  odd.c = 24;
  single.n = 1, single.h = single.w = single.oh = single.ow = 140;
  for (const ConvGeom* g : {&fewer, &strided, &odd, &single}) EXPECT_FALSE(onednn::runs_winograd_forward(*g));
}

// Winograd's rounding stays within the bound direct kernels meet; its parts are fixed by the
// shapes (the same bits on 1 and 2 threads); the epilogue is the unfused ops' bit for bit.
TEST(OneDnnConv, WinogradForwardMatchesTheReferenceWithBitsOfTheShapesAlone) {
  const ConvGeom g = winograd_case().geom();
  if (!onednn::runs_winograd_forward(g)) GTEST_SKIP() << "oneDNN has no Winograd kernel for this CPU";
  const auto [x, f] = operands(ConvDirection::forward, g, 31);
  const int threads = num_threads();
  set_num_threads(2);
  const std::vector<float> two = run_onednn(ConvDirection::forward, g, x, f);
  set_num_threads(1);
  const std::vector<float> one = run_onednn(ConvDirection::forward, g, x, f);
  set_num_threads(threads);
  ASSERT_FALSE(two.empty());
  EXPECT_EQ(two, one);
  const Reference want = reference(ConvDirection::forward, g, x, f, two.size());
  double worst = 0.0;  // the largest error in units of the bound's first term
  for (std::size_t i = 0; i < two.size(); ++i) {
    ASSERT_NEAR(two[i], want.value[i], 1e-5 * want.magnitude[i] + 1e-6) << "element " << i;
    worst = std::max(worst, std::abs(two[i] - want.value[i]) / (1e-5 * want.magnitude[i]));
  }
  RecordProperty("worst_error_in_bound_units", std::to_string(worst));
  const std::vector<float> bias = values(g.oc, 9);
  GemmEpilogue e;
  e.bias = bias.data();
  e.relu = true;
  std::vector<float> fused(two.size(), NAN);
  ASSERT_TRUE(onednn::conv_forward(g, x.data(), f.data(), fused.data(), &e));
  for (std::size_t i = 0; i < two.size(); ++i) {
    const float biased = two[i] + bias[i % static_cast<std::size_t>(g.oc)];
    ASSERT_EQ(fused[i], biased > 0.0f ? biased : 0.0f) << "element " << i;
  }
}

// By image, each image comes out of the parts' (blocked) results with its epilogue, bit for bit
// conv_forward's, and every image once, on Winograd's path and on direct's.
TEST(OneDnnConv, ByImageHandsOutConvForwardsImages) {
  std::vector<Case> all = cases();
  all.push_back(winograd_case());
  for (const Case& c : all) {
    const ConvGeom g = c.geom();
    SCOPED_TRACE(c.label);
    const Sizes s = sizes(g);
    const std::vector<float> x = values(s.x, 17), f = values(s.f, 18), bias = values(g.oc, 19);
    GemmEpilogue e;
    e.bias = bias.data();
    e.relu = true;
    std::vector<float> whole(static_cast<std::size_t>(s.y), NAN), by_image(whole.size(), NAN);
    ASSERT_TRUE(onednn::conv_forward(g, x.data(), f.data(), whole.data(), &e));
    struct Ctx {
      std::vector<float>& out;
      int64_t image;
      std::vector<int> seen;
    } ctx{by_image, g.oh * g.ow * g.oc, std::vector<int>(static_cast<std::size_t>(g.n), 0)};
    const bool ran = onednn::conv_forward_by_image(g, x.data(), f.data(), &e, [](void* p, int64_t n, const float* image) {
      Ctx& k = *static_cast<Ctx*>(p);
      std::copy(image, image + k.image, k.out.begin() + n * k.image);
      ++k.seen[static_cast<std::size_t>(n)];
    }, &ctx);
    if (!ran) continue;  // bands of one image: not by image
    EXPECT_EQ(ctx.seen, std::vector<int>(static_cast<std::size_t>(g.n), 1));
    for (std::size_t i = 0; i < whole.size(); ++i) ASSERT_EQ(std::bit_cast<uint32_t>(by_image[i]), std::bit_cast<uint32_t>(whole[i])) << i;
  }
}

// The transformed filter is kept across calls and reused only for the same filter bytes: a
// filter changed in place (a training step's update) gives the new filter's result.
TEST(OneDnnConv, WinogradSeesAFilterChangedInPlace) {
  const ConvGeom g = winograd_case().geom();
  if (!onednn::runs_winograd_forward(g)) GTEST_SKIP() << "oneDNN has no Winograd kernel for this CPU";
  const Sizes s = sizes(g);
  const std::vector<float> x = values(s.x, 21);
  std::vector<float> f = values(s.f, 22);
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    if (step == 2) f[static_cast<std::size_t>(s.f / 2)] += 0.5f;  // one weight: step 1's transform must not be reused
    std::vector<float> y(static_cast<std::size_t>(s.y), NAN);
    ASSERT_TRUE(onednn::conv_forward(g, x.data(), f.data(), y.data(), nullptr));
    // The first and the last image against the reference (each reads only its own image).
    ConvGeom one = g;
    one.n = 1;
    const std::size_t in_image = static_cast<std::size_t>(g.h * g.w * g.c), out_image = static_cast<std::size_t>(g.oh * g.ow * g.oc);
    for (const int64_t n : {int64_t{0}, g.n - 1}) {
      const std::vector<float> xn(x.begin() + static_cast<std::ptrdiff_t>(n * in_image),
                                  x.begin() + static_cast<std::ptrdiff_t>((n + 1) * in_image));
      const Reference want = reference(ConvDirection::forward, one, xn, f, out_image);
      for (std::size_t i = 0; i < out_image; ++i)
        ASSERT_NEAR(y[n * out_image + i], want.value[i], 1e-5 * want.magnitude[i] + 1e-6) << "image " << n << ", element " << i;
    }
    if (step == 0) for (float& v : f) v = -v;  // every weight
  }
}

// conv_kernels' dispatch: forced to oneDNN, the public entry points give oneDNN's bits; forced
// to the own kernels, results within rounding of them.
TEST(OneDnnConv, DispatchFollowsTheBackendSetting) {
  const Case& c = cases()[0];
  const ConvGeom g = c.geom();
  const Sizes s = sizes(g);
  const std::vector<float> x = values(s.x, 1), f = values(s.f, 2);
  const std::vector<float> direct = run_onednn(ConvDirection::forward, g, x, f);
  std::vector<float> forced(direct.size()), own(direct.size());
  set_conv_backend(ConvBackend::onednn);
  conv_forward<float>(g, x.data(), f.data(), forced.data());
  set_conv_backend(ConvBackend::own);
  conv_forward<float>(g, x.data(), f.data(), own.data());
  set_conv_backend(ConvBackend::automatic);
  EXPECT_EQ(forced, direct);
  for (std::size_t i = 0; i < own.size(); ++i) EXPECT_NEAR(own[i], direct[i], 1e-4);
}

// This process's thread count, from /proc (-1 where there is none).
int process_threads() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}

// oneDNN runs on one OpenMP thread per call, on the pool's threads: no OpenMP team is started
// (its idle workers would spin on the pool's cores).
TEST(OneDnnConv, StartsNoThreadsBesideThePool) {
  const int threads = num_threads();
  set_num_threads(2);
  const Case& c = cases()[6];  // several images: parts on both pool threads
  const ConvGeom g = c.geom();
  const std::vector<float> x = values(sizes(g).x, 1), f = values(sizes(g).f, 2);
  ASSERT_FALSE(run_onednn(ConvDirection::forward, g, x, f).empty());  // the pool's threads exist now
  const int before = process_threads();
  if (before < 0) GTEST_SKIP() << "no /proc/self/status";
  for (ConvDirection d : kDirections) {
    const auto [a, b] = operands(d, g, 3);
    EXPECT_FALSE(run_onednn(d, g, a, b).empty());
  }
  EXPECT_EQ(process_threads(), before);
  set_num_threads(threads);
}

// The automatic choice on the measured shapes: the CNN's second layer (32 channels in) goes to
// oneDNN in every direction, its first (one channel in) stays with the own kernels.
TEST(OneDnnConv, AutomaticChoiceFollowsTheMeasuredRule) {
  if (!own_avx512_kernels()) GTEST_SKIP() << "the rule sends work to oneDNN on AVX-512 CPUs only";
  const Case deep{"CNN layer 2", 4, 14, 14, 32, 3, 3, 64, 1, 1, 1, 1, 1, 1, 1, 1};
  const Case shallow{"CNN layer 1", 4, 28, 28, 1, 3, 3, 32, 1, 1, 1, 1, 1, 1, 1, 1};
  for (const Case* c : {&deep, &shallow}) {
    const ConvGeom g = c->geom();
    const Sizes s = sizes(g);
    SCOPED_TRACE(c->label);
    const std::vector<float> x = values(s.x, 3), f = values(s.f, 4), dy = values(s.y, 5);
    auto run = [&](ConvBackend backend) {
      set_conv_backend(backend);
      std::vector<float> y(static_cast<std::size_t>(s.y)), dx(static_cast<std::size_t>(s.x)),
          df(static_cast<std::size_t>(s.f));
      conv_forward<float>(g, x.data(), f.data(), y.data());
      conv_backprop_input<float>(g, f.data(), dy.data(), dx.data());
      conv_backprop_filter<float>(g, x.data(), dy.data(), df.data());
      set_conv_backend(ConvBackend::automatic);
      return std::vector<std::vector<float>>{y, dx, df};
    };
    const auto automatic = run(ConvBackend::automatic);
    const auto expected = run(c == &deep ? ConvBackend::onednn : ConvBackend::own);
    const auto other = run(c == &deep ? ConvBackend::own : ConvBackend::onednn);
    int differing = 0;
    for (std::size_t i = 0; i < automatic.size(); ++i) {
      EXPECT_EQ(automatic[i], expected[i]) << "result " << i;
      differing += automatic[i] != other[i];
    }
    // Both sum a forward in the same order (same bits), but not the gradients.
    EXPECT_GT(differing, 0) << "both backends gave the same bits: this test cannot tell which one ran";
  }
}

}  // namespace
}  // namespace tg::detail
