// tgx run and tgx bench: call a saved function on .npy inputs.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <new>
#include <optional>
#include <stdexcept>

#include "cli.h"
#include "commands.h"
#include "compare.h"
#include "signature.h"
#include "tracegraph/config.h"
#include "tracegraph/errors.h"
#include "tracegraph/npy.h"
#include "tracegraph/ops.h"

namespace tgx {

const char* const kRunHelp = R"(Usage: tgx run MODEL.tgx --input NAME=FILE.npy [--input ...] [options]

Calls the function saved in MODEL.tgx once on tensors read from .npy files and reports each
output's dtype and shape; writes, prints or checks the outputs on request.

Inputs:
  --input NAME=FILE.npy   the tensor for parameter NAME (names as 'tgx inspect' shows them:
                          the function's arg_names, or arg0, arg1, ...). Repeat per parameter.
  --input FILE.npy        positional: fills the first parameter not named by another --input.
                          (A FILE whose text before '=' is not a parameter name is a path.)
  --cast                  convert an input whose dtype differs from its parameter's (NumPy
                          writes float64 and int64 by default) instead of failing the call
Outputs:
  --output-dir DIR        write output i as DIR/output_<i>.npy (DIR is created); outputs are
                          the function's result flattened in order (a tuple's elements, ...)
  --print                 print every output's values (long ones summarised as NumPy does)
  --expect KEY=FILE.npy   compare output KEY (output_<i>, out<i> or <i>) with FILE.npy;
  --expect FILE.npy       positional: the next output not named by another --expect
  --rtol R, --atol A      float outputs match when |got - expected| <= A + R * |expected|
                          elementwise (NaN matches NaN); defaults 1e-5 and 1e-8 as NumPy's
                          allclose. Integer and bool outputs must be equal. The worst
                          mismatch of each output is printed.
  -h, --help              print this help

Only functions whose parameters are all tensors can be run: tgx passes one tensor per
parameter (tg::LoadedFunction::call). A signature with a literal (a C++ number, string or
enum argument) or a structure needs a C++ caller.

Exit codes: 0 ok (and every --expect matched); 1 usage error (bad option, an input or expected
file that is missing or not a valid .npy, an unwritable --output-dir); 2 the model file is
invalid; 3 the call failed (the inputs fit no signature, the function cannot be called by tgx,
or it raised an error); 4 an output differs from its --expect file; 5 internal error.

Example:
  tgx run mlp.tgx --input x=batch.npy --output-dir out/ --expect output_0=want.npy --rtol 1e-4
)";

const char* const kBenchHelp = R"(Usage: tgx bench MODEL.tgx --input NAME=FILE.npy [--input ...] [options]

Calls the function saved in MODEL.tgx repeatedly on the same inputs and prints the latency of
one call (min, median, p90 and max, in microseconds, over the timed calls) and the throughput
(calls per second, and examples per second counting dim 0 of the first input as the batch).

Options:
  --input NAME=FILE.npy   as for 'tgx run' (also the positional form --input FILE.npy)
  --cast                  as for 'tgx run'
  --warmup N              untimed calls first (default 10): the first calls allocate buffers
  --iterations N          timed calls (default 100)
  --threads N             threads tracegraph computes on (tg::config::set_num_threads;
                          default: TG_NUM_THREADS, else the number of cores). Large
                          elementwise and fused kernels and matrix products split across them.
  -h, --help              print this help

Exit codes: 0 ok; 1 usage error; 2 the model file is invalid; 3 a call failed; 5 internal error.

Example:
  tgx bench mlp.tgx --input x=batch.npy --iterations 1000 --threads 1
)";

namespace {

const std::vector<OptionSpec> kInputOptions = {{"--input", true, true}, {"--cast"}};

// A function loaded, with one input tensor per parameter of the signature whose names are used.
struct PreparedCall {
  std::string path;
  tg::LoadedFunction fn;
  std::vector<Parameter> params;
  std::vector<tg::Tensor> inputs;        // in parameter order
  std::vector<std::string> input_files;  // where each came from
};

std::string parameter_list(const std::vector<Parameter>& params) {
  std::string s;
  for (const auto& p : params) s += (s.empty() ? "" : ", ") + p.name + ": " + describe(p.dtype, p.shape);
  return s.empty() ? "(none)" : s;
}

// The parameters tgx passes inputs to: the first concrete function whose parameters are all
// tensors (the others may differ in shapes; the call dispatches among them).
std::vector<Parameter> callable_parameters(const std::string& path, const tg::LoadedFunction& fn) {
  const auto cfs = fn.concrete_functions();
  if (cfs.empty()) throw Failure(kCallFailed, "'" + path + "' holds no concrete function to call");
  std::string why;
  for (std::size_t i = 0; i < cfs.size(); ++i) {
    std::vector<Parameter> params;
    try {
      params = parse_parameters(cfs[i].function_type());
    } catch (const std::invalid_argument& e) {
      why += "\n  [" + std::to_string(i) + "] " + e.what();
      continue;
    }
    const auto other = std::find_if(params.begin(), params.end(),
                                    [](const Parameter& p) { return p.kind != Parameter::Kind::kTensor; });
    if (other == params.end()) return params;
    why += "\n  [" + std::to_string(i) + "] parameter '" + other->name + "' is " + other->type;
  }
  throw Failure(kCallFailed, "function '" + fn.name() + "' in '" + path +
                                 "' cannot be called by tgx: each of its signatures has a parameter that is not a "
                                 "tensor:" + why +
                                 "\ntgx passes one tensor per parameter (tg::LoadedFunction::call). Call this "
                                 "function from C++ (tg::load, then call it with the literals, Variables or "
                                 "structures it was traced with), or save a variant whose parameters are all "
                                 "tensors.");
}

tg::Tensor read_npy(const std::string& command, const std::string& what, const std::string& file) {
  try {
    return tg::load_npy(file);
  } catch (const tg::Error& e) {
    usage_error(command, "cannot read " + what + " from '" + file + "': " + e.what());
  }
}

PreparedCall prepare(const std::string& command, const ParsedArgs& a) {
  if (a.positional().size() != 1)
    usage_error(command, "expected one model file, got " + std::to_string(a.positional().size()) +
                             " arguments; usage: tgx " + command + " MODEL.tgx --input NAME=FILE.npy ...");
  PreparedCall call{a.positional()[0], load_model(command, a.positional()[0]), {}, {}, {}};
  call.params = callable_parameters(call.path, call.fn);
  const std::size_t n = call.params.size();
  std::vector<std::optional<std::string>> files(n);

  std::vector<std::string> positional;
  for (const std::string& spec : a.values("--input")) {
    const auto eq = spec.find('=');
    std::size_t k = n;
    if (eq != std::string::npos)
      for (std::size_t i = 0; i < n; ++i)
        if (call.params[i].name == spec.substr(0, eq)) k = i;
    if (k == n) {
      positional.push_back(spec);
      continue;
    }
    if (files[k]) usage_error(command, "parameter '" + call.params[k].name + "' was given two inputs");
    files[k] = spec.substr(eq + 1);
  }
  std::size_t next = 0;
  for (const std::string& file : positional) {
    while (next < n && files[next]) ++next;
    if (next == n)
      usage_error(command, "'" + file + "' is one input too many: the function takes " + std::to_string(n) +
                               " parameter" + (n == 1 ? "" : "s") + " (" + parameter_list(call.params) +
                               ") and each already has one" +
                               (file.find('=') != std::string::npos ? "; '" + file.substr(0, file.find('=')) +
                                                                          "' is not a parameter name"
                                                                    : std::string()));
    files[next] = file;
  }
  std::string missing;
  for (std::size_t i = 0; i < n; ++i)
    if (!files[i]) missing += (missing.empty() ? "" : ", ") + call.params[i].name;
  if (!missing.empty())
    usage_error(command, "no input for parameter" + std::string(missing.find(',') == std::string::npos ? " " : "s ") +
                             missing + "; the function takes (" + parameter_list(call.params) +
                             "): give each as --input NAME=FILE.npy");

  for (std::size_t i = 0; i < n; ++i) {
    const Parameter& p = call.params[i];
    tg::Tensor t = read_npy(command, "the input for '" + p.name + "'", *files[i]);
    if (a.has("--cast") && t.dtype() != p.dtype) {
      try {
        t = tg::cast(t, p.dtype);
      } catch (const tg::Error& e) {
        usage_error(command, "--cast cannot convert '" + *files[i] + "' (" + tg::to_string(t.dtype()) + ") to " +
                                 tg::to_string(p.dtype) + " for '" + p.name + "': " + e.what());
      }
    }
    call.inputs.push_back(t);
    call.input_files.push_back(*files[i]);
  }
  return call;
}

// Calls once; a failure is a Failure(kCallFailed) with hints for the common causes.
tg::Outputs call_once(const PreparedCall& call) {
  try {
    return call.fn.call(call.inputs);
  } catch (const tg::Error& e) {
    std::string hints;
    for (std::size_t i = 0; i < call.params.size(); ++i) {
      const Parameter& p = call.params[i];
      const tg::Tensor& t = call.inputs[i];
      if (t.dtype() != p.dtype)
        hints += "\nhint: '" + call.input_files[i] + "' holds " + tg::to_string(t.dtype()) + " but parameter '" +
                 p.name + "' is " + tg::to_string(p.dtype) + ": save it as " + tg::to_string(p.dtype) +
                 " (numpy: a.astype(np." + tg::to_string(p.dtype) + ")) or pass --cast";
      else if (!t.shape().is_subtype_of(p.shape))
        hints += "\nhint: '" + call.input_files[i] + "' has shape " + t.shape().to_string() + " but parameter '" +
                 p.name + "' of the first signature takes " + p.shape.to_string();
    }
    throw Failure(kCallFailed, "calling '" + call.fn.name() + "' failed (" + e.code() + "): " + e.what() + hints);
  } catch (const std::bad_alloc&) {
    // The library raises tg::ResourceExhaustedError for memory it is refused; this is for
    // anything on the way there that did not (never an "internal error": the machine is full).
    throw Failure(kCallFailed, "calling '" + call.fn.name() +
                                   "' failed (ERESOURCE): the system refused memory the call needs; use smaller "
                                   "inputs (a smaller batch) or free memory");
  }
}

// --expect specs resolved to output indices.
struct Expectation {
  std::size_t output;
  std::string file;
  tg::Tensor expected;
};

// "output_3", "out3" or "3" -> 3.
std::optional<std::size_t> output_key(const std::string& key) {
  std::string digits = key;
  for (const char* prefix : {"output_", "out"})
    if (digits.rfind(prefix, 0) == 0) {
      digits = digits.substr(std::char_traits<char>::length(prefix));
      break;
    }
  if (digits.empty() || digits.size() > 6 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return std::nullopt;
  return static_cast<std::size_t>(std::stoul(digits));
}

std::vector<Expectation> read_expectations(const ParsedArgs& a) {
  std::vector<Expectation> out;
  std::vector<std::string> positional;
  for (const std::string& spec : a.values("--expect")) {
    const auto eq = spec.find('=');
    const auto key = eq == std::string::npos ? std::nullopt : output_key(spec.substr(0, eq));
    if (!key) {
      positional.push_back(spec);
      continue;
    }
    for (const auto& e : out)
      if (e.output == *key) usage_error("run", "output_" + std::to_string(*key) + " was given two --expect files");
    out.push_back({*key, spec.substr(eq + 1), {}});
  }
  std::size_t next = 0;
  for (const std::string& file : positional) {
    auto taken = [&](std::size_t i) {
      return std::any_of(out.begin(), out.end(), [&](const Expectation& e) { return e.output == i; });
    };
    while (taken(next)) ++next;
    out.push_back({next, file, {}});
  }
  for (auto& e : out) e.expected = read_npy("run", "the expected output_" + std::to_string(e.output), e.file);
  std::sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.output < y.output; });
  return out;
}

void write_outputs(const std::string& dir, const tg::Outputs& outputs) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) usage_error("run", "cannot create --output-dir '" + dir + "': " + ec.message());
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const std::string file = (std::filesystem::path(dir) / ("output_" + std::to_string(i) + ".npy")).string();
    if (outputs[i].dtype() == tg::string_) {
      std::cerr << "tgx run: warning: output_" << i << " is a string tensor, which .npy files cannot hold; "
                << "not written (use --print to see it)\n";
      continue;
    }
    try {
      tg::save_npy(file, outputs[i]);
    } catch (const tg::Error& e) {
      usage_error("run", "cannot write '" + file + "': " + e.what() + "; give a writable --output-dir");
    }
    std::cout << "wrote " << file << "\n";
  }
}

double percentile(const std::vector<double>& sorted, double q) {
  const double at = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(at);
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (at - static_cast<double>(lo));
}

std::string right(const std::string& s, std::size_t width) {
  return std::string(width > s.size() ? width - s.size() : 0, ' ') + s;
}

}  // namespace

int run_command(const std::vector<std::string>& args) {
  std::vector<OptionSpec> specs = kInputOptions;
  specs.insert(specs.end(), {{"--output-dir", true}, {"--expect", true, true}, {"--rtol", true}, {"--atol", true},
                             {"--print"}});
  const ParsedArgs a = parse_args("run", args, specs);
  Tolerance tol;
  tol.rtol = a.non_negative("--rtol", tol.rtol);
  tol.atol = a.non_negative("--atol", tol.atol);
  if ((a.has("--rtol") || a.has("--atol")) && !a.has("--expect"))
    usage_error("run", "--rtol and --atol set the tolerance of --expect; add --expect KEY=FILE.npy");
  const PreparedCall call = prepare("run", a);
  const std::vector<Expectation> expectations = read_expectations(a);

  const tg::Outputs outputs = call_once(call);
  std::cout << call.fn.name() << ": " << outputs.size() << " output" << (outputs.size() == 1 ? "" : "s") << "\n";
  for (std::size_t i = 0; i < outputs.size(); ++i)
    std::cout << "  output_" << i << ": " << describe(outputs[i].dtype(), outputs[i].shape()) << "\n";
  if (const auto dir = a.value("--output-dir")) write_outputs(*dir, outputs);
  if (a.has("--print"))
    for (std::size_t i = 0; i < outputs.size(); ++i) std::cout << "output_" << i << " = " << outputs[i] << "\n";

  std::size_t failed = 0;
  for (const Expectation& e : expectations) {
    if (e.output >= outputs.size())
      usage_error("run", "--expect names output_" + std::to_string(e.output) + " ('" + e.file + "') but '" +
                             call.fn.name() + "' returned " + std::to_string(outputs.size()) + " output" +
                             (outputs.size() == 1 ? "" : "s") +
                             (outputs.size() ? " (output_0 to output_" + std::to_string(outputs.size() - 1) + ")" : ""));
    const Comparison c = compare(outputs[e.output], e.expected, tol);
    std::cout << (c.ok ? "expect output_" : "MISMATCH output_") << e.output << " vs " << e.file << ": " << c.message
              << "\n";
    if (!c.ok) ++failed;
  }
  if (failed) {
    std::cerr << "tgx run: " << failed << " of " << expectations.size() << " checked output"
              << (expectations.size() == 1 ? "" : "s") << (failed == 1 ? " differs from its" : " differ from their")
              << " --expect file (see the MISMATCH lines above); loosen --rtol/--atol only if the "
              << "difference is expected\n";
    return kMismatch;
  }
  return kOk;
}

int bench_command(const std::vector<std::string>& args) {
  std::vector<OptionSpec> specs = kInputOptions;
  specs.insert(specs.end(), {{"--warmup", true}, {"--iterations", true}, {"--threads", true}});
  const ParsedArgs a = parse_args("bench", args, specs);
  const long long warmup = a.integer("--warmup", 10, 0, 1'000'000'000);
  const long long iterations = a.integer("--iterations", 100, 1, 1'000'000'000);
  const long long threads = a.integer("--threads", 0, 1, 1024);
  const PreparedCall call = prepare("bench", a);
  if (threads > 0) tg::config::set_num_threads(static_cast<int>(threads));

  for (long long i = 0; i < warmup; ++i) call_once(call);
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(iterations));
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  for (long long i = 0; i < iterations; ++i) {
    const auto t0 = Clock::now();
    const tg::Outputs out = call_once(call);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  const double total_s = std::chrono::duration<double>(Clock::now() - start).count();
  std::sort(us.begin(), us.end());

  std::cout << "model:      " << call.path << " (function '" << call.fn.name() << "')\n";
  for (std::size_t i = 0; i < call.inputs.size(); ++i)
    std::cout << (i ? "            " : "inputs:     ") << call.params[i].name << " = "
              << describe(call.inputs[i].dtype(), call.inputs[i].shape()) << " from " << call.input_files[i] << "\n";
  std::cout << "threads:    " << tg::config::num_threads() << " (elementwise, fused kernels and matrix products)\n"
            << "calls:      " << with_thousands(iterations) << " timed after " << with_thousands(warmup) << " warm-up\n\n";
  const std::size_t w = 12;
  std::cout << "latency (us)" << right("min", w) << right("median", w) << right("p90", w) << right("max", w) << "\n"
            << std::string(12, ' ') << right(format_number(us.front(), 4), w)
            << right(format_number(percentile(us, 0.5), 4), w) << right(format_number(percentile(us, 0.9), 4), w)
            << right(format_number(us.back(), 4), w) << "\n\n";
  const double calls_per_s = static_cast<double>(iterations) / std::max(total_s, 1e-9);
  std::cout << "throughput: " << with_thousands(static_cast<long long>(calls_per_s + 0.5)) << " calls/s";
  if (!call.inputs.empty() && call.inputs[0].rank() >= 1) {
    const int64_t batch = call.inputs[0].shape().dims()[0];
    std::cout << ", " << with_thousands(static_cast<long long>(calls_per_s * static_cast<double>(batch) + 0.5))
              << " examples/s (batch " << batch << " = dim 0 of " << call.params[0].name << ")";
  }
  std::cout << "\n";
  return kOk;
}

}  // namespace tgx
