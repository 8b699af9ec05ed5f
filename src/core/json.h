// JSON string literals, written once for the retracing report (src/trace/diagnostics.cpp) and
// `tgx inspect --json` (tools/tgx/inspect.cpp). Header-only: the tool links the library's public
// API and includes this one internal header.
#pragma once
#include <cstdio>
#include <string>
#include <string_view>

namespace tg::detail {

/// `s` as a JSON string: in quotes, with quotes, backslashes and control characters escaped.
inline std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

}  // namespace tg::detail
