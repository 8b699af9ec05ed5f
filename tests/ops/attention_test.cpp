// The fused scaled_dot_product_attention (src/ops/attention.cpp, src/kernels/attention.cpp):
// op cases against a reference written with matmul and softmax (run eagerly, traced, traced and
// optimised, with None dims and unknown rank by the op-case harness), rows that see no key, the
// dropout's seed rules, and a long sequence whose T x T weights would not fit the bound on memory.
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "core/buffer.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/simd_math.h"
#include "ops/op.h"
#include "support/allocation_counter.h"
#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// softmax(q k^T * scale + mask) v with the weights of a row that sees no key set to 0 (the op's
// rule; plain softmax would give NaN there), and each row's log-sum-exp of its scores. `mask` is
// empty, bool (true: attend) or additive; causal hides keys j > i.
struct Reference {
  Tensor out, lse;
};
Reference reference_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool causal,
                              double scale) {
  Tensor s = matmul(q, k, false, true) * scale;
  const int64_t tq = q.shape().dims()[2], tk = k.shape().dims()[2];
  const Tensor neg_inf = zeros_like(s) - kInf;
  if (causal) {
    std::vector<bool> allowed;
    for (int64_t i = 0; i < tq; ++i)
      for (int64_t j = 0; j < tk; ++j) allowed.push_back(j <= i);
    s = where(constant(allowed, {tq, tk}, bool_), s, neg_inf);
  }
  if (mask.defined()) s = mask.dtype() == bool_ ? where(mask, s, neg_inf) : s + mask;
  const Tensor seen = reduce_any(s > -kInf, {-1}, true);
  const Tensor safe = where(seen, s, zeros_like(s));
  const Tensor p = where(seen, softmax(safe, -1), zeros_like(s));
  return {matmul(p, v), reduce_logsumexp(s, {-1})};
}

Tensor values(const std::vector<int64_t>& dims, uint64_t seed, DType dtype = float32) {
  return testing::seeded_values(dims, dtype, seed);
}

// A bool (2, 1, 1, 5) padding mask: batch 0 sees keys 0..3, batch 1 keys 0..1.
Tensor padding_mask() {
  return constant(std::vector<bool>{true, true, true, true, false, true, true, false, false, false}, {2, 1, 1, 5},
                  bool_);
}

Tensor attend(const std::vector<Tensor>& in) { return scaled_dot_product_attention(in[0], in[1], in[2]); }
Tensor attend_masked(const std::vector<Tensor>& in) {
  return scaled_dot_product_attention(in[0], in[1], in[2], {.mask = in[3]});
}
Tensor attend_causal(const std::vector<Tensor>& in) {
  return scaled_dot_product_attention(in[0], in[1], in[2], {.causal = true});
}

Tensor flat(const Tensor& t) { return reshape(t, {-1}); }

TG_OP_CASES(attention) {
  const Tensor q = values({2, 3, 4, 8}, 1), k = values({2, 3, 5, 8}, 2), v = values({2, 3, 5, 6}, 3);
  const Tensor q64 = values({2, 3, 4, 8}, 1, float64), k64 = values({2, 3, 5, 8}, 2, float64),
               v64 = values({2, 3, 5, 6}, 3, float64);
  const double scale = 1.0 / std::sqrt(8.0);
  const Tensor none;
  const Tensor mask = padding_mask();
  // Row 1 of every head sees no key (a mask of (4, 5) broadcast over batch and heads).
  std::vector<bool> rows_hidden(20, true);
  for (int j = 0; j < 5; ++j) rows_hidden[static_cast<std::size_t>(5 + j)] = false;
  const Tensor hidden = constant(rows_hidden, {4, 5}, bool_);
  // An additive float mask over (heads, Tq, Tk), -inf hiding a key, finite values shifting scores.
  std::vector<float> additive;
  for (int i = 0; i < 3 * 4 * 5; ++i) additive.push_back(i % 7 == 3 ? -std::numeric_limits<float>::infinity()
                                                                    : static_cast<float>((i % 5) - 2) * 0.5f);
  const Tensor add_mask = constant(additive, {3, 4, 5});
  // Long enough for several key tiles and row tiles (128 keys and 64 rows per tile).
  const Tensor ql = values({1, 2, 150, 16}, 4), kl = values({1, 2, 300, 16}, 5), vl = values({1, 2, 300, 8}, 6);
  auto f32 = [](const Tensor& t) { return cast(t, float32); };
  auto ref = [&](const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& m, bool causal, double sc) {
    return reference_attention(cast(a, float64), cast(b, float64), cast(c, float64), m.defined() && m.dtype() != bool_ ? cast(m, float64) : m, causal, sc).out;
  };
  // The gradient op's cases: its outputs against a tape over the reference, for incoming
  // gradients of both outputs.
  auto reference_grads = [](const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& m, bool causal,
                            double sc, const Tensor& d_out, const Tensor& d_lse) {
    GradientTape tape;
    tape.watch(a);
    tape.watch(b);
    tape.watch(c);
    const Reference r = reference_attention(a, b, c, m, causal, sc);
    const std::vector<Tensor> g = tape.gradient(reduce_sum(r.out * d_out) + reduce_sum(r.lse * d_lse), {a, b, c});
    return concat({flat(g[0]), flat(g[1]), flat(g[2])}, 0);
  };
  const Tensor dout = values({2, 3, 4, 6}, 7, float64), dlse = values({2, 3, 4}, 8, float64);
  const Tensor expected_grads = reference_grads(q64, k64, v64, mask, false, scale, dout, dlse);
  const std::vector<Tensor> fwd = detail::apply_op(detail::OpId::ScaledDotProductAttention, {q64, k64, v64, mask},
                                                   detail::AttentionAttrs{.has_mask = true});
  auto grad_op = [](const std::vector<Tensor>& in) {
    const std::vector<Tensor> d =
        detail::apply_op(detail::OpId::ScaledDotProductAttentionGrad, in, detail::AttentionAttrs{.has_mask = true});
    return concat({flat(d[0]), flat(d[1]), flat(d[2])}, 0);
  };
  // Causal, two row tiles over one key tile (the kernel's path that computes dq beside dk and dv).
  const Tensor qc = values({1, 2, 70, 12}, 9, float64), kc = values({1, 2, 100, 12}, 10, float64),
               vc = values({1, 2, 100, 5}, 11, float64);
  const Tensor doutc = values({1, 2, 70, 5}, 12, float64), dlsec = values({1, 2, 70}, 13, float64);
  const double scale_c = 1.0 / std::sqrt(12.0);
  const Tensor expected_causal = reference_grads(qc, kc, vc, none, true, scale_c, doutc, dlsec);
  const detail::AttentionAttrs causal_attrs{.scale_given = true, .scale = scale_c, .causal = true};
  const std::vector<Tensor> fwdc = detail::apply_op(detail::OpId::ScaledDotProductAttention, {qc, kc, vc}, causal_attrs);
  auto grad_op_causal = [causal_attrs](const std::vector<Tensor>& in) {
    const std::vector<Tensor> d = detail::apply_op(detail::OpId::ScaledDotProductAttentionGrad, in, causal_attrs);
    return concat({flat(d[0]), flat(d[1]), flat(d[2])}, 0);
  };
  // Causal over two key tiles: the second (keys 128..199) is seen by none of the 70 rows, so its
  // dk and dv rows are zeros no product writes; the first gets two row tiles' sums.
  const Tensor qn = values({1, 2, 70, 12}, 14, float64), kn = values({1, 2, 200, 12}, 15, float64),
               vn = values({1, 2, 200, 5}, 16, float64);
  const Tensor doutn = values({1, 2, 70, 5}, 17, float64), dlsen = values({1, 2, 70}, 18, float64);
  const Tensor expected_unseen = reference_grads(qn, kn, vn, none, true, scale_c, doutn, dlsen);
  const std::vector<Tensor> fwdn = detail::apply_op(detail::OpId::ScaledDotProductAttention, {qn, kn, vn}, causal_attrs);
  return {
      {"scaled_dot_product_attention", "f32 (2,3,4,8) x (2,3,5,8) x (2,3,5,6)", attend, {q, k, v},
       f32(ref(q, k, v, none, false, scale)), 1e-5},
      {"scaled_dot_product_attention", "f64", attend, {q64, k64, v64}, ref(q64, k64, v64, none, false, scale), 1e-12},
      {"scaled_dot_product_attention", "bool padding mask (2,1,1,5)", attend_masked, {q, k, v, mask},
       f32(ref(q, k, v, mask, false, scale)), 1e-5},
      {"scaled_dot_product_attention", "additive float mask (3,4,5) with -inf", attend_masked, {q, k, v, add_mask},
       f32(ref(q, k, v, add_mask, false, scale)), 1e-5},
      {"scaled_dot_product_attention", "causal, Tq 4 < Tk 5", attend_causal, {q, k, v},
       f32(ref(q, k, v, none, true, scale)), 1e-5},
      {"scaled_dot_product_attention", "a row that sees no key gives zeros", attend_masked, {q, k, v, hidden},
       f32(ref(q, k, v, hidden, false, scale)), 1e-5},
      {"scaled_dot_product_attention", "scale 0.5",
       [](const std::vector<Tensor>& in) { return scaled_dot_product_attention(in[0], in[1], in[2], {.scale = 0.5}); },
       {q, k, v}, f32(ref(q, k, v, none, false, 0.5)), 1e-5},
      {"scaled_dot_product_attention", "several tiles, causal, Tq 150 Tk 300", attend_causal, {ql, kl, vl},
       f32(ref(ql, kl, vl, none, true, 0.25)), 1e-5},
      {"scaled_dot_product_attention", "no keys (Tk 0): zeros", attend,
       {q, testing::empty<float>({2, 3, 0, 8}, float32), testing::empty<float>({2, 3, 0, 6}, float32)},
       zeros({2, 3, 4, 6})},
      {"scaled_dot_product_attention_grad", "dq, dk, dv with a padding mask, f64", grad_op,
       {q64, k64, v64, mask, fwd[0], fwd[1], dout, dlse}, expected_grads, 1e-10},
      {"scaled_dot_product_attention_grad", "dq, dk, dv causal, Tq 70 over one key tile of Tk 100, f64",
       grad_op_causal, {qc, kc, vc, fwdc[0], fwdc[1], doutc, dlsec}, expected_causal, 1e-10},
      {"scaled_dot_product_attention_grad", "dq, dk, dv causal, Tq 70 Tk 200: a key tile no row sees, f64",
       grad_op_causal, {qn, kn, vn, fwdn[0], fwdn[1], doutn, dlsen}, expected_unseen, 1e-10},
  };
}

TEST(Attention, LogSumExpOutputIsEachRowsOverItsScores) {
  const Tensor q = values({2, 3, 4, 8}, 1, float64), k = values({2, 3, 5, 8}, 2, float64),
               v = values({2, 3, 5, 6}, 3, float64);
  const Tensor mask = padding_mask();
  const std::vector<Tensor> out = detail::apply_op(detail::OpId::ScaledDotProductAttention, {q, k, v, mask},
                                                   detail::AttentionAttrs{.has_mask = true});
  const Reference r = reference_attention(q, k, v, mask, false, 1.0 / std::sqrt(8.0));
  EXPECT_TENSOR_NEAR(out[0], r.out, 1e-12);
  EXPECT_TENSOR_NEAR(out[1], r.lse, 1e-12);
}

TEST(Attention, RowsThatSeeNoKeyGiveZerosAndZeroGradientsNotNaN) {
  const Tensor q = values({1, 2, 3, 4}, 1), k = values({1, 2, 3, 4}, 2), v = values({1, 2, 3, 4}, 3);
  // Query row 2 of batch 0 may attend to nothing.
  const Tensor mask = constant(std::vector<bool>{true, false, true, true, true, false, false, false, false}, {3, 3},
                               bool_);
  GradientTape tape;
  tape.watch(q);
  tape.watch(k);
  tape.watch(v);
  const Tensor y = scaled_dot_product_attention(q, k, v, {.mask = mask});
  const std::vector<Tensor> g = tape.gradient(reduce_sum(y * y), {q, k, v});
  const std::vector<float> out = y.to_vector<float>();
  for (int h = 0; h < 2; ++h)
    for (int e = 0; e < 4; ++e) EXPECT_EQ(out[static_cast<std::size_t>(h * 12 + 8 + e)], 0.0f);
  for (const Tensor& t : g)
    for (float x : t.to_vector<float>()) EXPECT_TRUE(std::isfinite(x));
  const std::vector<float> dq = g[0].to_vector<float>();
  for (int h = 0; h < 2; ++h)
    for (int e = 0; e < 4; ++e) EXPECT_EQ(dq[static_cast<std::size_t>(h * 12 + 8 + e)], 0.0f);
  // A NaN in an unmasked key still shows: the op hides what the mask hides, nothing else.
  std::vector<float> kv = k.to_vector<float>();
  kv[0] = std::numeric_limits<float>::quiet_NaN();
  const Tensor y_nan = scaled_dot_product_attention(q, constant(kv, {1, 2, 3, 4}), v, {.mask = mask});
  EXPECT_TRUE(std::isnan(y_nan.to_vector<float>()[0]));
}

TEST(Attention, DropoutFollowsTheSeedRulesAndTheGradientSeesTheForwardMask) {
  const Tensor q = values({1, 2, 16, 8}, 1, float64), k = values({1, 2, 16, 8}, 2, float64),
               v = values({1, 2, 16, 8}, 3, float64);
  const AttentionOptions opts{.dropout = 0.5, .seed = 7};
  set_random_seed(11);
  const Tensor a1 = scaled_dot_product_attention(q, k, v, opts);
  const Tensor a2 = scaled_dot_product_attention(q, k, v, opts);
  EXPECT_FALSE(testing::tensors_near(a1, a2));  // a new mask per call
  EXPECT_FALSE(testing::tensors_near(a1, scaled_dot_product_attention(q, k, v)));
  // Not training, or rate 0: no dropout.
  EXPECT_TENSOR_EQ(scaled_dot_product_attention(q, k, v, {.dropout = 0.5, .training = false}),
                   scaled_dot_product_attention(q, k, v));
  // Eager and traced runs agree under the same seeds (the first draw of a traced op is the eager
  // op's first draw).
  auto traced = function([&](const Tensor& x) { return scaled_dot_product_attention(x, k, v, opts); });
  set_random_seed(11);
  EXPECT_TENSOR_EQ(traced(q), a1);
  EXPECT_TENSOR_EQ(traced(q), a2);
  // About half the weights are dropped: with v = ones each output element is the row's kept
  // weights' sum times 2, which averages 1.
  set_random_seed(3);
  const Tensor ones_v = ones({1, 2, 16, 8}, float64);
  const double mean = reduce_mean(scaled_dot_product_attention(q, k, ones_v, opts)).item<double>();
  EXPECT_NEAR(mean, 1.0, 0.15);
  // The gradient of a dropped-out call: finite differences through the same mask, which the op
  // recomputes from the same seed pair input.
  const Tensor seed_pair = constant({int64_t{123}, int64_t{456}});
  const detail::AttentionAttrs attrs{.dropout = 0.3};
  auto fixed = [&](const Tensor& x) {
    return detail::apply_op(detail::OpId::ScaledDotProductAttention, {x, k, v, seed_pair}, attrs)[0];
  };
  GradientTape tape;
  tape.watch(q);
  const Tensor w = values({1, 2, 16, 8}, 9, float64);
  const Tensor g = tape.gradient(reduce_sum(fixed(q) * w), {q})[0];
  std::vector<double> qv = q.to_vector<double>();
  for (std::size_t i : {0u, 37u, 200u}) {
    const double eps = 1e-6, x0 = qv[i];
    qv[i] = x0 + eps;
    const double up = reduce_sum(fixed(constant(qv, q.shape(), float64)) * w).item<double>();
    qv[i] = x0 - eps;
    const double down = reduce_sum(fixed(constant(qv, q.shape(), float64)) * w).item<double>();
    qv[i] = x0;
    EXPECT_NEAR(g.to_vector<double>()[i], (up - down) / (2 * eps), 1e-6);
  }
}

// Several key tiles per head; and 32 heads of 64 rows, whose gradient's row terms split too.
TEST(Attention, BitsDoNotDependOnTheThreadCount) {
  for (const auto& [batch, tq, tk] : {std::tuple<int64_t, int64_t, int64_t>{2, 200, 260}, {8, 64, 64}}) {
    SCOPED_TRACE(::testing::Message() << batch << " x 2 heads, " << tq << " x " << tk);
    const Tensor q = values({batch, 2, tq, 32}, 1), k = values({batch, 2, tk, 32}, 2), v = values({batch, 2, tk, 16}, 3);
    const int threads = detail::num_threads();
    auto run = [&] {
      GradientTape tape;
      tape.watch(q);
      tape.watch(k);
      tape.watch(v);
      const Tensor y = scaled_dot_product_attention(q, k, v, {.causal = true});
      return std::make_pair(y, tape.gradient(reduce_sum(y * y), {q, k, v}));
    };
    detail::set_num_threads(1);
    const auto one = run();
    detail::set_num_threads(2);
    const auto two = run();
    detail::set_num_threads(threads);
    EXPECT_TRUE(testing::same_bits(one.first, two.first));
    for (std::size_t i = 0; i < 3; ++i) EXPECT_TRUE(testing::same_bits(one.second[i], two.second[i])) << i;
  }
}

// heads_interleaved (nn::MultiHeadAttention's layout): q, k, v, the output and dq, dk, dv are
// (batch, T, heads, D). The op on the transposed tensors gives the plain op's bits, forward and
// gradient, with per-head masks, causal, dropout (the same weights dropped), several row and key
// tiles, float32 and float64, and D != Dv.
TEST(Attention, InterleavedHeadsGiveThePlainLayoutsBits) {
  const auto il = [](const Tensor& x) { return transpose(x, {0, 2, 1, 3}); };
  struct Case {
    int64_t tq, tk;
    DType dtype;
  };
  for (const Case& c : {Case{7, 5, float64}, Case{7, 5, float32}, Case{150, 260, float32}, Case{70, 40, float32}}) {
    const int64_t b = 2, h = 3, d = 8, dv = 4;
    const Tensor q = values({b, h, c.tq, d}, 1, c.dtype), k = values({b, h, c.tk, d}, 2, c.dtype);
    const Tensor v = values({b, h, c.tk, dv}, 3, c.dtype);
    const Tensor dout = values({b, h, c.tq, dv}, 4, c.dtype), dlse = values({b, h, c.tq}, 5, c.dtype);
    const Tensor bool_mask = values({b, 1, c.tq, c.tk}, 6) > 0.3;
    const Tensor add_mask = values({b, h, c.tq, c.tk}, 7, c.dtype);  // differs per head
    const Tensor seed_pair = constant({int64_t{11}, int64_t{12}});
    struct Variant {
      detail::AttentionAttrs attrs;
      std::vector<Tensor> extra;
      const char* name;
    };
    const std::vector<Variant> variants = {
        {{}, {}, "plain"},
        {{.causal = true}, {}, "causal"},
        {{.scale_given = true, .scale = 0.3, .has_mask = true}, {bool_mask}, "bool mask"},
        {{.causal = true, .has_mask = true}, {add_mask}, "causal, additive per-head mask"},
        {{.causal = true, .has_mask = true, .dropout = 0.25}, {bool_mask, seed_pair}, "dropout"}};
    for (const Variant& var : variants) {
      detail::AttentionAttrs ia = var.attrs;
      ia.heads_interleaved = true;
      std::vector<Tensor> plain_in{q, k, v}, il_in{il(q), il(k), il(v)};
      for (const Tensor& x : var.extra) {
        plain_in.push_back(x);
        il_in.push_back(x);
      }
      const std::vector<Tensor> fp = detail::apply_op(detail::OpId::ScaledDotProductAttention, plain_in, var.attrs);
      const std::vector<Tensor> fi = detail::apply_op(detail::OpId::ScaledDotProductAttention, il_in, ia);
      SCOPED_TRACE(::testing::Message() << var.name << " tq=" << c.tq << " tk=" << c.tk << " " << to_string(c.dtype));
      ASSERT_EQ(fi[0].shape(), TensorShape({b, c.tq, h, dv}));
      EXPECT_TRUE(testing::same_bits(il(fi[0]), fp[0]));
      EXPECT_TRUE(testing::same_bits(fi[1], fp[1]));  // the log-sum-exp stays (batch, heads, Tq)
      std::vector<Tensor> gp = plain_in, gi = il_in;
      gp.insert(gp.end(), {fp[0], fp[1], dout, dlse});
      gi.insert(gi.end(), {fi[0], fi[1], il(dout), dlse});
      const std::vector<Tensor> dp = detail::apply_op(detail::OpId::ScaledDotProductAttentionGrad, gp, var.attrs);
      const std::vector<Tensor> di = detail::apply_op(detail::OpId::ScaledDotProductAttentionGrad, gi, ia);
      ASSERT_EQ(di.size(), 3u);
      EXPECT_EQ(di[1].shape(), TensorShape({b, c.tk, h, d}));
      EXPECT_EQ(di[2].shape(), TensorShape({b, c.tk, h, dv}));
      for (std::size_t i = 0; i < 3; ++i) EXPECT_TRUE(testing::same_bits(il(di[i]), dp[i])) << "gradient " << i;
    }
  }
  // The checks name the interleaved layout; a (batch, heads, T, D) q with mismatched axes is refused.
  const detail::AttentionAttrs ia{.heads_interleaved = true};
  EXPECT_THROW_MSG(detail::apply_op(detail::OpId::ScaledDotProductAttention,
                                    {values({2, 5, 3, 4}, 1), values({2, 6, 2, 4}, 2), values({2, 6, 3, 4}, 3)}, ia),
                   InvalidArgumentError, "the head counts differ", "(batch, Tq, heads, D)");
  EXPECT_THROW_MSG(detail::apply_op(detail::OpId::ScaledDotProductAttention,
                                    {values({2, 5, 3, 4}, 1), values({2, 6, 3, 4}, 2), values({2, 7, 3, 4}, 3)}, ia),
                   InvalidArgumentError, "the key counts (axis 1 of k and v)");
  // The mask still lines up with (batch, heads, Tq, Tk).
  EXPECT_THROW_MSG(detail::apply_op(detail::OpId::ScaledDotProductAttention,
                                    {values({2, 5, 3, 4}, 1), values({2, 6, 3, 4}, 2), values({2, 6, 3, 4}, 3),
                                     ones({2, 5, 5, 6}, bool_)},
                                    detail::AttentionAttrs{.has_mask = true, .heads_interleaved = true}),
                   InvalidArgumentError, "(batch, heads, Tq, Tk) = (2, 3, 5, 6)");
}

// float32 on an AVX-512 CPU runs the score rows' passes on AVX-512 registers; the portable loops
// must give the same bits, forward (output and log-sum-exp) and gradient (dq, dk, dv), for rows
// of scores whose length is and is not a multiple of 16, one and several key tiles (the two
// backward paths), causal, bool and additive masks with rows that see no key, dropout, a NaN
// query, the interleaved layout and the transformer's shape (T 64, D 32).
TEST(Attention, Avx512RowPassesGiveThePortableLoopsBits) {
  if (!detail::simd::cpu_has(detail::simd::Isa::kAvx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  struct Case {
    int64_t batch, heads, tq, tk, d, dv;
    bool causal, interleaved;
    int mask;  // 0: none, 1: bool (some rows see no key), 2: additive with -inf
    double dropout;
    bool nan;
    const char* name;
  };
  const Case cases[] = {
      {2, 4, 64, 64, 32, 32, false, false, 0, 0.0, false, "transformer shape"},
      {2, 4, 64, 64, 32, 32, true, true, 0, 0.0, false, "transformer shape, causal, interleaved"},
      {1, 2, 70, 100, 12, 5, true, false, 0, 0.0, false, "causal, rows of 100 keys"},
      {1, 2, 150, 300, 16, 8, false, false, 1, 0.0, false, "several key tiles, bool mask"},
      {2, 3, 37, 45, 9, 7, false, true, 2, 0.0, false, "additive mask, interleaved"},
      {2, 3, 70, 131, 8, 4, true, false, 1, 0.2, false, "dropout, bool mask"},
      {1, 2, 20, 23, 8, 17, false, false, 0, 0.0, true, "a NaN query"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::mt19937 gen(7);
    std::normal_distribution<float> normal(0.0f, 1.5f);
    auto fill = [&gen, &normal](int64_t n) {
      std::vector<float> x(static_cast<std::size_t>(n));
      for (float& e : x) e = normal(gen);
      return x;
    };
    const int64_t bh = c.batch * c.heads;
    std::vector<float> q = fill(bh * c.tq * c.d), k = fill(bh * c.tk * c.d), v = fill(bh * c.tk * c.dv);
    const std::vector<float> dout = fill(bh * c.tq * c.dv), dlse = fill(bh * c.tq);
    if (c.nan) q[static_cast<std::size_t>(3 * c.d + 1)] = std::numeric_limits<float>::quiet_NaN();
    // The mask is (batch, 1, tq, tk), broadcast over the heads; row 2 of each batch sees no key.
    std::unique_ptr<bool[]> bools(new bool[static_cast<std::size_t>(c.batch * c.tq * c.tk)]);
    std::vector<float> adds = fill(c.batch * c.tq * c.tk);
    for (int64_t i = 0; i < c.batch * c.tq * c.tk; ++i) {
      const bool hidden_row = (i / c.tk) % c.tq == 2;
      bools[static_cast<std::size_t>(i)] = !hidden_row && i % 5 != 1;
      if (i % 7 == 3 || hidden_row) adds[static_cast<std::size_t>(i)] = -std::numeric_limits<float>::infinity();
    }
    detail::AttentionSizes sz{c.batch, c.heads, c.tq, c.tk, c.d, c.dv, c.interleaved};
    detail::AttentionParams params;
    params.scale = 1.0 / std::sqrt(static_cast<double>(c.d));
    params.causal = c.causal;
    params.dropout = c.dropout;
    params.seed0 = 3;
    params.seed1 = 4;
    if (c.mask) {
      params.mask.data = c.mask == 1 ? static_cast<const void*>(bools.get()) : static_cast<const void*>(adds.data());
      params.mask.is_bool = c.mask == 1;
      params.mask.strides[0] = c.tq * c.tk;
      params.mask.strides[2] = c.tk;
      params.mask.strides[3] = 1;
    }
    struct Result {
      std::vector<float> out, lse, dq, dk, dv;
    };
    auto run = [&](bool portable) {
      detail::AttentionParams pp = params;
      pp.portable = portable;
      Result r{std::vector<float>(static_cast<std::size_t>(bh * c.tq * c.dv)),
               std::vector<float>(static_cast<std::size_t>(bh * c.tq)),
               std::vector<float>(q.size()), std::vector<float>(k.size()), std::vector<float>(v.size())};
      detail::attention_forward<float>(sz, pp, q.data(), k.data(), v.data(), r.out.data(), r.lse.data());
      detail::attention_backward<float>(sz, pp, q.data(), k.data(), v.data(), r.out.data(), r.lse.data(),
                                        dout.data(), dlse.data(), r.dq.data(), r.dk.data(), r.dv.data());
      return r;
    };
    const Result fast = run(false), portable = run(true);
    auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
    };
    EXPECT_TRUE(same(fast.out, portable.out)) << "output";
    EXPECT_TRUE(same(fast.lse, portable.lse)) << "log-sum-exp";
    EXPECT_TRUE(same(fast.dq, portable.dq)) << "dq";
    EXPECT_TRUE(same(fast.dk, portable.dk)) << "dk";
    EXPECT_TRUE(same(fast.dv, portable.dv)) << "dv";
    // The cases reach what they name: finite outputs where rows see keys, -inf where none.
    if (c.mask == 1) {
      EXPECT_EQ(portable.lse[2], -std::numeric_limits<float>::infinity());
    }
    if (!c.nan) {
      EXPECT_TRUE(std::isfinite(portable.out[0]) && std::isfinite(portable.dq[0]));
    }
  }
}

// T = 4096, D = 64: the weights of one head are 4096 x 4096 floats (64 MiB). The forward and the
// gradient hold tensors of (T, D) only - q, k, v, the output and the three gradients, 1 MiB each -
// and scratch of a few tiles: no buffer and no allocation comes near T x T.
TEST(Attention, LongSequenceNeverHoldsTheTxTMatrix) {
  const int64_t t = 4096, d = 64;
  const Tensor q = values({1, 1, t, d}, 1), k = values({1, 1, t, d}, 2), v = values({1, 1, t, d}, 3);
  const Tensor dout = values({1, 1, t, d}, 4);
  const std::size_t weights_bytes = static_cast<std::size_t>(t * t) * sizeof(float);
  const int threads = detail::num_threads();
  detail::set_num_threads(1);  // every allocation on this thread, where it is policed
  const std::size_t before = detail::live_buffer_bytes();
  detail::reset_peak_buffer_bytes();
  std::vector<Tensor> grads;
  Tensor y;
  {
    testing::RefuseAllocationsOver refuse(1 << 20);  // no scratch of 1 MiB or more
    GradientTape tape;
    tape.watch(q);
    tape.watch(k);
    tape.watch(v);
    y = scaled_dot_product_attention(q, k, v, {.causal = true});
    grads = tape.gradient(reduce_sum(y * dout), {q, k, v});
  }
  const std::size_t peak = detail::peak_buffer_bytes() - before;
  detail::set_num_threads(threads);
  EXPECT_LT(peak, weights_bytes / 4) << "peak " << peak << " bytes";
  // Spot checks against the reference on a few rows: row i sees keys 0..i.
  const std::vector<float> yv = y.to_vector<float>();
  for (int64_t row : {int64_t{0}, int64_t{1000}, t - 1}) {
    const Tensor qr = slice(q, {0, 0, row, 0}, {1, 1, 1, d});
    const Tensor kr = slice(k, {0, 0, 0, 0}, {1, 1, row + 1, d});
    const Tensor vr = slice(v, {0, 0, 0, 0}, {1, 1, row + 1, d});
    const Tensor want = reference_attention(cast(qr, float64), cast(kr, float64), cast(vr, float64), Tensor(), false,
                                            1.0 / 8.0).out;
    const std::vector<double> w = want.to_vector<double>();
    for (int64_t e = 0; e < d; ++e)
      EXPECT_NEAR(yv[static_cast<std::size_t>(row * d + e)], w[static_cast<std::size_t>(e)], 1e-5);
  }
  for (const Tensor& g : grads)
    for (float x : g.to_vector<float>()) ASSERT_TRUE(std::isfinite(x));
}

}  // namespace
}  // namespace tg
