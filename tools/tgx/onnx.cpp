// tgx onnx: a .tgx file's concrete functions written as ONNX models (tg::export_onnx).
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cli.h"
#include "commands.h"
#include "tracegraph/errors.h"
#include "tracegraph/onnx.h"

namespace tgx {

const char* const kOnnxHelp = R"(Usage: tgx onnx MODEL.tgx -o MODEL.onnx [--graph-name NAME] [--variables-as-inputs]

Writes the function in MODEL.tgx as an ONNX model (opset 17, IR version 8) that ONNX Runtime and
other ONNX consumers run: its graph as traced, its Variables' values and its constants as
initializers, None dims of its inputs as named symbolic dims ("x_d0"), its results as outputs
output_0, output_1, .... A file with several concrete functions gives one model each:
MODEL.0.onnx, MODEL.1.onnx, ... in the file's order. docs/onnx.md lists the ops written.

Options:
  -o, --output FILE       the .onnx file to write (required)
  --graph-name NAME       the ONNX graph's name (default: the function's name)
  --variables-as-inputs   write a function that updates Variables (a train step) as one step:
                          every Variable it uses is a graph input named after it, and each one it
                          writes also an output "<name>/new" (without it, a write is refused)

Exit codes: 0 written; 1 usage error; 2 MODEL.tgx is invalid; 6 the function holds an op or a
value ONNX export does not write (the message names the node and the op); nothing is written.
)";

#if TGX_ONNX
int onnx_command(const std::vector<std::string>& args) {
  const ParsedArgs a = parse_args("onnx", args,
                                  {{"-o", true}, {"--output", true}, {"--graph-name", true}, {"--variables-as-inputs", false}});
  if (a.positional().size() != 1)
    usage_error("onnx", "expected one model file, got " + std::to_string(a.positional().size()) +
                            " arguments; usage: tgx onnx MODEL.tgx -o MODEL.onnx");
  std::optional<std::string> out = a.value("--output");
  if (a.has("-o")) out = a.value("-o");
  if (!out) usage_error("onnx", "no output file; give one with -o MODEL.onnx");
  const tg::LoadedFunction fn = load_model("onnx", a.positional()[0]);
  tg::OnnxOptions options;
  if (auto name = a.value("--graph-name")) options.graph_name = *name;
  options.variables_as_inputs = a.has("--variables-as-inputs");
  std::vector<std::string> written;
  try {
    written = tg::export_onnx(*out, fn, options);
  } catch (const tg::ValueError& e) {
    throw Failure(kNotExportable, e.what());
  }
  for (const std::string& p : written)
    std::cout << "wrote " << p << " (ONNX opset " << tg::kOnnxOpset << ", IR version " << tg::kOnnxIrVersion << ")\n";
  return kOk;
}
#else
int onnx_command(const std::vector<std::string>&) {
  throw Failure(kNotExportable, "this tgx was built without ONNX export (tracegraph::onnx); build tracegraph with "
                                "-DTG_ONNX=ON (apt-get install libonnx-dev libprotobuf-dev protobuf-compiler)");
}
#endif

}  // namespace tgx
