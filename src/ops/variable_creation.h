// The singleton-Variable rule: whether the trace running on this thread may create Variables.
// Declared here, where Variables are created (state_ops.cpp); the tracing layer installs it.
#pragma once
#include <cstdint>
#include <string>

#include "core/thread_context.h"

namespace tg::detail {

struct VariableCreationPolicy {
  bool allowed = true;        // only on a function's first trace
  int created = 0;            // how many Variables this trace created
  std::string function_name;  // for the error message
  int initialized_from_inputs = 0;  // of those created, how many take their value from the inputs
  /// Which trace this is (1 = the first), for the error message. The first trace of a body that
  /// created Variables is traced twice; the second pass may not create any.
  int64_t trace_number = 1;
  /// The message speaks Python (tg.function, tg.Variable, docs/python.md) for a function of the
  /// Python package, C++ otherwise.
  bool python = false;
};

/// The policy of the trace running on this thread, or nullptr outside tracing.
VariableCreationPolicy* current_variable_policy();
/// Installs a trace's policy on this thread while it lives (the tracing layer, around a trace).
class VariablePolicyScope {
 public:
  explicit VariablePolicyScope(VariableCreationPolicy* policy);

 private:
  ScopedThreadValue<VariableCreationPolicy*> policy_;
};

/// Who creates Variables on this thread while it lives, for the singleton-Variable error: code
/// that makes Variables for the user (an optimizer's slots) names itself and the fix that fits.
struct VariableCreator {
  std::string what;  // "optimizer 'Adam' (its slot 'm' for Variable 'w')"
  std::string fix;   // replaces the generic "create it once or outside the function"
};
class VariableCreatorScope {
 public:
  explicit VariableCreatorScope(const VariableCreator* creator);

 private:
  ScopedThreadValue<const VariableCreator*> creator_;
};

}  // namespace tg::detail
