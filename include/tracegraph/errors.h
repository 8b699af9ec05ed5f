// The typed exceptions tracegraph throws. Every one carries a stable code().
#pragma once
#include <stdexcept>
#include <string>

namespace tg {

/// Base of every tracegraph error. code() is stable across versions and meant for tools.
class Error : public std::runtime_error {
 public:
  Error(std::string code, const std::string& message)
      : std::runtime_error(message), code_(std::move(code)) {}
  const std::string& code() const noexcept { return code_; }

 private:
  std::string code_;
};

/// A value of the wrong kind: wrong dtype for an op, a call that does not bind to a signature.
class TypeError : public Error {
 public:
  explicit TypeError(const std::string& m) : Error("ETYPE", m) {}
};
/// A value of the right type but a wrong content (singleton Variable rule, bad config).
class ValueError : public Error {
 public:
  explicit ValueError(const std::string& m) : Error("EVALUE", m) {}
};
/// An op received arguments it cannot work on: shapes, axes, indices, dtypes mixed.
class InvalidArgumentError : public Error {
 public:
  explicit InvalidArgumentError(const std::string& m) : Error("EARG", m) {}
};
/// A symbolic tensor used outside the trace that created it.
class OutOfScopeError : public Error {
 public:
  explicit OutOfScopeError(const std::string& m) : Error("ESCOPE", m) {}
};
/// Tracing went wrong in a way that is the program's structure (e.g. recursive tracing).
class StagingError : public Error {
 public:
  explicit StagingError(const std::string& m) : Error("ESTAGE", m) {}
};
/// A function was traced more often than FunctionOptions::max_traces allows.
class RetracingLimitError : public Error {
 public:
  explicit RetracingLimitError(const std::string& m) : Error("ERTL", m) {}
};
/// A broken internal invariant: a tracegraph bug, never the user's fault.
class InternalError : public Error {
 public:
  explicit InternalError(const std::string& m) : Error("EINTERNAL", m) {}
};

}  // namespace tg
