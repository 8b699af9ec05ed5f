// The batch-splitting pass (split_batch.cpp), declared apart from passes.h.
#pragma once
#include "graph/graph_ir.h"

namespace tg::detail {

/// On more than one thread: long chains of row-wise ops over one batch of B >= 16 static rows
/// (2-D float32 products of those rows by a matrix computed elsewhere, elementwise ops and fused
/// nodes without reductions, column slices, concatenations along the columns: an unrolled
/// recurrent cell's steps and their gradient) become two pure cond nodes on a constant true
/// predicate, each running the chain on half of the rows, which the plan runs side by side
/// (runtime/executor.cpp). A chain is split when it has at least kMinSplitNodes nodes; the
/// chains are the row-wise nodes grouped so that no path leaves a group and comes back (a
/// forward pass and its gradient, between which the loss runs on all rows). Each half reads
/// its rows of the values entering it (a view); a value leaving it is the halves concatenated, or the
/// halves themselves in a concatenation of rows that reads it, whose other readers then read
/// their rows of that concatenation (a view) when it stacks only equal-shaped results of the
/// chain (a recurrent gradient's per-step values, stacked for the weight gradients and each also
/// summed for the bias).
/// Bit-identical: every row is computed by the same kernels in the same order (float32 products
/// only on the AVX-512 kernels, which sum each row alone). Returns the number of chains split.
int split_batch_chains(GraphIR& g);

inline constexpr std::size_t kMinSplitNodes = 64;

}  // namespace tg::detail
