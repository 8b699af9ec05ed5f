// Trace types of Python values the C++ library has no kind for (see py_trace_types.h).
#include "py_trace_types.h"

#include <cstdio>
#include <mutex>

namespace tgpy {

const char* const kPyInt = "int";
const char* const kPyFloat = "float";
const char* const kPyStr = "str";

namespace {

bool interpreter_gone() {
#if PY_VERSION_HEX >= 0x030D0000
  return !Py_IsInitialized() || Py_IsFinalizing();
#else
  return !Py_IsInitialized() || _Py_IsFinalizing();
#endif
}

std::mutex& pending_mu() {
  static std::mutex mu;
  return mu;
}
std::vector<PyObject*>& pending() {
  static auto* objects = new std::vector<PyObject*>();  // never destroyed: used at exit
  return *objects;
}
bool g_drain_scheduled = false;  // guarded by pending_mu()

int drain_pending_call(void*) {
  drain_released_references();
  return 0;
}

// Python's error as a C++ exception that pybind11 restores (the caller holds the GIL).
[[noreturn]] void throw_python_error() { throw py::error_already_set(); }

std::string short_repr(py::handle h) {
  std::string s = py::repr(h).cast<std::string>();
  if (s.size() > 120) s = s.substr(0, 117) + "...";
  return s;
}

class NoneTraceType final : public tg::TraceType {
 public:
  bool is_subtype_of(const tg::TraceType& o) const override { return equals(o); }
  tg::TraceTypePtr most_specific_common_supertype(const std::vector<const tg::TraceType*>& others) const override {
    for (const tg::TraceType* o : others)
      if (!equals(*o)) return nullptr;
    return none_trace_type();
  }
  bool equals(const tg::TraceType& o) const override { return dynamic_cast<const NoneTraceType*>(&o) != nullptr; }
  std::size_t hash() const override { return 0x4e6f6e65; }
  std::string to_string() const override { return "Literal[None]"; }
};

// Set by the weak reference's callback when the object dies (with the GIL), read without it.
struct ObjectLife {
  std::atomic<bool> dead{false};
};

class ObjectTraceType final : public tg::TraceType {
 public:
  ObjectTraceType(PyObject* ref, std::shared_ptr<ObjectLife> life, uintptr_t id, std::size_t hash,
                  std::string text, bool custom_eq)
      : ref_(ref), life_(std::move(life)), id_(id), hash_(hash), text_(std::move(text)), custom_eq_(custom_eq) {}
  ~ObjectTraceType() override { release_reference(ref_); }
  bool alive() const { return !life_->dead.load(std::memory_order_acquire); }
  bool is(PyObject* object) const { return alive() && reinterpret_cast<uintptr_t>(object) == id_; }
  py::object object() const {
    if (!alive()) return py::none();
    return py::reinterpret_borrow<py::object>(PyWeakref_GetObject(ref_));
  }
  bool equals(const tg::TraceType& o) const override {
    auto* t = dynamic_cast<const ObjectTraceType*>(&o);
    if (t == nullptr || !alive() || !t->alive()) return false;
    if (t->id_ == id_) return true;
    if (!custom_eq_ || !t->custom_eq_) return false;
    py::gil_scoped_acquire gil;
    py::object a = object(), b = t->object();
    if (a.is_none() || b.is_none()) return false;
    const int eq = PyObject_RichCompareBool(a.ptr(), b.ptr(), Py_EQ);
    if (eq < 0) throw_python_error();
    return eq == 1;
  }
  bool is_subtype_of(const tg::TraceType& o) const override { return equals(o); }
  tg::TraceTypePtr most_specific_common_supertype(const std::vector<const tg::TraceType*>& others) const override {
    for (const tg::TraceType* o : others)
      if (!equals(*o)) return nullptr;
    return self_.lock();
  }
  std::size_t hash() const override { return hash_; }
  std::string to_string() const override { return "Object[" + text_ + (alive() ? "]" : " (deleted)]"); }
  std::weak_ptr<const ObjectTraceType> self_;

 private:
  PyObject* ref_;  // the weak reference (owned)
  std::shared_ptr<ObjectLife> life_;
  uintptr_t id_;
  std::size_t hash_;
  std::string text_;
  bool custom_eq_;
};

// TF's Literal of any other hashable value: equal when the values are == (whatever their types,
// as `self.value == other.value`), every NaN number matching every other (TF's NaN marker).
class ValueTraceType final : public tg::TraceType {
 public:
  ValueTraceType(py::handle value, std::size_t hash, std::string text, bool nan)
      : value_(value), hash_(hash), text_(std::move(text)), nan_(nan) {}
  bool equals(const tg::TraceType& o) const override {
    auto* t = dynamic_cast<const ValueTraceType*>(&o);
    if (t == nullptr || t->nan_ != nan_ || t->hash_ != hash_) return false;
    if (t == this || nan_) return true;
    py::gil_scoped_acquire gil;
    const int eq = PyObject_RichCompareBool(value_.get().ptr(), t->value_.get().ptr(), Py_EQ);
    if (eq < 0) throw_python_error();
    return eq == 1;
  }
  bool is_subtype_of(const tg::TraceType& o) const override { return equals(o); }
  tg::TraceTypePtr most_specific_common_supertype(const std::vector<const tg::TraceType*>& others) const override {
    for (const tg::TraceType* o : others)
      if (!equals(*o)) return nullptr;
    return self_.lock();
  }
  std::size_t hash() const override { return hash_; }
  std::string to_string() const override { return "Literal[" + text_ + "]"; }
  py::object value() const { return py::reinterpret_borrow<py::object>(value_.get()); }
  bool nan() const { return nan_; }
  std::weak_ptr<const ValueTraceType> self_;

 private:
  PyRef value_;
  std::size_t hash_;
  std::string text_;
  bool nan_;
};

// TF's is_nan: a number (numbers.Number) that is NaN - a float, or a complex with a NaN part -
// which is exactly a number that is not == to itself.
bool is_nan_number(py::handle value) {
  static PyObject* number = py::object(py::module_::import("numbers").attr("Number")).release().ptr();  // kept
  const int is_number = PyObject_IsInstance(value.ptr(), number);
  if (is_number != 1) {
    if (is_number < 0) PyErr_Clear();
    return false;
  }
  PyObject* same = PyObject_RichCompare(value.ptr(), value.ptr(), Py_EQ);
  const int truth = same == nullptr ? -1 : PyObject_IsTrue(same);
  Py_XDECREF(same);
  if (truth < 0) {
    PyErr_Clear();  // a signalling value that refuses comparison: compared by == later, as TF does
    return false;
  }
  return truth == 0;
}

class CustomTraceType final : public tg::TraceType {
 public:
  CustomTraceType(py::handle type, std::size_t hash, std::string text) : type_(type), hash_(hash), text_(std::move(text)) {}
  PyObject* python() const { return type_.get().ptr(); }
  bool is_subtype_of(const tg::TraceType& o) const override {
    auto* t = dynamic_cast<const CustomTraceType*>(&o);
    if (t == nullptr) return false;
    py::gil_scoped_acquire gil;
    return py::bool_(type_.get().attr("is_subtype_of")(t->type_.get())).cast<bool>();
  }
  tg::TraceTypePtr most_specific_common_supertype(const std::vector<const tg::TraceType*>& others) const override {
    py::gil_scoped_acquire gil;
    py::list types;
    for (const tg::TraceType* o : others) {
      auto* t = dynamic_cast<const CustomTraceType*>(o);
      if (t == nullptr) return nullptr;
      types.append(t->type_.get());
    }
    py::object sup = type_.get().attr("most_specific_common_supertype")(types);
    if (sup.is_none()) return nullptr;
    return custom_trace_type(sup);
  }
  bool equals(const tg::TraceType& o) const override {
    auto* t = dynamic_cast<const CustomTraceType*>(&o);
    if (t == nullptr) return false;
    if (t == this) return true;
    py::gil_scoped_acquire gil;
    const int eq = PyObject_RichCompareBool(type_.get().ptr(), t->type_.get().ptr(), Py_EQ);
    if (eq < 0) throw_python_error();
    return eq == 1;
  }
  std::size_t hash() const override { return hash_; }
  std::string to_string() const override { return text_; }

 private:
  PyRef type_;
  std::size_t hash_;
  std::string text_;
};

}  // namespace

void release_reference(PyObject* object) noexcept {
  if (object == nullptr || interpreter_gone()) return;  // nothing left to release it into
  if (PyGILState_Check()) {
    Py_DECREF(object);
    return;
  }
  bool schedule = false;
  {
    std::lock_guard lock(pending_mu());
    pending().push_back(object);
    schedule = !g_drain_scheduled;
    g_drain_scheduled = true;
  }
  // Py_AddPendingCall may be called without the GIL; when its queue is full, the next call
  // through this module drains instead.
  if (schedule && Py_AddPendingCall(&drain_pending_call, nullptr) != 0) {
    std::lock_guard lock(pending_mu());
    g_drain_scheduled = false;
  }
}

void drain_released_references() {
  std::vector<PyObject*> objects;
  {
    std::lock_guard lock(pending_mu());
    if (pending().empty()) {
      g_drain_scheduled = false;
      return;
    }
    objects.swap(pending());
    g_drain_scheduled = false;
  }
  for (PyObject* o : objects) Py_DECREF(o);
}

tg::TraceTypePtr none_trace_type() {
  static const tg::TraceTypePtr none = std::make_shared<NoneTraceType>();
  return none;
}
bool is_none_type(const tg::TraceType& t) { return dynamic_cast<const NoneTraceType*>(&t) != nullptr; }

tg::TraceTypePtr object_trace_type(py::handle object) {
  if (!PyType_SUPPORTS_WEAKREFS(Py_TYPE(object.ptr()))) return nullptr;
  auto life = std::make_shared<ObjectLife>();
  py::cpp_function on_death([life](py::handle) { life->dead.store(true, std::memory_order_release); });
  PyObject* ref = PyWeakref_NewRef(object.ptr(), on_death.ptr());
  if (ref == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  // TF hashes the weak reference, i.e. the object; an unhashable object (a class with __eq__ and
  // no __hash__) is matched by identity, and equal ones are found by the subtype scan.
  std::size_t hash = 0;
  const Py_hash_t h = PyObject_Hash(object.ptr());
  if (h == -1) {
    PyErr_Clear();
    hash = std::hash<uintptr_t>{}(reinterpret_cast<uintptr_t>(Py_TYPE(object.ptr())));
  } else {
    hash = static_cast<std::size_t>(h);
  }
  PyTypeObject* type = Py_TYPE(object.ptr());
  const bool custom_eq = type->tp_richcompare != PyBaseObject_Type.tp_richcompare;
  char address[32];
  std::snprintf(address, sizeof address, "%p", static_cast<void*>(object.ptr()));
  std::string text = std::string(type->tp_name) + " at " + address;
  auto t = std::make_shared<ObjectTraceType>(ref, std::move(life), reinterpret_cast<uintptr_t>(object.ptr()), hash,
                                             std::move(text), custom_eq);
  t->self_ = t;
  return t;
}

bool object_type_is(const tg::TraceType& t, PyObject* object) {
  auto* o = dynamic_cast<const ObjectTraceType*>(&t);
  return o != nullptr && o->is(object);
}

py::object object_of(const tg::TraceType& t) {
  auto* o = dynamic_cast<const ObjectTraceType*>(&t);
  return o ? o->object() : py::none();
}

tg::TraceTypePtr value_trace_type(py::handle value) {
  const Py_hash_t h = PyObject_Hash(value.ptr());
  if (h == -1) {
    PyErr_Clear();
    type_error("Could not generate a generic TraceType for " + short_repr(value) +
               ": it is neither hashable nor weakly referenceable. Pass an immutable (hashable) "
               "value, a tensor, or give its class a __tf_tracing_type__ method returning a "
               "tg.types.experimental.TraceType");
  }
  const bool nan = is_nan_number(value);
  auto t = std::make_shared<ValueTraceType>(value, nan ? std::size_t{0x4e614e} : static_cast<std::size_t>(h),
                                            short_repr(value), nan);
  t->self_ = t;
  return t;
}

bool is_nan_value_type(const tg::TraceType& t) {
  auto* v = dynamic_cast<const ValueTraceType*>(&t);
  return v != nullptr && v->nan();
}

py::object value_of(const tg::TraceType& t) {
  auto* v = dynamic_cast<const ValueTraceType*>(&t);
  return v ? v->value() : py::none();
}

tg::TraceTypePtr custom_trace_type(py::handle python_type) {
  const Py_hash_t h = PyObject_Hash(python_type.ptr());
  if (h == -1) throw_python_error();
  return std::make_shared<CustomTraceType>(python_type, static_cast<std::size_t>(h),
                                           py::repr(python_type).cast<std::string>());
}

PyObject* custom_python_type(const tg::TraceType& t) {
  auto* c = dynamic_cast<const CustomTraceType*>(&t);
  return c ? c->python() : nullptr;
}

}  // namespace tgpy
