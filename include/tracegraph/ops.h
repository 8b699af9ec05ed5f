// Every tensor op. Each works eagerly and (from the tracing layer) on symbolic tensors, and
// validates its inputs: a bad input throws a tg:: error whose message starts with "[op_name]".
#pragma once
#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tracegraph/tensor.h"

namespace tg {

namespace detail {
/// A scalar tensor of `like`'s dtype holding `value` (C++ scalars adopt the tensor's dtype,
/// like TensorFlow's weak Python scalars). Throws if the value does not fit that dtype.
Tensor scalar_like(const Tensor& like, double value);
Tensor scalar_like(const Tensor& like, int64_t value);
Tensor scalar_like(const Tensor& like, bool value);
Tensor scalar_like(const Tensor& like, const std::string& value);
template <class S>
Tensor scalar_like(const Tensor& like, const S& value) {
  return scalar_like(like, static_cast<carrier_t<S>>(value));
}
}  // namespace detail

// --- Elementwise binary (NumPy broadcasting; both tensors must share a dtype) -----------------
Tensor add(const Tensor& a, const Tensor& b);       // strings: element-wise concatenation
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);       // floats: true division; ints: floor division
Tensor floordiv(const Tensor& a, const Tensor& b);  // floor(a / b); int division by 0 throws
Tensor mod(const Tensor& a, const Tensor& b);       // floor modulo: result has the sign of b
Tensor pow(const Tensor& a, const Tensor& b);       // ints: negative exponents throw
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor equal(const Tensor& a, const Tensor& b);     // -> bool; strings too
Tensor not_equal(const Tensor& a, const Tensor& b);
Tensor less(const Tensor& a, const Tensor& b);
Tensor less_equal(const Tensor& a, const Tensor& b);
Tensor greater(const Tensor& a, const Tensor& b);
Tensor greater_equal(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);  // bool only
Tensor logical_or(const Tensor& a, const Tensor& b);

// --- Elementwise unary -----------------------------------------------------------------------
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor square(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor exp(const Tensor& x);    // exp .. cos: floating dtypes only
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor logical_not(const Tensor& x);  // bool only
/// where(cond, x, y): x where cond is true, else y; all three broadcast together.
Tensor where(const Tensor& cond, const Tensor& x, const Tensor& y);
/// Converts the elements to `dtype`. Float -> int truncates toward zero, NaN becomes 0 and
/// out-of-range values saturate; anything -> bool is "!= 0". Strings cannot be cast.
Tensor cast(const Tensor& x, DType dtype);
Tensor identity(const Tensor& x);
Tensor zeros_like(const Tensor& x);
Tensor ones_like(const Tensor& x);

// --- Linear algebra --------------------------------------------------------------------------
/// Matrix product of the last two dims; leading (batch) dims broadcast. Rank >= 2 each.
/// float32/float64 run on OpenBLAS; int32/int64 on a blocked integer kernel.
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false,
              bool transpose_b = false);

// --- Convolution and pooling (NHWC: batch, height, width, channels) ---------------------------
/// How a sliding window meets the border. Valid: only windows that fit inside the input
/// (output size floor((in - window) / stride) + 1, where window = (k - 1) * dilation + 1). Same:
/// output size ceil(in / stride), the input padded by the total (out - 1) * stride + window - in,
/// half before (rounded down) and the rest after, as TensorFlow does.
enum class Padding : int64_t { Valid = 0, Same = 1 };

/// 2-D convolution (TF's tf.nn.conv2d, a cross-correlation): input (batch, height, width,
/// in_channels), filter (kh, kw, in_channels, out_channels), float32 or float64, one dtype.
/// strides and dilations: one entry (both dims), two (height, width), or TF's four with 1 for
/// batch and channels. A stride > 1 together with a dilation > 1 is refused, as TF does. Runs as
/// im2col + OpenBLAS GEMM over the thread pool. Differentiable (to any order).
Tensor conv2d(const Tensor& input, const Tensor& filter, std::vector<int64_t> strides,
              Padding padding, std::vector<int64_t> dilations = {1, 1});
/// Max over each (ksize) window per channel (TF's tf.nn.max_pool2d); padding never wins (Same
/// pads with -inf), a NaN in the window gives NaN. The gradient goes to the first maximum in the
/// window, rows first (to the first NaN if any), as TF's CPU kernel does. ksize and strides take
/// one, two or four entries like conv2d's strides.
Tensor max_pool2d(const Tensor& input, std::vector<int64_t> ksize, std::vector<int64_t> strides,
                  Padding padding);
/// Mean over each window per channel (TF's tf.nn.avg_pool2d); with Same padding only the
/// window's elements inside the input are counted.
Tensor avg_pool2d(const Tensor& input, std::vector<int64_t> ksize, std::vector<int64_t> strides,
                  Padding padding);

// --- Reductions (axes may be negative; empty axes = all) -------------------------------------
Tensor reduce_sum(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
Tensor reduce_mean(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
Tensor reduce_max(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
Tensor reduce_min(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
Tensor reduce_prod(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
Tensor reduce_any(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
Tensor reduce_all(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
/// Index of the largest / smallest element along `axis` (first one on ties), int64.
Tensor argmax(const Tensor& x, int axis = 0);
Tensor argmin(const Tensor& x, int axis = 0);
/// Numerically stable (max-subtracted) softmax and log-softmax along `axis`.
Tensor softmax(const Tensor& x, int axis = -1);
Tensor log_softmax(const Tensor& x, int axis = -1);

// --- Shape ops -------------------------------------------------------------------------------
/// New shape with the same elements; at most one dim may be -1 (inferred). Zero-copy.
Tensor reshape(const Tensor& x, std::vector<int64_t> shape);
/// Permutes dims; an empty perm reverses them.
Tensor transpose(const Tensor& x, std::vector<int> perm = {});
Tensor expand_dims(const Tensor& x, int axis);
/// Removes the given size-1 dims, or every size-1 dim when axes is empty.
Tensor squeeze(const Tensor& x, std::vector<int> axes = {});
Tensor concat(const std::vector<Tensor>& values, int axis);
Tensor stack(const std::vector<Tensor>& values, int axis = 0);
/// x[begin[i] : begin[i] + size[i]] per dim; size -1 means "to the end".
Tensor slice(const Tensor& x, std::vector<int64_t> begin, std::vector<int64_t> size);
/// Selects slices of params along `axis` by integer indices (any shape); bounds are checked.
Tensor gather(const Tensor& params, const Tensor& indices, int axis = 0);
/// One-hot encoding along a new last axis (or `axis`); out-of-range indices give all off_value.
Tensor one_hot(const Tensor& indices, int64_t depth, double on_value = 1.0,
               double off_value = 0.0, int axis = -1, DType dtype = float32);
/// The shape of x as an int32 vector (a runtime value while tracing with unknown dims).
Tensor shape(const Tensor& x);
/// The number of elements of x as an int32 scalar.
Tensor size(const Tensor& x);

// --- Shapes known only at run time ------------------------------------------------------------
// The shape is a 1-D int32/int64 tensor (e.g. built from tg::shape(x)), so these work on traced
// tensors with None dims. While tracing, the result's shape is known when the shape tensor is a
// constant, else it has None dims (one per element of the shape tensor). The shape parameter
// binds to a tg::Tensor only, so that `tg::zeros({})` and `tg::zeros({2, 3})` stay static shapes.
//
//     tg::Tensor h = tg::zeros(tg::stack({tg::shape(x)[0], tg::constant(16)}));  // (batch, 16)
namespace detail {
Tensor fill_from_shape_tensor(const Tensor& shape, const Tensor& value);
Tensor zeros_from_shape_tensor(const Tensor& shape, DType dtype);
Tensor ones_from_shape_tensor(const Tensor& shape, DType dtype);
}  // namespace detail
/// A tensor of the shape `shape` holds, every element 0 / 1.
template <std::same_as<Tensor> S>
Tensor zeros(const S& shape, DType dtype = float32) { return detail::zeros_from_shape_tensor(shape, dtype); }
template <std::same_as<Tensor> S>
Tensor ones(const S& shape, DType dtype = float32) { return detail::ones_from_shape_tensor(shape, dtype); }
/// Every element equal to a scalar (a tensor, whose dtype is the result's, or a C++ value).
template <std::same_as<Tensor> S>
Tensor fill(const S& shape, const Tensor& value) { return detail::fill_from_shape_tensor(shape, value); }
template <std::same_as<Tensor> S, class T>
  requires detail::is_scalar_like_v<T>
Tensor fill(const S& shape, const T& value, DType dtype = detail::default_dtype<T>()) {
  return detail::fill_from_shape_tensor(shape, constant(value, dtype));
}
/// x broadcast (NumPy rules) to the shape `shape` holds. Its gradient sums back to x's shape.
Tensor broadcast_to(const Tensor& x, const Tensor& shape);

// --- Random numbers -------------------------------------------------------------------------
// TensorFlow 2's seeds. A random op's values come from two seeds, the global one
// (tg::set_random_seed) and an optional op seed (the `seed` argument):
// - neither set: a seed nobody chose (different in every run of the program);
// - only the global seed: the op takes the next op seed of a sequence that set_random_seed
//   restarts (eagerly), or of the trace's own sequence (inside a tg::function, so that the same
//   body gets the same seeds whenever it is traced);
// - only the op seed: a fixed default global seed with it;
// - both: the two together.
// An op with a seed pair is a stream: eagerly, every call with the same (op, dtype, seed pair)
// takes the stream's next draw; in a traced function the op is a stateful graph node with a
// stream of its own, so every call of the function draws new values - the same sequence on every
// run of the program. tg::set_random_seed restarts every stream (eager ones and those of traced
// functions). Values do not depend on the thread count; they are not TensorFlow's numbers.
// The shape is a static shape or a 1-D int32/int64 tensor (e.g. from tg::shape(x), for a None
// batch while tracing). Random ops have no gradient. Bad arguments throw InvalidArgumentError /
// TypeError with the [op] prefix.

/// Sets the global seed (TF's tf.random.set_seed) and restarts every random stream.
void set_random_seed(uint64_t seed);

/// Uniform values in [minval, maxval): float32/float64, or int32/int64 (integral bounds).
Tensor random_uniform(const TensorShape& shape, double minval, double maxval, DType dtype,
                      std::optional<uint64_t> seed = std::nullopt);
/// float32 in [lo, hi), with an op seed or none.
Tensor random_uniform(const TensorShape& shape, float lo = 0.0f, float hi = 1.0f);
Tensor random_uniform(const TensorShape& shape, float lo, float hi, uint64_t seed);
/// Normal values: mean + stddev * N(0, 1), float32 or float64 (stddev >= 0).
Tensor random_normal(const TensorShape& shape, double mean = 0.0, double stddev = 1.0,
                     DType dtype = float32, std::optional<uint64_t> seed = std::nullopt);
/// As random_normal, but a value more than 2 stddev from the mean is drawn again (TF's rule).
Tensor truncated_normal(const TensorShape& shape, double mean = 0.0, double stddev = 1.0,
                        DType dtype = float32, std::optional<uint64_t> seed = std::nullopt);

// Stateless variants: pure functions of (shape, seed), where seed is an int32/int64 tensor of
// shape (2,) - the same seed always gives the same values, traced or not (TF's
// tf.random.stateless_*). Nothing advances; identical calls in one graph may be merged.
Tensor stateless_random_uniform(const TensorShape& shape, const Tensor& seed, double minval = 0.0,
                                double maxval = 1.0, DType dtype = float32);
Tensor stateless_random_normal(const TensorShape& shape, const Tensor& seed, double mean = 0.0,
                               double stddev = 1.0, DType dtype = float32);
Tensor stateless_truncated_normal(const TensorShape& shape, const Tensor& seed, double mean = 0.0,
                                  double stddev = 1.0, DType dtype = float32);

namespace detail {
Tensor random_uniform_from_shape_tensor(const Tensor& shape, double minval, double maxval, DType dtype,
                                        std::optional<uint64_t> seed);
Tensor random_normal_from_shape_tensor(const Tensor& shape, double mean, double stddev, DType dtype,
                                       std::optional<uint64_t> seed);
Tensor truncated_normal_from_shape_tensor(const Tensor& shape, double mean, double stddev, DType dtype,
                                          std::optional<uint64_t> seed);
Tensor stateless_from_shape_tensor(const char* op, const Tensor& shape, const Tensor& seed, double a,
                                   double b, DType dtype);
Tensor dropout_with_flag(const Tensor& x, double rate, const Tensor& training, std::optional<uint64_t> seed);
}  // namespace detail
// The same with the shape held by a 1-D int tensor.
template <std::same_as<Tensor> S>
Tensor random_uniform(const S& shape, double minval = 0.0, double maxval = 1.0, DType dtype = float32,
                      std::optional<uint64_t> seed = std::nullopt) {
  return detail::random_uniform_from_shape_tensor(shape, minval, maxval, dtype, seed);
}
template <std::same_as<Tensor> S>
Tensor random_normal(const S& shape, double mean = 0.0, double stddev = 1.0, DType dtype = float32,
                     std::optional<uint64_t> seed = std::nullopt) {
  return detail::random_normal_from_shape_tensor(shape, mean, stddev, dtype, seed);
}
template <std::same_as<Tensor> S>
Tensor truncated_normal(const S& shape, double mean = 0.0, double stddev = 1.0, DType dtype = float32,
                        std::optional<uint64_t> seed = std::nullopt) {
  return detail::truncated_normal_from_shape_tensor(shape, mean, stddev, dtype, seed);
}
template <std::same_as<Tensor> S>
Tensor stateless_random_uniform(const S& shape, const Tensor& seed, double minval = 0.0, double maxval = 1.0,
                                DType dtype = float32) {
  return detail::stateless_from_shape_tensor("stateless_random_uniform", shape, seed, minval, maxval, dtype);
}
template <std::same_as<Tensor> S>
Tensor stateless_random_normal(const S& shape, const Tensor& seed, double mean = 0.0, double stddev = 1.0,
                               DType dtype = float32) {
  return detail::stateless_from_shape_tensor("stateless_random_normal", shape, seed, mean, stddev, dtype);
}
template <std::same_as<Tensor> S>
Tensor stateless_truncated_normal(const S& shape, const Tensor& seed, double mean = 0.0, double stddev = 1.0,
                                  DType dtype = float32) {
  return detail::stateless_from_shape_tensor("stateless_truncated_normal", shape, seed, mean, stddev, dtype);
}

/// Dropout (tf.nn.dropout with Keras's training flag): while training, each element of x is
/// zeroed with probability `rate` and the kept ones are scaled by 1 / (1 - rate), so the
/// expected value is unchanged; otherwise (or with rate 0) x itself. The mask is a
/// random_uniform draw with the seeds above (a new mask per call, traced or not). The gradient
/// flows through the same mask. x must be floating; rate must be in [0, 1)
/// (InvalidArgumentError).
Tensor dropout(const Tensor& x, double rate, bool training = true, std::optional<uint64_t> seed = std::nullopt);
/// The same with `training` a bool scalar tensor: a traced function chooses at run time, so
/// one trace serves both modes. (The mask is drawn in both modes then: see docs/DECISIONS.md.)
template <std::same_as<Tensor> B>
Tensor dropout(const Tensor& x, double rate, const B& training, std::optional<uint64_t> seed = std::nullopt) {
  return detail::dropout_with_flag(x, rate, training, seed);
}

// --- Sorting and einsum -----------------------------------------------------------------------
/// The order of tg::sort and tg::argsort.
enum class SortDirection { Ascending, Descending };

/// x sorted along `axis` (tf.sort). Numbers of float32, float64, int32, int64 or uint8; a rank-0
/// input is an InvalidArgumentError. NaN counts as larger than every number (it sorts last when
/// ascending, first when descending); equal values keep their order. The gradient flows back
/// through the permutation.
Tensor sort(const Tensor& x, int64_t axis = -1, SortDirection direction = SortDirection::Ascending);
/// The int32 positions that sort x along `axis` (tf.argsort): gather(x, argsort(x)) is
/// sort(x) along the axis. Always stable (equal values in input order), so `stable` changes
/// nothing. Not differentiable (integer output).
Tensor argsort(const Tensor& x, int64_t axis = -1, SortDirection direction = SortDirection::Ascending,
               bool stable = true);

/// tf.math.top_k's result: the k largest values along the last axis and their int32 positions.
struct TopK {
  Tensor values;
  Tensor indices;
};
/// The k largest entries of each row along the last axis (tf.math.top_k), largest first; of
/// equal values the lower position comes first; NaN counts as the largest. k must be in
/// [0, last dim] (InvalidArgumentError otherwise, at tracing when the dim is known, else when
/// the graph runs). `sorted` = false allows any order; the result is sorted anyway. The
/// gradient of values goes to the chosen positions (0 elsewhere).
TopK top_k(const Tensor& x, int64_t k = 1, bool sorted = true);

/// Einstein summation over one or two operands (tf.einsum), for equations with an explicit
/// "->": each operand's subscripts are letters a-z/A-Z, one per dim; a letter in both operands
/// and not in the output is summed over; a letter missing from the output is summed over.
/// Supported: any two-operand contraction without a repeated letter within one operand
/// (matmul "ij,jk->ik", batched "bij,bjk->bik", "ij,kj->ik", outer "i,j->ij", dot "i,i->",
/// elementwise "ij,ij->ij", ...), and one operand with transposes and sums ("ij->ji",
/// "ij->i") or a repeated letter with a known dim (trace "ii->", diagonal "ii->i"). Lowered to
/// transpose, reshape, matmul, mul and reduce_sum, so gradients are theirs (a contraction that
/// would merge several letters into one matrix dim while some dim is None is a broadcasting mul
/// and reduce_sum instead, which takes more memory). No ellipsis ("...") or implicit output. A
/// malformed equation, an unsupported form or dims that disagree raise InvalidArgumentError
/// saying what is supported.
Tensor einsum(const std::string& equation, const Tensor& a, const Tensor& b);
Tensor einsum(const std::string& equation, const Tensor& a);

// --- Operators: tensors with tensors, and tensors with C++ scalars ---------------------------
#define TG_BINARY_OPERATOR(OP, FN)                                                     \
  inline Tensor operator OP(const Tensor& a, const Tensor& b) { return FN(a, b); }     \
  template <class S>                                                                   \
    requires detail::is_scalar_like_v<S>                                               \
  Tensor operator OP(const Tensor& a, const S& b) {                                    \
    return FN(a, detail::scalar_like(a, b));                                           \
  }                                                                                    \
  template <class S>                                                                   \
    requires detail::is_scalar_like_v<S>                                               \
  Tensor operator OP(const S& a, const Tensor& b) {                                    \
    return FN(detail::scalar_like(b, a), b);                                           \
  }
TG_BINARY_OPERATOR(+, add)
TG_BINARY_OPERATOR(-, sub)
TG_BINARY_OPERATOR(*, mul)
TG_BINARY_OPERATOR(/, div)
TG_BINARY_OPERATOR(%, mod)
TG_BINARY_OPERATOR(==, equal)
TG_BINARY_OPERATOR(!=, not_equal)
TG_BINARY_OPERATOR(<, less)
TG_BINARY_OPERATOR(<=, less_equal)
TG_BINARY_OPERATOR(>, greater)
TG_BINARY_OPERATOR(>=, greater_equal)
TG_BINARY_OPERATOR(&&, logical_and)
TG_BINARY_OPERATOR(||, logical_or)
#undef TG_BINARY_OPERATOR
inline Tensor operator-(const Tensor& x) { return neg(x); }
inline Tensor operator!(const Tensor& x) { return logical_not(x); }

}  // namespace tg
