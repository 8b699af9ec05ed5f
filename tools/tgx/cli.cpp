#include "cli.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "tracegraph/errors.h"
#if TGX_ONNX
#include "tracegraph/onnx.h"
#endif

namespace tgx {

void usage_error(const std::string& command, const std::string& message) {
  throw Failure(kUsage, message + "\n(see 'tgx " + command + " --help')");
}

std::optional<std::string> ParsedArgs::value(const std::string& option) const {
  auto it = values_.find(option);
  if (it == values_.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> ParsedArgs::values(const std::string& option) const {
  auto it = values_.find(option);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

long long ParsedArgs::integer(const std::string& option, long long fallback, long long min, long long max) const {
  const auto text = value(option);
  if (!text) return fallback;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text->c_str(), &end, 10);
  if (text->empty() || *end != '\0' || errno == ERANGE || v < min || v > max)
    usage_error(command_, option + " expects a whole number from " + std::to_string(min) + " to " +
                              std::to_string(max) + ", got '" + *text + "'");
  return v;
}

double ParsedArgs::non_negative(const std::string& option, double fallback) const {
  const auto text = value(option);
  if (!text) return fallback;
  char* end = nullptr;
  const double v = std::strtod(text->c_str(), &end);
  if (text->empty() || *end != '\0' || !std::isfinite(v) || v < 0)
    usage_error(command_, option + " expects a finite number >= 0 (like 1e-5), got '" + *text + "'");
  return v;
}

ParsedArgs parse_args(const std::string& command, const std::vector<std::string>& args,
                      const std::vector<OptionSpec>& specs) {
  ParsedArgs out;
  out.command_ = command;
  auto known = [&] {
    std::string s;
    for (const auto& o : specs) s += (s.empty() ? "" : ", ") + o.name;
    return s;
  };
  bool options_done = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (options_done || a.size() < 2 || a[0] != '-') {
      out.positional_.push_back(a);
      continue;
    }
    if (a == "--") {
      options_done = true;
      continue;
    }
    const auto eq = a.find('=');
    const std::string name = a.substr(0, eq);
    const OptionSpec* spec = nullptr;
    for (const auto& o : specs)
      if (o.name == name) spec = &o;
    if (!spec) usage_error(command, "unknown option '" + name + "' for 'tgx " + command + "'; it accepts: " + known());
    if (!spec->repeatable && out.values_.count(name))
      usage_error(command, name + " was given twice; it takes one value (only --input and --expect repeat)");
    std::string v;
    if (spec->takes_value) {
      if (eq != std::string::npos) {
        v = a.substr(eq + 1);
      } else if (i + 1 < args.size()) {
        v = args[++i];
      } else {
        usage_error(command, name + " needs a value after it");
      }
      if (v.empty()) usage_error(command, name + " was given an empty value");
    } else if (eq != std::string::npos) {
      usage_error(command, name + " is a switch and takes no value, got '" + a + "'");
    }
    out.values_[name].push_back(v);
  }
  return out;
}

bool is_onnx_model(const std::string& path) {
  if (std::filesystem::path(path).extension() == ".onnx") return true;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  unsigned char head[8] = {};
  const std::size_t n = std::fread(head, 1, sizeof head, f);
  std::fclose(f);
  return n > 0 && head[0] == 0x08;
}

namespace {

tg::LoadedFunction import_model(const std::string& path) {
#if TGX_ONNX
  try {
    return tg::import_onnx(path);
  } catch (const tg::FormatError& e) {
    throw Failure(kInvalidFile, "'" + path + "' is not a valid ONNX model\n  part: " + e.section() + "\n  reason: " + e.what());
  } catch (const tg::Error& e) {
    throw Failure(kInvalidFile, "'" + path + "' could not be imported (" + e.code() + ")\n  reason: " + e.what());
  }
#else
  throw Failure(kInvalidFile, "'" + path + "' is an ONNX model, and this tgx was built without tracegraph::onnx; build "
                              "tracegraph with -DTG_ONNX=ON (Debian: libonnx-dev libprotobuf-dev protobuf-compiler)");
#endif
}

}  // namespace

tg::LoadedFunction load_model(const std::string& command, const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status))
    usage_error(command, "model file '" + path + "' does not exist; give the path of a .tgx file written by tg::save "
                         "or of an ONNX model");
  if (!std::filesystem::is_regular_file(status))
    usage_error(command, "'" + path + "' is not a regular file; give the path of a .tgx file written by tg::save");
  if (is_onnx_model(path)) return import_model(path);
  try {
    return tg::load(path);
  } catch (const tg::FormatError& e) {
    throw Failure(kInvalidFile, "'" + path + "' is not a valid .tgx file\n  section: " + e.section() +
                                    "\n  byte offset: " + std::to_string(e.offset()) + "\n  reason: " + e.what() +
                                    "\nThe file is damaged (truncated or changed after tg::save wrote it), was "
                                    "written by a newer tracegraph, or is not a .tgx file. Save it again.");
  } catch (const tg::Error& e) {
    // The loader runs the registry's shape rules and verifier: any refusal means the file.
    throw Failure(kInvalidFile, "'" + path + "' could not be loaded (" + e.code() + ")\n  reason: " + e.what());
  }
}

std::string with_thousands(long long n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string format_number(double v, int significant) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", significant, v);
  return buf;
}

}  // namespace tgx
