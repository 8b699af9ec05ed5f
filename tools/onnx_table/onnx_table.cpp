// onnx_table: writes docs/onnx.md, how tg::export_onnx writes each registry op, from the
// exporter's own table (src/onnx_io/onnx_rules.cpp) and the registry, so the page cannot drift
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
#include "onnx_io/onnx_rules.h"
#include "ops/op.h"
#include "tracegraph/onnx.h"

namespace {

using namespace tg::detail;

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
  out << "# ONNX export: how each op is written\n\n"
      << "<!-- Generated from src/onnx_io/onnx_rules.cpp by tools/onnx_table: do not edit. The test\n"
      << "     onnx_table_is_current fails when this file is stale; `cmake --build --preset release --target\n"
      << "     update_onnx_table` rewrites it. -->\n\n"
      << "`tg::export_onnx` (`include/tracegraph/onnx.h`) and `tgx onnx` write ONNX opset " << tg::kOnnxOpset
      << " models (IR version\n"
      << tg::kOnnxIrVersion << ") from graphs as traced. Each registry op, in registry order ([ops.md](ops.md)): the ONNX\n"
      << "op(s) it becomes and how its attributes map, or `refused` and why: a graph holding a refused op\n"
      << "is a `tg::ValueError` naming the node and the op, and nothing is written. " << written << " ops are\n"
      << "written, " << refused << " refused. tracegraph is NHWC (filters HWIO) and ONNX's Conv and pooling\n"
      << "NCHW (OIHW): those rows transpose in and out.\n\n"
      << "| op | ONNX | attributes and notes |\n|---|---|---|\n"
      << rows.str();
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
