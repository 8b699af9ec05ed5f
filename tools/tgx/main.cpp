// tgx: the command line for .tgx files (docs/tgx.md): inspect, validate, run, bench.
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "cli.h"
#include "commands.h"
#include "tracegraph/errors.h"

namespace {

const char* const kHelp = R"(Usage: tgx COMMAND [ARGS...]

Inspects, checks, runs and times functions saved with tg::save in .tgx files.

Commands:
  inspect MODEL.tgx [--json|--dot]       name, producer, signatures, Variables, graph sizes
  validate MODEL.tgx                     load with every check; "ok" or where the file is bad
  run MODEL.tgx --input NAME=FILE.npy    call once; write, print or --expect-check the outputs
  bench MODEL.tgx --input NAME=FILE.npy  call repeatedly; latency and throughput table
  onnx MODEL.tgx -o MODEL.onnx           write it as an ONNX model (ONNX Runtime runs it)

MODEL may also be an ONNX model (MODEL.onnx), read with tg::import_onnx when tgx is built with
tracegraph::onnx; it runs as a function saved with one concrete function.

'tgx COMMAND --help' describes each command. 'tgx --version' prints the version.

Exit codes (every command):
  0  success
  1  usage error: bad command line, missing file, an input/expected file that is not a .npy
  2  the model file is invalid (the message names the section and byte offset)
  3  a call failed: inputs fit no signature, or the function raised an error
  4  run --expect: an output differs from its expected file
  5  internal error (please report it)
  6  onnx: the function holds an op ONNX export does not write
)";

struct Command {
  const char* name;
  int (*run)(const std::vector<std::string>&);
  const char* help;
};

const Command kCommands[] = {
    {"inspect", tgx::inspect_command, tgx::kInspectHelp},
    {"validate", tgx::validate_command, tgx::kValidateHelp},
    {"run", tgx::run_command, tgx::kRunHelp},
    {"bench", tgx::bench_command, tgx::kBenchHelp},
    {"onnx", tgx::onnx_command, tgx::kOnnxHelp},
};

bool asks_for_help(const std::vector<std::string>& args) {
  for (const auto& a : args) {
    if (a == "--") return false;
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> all(argv + 1, argv + argc);
  if (all.empty()) {
    std::cerr << kHelp;
    return tgx::kUsage;
  }
  const std::string& name = all[0];
  if (name == "--help" || name == "-h" || name == "help") {
    if (all.size() > 1)
      for (const Command& c : kCommands)
        if (all[1] == c.name) {
          std::cout << c.help;
          return tgx::kOk;
        }
    std::cout << kHelp;
    return tgx::kOk;
  }
  if (name == "--version") {
    std::cout << "tgx (tracegraph " TGX_VERSION ")\n";
    return tgx::kOk;
  }
  const Command* command = nullptr;
  for (const Command& c : kCommands)
    if (name == c.name) command = &c;
  if (!command) {
    std::cerr << "tgx: unknown command '" << name << "'; expected one of inspect, validate, run, bench, onnx "
              << "(see 'tgx --help')\n";
    return tgx::kUsage;
  }
  const std::vector<std::string> args(all.begin() + 1, all.end());
  if (asks_for_help(args)) {
    std::cout << command->help;
    return tgx::kOk;
  }
  try {
    return command->run(args);
  } catch (const tgx::Failure& f) {
    std::cerr << "tgx " << name << ": error: " << f.what() << "\n";
    return f.code();
  } catch (const tg::ResourceExhaustedError& e) {
    // Out of memory is the machine's limit, not a bug: said as such, with the call's exit code
    // (tgx's memory goes to loading, reading inputs and calling; each reports its own first).
    std::cerr << "tgx " << name << ": error: out of memory (" << e.code() << "): " << e.what() << "\n";
    return tgx::kCallFailed;
  } catch (const std::bad_alloc&) {
    std::cerr << "tgx " << name << ": error: out of memory (ERESOURCE): the system refused memory tgx needs; "
              << "use smaller inputs or free memory\n";
    return tgx::kCallFailed;
  } catch (const tg::Error& e) {
    std::cerr << "tgx " << name << ": internal error (" << e.code() << "): " << e.what()
              << "\nThis is a bug in tgx or tracegraph; please report it with the command line.\n";
    return tgx::kInternal;
  } catch (const std::exception& e) {
    std::cerr << "tgx " << name << ": internal error: " << e.what()
              << "\nThis is a bug in tgx or tracegraph; please report it with the command line.\n";
    return tgx::kInternal;
  }
}
