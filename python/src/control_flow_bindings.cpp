// tg.cond, tg.while_loop and tg.TensorArray from Python over the C++ control flow
// (include/tracegraph/control_flow.h). The structures of branch results and loop variables are
// Python's (python/tracegraph/_control_flow.py flattens and rebuilds them); this layer passes
// flat lists of tensors and calls the Python callables from inside the C++ tracer. The GIL is
// held for the whole call: the callables are Python, and what runs between them (tracing, or an
// eager loop's bookkeeping) is short; the ops the callables run release it themselves.
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "core/tensor_impl.h"
#include "ops/op.h"
#include "trace/recorder.h"
#include "tracegraph/control_flow.h"

namespace tgpy {

namespace {

// A Python callable's result as the flat tensors the C++ side takes: a list or tuple of
// tg.Tensors (the Python layer converts everything else before returning).
std::vector<tg::Tensor> flat_result(py::handle result, const char* what) {
  if (!py::isinstance<py::list>(result) && !py::isinstance<py::tuple>(result))
    type_error(std::string(what) + " must return a list of tensors, got " + py::repr(result).cast<std::string>());
  std::vector<tg::Tensor> out;
  for (py::handle item : result) {
    const tg::Tensor* t = as_tensor_ptr(item);
    if (t == nullptr)
      type_error(std::string(what) + " returned " + py::repr(item).cast<std::string>() + " where a tg.Tensor belongs");
    out.push_back(*t);
  }
  return out;
}

py::object shape_to_python(const tg::TensorShape& shape) {
  if (!shape.has_rank()) return py::none();
  py::list dims;
  for (int64_t d : shape.dims()) dims.append(d == tg::None ? py::object(py::none()) : py::object(py::int_(d)));
  return dims;
}

tg::TensorArray make_tensor_array(py::handle dtype, py::handle size, bool dynamic_size, py::handle element_shape) {
  const tg::DType dt = to_dtype(dtype);
  const tg::TensorShape shape =
      element_shape.is_none() ? tg::TensorShape::unknown_rank() : to_static_shape(element_shape, "TensorArray", true);
  if (const tg::Tensor* t = as_tensor_ptr(size)) return tg::TensorArray(dt, *t, dynamic_size, shape);
  if (size.is_none()) {
    if (!dynamic_size)
      value_error("[TensorArray] size is None: give the number of elements, or dynamic_size=True for an array "
                  "that grows as it is written");
    return tg::TensorArray(dt, 0, true, shape);
  }
  const int64_t n = to_int(size, "size", "TensorArray");
  if (n < 0) value_error("[TensorArray] size must be >= 0, got " + std::to_string(n));
  return tg::TensorArray(dt, n, dynamic_size, shape);
}

// An index argument: a Python integer, or an integer scalar tensor (symbolic in loops).
template <class F>
auto with_index(py::handle index, F&& f) {
  if (const tg::Tensor* t = as_tensor_ptr(index)) return f(*t);
  return f(tg::constant(to_int(index, "index", "TensorArray")));
}

}  // namespace

void register_control_flow(py::module_& m) {
  m.def("_in_trace", [] { return tg::detail::current_recorder() != nullptr; },
        "Whether ops on this thread are being recorded into a graph (a tg.function trace, a cond "
        "branch or a loop body).");

  m.def(
      "_cond_flat",
      [](const tg::Tensor& pred, const py::function& true_fn, const py::function& false_fn) {
        return tg::detail::cond_flat(
            pred, [&] { return flat_result(true_fn(), "true_fn"); },
            [&] { return flat_result(false_fn(), "false_fn"); });
      },
      py::arg("pred"), py::arg("true_fn"), py::arg("false_fn"),
      "tg::cond on flat results: the callables take nothing and return lists of tensors.");

  m.def(
      "_while_loop_flat",
      [](const py::function& cond, const py::function& body, const std::vector<tg::Tensor>& init,
         const std::vector<std::string>& paths, const std::vector<bool>& tensor_arrays,
         const py::object& shape_invariants, int64_t maximum_iterations, const std::string& name) {
        if (paths.size() != init.size() || tensor_arrays.size() != init.size())
          value_error("_while_loop_flat: one path and one TensorArray flag per loop variable");
        std::vector<tg::detail::FlatLeaf> leaves;
        for (std::size_t i = 0; i < init.size(); ++i) leaves.push_back({paths[i], tensor_arrays[i]});
        tg::WhileOptions options;
        options.maximum_iterations = maximum_iterations;
        options.name = name;
        if (!shape_invariants.is_none())
          for (py::handle s : shape_invariants)
            options.shape_invariants.push_back(
                s.is_none() ? tg::TensorShape::unknown_rank() : to_static_shape(s, "while_loop", true));
        auto cond_flat = [&](const std::vector<tg::Tensor>& vars) { return flat_result(cond(vars), "cond"); };
        auto body_flat = [&](const std::vector<tg::Tensor>& vars) { return flat_result(body(vars), "body"); };
        return tg::detail::while_loop_flat(cond_flat, body_flat, init, leaves, options);
      },
      py::arg("cond"), py::arg("body"), py::arg("loop_vars"), py::arg("paths"), py::arg("tensor_arrays"),
      py::arg("shape_invariants"), py::arg("maximum_iterations"), py::arg("name"),
      "tg::while_loop on flat loop variables: cond and body take the list of tensors; cond returns "
      "[a bool scalar], body the new list.");

  m.def(
      "_trace_types",
      [](const py::function& fn, const std::vector<tg::Tensor>& like) {
        // Traced into a sub-graph that is dropped: only the results' types are kept. The inputs
        // are placeholders of the types of `like`, so that the traced code sees symbolic values
        // (as the loop body will) rather than the eager values they stand for.
        tg::detail::GraphRecorder recorder(tg::detail::CapturePolicy::kCapture, "autograph/loop_variable_types");
        std::vector<tg::Tensor> inputs;
        for (std::size_t i = 0; i < like.size(); ++i)
          inputs.push_back(recorder.add_input(tg::detail::ValueType{like[i].dtype(), tg::detail::static_shape(like[i])},
                                              "loop_var_" + std::to_string(i)));
        const std::vector<tg::Tensor> out =
            recorder.trace([&] { return flat_result(fn(inputs), "the loop body"); });
        py::list types;
        for (const tg::Tensor& t : out)
          types.append(py::make_tuple(tg::to_string(t.dtype()), shape_to_python(tg::detail::static_shape(t))));
        return types;
      },
      py::arg("fn"), py::arg("like"),
      "Runs fn(placeholders like `like`) (returning tensors) in a throwaway trace and gives each result's "
      "(dtype name, dims): "
      "how AutoGraph learns the type of a loop variable first assigned in the loop body.");

  py::class_<tg::TensorArray> ta(m, "_TensorArray");
  ta.def(py::init(&make_tensor_array), py::arg("dtype"), py::arg("size") = py::none(),
         py::arg("dynamic_size") = false, py::arg("element_shape") = py::none());
  ta.def(
      "write",
      [](const tg::TensorArray& a, py::handle index, py::handle value) {
        const tg::Tensor v = to_tensor(value, a.dtype());
        return with_index(index, [&](const tg::Tensor& i) { return a.write(i, v); });
      },
      py::arg("index"), py::arg("value"));
  ta.def(
      "read", [](const tg::TensorArray& a, py::handle index) {
        return with_index(index, [&](const tg::Tensor& i) { return a.read(i); });
      },
      py::arg("index"));
  ta.def("stack", &tg::TensorArray::stack);
  ta.def_property_readonly("dtype_name", [](const tg::TensorArray& a) { return tg::to_string(a.dtype()); });
  ta.def("size", [](const tg::TensorArray& a) { return a.size_tensor(); });
  ta.def_property_readonly("dynamic_size", &tg::TensorArray::dynamic_size);
  ta.def_property_readonly("element_dims", [](const tg::TensorArray& a) { return shape_to_python(a.element_shape()); });
  ta.def_property_readonly("flow", &tg::TensorArray::flow);
  ta.def("with_flow", &tg::TensorArray::with_flow, py::arg("flow"));
}

}  // namespace tgpy
