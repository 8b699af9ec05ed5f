// The ops with TensorFlow's Python names, parameters and defaults. Families of one C++ signature
// (unary, binary, reductions) are tables; the rest are bound one by one. Every op converts its
// arguments with the GIL held, then runs without it. python/tracegraph/ lays the functions out
// in TF's modules (tg.math, tg.nn, tg.random, tg.linalg).
#include <algorithm>
#include <cctype>
#include <limits>
#include <optional>
#include <string>
#include <vector>


#include "bindings.h"
#include "ops/known_values.h"
#include "ops/record_mode.h"
#include "trace/recorder.h"

namespace tgpy {

namespace {

using tg::Tensor;
using Unary = Tensor (*)(const Tensor&);
using Binary = Tensor (*)(const Tensor&, const Tensor&);
using Reduction = Tensor (*)(const Tensor&, std::vector<int>, bool);

struct UnaryRow {
  const char* name;
  Unary fn;
  const char* arg;  // TF's parameter name
  const char* doc;
};
struct BinaryRow {
  const char* name;
  Binary fn;
  const char* doc;
};
struct ReductionRow {
  const char* name;
  Reduction fn;
  const char* doc;
};

Tensor reciprocal(const Tensor& x) { return tg::div(tg::ones_like(x), x); }
Tensor is_nan(const Tensor& x) { return tg::not_equal(x, x); }
Tensor is_inf(const Tensor& x) {
  return tg::equal(tg::abs(x), tg::detail::scalar_like(x, std::numeric_limits<double>::infinity()));
}
Tensor is_finite(const Tensor& x) { return tg::logical_not(tg::logical_or(is_nan(x), is_inf(x))); }
Tensor relu6(const Tensor& x) { return tg::minimum(tg::relu(x), tg::detail::scalar_like(x, 6.0)); }
Tensor log_sigmoid(const Tensor& x) { return tg::neg(tg::softplus(tg::neg(x))); }

const UnaryRow kUnary[] = {
    {"negative", &tg::neg, "x", "-x, elementwise (tf.math.negative)."},
    {"abs", &tg::abs, "x", "|x|, elementwise."},
    {"sign", &tg::sign, "x", "-1, 0 or 1 by the sign of x (NaN stays NaN)."},
    {"square", &tg::square, "x", "x * x."},
    {"exp", &tg::exp, "x", "e^x (floating dtypes)."},
    {"log", &tg::log, "x", "Natural logarithm (floating dtypes)."},
    {"sqrt", &tg::sqrt, "x", "Square root (floating dtypes)."},
    {"rsqrt", &tg::rsqrt, "x", "1 / sqrt(x) (floating dtypes)."},
    {"tanh", &tg::tanh, "x", "Hyperbolic tangent."},
    {"sigmoid", &tg::sigmoid, "x", "1 / (1 + e^-x)."},
    {"sin", &tg::sin, "x", "Sine."},
    {"cos", &tg::cos, "x", "Cosine."},
    {"logical_not", &tg::logical_not, "x", "Not, on bool tensors."},
    {"log1p", &tg::log1p, "x", "log(1 + x), accurate near 0."},
    {"expm1", &tg::expm1, "x", "e^x - 1, accurate near 0."},
    {"erf", &tg::erf, "x", "The error function."},
    {"softplus", &tg::softplus, "features", "log(1 + e^x) without overflow."},
    {"floor", &tg::floor, "x", "Rounds down (floating dtypes)."},
    {"ceil", &tg::ceil, "x", "Rounds up (floating dtypes)."},
    {"round", &tg::round, "x", "Rounds half to even, as TF."},
    {"relu", &tg::relu, "features", "max(x, 0)."},
    {"relu6", &relu6, "features", "min(max(x, 0), 6)."},
    {"elu", &tg::elu, "features", "x for x >= 0, e^x - 1 below."},
    {"log_sigmoid", &log_sigmoid, "x", "log(sigmoid(x)), stable: -softplus(-x)."},
    {"identity", &tg::identity, "input", "The same value."},
    {"stop_gradient", &tg::stop_gradient, "input", "The same value, with no gradient through it."},
    {"reciprocal", &reciprocal, "x", "1 / x."},
    {"is_nan", &is_nan, "x", "Where x is NaN."},
    {"is_inf", &is_inf, "x", "Where x is +-inf."},
    {"is_finite", &is_finite, "x", "Where x is neither NaN nor infinite."},
};

Tensor logical_xor(const Tensor& a, const Tensor& b) {
  return tg::logical_and(tg::logical_or(a, b), tg::logical_not(tg::logical_and(a, b)));
}
Tensor squared_difference(const Tensor& a, const Tensor& b) { return tg::square(tg::sub(a, b)); }
Tensor realdiv(const Tensor& a, const Tensor& b) {
  if (!tg::is_floating(a.dtype()))
    throw tg::TypeError("[realdiv] expected floating tensors, got " + tg::to_string(a.dtype()) +
                        "; use tg.math.truediv or tg.math.floordiv for integers");
  return tg::div(a, b);
}

const BinaryRow kBinary[] = {
    {"add", &tg::add, "x + y (strings: concatenation)."},
    {"subtract", &tg::sub, "x - y."},
    {"multiply", &tg::mul, "x * y."},
    {"truediv", &truediv, "x / y; integers are converted to floats first (TF's /)."},
    {"divide", &truediv, "x / y, as tg.math.truediv."},
    {"realdiv", &realdiv, "x / y for floating tensors."},
    {"floordiv", &tg::floordiv, "floor(x / y) (TF's //)."},
    {"floormod", &tg::mod, "The remainder of floor division: the sign of y (TF's %)."},
    {"mod", &tg::mod, "As tg.math.floormod."},
    {"pow", &tg::pow, "x ** y."},
    {"maximum", &tg::maximum, "The larger of x and y, elementwise."},
    {"minimum", &tg::minimum, "The smaller of x and y, elementwise."},
    {"squared_difference", &squared_difference, "(x - y) ** 2."},
    {"equal", &tg::equal, "x == y, elementwise."},
    {"not_equal", &tg::not_equal, "x != y, elementwise."},
    {"less", &tg::less, "x < y, elementwise."},
    {"less_equal", &tg::less_equal, "x <= y, elementwise."},
    {"greater", &tg::greater, "x > y, elementwise."},
    {"greater_equal", &tg::greater_equal, "x >= y, elementwise."},
    {"logical_and", &tg::logical_and, "x and y, on bool tensors."},
    {"logical_or", &tg::logical_or, "x or y, on bool tensors."},
    {"logical_xor", &logical_xor, "x xor y, on bool tensors."},
};

const ReductionRow kReductions[] = {
    {"reduce_sum", &tg::reduce_sum, "The sum over `axis` (every axis when None)."},
    {"reduce_mean", &tg::reduce_mean, "The mean over `axis` (every axis when None)."},
    {"reduce_max", &tg::reduce_max, "The largest element over `axis`."},
    {"reduce_min", &tg::reduce_min, "The smallest element over `axis`."},
    {"reduce_prod", &tg::reduce_prod, "The product over `axis`."},
    {"reduce_any", &tg::reduce_any, "Or over `axis` (bool)."},
    {"reduce_all", &tg::reduce_all, "And over `axis` (bool)."},
    {"reduce_logsumexp", &tg::reduce_logsumexp, "log(sum(exp(x))) over `axis`, without overflow."},
};

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

tg::Padding to_padding(py::handle padding, const char* op) {
  if (!PyUnicode_Check(padding.ptr()))
    unimplemented(std::string("[") + op + "] padding must be \"SAME\" or \"VALID\"; explicit paddings are not supported");
  const std::string p = upper(padding.cast<std::string>());
  if (p == "SAME") return tg::Padding::Same;
  if (p == "VALID") return tg::Padding::Valid;
  value_error(std::string("[") + op + "] padding must be \"SAME\" or \"VALID\", got \"" + padding.cast<std::string>() + "\"");
}

void check_nhwc(py::handle data_format, const char* op) {
  if (!data_format.is_none() && data_format.cast<std::string>() != "NHWC")
    unimplemented(std::string("[") + op + "] only data_format=\"NHWC\" is supported, got \"" +
                  data_format.cast<std::string>() + "\"; transpose the input to NHWC");
}

tg::SortDirection to_direction(const std::string& direction, const char* op) {
  if (direction == "ASCENDING") return tg::SortDirection::Ascending;
  if (direction == "DESCENDING") return tg::SortDirection::Descending;
  value_error(std::string("[") + op + "] direction must be \"ASCENDING\" or \"DESCENDING\", got \"" + direction + "\"");
}

std::optional<uint64_t> to_seed(py::handle seed, const char* op) {
  if (seed.is_none()) return std::nullopt;
  return static_cast<uint64_t>(to_int(seed, "seed", op));
}

// A shape held by a tensor for the ops that take one as a tensor only.
Tensor shape_tensor(const ShapeArg& shape) {
  if (const auto* t = std::get_if<Tensor>(&shape)) return *t;
  const auto& dims = std::get<tg::TensorShape>(shape).dims();
  return tg::constant(std::vector<int64_t>(dims), tg::TensorShape{static_cast<int64_t>(dims.size())}, tg::int64);
}

Tensor cast_if(const Tensor& x, std::optional<tg::DType> dtype) {
  return dtype && *dtype != x.dtype() ? tg::cast(x, *dtype) : x;
}

// Inside a Python trace tf.constant is a node of the graph (a symbolic tensor), as in TF's graph
// mode: `if tf.constant(True):` converts to a cond there, and `.numpy()` raises.
Tensor in_graph(Tensor t) {
  if (!tg::detail::records_every_op() || t.impl()->symbolic) return t;
  auto* recorder = dynamic_cast<tg::detail::GraphRecorder*>(tg::detail::current_recorder());
  return recorder ? recorder->constant(t) : t;
}

Tensor eager_constant(py::handle value, py::handle dtype, py::handle shape) {
  const std::optional<tg::DType> dt = to_optional_dtype(dtype);
  Tensor t = to_tensor(value, dt, DTypeRule::kRequire);
  if (shape.is_none()) return t;
  const tg::TensorShape target = to_static_shape(shape, "constant");
  if (!target.is_fully_defined())
    value_error("[constant] shape must be fully defined, got " + target.to_string());
  if (t.shape() == target) return t;
  if (t.num_elements() == target.num_elements()) return tg::reshape(t, target.dims());
  if (t.num_elements() == 1) return tg::fill(target, tg::reshape(t, std::vector<int64_t>{}));
  type_error("[constant] a value of " + std::to_string(t.num_elements()) + " elements (shape " + t.shape().to_string() +
             ") cannot fill the shape " + target.to_string() + " (" + std::to_string(target.num_elements()) +
             " elements); pass a scalar, or as many values as the shape has elements");
}

Tensor constant(py::handle value, py::handle dtype, py::handle shape, py::handle /*name*/) {
  Tensor value_tensor;
  {
    tg::detail::RecordEveryOpScope eager(false);  // one Const node, not a reshape or fill of one
    value_tensor = eager_constant(value, dtype, shape);
  }
  return in_graph(std::move(value_tensor));
}

// tf.range: a Python int is int32, a float float32; the widest of the three is the result's.
Tensor range(py::handle start, py::handle limit, py::handle delta, py::handle dtype, py::handle /*name*/) {
  if (limit.is_none()) std::swap(start, limit), start = py::int_(0);
  std::optional<tg::DType> dt = to_optional_dtype(dtype);
  Tensor s = to_tensor(start, dt), l = to_tensor(limit, dt), d = to_tensor(delta, dt);
  if (!dt) {
    static const tg::DType order[] = {tg::int32, tg::int64, tg::float32, tg::float64};
    int widest = 0;
    for (const Tensor* t : {&s, &l, &d}) {
      const auto* it = std::find(std::begin(order), std::end(order), t->dtype());
      if (it == std::end(order)) type_error("[range] expected numbers, got a " + tg::to_string(t->dtype()) + " tensor");
      widest = std::max(widest, static_cast<int>(it - std::begin(order)));
    }
    dt = order[widest];
  }
  s = cast_if(s, dt), l = cast_if(l, dt), d = cast_if(d, dt);
  return without_gil([&] { return tg::range(s, l, d); });
}

void register_tables(py::module_& m) {
  for (const UnaryRow& row : kUnary) {
    const Unary fn = row.fn;
    m.def(row.name,
          [fn](py::handle x, py::handle) {
            const Tensor t = to_tensor(x);
            return without_gil([&] { return fn(t); });
          },
          py::arg(row.arg), py::arg("name") = py::none(), row.doc);
  }
  for (const BinaryRow& row : kBinary) {
    const Binary fn = row.fn;
    m.def(row.name,
          [fn](py::handle x, py::handle y, py::handle) {
            // Named, not a structured binding: clang 14 cannot capture one in the lambda below.
            const auto ab = to_tensor_pair(x, y);
            const Tensor a = ab.first, b = ab.second;
            return without_gil([&, fn] { return fn(a, b); });
          },
          py::arg("x"), py::arg("y"), py::arg("name") = py::none(), row.doc);
  }
  for (const ReductionRow& row : kReductions) {
    const Reduction fn = row.fn;
    const char* op = row.name;
    m.def(row.name,
          [fn, op](py::handle input, py::handle axis, bool keepdims, py::handle) {
            const Tensor x = to_tensor(input);
            const std::optional<std::vector<int>> axes = to_axes(axis, op);
            if (axes && axes->empty()) return x;  // TF: reducing over no axis changes nothing
            return without_gil([&] { return fn(x, axes.value_or(std::vector<int>{}), keepdims); });
          },
          py::arg("input_tensor"), py::arg("axis") = py::none(), py::arg("keepdims") = false,
          py::arg("name") = py::none(), row.doc);
  }
}

void register_creation(py::module_& m) {
  m.def("constant", &constant, py::arg("value"), py::arg("dtype") = py::none(), py::arg("shape") = py::none(),
        py::arg("name") = "Const",
        "A tensor from a Python value, a nested list or a NumPy array (tf.constant). A NumPy array "
        "is shared, not copied, when its layout allows; writing to it afterwards changes the tensor.");
  m.def("convert_to_tensor",
        [](py::handle value, py::handle dtype, py::handle dtype_hint, py::handle) {
          if (!dtype.is_none()) return to_tensor(value, to_dtype(dtype), DTypeRule::kRequire);
          if (dtype_hint.is_none()) return to_tensor(value);
          try {
            return to_tensor(value, to_dtype(dtype_hint));
          } catch (const py::builtin_exception&) {
            return to_tensor(value);  // TF: a hint that does not fit has no effect
          } catch (const tg::Error&) {
            return to_tensor(value);
          }
        },
        py::arg("value"), py::arg("dtype") = py::none(), py::arg("dtype_hint") = py::none(),
        py::arg("name") = py::none());
  for (const char* name : {"zeros", "ones"}) {
    const bool ones = name[0] == 'o';
    m.def(name,
          [ones](py::handle shape, py::handle dtype, py::handle) {
            const ShapeArg s = to_shape_arg(shape, ones ? "ones" : "zeros");
            const tg::DType dt = dtype.is_none() ? tg::float32 : to_dtype(dtype);
            return without_gil([&] {
              if (const auto* t = std::get_if<Tensor>(&s)) return ones ? tg::ones(*t, dt) : tg::zeros(*t, dt);
              const auto& static_shape = std::get<tg::TensorShape>(s);
              return ones ? tg::ones(static_shape, dt) : tg::zeros(static_shape, dt);
            });
          },
          py::arg("shape"), py::arg("dtype") = py::none(), py::arg("name") = py::none());
  }
  for (const char* name : {"zeros_like", "ones_like"}) {
    const bool ones = name[0] == 'o';
    m.def(name,
          [ones](py::handle input, py::handle dtype, py::handle) {
            const Tensor x = to_tensor(input);
            const std::optional<tg::DType> dt = to_optional_dtype(dtype);
            return without_gil([&] {
              const Tensor like = cast_if(x, dt);
              return ones ? tg::ones_like(like) : tg::zeros_like(like);
            });
          },
          py::arg("input"), py::arg("dtype") = py::none(), py::arg("name") = py::none());
  }
  m.def("fill",
        [](py::handle dims, py::handle value, py::handle) {
          const ShapeArg s = to_shape_arg(dims, "fill");
          const Tensor v = to_tensor(value);
          return without_gil([&] {
            if (const auto* t = std::get_if<Tensor>(&s)) return tg::fill(*t, v);
            return tg::fill(std::get<tg::TensorShape>(s), v);
          });
        },
        py::arg("dims"), py::arg("value"), py::arg("name") = py::none());
  m.def("range", &range, py::arg("start"), py::arg("limit") = py::none(), py::arg("delta") = 1,
        py::arg("dtype") = py::none(), py::arg("name") = "range",
        "[start, start + delta, ...) below limit; range(n) counts from 0 (tf.range).");
  m.def("linspace",
        [](py::handle start, py::handle stop, py::handle num, py::handle, py::handle axis) {
          if (to_int(axis, "axis", "linspace") != 0) unimplemented("[linspace] only axis=0 (scalar start and stop) is supported");
          Tensor a = to_tensor(start), b = to_tensor(stop, a.dtype());
          if (tg::is_integer(a.dtype())) a = tg::cast(a, tg::float32), b = tg::cast(b, tg::float32);
          const int64_t n = to_int(num, "num", "linspace");
          return without_gil([&] { return tg::linspace(a, b, n); });
        },
        py::arg("start"), py::arg("stop"), py::arg("num"), py::arg("name") = py::none(), py::arg("axis") = 0);
  m.def("one_hot",
        [](py::handle indices, py::handle depth, py::handle on_value, py::handle off_value, py::handle axis,
           py::handle dtype, py::handle) {
          const Tensor idx = to_tensor(indices);
          std::optional<tg::DType> dt = to_optional_dtype(dtype);
          if (!dt) {
            // TF: the dtype of on_value / off_value when given, else float32.
            py::handle given = !on_value.is_none() ? on_value : off_value;
            dt = given.is_none() ? tg::float32 : to_tensor(given).dtype();
          }
          const double on = on_value.is_none() ? 1.0 : to_double(on_value, "on_value", "one_hot");
          const double off = off_value.is_none() ? 0.0 : to_double(off_value, "off_value", "one_hot");
          const int64_t d = to_int(depth, "depth", "one_hot");
          const int ax = axis.is_none() ? -1 : to_axis(axis, "one_hot");
          return without_gil([&] { return tg::one_hot(idx, d, on, off, ax, *dt); });
        },
        py::arg("indices"), py::arg("depth"), py::arg("on_value") = py::none(), py::arg("off_value") = py::none(),
        py::arg("axis") = py::none(), py::arg("dtype") = py::none(), py::arg("name") = py::none());
  m.def("cast",
        [](py::handle x, py::handle dtype, py::handle) {
          const Tensor t = to_tensor(x);
          const tg::DType dt = to_dtype(dtype);
          return without_gil([&] { return tg::cast(t, dt); });
        },
        py::arg("x"), py::arg("dtype"), py::arg("name") = py::none());
}

void register_shape_ops(py::module_& m) {
  m.def("reshape",
        [](py::handle tensor, py::handle shape, py::handle) {
          const Tensor x = to_tensor(tensor);
          const ShapeArg s = to_shape_arg(shape, "reshape", /*allow_unknown=*/true);
          return without_gil([&] {
            if (const auto* t = std::get_if<Tensor>(&s)) return tg::reshape(x, *t);
            return tg::reshape(x, std::get<tg::TensorShape>(s).none_aware().dims());
          });
        },
        py::arg("tensor"), py::arg("shape"), py::arg("name") = py::none());
  m.def("transpose",
        [](py::handle a, py::handle perm, bool conjugate, py::handle) {
          (void)conjugate;  // real dtypes only: the conjugate is the value
          const Tensor x = to_tensor(a);
          std::vector<int> p;
          if (!perm.is_none()) p = *to_axes(perm, "transpose");
          return without_gil([&] { return tg::transpose(x, p); });
        },
        py::arg("a"), py::arg("perm") = py::none(), py::arg("conjugate") = false, py::arg("name") = "transpose");
  m.def("expand_dims",
        [](py::handle input, py::handle axis, py::handle) {
          const Tensor x = to_tensor(input);
          const int a = to_axis(axis, "expand_dims");
          return without_gil([&] { return tg::expand_dims(x, a); });
        },
        py::arg("input"), py::arg("axis"), py::arg("name") = py::none());
  m.def("squeeze",
        [](py::handle input, py::handle axis, py::handle) {
          const Tensor x = to_tensor(input);
          const std::vector<int> axes = to_axes(axis, "squeeze").value_or(std::vector<int>{});
          return without_gil([&] { return tg::squeeze(x, axes); });
        },
        py::arg("input"), py::arg("axis") = py::none(), py::arg("name") = py::none());
  m.def("concat",
        [](py::handle values, py::handle axis, py::handle) {
          const std::vector<Tensor> xs = to_tensor_list(values, "concat");
          const int a = to_axis(axis, "concat");
          return without_gil([&] { return tg::concat(xs, a); });
        },
        py::arg("values"), py::arg("axis"), py::arg("name") = "concat");
  m.def("stack",
        [](py::handle values, py::handle axis, py::handle) {
          const std::vector<Tensor> xs = to_tensor_list(values, "stack");
          const int a = to_axis(axis, "stack");
          return without_gil([&] { return tg::stack(xs, a); });
        },
        py::arg("values"), py::arg("axis") = 0, py::arg("name") = "stack");
  m.def("unstack",
        [](py::handle value, py::handle num, py::handle axis, py::handle) {
          const Tensor x = to_tensor(value);
          const int a = to_axis(axis, "unstack");
          std::vector<Tensor> out = without_gil([&] { return tg::unstack(x, a); });
          if (!num.is_none() && static_cast<int64_t>(out.size()) != to_int(num, "num", "unstack"))
            value_error("[unstack] num is " + py::str(num).cast<std::string>() + " but the axis has " +
                        std::to_string(out.size()) + " elements");
          return out;
        },
        py::arg("value"), py::arg("num") = py::none(), py::arg("axis") = 0, py::arg("name") = "unstack");
  m.def("split",
        [](py::handle value, py::handle num_or_size_splits, py::handle axis, py::handle, py::handle) {
          const Tensor x = to_tensor(value);
          const int a = to_axis(axis, "split");
          if (PyLong_Check(num_or_size_splits.ptr())) {
            const int64_t n = to_int(num_or_size_splits, "num_or_size_splits", "split");
            return without_gil([&] { return tg::split(x, n, a); });
          }
          const std::vector<int64_t> sizes = to_int_list(num_or_size_splits, "num_or_size_splits", "split");
          return without_gil([&] { return tg::split(x, sizes, a); });
        },
        py::arg("value"), py::arg("num_or_size_splits"), py::arg("axis") = 0, py::arg("num") = py::none(),
        py::arg("name") = "split");
  m.def("tile",
        [](py::handle input, py::handle multiples, py::handle) {
          const Tensor x = to_tensor(input);
          const std::vector<int64_t> mult = to_int_list(multiples, "multiples", "tile");
          return without_gil([&] { return tg::tile(x, mult); });
        },
        py::arg("input"), py::arg("multiples"), py::arg("name") = py::none());
  m.def("pad",
        [](py::handle tensor, py::handle paddings, const std::string& mode, py::handle constant_values, py::handle) {
          const Tensor x = to_tensor(tensor);
          py::object rows = py::reinterpret_borrow<py::object>(paddings);
          if (as_tensor_ptr(paddings) != nullptr || py::isinstance<py::array>(paddings))
            rows = numpy_copy(to_tensor(paddings)).attr("tolist")();
          if (!PyList_Check(rows.ptr()) && !PyTuple_Check(rows.ptr()))
            type_error("[pad] paddings must be a list of [before, after] pairs, one per dimension");
          std::vector<std::pair<int64_t, int64_t>> pads;
          for (py::handle row : py::reinterpret_borrow<py::sequence>(rows)) {
            const std::vector<int64_t> pair = to_int_list(row, "a paddings row", "pad");
            if (pair.size() != 2)
              value_error("[pad] each paddings row must be [before, after], got " + py::repr(row).cast<std::string>());
            pads.emplace_back(pair[0], pair[1]);
          }
          const std::string m = upper(mode);
          tg::PadMode pad_mode = tg::PadMode::Constant;
          if (m == "REFLECT") pad_mode = tg::PadMode::Reflect;
          else if (m == "SYMMETRIC") pad_mode = tg::PadMode::Symmetric;
          else if (m != "CONSTANT")
            value_error("[pad] mode must be \"CONSTANT\", \"REFLECT\" or \"SYMMETRIC\", got \"" + mode + "\"");
          const double value = x.dtype() == tg::string_ ? 0.0 : to_double(constant_values, "constant_values", "pad");
          return without_gil([&] { return tg::pad(x, pads, pad_mode, value); });
        },
        py::arg("tensor"), py::arg("paddings"), py::arg("mode") = "CONSTANT", py::arg("constant_values") = 0,
        py::arg("name") = py::none());
  m.def("reverse",
        [](py::handle tensor, py::handle axis, py::handle) {
          const Tensor x = to_tensor(tensor);
          const std::vector<int64_t> axes = to_int_list(axis, "axis", "reverse");
          return without_gil([&] { return tg::reverse(x, axes); });
        },
        py::arg("tensor"), py::arg("axis"), py::arg("name") = py::none());
  m.def("slice",
        [](py::handle input, py::handle begin, py::handle size, py::handle) {
          const Tensor x = to_tensor(input);
          const std::vector<int64_t> b = to_int_list(begin, "begin", "slice");
          const std::vector<int64_t> n = to_int_list(size, "size", "slice");
          return without_gil([&] { return tg::slice(x, b, n); });
        },
        py::arg("input_"), py::arg("begin"), py::arg("size"), py::arg("name") = py::none());
  m.def("gather",
        [](py::handle params, py::handle indices, py::handle, py::handle axis, py::handle batch_dims, py::handle) {
          if (to_int(batch_dims, "batch_dims", "gather") != 0) unimplemented("[gather] only batch_dims=0 is supported");
          const Tensor p = to_tensor(params), i = to_tensor(indices);
          const int a = axis.is_none() ? 0 : to_axis(axis, "gather");
          return without_gil([&] { return tg::gather(p, i, a); });
        },
        py::arg("params"), py::arg("indices"), py::arg("validate_indices") = py::none(), py::arg("axis") = py::none(),
        py::arg("batch_dims") = 0, py::arg("name") = py::none());
  m.def("gather_nd",
        [](py::handle params, py::handle indices, py::handle batch_dims, py::handle) {
          if (to_int(batch_dims, "batch_dims", "gather_nd") != 0) unimplemented("[gather_nd] only batch_dims=0 is supported");
          const Tensor p = to_tensor(params), i = to_tensor(indices);
          return without_gil([&] { return tg::gather_nd(p, i); });
        },
        py::arg("params"), py::arg("indices"), py::arg("batch_dims") = 0, py::arg("name") = py::none());
  m.def("scatter_nd",
        [](py::handle indices, py::handle updates, py::handle shape, py::handle) {
          const Tensor i = to_tensor(indices), u = to_tensor(updates);
          const ShapeArg s = to_shape_arg(shape, "scatter_nd");
          return without_gil([&] {
            if (const auto* t = std::get_if<Tensor>(&s)) return tg::scatter_nd(i, u, *t);
            return tg::scatter_nd(i, u, std::get<tg::TensorShape>(s));
          });
        },
        py::arg("indices"), py::arg("updates"), py::arg("shape"), py::arg("name") = py::none());
  m.def("tensor_scatter_nd_add",
        [](py::handle tensor, py::handle indices, py::handle updates, py::handle) {
          const Tensor t = to_tensor(tensor), i = to_tensor(indices), u = to_tensor(updates, t.dtype());
          return without_gil([&] { return tg::tensor_scatter_nd_add(t, i, u); });
        },
        py::arg("tensor"), py::arg("indices"), py::arg("updates"), py::arg("name") = py::none());
  m.def("where",
        [](py::handle condition, py::handle x, py::handle y, py::handle) {
          const Tensor c = to_tensor(condition);
          if (x.is_none() && y.is_none()) return without_gil([&] { return tg::where(c); });
          if (x.is_none() || y.is_none()) value_error("[where] x and y must both be given, or neither");
          const auto ab = to_tensor_pair(x, y);
          const Tensor a = ab.first, b = ab.second;
          return without_gil([&, c] { return tg::where(c, a, b); });
        },
        py::arg("condition"), py::arg("x") = py::none(), py::arg("y") = py::none(), py::arg("name") = py::none());
  m.def("boolean_mask",
        [](py::handle tensor, py::handle mask, py::handle axis, py::handle) {
          const Tensor t = to_tensor(tensor), k = to_tensor(mask);
          const int a = axis.is_none() ? 0 : to_axis(axis, "boolean_mask");
          return without_gil([&] { return tg::boolean_mask(t, k, a); });
        },
        py::arg("tensor"), py::arg("mask"), py::arg("axis") = py::none(), py::arg("name") = "boolean_mask");
  m.def("broadcast_to",
        [](py::handle input, py::handle shape, py::handle) {
          const Tensor x = to_tensor(input);
          const Tensor s = shape_tensor(to_shape_arg(shape, "broadcast_to"));
          return without_gil([&] { return tg::broadcast_to(x, s); });
        },
        py::arg("input"), py::arg("shape"), py::arg("name") = py::none());
  m.def("shape",
        [](py::handle input, py::handle out_type, py::handle) {
          const Tensor x = to_tensor(input);
          const tg::DType dt = out_type.is_none() ? tg::int32 : to_dtype(out_type);
          return without_gil([&] { return cast_if(tg::shape(x), dt); });
        },
        py::arg("input"), py::arg("out_type") = py::none(), py::arg("name") = py::none());
  m.def("size",
        [](py::handle input, py::handle out_type, py::handle) {
          const Tensor x = to_tensor(input);
          const tg::DType dt = out_type.is_none() ? tg::int32 : to_dtype(out_type);
          return without_gil([&] { return cast_if(tg::size(x), dt); });
        },
        py::arg("input"), py::arg("out_type") = py::none(), py::arg("name") = py::none());
  m.def("rank",
        [](py::handle input, py::handle) {
          const Tensor x = to_tensor(input);
          return tg::constant(static_cast<int32_t>(x.rank()));
        },
        py::arg("input"), py::arg("name") = py::none());
}

void register_math_ops(py::module_& m) {
  m.def("matmul",
        [](py::handle a, py::handle b, bool transpose_a, bool transpose_b, bool adjoint_a, bool adjoint_b,
           py::handle, py::handle, py::handle output_type, py::handle) {
          const auto xy = to_tensor_pair(a, b);
          const Tensor x = xy.first, y = xy.second;
          const std::optional<tg::DType> out = to_optional_dtype(output_type);
          const bool ta = transpose_a || adjoint_a, tb = transpose_b || adjoint_b;  // real: adjoint = transpose
          return without_gil([&, x, y] { return cast_if(tg::matmul(x, y, ta, tb), out); });
        },
        py::arg("a"), py::arg("b"), py::arg("transpose_a") = false, py::arg("transpose_b") = false,
        py::arg("adjoint_a") = false, py::arg("adjoint_b") = false, py::arg("a_is_sparse") = false,
        py::arg("b_is_sparse") = false, py::arg("output_type") = py::none(), py::arg("name") = py::none());
  for (const char* name : {"argmax", "argmin"}) {
    const bool max = name[4] == 'a';
    m.def(name,
          [max](py::handle input, py::handle axis, py::handle output_type, py::handle) {
            const Tensor x = to_tensor(input);
            const int a = axis.is_none() ? 0 : to_axis(axis, max ? "argmax" : "argmin");
            const tg::DType dt = output_type.is_none() ? tg::int64 : to_dtype(output_type);
            return without_gil([&] { return cast_if(max ? tg::argmax(x, a) : tg::argmin(x, a), dt); });
          },
          py::arg("input"), py::arg("axis") = py::none(), py::arg("output_type") = py::none(),
          py::arg("name") = py::none());
  }
  m.def("sort",
        [](py::handle values, py::handle axis, const std::string& direction, py::handle) {
          const Tensor x = to_tensor(values);
          const int64_t a = to_int(axis, "axis", "sort");
          const tg::SortDirection d = to_direction(direction, "sort");
          return without_gil([&] { return tg::sort(x, a, d); });
        },
        py::arg("values"), py::arg("axis") = -1, py::arg("direction") = "ASCENDING", py::arg("name") = py::none());
  m.def("argsort",
        [](py::handle values, py::handle axis, const std::string& direction, bool stable, py::handle) {
          const Tensor x = to_tensor(values);
          const int64_t a = to_int(axis, "axis", "argsort");
          const tg::SortDirection d = to_direction(direction, "argsort");
          return without_gil([&] { return tg::argsort(x, a, d, stable); });
        },
        py::arg("values"), py::arg("axis") = -1, py::arg("direction") = "ASCENDING", py::arg("stable") = false,
        py::arg("name") = py::none());
  m.def("_top_k",
        [](py::handle input, py::handle k, bool sorted, py::handle index_type, py::handle) {
          const Tensor x = to_tensor(input);
          const int64_t n = to_int(k, "k", "top_k");
          const tg::DType dt = index_type.is_none() ? tg::int32 : to_dtype(index_type);
          tg::TopK r = without_gil([&] { return tg::top_k(x, n, sorted); });
          return std::make_pair(r.values, cast_if(r.indices, dt));
        },
        py::arg("input"), py::arg("k") = 1, py::arg("sorted") = true, py::arg("index_type") = py::none(),
        py::arg("name") = py::none());
  m.def("einsum",
        [](const std::string& equation, py::args inputs, py::kwargs) {
          if (inputs.size() == 1) {
            const Tensor a = to_tensor(inputs[0]);
            return without_gil([&] { return tg::einsum(equation, a); });
          }
          if (inputs.size() != 2)
            unimplemented("[einsum] one or two operands are supported, got " + std::to_string(inputs.size()));
          const auto ab = to_tensor_pair(inputs[0], inputs[1]);
          const Tensor a = ab.first, b = ab.second;
          return without_gil([&, a, b] { return tg::einsum(equation, a, b); });
        },
        py::arg("equation"));
  m.def("clip_by_value",
        [](py::handle t, py::handle lo, py::handle hi, py::handle) {
          const Tensor x = to_tensor(t), a = to_tensor(lo, x.dtype()), b = to_tensor(hi, x.dtype());
          return without_gil([&] { return tg::clip_by_value(x, a, b); });
        },
        py::arg("t"), py::arg("clip_value_min"), py::arg("clip_value_max"), py::arg("name") = py::none());
  m.def("sequence_mask",
        [](py::handle lengths, py::handle maxlen, py::handle dtype, py::handle) {
          const Tensor l = to_tensor(lengths);
          const Tensor n = maxlen.is_none() ? Tensor() : to_tensor(maxlen, l.dtype());
          const tg::DType dt = dtype.is_none() ? tg::bool_ : to_dtype(dtype);
          return without_gil([&] { return tg::sequence_mask(l, n, dt); });
        },
        py::arg("lengths"), py::arg("maxlen") = py::none(), py::arg("dtype") = py::none(), py::arg("name") = py::none());
  for (const char* name : {"cumsum", "cumprod"}) {
    const bool sum = name[3] == 's';
    m.def(name,
          [sum](py::handle x, py::handle axis, bool exclusive, bool reverse, py::handle) {
            const Tensor t = to_tensor(x);
            const int a = to_axis(axis, sum ? "cumsum" : "cumprod");
            return without_gil([&] {
              return sum ? tg::cumsum(t, a, exclusive, reverse) : tg::cumprod(t, a, exclusive, reverse);
            });
          },
          py::arg("x"), py::arg("axis") = 0, py::arg("exclusive") = false, py::arg("reverse") = false,
          py::arg("name") = py::none());
  }
  m.def("l2_normalize",
        [](py::handle x, py::handle axis, double epsilon, py::handle, py::handle dim) {
          const Tensor t = to_tensor(x);
          const std::vector<int> axes = to_axes(axis.is_none() ? dim : axis, "l2_normalize").value_or(std::vector<int>{});
          return without_gil([&] { return tg::l2_normalize(t, axes, epsilon); });
        },
        py::arg("x"), py::arg("axis") = py::none(), py::arg("epsilon") = 1e-12, py::arg("name") = py::none(),
        py::arg("dim") = py::none());
}

void register_nn_ops(py::module_& m) {
  for (const char* name : {"softmax", "log_softmax"}) {
    const bool log = name[0] == 'l';
    m.def(name,
          [log](py::handle logits, py::handle axis, py::handle) {
            const Tensor x = to_tensor(logits);
            const int a = axis.is_none() ? -1 : to_axis(axis, log ? "log_softmax" : "softmax");
            return without_gil([&] { return log ? tg::log_softmax(x, a) : tg::softmax(x, a); });
          },
          py::arg("logits"), py::arg("axis") = py::none(), py::arg("name") = py::none());
  }
  m.def("gelu",
        [](py::handle features, bool approximate, py::handle) {
          const Tensor x = to_tensor(features);
          return without_gil([&] { return tg::gelu(x, approximate); });
        },
        py::arg("features"), py::arg("approximate") = false, py::arg("name") = py::none());
  m.def("leaky_relu",
        [](py::handle features, double alpha, py::handle) {
          const Tensor x = to_tensor(features);
          return without_gil([&] { return tg::leaky_relu(x, alpha); });
        },
        py::arg("features"), py::arg("alpha") = 0.2, py::arg("name") = py::none());
  m.def("conv2d",
        [](py::handle input, py::handle filters, py::handle strides, py::handle padding, py::handle data_format,
           py::handle dilations, py::handle) {
          check_nhwc(data_format, "conv2d");
          const auto xf = to_tensor_pair(input, filters);
          const Tensor x = xf.first, f = xf.second;
          const std::vector<int64_t> s = to_int_list(strides, "strides", "conv2d");
          const std::vector<int64_t> d =
              dilations.is_none() ? std::vector<int64_t>{1, 1} : to_int_list(dilations, "dilations", "conv2d");
          const tg::Padding p = to_padding(padding, "conv2d");
          return without_gil([&, x, f] { return tg::conv2d(x, f, s, p, d); });
        },
        py::arg("input"), py::arg("filters"), py::arg("strides"), py::arg("padding"), py::arg("data_format") = "NHWC",
        py::arg("dilations") = py::none(), py::arg("name") = py::none());
  m.def("depthwise_conv2d",
        [](py::handle input, py::handle filter, py::handle strides, py::handle padding, py::handle data_format,
           py::handle dilations, py::handle) {
          if (!data_format.is_none()) check_nhwc(data_format, "depthwise_conv2d");
          const auto xf = to_tensor_pair(input, filter);
          const Tensor x = xf.first, f = xf.second;
          const std::vector<int64_t> s = to_int_list(strides, "strides", "depthwise_conv2d");
          const std::vector<int64_t> d = dilations.is_none() ? std::vector<int64_t>{1, 1}
                                                             : to_int_list(dilations, "dilations", "depthwise_conv2d");
          const tg::Padding p = to_padding(padding, "depthwise_conv2d");
          return without_gil([&, x, f] { return tg::depthwise_conv2d(x, f, s, p, d); });
        },
        py::arg("input"), py::arg("filter"), py::arg("strides"), py::arg("padding"), py::arg("data_format") = py::none(),
        py::arg("dilations") = py::none(), py::arg("name") = py::none());
  m.def("conv2d_transpose",
        [](py::handle input, py::handle filters, py::handle output_shape, py::handle strides, py::handle padding,
           py::handle data_format, py::handle dilations, py::handle) {
          const char* op = "conv2d_transpose";
          check_nhwc(data_format, op);
          const auto xf = to_tensor_pair(input, filters);
          const Tensor x = xf.first, f = xf.second;
          // A list (None for an unknown batch) or an integer tensor whose elements tracing knows.
          std::vector<int64_t> out;
          if (PyList_Check(output_shape.ptr()) || PyTuple_Check(output_shape.ptr())) {
            for (py::handle item : py::reinterpret_borrow<py::sequence>(output_shape))
              out.push_back(item.is_none() ? tg::None : to_int(item, "output_shape", op));
          } else {
            const Tensor t = to_tensor(output_shape);
            const std::optional<std::vector<int64_t>> known = tg::detail::known_elements(t);
            if (!known)
              throw tg::InvalidArgumentError(std::string("[conv2d_transpose] output_shape must be a list of 4 ints or an "
                                                         "integer vector tensor whose height, width and channels are "
                                                         "known while tracing, got ") + t.to_string());
            out = *known;
          }
          const std::vector<int64_t> s = to_int_list(strides, "strides", op);
          const std::vector<int64_t> d =
              dilations.is_none() ? std::vector<int64_t>{1, 1} : to_int_list(dilations, "dilations", op);
          const tg::Padding p = to_padding(padding, op);
          return without_gil([&, x, f] { return tg::conv2d_transpose(x, f, out, s, p, d); });
        },
        py::arg("input"), py::arg("filters"), py::arg("output_shape"), py::arg("strides"), py::arg("padding") = "SAME",
        py::arg("data_format") = "NHWC", py::arg("dilations") = py::none(), py::arg("name") = py::none());
  for (const char* name : {"max_pool2d", "avg_pool2d"}) {
    const bool max = name[0] == 'm';
    m.def(name,
          [max](py::handle input, py::handle ksize, py::handle strides, py::handle padding, py::handle data_format,
                py::handle) {
            const char* op = max ? "max_pool2d" : "avg_pool2d";
            check_nhwc(data_format, op);
            const Tensor x = to_tensor(input);
            const std::vector<int64_t> k = to_int_list(ksize, "ksize", op), s = to_int_list(strides, "strides", op);
            const tg::Padding p = to_padding(padding, op);
            return without_gil([&] { return max ? tg::max_pool2d(x, k, s, p) : tg::avg_pool2d(x, k, s, p); });
          },
          py::arg("input"), py::arg("ksize"), py::arg("strides"), py::arg("padding"), py::arg("data_format") = "NHWC",
          py::arg("name") = py::none());
  }
  m.def("dropout",
        [](py::handle x, py::handle rate, py::handle noise_shape, py::handle seed, py::handle) {
          if (!noise_shape.is_none()) unimplemented("[dropout] noise_shape is not supported; pass None");
          const Tensor t = to_tensor(x);
          const double r = to_double(rate, "rate", "dropout");
          const std::optional<uint64_t> s = to_seed(seed, "dropout");
          return without_gil([&] { return tg::dropout(t, r, true, s); });
        },
        py::arg("x"), py::arg("rate"), py::arg("noise_shape") = py::none(), py::arg("seed") = py::none(),
        py::arg("name") = py::none());
}

void register_random_ops(py::module_& m) {
  m.def("set_seed", [](py::handle seed) {
    if (seed.is_none()) unimplemented("[set_seed] clearing the global seed (None) is not supported; pass an integer");
    tg::set_random_seed(static_cast<uint64_t>(to_int(seed, "seed", "set_seed")));
  }, py::arg("seed"), "Sets the global seed and restarts every random stream (tf.random.set_seed).");
  m.def("uniform",
        [](py::handle shape, py::handle minval, py::handle maxval, py::handle dtype, py::handle seed, py::handle) {
          const ShapeArg s = to_shape_arg(shape, "uniform");
          const tg::DType dt = dtype.is_none() ? tg::float32 : to_dtype(dtype);
          if (maxval.is_none() && !tg::is_floating(dt))
            value_error("[uniform] maxval must be given for the integer dtype " + tg::to_string(dt));
          const double lo = to_double(minval, "minval", "uniform");
          const double hi = maxval.is_none() ? 1.0 : to_double(maxval, "maxval", "uniform");
          const std::optional<uint64_t> sd = to_seed(seed, "uniform");
          return without_gil([&] {
            if (const auto* t = std::get_if<Tensor>(&s)) return tg::random_uniform(*t, lo, hi, dt, sd);
            return tg::random_uniform(std::get<tg::TensorShape>(s), lo, hi, dt, sd);
          });
        },
        py::arg("shape"), py::arg("minval") = 0, py::arg("maxval") = py::none(), py::arg("dtype") = py::none(),
        py::arg("seed") = py::none(), py::arg("name") = py::none());
  for (const char* name : {"normal", "truncated_normal"}) {
    const bool truncated = name[0] == 't';
    m.def(name,
          [truncated](py::handle shape, py::handle mean, py::handle stddev, py::handle dtype, py::handle seed,
                      py::handle) {
            const char* op = truncated ? "truncated_normal" : "normal";
            const ShapeArg s = to_shape_arg(shape, op);
            const tg::DType dt = dtype.is_none() ? tg::float32 : to_dtype(dtype);
            const double mu = to_double(mean, "mean", op), sigma = to_double(stddev, "stddev", op);
            const std::optional<uint64_t> sd = to_seed(seed, op);
            return without_gil([&] {
              if (const auto* t = std::get_if<Tensor>(&s))
                return truncated ? tg::truncated_normal(*t, mu, sigma, dt, sd) : tg::random_normal(*t, mu, sigma, dt, sd);
              const auto& st = std::get<tg::TensorShape>(s);
              return truncated ? tg::truncated_normal(st, mu, sigma, dt, sd) : tg::random_normal(st, mu, sigma, dt, sd);
            });
          },
          py::arg("shape"), py::arg("mean") = 0.0, py::arg("stddev") = 1.0, py::arg("dtype") = py::none(),
          py::arg("seed") = py::none(), py::arg("name") = py::none());
  }
  struct Stateless {
    const char* name;
    const char* op;
    const char* a;
    const char* b;
  };
  static const Stateless kStateless[] = {
      {"stateless_uniform", "stateless_random_uniform", "minval", "maxval"},
      {"stateless_normal", "stateless_random_normal", "mean", "stddev"},
      {"stateless_truncated_normal", "stateless_truncated_normal", "mean", "stddev"},
  };
  for (const Stateless& row : kStateless) {
    const Stateless r = row;
    const bool uniform = r.a[0] == 'm' && r.a[1] == 'i';
    m.def(r.name,
          [r, uniform](py::handle shape, py::handle seed, py::handle a, py::handle b, py::handle dtype, py::handle,
                       py::handle) {
            const Tensor s = shape_tensor(to_shape_arg(shape, r.name));
            const Tensor sd = to_tensor(seed);
            const tg::DType dt = dtype.is_none() ? tg::float32 : to_dtype(dtype);
            if (uniform && b.is_none() && !tg::is_floating(dt))
              value_error(std::string("[") + r.name + "] maxval must be given for the integer dtype " + tg::to_string(dt));
            const double x = to_double(a, r.a, r.name);
            const double y = b.is_none() ? 1.0 : to_double(b, r.b, r.name);
            return without_gil([&] { return tg::detail::stateless_from_shape_tensor(r.op, s, sd, x, y, dt); });
          },
          py::arg("shape"), py::arg("seed"), py::arg(r.a) = uniform ? py::object(py::int_(0)) : py::object(py::float_(0.0)),
          py::arg(r.b) = uniform ? py::object(py::none()) : py::object(py::float_(1.0)), py::arg("dtype") = py::none(),
          py::arg("name") = py::none(), py::arg("alg") = "auto_select");
  }
}

// tf.py_function's core: a host_call node whose host function calls back into Python.

// A Python object that host_call nodes keep: dropped with the GIL held, since a graph may be
// freed on any thread; left alone once the interpreter is shutting down.
struct PyObjectRef {
  explicit PyObjectRef(PyObject* o) : object(o) {}
  PyObjectRef(const PyObjectRef&) = delete;
  PyObjectRef& operator=(const PyObjectRef&) = delete;
  PyObject* object;
  ~PyObjectRef() {
    if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
    py::gil_scoped_acquire gil;
    Py_XDECREF(object);
  }
};

// Raises what `call` (the Python side's wrapper of func) raised as the tg:: error of the graph
// run, with the Python exception's type and message: ValueError and TypeError as
// InvalidArgumentError, as TF's py_function does, everything else as an unknown error.
[[noreturn]] void rethrow_python_error(py::error_already_set& e, const std::string& name) {
  std::string text;
  try {
    py::object lines = py::module_::import("traceback").attr("format_exception_only")(e.type(), e.value());
    for (py::handle l : lines) text += py::str(l).cast<std::string>();
  } catch (const py::error_already_set&) {
    text = "(the exception could not be formatted)";
  }
  while (!text.empty() && text.back() == '\n') text.pop_back();
  const std::string message = "[py_function] the Python function '" + name + "' raised " + text;
  if (e.matches(PyExc_ValueError) || e.matches(PyExc_TypeError)) throw tg::InvalidArgumentError(message);
  throw tg::Error("EUNKNOWN", message);
}

void register_py_function(py::module_& m) {
  // call(list of tg.Tensor) -> list of tg.Tensor of the dtypes in `tout` (the Python wrapper
  // converts func's results); returns host_call's outputs.
  m.def("_py_function", [](py::function call, py::handle inputs, py::handle tout, const std::string& name) {
    const std::vector<tg::Tensor> in = to_tensor_list(inputs, "py_function");
    std::vector<tg::DType> dtypes;
    for (py::handle d : tout) dtypes.push_back(to_dtype(d));
    auto ref = std::make_shared<PyObjectRef>(call.release().ptr());
    tg::HostFunctionFn fn = [ref, name](const std::vector<tg::Tensor>& args) {
      py::gil_scoped_acquire gil;
      std::vector<tg::Tensor> out;
      try {
        py::list py_args;
        for (const tg::Tensor& t : args) py_args.append(py::cast(t));
        py::object result = py::reinterpret_borrow<py::object>(ref->object)(py_args);
        for (py::handle r : result) {
          const tg::Tensor* t = as_tensor_ptr(r);
          if (t == nullptr)
            throw tg::InvalidArgumentError("[py_function] the Python function '" + name + "' gave " +
                                           py::repr(r).cast<std::string>() + " where a tg.Tensor was expected");
          out.push_back(*t);
        }
      } catch (py::error_already_set& e) {
        rethrow_python_error(e, name);
      }
      return out;
    };
    return without_gil([&] { return tg::host_call(std::move(fn), in, dtypes, name); });
  }, py::arg("call"), py::arg("inputs"), py::arg("tout"), py::arg("name"));
}

}  // namespace

void register_ops(py::module_& m) {
  register_py_function(m);
  register_tables(m);
  register_creation(m);
  register_shape_ops(m);
  register_math_ops(m);
  register_nn_ops(m);
  register_random_ops(m);
}

}  // namespace tgpy
