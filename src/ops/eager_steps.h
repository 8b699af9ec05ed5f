// The fallback of a node that stands for several ops (fused_elementwise, matmul_epilogue,
// conv2d_epilogue) for the run-time shapes its own kernel does not cover, such as a None dim
// that broadcasts only at run time: the ops it stands for, run one by one through their own
// kernels as the unfused graph would run them, so the results are the unfused graph's.
#pragma once
#include <vector>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "ops/op.h"

namespace tg::detail {

/// One op of the fallback: `id`'s own kernel on eager `args` (run_op_eager); its one output.
inline Tensor run_step_eagerly(OpId id, const std::vector<Tensor>& args, const OpAttrs& attrs) {
  return run_op_eager(op_def(id), args, attrs).at(0);
}

/// Computes a node's results op by op and copies them into `out`, the node's outputs as
/// allocated from its inferred types. `steps(op)` is the node's ops over tensors: it calls
/// `op(id, args, attrs)` (run_step_eagerly) for each, in order, and returns the node's results,
/// which have the shapes and dtypes of `out` (checked).
template <class Steps>
void run_steps_eagerly(Steps&& steps, std::vector<Tensor>& out) {
  const std::vector<Tensor> results = steps(&run_step_eagerly);
  TG_CHECK(results.size() == out.size(), "a node's ops give ", results.size(), " results for its ", out.size(),
           " outputs");
  for (std::size_t k = 0; k < out.size(); ++k) {
    TG_CHECK(results[k].impl()->shape == out[k].impl()->shape && results[k].dtype() == out[k].dtype(), "output ", k,
             " is ", out[k].impl()->shape.to_string(), " ", to_string(out[k].dtype()), " but the node's ops give ",
             results[k].impl()->shape.to_string(), " ", to_string(results[k].dtype()));
    copy_elements(results[k], out[k]);
  }
}

}  // namespace tg::detail
