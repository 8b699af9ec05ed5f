// The composition root of the op registry: the one place that knows every op family. The
// registry (src/ops/registry.cpp) calls register_all_ops once, on first use; each family fills
// in its ops' shape rules, kernels and gradients next to the ops themselves. A new family adds
// one line here.
#include "autodiff/composed_gradients.h"
#include "control_flow/subgraph.h"
#include "ops/bf16_compute.h"
#include "ops/op.h"

namespace tg::detail {

void register_all_ops(OpDef* table) {
  register_elementwise_ops(table);
  register_reduce_ops(table);
  register_cross_entropy_ops(table);
  register_attention_ops(table);
  register_layer_norm_ops(table);
  register_composed_gradients(table);
  register_matmul_ops(table);
  register_conv_ops(table);
  register_pool_ops(table);
  register_shape_ops(table);
  register_runtime_shape_ops(table);
  register_sequence_ops(table);
  register_index_ops(table);
  register_state_ops(table);
  register_optimizer_update_ops(table);
  register_fused_ops(table);
  register_random_ops(table);
  register_remap_ops(table);
  register_nd_index_ops(table);
  register_math_ops(table);
  register_sort_ops(table);
  register_collective_ops(table);
  register_host_call_ops(table);
  register_control_flow_ops(table);
  register_tensor_array_ops(table);
  register_control_flow_gradients(table);
  register_bf16_rules(table);  // last: it wraps the entries the others filled in
}

}  // namespace tg::detail
