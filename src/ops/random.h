// What the layers above the ops need to know of the random ops: how to repeat a stateful random
// op's draw exactly (a gradient recomputes the forward graph, and a mask drawn anew there would
// give silently wrong gradients), and which draws a graph's run made.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "core/thread_context.h"
#include "ops/op.h"

namespace tg::detail {

/// random_uniform, random_normal, truncated_normal: the ops that keep a RandomState.
bool is_stateful_random(OpId id);

/// Draw `draw` (an int64 scalar tensor, eager or symbolic) of the stateful random node (op,
/// attrs) on `shape` (its input 0), computed by the stateless op with the same distribution: the
/// values the node drew then, bit for bit, without touching its state.
Tensor repeat_random_draw(OpId op, const RandomAttrs& attrs, const Tensor& shape, const Tensor& draw);

/// While one is alive, the stateful random kernels that run on this thread note which draw of
/// which state they made (in run order). Graphs run their nodes on the calling thread, so a
/// call of a traced function under a tape learns the draws its backward must repeat.
class RandomDrawLog {
 public:
  RandomDrawLog();
  const std::vector<std::pair<const RandomState*, uint64_t>>& draws() const { return draws_; }

 private:
  friend void note_random_draw(const RandomState*, uint64_t);
  std::vector<std::pair<const RandomState*, uint64_t>> draws_;
  ScopedThreadValue<RandomDrawLog*> installed_;  // after draws_: uninstalled before they go
};

/// Notes a stateful random kernel's draw in this thread's RandomDrawLog, if one is alive.
void note_random_draw(const RandomState* state, uint64_t draw);

/// Called by RecorderScope when a trace starts on a thread with none running: ops without
/// an op seed take the trace's own sequence of op seeds (TF's per-graph seeds), so the same
/// function body gets the same seeds whenever and however often it is traced.
void restart_trace_op_seeds();

}  // namespace tg::detail
