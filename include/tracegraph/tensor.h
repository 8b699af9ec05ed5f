// tg::Tensor: an eager value, or a symbolic value while a function is being traced.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "tracegraph/config.h"
#include "tracegraph/dtype.h"
#include "tracegraph/errors.h"
#include "tracegraph/shape.h"

namespace tg {

namespace detail {
struct TensorImpl;
}

/// A handle to an immutable n-dimensional array (cheap to copy: copies share the buffer).
/// Eager tensors hold data; symbolic tensors (is_symbolic()) stand for a value of a graph
/// being traced and only know their dtype and (possibly partial) shape.
class Tensor {
 public:
  /// An empty handle. Ops given an empty Tensor throw tg::ValueError.
  Tensor() = default;
  explicit Tensor(std::shared_ptr<detail::TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  DType dtype() const;
  TensorShape shape() const;
  int64_t rank() const;
  /// Number of elements; -1 for a symbolic tensor whose shape is not fully defined.
  int64_t num_elements() const;
  bool is_symbolic() const;

  /// A copy of the elements in row-major order. T must match dtype(): float, double,
  /// int32_t, int64_t, bool, std::string, uint8_t or bfloat16_t; eager tensors only.
  template <class T>
  std::vector<T> to_vector() const;
  /// The single element of a one-element tensor (any rank).
  template <class T>
  T item() const;

  /// Eager tensors only: the address of the first element; the elements follow it contiguously
  /// in row-major order (num_elements() of them; element_i is data<T>()[i]). No copy is made:
  /// the pointer is valid while this tensor, or any tensor sharing its storage, lives. Tensors
  /// are immutable, so the memory is read-only. A symbolic tensor raises tg::TypeError (it has no
  /// value while tracing); data<T>() raises tg::TypeError when T is not dtype()'s C++ type.
  const void* data() const;
  template <class T>
  const T* data() const;

  /// Eager: "tg.Tensor([1 2 3], shape=(3,), dtype=int32)" (NumPy formatting, long tensors
  /// summarised with "..."). Symbolic: "Tensor(\"x:0\", shape=(None,), dtype=int32)".
  std::string to_string() const;
  /// Eager single-element tensors only: its truth value. On a symbolic tensor this throws
  /// tg::TypeError pointing to tg::cond / tg::while_loop.
  explicit operator bool() const;
  /// x[i]: the i-th slice along the first dimension (negative i counts from the end).
  Tensor operator[](int64_t i) const;

  /// Implementation access for tracegraph's own modules.
  const std::shared_ptr<detail::TensorImpl>& impl() const { return impl_; }

 private:
  std::shared_ptr<detail::TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream&, const Tensor&);

// ---------------------------------------------------------------------------------------------
// Construction. C++ values map to dtypes as TensorFlow maps Python values: integers of up to
// 32 bits -> int32 (but uint8_t -> uint8), 64-bit integers -> int64, float and double -> float32
// (pass a DType for float64), bool -> bool, const char* / std::string -> string.

namespace detail {
template <class T>
using decay_t = std::decay_t<T>;  // char arrays decay to const char*
template <class T>
inline constexpr bool is_string_like_v =
    std::is_same_v<decay_t<T>, std::string> || std::is_same_v<decay_t<T>, const char*> ||
    std::is_same_v<decay_t<T>, char*>;
template <class T>
inline constexpr bool is_scalar_like_v = std::is_arithmetic_v<decay_t<T>> || is_string_like_v<T>;

// The C++ type the value is carried in on its way into a tensor.
template <class T>
using carrier_t = std::conditional_t<
    is_string_like_v<T>, std::string,
    std::conditional_t<std::is_same_v<decay_t<T>, bool>, bool,
                       std::conditional_t<std::is_floating_point_v<decay_t<T>>, double,
                                          int64_t>>>;

template <class T>
constexpr DType default_dtype() {
  using U = decay_t<T>;
  if constexpr (is_string_like_v<T>) return DType::String;
  else if constexpr (std::is_same_v<U, bool>) return DType::Bool;
  else if constexpr (std::is_floating_point_v<U>) return DType::Float32;
  else if constexpr (std::is_same_v<U, uint8_t>) return DType::UInt8;  // bytes stay bytes
  else if constexpr (sizeof(U) <= 4) return DType::Int32;
  else return DType::Int64;
}

// Builds an eager tensor of `dtype` from n carried values; throws if a value does not fit.
Tensor make_constant(const double* values, int64_t n, const TensorShape& shape, DType dtype);
Tensor make_constant(const int64_t* values, int64_t n, const TensorShape& shape, DType dtype);
Tensor make_constant(const bool* values, int64_t n, const TensorShape& shape, DType dtype);
Tensor make_constant(const std::string* values, int64_t n, const TensorShape& shape, DType dtype);

template <class T>
void flatten_into(const T& v, std::vector<carrier_t<T>>& out) {
  out.push_back(static_cast<carrier_t<T>>(v));
}
template <class T>
void flatten_into(std::initializer_list<T> list, std::vector<carrier_t<T>>& out) {
  for (const auto& v : list) out.push_back(static_cast<carrier_t<T>>(v));
}
template <class T>
Tensor constant_from(const std::vector<carrier_t<T>>& flat, const TensorShape& shape, DType dtype) {
  if constexpr (std::is_same_v<carrier_t<T>, bool>) {
    std::unique_ptr<bool[]> tmp(new bool[flat.size() ? flat.size() : 1]);
    for (std::size_t i = 0; i < flat.size(); ++i) tmp[i] = flat[i];
    return make_constant(tmp.get(), static_cast<int64_t>(flat.size()), shape, dtype);
  } else {
    return make_constant(flat.data(), static_cast<int64_t>(flat.size()), shape, dtype);
  }
}
// Flattens nested braces, checking that every row at a level has the same length. The carried
// type C is a separate parameter: deducing it from T would make rank-3 braces of anything but
// integers fail to compile (carrier_t<initializer_list<double>> is not double).
void check_ragged(std::vector<int64_t>& dims, std::size_t level, int64_t len);
template <class C, class T>
void flatten_nested(std::initializer_list<T> list, std::vector<C>& out,
                    std::vector<int64_t>& dims, std::size_t level) {
  check_ragged(dims, level, static_cast<int64_t>(list.size()));
  for (const auto& v : list) out.push_back(static_cast<C>(v));
}
template <class C, class T>
void flatten_nested(std::initializer_list<std::initializer_list<T>> list, std::vector<C>& out,
                    std::vector<int64_t>& dims, std::size_t level) {
  check_ragged(dims, level, static_cast<int64_t>(list.size()));
  for (const auto& row : list) flatten_nested(row, out, dims, level + 1);
}
}  // namespace detail

/// A scalar tensor: tg::constant(1) -> int32, tg::constant(1.1) -> float32,
/// tg::constant("a") -> string.
template <class T>
  requires detail::is_scalar_like_v<T>
Tensor constant(const T& value, DType dtype = detail::default_dtype<T>()) {
  std::vector<detail::carrier_t<T>> flat;
  detail::flatten_into(value, flat);
  return detail::constant_from<T>(flat, TensorShape{}, dtype);
}
/// From nested braces: tg::constant({1, 2, 3}), tg::constant({{1., 2.}, {3., 4.}}, tg::float64).
template <class T>
Tensor constant(std::initializer_list<T> values, DType dtype = detail::default_dtype<T>()) {
  std::vector<detail::carrier_t<T>> flat;
  std::vector<int64_t> dims;
  detail::flatten_nested(values, flat, dims, 0);
  return detail::constant_from<T>(flat, TensorShape(dims), dtype);
}
template <class T>
Tensor constant(std::initializer_list<std::initializer_list<T>> values,
                DType dtype = detail::default_dtype<T>()) {
  std::vector<detail::carrier_t<T>> flat;
  std::vector<int64_t> dims;
  detail::flatten_nested(values, flat, dims, 0);
  return detail::constant_from<T>(flat, TensorShape(dims), dtype);
}
template <class T>
Tensor constant(std::initializer_list<std::initializer_list<std::initializer_list<T>>> values,
                DType dtype = detail::default_dtype<T>()) {
  std::vector<detail::carrier_t<T>> flat;
  std::vector<int64_t> dims;
  detail::flatten_nested(values, flat, dims, 0);
  return detail::constant_from<T>(flat, TensorShape(dims), dtype);
}
/// From a flat row-major vector and a fully defined shape (sizes must agree).
template <class T>
Tensor constant(const std::vector<T>& values, const TensorShape& shape,
                DType dtype = detail::default_dtype<T>()) {
  std::vector<detail::carrier_t<T>> flat;
  flat.reserve(values.size());
  for (const auto& v : values) flat.push_back(static_cast<detail::carrier_t<T>>(v));
  return detail::constant_from<T>(flat, shape, dtype);
}

/// Wraps memory the caller already has as an eager tensor, without copying (zero-copy interop
/// with other libraries and services). `data` holds shape.num_elements() elements of `dtype` in
/// row-major order, aligned to the element size; it must stay valid and unchanged until
/// `deleter(data)` is called, which happens once, when the last tensor sharing the memory
/// (views, graph results that pass it through) is destroyed. An empty deleter means the caller
/// keeps ownership and must keep the memory alive for as long as tensors may use it. tracegraph
/// never writes into the memory: ops that reuse a dying input's buffer in place, and Variables
/// that adopt an assigned value's buffer, copy borrowed memory instead. The deleter must not
/// throw (it runs in a destructor: an exception is written to the diagnostics sink,
/// tg::config::set_log_sink, and dropped). String tensors cannot be wrapped. On an error
/// (tg::InvalidArgumentError: null `data`, a shape that is not fully defined, misaligned memory;
/// tg::TypeError: the string dtype) the deleter is not called and the memory stays the caller's.
Tensor from_blob(void* data, const TensorShape& shape, DType dtype,
                 std::function<void(void*)> deleter = {});

/// A tensor of the given shape with every element 0 / 1 / `value`.
Tensor zeros(const TensorShape& shape, DType dtype = float32);
Tensor ones(const TensorShape& shape, DType dtype = float32);
/// Every element equal to a scalar tensor's value (its dtype is the result's).
Tensor fill(const TensorShape& shape, const Tensor& scalar);
template <class T>
  requires detail::is_scalar_like_v<T>
Tensor fill(const TensorShape& shape, const T& value, DType dtype = detail::default_dtype<T>()) {
  return fill(shape, constant(value, dtype));
}

/// [start, start + delta, ...) up to (excluding) limit. int arguments give int32 (int64 for
/// 64-bit integers), floating arguments give float32 unless a dtype is passed.
Tensor range(double start, double limit, double delta, DType dtype);
Tensor range(int64_t start, int64_t limit, int64_t delta, DType dtype);
template <class T>
  requires std::is_arithmetic_v<T>
Tensor range(T start, T limit, T delta = T(1)) {
  if constexpr (std::is_floating_point_v<T>)
    return range(static_cast<double>(start), static_cast<double>(limit),
                 static_cast<double>(delta), detail::default_dtype<T>());
  else
    return range(static_cast<int64_t>(start), static_cast<int64_t>(limit),
                 static_cast<int64_t>(delta), detail::default_dtype<T>());
}
/// range(0, 5, 1, tg::float32): C++ integers or floats with an explicit dtype.
template <class T>
  requires std::is_arithmetic_v<T>
Tensor range(T start, T limit, T delta, DType dtype) {
  if constexpr (std::is_floating_point_v<T>)
    return range(static_cast<double>(start), static_cast<double>(limit), static_cast<double>(delta), dtype);
  else
    return range(static_cast<int64_t>(start), static_cast<int64_t>(limit), static_cast<int64_t>(delta), dtype);
}
template <class T>
  requires std::is_arithmetic_v<T>
Tensor range(T limit) {
  return range(T(0), limit, T(1));
}


}  // namespace tg
