// tg::TensorArray: one "flow" tensor carries the elements, shape (count, element...), or a scalar
// while nothing has been written (the element shape may not be known before the first write,
// e.g. when the array enters a loop). Its ops copy on write, like every tensor op.
#include <algorithm>
#include <cstring>

#include "control_flow/subgraph.h"
#include "core/check.h"
#include "core/tensor_impl.h"
#include "tracegraph/control_flow.h"
#include "tracegraph/ops.h"

namespace tg {
namespace detail {

int64_t scalar_index(const Tensor& t) {
  const auto& impl = t.impl();
  TG_CHECK(impl && !impl->symbolic && impl->shape.num_elements() == 1);
  return impl->dtype == DType::Int64 ? *impl->data<int64_t>() : int64_t{*impl->data<int32_t>()};
}

namespace {

// Attributes of the TensorArray ops: the array's size and growth, and the element shape given
// or learned so far (in sizes).
OpAttrs array_attrs(int64_t size, bool dynamic, const TensorShape& element_shape) {
  OpAttrs a;
  a.tensor_array = {size, dynamic, element_shape.has_rank()};
  if (element_shape.has_rank()) a.sizes = element_shape.dims();
  return a;
}

TensorShape hint_of(const OpAttrs& a) {
  return a.tensor_array.element_shape_known ? TensorShape(a.sizes) : TensorShape::unknown_rank();
}

// What the flow's static shape says about the elements.
TensorShape element_shape_of(const TensorShape& flow, const OpAttrs& a) {
  if (flow.has_rank() && flow.rank() >= 1)
    return TensorShape(std::vector<int64_t>(flow.dims().begin() + 1, flow.dims().end()));
  return hint_of(a);
}

TensorShape with_count(const TensorShape& element, const OpAttrs& a) {
  if (!element.has_rank()) return TensorShape::unknown_rank();
  std::vector<int64_t> dims{a.tensor_array.dynamic ? None : a.tensor_array.size};
  dims.insert(dims.end(), element.dims().begin(), element.dims().end());
  return TensorShape(dims);
}

// Per dim: the known one of two compatible shapes.
TensorShape refine(const TensorShape& a, const TensorShape& b) {
  if (!a.has_rank()) return b;
  if (!b.has_rank()) return a;
  std::vector<int64_t> d = a.dims();
  for (std::size_t i = 0; i < d.size(); ++i)
    if (d[i] == None) d[i] = b.dims()[i];
  return TensorShape(d);
}

void check_index_type(const char* op, const ValueType& index) {
  if ((index.dtype != DType::Int32 && index.dtype != DType::Int64) ||
      (index.shape.has_rank() && index.shape.rank() != 0))
    op_error<TypeError>(op, "the index must be an int32 or int64 scalar, got ", describe(index));
}

char* bytes_of(const Tensor& t) {
  const auto& impl = t.impl();
  return static_cast<char*>(impl->buffer->data()) + impl->offset * static_cast<int64_t>(dtype_size(impl->dtype));
}

[[noreturn]] void out_of_range(const char* op, int64_t i, int64_t count, bool dynamic) {
  op_error<InvalidArgumentError>(op, "index ", i, " is out of range for a TensorArray of size ", count,
                                 dynamic ? " (dynamic_size: writes may grow it, reads may not)"
                                         : "; create it with a larger size or dynamic_size=true");
}

std::vector<ValueType> infer_write(const std::vector<ValueType>& in, const OpAttrs& a) {
  const char* op = "TensorArray.write";
  check_index_type(op, in[1]);
  if (in[2].dtype != in[0].dtype)
    op_error<TypeError>(op, "the array holds ", to_string(in[0].dtype), " but the value is ", describe(in[2]),
                        "; tg::cast the value to ", to_string(in[0].dtype));
  const TensorShape element = element_shape_of(in[0].shape, a);
  if (!in[2].shape.is_compatible_with(element))
    op_error<InvalidArgumentError>(op, "the value has shape ", in[2].shape.to_string(),
                                   " but the array's elements have shape ", element.to_string(),
                                   "; every element of a TensorArray has the same shape");
  return {ValueType{in[0].dtype, with_count(refine(element, in[2].shape), a)}};
}

void kernel_write(const std::vector<Tensor>& in, const OpAttrs& a, std::vector<Tensor>& out) {
  const char* op = "TensorArray.write";
  const Tensor& flow = in[0];
  const Tensor& value = in[2];
  const int64_t i = scalar_index(in[1]);
  const bool dynamic = a.tensor_array.dynamic;
  const TensorShape& fshape = flow.impl()->shape;
  const TensorShape& vshape = value.impl()->shape;
  const bool empty = fshape.rank() == 0;
  const int64_t old_count = empty ? 0 : fshape.dims()[0];
  if (i < 0 || (!dynamic && i >= a.tensor_array.size)) out_of_range(op, i, empty ? a.tensor_array.size : old_count, dynamic);
  const TensorShape element = empty ? hint_of(a) : element_shape_of(fshape, a);
  if (element.has_rank() && !(element == vshape) && !(element.is_compatible_with(vshape) && empty))
    op_error<InvalidArgumentError>(op, "the value has shape ", vshape.to_string(),
                                   " but the array's elements have shape ", element.to_string(),
                                   "; every element of a TensorArray has the same shape");
  const int64_t count = dynamic ? std::max({a.tensor_array.size, old_count, i + 1}) : a.tensor_array.size;
  std::vector<int64_t> dims{count};
  dims.insert(dims.end(), vshape.dims().begin(), vshape.dims().end());
  Tensor result = allocate_tensor(flow.impl()->dtype, TensorShape(dims));
  const std::size_t row = static_cast<std::size_t>(vshape.num_elements()) * dtype_size(flow.impl()->dtype);
  char* dst = bytes_of(result);
  std::memset(dst, 0, row * static_cast<std::size_t>(count));
  if (old_count) std::memcpy(dst, bytes_of(flow), row * static_cast<std::size_t>(old_count));
  std::memcpy(dst + row * static_cast<std::size_t>(i), bytes_of(value), row);
  out[0] = std::move(result);
}

std::vector<ValueType> infer_read(const std::vector<ValueType>& in, const OpAttrs& a) {
  check_index_type("TensorArray.read", in[1]);
  return {ValueType{in[0].dtype, element_shape_of(in[0].shape, a)}};
}

void kernel_read(const std::vector<Tensor>& in, const OpAttrs& a, std::vector<Tensor>& out) {
  const char* op = "TensorArray.read";
  const Tensor& flow = in[0];
  const int64_t i = scalar_index(in[1]);
  const TensorShape& fshape = flow.impl()->shape;
  if (fshape.rank() == 0)
    op_error<InvalidArgumentError>(op, "element ", i, " was read but nothing has been written to this "
                                   "TensorArray yet; write before reading");
  const int64_t count = fshape.dims()[0];
  if (i < 0 || i >= count) out_of_range(op, i, count, a.tensor_array.dynamic);
  const TensorShape element = element_shape_of(fshape, a);
  out[0] = make_view(flow, element, i * element.num_elements());
}

std::vector<ValueType> infer_stack(const std::vector<ValueType>& in, const OpAttrs& a) {
  return {ValueType{in[0].dtype, with_count(element_shape_of(in[0].shape, a), a)}};
}

void kernel_stack(const std::vector<Tensor>& in, const OpAttrs& a, std::vector<Tensor>& out) {
  const Tensor& flow = in[0];
  if (flow.impl()->shape.rank() >= 1) {
    out[0] = flow;
    return;
  }
  const TensorShape element = hint_of(a);
  if (!element.is_fully_defined())
    op_error<InvalidArgumentError>("TensorArray.stack", "nothing was written to this TensorArray and its "
                                   "element shape ", element.to_string(), " is not fully known, so the stacked "
                                   "shape is unknown; pass element_shape to the TensorArray constructor");
  std::vector<int64_t> dims{a.tensor_array.size};
  dims.insert(dims.end(), element.dims().begin(), element.dims().end());
  out[0] = zeros(TensorShape(dims), flow.impl()->dtype);
}

Tensor index_tensor(int64_t i) {
  return i >= INT32_MIN && i <= INT32_MAX ? constant(static_cast<int32_t>(i)) : constant(i);
}

}  // namespace

void register_tensor_array_ops(OpDef* t) {
  set_op(t, OpId::TensorArrayWrite, &infer_write, &kernel_write);
  set_op(t, OpId::TensorArrayRead, &infer_read, &kernel_read);
  set_op(t, OpId::TensorArrayStack, &infer_stack, &kernel_stack);
}

}  // namespace detail

TensorArray::TensorArray(DType dtype, int64_t size, bool dynamic_size, TensorShape element_shape)
    : dtype_(dtype), size_(size), dynamic_(dynamic_size), element_shape_(std::move(element_shape)) {
  if (dtype == DType::String)
    throw TypeError("[TensorArray] string arrays are not supported; use a numeric or bool dtype");
  if (size < 0)
    throw ValueError(detail::str_cat("[TensorArray] size must be >= 0, got ", size));
  if (element_shape_.is_fully_defined()) {
    std::vector<int64_t> dims{size};
    dims.insert(dims.end(), element_shape_.dims().begin(), element_shape_.dims().end());
    flow_ = zeros(TensorShape(dims), dtype);
  } else {
    flow_ = zeros(TensorShape{}, dtype);  // the "nothing written yet" marker
  }
}

TensorArray TensorArray::with_flow(const Tensor& flow) const {
  TensorArray out = *this;
  out.flow_ = flow;
  const TensorShape s = flow.shape();
  if (s.has_rank() && s.rank() >= 1) {
    const TensorShape learned(std::vector<int64_t>(s.dims().begin() + 1, s.dims().end()));
    out.element_shape_ = element_shape_.has_rank() && element_shape_.rank() == learned.rank()
                             ? detail::refine(learned, element_shape_)
                             : learned;
  }
  return out;
}

TensorArray TensorArray::write(const Tensor& index, const Tensor& value) const {
  if (!index.defined() || !value.defined())
    throw ValueError("[TensorArray.write] the index or the value is an empty tg::Tensor");
  TensorArray out = with_flow(detail::apply_op1(detail::OpId::TensorArrayWrite, {flow_, index, value},
                                                detail::array_attrs(size_, dynamic_, element_shape_)));
  if (!out.element_shape_.has_rank()) out.element_shape_ = value.shape();
  return out;
}
TensorArray TensorArray::write(int64_t index, const Tensor& value) const {
  return write(detail::index_tensor(index), value);
}

Tensor TensorArray::read(const Tensor& index) const {
  if (!index.defined()) throw ValueError("[TensorArray.read] the index is an empty tg::Tensor");
  return detail::apply_op1(detail::OpId::TensorArrayRead, {flow_, index},
                           detail::array_attrs(size_, dynamic_, element_shape_));
}
Tensor TensorArray::read(int64_t index) const { return read(detail::index_tensor(index)); }

Tensor TensorArray::stack() const {
  return detail::apply_op1(detail::OpId::TensorArrayStack, {flow_},
                           detail::array_attrs(size_, dynamic_, element_shape_));
}

}  // namespace tg
