// onnx_table: writes docs/onnx.md, how tg::export_onnx writes each registry op and which ONNX
// ops tg::import_onnx reads, from the exporter's and the importer's own tables
// (src/onnx_io/onnx_rules.cpp, onnx_import_rules.cpp) and the registry, so the page cannot drift
// from the code.
//
//   onnx_table                 print the page
//   onnx_table --check FILE    exit 1 (saying how to regenerate) unless FILE holds the page
//   onnx_table --write FILE    write the page to FILE
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "common/generated_page.h"
#include "onnx_io/onnx_import.h"
#include "onnx_io/onnx_rules.h"
#include "ops/op.h"
#include "tracegraph/onnx.h"

namespace {

using namespace tg::detail;

// What tg::import_onnx reads: the importer's table, with the rules every row shares.
std::string import_section() {
  std::ostringstream rows;
  std::size_t n = 0;
  for (const onnx_import::ImportRule& r : onnx_import::import_rules()) {
    rows << "| " << r.op_type << " | " << r.since << " | " << (*r.notes ? r.notes : "-") << " |\n";
    ++n;
  }
  std::ostringstream out;
  out << "\n## Import: the ONNX ops tg::import_onnx reads\n\n"
      << "`tg::import_onnx(path, options)` and `tgx` (for a `.onnx` file) read an ONNX model (IR version 3\n"
      << "to 10, opset 7 to 21 of the default domain) into a `tg::LoadedFunction`: one positional tensor\n"
      << "per graph input, named symbolic dims and dims without a value as None, the graph's outputs as\n"
      << "its results. The graph is traced once through tracegraph's ops (the rows below) into one\n"
      << "concrete function, which runs, differentiates and saves like a traced one; with\n"
      << "`OnnxImportOptions::initializers_as_variables` the float initializers become Variables that a\n"
      << "`GradientTape` in a `tg::function` can fine-tune. ONNX's Conv and pooling are NCHW and\n"
      << "tracegraph's kernels NHWC: their outputs are kept NHWC, and BatchNormalization, the elementwise\n"
      << "ops, Concat, Reduce*, GlobalAveragePool and Shape read such values as they are (axes mapped, a\n"
      << "(C, 1, 1) constant as (C,)); any other op and the graph's outputs read the NCHW value, one\n"
      << "transpose per value. A CNN traces with a transpose at its input and, at most, one before its\n"
      << "classifier.\n\n"
      << "The file is trusted in nothing: a file that is not a ModelProto, a truncated one, a tensor whose\n"
      << "data does not match its dims and type, an unknown data type, a value defined twice or read\n"
      << "before anything defines it, a cycle, or a size beyond `OnnxImportOptions`' limits is a\n"
      << "`tg::FormatError` naming the part of the model. Refused with a `tg::ValueError` naming the op\n"
      << "type, the node and what to do: ops not in the table (every one the model uses, listed at\n"
      << "once), nodes of other domains, data kept in external files (a model is read on its own, never\n"
      << "files it names), types tracegraph does not compute in (float16, bfloat16, int8, int16,\n"
      << "uint16/32/64, complex, strings), sparse tensors, and any attribute a rule does not read: an\n"
      << "attribute is honoured or refused, never ignored. Values a rule needs while importing (Reshape's\n"
      << "shape, Slice's starts, the axes) must be constants or computed from static dims.\n\n"
      << "If and Loop become `tg::cond` and `tg::while_loop` nodes (a Loop's scan outputs `tg::TensorArray`s),\n"
      << "so imported control flow runs in the graph and differentiates as tracegraph's own does. Their\n"
      << "sub-graphs are validated with the model: they read the enclosing graphs' values by name (and the\n"
      << "enclosing graph orders its nodes by those reads too); a sub-graph that defines an enclosing name\n"
      << "again, or sub-graphs nested deeper than `OnnxImportOptions::max_graph_depth`, are a\n"
      << "`tg::FormatError`, and `max_nodes` counts the nodes of every graph.\n\n"
      << n << " ONNX ops, each read from the opset in the second column on:\n\n"
      << "| ONNX op | from opset | notes |\n|---|---|---|\n"
      << rows.str();
  return out.str();
}

std::string page() {
  std::ostringstream rows;
  std::size_t written = 0, refused = 0;
  for (std::size_t i = 0; i < kNumOps; ++i) {
    const auto op = static_cast<OpId>(i);
    const OpDef& def = op_def(op);
    if (const onnx_export::OnnxRule* r = onnx_export::onnx_rule(op)) {
      rows << "| `" << def.name << "` | " << r->onnx << " | " << (*r->notes ? r->notes : "-") << " |\n";
      ++written;
    } else {
      const std::string why = onnx_export::onnx_refusal(op);
      rows << "| `" << def.name << "` | refused | " << (why.empty() ? "no rule yet" : why) << " |\n";
      ++refused;
    }
  }
  std::ostringstream out;
  out << "# ONNX export and import\n\n"
      << "<!-- Generated from src/onnx_io/onnx_rules.cpp and onnx_import_rules.cpp by tools/onnx_table: do\n"
      << "     not edit. The test onnx_table_is_current fails when this file is stale; `cmake --build\n"
      << "     --preset release --target update_onnx_table` rewrites it. -->\n\n"
      << "`tg::export_onnx` (`include/tracegraph/onnx.h`) and `tgx onnx` write ONNX opset " << tg::kOnnxOpset
      << " models (IR version\n"
      << tg::kOnnxIrVersion << ") from graphs as traced. Each registry op, in registry order ([ops.md](ops.md)): the ONNX\n"
      << "op(s) it becomes and how its attributes map, or `refused` and why: a graph holding a refused op\n"
      << "is a `tg::ValueError` naming the node and the op, and nothing is written. " << written << " ops are\n"
      << "written, " << refused << " refused. tracegraph is NHWC (filters HWIO) and ONNX's Conv and pooling\n"
      << "NCHW (OIHW): those rows transpose in and out.\n\n"
      << "`tg::cond` and `tg::while_loop` (and `tg::for_range`) become `If` and `Loop` nodes whose branches\n"
      << "and body are sub-graphs reading the values of the enclosing graph by name (ONNX's outer scope).\n"
      << "tracegraph tests a loop's condition before each iteration and ONNX's `Loop` takes it as an input\n"
      << "and from the end of each iteration, so the condition is written twice: before the `Loop` on the\n"
      << "initial values, and at the end of the body on the new ones.\n\n"
      << "A Variable the function reads is an initializer named after it, holding its value at export (a\n"
      << "Variable argument: a graph input). A function that writes Variables (a train step) is refused,\n"
      << "unless `OnnxOptions::variables_as_inputs`: then, as TensorFlow's and PyTorch's exporters treat\n"
      << "state, one run of the model is one step, (inputs, Variables) -> (results, new values). Every\n"
      << "Variable the function reads or writes is a graph input named after it (no initializer), and each\n"
      << "one it writes is also an output `<input name>/new` with its value after the step, following\n"
      << "`output_0`, `output_1`, ... in the order of first write. A write inside a `tg::cond` branch or a\n"
      << "`tg::while_loop` body is refused either way.\n\n"
      << "| op | ONNX | attributes and notes |\n|---|---|---|\n"
      << rows.str() << import_section();
  return out.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 1 && argc != 3) {
    std::cerr << "usage: onnx_table [--check FILE | --write FILE]\n";
    return 2;
  }
  return tg::tools::print_write_or_check(page(), argc == 3 ? argv[1] : "", argc == 3 ? argv[2] : "",
                                         "the ONNX exporter's table (src/onnx_io/onnx_rules.cpp)",
                                         "update_onnx_table");
}
