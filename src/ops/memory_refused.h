// The one message for memory the system refuses inside an op (a kernel's scratch, a table sized
// by a shape): what eager dispatch and a graph run raise for a std::bad_alloc, instead of letting
// it escape. Tensor buffers refuse a size they cannot have with their own error, naming it.
#pragma once
#include <cstdint>
#include <string>

#include "core/check.h"
#include "tracegraph/errors.h"

namespace tg::detail {

/// ResourceExhaustedError "[op] the system refused memory this op needs besides its results ...",
/// with `where` (", running node 'x' of a graph") after the op's part.
[[noreturn]] inline void throw_memory_refused(const std::string& op, const std::string& where = "") {
  throw ResourceExhaustedError(str_cat("[", op, "] the system refused memory this op needs besides its results (an "
                                       "allocation of unknown size)", where, "; use smaller shapes or batch sizes"),
                               SIZE_MAX);
}

}  // namespace tg::detail
