// tg::ConcreteFunction: one trace of a tg::function, a graph specialised to one FunctionType.
#pragma once
#include <any>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "tracegraph/graph.h"
#include "tracegraph/structure.h"
#include "tracegraph/tensor.h"

namespace tg {

namespace detail {
class ConcreteImpl;
struct FunctionAccess;  // the library's way to the implementation (src/trace/function_core.h)
const std::any& skeleton_of(const ConcreteImpl& cf);
void bind_concrete(const ConcreteImpl& cf, const std::vector<TraceTypePtr>& arg_types);
/// A C++ number passed for parameter `index` of a concrete function whose parameter there is a
/// tensor: the scalar tensor of that parameter's dtype (as TF converts a Python number), or an
/// empty Tensor when the parameter is not a tensor. TypeError when the value does not convert
/// exactly (1.5 for an int32 parameter).
Tensor scalar_for_tensor_param(const ConcreteImpl& cf, std::size_t index, double value, const int64_t* integer);
/// call_flat with the call's distinct Variables, bound to the concrete function's Variable
/// parameters.
std::vector<Tensor> call_bound(const ConcreteImpl& cf, const std::vector<Tensor>& inputs,
                               const std::vector<Variable>& variables);
}  // namespace detail

/// One trace of a function: a graph specialised to one FunctionType.
class ConcreteFunction {
 public:
  explicit ConcreteFunction(std::shared_ptr<detail::ConcreteImpl> impl) : impl_(std::move(impl)) {}
  /// "(a: TensorSpec(shape=(), dtype=tg.string, name=None)) -> TensorSpec(...)".
  std::string function_type() const;
  /// "Input Parameters:\n  a (POSITIONAL_OR_KEYWORD): ...\nOutput Type:\n  ...".
  std::string pretty_printed_signature() const;
  /// The graph as the code traced it (TF's concrete_function.graph): one node per op recorded.
  const Graph& graph() const;
  /// The graph that runs: graph() after the optimiser (folded, deduplicated, fused).
  const Graph& optimized_graph() const;
  /// Runs the graph on the flattened tensor arguments (in argument order), returning the
  /// flattened outputs. Inputs are checked against the traced specs. (A trace with Variable
  /// arguments needs them: call it with its arguments instead.)
  std::vector<Tensor> call_flat(const std::vector<Tensor>& inputs) const;

  /// Whether two handles are the same trace (TF's `cf1 is cf2`): get_concrete_function returns
  /// equal handles for arguments that dispatch to one trace. (!= follows.)
  friend bool operator==(const ConcreteFunction& a, const ConcreteFunction& b) { return a.impl_ == b.impl_; }

 protected:
  friend struct detail::FunctionAccess;
  std::shared_ptr<detail::ConcreteImpl> impl_;
};
std::ostream& operator<<(std::ostream&, const ConcreteFunction&);

/// A concrete function that knows the C++ result type of the function it was traced from:
/// callable with the arguments it was traced for.
template <class R>
class TypedConcreteFunction : public ConcreteFunction {
 public:
  using ConcreteFunction::ConcreteFunction;
  /// Calls the graph. Arguments must bind to the traced FunctionType: tensors of compatible
  /// specs and literals equal to the traced values (else tg::TypeError "Can not cast ...").
  template <class... Args>
  R operator()(const Args&... args) const {
    detail::ArgContext ctx;
    std::vector<TraceTypePtr> types;
    types.reserve(sizeof...(Args));
    std::size_t index = 0;
    (types.push_back(arg_type(args, ctx, index++)), ...);
    bind(types);
    std::vector<Tensor> out = detail::call_bound(*impl_, ctx.leaves, ctx.variables);
    if constexpr (std::is_void_v<R>) {
      return;
    } else {
      std::size_t i = 0;
      return detail::TensorStructure<R>::rebuild(std::any_cast<const R&>(detail::skeleton_of(*impl_)), out, i);
    }
  }

 private:
  void bind(const std::vector<TraceTypePtr>& arg_types) const;
  // A C++ number stands for a scalar tensor where the traced parameter is a tensor.
  template <class T>
  TraceTypePtr arg_type(const T& arg, detail::ArgContext& ctx, std::size_t index) const {
    if constexpr (std::is_arithmetic_v<T>) {
      const int64_t integer = static_cast<int64_t>(arg);
      const Tensor t = detail::scalar_for_tensor_param(*impl_, index, static_cast<double>(arg),
                                                       std::is_integral_v<T> ? &integer : nullptr);
      if (t.defined()) return detail::ArgTraits<Tensor>::trace_type(t, ctx);
    }
    return detail::ArgTraits<std::decay_t<T>>::trace_type(arg, ctx);
  }
};
template <class R>
void TypedConcreteFunction<R>::bind(const std::vector<TraceTypePtr>& arg_types) const {
  detail::bind_concrete(*impl_, arg_types);
}

}  // namespace tg
