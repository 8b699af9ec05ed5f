// An extension module of its own that exposes C++ tg::functions to Python through
// tracegraph/python.h (tests/python/test_export.py imports and calls it).
#include <tracegraph/python.h>
#include <tracegraph/tracegraph.h>

#include <tuple>

PYBIND11_MODULE(tg_example_extension, m) {
  tg::python::import_tracegraph();

  auto affine = tg::function([](const tg::Tensor& x, const tg::Tensor& w) { return tg::matmul(x, w) + 1.0f; },
                             {.name = "affine", .arg_names = {"x", "w"}});
  tg::python::def_function(m, "affine", affine, "x @ w + 1, traced once per input type");

  // A C++ literal parameter (an int: one trace per value) and a tuple result.
  auto scaled = tg::function([](const tg::Tensor& x, int k) {
    return std::make_tuple(x * static_cast<float>(k), tg::reduce_sum(x));
  }, {.name = "scaled", .arg_names = {"x", "k"}});
  tg::python::def_function(m, "scaled", scaled);

  // A generic lambda: the parameter types are given.
  auto square = tg::function([](const auto& x) { return x * x; }, {.name = "square"});
  tg::python::def_function<tg::Tensor>(m, "square", square);
}
