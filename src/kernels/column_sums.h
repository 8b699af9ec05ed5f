// The leaf of reduce_sum's pairwise order over rows for float32 (reduce_semantics.h's
// pairwise_over_rows), defined in reduce.cpp with an AVX-512 copy picked at load. Declarations
// only, so that files built for any ISA may include it (gemm_epilogue.h is built for AVX-512 too).
#pragma once
#include <cstdint>

#include "tracegraph/dtype.h"

namespace tg::detail {

/// y[k] = the sum of column k of x (rows x inner) in double, row after row from 0.0.
void column_sums(const float* x, int64_t rows, int64_t inner, double* y);
/// The same for columns [0, n) of rows `ld` apart, added to y (from 0.0 when `fresh`): a leaf
/// summed in parts, in row order, gives column_sums' bits.
void add_column_sums(const float* x, int64_t rows, int64_t ld, int64_t n, bool fresh, double* y);

/// The same two over bfloat16 values, each widened in a register (exactly) as it is added: the
/// bits of the float32 functions over the widened tensor, without writing it.
void column_sums(const bfloat16_t* x, int64_t rows, int64_t inner, double* y);
void add_column_sums(const bfloat16_t* x, int64_t rows, int64_t ld, int64_t n, bool fresh, double* y);

}  // namespace tg::detail
