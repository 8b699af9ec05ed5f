// The non-template core of tg::function (declared opaque in include/tracegraph/function.h).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trace/advice.h"
#include "trace/concrete.h"
#include "tracegraph/function.h"

namespace tg::detail {

class Diagnostics;

/// Everything about a tg::function that does not depend on its C++ types: the cache of
/// concrete functions, limits and diagnostics (function_core.cpp, its state in
/// function_state.h), dispatch (function_dispatch.cpp), tracing (function_compile.cpp) and
/// running a concrete function (concrete_function.cpp).
class FunctionCore {
 public:
  /// `language`: what the retracing diagnostics write their fixes and names in (the C++ API's
  /// functions use kCpp; the Python binding's, kPython).
  explicit FunctionCore(FunctionOptions options, std::string callable_type,
                        AdviceLanguage language = AdviceLanguage::kCpp);
  ~FunctionCore();
  const FunctionOptions& options() const;
  const std::string& name() const;
  /// The cached-call path: the concrete function an earlier call of exactly this type went to,
  /// found by `fast_hash` and confirmed by `match`, without building trace types. nullptr if
  /// there is none (then dispatch_or_trace decides).
  CalledConcrete fast_lookup(std::size_t fast_hash, FastMatch match) const;
  /// The concrete function of this thread's last cached call, if that call was of this function
  /// with argument types `match` confirms (checked by comparison alone); else nullptr.
  CalledConcrete repeat_call(FastMatch match) const;
  /// Finds the concrete function for a call's argument types, or traces one with `body`. With
  /// a fast hash, the result is remembered for fast_lookup. `is_call`: a call of the function
  /// (false for get_concrete_function, which the frequent-retracing warning does not count).
  std::shared_ptr<ConcreteImpl> dispatch_or_trace(std::vector<TraceTypePtr> arg_types,
                                                  TraceBody body, const std::size_t* fast_hash, bool is_call);
  /// The name of parameter `index` in FunctionTypes, graphs and messages: its input_signature
  /// spec's name, else FunctionOptions::arg_names', else "arg<index>".
  std::string parameter_name(std::size_t index) const;
  /// Adds a concrete function made elsewhere (read from an exported file): dispatch finds it as
  /// it finds a traced one.
  void adopt(std::shared_ptr<ConcreteImpl> cf);
  /// The concrete function a call of these argument types dispatches to - the exact one, else
  /// the most specific one the call is a subtype of - without ever tracing: nullptr if none.
  /// With a fast hash, a match is remembered for fast_lookup (as dispatch_or_trace does).
  std::shared_ptr<ConcreteImpl> find(std::vector<TraceTypePtr> arg_types, const std::size_t* fast_hash = nullptr) const;
  std::vector<Tensor> run(const ConcreteImpl& cf, CallInputs&& inputs) const;
  int64_t tracing_count() const;
  std::vector<std::shared_ptr<ConcreteImpl>> concrete_functions() const;
  std::vector<TraceRecord> trace_history() const;
  std::optional<std::vector<TensorSpec>> suggested_input_signature() const;
  std::string retracing_report() const;
  const Diagnostics& diagnostics() const;

 private:
  // Records that calls of exactly `call_types` (hashed to fast_hash) go to `cf`.
  void remember_fast(std::size_t fast_hash, std::vector<TraceTypePtr> call_types, std::shared_ptr<ConcreteImpl> cf) const;
  std::shared_ptr<ConcreteImpl> dispatch_or_trace_impl(const std::vector<TraceTypePtr>& arg_types,
                                                       TraceBody body, bool is_call);
  // dispatch_or_trace_impl's miss: traces `body` for the call's types `target` (hashed to `h`;
  // `call_number` numbers the call for the diagnostics) unless another thread traced them
  // meanwhile, and adds the concrete function to the cache.
  std::shared_ptr<ConcreteImpl> trace(std::vector<TraceTypePtr> target, std::size_t h, uint64_t call_number,
                                      TraceBody body);
  struct State;
  std::unique_ptr<State> state_;
};


/// The implementation behind the public handles, for the library and its tests (the public
/// headers expose none of it).
struct FunctionAccess {
  static const std::shared_ptr<ConcreteImpl>& impl(const ConcreteFunction& f) { return f.impl_; }
  template <class F>
  static FunctionCore& core(const PolymorphicFunction<F>& f) { return *f.core_; }
};

}  // namespace tg::detail
