// Trace types of Python values that the C++ library has no kind for (tg.function in Python,
// TensorFlow's default_types): None, objects by identity (weak references), hashable values by
// ==, and user TraceTypes written in Python (__tf_tracing_type__). Also the one way this module
// drops a Python reference from code that may not hold the GIL.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bindings.h"

namespace tgpy {

/// Drops a reference. With the GIL: at once. Without it (a trace type destroyed inside the
/// function core, which runs with the GIL released): queued, and dropped by the interpreter's
/// next pending call - never blocking for the GIL where the core may hold its own locks.
void release_reference(PyObject* object) noexcept;
/// Drops the queued references now (called with the GIL held).
void drain_released_references();

/// An owning reference that may be dropped on any thread.
class PyRef {
 public:
  PyRef() = default;
  explicit PyRef(py::handle h) : p_(h.ptr()) { Py_XINCREF(p_); }
  PyRef(const PyRef&) = delete;
  PyRef& operator=(const PyRef&) = delete;
  ~PyRef() {
    if (p_ != nullptr) release_reference(p_);
  }
  py::handle get() const { return p_; }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  PyObject* p_ = nullptr;
};

/// None (TF's Literal[None]).
tg::TraceTypePtr none_trace_type();
bool is_none_type(const tg::TraceType& t);

/// An object by identity, held weakly (TF's Weakref): the same live object matches; a distinct
/// one matches when its class defines __eq__ and the two compare equal. A dead object never
/// matches again. nullptr when `object` cannot be weakly referenced.
tg::TraceTypePtr object_trace_type(py::handle object);
/// Whether `t` is the identity type of exactly this live object (the cached path's check: no
/// Python call, no GIL needed beyond reading the pointer).
bool object_type_is(const tg::TraceType& t, PyObject* object);
/// The live object of an identity type, or None.
py::object object_of(const tg::TraceType& t);

/// A hashable value that is neither a built-in literal nor weakly referenceable (bytes, a big
/// int, a frozenset, ...): matched by == whatever the two values' types, a NaN number matching
/// every NaN number; held strongly (TF's Literal).
tg::TraceTypePtr value_trace_type(py::handle value);
py::object value_of(const tg::TraceType& t);
/// Whether `t` is the value type of a NaN number (TF's NaN marker).
bool is_nan_value_type(const tg::TraceType& t);

/// A tg.types.experimental.TraceType instance written in Python (the __tf_tracing_type__
/// protocol): each TraceType method calls the Python one under the GIL.
tg::TraceTypePtr custom_trace_type(py::handle python_type);
/// The Python TraceType of a custom type, or nullptr.
PyObject* custom_python_type(const tg::TraceType& t);

/// The static names in LiteralValue::cpp_type of the literals of Python values: a number equal
/// to an int64 (a bool, an int, an integral float or a complex with no imaginary part), any
/// other float-valued number (with one NaN for every NaN), and a str.
extern const char* const kPyInt;
extern const char* const kPyFloat;
extern const char* const kPyStr;

}  // namespace tgpy
