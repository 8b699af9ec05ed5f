// tg.Variable: the C++ tg::Variable itself, so that a Variable passed to or closed over by a
// traced function is the library's (read at every call, the singleton rule on creation). The
// TF-facing parts - the constructor's arguments, name scopes, trainable, repr, operators - are
// written in Python (python/tracegraph/_variables.py) and installed on this class; `trainable`
// lives in the instance's __dict__. Also tg.init_scope's C++ half: ops run eagerly inside it.
#include <optional>
#include <string>

#include "bindings.h"
#include "ops/op.h"
#include "ops/variable_creation.h"
#include "ops/variable_state.h"

namespace tgpy {

namespace {

// A value for an assign of `var`: Python values are converted to the variable's dtype; a tensor
// (or another Variable) must already have it, as TF's convert_to_tensor(value, dtype=...) wants.
tg::Tensor assign_value(const tg::Variable& var, py::handle value, const char* op) {
  if (value.is_none())
    type_error(std::string("[Variable.") + op + "] expected a value for Variable '" + var.name() + "' (" +
               tg::to_string(var.dtype()) + ", shape " + var.shape().to_string() + "), got None");
  tg::Tensor t = to_tensor(value, var.dtype());
  if (t.dtype() != var.dtype())
    value_error(std::string("[Variable.") + op + "] Variable '" + var.name() + "' is " + tg::to_string(var.dtype()) +
                " and cannot take a " + tg::to_string(t.dtype()) + " value (" + t.to_string() + "); tg.cast it to " +
                tg::to_string(var.dtype()) + " first");
  return t;
}

py::object shape_tuple(const tg::TensorShape& shape) {
  if (!shape.has_rank()) return py::none();
  py::tuple out(shape.dims().size());
  for (std::size_t i = 0; i < shape.dims().size(); ++i) {
    const int64_t d = shape.dims()[i];
    out[i] = d == tg::None ? py::object(py::none()) : py::object(py::int_(d));
  }
  return out;
}

// tg.init_scope's C++ half: no trace records on this thread while it is entered (ops on eager
// values run eagerly, a Variable read is its current value) and no trace's singleton rule applies
// (Variables may be created, as TF's init_scope lifts their creation out of the function).
class EagerScope {
 public:
  void enter() {
    if (recorder_) throw py::value_error("this init_scope is already entered");
    recorder_.emplace(nullptr);
    policy_.emplace(nullptr);
  }
  void exit() {
    policy_.reset();  // the reverse order of enter()
    recorder_.reset();
  }

 private:
  std::optional<tg::detail::RecorderScope> recorder_;
  std::optional<tg::detail::VariablePolicyScope> policy_;
};

}  // namespace

const tg::Variable* as_variable_ptr(py::handle value) {
  if (!value || !py::isinstance<tg::Variable>(value)) return nullptr;
  return &value.cast<const tg::Variable&>();
}

void register_variable(py::module_& m) {
  py::class_<tg::Variable> cls(m, "Variable", py::dynamic_attr(), R"doc(
Mutable state (tf.Variable): the library's tg::Variable. Reading it gives a tensor of its current
value - inside a traced function too, at every call - and assign / assign_add / assign_sub
replace the value (ordered stateful ops inside a traced function).)doc");
  // The C++ constructor: an initial tensor and the full name. tracegraph/_variables.py wraps it
  // with TF's arguments (dtype, shape, trainable, name scopes, callables).
  cls.def(py::init([](const tg::Tensor& initial_value, const std::string& name) {
            return without_gil([&] { return tg::Variable(initial_value, name); });
          }),
          py::arg("initial_value"), py::arg("name"));

  cls.def("read_value",
          [](py::handle self) {
            note_variable_read(self);
            const tg::Variable& v = self.cast<const tg::Variable&>();
            return without_gil([&] { return v.read_value(); });
          },
          "The current value as a tensor (inside a traced function: a read at every call).");
  cls.def("_assign", [](tg::Variable& v, py::handle value) {
    tg::Tensor t = assign_value(v, value, "assign");
    return without_gil([&] { return v.assign(t); });
  });
  cls.def("_assign_add", [](tg::Variable& v, py::handle value) {
    tg::Tensor t = assign_value(v, value, "assign_add");
    return without_gil([&] { return v.assign_add(t); });
  });
  cls.def("_assign_sub", [](tg::Variable& v, py::handle value) {
    tg::Tensor t = assign_value(v, value, "assign_sub");
    return without_gil([&] { return v.assign_sub(t); });
  });
  cls.def_property_readonly("_dtype_enum", [](const tg::Variable& v) { return static_cast<int>(v.dtype()); });
  cls.def("_shape_tuple", [](const tg::Variable& v) { return shape_tuple(v.shape()); });
  cls.def_property_readonly("_cpp_name", [](const tg::Variable& v) { return v.name(); },
                            "The library's name of the Variable (TF's name without ':0').");
  cls.def_property_readonly("_id", &tg::Variable::id, "The process-unique id of the Variable's state.");
  cls.def_property_readonly("_is_parameter", [](const tg::Variable& v) { return v.state()->parameter; },
                            "Whether this is the Variable parameter a traced body sees for a Variable argument.");
  cls.def("_same_state", [](const tg::Variable& a, const tg::Variable& b) { return a.state() == b.state(); });

  py::class_<EagerScope>(m, "_EagerScope", "tg.init_scope's C++ half (see tracegraph/_variables.py).")
      .def(py::init<>())
      .def("_enter", &EagerScope::enter)
      .def("_exit", &EagerScope::exit);
}

}  // namespace tgpy
