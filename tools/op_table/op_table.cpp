// op_table: writes docs/ops.md, the table of every registry op, from src/ops/ops.def itself, so
// the list in the docs cannot drift from the code. The op data (name, inputs, traits, serial,
// attributes) comes from the compiled registry table; the family headings come from the comment
// lines ("// family: ...") of ops.def, read from the file.
//
//   op_table OPS_DEF                 print the table
//   op_table OPS_DEF --check FILE    exit 1 (saying how to regenerate) unless FILE holds the table
//   op_table OPS_DEF --write FILE    write the table to FILE
#include <cstdint>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "common/generated_page.h"
#include "ops/op.h"
#include "kernels/simd_math.h"

namespace {

using namespace tg::detail;

struct OpRow {
  const char* id;
  const char* name;
  int arity;
  uint32_t traits;
  int serial;
  const char* attrs;
};

constexpr OpRow kOps[] = {
#define TG_OP(id, name, arity, traits, serial, attrs) {#id, name, arity, traits, serial, #attrs},
#include "ops/ops.def"
#undef TG_OP
};

std::string trait_words(uint32_t t) {
  std::string s;
  auto add = [&](uint32_t bit, const char* word) {
    if (!(t & bit)) return;
    if (!s.empty()) s += ", ";
    s += word;
  };
  add(kElementwise, "elementwise (fusable)");
  add(kCommutative, "commutative");
  add(kInPlace, "may reuse an input buffer");
  add(kView, "view of input 0");
  add(kOwnOutputs, "makes its outputs");
  add(kStateful, "stateful (kept in order)");
  add(kSubgraphs, "sub-graphs");
  add(kReadsVariable, "reads Variables");
  add(kWritesVariable, "writes Variables");
  add(kCreatesVariable, "creates Variables");
  add(kRandom, "draws random numbers");
  add(kCollective, "talks to other ranks");
  add(kPrints, "prints");
  return s.empty() ? "-" : s;
}

// The op's vectorised float32 routine and its error bounds (simd_math_formulas.h's list), or "".
std::string routine_words(std::string_view id) {
  std::ostringstream s;
#define TG_ROUTINE_WORDS(Op, F, routine, avx512, avx2, scalar)                                   \
  if (id == #Op)                                                                                 \
    s << "vectorised float32 (`" #routine "`, at most " << avx512 << " / " << avx2 << " / " << scalar \
      << " ULP on AVX-512 / AVX2 / scalar)";
  TG_SIMD_MATH_ROUTINES(TG_ROUTINE_WORDS)
#undef TG_ROUTINE_WORDS
  return s.str();
}

std::string gradient_word(uint32_t t) {
  if (t & kDifferentiable) return "rule";
  if (t & kNotDifferentiable) return "none";
  return "-";
}

// The family of each op: the "// family: <name>" line above it in ops.def.
std::map<std::string, std::string> families(const std::string& path, std::vector<std::string>& order) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  const std::string marker = "// family: ";
  std::map<std::string, std::string> family;
  std::string line, current;
  while (std::getline(in, line)) {
    if (line.rfind(marker, 0) == 0) current = line.substr(marker.size());
    if (line.rfind("TG_OP(", 0) != 0) continue;
    const auto q0 = line.find('"'), q1 = line.find('"', q0 + 1);
    const std::string name = line.substr(q0 + 1, q1 - q0 - 1);
    if (current.empty()) throw std::runtime_error("op '" + name + "' comes before any '" + marker + "' line");
    family[name] = current;
    order.push_back(name);
  }
  return family;
}

std::string table(const std::string& ops_def) {
  std::vector<std::string> order;
  const auto family = families(ops_def, order);
  std::map<std::string, const OpRow*> by_name;
  for (const OpRow& op : kOps) by_name[op.name] = &op;
  if (order.size() != std::size(kOps) || by_name.size() != order.size())
    throw std::runtime_error(ops_def + " lists " + std::to_string(order.size()) + " ops but the build has " +
                             std::to_string(std::size(kOps)) + ": is it the ops.def this program was built from?");
  std::ostringstream out;
  out << "# The op registry\n\n"
      << "<!-- Generated from src/ops/ops.def by tools/op_table: do not edit. The test op_table_is_current fails\n"
      << "     when this file is stale; `cmake --build --preset release --target update_op_table` rewrites it. -->\n\n"
      << "Every op tracegraph has, in registry order: " << std::size(kOps) << " ops. Each runs eagerly, traced and\n"
      << "optimised through the same kernel. Columns: the op's registry name (usually its public function\n"
      << "is `tg::<name>`; docs/user-guide.md lists the functions, and the internal ops are made by gradient\n"
      << "rules or the optimiser); the stable\n"
      << "serial the export format stores; the number of tensor inputs (`n` for a list); the attribute\n"
      << "struct (fields: docs/export.md); whether it has a gradient rule (`rule`) or is marked as having\n"
      << "none (`none`, as in TF); and its traits, a stateful op's effects among them, and for an\n"
      << "activation with a vectorised float32 routine its worst error on each instruction-set path\n"
      << "(tests/ops/simd_math_test.cpp asserts it; float64 evaluates the same formula through libm).\n";
  std::string current;
  for (const std::string& name : order) {
    const auto it = by_name.find(name);
    if (it == by_name.end()) throw std::runtime_error(ops_def + " has op '" + name + "', which the build does not");
    const OpRow& op = *it->second;
    const std::string& h = family.at(name);
    if (h != current) {
      out << "\n## " << h << "\n\n| op | serial | inputs | attributes | gradient | traits |\n|---|---|---|---|---|---|\n";
      current = h;
    }
    out << "| `" << op.name << "` | " << op.serial << " | ";
    if (op.arity < 0) out << "n";
    else out << op.arity;
    out << " | ";
    if (std::string_view(op.attrs) == "NoAttrs") out << "-";
    else out << "`" << op.attrs << "`";
    const std::string routine = routine_words(op.id);
    out << " | " << gradient_word(op.traits) << " | " << trait_words(op.traits) << (routine.empty() ? "" : ", ")
        << routine << " |\n";
  }
  return out.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 4) {
    std::cerr << "usage: op_table OPS_DEF [--check FILE | --write FILE]\n";
    return 2;
  }
  try {
    return tg::tools::print_write_or_check(table(argv[1]), argc == 4 ? argv[2] : "", argc == 4 ? argv[3] : "",
                                           "the registry (src/ops/ops.def)", "update_op_table");
  } catch (const std::exception& e) {
    std::cerr << "op_table: " << e.what() << "\n";
    return 2;
  }
}
