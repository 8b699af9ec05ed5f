// The product-batching pass (batch_products.cpp), declared apart from passes.h.
#pragma once
#include "graph/graph_ir.h"

namespace tg::detail {

/// Float32 2-D matmuls x_t W of one right operand (the same value, or reads of one Variable with
/// no write between them), rows of one count, whose left operands do not depend on any of them
/// (an unrolled recurrent layer's input projections) become one product concat(x_t) W, each old
/// product a view of its rows (in batches of at most 2^22 elements, which stay alive until their
/// last view is read). Bit-identical: the AVX-512 kernels compute each row of a product
/// alone, in the same order whatever the number of rows, and the pass leaves alone products whose
/// k would let a split over k (whose bits depend on the thread count) apply to one of them.
/// Without AVX-512 (OpenBLAS, whose blocking depends on the rows) it does nothing. Returns the
/// number of products merged into others.
int batch_independent_products(GraphIR& g);

/// A float32 sum (a tree of adds of equal static shapes, each add but the last read only by the
/// next) of 2-D static products of one orientation (transpose flags), each read only by the sum,
/// becomes one product over the stacked k: sum_t x_t^T dz_t = concat(x_t)^T concat(dz_t) (the
/// weight gradient of an unrolled cell, summed over its steps). Products read elsewhere and
/// other terms are added to it as they were. Stacks hold at most 2^22 elements (more products
/// make several runs). Not bit-identical: the additions run in another order, within the float
/// sum's error bound. Stacks of the same values in the same order as a batch's concatenation
/// (batch_independent_products) are the same node after CSE. Returns the number of products
/// merged into others.
int merge_product_sums(GraphIR& g);

}  // namespace tg::detail
