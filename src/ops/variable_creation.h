// The singleton-Variable rule: whether the trace running on this thread may create Variables.
// Declared here, where Variables are created (state_ops.cpp); the tracing layer installs it.
#pragma once
#include <string>

namespace tg::detail {

struct VariableCreationPolicy {
  bool allowed = true;        // only on a function's first trace
  int created = 0;            // how many Variables this trace created
  std::string function_name;  // for the error message
};

/// The policy of the trace running on this thread, or nullptr outside tracing.
VariableCreationPolicy* current_variable_policy();
void set_current_variable_policy(VariableCreationPolicy* policy);

}  // namespace tg::detail
