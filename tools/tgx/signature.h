// The parameters of a concrete function, read back from its FunctionType text.
//
// The library gives a concrete function's parameters only as text (function_type(),
// "(x: TensorSpec(shape=(None, 4), dtype=tg.float32, name=None), n: Literal[2]) -> ..."), so
// tgx parses it. Quoted text (string literals, spec names) is skipped whole; the library does
// not escape quotes inside it, so a name or string literal containing "'" cannot be parsed.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "tracegraph/dtype.h"
#include "tracegraph/shape.h"

namespace tgx {

struct Parameter {
  enum class Kind { kTensor, kLiteral, kVariable, kOther };
  std::string name;  // "x", or "arg0" when the function was given no arg_names
  std::string type;  // the trace type as printed: "TensorSpec(...)", "Literal[2]", ...
  Kind kind = Kind::kOther;
  tg::DType dtype = tg::DType::Float32;                        // kTensor and kVariable
  tg::TensorShape shape = tg::TensorShape::unknown_rank();     // kTensor and kVariable
};

/// The parameters of `function_type`, in order. Throws std::invalid_argument (saying where)
/// when the text is not of the form the library prints.
std::vector<Parameter> parse_parameters(const std::string& function_type);

/// "float32" -> tg::float32; nullopt for anything else.
std::optional<tg::DType> parse_dtype(const std::string& name);
/// "(None, 4)", "()", "(3,)", "<unknown>"; nullopt when malformed.
std::optional<tg::TensorShape> parse_shape(const std::string& text);

/// "tensor", "literal", "variable", "other".
const char* kind_name(Parameter::Kind kind);
/// "float32 (None, 4)".
std::string describe(tg::DType dtype, const tg::TensorShape& shape);

}  // namespace tgx
