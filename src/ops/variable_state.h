// The shared state behind tg::Variable handles (read by the variable ops and by tapes), and the
// binding of Variable parameters to the caller's Variables while a traced function runs.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/thread_context.h"
#include "tracegraph/tensor.h"

namespace tg::detail {

struct VariableState {
  std::mutex mu;
  Tensor value;  // eager; a handle owned by the variable (reads return it)
  DType dtype;
  TensorShape shape;
  std::string name;
  uint64_t id;
  // A Variable parameter (TF's VariableSpec placeholder): what the body of a traced function
  // sees for a Variable argument. It has no value of its own; each call of the function binds
  // it to the caller's Variable (VariableBindingScope), so that one trace serves every Variable
  // of the same dtype, shape and aliasing. `parameter_of` names the function, for messages.
  bool parameter = false;
  std::string parameter_of;
  // Set when state was made for this parameter that belongs to one Variable (an optimizer's
  // slots): the parameter may then only ever be bound to the first Variable it was bound to.
  bool owns_state_of_first_binding = false;
  uint64_t first_binding_id = 0;  // the id of the first Variable bound (0: never bound)
};

/// Whether the Variable has a value (a Variable created from a trace's inputs has none until
/// that trace first runs).
bool variable_has_value(VariableState& v);

/// A new Variable's state (what tg::Variable's constructor makes), e.g. for a Variable read from
/// a file: `value` (eager, of `dtype` and `shape`) or none yet.
std::shared_ptr<VariableState> make_variable_state(std::string name, DType dtype, TensorShape shape, Tensor value);

/// A Variable parameter, like `traced` (dtype, shape, name), for function `function`.
std::shared_ptr<VariableState> make_variable_parameter(const VariableState& traced, const std::string& function);

struct VariableBinding {
  VariableState* parameter;
  std::shared_ptr<VariableState> variable;  // the caller's Variable (itself possibly a parameter)
};

/// Binds Variable parameters to the caller's Variables on this thread while it lives (a call of
/// a concrete function, or the backward of one). Scopes nest; a parameter bound to another
/// parameter resolves in turn through the enclosing scopes.
class VariableBindingScope {
 public:
  explicit VariableBindingScope(std::vector<VariableBinding> bindings);
  const std::vector<VariableBinding>& bindings() const { return bindings_; }
  const VariableBindingScope* prev_scope() const { return installed_.previous(); }

 private:
  std::vector<VariableBinding> bindings_;
  ScopedThreadValue<const VariableBindingScope*> installed_;  // after bindings_: they are checked first
};

/// Every binding in force on this thread, innermost first (to re-establish them later, e.g. for
/// a backward pass that runs after the call returned).
std::vector<VariableBinding> current_variable_bindings();

/// The Variable `v` stands for: `v` itself, or the Variable a call bound the parameter `v` to.
/// A parameter that no call binds (used outside a run of its function) is an OutOfScopeError.
const std::shared_ptr<VariableState>& resolve_variable(const std::shared_ptr<VariableState>& v);
/// The same for tapes and graph walks: an unbound parameter stands for itself (while its
/// function is traced, the body's Variable is the parameter).
const VariableState* bound_variable_or_self(const VariableState* v);

}  // namespace tg::detail
