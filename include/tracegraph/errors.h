// The typed exceptions tracegraph throws. Every one carries a stable code().
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace tg {

/// Base of every tracegraph error. code() is stable across versions and meant for tools.
class Error : public std::runtime_error {
 public:
  Error(std::string code, const std::string& message)
      : std::runtime_error(message), code_(std::move(code)), message_(message) {}
  const std::string& code() const noexcept { return code_; }
  const char* what() const noexcept override { return message_.c_str(); }
  /// Appends where the error happened to the message, after a space: tracegraph adds
  /// "(while tracing function 'f', trace 2, for (...))" to an error that escapes a traced body.
  /// Catch by reference, add, and rethrow with `throw;`: the type, code() and any other data of
  /// the error stay as they were.
  void add_context(const std::string& context) {
    message_ += ' ';
    message_ += context;
  }

 private:
  std::string code_;
  std::string message_;  // what(): the message with its context
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
/// Memory for a tensor could not be had (TF's ResourceExhaustedError): the request is larger
/// than the machine's physical memory, its size overflows, or the allocator refused it.
class ResourceExhaustedError : public Error {
 public:
  ResourceExhaustedError(const std::string& m, std::size_t bytes_requested)
      : Error("ERESOURCE", m), bytes_requested_(bytes_requested) {}
  /// The bytes asked for; SIZE_MAX when the size itself overflows.
  std::size_t bytes_requested() const noexcept { return bytes_requested_; }

 private:
  std::size_t bytes_requested_;
};
/// An operation ran on state that is not ready for it (TF's FailedPreconditionError): a
/// Variable read before its initial value - which depends on a traced function's inputs - was
/// computed by that function's first call.
class FailedPreconditionError : public Error {
 public:
  explicit FailedPreconditionError(const std::string& m) : Error("EPRECONDITION", m) {}
};
/// A file tracegraph reads (an exported .tgx model or checkpoint) is malformed, corrupt, or made
/// by a newer format version: `section()` names the part of the file ("header", "manifest",
/// "graphs", ...) and `offset()` the byte offset in the file where reading failed.
class FormatError : public Error {
 public:
  FormatError(const std::string& m, std::string section, uint64_t offset)
      : Error("EFORMAT", m), section_(std::move(section)), offset_(offset) {}
  const std::string& section() const noexcept { return section_; }
  uint64_t offset() const noexcept { return offset_; }

 private:
  std::string section_;
  uint64_t offset_;
};
/// A collective operation of a distributed job (tg::dist) did not complete within its timeout
/// (TF's DeadlineExceededError): a peer rank died, hangs, or stopped calling collectives.
/// `ranks()` lists the ranks that neither arrived nor answered, as far as this rank could tell.
class DeadlineExceededError : public Error {
 public:
  DeadlineExceededError(const std::string& m, std::vector<int> ranks)
      : Error("EDEADLINE", m), ranks_(std::move(ranks)) {}
  const std::vector<int>& ranks() const noexcept { return ranks_; }

 private:
  std::vector<int> ranks_;
};
/// The ranks of a distributed job reached different collectives at the same point of their
/// programs, or traced different sequences of collectives into the same function: left alone,
/// the job would hang or combine unrelated tensors. Raised on every rank; the message names the
/// function and the first difference.
class CollectiveMismatchError : public Error {
 public:
  explicit CollectiveMismatchError(const std::string& m) : Error("EDESYNC", m) {}
};
/// The communication layer of a distributed job failed (TF's UnavailableError): MPI reported an
/// error (a lost peer, a broken connection), or an earlier collective failed and left the
/// communicator unusable.
class UnavailableError : public Error {
 public:
  explicit UnavailableError(const std::string& m) : Error("EUNAVAILABLE", m) {}
};
/// A broken internal invariant: a tracegraph bug, never the user's fault.
class InternalError : public Error {
 public:
  explicit InternalError(const std::string& m) : Error("EINTERNAL", m) {}
};

}  // namespace tg
