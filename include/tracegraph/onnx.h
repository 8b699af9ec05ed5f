// ONNX export: a traced function's concrete functions written as ONNX models (opset 17), so that
// ONNX Runtime and the other ONNX consumers run what tracegraph traced. The optional component
// tracegraph::onnx (find_package(tracegraph COMPONENTS onnx), link tracegraph::onnx; built with
// -DTG_ONNX=ON over Debian's libonnx-dev). docs/onnx.md lists how each registry op is written.
#pragma once
#include <string>
#include <vector>

#include "tracegraph/concrete_function.h"
#include "tracegraph/export.h"
#include "tracegraph/function.h"

namespace tg {

struct OnnxOptions {
  /// The model's graph name (ONNX GraphProto.name); empty: the function's name.
  std::string graph_name;
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
/// "model.1.onnx", in trace order). Returns the paths written. Every op the graph holds must be in
/// the exporter's table (docs/onnx.md): any other op (a Variable write, control flow, ...) is a
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

}  // namespace tg
