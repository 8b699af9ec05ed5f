// Gradient rules of ops whose gradient is a formula differentiated by a tape of its own
// (layer_norm_grad's), registered by register_all_ops.
#pragma once

namespace tg::detail {

struct OpDef;

void register_composed_gradients(OpDef* table);

}  // namespace tg::detail
