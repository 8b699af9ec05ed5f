// What every tgx subcommand shares: exit codes, the errors that end a command, the option
// parser and the model loader.
#pragma once
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tracegraph/export.h"

namespace tgx {

/// The process exit codes, stable for scripts (docs/tgx.md).
enum ExitCode : int {
  kOk = 0,
  kUsage = 1,        // a bad command line, or an input/expected .npy file that cannot be read
  kInvalidFile = 2,  // the model file is not a valid .tgx file (tg::FormatError and the like)
  kCallFailed = 3,   // the inputs fit no signature, the function cannot be called, or it threw
  kMismatch = 4,     // an output differs from its --expect file
  kInternal = 5,     // anything else: a tracegraph or tgx bug, an I/O failure writing results
  kNotExportable = 6,  // onnx: the function holds an op or a value ONNX export does not write
};

/// Ends a subcommand: main() prints `message` (lines; the first is the summary) to stderr,
/// prefixed with the command, and exits with `code`.
class Failure : public std::runtime_error {
 public:
  Failure(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ExitCode code() const noexcept { return code_; }

 private:
  ExitCode code_;
};

/// A usage error: the message, and the pointer to `tgx <command> --help`.
[[noreturn]] void usage_error(const std::string& command, const std::string& message);

/// One option a subcommand accepts.
struct OptionSpec {
  std::string name;          // "--input"
  bool takes_value = false;  // "--input VALUE" or "--input=VALUE"
  bool repeatable = false;
};

/// A command line split into options and positional arguments.
class ParsedArgs {
 public:
  bool has(const std::string& option) const { return values_.count(option) != 0; }
  /// The option's value (the last one when given twice), or nullopt.
  std::optional<std::string> value(const std::string& option) const;
  /// Every value of a repeatable option, in command-line order.
  std::vector<std::string> values(const std::string& option) const;
  const std::vector<std::string>& positional() const { return positional_; }

  /// An integer option in [min, max], or `fallback` when absent; a usage error otherwise.
  long long integer(const std::string& option, long long fallback, long long min, long long max) const;
  /// A finite number >= 0, or `fallback` when absent.
  double non_negative(const std::string& option, double fallback) const;

 private:
  friend ParsedArgs parse_args(const std::string&, const std::vector<std::string>&, const std::vector<OptionSpec>&);
  std::string command_;
  std::map<std::string, std::vector<std::string>> values_;  // a flag has one empty value
  std::vector<std::string> positional_;
};

/// Splits `args` (what follows the subcommand) by `specs`. "--" ends the options. Unknown
/// options, missing values and repeated non-repeatable options are usage errors.
ParsedArgs parse_args(const std::string& command, const std::vector<std::string>& args,
                      const std::vector<OptionSpec>& specs);

/// tg::load with every check (tg::import_onnx for an ONNX model, see is_onnx_model). A missing
/// path is a usage error; a file the loader refuses is a Failure with kInvalidFile whose message
/// names the section and byte offset (the part of the model, for ONNX).
tg::LoadedFunction load_model(const std::string& command, const std::string& path);
/// Whether load_model reads `path` as an ONNX model: named .onnx, or starting with the byte a
/// ModelProto starts with (ir_version, field 1) where a .tgx file starts with its magic.
bool is_onnx_model(const std::string& path);

/// "1,234,567": numbers people read in tables.
std::string with_thousands(long long n);
/// Short, fixed-width-friendly: "12.3", "0.0451", "1.23e+06".
std::string format_number(double v, int significant = 3);

}  // namespace tgx
