// bfloat16: the rounding of the conversion (ties to even, NaN, infinities, subnormals), ops that
// compute in float32 and round each result, matmul on the bfloat16 instructions against float32
// sums, data movement, casts, printing, files and gradients. Every expected value here comes
// from float32 arithmetic in the test and bfloat16_t's rounding, never from the op under test.
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "kernels/bf16.h"
#include "ops/cross_entropy.h"
#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
using testing::values::kInfF;
using testing::values::kNanF;

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
float round_bf16(float f) { return static_cast<float>(bfloat16_t(f)); }

// A bfloat16 tensor of values that are bfloat16 already (rounded when they are not).
Tensor bf(const std::vector<float>& v, std::vector<int64_t> dims = {}) {
  if (dims.empty()) dims = {static_cast<int64_t>(v.size())};
  return cast(constant(v, TensorShape(dims), float32), bfloat16);
}
// The expected result: f on the float32 values, each rounded to bfloat16.
Tensor expect(const std::vector<float>& a, const std::function<float(float)>& f, std::vector<int64_t> dims = {}) {
  std::vector<float> r;
  for (float x : a) r.push_back(round_bf16(f(round_bf16(x))));
  return bf(r, std::move(dims));
}
Tensor expect2(const std::vector<float>& a, const std::vector<float>& b, const std::function<float(float, float)>& f) {
  std::vector<float> r;
  for (std::size_t i = 0; i < a.size(); ++i) r.push_back(round_bf16(f(round_bf16(a[i]), round_bf16(b[i]))));
  return bf(r);
}
Fn bin(Tensor (*f)(const Tensor&, const Tensor&)) {
  return [f](const std::vector<Tensor>& in) { return f(in[0], in[1]); };
}
Fn un(Tensor (*f)(const Tensor&)) {
  return [f](const std::vector<Tensor>& in) { return f(in[0]); };
}
Fn cast_to(DType d) {
  return [d](const std::vector<Tensor>& in) { return cast(in[0], d); };
}

// Values whose sums and products need rounding: 1 + 2^-8 is a tie between two bfloat16 values.
const std::vector<float> kA = {1.0f, 1.5f, -2.25f, 3.0e5f, 0.1f, 7.0f};
const std::vector<float> kB = {0.00390625f, 1.0078125f, 0.75f, -1.0e5f, 3.0f, -7.0f};

TG_OP_CASES(bfloat16) {
  const Tensor a = bf(kA), b = bf(kB);
  const Tensor x = bf({-3.0f, -0.5f, 0.0f, 0.25f, 1.0f, 2.5f});
  const std::vector<float> xv = {-3.0f, -0.5f, 0.0f, 0.25f, 1.0f, 2.5f};
  // matmul: (2, 3) x (3, 2) with sums that round.
  const std::vector<float> ma = {1.0f, 0.00390625f, 2.0f, -1.5f, 3.0f, 0.1f};
  const std::vector<float> mb = {1.0f, 2.0f, 0.5f, -1.0f, 0.25f, 3.0f};
  std::vector<float> mc(4);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      float s = 0;
      for (int p = 0; p < 3; ++p) s += round_bf16(ma[i * 3 + p]) * round_bf16(mb[p * 2 + j]);
      mc[static_cast<std::size_t>(i * 2 + j)] = round_bf16(s);
    }
  // softmax of one row, in float32, then rounded.
  std::vector<float> sm;
  {
    float mx = -kInfF, sum = 0;
    for (float v : xv) mx = std::max(mx, v);
    for (float v : xv) sum += std::exp(v - mx);
    for (float v : xv) sm.push_back(std::exp(v - mx) / sum);
  }
  float total = 0;
  for (float v : kA) total += round_bf16(v);
  return {
      {"add", "bfloat16 rounds the float32 sum", bin(add), {a, b}, expect2(kA, kB, [](float p, float q) { return p + q; })},
      {"sub", "bfloat16", bin(sub), {a, b}, expect2(kA, kB, [](float p, float q) { return p - q; })},
      {"mul", "bfloat16", bin(mul), {a, b}, expect2(kA, kB, [](float p, float q) { return p * q; })},
      {"div", "bfloat16", bin(div), {a, b}, expect2(kA, kB, [](float p, float q) { return p / q; })},
      {"maximum", "bfloat16", bin(maximum), {a, b}, expect2(kA, kB, [](float p, float q) { return std::max(p, q); })},
      {"minimum", "bfloat16", bin(minimum), {a, b}, expect2(kA, kB, [](float p, float q) { return std::min(p, q); })},
      {"add", "bfloat16 bias broadcast over rows", bin(add), {bf({1, 2, 3, 4, 5, 6}, {2, 3}), bf({0.5f, 0.00390625f, -1})},
       bf({1.5f, 2.0f, 2.0f, 4.5f, 5.0f, 5.0f}, {2, 3})},
      {"greater", "bfloat16 gives bool", bin(greater), {a, b}, constant({true, true, false, true, false, true})},
      {"neg", "bfloat16", un(neg), {x}, expect(xv, [](float v) { return -v; })},
      {"square", "bfloat16", un(square), {a}, expect(kA, [](float v) { return v * v; })},
      {"relu", "bfloat16", un(relu), {x}, expect(xv, [](float v) { return v > 0 ? v : 0.0f; })},
      {"exp", "bfloat16", un(exp), {x}, expect(xv, [](float v) { return std::exp(v); }), 1e-2},
      {"sigmoid", "bfloat16", un(sigmoid), {x}, expect(xv, [](float v) { return 1.0f / (1.0f + std::exp(-v)); }), 1e-2},
      {"tanh", "bfloat16", un(tanh), {x}, expect(xv, [](float v) { return std::tanh(v); }), 1e-2},
      {"where", "bfloat16 operands", [](const std::vector<Tensor>& in) { return where(in[0] > in[1], in[0], in[1]); },
       {a, b}, expect2(kA, kB, [](float p, float q) { return p > q ? p : q; })},
      {"zeros_like", "bfloat16", un(zeros_like), {x}, bf({0, 0, 0, 0, 0, 0})},
      {"ones_like", "bfloat16", un(ones_like), {x}, bf({1, 1, 1, 1, 1, 1})},
      {"reduce_sum", "bfloat16 sums in float32, rounds once",
       [](const std::vector<Tensor>& in) { return reduce_sum(in[0]); }, {a}, cast(constant(round_bf16(total)), bfloat16)},
      {"reduce_mean", "bfloat16 rows", [](const std::vector<Tensor>& in) { return reduce_mean(in[0], {1}); },
       {bf({1, 2, 4, 8}, {2, 2})}, bf({1.5f, 6.0f})},
      {"reduce_max", "bfloat16", [](const std::vector<Tensor>& in) { return reduce_max(in[0]); }, {x},
       cast(constant(2.5f), bfloat16)},
      {"softmax", "bfloat16", [](const std::vector<Tensor>& in) { return softmax(in[0]); }, {x}, expect(sm, [](float v) { return v; }),
       1e-2},
      {"matmul", "bfloat16 sums of exact products", [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }, {bf(ma, {2, 3}), bf(mb, {3, 2})}, bf(mc, {2, 2})},
      {"matmul", "bfloat16 transposed operands",
       [](const std::vector<Tensor>& in) { return matmul(in[0], in[1], true, true); },
       {transpose(bf(ma, {2, 3})), transpose(bf(mb, {3, 2}))}, bf(mc, {2, 2})},
      {"matmul", "bfloat16 batch", [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }, {bf({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}), bf({1, 0, 0, 1}, {2, 2})},
       bf({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2})},
      {"conv2d", "bfloat16 1x1 filter",
       [](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], {1, 1}, Padding::Valid); },
       {bf({1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 2, 2}), bf({1, 0.5f, 0.00390625f, 0.25f}, {1, 1, 2, 2})},
       bf({1.0078125f, 1, 3.015625f, 2.5f, 5.03125f, 4, 7.03125f, 5.5f}, {1, 2, 2, 2})},
      {"sparse_softmax_cross_entropy", "bfloat16 logits give bfloat16 row losses",
       [](const std::vector<Tensor>& in) { return detail::sparse_softmax_cross_entropy_rows(in[0], in[1]); },
       {bf({0, 0, 0, 0}, {2, 2}), constant({0, 1})}, bf({std::log(2.0f), std::log(2.0f)}), 1e-2},
      // Casts into bfloat16 round to nearest, ties to even; out of it they are exact.
      {"cast", "float32 -> bfloat16 ties to even", cast_to(bfloat16),
       {constant({1.00390625f, 1.01171875f, float_of(0x3F808001u), -1.00390625f})},
       bf({1.0f, 1.015625f, 1.0078125f, -1.0f})},
      {"cast", "float32 -> bfloat16 NaN, infinities, overflow", cast_to(bfloat16),
       {constant({kNanF, kInfF, -kInfF, 3.4e38f})}, bf({kNanF, kInfF, -kInfF, kInfF})},
      {"cast", "float64 -> bfloat16 through float32", cast_to(bfloat16), {constant({0.1, -2.5, 1e300}, float64)},
       bf({0.1f, -2.5f, kInfF})},
      {"cast", "int32 -> bfloat16 rounds", cast_to(bfloat16), {constant({257, -3, 1000})}, bf({256.0f, -3.0f, 1000.0f})},
      {"cast", "int64 -> bfloat16", cast_to(bfloat16), {constant({int64_t{1} << 40, int64_t{-5}})},
       bf({1099511627776.0f, -5.0f})},
      {"cast", "uint8 -> bfloat16", cast_to(bfloat16), {constant({0, 255}, uint8)}, bf({0.0f, 255.0f})},
      {"cast", "bool -> bfloat16", cast_to(bfloat16), {constant({true, false})}, bf({1.0f, 0.0f})},
      {"cast", "bfloat16 -> float32 exact", cast_to(float32), {a}, constant(std::vector<float>{1.0f, 1.5f, -2.25f,
       round_bf16(3.0e5f), round_bf16(0.1f), 7.0f}, TensorShape{6})},
      {"cast", "bfloat16 -> float64", cast_to(float64), {bf({0.5f, -3.0f})}, constant({0.5, -3.0}, float64)},
      {"cast", "bfloat16 -> int32 truncates, NaN gives 0", cast_to(int32), {bf({2.75f, -2.75f, kNanF, kInfF})},
       constant({2, -2, 0, testing::values::kI32Max})},
      {"cast", "bfloat16 -> bool", cast_to(bool_), {bf({0.0f, -0.5f})}, constant({false, true})},
      {"cast", "bfloat16 -> bfloat16", cast_to(bfloat16), {a}, a},
      // Ops that move elements copy bfloat16 as it is.
      {"reshape", "bfloat16", [](const std::vector<Tensor>& in) { return reshape(in[0], {2, 3}); }, {a},
       bf(kA, {2, 3})},
      {"transpose", "bfloat16", [](const std::vector<Tensor>& in) { return transpose(in[0]); },
       {bf({1, 2, 3, 4}, {2, 2})}, bf({1, 3, 2, 4}, {2, 2})},
      {"concat", "bfloat16", [](const std::vector<Tensor>& in) { return concat({in[0], in[1]}, 0); },
       {bf({1}), bf({2, 3})}, bf({1, 2, 3})},
      {"gather", "bfloat16", [](const std::vector<Tensor>& in) { return gather(in[0], constant({2, 0})); },
       {bf({5, 6, 7})}, bf({7, 5})},
  };
}

TEST(BFloat16, RoundsToNearestTiesToEven) {
  // Exactly halfway: to the even neighbour, up or down.
  EXPECT_EQ(bfloat16_t(float_of(0x3F808000u)).bits, 0x3F80u);  // 1 + 2^-8 -> 1
  EXPECT_EQ(bfloat16_t(float_of(0x3F818000u)).bits, 0x3F82u);  // odd low bit rounds up
  // Just past and just short of halfway.
  EXPECT_EQ(bfloat16_t(float_of(0x3F808001u)).bits, 0x3F81u);
  EXPECT_EQ(bfloat16_t(float_of(0x3F807FFFu)).bits, 0x3F80u);
  // Negative values round on their magnitude.
  EXPECT_EQ(bfloat16_t(float_of(0xBF808000u)).bits, 0xBF80u);
  EXPECT_EQ(bfloat16_t(float_of(0xBF818000u)).bits, 0xBF82u);
  // Carry into the exponent, and past the largest finite value into infinity.
  EXPECT_EQ(bfloat16_t(float_of(0x3FFFC000u)).bits, 0x4000u);
  EXPECT_EQ(bfloat16_t(float_of(0x7F7FFFFFu)).bits, 0x7F80u);
  EXPECT_EQ(bfloat16_t(float_of(0x7F7F7FFFu)).bits, 0x7F7Fu);
}

TEST(BFloat16, KeepsNaNInfinitiesZerosAndSubnormals) {
  EXPECT_EQ(bfloat16_t(kInfF).bits, 0x7F80u);
  EXPECT_EQ(bfloat16_t(-kInfF).bits, 0xFF80u);
  EXPECT_EQ(bfloat16_t(0.0f).bits, 0x0000u);
  EXPECT_EQ(bfloat16_t(-0.0f).bits, 0x8000u);
  // A NaN whose payload sits only in the low bits would round to infinity: it stays a quiet NaN,
  // sign kept.
  for (uint32_t nan : {0x7F800001u, 0x7FC00000u, 0xFF800001u, 0x7FFFFFFFu}) {
    const bfloat16_t h(float_of(nan));
    EXPECT_TRUE(std::isnan(static_cast<float>(h))) << std::hex << nan;
    EXPECT_EQ(h.bits & 0x8000u, (nan >> 16) & 0x8000u);
    EXPECT_NE(h.bits & 0x0040u, 0u);
  }
  // Subnormals keep their (rounded) value; the smallest positive ties to even, down to zero.
  EXPECT_EQ(bfloat16_t(float_of(0x00010000u)).bits, 0x0001u);
  EXPECT_EQ(bfloat16_t(float_of(0x00018000u)).bits, 0x0002u);
  EXPECT_EQ(bfloat16_t(float_of(0x00008000u)).bits, 0x0000u);
  EXPECT_EQ(bfloat16_t(float_of(0x00008001u)).bits, 0x0001u);
  // The largest subnormal rounds up into the smallest normal.
  EXPECT_EQ(bfloat16_t(float_of(0x007FFFFFu)).bits, 0x0080u);
  // Widening is exact: the bits shift into the upper half.
  EXPECT_EQ(bits_of(static_cast<float>(bfloat16_t::from_bits(0x1234u))), 0x12340000u);
}

TEST(BFloat16, BulkConversionsRoundAsOneValueDoes) {
  std::vector<float> x;
  for (uint32_t u = 0x3F7F0000u; u < 0x3F820000u; u += 0x1111u) x.push_back(float_of(u));
  x.push_back(kNanF);
  x.push_back(float_of(0x00018000u));
  std::vector<bfloat16_t> y(x.size());
  detail::f32_to_bf16(x.data(), y.data(), static_cast<int64_t>(x.size()));
  std::vector<float> back(x.size());
  detail::bf16_to_f32(y.data(), back.data(), static_cast<int64_t>(y.size()));
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(y[i].bits, bfloat16_t(x[i]).bits) << i;
    EXPECT_EQ(bits_of(back[i]), static_cast<uint32_t>(y[i].bits) << 16) << i;
  }
}

// Conversions of 64K values and more split over the pool: every element as one value converts,
// on one thread and two, at sizes that end mid-chunk.
TEST(BFloat16, LargeBulkConversionsSplitOverThePoolWithTheSameBits) {
  const int threads_before = config::num_threads();
  for (const int threads : {1, 2})
    for (const int64_t n : {int64_t{1} << 16, (int64_t{1} << 18) + 13}) {
      config::set_num_threads(threads);
      SCOPED_TRACE(::testing::Message() << threads << " threads, " << n << " values");
      std::vector<float> x(static_cast<std::size_t>(n));
      for (int64_t i = 0; i < n; ++i) x[static_cast<std::size_t>(i)] = float_of(0x3F7F0000u + static_cast<uint32_t>(i) * 0x2F1u);
      std::vector<bfloat16_t> y(x.size());
      detail::f32_to_bf16(x.data(), y.data(), n);
      std::vector<float> back(x.size());
      detail::bf16_to_f32(y.data(), back.data(), n);
      int64_t wrong = 0;
      for (std::size_t i = 0; i < x.size(); ++i)
        wrong += y[i].bits != bfloat16_t(x[i]).bits || bits_of(back[i]) != static_cast<uint32_t>(y[i].bits) << 16;
      EXPECT_EQ(wrong, 0);
    }
  config::set_num_threads(threads_before);
}

// The bulk narrowing takes vcvtne2ps2bf16 on blocks of 32 values, which reads subnormals as
// zero: a subnormal in any lane of a block, and bit patterns from the whole float32 range, round
// as one bfloat16_t does.
TEST(BFloat16, BulkNarrowingKeepsSubnormalsInEveryLane) {
  for (const uint32_t sub : {0x00000001u, 0x80018000u, 0x007FFFFFu, 0x00008000u}) {
    for (int lane = 0; lane < 64; ++lane) {
      std::vector<float> x(70);
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = float_of(0x3F7F0000u + static_cast<uint32_t>(i) * 0x1111u);
      x[static_cast<std::size_t>(lane)] = float_of(sub);
      std::vector<bfloat16_t> y(x.size());
      detail::f32_to_bf16(x.data(), y.data(), static_cast<int64_t>(x.size()));
      for (std::size_t i = 0; i < x.size(); ++i)
        ASSERT_EQ(y[i].bits, bfloat16_t(x[i]).bits) << std::hex << bits_of(x[i]) << " at " << std::dec << i;
    }
  }
  std::vector<float> x(int64_t{1} << 18);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float_of(static_cast<uint32_t>(i * 0x9E3779B1u));
  std::vector<bfloat16_t> y(x.size());
  detail::f32_to_bf16(x.data(), y.data(), static_cast<int64_t>(x.size()));
  int64_t wrong = 0, subnormals = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    wrong += y[i].bits != bfloat16_t(x[i]).bits;
    subnormals += std::fpclassify(x[i]) == FP_SUBNORMAL;
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_GT(subnormals, 0);
}

// One transpose combination of a bfloat16 product: eager, and traced once (None dims) each way.
template <bool kTa, bool kTb>
struct ProductModes {
  struct Product {
    Tensor operator()(const Tensor& a, const Tensor& b) const { return matmul(a, b, kTa, kTb); }
  };
  static FunctionOptions options(bool optimize) {
    const TensorSpec any({None, None}, bfloat16);
    return {.name = "bf16_product", .input_signature = std::vector<TensorSpec>{any, any}, .optimize = optimize};
  }
  PolymorphicFunction<Product> traced = function(Product{}, options(false));
  PolymorphicFunction<Product> optimised = function(Product{}, options(true));
  std::vector<Tensor> run(const std::vector<Tensor>& in) {
    return {Product{}(in[0], in[1]), traced(in[0], in[1]), optimised(in[0], in[1])};
  }
};

// Small integers, so that every sum is exact in float32 and the bfloat16 result is the rounded
// exact sum: each value in its place, over m, n and k that leave every remainder of the 12-row
// blocks, the 16- and 32-column panels, the pairs of k and the 16 pairs the packing transposes
// at a time, one row and one column, every transpose, eager, traced and traced+optimised; the
// last two shapes split over two threads (by row blocks, then by panels).
TEST(BFloat16, MatmulInstructionsExactOnEveryBlockRemainder) {
  ProductModes<false, false> nn;
  ProductModes<true, false> tn;
  ProductModes<false, true> nt;
  ProductModes<true, true> tt;
  auto value = [](int64_t i, int64_t j, int64_t salt) { return static_cast<float>((i * 7 + j * 3 + salt) % 9 - 4); };
  auto operand = [&](int64_t rows, int64_t cols, bool transposed, int64_t salt) {
    std::vector<float> v;
    for (int64_t i = 0; i < (transposed ? cols : rows); ++i)
      for (int64_t j = 0; j < (transposed ? rows : cols); ++j)
        v.push_back(transposed ? value(j, i, salt) : value(i, j, salt));
    return cast(constant(v, TensorShape({transposed ? cols : rows, transposed ? rows : cols})), bfloat16);
  };
  auto check = [&](int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
    std::vector<float> want;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) sum += double{value(i, p, 1)} * double{value(p, j, 2)};
        want.push_back(round_bf16(static_cast<float>(sum)));
      }
    const Tensor expected = cast(constant(want, TensorShape({m, n})), bfloat16);
    const std::vector<Tensor> in{operand(m, k, ta, 1), operand(k, n, tb, 2)};
    const std::vector<Tensor> got = ta ? (tb ? tt.run(in) : tn.run(in)) : (tb ? nt.run(in) : nn.run(in));
    const char* modes[] = {"eager", "traced", "traced+optimised"};
    for (std::size_t i = 0; i < got.size(); ++i)
      EXPECT_TENSOR_EQ(got[i], expected) << m << "x" << n << "x" << k << " ta=" << ta << " tb=" << tb << ", "
                                         << modes[i];
  };
  for (const int64_t m : {1, 11, 12, 13, 25})
    for (const int64_t n : {1, 15, 16, 17, 31, 32, 33, 48})
      for (const int64_t k : {1, 2, 3, 17, 35, 64})
        for (int t = 0; t < 4; ++t) check(m, n, k, t & 1, t & 2);
  const int threads_before = config::num_threads();
  config::set_num_threads(2);
  for (int t = 0; t < 4; ++t) {
    check(130, 70, 259, t & 1, t & 2);
    check(12, 100, 2001, t & 1, t & 2);
  }
  config::set_num_threads(threads_before);
}

// A dense layer and its gradients with products large enough to split over two threads, by
// column panels (fewer rows than columns: x w, dh = dy w2^T, x^T dh) and by row blocks (h^T dy),
// with and without an epilogue (bias, relu and its mask, relu's gradient): the bits of the ops
// apart, on one thread and two.
TEST(BFloat16, SplitProductsKeepTheBitsOfTheOpsApart) {
  auto step = [](const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& w2) {
    GradientTape tape;
    for (const Tensor& v : {w, b, w2}) tape.watch(v);
    const Tensor h = relu(matmul(x, w) + b);
    const Tensor loss = reduce_sum(matmul(h, w2));
    std::vector<Tensor> out = tape.gradient(loss, std::vector<Tensor>{w, b, w2});
    out.push_back(h);
    return out;
  };
  const Tensor x = cast(random_uniform({16, 200}, -1, 1, 1), bfloat16);
  const Tensor w = cast(random_uniform({200, 700}, -0.2, 0.2, 2), bfloat16);
  const Tensor b = cast(random_uniform({700}, -0.2, 0.2, 3), bfloat16);
  const Tensor w2 = cast(random_uniform({700, 200}, -0.2, 0.2, 4), bfloat16);
  const int threads_before = config::num_threads();
  for (const int threads : {1, 2}) {
    config::set_num_threads(threads);
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    auto optimised = function(step, {.name = "bf16_dense_step"});
    auto plain = function(step, {.name = "bf16_dense_step", .optimize = false});
    const std::vector<Tensor> got = optimised(x, w, b, w2), want = plain(x, w, b, w2), eager = step(x, w, b, w2);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t k = 0; k < got.size(); ++k) {
      EXPECT_TRUE(testing::same_bits(got[k], want[k])) << "output " << k;
      EXPECT_TRUE(testing::same_bits(got[k], eager[k])) << "output " << k;
    }
    const std::string graph = optimised.get_concrete_function(x, w, b, w2).optimized_graph().to_string();
    EXPECT_NE(graph.find("matmul_epilogue"), std::string::npos) << graph;
  }
  config::set_num_threads(threads_before);
}

TEST(BFloat16, NamesElementsAndPrinting) {
  EXPECT_EQ(to_string(bfloat16), "bfloat16");
  EXPECT_EQ(dtype_size(bfloat16), 2u);
  EXPECT_TRUE(is_floating(bfloat16));
  EXPECT_FALSE(is_integer(bfloat16));
  const Tensor t = constant({0.5f, 0.1f, -3.0f}, bfloat16);
  EXPECT_EQ(t.dtype(), bfloat16);
  const std::vector<bfloat16_t> v = t.to_vector<bfloat16_t>();
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].bits, 0x3F00u);
  EXPECT_EQ(v[1].bits, 0x3DCDu);  // 0.1 rounds up to 0.10009765625
  EXPECT_EQ(static_cast<float>(t.data<bfloat16_t>()[2]), -3.0f);
  EXPECT_EQ(t.to_string(), "tg.Tensor([ 0.5         0.10009766 -3.        ], shape=(3,), dtype=bfloat16)");
  EXPECT_EQ(zeros({2}, bfloat16).dtype(), bfloat16);
  EXPECT_TENSOR_EQ(cast(ones({2}, bfloat16), float32), constant({1.0f, 1.0f}));
  EXPECT_TENSOR_EQ(cast(fill({2}, 1.00390625, bfloat16), float32), constant({1.0f, 1.0f}));
  EXPECT_TRUE(static_cast<bool>(constant(0.25f, bfloat16)));
  EXPECT_EQ(TensorSpec({None, 4}, bfloat16).to_string(), "TensorSpec(shape=(None, 4), dtype=tg.bfloat16, name=None)");
  EXPECT_THROW(t.to_vector<float>(), TypeError);
}

TEST(BFloat16, SavedFunctionsKeepBFloat16) {
  auto f = function([](const Tensor& v) { return relu(v) * constant(0.5f, bfloat16); });
  const std::string path = ::testing::TempDir() + "/bf16_fn.tgx";
  f.get_concrete_function(TensorSpec({None}, bfloat16));
  save(path, f);
  auto loaded = load(path);
  const Tensor in = bf({-1.0f, 3.0f, 1.00390625f});
  EXPECT_TENSOR_EQ(loaded(in), bf({0.0f, 1.5f, 0.5f}));
}

TEST(BFloat16, NpyRefusesBFloat16) {
  EXPECT_THROW_MSG(save_npy(::testing::TempDir() + "/bf16.npy", bf({1.0f})), TypeError, "cast it to float32");
}

// The AVX512_BF16 kernel against float32 sums of the same exact products, over sizes that leave
// partial row blocks, partial panels and an odd k, in every transpose; the last two are large
// enough to split over the pool's threads (by panels: fewer rows than columns).
TEST(BFloat16, MatmulInstructionsAgreeWithFloat32Sums) {
  for (auto [m, n, k] : {std::array<int, 3>{1, 1, 1}, {13, 33, 7}, {25, 70, 64}, {128, 10, 257}, {40, 64, 2},
                         {96, 160, 160}, {12, 512, 401}}) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      const Tensor a = testing::seeded_values(ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}, bfloat16, 1);
      const Tensor b = testing::seeded_values(tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, bfloat16, 2);
      const Tensor want = cast(matmul(cast(a, float32), cast(b, float32), ta, tb), bfloat16);
      const Tensor got = matmul(a, b, ta, tb);
      EXPECT_TENSOR_NEAR(got, want, 1e-2) << m << "x" << n << "x" << k << " ta=" << ta << " tb=" << tb;
      const bool was = detail::set_bf16_gemm_instructions(false);
      const Tensor fallback = matmul(a, b, ta, tb);
      detail::set_bf16_gemm_instructions(was);
      EXPECT_TENSOR_NEAR(fallback, want, 1e-2);
    }
  }
}

// Gradients through the ops a model uses, against the float32 gradients of the same values.
TEST(BFloat16, GradientsMatchFloat32) {
  const Tensor x32 = testing::seeded_values({4, 6}, float32, 3, {0.125, 1.0});
  const Tensor w32 = testing::seeded_values({6, 3}, float32, 4, {0.125, 1.0});
  const Tensor b32 = testing::seeded_values({3}, float32, 5, {0.125, 1.0});
  const Tensor labels = constant({0, 2, 1, 2});
  auto loss_of = [&](const Tensor& w, const Tensor& b, DType d) {
    const Tensor h = tanh(relu(matmul(cast(x32, d), cast(w, d)) + cast(b, d)));
    return nn::sparse_softmax_cross_entropy(sigmoid(h) * h, labels);  // float32 loss either way
  };
  const Variable w(w32), bias(b32);
  auto grads = [&](DType d) {
    GradientTape tape;
    const Tensor loss = loss_of(w.read_value(), bias.read_value(), d);
    return tape.gradient(loss, {w, bias});
  };
  const std::vector<Tensor> g16 = grads(bfloat16), g32 = grads(float32);
  ASSERT_EQ(g16.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(g16[i].dtype(), float32);  // a cast Variable's gradient comes back in its dtype
    EXPECT_TENSOR_NEAR(g16[i], g32[i], 3e-2);
  }
}

}  // namespace
}  // namespace tg
