// The leaf of reduce_sum's pairwise order over rows for float32 (reduce_semantics.h's
// pairwise_over_rows), defined in reduce.cpp with an AVX-512 copy picked at load. Declarations
// only, so that files built for any ISA may include it (gemm_epilogue.h is built for AVX-512 too).
#pragma once
#include <cstdint>

namespace tg::detail {

/// y[k] = the sum of column k of x (rows x inner) in double, row after row from 0.0.
void column_sums(const float* x, int64_t rows, int64_t inner, double* y);
/// The same for columns [0, n) of rows `ld` apart, added to y (from 0.0 when `fresh`): a leaf
/// summed in parts, in row order, gives column_sums' bits.
void add_column_sums(const float* x, int64_t rows, int64_t ld, int64_t n, bool fresh, double* y);

}  // namespace tg::detail
