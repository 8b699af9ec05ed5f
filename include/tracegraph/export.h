// Export: a traced function saved to one .tgx file, loaded back in any process (tf.saved_model
// for tg::function), and checkpoints of Variables. The format is specified in docs/export.md.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tracegraph/concrete_function.h"
#include "tracegraph/function.h"
#include "tracegraph/structure.h"
#include "tracegraph/tensor.h"
#include "tracegraph/variable.h"

namespace tg {

/// Limits the loader enforces before it allocates anything a file asks for. A file beyond one
/// is refused with a tg::FormatError naming the limit and this field.
struct LoadOptions {
  uint64_t max_file_bytes = uint64_t{1} << 40;      // 1 TiB
  int64_t max_nodes = 10'000'000;                   // graph nodes, sub-graphs included
  uint64_t max_tensor_bytes = uint64_t{1} << 40;   // one constant or Variable value
  int max_nesting = 64;                             // sub-graphs in sub-graphs, types in types
  /// Check every section's CRC32, the tensor data's included (reads every byte once).
  bool verify_checksums = true;
};

/// A loaded function's results: its flattened output tensors, and whether it returned one Tensor.
class Outputs {
 public:
  Outputs() = default;
  Outputs(std::vector<Tensor> values, bool single) : values_(std::move(values)), single_(single) {}
  /// The result, when the function returned one Tensor (else tg::TypeError).
  operator Tensor() const;  // NOLINT: reads as the original's result
  /// The flattened outputs (a structure's tensors in flattening order).
  operator std::vector<Tensor>() const { return values_; }  // NOLINT
  std::size_t size() const { return values_.size(); }
  const Tensor& operator[](std::size_t i) const;
  const std::vector<Tensor>& values() const { return values_; }
  /// The single element of the one result (Tensor::item): `served(x).item<float>()`.
  template <class T>
  T item() const {
    return Tensor(*this).template item<T>();
  }

 private:
  std::vector<Tensor> values_;
  bool single_ = false;
};

/// The Variables one concrete function of a loaded function reads and writes, each once in order
/// of first use (read_value reads; assign writes; assign_add and assign_sub do both): positions
/// in LoadedFunction::variables(), and alias ids of its Variable arguments.
struct VariableUse {
  std::vector<std::size_t> reads, writes;
  std::vector<std::size_t> argument_reads, argument_writes;
};

namespace detail {
class FunctionCore;
struct LoadedState;
struct LoadedAccess;
void save_function(const std::string& path, const FunctionCore& core, const std::vector<ConcreteFunction>* chosen);
/// The concrete function of a loaded function for a call's types (remembered under `fast_hash`
/// for the cached path), or a TypeError listing every saved signature.
std::shared_ptr<ConcreteImpl> find_loaded(const LoadedState& state, std::vector<TraceTypePtr> types,
                                          const ArgContext& ctx, const std::size_t* fast_hash);
Outputs run_loaded(const LoadedState& state, const ConcreteImpl& cf, CallInputs&& inputs);
const FunctionCore& loaded_core(const LoadedState& state);
}  // namespace detail

/// A function read from a .tgx file: callable with the arguments of one of its concrete
/// functions, dispatching as the original did (the exact FunctionType, else the most specific
/// one the call is a subtype of; literals by value). It never traces: a call no signature
/// accepts is a tg::TypeError that lists every signature the file has.
class LoadedFunction {
 public:
  explicit LoadedFunction(std::shared_ptr<detail::LoadedState> state) : state_(std::move(state)) {}

  template <class... Args>
  Outputs operator()(const Args&... args) const {
    detail::CallInputs inputs;
    const detail::CalledConcrete called = detail::resolve_call(
        detail::loaded_core(*state_), inputs,
        [&](detail::ArgContext& ctx, const std::size_t* fast_hash) {
          std::vector<TraceTypePtr> types{detail::ArgTraits<std::decay_t<Args>>::trace_type(args, ctx)...};
          return detail::find_loaded(*state_, std::move(types), ctx, fast_hash);
        },
        args...);
    return detail::run_loaded(*state_, *called.cf, std::move(inputs));
  }
  /// Calls with one tensor per positional parameter (what tools without C++ types use).
  Outputs call(const std::vector<Tensor>& positional) const;

  const std::string& name() const;
  /// One line per concrete function: "(x: TensorSpec(...), ...) -> TensorSpec(...)".
  std::vector<std::string> signatures() const;
  /// The Variables its graphs read and write, in the file's order: real Variables (readable,
  /// assignable; a loaded train_step keeps training them).
  std::vector<Variable> variables() const;
  std::vector<ConcreteFunction> concrete_functions() const;
  /// What each concrete function (in concrete_functions() order) reads and writes.
  const std::vector<VariableUse>& variable_uses() const;
  /// The tracegraph version that wrote the file ("tracegraph 0.1.0").
  const std::string& producer() const;

 private:
  friend struct detail::LoadedAccess;
  std::shared_ptr<detail::LoadedState> state_;
};

/// Saves every concrete function of `fn` (each trace made so far; trace or call the function
/// for the input types it must serve first) with the Variables they use, to one file. Throws
/// tg::ValueError when there is nothing to save or an argument type cannot leave the process
/// (a C++ object passed by shared_ptr, a user-defined trace type).
template <class F>
void save(const std::string& path, const PolymorphicFunction<F>& fn) {
  detail::save_function(path, detail::core_of(fn), nullptr);
}
/// Saves the chosen concrete functions of `fn` only.
template <class F>
void save(const std::string& path, const PolymorphicFunction<F>& fn, const std::vector<ConcreteFunction>& chosen) {
  detail::save_function(path, detail::core_of(fn), &chosen);
}
/// Saves a loaded function again, with its Variables' current values (a model trained further).
void save(const std::string& path, const LoadedFunction& fn);

/// Reads and validates a .tgx file (docs/export.md lists every check). Malformed content is a
/// tg::FormatError naming the section and byte offset; nothing in the file is ever executed
/// other than the registry's own ops.
LoadedFunction load(const std::string& path, const LoadOptions& options = {});
/// The same from memory (a file already read, a network buffer); the bytes are copied.
LoadedFunction load_from_memory(const void* data, std::size_t size, const LoadOptions& options = {});

/// Checkpoints: writes each Variable's value under its name (names must be unique: an unnamed
/// Variable is called "Variable"), and restores them by name - every Variable given must be in
/// the file, once, with the same dtype and shape; nothing is assigned unless all are. The file
/// may also be a saved function's (its Variables). Files in the .tgx container (docs/export.md).
void save_variables(const std::string& path, const std::vector<Variable>& variables);
void restore_variables(const std::string& path, const std::vector<Variable>& variables,
                       const LoadOptions& options = {});

}  // namespace tg
