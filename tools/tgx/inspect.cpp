// tgx inspect and tgx validate: what a .tgx file holds, and whether it loads.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli.h"
#include "core/json.h"
#include "commands.h"
#include "signature.h"

namespace tgx {

const char* const kInspectHelp = R"(Usage: tgx inspect MODEL.tgx [--json | --dot [--function N]]

Loads MODEL.tgx (with every check tg::load makes) and prints what it holds: the function's
name, the tracegraph version that wrote it, every signature (one per concrete function, with
the node count of its graph as saved and after the optimiser), and every Variable (name,
dtype, shape).

Options:
  --json        print the same as one JSON document (schema "tgx-inspect/1", docs/tgx.md)
  --dot         print the optimised graph of each concrete function in Graphviz DOT, e.g.
                  tgx inspect model.tgx --dot --function 0 | dot -Tsvg > graph.svg
  --function N  with --dot: only concrete function N (0-based, as listed by tgx inspect)
  -h, --help    print this help

Exit codes: 0 printed; 1 usage error (bad option, no such file); 2 the file is not a valid
.tgx file (the error names the section and byte offset); 5 internal error.
)";

const char* const kValidateHelp = R"(Usage: tgx validate MODEL.tgx

Loads MODEL.tgx with every check tg::load makes (the header, each section's CRC32 checksum, the
manifest, every graph against the op registry, the verifier and every op's shape rule, the
Variables' and constants' sizes) and prints "ok" with a one-line summary.
Nothing in the file is run.

Options:
  -h, --help    print this help

Exit codes: 0 the file is valid; 1 usage error (no such file); 2 the file is invalid: the error
(on stderr) names the section and the byte offset where reading failed; 5 internal error.
)";

namespace {

using tg::detail::json_string;

// [2, null, 4], or null for an unknown rank.
std::string json_shape(const tg::TensorShape& shape) {
  if (!shape.has_rank()) return "null";
  std::string s = "[";
  const auto& dims = shape.dims();
  for (std::size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + (dims[i] == tg::None ? std::string("null") : std::to_string(dims[i]));
  return s + "]";
}

// The parameters of a concrete function, or nullopt with the reason when its type text cannot
// be read (inspect still shows the signature itself).
std::optional<std::vector<Parameter>> parameters_of(const tg::ConcreteFunction& cf) {
  try {
    return parse_parameters(cf.function_type());
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
}

std::string plural(std::size_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

int64_t elements_of(const tg::Variable& v) {
  const auto n = v.shape().num_elements();
  return n < 0 ? 0 : n;
}

void print_json(const std::string& path, uintmax_t bytes, const tg::LoadedFunction& fn) {
  std::ostringstream os;
  os << "{\n  \"schema\": \"tgx-inspect/1\",\n  \"file\": " << json_string(path) << ",\n  \"file_bytes\": " << bytes
     << ",\n  \"name\": " << json_string(fn.name()) << ",\n  \"producer\": " << json_string(fn.producer())
     << ",\n  \"signatures\": [";
  const auto sigs = fn.signatures();
  for (std::size_t i = 0; i < sigs.size(); ++i) os << (i ? ", " : "") << "\n    " << json_string(sigs[i]);
  os << (sigs.empty() ? "]" : "\n  ]") << ",\n  \"variables\": [";
  const auto vars = fn.variables();
  for (std::size_t i = 0; i < vars.size(); ++i)
    os << (i ? "," : "") << "\n    {\"name\": " << json_string(vars[i].name()) << ", \"dtype\": "
       << json_string(tg::to_string(vars[i].dtype())) << ", \"shape\": " << json_shape(vars[i].shape())
       << ", \"elements\": " << elements_of(vars[i]) << "}";
  os << (vars.empty() ? "]" : "\n  ]") << ",\n  \"concrete_functions\": [";
  const auto cfs = fn.concrete_functions();
  for (std::size_t i = 0; i < cfs.size(); ++i) {
    os << (i ? "," : "") << "\n    {\n      \"index\": " << i << ",\n      \"signature\": "
       << json_string(i < sigs.size() ? sigs[i] : cfs[i].function_type()) << ",\n      \"parameters\": ";
    const auto params = parameters_of(cfs[i]);
    if (!params) {
      os << "null";
    } else {
      os << "[";
      for (std::size_t k = 0; k < params->size(); ++k) {
        const Parameter& p = (*params)[k];
        os << (k ? "," : "") << "\n        {\"name\": " << json_string(p.name) << ", \"kind\": "
           << json_string(kind_name(p.kind)) << ", \"type\": " << json_string(p.type);
        if (p.kind == Parameter::Kind::kTensor || p.kind == Parameter::Kind::kVariable)
          os << ", \"dtype\": " << json_string(tg::to_string(p.dtype)) << ", \"shape\": " << json_shape(p.shape);
        os << "}";
      }
      os << (params->empty() ? "]" : "\n      ]");
    }
    os << ",\n      \"nodes\": " << cfs[i].graph().nodes().size()
       << ",\n      \"optimized_nodes\": " << cfs[i].optimized_graph().nodes().size() << "\n    }";
  }
  os << (cfs.empty() ? "]" : "\n  ]") << "\n}\n";
  std::cout << os.str();
}

void print_text(const std::string& path, uintmax_t bytes, const tg::LoadedFunction& fn) {
  std::cout << "file:      " << path << " (" << with_thousands(static_cast<long long>(bytes)) << " bytes)\n"
            << "function:  " << fn.name() << "\n"
            << "producer:  " << fn.producer() << "\n";
  const auto vars = fn.variables();
  int64_t total = 0;
  std::size_t name_width = 4, dtype_width = 5;
  for (const auto& v : vars) {
    total += elements_of(v);
    name_width = std::max(name_width, v.name().size());
    dtype_width = std::max(dtype_width, tg::to_string(v.dtype()).size());
  }
  std::cout << "\nvariables (" << vars.size() << ", " << with_thousands(total) << " elements):\n";
  if (vars.empty()) std::cout << "  (none)\n";
  auto pad = [](const std::string& s, std::size_t w) { return s + std::string(w > s.size() ? w - s.size() : 0, ' '); };
  if (!vars.empty()) std::cout << "  " << pad("name", name_width) << "  " << pad("dtype", dtype_width) << "  shape\n";
  for (const auto& v : vars)
    std::cout << "  " << pad(v.name(), name_width) << "  " << pad(tg::to_string(v.dtype()), dtype_width) << "  "
              << v.shape().to_string() << "\n";
  const auto sigs = fn.signatures();
  const auto cfs = fn.concrete_functions();
  std::cout << "\nsignatures (" << plural(cfs.size(), "concrete function") << "):\n";
  const auto& uses = fn.variable_uses();
  // "w, b, argument 0": Variables by name, Variable arguments by alias id.
  auto names = [&](const std::vector<std::size_t>& file, const std::vector<std::size_t>& args) {
    std::string s;
    for (std::size_t v : file) s += (s.empty() ? "" : ", ") + vars[v].name();
    for (std::size_t a : args) s += (s.empty() ? "" : ", ") + std::string("argument Variable ") + std::to_string(a);
    return s.empty() ? std::string("none") : s;
  };
  for (std::size_t i = 0; i < cfs.size(); ++i) {
    std::cout << "  [" << i << "] " << (i < sigs.size() ? sigs[i] : cfs[i].function_type()) << "\n"
              << "      nodes: " << cfs[i].graph().nodes().size() << " as saved, "
              << cfs[i].optimized_graph().nodes().size() << " optimised\n";
    if (i < uses.size())
      std::cout << "      reads: " << names(uses[i].reads, uses[i].argument_reads) << "\n"
                << "      writes: " << names(uses[i].writes, uses[i].argument_writes) << "\n";
  }
}

}  // namespace

int inspect_command(const std::vector<std::string>& args) {
  const ParsedArgs a = parse_args("inspect", args, {{"--json"}, {"--dot"}, {"--function", true}});
  if (a.positional().size() != 1)
    usage_error("inspect", "expected one model file, got " + std::to_string(a.positional().size()) +
                               " arguments; usage: tgx inspect MODEL.tgx [--json | --dot]");
  if (a.has("--json") && a.has("--dot"))
    usage_error("inspect", "--json and --dot print different documents; give one of them");
  if (a.has("--function") && !a.has("--dot")) usage_error("inspect", "--function selects a graph for --dot; add --dot");
  const std::string& path = a.positional()[0];
  const tg::LoadedFunction fn = load_model("inspect", path);
  std::error_code ec;
  const uintmax_t bytes = std::filesystem::file_size(path, ec);

  if (a.has("--dot")) {
    const auto cfs = fn.concrete_functions();
    const auto sigs = fn.signatures();
    const long long last = static_cast<long long>(cfs.size()) - 1;
    if (a.has("--function") && last < 0) usage_error("inspect", "'" + path + "' has no concrete functions");
    const long long only = a.integer("--function", -1, 0, last);
    for (std::size_t i = 0; i < cfs.size(); ++i) {
      if (only >= 0 && static_cast<long long>(i) != only) continue;
      // A comment line per graph: several digraphs in one stream are valid DOT input.
      const std::string dot = cfs[i].optimized_graph().to_dot();
      std::cout << "// concrete function " << i << ": " << (i < sigs.size() ? sigs[i] : cfs[i].function_type())
                << "\n" << dot << (dot.empty() || dot.back() != '\n' ? "\n" : "");
    }
    return kOk;
  }
  if (a.has("--json")) {
    print_json(path, ec ? 0 : bytes, fn);
  } else {
    print_text(path, ec ? 0 : bytes, fn);
  }
  return kOk;
}

int validate_command(const std::vector<std::string>& args) {
  const ParsedArgs a = parse_args("validate", args, {});
  if (a.positional().size() != 1)
    usage_error("validate", "expected one model file, got " + std::to_string(a.positional().size()) +
                                " arguments; usage: tgx validate MODEL.tgx");
  const std::string& path = a.positional()[0];
  const tg::LoadedFunction fn = load_model("validate", path);
  std::size_t nodes = 0;
  for (const auto& cf : fn.concrete_functions()) nodes += cf.graph().nodes().size();
  std::error_code ec;
  const uintmax_t bytes = std::filesystem::file_size(path, ec);
  std::cout << "ok: " << path << ": function '" << fn.name() << "' by " << fn.producer() << ", "
            << plural(fn.concrete_functions().size(), "concrete function") << ", "
            << plural(fn.variables().size(), "Variable") << ", " << plural(nodes, "graph node") << ", "
            << with_thousands(static_cast<long long>(ec ? 0 : bytes))
            << (is_onnx_model(path) ? " bytes, ONNX model checked\n" : " bytes, checksums verified\n");
  return kOk;
}

}  // namespace tgx
