// Every tensor op. Each works eagerly and (from the tracing layer) on symbolic tensors, and
// validates its inputs: a bad input throws a tg:: error whose message starts with "[op_name]".
#pragma once
#include <concepts>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
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

// --- Host calls ----------------------------------------------------------------------------
/// Calls `fn` with `inputs` (eager tensors) and returns what it returns, which must be one tensor
/// of each of `output_dtypes` (any shapes; symbolic outputs have unknown rank). Inside a trace
/// the call is a host_call node that runs `fn` every time the graph runs, in program order with
/// tg::print and Variable updates; eagerly it calls `fn` now. The node is not differentiable,
/// and a graph holding it cannot be saved or exported (the function lives in this process).
/// `name` names the function in errors. What `fn` throws propagates from the run; a result of
/// the wrong count or dtypes is an InvalidArgumentError.
using HostFunctionFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
std::vector<Tensor> host_call(HostFunctionFn fn, const std::vector<Tensor>& inputs,
                              const std::vector<DType>& output_dtypes, const std::string& name = "host function");

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
// Activations and special functions (TensorFlow's semantics; floating dtypes only unless said).
// Each is one elementwise op: it fuses with its neighbours in an optimised graph, with results
// bit for bit those of the unfused op. Accuracy against a double reference: docs/performance.md.
Tensor log1p(const Tensor& x);     // log(1 + x), accurate near 0
Tensor expm1(const Tensor& x);     // e^x - 1, accurate near 0
Tensor erf(const Tensor& x);
/// log(1 + e^x) without overflow (x itself for large x, e^x for very negative x).
Tensor softplus(const Tensor& x);
/// x * Phi(x): 0.5 x (1 + erf(x / sqrt 2)), or with `approximate` TF's tanh form
/// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))). Like TF's, gelu(-inf) is NaN.
Tensor gelu(const Tensor& x, bool approximate = false);
/// x for x >= 0, e^x - 1 below (tf.nn.elu).
Tensor elu(const Tensor& x);
/// x for x > 0, alpha * x elsewhere (tf.nn.leaky_relu; alpha may be any value, no gradient).
Tensor leaky_relu(const Tensor& x, double alpha = 0.2);
/// Round down / up / half to even (TF's round: 2.5 -> 2, -0.5 -> -0). floor and ceil take
/// floating dtypes; round also integers (unchanged). No gradient (TF's None): they cut the path.
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);
/// x clamped to [lo, hi]: maximum(minimum(x, hi), lo), so lo wins where lo > hi (TF documents
/// lo <= hi as required and computes exactly this). lo and hi broadcast to x's shape but may not
/// make it larger (ValueError, as TF's). The gradient is g inside [lo, hi]
/// (ends included), 0 outside; lo and hi get the rest, summed to their shapes.
Tensor clip_by_value(const Tensor& x, const Tensor& lo, const Tensor& hi);
template <class L, class H>
  requires(detail::is_scalar_like_v<L> && detail::is_scalar_like_v<H>)
Tensor clip_by_value(const Tensor& x, const L& lo, const H& hi) {
  return clip_by_value(x, detail::scalar_like(x, lo), detail::scalar_like(x, hi));
}

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
/// Grouped, as TF's: a filter (kh, kw, in_channels / groups, out_channels) whose dim 2 divides
/// the input's channels makes groups = in_channels / dim 2 (out_channels must split into them
/// too); output channels [g * out/groups, (g + 1) * out/groups) see only input channels
/// [g * in/groups, (g + 1) * in/groups). One in_channel per group runs the depthwise kernels.
Tensor conv2d(const Tensor& input, const Tensor& filter, std::vector<int64_t> strides,
              Padding padding, std::vector<int64_t> dilations = {1, 1});
/// Depthwise 2-D convolution (TF's tf.nn.depthwise_conv2d): input (batch, height, width,
/// in_channels), filter (kh, kw, in_channels, channel_multiplier); each input channel c is
/// convolved with its own multiplier filters, giving output channels c * multiplier + m (TF's
/// order), in_channels * multiplier in all. strides and dilations as conv2d's (TF's `rate` is
/// dilations). Runs on a direct kernel vectorised along the channels, rows split over the
/// thread pool. Differentiable (to any order).
Tensor depthwise_conv2d(const Tensor& input, const Tensor& filter, std::vector<int64_t> strides,
                        Padding padding, std::vector<int64_t> dilations = {1, 1});
/// The transpose of conv2d (TF's tf.nn.conv2d_transpose, the gradient of conv2d with respect to
/// its input): input (batch, height, width, in_channels), filter (kh, kw, out_channels,
/// in_channels), output_shape (batch, out_height, out_width, out_channels), where conv2d with
/// the same filter, strides, padding and dilations over a tensor of output_shape must give the
/// input's shape (several output sizes can: output_shape picks one). The batch entry may be
/// tg::None (the input's is taken). Differentiable (to any order).
Tensor conv2d_transpose(const Tensor& input, const Tensor& filter, std::vector<int64_t> output_shape,
                        std::vector<int64_t> strides, Padding padding, std::vector<int64_t> dilations = {1, 1});
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
/// log(sum(exp(x))) over `axes`, stable: the max is subtracted first, so large inputs do not
/// overflow; a slice of -inf gives -inf, +inf gives +inf (TF's reduce_logsumexp).
Tensor reduce_logsumexp(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false);
/// x * rsqrt(max(sum(x^2 over axes), epsilon)) (tf.math.l2_normalize); floating dtypes.
/// Empty axes (TF's axis=None): over every element.
Tensor l2_normalize(const Tensor& x, std::vector<int> axes = {}, double epsilon = 1e-12);
Tensor l2_normalize(const Tensor& x, int axis, double epsilon = 1e-12);
/// Running sum / product along `axis` (tf.math.cumsum / cumprod): exclusive leaves element i
/// out of result i (the first result is 0 / 1), reverse runs from the end. Numbers of every
/// dtype (integers wrap around); rank >= 1. Differentiable; cumprod's gradient is exact where x
/// holds zeros (TF's divides by x and gives 0 there).
Tensor cumsum(const Tensor& x, int axis = 0, bool exclusive = false, bool reverse = false);
Tensor cumprod(const Tensor& x, int axis = 0, bool exclusive = false, bool reverse = false);

/// tf.range over scalar tensors of one dtype (int32, int64, float32, float64): its length may be
/// known only at run time (None while tracing), e.g. `tg::range(tg::shape(x)[0])`. The elements
/// and errors are those of the eager tg::range above.
Tensor range(const Tensor& start, const Tensor& limit, const Tensor& delta);
/// range(0, limit, 1) in limit's dtype.
Tensor range(const Tensor& limit);
/// tf.sequence_mask: mask[i..., j] = j < lengths[i...] (lengths int32/int64), with j in
/// [0, maxlen); an empty maxlen means the longest length. The result has lengths' shape plus
/// one axis, in `dtype` (bool, or a number type: 1 and 0).
Tensor sequence_mask(const Tensor& lengths, const Tensor& maxlen = Tensor(), DType dtype = bool_);
Tensor sequence_mask(const Tensor& lengths, int64_t maxlen, DType dtype = bool_);

// --- Shape ops -------------------------------------------------------------------------------
/// New shape with the same elements; at most one dim may be -1 (inferred). Zero-copy.
Tensor reshape(const Tensor& x, std::vector<int64_t> shape);
/// The same with the shape held by a 1-D int32/int64 tensor, for shapes known only at run time:
/// `tg::reshape(x, tg::stack({tg::shape(x)[0], tg::constant(-1)}))` flattens each row of a batch
/// of None size. Sizes of the value known while tracing (constants) become static dims.
Tensor reshape(const Tensor& x, const Tensor& shape);
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

// --- Tiling, padding, splitting, n-d indexing (TensorFlow's tf.tile, tf.pad, tf.split, ...) ---
/// x repeated multiples[i] times along dim i (one entry >= 0 per dim; TF's tf.tile). The
/// gradient sums the tiles.
Tensor tile(const Tensor& x, std::vector<int64_t> multiples);
/// How tg::pad fills the border (TF's mode strings "CONSTANT", "REFLECT", "SYMMETRIC").
/// Reflect mirrors without the edge element ([1 2 3] padded by 2: [3 2 1 2 3 2 1]), so each
/// padding must be <= dim - 1; Symmetric repeats it ([2 1 1 2 3 3 2]), padding <= dim.
enum class PadMode : int64_t { Constant = 0, Reflect = 1, Symmetric = 2 };
/// x with paddings[i] = (before, after) elements added around dim i (one pair per dim, sizes
/// >= 0), filled with constant_values (Constant; integers must hold it exactly, strings pad
/// with "") or mirrored. Mirror limits are checked against run-time dims too
/// (InvalidArgumentError). The gradient slices the block (Constant) or adds the mirrored
/// border back (Reflect, Symmetric).
Tensor pad(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& paddings,
           PadMode mode = PadMode::Constant, double constant_values = 0.0);
namespace detail {
std::vector<Tensor> split_evenly(const Tensor& x, int64_t num_splits, int axis);
}  // namespace detail
/// x cut along `axis` into num_splits equal pieces (the dim must divide evenly, also at run
/// time for a None dim). The gradient concatenates the pieces' gradients (zeros for pieces
/// that did not reach the target).
template <std::integral I>
std::vector<Tensor> split(const Tensor& x, I num_splits, int axis = 0) {
  return detail::split_evenly(x, static_cast<int64_t>(num_splits), axis);
}
/// x cut along `axis` into pieces of the given sizes (they add up to the dim; one may be -1:
/// the rest). `split(x, {4})` is one piece of size 4, as in TF.
std::vector<Tensor> split(const Tensor& x, std::vector<int64_t> size_splits, int axis = 0);
/// The slices of x along `axis`, that dim removed (TF's tf.unstack). The dim's size must be
/// known while tracing (ValueError otherwise: the number of results is static).
std::vector<Tensor> unstack(const Tensor& x, int axis = 0);
/// x with the listed dims reversed (each at most once; negative ones count from the end).
Tensor reverse(const Tensor& x, std::vector<int64_t> axes);
/// Slices of params named by index tuples in the last dim of `indices` (int32/int64, depth
/// K <= rank(params)): the result has shape indices.shape[:-1] + params.shape[K:] (TF's
/// tf.gather_nd without batch dims). An index out of range throws InvalidArgumentError, also at
/// run time in a graph. The gradient scatters (repeats add).
Tensor gather_nd(const Tensor& params, const Tensor& indices);
/// Zeros of `shape` (a 1-D int tensor, or a static shape) with `updates` added at the index
/// tuples of `indices` (repeats add): updates has shape indices.shape[:-1] + shape[K:]. Numeric
/// dtypes; indices are bounds-checked.
Tensor scatter_nd(const Tensor& indices, const Tensor& updates, const Tensor& shape);
Tensor scatter_nd(const Tensor& indices, const Tensor& updates, const TensorShape& shape);
/// A copy of `tensor` with `updates` added at the index tuples of `indices` (repeats add), as
/// in scatter_nd.
Tensor tensor_scatter_nd_add(const Tensor& tensor, const Tensor& indices, const Tensor& updates);
/// The coordinates of the true (non-zero) elements of `condition`, in row-major order: int64 of
/// shape (number of true elements, rank) - a size known only at run time, None while tracing
/// (TF's one-argument tf.where). Not differentiable.
Tensor where(const Tensor& condition);
/// The slices of `tensor` where the bool `mask` is true: mask (rank k >= 1) has the shape of
/// tensor's dims axis .. axis + k - 1, which the result replaces by one dim of size "number of
/// true elements" (None while tracing; TF's tf.boolean_mask). The gradient goes to the kept
/// positions, zeros elsewhere.
Tensor boolean_mask(const Tensor& tensor, const Tensor& mask, int axis = 0);

// --- Shapes known only at run time ------------------------------------------------------------
// The shape is a 1-D int32/int64 tensor (e.g. built from tg::shape(x)), so these work on traced
// tensors with None dims. While tracing, each size of the result is known where tracing knows
// that element of the shape tensor (constants, tg::shape(x)'s static dims, and stack, concat, x[i],
// slice, cast and integer arithmetic of those), else it is None. The shape parameter
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
/// `num` evenly spaced values from start to stop, both included (tf.linspace): start + i *
/// (stop - start) / (num - 1), the last one exactly stop; num 1 gives {start}, 0 an empty
/// tensor. start and stop: float32/float64 scalars of one dtype (the result's); num: an
/// int32/int64 scalar tensor (a run-time length: (None,) while tracing unless constant) or an
/// integer. Differentiable in start and stop.
Tensor linspace(const Tensor& start, const Tensor& stop, const Tensor& num);
Tensor linspace(const Tensor& start, const Tensor& stop, int64_t num);
Tensor linspace(double start, double stop, int64_t num, DType dtype = float32);

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

// --- Attention --------------------------------------------------------------------------------
/// The optional arguments of tg::scaled_dot_product_attention (PyTorch's attn_mask, is_causal,
/// scale, dropout_p; Keras's training flag).
struct AttentionOptions {
  /// Empty, or broadcastable (NumPy rules, right-aligned) to (batch, heads, Tq, Tk): bool (true:
  /// the query may attend to the key, as in PyTorch and Keras) or of q's dtype (added to the
  /// scores; -inf hides a key).
  Tensor mask{};
  /// Query i attends to keys j <= i only (aligned at the top left, as PyTorch's is_causal and
  /// Keras's use_causal_mask); combined with `mask` when both are given.
  bool causal = false;
  /// The scores' factor; default 1 / sqrt(D), D the head size of q.
  std::optional<double> scale{};
  /// The fraction of attention weights dropped (after the softmax, the kept ones scaled by
  /// 1 / (1 - dropout)) while `training`; in [0, 1).
  double dropout = 0.0;
  bool training = true;
  /// The dropout's op seed, with tg::dropout's seed rules (a new mask per call, traced or not).
  std::optional<uint64_t> seed{};
};

/// softmax(q k^T * scale + mask) v over the last two axes, one fused op (PyTorch's
/// F.scaled_dot_product_attention): q (batch, heads, Tq, D), k (batch, heads, Tk, D), v (batch,
/// heads, Tk, Dv), all float32 or all float64, give (batch, heads, Tq, Dv). Only this layout
/// (heads before time): transpose a (batch, T, heads, D) tensor with perm {0, 2, 1, 3} first.
/// The kernel works on tiles of keys with a running maximum and sum (flash attention), and its
/// gradient recomputes the weights tile by tile from each row's saved log-sum-exp, so neither
/// ever holds a Tq x Tk matrix: memory beyond the inputs and outputs is O((Tq + Tk) * D)-sized
/// per thread. A query row that sees no key (every key masked) gives zeros and a zero gradient,
/// as PyTorch's scaled_dot_product_attention does (a plain softmax would give NaN; Keras's
/// large-negative mask gives the mean of v instead). Bad ranks, sizes, dtypes and options throw
/// tg::InvalidArgumentError / tg::TypeError naming what was expected and received. First-order
/// gradients only: differentiating the gradient again is refused with InvalidArgumentError.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options = {});

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
