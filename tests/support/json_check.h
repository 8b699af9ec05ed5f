// A strict little JSON validator for tests (RFC 8259 syntax; no number range checks).
#pragma once
#include <string>

namespace tg::testing {
/// Empty if `text` is one valid JSON value, else where and why it is not.
std::string json_error(const std::string& text);
}  // namespace tg::testing
