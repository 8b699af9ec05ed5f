// GRUCell and LSTMCell (Keras's formulas and gate order) on their shared RecurrentCell, and the
// orthogonal initializer of their recurrent kernels; the LSTM and GRU layers, which run a cell's
// step over a whole sequence in a tg::for_range.
#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "core/check.h"
#include "core/thread_pool.h"
#include "core/tensor_impl.h"
#include "nn/layer_checks.h"
#include "ops/op.h"
#include "ops/runtime_shape_checks.h"
#include "tracegraph/control_flow.h"
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

// The cells' steps from xk = x W (batch, gates * units), x's product with the kernel: a cell
// multiplies its x, the layers multiply the whole sequence's x in one product before their loop.
// Each sums in the cell's order, so a layer's step gives the cell's bits.
Tensor gru_step(const Tensor& xk, const Tensor& h, const RecurrentWeights& w, int64_t u) {
  // reset_after: the reset gate scales the recurrent projection after its bias is added.
  const Tensor input_bias = reshape(slice(w.bias, {0, 0}, {1, -1}), {3 * u});
  const Tensor recurrent_bias = reshape(slice(w.bias, {1, 0}, {1, -1}), {3 * u});
  const Tensor xp = xk + input_bias;
  const Tensor hp = matmul(h, w.recurrent_kernel) + recurrent_bias;
  const Tensor z = sigmoid(gate(xp, 0, u) + gate(hp, 0, u));
  const Tensor r = sigmoid(gate(xp, 1, u) + gate(hp, 1, u));
  const Tensor candidate = tanh(gate(xp, 2, u) + r * gate(hp, 2, u));
  return z * h + (1.0 - z) * candidate;
}

// `c` has passed checked_width.
std::pair<Tensor, Tensor> lstm_step(const Tensor& xk, const Tensor& h, const Tensor& c, const RecurrentWeights& w,
                                    int64_t u) {
  const Tensor z = xk + matmul(h, w.recurrent_kernel) + w.bias;
  const Tensor i = sigmoid(gate(z, 0, u));
  const Tensor f = sigmoid(gate(z, 1, u));
  const Tensor c_new = f * c + i * tanh(gate(z, 2, u));
  const Tensor o = sigmoid(gate(z, 3, u));
  return {o * tanh(c_new), c_new};
}

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
  return gru_step(matmul(x, w.kernel), h, w, units_);
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
  return lstm_step(matmul(x, w.kernel), h, checked_width(op, name_, c, "the state c", units_), w, units_);
}

// ---- LSTM and GRU layers ----

namespace {

// The layer's options with its default name, after the layer's own checks (so that errors name
// the layer, not its cell).
RecurrentOptions layer_options(RecurrentOptions o, const char* layer, const char* default_name, int64_t input_dim,
                               int64_t units) {
  if (o.name.empty()) o.name = default_name;
  o.name = checked_layer_name(layer, std::move(o.name), {{"input_dim", input_dim}, {"units", units}}, o.dtype);
  return o;
}

// One step of a cell on xk_t = x_t W (the step's row of project_sequence) and the states:
// {output, new states}.
using SequenceStep = std::function<std::pair<Tensor, std::vector<Tensor>>(const Tensor&, const std::vector<Tensor>&)>;

// What run_sequence needs to know of the layer.
struct SequenceLayer {
  const char* op;  // "LSTM" / "GRU"
  const std::string& name;
  int64_t input_dim, units;
  std::size_t num_states;  // LSTM 2 (h, c), GRU 1 (h)
  const RecurrentOptions& options;
  const Tensor& kernel;  // (input_dim, width)
  int64_t width;         // gates * units
};

// x (time, batch, input_dim) times the kernel, every step in one product: (time, batch, width).
// A step's own product of its 32 x 64 rows is too small to split over threads, and the loop's
// gradient then has every step's rows for one product as well (dW = x^T dxk).
Tensor project_sequence(const SequenceLayer& l, const Tensor& x_tm) {
  const Tensor flat = matmul(reshape(x_tm, {-1, l.input_dim}), l.kernel);
  const TensorShape s = detail::static_shape(x_tm);
  if (s.dims()[0] != None && s.dims()[1] != None) return reshape(flat, {s.dims()[0], s.dims()[1], l.width});
  const Tensor st = shape(x_tm);
  return reshape(flat, stack({st[0], st[1], cast(constant(l.width), st.dtype())}));
}

// The mask checked: bool, (batch, time) matching x (when the graph runs if a dim is None).
Tensor checked_mask(const SequenceLayer& l, const Tensor& mask, const Tensor& x) {
  if (mask.dtype() != bool_)
    op_error<TypeError>(l.op, "layer '", l.name, "' expects a bool mask, got ", to_string(mask.dtype()),
                        "; pass tg::cast(mask, tg::bool_)");
  const TensorShape s = detail::static_shape(mask);
  if (!s.has_rank() || s.rank() != 2)
    op_error<InvalidArgumentError>(l.op, "layer '", l.name, "' expects a mask of shape (batch, time), got ",
                                   s.to_string());
  return detail::ensure_same_dims(mask, x, {0, 1}, {0, 1}, l.op, "the mask", "the inputs",
                                  detail::str_cat("layer '", l.name, "' expects a mask of shape (batch, time) ",
                                                  "for inputs of shape (batch, time, features)"));
}

// The initial states checked, or zeros (batch, units).
std::vector<Tensor> initial_states(const SequenceLayer& l, const std::vector<Tensor>& given, const Tensor& x) {
  const DType dtype = l.options.dtype;
  if (given.empty()) {
    const Tensor sx = shape(x);
    const Tensor zero = zeros(stack({sx[0], cast(constant(l.units), sx.dtype())}), dtype);
    return std::vector<Tensor>(l.num_states, zero);
  }
  if (given.size() != l.num_states)
    op_error<ValueError>(l.op, "layer '", l.name, "' takes ", l.num_states, l.num_states == 1 ? " state (h)" : " states (h, c)",
                         " as initial_state, got ", given.size(), " tensors");
  std::vector<Tensor> out;
  for (std::size_t k = 0; k < given.size(); ++k) {
    const Tensor& t = given[k];
    const std::string what = detail::str_cat("initial_state[", k, "]");
    if (!t.defined()) op_error<ValueError>(l.op, "layer '", l.name, "' got an empty tg::Tensor as ", what);
    if (t.dtype() != dtype)
      op_error<InvalidArgumentError>(l.op, "layer '", l.name, "' has dtype ", to_string(dtype), " but ", what,
                                     " has dtype ", to_string(t.dtype()), "; tg::cast it first");
    const TensorShape s = detail::static_shape(t);
    if (!s.has_rank() || s.rank() != 2 || (s.dims()[1] != None && s.dims()[1] != l.units))
      op_error<InvalidArgumentError>(l.op, "layer '", l.name, "' expects ", what, " of shape (batch, ", l.units,
                                     "), got ", s.to_string());
    out.push_back(detail::ensure_same_dims(t, x, {0}, {0}, l.op, what, "the inputs",
                                           detail::str_cat("layer '", l.name, "' expects initial states with ",
                                                           "the inputs' batch size")));
  }
  return out;
}

// A layer splits its batch between two loops (on two threads) when each gets at least this
// many rows.
constexpr int64_t kMinRowsPerLoop = 8;

std::vector<Tensor> run_loop(const SequenceLayer& l, const Tensor& x, const Tensor& mask, std::vector<Tensor> carried,
                             const SequenceStep& step);

// Keras's RNN loop (keras.backend.rnn without unroll): the step over the time axis of x
// (batch, time, features), time-major inside, in one tg::for_range. With a mask, a masked row
// keeps its states and repeats its previous output (zeros at first). Returns {output} or
// {output, states...}.
std::vector<Tensor> run_sequence(const SequenceLayer& l, const Tensor& x_in, const RecurrentCall& call,
                                 const SequenceStep& step) {
  const RecurrentOptions& o = l.options;
  if (!x_in.defined()) op_error<ValueError>(l.op, "layer '", l.name, "' got an empty tg::Tensor as its input");
  if (x_in.dtype() != o.dtype)
    op_error<InvalidArgumentError>(l.op, "layer '", l.name, "' has dtype ", to_string(o.dtype),
                                   " but the input has dtype ", to_string(x_in.dtype()), "; tg::cast the input first");
  const TensorShape xs = detail::static_shape(x_in);
  if (!xs.has_rank() || xs.rank() != 3 || (xs.dims()[2] != None && xs.dims()[2] != l.input_dim))
    op_error<InvalidArgumentError>(l.op, "layer '", l.name, "' expects inputs of shape (batch, time, ", l.input_dim,
                                   "), got ", xs.to_string());
  if (xs.dims()[1] == 0)
    op_error<InvalidArgumentError>(l.op, "layer '", l.name, "' expects at least one time step, got inputs of shape ",
                                   xs.to_string());
  // A None feature dim is checked when the graph runs: the sequence's product flattens x to
  // (time * batch, input_dim) rows, which any multiple of input_dim would fill.
  const Tensor x = xs.dims()[2] != None
                       ? x_in
                       : detail::ensure_same_dims(x_in, l.kernel, {2}, {0}, l.op, "the inputs", "the kernel",
                                                  detail::str_cat("layer '", l.name, "' expects inputs of shape (batch, time, ",
                                                                  l.input_dim, ")"));
  const Tensor mask = call.mask.defined() ? checked_mask(l, call.mask, x) : Tensor();
  std::vector<Tensor> states = initial_states(l, call.initial_state, x);
  const int64_t batch = xs.dims()[0];
  std::vector<Tensor> out;  // {output, states...}
  if (detail::current_recorder() && detail::num_threads() > 1 && batch != None && batch >= 2 * kMinRowsPerLoop) {
    // Traced for more than one thread: rows of the batch never meet in the loop, so each half
    // of the batch runs a loop of its own, and the executor runs the two loops side by side on
    // two threads (their gradients' loops too). A step's small ops are a serial chain that
    // splitting each op over the cores does not speed up (B32 T32 I64 H128 Adam step on 2
    // threads: one loop 6.1-7.6 ms, two 5.0-6.5). The halves' outputs are the rows of the
    // whole's; the weight gradients add the halves' sums.
    const int64_t half = batch / 2;
    auto rows = [](const Tensor& t, int64_t begin, int64_t count) {
      std::vector<int64_t> b(static_cast<std::size_t>(detail::static_shape(t).rank()), 0), size(b.size(), -1);
      b[0] = begin;
      size[0] = count;
      return slice(t, b, size);
    };
    std::vector<std::vector<Tensor>> parts;
    for (const auto& [begin, count] : {std::pair{int64_t{0}, half}, std::pair{half, batch - half}}) {
      std::vector<Tensor> part_states;
      for (const Tensor& t : states) part_states.push_back(rows(t, begin, count));
      parts.push_back(run_loop(l, rows(x, begin, count), mask.defined() ? rows(mask, begin, count) : Tensor(),
                               std::move(part_states), step));
    }
    const std::size_t wanted = o.return_state ? parts[0].size() : 1;
    for (std::size_t k = 0; k < wanted; ++k) out.push_back(concat({parts[0][k], parts[1][k]}, 0));
  } else {
    out = run_loop(l, x, mask, std::move(states), step);
  }
  if (!o.return_state) out.resize(1);
  return out;
}

// The loop of run_sequence over checked inputs: {output, final states...}.
std::vector<Tensor> run_loop(const SequenceLayer& l, const Tensor& x, const Tensor& mask, std::vector<Tensor> carried,
                             const SequenceStep& step) {
  const RecurrentOptions& o = l.options;
  const bool masked = mask.defined();
  const std::size_t n = carried.size();
  if (masked) carried.push_back(zeros_like(carried[0]));  // the previous output

  Tensor x_tm = transpose(x, {1, 0, 2});  // (time, batch, features): one gather per step
  Tensor mask_tm = masked ? transpose(mask, {1, 0}) : Tensor();
  if (o.go_backwards) {
    x_tm = reverse(x_tm, {0});
    if (masked) mask_tm = reverse(mask_tm, {0});
  }
  const Tensor steps = shape(x_tm)[0];
  const Tensor xk_tm = project_sequence(l, x_tm);

  // One iteration: the step, then the mask's selection. {output, next carried}.
  auto iteration = [&](const Tensor& i, const std::vector<Tensor>& c) {
    const std::vector<Tensor> states(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(n));
    auto [out, next] = step(gather(xk_tm, i), states);
    if (masked) {
      const Tensor keep = reshape(gather(mask_tm, i), {-1, 1});  // (batch, 1): broadcasts over units
      for (std::size_t k = 0; k < n; ++k) next[k] = where(keep, next[k], states[k]);
      out = where(keep, out, c[n]);
      next.push_back(out);
    }
    return std::pair<Tensor, std::vector<Tensor>>{out, std::move(next)};
  };

  std::vector<Tensor> final_carried;
  Tensor output;
  if (o.return_sequences) {
    // Step i's output is added into row i of a (time, batch, units) loop variable: TensorArray
    // ops carry no gradient, tensor_scatter_nd_add does.
    const Tensor st = shape(x_tm);
    const Tensor sequence = zeros(stack({st[0], st[1], cast(constant(l.units), st.dtype())}), o.dtype);
    auto [c, outputs] = for_range(steps, std::pair<std::vector<Tensor>, Tensor>{carried, sequence},
                                  [&](const Tensor& i, const std::pair<std::vector<Tensor>, Tensor>& s) {
                                    auto [out, next] = iteration(i, s.first);
                                    return std::pair<std::vector<Tensor>, Tensor>{
                                        std::move(next),
                                        tensor_scatter_nd_add(s.second, reshape(i, {1, 1}), expand_dims(out, 0))};
                                  });
    final_carried = std::move(c);
    output = transpose(outputs, {1, 0, 2});
  } else {
    final_carried = for_range(steps, carried, [&](const Tensor& i, const std::vector<Tensor>& s) {
      return iteration(i, s).second;
    });
    output = masked ? final_carried[n] : final_carried[0];  // the output is h when nothing is masked
  }
  std::vector<Tensor> result{output};
  result.insert(result.end(), final_carried.begin(), final_carried.begin() + static_cast<std::ptrdiff_t>(n));
  return result;
}

}  // namespace

LSTM::LSTM(int64_t input_dim, int64_t units, RecurrentOptions options)
    : options_(layer_options(std::move(options), "LSTM", "lstm", input_dim, units)),
      input_dim_(input_dim),
      cell_(input_dim, units, options_.seed, options_.dtype, options_.name + "/lstm_cell") {}

std::vector<Tensor> LSTM::operator()(const Tensor& x, const RecurrentCall& call) const {
  const RecurrentWeights w = cell_.read_weights();  // before the loop: gradients reach the Variables
  const int64_t u = cell_.units();
  return run_sequence({"LSTM", options_.name, input_dim_, u, 2, options_, w.kernel, 4 * u}, x, call,
                      [&](const Tensor& xk, const std::vector<Tensor>& s) {
                        auto [h, c] = lstm_step(xk, s[0], checked_width("LSTM", options_.name, s[1], "the state c", u), w, u);
                        return std::pair<Tensor, std::vector<Tensor>>{h, {h, c}};
                      });
}

GRU::GRU(int64_t input_dim, int64_t units, RecurrentOptions options)
    : options_(layer_options(std::move(options), "GRU", "gru", input_dim, units)),
      input_dim_(input_dim),
      cell_(input_dim, units, options_.seed, options_.dtype, options_.name + "/gru_cell") {}

std::vector<Tensor> GRU::operator()(const Tensor& x, const RecurrentCall& call) const {
  const RecurrentWeights w = cell_.read_weights();
  const int64_t u = cell_.units();
  return run_sequence({"GRU", options_.name, input_dim_, u, 1, options_, w.kernel, 3 * u}, x, call,
                      [&](const Tensor& xk, const std::vector<Tensor>& s) {
                        Tensor h = gru_step(xk, s[0], w, u);
                        return std::pair<Tensor, std::vector<Tensor>>{h, {h}};
                      });
}

}  // namespace tg::nn
