// Internal invariant checks and error formatting helpers.
#pragma once
#include <sstream>
#include <string>

#include "tracegraph/errors.h"

namespace tg::detail {

// A uint8 element is a number in messages, not the character ostream would print for it.
template <class T>
const T& str_piece(const T& v) { return v; }
inline int str_piece(const unsigned char& v) { return v; }

template <class... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << str_piece(args));
  return os.str();
}

// Throws an error of type E whose message is "[op] " followed by the pieces.
template <class E, class... Args>
[[noreturn]] void op_error(const char* op, const Args&... args) {
  throw E(str_cat("[", op, "] ", args...));
}

}  // namespace tg::detail

// A broken invariant is a tracegraph bug: report it as tg::InternalError, never abort().
#define TG_CHECK(cond, ...)                                                                  \
  do {                                                                                       \
    if (!(cond))                                                                             \
      throw ::tg::InternalError(::tg::detail::str_cat("internal check failed: " #cond " at ", \
                                                      __FILE__, ":", __LINE__,               \
                                                      " " __VA_OPT__(, ) __VA_ARGS__));      \
  } while (0)
