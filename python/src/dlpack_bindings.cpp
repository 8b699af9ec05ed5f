// DLPack (the tensor exchange ABI of NumPy, PyTorch, JAX and others; Debian's libdlpack-dev):
// tg.experimental.dlpack.to_dlpack / from_dlpack and the protocol methods Tensor.__dlpack__ /
// __dlpack_device__, so that np.from_dlpack(t), torch.from_dlpack(t) and
// tg.experimental.dlpack.from_dlpack(array_or_tensor) share the elements instead of copying them.
//
// Out: a capsule named "dltensor" holding a DLManagedTensor whose context keeps a tg::Tensor
// handle (so the buffer lives while the consumer holds it) and the shape and strides arrays.
// tracegraph's tensors are immutable: a consumer that writes into the shared memory changes the
// tensor, as with TF's to_dlpack.
//
// In: the producer's DLManagedTensor wrapped with tg::from_blob, its deleter called when the
// last tracegraph tensor sharing the memory goes; the capsule is renamed "used_dltensor" (the
// protocol's mark that it was consumed). Memory that is not row-major contiguous, or not aligned
// to its element size, is copied instead (tracegraph's tensors have no strides).
#include <dlpack/dlpack.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bindings.h"
#include "core/tensor_impl.h"

namespace tgpy {
namespace {

constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedCapsuleName = "used_dltensor";
// DLPack 0.8's code for bool (DLPACK_VERSION 60 has none; PyTorch and NumPy export bool with it).
constexpr uint8_t kDLBoolCode = 6;

// ---- out ----------------------------------------------------------------------------------

struct Exported {
  tg::Tensor tensor;  // keeps the elements alive
  std::vector<int64_t> shape, strides;
  DLManagedTensor managed{};
};

void delete_exported(DLManagedTensor* self) noexcept {
  delete static_cast<Exported*>(self->manager_ctx);  // no Python object inside: no GIL needed
}

DLDataType dl_dtype(tg::DType dtype) {
  switch (dtype) {
    case tg::DType::Float32: return {kDLFloat, 32, 1};
    case tg::DType::Float64: return {kDLFloat, 64, 1};
    case tg::DType::Int32: return {kDLInt, 32, 1};
    case tg::DType::Int64: return {kDLInt, 64, 1};
    case tg::DType::UInt8: return {kDLUInt, 8, 1};
    case tg::DType::Bool: return {kDLBoolCode, 8, 1};
    case tg::DType::BFloat16: return {kDLBfloat, 16, 1};
    case tg::DType::String: break;
  }
  type_error("a string tensor cannot be exported through DLPack: DLPack holds numbers only");
}

// A capsule that is never consumed frees its tensor when Python drops it; a consumed one
// ("used_dltensor") belongs to its consumer.
void capsule_destructor(PyObject* capsule) noexcept {
  if (!PyCapsule_IsValid(capsule, kCapsuleName)) return;
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (managed && managed->deleter) managed->deleter(managed);
}

py::capsule to_dlpack(const tg::Tensor& t) {
  if (!t.defined()) value_error("to_dlpack needs a tensor; got an empty tg.Tensor handle");
  if (t.is_symbolic())
    type_error("to_dlpack needs an eager tensor; got a symbolic tensor of a tg.function's trace, whose "
               "values exist only when the graph runs. Call it on the function's result instead");
  const DLDataType type = dl_dtype(t.dtype());
  auto ctx = std::make_unique<Exported>();
  ctx->tensor = t;
  ctx->shape = t.shape().dims();
  ctx->strides.assign(ctx->shape.size(), 1);
  for (std::size_t i = ctx->shape.size(); i-- > 1;) ctx->strides[i - 1] = ctx->strides[i] * ctx->shape[i];
  DLTensor& dl = ctx->managed.dl_tensor;
  dl.data = tg::detail::bytes_of(ctx->tensor);
  dl.device = {kDLCPU, 0};
  dl.ndim = static_cast<int32_t>(ctx->shape.size());
  dl.dtype = type;
  dl.shape = ctx->shape.data();
  dl.strides = ctx->strides.data();
  dl.byte_offset = 0;
  ctx->managed.manager_ctx = ctx.get();
  ctx->managed.deleter = &delete_exported;
  DLManagedTensor* managed = &ctx->managed;
  PyObject* capsule = PyCapsule_New(managed, kCapsuleName, &capsule_destructor);
  if (!capsule) throw py::error_already_set();
  ctx.release();  // the capsule (or its consumer) owns it now
  return py::reinterpret_steal<py::capsule>(capsule);
}

// ---- in -----------------------------------------------------------------------------------

tg::DType tg_dtype(const DLDataType& t) {
  if (t.lanes == 1) {
    if (t.code == kDLFloat && t.bits == 32) return tg::DType::Float32;
    if (t.code == kDLFloat && t.bits == 64) return tg::DType::Float64;
    if (t.code == kDLInt && t.bits == 32) return tg::DType::Int32;
    if (t.code == kDLInt && t.bits == 64) return tg::DType::Int64;
    if (t.code == kDLUInt && t.bits == 8) return tg::DType::UInt8;
    if (t.code == kDLBoolCode && t.bits == 8) return tg::DType::Bool;
    if (t.code == kDLBfloat && t.bits == 16) return tg::DType::BFloat16;
  }
  type_error("from_dlpack: the tensor's DLPack dtype (code " + std::to_string(t.code) + ", " +
             std::to_string(t.bits) + " bits, " + std::to_string(t.lanes) +
             " lanes) has no tracegraph dtype; tracegraph takes float32, float64, int32, int64, uint8, "
             "bool and bfloat16 - convert it first (e.g. torch's .float() or NumPy's astype)");
}

// The producer's deleter, called once: from the capsule's consumer (us) when the last tensor
// goes, possibly on a thread without the GIL; a Python producer's deleter drops Python
// references, so it runs under the GIL while an interpreter exists.
void call_producer_deleter(DLManagedTensor* managed) noexcept {
  if (!managed->deleter) return;
  if (!Py_IsInitialized()) return;  // nothing left to free into
  PyGILState_STATE state = PyGILState_Ensure();
  managed->deleter(managed);
  PyGILState_Release(state);
}

// Whether `dl` is row-major contiguous (null strides mean so, as do any strides of dims of size 1).
bool row_major(const DLTensor& dl) {
  if (!dl.strides) return true;
  int64_t expected = 1;
  for (int32_t i = dl.ndim; i-- > 0;) {
    if (dl.shape[i] != 1 && dl.strides[i] != expected) return false;
    expected *= dl.shape[i];
  }
  return true;
}

// The elements of a strided DLTensor copied into a fresh row-major tensor.
tg::Tensor copy_strided(const DLTensor& dl, const tg::TensorShape& shape, tg::DType dtype) {
  tg::Tensor out = tg::zeros(shape, dtype);
  const int64_t n = shape.num_elements();
  const std::size_t item = tg::dtype_size(dtype);
  const auto* base = static_cast<const std::byte*>(dl.data) + dl.byte_offset;
  std::byte* to = tg::detail::bytes_of(out);
  std::vector<int64_t> index(static_cast<std::size_t>(dl.ndim), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t offset = 0;
    for (int32_t d = 0; d < dl.ndim; ++d) offset += index[static_cast<std::size_t>(d)] * dl.strides[d];
    std::memcpy(to + static_cast<std::size_t>(k) * item, base + offset * static_cast<int64_t>(item), item);
    for (int32_t d = dl.ndim; d-- > 0;) {
      if (++index[static_cast<std::size_t>(d)] < dl.shape[d]) break;
      index[static_cast<std::size_t>(d)] = 0;
    }
  }
  return out;
}

tg::Tensor from_dlpack(py::object value) {
  if (const tg::Tensor* t = as_tensor_ptr(value)) return *t;
  py::object capsule = value;
  if (!PyCapsule_CheckExact(value.ptr())) {
    if (!py::hasattr(value, "__dlpack__"))
      type_error("from_dlpack takes an object with __dlpack__ (a NumPy array, a PyTorch tensor, ...) or a "
                 "DLPack capsule; got " + std::string(py::str(py::type::of(value).attr("__name__"))));
    if (py::hasattr(value, "__dlpack_device__")) {
      const py::tuple device = value.attr("__dlpack_device__")();
      if (device[0].cast<int>() != kDLCPU)
        value_error("from_dlpack: the tensor lives on DLPack device type " + std::to_string(device[0].cast<int>()) +
                    "; tracegraph runs on the CPU - copy it to the CPU first (e.g. torch's .cpu())");
    }
    capsule = value.attr("__dlpack__")();
  }
  if (!PyCapsule_IsValid(capsule.ptr(), kCapsuleName)) {
    if (PyCapsule_IsValid(capsule.ptr(), kUsedCapsuleName))
      value_error("from_dlpack: this DLPack capsule was already consumed; a capsule can be read once - ask the "
                  "producer for a new one");
    type_error("from_dlpack: expected a capsule named 'dltensor'");
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kCapsuleName));
  const DLTensor& dl = managed->dl_tensor;
  if (dl.device.device_type != kDLCPU && dl.device.device_type != kDLCUDAHost)
    value_error("from_dlpack: the tensor lives on DLPack device type " + std::to_string(dl.device.device_type) +
                "; tracegraph runs on the CPU - copy it to the CPU first");
  const tg::DType dtype = tg_dtype(dl.dtype);
  std::vector<int64_t> dims(dl.shape, dl.shape + dl.ndim);
  for (int64_t d : dims)
    if (d < 0) value_error("from_dlpack: a DLPack tensor has a negative dim (" + std::to_string(d) + ")");
  const tg::TensorShape shape(dims);
  // From here the producer's tensor is ours: the capsule is marked consumed, and every path
  // below ends with its deleter called exactly once.
  PyCapsule_SetName(capsule.ptr(), kUsedCapsuleName);
  PyCapsule_SetDestructor(capsule.ptr(), nullptr);
  auto* data = static_cast<std::byte*>(dl.data) + dl.byte_offset;
  const bool aligned = reinterpret_cast<std::uintptr_t>(data) % tg::dtype_size(dtype) == 0;
  if (shape.num_elements() == 0 || !row_major(dl) || !aligned || data == nullptr) {
    tg::Tensor copy;
    try {
      copy = shape.num_elements() == 0 ? tg::zeros(shape, dtype) : copy_strided(dl, shape, dtype);
    } catch (...) {
      call_producer_deleter(managed);
      throw;
    }
    call_producer_deleter(managed);
    return copy;
  }
  try {
    return tg::from_blob(data, shape, dtype, [managed](void*) { call_producer_deleter(managed); });
  } catch (...) {
    call_producer_deleter(managed);  // from_blob refused: its deleter was not called
    throw;
  }
}

}  // namespace

void register_dlpack(py::module_& m) {
  m.def("_to_dlpack", &to_dlpack, py::arg("tensor"),
        "A DLPack capsule sharing the tensor's elements (tg.experimental.dlpack.to_dlpack)");
  m.def("_from_dlpack", &from_dlpack, py::arg("dlpack"),
        "A tensor sharing the elements of a DLPack capsule or of an object with __dlpack__");
  py::object tensor = m.attr("Tensor");
  tensor.attr("__dlpack__") = py::cpp_function(
      [](const tg::Tensor& t, py::object stream) {
        if (!stream.is_none())
          value_error("__dlpack__: stream must be None for a CPU tensor, got " + std::string(py::repr(stream)));
        return to_dlpack(t);
      },
      py::is_method(tensor), py::arg("stream") = py::none());
  tensor.attr("__dlpack_device__") =
      py::cpp_function([](const tg::Tensor&) { return py::make_tuple(static_cast<int>(kDLCPU), 0); },
                       py::is_method(tensor));
}

}  // namespace tgpy
