// The graph passes. Each is one free function over a graph, defined in its own file; the order
// they run in is in pipeline.cpp.
#pragma once
#include <memory>
#include <string>

#include "graph/graph_ir.h"

namespace tg::detail {

/// Removes nodes nothing depends on. Roots: function outputs, stateful ops (print, variable
/// ops) and placeholders (they are the function's inputs). Returns the number removed.
int eliminate_dead_code(GraphIR& g);
/// Merges stateless op nodes with the same op, attributes and inputs, and constants that are
/// the same tensor or equal small values. Returns the number merged.
int eliminate_common_subexpressions(GraphIR& g);
/// Replaces stateless ops whose inputs are all constants by their computed value (results up to
/// kMaxFoldedElements elements; an op that throws is left to fail at run time). Returns the
/// number folded.
int fold_constants(GraphIR& g);
/// Algebraic simplification by a rewrite-rule table (simplify.cpp lists the rules): x*1, x/1,
/// pow(x,1), x+(-0.0), x-(+0.0) (integer x+0, x-0), neg(neg x), logical_not twice,
/// abs/relu twice, identity, cast to the same dtype, transpose pairs, reshape chains,
/// reshapes to the same shape and a one-element unreduce_like read by a multiply of a static
/// shape (the multiply broadcasts it). Every rule keeps results bit-identical (IEEE -0.0, NaN and
/// broadcasting included). Removed nodes are gone; returns the number of rewrites.
int simplify_algebra(GraphIR& g);
/// Folds v.assign_sub(g * lr) - a Variable, a product of a gradient of its shape and a scalar
/// that nothing else reads, and an updated value nothing reads - into apply_gradient_descent(v,
/// lr, g): one pass over the Variable instead of two, bit-identical. Returns the number folded.
int fold_scaled_updates(GraphIR& g);
/// Elementwise fusion: connected elementwise ops (broadcasting included) whose outputs share
/// one fully defined static shape become one fused_elementwise node (src/ops/fused.h) that
/// walks the data once in tiles. Values used outside a group become outputs of its node;
/// one-element constants become immediates of the program. Returns the number of fused nodes.
int fuse_elementwise(GraphIR& g);
/// A 2-D float32 matmul or a float32 conv2d that only a fused node reads, when that node
/// computes nothing but a bias add, relu and the mask x > 0 (a dense or convolution layer) or
/// where(mask, x, 0) (relu's gradient) from it, becomes one matmul_epilogue or conv2d_epilogue
/// node (so does a product with a lone bias add); a 2-D float32 matmul read only by an add or
/// mul of a value of its static shape takes that value in (add_matrix / mul_matrix); same bits.
/// Returns the number made.
int fuse_product_epilogues(GraphIR& g);
/// A float32 conv2d_epilogue (bias and relu at most) that only a max_pool2d reads takes the pool
/// in (inference: float32 training keeps the activation for the gradient); a bfloat16 training
/// layer's tiling pool too, its node then also writing each window's winner for the masked
/// gradient to read instead of the activation; same bits. Returns the number taken in. The last
/// step of fuse_product_epilogues.
int fuse_conv_max_pools(GraphIR& g);
/// A run of two or more apply_gradient_descent (or apply_adam) nodes that follow each other in
/// the stateful chain becomes one apply_gradient_descent_group (apply_adam_group) node: an
/// optimizer's step over all its parameters in one node, which runs the updates in turn, with
/// their bits and order of effects. Returns the number of groups made.
int group_variable_updates(GraphIR& g);
inline constexpr int64_t kMaxFoldedElements = int64_t{1} << 16;

/// Runs the pipeline on a freshly traced graph. TG_DUMP_GRAPHS=<dir> writes the graph after
/// each pass (text and DOT) as <dir>/<label>.<NN>.<pass>.{txt,dot}; the verifier runs after
/// every pass when verification is on (debug builds, or TG_VERIFY_GRAPHS=1).
void optimize_graph(const std::shared_ptr<GraphIR>& g, const std::string& label);
/// Runs the sub-graph passes on a freshly traced cond branch or loop body, when its node is
/// built (the verifier always runs before and after). The rest of their optimisation happens
/// with their parent graph's, in optimize_graph.
void optimize_subgraph(GraphIR& g);
/// Turns the verifier on or off for optimize_graph (tests turn it on).
void set_verify_graphs(bool enabled);

}  // namespace tg::detail
