// Whether the trace recording on this thread also records ops whose inputs are all eager.
//
// A C++ trace computes such ops at trace time (a constant-only expression is a constant, and the
// C++ code may read it). A Python trace records them, as TensorFlow's graph mode does: inside a
// tf.function `tf.constant(1) + 1` is a graph tensor, a Python loop over constants grows the graph
// by its nodes (the guide's measure_graph_size), and AutoGraph converts `if`/`for` over them.
// The optimiser folds the constant nodes again, so the graph runs as fast either way.
#pragma once

#include "core/thread_context.h"

namespace tg::detail {

/// True while a trace that records every op runs on this thread (RecordEveryOpScope).
bool records_every_op();

/// Sets for a scope whether the trace being recorded on this thread records every op; the
/// function core sets it once per trace, from the traced function's language.
class RecordEveryOpScope {
 public:
  explicit RecordEveryOpScope(bool every_op);

 private:
  ScopedThreadValue<bool> every_op_;
};

}  // namespace tg::detail
