// The static (non-tensor) arguments of ops: one struct per op family, and OpAttrs, the variant
// a node holds. Each op names its struct in ops.def (checked at dispatch and by the graph
// verifier), so a field means one thing, and anything that reads graphs - CSE, the printers,
// export - works from the fields alone through for_each_field.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "core/check.h"
#include "tracegraph/dtype.h"

namespace tg {
class Tensor;
}  // namespace tg

namespace tg::detail {

struct VariableState;       // ops/variable_state.h: the state behind a tg::Variable
struct FusedProgram;        // ops/fused.h: what a fused_elementwise node computes
struct ControlFlowPayload;  // ops/control_flow_attrs.h: a cond / while node's sub-graphs and metadata

// Every struct lists its fields once, in for_each_field(f): f(name, value) for each. Field
// types are limited to int64_t, bool, double, DType, std::vector<int64_t>,
// std::vector<std::string> and shared_ptrs to the typed objects above (and to VariableGroup,
// below), so that a generic reader handles them all.

/// Ops without attributes (elementwise arithmetic, shape, the *_like helpers without an axis).
struct NoAttrs {
  template <class F> void for_each_field(F&&) const {}
  bool operator==(const NoAttrs&) const = default;
};

/// reduce_* and unreduce_like: the axes reduced (empty: all) and whether they are kept as 1.
struct ReduceAttrs {
  std::vector<int64_t> axes;
  bool keepdims = false;
  template <class F> void for_each_field(F&& f) const { f("axes", axes); f("keepdims", keepdims); }
  bool operator==(const ReduceAttrs&) const = default;
};

/// Ops along one axis: softmax, log_softmax, expand_dims, concat, stack, gather, split_like,
/// scatter_add_like.
struct AxisAttrs {
  int64_t axis = 0;
  template <class F> void for_each_field(F&& f) const { f("axis", axis); }
  bool operator==(const AxisAttrs&) const = default;
};

/// argmax / argmin: the axis and the index dtype of the result.
struct ArgReduceAttrs {
  int64_t axis = 0;
  DType output_type = DType::Int64;
  template <class F> void for_each_field(F&& f) const { f("axis", axis); f("output_type", output_type); }
  bool operator==(const ArgReduceAttrs&) const = default;
};

/// cast: the target dtype.
struct CastAttrs {
  DType dtype = DType::Float32;
  template <class F> void for_each_field(F&& f) const { f("dtype", dtype); }
  bool operator==(const CastAttrs&) const = default;
};

/// matmul: whether each operand's last two dims are swapped.
struct MatMulAttrs {
  bool transpose_a = false;
  bool transpose_b = false;
  template <class F> void for_each_field(F&& f) const { f("transpose_a", transpose_a); f("transpose_b", transpose_b); }
  bool operator==(const MatMulAttrs&) const = default;
};

/// matmul_epilogue (made by the optimiser from a matmul and the fused node after it): the
/// product's transposes, and what its output gets, in this order (kernels/gemm_epilogue.h):
/// + bias (input 2), the mask out > 0 (output 1), relu, and out = mask ? out : 0 (the mask the
/// last input); then + or * a float32 matrix of the result's size (the last input; the result
/// takes its shape: a residual add or a gradient's product after the layer), then the result's
/// column sums (the last output).
struct MatMulEpilogueAttrs {
  bool transpose_a = false;
  bool transpose_b = false;
  bool bias = false;
  bool mask_out = false;
  bool relu = false;
  bool mask_in = false;
  bool column_sums = false;    // the result's sums over rows, a last output (a dense layer's bias gradient)
  bool sums_keepdims = false;  // shaped (1, n) rather than (n)
  bool add_matrix = false;     // out + matrix, after the parts above
  bool mul_matrix = false;     // out * matrix, after the parts above (not with add_matrix)
  // bfloat16 operands and no other part: each sum rounded to bfloat16 and stored widened to
  // float32, the bits of the bfloat16 matmul and a cast of it to float32 (the cast taken in).
  bool rounded_to_f32 = false;
  template <class F> void for_each_field(F&& f) const {
    f("transpose_a", transpose_a); f("transpose_b", transpose_b); f("bias", bias);
    f("mask_out", mask_out); f("relu", relu); f("mask_in", mask_in); f("column_sums", column_sums);
    f("sums_keepdims", sums_keepdims); f("add_matrix", add_matrix); f("mul_matrix", mul_matrix);
    f("rounded_to_f32", rounded_to_f32);
  }
  bool operator==(const MatMulEpilogueAttrs&) const = default;
};

/// reshape: the target shape (one -1 is inferred).
struct ReshapeAttrs {
  std::vector<int64_t> shape;
  template <class F> void for_each_field(F&& f) const { f("shape", shape); }
  bool operator==(const ReshapeAttrs&) const = default;
};

/// transpose: the permutation (empty: reverse the dims).
struct TransposeAttrs {
  std::vector<int64_t> perm;
  template <class F> void for_each_field(F&& f) const { f("perm", perm); }
  bool operator==(const TransposeAttrs&) const = default;
};

/// squeeze: the size-1 axes removed (empty: all of them).
struct SqueezeAttrs {
  std::vector<int64_t> axes;
  template <class F> void for_each_field(F&& f) const { f("axes", axes); }
  bool operator==(const SqueezeAttrs&) const = default;
};

/// slice: where the block starts and its size per dim (-1: to the end).
struct SliceAttrs {
  std::vector<int64_t> begin;
  std::vector<int64_t> size;
  template <class F> void for_each_field(F&& f) const { f("begin", begin); f("size", size); }
  bool operator==(const SliceAttrs&) const = default;
};

/// slice_like / pad_like: where the block sits in the larger tensor.
struct BlockAttrs {
  std::vector<int64_t> begin;
  template <class F> void for_each_field(F&& f) const { f("begin", begin); }
  bool operator==(const BlockAttrs&) const = default;
};

/// one_hot.
struct OneHotAttrs {
  int64_t depth = 0;
  int64_t axis = -1;
  DType dtype = DType::Float32;
  double on_value = 1.0;
  double off_value = 0.0;
  template <class F> void for_each_field(F&& f) const {
    f("depth", depth); f("axis", axis); f("dtype", dtype); f("on_value", on_value); f("off_value", off_value);
  }
  bool operator==(const OneHotAttrs&) const = default;
};

/// index (x[i]): the position along the first dimension.
struct IndexAttrs {
  int64_t index = 0;
  template <class F> void for_each_field(F&& f) const { f("index", index); }
  bool operator==(const IndexAttrs&) const = default;
};

/// print: the text of each part, and which parts are the op's tensor inputs (in order).
struct PrintAttrs {
  std::vector<std::string> texts;
  std::vector<int64_t> tensor_parts;
  int64_t summarize = 3;  // tf.print's: the first and last entries shown per dimension (-1: all)
  /// What follows each part: the separator before the next one, then the line's end after the
  /// last (one entry, the end, when there are no parts). Empty: " " between parts, then "\n".
  std::vector<std::string> separators;
  template <class F> void for_each_field(F&& f) const {
    f("texts", texts); f("tensor_parts", tensor_parts); f("summarize", summarize);
    f("separators", separators);
  }
  bool operator==(const PrintAttrs&) const = default;
};

/// read_variable and assign*_variable: the Variable (by reference: its state outlives the graph).
struct VariableAttrs {
  std::shared_ptr<VariableState> variable;
  template <class F> void for_each_field(F&& f) const { f("variable", variable); }
  bool operator==(const VariableAttrs&) const = default;
};

/// apply_adam: the Variable it updates and its two moment slots, each read and written once.
struct AdamSlotsAttrs {
  std::shared_ptr<VariableState> variable, m, v;
  template <class F> void for_each_field(F&& f) const { f("variable", variable); f("m", m); f("v", v); }
  bool operator==(const AdamSlotsAttrs&) const = default;
};

/// The Variables of a run of optimizer updates that the optimiser made one node
/// (apply_gradient_descent_group: each update's Variable; apply_adam_group: each update's
/// Variable, m and v), in the order the updates ran.
struct VariableGroup {
  std::vector<std::shared_ptr<VariableState>> variables;
};

/// apply_gradient_descent_group and apply_adam_group: their Variables, behind one pointer (a
/// node's attributes hold references to typed objects, not lists of them).
struct VariableGroupAttrs {
  std::shared_ptr<const VariableGroup> group;
  template <class F> void for_each_field(F&& f) const { f("group", group); }
  bool operator==(const VariableGroupAttrs&) const = default;
};

/// fused_elementwise: the program of micro-ops it runs.
struct FusedAttrs {
  std::shared_ptr<const FusedProgram> program;
  template <class F> void for_each_field(F&& f) const { f("program", program); }
  bool operator==(const FusedAttrs&) const = default;
};

/// cond / while (and their stateful variants): the sub-graphs and how inputs feed them.
struct ControlFlowAttrs {
  std::shared_ptr<const ControlFlowPayload> payload;
  template <class F> void for_each_field(F&& f) const { f("payload", payload); }
  bool operator==(const ControlFlowAttrs&) const = default;
};

/// tensor_array_read / write / stack: what the op knows of its array.
struct TensorArrayAttrs {
  int64_t size = 0;                    // the fixed size (a dynamic array: its initial size)
  bool dynamic = false;                // grows to the largest index written
  bool element_shape_known = false;    // element_shape is meaningful
  std::vector<int64_t> element_shape;  // dims may be None
  template <class F> void for_each_field(F&& f) const {
    f("size", size); f("dynamic", dynamic); f("element_shape_known", element_shape_known);
    f("element_shape", element_shape);
  }
  bool operator==(const TensorArrayAttrs&) const = default;
};

/// fill / broadcast_to: what was known of the shape tensor's value when the op was built (its
/// elements when it was a constant). The shape rule reads it; the kernel checks the value
/// against it. `known` false: only the shape tensor's length (the result's rank) is known.
struct ShapeValueAttrs {
  bool known = false;
  std::vector<int64_t> dims;
  template <class F> void for_each_field(F&& f) const { f("known", known); f("dims", dims); }
  bool operator==(const ShapeValueAttrs&) const = default;
};

/// The state of one stateful random op: a graph node of a traced function (TF keeps it in the
/// op's kernel), or the eager op of one (op, dtype, seed pair). Draws are numbered: draw k of a
/// stream is a pure function of (stream key, k), so a replay that knows k repeats it exactly.
/// tg::set_random_seed restarts every stream (a new generation).
class RandomState {
 public:
  /// The number of the next draw, advancing the count (thread-safe).
  uint64_t next_draw(uint64_t generation) {
    std::lock_guard lock(mu_);
    if (generation_ != generation) {
      generation_ = generation;
      draws_ = 0;
    }
    return draws_++;
  }

 private:
  std::mutex mu_;
  uint64_t generation_ = 0;
  uint64_t draws_ = 0;
};

/// random_* and stateless_random_*: the distribution and what was known of the shape tensor
/// (input 0) when the op was built. Uniform ops read minval/maxval
/// ([minval, maxval)), the normal ones mean/stddev; seed/seed2 (TF's pair of op attributes) and
/// the state belong to the stateful ops (stateless ones take their seed as input 1).
struct RandomAttrs {
  DType dtype = DType::Float32;
  double minval = 0.0, maxval = 1.0;
  double mean = 0.0, stddev = 1.0;
  ShapeValueAttrs shape;
  int64_t seed = 0, seed2 = 0;
  /// Not a field: never saved (a loaded node starts a fresh stream, as a restored TF model does)
  /// and left out of ==, so that identical stateless ops are merged by CSE (stateful ones never
  /// are). Made with the struct, so that every node read from a file has one of its own;
  /// copies of a node (the optimised graph) share it.
  std::shared_ptr<RandomState> state = std::make_shared<RandomState>();
  template <class F> void for_each_field(F&& f) const {
    f("dtype", dtype); f("minval", minval); f("maxval", maxval); f("mean", mean); f("stddev", stddev);
    f("known", shape.known); f("dims", shape.dims); f("seed", seed); f("seed2", seed2);
  }
  bool operator==(const RandomAttrs& o) const {
    return dtype == o.dtype && minval == o.minval && maxval == o.maxval && mean == o.mean &&
           stddev == o.stddev && shape == o.shape && seed == o.seed && seed2 == o.seed2;
  }
};

/// conv2d and its two gradient ops (NHWC input, HWIO filter). padding holds a tg::Padding
/// (0 VALID, 1 SAME); the shape rule refuses anything else, as a file may hold any number.
struct Conv2DAttrs {
  std::vector<int64_t> strides{1, 1};    // (height, width)
  std::vector<int64_t> dilations{1, 1};  // (height, width)
  int64_t padding = 0;
  template <class F> void for_each_field(F&& f) const {
    f("strides", strides); f("dilations", dilations); f("padding", padding);
  }
  bool operator==(const Conv2DAttrs&) const = default;
};

/// conv2d_transpose (TF's conv2d_transpose): the convolution it is the transpose of, and the
/// output's shape (NHWC; the batch may be None: it is the input's).
struct Conv2DTransposeAttrs {
  std::vector<int64_t> output_shape;     // (batch, height, width, channels)
  std::vector<int64_t> strides{1, 1};    // (height, width)
  std::vector<int64_t> dilations{1, 1};  // (height, width)
  int64_t padding = 0;
  template <class F> void for_each_field(F&& f) const {
    f("output_shape", output_shape); f("strides", strides); f("dilations", dilations); f("padding", padding);
  }
  bool operator==(const Conv2DTransposeAttrs&) const = default;
};

/// conv2d_epilogue (made by the optimiser from a conv2d and the fused node after it): the
/// convolution's attributes, and the epilogue's parts as in MatMulEpilogueAttrs; with max_pool,
/// a max_pool2d of the result (pool_*: its Pool2DAttrs) that was its only reader. With
/// pool_winners too (training, windows that tile): outputs (pooled, the result, winners), winners
/// a uint8 per pooled element: the window position of its first maximum where that maximum is
/// > 0, else 255 - what max_pool2d_grad_masked needs in place of reading the result again.
/// clamp: minimum(maximum(result, lower), upper) after relu (ONNX's Clip; bounds float32
/// values, never NaN).
struct Conv2DEpilogueAttrs {
  std::vector<int64_t> strides{1, 1};
  std::vector<int64_t> dilations{1, 1};
  int64_t padding = 0;
  bool bias = false;
  bool mask_out = false;
  bool relu = false;
  bool mask_in = false;
  bool max_pool = false;
  std::vector<int64_t> pool_ksize{1, 1};
  std::vector<int64_t> pool_strides{1, 1};
  int64_t pool_padding = 0;
  bool pool_winners = false;
  bool clamp = false;
  double lower = 0.0, upper = 0.0;
  template <class F> void for_each_field(F&& f) const {
    f("strides", strides); f("dilations", dilations); f("padding", padding); f("bias", bias);
    f("mask_out", mask_out); f("relu", relu); f("mask_in", mask_in); f("max_pool", max_pool);
    f("pool_ksize", pool_ksize); f("pool_strides", pool_strides); f("pool_padding", pool_padding);
    f("pool_winners", pool_winners); f("clamp", clamp); f("lower", lower); f("upper", upper);
  }
  bool operator==(const Conv2DEpilogueAttrs&) const = default;
};

/// max_pool2d / avg_pool2d and their gradient ops (NHWC): the window, its step and the padding
/// (a tg::Padding, as in Conv2DAttrs).
struct Pool2DAttrs {
  std::vector<int64_t> ksize{1, 1};    // (height, width)
  std::vector<int64_t> strides{1, 1};  // (height, width)
  int64_t padding = 0;
  template <class F> void for_each_field(F&& f) const { f("ksize", ksize); f("strides", strides); f("padding", padding); }
  bool operator==(const Pool2DAttrs&) const = default;
};

/// max_pool2d_grad_masked (made by the optimiser): the pool, and whether the node also gives
/// dx's sums over every dim but the last (the bias gradient of the convolution layer whose relu
/// gradient it took in), as a second output.
struct MaxPoolGradMaskedAttrs {
  Pool2DAttrs pool;
  bool channel_sums = false;
  template <class F> void for_each_field(F&& f) const {
    pool.for_each_field(f);
    f("channel_sums", channel_sums);
  }
  bool operator==(const MaxPoolGradMaskedAttrs&) const = default;
};

/// tile and tile_grad: how many copies along each dim (one entry per dim of the input).
struct TileAttrs {
  std::vector<int64_t> multiples;
  template <class F> void for_each_field(F&& f) const { f("multiples", multiples); }
  bool operator==(const TileAttrs&) const = default;
};

/// pad and mirror_pad_grad: (before, after) per dim, flattened; the mode (a tg::PadMode: 0
/// constant, 1 reflect, 2 symmetric; the shape rule refuses other numbers, as a file may hold
/// any) and the value of constant padding.
struct PadAttrs {
  std::vector<int64_t> paddings;
  int64_t mode = 0;
  double constant_value = 0.0;
  template <class F> void for_each_field(F&& f) const {
    f("paddings", paddings); f("mode", mode); f("constant_value", constant_value);
  }
  bool operator==(const PadAttrs&) const = default;
};

/// split: `num` equal pieces (num > 0), else one piece per entry of `sizes` (one may be -1:
/// the rest of the dim), along `axis`.
struct SplitAttrs {
  int64_t num = 0;
  std::vector<int64_t> sizes;
  int64_t axis = 0;
  template <class F> void for_each_field(F&& f) const { f("num", num); f("sizes", sizes); f("axis", axis); }
  bool operator==(const SplitAttrs&) const = default;
};

/// reverse: the dims reversed (negative ones count from the end).
struct ReverseAttrs {
  std::vector<int64_t> axes;
  template <class F> void for_each_field(F&& f) const { f("axes", axes); }
  bool operator==(const ReverseAttrs&) const = default;
};

/// cumsum / cumprod: the axis scanned, whether result i leaves x_i out (exclusive) and whether
/// the scan runs from the end (reverse), as TF's Cumsum / Cumprod attributes.
struct ScanAttrs {
  int64_t axis = 0;
  bool exclusive = false;
  bool reverse = false;
  template <class F> void for_each_field(F&& f) const {
    f("axis", axis); f("exclusive", exclusive); f("reverse", reverse);
  }
  bool operator==(const ScanAttrs&) const = default;
};

/// sort: the direction (along the last axis; the front function moves another axis there).
struct SortAttrs {
  bool descending = false;
  template <class F> void for_each_field(F&& f) const { f("descending", descending); }
  bool operator==(const SortAttrs&) const = default;
};

/// top_k: how many of the largest along the last axis, and whether they must come sorted
/// (they always do here).
struct TopKAttrs {
  int64_t k = 1;
  bool sorted = true;
  template <class F> void for_each_field(F&& f) const { f("k", k); f("sorted", sorted); }
  bool operator==(const TopKAttrs&) const = default;
};

/// The collectives (all_reduce, collective_broadcast, all_gather, reduce_to_root,
/// all_gather_grad): how values combine (a tg::detail::Reduction: 0 sum, 1 mean, 2 max, 3 min;
/// all_reduce only) and the rank that broadcasts or receives (root).
struct CollectiveAttrs {
  int64_t reduction = 0;
  int64_t root = 0;
  template <class F> void for_each_field(F&& f) const { f("reduction", reduction); f("root", root); }
  bool operator==(const CollectiveAttrs&) const = default;
};

/// ensure_same_shape: what its error names - the composite op, then its two arguments
/// ({"mean_squared_error", "y_true", "y_pred"}), then optionally what the composite expected -
/// and what it compares: dim x_dims[k] of x with dim y_dims[k] of y for each k (einsum's shared
/// letters), or the whole shapes when both lists are empty (files older than the lists).
struct ShapeCheckAttrs {
  std::vector<std::string> names;
  std::vector<int64_t> x_dims = {};
  std::vector<int64_t> y_dims = {};
  template <class F> void for_each_field(F&& f) const { f("names", names); f("x_dims", x_dims); f("y_dims", y_dims); }
  bool operator==(const ShapeCheckAttrs&) const = default;
};

/// What a host_call node calls: a function of the host program (a Python callable, say), taking
/// the node's eager inputs and giving its outputs, which must have `output_dtypes` (any shapes).
struct HostFunction {
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> call;
  std::vector<DType> output_dtypes;
  /// Names the function in messages (the Python function's name for tf.py_function).
  std::string name;
};

/// host_call: the function, by reference (it lives in this process only: never saved).
struct HostCallAttrs {
  std::shared_ptr<const HostFunction> function;
  template <class F> void for_each_field(F&& f) const { f("function", function); }
  bool operator==(const HostCallAttrs&) const = default;
};

/// scaled_dot_product_attention and its gradient op: the scores' scale (1 / sqrt(head size) of
/// the run's q unless scale_given), the causal mask (query i sees keys j <= i), whether a mask
/// input follows q, k, v, and the dropout rate on the attention weights (> 0: a seed pair input
/// comes last). heads_interleaved: q, k, v, the output and the gradients of q, k and v are laid
/// out (batch, T, heads, D), a head's rows H * D apart, instead of (batch, heads, T, D) (the
/// log-sum-exp stays (batch, heads, Tq)); nn::MultiHeadAttention's split heads, with no transposes.
struct AttentionAttrs {
  bool scale_given = false;
  double scale = 1.0;
  bool causal = false;
  bool has_mask = false;
  double dropout = 0.0;
  bool heads_interleaved = false;
  template <class F> void for_each_field(F&& f) const {
    f("scale_given", scale_given); f("scale", scale); f("causal", causal); f("has_mask", has_mask);
    f("dropout", dropout); f("heads_interleaved", heads_interleaved);
  }
  bool operator==(const AttentionAttrs&) const = default;
};

/// layer_norm: the epsilon added to each row's variance.
struct LayerNormAttrs {
  double epsilon = 1e-3;
  template <class F> void for_each_field(F&& f) const { f("epsilon", epsilon); }
  bool operator==(const LayerNormAttrs&) const = default;
};

// The order of this list is the variant index; ops.def names structs, never indices.
using AttrsVariant = std::variant<NoAttrs, ReduceAttrs, AxisAttrs, ArgReduceAttrs, CastAttrs, MatMulAttrs,
                                  ReshapeAttrs, TransposeAttrs, SqueezeAttrs, SliceAttrs, BlockAttrs,
                                  OneHotAttrs, IndexAttrs, PrintAttrs, VariableAttrs, FusedAttrs,
                                  ControlFlowAttrs, TensorArrayAttrs, ShapeValueAttrs, AdamSlotsAttrs,
                                  RandomAttrs, Conv2DAttrs, Pool2DAttrs, TileAttrs, PadAttrs,
                                  SplitAttrs, ReverseAttrs, ScanAttrs, SortAttrs, TopKAttrs,
                                  CollectiveAttrs, MatMulEpilogueAttrs, Conv2DEpilogueAttrs, VariableGroupAttrs,
                                  MaxPoolGradMaskedAttrs, ShapeCheckAttrs, HostCallAttrs, AttentionAttrs,
                                  Conv2DTransposeAttrs, LayerNormAttrs>;

template <class T, class V> struct VariantIndex;
template <class T, class... Ts> struct VariantIndex<T, std::variant<Ts...>> {
  static constexpr std::size_t value = [] {
    constexpr bool same[] = {std::is_same_v<T, Ts>...};
    for (std::size_t i = 0; i < sizeof...(Ts); ++i)
      if (same[i]) return i;
    return sizeof...(Ts);
  }();
};
/// The variant index of an attribute struct: what OpDef::attrs_kind holds.
template <class T> inline constexpr std::size_t attrs_kind_of = VariantIndex<T, AttrsVariant>::value;

/// The name of the attribute struct at a variant index (for messages).
const char* attrs_kind_name(std::size_t kind);

class OpAttrs;
/// A hash of the attributes consistent with ==: referenced objects by identity (for CSE).
std::size_t hash_attrs(const OpAttrs& attrs);
/// The attributes as "name=value, ..." (referenced objects left out): for printers and messages.
std::string format_attrs(const OpAttrs& attrs);

/// The attributes of one op: exactly one family's struct, immutable. Reading the wrong family
/// is a bug in tracegraph (the op and its attributes were paired wrongly), reported as
/// InternalError.
///
/// Held out of line and shared by copies: a graph node carries one, most nodes have none
/// (NoAttrs costs no allocation), and graphs are copied whole (the traced graph is kept beside
/// the optimised one), so an inline variant (56 bytes) made every node a third larger and every
/// copy of one copy its vectors.
class OpAttrs {
 public:
  OpAttrs() = default;
  template <class T, class = std::enable_if_t<(attrs_kind_of<T> < std::variant_size_v<AttrsVariant>)>>
  OpAttrs(T attrs)  // NOLINT: every family struct converts
      : value_(std::is_same_v<T, NoAttrs> ? nullptr : std::make_shared<const AttrsVariant>(std::move(attrs))) {}

  template <class T> const T& get() const {
    const T* p = get_if<T>();
    if (!p) wrong_kind(attrs_kind_of<T>);
    return *p;
  }
  template <class T> const T* get_if() const { return std::get_if<T>(&held()); }
  std::size_t kind() const { return held().index(); }
  /// Calls f(const Family&) with the struct held.
  template <class F> decltype(auto) visit(F&& f) const { return std::visit(std::forward<F>(f), held()); }
  bool operator==(const OpAttrs& other) const { return value_ == other.value_ || held() == other.held(); }

 private:
  [[noreturn]] void wrong_kind(std::size_t wanted) const;
  static const AttrsVariant& no_attrs();
  const AttrsVariant& held() const { return value_ ? *value_ : no_attrs(); }

  std::shared_ptr<const AttrsVariant> value_;  // null: NoAttrs
};

}  // namespace tg::detail
