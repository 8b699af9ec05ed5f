// A C++ tg::function made callable from Python, in a pybind11 extension module of your own:
//
//   #include <tracegraph/python.h>
//
//   PYBIND11_MODULE(my_ops, m) {
//     tg::python::import_tracegraph();   // tg.Tensor's Python type, registered by tracegraph._core
//     auto affine = tg::function([](const tg::Tensor& x, const tg::Tensor& w) { return tg::matmul(x, w) + 1.0f; },
//                                {.name = "affine", .arg_names = {"x", "w"}});
//     tg::python::def_function(m, "affine", affine);
//   }
//
// From Python, `my_ops.affine(x, w)` takes tg.Tensors (NumPy arrays and Python numbers are
// converted as tg.convert_to_tensor does) and the literals of the C++ parameters, returns
// tg.Tensors (tuples, lists and dicts of them for C++ tuples, vectors and maps), and traces as
// the C++ function does: `my_ops.affine.experimental_get_tracing_count()`. Inside a Python
// tg.function it is a nested function, inlined into the trace; under a tg.GradientTape it is
// differentiated like any op.
//
// Link the module with tracegraph::shared (not the static tracegraph::tracegraph): the Python
// package's own module links it too, so both share one library - one op registry, one tape and
// trace state. This header needs pybind11 and Python's headers: include it only in extension
// modules. See docs/python.md ("A C++ tg::function in Python") for building one with CMake.
#pragma once
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include "tracegraph/function.h"
#include "tracegraph/tensor.h"

namespace tg::python {

namespace py = pybind11;

/// Imports the tracegraph package, whose extension module registers tg.Tensor (and tg.Variable)
/// with pybind11: this module's tg::Tensor arguments and results then convert to and from that
/// Python type, and tg:: errors raised here become tg.errors / Python exceptions. Call it first
/// in PYBIND11_MODULE.
inline void import_tracegraph() { py::module_::import("tracegraph"); }

namespace detail {

template <class... T>
struct TypeList {};

// The parameter types of a non-generic callable's operator().
template <class M>
struct Parameters;
template <class C, class R, class... A>
struct Parameters<R (C::*)(A...) const> {
  using type = TypeList<std::decay_t<A>...>;
};
template <class C, class R, class... A>
struct Parameters<R (C::*)(A...)> {
  using type = TypeList<std::decay_t<A>...>;
};

inline std::string repr_of(py::handle h) {
  std::string s = py::repr(h).cast<std::string>();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

// One Python argument as the C++ parameter type T.
template <class T>
T from_python(py::handle value, const std::string& function, std::size_t index) {
  try {
    if constexpr (std::is_same_v<T, Tensor>) {
      if (py::isinstance<Tensor>(value)) return value.cast<Tensor>();
      return py::module_::import("tracegraph").attr("convert_to_tensor")(value).template cast<Tensor>();
    } else {
      return value.cast<T>();
    }
  } catch (py::cast_error&) {
    throw py::type_error(function + "(): argument " + std::to_string(index) + " must convert to the C++ type " +
                         py::type_id<T>() + ", got " + repr_of(value));
  }
}

template <class F, class... Args>
struct BoundFunction {
  PolymorphicFunction<F> fn;

  template <std::size_t... I>
  py::object call(const py::args& args, std::index_sequence<I...>) {
    const std::string& name = fn.name();
    if (args.size() != sizeof...(Args))
      throw py::type_error(name + "() takes " + std::to_string(sizeof...(Args)) + " argument" +
                           (sizeof...(Args) == 1 ? "" : "s") + " but " + std::to_string(args.size()) + " were given");
    std::tuple<Args...> values{from_python<Args>(args[I], name, I)...};
    using R = decltype(fn(std::get<I>(values)...));
    if constexpr (std::is_void_v<R>) {
      {
        py::gil_scoped_release release;
        fn(std::get<I>(values)...);
      }
      return py::none();
    } else {
      auto run = [&]() -> R {
        py::gil_scoped_release release;
        return fn(std::get<I>(values)...);
      };
      return py::cast(run());
    }
  }
};

template <class F, class... Args>
void define(py::module_& m, const char* name, const PolymorphicFunction<F>& fn, const char* doc, TypeList<Args...>) {
  using Bound = BoundFunction<F, Args...>;
  // One Python class per bound C++ function type, local to this module.
  if (!py::detail::get_type_info(typeid(Bound))) {
    py::class_<Bound> cls(m, (std::string("_") + name + "_function").c_str(), py::module_local());
    cls.def("__call__", [](Bound& b, py::args args) { return b.call(args, std::index_sequence_for<Args...>{}); });
    cls.def("experimental_get_tracing_count", [](const Bound& b) { return b.fn.tracing_count(); });
    cls.def("pretty_printed_concrete_signatures",
            [](const Bound& b) { return b.fn.pretty_printed_concrete_signatures(); });
    cls.def("retracing_report", [](const Bound& b) { return b.fn.retracing_report(); });
    cls.def_property_readonly("name", [](const Bound& b) { return b.fn.name(); });
    cls.def("__repr__", [](const Bound& b) { return "<C++ tg::function '" + b.fn.name() + "'>"; });
    if (doc && *doc) cls.doc() = doc;
  }
  m.attr(name) = py::cast(Bound{fn});
}

}  // namespace detail

/// Makes `fn` callable from Python as `m.<name>`, with the C++ parameter types Args... (deduced
/// from a non-generic lambda's or function object's operator() when not given:
/// `def_function<tg::Tensor, int>(m, "f", f)` for a generic lambda). The Python object shares
/// `fn`'s traces and counts them (experimental_get_tracing_count()); the GIL is released while
/// the C++ function traces and runs.
template <class... Args, class F>
void def_function(py::module_& m, const char* name, const PolymorphicFunction<F>& fn, const char* doc = "") {
  if constexpr (sizeof...(Args) == 0) {
    detail::define(m, name, fn, doc, typename detail::Parameters<decltype(&F::operator())>::type{});
  } else {
    detail::define(m, name, fn, doc, detail::TypeList<Args...>{});
  }
}

}  // namespace tg::python
