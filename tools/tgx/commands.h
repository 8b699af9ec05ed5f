// The tgx subcommands. Each takes the arguments after its name, writes its results to stdout
// and returns the exit code; an error that ends it is thrown as a tgx::Failure.
#pragma once
#include <string>
#include <vector>

namespace tgx {

int inspect_command(const std::vector<std::string>& args);
int validate_command(const std::vector<std::string>& args);
int run_command(const std::vector<std::string>& args);
int bench_command(const std::vector<std::string>& args);
/// Built when tracegraph::onnx is (TG_ONNX); without it `tgx onnx` says how to get it.
int onnx_command(const std::vector<std::string>& args);

/// The --help text of each subcommand.
extern const char* const kInspectHelp;
extern const char* const kValidateHelp;
extern const char* const kRunHelp;
extern const char* const kBenchHelp;
extern const char* const kOnnxHelp;

}  // namespace tgx
