// The retracing advice of one tg::function as data: which fixes apply, in which order, and
// which dead ends to name. Diagnostics::advise decides it once; a renderer writes it in the
// language of the function's frontend (C++ for tg::function, Python for the Python package's
// tg.function), in the warning, the retracing-limit message and the JSON report alike.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tracegraph/function.h"

namespace tg::detail {

/// The language a function's diagnostics write code and names in. The C++ API always uses
/// kCpp; the Python binding makes its functions' cores with kPython.
enum class AdviceLanguage { kCpp, kPython };

/// One fix, most effective first in Advice::fixes.
struct Fix {
  enum class Kind {
    kReadDimAsTensor,  // the body reads these dims as integers: read them as tensors
    kInputSignature,   // an input_signature of `signature` covers every call seen
    kLiteralAsTensor,  // pass tensors instead of these literals
    kSameObject,       // pass the same (or an equal) object
    kSameVariables,    // pass Variables of one dtype, shape and aliasing
    kReduceRetracing,  // reduce_retracing = true
    kPadOrBucket,      // pad or bucket these tensors to a few sizes
    kCastToOneDtype,   // cast these tensors to one dtype before the call
    kCreateOnce,       // create the function once, not per call
    kNoTraceLimit,     // max_traces = 0 for a service with a bounded cache
  };
  Kind kind;
  /// The argument paths it concerns ("x", "batch[1]"); kReadDimAsTensor: "dim 0 of 'x'".
  std::vector<std::string> paths;
  /// kLiteralAsTensor: per path, the type names of its literals (LiteralValue::cpp_type: the C++
  /// type, or the Python type a frontend's literals carry: "int", "float", "str").
  std::vector<std::vector<std::string>> literal_types;
  std::vector<TensorSpec> signature;  // kInputSignature
  int64_t max_cached_traces = 0;      // kNoTraceLimit
  int64_t evictions = 0;              // kNoTraceLimit
};

/// A change that looks like a fix and is not.
enum class DeadEnd {
  kRaiseLimit,          // raising max_traces (unbounded cache)
  kRaiseBoundedLimit,   // raising max_traces of a service with a bounded cache
  kRunEagerly,          // run_functions_eagerly(true)
  kReduceRetracingAlone // reduce_retracing while literals vary
};

struct Advice {
  std::vector<Fix> fixes;
  std::vector<DeadEnd> dead_ends;
  std::string root_cause;  // in the function's language
};

}  // namespace tg::detail
