// tg::TensorArray: one "flow" tensor carries the elements, shape (count, element...), or a scalar
// while nothing has been written (the element shape may not be known before the first write,
// e.g. when the array enters a loop). Its ops copy on write, like every tensor op.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>

#include "control_flow/subgraph.h"
#include "core/check.h"
#include "core/tensor_impl.h"
#include "ops/grad_helpers.h"
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
// or learned so far.
OpAttrs array_attrs(int64_t size, bool dynamic, const TensorShape& element_shape) {
  TensorArrayAttrs a{size, dynamic, element_shape.has_rank(), {}};
  if (element_shape.has_rank()) a.element_shape = element_shape.dims();
  return a;
}

TensorShape hint_of(const TensorArrayAttrs& a) {
  return a.element_shape_known ? TensorShape(a.element_shape) : TensorShape::unknown_rank();
}

// What the flow's static shape says about the elements.
TensorShape element_shape_of(const TensorShape& flow, const TensorArrayAttrs& a) {
  if (flow.has_rank() && flow.rank() >= 1)
    return TensorShape(std::vector<int64_t>(flow.dims().begin() + 1, flow.dims().end()));
  return hint_of(a);
}

TensorShape with_count(const TensorShape& element, const TensorArrayAttrs& a) {
  if (!element.has_rank()) return TensorShape::unknown_rank();
  std::vector<int64_t> dims{a.dynamic ? None : a.size};
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


[[noreturn]] void out_of_range(const char* op, int64_t i, int64_t count, bool dynamic) {
  op_error<InvalidArgumentError>(op, "index ", i, " is out of range for a TensorArray of size ", count,
                                 dynamic ? " (dynamic_size: writes may grow it, reads may not)"
                                         : "; create it with a larger size or dynamic_size=true");
}

std::vector<ValueType> infer_write(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const TensorArrayAttrs& a = op_attrs.get<TensorArrayAttrs>();
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

// Appending to a dynamic array. A loop that writes element i of an array in iteration i (a loop
// gradient's stored forward values, a user's dynamic_size array) would copy the whole array at
// every write; instead a dynamic array's flow lives in a buffer with spare rows and a header at
// its end (a magic number, the rows claimed so far, the rows it has room for). A write at index
// == count of a flow that ends where the claimed rows end claims the next row (atomically) and
// writes it in place: no view of the buffer covers that row, so every existing flow keeps its
// value. Any other write copies, into a buffer of twice the rows.
constexpr uint64_t kAppendMagic = 0x7467'6170'7065'6e64ull;
constexpr std::size_t kAppendHeader = 24;  // magic, claimed rows, room (each 8 bytes)

std::byte* append_header(const Tensor& flow) {
  const TensorImpl& impl = *flow.impl();
  if (impl.offset != 0 || !impl.buffer || !impl.buffer->owns_memory() || impl.dtype == DType::String) return nullptr;
  const std::size_t bytes = static_cast<std::size_t>(impl.buffer->count()) * dtype_size(impl.dtype);
  if (bytes < 2 * kAppendHeader) return nullptr;
  std::byte* h = static_cast<std::byte*>(impl.buffer->data()) + ((bytes - kAppendHeader) & ~std::size_t{7});
  uint64_t magic = 0;
  std::memcpy(&magic, h, sizeof magic);
  return magic == kAppendMagic ? h : nullptr;
}

// The rows a new appendable buffer has room for at least: as many as fit in 4 MB, from 4 to 64.
// A loop gradient's arrays get a row per iteration (an LSTM step of 32 iterations stores 7
// arrays of 16-64 KB rows), and growing from 4 rows copied each array's rows almost once more
// (4 + 8 + 16 of 32), serially between the step's parallel products. Rows past those written
// are never touched.
int64_t first_room(int64_t row_bytes) {
  return std::clamp<int64_t>((int64_t{4} << 20) / std::max<int64_t>(row_bytes, 1), 4, 64);
}

// A tensor of `count` rows of `row_elems` elements with room for `room` rows and the header.
Tensor allocate_appendable(DType dtype, const std::vector<int64_t>& dims, int64_t row_elems, int64_t room) {
  const std::size_t esize = dtype_size(dtype);
  const std::size_t data = static_cast<std::size_t>(room) * static_cast<std::size_t>(row_elems) * esize;
  const auto elems = static_cast<int64_t>((data + 2 * kAppendHeader + esize - 1) / esize);
  Tensor whole = allocate_tensor(dtype, TensorShape({elems}));
  const std::size_t bytes = static_cast<std::size_t>(elems) * esize;
  std::byte* h = bytes_of(whole) + ((bytes - kAppendHeader) & ~std::size_t{7});
  const int64_t fields[3] = {static_cast<int64_t>(kAppendMagic), dims[0], room};
  std::memcpy(h, fields, sizeof fields);
  return make_view(whole, TensorShape(dims));
}

// Claims row `count` of an appendable flow: whether the caller may write it in place.
bool claim_next_row(const Tensor& flow, int64_t count, int64_t row_bytes) {
  std::byte* h = append_header(flow);
  if (!h || row_bytes <= 0) return false;
  int64_t room = 0;
  std::memcpy(&room, h + 16, sizeof room);
  if (count >= room || h < bytes_of(flow) + room * row_bytes) return false;
  int64_t expected = count;
  return std::atomic_ref<int64_t>(*reinterpret_cast<int64_t*>(h + 8)).compare_exchange_strong(expected, count + 1);
}

void kernel_write(const std::vector<Tensor>& in, const OpAttrs& op_attrs, std::vector<Tensor>& out) {
  const TensorArrayAttrs& a = op_attrs.get<TensorArrayAttrs>();
  const char* op = "TensorArray.write";
  const Tensor& flow = in[0];
  // Traced with an index of unknown rank, its shape is first known here.
  check_index_type(op, ValueType{in[1].impl()->dtype, in[1].impl()->shape});
  const Tensor& value = in[2];
  const int64_t i = scalar_index(in[1]);
  const bool dynamic = a.dynamic;
  const TensorShape& fshape = flow.impl()->shape;
  const TensorShape& vshape = value.impl()->shape;
  const bool empty = fshape.rank() == 0;
  const int64_t old_count = empty ? 0 : fshape.dims()[0];
  if (i < 0 || (!dynamic && i >= a.size)) out_of_range(op, i, empty ? a.size : old_count, dynamic);
  if (i == std::numeric_limits<int64_t>::max())  // the array would grow to i + 1 elements
    op_error<InvalidArgumentError>(op, "index ", i, " is too large: the array would grow to index + 1 "
                                   "elements, more than int64 can count; write at a smaller index");
  const TensorShape element = empty ? hint_of(a) : element_shape_of(fshape, a);
  if (element.has_rank() && !(element == vshape) && !(element.is_compatible_with(vshape) && empty))
    op_error<InvalidArgumentError>(op, "the value has shape ", vshape.to_string(),
                                   " but the array's elements have shape ", element.to_string(),
                                   "; every element of a TensorArray has the same shape");
  const int64_t count = dynamic ? std::max({a.size, old_count, i + 1}) : a.size;
  std::vector<int64_t> dims{count};
  dims.insert(dims.end(), vshape.dims().begin(), vshape.dims().end());
  const DType dtype = flow.impl()->dtype;
  const std::size_t row = static_cast<std::size_t>(vshape.num_elements()) * dtype_size(dtype);
  if (dynamic && !empty && i == old_count && count == old_count + 1 &&
      claim_next_row(flow, old_count, static_cast<int64_t>(row))) {
    std::memcpy(bytes_of(flow) + row * static_cast<std::size_t>(i), bytes_of(value), row);
    out[0] = make_view(flow, TensorShape(dims));
    return;
  }
  // Room for more rows when this write appends (a write far past the end stays exact, and an
  // array too large to double is allocated as it is, or refused by the allocator).
  int64_t room = 0, room_bytes = 0;
  const bool appends = dynamic && row > 0 && i == old_count && count < (int64_t{1} << 40) &&
                       !__builtin_mul_overflow(std::max<int64_t>(4, 2 * count), static_cast<int64_t>(row), &room_bytes);
  if (appends) room = std::max(first_room(static_cast<int64_t>(row)), 2 * count);
  Tensor result = appends ? allocate_appendable(dtype, dims, vshape.num_elements(), room)
                          : allocate_tensor(dtype, TensorShape(dims));
  std::byte* dst = bytes_of(result);
  if (old_count) std::memcpy(dst, bytes_of(flow), row * static_cast<std::size_t>(old_count));
  std::memset(dst + row * static_cast<std::size_t>(old_count), 0, row * static_cast<std::size_t>(count - old_count));
  std::memcpy(dst + row * static_cast<std::size_t>(i), bytes_of(value), row);
  out[0] = std::move(result);
}

std::vector<ValueType> infer_read(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const TensorArrayAttrs& a = op_attrs.get<TensorArrayAttrs>();
  check_index_type("TensorArray.read", in[1]);
  return {ValueType{in[0].dtype, element_shape_of(in[0].shape, a)}};
}

void kernel_read(const std::vector<Tensor>& in, const OpAttrs& op_attrs, std::vector<Tensor>& out) {
  const TensorArrayAttrs& a = op_attrs.get<TensorArrayAttrs>();
  const char* op = "TensorArray.read";
  const Tensor& flow = in[0];
  // As in kernel_write.
  check_index_type(op, ValueType{in[1].impl()->dtype, in[1].impl()->shape});
  const int64_t i = scalar_index(in[1]);
  const TensorShape& fshape = flow.impl()->shape;
  if (fshape.rank() == 0)
    op_error<InvalidArgumentError>(op, "element ", i, " was read but nothing has been written to this "
                                   "TensorArray yet; write before reading");
  const int64_t count = fshape.dims()[0];
  if (i < 0 || i >= count) out_of_range(op, i, count, a.dynamic);
  const TensorShape element = element_shape_of(fshape, a);
  out[0] = make_view(flow, element, i * element.num_elements());
}

std::vector<ValueType> infer_stack(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const TensorArrayAttrs& a = op_attrs.get<TensorArrayAttrs>();
  return {ValueType{in[0].dtype, with_count(element_shape_of(in[0].shape, a), a)}};
}

void kernel_stack(const std::vector<Tensor>& in, const OpAttrs& op_attrs, std::vector<Tensor>& out) {
  const TensorArrayAttrs& a = op_attrs.get<TensorArrayAttrs>();
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
  std::vector<int64_t> dims{a.size};
  dims.insert(dims.end(), element.dims().begin(), element.dims().end());
  out[0] = zeros(TensorShape(dims), flow.impl()->dtype);
}

// The gradients. The flow is the whole array as one tensor (a row per element; a scalar before
// the first write), so each op's gradient is a TensorArray op on the gradient tensor: a write's
// is the written row (a read) and the rest (the row overwritten by zeros), a read's is zeros
// with its row written, a stack's passes through. Multiple reads of one element add up on the tape.

// A flow's gradient from `g`, a gradient shaped like an array with at least the flow's rows:
// those rows (a dynamic array may have grown past them), or zeros for an empty array's scalar
// placeholder, whose value no op reads. A flow carried by a loop has an unknown static rank, so
// that case is decided when the graph runs.
Tensor flow_gradient(const Tensor& g, const Tensor& flow, bool dynamic) {
  const TensorShape& s = static_shape(flow);
  if (s.has_rank() && s.rank() == 0) return zeros_like(flow);
  const Tensor dims = shape(flow);
  Tensor rows = g;
  if (dynamic) {
    // The flow's row count, 0 for a scalar flow (its shape is empty).
    const Tensor count = gather(concat({dims, zeros({1}, dims.dtype())}, 0), constant(int32_t{0}));
    rows = gather(g, range(count));
  }
  if (s.has_rank()) return rows;
  return where(size(dims) > 0, detail::sum_to_like(rows, flow), zeros_like(flow));
}

std::vector<Tensor> grad_write(const GradInputs& g) {
  const Tensor& flow = g.inputs[0];
  const Tensor& index = g.inputs[1];
  const Tensor& d = g.grads[0];
  std::vector<Tensor> out(3);
  if (g.wants(2)) out[2] = apply_op(OpId::TensorArrayRead, {d, index}, g.attrs)[0];
  if (g.wants(0)) {
    const Tensor rest = apply_op(OpId::TensorArrayWrite, {d, index, zeros_like(g.inputs[2])}, g.attrs)[0];
    out[0] = flow_gradient(rest, flow, g.attrs.get<TensorArrayAttrs>().dynamic);
  }
  return out;
}

std::vector<Tensor> grad_read(const GradInputs& g) {
  std::vector<Tensor> out(2);
  if (g.wants(0))
    out[0] = apply_op(OpId::TensorArrayWrite, {zeros_like(g.inputs[0]), g.inputs[1], g.grads[0]}, g.attrs)[0];
  return out;
}

std::vector<Tensor> grad_stack(const GradInputs& g) {
  return {flow_gradient(g.grads[0], g.inputs[0], g.attrs.get<TensorArrayAttrs>().dynamic)};
}

Tensor index_tensor(int64_t i) {
  return i >= INT32_MIN && i <= INT32_MAX ? constant(static_cast<int32_t>(i)) : constant(i);
}

}  // namespace

void register_tensor_array_ops(OpDef* t) {
  set_op(t, OpId::TensorArrayWrite, &infer_write, &kernel_write);
  set_op(t, OpId::TensorArrayRead, &infer_read, &kernel_read);
  set_op(t, OpId::TensorArrayStack, &infer_stack, &kernel_stack);
  set_grad(t, OpId::TensorArrayWrite, &grad_write);
  set_grad(t, OpId::TensorArrayRead, &grad_read);
  set_grad(t, OpId::TensorArrayStack, &grad_stack);
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

TensorArray::TensorArray(DType dtype, const Tensor& size, bool dynamic_size, TensorShape element_shape)
    : TensorArray(dtype, 0, dynamic_size, element_shape) {
  if (!size.defined()) throw ValueError("[TensorArray] the size is an empty tg::Tensor");
  const TensorShape s = detail::static_shape(size);
  if ((size.dtype() != DType::Int32 && size.dtype() != DType::Int64) || (s.has_rank() && s.rank() != 0))
    throw TypeError(detail::str_cat("[TensorArray] the size must be an int32 or int64 scalar, got ",
                                    to_string(size.dtype()), " ", s.to_string()));
  if (!size.is_symbolic()) {
    *this = TensorArray(dtype, detail::scalar_index(size), dynamic_size, std::move(element_shape));
    return;
  }
  // Known only at run time: the ops see a dynamic array (their size attribute is static) and
  // stack() pads it to the size.
  run_time_size_ = cast(size, DType::Int32);
  if (element_shape_.is_fully_defined()) {
    std::vector<int64_t> dims(element_shape_.dims().begin(), element_shape_.dims().end());
    const Tensor element = dims.empty() ? zeros(TensorShape{0}, DType::Int32)
                                        : constant(std::vector<int64_t>(dims), TensorShape{static_cast<int64_t>(dims.size())}, DType::Int32);
    flow_ = zeros(concat({reshape(run_time_size_, {1}), element}, 0), dtype);
  }
}

int64_t TensorArray::size() const {
  if (run_time_size_.defined())
    throw ValueError("[TensorArray.size] the size is a tensor known only at run time; use size_tensor()");
  return size_;
}

Tensor TensorArray::size_tensor() const {
  if (run_time_size_.defined()) return run_time_size_;
  return detail::index_tensor(size_);
}

TensorArray TensorArray::with_flow(const Tensor& flow) const {
  TensorArray out = *this;
  out.flow_ = flow;
  const TensorShape s = detail::static_shape(flow);
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
                                                detail::array_attrs(size_, dynamic_ || run_time_size_.defined(), element_shape_)));
  if (!out.element_shape_.has_rank()) out.element_shape_ = detail::static_shape(value);
  return out;
}
TensorArray TensorArray::write(int64_t index, const Tensor& value) const {
  return write(detail::index_tensor(index), value);
}

Tensor TensorArray::read(const Tensor& index) const {
  if (!index.defined()) throw ValueError("[TensorArray.read] the index is an empty tg::Tensor");
  return detail::apply_op1(detail::OpId::TensorArrayRead, {flow_, index},
                           detail::array_attrs(size_, dynamic_ || run_time_size_.defined(), element_shape_));
}
Tensor TensorArray::read(int64_t index) const { return read(detail::index_tensor(index)); }

Tensor TensorArray::stack() const {
  const Tensor stacked = detail::apply_op1(detail::OpId::TensorArrayStack, {flow_},
                                           detail::array_attrs(size_, dynamic_ || run_time_size_.defined(), element_shape_));
  if (!run_time_size_.defined() || dynamic_) return stacked;
  // A run-time size: the elements after the last one written are zeros.
  const Tensor count = shape(stacked);
  const Tensor missing = reshape(run_time_size_ - count[0], {1});
  const Tensor rest = slice(count, {1}, {-1});
  return concat({stacked, zeros(concat({missing, rest}, 0), dtype_)}, 0);
}

}  // namespace tg
