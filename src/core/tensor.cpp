#include <cstdio>
#include <ostream>

#include "core/check.h"
#include "core/sink.h"
#include "core/tensor_impl.h"

namespace tg {

namespace detail {

Tensor allocate_tensor(DType dtype, const TensorShape& shape) {
  TG_CHECK(shape.is_fully_defined(), "eager tensors need a fully defined shape, got ",
           shape.to_string());
  auto impl = new_tensor_impl();
  impl->dtype = dtype;
  impl->shape = shape;
  impl->buffer = Buffer::allocate(dtype, shape.num_elements());
  return Tensor(std::move(impl));
}

Tensor make_view(const Tensor& x, const TensorShape& shape, int64_t extra_offset) {
  const auto& src = x.impl();
  TG_CHECK(src && src->buffer, "views need an eager tensor");
  TG_CHECK(extra_offset >= 0 && src->offset + extra_offset + shape.num_elements() <=
                                    src->buffer->count());
  auto impl = new_tensor_impl();
  impl->dtype = src->dtype;
  impl->shape = shape;
  impl->buffer = src->buffer;
  impl->offset = src->offset + extra_offset;
  return Tensor(std::move(impl));
}

namespace {
// Whether a trace records on this thread (TraceRecordingScope).
thread_local bool t_trace_recording = false;
}  // namespace

TraceRecordingScope::TraceRecordingScope(bool recording) : recording_(t_trace_recording, recording) {}

namespace {
const TensorImpl& checked(const Tensor& t, const char* what) {
  if (!t.impl())
    throw ValueError(str_cat("[", what,
                             "] called on an empty tg::Tensor (default-constructed or "
                             "moved-from); assign it a value first"));
  return *t.impl();
}

const TensorImpl& checked_eager(const Tensor& t, const char* what) {
  const TensorImpl& impl = checked(t, what);
  if (impl.symbolic && !t_trace_recording)
    throw TypeError(str_cat("[", what, "] the symbolic tensor ", impl.symbolic->origin(),
                            " leaked out of its trace: it stands for a value of a graph and has no "
                            "value of its own. Return it from the function and use the returned "
                            "tensor instead of keeping the symbolic one"));
  if (impl.symbolic)
    throw TypeError(str_cat("[", what, "] ", t.to_string(),
                            " is symbolic: it has no value while a function is being traced. "
                            "Return it from the function to get its value, or use tg::print "
                            "to see it at run time"));
  return impl;
}

template <class T>
void check_dtype(const TensorImpl& impl, const char* what) {
  if (impl.dtype != dtype_of_v<T>)
    throw TypeError(str_cat("[", what, "] the tensor has dtype ", to_string(impl.dtype),
                            " but ", to_string(dtype_of_v<T>),
                            " elements were requested; request the matching C++ type or "
                            "tg::cast the tensor first"));
}
}  // namespace
}  // namespace detail

using detail::checked;

DType Tensor::dtype() const { return checked(*this, "dtype").dtype; }
namespace {
// A symbolic tensor's shape checks what C++ code reads of it (see TensorShape).
TensorShape checked_shape(const Tensor& t, const char* what) {
  const auto& impl = checked(t, what);
  return impl.symbolic ? detail::checked_shape(impl.shape, impl.symbolic) : impl.shape;
}
}  // namespace

TensorShape Tensor::shape() const { return checked_shape(*this, "shape"); }
int64_t Tensor::rank() const { return checked_shape(*this, "rank").rank(); }
int64_t Tensor::num_elements() const { return checked_shape(*this, "num_elements").num_elements(); }
bool Tensor::is_symbolic() const { return checked(*this, "is_symbolic").symbolic != nullptr; }

template <class T>
std::vector<T> Tensor::to_vector() const {
  const auto& impl = detail::checked_eager(*this, "to_vector");
  detail::check_dtype<T>(impl, "to_vector");
  const T* p = impl.data<T>();
  return std::vector<T>(p, p + impl.shape.num_elements());
}

template <class T>
T Tensor::item() const {
  const auto& impl = detail::checked_eager(*this, "item");
  detail::check_dtype<T>(impl, "item");
  if (impl.shape.num_elements() != 1)
    throw InvalidArgumentError(detail::str_cat(
        "[item] expected a tensor with exactly 1 element, got shape ", impl.shape.to_string(),
        " (", impl.shape.num_elements(), " elements); index or reduce it first"));
  return *impl.data<T>();
}

const void* Tensor::data() const {
  const auto& impl = detail::checked_eager(*this, "data");
  return static_cast<const char*>(impl.buffer->data()) + impl.offset * static_cast<int64_t>(dtype_size(impl.dtype));
}

template <class T>
const T* Tensor::data() const {
  const auto& impl = detail::checked_eager(*this, "data");
  detail::check_dtype<T>(impl, "data");
  return impl.data<T>();
}

Tensor from_blob(void* data, const TensorShape& shape, DType dtype, std::function<void(void*)> deleter) {
  using detail::op_error;
  if (dtype == DType::String)
    op_error<TypeError>("from_blob", "string tensors cannot wrap memory (their elements are C++ objects "
                        "that tracegraph constructs); build them with tg::constant");
  if (!shape.is_fully_defined())
    op_error<InvalidArgumentError>("from_blob", "expected a fully defined shape, got ", shape.to_string(),
                                   "; the memory holds a known number of elements, so give every dim");
  if (data == nullptr)
    op_error<InvalidArgumentError>("from_blob", "data is a null pointer (for shape ", shape.to_string(),
                                   ", dtype ", to_string(dtype), "); pass the address of the elements");
  const auto size = dtype_size(dtype);
  if (reinterpret_cast<uintptr_t>(data) % size != 0)
    op_error<InvalidArgumentError>("from_blob", "data ", data, " is not aligned to ", size, " bytes, the size of a ",
                                   to_string(dtype), " element; copy the elements to aligned memory (e.g. a "
                                   "std::vector of the element type) first");
  // The deleter runs when the last Buffer (shared by every view) lets the owner go. A deleter
  // that throws would end the program from a destructor, so its exception is reported to the
  // diagnostics sink (tg::config::set_log_sink), not thrown; so is a sink that throws, to stderr.
  std::shared_ptr<const void> owner(data, [deleter = std::move(deleter)](const void* p) noexcept {
    if (!deleter) return;
    std::string what;
    try {
      deleter(const_cast<void*>(p));
      return;
    } catch (const std::exception& e) {
      what = detail::str_cat(" (", e.what(), ")");
    } catch (...) {
    }
    const std::string message = "tracegraph: a tg::from_blob deleter threw" + what + "; deleters must not throw";
    try {
      detail::log_message(message);
    } catch (...) {
      std::fprintf(stderr, "%s\n", message.c_str());
    }
  });
  auto impl = std::make_shared<detail::TensorImpl>();
  impl->dtype = dtype;
  impl->shape = shape;
  impl->buffer = detail::Buffer::wrap(dtype, shape.num_elements(), data, std::move(owner));
  return Tensor(std::move(impl));
}

#define TG_INSTANTIATE(T)                               \
  template std::vector<T> Tensor::to_vector<T>() const; \
  template T Tensor::item<T>() const;                   \
  template const T* Tensor::data<T>() const;
TG_INSTANTIATE(float)
TG_INSTANTIATE(double)
TG_INSTANTIATE(int32_t)
TG_INSTANTIATE(int64_t)
TG_INSTANTIATE(bool)
TG_INSTANTIATE(std::string)
TG_INSTANTIATE(uint8_t)
TG_INSTANTIATE(bfloat16_t)
#undef TG_INSTANTIATE

Tensor::operator bool() const {
  const auto& impl = checked(*this, "operator bool");
  if (impl.symbolic)
    throw TypeError(detail::str_cat(
        "[operator bool] using the symbolic tensor ", to_string(),
        " as a C++ bool is not allowed while tracing: its value is only known when the graph "
        "runs. Use tg::cond(pred, true_fn, false_fn) for if/else, or tg::while_loop for loops, "
        "so that the choice is made in the graph"));
  if (impl.shape.num_elements() != 1)
    throw InvalidArgumentError(detail::str_cat(
        "[operator bool] the truth value of a tensor with ", impl.shape.num_elements(),
        " elements (shape ", impl.shape.to_string(),
        ") is ambiguous; use tg::reduce_any or tg::reduce_all"));
  switch (impl.dtype) {
    case DType::Float32: return *impl.data<float>() != 0;
    case DType::Float64: return *impl.data<double>() != 0;
    case DType::Int32: return *impl.data<int32_t>() != 0;
    case DType::Int64: return *impl.data<int64_t>() != 0;
    case DType::UInt8: return *impl.data<uint8_t>() != 0;
    case DType::BFloat16: return static_cast<float>(*impl.data<bfloat16_t>()) != 0;
    case DType::Bool: return *impl.data<bool>();
    case DType::String: break;
  }
  throw TypeError(
      "[operator bool] a string tensor has no truth value; compare it (==, !=) to get a bool "
      "tensor");
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

}  // namespace tg
