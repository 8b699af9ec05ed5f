// GRUCell and LSTMCell against hand-written Keras formulas; an unrolled sequence against the same
// sequence in tg::while_loop and tg::for_range, eager and traced, values and gradients.
#include <cmath>

#include "autodiff/grad_check.h"
#include "train/layer_test_util.h"

namespace tg {
namespace {

using testing::check_gradients;
using testing::check_variable_gradients;
using testing::expect_modes_agree;

double sigm(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// Row-major (rows, cols) matrix helpers for the references.
struct Mat {
  std::size_t rows, cols;
  std::vector<double> v;
  double at(std::size_t r, std::size_t c) const { return v[r * cols + c]; }
};
Mat mat(const Tensor& t) {
  const auto d = t.shape().dims();
  return {static_cast<std::size_t>(d[0]), static_cast<std::size_t>(d[1]), t.to_vector<double>()};
}
// (a @ b)[r][c] for a row vector r of a.
double dot_col(const Mat& a, std::size_t r, const Mat& b, std::size_t c) {
  double s = 0;
  for (std::size_t k = 0; k < a.cols; ++k) s += a.at(r, k) * b.at(k, c);
  return s;
}

TEST(Orthogonal, ColumnsOrRowsAreOrthonormal) {
  for (auto [rows, cols] : {std::pair{6, 3}, std::pair{3, 6}, std::pair{4, 4}}) {
    const Tensor q = nn::orthogonal({rows, cols}, 7, 2.0, float64);
    const bool tall = rows >= cols;
    const Tensor gram = tall ? matmul(q, q, /*transpose_a=*/true) : matmul(q, q, false, /*transpose_b=*/true);
    const int64_t n = tall ? cols : rows;
    EXPECT_TENSOR_NEAR(gram, 4.0 * cast(one_hot(range(int64_t{0}, n), n), float64), 1e-12) << rows << "x" << cols;
  }
  EXPECT_TENSOR_EQ(nn::orthogonal({3, 3}, 1), nn::orthogonal({3, 3}, 1));
  EXPECT_EQ(nn::orthogonal({2, 3, 4}, 1).shape(), TensorShape({2, 3, 4}));
  EXPECT_THROW_MSG(nn::orthogonal({3}, 1), InvalidArgumentError, "[orthogonal]", "rank >= 2");
  EXPECT_THROW_MSG(nn::orthogonal({3, 3}, 1, 1.0, int32), TypeError, "float32 or float64");
}

// One GRU step in doubles, Keras's reset_after formulas, gates z, r, h.
std::vector<double> gru_reference(const Mat& x, const Mat& h, const Mat& k, const Mat& u, const Mat& b) {
  const std::size_t n = h.cols;
  std::vector<double> out(x.rows * n);
  for (std::size_t r = 0; r < x.rows; ++r)
    for (std::size_t j = 0; j < n; ++j) {
      auto xp = [&](std::size_t g) { return dot_col(x, r, k, g * n + j) + b.at(0, g * n + j); };
      auto hp = [&](std::size_t g) { return dot_col(h, r, u, g * n + j) + b.at(1, g * n + j); };
      const double z = sigm(xp(0) + hp(0)), rr = sigm(xp(1) + hp(1));
      const double hh = std::tanh(xp(2) + rr * hp(2));
      out[r * n + j] = z * h.at(r, j) + (1 - z) * hh;
    }
  return out;
}

// One LSTM step in doubles, gates i, f, c, o: {h, c}.
std::pair<std::vector<double>, std::vector<double>> lstm_reference(const Mat& x, const Mat& h, const Mat& c,
                                                                   const Mat& k, const Mat& u,
                                                                   const std::vector<double>& b) {
  const std::size_t n = h.cols;
  std::vector<double> ho(x.rows * n), co(x.rows * n);
  for (std::size_t r = 0; r < x.rows; ++r)
    for (std::size_t j = 0; j < n; ++j) {
      auto z = [&](std::size_t g) { return dot_col(x, r, k, g * n + j) + dot_col(h, r, u, g * n + j) + b[g * n + j]; };
      const double cn = sigm(z(1)) * c.at(r, j) + sigm(z(0)) * std::tanh(z(2));
      co[r * n + j] = cn;
      ho[r * n + j] = sigm(z(3)) * std::tanh(cn);
    }
  return {ho, co};
}

TEST(GRUCell, OneStepMatchesKerasFormulas) {
  nn::GRUCell cell(3, 2, /*seed=*/5, float64);
  testing::Random rng(1);
  auto vars = cell.trainable_variables();
  vars[2].assign(rng.uniform({2, 6}, -0.5, 0.5));  // a nonzero bias, so both bias rows count
  EXPECT_EQ(vars[0].shape(), TensorShape({3, 6}));
  EXPECT_EQ(vars[1].shape(), TensorShape({2, 6}));
  EXPECT_EQ(vars[1].name(), "gru_cell/recurrent_kernel");
  const Tensor x = rng.uniform({4, 3}), h = rng.uniform({4, 2});
  const auto expected = gru_reference(mat(x), mat(h), mat(vars[0].read_value()), mat(vars[1].read_value()),
                                      mat(vars[2].read_value()));
  EXPECT_TENSOR_NEAR(cell(x, h), constant(expected, {4, 2}, float64), 1e-12);
  expect_modes_agree([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{cell(in[0], in[1])}; },
                     {x, h}, 1e-12);
  check_gradients({"", "GRUCell x and h", [&](const std::vector<Tensor>& in) { return cell(in[0], in[1]); },
                   {x, h}, 1e-6, 1e-6});
  check_variable_gradients([&] { return reduce_sum(cell(x, h) * h); }, vars);
}

TEST(LSTMCell, OneStepMatchesKerasFormulasWithUnitForgetBias) {
  nn::LSTMCell cell(3, 2, 6, float64);
  auto vars = cell.trainable_variables();
  EXPECT_TENSOR_EQ(vars[2].read_value(), constant({0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0}, float64));
  testing::Random rng(2);
  vars[2].assign(vars[2].read_value() + rng.uniform({8}, -0.3, 0.3));
  const Tensor x = rng.uniform({4, 3}), h = rng.uniform({4, 2}), c = rng.uniform({4, 2});
  const auto [he, ce] = lstm_reference(mat(x), mat(h), mat(c), mat(vars[0].read_value()), mat(vars[1].read_value()),
                                       vars[2].read_value().to_vector<double>());
  const auto [h1, c1] = cell(x, h, c);
  EXPECT_TENSOR_NEAR(h1, constant(he, {4, 2}, float64), 1e-12);
  EXPECT_TENSOR_NEAR(c1, constant(ce, {4, 2}, float64), 1e-12);
  expect_modes_agree(
      [&](const std::vector<Tensor>& in) {
        auto [a, b] = cell(in[0], in[1], in[2]);
        return std::vector<Tensor>{a, b};
      },
      {x, h, c}, 1e-12);
  check_gradients({"", "LSTMCell h'", [&](const std::vector<Tensor>& in) { return cell(in[0], in[1], in[2]).first; },
                   {x, h, c}, 1e-6, 1e-6});
  check_gradients({"", "LSTMCell c'", [&](const std::vector<Tensor>& in) { return cell(in[0], in[1], in[2]).second; },
                   {x, h, c}, 1e-6, 1e-6});
  check_variable_gradients([&] { return reduce_sum(cell(x, h, c).first * c); }, vars);
}

// The final state of a sequence xs (steps, batch, input) three ways: a C++ loop (unrolled when
// traced), tg::while_loop and tg::for_range. The loops read the weights once, before the loop.
Tensor gru_unrolled(const nn::GRUCell& cell, const Tensor& xs, const Tensor& h0, int64_t steps) {
  Tensor h = h0;
  for (int64_t t = 0; t < steps; ++t) h = cell(xs[t], h);
  return h;
}
Tensor gru_while(const nn::GRUCell& cell, const Tensor& xs, const Tensor& h0) {
  const nn::RecurrentWeights w = cell.read_weights();
  const Tensor steps = shape(xs)[0];
  auto [t, h] = while_loop([&](const Tensor& i, const Tensor&) { return i < steps; },
                           [&](const Tensor& i, const Tensor& hh) { return std::tuple{i + 1, cell(gather(xs, i), hh, w)}; },
                           std::tuple{constant(0), h0});
  return h;
}
std::pair<Tensor, Tensor> lstm_unrolled(const nn::LSTMCell& cell, const Tensor& xs, Tensor h, Tensor c,
                                        int64_t steps) {
  for (int64_t t = 0; t < steps; ++t) std::tie(h, c) = cell(xs[t], h, c);
  return {h, c};
}
std::pair<Tensor, Tensor> lstm_for_range(const nn::LSTMCell& cell, const Tensor& xs, const Tensor& h0,
                                         const Tensor& c0) {
  const nn::RecurrentWeights w = cell.read_weights();
  return for_range(shape(xs)[0], std::pair<Tensor, Tensor>{h0, c0},
                   [&](const Tensor& i, const std::pair<Tensor, Tensor>& s) {
                     return cell(gather(xs, i), s.first, s.second, w);
                   });
}

TEST(GRUCell, AWhileLoopOverASequenceEqualsTheUnrolledStepsWithTheSameGradients) {
  nn::GRUCell cell(3, 4, 9, float64);
  testing::Random rng(4);
  const Tensor xs = rng.uniform({5, 2, 3}), h0 = rng.uniform({2, 4});
  const Tensor unrolled = gru_unrolled(cell, xs, h0, 5);
  EXPECT_TENSOR_NEAR(gru_while(cell, xs, h0), unrolled, 1e-12) << "eager";
  auto traced_while = function([&](const Tensor& a, const Tensor& b) { return gru_while(cell, a, b); });
  auto traced_unrolled = function([&](const Tensor& a, const Tensor& b) { return gru_unrolled(cell, a, b, 5); });
  EXPECT_TENSOR_NEAR(traced_while(xs, h0), unrolled, 1e-12);
  EXPECT_TENSOR_NEAR(traced_unrolled(xs, h0), unrolled, 1e-12);

  // Gradients with respect to the inputs, the initial state and every weight.
  const std::vector<Variable> vars = cell.trainable_variables();
  auto grads = [&](bool use_loop, const Tensor& x, const Tensor& h_init) {
    GradientTape tape;
    tape.watch(x);
    tape.watch(h_init);
    const Tensor h = use_loop ? gru_while(cell, x, h_init) : gru_unrolled(cell, x, h_init, 5);
    return tape.gradient(reduce_sum(h * h), {x, h_init, vars[0], vars[1], vars[2]});
  };
  const std::vector<Tensor> reference = grads(false, xs, h0);
  const std::vector<Tensor> eager_loop = grads(true, xs, h0);
  auto traced_grads = function([&](const Tensor& x, const Tensor& h) { return grads(true, x, h); });
  const std::vector<Tensor> traced_loop = traced_grads(xs, h0);
  ASSERT_EQ(reference.size(), 5u);
  for (std::size_t i = 0; i < reference.size(); ++i) {
    EXPECT_TENSOR_NEAR(eager_loop[i], reference[i], 1e-10) << "eager, gradient " << i;
    EXPECT_TENSOR_NEAR(traced_loop[i], reference[i], 1e-10) << "traced while_loop, gradient " << i;
  }
  // And the unrolled gradients against finite differences.
  check_variable_gradients([&] { return reduce_sum(square(gru_unrolled(cell, xs, h0, 5))); }, vars);
}

TEST(LSTMCell, AForRangeOverASequenceEqualsTheUnrolledStepsWithTheSameGradients) {
  nn::LSTMCell cell(2, 3, 10, float64);
  testing::Random rng(6);
  const Tensor xs = rng.uniform({4, 2, 2}), h0 = rng.uniform({2, 3}), c0 = rng.uniform({2, 3});
  const auto [hu, cu] = lstm_unrolled(cell, xs, h0, c0, 4);
  const auto [hl, cl] = lstm_for_range(cell, xs, h0, c0);
  EXPECT_TENSOR_NEAR(hl, hu, 1e-12);
  EXPECT_TENSOR_NEAR(cl, cu, 1e-12);
  auto traced = function([&](const Tensor& a, const Tensor& b, const Tensor& c) {
    auto [h, cc] = lstm_for_range(cell, a, b, c);
    return std::vector<Tensor>{h, cc};
  });
  const auto out = traced(xs, h0, c0);
  EXPECT_TENSOR_NEAR(out[0], hu, 1e-12);
  EXPECT_TENSOR_NEAR(out[1], cu, 1e-12);

  const std::vector<Variable> vars = cell.trainable_variables();
  auto grads = [&](bool use_loop, const Tensor& x, const Tensor& c_init) {
    GradientTape tape;
    tape.watch(x);
    tape.watch(c_init);
    const auto [h, c] = use_loop ? lstm_for_range(cell, x, h0, c_init) : lstm_unrolled(cell, x, h0, c_init, 4);
    return tape.gradient(reduce_sum(h * c), {x, c_init, vars[0], vars[1], vars[2]});
  };
  const std::vector<Tensor> reference = grads(false, xs, c0);
  auto traced_grads = function([&](const Tensor& x, const Tensor& c) { return grads(true, x, c); });
  const std::vector<Tensor> traced_loop = traced_grads(xs, c0);
  const std::vector<Tensor> eager_loop = grads(true, xs, c0);
  for (std::size_t i = 0; i < reference.size(); ++i) {
    EXPECT_TENSOR_NEAR(eager_loop[i], reference[i], 1e-10) << "eager, gradient " << i;
    EXPECT_TENSOR_NEAR(traced_loop[i], reference[i], 1e-10) << "traced for_range, gradient " << i;
  }
  check_variable_gradients([&] {
    const auto [h, c] = lstm_unrolled(cell, xs, h0, c0, 4);
    return reduce_sum(h * c);
  }, vars);
}

TEST(RecurrentCells, TypedErrors) {
  EXPECT_THROW_MSG(nn::GRUCell(0, 2), InvalidArgumentError, "[GRUCell]", "input_dim > 0");
  EXPECT_THROW_MSG(nn::LSTMCell(2, 0), InvalidArgumentError, "[LSTMCell]", "units > 0");
  nn::GRUCell gru(3, 2);
  EXPECT_THROW_MSG(gru(zeros({4, 2}), zeros({4, 2})), InvalidArgumentError, "[GRUCell]", "(4, 2)");
  EXPECT_THROW_MSG(gru(zeros({4, 3}), zeros({4, 3})), InvalidArgumentError, "state h");
  EXPECT_THROW_MSG(gru(zeros({4, 3}, float64), zeros({4, 2}, float64)), InvalidArgumentError, "dtype");
  EXPECT_THROW_MSG(gru(zeros({1, 4, 3}), zeros({4, 2})), InvalidArgumentError, "(batch, 3)");
  EXPECT_THROW_MSG(gru(zeros({4, 3}), zeros({4, 2}), nn::RecurrentWeights{}), ValueError, "read_weights");
  nn::LSTMCell lstm(3, 2);
  EXPECT_THROW_MSG(lstm(zeros({4, 3}), zeros({4, 2}), zeros({4, 3})), InvalidArgumentError, "state c");
}

}  // namespace
}  // namespace tg
