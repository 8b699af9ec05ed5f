// What a Tensor handle points at.
#pragma once
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/thread_context.h"
#include "tracegraph/tensor.h"

namespace tg::detail {

/// Tells core code, which knows no recorders, that a trace records on this thread while it
/// lives (the op layer's RecorderScope holds one), so that it can tell a leaked symbolic tensor
/// from one used inside its trace.
class TraceRecordingScope {
 public:
  explicit TraceRecordingScope(bool recording);

 private:
  ScopedThreadValue<bool> recording_;
};

/// Opaque link from a symbolic tensor to the graph value it stands for (the tracing layer
/// derives from it). Kept abstract here so that core/ and ops/ do not depend on graphs.
struct SymbolicValue {
  virtual ~SymbolicValue() = default;
  /// The graph-level name, e.g. "x:0".
  virtual std::string name() const = 0;
  /// Where it was made, for messages: "'add:0' of function 'f' (trace 2)".
  virtual std::string origin() const = 0;
  /// The traced code read dimension `dim` of this value's shape as an integer: the trace is
  /// specialised to that size.
  virtual void on_static_dims_read(int64_t /*dim*/) const {}
  /// What tracing knows of the elements of a scalar or 1-D integer value (a shape being built:
  /// src/ops/known_values.h), None where unknown; null when nothing is known.
  std::shared_ptr<const std::vector<int64_t>> known_elements;
};

struct TensorImpl {
  // User-provided, so that allocate_shared's value-initialisation does not zero the whole object
  // first (a `rep stos`, a tenth of an eager op's allocation) before the members get their own.
  TensorImpl() noexcept {}
  DType dtype{};
  TensorShape shape;                      // fully defined for eager tensors
  std::shared_ptr<Buffer> buffer;         // eager: the storage (shared by views)
  int64_t offset = 0;                     // eager: first element's index in buffer
  std::shared_ptr<SymbolicValue> symbolic;  // set for symbolic tensors only

  template <class T>
  T* data() const {
    return static_cast<T*>(buffer->data()) + offset;
  }
};

/// A tensor's static shape as the library reads it: None dims as tg::None, an unknown rank as
/// unknown, never raising. (Tensor::shape() of a symbolic tensor checks what user code reads.)
inline const TensorShape& static_shape(const Tensor& t) { return t.impl()->shape; }

/// An empty handle, from the per-thread object lists (buffer.h): every op call and every
/// recorded op makes and drops a few, where glibc's malloc and free would cost a tenth of a
/// cached call each.
inline std::shared_ptr<TensorImpl> new_tensor_impl() {
  return std::allocate_shared<TensorImpl>(RecyclingAllocator<TensorImpl>());
}

/// A fresh eager tensor with uninitialised (numeric) storage of a fully defined shape.
Tensor allocate_tensor(DType dtype, const TensorShape& shape);
/// An eager tensor that shares x's storage under another shape with the same element count.
Tensor make_view(const Tensor& x, const TensorShape& shape, int64_t extra_offset = 0);
/// The values of an eager tensor as NumPy prints them ("[1 2 3]", "2.5"), without the
/// "tg.Tensor(...)" wrapper (tg::print uses this).
std::string format_values(const Tensor& t);
/// The values as tf.print writes them (src/core/print_format.cpp): the first and last
/// `summarize` entries of every longer dimension (-1: all of them).
std::string format_print_values(const Tensor& t, int64_t summarize);
/// Raw pointer to the first element of an eager tensor (no dtype check).
template <class T>
T* data_of(const Tensor& t) {
  return t.impl()->template data<T>();
}
/// Raw pointer to the first byte of an eager tensor's elements, whatever its dtype (null for a
/// tensor without storage).
inline std::byte* bytes_of(const Tensor& t) {
  const TensorImpl& impl = *t.impl();
  if (!impl.buffer) return nullptr;
  return static_cast<std::byte*>(impl.buffer->data()) + impl.offset * static_cast<int64_t>(dtype_size(impl.dtype));
}

/// Copies an eager tensor's elements into another of as many elements of its dtype (nothing for
/// an empty tensor, whose storage may be null).
inline void copy_elements(const Tensor& from, const Tensor& to) {
  const std::size_t n = static_cast<std::size_t>(from.impl()->shape.num_elements()) * dtype_size(from.impl()->dtype);
  if (n) std::memcpy(bytes_of(to), bytes_of(from), n);
}

}  // namespace tg::detail
