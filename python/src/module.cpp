// The extension module tracegraph._core. The package python/tracegraph/ imports it and lays its
// functions out in TensorFlow's modules; the classes written in Python (DType, TensorShape, the
// tg.errors classes) live there.
#include "bindings.h"

namespace {

// pybind11 lets Python make an instance with `T.__new__(T)` and never run its __init__ (tg.Tensor
// has none at all); a method called on it then reads a C++ object that was never constructed
// (pybind11 allocates its memory on first use). Every class of this module refuses that first use
// instead, with a Python TypeError.
void* refuse_unconstructed(std::size_t) {
  throw pybind11::type_error(
      "this tracegraph object was made with __new__ and never initialised, so it holds no value; "
      "create it as the API does (tg.constant(...), tg.Variable(...), tg.function(...))");
}

void refuse_unconstructed_instances(const pybind11::module_& m) {
  const std::string module_name = pybind11::str(m.attr("__name__"));
  for (auto& [cpp_type, info] : pybind11::detail::get_internals().registered_types_cpp) {
    (void)cpp_type;
    const pybind11::handle type(reinterpret_cast<PyObject*>(info->type));
    if (pybind11::hasattr(type, "__module__") && pybind11::str(type.attr("__module__")).cast<std::string>() == module_name)
      info->operator_new = &refuse_unconstructed;
  }
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "tracegraph's C++ library: tensors and ops (import tracegraph, not this module)";
  tgpy::register_errors(m);
  tgpy::register_tensor(m);
  tgpy::register_ops(m);
  tgpy::register_function(m);
  tgpy::register_variable(m);
  tgpy::register_gradient(m);
  tgpy::register_control_flow(m);
  tgpy::register_optim(m);
  tgpy::register_nn(m);
  tgpy::register_dlpack(m);
  tgpy::register_saved_model(m);
  m.attr("_dtype_names") = [] {
    pybind11::list names;
    for (std::size_t i = 0; i < tg::kNumDTypes; ++i) names.append(tg::to_string(static_cast<tg::DType>(i)));
    return names;
  }();
  refuse_unconstructed_instances(m);
}
