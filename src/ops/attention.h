// The attention op's internal entry point, for layers that hold their heads interleaved.
#pragma once
#include "tracegraph/ops.h"

namespace tg::detail {

/// tg::scaled_dot_product_attention (same checks, seed rules and arithmetic); with
/// heads_interleaved, q (batch, Tq, heads, D), k (batch, Tk, heads, D), v (batch, Tk, heads, Dv)
/// and the result (batch, Tq, heads, Dv): a (batch, T, heads * D) projection reshaped, with no
/// transposes. The mask still broadcasts to (batch, heads, Tq, Tk).
Tensor scaled_dot_product_attention_op(const Tensor& q, const Tensor& k, const Tensor& v,
                                       const AttentionOptions& options, bool heads_interleaved);

}  // namespace tg::detail
