// Gradients of the products cumprod and reduce_prod where x holds zeros (issue 33): a rule must
// have not only the right value there but the right derivatives too. Expected values are worked
// out by hand from the polynomials sum(cumprod(x)) and reduce_prod(x) (each a mixed partial of a
// multilinear polynomial), eagerly, traced, traced over None dims and through a traced
// first-order function.
#include "autodiff/grad_check.h"
#include "support/test_util.h"

namespace tg {
namespace {

struct Scan {
  bool exclusive = false;
  bool reverse = false;
};

Tensor sum_cumprod(const Tensor& x, Scan s) { return reduce_sum(cumprod(x, 0, s.exclusive, s.reverse)); }

// d/dx of sum(v * d/dx sum(cumprod(x))): the Hessian of sum(cumprod(x)) times v, by nested tapes.
Tensor hessian_times(const Tensor& x, const Tensor& v, Scan s) {
  GradientTape outer;
  outer.watch(x);
  Tensor g;
  {
    GradientTape inner;
    inner.watch(x);
    g = inner.gradient(sum_cumprod(x, s), x);
  }
  return outer.gradient(reduce_sum(g * v), x);
}

struct HvpCase {
  const char* label;
  Scan scan;
  std::vector<double> x, v, want;
};

// Every case has an entry that the former rule, a constant 0 past a scan's first zero, got wrong
// (its value was right, its derivative with respect to that zero was not).
const HvpCase kCases[] = {
    // sum = x0 + x0 x1 + x0 x1 x2: H = [[0, 1 + x2, x1], [1 + x2, 0, x0], [x1, x0, 0]]
    {"inclusive, v = e2", {}, {2, 0, 3}, {0, 0, 1}, {0, 2, 0}},
    {"inclusive, v = ones", {}, {2, 0, 3}, {1, 1, 1}, {4, 6, 2}},
    // sum = 1 + x0 + x0 x1 + x0 x1 x2 (x3 unused)
    {"exclusive, v = ones", {true, false}, {2, 0, 3, 5}, {1, 1, 1, 1}, {4, 6, 2, 0}},
    {"exclusive, v = e2", {true, false}, {2, 0, 3, 5}, {0, 0, 1, 0}, {0, 2, 0, 0}},
    // the mirror images: sum = x2 + x2 x1 + x2 x1 x0
    {"reverse, v = ones", {false, true}, {3, 0, 2}, {1, 1, 1}, {2, 6, 4}},
    {"reverse, v = e0", {false, true}, {3, 0, 2}, {1, 0, 0}, {0, 2, 0}},
    // sum = 1 + x3 + x3 x2 + x3 x2 x1 (x0 unused)
    {"exclusive reverse, v = ones", {true, true}, {5, 3, 0, 2}, {1, 1, 1, 1}, {0, 2, 6, 4}},
    {"exclusive reverse, v = e1", {true, true}, {5, 3, 0, 2}, {0, 1, 0, 0}, {0, 0, 2, 0}},
    // two zeros: d2/dx1 dx3 = x0 x2 + x0 x2 x4 = 36 although both x1 and x3 are 0
    {"inclusive, two zeros, v = ones", {}, {2, 0, 3, 0, 5}, {1, 1, 1, 1, 1}, {4, 42, 2, 36, 0}},
    {"inclusive, two zeros, v = e3", {}, {2, 0, 3, 0, 5}, {0, 0, 0, 1, 0}, {0, 36, 0, 0, 0}},
};

Tensor f64(const std::vector<double>& v) { return constant(v, {static_cast<int64_t>(v.size())}, float64); }

// x's rank with every dim None.
TensorShape generalised(const Tensor& x) { return TensorShape(std::vector<int64_t>(x.shape().dims().size(), None)); }

TEST(CumprodHigherOrder, FirstOrderGradientAtZerosIsExact) {
  // d/dx_i sum(cumprod(x)) = sum over k >= i of the products of x_0..x_k without x_i.
  const Tensor x = f64({2, 0, 3, 0, 5});
  GradientTape tape;
  tape.watch(x);
  EXPECT_TENSOR_NEAR(tape.gradient(sum_cumprod(x, {}), x), f64({1, 8, 0, 0, 0}), 0.0);
}

TEST(CumprodHigherOrder, HessianVectorProductsAtZerosEagerly) {
  for (const HvpCase& c : kCases) {
    SCOPED_TRACE(c.label);
    EXPECT_TENSOR_NEAR(hessian_times(f64(c.x), f64(c.v), c.scan), f64(c.want), 0.0);
  }
}

Scan kind_of(int k) { return {(k & 1) != 0, (k & 2) != 0}; }
int kind_index(Scan s) { return (s.exclusive ? 1 : 0) + (s.reverse ? 2 : 0); }

TEST(CumprodHigherOrder, HessianVectorProductsAtZerosTraced) {
  auto make = [](Scan s) { return function([s](const Tensor& x, const Tensor& v) { return hessian_times(x, v, s); }); };
  std::vector<decltype(make(Scan{}))> hvp;
  for (int k = 0; k < 4; ++k) hvp.push_back(make(kind_of(k)));
  // Over None dims too: the rule may not lean on the scanned length being known.
  const TensorSpec none({None}, float64);
  for (const HvpCase& c : kCases) {
    SCOPED_TRACE(c.label);
    auto& f = hvp[static_cast<std::size_t>(kind_index(c.scan))];
    EXPECT_TENSOR_NEAR(f(f64(c.x), f64(c.v)), f64(c.want), 0.0);
    EXPECT_TENSOR_NEAR(f.get_concrete_function(none, none)(f64(c.x), f64(c.v)), f64(c.want), 0.0);
  }
}

// The first-order gradient computed by a traced function, differentiated by an eager tape: the
// outer tape differentiates the function's backward graph as traced.
TEST(CumprodHigherOrder, HessianVectorProductsThroughATracedFirstOrderGradient) {
  // The tape makes a backward tg::function per concrete function, all from one lambda of the
  // library, which trips the warning about functions made from one callable: kept quiet here.
  config::set_log_sink([](const std::string&, void*) {});
  auto make = [](Scan s) {
    return function([s](const Tensor& x) {
      GradientTape tape;
      tape.watch(x);
      return tape.gradient(sum_cumprod(x, s), x);
    });
  };
  std::vector<decltype(make(Scan{}))> grad_fn;
  for (int k = 0; k < 4; ++k) grad_fn.push_back(make(kind_of(k)));
  for (const HvpCase& c : kCases) {
    SCOPED_TRACE(c.label);
    const Tensor x = f64(c.x);
    GradientTape outer;
    outer.watch(x);
    const Tensor g = grad_fn[static_cast<std::size_t>(kind_index(c.scan))](x);
    EXPECT_TENSOR_NEAR(outer.gradient(reduce_sum(g * f64(c.v)), x), f64(c.want), 0.0);
  }
  config::set_log_sink(nullptr);
}

// Third order, by three nested tapes: sum over j, k of d3 sum(cumprod(x)) / dx_i dx_j dx_k at
// x = (2, 0, 3, 0, 5), twice the sum of the triples' values {0,1,2} 1, {0,1,3} 18, {1,2,3} 12,
// {1,3,4} 6 that hold i.
TEST(CumprodHigherOrder, ThirdOrderAtTwoZeros) {
  const Tensor x = f64({2, 0, 3, 0, 5});
  auto third = [](const Tensor& x) {
    GradientTape t3;
    t3.watch(x);
    Tensor g2;
    {
      GradientTape t2;
      t2.watch(x);
      Tensor g1;
      {
        GradientTape t1;
        t1.watch(x);
        g1 = t1.gradient(sum_cumprod(x, {}), x);
      }
      g2 = t2.gradient(reduce_sum(g1), x);
    }
    return t3.gradient(reduce_sum(g2), x);
  };
  const Tensor want = f64({38, 74, 26, 72, 12});
  EXPECT_TENSOR_NEAR(third(x), want, 0.0);
  EXPECT_TENSOR_NEAR(function(third)(x), want, 0.0);
}

// The same along axis 1 of a (2, 3) batch, both rows at once, with float32.
TEST(CumprodHigherOrder, HessianVectorProductAlongAnInnerAxisInFloat32) {
  const Tensor x = constant({{2.f, 0.f, 3.f}, {0.f, 4.f, 0.5f}});
  const Tensor v = constant({{0.f, 0.f, 1.f}, {1.f, 1.f, 1.f}});
  GradientTape outer;
  outer.watch(x);
  Tensor g;
  {
    GradientTape inner;
    inner.watch(x);
    g = inner.gradient(reduce_sum(cumprod(x, 1)), x);
  }
  // Row 2: sum = y0 + y0 y1 + y0 y1 y2, H = [[0, 1 + y2, y1], [1 + y2, 0, y0], [y1, y0, 0]] at
  // (0, 4, 0.5): H ones = (1.5 + 4, 1.5 + 0, 4 + 0) = (5.5, 1.5, 4).
  EXPECT_TENSOR_NEAR(outer.gradient(reduce_sum(g * v), x), constant({{0.f, 2.f, 0.f}, {5.5f, 1.5f, 4.f}}), 0.0);
}

// ---- reduce_prod ----

// The Hessian of sum(reduce_prod(x, axes, keepdims)) times v, by nested tapes.
Tensor prod_hessian_times(const Tensor& x, const Tensor& v, std::vector<int> axes, bool keepdims) {
  GradientTape outer;
  outer.watch(x);
  Tensor g;
  {
    GradientTape inner;
    inner.watch(x);
    g = inner.gradient(reduce_sum(reduce_prod(x, axes, keepdims)), x);
  }
  return outer.gradient(reduce_sum(g * v), x);
}

TEST(ReduceProdAtZeros, FirstOrderGradientIsTheProductOfTheOthers) {
  // One zero: its gradient is the product of the rest (prod / x would be 0 / 0).
  const Tensor x = constant({{2.0, 0.0, 3.0}, {1.0, 5.0, 4.0}}, float64);
  GradientTape tape;
  tape.watch(x);
  EXPECT_TENSOR_NEAR(tape.gradient(reduce_prod(x), x), constant({{0.0, 120.0, 0.0}, {0.0, 0.0, 0.0}}, float64), 0.0);
  // Two zeros in a row: every gradient of that row is 0.
  const Tensor y = constant({{2.0, 0.0, 3.0}, {0.0, 0.0, 4.0}}, float64);
  GradientTape tape2;
  tape2.watch(y);
  EXPECT_TENSOR_NEAR(tape2.gradient(reduce_sum(reduce_prod(y, {1})), y),
                     constant({{0.0, 6.0, 0.0}, {0.0, 0.0, 0.0}}, float64), 0.0);
}

struct ProdCase {
  const char* label;
  std::vector<int> axes;
  bool keepdims;
  Tensor x, want;  // the Hessian times ones
};

std::vector<ProdCase> prod_cases() {
  return {
      // H_ij is the product of all but x_i and x_j: nonzero only in the zero's row and column
      {"all axes, one zero", {}, false, constant({{2.0, 0.0, 3.0}, {1.0, 5.0, 4.0}}, float64),
       constant({{60.0, 274.0, 40.0}, {120.0, 24.0, 30.0}}, float64)},
      // row 2 holds two zeros: H there is nonzero only between them (4)
      {"axis 1, one and two zeros", {1}, false, constant({{2.0, 0.0, 3.0}, {0.0, 0.0, 4.0}}, float64),
       constant({{3.0, 5.0, 2.0}, {4.0, 4.0, 0.0}}, float64)},
      {"axes {0, 2} keepdims, a zero per product", {0, 2}, true,
       constant({{{2.0, 0.0}, {3.0, -1.0}}, {{5.0, 0.5}, {4.0, 0.0}}}, float64),
       constant({{{2.5, 13.5}, {-4.0, 12.0}}, {{1.0, 10.0}, {-3.0, 5.0}}}, float64)},
  };
}

TEST(ReduceProdAtZeros, HessianVectorProductsEagerlyAndTraced) {
  for (const ProdCase& c : prod_cases()) {
    SCOPED_TRACE(c.label);
    const Tensor v = ones_like(c.x);
    EXPECT_TENSOR_NEAR(prod_hessian_times(c.x, v, c.axes, c.keepdims), c.want, 0.0);
    auto traced = function([axes = c.axes, keep = c.keepdims](const Tensor& x, const Tensor& v) {
      return prod_hessian_times(x, v, axes, keep);
    });
    EXPECT_TENSOR_NEAR(traced(c.x, v), c.want, 0.0);
    const TensorSpec none(generalised(c.x), float64);
    EXPECT_TENSOR_NEAR(traced.get_concrete_function(none, none)(c.x, v), c.want, 0.0);
  }
}

}  // namespace
}  // namespace tg
