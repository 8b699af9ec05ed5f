// Python values to tensors and back: TensorFlow's conversion rules, NumPy without copies.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "bindings.h"

namespace tgpy {

namespace {

// NumPy's module and types, looked up once. The references are never released: Python may be
// finalising when static destructors run, and the module lives as long as the process anyway.
py::handle numpy_attr(const char* name) {
  return py::object(py::module_::import("numpy").attr(name)).release();
}
py::handle numpy_generic() {
  static py::handle generic = numpy_attr("generic");
  return generic;
}
py::handle numpy_require() {
  static py::handle require = numpy_attr("require");
  return require;
}
py::handle numpy_asarray() {
  static py::handle asarray = numpy_attr("asarray");
  return asarray;
}

std::string repr_of(py::handle value) {
  std::string text = py::repr(value).cast<std::string>();
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}
std::string type_name(py::handle value) {
  return py::str(py::type::handle_of(value).attr("__name__")).cast<std::string>();
}

[[noreturn]] void unsupported_value(py::handle value) {
  value_error("cannot convert " + repr_of(value) + " (of type " + type_name(value) +
              ") to a tg.Tensor; pass a tg.Tensor, a NumPy array, a Python number, bool, str or "
              "bytes, or a (nested) list or tuple of them");
}

bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

// Drops a reference from any thread (a tensor's last owner may be a kernel of the thread pool, or
// code running without the GIL). After the interpreter is gone the reference is leaked: there is
// nothing left to free it into.
void release_python_reference(PyObject* object) noexcept {
  if (!Py_IsInitialized() || interpreter_finalizing()) return;
  PyGILState_STATE state = PyGILState_Ensure();
  Py_DECREF(object);
  PyGILState_Release(state);
}

bool is_string_like(py::handle v) { return PyUnicode_Check(v.ptr()) || PyBytes_Check(v.ptr()); }
bool is_numpy_scalar(py::handle v) { return PyObject_IsInstance(v.ptr(), numpy_generic().ptr()) == 1; }

// The tracegraph dtype a NumPy dtype's values are kept in: its own where tracegraph has it,
// else the smallest one that holds every value (int8/int16/uint16 -> int32, uint32/uint64 ->
// int64, float16 -> float32). Strings and objects are handled by the caller.
tg::DType natural_dtype(const py::dtype& dt, py::handle value) {
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  switch (kind) {
    case 'b': return tg::bool_;
    case 'f':
      if (size <= 4) return tg::float32;
      if (size == 8) return tg::float64;
      break;
    case 'i':
      if (size <= 4) return tg::int32;
      if (size == 8) return tg::int64;
      break;
    case 'u':
      if (size == 1) return tg::uint8;
      if (size == 2) return tg::int32;
      if (size <= 8) return tg::int64;
      break;
    case 'U':
    case 'S': return tg::string_;
    default: break;
  }
  type_error("cannot convert a NumPy array of dtype " + py::str(static_cast<py::handle>(dt)).cast<std::string>() + " (" +
             repr_of(value) + ") to a tg.Tensor: tracegraph has float32, float64, int32, int64, "
             "uint8, bool and string tensors; convert the array with .astype() first");
}

// May values of a NumPy array of `from` be converted to `to`? TF's rule for arrays: integers to
// any number type, floats to floats, every dtype to itself.
bool array_cast_allowed(tg::DType from, tg::DType to) {
  if (from == to) return true;
  if (tg::is_integer(from)) return tg::is_numeric(to);
  if (tg::is_floating(from)) return tg::is_floating(to);
  return false;
}

void check_integer_range(const py::array& arr, tg::DType to) {
  if (arr.size() == 0 || !tg::is_integer(to)) return;
  int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  if (to == tg::int32) lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
  if (to == tg::uint8) lo = 0, hi = 255;
  // Compared as Python ints: uint64 values above int64's range compare correctly too.
  py::object min = arr.attr("min")().attr("item")(), max = arr.attr("max")().attr("item")();
  if (min < py::int_(lo) || max > py::int_(hi))
    value_error("cannot convert an array with values in [" + py::str(min).cast<std::string>() + ", " +
                py::str(max).cast<std::string>() + "] to a " + tg::to_string(to) +
                " tensor: they do not fit (" + std::to_string(lo) + " to " + std::to_string(hi) +
                "); use a wider dtype");
}

tg::TensorShape shape_of(const py::array& arr) {
  std::vector<int64_t> dims(arr.shape(), arr.shape() + arr.ndim());
  return tg::TensorShape(std::move(dims));
}

tg::Tensor from_python(py::handle value, std::optional<tg::DType> dtype);

tg::Tensor strings_from_array(const py::array& arr) {
  py::list items = arr.attr("reshape")(-1).attr("tolist")();
  std::vector<std::string> values;
  values.reserve(items.size());
  for (py::handle item : items) {
    if (PyUnicode_Check(item.ptr())) values.push_back(item.cast<std::string>());
    else values.push_back(std::string(py::reinterpret_borrow<py::bytes>(item)));
  }
  return tg::detail::make_constant(values.data(), static_cast<int64_t>(values.size()), shape_of(arr),
                                   tg::string_);
}

tg::Tensor from_numpy(py::array arr, std::optional<tg::DType> dtype) {
  const py::dtype dt = arr.dtype();
  if (dt.kind() == 'O') {
    // Objects (e.g. bytes from a string tensor's numpy()): their elements decide, as a list's.
    py::object nested = arr.attr("tolist")();
    return from_python(nested, dtype);
  }
  const tg::DType natural = natural_dtype(dt, arr);
  const tg::DType target = dtype.value_or(natural);
  if (!array_cast_allowed(natural, target))
    type_error("cannot convert a NumPy array of dtype " + py::str(static_cast<py::handle>(dt)).cast<std::string>() +
               " to a " + tg::to_string(target) + " tensor (" + repr_of(arr) +
               "); only integers convert to any number type and floats to floats - use tg.cast "
               "for other conversions");
  if (target == tg::string_) return strings_from_array(arr);
  // NumPy has no bfloat16: the values go in as float32 and round once (TF's rounding).
  if (target == tg::bfloat16) return tg::cast(from_numpy(arr, tg::float32), tg::bfloat16);
  if (tg::is_integer(target)) check_integer_range(arr, target);
  const tg::TensorShape shape = shape_of(arr);
  if (arr.size() == 0) return tg::zeros(shape, target);
  // The elements in place when they already are C-contiguous, aligned, native and of the
  // target dtype; else NumPy makes the one copy that is needed. The tensor keeps the array.
  py::array ready = numpy_require()(arr, numpy_dtype(target), "CA");
  void* data = const_cast<void*>(ready.data());
  PyObject* owner = ready.release().ptr();
  try {
    return tg::from_blob(data, shape, target, [owner](void*) { release_python_reference(owner); });
  } catch (...) {
    Py_DECREF(owner);  // from_blob refused: its deleter was not called
    throw;
  }
}

// ---- Python scalars and nested lists -------------------------------------------------------

struct Leaves {
  std::vector<int64_t> dims;
  int64_t leaf_depth = -1;
  std::vector<py::object> values;
  bool any_bool = false, any_int = false, any_float = false, any_string = false, any_other = false;
  bool needs_int64 = false;
  std::optional<tg::DType> typed;  // the widest dtype of the NumPy scalars met
};

[[noreturn]] void ragged(py::handle root) {
  value_error("cannot convert " + repr_of(root) +
              " to a tg.Tensor: its nested lists are not rectangular (every list at one depth must "
              "have the same length, and values must all be at the same depth)");
}

int dtype_rank(tg::DType d) {
  switch (d) {
    case tg::DType::Bool: return 0;
    case tg::DType::UInt8: return 1;
    case tg::DType::Int32: return 2;
    case tg::DType::Int64: return 3;
    case tg::DType::Float32:
    case tg::DType::BFloat16: return 4;
    case tg::DType::Float64: return 5;
    case tg::DType::String: return 6;
  }
  return 6;
}

void add_typed(Leaves& leaves, tg::DType d) {
  if (!leaves.typed) {
    leaves.typed = d;
    return;
  }
  tg::DType wide = dtype_rank(d) > dtype_rank(*leaves.typed) ? d : *leaves.typed;
  // NumPy's promotion: int64 with float32 needs float64 to hold both.
  if ((d == tg::int64 && *leaves.typed == tg::float32) || (d == tg::float32 && *leaves.typed == tg::int64))
    wide = tg::float64;
  leaves.typed = wide;
}

void record_dim(Leaves& leaves, std::size_t level, int64_t n, py::handle root) {
  if (leaves.leaf_depth >= 0 && static_cast<int64_t>(level) >= leaves.leaf_depth) ragged(root);
  if (leaves.dims.size() == level) leaves.dims.push_back(n);
  else if (leaves.dims[level] != n) ragged(root);
}

void walk(py::handle v, std::size_t level, Leaves& leaves, py::handle root) {
  PyObject* p = v.ptr();
  if (PyList_Check(p) || PyTuple_Check(p)) {
    py::sequence seq = py::reinterpret_borrow<py::sequence>(v);
    record_dim(leaves, level, static_cast<int64_t>(seq.size()), root);
    for (py::handle item : seq) walk(item, level + 1, leaves, root);
    return;
  }
  const tg::Tensor* tensor = as_tensor_ptr(v);
  if (tensor != nullptr || py::isinstance<py::array>(v) ||
      (!is_string_like(v) && !is_numpy_scalar(v) && !PyLong_Check(p) && !PyFloat_Check(p) &&
       py::hasattr(v, "__array__"))) {
    // A tensor or array inside a list: its rows are the list's next levels.
    py::array arr = tensor != nullptr ? numpy_view(*tensor, v) : py::array(numpy_asarray()(v));
    if (arr.ndim() > 0) {
      record_dim(leaves, level, arr.shape(0), root);
      for (py::ssize_t i = 0; i < arr.shape(0); ++i) walk(arr[py::int_(i)], level + 1, leaves, root);
      return;
    }
    walk(arr[py::tuple()], level, leaves, root);  // rank 0: its NumPy scalar
    return;
  }
  if (leaves.leaf_depth < 0) leaves.leaf_depth = static_cast<int64_t>(level);
  if (leaves.leaf_depth != static_cast<int64_t>(level) || leaves.dims.size() > level) ragged(root);
  // NumPy scalars first: numpy.float64 is a Python float too, but keeps its dtype.
  if (is_string_like(v)) {
    leaves.any_string = true;
  } else if (is_numpy_scalar(v)) {
    py::dtype dt = py::reinterpret_borrow<py::object>(v).attr("dtype");
    add_typed(leaves, natural_dtype(dt, v));
  } else if (PyBool_Check(p)) {
    leaves.any_bool = true;
  } else if (PyLong_Check(p)) {
    leaves.any_int = true;
    int overflow = 0;
    const long long x = PyLong_AsLongLongAndOverflow(p, &overflow);
    if (overflow != 0)
      value_error("cannot convert the Python int " + repr_of(v) +
                  " to a tg.Tensor: it does not fit in int64, the widest integer dtype");
    if (x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max())
      leaves.needs_int64 = true;
  } else if (PyFloat_Check(p)) {
    leaves.any_float = true;
  } else {
    unsupported_value(v);
  }
  leaves.values.push_back(py::reinterpret_borrow<py::object>(v));
}

tg::DType infer_dtype(const Leaves& leaves, py::handle root) {
  const bool typed_string = leaves.typed == tg::string_;
  const bool typed_bool = leaves.typed == tg::bool_;
  const bool typed_number = leaves.typed && !typed_string && !typed_bool;
  const bool numbers = leaves.any_int || leaves.any_float || typed_number;
  const bool bools = leaves.any_bool || typed_bool;
  const bool strings = leaves.any_string || typed_string;
  if ((strings && (numbers || bools)) || (bools && numbers))
    type_error("cannot convert " + repr_of(root) +
               " to a tg.Tensor: it mixes " + std::string(strings ? "strings with numbers or bools" : "bools with numbers") +
               ", and a tensor has one dtype; convert the values to one kind first");
  if (strings) return tg::string_;
  if (bools) return tg::bool_;
  if (typed_number) {
    if (leaves.any_float && tg::is_integer(*leaves.typed)) return tg::float32;
    if (leaves.needs_int64 && (*leaves.typed == tg::int32 || *leaves.typed == tg::uint8)) return tg::int64;
    return *leaves.typed;
  }
  if (leaves.any_float) return tg::float32;
  if (leaves.any_int) return leaves.needs_int64 ? tg::int64 : tg::int32;
  return tg::float32;  // an empty list, as TF
}

[[noreturn]] void leaf_error(py::handle leaf, tg::DType to) {
  type_error("cannot convert " + repr_of(leaf) + " (of type " + type_name(leaf) + ") to a " +
             tg::to_string(to) + " tensor; pass values of that kind, or build the tensor with its "
             "own dtype and tg.cast it");
}

tg::Tensor build(const Leaves& leaves, tg::DType dtype) {
  const tg::TensorShape shape(leaves.dims);
  const auto n = static_cast<int64_t>(leaves.values.size());
  switch (dtype) {
    case tg::DType::String: {
      std::vector<std::string> out;
      out.reserve(leaves.values.size());
      for (const py::object& v : leaves.values) {
        if (PyUnicode_Check(v.ptr())) out.push_back(v.cast<std::string>());
        else if (PyBytes_Check(v.ptr())) out.push_back(std::string(py::reinterpret_borrow<py::bytes>(v)));
        else leaf_error(v, dtype);
      }
      return tg::detail::make_constant(out.data(), n, shape, dtype);
    }
    case tg::DType::Bool: {
      std::unique_ptr<bool[]> out(new bool[leaves.values.size() + 1]);
      for (std::size_t i = 0; i < leaves.values.size(); ++i) {
        const py::object& v = leaves.values[i];
        const bool is_bool = PyBool_Check(v.ptr()) ||
                             (is_numpy_scalar(v) && py::dtype(v.attr("dtype")).kind() == 'b');
        if (!is_bool) leaf_error(v, dtype);
        out[i] = PyObject_IsTrue(v.ptr()) == 1;
      }
      return tg::detail::make_constant(out.get(), n, shape, dtype);
    }
    default: break;
  }
  // Numbers: a float never becomes an integer (TF's rule), bools are not numbers here.
  auto kind_of = [](const py::object& v) -> char {
    if (PyBool_Check(v.ptr())) return 'b';
    if (PyLong_Check(v.ptr())) return 'i';
    if (PyFloat_Check(v.ptr())) return 'f';
    if (is_numpy_scalar(v)) {
      const char k = py::dtype(v.attr("dtype")).kind();
      return k == 'u' ? 'i' : k;
    }
    return '?';
  };
  if (tg::is_floating(dtype)) {
    std::vector<double> out;
    out.reserve(leaves.values.size());
    for (const py::object& v : leaves.values) {
      const char k = kind_of(v);
      if (k != 'i' && k != 'f') leaf_error(v, dtype);
      out.push_back(PyFloat_AsDouble(v.ptr()));
      if (PyErr_Occurred()) throw py::error_already_set();
    }
    return tg::detail::make_constant(out.data(), n, shape, dtype);
  }
  std::vector<int64_t> out;
  out.reserve(leaves.values.size());
  for (const py::object& v : leaves.values) {
    if (kind_of(v) != 'i') leaf_error(v, dtype);
    py::int_ as_int = py::reinterpret_steal<py::int_>(PyNumber_Index(v.ptr()));
    if (!as_int) throw py::error_already_set();
    int overflow = 0;
    const long long x = PyLong_AsLongLongAndOverflow(as_int.ptr(), &overflow);
    if (overflow != 0)
      value_error("cannot convert " + repr_of(v) + " to a " + tg::to_string(dtype) + " tensor: it does not fit");
    out.push_back(x);
  }
  return tg::detail::make_constant(out.data(), n, shape, dtype);
}

tg::Tensor from_python(py::handle value, std::optional<tg::DType> dtype) {
  // The common scalars without the walk.
  PyObject* p = value.ptr();
  if (PyFloat_Check(p) && (!dtype || tg::is_floating(*dtype))) {
    const double x = PyFloat_AS_DOUBLE(p);
    return tg::detail::make_constant(&x, 1, tg::TensorShape{}, dtype.value_or(tg::float32));
  }
  Leaves leaves;
  walk(value, 0, leaves, value);
  return build(leaves, dtype ? *dtype : infer_dtype(leaves, value));
}

}  // namespace

void type_error(const std::string& message) { throw py::type_error(message); }
void value_error(const std::string& message) { throw py::value_error(message); }
void unimplemented(const std::string& message) { throw Unimplemented(message); }

namespace {
// tg.Tensor's pybind11 type record, found once: pybind11's own casts find it on every call by
// hashing the C++ type's name, in two tables (a tenth of a cached tg.function call from Python).
const py::detail::type_info* tensor_type_info() {
  static const py::detail::type_info* info = py::detail::get_type_info(typeid(tg::Tensor), true);
  return info;
}
}  // namespace

const tg::Tensor* as_tensor_ptr(py::handle value) {
  if (!value) return nullptr;
  const py::detail::type_info* info = tensor_type_info();
  if (Py_TYPE(value.ptr()) == info->type) {  // the usual case, read without a lookup
    const auto* inst = reinterpret_cast<const py::detail::instance*>(value.ptr());
    if (inst->simple_layout && inst->simple_holder_constructed)
      return static_cast<const tg::Tensor*>(inst->simple_value_holder[0]);
  }
  if (!py::isinstance<tg::Tensor>(value)) return nullptr;
  return &value.cast<const tg::Tensor&>();
}

py::object tensor_object(tg::Tensor&& t) {
  auto move = [](const void* p) -> void* {
    return new tg::Tensor(std::move(*static_cast<tg::Tensor*>(const_cast<void*>(p))));
  };
  py::handle h = py::detail::type_caster_generic::cast(&t, py::return_value_policy::move, py::handle(),
                                                       tensor_type_info(), nullptr, move);
  if (!h) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(h);
}

py::dtype numpy_dtype(tg::DType dtype) {
  switch (dtype) {
    case tg::DType::Float32: return py::dtype::of<float>();
    case tg::DType::Float64: return py::dtype::of<double>();
    case tg::DType::Int32: return py::dtype::of<int32_t>();
    case tg::DType::Int64: return py::dtype::of<int64_t>();
    case tg::DType::Bool: return py::dtype::of<bool>();
    case tg::DType::UInt8: return py::dtype::of<uint8_t>();
    case tg::DType::String: return py::dtype("O");
    case tg::DType::BFloat16: break;
  }
  type_error("NumPy has no bfloat16 dtype, so a bfloat16 tensor has no NumPy array (TensorFlow returns one of "
             "ml_dtypes' bfloat16, which this Python lacks); tg.cast(x, tg.float32).numpy() gives its values "
             "exactly");
}

tg::Tensor to_tensor(py::handle value, std::optional<tg::DType> dtype, DTypeRule rule) {
  if (const tg::Tensor* t = as_tensor_ptr(value)) {
    if (dtype && t->dtype() != *dtype && rule == DTypeRule::kRequire)
      type_error("expected a " + tg::to_string(*dtype) + " tensor, got a " + tg::to_string(t->dtype()) +
                 " tensor (" + t->to_string() + "); tg.cast it to " + tg::to_string(*dtype) + " first");
    return *t;
  }
  if (const tg::Variable* v = as_variable_ptr(value)) {
    if (dtype && v->dtype() != *dtype && rule == DTypeRule::kRequire)
      type_error("expected a " + tg::to_string(*dtype) + " value, got Variable '" + v->name() + "' of dtype " +
                 tg::to_string(v->dtype()) + "; tg.cast it to " + tg::to_string(*dtype) + " first");
    note_variable_read(value);
    return v->read_value();
  }
  if (value.is_none()) unsupported_value(value);
  // TF's convert_to_tensor of an IndexedSlices (a sparse gradient): the dense tensor, with TF's
  // warning for a large one.
  if (py::isinstance<tg::IndexedSlices>(value)) {
    const auto& slices = value.cast<const tg::IndexedSlices&>();
    if (dtype && slices.dtype() != *dtype && rule == DTypeRule::kRequire)
      type_error("expected a " + tg::to_string(*dtype) + " value, got an IndexedSlices of dtype " +
                 tg::to_string(slices.dtype()) + "; tg.cast its values first");
    return slices.to_dense();
  }
  if (py::isinstance<py::array>(value)) return from_numpy(py::reinterpret_borrow<py::array>(value), dtype);
  if (is_numpy_scalar(value)) return from_numpy(py::array(numpy_asarray()(value)), dtype);
  PyObject* p = value.ptr();
  if (PyBool_Check(p) || PyLong_Check(p) || PyFloat_Check(p) || is_string_like(value) || PyList_Check(p) ||
      PyTuple_Check(p))
    return from_python(value, dtype);
  if (py::hasattr(value, "__array__")) return from_numpy(py::array(numpy_asarray()(value)), dtype);
  unsupported_value(value);
}

std::pair<tg::Tensor, tg::Tensor> to_tensor_pair(py::handle x, py::handle y) {
  const tg::Tensor* tx = as_tensor_ptr(x);
  const tg::Tensor* ty = as_tensor_ptr(y);
  if (tx != nullptr) return {*tx, to_tensor(y, tx->dtype())};
  if (ty != nullptr) return {to_tensor(x, ty->dtype()), *ty};
  tg::Tensor a = to_tensor(x);
  tg::Tensor b = to_tensor(y, a.dtype());
  return {a, b};
}

std::vector<tg::Tensor> to_tensor_list(py::handle values, const char* op) {
  if (as_tensor_ptr(values) != nullptr || py::isinstance<py::array>(values))
    return tg::unstack(to_tensor(values), 0);  // TF accepts a tensor: its rows
  if (!PyList_Check(values.ptr()) && !PyTuple_Check(values.ptr()))
    type_error(std::string("[") + op + "] expected a list or tuple of tensors, got " + repr_of(values) +
               " (of type " + type_name(values) + ")");
  py::sequence seq = py::reinterpret_borrow<py::sequence>(values);
  std::optional<tg::DType> hint;
  for (py::handle item : seq) {
    if (const tg::Tensor* t = as_tensor_ptr(item)) {
      hint = t->dtype();
      break;
    }
  }
  std::vector<tg::Tensor> out;
  out.reserve(seq.size());
  for (py::handle item : seq) {
    out.push_back(to_tensor(item, hint));
    if (!hint) hint = out.back().dtype();
  }
  return out;
}

tg::DType to_dtype(py::handle value) {
  if (value.is_none()) type_error("expected a dtype (e.g. tg.float32), got None");
  py::object index = py::getattr(value, "_tg_enum", py::none());
  if (!PyLong_Check(index.ptr()) || PyBool_Check(index.ptr())) {
    py::object as_dtype = py::module_::import("tracegraph.dtypes").attr("as_dtype");
    index = as_dtype(value).attr("_tg_enum");
  }
  const int i = index.cast<int>();
  if (i < 0 || i >= static_cast<int>(tg::kNumDTypes)) type_error("not a tracegraph dtype: " + repr_of(value));
  return static_cast<tg::DType>(i);
}

std::optional<tg::DType> to_optional_dtype(py::handle value) {
  if (!value || value.is_none()) return std::nullopt;
  return to_dtype(value);
}

int64_t to_int(py::handle value, const char* what, const char* op) {
  if (const tg::Tensor* t = as_tensor_ptr(value)) {
    if (!tg::is_integer(t->dtype()) || t->num_elements() != 1)
      type_error(std::string("[") + op + "] " + what + " must be an integer scalar, got " + t->to_string());
    return t->dtype() == tg::int64 ? t->item<int64_t>()
                                   : (t->dtype() == tg::int32 ? t->item<int32_t>() : t->item<uint8_t>());
  }
  if (PyFloat_Check(value.ptr()) || PyBool_Check(value.ptr()) || !PyIndex_Check(value.ptr()))
    type_error(std::string("[") + op + "] " + what + " must be an integer, got " + repr_of(value) +
               " (of type " + type_name(value) + ")");
  py::int_ as_int = py::reinterpret_steal<py::int_>(PyNumber_Index(value.ptr()));
  if (!as_int) throw py::error_already_set();
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(as_int.ptr(), &overflow);
  if (overflow != 0) value_error(std::string("[") + op + "] " + what + " " + repr_of(value) + " does not fit in int64");
  return x;
}

double to_double(py::handle value, const char* what, const char* op) {
  if (const tg::Tensor* t = as_tensor_ptr(value)) {
    if (!tg::is_numeric(t->dtype()) || t->num_elements() != 1)
      type_error(std::string("[") + op + "] " + what + " must be a number, got " + t->to_string());
    return tg::cast(*t, tg::float64).item<double>();
  }
  if (PyBool_Check(value.ptr()) || !(PyFloat_Check(value.ptr()) || PyLong_Check(value.ptr()) || is_numpy_scalar(value)))
    type_error(std::string("[") + op + "] " + what + " must be a number, got " + repr_of(value) + " (of type " +
               type_name(value) + ")");
  const double x = PyFloat_AsDouble(value.ptr());
  if (PyErr_Occurred()) throw py::error_already_set();
  return x;
}

std::vector<int64_t> to_int_list(py::handle value, const char* what, const char* op) {
  if (const tg::Tensor* t = as_tensor_ptr(value)) {
    if (!tg::is_integer(t->dtype()) || t->rank() > 1)
      type_error(std::string("[") + op + "] " + what + " must be an integer vector, got " + t->to_string());
    return tg::cast(*t, tg::int64).to_vector<int64_t>();
  }
  if (py::isinstance<py::array>(value)) {
    py::array arr = py::reinterpret_borrow<py::array>(value);
    if (arr.ndim() > 1 || (arr.dtype().kind() != 'i' && arr.dtype().kind() != 'u'))
      type_error(std::string("[") + op + "] " + what + " must be an integer vector, got " + repr_of(value));
    return to_int_list(arr.attr("reshape")(-1).attr("tolist")(), what, op);
  }
  if (PyList_Check(value.ptr()) || PyTuple_Check(value.ptr())) {
    std::vector<int64_t> out;
    for (py::handle item : py::reinterpret_borrow<py::sequence>(value)) out.push_back(to_int(item, what, op));
    return out;
  }
  return {to_int(value, what, op)};
}

namespace {
// A dim of a shape argument: an int >= 0, or (for reshape) -1 / None for "inferred".
int64_t shape_dim(py::handle item, const char* op, bool allow_unknown) {
  if (item.is_none()) {
    if (!allow_unknown)
      throw tg::InvalidArgumentError(std::string("[") + op + "] a shape's dimensions must be known here, got None");
    return tg::None;
  }
  const int64_t d = to_int(item, "a shape's dimension", op);
  if (d < 0 && !(allow_unknown && d == -1))
    throw tg::InvalidArgumentError(std::string("[") + op + "] dimension " + std::to_string(d) + " must be >= 0");
  return d;
}
}  // namespace

tg::TensorShape to_static_shape(py::handle value, const char* op, bool allow_unknown) {
  if (value.is_none()) return tg::TensorShape::unknown_rank();
  py::object shape_dims = py::getattr(value, "_dims", py::none());
  if (py::hasattr(value, "as_list") && py::hasattr(value, "_dims")) {  // a tg.TensorShape
    if (shape_dims.is_none()) return tg::TensorShape::unknown_rank();
    value = shape_dims;
  }
  if (PyList_Check(value.ptr()) || PyTuple_Check(value.ptr())) {
    std::vector<int64_t> out;
    for (py::handle item : py::reinterpret_borrow<py::sequence>(value))
      out.push_back(shape_dim(item, op, allow_unknown));
    return tg::TensorShape(std::move(out));
  }
  std::vector<int64_t> dims = to_int_list(value, "shape", op);
  for (int64_t d : dims) shape_dim(py::int_(d), op, allow_unknown);
  return tg::TensorShape(std::move(dims));
}

ShapeArg to_shape_arg(py::handle value, const char* op, bool allow_unknown) {
  if (const tg::Tensor* t = as_tensor_ptr(value)) {
    if (!t->is_symbolic()) return to_static_shape(value, op, allow_unknown);
    return *t;  // known only when the graph runs
  }
  if (PyList_Check(value.ptr()) || PyTuple_Check(value.ptr())) {
    bool symbolic = false;
    for (py::handle item : py::reinterpret_borrow<py::sequence>(value)) {
      const tg::Tensor* t = as_tensor_ptr(item);
      symbolic = symbolic || (t != nullptr && t->is_symbolic());
    }
    if (symbolic) return tg::stack(to_tensor_list(value, op), 0);
  }
  if (value.is_none()) type_error(std::string("[") + op + "] expected a shape (a list of integers), got None");
  return to_static_shape(value, op, allow_unknown);
}

std::optional<std::vector<int>> to_axes(py::handle axis, const char* op) {
  if (!axis || axis.is_none()) return std::nullopt;
  std::vector<int> out;
  for (int64_t a : to_int_list(axis, "axis", op)) {
    if (a < std::numeric_limits<int>::min() || a > std::numeric_limits<int>::max())
      value_error(std::string("[") + op + "] axis " + std::to_string(a) + " is out of range");
    out.push_back(static_cast<int>(a));
  }
  return out;
}

int to_axis(py::handle axis, const char* op) {
  const int64_t a = to_int(axis, "axis", op);
  if (a < std::numeric_limits<int>::min() || a > std::numeric_limits<int>::max())
    value_error(std::string("[") + op + "] axis " + std::to_string(a) + " is out of range");
  return static_cast<int>(a);
}

py::array numpy_view(const tg::Tensor& t, py::handle owner) {
  if (t.dtype() == tg::string_) {
    const std::vector<std::string> values = t.to_vector<std::string>();
    py::list items;
    for (const std::string& s : values) items.append(py::bytes(s));
    py::array flat = py::array(numpy_asarray()(items, "O"));
    if (values.empty()) flat = py::array(py::dtype("O"), std::vector<py::ssize_t>{0});
    const tg::TensorShape shape = t.shape();
    std::vector<py::ssize_t> dims(shape.dims().begin(), shape.dims().end());
    return flat.attr("reshape")(py::tuple(py::cast(dims)));
  }
  const void* data = t.data();  // raises tg::TypeError for a symbolic tensor
  const tg::TensorShape tensor_shape = t.shape();
  const std::vector<int64_t>& dims = tensor_shape.dims();
  const auto item = static_cast<py::ssize_t>(tg::dtype_size(t.dtype()));
  std::vector<py::ssize_t> shape(dims.begin(), dims.end()), strides(dims.size());
  py::ssize_t stride = item;
  for (std::size_t i = dims.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= static_cast<py::ssize_t>(std::max<int64_t>(dims[i], 1));
  }
  py::array out(numpy_dtype(t.dtype()), shape, strides, data, owner);
  out.attr("setflags")(py::arg("write") = false);  // tensors are immutable
  return out;
}

py::object numpy_copy(const tg::Tensor& t) {
  py::array view = numpy_view(t, py::cast(t));
  py::object copy = view.attr("copy")();
  if (view.ndim() == 0) return copy[py::tuple()];  // a NumPy scalar (bytes for a string)
  return copy;
}

}  // namespace tgpy
