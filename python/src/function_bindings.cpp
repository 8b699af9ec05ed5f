// tg.function in Python over the C++ function core (src/trace/function_core.h): binding a call's
// arguments to the Python parameters, Python values as trace types (TensorFlow's default_types
// rules), the traced body run under the GIL, results flattened and rebuilt, and the cached path -
// an earlier call of exactly these argument types found by comparing and hashing the Python
// objects themselves, without building trace types. The parts written in Python (the decorator,
// methods, ConcreteFunction's views, the retracing advice in Python terms) are in
// python/tracegraph/_function.py.
#include <cmath>
#include <cstring>
#include <cxxabi.h>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "core/small_vector.h"
#include "ops/variable_state.h"
#include "py_trace_types.h"
#include "trace/concrete.h"
#include "trace/function_core.h"

namespace tgpy {

namespace {

namespace detail = tg::detail;
using tg::TraceType;
using tg::TraceTypePtr;

// ---- Python classes the module needs to recognise (registered by the package at import) -----

struct Registry {
  PyObject* tensor_spec = nullptr;   // tracegraph.TensorSpec
  PyObject* trace_type = nullptr;    // tracegraph.types.experimental.TraceType
  PyObject* python_side = nullptr;   // tracegraph._function (its _log routes the core's messages)
  PyObject* dataclass_replace = nullptr;
  PyObject* mapping_abc = nullptr;
  PyObject* ndarray = nullptr;
  PyObject* weakref_type = nullptr;
  PyObject* tensor_type = nullptr;
};
Registry g_registry;

PyObject* tensor_type() {
  if (g_registry.tensor_type == nullptr) g_registry.tensor_type = py::type::of<tg::Tensor>().release().ptr();
  return g_registry.tensor_type;
}

// The tg.Tensor held by a Python object known to be one (the cached path: no isinstance).
const tg::Tensor& tensor_in(PyObject* p) { return *as_tensor_ptr(p); }
bool is_tensor(PyObject* p) { return Py_TYPE(p) == reinterpret_cast<PyTypeObject*>(tensor_type()); }

// A CPython call's result: a new reference, or null with the Python error set (thrown on).
PyObject* check(PyObject* result) {
  if (result == nullptr) throw py::error_already_set();
  return result;
}

std::string short_repr(py::handle h) {
  std::string s = py::repr(h).cast<std::string>();
  if (s.size() > 120) s = s.substr(0, 117) + "...";
  return s;
}

// ---- parameters and binding a call to them ------------------------------------------------

enum ParamKind { kPositionalOnly = 0, kPositionalOrKeyword = 1, kVarPositional = 2, kKeywordOnly = 3, kVarKeyword = 4 };
const char* kind_name(int kind) {
  static const char* kNames[] = {"POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD", "VAR_POSITIONAL", "KEYWORD_ONLY",
                                 "VAR_KEYWORD"};
  return kNames[kind];
}

struct Param {
  std::string name;
  int kind = kPositionalOrKeyword;
  py::object default_value;  // null when the parameter has none
};

// A call's arguments as Python's vectorcall protocol passes them: the positional ones, then the
// values of the keywords `kwnames` names (a tuple, or null for none).
struct CallArgs {
  PyObject* const* args = nullptr;
  std::size_t nargs = 0;
  PyObject* kwnames = nullptr;
  std::size_t nkwargs() const { return kwnames ? static_cast<std::size_t>(PyTuple_GET_SIZE(kwnames)) : 0; }
};

// A call's arguments, one per parameter (a *args parameter holds a tuple, **kwargs a dict):
// borrowed from the call's own arguments, or owned where binding made them.
struct Bound {
  tg::detail::SmallVector<PyObject*, 6> slots;
  std::vector<py::object> owned;
  bool converted = false;  // a value was converted to a tensor for the input_signature
};

// ---- the type of a Python value ---------------------------------------------------------------

enum class Kind { kTensor, kSpec, kVariable, kNone, kBool, kInt, kFloat, kComplex, kStr, kTuple, kNamedTuple, kList,
                  kDict, kArray, kCustom, kDataclass, kObject, kValue };

bool type_has(PyTypeObject* type, const char* name) {
  py::str key(name);
  return _PyType_Lookup(type, key.ptr()) != nullptr;
}

Kind classify(PyObject* p) {
  PyTypeObject* type = Py_TYPE(p);
  if (type == reinterpret_cast<PyTypeObject*>(tensor_type())) return Kind::kTensor;
  if (p == Py_None) return Kind::kNone;
  if (PyBool_Check(p)) return Kind::kBool;
  if (PyLong_CheckExact(p)) return Kind::kInt;
  if (PyFloat_CheckExact(p)) return Kind::kFloat;
  if (PyComplex_CheckExact(p)) return Kind::kComplex;
  if (PyUnicode_CheckExact(p)) return Kind::kStr;
  if (PyTuple_CheckExact(p)) return Kind::kTuple;
  if (PyList_CheckExact(p)) return Kind::kList;
  if (PyDict_CheckExact(p)) return Kind::kDict;
  if (py::isinstance<tg::Tensor>(p)) return Kind::kTensor;
  // A tg.Variable is the library's tg::Variable: typed as C++ types it (TF's VariableSpec), not
  // by identity (its == is elementwise, and one trace serves every Variable of a spec).
  if (py::isinstance<tg::Variable>(p)) return Kind::kVariable;
  if (g_registry.tensor_spec && PyObject_IsInstance(p, g_registry.tensor_spec) == 1) return Kind::kSpec;
  if (type_has(type, "__tf_tracing_type__")) return Kind::kCustom;
  if (PyTuple_Check(p)) return type_has(type, "_fields") ? Kind::kNamedTuple : Kind::kTuple;
  if (PyList_Check(p)) return Kind::kList;
  if (PyDict_Check(p) || (g_registry.mapping_abc && PyObject_IsInstance(p, g_registry.mapping_abc) == 1))
    return Kind::kDict;
  if (g_registry.ndarray && PyObject_IsInstance(p, g_registry.ndarray) == 1) return Kind::kArray;
  if (type_has(type, "__dataclass_fields__") && !PyType_Check(p)) return Kind::kDataclass;
  if (g_registry.weakref_type && PyObject_IsInstance(p, g_registry.weakref_type) == 1)
    type_error("weakref input " + short_repr(p) + " is not supported as a tg.function argument; pass the object itself");
  if (PyType_SUPPORTS_WEAKREFS(type)) return Kind::kObject;
  return Kind::kValue;
}

// "Point(x, y)": the kind of a namedtuple's or dataclass's sequence type. TF matches them by
// class name and field names (NamedTuple, Attrs), as this does.
std::vector<std::string> field_names(py::handle value, Kind kind) {
  std::vector<std::string> names;
  if (kind == Kind::kNamedTuple) {
    for (py::handle f : py::reinterpret_borrow<py::sequence>(py::type::handle_of(value).attr("_fields")))
      names.push_back(py::str(f).cast<std::string>());
  } else {
    py::module_ dataclasses = py::module_::import("dataclasses");
    for (py::handle f : dataclasses.attr("fields")(value)) names.push_back(f.attr("name").cast<std::string>());
  }
  return names;
}
std::string record_kind(py::handle value, const std::vector<std::string>& fields) {
  std::string s = py::type::handle_of(value).attr("__qualname__").cast<std::string>() + "(";
  for (std::size_t i = 0; i < fields.size(); ++i) s += (i ? ", " : "") + fields[i];
  return s + ")";
}

// ---- Python numbers and strings as literals ---------------------------------------------------
//
// TF's Literal compares values with == and hashes them with hash(), and maps every NaN to one
// marker: 1, 1.0, True and 1+0j are one literal, and so are all NaNs. A number's key is that
// literal, found without calling Python or allocating (the cached path uses it too): a value
// equal to an int64 is that integer; any other float value (an infinity, a fraction, the NaN
// marker) is that double. An integral value beyond int64, or a complex with an imaginary part,
// has no key and is compared as a Python value (value_trace_type), with == as well.

struct NumberKey {
  enum class Kind : uint8_t { kIntegral, kReal, kNone } kind = Kind::kNone;
  int64_t i = 0;  // kIntegral
  double f = 0;   // kReal; NaN stands for every NaN
};

bool is_number(PyObject* p) {
  return PyBool_Check(p) || PyLong_CheckExact(p) || PyFloat_CheckExact(p) || PyComplex_CheckExact(p);
}

NumberKey real_key(double v) {
  NumberKey k;
  if (std::isnan(v)) {
    k.kind = NumberKey::Kind::kReal;
    k.f = std::numeric_limits<double>::quiet_NaN();  // one bit pattern, so one hash
  } else if (std::trunc(v) == v && v >= -0x1p63 && v < 0x1p63) {
    k.kind = NumberKey::Kind::kIntegral;
    k.i = static_cast<int64_t>(v);  // -0.0 is 0
  } else if (std::isinf(v) || std::trunc(v) != v) {
    k.kind = NumberKey::Kind::kReal;
    k.f = v;
  }
  return k;
}

// `p` is a number (is_number).
NumberKey number_key(PyObject* p) {
  if (PyBool_Check(p)) return NumberKey{NumberKey::Kind::kIntegral, p == Py_True ? 1 : 0, 0};
  if (PyLong_CheckExact(p)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(p, &overflow);
    if (overflow != 0) return NumberKey{};
    return NumberKey{NumberKey::Kind::kIntegral, v, 0};
  }
  if (PyFloat_CheckExact(p)) return real_key(PyFloat_AS_DOUBLE(p));
  const Py_complex c = reinterpret_cast<PyComplexObject*>(p)->cval;
  if (std::isnan(c.real) || std::isnan(c.imag)) return real_key(std::numeric_limits<double>::quiet_NaN());  // TF's is_nan
  if (c.imag != 0) return NumberKey{};
  return real_key(c.real);
}

tg::detail::LiteralValue number_literal(const NumberKey& k) {
  tg::detail::LiteralValue lv{};
  if (k.kind == NumberKey::Kind::kIntegral) {
    lv.kind = tg::detail::LiteralValue::Kind::kInt;
    lv.i = k.i;
    lv.cpp_type = kPyInt;
  } else {
    lv.kind = tg::detail::LiteralValue::Kind::kFloat;
    lv.f = k.f;
    lv.cpp_type = kPyFloat;
  }
  return lv;
}

// Whether the literal `lv` is the number with key `k` (no allocation, no Python call).
bool number_matches(const NumberKey& k, const tg::detail::LiteralValue& lv) {
  switch (k.kind) {
    case NumberKey::Kind::kIntegral:
      return lv.cpp_type == kPyInt && lv.kind == tg::detail::LiteralValue::Kind::kInt && lv.i == k.i;
    case NumberKey::Kind::kReal:
      return lv.cpp_type == kPyFloat && lv.kind == tg::detail::LiteralValue::Kind::kFloat &&
             (lv.f == k.f || (std::isnan(lv.f) && std::isnan(k.f)));
    case NumberKey::Kind::kNone: return false;
  }
  return false;
}

std::size_t number_hash(const NumberKey& k) {
  if (k.kind == NumberKey::Kind::kIntegral) return static_cast<std::size_t>(k.i) ^ 0x1a7;
  if (std::isnan(k.f)) return 0x4e614e;
  return std::hash<double>{}(k.f);
}

tg::detail::LiteralValue string_literal(PyObject* p) {
  tg::detail::LiteralValue lv{};
  lv.kind = tg::detail::LiteralValue::Kind::kString;
  lv.s = py::handle(p).cast<std::string>();
  lv.cpp_type = kPyStr;
  return lv;
}

// Whether `t` is the literal of a NaN (TF's NaN marker), built here or as a Python value.
bool is_nan_type(const TraceType& t) {
  const tg::detail::LiteralValue* lv = tg::detail::literal_of(t);
  if (lv != nullptr) return lv->kind == tg::detail::LiteralValue::Kind::kFloat && std::isnan(lv->f);
  return is_nan_value_type(t);
}

// What building a call's trace types collects: its tensors in flattening order (and the
// tensors converted from NumPy arrays, kept alive), its distinct Variables in order of first
// appearance (a Variable's position is its alias id: ArgContext::variables), and whether the call
// may use the cached path.
struct TypeContext {
  std::vector<tg::Tensor> leaves;
  std::vector<py::object> keep;
  std::vector<tg::Variable> variables;
  bool fast = true;
};

// A dict key as a literal: equal keys (1, 1.0, True) are one key, as they are one key of a dict.
tg::detail::LiteralValue dict_key(py::handle key) {
  const Kind k = classify(key.ptr());
  if (k == Kind::kStr) return string_literal(key.ptr());
  if (k == Kind::kInt || k == Kind::kBool || k == Kind::kFloat) {
    const NumberKey n = number_key(key.ptr());
    if (n.kind != NumberKey::Kind::kNone) return number_literal(n);
    if (k == Kind::kInt) type_error("dict key " + short_repr(key) + " does not fit in int64");
    return number_literal(NumberKey{NumberKey::Kind::kReal, 0, PyFloat_AS_DOUBLE(key.ptr())});  // no int equals it
  }
  type_error("a dict passed to a tg.function must have str, int, float or bool keys (they are part of the trace "
             "type), got the key " + short_repr(key));
}

TraceTypePtr trace_type_of(py::handle value, TypeContext& ctx) {
  PyObject* p = value.ptr();
  const Kind kind = classify(p);
  switch (kind) {
    case Kind::kTensor: {
      const tg::Tensor& t = py::handle(p).cast<const tg::Tensor&>();
      ctx.leaves.push_back(t);
      return tg::detail::tensor_trace_type(t.dtype(), t.shape());
    }
    case Kind::kSpec: {
      ctx.fast = false;
      const tg::TensorShape shape = to_static_shape(value.attr("shape"), "TensorSpec", true);
      py::object name = value.attr("name");
      return tg::detail::tensor_trace_type(to_dtype(value.attr("dtype")), shape,
                                           name.is_none() ? std::string() : name.cast<std::string>());
    }
    case Kind::kVariable: {
      // The C++ path's own type and alias id (ArgTraits<Variable>); like C++, a call with a
      // Variable takes the general path, which binds the Variable parameters to the call's.
      ctx.fast = false;
      tg::detail::ArgContext args;
      args.variables = std::move(ctx.variables);
      TraceTypePtr t = tg::detail::ArgTraits<tg::Variable>::trace_type(py::handle(p).cast<const tg::Variable&>(), args);
      ctx.variables = std::move(args.variables);
      return t;
    }
    case Kind::kNone: return none_trace_type();
    case Kind::kBool:
    case Kind::kInt:
    case Kind::kFloat:
    case Kind::kComplex: {
      const NumberKey k = number_key(p);
      if (k.kind != NumberKey::Kind::kNone) return tg::detail::literal_trace_type(number_literal(k));
      ctx.fast = false;
      return value_trace_type(value);
    }
    case Kind::kStr: return tg::detail::literal_trace_type(string_literal(p));
    case Kind::kTuple:
    case Kind::kList:
    case Kind::kNamedTuple: {
      if (kind != Kind::kTuple || !PyTuple_CheckExact(p)) ctx.fast = false;  // see fast_equal
      py::sequence seq = py::reinterpret_borrow<py::sequence>(value);
      std::vector<TraceTypePtr> elements;
      elements.reserve(seq.size());
      for (py::handle item : seq) elements.push_back(trace_type_of(item, ctx));
      std::string k = kind == Kind::kList ? "List" : kind == Kind::kTuple ? "Tuple" : record_kind(value, field_names(value, kind));
      return tg::detail::sequence_trace_type(std::move(k), std::move(elements));
    }
    case Kind::kDataclass: {
      ctx.fast = false;
      const std::vector<std::string> fields = field_names(value, kind);
      std::vector<TraceTypePtr> elements;
      for (const std::string& f : fields) elements.push_back(trace_type_of(value.attr(f.c_str()), ctx));
      return tg::detail::sequence_trace_type(record_kind(value, fields), std::move(elements));
    }
    case Kind::kDict: {
      ctx.fast = false;
      std::vector<std::pair<tg::detail::LiteralValue, TraceTypePtr>> items;
      py::object keys = py::reinterpret_borrow<py::object>(value).attr("keys")();
      // The order in which the dict's tensors are flattened is the type's (sorted keys): walk
      // the items in that order.
      std::vector<std::pair<std::string, py::object>> sorted;
      for (py::handle key : keys) sorted.emplace_back(dict_key(key).to_string(), py::reinterpret_borrow<py::object>(key));
      std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      for (std::size_t i = 1; i < sorted.size(); ++i)
        if (sorted[i].first == sorted[i - 1].first)  // equal numbers a Mapping kept apart, or two NaNs
          type_error("the mapping " + short_repr(value) + " has the keys " + short_repr(sorted[i - 1].second) +
                     " and " + short_repr(sorted[i].second) + ", which are one key of its trace type (equal "
                     "numbers, or two NaNs); pass a mapping whose keys differ in value");
      for (const auto& entry : sorted)
        items.emplace_back(dict_key(entry.second), trace_type_of(value[entry.second], ctx));
      return tg::detail::mapping_trace_type(std::move(items));
    }
    case Kind::kArray: {
      ctx.fast = false;
      tg::Tensor t = to_tensor(value);
      ctx.leaves.push_back(t);
      return tg::detail::tensor_trace_type(t.dtype(), t.shape());
    }
    case Kind::kCustom: {
      ctx.fast = false;
      py::object type = value.attr("__tf_tracing_type__")(py::none());
      if (g_registry.trace_type == nullptr || PyObject_IsInstance(type.ptr(), g_registry.trace_type) != 1)
        type_error("Expected an instance of tg.types.experimental.TraceType for the Tracing Protocol call to " +
                   short_repr(value) + " but got " + short_repr(type));
      return custom_trace_type(type);
    }
    case Kind::kObject: {
      if (TraceTypePtr t = object_trace_type(value)) return t;
      ctx.fast = false;
      return value_trace_type(value);
    }
    case Kind::kValue: ctx.fast = false; return value_trace_type(value);
  }
  return value_trace_type(value);
}

// ---- the cached path: the Python values hashed and compared against recorded types ----------
//
// Only calls whose values are all tensors, Python bool/int/float/complex/str/None (numbers by
// their NumberKey, as their literals are built), plain tuples of those and objects by identity
// take it (trace_type_of says so in TypeContext::fast); a list, dict, namedtuple, NumPy array,
// spec, custom type or tg.Variable (as in C++: only the general path binds Variable parameters)
// sends the call down the general path, and such a call's types are never
// recorded for it. So every sequence type in the table is a plain tuple's,
// and comparing elements is exact.

bool fast_hash(PyObject* p, std::size_t& h) {
  if (is_tensor(p)) {
    tg::detail::hash_mix(h, tg::detail::tensor_type_hash(tensor_in(p)));
    return true;
  }
  if (p == Py_None) {
    tg::detail::hash_mix(h, 0x4e6f);
    return true;
  }
  if (is_number(p)) {
    const NumberKey k = number_key(p);
    if (k.kind == NumberKey::Kind::kNone) return false;
    tg::detail::hash_mix(h, number_hash(k));
    return true;
  }
  if (PyUnicode_CheckExact(p)) {
    const Py_hash_t s = PyObject_Hash(p);  // cached in the str object
    tg::detail::hash_mix(h, static_cast<std::size_t>(s));
    return true;
  }
  if (PyTuple_CheckExact(p)) {
    const Py_ssize_t n = PyTuple_GET_SIZE(p);
    tg::detail::hash_mix(h, static_cast<std::size_t>(n) + 0x7e);
    for (Py_ssize_t i = 0; i < n; ++i)
      if (!fast_hash(PyTuple_GET_ITEM(p, i), h)) return false;
    return true;
  }
  const Kind k = classify(p);
  if (k != Kind::kObject) return false;
  tg::detail::hash_mix(h, reinterpret_cast<uintptr_t>(p));
  return true;
}

bool fast_equal(PyObject* p, const TraceType& type) {
  if (is_tensor(p)) return tg::detail::tensor_type_equals(tensor_in(p), type);
  if (p == Py_None) return is_none_type(type);
  if (const tg::detail::LiteralValue* lv = tg::detail::literal_of(type)) {
    if (is_number(p)) return number_matches(number_key(p), *lv);
    if (PyUnicode_CheckExact(p)) {
      Py_ssize_t n = 0;
      const char* s = PyUnicode_AsUTF8AndSize(p, &n);
      if (s == nullptr) {
        PyErr_Clear();
        return false;
      }
      return lv->cpp_type == kPyStr && lv->s.size() == static_cast<std::size_t>(n) && std::memcmp(lv->s.data(), s, n) == 0;
    }
    return false;
  }
  if (PyTuple_CheckExact(p)) {
    const auto* elements = tg::detail::sequence_elements(type);
    const Py_ssize_t n = PyTuple_GET_SIZE(p);
    if (elements == nullptr || elements->size() != static_cast<std::size_t>(n)) return false;
    for (Py_ssize_t i = 0; i < n; ++i)
      if (!fast_equal(PyTuple_GET_ITEM(p, i), *(*elements)[i])) return false;
    return true;
  }
  return object_type_is(type, p);
}

void lend(PyObject* p, tg::detail::LentTensors& out) {
  if (is_tensor(p)) {
    out.push_back(tensor_in(p));
  } else if (PyTuple_CheckExact(p)) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(p); ++i) lend(PyTuple_GET_ITEM(p, i), out);
  }
}

// ---- results: flattened to tensors while tracing, rebuilt on every call ---------------------

struct OutputNode {
  enum class Kind { kTensor, kValue, kTuple, kList, kDict, kNamedTuple, kDataclass } kind = Kind::kValue;
  std::shared_ptr<PyRef> value;  // kValue: the value; kDict/kNamedTuple: the type; kDataclass: the traced object
  std::vector<std::shared_ptr<PyRef>> keys;  // kDict: keys; kDataclass: field names
  std::vector<OutputNode> children;
  tg::DType dtype = tg::DType::Float32;  // kTensor: its spec (structured_outputs)
  tg::TensorShape shape;
};

// The result structure of one trace (ConcreteImpl::skeleton).
struct Skeleton {
  OutputNode root;
  std::size_t num_outputs = 0;
};

std::shared_ptr<PyRef> ref(py::handle h) { return std::make_shared<PyRef>(h); }

OutputNode flatten(py::handle value, std::vector<tg::Tensor>& out, std::string& description) {
  OutputNode node;
  PyObject* p = value.ptr();
  // A Variable parameter (what the body saw for a Variable argument) means something only while
  // a call binds it: returned, it is read there, and the call returns that tensor.
  const tg::Variable* parameter = as_variable_ptr(value);
  if (parameter != nullptr && !parameter->state()->parameter) parameter = nullptr;
  if (py::isinstance<tg::Tensor>(value) || parameter != nullptr) {
    py::object read;
    if (parameter != nullptr) read = value.attr("read_value")();
    const tg::Tensor& t = parameter != nullptr ? read.cast<const tg::Tensor&>() : value.cast<const tg::Tensor&>();
    out.push_back(t);
    node.kind = OutputNode::Kind::kTensor;
    node.dtype = t.dtype();
    node.shape = t.shape().none_aware();
    description += tg::detail::describe_output(t);
    return node;
  }
  auto children = [&](py::iterable items, const char* open) {
    description += open;
    bool first = true;
    for (py::handle item : items) {
      if (!first) description += ", ";
      first = false;
      node.children.push_back(flatten(item, out, description));
    }
    description += "]";
  };
  if (PyTuple_Check(p) && !type_has(Py_TYPE(p), "_fields")) {
    node.kind = OutputNode::Kind::kTuple;
    children(py::reinterpret_borrow<py::iterable>(value), "Tuple[");
  } else if (PyTuple_Check(p)) {
    node.kind = OutputNode::Kind::kNamedTuple;
    node.value = ref(py::type::handle_of(value));
    children(py::reinterpret_borrow<py::iterable>(value),
             (py::type::handle_of(value).attr("__name__").cast<std::string>() + "[").c_str());
  } else if (PyList_Check(p)) {
    node.kind = OutputNode::Kind::kList;
    children(py::reinterpret_borrow<py::iterable>(value), "List[");
  } else if (PyDict_Check(p)) {
    node.kind = OutputNode::Kind::kDict;
    node.value = ref(py::type::handle_of(value));
    description += "Dict[";
    bool first = true;
    for (auto item : py::reinterpret_borrow<py::dict>(value)) {
      if (!first) description += ", ";
      first = false;
      description += "[" + py::repr(item.first).cast<std::string>() + ", ";
      node.keys.push_back(ref(item.first));
      node.children.push_back(flatten(item.second, out, description));
      description += "]";
    }
    description += "]";
  } else if (type_has(Py_TYPE(p), "__dataclass_fields__") && !PyType_Check(p)) {
    node.kind = OutputNode::Kind::kDataclass;
    node.value = ref(value);
    description += py::type::handle_of(value).attr("__name__").cast<std::string>() + "[";
    bool first = true;
    for (const std::string& f : field_names(value, Kind::kDataclass)) {
      if (!first) description += ", ";
      first = false;
      node.keys.push_back(ref(py::str(f)));
      node.children.push_back(flatten(value.attr(f.c_str()), out, description));
    }
    description += "]";
  } else {
    node.kind = OutputNode::Kind::kValue;
    node.value = ref(value);
    description += value.is_none() ? std::string("None") : "Literal[" + short_repr(value) + "]";
  }
  return node;
}

// `leaf(node)` gives each tensor's value: an output tensor, or its spec (structured_outputs).
template <class Leaf>
py::object rebuild(const OutputNode& node, Leaf&& leaf) {
  switch (node.kind) {
    case OutputNode::Kind::kTensor: return leaf(node);
    case OutputNode::Kind::kValue: return py::reinterpret_borrow<py::object>(node.value->get());
    case OutputNode::Kind::kTuple:
    case OutputNode::Kind::kNamedTuple: {
      py::tuple items(node.children.size());
      for (std::size_t i = 0; i < node.children.size(); ++i) items[i] = rebuild(node.children[i], leaf);
      if (node.kind == OutputNode::Kind::kTuple) return items;
      return node.value->get()(*items);
    }
    case OutputNode::Kind::kList: {
      py::list items;
      for (const OutputNode& c : node.children) items.append(rebuild(c, leaf));
      return items;
    }
    case OutputNode::Kind::kDict: {
      py::dict items;
      for (std::size_t i = 0; i < node.children.size(); ++i) items[node.keys[i]->get()] = rebuild(node.children[i], leaf);
      if (node.value->get().ptr() == reinterpret_cast<PyObject*>(&PyDict_Type)) return items;
      return node.value->get()(items);
    }
    case OutputNode::Kind::kDataclass: {
      py::dict fields;
      for (std::size_t i = 0; i < node.children.size(); ++i) fields[node.keys[i]->get()] = rebuild(node.children[i], leaf);
      return py::reinterpret_borrow<py::object>(g_registry.dataclass_replace)(node.value->get(), **fields);
    }
  }
  return py::none();
}

const Skeleton& python_skeleton(const tg::detail::ConcreteImpl& cf) {
  return *std::any_cast<const std::shared_ptr<Skeleton>&>(cf.skeleton);
}

py::object results(const tg::detail::ConcreteImpl& cf, std::vector<tg::Tensor>& out) {
  const Skeleton& s = python_skeleton(cf);
  if (s.root.kind == OutputNode::Kind::kTensor) return tensor_object(std::move(out.at(0)));
  std::size_t pos = 0;
  return rebuild(s.root, [&](const OutputNode&) { return tensor_object(std::move(out.at(pos++))); });
}

// ---- the body a trace runs: placeholders in, the Python function called, results out ------

// What one trace's body is given: the recorder's placeholders, and the tg.Variable objects made
// for its Variable parameters, by alias id (the body sees one object for one aliased Variable).
struct Placeholders {
  tg::detail::PlaceholderContext& context;
  std::vector<py::object> variables;
};

// The tg.Variable the body sees for the caller's Variable `value`: the Variable parameter C++
// makes for its alias id (PlaceholderContext::variable_placeholder), which each call binds to the
// call's Variable. It is trainable when the Variable it was traced with is (tapes in the body).
py::object variable_placeholder(py::handle value, const TraceType& type, Placeholders& pc) {
  const auto alias = static_cast<std::size_t>(tg::detail::variable_alias_id(type));
  if (alias < pc.variables.size()) return pc.variables[alias];
  py::object v = py::cast(pc.context.variable_placeholder(type, value.cast<const tg::Variable&>()));
  v.attr("_trainable") = py::getattr(value, "trainable", py::bool_(true));
  pc.variables.push_back(v);  // alias ids arrive in order (the order trace_type_of gave them)
  return v;
}

py::object placeholder(py::handle value, const TraceType& type, Placeholders& pc, const std::string& path) {
  if (tg::detail::as_tensor_type(type, nullptr, nullptr)) return py::cast(pc.context.placeholder(type, path));
  if (tg::detail::variable_alias_id(type) >= 0) return variable_placeholder(value, type, pc);
  if (is_nan_type(type)) return py::float_(std::numeric_limits<double>::quiet_NaN());  // TF's NaN marker's value
  if (PyObject* custom = custom_python_type(type))
    return py::handle(custom).attr("placeholder_value")(py::none());
  if (const auto* elements = tg::detail::sequence_elements(type)) {
    const Kind kind = classify(value.ptr());
    py::sequence seq = py::reinterpret_borrow<py::sequence>(value);
    std::vector<py::object> items;
    if (kind == Kind::kDataclass) {
      const std::vector<std::string> fields = field_names(value, kind);
      py::dict changes;
      for (std::size_t i = 0; i < fields.size(); ++i)
        changes[py::str(fields[i])] = placeholder(value.attr(fields[i].c_str()), *(*elements)[i], pc,
                                                  path + "." + fields[i]);
      return py::reinterpret_borrow<py::object>(g_registry.dataclass_replace)(value, **changes);
    }
    py::list out;
    for (std::size_t i = 0; i < elements->size(); ++i)
      out.append(placeholder(seq[i], *(*elements)[i], pc, tg::detail::indexed_path(path, i)));
    if (kind == Kind::kList) return out;
    if (kind == Kind::kNamedTuple) return py::type::handle_of(value)(*out);
    return py::tuple(out);
  }
  if (classify(value.ptr()) == Kind::kDict) {
    // Placeholders are made in the type's order (sorted keys), the order the call's tensors were
    // collected in; the dict keeps the argument's own order.
    std::vector<std::pair<std::string, py::object>> sorted;
    for (py::handle key : py::reinterpret_borrow<py::object>(value).attr("keys")())
      sorted.emplace_back(dict_key(key).to_string(), py::reinterpret_borrow<py::object>(key));
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    py::dict made;
    for (const auto& entry : sorted) {
      const tg::detail::LiteralValue k = dict_key(entry.second);
      const TraceType* child = tg::detail::mapping_value(type, k);
      made[entry.second] = child ? placeholder(value[entry.second], *child, pc, tg::detail::keyed_path(path, k))
                                 : py::reinterpret_borrow<py::object>(value[entry.second]);
    }
    py::dict out;
    for (py::handle key : py::reinterpret_borrow<py::object>(value).attr("keys")()) out[key] = made[key];
    if (PyDict_CheckExact(value.ptr())) return out;
    return py::type::handle_of(value)(out);
  }
  return py::reinterpret_borrow<py::object>(value);
}

// ---- diagnostics: the core's log lines reach Python's logging --------------------------------

// While a call of a Python tg.function dispatches on this thread, the core's messages are kept
// here and handed to Python (tracegraph._function._log, the "tracegraph" logger) once the call
// holds the GIL again. A Python function's core writes them in Python terms (AdviceLanguage).
struct CallLog {
  std::vector<std::string> messages;
};
thread_local CallLog* t_call_log = nullptr;

// `alias`: the name the function's module gives the tracegraph package ("tf" after
// `import tracegraph as tf`), so that the fixes the message writes work when pasted there.
void python_log(const std::string& message, const std::string& alias = "tg") {
  if (g_registry.python_side == nullptr) {
    std::fprintf(stderr, "%s\n", message.c_str());
    return;
  }
  py::handle(g_registry.python_side).attr("_log")(message, alias);
}

void log_sink(const std::string& message, void*) {
  if (t_call_log != nullptr) {
    t_call_log->messages.push_back(message);
    return;
  }
  if (!Py_IsInitialized()) {
    std::fprintf(stderr, "%s\n", message.c_str());
    return;
  }
  py::gil_scoped_acquire gil;
  try {
    python_log(message);
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("tracegraph log sink");
  }
}

// tg.print's lines go to Python's sys.stdout, in order with Python's own print.
void print_sink(const std::string& line, void*) {
  if (!Py_IsInitialized()) {
    std::fwrite(line.data(), 1, line.size(), stdout);
    return;
  }
  py::gil_scoped_acquire gil;
  try {
    py::module_::import("sys").attr("stdout").attr("write")(line);
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("tracegraph print sink");
  }
}

// ---- a concrete function handle -----------------------------------------------------------

class PyFunction;

// One trace, with what Python needs to call and describe it.
struct PyConcrete {
  std::shared_ptr<tg::detail::ConcreteImpl> cf;
  std::shared_ptr<tg::detail::FunctionCore> core;
  std::vector<Param> params;
};

py::object python_value_of(const TraceType& t) {
  if (is_none_type(t)) return py::none();
  if (const tg::detail::LiteralValue* lv = tg::detail::literal_of(t)) {
    switch (lv->kind) {
      case tg::detail::LiteralValue::Kind::kBool: return py::bool_(lv->i != 0);
      case tg::detail::LiteralValue::Kind::kInt: return py::int_(lv->i);
      case tg::detail::LiteralValue::Kind::kFloat: return py::float_(lv->f);
      default: return py::str(lv->s);
    }
  }
  py::object v = value_of(t);
  if (!v.is_none()) return v;
  return object_of(t);
}

// A shape's dims as a list with None for unknown ones; None for an unknown rank.
py::object shape_dims(const tg::TensorShape& shape) {
  if (!shape.has_rank()) return py::none();
  py::list d;
  for (int64_t x : shape.dims()) d.append(x == tg::None ? py::object(py::none()) : py::object(py::int_(x)));
  return d;
}

// The Python form of a parameter type: a TensorSpec for a tensor, a VariableSpec for a
// Variable, the value of a literal, containers of those, the TraceType object of a custom type.
py::object describe_type(const TraceType& t, const std::string& name) {
  tg::DType dtype;
  tg::TensorShape shape;
  if (tg::detail::as_tensor_type(t, &dtype, &shape)) {
    const std::string& spec_name = tg::detail::tensor_type_name(t);
    return py::handle(g_registry.tensor_spec)(shape_dims(shape), py::module_::import("tracegraph.dtypes").attr("as_dtype")(tg::to_string(dtype)),
                                             spec_name.empty() ? name : spec_name);
  }
  if (tg::detail::variable_alias_id(t) >= 0) {
    tg::detail::TraceTypeTree tree;
    std::string unsupported;
    if (tg::detail::trace_type_tree(t, tree, unsupported))
      return py::module_::import("tracegraph._variables")
          .attr("VariableSpec")(shape_dims(tree.shape),
                                py::module_::import("tracegraph.dtypes").attr("as_dtype")(tg::to_string(tree.dtype)),
                                tree.alias_id);
  }
  if (PyObject* custom = custom_python_type(t)) return py::reinterpret_borrow<py::object>(custom);
  if (const auto* elements = tg::detail::sequence_elements(t)) {
    py::list items;
    for (std::size_t i = 0; i < elements->size(); ++i) items.append(describe_type(*(*elements)[i], ""));
    if (t.to_string().rfind("List[", 0) == 0) return items;
    return py::tuple(items);
  }
  tg::detail::TraceTypeTree tree;
  std::string unsupported;
  if (tg::detail::trace_type_tree(t, tree, unsupported) && tree.kind == tg::detail::TraceTypeTree::Kind::kMapping) {
    py::dict out;
    for (std::size_t i = 0; i < tree.keys.size(); ++i) {
      const TraceType* child = tg::detail::mapping_value(t, tree.keys[i]);
      TraceTypePtr key = tg::detail::literal_trace_type(tree.keys[i]);
      out[python_value_of(*key)] = child ? describe_type(*child, "") : py::none();
    }
    return out;
  }
  return python_value_of(t);
}

// ---- tg.function ------------------------------------------------------------------------

class PyFunction {
 public:
  PyFunction(py::object fn, std::string name, py::list params, py::object input_signature, bool reduce_retracing,
             std::string callable_type, int64_t max_traces)
      : fn_(std::move(fn)) {
    for (py::handle p : params) {
      py::tuple t = py::reinterpret_borrow<py::tuple>(p);
      Param param;
      param.name = t[0].cast<std::string>();
      param.kind = t[1].cast<int>();
      if (param.kind < 0 || param.kind > kVarKeyword) value_error("bad parameter kind for " + param.name);
      if (t.size() > 2) param.default_value = py::reinterpret_borrow<py::object>(t[2]);
      params_.push_back(std::move(param));
    }
    for (const Param& p : params_) {
      if (p.kind <= kPositionalOrKeyword) ++num_positional_;
      if (p.kind == kVarPositional) has_var_positional_ = true;
    }
    tg::FunctionOptions options;
    options.name = std::move(name);
    for (const Param& p : params_) options.arg_names.push_back(p.name);
    options.reduce_retracing = reduce_retracing;
    options.max_traces = max_traces;
    if (!input_signature.is_none()) {
      std::vector<tg::TensorSpec> sig;
      for (py::handle spec : input_signature) {
        if (g_registry.tensor_spec == nullptr || PyObject_IsInstance(spec.ptr(), g_registry.tensor_spec) != 1)
          type_error("input_signature must be a list or tuple of tg.TensorSpec (nested structures are not "
                     "supported), got " + short_repr(spec));
        py::object spec_name = spec.attr("name");
        sig.emplace_back(to_static_shape(spec.attr("shape"), "TensorSpec", true), to_dtype(spec.attr("dtype")),
                         spec_name.is_none() ? std::string() : spec_name.cast<std::string>());
      }
      for (const Param& p : params_)
        if (p.kind == kVarPositional || p.kind == kVarKeyword)
          type_error("function '" + options.name + "' has an input_signature and a *" + p.name +
                     " parameter; tracegraph's input_signature covers named parameters only");
      if (sig.size() > params_.size())
        type_error("function '" + options.name + "' takes " + std::to_string(params_.size()) +
                   " parameters but its input_signature has " + std::to_string(sig.size()) + " TensorSpecs");
      for (std::size_t i = sig.size(); i < params_.size(); ++i)
        if (!params_[i].default_value)
          type_error("function '" + options.name + "': parameter '" + params_[i].name +
                     "' is not covered by the input_signature and has no default value");
      signature_size_ = sig.size();
      options.input_signature = std::move(sig);
    }
    // Its diagnostics (reasons, warnings, the ERTL message, the report) write Python code.
    core_ = std::make_shared<tg::detail::FunctionCore>(std::move(options), std::move(callable_type),
                                                       tg::detail::AdviceLanguage::kPython);
  }

  py::object call(const CallArgs& call_args) {
    if (tg::config::functions_run_eagerly()) {
      return py::reinterpret_steal<py::object>(
          check(PyObject_Vectorcall(fn_.ptr(), call_args.args, call_args.nargs, call_args.kwnames)));
    }
    Bound b = bind(call_args);
    {
      auto match = [&](const std::vector<TraceTypePtr>& types) {
        if (types.size() != b.slots.size()) return false;
        for (std::size_t i = 0; i < types.size(); ++i)
          if (!fast_equal(b.slots[i], *types[i])) return false;
        return true;
      };
      tg::detail::CalledConcrete called = core_->repeat_call(tg::detail::FastMatch(match));
      if (!called) {
        std::size_t h = 0x7067;
        bool fast = true;
        for (PyObject* s : b.slots) fast = fast && fast_hash(s, h);
        if (fast) called = core_->fast_lookup(h, tg::detail::FastMatch(match));
      }
      if (called) {
        tg::detail::CallInputs inputs;
        inputs.lent = true;
        for (PyObject* s : b.slots) lend(s, inputs.lent_tensors);
        std::vector<tg::Tensor> out;
        {
          py::gil_scoped_release release;
          out = core_->run(*called.cf, std::move(inputs));
        }
        return results(*called.cf, out);
      }
    }
    return call_general(b, true);
  }

  std::shared_ptr<PyConcrete> get_concrete_function(py::args args, py::kwargs kwargs) {
    std::vector<PyObject*> values;
    for (py::handle a : args) values.push_back(a.ptr());
    py::tuple names(kwargs.size());
    std::size_t k = 0;
    for (auto item : kwargs) {
      names[k++] = item.first;
      values.push_back(item.second.ptr());
    }
    Bound b = bind(CallArgs{values.data(), args.size(), k ? names.ptr() : nullptr}, /*for_concrete=*/true);
    TypeContext ctx;
    std::shared_ptr<tg::detail::ConcreteImpl> cf = dispatch(b, ctx, false);
    return std::make_shared<PyConcrete>(PyConcrete{std::move(cf), core_, params_});
  }

  std::vector<std::shared_ptr<PyConcrete>> concrete_functions() const {
    std::vector<std::shared_ptr<PyConcrete>> out;
    for (auto& cf : core_->concrete_functions()) out.push_back(std::make_shared<PyConcrete>(PyConcrete{cf, core_, params_}));
    return out;
  }

  const std::shared_ptr<tg::detail::FunctionCore>& core() const { return core_; }
  const std::string& alias() const { return alias_; }
  void set_alias(std::string alias) { alias_ = std::move(alias); }
  const py::object& python_function() const { return fn_; }
  const std::vector<Param>& params() const { return params_; }

 private:
  [[noreturn]] void bind_error(const std::string& what) const {
    type_error(core_->name() + "() " + what);
  }

  Bound bind(const CallArgs& call, bool for_concrete = false) const {
    Bound b;
    const std::size_t nargs = call.nargs;
    for (std::size_t i = 0; i < params_.size(); ++i) b.slots.push_back(nullptr);
    if (nargs > num_positional_ && !has_var_positional_)
      bind_error("takes " + std::to_string(num_positional_) + " positional argument" +
                 (num_positional_ == 1 ? "" : "s") + " but " + std::to_string(nargs) + " were given");
    for (std::size_t i = 0; i < std::min(nargs, num_positional_); ++i) b.slots[i] = call.args[i];
    py::dict var_keyword = py::reinterpret_steal<py::dict>(py::handle());
    std::size_t var_keyword_slot = params_.size();
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (params_[i].kind == kVarPositional) {
        py::tuple rest(nargs > num_positional_ ? nargs - num_positional_ : 0);
        for (std::size_t k = num_positional_; k < nargs; ++k)
          rest[k - num_positional_] = py::reinterpret_borrow<py::object>(call.args[k]);
        b.owned.push_back(rest);
        b.slots[i] = rest.ptr();
      } else if (params_[i].kind == kVarKeyword) {
        var_keyword_slot = i;
        var_keyword = py::dict();
      }
    }
    for (std::size_t k = 0; k < call.nkwargs(); ++k) {
      PyObject* name = PyTuple_GET_ITEM(call.kwnames, k);
      PyObject* value = call.args[nargs + k];
      const std::string key = py::str(name).cast<std::string>();
      std::size_t i = 0;
      while (i < params_.size() && !(params_[i].name == key && params_[i].kind != kVarPositional &&
                                     params_[i].kind != kVarKeyword))
        ++i;
      if (i < params_.size() && params_[i].kind != kPositionalOnly) {
        if (b.slots[i] != nullptr) bind_error("got multiple values for argument '" + key + "'");
        b.slots[i] = value;
      } else if (var_keyword_slot < params_.size()) {
        var_keyword[name] = py::handle(value);
      } else if (i < params_.size()) {
        bind_error("got some positional-only arguments passed as keyword arguments: '" + key + "'");
      } else {
        bind_error("got an unexpected keyword argument '" + key + "'");
      }
    }
    if (var_keyword_slot < params_.size()) {
      b.owned.push_back(var_keyword);
      b.slots[var_keyword_slot] = var_keyword.ptr();
    }
    std::vector<std::string> missing;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (b.slots[i] != nullptr) continue;
      if (params_[i].default_value) {
        b.slots[i] = params_[i].default_value.ptr();
      } else if (for_concrete && i < signature_size_) {
        b.slots[i] = Py_None;  // get_concrete_function() of a function with an input_signature
      } else {
        missing.push_back("'" + params_[i].name + "'");
      }
    }
    if (!missing.empty()) {
      std::string names;
      for (std::size_t i = 0; i < missing.size(); ++i)
        names += (i ? (i + 1 == missing.size() ? " and " : ", ") : "") + missing[i];
      bind_error("missing " + std::to_string(missing.size()) + " required argument" + (missing.size() == 1 ? "" : "s") +
                 ": " + names);
    }
    return b;
  }

  // With an input_signature, Python values where a spec stands are converted to tensors of its
  // dtype, as TF does; None and values that do not convert raise TypeError naming the spec.
  void convert_for_signature(Bound& b, bool for_concrete) const {
    const auto& sig = *core_->options().input_signature;
    for (std::size_t i = 0; i < sig.size(); ++i) {
      PyObject* p = b.slots[i];
      if (is_tensor(p) || (g_registry.tensor_spec && PyObject_IsInstance(p, g_registry.tensor_spec) == 1)) continue;
      if (p == Py_None && for_concrete) {
        py::object spec = describe_type(*tg::detail::tensor_trace_type(sig[i].dtype, sig[i].shape, sig[i].name),
                                        core_->parameter_name(i));
        b.owned.push_back(spec);
        b.slots[i] = spec.ptr();
        continue;
      }
      try {
        if (p == Py_None) throw py::type_error("None is not a tensor");
        py::object t = py::cast(to_tensor(p, sig[i].dtype, DTypeRule::kRequire));
        b.owned.push_back(t);
        b.slots[i] = t.ptr();
        b.converted = true;
      } catch (py::error_already_set&) {
        throw;
      } catch (const std::exception& e) {
        type_error("Binding inputs to function '" + core_->name() + "' failed: parameter '" + core_->parameter_name(i) +
                   "' of the input_signature is " + sig[i].to_string() + ", got " + short_repr(p) + " (" + e.what() +
                   ")");
      }
    }
  }

  std::shared_ptr<tg::detail::ConcreteImpl> dispatch(Bound& b, TypeContext& ctx, bool is_call) {
    drain_released_references();
    if (signature_size_) convert_for_signature(b, !is_call);
    std::vector<TraceTypePtr> types;
    types.reserve(b.slots.size());
    for (PyObject* s : b.slots) types.push_back(trace_type_of(s, ctx));
    tg::detail::reject_leaked_tensors(*core_, ctx.leaves);
    std::size_t h = 0x7067;
    bool fast = ctx.fast && !b.converted;
    for (std::size_t i = 0; fast && i < b.slots.size(); ++i) fast = fast_hash(b.slots[i], h);

    const auto& slots = b.slots;
    auto body = [&](const std::vector<TraceTypePtr>& traced, tg::detail::PlaceholderContext& context) {
      py::gil_scoped_acquire gil;
      Placeholders pc{context, {}};
      py::list positional;
      py::dict keywords;
      for (std::size_t i = 0; i < params_.size(); ++i) {
        py::object value = placeholder(slots[i], *traced[i], pc, core_->parameter_name(i));
        switch (params_[i].kind) {
          case kPositionalOnly:
          case kPositionalOrKeyword: positional.append(value); break;
          case kVarPositional:
            for (py::handle item : value) positional.append(item);
            break;
          case kKeywordOnly: keywords[py::str(params_[i].name)] = value; break;
          default:
            for (auto item : py::reinterpret_borrow<py::dict>(value)) keywords[item.first] = item.second;
            break;
        }
      }
      py::object result = fn_(*py::tuple(positional), **keywords);
      tg::detail::TraceOutput out;
      auto skeleton = std::make_shared<Skeleton>();
      skeleton->root = flatten(result, out.outputs, out.description);
      skeleton->num_outputs = out.outputs.size();
      out.skeleton = std::move(skeleton);
      return out;
    };
    CallLog log;
    std::shared_ptr<tg::detail::ConcreteImpl> cf;
    {
      CallLog* previous = t_call_log;
      t_call_log = &log;
      try {
        py::gil_scoped_release release;
        cf = core_->dispatch_or_trace(std::move(types), tg::detail::TraceBody(body), fast ? &h : nullptr, is_call);
      } catch (const tg::RetracingLimitError& e) {
        t_call_log = previous;
        flush(log);
        py::object cls = py::module_::import("tracegraph.errors").attr("RetracingLimitError");
        py::object text = py::handle(g_registry.python_side).attr("_in_user_words")(e.what(), alias_);
        py::object error = cls(py::none(), py::none(), text);
        error.attr("tg_code") = "ERTL";
        PyErr_SetObject(cls.ptr(), error.ptr());
        throw py::error_already_set();
      } catch (...) {
        t_call_log = previous;
        flush(log);
        throw;
      }
      t_call_log = previous;
    }
    flush(log);
    return cf;
  }

  void flush(CallLog& log) {
    for (const std::string& m : log.messages) python_log(m, alias_);
    log.messages.clear();
  }

  py::object call_general(Bound& b, bool is_call) {
    TypeContext ctx;
    std::shared_ptr<tg::detail::ConcreteImpl> cf = dispatch(b, ctx, is_call);
    tg::detail::CallInputs inputs;
    inputs.tensors = std::move(ctx.leaves);
    inputs.variables = std::move(ctx.variables);  // bound to the trace's Variable parameters
    std::vector<tg::Tensor> out;
    {
      py::gil_scoped_release release;
      out = core_->run(*cf, std::move(inputs));
    }
    return results(*cf, out);
  }

  py::object fn_;
  std::string alias_ = "tg";  // _module_alias: what the function's module calls the package
  std::vector<Param> params_;
  std::size_t num_positional_ = 0;
  bool has_var_positional_ = false;
  std::size_t signature_size_ = 0;
  std::shared_ptr<tg::detail::FunctionCore> core_;
};

// tg.function's __call__, a METH_FASTCALL method: CPython hands it the call's arguments as they
// are, where pybind11's dispatcher would pack them into a new tuple and dict (and look up the
// self type by name) first - a third of a cached call's cost. Exceptions leave as pybind11's
// would (its translators and tracegraph's, errors_bindings.cpp).
PyObject* function_call(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  try {
    // `self` is a _Function (the method descriptor checked); with one C++ type in it, the value
    // is the instance's first slot.
    const auto* inst = reinterpret_cast<const py::detail::instance*>(self);
    PyFunction* f = inst->simple_layout && inst->simple_holder_constructed
                        ? static_cast<PyFunction*>(inst->simple_value_holder[0])
                        : &py::handle(self).cast<PyFunction&>();  // else pybind11 finds it (or says why not)
    return f->call(CallArgs{args, static_cast<std::size_t>(PyVectorcall_NARGS(nargsf)), kwnames}).release().ptr();
  } catch (py::error_already_set& e) {
    e.restore();
#ifdef __GLIBCXX__
  } catch (abi::__forced_unwind&) {  // thread cancellation must unwind on (as pybind11 lets it)
    throw;
#endif
  } catch (...) {
    if (!py::detail::apply_exception_translators(py::detail::get_local_internals().registered_exception_translators) &&
        !py::detail::apply_exception_translators(py::detail::get_internals().registered_exception_translators))
      PyErr_SetString(PyExc_SystemError, "tg.function: an exception escaped the exception translators");
  }
  return nullptr;
}

// A concrete function called from Python: the arguments bind to the traced parameters (tensors
// and the literal values traced; parameters whose traced type holds no tensor may be left out).
py::object call_concrete(const PyConcrete& c, py::args args, py::kwargs kwargs) {
  const auto& params = c.cf->input_type.params;
  const std::size_t n = params.size();
  // A parameter that needs an argument: one holding a tensor or a Variable (TF's flat signature).
  auto holds_tensor = [](const TraceType& t) {
    const std::string text = t.to_string();
    return text.find("TensorSpec(") != std::string::npos || text.find("VariableSpec(") != std::string::npos;
  };
  auto positional = [&](std::size_t i) { return i < c.params.size() && c.params[i].kind <= kPositionalOrKeyword; };
  // As TF: positional arguments bind to every parameter in order (the structured signature)
  // when there are more of them than tensor parameters, else to the tensor parameters only.
  std::size_t tensor_params = 0, positional_params = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!positional(i)) continue;
    ++positional_params;
    if (holds_tensor(*params[i])) ++tensor_params;
  }
  const bool structured = args.size() > tensor_params;
  if (args.size() > (structured ? positional_params : tensor_params))
    type_error("the concrete function of '" + c.cf->function_name + "' takes " + std::to_string(positional_params) +
               " positional argument" + (positional_params == 1 ? "" : "s") + " but " + std::to_string(args.size()) +
               " were given");
  std::vector<py::object> slots(n);
  std::size_t next = 0;
  for (py::handle a : args) {
    while (!positional(next) || (!structured && !holds_tensor(*params[next]))) ++next;
    slots[next++] = py::reinterpret_borrow<py::object>(a);
  }
  for (auto item : kwargs) {
    const std::string key = py::str(item.first).cast<std::string>();
    std::size_t i = 0;
    while (i < n && c.params[i].name != key) ++i;
    if (i == n) type_error("the concrete function of '" + c.cf->function_name + "' got an unexpected keyword argument '" + key + "'");
    if (slots[i]) type_error("the concrete function of '" + c.cf->function_name + "' got multiple values for argument '" + key + "'");
    slots[i] = py::reinterpret_borrow<py::object>(item.second);
  }
  TypeContext ctx;
  std::vector<TraceTypePtr> types;
  for (std::size_t i = 0; i < n; ++i) {
    if (!slots[i]) {
      if (holds_tensor(*params[i]))
        type_error("the concrete function of '" + c.cf->function_name + "' is missing the argument '" +
                   c.params[i].name + "' (" + params[i]->to_string() + ")");
      slots[i] = python_value_of(*params[i]);
    }
    tg::DType dtype;
    tg::TensorShape shape;
    if (tg::detail::as_tensor_type(*params[i], &dtype, &shape)) {
      if (const tg::Tensor* t = as_tensor_ptr(slots[i])) {
        if (t->dtype() != dtype) {
          py::object cls = py::module_::import("tracegraph.errors").attr("InvalidArgumentError");
          py::object error = cls(py::none(), py::none(),
                                 "cannot compute " + c.cf->function_name + " as input #" + std::to_string(i) +
                                     "(zero-based) was expected to be a " + tg::to_string(dtype) + " tensor but is a " +
                                     tg::to_string(t->dtype()) + " tensor");
          PyErr_SetObject(cls.ptr(), error.ptr());
          throw py::error_already_set();
        }
      } else if (!slots[i].is_none() && classify(slots[i].ptr()) != Kind::kSpec) {
        slots[i] = py::cast(to_tensor(slots[i], dtype, DTypeRule::kRequire));  // TF converts Python numbers
      }
    }
    types.push_back(trace_type_of(slots[i], ctx));
  }
  tg::detail::bind_concrete(*c.cf, types);
  std::vector<tg::Tensor> out;
  {
    py::gil_scoped_release release;
    out = tg::detail::call_bound(*c.cf, ctx.leaves, ctx.variables);
  }
  return results(*c.cf, out);
}

py::object structured_outputs(const PyConcrete& c) {
  const Skeleton& s = python_skeleton(*c.cf);
  return rebuild(s.root, [&](const OutputNode& node) {
    tg::TraceTypePtr t = tg::detail::tensor_trace_type(node.dtype, node.shape);
    return describe_type(*t, "");
  });
}

}  // namespace

// For tg.saved_model (saved_model_bindings.cpp): the core a tg.function traces with, and a
// ConcreteFunction handle's trace.
std::shared_ptr<tg::detail::FunctionCore> function_core_of(py::handle function) {
  return function.cast<const PyFunction&>().core();
}
std::shared_ptr<tg::detail::ConcreteImpl> concrete_impl_of(py::handle concrete) {
  return concrete.cast<const PyConcrete&>().cf;
}

void register_function(py::module_& m) {
  tg::config::set_print_sink(&print_sink);
  tg::config::set_log_sink(&log_sink);
  m.def("_register_python_classes", [](py::handle tensor_spec, py::handle trace_type, py::handle python_side) {
    g_registry.tensor_spec = tensor_spec.inc_ref().ptr();
    g_registry.trace_type = trace_type.inc_ref().ptr();
    g_registry.python_side = python_side.inc_ref().ptr();
    g_registry.dataclass_replace = py::object(py::module_::import("dataclasses").attr("replace")).release().ptr();
    g_registry.mapping_abc = py::object(py::module_::import("collections.abc").attr("Mapping")).release().ptr();
    g_registry.ndarray = py::object(py::module_::import("numpy").attr("ndarray")).release().ptr();
    g_registry.weakref_type = py::object(py::module_::import("weakref").attr("ref")).release().ptr();
  });

  py::class_<PyConcrete, std::shared_ptr<PyConcrete>> concrete(m, "_ConcreteHandle");
  concrete.def("__call__", &call_concrete);
  concrete.def("call_flat", [](const PyConcrete& c, std::vector<tg::Tensor> inputs) {
    std::vector<tg::Tensor> out;
    {
      py::gil_scoped_release release;
      out = tg::ConcreteFunction(c.cf).call_flat(inputs);  // refuses a trace with Variable parameters
    }
    return out;
  });
  concrete.def_property_readonly("key", [](const PyConcrete& c) { return reinterpret_cast<uintptr_t>(c.cf.get()); });
  concrete.def_property_readonly("name", [](const PyConcrete& c) { return c.cf->function_name; });
  concrete.def_property_readonly("index", [](const PyConcrete& c) { return c.cf->index; });
  concrete.def("function_type", [](const PyConcrete& c) { return tg::ConcreteFunction(c.cf).function_type(); });
  concrete.def("output_description", [](const PyConcrete& c) { return c.cf->output_description; });
  concrete.def("parameters", [](const PyConcrete& c) {
    // (name, kind name, type text, Python form) per parameter.
    py::list out;
    const auto& t = c.cf->input_type;
    for (std::size_t i = 0; i < t.params.size(); ++i) {
      const int kind = i < c.params.size() ? c.params[i].kind : kPositionalOrKeyword;
      out.append(py::make_tuple(t.names[i], kind_name(kind), t.params[i]->to_string(), describe_type(*t.params[i], t.names[i])));
    }
    return out;
  });
  concrete.def("structured_outputs", &structured_outputs);
  concrete.def("graph_nodes", [](const PyConcrete& c, bool optimized) {
    const tg::Graph& g = optimized ? *c.cf->optimized_graph : *c.cf->graph;
    py::list out;
    for (const tg::Graph::Node& n : g.nodes()) {
      py::list outputs;
      for (const tg::TensorSpec& s : n.outputs) outputs.append(py::make_tuple(s.to_string()));
      out.append(py::make_tuple(n.name, n.op, n.inputs, n.variable, outputs));
    }
    return out;
  }, py::arg("optimized") = false);
  concrete.def("graph_text", [](const PyConcrete& c, bool optimized) {
    return (optimized ? c.cf->optimized_graph : c.cf->graph)->to_string();
  }, py::arg("optimized") = false);
  concrete.def("graph_dot", [](const PyConcrete& c) { return c.cf->graph->to_dot(); });

  py::class_<PyFunction> fn(m, "_Function", py::dynamic_attr(), R"doc(
The C++ side of tg.function (use tracegraph.function): a Python callable traced per input trace
type by the library's function core.)doc");
  fn.def(py::init<py::object, std::string, py::list, py::object, bool, std::string, int64_t>(), py::arg("fn"),
         py::arg("name"), py::arg("params"), py::arg("input_signature"), py::arg("reduce_retracing"),
         py::arg("callable_type"), py::arg("max_traces"));
  static PyMethodDef call_method = {"__call__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&function_call)),
                                    METH_FASTCALL | METH_KEYWORDS, "Calls the function (tf.function's __call__)."};
  fn.attr("__call__") = py::reinterpret_steal<py::object>(
      check(PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(fn.ptr()), &call_method)));
  fn.def("_get_concrete_function", &PyFunction::get_concrete_function);
  fn.def("_concrete_functions", &PyFunction::concrete_functions);
  fn.def("experimental_get_tracing_count", [](const PyFunction& f) { return f.core()->tracing_count(); });
  fn.def("_retracing_report", [](const PyFunction& f) { return f.core()->retracing_report(); });
  fn.def("_trace_history", [](const PyFunction& f) {
    py::list out;
    for (const tg::TraceRecord& r : f.core()->trace_history())
      out.append(py::make_tuple(r.index, r.function_type, r.reason, r.changed_arguments));
    return out;
  });
  fn.def("_suggested_input_signature", [](const PyFunction& f) -> py::object {
    auto sig = f.core()->suggested_input_signature();
    if (!sig) return py::none();
    py::list out;
    for (const tg::TensorSpec& s : *sig) out.append(describe_type(*tg::detail::tensor_trace_type(s.dtype, s.shape), ""));
    return out;
  });
  fn.def_property_readonly("_name", [](const PyFunction& f) { return f.core()->name(); });
  fn.def_property("_module_alias", [](const PyFunction& f) { return f.alias(); },
                  [](PyFunction& f, std::string alias) { f.set_alias(std::move(alias)); });
  fn.def("_parameter_name", [](const PyFunction& f, std::size_t i) { return f.core()->parameter_name(i); });

  m.def("_print", [](py::list parts, int64_t summarize, std::vector<std::string> separators) {
    std::vector<tg::detail::PrintPart> out;
    for (py::handle p : parts) {
      if (const tg::Tensor* t = as_tensor_ptr(p)) out.push_back({"", *t});
      else out.push_back({py::str(p).cast<std::string>(), {}});
    }
    py::gil_scoped_release release;
    tg::detail::print_parts(out, summarize, std::move(separators));
  });
  m.def("_run_functions_eagerly", &tg::config::run_functions_eagerly, py::arg("run_eagerly"));
  m.def("_functions_run_eagerly", &tg::config::functions_run_eagerly);
}

}  // namespace tgpy
