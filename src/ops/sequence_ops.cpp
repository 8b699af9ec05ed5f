// Sequences whose length is a value: tg::range over scalar tensors (the "range" op, whose length
// a trace knows only when the graph runs) and tg::sequence_mask, composed from it. The op's
// kernel is the eager tg::range, so a traced range gives the eager one's elements and errors.
#include <cstdint>
#include <type_traits>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "ops/broadcast.h"
#include "ops/op.h"
#include "tracegraph/ops.h"

namespace tg {
namespace detail {
namespace {

constexpr const char* kRangeInputs[] = {"start", "limit", "delta"};

std::vector<ValueType> infer_range(const std::vector<ValueType>& in, const OpAttrs&) {
  for (std::size_t i = 0; i < 3; ++i) {
    require_dtype("range", in[i], {DType::Int32, DType::Int64, DType::Float32, DType::Float64});
    if (in[i].dtype != in[0].dtype)
      op_error<TypeError>("range", kRangeInputs[i], " is ", to_string(in[i].dtype), " but start is ",
                          to_string(in[0].dtype), "; tg::cast start, limit and delta to one dtype");
    if (in[i].shape.has_rank() && in[i].shape.rank() != 0)
      op_error<InvalidArgumentError>("range", kRangeInputs[i], " must be a scalar, got shape ",
                                     in[i].shape.to_string());
  }
  return {ValueType{in[0].dtype, TensorShape{None}}};
}

void kernel_range(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  std::vector<ValueType> types;
  for (const Tensor& t : in) types.push_back(ValueType{t.dtype(), static_shape(t)});
  infer_range(types, attrs);  // run-time shapes: a None-shaped input may not be a scalar
  const DType d = in[0].dtype();
  visit_dtype(d, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>)
      out[0] = tg::range(double{in[0].item<T>()}, double{in[1].item<T>()}, double{in[2].item<T>()}, d);
    else if constexpr (std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>)
      out[0] = tg::range(int64_t{in[0].item<T>()}, int64_t{in[1].item<T>()}, int64_t{in[2].item<T>()}, d);
  });
}

}  // namespace

void register_sequence_ops(OpDef* t) { set_op(t, OpId::Range, &infer_range, &kernel_range); }

}  // namespace detail

Tensor range(const Tensor& start, const Tensor& limit, const Tensor& delta) {
  for (const Tensor* t : {&start, &limit, &delta})
    if (!t->defined()) detail::op_error<ValueError>("range", "got an empty tg::Tensor");
  return detail::apply_op1(detail::OpId::Range, {start, limit, delta});
}

Tensor range(const Tensor& limit) {
  if (!limit.defined()) detail::op_error<ValueError>("range", "got an empty tg::Tensor as the limit");
  return range(zeros({}, limit.dtype()), limit, ones({}, limit.dtype()));
}

Tensor sequence_mask(const Tensor& lengths, const Tensor& maxlen, DType dtype) {
  const char* op = "sequence_mask";
  if (!lengths.defined()) detail::op_error<ValueError>(op, "the lengths are an empty tg::Tensor");
  if (lengths.dtype() != DType::Int32 && lengths.dtype() != DType::Int64)
    detail::op_error<TypeError>(op, "lengths must be int32 or int64, got ", to_string(lengths.dtype()),
                                "; tg::cast them to an integer dtype");
  // TF's default: as long as the longest sequence.
  const Tensor longest = maxlen.defined() ? cast(maxlen, lengths.dtype()) : reduce_max(lengths);
  const Tensor mask = range(longest) < expand_dims(lengths, -1);
  return dtype == DType::Bool ? mask : cast(mask, dtype);
}

Tensor sequence_mask(const Tensor& lengths, int64_t maxlen, DType dtype) {
  if (maxlen < 0)
    detail::op_error<InvalidArgumentError>("sequence_mask", "maxlen must be >= 0, got ", maxlen);
  return sequence_mask(lengths, constant(maxlen, int64), dtype);
}

}  // namespace tg
