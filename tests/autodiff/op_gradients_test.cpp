// Every differentiable op's gradient rule against central finite differences, eagerly and
// traced (exact shapes and None dims). The registry is walked, so an op marked kDifferentiable
// without a case here fails the coverage test.
#include <limits>
#include <set>

#include "autodiff/grad_check.h"
#include "ops/conv.h"
#include "ops/cross_entropy.h"
#include "ops/grad_helpers.h"
#include "ops/op.h"
#include "ops/remap.h"
#include "ops/sort.h"
#include "support/activations.h"

namespace tg {
namespace {

using testing::CaseFn;
using testing::GradCase;

CaseFn unary(Tensor (*f)(const Tensor&)) {
  return [f](const std::vector<Tensor>& in) { return f(in[0]); };
}
CaseFn binary(Tensor (*f)(const Tensor&, const Tensor&)) {
  return [f](const std::vector<Tensor>& in) { return f(in[0], in[1]); };
}
CaseFn reduction(Tensor (*f)(const Tensor&, std::vector<int>, bool), std::vector<int> axes,
              bool keepdims = false) {
  return [=](const std::vector<Tensor>& in) { return f(in[0], axes, keepdims); };
}
CaseFn matmul_t(bool ta, bool tb) {
  return [=](const std::vector<Tensor>& in) { return matmul(in[0], in[1], ta, tb); };
}

// One collective of a single tensor (reduction 1: mean; the others ignore it).
CaseFn collective(detail::OpId op, int64_t reduction) {
  return [=](const std::vector<Tensor>& in) { return detail::apply_op1(op, {in[0]}, detail::CollectiveAttrs{reduction, 0}); };
}

CaseFn conv(Padding p, std::vector<int64_t> strides, std::vector<int64_t> dilations = {1, 1}) {
  return [=](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], strides, p, dilations); };
}
CaseFn pool(Tensor (*f)(const Tensor&, std::vector<int64_t>, std::vector<int64_t>, Padding),
            std::vector<int64_t> ksize, std::vector<int64_t> strides, Padding p) {
  return [=](const std::vector<Tensor>& in) { return f(in[0], ksize, strides, p); };
}

// affine_scan(a, b) along `axis` (the op cumprod's gradient is written with).
Tensor affine_scan(const Tensor& a, const Tensor& b, int64_t axis, bool exclusive, bool reverse) {
  return detail::apply_op1(detail::OpId::AffineScan, {a, b}, detail::ScanAttrs{axis, exclusive, reverse});
}
CaseFn affine(int64_t axis, bool exclusive, bool reverse) {
  return [=](const std::vector<Tensor>& in) { return affine_scan(in[0], in[1], axis, exclusive, reverse); };
}

// The first derivative of sum(f(x)), as a function of x: where f(x) is 0 (a cumprod past a
// zero), second_order's weights f(x) would hide a wrong second derivative; these weights are 1.
template <class F>
Tensor first_derivative(const Tensor& x, F f) {
  GradientTape tape;
  tape.watch(x);
  return tape.gradient(reduce_sum(f(x)), x);
}

// The first derivative of sum(f(x)^2) / 2, as a function of x: its finite-difference check is
// a check of the second derivative (the inner tape's backward ops are recorded by the outer
// tape of the check).
template <class F>
Tensor second_order(const Tensor& x, F f) {
  GradientTape tape;
  tape.watch(x);
  const Tensor y = f(x);
  return tape.gradient(reduce_sum(y * y) * 0.5, x);
}

std::vector<GradCase> make_cases() {
  testing::Random r(1234);
  auto u = [&](TensorShape s, double lo = -1.0, double hi = 1.0) { return r.uniform(s, lo, hi); };
  auto nz = [&](TensorShape s) { return r.away_from_zero(s); };
  auto pos = [&](TensorShape s) { return r.uniform(s, 0.5, 2.0); };
  const Tensor cond23 = constant({{true, false, true}, {false, false, true}});
  std::vector<GradCase> c = {
      // elementwise binary, with broadcasting
      {"add", "same shapes", binary(add), {u({2, 3}), u({2, 3})}},
      {"add", "(2,3) + (3,)", binary(add), {u({2, 3}), u({3})}},
      {"add", "(2,1) + (1,3)", binary(add), {u({2, 1}), u({1, 3})}},
      {"add", "scalar + (2,3)", binary(add), {u({}), u({2, 3})}},
      {"sub", "(2,3) - (3,)", binary(sub), {u({2, 3}), u({3})}},
      {"sub", "(3,) - (2,3)", binary(sub), {u({3}), u({2, 3})}},
      {"mul", "(2,3) * (2,1)", binary(mul), {u({2, 3}), u({2, 1})}},
      {"mul", "(2,3) * scalar", binary(mul), {u({2, 3}), u({})}},
      {"div", "(2,3) / (3,)", binary(div), {u({2, 3}), nz({3})}},
      {"div", "(2,1) / (2,3)", binary(div), {u({2, 1}), nz({2, 3})}},
      {"pow", "(2,3) ^ (3,)", binary(pow), {pos({2, 3}), u({3}, -1.5, 1.5)}},
      {"pow", "(2,3) ^ scalar", binary(pow), {pos({2, 3}), u({}, 0.5, 2.5)}},
      {"maximum", "(2,3), (3,)", binary(maximum), {u({2, 3}), u({3})}},
      {"maximum", "same shapes", binary(maximum), {u({2, 3}), u({2, 3})}},
      {"minimum", "(2,3), (2,1)", binary(minimum), {u({2, 3}), u({2, 1})}},
      // elementwise unary (kinks avoided: abs/sign/relu away from 0, log/sqrt/rsqrt positive)
      {"neg", "(2,3)", unary(neg), {u({2, 3})}},
      {"abs", "(2,3)", unary(abs), {nz({2, 3})}},
      {"sign", "(2,3)", unary(sign), {nz({2, 3})}},
      {"square", "(2,3)", unary(square), {u({2, 3})}},
      {"relu", "(2,3)", unary(relu), {nz({2, 3})}},
      {"sqrt", "(2,3)", unary(sqrt), {pos({2, 3})}},
      {"rsqrt", "(2,3)", unary(rsqrt), {pos({2, 3})}},
      {"identity", "(2,3)", unary(identity), {u({2, 3})}},
      {"cast", "float64 -> float64", [](const std::vector<Tensor>& in) { return cast(in[0], float64); },
       {u({2, 3})}},
      // through float32 and back: loose, as float32 rounding dominates the differences
      {"cast", "float64 -> float32 -> float64",
       [](const std::vector<Tensor>& in) { return cast(square(cast(in[0], float32)), float64); },
       {u({2, 3})}, 1e-2, 1e-4},
      {"where", "cond (2,3), x (2,3), y (3,)",
       [cond23](const std::vector<Tensor>& in) { return where(cond23, in[0], in[1]); },
       {u({2, 3}), u({3})}},
      // matmul, every transpose combination and batch broadcasting
      {"matmul", "(2,3) @ (3,4)", matmul_t(false, false), {u({2, 3}), u({3, 4})}},
      {"matmul", "transpose_a", matmul_t(true, false), {u({3, 2}), u({3, 4})}},
      {"matmul", "transpose_b", matmul_t(false, true), {u({2, 3}), u({4, 3})}},
      {"matmul", "transpose_a and _b", matmul_t(true, true), {u({3, 2}), u({4, 3})}},
      {"matmul", "batch (2,2,3) @ (3,4)", matmul_t(false, false), {u({2, 2, 3}), u({3, 4})}},
      {"matmul", "batch (2,3) @ (2,3,4), transpose_a", matmul_t(true, false), {u({3, 2}), u({2, 3, 4})}},
      {"matmul", "batch broadcast (2,1,2,3) @ (3,3,2)", matmul_t(false, false),
       {u({2, 1, 2, 3}), u({3, 3, 2})}},
      // reductions
      {"reduce_sum", "all", reduction(reduce_sum, {}), {u({2, 3})}},
      {"reduce_sum", "axis 1", reduction(reduce_sum, {1}), {u({2, 3})}},
      {"reduce_sum", "axes {0, 2} keepdims", reduction(reduce_sum, {0, 2}, true), {u({2, 3, 2})}},
      {"reduce_mean", "all", reduction(reduce_mean, {}), {u({2, 3})}},
      {"reduce_mean", "axis -1 keepdims", reduction(reduce_mean, {-1}, true), {u({2, 3})}},
      {"reduce_mean", "axes {0, 2}", reduction(reduce_mean, {0, 2}), {u({2, 3, 2})}},
      {"reduce_max", "axis 1", reduction(reduce_max, {1}), {u({3, 4})}},
      {"reduce_max", "all, keepdims", reduction(reduce_max, {}, true), {u({3, 4})}},
      {"reduce_min", "axis 0", reduction(reduce_min, {0}), {u({3, 4})}},
      {"reduce_prod", "axis 0", reduction(reduce_prod, {0}), {nz({3, 2})}},
      {"reduce_prod", "all", reduction(reduce_prod, {}), {nz({2, 3})}},
      // zeros as inputs (issue 33: prod / x gave 0 / 0 there), first and second order
      {"reduce_prod", "axes {0, 2} keepdims, zeros", reduction(reduce_prod, {0, 2}, true),
       {constant({{{0.9, 0.0}, {1.3, -0.6}}, {{0.0, 0.7}, {0.8, 1.1}}}, float64)}},
      {"reduce_prod", "all, one zero", reduction(reduce_prod, {}), {constant({{0.9, 0.0, -1.2}, {0.7, 1.3, 0.6}}, float64)}},
      {"reduce_prod", "second order at zeros, axis -1", [](const std::vector<Tensor>& in) {
         return first_derivative(in[0], [](const Tensor& x) { return reduce_prod(x, {-1}); });
       }, {constant({{0.9, 0.0, -1.2, 0.5}, {0.0, 1.3, 0.0, 0.6}}, float64)}},
      {"softmax", "axis -1", [](const std::vector<Tensor>& in) { return softmax(in[0]); }, {u({2, 4}, -2, 2)}},
      {"softmax", "axis 0", [](const std::vector<Tensor>& in) { return softmax(in[0], 0); }, {u({3, 2}, -2, 2)}},
      {"log_softmax", "axis -1", [](const std::vector<Tensor>& in) { return log_softmax(in[0]); },
       {u({2, 4}, -2, 2)}},
      {"log_softmax", "axis 1 of 3", [](const std::vector<Tensor>& in) { return log_softmax(in[0], 1); },
       {u({2, 3, 2}, -2, 2)}},
      // the fused cross-entropy and its gradient (labels held constant; the gradient op is
      // differentiated in its log_softmax rows and the losses' gradient; second order goes through
      // both, and through the loss op's log_softmax output)
      {"sparse_softmax_cross_entropy", "(3,4) logits",
       [](const std::vector<Tensor>& in) { return detail::sparse_softmax_cross_entropy_rows(in[0], constant({2, 0, 3})); },
       {u({3, 4}, -2, 2)}},
      {"sparse_softmax_cross_entropy_grad", "log_softmax rows and the losses' gradient",
       [](const std::vector<Tensor>& in) {
         return detail::apply_op1(detail::OpId::SparseSoftmaxCrossEntropyGrad,
                                  {in[0], constant({int64_t{1}, int64_t{3}, int64_t{0}}), in[1]});
       },
       {u({3, 4}, -2, 2), u({3})}},
      {"sparse_softmax_cross_entropy", "second order", [](const std::vector<Tensor>& in) {
         return second_order(in[0], [](const Tensor& x) {
           return detail::sparse_softmax_cross_entropy_rows(x, constant({1, 1, 0}));
         });
       }, {u({3, 4}, -2, 2)}},
      // fused attention: q, k and v, plain, under a bool padding mask, causal with a row that sees
      // no key (its gradient is 0, as its output), an additive mask with -inf, across several
      // tiles of rows and keys, and through the log-sum-exp output the gradient op also reads
      {"scaled_dot_product_attention", "(1,2,3,4) x (1,2,5,4) x (1,2,5,3)",
       [](const std::vector<Tensor>& in) { return scaled_dot_product_attention(in[0], in[1], in[2]); },
       {u({1, 2, 3, 4}), u({1, 2, 5, 4}), u({1, 2, 5, 3})}},
      {"scaled_dot_product_attention", "bool padding mask (2,1,1,5)",
       [](const std::vector<Tensor>& in) {
         const Tensor mask = constant(std::vector<bool>{true, true, true, false, true, true, false, false, false, true},
                                      {2, 1, 1, 5}, bool_);
         return scaled_dot_product_attention(in[0], in[1], in[2], {.mask = mask});
       },
       {u({2, 2, 3, 4}), u({2, 2, 5, 4}), u({2, 2, 5, 3})}},
      {"scaled_dot_product_attention", "causal and a row that sees no key",
       [](const std::vector<Tensor>& in) {
         const Tensor mask = constant(std::vector<bool>{true, false, true, true}, {4, 1}, bool_);
         return scaled_dot_product_attention(in[0], in[1], in[2], {.mask = mask, .causal = true, .scale = 0.7});
       },
       {u({1, 2, 4, 3}), u({1, 2, 4, 3}), u({1, 2, 4, 2})}},
      {"scaled_dot_product_attention", "additive mask with -inf",
       [](const std::vector<Tensor>& in) {
         const double inf = std::numeric_limits<double>::infinity();
         const Tensor mask = constant({{0.5, -inf, 0.0, -1.0}, {0.0, 0.25, -inf, 2.0}, {-inf, 0.0, 0.0, 0.0}}, float64);
         return scaled_dot_product_attention(in[0], in[1], in[2], {.mask = mask});
       },
       {u({1, 1, 3, 4}), u({1, 1, 4, 4}), u({1, 1, 4, 2})}},
      {"scaled_dot_product_attention", "causal over several tiles (Tq 70, Tk 140)",
       [](const std::vector<Tensor>& in) {
         return scaled_dot_product_attention(in[0], in[1], in[2], {.causal = true});
       },
       {u({1, 1, 70, 4}), u({1, 1, 140, 4}), u({1, 1, 140, 2})}},
      {"scaled_dot_product_attention", "the log-sum-exp output",
       [](const std::vector<Tensor>& in) {
         return detail::apply_op(detail::OpId::ScaledDotProductAttention, {in[0], in[1], in[2]},
                                 detail::AttentionAttrs{.causal = true})[1];
       },
       {u({1, 2, 3, 4}), u({1, 2, 3, 4}), u({1, 2, 3, 2})}},
      // layer_norm: every input through each output (its row statistics too), and the gradient
      // op's own gradient with respect to all five of its inputs
      {"layer_norm", "y of (2,3,5)",
       [](const std::vector<Tensor>& in) {
         return detail::apply_op(detail::OpId::LayerNorm, in, detail::LayerNormAttrs{.epsilon = 0.1})[0];
       },
       {u({2, 3, 5}, -2, 2), u({5}), u({5})}},
      {"layer_norm", "the row means and 1 / sqrt(variance + eps)",
       [](const std::vector<Tensor>& in) {
         const std::vector<Tensor> o = detail::apply_op(detail::OpId::LayerNorm, in, detail::LayerNormAttrs{.epsilon = 0.1});
         return concat({o[1], o[2]}, 0);
       },
       {u({4, 6}, -2, 2), u({6}), u({6})}},
      {"layer_norm_grad", "dx, dgamma and dbeta",
       [](const std::vector<Tensor>& in) {
         const std::vector<Tensor> d = detail::apply_op(detail::OpId::LayerNormGrad, in, detail::LayerNormAttrs{});
         return concat({reshape(d[0], {-1}), d[1], d[2]}, 0);
       },
       {u({3, 4}, -2, 2), u({4}), u({3}), u({3}, 0.5, 1.5), u({3, 4})}},
      // shape ops
      {"reshape", "(2,3) -> (3,2)", [](const std::vector<Tensor>& in) { return reshape(in[0], {3, 2}); },
       {u({2, 3})}},
      {"reshape", "(2,3) -> (-1,)", [](const std::vector<Tensor>& in) { return reshape(in[0], {-1}); },
       {u({2, 3})}},
      {"transpose", "perm {1, 0}", [](const std::vector<Tensor>& in) { return transpose(in[0], {1, 0}); },
       {u({2, 3})}},
      {"transpose", "perm {2, 0, 1}", [](const std::vector<Tensor>& in) { return transpose(in[0], {2, 0, 1}); },
       {u({2, 3, 4})}},
      {"transpose", "reverse", [](const std::vector<Tensor>& in) { return transpose(in[0]); }, {u({2, 3, 4})}},
      {"expand_dims", "axis 0", [](const std::vector<Tensor>& in) { return expand_dims(in[0], 0); }, {u({2, 3})}},
      {"expand_dims", "axis -1", [](const std::vector<Tensor>& in) { return expand_dims(in[0], -1); }, {u({2, 3})}},
      {"squeeze", "axis 1", [](const std::vector<Tensor>& in) { return squeeze(in[0], {1}); }, {u({2, 1, 3})}},
      {"concat", "axis 1", [](const std::vector<Tensor>& in) { return concat(in, 1); }, {u({2, 3}), u({2, 2})}},
      {"concat", "axis 0, three", [](const std::vector<Tensor>& in) { return concat(in, 0); },
       {u({1, 3}), u({2, 3}), u({1, 3})}},
      {"stack", "axis 0", [](const std::vector<Tensor>& in) { return stack(in, 0); }, {u({2, 3}), u({2, 3})}},
      {"stack", "axis -1", [](const std::vector<Tensor>& in) { return stack(in, -1); },
       {u({2, 3}), u({2, 3}), u({2, 3})}},
      {"slice", "begin {1, 1} size {2, -1}",
       [](const std::vector<Tensor>& in) { return slice(in[0], {1, 1}, {2, -1}); }, {u({3, 4})}},
      {"gather", "rows, repeated index",
       [](const std::vector<Tensor>& in) { return gather(in[0], constant({3, 0, 3})); }, {u({4, 3})}},
      {"gather", "axis 1, 2-D int64 indices",
       [](const std::vector<Tensor>& in) { return gather(in[0], constant({{0, 2}, {2, 2}}, int64), 1); },
       {u({2, 3})}},
      {"index", "x[1]", [](const std::vector<Tensor>& in) { return in[0][1]; }, {u({3, 2})}},
      {"index", "x[-1]", [](const std::vector<Tensor>& in) { return in[0][-1]; }, {u({3, 2})}},
      // convolution and pooling (the gradient ops' own rules too: their "like" inputs only
      // lend a shape and get zero)
      {"conv2d", "3x3 SAME stride 1", conv(Padding::Same, {1, 1}), {u({2, 5, 5, 2}), u({3, 3, 2, 3})}},
      {"conv2d", "2x3 VALID stride 2", conv(Padding::Valid, {2, 2}), {u({1, 6, 7, 2}), u({2, 3, 2, 2})}},
      {"conv2d", "2x2 SAME dilation 2", conv(Padding::Same, {1, 1}, {2, 2}), {u({1, 6, 5, 1}), u({2, 2, 1, 2})}},
      {"conv2d", "1x1 VALID", conv(Padding::Valid, {1, 1}), {u({2, 3, 3, 3}), u({1, 1, 3, 2})}},
      {"conv2d_backprop_input", "3x3 SAME stride 2",
       [](const std::vector<Tensor>& in) {
         return detail::conv2d_backprop_input(in[0], in[1], in[2], detail::Conv2DAttrs{{2, 2}, {1, 1}, 1});
       },
       {u({1, 5, 5, 2}), u({3, 3, 2, 3}), u({1, 3, 3, 3})}},
      {"conv2d_backprop_filter", "3x3 SAME stride 2",
       [](const std::vector<Tensor>& in) {
         return detail::conv2d_backprop_filter(in[0], in[1], in[2], detail::Conv2DAttrs{{2, 2}, {1, 1}, 1});
       },
       {u({1, 5, 5, 2}), u({3, 3, 2, 3}), u({1, 3, 3, 3})}},
      {"conv2d", "groups 2 (4 -> 6 channels), 3x3 SAME stride 2", conv(Padding::Same, {2, 2}),
       {u({1, 5, 6, 4}), u({3, 3, 2, 6})}},
      {"conv2d", "depthwise as groups (1 in_channel per group), VALID dilation 2", conv(Padding::Valid, {1, 1}, {2, 2}),
       {u({1, 6, 5, 3}), u({2, 2, 1, 6})}},
      {"conv2d_backprop_input", "groups 3, 2x2 VALID",
       [](const std::vector<Tensor>& in) {
         return detail::conv2d_backprop_input(in[0], in[1], in[2], detail::Conv2DAttrs{{1, 1}, {1, 1}, 0});
       },
       {u({1, 4, 4, 3}), u({2, 2, 1, 3}), u({1, 3, 3, 3})}},
      {"conv2d_backprop_filter", "groups 2, 2x2 SAME",
       [](const std::vector<Tensor>& in) {
         return detail::conv2d_backprop_filter(in[0], in[1], in[2], detail::Conv2DAttrs{{1, 1}, {1, 1}, 1});
       },
       {u({1, 3, 4, 4}), u({2, 2, 2, 4}), u({1, 3, 4, 4})}},
      {"depthwise_conv2d", "3x3 SAME stride 1, multiplier 1, batch 1",
       [](const std::vector<Tensor>& in) { return depthwise_conv2d(in[0], in[1], {1, 1}, Padding::Same); },
       {u({1, 5, 5, 3}), u({3, 3, 3, 1})}},
      {"depthwise_conv2d", "3x2 SAME stride 2, multiplier 2, batch 2",
       [](const std::vector<Tensor>& in) { return depthwise_conv2d(in[0], in[1], {2, 2}, Padding::Same); },
       {u({2, 5, 6, 2}), u({3, 2, 2, 2})}},
      {"depthwise_conv2d", "2x2 VALID dilation 2, multiplier 3",
       [](const std::vector<Tensor>& in) { return depthwise_conv2d(in[0], in[1], {1, 1}, Padding::Valid, {2, 2}); },
       {u({1, 6, 5, 2}), u({2, 2, 2, 3})}},
      {"conv2d_transpose", "3x3 SAME stride 2, 3 -> 2 channels, odd output",
       [](const std::vector<Tensor>& in) { return conv2d_transpose(in[0], in[1], {1, 5, 5, 2}, {2, 2}, Padding::Same); },
       {u({1, 3, 3, 3}), u({3, 3, 2, 3})}},
      {"conv2d_transpose", "2x3 VALID stride (2, 1), batch 2",
       [](const std::vector<Tensor>& in) { return conv2d_transpose(in[0], in[1], {2, 5, 5, 3}, {2, 1}, Padding::Valid); },
       {u({2, 2, 3, 2}), u({2, 3, 3, 2})}},
      {"conv2d_transpose", "2x2 SAME dilation 2",
       [](const std::vector<Tensor>& in) {
         return conv2d_transpose(in[0], in[1], {1, 4, 4, 1}, {1, 1}, Padding::Same, {2, 2});
       },
       {u({1, 4, 4, 2}), u({2, 2, 1, 2})}},
      {"depthwise_conv2d", "second order (input gradient through the filter and input)",
       [](const std::vector<Tensor>& in) {
         GradientTape tape;
         tape.watch(in[0]);
         const Tensor y = depthwise_conv2d(in[0], in[1], {2, 2}, Padding::Same);
         return tape.gradient(reduce_sum(y * y) * 0.5, in[0]);
       },
       {u({1, 5, 4, 2}), u({2, 3, 2, 2})}},
      {"conv2d_transpose", "second order (filter gradient through the filter and input)",
       [](const std::vector<Tensor>& in) {
         GradientTape tape;
         tape.watch(in[1]);
         const Tensor y = conv2d_transpose(in[0], in[1], {1, 5, 5, 2}, {2, 2}, Padding::Same);
         return tape.gradient(reduce_sum(y * y) * 0.5, in[1]);
       },
       {u({1, 3, 3, 3}), u({3, 3, 2, 3})}},
      {"max_pool2d", "2x2 SAME stride 2 on 5x5", pool(max_pool2d, {2, 2}, {2, 2}, Padding::Same), {u({2, 5, 5, 3})}},
      {"max_pool2d", "3x3 VALID stride 1", pool(max_pool2d, {3, 3}, {1, 1}, Padding::Valid), {u({1, 5, 4, 2})}},
      {"max_pool2d_grad", "2x2 SAME stride 2",
       [](const std::vector<Tensor>& in) {
         return detail::max_pool2d_grad(in[0], in[1], detail::Pool2DAttrs{{2, 2}, {2, 2}, 1});
       },
       {u({1, 5, 5, 2}), u({1, 3, 3, 2})}},
      {"max_pool2d_grad_grad", "3x3 SAME stride 1",
       [](const std::vector<Tensor>& in) {
         return detail::max_pool2d_grad_grad(in[0], in[1], detail::Pool2DAttrs{{3, 3}, {1, 1}, 1});
       },
       {u({1, 4, 4, 2}), u({1, 4, 4, 2})}},
      {"avg_pool2d", "3x3 SAME stride 2", pool(avg_pool2d, {3, 3}, {2, 2}, Padding::Same), {u({2, 5, 5, 2})}},
      {"avg_pool2d", "2x2 VALID stride 1", pool(avg_pool2d, {2, 2}, {1, 1}, Padding::Valid), {u({1, 4, 3, 3})}},
      {"avg_pool2d_grad", "3x3 SAME stride 2",
       [](const std::vector<Tensor>& in) {
         return detail::avg_pool2d_grad(in[0], in[1], detail::Pool2DAttrs{{3, 3}, {2, 2}, 1});
       },
       {u({1, 5, 5, 2}), u({1, 3, 3, 2})}},
      // control flow: eagerly these run plain C++, traced they are cond/while nodes (their
      // rules live in src/control_flow/gradients.cpp)
      {"cond", "both branches traced, true taken",
       [](const std::vector<Tensor>& in) {
         return cond(reduce_sum(in[1]) > 0.0, [&] { return sin(in[0]) * in[1]; },
                     [&] { return in[0] / in[1]; });
       },
       {u({2, 3}), pos({3})}},
      {"stateful_cond", "false branch taken, a branch that prints",
       [](const std::vector<Tensor>& in) {
         return cond(reduce_sum(in[1]) < 0.0, [&] { return in[0] * 2.0; },
                     [&] {
                       print("");
                       return exp(in[0]) * in[1];
                     });
       },
       {u({2, 3}), pos({3})}},
      // shapes at run time: the shape tensor is an int input (no gradient)
      {"fill", "value to a (2,3) shape from tg::shape",
       [](const std::vector<Tensor>& in) { return fill(shape(in[1]), in[0]) * in[1]; }, {u({}), u({2, 3})}},
      {"broadcast_to", "(2,1) to (2,3)",
       [](const std::vector<Tensor>& in) { return broadcast_to(in[0], constant({2, 3})) * in[1]; },
       {u({2, 1}), u({2, 3})}},
      {"reshape_to", "(2,3) to the shape tensor {3, -1}",
       [](const std::vector<Tensor>& in) { return reshape(in[0], constant({3, -1})) * in[1]; },
       {u({2, 3}), u({3, 2})}},
      {"ensure_same_shape", "(2,3) checked against (2,3)",
       [](const std::vector<Tensor>& in) {
         return detail::apply_op1(detail::OpId::EnsureSameShape, {in[0], in[1]},
                                  detail::ShapeCheckAttrs{{"loss", "a", "b"}}) * in[1];
       },
       {u({2, 3}), u({2, 3})}},
      {"ensure_same_shape", "dim 1 of a (2,3) checked against dim 0 of a (3,2)",
       [](const std::vector<Tensor>& in) {
         return matmul(detail::apply_op1(detail::OpId::EnsureSameShape, {in[0], in[1]},
                                         detail::ShapeCheckAttrs{{"einsum", "a", "b"}, {1}, {0}}),
                       in[1]);
       },
       {u({2, 3}), u({3, 2})}},
      {"broadcast_to", "(3,) to tg::shape of a (2,3)",
       [](const std::vector<Tensor>& in) { return broadcast_to(in[0], shape(in[1])) * in[1]; },
       {u({3}), u({2, 3})}},
      // the gradient helpers (their second input only lends its shape: zero gradient)
      {"sum_to_like", "(2,3) to (3,)",
       [](const std::vector<Tensor>& in) { return detail::sum_to_like(in[0], in[1]); }, {u({2, 3}), u({3})}},
      {"broadcast_like", "(2,1) to (2,3)",
       [](const std::vector<Tensor>& in) { return detail::broadcast_like(in[0], in[1]); },
       {u({2, 1}), u({2, 3})}},
      {"unreduce_like", "axis 1",
       [](const std::vector<Tensor>& in) { return detail::unreduce_like(in[0], in[1], {1}, false); },
       {u({2}), u({2, 3})}},
      {"reshape_like", "(2,3) like (6,)",
       [](const std::vector<Tensor>& in) { return detail::reshape_like(in[0], in[1]); }, {u({2, 3}), u({6})}},
      {"split_like", "axis 1, piece 1",
       [](const std::vector<Tensor>& in) { return detail::split_like(in[0], {in[1], in[2]}, 1)[1]; },
       {u({2, 5}), u({2, 2}), u({2, 3})}},
      {"slice_like", "begin {1, 2}",
       [](const std::vector<Tensor>& in) { return detail::slice_like(in[0], in[1], {1, 2}); },
       {u({3, 4}), u({2, 2})}},
      {"pad_like", "begin {0, 1}",
       [](const std::vector<Tensor>& in) { return detail::pad_like(in[0], in[1], {0, 1}); },
       {u({2, 2}), u({3, 4})}},
      {"scatter_add_like", "repeated index",
       [](const std::vector<Tensor>& in) {
         return detail::scatter_add_like(in[0], constant({1, 0, 1}), in[1], 0);
       },
       {u({3, 2}), u({2, 2})}},
      // tile, pad, split, reverse and their adjoints (which differentiate back into tile / pad)
      {"tile", "multiples {2, 3}", [](const std::vector<Tensor>& in) { return tile(in[0], {2, 3}); }, {u({2, 2})}},
      {"tile", "a size-1 dim, multiples {1, 4}", [](const std::vector<Tensor>& in) { return tile(in[0], {1, 4}); },
       {u({3, 1})}},
      {"tile_grad", "multiples {2, 1}",
       [](const std::vector<Tensor>& in) { return detail::tile_grad(in[0], in[1], {2, 1}); }, {u({4, 3}), u({2, 3})}},
      {"pad", "constant, value 2", [](const std::vector<Tensor>& in) { return pad(in[0], {{1, 2}, {0, 1}}, PadMode::Constant, 2.0); },
       {u({2, 3})}},
      {"pad", "reflect", [](const std::vector<Tensor>& in) { return pad(in[0], {{1, 1}, {2, 2}}, PadMode::Reflect); },
       {u({2, 3})}},
      {"pad", "symmetric", [](const std::vector<Tensor>& in) { return pad(in[0], {{2, 1}, {3, 0}}, PadMode::Symmetric); },
       {u({2, 3})}},
      {"mirror_pad_grad", "reflect",
       [](const std::vector<Tensor>& in) {
         return detail::mirror_pad_grad(in[0], in[1], detail::PadAttrs{{1, 1, 2, 2}, 1, 0.0});
       },
       {u({4, 7}), u({2, 3})}},
      {"mirror_pad_grad", "symmetric",
       [](const std::vector<Tensor>& in) {
         return detail::mirror_pad_grad(in[0], in[1], detail::PadAttrs{{2, 1, 0, 3}, 2, 0.0});
       },
       {u({5, 6}), u({2, 3})}},
      {"split", "three pieces, the middle one unused",
       [](const std::vector<Tensor>& in) {
         const std::vector<Tensor> p = split(in[0], {1, -1, 2}, 1);
         return concat({p[2] * p[2], p[0]}, 1);
       },
       {u({2, 5})}},
      {"reverse", "axes {0, -1}", [](const std::vector<Tensor>& in) { return reverse(in[0], {0, -1}); }, {u({2, 3, 2})}},
      // n-d indexing (indices held constant; boolean_mask's mask too)
      {"gather_nd", "depth 1 and a repeat",
       [](const std::vector<Tensor>& in) { return gather_nd(in[0], constant({{1}, {0}, {1}})); }, {u({2, 3})}},
      {"gather_nd", "depth 2 elements",
       [](const std::vector<Tensor>& in) { return gather_nd(in[0], constant({{1, 2}, {0, 0}, {1, 2}}, int64)); },
       {u({2, 3})}},
      {"scatter_nd", "rows with a repeat",
       [](const std::vector<Tensor>& in) {
         return scatter_nd(constant({{2}, {0}, {2}}), in[0], constant({4, 2}));
       },
       {u({3, 2})}},
      {"tensor_scatter_nd_add", "elements with a repeat",
       [](const std::vector<Tensor>& in) {
         return tensor_scatter_nd_add(in[0], constant({{0, 1}, {1, 0}, {0, 1}}), in[1]);
       },
       {u({2, 2}), u({3})}},
      {"boolean_mask", "rows", [](const std::vector<Tensor>& in) { return boolean_mask(in[0], constant({true, false, true})); },
       {u({3, 2})}},
      {"boolean_mask", "2-D mask at axis 1",
       [](const std::vector<Tensor>& in) {
         return boolean_mask(in[0], constant({{true, false}, {true, true}, {false, true}}), 1);
       },
       {u({2, 3, 2, 2})}},
      // the math ops of issue 14 (kinks avoided: elu and leaky_relu away from 0)
      {"leaky_relu", "alpha 0.3", [](const std::vector<Tensor>& in) { return leaky_relu(in[0], 0.3); }, {nz({2, 3})}},
      {"cumsum", "axis 1", [](const std::vector<Tensor>& in) { return cumsum(in[0], 1); }, {u({2, 4})}},
      {"cumsum", "axis 0 exclusive reverse", [](const std::vector<Tensor>& in) { return cumsum(in[0], 0, true, true); },
       {u({3, 2})}},
      // TensorArrays: the flow is the whole array, each op's gradient a TensorArray op on it.
      {"tensor_array_write", "two rows of three, stacked",
       [](const std::vector<Tensor>& in) { return TensorArray(float64, 3).write(0, in[0]).write(2, in[1]).stack(); },
       {u({2}), u({2})}},
      {"tensor_array_write", "dynamic, grown and a row overwritten",
       [](const std::vector<Tensor>& in) {
         return TensorArray(float64, 1, true).write(0, in[0]).write(2, in[1]).write(0, in[1] * in[0]).stack();
       },
       {u({2}), u({2})}},
      {"tensor_array_read", "a row read twice",
       [](const std::vector<Tensor>& in) {
         const TensorArray ta = TensorArray(float64, 2).write(0, in[0]).write(1, in[1]);
         return ta.read(1) * ta.read(1) + ta.read(0);
       },
       {u({3}), u({3})}},
      {"tensor_array_stack", "written in a for_range",
       [](const std::vector<Tensor>& in) {
         return for_range(Range(3), TensorArray(float64, 3, false, TensorShape{2}), [&](const Tensor& i, const TensorArray& ta) {
                  return ta.write(i, in[0] * cast(i, float64) + in[0] * in[0]);
                }).stack();
       },
       {u({2})}},
      {"cumprod", "axis 1", [](const std::vector<Tensor>& in) { return cumprod(in[0], 1); }, {u({2, 4})}},
      {"cumprod", "axis 0 exclusive", [](const std::vector<Tensor>& in) { return cumprod(in[0], 0, true); }, {u({4, 2})}},
      {"cumprod", "axis -1 reverse", [](const std::vector<Tensor>& in) { return cumprod(in[0], -1, false, true); },
       {u({2, 4})}},
      // zeros in the input: exact where TF's rule (a division by x) gives 0
      {"cumprod", "zeros, one and two per row",
       [](const std::vector<Tensor>& in) { return cumprod(in[0] * constant({{1.0, 0.0, 1.0, 1.0}, {0.0, 1.0, 0.0, 1.0}}, float64), 1); },
       {u({2, 4})}},
      {"cumprod", "zeros, exclusive reverse",
       [](const std::vector<Tensor>& in) {
         return cumprod(in[0] * constant({{1.0, 1.0, 0.0, 1.0}, {1.0, 0.0, 1.0, 1.0}}, float64), 1, true, true);
       },
       {u({2, 4})}},
      {"affine_scan", "axis 1", affine(1, false, false), {u({2, 4}), u({2, 4})}},
      {"affine_scan", "axis 0 exclusive", affine(0, true, false), {u({4, 2}), u({4, 2})}},
      {"affine_scan", "axis -1 reverse", affine(-1, false, true), {u({2, 4}), u({2, 4})}},
      {"affine_scan", "axis 1 exclusive reverse", affine(1, true, true), {u({2, 4}), u({2, 4})}},
      {"linspace", "start and stop, 5 values",
       [](const std::vector<Tensor>& in) { return linspace(in[0], in[1], 5); }, {u({}), u({})}},
      {"linspace", "num 1", [](const std::vector<Tensor>& in) { return linspace(in[0], in[1], 1); }, {u({}), u({})}},
      // second order: the gradient rules are built from differentiable ops
      {"cumprod", "second order, with a zero", [](const std::vector<Tensor>& in) { return second_order(in[0], [](const Tensor& x) {
         return cumprod(x * constant({1.0, 0.0, 1.0, 1.0}, float64));
       }); }, {u({4})}},
      // zeros as inputs: the second derivative with respect to a zero itself (issue 33: the rule
      // returned a constant 0 after a scan's first zero, whose derivative was then lost)
      {"cumprod", "second order at inputs that are zero", [](const std::vector<Tensor>& in) {
         return first_derivative(in[0], [](const Tensor& x) { return cumprod(x); });
       }, {constant({0.8, 0.0, -1.5, 0.0, 0.5}, float64)}},
      {"cumprod", "second order at zeros, exclusive reverse, axis 1", [](const std::vector<Tensor>& in) {
         return first_derivative(in[0], [](const Tensor& x) { return cumprod(x, 1, true, true); });
       }, {constant({{0.0, 1.2, 0.0, -0.7}, {0.9, 0.0, 1.1, 0.0}}, float64)}},
      {"affine_scan", "second order", [](const std::vector<Tensor>& in) { return second_order(in[0], [](const Tensor& x) {
         return affine_scan(x, x * x + 0.5, 0, false, true);
       }); }, {u({4})}},
      {"affine_scan", "second order, exclusive, a with a zero", [](const std::vector<Tensor>& in) {
         return first_derivative(in[0], [](const Tensor& x) { return affine_scan(x * x, x, 0, true, false); });
       }, {constant({0.7, 0.0, -1.3, 0.4}, float64)}},
      {"cumsum", "second order", [](const std::vector<Tensor>& in) { return second_order(in[0], [](const Tensor& x) {
         return cumsum(x, 0, false, true);
       }); }, {u({4})}},
      {"gelu", "second order", [](const std::vector<Tensor>& in) { return second_order(in[0], [](const Tensor& x) {
         return gelu(x);
       }); }, {u({2, 3}, -2.0, 2.0)}},
      {"gelu_approximate", "second order", [](const std::vector<Tensor>& in) { return second_order(in[0], [](const Tensor& x) {
         return gelu(x, true);
       }); }, {u({2, 3}, -2.0, 2.0)}},
      {"softplus", "second order", [](const std::vector<Tensor>& in) { return second_order(in[0], &softplus); },
       {u({2, 3}, -3.0, 3.0)}},
      {"elu", "second order", [](const std::vector<Tensor>& in) { return second_order(in[0], &elu); }, {nz({2, 3})}},
      {"erf", "second order", [](const std::vector<Tensor>& in) { return second_order(in[0], &erf); }, {u({2, 3})}},
      {"log1p", "second order", [](const std::vector<Tensor>& in) { return second_order(in[0], &log1p); },
       {u({2, 3}, 0.0, 2.0)}},
      {"expm1", "second order", [](const std::vector<Tensor>& in) { return second_order(in[0], &expm1); }, {u({2, 3})}},
      // sorting (src/ops/sort.cpp): distinct random values, so no tie sits on a kink
      {"sort", "ascending along the last axis", [](const std::vector<Tensor>& in) { return sort(in[0]); }, {u({3, 5})}},
      {"sort", "descending along axis 0",
       [](const std::vector<Tensor>& in) { return sort(in[0], 0, SortDirection::Descending); }, {u({4, 3})}},
      {"top_k", "k = 2 of 5", [](const std::vector<Tensor>& in) { return top_k(in[0], 2).values; }, {u({3, 5})}},
      {"gather_last_axis", "repeated index",
       [](const std::vector<Tensor>& in) { return detail::gather_last_axis(in[0], constant({{2, 0, 2}, {1, 1, 0}})); },
       {u({2, 3})}},
      {"scatter_add_last_axis_like", "repeated index",
       [](const std::vector<Tensor>& in) {
         return detail::scatter_add_last_axis_like(in[0], constant({{2, 0, 2}, {1, 1, 0}}), in[1]);
       },
       {u({2, 3}), u({2, 4})}},
      // collectives (src/ops/collective.cpp): in one process each is the identity, and so is
      // its gradient; tests/dist checks the rules across two ranks
      {"all_reduce", "sum of a bucket of two",
       [](const std::vector<Tensor>& in) {
         const auto out = detail::apply_op(detail::OpId::AllReduce, {in[0], in[1]}, detail::CollectiveAttrs{0, 0});
         return out[0] * out[1];
       },
       {u({2, 3}), u({2, 3})}},
      {"all_reduce", "mean", collective(detail::OpId::AllReduce, 1), {u({2, 3})}},
      {"collective_broadcast", "root 0", collective(detail::OpId::CollectiveBroadcast, 0), {u({2, 3})}},
      {"all_gather", "rows", collective(detail::OpId::AllGather, 0), {u({2, 3})}},
      {"reduce_to_root", "root 0", collective(detail::OpId::ReduceToRoot, 0), {u({2, 3})}},
      {"all_gather_grad", "rows",
       [](const std::vector<Tensor>& in) {
         return detail::apply_op1(detail::OpId::AllGatherGrad, {in[0], in[1]}, detail::CollectiveAttrs{});
       },
       {u({2, 3}), u({2, 3})}},
  };
  // Every vectorised activation, from its row (tests/support/activations.cpp).
  for (const testing::Activation& a : testing::activations()) {
    const auto op = a.apply;
    c.push_back({a.op, "(2,3)", [op](const std::vector<Tensor>& in) { return op(in[0]); },
                 {a.grad_away_from_zero ? r.away_from_zero({2, 3}, a.grad_lo, a.grad_hi) : u({2, 3}, a.grad_lo, a.grad_hi)}});
  }
  return c;
}

// Gradients through while_loop (a forward loop that stacks each iteration's values, then a
// reverse loop applying the body's gradient: src/control_flow/gradients.cpp).
std::vector<GradCase> while_cases() {
  testing::Random r(99);
  auto u = [&](TensorShape s, double lo = -1.0, double hi = 1.0) { return r.uniform(s, lo, hi); };
  return {
      {"while", "x = tanh(x * w) three times",
       [](const std::vector<Tensor>& in) {
         auto [i, x] = while_loop([](const Tensor& i, const Tensor&) { return i < 3; },
                                  [&](const Tensor& i, const Tensor& x) {
                                    return std::tuple{i + 1, tanh(x * in[1])};
                                  },
                                  std::tuple{constant(0), in[0]});
         return x;
       },
       {u({2, 3}), u({3}, 0.5, 1.5)}},
      {"stateful_while", "a loop body that prints",
       [](const std::vector<Tensor>& in) {
         auto [i, x] = while_loop([](const Tensor& i, const Tensor&) { return i < 2; },
                                  [&](const Tensor& i, const Tensor& x) {
                                    print("");
                                    return std::tuple{i + 1, x * in[1] + 1.0};
                                  },
                                  std::tuple{constant(0), in[0]});
         return x;
       },
       {u({2, 3}), u({3}, 0.5, 1.5)}},
  };
}

const std::vector<GradCase>& cases() {
  static const std::vector<GradCase> c = make_cases();
  return c;
}

// Ops whose gradient is checked by a dedicated test rather than a case here.
const std::set<std::string> kCheckedElsewhere = {
    "read_variable",  // VariableGradients.* in tape_test.cpp
    "while",          // WhileLoopMatchesFiniteDifferences (while_cases())
    "stateful_while",
    // its own gradient is refused (AttentionErrors.SecondOrderGradientsAreRefused)
    "scaled_dot_product_attention_grad",
};

TEST(OpGradients, EveryDifferentiableOpHasAGradientCheck) {
  std::set<std::string> covered;
  for (const GradCase& c : cases()) covered.insert(c.op);
  for (const detail::OpDef* d : detail::all_ops()) {
    if (!(d->traits & detail::kDifferentiable)) continue;
    EXPECT_TRUE(covered.count(d->name) || kCheckedElsewhere.count(d->name))
        << "op '" << d->name << "' is differentiable but has no finite-difference case in "
        << "tests/autodiff/op_gradients_test.cpp";
  }
  for (const std::string& name : covered) {
    const detail::OpDef* d = detail::find_op(name);
    ASSERT_NE(d, nullptr) << name;
    EXPECT_TRUE(d->traits & detail::kDifferentiable) << name;
  }
}

TEST(OpGradients, MatchFiniteDifferencesEagerlyAndTraced) {
  config::set_print_sink([](const std::string&, void*) {});  // the stateful_* cases print
  for (const GradCase& c : cases()) {
    try {
      testing::check_gradients(c);
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.op << ": " << c.label << " threw: " << e.what();
    }
  }
  config::set_print_sink(nullptr);
}

TEST(OpGradients, WhileLoopMatchesFiniteDifferences) {
  config::set_print_sink([](const std::string&, void*) {});
  for (const GradCase& c : while_cases()) testing::check_gradients(c);
  config::set_print_sink(nullptr);
}

// The harness itself can fail: a function whose tape gradient is deliberately wrong
// (stop_gradient hides one factor of x * x) is caught.
TEST(OpGradients, TheCheckerDetectsAWrongGradient) {
  const GradCase c{"", "x * stop_gradient(x)",
                   [](const std::vector<Tensor>& in) { return in[0] * stop_gradient(in[0]); },
                   {testing::Random(3).uniform({3}, 0.5, 1.0)}};
  const Tensor w = ones({3}, float64);
  EXPECT_FALSE(testing::gradients_close(testing::tape_gradients_eager(c, w),
                                        testing::numeric_gradients(c, w), 1e-6));
}

// dropout is composed of differentiable ops and a random mask. With the seed reset in the body,
// every eager evaluation (each finite difference) draws the same mask, so the tape's gradient -
// which must use the forward pass's mask - can be checked against differences. (Not through
// check_gradients: its traced function is called twice and rightly draws a new mask the second
// time; tests/ops/random_test.cpp checks traced dropout's gradient against its mask.)
TEST(OpGradients, DropoutMatchesFiniteDifferencesWithAFixedMask) {
  const GradCase c{"", "dropout(x, 0.4), seeded",
                   [](const std::vector<Tensor>& in) {
                     set_random_seed(5);
                     return dropout(in[0], 0.4, true, 11);
                   },
                   {testing::Random(4).uniform({4, 8})}};
  const Tensor w = testing::Random(5).uniform({4, 8});
  EXPECT_TRUE(testing::gradients_close(testing::tape_gradients_eager(c, w), testing::numeric_gradients(c, w), c.tol));
}

}  // namespace
}  // namespace tg
