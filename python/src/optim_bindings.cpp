// The optimizers, learning-rate schedules and gradient clipping of tg::optim. Keras's names and
// arguments (tg.keras.optimizers.SGD(learning_rate=..., momentum=...), apply_gradients(zip(...)),
// minimize) are in python/tracegraph/optimizers.py; these are the C++ objects it drives.
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"

namespace tgpy {

namespace {

using tg::optim::LearningRateSchedule;
using tg::optim::Optimizer;

// A schedule written in Python (a keras LearningRateSchedule subclass, or any callable of the
// step): called with the step counter (a tensor, symbolic inside a trace) and converted to a
// float64 scalar, as the C++ optimizers expect.
class CallableSchedule final : public LearningRateSchedule {
 public:
  explicit CallableSchedule(py::object fn) : fn_(std::move(fn)) {}
  ~CallableSchedule() override {
    if (!Py_IsInitialized()) {
      fn_.release();  // the interpreter is gone: nothing to free it into
      return;
    }
    py::gil_scoped_acquire gil;
    fn_ = py::object();
  }
  tg::Tensor operator()(const tg::Tensor& step) const override {
    py::gil_scoped_acquire gil;
    py::object rate = fn_(step);
    tg::Tensor t = to_tensor(rate);
    if (!tg::is_numeric(t.dtype()) || t.rank() != 0)
      type_error("a learning-rate schedule must return a number or a numeric scalar tensor, got " +
                 py::repr(rate).cast<std::string>());
    return t.dtype() == tg::float64 ? t : tg::cast(t, tg::float64);
  }

 private:
  py::object fn_;
};

// Gradients: None stands for "no gradient" (an undefined tensor, which the optimizers skip).
std::vector<tg::Variable> variable_list(const py::sequence& vars, const char* op) {
  std::vector<tg::Variable> out;
  out.reserve(vars.size());
  std::size_t i = 0;
  for (py::handle v : vars) {
    const tg::Variable* var = as_variable_ptr(v);
    if (var == nullptr)
      type_error(std::string("[") + op + "] variable " + std::to_string(i) +
                 " must be a tg.Variable, got " + py::repr(v).cast<std::string>() + " (of type " +
                 py::str(py::type::handle_of(v).attr("__name__")).cast<std::string>() + ")");
    out.push_back(*var);
    ++i;
  }
  return out;
}

// Gradients as GradientTape.gradient gives them: None, tensors (or what converts to one) and
// tg.IndexedSlices, kept sparse.
std::vector<tg::Gradient> gradient_values(const py::sequence& grads) {
  std::vector<tg::Gradient> out;
  out.reserve(grads.size());
  for (py::handle g : grads) {
    if (g.is_none()) out.emplace_back();
    else if (py::isinstance<tg::IndexedSlices>(g)) out.emplace_back(g.cast<tg::IndexedSlices>());
    else out.emplace_back(to_tensor(g));
  }
  return out;
}

py::list optional_gradients(const std::vector<tg::Gradient>& gs) {
  py::list out;
  for (const tg::Gradient& g : gs)
    out.append(!g.defined() ? py::object(py::none()) : g.is_sparse() ? py::cast(g.slices()) : py::cast(g.dense()));
  return out;
}

}  // namespace

void register_optim(py::module_& m) {
  py::class_<LearningRateSchedule, std::shared_ptr<LearningRateSchedule>>(
      m, "_LearningRateSchedule", "A C++ learning-rate schedule (tg::optim::LearningRateSchedule).")
      .def("__call__",
           [](const LearningRateSchedule& s, py::handle step) {
             tg::Tensor t = to_tensor(step);
             return without_gil([&] { return s(t); });
           },
           py::arg("step"), "The rate at `step` (a float64 scalar).");
  py::class_<tg::optim::ExponentialDecay, LearningRateSchedule, std::shared_ptr<tg::optim::ExponentialDecay>>(
      m, "_ExponentialDecay")
      .def(py::init<double, int64_t, double, bool>(), py::arg("initial_learning_rate"),
           py::arg("decay_steps"), py::arg("decay_rate"), py::arg("staircase"));
  py::class_<tg::optim::CosineDecay, LearningRateSchedule, std::shared_ptr<tg::optim::CosineDecay>>(
      m, "_CosineDecay")
      .def(py::init<double, int64_t, double, std::optional<double>, int64_t>(),
           py::arg("initial_learning_rate"), py::arg("decay_steps"), py::arg("alpha"),
           py::arg("warmup_target"), py::arg("warmup_steps"));

  py::class_<Optimizer, std::shared_ptr<Optimizer>> opt(m, "_Optimizer", "A C++ optimizer (tg::optim).");
  opt.def("_apply_gradients",
          [](Optimizer& o, const py::sequence& grads, const py::sequence& vars) {
            const std::string op = o.name() + ".apply_gradients";
            std::vector<tg::Gradient> g = gradient_values(grads);
            std::vector<tg::Variable> v = variable_list(vars, op.c_str());
            without_gil([&] { o.apply_gradients(g, v); });
          },
          py::arg("grads"), py::arg("variables"));
  opt.def_property_readonly("_iterations", &Optimizer::iterations);
  opt.def("_iterations_variable", [](const Optimizer& o) -> py::object {
    std::optional<tg::Variable> v = o.iterations_variable();
    return v ? py::cast(*v) : py::object(py::none());
  });
  opt.def_property("_learning_rate", &Optimizer::learning_rate, &Optimizer::set_learning_rate);
  opt.def("_learning_rate_variable", [](const Optimizer& o) { return o.variables().front(); });
  opt.def("_set_schedule", [](Optimizer& o, std::shared_ptr<LearningRateSchedule> s) {
    o.set_learning_rate_schedule(std::move(s));
  });
  opt.def("_set_python_schedule", [](Optimizer& o, py::object fn) {
    o.set_learning_rate_schedule(std::make_shared<CallableSchedule>(std::move(fn)));
  });
  opt.def_property_readonly("_has_schedule", [](const Optimizer& o) { return o.learning_rate_schedule() != nullptr; });
  opt.def("_variables", &Optimizer::variables);
  opt.def("_slot", &Optimizer::slot, py::arg("var"), py::arg("slot_name"));
  opt.def("_slot_names", &Optimizer::slot_names);
  opt.def_property_readonly("_cpp_name", &Optimizer::name);

  py::class_<tg::optim::SGD, Optimizer, std::shared_ptr<tg::optim::SGD>>(m, "_SGD")
      .def(py::init<double, double, bool>(), py::arg("learning_rate"), py::arg("momentum"), py::arg("nesterov"));
  py::class_<tg::optim::Adam, Optimizer, std::shared_ptr<tg::optim::Adam>>(m, "_Adam")
      .def(py::init<double, double, double, double>(), py::arg("learning_rate"), py::arg("beta_1"),
           py::arg("beta_2"), py::arg("epsilon"));
  py::class_<tg::optim::AdamW, tg::optim::Adam, std::shared_ptr<tg::optim::AdamW>>(m, "_AdamW")
      .def(py::init<double, double, double, double, double>(), py::arg("learning_rate"),
           py::arg("weight_decay"), py::arg("beta_1"), py::arg("beta_2"), py::arg("epsilon"));
  py::class_<tg::optim::RMSprop, Optimizer, std::shared_ptr<tg::optim::RMSprop>>(m, "_RMSprop")
      .def(py::init<double, double, double, double, bool>(), py::arg("learning_rate"), py::arg("rho"),
           py::arg("momentum"), py::arg("epsilon"), py::arg("centered"));

  // Gradient clipping over lists (None passes through), TF's names.
  m.def("_clip_list_by_value",
        [](const py::sequence& grads, double lo, double hi) {
          // TF clips an IndexedSlices' values and keeps it sparse.
          std::vector<tg::Gradient> g = gradient_values(grads);
          std::vector<tg::Tensor> parts;
          for (const tg::Gradient& x : g)
            parts.push_back(!x.defined() ? tg::Tensor() : x.is_sparse() ? x.slices().values() : x.dense());
          std::vector<tg::Tensor> clipped = without_gil([&] { return tg::optim::clip_by_value(parts, lo, hi); });
          std::vector<tg::Gradient> out;
          for (std::size_t i = 0; i < g.size(); ++i) {
            if (g[i].is_sparse())
              out.emplace_back(tg::IndexedSlices(g[i].slices().indices(), clipped[i], g[i].slices().dense_shape()));
            else
              out.emplace_back(clipped[i]);
          }
          return optional_gradients(out);
        },
        py::arg("t_list"), py::arg("clip_value_min"), py::arg("clip_value_max"));
  m.def("_global_norm",
        [](const py::sequence& t_list, py::handle name) {
          (void)name;
          std::vector<tg::Gradient> g = gradient_values(t_list);
          return without_gil([&] { return tg::optim::global_norm(g); });
        },
        py::arg("t_list"), py::arg("name") = py::none(),
        "sqrt(sum of every element squared) over the tensors (tf.linalg.global_norm); None skipped.");
  m.def("_clip_by_global_norm",
        [](const py::sequence& t_list, double clip_norm, py::handle use_norm, py::handle name) {
          (void)name;
          if (!use_norm.is_none())
            unimplemented("[clip_by_global_norm] use_norm is not supported; the global norm is computed");
          std::vector<tg::Gradient> g = gradient_values(t_list);
          auto [clipped, norm] = without_gil([&] { return tg::optim::clip_by_global_norm(g, clip_norm); });
          return py::make_tuple(optional_gradients(clipped), norm);
        },
        py::arg("t_list"), py::arg("clip_norm"), py::arg("use_norm") = py::none(), py::arg("name") = py::none(),
        "(the tensors scaled so that their global norm is at most clip_norm, the global norm before) "
        "(tf.clip_by_global_norm); None entries pass through.");
}

}  // namespace tgpy
