#include "signature.h"

#include <cerrno>
#include <cstdlib>
#include <stdexcept>

namespace tgx {
namespace {

[[noreturn]] void bad(const std::string& text, std::size_t at, const std::string& what) {
  throw std::invalid_argument("cannot read the function type \"" + text + "\" at character " +
                              std::to_string(at) + ": " + what);
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// The text between `key` and `until` in `type`, searched from `from`.
std::optional<std::string> field(const std::string& type, const std::string& key, const std::string& until) {
  const auto begin = type.find(key);
  if (begin == std::string::npos) return std::nullopt;
  const auto from = begin + key.size();
  const auto end = type.find(until, from);
  if (end == std::string::npos) return std::nullopt;
  return type.substr(from, end - from);
}

// TensorSpec(shape=S, dtype=tg.D, name=N) and VariableSpec(shape=S, dtype=tg.D, alias_id=K).
void read_spec(Parameter& p, const std::string& text, std::size_t at) {
  const auto shape = field(p.type, "(shape=", ", dtype=tg.");
  const auto dtype = field(p.type, ", dtype=tg.", p.kind == Parameter::Kind::kTensor ? ", name=" : ", alias_id=");
  if (!shape || !dtype) bad(text, at, "parameter '" + p.name + "' has a spec without shape= and dtype=");
  const auto s = parse_shape(*shape);
  const auto d = parse_dtype(*dtype);
  if (!s) bad(text, at, "parameter '" + p.name + "' has the shape '" + *shape + "'");
  if (!d) bad(text, at, "parameter '" + p.name + "' has the dtype '" + *dtype + "'");
  p.shape = *s;
  p.dtype = *d;
}

}  // namespace

std::vector<Parameter> parse_parameters(const std::string& text) {
  if (text.empty() || text[0] != '(') bad(text, 0, "expected '(' to open the parameter list");
  std::vector<std::pair<std::string, std::size_t>> items;  // "name: type", where it starts
  int depth = 0;
  bool quoted = false;
  std::size_t start = 1, i = 1;
  for (;; ++i) {
    if (i >= text.size()) bad(text, i, quoted ? "a quote is not closed" : "the parameter list is not closed by ')'");
    const char c = text[i];
    if (quoted) {
      quoted = c != '\'';
    } else if (c == '\'') {
      quoted = true;
    } else if (c == '(' || c == '[' || c == '{') {
      ++depth;
    } else if ((c == ')' || c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (c == ')') {
      break;
    } else if (c == ',' && depth == 0) {
      items.emplace_back(text.substr(start, i - start), start);
      start = i + 1;
      if (start < text.size() && text[start] == ' ') ++start;
    }
  }
  if (i > start || !items.empty()) items.emplace_back(text.substr(start, i - start), start);

  std::vector<Parameter> params;
  for (const auto& [item, at] : items) {
    const auto colon = item.find(": ");
    if (colon == std::string::npos || colon == 0) bad(text, at, "expected 'name: type', got '" + item + "'");
    Parameter p;
    p.name = item.substr(0, colon);
    p.type = item.substr(colon + 2);
    if (starts_with(p.type, "TensorSpec(")) {
      p.kind = Parameter::Kind::kTensor;
      read_spec(p, text, at);
    } else if (starts_with(p.type, "VariableSpec(")) {
      p.kind = Parameter::Kind::kVariable;
      read_spec(p, text, at);
    } else if (starts_with(p.type, "Literal[")) {
      p.kind = Parameter::Kind::kLiteral;
    }
    params.push_back(std::move(p));
  }
  return params;
}

std::optional<tg::DType> parse_dtype(const std::string& name) {
  for (tg::DType d : {tg::float32, tg::float64, tg::int32, tg::int64, tg::bool_, tg::string_, tg::uint8, tg::bfloat16})
    if (tg::to_string(d) == name) return d;
  return std::nullopt;
}

std::optional<tg::TensorShape> parse_shape(const std::string& text) {
  if (text == "<unknown>") return tg::TensorShape::unknown_rank();
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') return std::nullopt;
  std::vector<int64_t> dims;
  std::size_t i = 1;
  const std::size_t end = text.size() - 1;
  while (i < end) {
    const auto comma = text.find(',', i);
    const std::string dim = text.substr(i, (comma == std::string::npos ? end : comma) - i);
    if (dim == "None") {
      dims.push_back(tg::None);
    } else {
      errno = 0;
      char* stop = nullptr;
      const long long v = std::strtoll(dim.c_str(), &stop, 10);
      if (dim.empty() || *stop != '\0' || errno == ERANGE || v < 0) return std::nullopt;
      dims.push_back(v);
    }
    if (comma == std::string::npos || comma >= end) break;
    i = comma + 1;
    if (i < end && text[i] == ' ') ++i;
  }
  tg::TensorShape shape(dims);
  // Round trip: rejects "(3)" for (3,) and other spellings the library never prints.
  if (shape.to_string() != text) return std::nullopt;
  return shape;
}

const char* kind_name(Parameter::Kind kind) {
  switch (kind) {
    case Parameter::Kind::kTensor: return "tensor";
    case Parameter::Kind::kLiteral: return "literal";
    case Parameter::Kind::kVariable: return "variable";
    case Parameter::Kind::kOther: return "other";
  }
  return "other";
}

std::string describe(tg::DType dtype, const tg::TensorShape& shape) {
  return tg::to_string(dtype) + " " + shape.to_string();
}

}  // namespace tgx
