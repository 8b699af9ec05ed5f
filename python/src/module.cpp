// The extension module tracegraph._core. The package python/tracegraph/ imports it and lays its
// functions out in TensorFlow's modules; the classes written in Python (DType, TensorShape, the
// tg.errors classes) live there.
#include "bindings.h"

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
}
