// tg.Tensor: the C++ handle with NumPy's buffer protocol, conversions and Python's operators
// (TF's dtype rules: a Python number takes the tensor's dtype). The parts written in Python -
// shape, dtype, repr, indexing, iteration - are in python/tracegraph/_tensor.py.
#include <string>
#include <vector>

#include "bindings.h"

namespace tgpy {

namespace {

using tg::Tensor;
using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);

// Python's NotImplemented: lets the other operand's reflected operator try.
py::object not_implemented() { return py::reinterpret_borrow<py::object>(Py_NotImplemented); }

// Values whose conversion errors are final: Python numbers, strings, lists and arrays have no
// operator that knows tensors, so the conversion's message is the useful one.
bool conversion_is_final(py::handle other) {
  PyObject* p = other.ptr();
  return PyLong_Check(p) || PyFloat_Check(p) || PyBool_Check(p) || PyUnicode_Check(p) || PyBytes_Check(p) ||
         PyList_Check(p) || PyTuple_Check(p) || py::isinstance<py::array>(other) || other.is_none();
}

// self OP other (reflected: other OP self). A value that does not convert but has the reflected
// operator gets its turn (NotImplemented), as TF's operators do; else the conversion's error.
// `reflected_name` is the operator the other operand may have ("__radd__"); nullptr when this
// call is that reflected operator already.
py::object apply_binary(BinaryFn fn, const Tensor& self, py::handle other, bool reflected,
                        const char* reflected_name) {
  Tensor converted;
  try {
    converted = to_tensor(other, self.dtype());
  } catch (const py::builtin_exception&) {
    if (reflected_name != nullptr && !conversion_is_final(other) &&
        py::hasattr(py::type::handle_of(other), reflected_name))
      return not_implemented();
    throw;
  }
  const Tensor& a = reflected ? converted : self;
  const Tensor& b = reflected ? self : converted;
  return py::cast(without_gil([&] { return fn(a, b); }));
}

Tensor require_bool(const char* op, const Tensor& x) {
  if (x.dtype() != tg::bool_)
    unimplemented(std::string("[") + op + "] tracegraph has no bitwise ops: & | ^ ~ work on bool tensors, got a " +
                  tg::to_string(x.dtype()) + " tensor; use tg.math.logical_* on bools");
  return x;
}
Tensor logical_and_op(const Tensor& a, const Tensor& b) {
  return tg::logical_and(require_bool("__and__", a), require_bool("__and__", b));
}
Tensor logical_or_op(const Tensor& a, const Tensor& b) {
  return tg::logical_or(require_bool("__or__", a), require_bool("__or__", b));
}
Tensor logical_xor_op(const Tensor& a, const Tensor& b) {
  require_bool("__xor__", a);
  require_bool("__xor__", b);
  return tg::not_equal(a, b);
}

// Do two static shapes broadcast together (NumPy's rule)? Unknown dims and ranks may.
bool broadcastable(const tg::TensorShape& a, const tg::TensorShape& b) {
  if (!a.has_rank() || !b.has_rank()) return true;
  const tg::TensorShape sa = a.none_aware(), sb = b.none_aware();
  const std::vector<int64_t>& da = sa.dims();
  const std::vector<int64_t>& db = sb.dims();
  for (std::size_t i = 0; i < std::min(da.size(), db.size()); ++i) {
    const int64_t x = da[da.size() - 1 - i], y = db[db.size() - 1 - i];
    if (x != y && x != 1 && y != 1 && x != tg::None && y != tg::None) return false;
  }
  return true;
}

// TF 2's ==: elementwise; None and values that do not convert compare unequal (a Python bool),
// shapes that do not broadcast give a False scalar instead of an error.
py::object equality(const Tensor& self, py::handle other, bool equal) {
  if (other.is_none()) return py::bool_(!equal);
  Tensor converted;
  try {
    converted = to_tensor(other, self.dtype());
  } catch (const py::builtin_exception&) {
    return py::bool_(!equal);
  }
  if (!broadcastable(self.shape(), converted.shape())) return py::cast(tg::constant(!equal));
  return py::cast(without_gil([&] { return equal ? tg::equal(self, converted) : tg::not_equal(self, converted); }));
}

py::object shape_tuple(const Tensor& t) {
  const tg::TensorShape shape = t.shape().none_aware();
  if (!shape.has_rank()) return py::none();
  py::tuple out(shape.dims().size());
  for (std::size_t i = 0; i < shape.dims().size(); ++i) {
    const int64_t d = shape.dims()[i];
    out[i] = d == tg::None ? py::object(py::none()) : py::object(py::int_(d));
  }
  return out;
}

py::buffer_info buffer_of(const Tensor& t) {
  if (t.dtype() == tg::string_)
    throw py::buffer_error("a string tensor has no buffer (its elements are C++ strings); use .numpy()");
  const void* data = t.data();
  std::string format;
  switch (t.dtype()) {
    case tg::DType::Float32: format = py::format_descriptor<float>::format(); break;
    case tg::DType::Float64: format = py::format_descriptor<double>::format(); break;
    case tg::DType::Int32: format = py::format_descriptor<int32_t>::format(); break;
    case tg::DType::Int64: format = py::format_descriptor<int64_t>::format(); break;
    case tg::DType::Bool: format = py::format_descriptor<bool>::format(); break;
    case tg::DType::UInt8: format = py::format_descriptor<uint8_t>::format(); break;
    case tg::DType::String: break;
    case tg::DType::BFloat16:
      throw py::buffer_error("a bfloat16 tensor has no buffer: NumPy and the buffer protocol have no bfloat16 "
                             "format; tg.cast(x, tg.float32) first");
  }
  const tg::TensorShape tensor_shape = t.shape();
  const std::vector<int64_t>& dims = tensor_shape.dims();
  const auto item = static_cast<py::ssize_t>(tg::dtype_size(t.dtype()));
  std::vector<py::ssize_t> shape(dims.begin(), dims.end()), strides(dims.size());
  py::ssize_t stride = item;
  for (std::size_t i = dims.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= static_cast<py::ssize_t>(std::max<int64_t>(dims[i], 1));
  }
  return py::buffer_info(const_cast<void*>(data), item, format, static_cast<py::ssize_t>(dims.size()), shape,
                         strides, /*readonly=*/true);
}

}  // namespace

// TF's `/`: true division; integers are converted first (uint8 -> float32, wider -> float64).
tg::Tensor truediv(const tg::Tensor& x, const tg::Tensor& y) {
  if (x.dtype() == y.dtype() && tg::is_integer(x.dtype())) {
    const tg::DType to = x.dtype() == tg::uint8 ? tg::float32 : tg::float64;
    return tg::div(tg::cast(x, to), tg::cast(y, to));
  }
  return tg::div(x, y);
}

void register_tensor(py::module_& m) {
  py::class_<Tensor> cls(m, "Tensor", py::buffer_protocol(), R"doc(
A multi-dimensional array of one dtype (tf.Tensor): eager, with a value, or symbolic while a
function is traced. Immutable: NumPy views of it (np.asarray(t), memoryview(t)) are read-only
and share its memory.)doc");
  cls.def_buffer([](Tensor& t) { return buffer_of(t); });

  cls.def_property_readonly("_dtype_enum", [](const Tensor& t) { return static_cast<int>(t.dtype()); });
  cls.def("_shape_tuple", &shape_tuple, "The dims (None where unknown), or None for an unknown rank.");
  cls.def("_num_elements", [](const Tensor& t) -> py::object {
    const int64_t n = t.shape().none_aware().num_elements();
    return n < 0 ? py::object(py::none()) : py::object(py::int_(n));
  });
  cls.def_property_readonly("_is_symbolic", &Tensor::is_symbolic);
  cls.def("_to_string", &Tensor::to_string, "The C++ library's text of the tensor.");
  cls.def("_data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data()); },
          "The address of the first element (eager, not string).");
  cls.def("_index", [](const Tensor& t, int64_t i) { return without_gil([&] { return t[i]; }); },
          "x[i] along the first dimension, as the C++ operator[].");

  cls.def("numpy", &numpy_copy, "The value as a new NumPy array (a NumPy scalar for rank 0), as TF's numpy().");
  cls.def("_numpy_view", [](py::object self) { return numpy_view(self.cast<const Tensor&>(), self); },
          "A read-only NumPy array sharing the tensor's memory.");
  cls.def("__array__",
          [](py::object self, py::object dtype, py::object copy) -> py::object {
            py::object out = numpy_view(self.cast<const Tensor&>(), self);
            if (!dtype.is_none()) out = out.attr("astype")(dtype);
            else if (!copy.is_none() && copy.cast<bool>()) out = out.attr("copy")();
            return out;
          },
          py::arg("dtype") = py::none(), py::arg("copy") = py::none());

  cls.def("__bool__", [](const Tensor& t) {
    if (!t.is_symbolic() && t.num_elements() != 1)
      value_error("the truth value of a tensor with " + std::to_string(t.num_elements()) +
                  " elements is ambiguous; use tg.reduce_any or tg.reduce_all");
    if (!t.is_symbolic() && t.dtype() == tg::string_) return !t.item<std::string>().empty();
    if (!t.is_symbolic() && t.dtype() != tg::bool_) return static_cast<bool>(tg::cast(t, tg::bool_));
    if (t.is_symbolic())
      type_error("using a symbolic tg.Tensor as a Python bool is not allowed: its value exists only when the "
                 "graph runs. Write the condition with tg.cond / tg.while_loop, or let AutoGraph convert the "
                 "Python if / while (tg.function's autograph=True, the default)");
    return static_cast<bool>(t);
  });

  // Arithmetic, both ways round.
  struct Operator {
    const char* name;
    const char* reflected;
    BinaryFn fn;
  };
  static const Operator kOperators[] = {
      {"__add__", "__radd__", &tg::add},
      {"__sub__", "__rsub__", &tg::sub},
      {"__mul__", "__rmul__", &tg::mul},
      {"__truediv__", "__rtruediv__", &truediv},
      {"__floordiv__", "__rfloordiv__", &tg::floordiv},
      {"__mod__", "__rmod__", &tg::mod},
      {"__pow__", "__rpow__", &tg::pow},
      {"__matmul__", "__rmatmul__", [](const Tensor& a, const Tensor& b) { return tg::matmul(a, b); }},
      {"__and__", "__rand__", &logical_and_op},
      {"__or__", "__ror__", &logical_or_op},
      {"__xor__", "__rxor__", &logical_xor_op},
  };
  for (const Operator& op : kOperators) {
    const BinaryFn fn = op.fn;
    const char* reflected = op.reflected;
    cls.def(op.name,
            [fn, reflected](const Tensor& self, py::handle other) {
              return apply_binary(fn, self, other, false, reflected);
            },
            py::is_operator());
    cls.def(op.reflected,
            [fn](const Tensor& self, py::handle other) { return apply_binary(fn, self, other, true, nullptr); },
            py::is_operator());
  }
  static const Operator kComparisons[] = {
      {"__lt__", nullptr, &tg::less},
      {"__le__", nullptr, &tg::less_equal},
      {"__gt__", nullptr, &tg::greater},
      {"__ge__", nullptr, &tg::greater_equal},
  };
  for (const Operator& op : kComparisons) {
    const BinaryFn fn = op.fn;
    cls.def(op.name, [fn](const Tensor& self, py::handle other) { return apply_binary(fn, self, other, false, nullptr); },
            py::is_operator());
  }
  cls.def("__eq__", [](const Tensor& self, py::handle other) { return equality(self, other, true); },
          py::is_operator());
  cls.def("__ne__", [](const Tensor& self, py::handle other) { return equality(self, other, false); },
          py::is_operator());
  cls.def("__neg__", [](const Tensor& x) { return without_gil([&] { return tg::neg(x); }); });
  cls.def("__abs__", [](const Tensor& x) { return without_gil([&] { return tg::abs(x); }); });
  cls.def("__invert__", [](const Tensor& x) {
    require_bool("__invert__", x);
    return without_gil([&] { return tg::logical_not(x); });
  });

}

}  // namespace tgpy
