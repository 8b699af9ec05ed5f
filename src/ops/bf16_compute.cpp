// The bfloat16 rule of every op (see bf16_compute.h), applied by wrapping registry entries.
#include "ops/bf16_compute.h"

#include <array>
#include <utility>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "kernels/bf16.h"
#include "ops/fused.h"

namespace tg::detail {
namespace {

enum class Bf16Rule : uint8_t { kRefused, kNative, kViaFloat32 };

// Ops computed in float32 and rounded: none of them makes its own outputs.
constexpr OpId kViaFloat32[] = {
    OpId::Add, OpId::Sub, OpId::Mul, OpId::Div, OpId::Pow, OpId::Maximum, OpId::Minimum, OpId::Equal,
    OpId::NotEqual, OpId::Less, OpId::LessEqual, OpId::Greater, OpId::GreaterEqual, OpId::LeakyRelu, OpId::Neg,
    OpId::Abs, OpId::Sign, OpId::Square, OpId::Relu, OpId::Exp, OpId::Log, OpId::Sqrt, OpId::Rsqrt, OpId::Tanh,
    OpId::Sigmoid, OpId::Sin, OpId::Cos, OpId::Log1p, OpId::Expm1, OpId::Softplus, OpId::Gelu,
    OpId::GeluApproximate, OpId::Elu, OpId::Erf, OpId::Floor, OpId::Ceil, OpId::Round, OpId::ZerosLike,
    OpId::OnesLike, OpId::Where, OpId::ReduceSum, OpId::ReduceMean, OpId::ReduceMax, OpId::ReduceMin,
    OpId::ReduceProd, OpId::ArgMax, OpId::ArgMin, OpId::Softmax, OpId::LogSoftmax, OpId::SparseSoftmaxCrossEntropy,
    OpId::SparseSoftmaxCrossEntropyGrad, OpId::Cumsum, OpId::BroadcastLike, OpId::UnreduceLike,
    OpId::TileGrad, OpId::AvgPool2D, OpId::AvgPool2DGrad,
};

// Ops whose own rule and kernel take bfloat16: they move elements without computing on them
// (visit_dtype's bfloat16_t copies), pass values on, or (matmul, matmul_epilogue) have a bfloat16
// kernel.
constexpr OpId kNative[] = {
    OpId::Cast, OpId::Identity, OpId::StopGradient, OpId::Reshape, OpId::Transpose, OpId::ExpandDims,
    OpId::Squeeze, OpId::Concat, OpId::Stack, OpId::Slice, OpId::Gather, OpId::Index, OpId::Shape, OpId::Size,
    OpId::ReshapeTo, OpId::EnsureSameShape, OpId::Fill, OpId::BroadcastTo, OpId::ReshapeLike, OpId::SplitLike,
    OpId::SliceLike, OpId::Tile, OpId::Split, OpId::Reverse, OpId::MatMul, OpId::MatMulEpilogue, OpId::ReadVariable,
    OpId::AssignVariable, OpId::InitializeVariable, OpId::Cond, OpId::StatefulCond, OpId::While,
    OpId::StatefulWhile, OpId::TensorArrayWrite, OpId::TensorArrayRead, OpId::TensorArrayStack, OpId::Print,
    // sum_to_like: bfloat16 column sums without widening the tensor, else the float32 rule (ops/reduce.cpp).
    OpId::SumToLike,
    // Convolutions: oneDNN's bfloat16 kernels, else float32 and rounded, by geometry (ops/conv.cpp).
    OpId::Conv2D, OpId::Conv2DBackpropInput, OpId::Conv2DBackpropFilter, OpId::Conv2DTranspose,
    OpId::DepthwiseConv2D,
    // Max pooling selects and routes values: bfloat16 kernels with the float32 rule's bits (ops/pool.cpp).
    OpId::MaxPool2D, OpId::MaxPool2DGrad, OpId::MaxPool2DGradMasked,
    // A convolution's epilogue rounds each op's result as the ops apart do (ops/conv.cpp).
    OpId::Conv2DEpilogue,
    // Programs of elementwise ops with their own bfloat16 loops, same conversions (ops/fused_micro.inc).
    OpId::FusedElementwise,
};

struct Original {
  InferFn infer = nullptr;
  KernelFn kernel = nullptr;
  Bf16Rule rule = Bf16Rule::kRefused;
  const char* name = "";
};
std::array<Original, kNumOps> originals;

[[noreturn]] void refuse(const char* op) {
  op_error<InvalidArgumentError>(op, "does not support dtype bfloat16; tg::cast the bfloat16 inputs to float32 "
                                 "first (every bfloat16 value is exactly a float32), or use an op that "
                                 "computes on bfloat16 (docs/user-guide.md, \"bfloat16\")");
}

bool any_bf16(const std::vector<ValueType>& types) {
  for (const ValueType& t : types)
    if (t.dtype == DType::BFloat16) return true;
  return false;
}

template <std::size_t I>
std::vector<ValueType> infer_with_rule(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const Original& o = originals[I];
  if (o.rule == Bf16Rule::kRefused) {
    if (any_bf16(in)) refuse(o.name);
    std::vector<ValueType> out = o.infer(in, attrs);
    if (any_bf16(out)) refuse(o.name);  // a dtype attribute asked for bfloat16 (random draws ...)
    return out;
  }
  if (!any_bf16(in)) return o.infer(in, attrs);
  bool other_float = false;
  for (const ValueType& t : in) other_float |= t.dtype == DType::Float32 || t.dtype == DType::Float64;
  std::vector<ValueType> widened = in;
  for (ValueType& t : widened)
    if (t.dtype == DType::BFloat16) t.dtype = DType::Float32;
  std::vector<ValueType> out = o.infer(widened, attrs);  // the op's own checks of everything else
  if (other_float) {
    // Mixed float dtypes, even where an input only lends its shape: no silent promotion.
    std::string got;
    for (const ValueType& t : in) got += (got.empty() ? "" : ", ") + to_string(t.dtype);
    op_error<InvalidArgumentError>(o.name, "expected its floating inputs in one dtype, got ", got,
                                   "; tg::cast them to one dtype first (tracegraph never promotes silently)");
  }
  for (ValueType& t : out)
    if (t.dtype == DType::Float32) t.dtype = DType::BFloat16;
  return out;
}

template <std::size_t I>
void kernel_via_float32(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const Original& o = originals[I];
  bool any = false;
  for (const Tensor& t : in) any |= t.defined() && t.impl()->dtype == DType::BFloat16;
  if (!any) return o.kernel(in, attrs, out);
  // Elementwise ops: the fused kernel's loop for the op, which widens and rounds in blocks in
  // cache (the same conversions, so the same bits) instead of into whole float32 tensors.
  if (run_as_fused_op(static_cast<OpId>(I), in, out)) return;
  run_via_float32(o.kernel, in, attrs, out);
}

}  // namespace

void run_via_float32(KernelFn float_kernel, const std::vector<Tensor>& in, const OpAttrs& attrs,
                     std::vector<Tensor>& out) {
  std::vector<Tensor> wide_in = in;
  for (Tensor& t : wide_in) {
    if (!t.defined() || t.impl()->dtype != DType::BFloat16) continue;
    Tensor w = allocate_tensor(DType::Float32, t.impl()->shape);
    bf16_to_f32(data_of<bfloat16_t>(t), data_of<float>(w), t.impl()->shape.num_elements());
    t = std::move(w);
  }
  std::vector<Tensor> wide_out = out;
  for (Tensor& t : wide_out)
    if (t.defined() && t.impl()->dtype == DType::BFloat16) t = allocate_tensor(DType::Float32, t.impl()->shape);
  float_kernel(wide_in, attrs, wide_out);
  for (std::size_t i = 0; i < out.size(); ++i)
    if (out[i].defined() && out[i].impl()->dtype == DType::BFloat16)
      f32_to_bf16(data_of<float>(wide_out[i]), data_of<bfloat16_t>(out[i]), out[i].impl()->shape.num_elements());
}

namespace {

template <std::size_t... Is>
void wrap_all(OpDef* table, std::index_sequence<Is...>) {
  auto wrap = [&](auto index) {
    constexpr std::size_t i = decltype(index)::value;
    OpDef& def = table[i];
    Original& o = originals[i];
    o = Original{def.infer, def.kernel, o.rule, def.name};
    if (!def.infer || o.rule == Bf16Rule::kNative) return;
    def.infer = &infer_with_rule<i>;
    if (o.rule == Bf16Rule::kViaFloat32) {
      TG_CHECK(def.kernel && !makes_own_outputs(def.traits), "op ", def.name, " cannot compute bfloat16 via float32");
      def.kernel = &kernel_via_float32<i>;
    }
  };
  (wrap(std::integral_constant<std::size_t, Is>{}), ...);
}

}  // namespace

void register_bf16_rules(OpDef* table) {
  for (OpId id : kViaFloat32) originals[static_cast<std::size_t>(id)].rule = Bf16Rule::kViaFloat32;
  for (OpId id : kNative) originals[static_cast<std::size_t>(id)].rule = Bf16Rule::kNative;
  wrap_all(table, std::make_index_sequence<kNumOps>{});
}

}  // namespace tg::detail
