#include "support/json_check.h"

#include <cctype>

namespace tg::testing {
namespace {
struct Parser {
  const std::string& s;
  std::size_t i = 0;
  std::string err;
  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r')) ++i;
  }
  bool fail(const std::string& why) {
    if (err.empty()) err = "at offset " + std::to_string(i) + ": " + why;
    return false;
  }
  bool lit(const char* w) {
    const std::string word(w);
    if (s.compare(i, word.size(), word) != 0) return fail("expected " + word);
    i += word.size();
    return true;
  }
  bool str() {
    if (i >= s.size() || s[i] != '"') return fail("expected a string");
    for (++i; i < s.size(); ++i) {
      const unsigned char c = static_cast<unsigned char>(s[i]);
      if (c == '"') return ++i, true;
      if (c < 0x20) return fail("control character in string");
      if (c == '\\') {
        if (++i >= s.size()) break;
        if (s[i] == 'u') {
          for (int k = 0; k < 4; ++k)
            if (++i >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[i]))) return fail("bad \\u escape");
        } else if (std::string("\"\\/bfnrt").find(s[i]) == std::string::npos) {
          return fail("bad escape");
        }
      }
    }
    return fail("unterminated string");
  }
  bool num() {
    const std::size_t start = i;
    if (i < s.size() && s[i] == '-') ++i;
    while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.' || s[i] == 'e' ||
                            s[i] == 'E' || s[i] == '+' || s[i] == '-'))
      ++i;
    return i > start ? true : fail("expected a value");
  }
  bool value() {
    ws();
    if (i >= s.size()) return fail("unexpected end");
    bool ok;
    switch (s[i]) {
      case '{': {
        ++i;
        ws();
        if (i < s.size() && s[i] == '}') { ++i; ok = true; break; }
        while (true) {
          ws();
          if (!str()) return false;
          ws();
          if (i >= s.size() || s[i] != ':') return fail("expected ':'");
          ++i;
          if (!value()) return false;
          ws();
          if (i < s.size() && s[i] == ',') { ++i; continue; }
          if (i < s.size() && s[i] == '}') { ++i; break; }
          return fail("expected ',' or '}'");
        }
        ok = true;
        break;
      }
      case '[': {
        ++i;
        ws();
        if (i < s.size() && s[i] == ']') { ++i; ok = true; break; }
        while (true) {
          if (!value()) return false;
          ws();
          if (i < s.size() && s[i] == ',') { ++i; continue; }
          if (i < s.size() && s[i] == ']') { ++i; break; }
          return fail("expected ',' or ']'");
        }
        ok = true;
        break;
      }
      case '"': ok = str(); break;
      case 't': ok = lit("true"); break;
      case 'f': ok = lit("false"); break;
      case 'n': ok = lit("null"); break;
      default: ok = num();
    }
    return ok;
  }
};
}  // namespace

std::string json_error(const std::string& text) {
  Parser p{text, 0, {}};
  if (!p.value()) return p.err;
  p.ws();
  if (p.i != text.size()) return "trailing characters at offset " + std::to_string(p.i);
  return "";
}

}  // namespace tg::testing
