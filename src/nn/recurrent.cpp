// GRUCell and LSTMCell (Keras's formulas and gate order) on their shared RecurrentCell, and the
// orthogonal initializer of their recurrent kernels. One step each; a sequence is a C++ loop,
// tg::while_loop or tg::for_range.
#include <algorithm>
#include <cmath>
#include <random>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "nn/layer_checks.h"
#include "ops/runtime_shape_checks.h"
#include "tracegraph/nn.h"
#include "tracegraph/ops.h"

namespace tg::nn {

using detail::op_error;

Tensor orthogonal(const TensorShape& shape, uint64_t seed, double gain, DType dtype) {
  const char* op = "orthogonal";
  if (!shape.is_fully_defined() || shape.rank() < 2)
    op_error<InvalidArgumentError>(op, "expected a fully defined shape of rank >= 2, got ", shape.to_string());
  check_float_dtype(op, dtype);
  const int64_t cols = shape.dims().back();
  const int64_t rows = shape.num_elements() / std::max<int64_t>(cols, 1);
  if (shape.num_elements() == 0) return zeros(shape, dtype);
  // Keras: QR of a (max, min) normal matrix with R's diagonal made positive, transposed when
  // there are fewer rows than columns. Gram-Schmidt gives that Q (a positive diagonal) directly.
  const auto n = static_cast<std::size_t>(std::max(rows, cols));
  const auto m = static_cast<std::size_t>(std::min(rows, cols));
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<std::vector<double>> q(m, std::vector<double>(n));  // q[j] is column j
  for (std::size_t j = 0; j < m; ++j) {
    for (double& v : q[j]) v = normal(gen);
    for (int pass = 0; pass < 2; ++pass)  // re-orthogonalise once: exact to rounding
      for (std::size_t k = 0; k < j; ++k) {
        double dot = 0;
        for (std::size_t i = 0; i < n; ++i) dot += q[k][i] * q[j][i];
        for (std::size_t i = 0; i < n; ++i) q[j][i] -= dot * q[k][i];
      }
    double norm = 0;
    for (double v : q[j]) norm += v * v;
    norm = std::sqrt(norm);  // > 0 with probability 1 for normal draws with n >= m
    for (double& v : q[j]) v /= norm;
  }
  std::vector<double> flat(static_cast<std::size_t>(rows * cols));
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r)
    for (std::size_t c = 0; c < static_cast<std::size_t>(cols); ++c)
      flat[r * static_cast<std::size_t>(cols) + c] = gain * (rows >= cols ? q[c][r] : q[r][c]);
  return cast(constant(flat, shape, float64), dtype);
}

namespace {

// The cell's step inputs: x (batch, input_dim), each state (batch, units), the cell's dtype.
void check_step_input(const char* cell, const std::string& name, const Tensor& t, const char* what, DType dtype,
                      int64_t width) {
  if (!t.defined()) op_error<ValueError>(cell, "layer '", name, "' got an empty tg::Tensor as ", what);
  if (t.dtype() != dtype)
    op_error<InvalidArgumentError>(cell, "layer '", name, "' has dtype ", to_string(dtype), " but ", what,
                                   " has dtype ", to_string(t.dtype()), "; tg::cast it first");
  const TensorShape s = detail::static_shape(t);
  if (!s.has_rank() || s.rank() != 2 || (s.dims()[1] != None && s.dims()[1] != width))
    op_error<InvalidArgumentError>(cell, "layer '", name, "' expects ", what, " of shape (batch, ", width,
                                   "), got ", s.to_string());
}

// A checked state t whose width is None while tracing, checked again when the graph runs: x and
// h meet the kernels in a matmul, which checks their widths, but LSTM's c only meets (batch,
// units) values elementwise, where a width of 1 would broadcast. The (batch, width) view of t
// has t's shape exactly when t is (batch, width).
Tensor checked_width(const char* cell, const std::string& name, const Tensor& t, const char* what, int64_t width) {
  const TensorShape s = detail::static_shape(t);
  if (s.dims()[1] != None) return t;
  return detail::ensure_same_shape(t, reshape(t, {-1, width}), cell, what, detail::str_cat("its (batch, ", width, ") view"),
                                   detail::str_cat("layer '", name, "' expects ", what, " of shape (batch, ", width, ")"));
}

void check_weights(const char* cell, const RecurrentWeights& w) {
  if (!w.kernel.defined() || !w.recurrent_kernel.defined() || !w.bias.defined())
    op_error<ValueError>(cell, "the RecurrentWeights have an empty tg::Tensor; get them from read_weights()");
}

// Columns [k * units, (k + 1) * units) of a (batch, gates * units) matrix: gate k.
Tensor gate(const Tensor& t, int64_t k, int64_t units) { return slice(t, {0, k * units}, {-1, units}); }

}  // namespace

// ---- RecurrentCell ----

RecurrentCell::RecurrentCell(const char* cell, int64_t input_dim, int64_t units, int64_t gates, uint64_t seed,
                             DType dtype, std::string name, Tensor (*initial_bias)(int64_t units, DType dtype))
    : input_dim_(input_dim),
      units_(units),
      name_(checked_layer_name(cell, std::move(name), {{"input_dim", input_dim}, {"units", units}}, dtype)),
      kernel_(glorot_uniform({input_dim, gates * units}, seed, dtype), name_ + "/kernel"),
      recurrent_kernel_(orthogonal({units, gates * units}, seed + 1, 1.0, dtype), name_ + "/recurrent_kernel"),
      bias_(initial_bias(units, dtype), name_ + "/bias") {}

RecurrentWeights RecurrentCell::read_weights() const {
  return {kernel_.read_value(), recurrent_kernel_.read_value(), bias_.read_value()};
}

// ---- GRUCell ----

GRUCell::GRUCell(int64_t input_dim, int64_t units, uint64_t seed, DType dtype, std::string name)
    : RecurrentCell("GRUCell", input_dim, units, /*gates=*/3, seed, dtype, std::move(name),
                    // zeros: a row of input biases and a row of recurrent biases (reset_after)
                    [](int64_t u, DType d) { return zeros({2, 3 * u}, d); }) {}

Tensor GRUCell::operator()(const Tensor& x, const Tensor& h) const { return (*this)(x, h, read_weights()); }

Tensor GRUCell::operator()(const Tensor& x, const Tensor& h, const RecurrentWeights& w) const {
  const char* op = "GRUCell";
  check_weights(op, w);
  check_step_input(op, name_, x, "x", kernel_.dtype(), input_dim_);
  check_step_input(op, name_, h, "the state h", kernel_.dtype(), units_);
  const int64_t u = units_;
  // reset_after: the reset gate scales the recurrent projection after its bias is added.
  const Tensor input_bias = reshape(slice(w.bias, {0, 0}, {1, -1}), {3 * u});
  const Tensor recurrent_bias = reshape(slice(w.bias, {1, 0}, {1, -1}), {3 * u});
  const Tensor xp = matmul(x, w.kernel) + input_bias;
  const Tensor hp = matmul(h, w.recurrent_kernel) + recurrent_bias;
  const Tensor z = sigmoid(gate(xp, 0, u) + gate(hp, 0, u));
  const Tensor r = sigmoid(gate(xp, 1, u) + gate(hp, 1, u));
  const Tensor candidate = tanh(gate(xp, 2, u) + r * gate(hp, 2, u));
  return z * h + (1.0 - z) * candidate;
}

// ---- LSTMCell ----

LSTMCell::LSTMCell(int64_t input_dim, int64_t units, uint64_t seed, DType dtype, std::string name)
    : RecurrentCell("LSTMCell", input_dim, units, /*gates=*/4, seed, dtype, std::move(name),
                    // unit_forget_bias: the forget gate starts at 1, so the cell remembers from the start.
                    [](int64_t u, DType d) { return concat({zeros({u}, d), ones({u}, d), zeros({2 * u}, d)}, 0); }) {}

std::pair<Tensor, Tensor> LSTMCell::operator()(const Tensor& x, const Tensor& h, const Tensor& c) const {
  return (*this)(x, h, c, read_weights());
}

std::pair<Tensor, Tensor> LSTMCell::operator()(const Tensor& x, const Tensor& h, const Tensor& c,
                                               const RecurrentWeights& w) const {
  const char* op = "LSTMCell";
  check_weights(op, w);
  check_step_input(op, name_, x, "x", kernel_.dtype(), input_dim_);
  check_step_input(op, name_, h, "the state h", kernel_.dtype(), units_);
  check_step_input(op, name_, c, "the state c", kernel_.dtype(), units_);
  const int64_t u = units_;
  const Tensor z = matmul(x, w.kernel) + matmul(h, w.recurrent_kernel) + w.bias;
  const Tensor i = sigmoid(gate(z, 0, u));
  const Tensor f = sigmoid(gate(z, 1, u));
  const Tensor c_new = f * checked_width(op, name_, c, "the state c", u) + i * tanh(gate(z, 2, u));
  const Tensor o = sigmoid(gate(z, 3, u));
  return {o * tanh(c_new), c_new};
}

}  // namespace tg::nn
