// The layer_norm op and its gradient op (src/ops/layer_norm.cpp, src/kernels/layer_norm.cpp):
// op cases against a reference written with reduce_mean and elementwise ops (run eagerly, traced,
// traced and optimised, with None dims and unknown rank by the op-case harness), the gradients of
// every output, the gradient's own gradient, the bits across thread counts, and typed errors.
#include <cmath>
#include <utility>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/layer_norm.h"
#include "ops/op.h"
#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

Tensor values(const std::vector<int64_t>& dims, uint64_t seed, DType dtype = float32) {
  return testing::seeded_values(dims, dtype, seed);
}

Tensor flat(const Tensor& t) { return reshape(t, {-1}); }

// y, the row means and 1 / sqrt(variance + eps), composed from public ops.
std::vector<Tensor> reference(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps) {
  const Tensor mean = reduce_mean(x, {-1}, true);
  const Tensor rstd = rsqrt(reduce_mean(square(x - mean), {-1}, true) + eps);
  return {(x - mean) * rstd * gamma + beta, squeeze(mean, {-1}), squeeze(rstd, {-1})};
}

std::vector<Tensor> layer_norm_op(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps) {
  return detail::apply_op(detail::OpId::LayerNorm, {x, gamma, beta}, detail::LayerNormAttrs{.epsilon = eps});
}

// Every output, flattened into one tensor.
Tensor joined(const std::vector<Tensor>& outs) {
  std::vector<Tensor> parts;
  for (const Tensor& t : outs) parts.push_back(flat(t));
  return concat(parts, 0);
}

TG_OP_CASES(layer_norm) {
  auto f32 = [](const Tensor& t) { return cast(t, float32); };
  auto f64 = [](const Tensor& t) { return cast(t, float64); };
  auto ref = [&](const Tensor& x, const Tensor& g, const Tensor& b, double eps) {
    return f32(joined(reference(f64(x), f64(g), f64(b), eps)));
  };
  auto op = [](double eps) {
    return [eps](const std::vector<Tensor>& in) { return joined(layer_norm_op(in[0], in[1], in[2], eps)); };
  };
  const Tensor x = values({3, 7, 5}, 1), g = values({5}, 2), b = values({5}, 3);
  const Tensor x64 = values({2, 3, 4}, 4, float64), g64 = values({4}, 5, float64), b64 = values({4}, 6, float64);
  const Tensor x1 = values({4, 1}, 7), g1 = values({1}, 8), b1 = values({1}, 9);
  const Tensor x0 = testing::empty<float>({0, 6}, float32), g0 = values({6}, 10), b0 = values({6}, 11);
  // The gradient op against a tape over the reference, with more rows than one block of the
  // kernel's column sums (64) and an odd feature count.
  const Tensor xg = values({3, 70, 9}, 12, float64), gg = values({9}, 13, float64), bg = values({9}, 14, float64);
  const Tensor dy = values({3, 70, 9}, 15, float64);
  Tensor expected_grads;
  {
    GradientTape tape;
    tape.watch(xg);
    tape.watch(gg);
    tape.watch(bg);
    const Tensor y = reference(xg, gg, bg, 1e-5)[0];
    const std::vector<Tensor> d = tape.gradient(reduce_sum(y * dy), {xg, gg, bg});
    expected_grads = joined(d);
  }
  const std::vector<Tensor> fwd = layer_norm_op(xg, gg, bg, 1e-5);
  auto grad_op = [](const std::vector<Tensor>& in) {
    return joined(detail::apply_op(detail::OpId::LayerNormGrad, in, detail::LayerNormAttrs{.epsilon = 1e-5}));
  };
  return {
      {"layer_norm", "f32 (3,7,5)", op(1e-3), {x, g, b}, ref(x, g, b, 1e-3), 1e-5},
      {"layer_norm", "f64 (2,3,4), eps 0.5", op(0.5), {x64, g64, b64}, joined(reference(x64, g64, b64, 0.5)), 1e-12},
      {"layer_norm", "one feature: y is beta", op(1e-3), {x1, g1, b1}, ref(x1, g1, b1, 1e-3), 1e-6},
      {"layer_norm", "no rows (0,6)", op(1e-3), {x0, g0, b0}, testing::empty<float>({0}, float32)},
      {"layer_norm_grad", "dx, dgamma, dbeta (3,70,9), f64", grad_op, {xg, gg, fwd[1], fwd[2], dy},
       expected_grads, 1e-10},
  };
}

// The row statistics' own gradients (outputs 1 and 2), and the gradient of the gradient through
// nn::LayerNorm, against the composed reference, eagerly and traced.
TEST(LayerNormOp, EveryOutputsGradientMatchesTheComposedReference) {
  const Tensor x = values({5, 6}, 21, float64), g = values({6}, 22, float64), b = values({6}, 23, float64);
  const Tensor wy = values({5, 6}, 24, float64), wm = values({5}, 25, float64), wr = values({5}, 26, float64);
  auto grads = [&](bool fused) {
    GradientTape tape;
    tape.watch(x);
    tape.watch(g);
    tape.watch(b);
    const std::vector<Tensor> o = fused ? layer_norm_op(x, g, b, 1e-3) : reference(x, g, b, 1e-3);
    return joined(tape.gradient(reduce_sum(o[0] * wy) + reduce_sum(o[1] * wm) + reduce_sum(o[2] * wr), {x, g, b}));
  };
  EXPECT_TENSOR_NEAR(grads(true), grads(false), 1e-10);
}

TEST(LayerNormOp, SecondOrderGradientsMatchTheComposedReference) {
  const Tensor x = values({4, 7}, 31, float64), w = values({4, 7}, 32, float64);
  nn::LayerNorm ln(7, 1e-3, float64);
  ln.gamma().assign(values({7}, 33, float64));
  ln.beta().assign(values({7}, 34, float64));
  // d/dx of sum((d/dx sum(LN(x) * w))^2), and the same with respect to gamma.
  auto second = [&](const Tensor& in, bool fused) {
    GradientTape outer;
    outer.watch(in);
    Tensor inner_sq;
    {
      GradientTape inner;
      inner.watch(in);
      const Tensor y = fused ? ln(in) : reference(in, ln.gamma().read_value(), ln.beta().read_value(), 1e-3)[0];
      inner_sq = reduce_sum(square(inner.gradient(reduce_sum(y * w), in)));
    }
    return outer.gradient(inner_sq, {in, ln.gamma()});
  };
  const std::vector<Tensor> fused = second(x, true), composed = second(x, false);
  EXPECT_TENSOR_NEAR(fused[0], composed[0], 1e-9);
  EXPECT_TENSOR_NEAR(fused[1], composed[1], 1e-9);
  auto traced = function([&](const Tensor& in) { return second(in, true)[0]; });
  EXPECT_TENSOR_NEAR(traced(x), composed[0], 1e-9);
}

// 300 x 33 runs on one thread; 1000 x 40 and the transformer's 1024 x 128 split their gradient's
// blocks of rows across two.
TEST(LayerNormOp, BitsDoNotDependOnTheThreadCount) {
  for (const auto& [rows, c] : {std::pair<int64_t, int64_t>{300, 33}, {1000, 40}, {1024, 128}}) {
    SCOPED_TRACE(::testing::Message() << rows << " x " << c);
    const Tensor x = values({rows, c}, 41), g = values({c}, 42), b = values({c}, 43), dy = values({rows, c}, 44);
    auto run = [&] {
      const std::vector<Tensor> o = layer_norm_op(x, g, b, 1e-5);
      return joined({o[0], o[1], o[2],
                     joined(detail::apply_op(detail::OpId::LayerNormGrad, {x, g, o[1], o[2], dy},
                                             detail::LayerNormAttrs{.epsilon = 1e-5}))});
    };
    const int before = detail::num_threads();
    detail::set_num_threads(1);
    const Tensor one = run();
    detail::set_num_threads(2);
    const Tensor two = run();
    detail::set_num_threads(before);
    EXPECT_TENSOR_EQ(one, two);
  }
}

// The kernels' AVX-512F build (layer_norm_avx512.cpp, where the CPU has it) and the baseline
// one give the same bits: the same sums in the same order, and no fused multiply-add. Rows of a
// whole number of vectors, with a tail, and longer than one block of column sums.
TEST(LayerNormOp, TheAvx512AndBaselineBuildsGiveTheSameBits) {
  for (const DType dtype : {float32, float64})
    for (const std::vector<int64_t>& dims : {std::vector<int64_t>{70, 128}, {300, 33}, {5, 1000}}) {
      SCOPED_TRACE(::testing::Message() << to_string(dtype) << " " << dims[0] << " x " << dims[1]);
      const Tensor x = values(dims, 61, dtype), g = values({dims[1]}, 62, dtype), b = values({dims[1]}, 63, dtype);
      const Tensor dy = values(dims, 64, dtype);
      auto run = [&] {
        const std::vector<Tensor> o = layer_norm_op(x, g, b, 1e-5);
        return joined({o[0], o[1], o[2],
                       joined(detail::apply_op(detail::OpId::LayerNormGrad, {x, g, o[1], o[2], dy},
                                               detail::LayerNormAttrs{.epsilon = 1e-5}))});
      };
      const bool before = detail::set_layer_norm_avx512(false);
      const Tensor baseline = run();
      detail::set_layer_norm_avx512(true);
      const Tensor native = run();
      detail::set_layer_norm_avx512(before);
      EXPECT_TENSOR_EQ(baseline, native);
    }
}

// The kernels take rows in groups (their sums interleaved) and the rest one by one: each row's y,
// mean, rstd and dx are the bits it gets alone, in both builds, for row counts around the group.
TEST(LayerNormOp, EachRowGetsTheBitsItGetsAlone) {
  for (const bool avx512 : {false, true})
    for (const std::vector<int64_t>& dims : {std::vector<int64_t>{7, 37}, {9, 128}, {3, 16}}) {
      SCOPED_TRACE(::testing::Message() << (avx512 ? "avx512 " : "baseline ") << dims[0] << " x " << dims[1]);
      const bool before = detail::set_layer_norm_avx512(avx512);
      const Tensor x = values(dims, 71), g = values({dims[1]}, 72), b = values({dims[1]}, 73), dy = values(dims, 74);
      const std::vector<Tensor> o = layer_norm_op(x, g, b, 1e-5);
      const Tensor dx = detail::apply_op(detail::OpId::LayerNormGrad, {x, g, o[1], o[2], dy},
                                         detail::LayerNormAttrs{.epsilon = 1e-5})[0];
      for (int64_t r = 0; r < dims[0]; ++r) {
        SCOPED_TRACE(::testing::Message() << "row " << r);
        const Tensor xr = slice(x, {r, 0}, {1, dims[1]}), dyr = slice(dy, {r, 0}, {1, dims[1]});
        const std::vector<Tensor> a = layer_norm_op(xr, g, b, 1e-5);
        const Tensor dxa = detail::apply_op(detail::OpId::LayerNormGrad, {xr, g, a[1], a[2], dyr},
                                            detail::LayerNormAttrs{.epsilon = 1e-5})[0];
        EXPECT_TENSOR_EQ(a[0], slice(o[0], {r, 0}, {1, dims[1]}));
        EXPECT_TENSOR_EQ(a[1], slice(o[1], {r}, {1}));
        EXPECT_TENSOR_EQ(a[2], slice(o[2], {r}, {1}));
        EXPECT_TENSOR_EQ(dxa, slice(dx, {r, 0}, {1, dims[1]}));
      }
      detail::set_layer_norm_avx512(before);
    }
}

TEST(LayerNormOp, TypedErrors) {
  const Tensor x = values({3, 4}, 51), g = values({4}, 52), b = values({4}, 53);
  EXPECT_THROW_MSG(layer_norm_op(x, values({5}, 1), b, 1e-3), InvalidArgumentError, "[layer_norm]", "gamma",
                   "(4,)", "(5,)");
  EXPECT_THROW_MSG(layer_norm_op(cast(x, int32), g, b, 1e-3), TypeError, "[layer_norm]", "float32 or float64");
  EXPECT_THROW_MSG(layer_norm_op(x, cast(g, float64), b, 1e-3), TypeError, "gamma", "float32");
  EXPECT_THROW_MSG(layer_norm_op(constant(1.0f), g, b, 1e-3), InvalidArgumentError, "rank >= 1");
  EXPECT_THROW_MSG(layer_norm_op(x, g, b, -1.0), InvalidArgumentError, "epsilon");
  EXPECT_THROW_MSG(layer_norm_op(testing::empty<float>({3, 0}, float32), testing::empty<float>({0}, float32),
                                 testing::empty<float>({0}, float32), 1e-3),
                   InvalidArgumentError, "must not be empty");
  const std::vector<Tensor> o = layer_norm_op(x, g, b, 1e-3);
  EXPECT_THROW_MSG(detail::apply_op(detail::OpId::LayerNormGrad, {x, g, o[1], o[2], values({3, 5}, 54)},
                                    detail::LayerNormAttrs{}),
                   InvalidArgumentError, "[layer_norm_grad]", "y's gradient");
}

}  // namespace
}  // namespace tg
