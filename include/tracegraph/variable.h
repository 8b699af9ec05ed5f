// tg::Variable (tf.Variable) and tg::print (tf.print): state and side effects that survive
// tracing.
#pragma once
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "tracegraph/tensor.h"

namespace tg {

namespace detail {
struct VariableState;
}
class IndexedSlices;

/// Mutable state shared by every copy of the handle (tf.Variable).
///
/// Inside a tg::function, reading a Variable records a read of its *current* value (a later
/// assign is seen without retracing), and assign / assign_add / assign_sub are recorded as
/// ordered stateful ops that run at every call. A Variable may be created inside a traced
/// function only on its first trace (the singleton rule): a function whose body creates a
/// Variable on every call throws tg::ValueError.
class Variable {
 public:
  /// Creates a variable holding `initial_value` (an eager tensor, or one computable at trace
  /// time). Its dtype and shape are fixed from then on.
  explicit Variable(Tensor initial_value, std::string name = "");
  /// Another handle to existing state (the library's: e.g. the Variable parameter a traced body
  /// receives for a Variable argument).
  explicit Variable(std::shared_ptr<detail::VariableState> state) : state_(std::move(state)) {}

  Tensor read_value() const;
  operator Tensor() const { return read_value(); }  // NOLINT: reads convert implicitly, as in TF

  /// Replaces the value; dtype and shape must match. Returns the new value.
  Tensor assign(const Tensor& value);
  Tensor assign_add(const Tensor& delta);
  Tensor assign_sub(const Tensor& delta);
  /// Row updates (tf.Variable.scatter_add / scatter_sub / scatter_update): row indices[i] of the
  /// Variable gets values[i] added, subtracted or written; no other row is touched, and traced
  /// they are ordered stateful ops like assign. The slices' dtype and dense_shape must be the
  /// Variable's (tg::InvalidArgumentError otherwise); an index outside [0, shape[0]) is a
  /// tg::InvalidArgumentError when the op runs, and so are repeated indices in scatter_update
  /// (TF leaves which of them wins undefined). Repeated indices add up in the other two.
  Variable& scatter_add(const IndexedSlices& delta);
  Variable& scatter_sub(const IndexedSlices& delta);
  Variable& scatter_update(const IndexedSlices& rows);
  template <class S>
    requires detail::is_scalar_like_v<S>
  Tensor assign(const S& v) { return assign(constant(v, dtype())); }
  template <class S>
    requires detail::is_scalar_like_v<S>
  Tensor assign_add(const S& v) { return assign_add(constant(v, dtype())); }
  template <class S>
    requires detail::is_scalar_like_v<S>
  Tensor assign_sub(const S& v) { return assign_sub(constant(v, dtype())); }

  DType dtype() const;
  TensorShape shape() const;
  const std::string& name() const;
  /// A process-unique id (the resource id in the variable's trace type).
  uint64_t id() const;
  const std::shared_ptr<detail::VariableState>& state() const { return state_; }

 private:
  std::shared_ptr<detail::VariableState> state_;
};

std::ostream& operator<<(std::ostream&, const Variable&);

namespace detail {
struct PrintPart {
  std::string text;
  Tensor tensor;  // defined for tensor parts
};
inline void add_print_part(std::vector<PrintPart>& parts, const Tensor& t) { parts.push_back({"", t}); }
inline void add_print_part(std::vector<PrintPart>& parts, const Variable& v) {
  parts.push_back({"", v.read_value()});
}
inline void add_print_part(std::vector<PrintPart>& parts, const std::string& s) { parts.push_back({s, {}}); }
inline void add_print_part(std::vector<PrintPart>& parts, const char* s) { parts.push_back({s, {}}); }
template <class T>
  requires std::is_arithmetic_v<T>
void add_print_part(std::vector<PrintPart>& parts, T v) {
  if constexpr (std::is_same_v<T, bool>) parts.push_back({v ? "True" : "False", {}});
  else parts.push_back({std::to_string(v), {}});
}
/// `summarize`: tf.print's, the first and last entries shown per dimension (-1: all).
/// `separators`: what follows each part (PrintAttrs::separators); empty: spaces, then "\n".
void print_parts(const std::vector<PrintPart>& parts, int64_t summarize = 3,
                 std::vector<std::string> separators = {});
}  // namespace detail

/// tf.print: prints its arguments separated by spaces, then a newline, to the print sink
/// (stdout by default). Inside a tg::function it is a graph op that runs at every execution,
/// in program order with the other stateful ops; plain C++ output runs only while tracing.
template <class... Args>
void print(const Args&... args) {
  std::vector<detail::PrintPart> parts;
  (detail::add_print_part(parts, args), ...);
  detail::print_parts(parts);
}

}  // namespace tg
