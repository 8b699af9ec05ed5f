// The bfloat16 product's stores: bf16_gemm_rounded and bf16_gemm_rounded_to_f32 round each sum in
// the product's own pass; their bits must be those of bf16_gemm's float32 sums followed by the
// separate conversions (f32_to_bf16, then bf16_to_f32), on every block and panel remainder, on
// one thread and two, and on the float32 fallback.
#include <cfenv>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include <xmmintrin.h>

#include "core/thread_pool.h"
#include "kernels/bf16.h"
#include "support/graph_util.h"
#include "support/test_util.h"

namespace tg {
namespace {

struct Shape {
  int m, n, k;
};

// Operand values of four kinds, by `kind`: integers to 40 (exact sums, many of them ties between
// two bfloat16 values: 1026 lies halfway between 1024 and 1028), values of every magnitude (general
// rounding), tiny ones whose sums are float32 subnormals, and an infinity (infinite and NaN sums).
std::vector<bfloat16_t> operand(int rows, int cols, int kind, int salt) {
  std::vector<bfloat16_t> v(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const auto h = static_cast<int64_t>((i * 2654435761u + static_cast<std::size_t>(salt) * 40503u) % 1000003u);
    float x = static_cast<float>(h % 81 - 40);
    if (kind == 1) x = std::ldexp(static_cast<float>(h % 255 - 127) / 64.0f, static_cast<int>(h % 13) - 6);
    if (kind == 2) x = std::ldexp(x, -66);
    if (kind == 3 && i == 5) x = INFINITY;
    v[i] = bfloat16_t(x);
  }
  return v;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Checks both rounded stores against the sums and the separate conversions, for every transpose,
// with C's leading dimension wider than n (the stores must keep to their columns).
void check(const Shape& s, int kind, const char* where) {
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    SCOPED_TRACE(::testing::Message() << where << " " << s.m << "x" << s.n << "x" << s.k << " ta=" << ta
                                      << " tb=" << tb << " kind " << kind);
    const std::vector<bfloat16_t> a = operand(s.m, s.k, kind, 1), b = operand(s.k, s.n, kind, 2);
    const int lda = ta ? s.m : s.k, ldb = tb ? s.k : s.n, ldc = s.n + 3;
    const std::size_t size = static_cast<std::size_t>(s.m) * static_cast<std::size_t>(ldc);
    std::vector<float> sums(size, -7.0f), wide(size, -7.0f);
    std::vector<bfloat16_t> narrow(size, bfloat16_t(-7.0f));
    detail::bf16_gemm(s.m, s.n, s.k, a.data(), lda, ta, b.data(), ldb, tb, sums.data(), ldc);
    detail::bf16_gemm_rounded(s.m, s.n, s.k, a.data(), lda, ta, b.data(), ldb, tb, narrow.data(), ldc);
    detail::bf16_gemm_rounded_to_f32(s.m, s.n, s.k, a.data(), lda, ta, b.data(), ldb, tb, wide.data(), ldc);
    int wrong = 0, ties = 0;
    for (int i = 0; i < s.m; ++i)
      for (int j = 0; j < ldc; ++j) {
        const std::size_t at = static_cast<std::size_t>(i) * ldc + static_cast<std::size_t>(j);
        if (j >= s.n) {  // past n: untouched
          wrong += narrow[at].bits != bfloat16_t(-7.0f).bits || bits(wide[at]) != bits(-7.0f);
          continue;
        }
        bfloat16_t want;
        detail::f32_to_bf16(&sums[at], &want, 1);
        float want_wide;
        detail::bf16_to_f32(&want, &want_wide, 1);
        wrong += narrow[at].bits != want.bits || bits(wide[at]) != bits(want_wide);
        ties += (bits(sums[at]) & 0xFFFF) == 0x8000;
      }
    EXPECT_EQ(wrong, 0);
    if (kind == 0 && s.k >= 64) {
      EXPECT_GT(ties, 0) << "no sum was a tie: the shape tests too little";
    }
  }
}

const Shape kShapes[] = {{1, 1, 1},    {4, 17, 3},    {8, 33, 35},    {11, 16, 64},  {13, 48, 17},
                         {25, 70, 64}, {128, 10, 256}, {128, 256, 10}, {130, 70, 259}, {100, 96, 128}};

TEST(BF16GemmStore, RoundedStoresKeepTheBitsOfTheSeparateConversions) {
  const int threads_before = config::num_threads();
  for (const int threads : {1, 2}) {
    config::set_num_threads(threads);
    for (const Shape& s : kShapes)
      for (int kind = 0; kind < 4; ++kind) check(s, kind, threads == 1 ? "1 thread" : "2 threads");
  }
  config::set_num_threads(threads_before);
}

TEST(BF16GemmStore, FallbackRoundsAsTheInstructionsDo) {
  const bool was = detail::set_bf16_gemm_instructions(false);
  for (const Shape& s : kShapes) check(s, 0, "fallback");
  check({25, 70, 64}, 1, "fallback");
  detail::set_bf16_gemm_instructions(was);
}

// The epilogue store against the ops apart, written here from their definitions: the product
// rounded to bfloat16, + bias rounded, the mask out > 0, relu (x < 0 ? 0 : x), where(mask, out,
// 0), each on the float32 value of the previous result, for every combination of the parts.
void check_epilogue(const Shape& s, int kind, const char* where) {
  const std::vector<bfloat16_t> a = operand(s.m, s.k, kind, 5), b = operand(s.k, s.n, kind, 6);
  std::vector<float> bias(static_cast<std::size_t>(s.n));
  for (int j = 0; j < s.n; ++j)
    bias[static_cast<std::size_t>(j)] = static_cast<float>(bfloat16_t(kind == 0 ? static_cast<float>(j % 7 - 3) : 0.37f * static_cast<float>(j % 11 - 5)));
  const std::size_t size = static_cast<std::size_t>(s.m) * static_cast<std::size_t>(s.n);
  std::vector<bool> mask_in_values(size);
  for (std::size_t i = 0; i < size; ++i) mask_in_values[i] = (i * 7) % 3 != 0;
  std::vector<float> sums(size);
  detail::bf16_gemm(s.m, s.n, s.k, a.data(), s.k, false, b.data(), s.n, false, sums.data(), s.n);
  for (int parts = 0; parts < 16; ++parts) {
    SCOPED_TRACE(::testing::Message() << where << " " << s.m << "x" << s.n << "x" << s.k << " kind " << kind
                                      << " parts " << parts);
    const bool with_bias = parts & 1, mask_out = parts & 2, relu = parts & 4, mask_in = parts & 8;
    std::unique_ptr<bool[]> made(new bool[size]), read(new bool[size]);
    for (std::size_t i = 0; i < size; ++i) made[i] = false, read[i] = mask_in_values[i];
    std::vector<bfloat16_t> got(size);
    detail::Bf16Epilogue e;
    e.bias = with_bias ? bias.data() : nullptr;
    e.mask_out = mask_out ? made.get() : nullptr;
    e.relu = relu;
    e.mask_in = mask_in ? read.get() : nullptr;
    e.ld_mask = s.n;
    detail::bf16_gemm_epilogue(s.m, s.n, s.k, a.data(), s.k, false, b.data(), s.n, false, got.data(), s.n, e);
    int wrong = 0;
    for (std::size_t i = 0; i < size; ++i) {
      bfloat16_t v(sums[i]);
      if (with_bias) v = bfloat16_t(static_cast<float>(v) + bias[i % static_cast<std::size_t>(s.n)]);
      float w = static_cast<float>(v);
      const bool positive = w > 0.0f;
      if (relu && w < 0.0f) w = 0.0f;
      if (mask_in && !mask_in_values[i]) w = 0.0f;
      wrong += got[i].bits != bfloat16_t(w).bits;
      if (mask_out) wrong += made[i] != positive;
    }
    EXPECT_EQ(wrong, 0);
  }
}

TEST(BF16GemmStore, EpilogueKeepsTheBitsOfTheOpsApart) {
  const int threads_before = config::num_threads();
  for (const int threads : {1, 2}) {
    config::set_num_threads(threads);
    for (const Shape& s : kShapes)
      for (int kind = 0; kind < 4; ++kind) check_epilogue(s, kind, threads == 1 ? "1 thread" : "2 threads");
  }
  config::set_num_threads(threads_before);
  const bool was = detail::set_bf16_gemm_instructions(false);
  for (const Shape& s : kShapes) check_epilogue(s, 1, "fallback");
  detail::set_bf16_gemm_instructions(was);
}

// Float32 B rounded while packed: the bits of rounding B first (f32_to_bf16) and the bfloat16
// product, for B's values of every kind (ties, subnormal floats, infinities and NaNs among
// them), every transpose, both packings' remainders, 1 and 2 threads and the fallback.
void check_float_b(const Shape& s, int kind, const char* where) {
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    SCOPED_TRACE(::testing::Message() << where << " " << s.m << "x" << s.n << "x" << s.k << " ta=" << ta
                                      << " tb=" << tb << " kind " << kind);
    const std::vector<bfloat16_t> a = operand(s.m, s.k, kind == 2 ? 1 : kind, 7);
    std::vector<float> b(static_cast<std::size_t>(s.k) * static_cast<std::size_t>(s.n));
    for (std::size_t i = 0; i < b.size(); ++i) {
      const auto h = static_cast<int64_t>((i * 2654435761u + 977u) % 1000003u);
      float x = std::ldexp(static_cast<float>(h % 2001 - 1000) / 997.0f, static_cast<int>(h % 9) - 4);
      if (kind == 0) x = 1.0f + std::ldexp(static_cast<float>(h % 5), -9);  // 1 + 2^-8 is a tie
      if (kind == 2) x = std::ldexp(x, -128);                                // subnormal floats
      if (kind == 3 && i % 37 == 3) x = i % 2 ? INFINITY : NAN;
      b[i] = x;
    }
    std::vector<bfloat16_t> rounded(b.size());
    detail::f32_to_bf16(b.data(), rounded.data(), static_cast<int64_t>(b.size()));
    const int lda = ta ? s.m : s.k, ldb = tb ? s.k : s.n;
    const std::size_t size = static_cast<std::size_t>(s.m) * static_cast<std::size_t>(s.n);
    std::vector<bfloat16_t> want(size), got(size);
    detail::Bf16Epilogue e;
    detail::bf16_gemm_epilogue(s.m, s.n, s.k, a.data(), lda, ta, rounded.data(), ldb, tb, want.data(), s.n, e);
    detail::bf16_gemm_epilogue(s.m, s.n, s.k, a.data(), lda, ta, b.data(), ldb, tb, got.data(), s.n, e);
    int wrong = 0;
    for (std::size_t i = 0; i < size; ++i) wrong += got[i].bits != want[i].bits;
    EXPECT_EQ(wrong, 0);
  }
}

TEST(BF16GemmStore, FloatRightOperandsRoundAsTheyArePacked) {
  const int threads_before = config::num_threads();
  for (const int threads : {1, 2}) {
    config::set_num_threads(threads);
    for (const Shape& s : kShapes)
      for (int kind = 0; kind < 4; ++kind) check_float_b(s, kind, threads == 1 ? "1 thread" : "2 threads");
    check_float_b({20, 40, 70}, 1, "k past 32 pairs");
  }
  config::set_num_threads(threads_before);
  const bool was = detail::set_bf16_gemm_instructions(false);
  for (const Shape& s : kShapes) check_float_b(s, 3, "fallback");
  detail::set_bf16_gemm_instructions(was);
}

// A mixed-precision dense layer as a model writes it: float32 weights cast to bfloat16 for the
// forward products (bias, relu) and for the input gradients (relu's mask). The optimiser takes
// the casts into the products with an epilogue; the bits are those of the graph as traced and
// of eager.
TEST(BF16GemmStore, TheOptimiserTakesWeightCastsIntoTheProducts) {
  auto step = [](const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& w2) {
    GradientTape tape;
    tape.watch(x);
    const Tensor h = relu(matmul(x, cast(w, bfloat16)) + b);
    const Tensor y = matmul(h, cast(w2, bfloat16)) + constant(0.5f, bfloat16);
    std::vector<Tensor> out = tape.gradient(reduce_sum(cast(y, float32)), std::vector<Tensor>{x});
    out.push_back(y);
    return out;
  };
  const Tensor x = cast(random_uniform({40, 96}, -1, 1, 1), bfloat16);
  const Tensor w = random_uniform({96, 72}, -0.3, 0.3, 2);
  const Tensor b = cast(random_uniform({72}, -0.2, 0.2, 3), bfloat16);
  const Tensor w2 = random_uniform({72, 48}, -0.3, 0.3, 4);
  const int threads_before = config::num_threads();
  for (const int threads : {1, 2}) {
    config::set_num_threads(threads);
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    auto optimised = function(step, {.name = "bf16_weight_casts"});
    auto plain = function(step, {.name = "bf16_weight_casts", .optimize = false});
    const std::vector<Tensor> got = optimised(x, w, b, w2), want = plain(x, w, b, w2), eager = step(x, w, b, w2);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t k = 0; k < got.size(); ++k) {
      EXPECT_TRUE(testing::same_bits(got[k], want[k])) << "output " << k;
      EXPECT_TRUE(testing::same_bits(got[k], eager[k])) << "output " << k;
    }
    const Graph g = optimised.get_concrete_function(x, w, b, w2).optimized_graph();
    // Both products with an epilogue (h's, with bias and relu; dh's, with relu's mask) read the
    // float32 weights (arg1, arg3); the plain product dh w^T keeps its cast.
    int reading_weights = 0;
    for (const Graph::Node& node : g.nodes())
      if (node.op == "matmul_epilogue") reading_weights += node.inputs.at(1) == "arg1" || node.inputs.at(1) == "arg3";
    EXPECT_EQ(reading_weights, 2) << g.to_string();
  }
  config::set_num_threads(threads_before);
}

// The bits of every element do not depend on the split: the same product on one thread and two.
TEST(BF16GemmStore, SumsAreTheSameOnOneThreadAndTwo) {
  const int threads_before = config::num_threads();
  for (const Shape& s : {Shape{128, 256, 784}, Shape{784, 256, 128}, Shape{20, 300, 50}, Shape{13, 64, 700}}) {
    const std::vector<bfloat16_t> a = operand(s.m, s.k, 1, 3), b = operand(s.k, s.n, 1, 4);
    std::vector<std::vector<float>> got;
    for (const int threads : {1, 2}) {
      config::set_num_threads(threads);
      got.emplace_back(static_cast<std::size_t>(s.m) * static_cast<std::size_t>(s.n));
      detail::bf16_gemm(s.m, s.n, s.k, a.data(), s.k, false, b.data(), s.n, false, got.back().data(), s.n);
    }
    EXPECT_EQ(std::memcmp(got[0].data(), got[1].data(), got[0].size() * sizeof(float)), 0)
        << s.m << "x" << s.n << "x" << s.k;
  }
  config::set_num_threads(threads_before);
}

// A product split by rows packs B once, the parts sharing the panels: whichever part packs a
// panel, each element's bits are those of one thread. Float32 B (rounded as it is packed) and
// bfloat16 B, with the parts running at once (two threads) and one after another (a product
// called from inside a pool job runs its parts serially: the first packs every panel).
TEST(BF16GemmStore, SharedPackingKeepsTheBitsOfOneThread) {
  // Only the AVX512_BF16 kernel splits by rows and shares its packing.
  if (!detail::cpu_has_avx512_bf16()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  const int threads_before = config::num_threads();
  for (const Shape& s : {Shape{128, 256, 784}, Shape{784, 256, 128}, Shape{128, 10, 256}, Shape{50, 300, 70}}) {
    for (const bool tb : {false, true}) {
      SCOPED_TRACE(::testing::Message() << s.m << "x" << s.n << "x" << s.k << " tb=" << tb);
      const std::vector<bfloat16_t> a = operand(s.m, s.k, 1, 5), b16 = operand(s.k, s.n, 1, 6);
      std::vector<float> b(b16.size());
      for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::ldexp(static_cast<float>(b16[i]), 1) + 1e-3f;
      const int ldb = tb ? s.k : s.n;
      const std::size_t size = static_cast<std::size_t>(s.m) * static_cast<std::size_t>(s.n);
      auto run = [&](std::vector<bfloat16_t>& from_float, std::vector<float>& sums) {
        detail::Bf16Epilogue e;
        detail::bf16_gemm_epilogue(s.m, s.n, s.k, a.data(), s.k, false, b.data(), ldb, tb, from_float.data(), s.n, e);
        detail::bf16_gemm(s.m, s.n, s.k, a.data(), s.k, false, b16.data(), ldb, tb, sums.data(), s.n);
      };
      config::set_num_threads(1);
      std::vector<bfloat16_t> want_rounded(size), got_rounded(size), nested_rounded(size);
      std::vector<float> want_sums(size), got_sums(size), nested_sums(size);
      run(want_rounded, want_sums);
      config::set_num_threads(2);
      run(got_rounded, got_sums);
      detail::parallel_parts(2, [&](int p) {
        if (p == 0) run(nested_rounded, nested_sums);
      });
      for (const auto* got : {&got_rounded, &nested_rounded})
        EXPECT_EQ(std::memcmp(got->data(), want_rounded.data(), size * sizeof(bfloat16_t)), 0);
      for (const auto* got : {&got_sums, &nested_sums})
        EXPECT_EQ(std::memcmp(got->data(), want_sums.data(), size * sizeof(float)), 0);
    }
  }
  config::set_num_threads(threads_before);
}

// Values at float32's edges, which vdpbf16ps treats its own way: bfloat16 subnormals (read as
// zero), products below 2^-126 (a subnormal result is flushed to zero) and beyond 2^128
// (infinite), and everyday values, so that some sums pass through those ranges and back.
std::vector<bfloat16_t> edge_operand(int rows, int cols, int salt) {
  std::vector<bfloat16_t> v(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const auto h = static_cast<int>((i * 2654435761u + static_cast<std::size_t>(salt) * 40503u) % 1000003u);
    const float mantissa = static_cast<float>(h % 255 - 127) / 64.0f;
    const int exponents[] = {-130, -70, -64, -60, 0, 3, 62, 66, -135, 1};
    v[i] = bfloat16_t(std::ldexp(mantissa, exponents[h / 255 % 10]));
  }
  return v;
}

// How many elements differ, where two NaNs of any payloads count as equal: a NaN's payload is the
// one thing the two ways of making the sums may give differently (each addition keeps the payload
// of one of its NaN operands, chosen by operand order), and no op promises one.
int differing(const std::vector<float>& x, const std::vector<float>& y) {
  int n = 0;
  for (std::size_t i = 0; i < x.size(); ++i) n += std::isnan(x[i]) ? !std::isnan(y[i]) : bits(x[i]) != bits(y[i]);
  return n;
}
int differing(const std::vector<bfloat16_t>& x, const std::vector<bfloat16_t>& y) {
  const auto nan = [](bfloat16_t h) { return (h.bits & 0x7FFFu) > 0x7F80u; };
  int n = 0;
  for (std::size_t i = 0; i < x.size(); ++i) n += nan(x[i]) ? !nan(y[i]) : x[i].bits != y[i].bits;
  return n;
}

// Everyday values with a few NaNs of distinct payloads and both signs in each operand, so that
// some sums meet one NaN, some two (a product of NaNs, or a NaN product added to a NaN sum):
// which payload survives depends on the order of the operands in each addition.
std::vector<bfloat16_t> nan_operand(int rows, int cols, int salt) {
  std::vector<bfloat16_t> v = operand(rows, cols, 1, salt);
  const uint16_t payloads[] = {0x7FC1, 0xFFC2, 0x7F83, 0xFFA4, 0x7FFF};  // quiet and signalling
  for (std::size_t i = static_cast<std::size_t>(salt) % 7; i < v.size(); i += 11) v[i].bits = payloads[i % 5];
  return v;
}

// The two ways of making the sums (bf16_avx512::Products) give the same bits (a NaN where the
// other gives a NaN), everyday values, values at float32's edges and NaNs of every payload alike, through every store (float32 sums,
// rounded, rounded and widened, the epilogue with bfloat16 and with float32 B), at every
// remainder of the packing.
TEST(BF16GemmStore, WidenedFmaKeepsTheBitsOfTheDotProductInstruction) {
  if (!detail::cpu_has_avx512_bf16()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  const bool instructions_were = detail::set_bf16_gemm_instructions(true);
  const bool was = detail::set_bf16_gemm_widened_fma(false);
  const Shape shapes[] = {{5, 10, 1}, {13, 17, 3}, {30, 33, 31}, {25, 70, 33}, {40, 16, 63}, {128, 256, 784}};
  for (const Shape& s : shapes)
    for (int kind = 0; kind < 6; ++kind)
      for (int t = 0; t < 4; ++t) {
        const bool ta = t & 1, tb = t & 2;
        SCOPED_TRACE(::testing::Message() << s.m << "x" << s.n << "x" << s.k << " ta=" << ta << " tb=" << tb
                                          << " kind " << kind);
        const auto make = [&](int rows, int cols, int salt) {
          return kind < 4 ? operand(rows, cols, kind, salt)
                          : kind == 4 ? edge_operand(rows, cols, salt) : nan_operand(rows, cols, salt);
        };
        const std::vector<bfloat16_t> a = make(s.m, s.k, 7), b = make(s.k, s.n, 8);
        std::vector<float> b_wide(b.size());
        detail::bf16_to_f32(b.data(), b_wide.data(), static_cast<int64_t>(b.size()));
        const int lda = ta ? s.m : s.k, ldb = tb ? s.k : s.n;
        const std::size_t size = static_cast<std::size_t>(s.m) * static_cast<std::size_t>(s.n);
        std::vector<float> bias(static_cast<std::size_t>(s.n), 0.25f);
        const std::unique_ptr<bool[]> mask_in = std::make_unique<bool[]>(size);
        for (std::size_t i = 0; i < size; ++i) mask_in[i] = i % 3 != 1;
        std::unique_ptr<bool[]> mask[2] = {std::make_unique<bool[]>(size), std::make_unique<bool[]>(size)};
        std::vector<float> sums[2], rounded_wide[2];
        std::vector<bfloat16_t> rounded[2], through_epilogue[2], from_float_b[2];
        for (const bool fma : {false, true}) {
          detail::set_bf16_gemm_widened_fma(fma);
          sums[fma].assign(size, -7.0f), rounded[fma].assign(size, bfloat16_t(-7.0f));
          rounded_wide[fma].assign(size, -7.0f);
          through_epilogue[fma].assign(size, bfloat16_t(-7.0f)), from_float_b[fma].assign(size, bfloat16_t(-7.0f));
          // The instruction ignores the caller's rounding mode, so the FMAs must too; and the
          // caller's MXCSR is its own again afterwards.
          const int rounding = std::fegetround();
          std::fesetround(FE_TOWARDZERO);
          const unsigned csr = _mm_getcsr();
          detail::bf16_gemm(s.m, s.n, s.k, a.data(), lda, ta, b.data(), ldb, tb, sums[fma].data(), s.n);
          detail::bf16_gemm_rounded(s.m, s.n, s.k, a.data(), lda, ta, b.data(), ldb, tb, rounded[fma].data(), s.n);
          detail::Bf16Epilogue e;
          e.bias = bias.data(), e.mask_out = mask[fma].get(), e.relu = true, e.ld_mask = s.n;
          detail::bf16_gemm_epilogue(s.m, s.n, s.k, a.data(), lda, ta, b.data(), ldb, tb,
                                     through_epilogue[fma].data(), s.n, e);
          detail::bf16_gemm_rounded_to_f32(s.m, s.n, s.k, a.data(), lda, ta, b.data(), ldb, tb,
                                           rounded_wide[fma].data(), s.n);
          detail::Bf16Epilogue masked;
          masked.bias = bias.data(), masked.mask_in = mask_in.get(), masked.ld_mask = s.n;
          detail::bf16_gemm_epilogue(s.m, s.n, s.k, a.data(), lda, ta, b_wide.data(), ldb, tb,
                                     from_float_b[fma].data(), s.n, masked);
          EXPECT_EQ(_mm_getcsr(), csr);
          std::fesetround(rounding);
        }
        int nonzero = 0;
        for (float x : sums[0]) nonzero += x != 0.0f;
        EXPECT_GT(nonzero, 0);
        EXPECT_EQ(differing(sums[0], sums[1]), 0);
        EXPECT_EQ(differing(rounded[0], rounded[1]), 0);
        EXPECT_EQ(differing(through_epilogue[0], through_epilogue[1]), 0);
        EXPECT_EQ(differing(rounded_wide[0], rounded_wide[1]), 0);
        EXPECT_EQ(differing(from_float_b[0], from_float_b[1]), 0);
        if (kind == 5) {
          int nans = 0;
          for (float x : sums[0]) nans += std::isnan(x);
          EXPECT_GT(nans, 0) << "no sum met a NaN: the operands test too little";
        }
        EXPECT_EQ(std::memcmp(mask[0].get(), mask[1].get(), size * sizeof(bool)), 0);
      }
  detail::set_bf16_gemm_widened_fma(was);
  detail::set_bf16_gemm_instructions(instructions_were);
}

// Integer operands (kind 0): every sum is exact in float32, so the product's sums must equal a
// plain triple loop's whatever the order, at every remainder of the packing - k past the last
// sixteen pairs, an odd k's lone value, n past a panel and past its first half, rows past a block
// - for every transpose, with bfloat16 B and with float32 B rounded as it is packed (its sums
// rounded once to bfloat16), on one thread and two.
TEST(BF16GemmStore, IntegerProductsEqualAPlainLoopAtEveryRemainder) {
  const int threads_before = config::num_threads();
  const Shape shapes[] = {{5, 10, 1},   {13, 17, 3},   {30, 33, 31},  {25, 70, 33},  {12, 48, 35},
                          {40, 16, 63}, {29, 40, 65},  {64, 10, 259}, {30, 96, 100}, {130, 64, 784}};
  for (const int threads : {1, 2}) {
    config::set_num_threads(threads);
    for (const Shape& s : shapes)
      for (int t = 0; t < 4; ++t) {
        const bool ta = t & 1, tb = t & 2;
        SCOPED_TRACE(::testing::Message() << threads << " threads " << s.m << "x" << s.n << "x" << s.k << " ta=" << ta
                                          << " tb=" << tb);
        const std::vector<bfloat16_t> a = operand(s.m, s.k, 0, 3), b = operand(s.k, s.n, 0, 4);
        std::vector<float> b32(b.size());
        detail::bf16_to_f32(b.data(), b32.data(), static_cast<int64_t>(b.size()));
        const int lda = ta ? s.m : s.k, ldb = tb ? s.k : s.n;
        const std::size_t size = static_cast<std::size_t>(s.m) * static_cast<std::size_t>(s.n);
        std::vector<float> sums(size, -7.0f);
        std::vector<bfloat16_t> rounded(size, bfloat16_t(-7.0f));
        detail::bf16_gemm(s.m, s.n, s.k, a.data(), lda, ta, b.data(), ldb, tb, sums.data(), s.n);
        detail::bf16_gemm_epilogue(s.m, s.n, s.k, a.data(), lda, ta, b32.data(), ldb, tb, rounded.data(), s.n,
                                   detail::Bf16Epilogue{});
        int wrong_sums = 0, wrong_rounded = 0;
        for (int i = 0; i < s.m; ++i)
          for (int j = 0; j < s.n; ++j) {
            int64_t want = 0;
            for (int q = 0; q < s.k; ++q) {
              const bfloat16_t x = a[static_cast<std::size_t>(ta ? q * lda + i : i * lda + q)];
              const bfloat16_t y = b[static_cast<std::size_t>(tb ? j * ldb + q : q * ldb + j)];
              want += static_cast<int64_t>(static_cast<float>(x)) * static_cast<int64_t>(static_cast<float>(y));
            }
            const std::size_t at = static_cast<std::size_t>(i) * static_cast<std::size_t>(s.n) + static_cast<std::size_t>(j);
            wrong_sums += sums[at] != static_cast<float>(want);
            wrong_rounded += rounded[at].bits != bfloat16_t(static_cast<float>(want)).bits;
          }
        EXPECT_EQ(wrong_sums, 0);
        EXPECT_EQ(wrong_rounded, 0);
      }
  }
  config::set_num_threads(threads_before);
}

}  // namespace
}  // namespace tg
