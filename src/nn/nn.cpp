// The initializers, Dropout, Dense, and the classifier's loss and accuracy, composed from public ops so that
// gradients come from the ops' own rules.
#include <cmath>
#include <mutex>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "nn/init_seed.h"
#include "ops/runtime_shape_checks.h"
#include "ops/cross_entropy.h"
#include "tracegraph/nn.h"
#include "tracegraph/ops.h"

namespace tg::nn {

using detail::op_error;
using detail::seed_tensor;

namespace {

struct Fans {
  double in = 1, out = 1;
};

// Checks an initializer's arguments and computes Keras's fans of the shape.
Fans fans_of(const char* op, const TensorShape& shape, DType dtype) {
  if (!shape.is_fully_defined())
    op_error<InvalidArgumentError>(op, "expected a fully defined shape, got ", shape.to_string(),
                                   "; initial values need every dimension");
  if (!is_floating(dtype)) op_error<TypeError>(op, "expected float32, float64 or bfloat16, got ", to_string(dtype));
  const auto& d = shape.dims();
  Fans f;
  if (d.size() == 1) {
    f.in = f.out = static_cast<double>(d[0]);
  } else if (d.size() >= 2) {
    double receptive = 1;
    for (std::size_t i = 0; i + 2 < d.size(); ++i) receptive *= static_cast<double>(d[i]);
    f.in = static_cast<double>(d[d.size() - 2]) * receptive;
    f.out = static_cast<double>(d[d.size() - 1]) * receptive;
  }
  return f;
}

// The stateless random ops draw float32 or float64: a bfloat16 initial value (a "bfloat16" layer
// policy) is drawn in float32 and rounded to nearest even.
DType draw_dtype(DType dtype) { return dtype == bfloat16 ? float32 : dtype; }
Tensor rounded_to(const Tensor& drawn, DType dtype) { return drawn.dtype() == dtype ? drawn : cast(drawn, dtype); }

// The stddev of a normal whose 2-stddev truncation has stddev 1 (Keras's constant).
constexpr double kTruncatedStddev = 0.87962566103423978;

Tensor variance_scaling_normal(const char* op, const TensorShape& shape, uint64_t seed, DType dtype, double scale,
                               bool fan_avg) {
  const Fans f = fans_of(op, shape, dtype);
  if (shape.num_elements() == 0) return zeros(shape, dtype);
  const double n = fan_avg ? (f.in + f.out) / 2.0 : f.in;
  const double stddev = std::sqrt(scale / n) / kTruncatedStddev;
  return rounded_to(stateless_truncated_normal(shape, seed_tensor(seed), 0.0, stddev, draw_dtype(dtype)), dtype);
}

}  // namespace

Tensor glorot_uniform(const TensorShape& shape, uint64_t seed, DType dtype) {
  const Fans f = fans_of("glorot_uniform", shape, dtype);
  if (shape.num_elements() == 0) return zeros(shape, dtype);
  const double limit = std::sqrt(6.0 / (f.in + f.out));
  return rounded_to(stateless_random_uniform(shape, seed_tensor(seed), -limit, limit, draw_dtype(dtype)), dtype);
}

Tensor glorot_normal(const TensorShape& shape, uint64_t seed, DType dtype) {
  return variance_scaling_normal("glorot_normal", shape, seed, dtype, 1.0, true);
}

Tensor he_normal(const TensorShape& shape, uint64_t seed, DType dtype) {
  return variance_scaling_normal("he_normal", shape, seed, dtype, 2.0, false);
}

Tensor truncated_normal(const TensorShape& shape, uint64_t seed, double mean, double stddev, DType dtype) {
  fans_of("truncated_normal", shape, dtype);
  return rounded_to(stateless_truncated_normal(shape, seed_tensor(seed), mean, stddev, draw_dtype(dtype)), dtype);
}

Dropout::Dropout(double rate, std::optional<uint64_t> seed) : rate_(rate), seed_(seed) {
  if (!(rate >= 0.0 && rate < 1.0))
    op_error<InvalidArgumentError>("Dropout", "rate must be in [0, 1) (the fraction of elements dropped), got ", rate);
}
Tensor Dropout::operator()(const Tensor& x, bool training) const { return dropout(x, rate_, training, seed_); }
Tensor Dropout::operator()(const Tensor& x, const Tensor& training) const { return dropout(x, rate_, training, seed_); }

namespace {
// Runs before the Variables are built, so that a bad size is reported as such.
Tensor dense_kernel(int64_t in, int64_t out, uint64_t seed, DType dtype, const std::string& name) {
  if (in <= 0 || out <= 0)
    op_error<InvalidArgumentError>("Dense", "layer '", name, "' needs in > 0 and out > 0, got in=",
                                   in, " out=", out);
  return glorot_uniform({in, out}, seed, dtype);
}
}  // namespace

// ---- dtype policies ----

namespace {
std::mutex policy_mutex;
DTypePolicy& global_policy_slot() {
  static DTypePolicy policy("float32");
  return policy;
}
}  // namespace

DTypePolicy::DTypePolicy(const std::string& name) : name_(name) {
  if (name == "float32" || name == "float64" || name == "bfloat16") {
    variable_ = compute_ = name == "float32" ? float32 : name == "float64" ? float64 : bfloat16;
  } else if (name == "mixed_bfloat16") {
    variable_ = float32;
    compute_ = bfloat16;
  } else {
    op_error<ValueError>("DTypePolicy", "unknown policy '", name,
                         "'; expected \"float32\", \"float64\", \"bfloat16\" or \"mixed_bfloat16\" "
                         "(mixed_float16 is not supported: tracegraph has no float16)");
  }
}

DTypePolicy::DTypePolicy(DType dtype) : name_(to_string(dtype)), variable_(dtype), compute_(dtype) {
  if (!is_floating(dtype))
    op_error<TypeError>("DTypePolicy", "a layer's dtype must be floating (float32, float64 or bfloat16), got ",
                        to_string(dtype));
}

void set_global_policy(const DTypePolicy& policy) {
  const std::lock_guard<std::mutex> lock(policy_mutex);
  global_policy_slot() = policy;
}

DTypePolicy global_policy() {
  const std::lock_guard<std::mutex> lock(policy_mutex);
  return global_policy_slot();
}

Dense::Dense(int64_t in, int64_t out, Activation activation, uint64_t seed, DTypePolicy dtype,
             std::string name)
    : in_(in),
      out_(out),
      activation_(std::move(activation)),
      name_(std::move(name)),
      policy_(std::move(dtype)),
      kernel_(dense_kernel(in, out, seed, policy_.variable_dtype(), name_), name_ + "/kernel"),
      bias_(zeros({out}, policy_.variable_dtype()), name_ + "/bias") {}

Tensor Dense::operator()(const Tensor& input) const {
  if (!input.defined())
    op_error<ValueError>("Dense", "layer '", name_, "' got an empty tg::Tensor");
  const DType compute = policy_.compute_dtype();
  const bool mixed = compute != policy_.variable_dtype();
  // Under a mixed policy floating inputs are cast to the compute dtype (Keras's autocast);
  // otherwise a dtype mismatch is an error, as everywhere in tracegraph.
  const Tensor x = mixed && is_floating(input.dtype()) && input.dtype() != compute ? cast(input, compute) : input;
  if (x.dtype() != compute)
    op_error<InvalidArgumentError>("Dense", "layer '", name_, "' has dtype ",
                                   to_string(compute), " but the input has dtype ",
                                   to_string(x.dtype()), "; tg::cast the input first");
  const TensorShape s = detail::static_shape(x);
  if (s.has_rank() && (s.rank() < 2 || (s.dims().back() != None && s.dims().back() != in_)))
    op_error<InvalidArgumentError>("Dense", "layer '", name_, "' expects inputs of shape (batch, ..., ", in_,
                                   ") (rank >= 2, the last axis contracted), got ", s.to_string(),
                                   "; reshape the input so that its last axis holds the ", in_, " features");
  const Tensor kernel = mixed ? cast(kernel_.read_value(), compute) : kernel_.read_value();
  Tensor y;
  if (!s.has_rank() || s.rank() == 2) {
    // Of unknown rank while tracing, matmul contracts the last axis of any rank >= 2 and checks
    // the sizes when the graph runs.
    y = matmul(x, kernel);
  } else {
    // (..., in) as rows of one (rows, in) x (in, out) product: one GEMM, and a 2-D product the
    // optimiser fuses with its bias, where a batched product would run one per leading index.
    const int64_t rank = s.rank();
    const Tensor input =
        s.dims().back() != None
            ? x
            : detail::ensure_same_dims(x, kernel, {rank - 1}, {0}, "Dense", "the inputs", "the kernel",
                                       detail::str_cat("layer '", name_, "' expects inputs whose last axis holds its ",
                                                       in_, " features"));
    const Tensor rows = matmul(reshape(input, {-1, in_}), kernel);
    std::vector<int64_t> dims(s.dims().begin(), s.dims().end() - 1);
    bool known = true;
    for (int64_t d : dims) known = known && d != None;
    if (known) {
      dims.push_back(out_);
      y = reshape(rows, dims);
    } else {
      y = reshape(rows, concat({slice(shape(x), {0}, {rank - 1}), constant({static_cast<int32_t>(out_)})}, 0));
    }
  }
  y = y + (mixed ? cast(bias_.read_value(), compute) : bias_.read_value());
  return activation_ ? activation_(y) : y;
}

Tensor sparse_softmax_cross_entropy(const Tensor& logits, const Tensor& labels) {
  if (!logits.defined() || !labels.defined())
    op_error<ValueError>("sparse_softmax_cross_entropy", "got an empty tg::Tensor");
  // One op for the rows' losses (and one for their gradient), which checks the shapes when
  // traced and the labels whenever it runs (src/ops/cross_entropy.cpp). bfloat16 logits (a
  // mixed_bfloat16 model's) are widened: the loss computes in float32, as Keras's does.
  const Tensor wide = logits.dtype() == bfloat16 ? cast(logits, float32) : logits;
  return reduce_mean(detail::sparse_softmax_cross_entropy_rows(wide, labels));
}

Tensor accuracy(const Tensor& logits, const Tensor& labels) {
  const char* op = "accuracy";
  if (!logits.defined() || !labels.defined()) op_error<ValueError>(op, "got an empty tg::Tensor");
  if (labels.dtype() != int32 && labels.dtype() != int64)
    op_error<TypeError>(op, "labels must be int32 or int64 class indices, got ",
                        to_string(labels.dtype()));
  const TensorShape ls = detail::static_shape(logits);
  if (!ls.has_rank() || ls.rank() != 2)
    op_error<InvalidArgumentError>(op, "logits must have shape (batch, classes), got ",
                                   ls.to_string());
  constexpr const char* kExpected = "expected one class index per row of logits (batch, classes): labels of shape "
                                    "(batch,) or (batch, 1)";
  const TensorShape ys = detail::static_shape(labels);
  if (!ys.has_rank())
    op_error<InvalidArgumentError>(op, "labels have an unknown rank while tracing; ", kExpected,
                                   ", so give them a known rank (e.g. TensorSpec({None}, tg::int32))");
  if (ys.rank() != 1 && (ys.rank() != 2 || (ys.dims()[1] != None && ys.dims()[1] != 1)))
    op_error<InvalidArgumentError>(op, "labels have shape ", ys.to_string(), "; ", kExpected);
  // Labels of (batch, 1) are squeezed, as Keras's sparse categorical accuracy does when labels
  // and predictions have the same rank; the shape is checked first, when the graph runs if the
  // trace cannot tell, since equal would broadcast (4, 1) against (4,) to (4, 4).
  const Tensor predictions = argmax(logits, 1);
  const Tensor expected = ys.rank() == 2 ? expand_dims(predictions, 1) : predictions;
  Tensor checked = detail::ensure_same_shape(labels, expected, op, "labels", "the predictions (argmax of logits)",
                                             kExpected);
  if (ys.rank() == 2) checked = squeeze(checked, {1});
  const Tensor hits = equal(predictions, cast(checked, int64));
  return reduce_mean(cast(hits, float32));
}

}  // namespace tg::nn
