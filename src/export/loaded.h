// What a tg::LoadedFunction holds: a function core with the file's concrete functions adopted
// (dispatch is the traced function's own), and the file's Variables.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "trace/function_core.h"
#include "tracegraph/export.h"

namespace tg::detail {

struct LoadedState {
  std::shared_ptr<FunctionCore> core;
  std::vector<Variable> variables;
  std::vector<VariableUse> uses;  // per concrete function, in file order
  std::string producer;
};

struct LoadedAccess {
  static const std::shared_ptr<LoadedState>& state(const LoadedFunction& f) { return f.state_; }
};

/// The concrete functions an exporter writes: every one of `core`'s, or the `chosen` ones, each
/// checked to be one of them (a ValueError naming `op`, e.g. "tg::save", otherwise).
std::vector<std::shared_ptr<ConcreteImpl>> chosen_concrete_functions(const FunctionCore& core,
                                                                     const std::vector<ConcreteFunction>* chosen,
                                                                     const char* op);

namespace tgx {
/// Writes these concrete functions of `core` to a .tgx file at `path` (tg::save).
void write_function(const FunctionCore& core, const std::vector<std::shared_ptr<ConcreteImpl>>& concretes,
                    const std::string& path);
/// Reads and validates a function file image; `owner` keeps `data` alive for the tensors that
/// use it in place.
std::shared_ptr<LoadedState> read_function(const uint8_t* data, std::size_t size, std::shared_ptr<const void> owner,
                                           const LoadOptions& options);
}  // namespace tgx

}  // namespace tg::detail
