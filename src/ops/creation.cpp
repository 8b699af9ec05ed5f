// Building eager tensors from C++ values: constant, zeros, ones, fill, range.
#include <cmath>
#include <cstring>
#include <limits>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "ops/shape_value.h"
#include "tracegraph/ops.h"

namespace tg {
namespace detail {

namespace {

void check_fully_defined(const char* op, const TensorShape& shape) {
  if (!shape.is_fully_defined())
    op_error<InvalidArgumentError>(op, "expected a fully defined shape, got ", shape.to_string(),
                                   "; eager tensors cannot have unknown (None) dimensions");
}

Tensor allocate_checked(const char* op, DType dtype, const TensorShape& shape, int64_t n) {
  check_fully_defined(op, shape);
  if (shape.num_elements() != n)
    op_error<InvalidArgumentError>(op, n, " value", n == 1 ? "" : "s", " cannot fill shape ",
                                   shape.to_string(), " (", shape.num_elements(),
                                   " elements); pass as many values as the shape has elements");
  return allocate_tensor(dtype, shape);
}

[[noreturn]] void kind_error(const char* op, const char* from, DType to) {
  op_error<TypeError>(op, "cannot convert a C++ ", from, " value to a ", to_string(to),
                      " tensor; pass a value of a matching kind or build the tensor with its "
                      "own dtype and tg::cast it");
}

template <class Int>
Int checked_int(const char* op, double v) {
  // The exclusive upper bound is max + 1 (2^8, 2^31, 2^63): int64's max itself rounds up to
  // 2^63 as a double, and converting 2^63 to int64 is undefined.
  const double lo = static_cast<double>(std::numeric_limits<Int>::min());
  const double hi = static_cast<double>(std::numeric_limits<Int>::max()) + 1.0;
  if (!(v == std::floor(v)) || v < lo || v >= hi)
    op_error<InvalidArgumentError>(op, "the value ", v, " cannot be represented exactly as ",
                                   to_string(dtype_of_v<Int>),
                                   "; use a floating dtype or an integral value in range");
  return static_cast<Int>(v);
}

template <class Int>
Int checked_narrow(const char* op, int64_t v) {
  if (v < std::numeric_limits<Int>::min() || v > std::numeric_limits<Int>::max())
    op_error<InvalidArgumentError>(op, "the value ", v, " does not fit in ", to_string(dtype_of_v<Int>),
                                   " (", int64_t{std::numeric_limits<Int>::min()}, " to ",
                                   int64_t{std::numeric_limits<Int>::max()},
                                   "); use tg::int64 for this tensor, or tg::cast to wrap around");
  return static_cast<Int>(v);
}

// Element i of numeric tensor t from a C++ double or int64, as tg::constant converts it:
// integer dtypes must hold the value exactly.
void store(const char* op, Tensor& t, int64_t i, double v) {
  switch (t.dtype()) {
    case DType::Float32: data_of<float>(t)[i] = static_cast<float>(v); break;
    case DType::Float64: data_of<double>(t)[i] = v; break;
    case DType::Int32: data_of<int32_t>(t)[i] = checked_int<int32_t>(op, v); break;
    case DType::Int64: data_of<int64_t>(t)[i] = checked_int<int64_t>(op, v); break;
    case DType::UInt8: data_of<uint8_t>(t)[i] = checked_int<uint8_t>(op, v); break;
    case DType::BFloat16: data_of<bfloat16_t>(t)[i] = bfloat16_t(static_cast<float>(v)); break;
    case DType::Bool:
    case DType::String: TG_CHECK(false, "store into a ", to_string(t.dtype()), " tensor"); break;
  }
}
void store(const char* op, Tensor& t, int64_t i, int64_t v) {
  switch (t.dtype()) {
    case DType::Float32: data_of<float>(t)[i] = static_cast<float>(v); break;
    case DType::Float64: data_of<double>(t)[i] = static_cast<double>(v); break;
    case DType::Int32: data_of<int32_t>(t)[i] = checked_narrow<int32_t>(op, v); break;
    case DType::Int64: data_of<int64_t>(t)[i] = v; break;
    case DType::UInt8: data_of<uint8_t>(t)[i] = checked_narrow<uint8_t>(op, v); break;
    case DType::BFloat16: data_of<bfloat16_t>(t)[i] = bfloat16_t(static_cast<float>(v)); break;
    case DType::Bool:
    case DType::String: TG_CHECK(false, "store into a ", to_string(t.dtype()), " tensor"); break;
  }
}

Tensor make_constant_named(const char* op, const double* values, int64_t n,
                           const TensorShape& shape, DType dtype) {
  if (dtype == DType::Bool || dtype == DType::String) kind_error(op, "floating-point", dtype);
  Tensor t = allocate_checked(op, dtype, shape, n);
  for (int64_t i = 0; i < n; ++i) store(op, t, i, values[i]);
  return t;
}

Tensor make_constant_named(const char* op, const int64_t* values, int64_t n,
                           const TensorShape& shape, DType dtype) {
  if (dtype == DType::Bool || dtype == DType::String) kind_error(op, "integer", dtype);
  Tensor t = allocate_checked(op, dtype, shape, n);
  for (int64_t i = 0; i < n; ++i) store(op, t, i, values[i]);
  return t;
}

Tensor make_constant_named(const char* op, const bool* values, int64_t n,
                           const TensorShape& shape, DType dtype) {
  if (dtype != DType::Bool) kind_error(op, "bool", dtype);
  Tensor t = allocate_checked(op, dtype, shape, n);
  if (n) std::memcpy(data_of<bool>(t), values, static_cast<std::size_t>(n));
  return t;
}

Tensor make_constant_named(const char* op, const std::string* values, int64_t n,
                           const TensorShape& shape, DType dtype) {
  if (dtype != DType::String) kind_error(op, "string", dtype);
  Tensor t = allocate_checked(op, dtype, shape, n);
  for (int64_t i = 0; i < n; ++i) data_of<std::string>(t)[i] = values[i];
  return t;
}

}  // namespace

Tensor make_constant(const double* v, int64_t n, const TensorShape& s, DType d) {
  return make_constant_named("constant", v, n, s, d);
}
Tensor make_constant(const int64_t* v, int64_t n, const TensorShape& s, DType d) {
  return make_constant_named("constant", v, n, s, d);
}
Tensor make_constant(const bool* v, int64_t n, const TensorShape& s, DType d) {
  return make_constant_named("constant", v, n, s, d);
}
Tensor make_constant(const std::string* v, int64_t n, const TensorShape& s, DType d) {
  return make_constant_named("constant", v, n, s, d);
}

void check_ragged(std::vector<int64_t>& dims, std::size_t level, int64_t len) {
  if (dims.size() == level) {
    dims.push_back(len);
  } else if (dims[level] != len) {
    op_error<InvalidArgumentError>("constant", "nested braces are ragged: a list at depth ",
                                   level, " has ", len, " elements where an earlier one had ",
                                   dims[level], "; every row must have the same length");
  }
}

static const char* kScalarOp = "scalar operand";
Tensor scalar_like(const Tensor& like, double v) {
  return make_constant_named(kScalarOp, &v, 1, TensorShape{}, like.dtype());
}
Tensor scalar_like(const Tensor& like, int64_t v) {
  return make_constant_named(kScalarOp, &v, 1, TensorShape{}, like.dtype());
}
Tensor scalar_like(const Tensor& like, bool v) {
  return make_constant_named(kScalarOp, &v, 1, TensorShape{}, like.dtype());
}
Tensor scalar_like(const Tensor& like, const std::string& v) {
  return make_constant_named(kScalarOp, &v, 1, TensorShape{}, like.dtype());
}

}  // namespace detail

using detail::data_of;

Tensor zeros(const TensorShape& shape, DType dtype) {
  detail::check_fully_defined("zeros", shape);
  Tensor t = detail::allocate_tensor(dtype, shape);
  if (dtype != DType::String)
    std::memset(data_of<char>(t), 0, static_cast<std::size_t>(shape.num_elements()) * dtype_size(dtype));
  return t;
}

Tensor ones(const TensorShape& shape, DType dtype) {
  detail::check_fully_defined("ones", shape);
  if (dtype == DType::String)
    detail::op_error<TypeError>("ones", "a string tensor has no 'one'; use tg::fill(shape, \"text\")");
  return fill(shape, dtype == DType::Bool ? constant(true) : constant(1, dtype));
}

Tensor fill(const TensorShape& shape, const Tensor& scalar) {
  detail::check_fully_defined("fill", shape);
  if (!scalar.defined() || detail::static_shape(scalar).rank() != 0)
    detail::op_error<InvalidArgumentError>(
        "fill", "expected a scalar (rank 0) value, got ",
        scalar.defined() ? detail::static_shape(scalar).to_string() : std::string("an empty tg::Tensor"));
  // The fill op copies the value's bits (as TF's Fill): -0.0, NaN payloads and subnormals stay,
  // which an add onto zeros would change. It takes a symbolic value while tracing.
  return detail::fill_from_shape_tensor(detail::static_shape_tensor("fill", shape), scalar);
}

Tensor range(int64_t start, int64_t limit, int64_t delta, DType dtype) {
  if (delta == 0) detail::op_error<InvalidArgumentError>("range", "delta must not be 0");
  if (!is_numeric(dtype))
    detail::op_error<TypeError>("range", "expected a numeric dtype, got ", to_string(dtype));
  int64_t n = 0;
  if ((delta > 0 && limit > start) || (delta < 0 && limit < start)) {
    // In unsigned arithmetic: limit - start can overflow int64 (range(INT64_MIN, INT64_MAX)).
    const uint64_t span = delta > 0 ? static_cast<uint64_t>(limit) - static_cast<uint64_t>(start)
                                    : static_cast<uint64_t>(start) - static_cast<uint64_t>(limit);
    const uint64_t step = delta > 0 ? static_cast<uint64_t>(delta) : 0 - static_cast<uint64_t>(delta);
    const uint64_t count = span / step + (span % step != 0 ? 1 : 0);
    if (count > (uint64_t{1} << 34))
      detail::op_error<InvalidArgumentError>("range", "would produce ", count,
                                             " elements; check start, limit and delta");
    n = static_cast<int64_t>(count);
  }
  // The result is the only allocation, made first: a count the machine cannot hold is
  // Buffer's ResourceExhaustedError.
  Tensor t = detail::allocate_tensor(dtype, TensorShape{n});
  for (int64_t i = 0; i < n; ++i)  // unsigned: i * delta alone may leave int64's range
    detail::store("range", t, i,
                  static_cast<int64_t>(static_cast<uint64_t>(start) +
                                       static_cast<uint64_t>(i) * static_cast<uint64_t>(delta)));
  return t;
}

Tensor range(double start, double limit, double delta, DType dtype) {
  if (delta == 0 || !std::isfinite(delta) || !std::isfinite(start) || !std::isfinite(limit))
    detail::op_error<InvalidArgumentError>("range", "expected finite start/limit and a non-zero "
                                           "finite delta, got start=", start, " limit=", limit,
                                           " delta=", delta);
  if (!is_numeric(dtype))
    detail::op_error<TypeError>("range", "expected a numeric dtype, got ", to_string(dtype));
  const double count = std::ceil((limit - start) / delta);
  if (count > 1e10)
    detail::op_error<InvalidArgumentError>("range", "would produce ", count, " elements");
  const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  Tensor t = detail::allocate_tensor(dtype, TensorShape{n});  // the only allocation, as above
  for (int64_t i = 0; i < n; ++i) detail::store("range", t, i, start + static_cast<double>(i) * delta);
  return t;
}

}  // namespace tg
