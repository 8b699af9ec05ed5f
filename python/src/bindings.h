// What the files of the extension module tracegraph._core share: converting Python values to
// tensors (TensorFlow's convert_to_tensor rules), dtypes, shapes and axes; tensors to NumPy
// arrays; and running library code without the GIL.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tracegraph/tracegraph.h"

namespace tgpy {

namespace py = pybind11;

/// How a requested dtype meets a value that already is a tg.Tensor: a hint leaves the tensor as
/// it is (the op then checks the dtypes, as TF's binary ops do); a requirement raises TypeError
/// on a mismatch (TF's tf.constant / convert_to_tensor with dtype=).
enum class DTypeRule { kHint, kRequire };

/// A Python value as a tensor: a tg.Tensor itself; a NumPy array or scalar (its dtype kept,
/// without a copy when C-contiguous, aligned and of a dtype tracegraph has); Python scalars and
/// nested lists/tuples (int -> int32, or int64 when a value needs it; float -> float32;
/// bool -> bool; str/bytes -> string). With `dtype`, Python values are converted to it exactly
/// (TypeError for a float to an integer dtype, as TF), NumPy arrays are cast where TF allows
/// it (integers to any number type, floats to floats). Anything else raises ValueError naming
/// its type.
tg::Tensor to_tensor(py::handle value, std::optional<tg::DType> dtype = std::nullopt,
                     DTypeRule rule = DTypeRule::kHint);
/// The tg.Tensor inside `value`, or nullptr when it is not one.
const tg::Tensor* as_tensor_ptr(py::handle value);
/// A new Python tg.Tensor holding `t` (py::cast's result, without its type lookups).
py::object tensor_object(tg::Tensor&& t);
/// The tg::Variable inside `value` (a tg.Variable), or nullptr when it is not one. to_tensor reads
/// a Variable (its current value; inside a trace, a read at every call).
const tg::Variable* as_variable_ptr(py::handle value);
/// Tells the recording tg.GradientTapes of this thread that Python code read `variable` (a
/// tg.Variable), for GradientTape.watched_variables(). Cheap when no tape records.
void note_variable_read(py::handle variable);
/// x and y of a binary op: the dtype of whichever is a tensor (else of the converted x) is the
/// other one's hint, so `t + 1` and `1 + t` take t's dtype.
std::pair<tg::Tensor, tg::Tensor> to_tensor_pair(py::handle x, py::handle y);
/// A list/tuple of values sharing one dtype: the first tensor's (or NumPy array's) is the
/// others' hint.
std::vector<tg::Tensor> to_tensor_list(py::handle values, const char* op);

/// A dtype argument: a tg.DType, or anything tracegraph.dtypes.as_dtype accepts (a name, a
/// NumPy dtype or type, Python's float and bool).
tg::DType to_dtype(py::handle value);
/// None -> nullopt.
std::optional<tg::DType> to_optional_dtype(py::handle value);
/// The NumPy dtype of a tracegraph dtype (object for strings).
py::dtype numpy_dtype(tg::DType dtype);

/// A shape argument: a static shape (list, tuple, tg.TensorShape, an int for a vector) or a
/// 1-D int32/int64 tensor (or NumPy array) holding one, for shapes known only at run time.
using ShapeArg = std::variant<tg::TensorShape, tg::Tensor>;
/// Dims must be >= 0 (tg::InvalidArgumentError), except that `allow_unknown` (reshape) lets -1
/// and None stand for a dim to infer.
ShapeArg to_shape_arg(py::handle value, const char* op, bool allow_unknown = false);
/// A static shape; a tensor is read (eager only). None means an unknown rank.
tg::TensorShape to_static_shape(py::handle value, const char* op, bool allow_unknown = false);
/// A list of integers from an int, a list/tuple of ints, a NumPy array or an eager tensor.
std::vector<int64_t> to_int_list(py::handle value, const char* what, const char* op);
/// One integer (an int, a NumPy integer, an eager integer scalar tensor).
int64_t to_int(py::handle value, const char* what, const char* op);
/// One float (a Python number, a NumPy scalar, an eager scalar tensor).
double to_double(py::handle value, const char* what, const char* op);
/// Reduction axes: None -> nullopt (every axis); an int or a list/tuple/tensor of them.
std::optional<std::vector<int>> to_axes(py::handle axis, const char* op);
int to_axis(py::handle axis, const char* op);

/// A read-only NumPy array over the tensor's elements, without a copy; `owner` (the Python
/// tg.Tensor) is its base and keeps the elements alive. Strings: a copy (an object array of
/// bytes), as they are C++ objects.
py::array numpy_view(const tg::Tensor& t, py::handle owner);
/// TF's Tensor.numpy(): a writable copy; a NumPy scalar (bytes for strings) for rank 0.
py::object numpy_copy(const tg::Tensor& t);

/// Runs f with the GIL released: kernels may take long, and other Python threads run meanwhile.
/// Arguments must have been converted before (conversion needs the GIL).
template <class F>
auto without_gil(F&& f) -> decltype(f()) {
  py::gil_scoped_release release;
  return f();
}

/// Raised for tg.errors.UnimplementedError (errors_bindings.cpp translates it).
class Unimplemented : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// TF's `/` (tf.math.truediv): true division; integer tensors are converted first (uint8 to
/// float32, wider ones to float64).
tg::Tensor truediv(const tg::Tensor& x, const tg::Tensor& y);

/// TypeError / ValueError with a message (pybind11 translates them).
[[noreturn]] void type_error(const std::string& message);
[[noreturn]] void value_error(const std::string& message);
/// tg.errors.UnimplementedError: something TF does that tracegraph's op set cannot do.
[[noreturn]] void unimplemented(const std::string& message);

/// The parts of the module, one per file.
void register_errors(py::module_& m);
void register_tensor(py::module_& m);
void register_ops(py::module_& m);
/// tg.function: function_bindings.cpp (with py_trace_types.cpp).
void register_function(py::module_& m);
void register_variable(py::module_& m);
void register_gradient(py::module_& m);
/// tg.cond, tg.while_loop, tg.TensorArray: control_flow_bindings.cpp.
void register_control_flow(py::module_& m);
void register_optim(py::module_& m);
void register_nn(py::module_& m);
/// tg.experimental.dlpack and Tensor.__dlpack__: dlpack_bindings.cpp.
void register_dlpack(py::module_& m);
/// tg.saved_model and tg.train's checkpoints (.tgx files): saved_model_bindings.cpp.
void register_saved_model(py::module_& m);

}  // namespace tgpy
