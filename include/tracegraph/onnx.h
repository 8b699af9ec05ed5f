// ONNX export and import: a traced function's concrete functions written as ONNX models (opset 17),
// so that ONNX Runtime and the other ONNX consumers run what tracegraph traced, and ONNX models
// (PyTorch's, TensorFlow's exports) read back as callables. The optional component
// tracegraph::onnx (find_package(tracegraph COMPONENTS onnx), link tracegraph::onnx; built with
// -DTG_ONNX=ON over Debian's libonnx-dev). docs/onnx.md lists how each registry op is written and
// which ONNX ops the importer reads.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tracegraph/concrete_function.h"
#include "tracegraph/export.h"
#include "tracegraph/function.h"

namespace tg {

struct OnnxOptions {
  /// The model's graph name (ONNX GraphProto.name); empty: the function's name.
  std::string graph_name;
  /// Write a function that updates Variables (a train step: assign, assign_add, assign_sub,
  /// SGD's and Adam's updates) as ONNX has no state, as TensorFlow and PyTorch exporters do: every Variable
  /// the function reads or writes is a graph input named after it (no initializer), and each one
  /// it writes is also an output "<input name>/new" holding its value after the step, after the
  /// function's own results, in the order of first write. Without it, a Variable write is refused.
  /// A write inside a cond branch or a while_loop body is refused either way.
  bool variables_as_inputs = false;
};

/// The ONNX opset the exporter writes (the default domain) and the IR version that opset needs.
inline constexpr int kOnnxOpset = 17;
inline constexpr int kOnnxIrVersion = 8;

namespace detail {
class FunctionCore;
std::vector<std::string> export_onnx_function(const std::string& path, const FunctionCore& core,
                                              const std::vector<ConcreteFunction>* chosen, const OnnxOptions& options);
std::vector<std::string> export_onnx_loaded(const std::string& path, const LoadedFunction& fn,
                                            const OnnxOptions& options);
}  // namespace detail

/// Writes the concrete functions of `fn` as ONNX models, one model per concrete function, chosen
/// as tg::save chooses (every trace made so far, or the ones given). Each model holds the graph as
/// traced (before the optimiser: no fused nodes), its tensor arguments as graph inputs (None dims
/// as named symbolic dims, "<input>_d<axis>"), the Variables it reads and the constants it
/// captured as initializers (a Variable argument is a graph input named after its parameter), and
/// its flattened results as outputs "output_0", "output_1", ....
///
/// One concrete function is written to `path`; several to "<stem>.<i><ext>" ("model.0.onnx",
/// "model.1.onnx", in trace order). Returns the paths written. tg::cond and tg::while_loop (and
/// tg::for_range) become ONNX If and Loop nodes whose branches and body read outer values by name.
/// Every op the graph holds must be in the exporter's table (docs/onnx.md): any other op (random
/// numbers, tg::print, a Variable write without OnnxOptions::variables_as_inputs, ...) is a
/// tg::ValueError naming the node and the op, and nothing is written. Arguments that are not
/// tensors (C++ literals, objects) are fixed at the values the trace was made for.
template <class F>
std::vector<std::string> export_onnx(const std::string& path, const PolymorphicFunction<F>& fn,
                                     const OnnxOptions& options = {}) {
  return detail::export_onnx_function(path, detail::core_of(fn), nullptr, options);
}
/// The chosen concrete functions of `fn` only (another function's: tg::ValueError).
template <class F>
std::vector<std::string> export_onnx(const std::string& path, const PolymorphicFunction<F>& fn,
                                     const std::vector<ConcreteFunction>& chosen, const OnnxOptions& options = {}) {
  return detail::export_onnx_function(path, detail::core_of(fn), &chosen, options);
}
/// A function loaded from a .tgx file (what `tgx onnx` writes), with its Variables' current values.
inline std::vector<std::string> export_onnx(const std::string& path, const LoadedFunction& fn,
                                            const OnnxOptions& options = {}) {
  return detail::export_onnx_loaded(path, fn, options);
}

/// Limits and choices of tg::import_onnx. A model beyond a limit is refused with a tg::FormatError
/// naming the limit and this field, before anything it asks for is allocated.
struct OnnxImportOptions {
  /// Float initializers (weights) become tg::Variables named after them, listed by
  /// LoadedFunction::variables(): a GradientTape inside a tg::function can fine-tune them.
  /// Otherwise they are constants of the graph (which the optimiser may fold).
  bool initializers_as_variables = false;
  /// The function's name; empty: the ONNX graph's name.
  std::string name;
  /// Run the graph optimiser on the imported graph (FunctionOptions::optimize).
  bool optimize = true;
  uint64_t max_file_bytes = (uint64_t{1} << 31) - 1;  // protobuf's own limit on one message
  int64_t max_nodes = 1'000'000;                       // ONNX nodes
  uint64_t max_tensor_bytes = uint64_t{1} << 32;       // one initializer or Constant
  int64_t max_rank = 32;                               // any tensor's or graph input's rank
  int64_t max_graph_depth = 16;                        // sub-graphs (If branches, Loop bodies) nested
};

/// Reads an ONNX model (a ModelProto, opset 7 to 21 of the default domain) into a function that
/// is called like a tg::LoadedFunction loaded from a .tgx file: one positional tensor per graph
/// input (initializers are not parameters), in the graph's order, whose dtype must be the
/// input's and whose shape must fit it (a named symbolic dim, or one without a value, is None);
/// it returns the graph's outputs (one Tensor when the graph has one output). The graph is traced
/// once, through tracegraph's own ops, into one concrete function: it runs, differentiates and
/// saves (tg::save) as a traced function does. docs/onnx.md lists the ONNX ops read.
///
/// The file is trusted in nothing: a file that is not a ModelProto, is truncated, holds a tensor
/// whose data does not match its dims and type, data kept outside the file (external data), an
/// unknown dtype, a node reading a value nothing defines, a cycle, a sub-graph that redefines a
/// name of its enclosing graph, or anything beyond the options' limits (max_nodes counts the
/// nodes of sub-graphs too) is a tg::FormatError naming the part of the model. An op the
/// importer does not read, an attribute value it cannot honour (a Conv dilation with a stride,
/// MaxPool's ceil_mode where it changes the output, ...) or a node of another domain is a
/// tg::ValueError naming the op type, the node and what to do. No attribute is ignored: one the
/// importer does not know is refused. If and Loop become tg::cond and tg::while_loop nodes (a
/// Loop's scan outputs tg::TensorArrays), so an imported model with control flow differentiates
/// as those do.
LoadedFunction import_onnx(const std::string& path, const OnnxImportOptions& options = {});
/// The same from a serialised ModelProto in memory.
LoadedFunction import_onnx_from_memory(const void* data, std::size_t size, const OnnxImportOptions& options = {});

}  // namespace tg
