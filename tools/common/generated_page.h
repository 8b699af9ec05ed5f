// The one driver of the docs pages generated from the code (docs/ops.md by tools/op_table,
// docs/onnx.md by tools/onnx_table): print the page, write it, or check that a file holds it.
#pragma once
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

namespace tg::tools {

/// No mode: print `page`. "--write": write it to `file`. "--check": exit status 0 when `file`
/// holds it, else 1 with a line saying what the page is generated from (`source`) and the
/// build target that regenerates it.
inline int print_write_or_check(const std::string& page, const std::string& mode, const std::string& file,
                                const std::string& source, const std::string& target) {
  if (mode.empty()) {
    std::cout << page;
    return 0;
  }
  if (mode == "--write") {
    std::ofstream(file) << page;
    return 0;
  }
  std::ifstream in(file);
  std::stringstream have;
  have << in.rdbuf();
  if (mode == "--check" && have.str() == page) return 0;
  std::cerr << file << " does not match " << source << ". Regenerate it with\n"
            << "  cmake --build --preset release --target " << target << "\n";
  return 1;
}

}  // namespace tg::tools
