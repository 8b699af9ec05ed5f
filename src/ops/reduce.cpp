// Reductions (reduce_*), argmax/argmin and softmax/log_softmax: front functions, shape/dtype
// rules and kernels together.
//
// Every kernel views its input as [outer, reduced, inner] blocks after dropping size-1 dims and
// merging neighbouring dims that are all kept or all reduced. inner == 1 reduces contiguous rows;
// inner > 1 accumulates whole contiguous rows into an inner-sized accumulator, so both stream
// through memory. Axis sets that leave several reduced groups (e.g. axes {0, 2} of a rank-3
// tensor) are reduced one group at a time, last group first, through accumulator buffers.
//
// What each reduction computes - identities, NaN, integer wrap-around, the mean's division, the
// order floating sums add in - is kernels/reduce_semantics.h's, shared with the fused kernel; the
// float sums here are pairwise both along contiguous rows and across rows. Semantics of the rest
// (TensorFlow 2 where it defines them):
//   - argmax/argmin: first index on ties; a NaN counts as larger (argmax) / smaller (argmin)
//     than every number, so the first NaN wins (NumPy's rule).
//   - softmax/log_softmax subtract the max along the axis; a row whose max is +-inf gives NaN.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "core/thread_pool.h"
#include "ops/bf16_compute.h"
#include "ops/broadcast.h"
#include "ops/grad_helpers.h"
#include "kernels/column_sums.h"
#include "kernels/reduce_semantics.h"
#include "kernels/simd_math.h"
#include "kernels/softmax_rows.h"
#include "tracegraph/ops.h"

namespace tg {
namespace detail {
namespace {

// Reduces one contiguous row of n elements (inlined into each loop over rows).
template <ReduceKind R, class A, class X>
[[gnu::always_inline]] inline A reduce_row(const X* x, int64_t n) {
  if constexpr (kFloatingSum<R, A>) {
    return pairwise_sum<A>(x, n);
  } else if constexpr (R == ReduceKind::kAny || R == ReduceKind::kAll) {
    // Stops at the first element that decides the row (true for any, false for all).
    for (int64_t i = 0; i < n; ++i)
      if (static_cast<bool>(x[i]) != reduce_identity<R, bool>()) return !reduce_identity<R, bool>();
    return reduce_identity<R, bool>();
  } else {
    return reduce_in_lanes<R, A>(x, n);
  }
}

// pairwise_over_rows' leaf for float32 rows (reduce_semantics.h): each y[k] sums its column in
// double, row after row, as the generic loop below does. Vectorised across columns, in blocks of
// 32 held in registers over the rows, every element keeps its order, so its bits. One copy per
// ISA: the library is built for baseline x86-64, where this loop - a dense layer's bias gradient -
// converts and adds two doubles at a time.
#define TG_ADD_COLUMN_SUMS(suffix, target)                                                                   \
  template <int W>                                                                                           \
  target void add_column_block_##suffix(const float* x, int64_t rows, int64_t ld, bool fresh, double* y) {  \
    double acc[W];                                                                                           \
    _Pragma("GCC unroll 32") for (int l = 0; l < W; ++l) acc[l] = fresh ? 0.0 : y[l];                        \
    for (int64_t r = 0; r < rows; ++r)                                                                       \
      _Pragma("GCC unroll 32") for (int l = 0; l < W; ++l) acc[l] += static_cast<double>(x[r * ld + l]);    \
    _Pragma("GCC unroll 32") for (int l = 0; l < W; ++l) y[l] = acc[l];                                      \
  }                                                                                                          \
  target void add_column_sums_##suffix(const float* x, int64_t rows, int64_t ld, int64_t n, bool fresh,     \
                                       double* y) {                                                          \
    int64_t k = 0;                                                                                           \
    for (; k + 32 <= n; k += 32) add_column_block_##suffix<32>(x + k, rows, ld, fresh, y + k);              \
    for (; k + 8 <= n; k += 8) add_column_block_##suffix<8>(x + k, rows, ld, fresh, y + k);                 \
    for (; k < n; ++k) add_column_block_##suffix<1>(x + k, rows, ld, fresh, y + k);                         \
  }
TG_ADD_COLUMN_SUMS(avx512, __attribute__((target("avx512f"))))
TG_ADD_COLUMN_SUMS(baseline, )
#undef TG_ADD_COLUMN_SUMS

}  // namespace

void add_column_sums(const float* x, int64_t rows, int64_t ld, int64_t n, bool fresh, double* y) {
  static const auto fn = simd::cpu_has(simd::Isa::kAvx512) ? &add_column_sums_avx512 : &add_column_sums_baseline;
  if (rows == 0) {  // x may be null (an empty block): no column pointers to make
    if (fresh) std::fill_n(y, n, 0.0);
    return;
  }
  fn(x, rows, ld, n, fresh, y);
}

void column_sums(const float* x, int64_t red, int64_t inner, double* y) { add_column_sums(x, red, inner, inner, true, y); }

namespace {

// The bfloat16 leaf: each value widened (its bits the upper half of a float32, exact) and added
// to its column's double as the float32 leaf adds it, in blocks of 32 or 16 columns held in
// registers over the rows, the rest one column at a time.
double widened(bfloat16_t v) { return static_cast<double>(static_cast<float>(v)); }

template <int W>
__attribute__((target("avx512f"))) void add_bf16_column_block_avx512(const bfloat16_t* x, int64_t rows, int64_t ld,
                                                                     bool fresh, double* y) {
  static_assert(W % 8 == 0);
  constexpr int kAcc = W / 8;
  __m512d acc[kAcc];
  for (int a = 0; a < kAcc; ++a) acc[a] = fresh ? _mm512_setzero_pd() : _mm512_loadu_pd(y + 8 * a);
  // The maskz forms: the plain ones trip gcc 12's -Wmaybe-uninitialized (as in pool_grad_avx512.cpp).
  for (int64_t r = 0; r < rows; ++r) {
    const bfloat16_t* row = x + r * ld;
    for (int a = 0; a < kAcc; ++a) {
      const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 8 * a));
      const __m256 wide = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
      acc[a] = _mm512_maskz_add_pd(0xFF, acc[a], _mm512_maskz_cvtps_pd(0xFF, wide));
    }
  }
  for (int a = 0; a < kAcc; ++a) _mm512_storeu_pd(y + 8 * a, acc[a]);
}

void add_bf16_column(const bfloat16_t* x, int64_t rows, int64_t ld, bool fresh, double* y) {
  double acc = fresh ? 0.0 : *y;
  for (int64_t r = 0; r < rows; ++r) acc += widened(x[r * ld]);
  *y = acc;
}

__attribute__((target("avx512f"))) void add_bf16_column_sums_avx512(const bfloat16_t* x, int64_t rows, int64_t ld,
                                                                    int64_t n, bool fresh, double* y) {
  int64_t k = 0;
  for (; k + 32 <= n; k += 32) add_bf16_column_block_avx512<32>(x + k, rows, ld, fresh, y + k);
  for (; k + 16 <= n; k += 16) add_bf16_column_block_avx512<16>(x + k, rows, ld, fresh, y + k);
  for (; k < n; ++k) add_bf16_column(x + k, rows, ld, fresh, y + k);
}

void add_bf16_column_sums_baseline(const bfloat16_t* x, int64_t rows, int64_t ld, int64_t n, bool fresh, double* y) {
  for (int64_t k = 0; k < n; ++k) add_bf16_column(x + k, rows, ld, fresh, y + k);
}

}  // namespace

void add_column_sums(const bfloat16_t* x, int64_t rows, int64_t ld, int64_t n, bool fresh, double* y) {
  static const auto fn =
      simd::cpu_has(simd::Isa::kAvx512) ? &add_bf16_column_sums_avx512 : &add_bf16_column_sums_baseline;
  if (rows == 0) {
    if (fresh) std::fill_n(y, n, 0.0);
    return;
  }
  fn(x, rows, ld, n, fresh, y);
}

void column_sums(const bfloat16_t* x, int64_t red, int64_t inner, double* y) {
  add_column_sums(x, red, inner, inner, true, y);
}

namespace {

// Columns [0, n) of a block of `red` rows `ld` apart into y[0..n): floating sums in
// pairwise_over_rows' order (scratch: pairwise_levels(red) x n), the other reductions row after
// row.
template <ReduceKind R, class A, class X>
void reduce_columns(const X* x, int64_t red, int64_t ld, int64_t n, A* y, A* scratch) {
  if constexpr (kFloatingSum<R, A>) {
    pairwise_over_rows(0, red, n, y, scratch, [&](int64_t first, int64_t rows, A* dst) {
      const X* block = x + first * ld;
      if constexpr (std::is_same_v<A, double> && std::is_same_v<X, float>) return add_column_sums(block, rows, ld, n, true, dst);
      for (int64_t k = 0; k < n; ++k) dst[k] = A(0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < n; ++k) dst[k] += static_cast<A>(block[r * ld + k]);
    });
  } else {
    for (int64_t k = 0; k < n; ++k) y[k] = reduce_identity<R, A>();
    for (int64_t r = 0; r < red; ++r)
      for (int64_t k = 0; k < n; ++k) y[k] = reduce_combine<R>(y[k], x[r * ld + k]);
  }
}

// pairwise_sum with its top levels on the pool: the subtrees 2^depth levels down are
// independent sums, and adding them up the same tree gives the single-threaded bits.
template <class A, class X>
A pairwise_sum_on_pool(const X* x, int64_t n) {
  int depth = 0;
  while ((2 << depth) <= num_threads()) ++depth;
  // Visits the subtrees `depth` levels down (or leaves, if shallower), left to right.
  auto subtrees = [&](auto&& self, int64_t at, int64_t len, int d, auto&& visit) -> void {
    if (d == 0 || len <= kPairwiseLeaf) return visit(at, len);
    const int64_t half = pairwise_half(len);
    self(self, at, half, d - 1, visit);
    self(self, at + half, len - half, d - 1, visit);
  };
  std::vector<std::pair<int64_t, int64_t>> spans;
  subtrees(subtrees, 0, n, depth, [&](int64_t at, int64_t len) { spans.emplace_back(at, len); });
  std::vector<A> partial(spans.size());
  parallel_parts(static_cast<int>(spans.size()), [&](int p) {
    const auto [at, len] = spans[static_cast<std::size_t>(p)];
    partial[static_cast<std::size_t>(p)] = pairwise_sum<A>(x + at, len);
  });
  std::size_t next = 0;
  auto add_up = [&](auto&& self, int64_t len, int d) -> A {
    if (d == 0 || len <= kPairwiseLeaf) return partial[next++];
    const int64_t half = pairwise_half(len);
    const A left = self(self, half, d - 1);
    return left + self(self, len - half, d - 1);
  };
  return add_up(add_up, n, depth);
}

// reduce_columns' floating sum over all `red` rows with the top levels of its pairwise tree on
// the pool, as pairwise_sum_on_pool does for one row: each thread sums a subtree's whole rows,
// and the subtrees' column sums are added up the same tree, so the bits are the single thread's.
// A layer's bias gradient is such a sum, of a product's result whose rows the product split the
// same way: each thread reads the rows its core has just written. Split by columns instead,
// every thread read every row, half of them from the other core's cache (the transformer's
// 1024 x 512 bias gradient took as long on two threads as on one).
template <ReduceKind R, class A, class X>
void column_sums_on_pool(const X* x, int64_t red, int64_t inner, A* y) {
  int depth = 0;
  while ((2 << depth) <= num_threads()) ++depth;
  auto subtrees = [&](auto&& self, int64_t at, int64_t rows, int d, auto&& visit) -> void {
    if (d == 0 || rows <= kPairwiseRowLeaf) return visit(at, rows);
    const int64_t half = rows / 2;  // pairwise_over_rows' halves
    self(self, at, half, d - 1, visit);
    self(self, at + half, rows - half, d - 1, visit);
  };
  std::vector<std::pair<int64_t, int64_t>> spans;
  subtrees(subtrees, 0, red, depth, [&](int64_t at, int64_t rows) { spans.emplace_back(at, rows); });
  // Span 0's sums go to y, the others' to a buffer each.
  std::vector<A> partial(static_cast<std::size_t>(inner) * (spans.size() - 1));
  auto sums_of = [&](std::size_t p) { return p == 0 ? y : partial.data() + static_cast<std::size_t>(inner) * (p - 1); };
  parallel_parts(static_cast<int>(spans.size()), [&](int p) {
    const auto [at, rows] = spans[static_cast<std::size_t>(p)];
    std::vector<A> scratch(static_cast<std::size_t>(pairwise_levels(rows) * inner));
    reduce_columns<R, A>(x + at * inner, rows, inner, inner, sums_of(static_cast<std::size_t>(p)), scratch.data());
  });
  std::size_t next = 0;
  auto add_up = [&](auto&& self, int64_t rows, int d) -> A* {
    if (d == 0 || rows <= kPairwiseRowLeaf) return sums_of(next++);
    const int64_t half = rows / 2;
    A* left = self(self, half, d - 1);
    const A* right = self(self, rows - half, d - 1);
    for (int64_t k = 0; k < inner; ++k) left[k] += right[k];
    return left;
  };
  add_up(add_up, red, depth);
}

// One [outer, red, inner] -> [outer, inner] reduction step. Large blocks are split across the
// pool only where every output keeps its order of additions, so the bits do not depend on the
// thread count: whole outputs per thread (rows of outer, or runs of inner), or the halves of
// one contiguous pairwise sum.
template <ReduceKind R, class A, class X>
void reduce_block(const X* x, int64_t outer, int64_t red, int64_t inner, A* y) {
  const bool split = num_threads() > 1 && outer * red * inner >= 2 * kParallelMinElements;
  if (inner == 1) {
    if constexpr (kFloatingSum<R, A>)
      if (split && outer == 1) {
        y[0] = pairwise_sum_on_pool<A>(x, red);
        return;
      }
    auto rows = [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) y[o] = reduce_row<R, A>(x + o * red, red);
    };
    if (split && outer > 1) parallel_for(outer, std::max<int64_t>(1, kParallelMinElements / red), rows);
    else rows(0, outer);
    return;
  }
  // Blocks [o0, o1), columns [k0, k1) of each.
  auto part = [&](int64_t o0, int64_t o1, int64_t k0, int64_t k1) {
    std::unique_ptr<A[]> scratch;  // not std::vector: A may be bool
    if constexpr (kFloatingSum<R, A>) scratch.reset(new A[static_cast<std::size_t>(pairwise_levels(red) * (k1 - k0))]);
    for (int64_t o = o0; o < o1; ++o)
      reduce_columns<R, A>(x + o * red * inner + k0, red, inner, k1 - k0, y + o * inner + k0, scratch.get());
  };
  if constexpr (kFloatingSum<R, A>)
    if (split && outer == 1 && red > 2 * kPairwiseRowLeaf) return column_sums_on_pool<R, A>(x, red, inner, y);
  // Whole blocks per thread when there are enough of them; else runs of columns, of whole cache
  // lines of the outputs.
  if (split && outer >= num_threads())
    parallel_for(outer, 1, [&](int64_t o0, int64_t o1) { part(o0, o1, 0, inner); });
  else if (split && inner >= 64)
    parallel_for(inner, std::max<int64_t>(64, kParallelMinElements / (outer * red)) / 16 * 16,
                 [&](int64_t k0, int64_t k1) { part(0, outer, k0, k1); });
  else
    part(0, outer, 0, inner);
}

// A row-major shape regrouped into maximal runs of kept / reduced dims (size-1 dims dropped).
struct Group {
  int64_t size;
  bool reduced;
};

std::vector<Group> group_dims(const std::vector<int64_t>& dims, const std::vector<bool>& reduced) {
  std::vector<Group> groups;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    if (!groups.empty() && groups.back().reduced == reduced[i]) groups.back().size *= dims[i];
    else groups.push_back({dims[i], static_cast<bool>(reduced[i])});
  }
  return groups;
}

template <ReduceKind R, class T>
void reduce_typed(const Tensor& in, const std::vector<bool>& reduced, Tensor& out) {
  using A = reduce_acc_t<R, T>;
  const auto& dims = in.impl()->shape.dims();
  const int64_t n_out = out.impl()->shape.num_elements();
  if (n_out == 0) return;
  int64_t count = 1;  // elements folded into each output element
  std::vector<Group> groups;
  if (std::find(dims.begin(), dims.end(), 0) != dims.end()) {
    // An empty input - its zero is a reduced dim, the output having elements - folds nothing
    // into each of them; its dims are not multiplied out, which may overflow: (2^40, 2^40, 0).
    count = 0;
    groups = {{0, true}, {n_out, false}};
  } else {
    for (std::size_t i = 0; i < dims.size(); ++i)
      if (reduced[i]) count *= dims[i];
    groups = group_dims(dims, reduced);
  }
  const T* x = data_of<T>(in);
  T* y = data_of<T>(out);

  int n_stages = 0;
  for (const Group& g : groups) n_stages += g.reduced;
  if (n_stages == 0) {  // only size-1 dims were reduced
    for (int64_t i = 0; i < n_out; ++i) y[i] = finish_reduction<R, T>(reduce_one<R, A>(x[i]), count);
    return;
  }
  constexpr bool kDirect = std::is_same_v<A, T> && R != ReduceKind::kMean;
  std::unique_ptr<A[]> cur, next;  // not std::vector: A may be bool
  bool first = true;
  while (n_stages > 0) {
    // Reduce the last reduced group.
    std::size_t j = groups.size();
    while (!groups[--j].reduced) {
    }
    int64_t outer = 1, inner = 1;
    for (std::size_t i = 0; i < j; ++i) outer *= groups[i].size;
    for (std::size_t i = j + 1; i < groups.size(); ++i) inner *= groups[i].size;
    const int64_t red = groups[j].size;
    A* dst = nullptr;
    if constexpr (kDirect)
      if (n_stages == 1) dst = y;
    if (!dst) {
      next.reset(new A[static_cast<std::size_t>(outer * inner)]);
      dst = next.get();
    }
    if (first) reduce_block<R, A>(x, outer, red, inner, dst);
    else reduce_block<R, A>(cur.get(), outer, red, inner, dst);
    first = false;
    std::swap(cur, next);
    groups.erase(groups.begin() + static_cast<std::ptrdiff_t>(j));
    // The kept groups either side of j are now neighbours.
    if (j > 0 && j < groups.size() && !groups[j - 1].reduced && !groups[j].reduced) {
      groups[j - 1].size *= groups[j].size;
      groups.erase(groups.begin() + static_cast<std::ptrdiff_t>(j));
    }
    --n_stages;
  }
  if (!kDirect)
    for (int64_t i = 0; i < n_out; ++i) y[i] = finish_reduction<R, T>(cur[static_cast<std::size_t>(i)], count);
}

// ---- shape/dtype rules ----
template <class Fn>
void visit_numeric(DType d, Fn&& fn) {
  switch (d) {
    case DType::Float32: return fn(float{});
    case DType::Float64: return fn(double{});
    case DType::Int32: return fn(int32_t{});
    case DType::Int64: return fn(int64_t{});
    default: TG_CHECK(false, "unexpected dtype ", to_string(d));
  }
}

std::string list_axes(const std::vector<int64_t>& axes) {
  std::string s = "[";
  for (std::size_t i = 0; i < axes.size(); ++i) s += (i ? ", " : "") + std::to_string(axes[i]);
  return s + "]";
}

// Which dims of a rank-`rank` tensor `axes` reduce; throws on out-of-range or repeated axes.
std::vector<bool> reduced_mask(const char* op, const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<bool> mask(static_cast<std::size_t>(rank), axes.empty());
  for (int64_t a : axes) {
    const int64_t d = normalize_axis(op, a, rank);
    if (mask[static_cast<std::size_t>(d)])
      op_error<InvalidArgumentError>(op, "axis ", a, " appears more than once in axes ",
                                     list_axes(axes), " (dimension ", d, " of a rank-", rank,
                                     " tensor); list each axis once");
    mask[static_cast<std::size_t>(d)] = true;
  }
  return mask;
}

template <ReduceKind R>
constexpr OpId op_of() {
  switch (R) {
    case ReduceKind::kSum: return OpId::ReduceSum;
    case ReduceKind::kMean: return OpId::ReduceMean;
    case ReduceKind::kMax: return OpId::ReduceMax;
    case ReduceKind::kMin: return OpId::ReduceMin;
    case ReduceKind::kProd: return OpId::ReduceProd;
    case ReduceKind::kAny: return OpId::ReduceAny;
    case ReduceKind::kAll: return OpId::ReduceAll;
  }
  return OpId::ReduceSum;
}

template <ReduceKind R>
std::vector<ValueType> infer_reduce(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const ReduceAttrs& attrs = op_attrs.get<ReduceAttrs>();
  const char* op = op_def(op_of<R>()).name;
  if constexpr (R == ReduceKind::kAny || R == ReduceKind::kAll)
    require_dtype(op, in[0], {DType::Bool});
  else
    require_dtype(op, in[0], {DType::Float32, DType::Float64, DType::Int32, DType::Int64});
  const TensorShape& s = in[0].shape;
  if (!s.has_rank()) {
    // Only literal repeats can be seen without a rank (-1 and 1 may or may not collide).
    for (std::size_t i = 0; i < attrs.axes.size(); ++i)
      for (std::size_t k = 0; k < i; ++k)
        if (attrs.axes[i] == attrs.axes[k])
          op_error<InvalidArgumentError>(op, "axis ", attrs.axes[i], " appears more than once in axes ",
                                         list_axes(attrs.axes), "; list each axis once");
    if (attrs.axes.empty() && !attrs.keepdims) return {ValueType{in[0].dtype, TensorShape{}}};
    return {ValueType{in[0].dtype, TensorShape::unknown_rank()}};
  }
  const std::vector<bool> mask = reduced_mask(op, attrs.axes, s.rank());
  std::vector<int64_t> out;
  for (std::size_t i = 0; i < mask.size(); ++i) {
    if (!mask[i]) out.push_back(s.dims()[i]);
    else if (attrs.keepdims) out.push_back(1);
  }
  return {ValueType{in[0].dtype, TensorShape(std::move(out))}};
}

template <ReduceKind R>
void kernel_reduce(const std::vector<Tensor>& in, const OpAttrs& op_attrs, std::vector<Tensor>& out) {
  const ReduceAttrs& attrs = op_attrs.get<ReduceAttrs>();
  const std::vector<bool> mask =
      reduced_mask(op_def(op_of<R>()).name, attrs.axes, in[0].impl()->shape.rank());
  if constexpr (R == ReduceKind::kAny || R == ReduceKind::kAll) {
    reduce_typed<R, bool>(in[0], mask, out[0]);
  } else {
    visit_numeric(in[0].impl()->dtype, [&](auto tag) {
      reduce_typed<R, decltype(tag)>(in[0], mask, out[0]);
    });
  }
}

// Sizes of the dims before, at and after `axis` of a fully defined shape. For a zero-element
// shape such as (2^40, 2^40, 0) a size may be saturated (product in ops/broadcast.h): callers
// return on zero elements before they multiply or loop over them.
struct Split {
  int64_t outer = 1, n = 1, inner = 1;
};
Split split_at(const std::vector<int64_t>& dims, int64_t axis) {
  const auto a = static_cast<std::size_t>(axis);
  return Split{product(dims, 0, a), dims[a], product(dims, a + 1, dims.size())};
}

// ---- argmax / argmin ----
template <bool kMax>
const char* arg_name() {
  return kMax ? "argmax" : "argmin";
}

// Does x replace the current best? Strictly better only (ties keep the first); a NaN beats
// every number and nothing beats a NaN.
template <bool kMax, class T>
inline bool beats(T x, T best) {
  if constexpr (std::is_floating_point_v<T>) {
    if (best != best) return false;
    if (x != x) return true;
  }
  return kMax ? x > best : x < best;
}

template <bool kMax>
std::vector<ValueType> infer_arg(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const ArgReduceAttrs& attrs = op_attrs.get<ArgReduceAttrs>();
  const char* op = arg_name<kMax>();
  require_dtype(op, in[0], {DType::Float32, DType::Float64, DType::Int32, DType::Int64});
  if (attrs.output_type != DType::Int32 && attrs.output_type != DType::Int64)
    op_error<InvalidArgumentError>(op, "output dtype must be int32 or int64, got ",
                                   to_string(attrs.output_type));
  const TensorShape& s = in[0].shape;
  if (!s.has_rank()) return {ValueType{attrs.output_type, TensorShape::unknown_rank()}};
  if (s.rank() == 0)
    op_error<InvalidArgumentError>(op, "expected an input of rank >= 1, got a scalar (rank 0); "
                                   "there is no axis to take the ", op, " along");
  const int64_t axis = normalize_axis(op, attrs.axis, s.rank());
  const int64_t n = s.dims()[static_cast<std::size_t>(axis)];
  if (n == 0)
    op_error<InvalidArgumentError>(op, "cannot take ", op, " of an empty dimension: axis ",
                                   attrs.axis, " of shape ", s.to_string(), " has size 0");
  if (attrs.output_type == DType::Int32 && n > std::numeric_limits<int32_t>::max())
    op_error<InvalidArgumentError>(op, "axis ", attrs.axis, " has ", n,
                                   " elements, too many for int32 indices; use int64");
  std::vector<int64_t> out = s.dims();
  out.erase(out.begin() + axis);
  return {ValueType{attrs.output_type, TensorShape(std::move(out))}};
}

template <bool kMax, class T, class I>
void arg_typed(const T* x, Split s, I* y) {
  if (s.inner == 1) {
    for (int64_t o = 0; o < s.outer; ++o) {
      const T* row = x + o * s.n;
      int64_t best = 0;
      for (int64_t i = 1; i < s.n; ++i)
        if (beats<kMax>(row[i], row[best])) best = i;
      y[o] = static_cast<I>(best);
    }
    return;
  }
  std::vector<T> best(static_cast<std::size_t>(s.inner));
  for (int64_t o = 0; o < s.outer; ++o) {
    const T* xo = x + o * s.n * s.inner;
    I* yo = y + o * s.inner;
    std::memcpy(best.data(), xo, sizeof(T) * static_cast<std::size_t>(s.inner));
    for (int64_t k = 0; k < s.inner; ++k) yo[k] = 0;
    for (int64_t r = 1; r < s.n; ++r) {
      const T* row = xo + r * s.inner;
      for (int64_t k = 0; k < s.inner; ++k) {
        if (beats<kMax>(row[k], best[static_cast<std::size_t>(k)])) {
          best[static_cast<std::size_t>(k)] = row[k];
          yo[k] = static_cast<I>(r);
        }
      }
    }
  }
}

template <bool kMax>
void kernel_arg(const std::vector<Tensor>& in, const OpAttrs& op_attrs, std::vector<Tensor>& out) {
  const ArgReduceAttrs& attrs = op_attrs.get<ArgReduceAttrs>();
  const auto& dims = in[0].impl()->shape.dims();
  const int64_t axis = normalize_axis(arg_name<kMax>(), attrs.axis, static_cast<int64_t>(dims.size()));
  const Split s = split_at(dims, axis);
  if (s.n == 0)  // reachable only when the static shape had None there
    op_error<InvalidArgumentError>(arg_name<kMax>(), "cannot take ", arg_name<kMax>(),
                                   " of an empty dimension: axis ", attrs.axis, " of shape ",
                                   in[0].impl()->shape.to_string(), " has size 0");
  if (in[0].impl()->shape.num_elements() == 0) return;
  visit_numeric(in[0].impl()->dtype, [&](auto tag) {
    using T = decltype(tag);
    if (out[0].impl()->dtype == DType::Int32)
      arg_typed<kMax>(data_of<T>(in[0]), s, data_of<int32_t>(out[0]));
    else
      arg_typed<kMax>(data_of<T>(in[0]), s, data_of<int64_t>(out[0]));
  });
}

// ---- softmax / log_softmax ----
template <bool kLog>
std::vector<ValueType> infer_softmax(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const AxisAttrs& attrs = op_attrs.get<AxisAttrs>();
  const char* op = kLog ? "log_softmax" : "softmax";
  require_dtype(op, in[0], {DType::Float32, DType::Float64});
  const TensorShape& s = in[0].shape;
  if (s.has_rank()) {
    if (s.rank() == 0)
      op_error<InvalidArgumentError>(op, "expected logits of rank >= 1, got a scalar (rank 0); "
                                     "reshape it to (1,) or expand_dims it first");
    normalize_axis(op, attrs.axis, s.rank());
  }
  return {in[0]};
}

// The max of a row, skipping NaNs (a plain compare-select, which vectorises): softmax needs no
// NaN-aware max because a NaN reaches every output of its row through x - max anyway.
template <class T>
T max_skipping_nan(const T* x, int64_t n) {
  T lane[8];
  for (auto& l : lane) l = -std::numeric_limits<T>::infinity();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
  T m = lane[0];
  for (int j = 1; j < 8; ++j) m = lane[j] > m ? lane[j] : m;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// Elements per exp call: short rows are batched so the vectorised exp runs on long spans.
constexpr int64_t kExpChunk = 4096;

template <bool kLog, class T>
void softmax_typed(const T* x, Split s, T* y) {
  const int64_t n = s.n, inner = s.inner;
  if (n == 0 || s.outer == 0 || inner == 0) return;
  if (inner == 1) {
    const int64_t rows = std::max<int64_t>(1, kExpChunk / n);
    std::vector<T> tmp(kLog ? static_cast<std::size_t>(std::min(rows, s.outer) * n) : 0);
    for (int64_t o0 = 0; o0 < s.outer; o0 += rows) {
      const int64_t o1 = std::min(s.outer, o0 + rows);
      for (int64_t o = o0; o < o1; ++o) {
        const T m = max_skipping_nan(x + o * n, n);
        for (int64_t i = 0; i < n; ++i) y[o * n + i] = x[o * n + i] - m;
      }
      const int64_t len = (o1 - o0) * n;
      T* e = y + o0 * n;
      if constexpr (kLog) {
        std::memcpy(tmp.data(), e, sizeof(T) * static_cast<std::size_t>(len));
        e = tmp.data();
      }
      exp_in_place(e, len);
      for (int64_t o = o0; o < o1; ++o) {
        T* yr = y + o * n;
        const double sum = pairwise_sum<double>(e + (o - o0) * n, n);
        if constexpr (kLog) {
          const T lse = static_cast<T>(std::log(sum));
          for (int64_t i = 0; i < n; ++i) yr[i] -= lse;
        } else {
          const T scale = static_cast<T>(1.0 / sum);
          for (int64_t i = 0; i < n; ++i) yr[i] *= scale;
        }
      }
    }
    return;
  }
  // Strided axis: per-column max and sum, walking whole contiguous rows.
  const auto inner_sz = static_cast<std::size_t>(inner);
  const int64_t rows = std::max<int64_t>(1, kExpChunk / inner);
  std::vector<T> m(inner_sz);
  std::vector<double> sum(inner_sz);
  std::vector<T> tmp(kLog ? static_cast<std::size_t>(std::min(rows, n) * inner) : 0);
  for (int64_t o = 0; o < s.outer; ++o) {
    const T* xo = x + o * n * inner;
    T* yo = y + o * n * inner;
    std::memcpy(m.data(), xo, sizeof(T) * inner_sz);
    for (int64_t r = 1; r < n; ++r) {
      const T* row = xo + r * inner;
      for (int64_t k = 0; k < inner; ++k) m[k] = row[k] > m[k] ? row[k] : m[k];
    }
    for (int64_t r = 0; r < n; ++r)
      for (int64_t k = 0; k < inner; ++k) yo[r * inner + k] = xo[r * inner + k] - m[k];
    std::fill(sum.begin(), sum.end(), 0.0);
    for (int64_t r0 = 0; r0 < n; r0 += rows) {
      const int64_t r1 = std::min(n, r0 + rows);
      const int64_t len = (r1 - r0) * inner;
      T* e = yo + r0 * inner;
      if constexpr (kLog) {
        std::memcpy(tmp.data(), e, sizeof(T) * static_cast<std::size_t>(len));
        e = tmp.data();
      }
      exp_in_place(e, len);
      for (int64_t r = 0; r < r1 - r0; ++r)
        for (int64_t k = 0; k < inner; ++k) sum[k] += e[r * inner + k];
    }
    for (int64_t k = 0; k < inner; ++k)
      m[k] = static_cast<T>(kLog ? std::log(sum[k]) : 1.0 / sum[k]);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t k = 0; k < inner; ++k) {
        if constexpr (kLog) yo[r * inner + k] -= m[k];
        else yo[r * inner + k] *= m[k];
      }
  }
}

template <bool kLog>
void kernel_softmax(const std::vector<Tensor>& in, const OpAttrs& op_attrs, std::vector<Tensor>& out) {
  const AxisAttrs& attrs = op_attrs.get<AxisAttrs>();
  const auto& dims = in[0].impl()->shape.dims();
  const int64_t axis = normalize_axis(kLog ? "log_softmax" : "softmax", attrs.axis,
                                      static_cast<int64_t>(dims.size()));
  if (in[0].impl()->shape.num_elements() == 0) return;
  const Split s = split_at(dims, axis);
  if (in[0].impl()->dtype == DType::Float32)
    softmax_typed<kLog>(data_of<float>(in[0]), s, data_of<float>(out[0]));
  else
    softmax_typed<kLog>(data_of<double>(in[0]), s, data_of<double>(out[0]));
}

}  // namespace

template <class T>
void exp_in_place(T* v, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    simd::exp_f32(v, v, n);
  } else {
    for (int64_t i = 0; i < n; ++i) v[i] = std::exp(v[i]);
  }
}
template void exp_in_place<float>(float*, int64_t);
template void exp_in_place<double>(double*, int64_t);

template <class T>
void log_softmax_rows(const T* x, int64_t rows, int64_t n, T* y) {
  softmax_typed<true>(x, Split{rows, n, 1}, y);
}
template void log_softmax_rows<float>(const float*, int64_t, int64_t, float*);
template void log_softmax_rows<double>(const double*, int64_t, int64_t, double*);

namespace {

// ---- gradient helpers: sum_to_like, broadcast_like, unreduce_like ----

// Which dims of `big` are summed to reach `small` (leading dims, and dims where small has 1);
// throws unless small broadcasts to big. None dims (static shapes only) are not checked.
std::vector<bool> broadcast_mask(const char* op, const TensorShape& small, const TensorShape& big) {
  const int64_t r = big.rank(), k = small.rank();
  auto fail = [&] {
    op_error<InvalidArgumentError>(op, "shape ", small.to_string(), " does not broadcast to ",
                                   big.to_string(), "; expected a shape whose dims (aligned at "
                                   "the end) are 1 or equal to the other's");
  };
  if (k > r) fail();
  std::vector<bool> mask(static_cast<std::size_t>(r), false);
  for (int64_t i = 0; i < r; ++i) {
    const auto ui = static_cast<std::size_t>(i);
    if (i < r - k) {
      mask[ui] = true;
      continue;
    }
    const int64_t bd = big.dims()[ui], sd = small.dims()[static_cast<std::size_t>(i - (r - k))];
    if (bd == None || sd == None || sd == bd) continue;
    if (sd != 1) fail();
    mask[ui] = true;
  }
  return mask;
}

// bfloat16 (its own rule, ops/bf16_compute.cpp): the bfloat16 rule's checks and result type -
// floating operands in one dtype, a bfloat16 sum.
std::vector<ValueType> infer_sum_to_like(const std::vector<ValueType>& in, const OpAttrs&) {
  require_dtype("sum_to_like", in[0], {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::BFloat16});
  auto wide_float = [](DType d) { return d == DType::Float32 || d == DType::Float64; };
  if ((in[0].dtype == DType::BFloat16 && wide_float(in[1].dtype)) ||
      (in[1].dtype == DType::BFloat16 && wide_float(in[0].dtype)))
    op_error<InvalidArgumentError>("sum_to_like", "expected its floating inputs in one dtype, got ", to_string(in[0].dtype),
                                   ", ", to_string(in[1].dtype),
                                   "; tg::cast them to one dtype first (tracegraph never promotes silently)");
  if (in[0].shape.has_rank() && in[1].shape.has_rank())
    broadcast_mask("sum_to_like", in[1].shape, in[0].shape);
  return {ValueType{in[0].dtype, in[1].shape}};
}
void kernel_sum_to_like(const std::vector<Tensor>& in, const OpAttrs&, std::vector<Tensor>& out);

// sum_to_like of a bfloat16 tensor over its leading dims (a layer's bias gradient): reduce_sum's
// column sums (pairwise over rows, in double) read off the bfloat16 values, each widened in a
// register, then rounded once - the bits of the float32 rule (widen the whole tensor, sum,
// round) without writing the widened tensor. Other reductions take that rule as it is.
void sum_to_like_bf16(const std::vector<Tensor>& in, const std::vector<bool>& mask, std::vector<Tensor>& out) {
  const auto& dims = in[0].impl()->shape.dims();
  const bool empty = std::find(dims.begin(), dims.end(), 0) != dims.end();
  const std::vector<Group> groups = empty ? std::vector<Group>{} : group_dims(dims, mask);
  if (groups.size() != 2 || !groups[0].reduced || groups[1].reduced)
    return run_via_float32(&kernel_sum_to_like, in, OpAttrs{}, out);
  const int64_t red = groups[0].size, inner = groups[1].size;
  const bfloat16_t* x = data_of<bfloat16_t>(in[0]);
  std::vector<double> sums(static_cast<std::size_t>(inner));
  // Runs of columns, each summed whole by one thread: the bits do not depend on the split.
  auto columns = [&](int64_t k0, int64_t k1) {
    std::vector<double> scratch(static_cast<std::size_t>(pairwise_levels(red) * (k1 - k0)));
    pairwise_over_rows(0, red, k1 - k0, sums.data() + k0, scratch.data(), [&](int64_t first, int64_t rows, double* dst) {
      add_column_sums(x + first * inner + k0, rows, inner, k1 - k0, true, dst);
    });
  };
  if (num_threads() > 1 && inner >= 64 && red * inner >= 2 * kParallelMinElements)
    parallel_for(inner, std::max<int64_t>(32, kParallelMinElements / red) / 16 * 16, columns);
  else
    columns(0, inner);
  bfloat16_t* y = data_of<bfloat16_t>(out[0]);
  for (int64_t k = 0; k < inner; ++k)
    y[k] = bfloat16_t(finish_reduction<ReduceKind::kSum, float>(sums[static_cast<std::size_t>(k)], red));
}

void kernel_sum_to_like(const std::vector<Tensor>& in, const OpAttrs&, std::vector<Tensor>& out) {
  const std::vector<bool> mask =
      broadcast_mask("sum_to_like", in[1].impl()->shape, in[0].impl()->shape);
  if (in[0].impl()->dtype == DType::BFloat16) return sum_to_like_bf16(in, mask, out);
  visit_numeric(in[0].impl()->dtype, [&](auto tag) {
    reduce_typed<ReduceKind::kSum, decltype(tag)>(in[0], mask, out[0]);
  });
}

std::vector<ValueType> infer_broadcast_like(const std::vector<ValueType>& in, const OpAttrs&) {
  if (in[0].shape.has_rank() && in[1].shape.has_rank())
    broadcast_mask("broadcast_like", in[0].shape, in[1].shape);
  return {ValueType{in[0].dtype, in[1].shape}};
}
void kernel_broadcast_like(const std::vector<Tensor>& in, const OpAttrs&, std::vector<Tensor>& out) {
  broadcast_mask("broadcast_like", in[0].impl()->shape, in[1].impl()->shape);
  broadcast_copy(in[0], in[0].impl()->shape.dims(), out[0]);
}

// The dims a reduction of `like` over the axes produced (keepdims or not), and the same with
// the reduced dims kept as 1.
struct Reduced {
  std::vector<int64_t> dims;
  std::vector<int64_t> keep_dims;
};
Reduced reduced_dims(const char* op, const TensorShape& like, const OpAttrs& op_attrs) {
  const ReduceAttrs& attrs = op_attrs.get<ReduceAttrs>();
  const std::vector<bool> mask = reduced_mask(op, attrs.axes, like.rank());
  Reduced r;
  for (std::size_t i = 0; i < mask.size(); ++i) {
    r.keep_dims.push_back(mask[i] ? 1 : like.dims()[i]);
    if (!mask[i] || attrs.keepdims) r.dims.push_back(r.keep_dims.back());
  }
  return r;
}
void check_reduced(const char* op, const TensorShape& g, const TensorShape& like,
                   const std::vector<int64_t>& want) {
  bool ok = g.rank() == static_cast<int64_t>(want.size());
  for (std::size_t i = 0; ok && i < want.size(); ++i)
    ok = g.dims()[i] == None || want[i] == None || g.dims()[i] == want[i];
  if (!ok)
    op_error<InvalidArgumentError>(op, "the reduced tensor has shape ", g.to_string(), " but reducing ",
                                   like.to_string(), " gives ", TensorShape(want).to_string(),
                                   "; pass the result of that reduction");
}

std::vector<ValueType> infer_unreduce_like(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  if (in[1].shape.has_rank()) {
    const Reduced r = reduced_dims("unreduce_like", in[1].shape, attrs);
    if (in[0].shape.has_rank()) check_reduced("unreduce_like", in[0].shape, in[1].shape, r.dims);
  }
  return {ValueType{in[0].dtype, in[1].shape}};
}
void kernel_unreduce_like(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const TensorShape& like = in[1].impl()->shape;
  const Reduced r = reduced_dims("unreduce_like", like, attrs);
  check_reduced("unreduce_like", in[0].impl()->shape, like, r.dims);
  broadcast_copy(in[0], r.keep_dims, out[0]);
}

// ---- gradient rules ----

OpAttrs reduce_attrs(std::vector<int64_t> axes, bool keepdims) { return ReduceAttrs{std::move(axes), keepdims}; }

std::vector<Tensor> grad_reduce_sum(const GradInputs& g) {
  const ReduceAttrs& r = g.attrs.get<ReduceAttrs>();
  return {unreduce_like(g.grads[0], g.inputs[0], r.axes, r.keepdims)};
}

// Elements folded into each output element of a reduction of x into y, as x's dtype.
Tensor reduced_count(const Tensor& x, const Tensor& y) {
  const TensorShape xs = detail::static_shape(x), ys = detail::static_shape(y);
  if (xs.is_fully_defined() && ys.is_fully_defined()) {
    const int64_t ny = ys.num_elements();
    return scalar_like(x, ny == 0 ? 1.0 : static_cast<double>(xs.num_elements()) / static_cast<double>(ny));
  }
  return div(cast(size(x), x.dtype()), cast(size(y), x.dtype()));
}

std::vector<Tensor> grad_reduce_mean(const GradInputs& g) {
  const ReduceAttrs& r = g.attrs.get<ReduceAttrs>();
  // TF divides the broadcast gradient by the count; dividing before broadcasting gives the same
  // quotients with one division per output element instead of one per input element.
  return {unreduce_like(div(g.grads[0], reduced_count(g.inputs[0], g.outputs[0])), g.inputs[0], r.axes,
                        r.keepdims)};
}

// max/min: the gradient goes to the elements equal to the result, split evenly among ties
// (as TensorFlow does).
std::vector<Tensor> grad_reduce_extreme(const GradInputs& g) {
  const Tensor& x = g.inputs[0];
  const std::vector<int64_t>& axes = g.attrs.get<ReduceAttrs>().axes;
  const bool keep = g.attrs.get<ReduceAttrs>().keepdims;
  const Tensor mask = cast(equal(x, unreduce_like(g.outputs[0], x, axes, keep)), x.dtype());
  const Tensor count =
      unreduce_like(apply_op1(OpId::ReduceSum, {mask}, reduce_attrs(axes, keep)), x, axes, keep);
  return {div(mul(mask, unreduce_like(g.grads[0], x, axes, keep)), count)};
}

// prod: d(prod)/dx_i is the product of the other elements reduced with x_i, computed as TF's
// _ProdGrad does, without prod / x_i (0 / 0 where x holds a zero): along one axis it is the
// exclusive cumprod times the reversed exclusive cumprod. Over axes a1, a2, ... it is that along
// a1, times the same along a2 of the product over a1 (kept as a size-1 dim, so it broadcasts
// back), and so on: the elements left out are those of x_i's a1-line, then those of the other
// a1-lines. All axes: the same along x flattened. No division and no branch, so the rule's own
// derivatives are exact at zeros too (cumprod's rule is, see math_ops.cpp).
std::vector<Tensor> grad_reduce_prod(const GradInputs& g) {
  const Tensor& x = g.inputs[0];
  const ReduceAttrs& r = g.attrs.get<ReduceAttrs>();
  auto others_along = [](const Tensor& t, int axis) {
    return mul(cumprod(t, axis, true, false), cumprod(t, axis, true, true));
  };
  Tensor others;
  if (r.axes.empty()) {
    others = reshape_like(others_along(reshape(x, {-1}), 0), x);
  } else {
    Tensor rest = x;  // x's product over the axes handled so far, those kept as size 1
    for (std::size_t k = 0; k < r.axes.size(); ++k) {
      const int axis = static_cast<int>(r.axes[k]);
      const Tensor part = others_along(rest, axis);
      others = others.defined() ? mul(others, part) : part;
      if (k + 1 < r.axes.size()) rest = apply_op1(OpId::ReduceProd, {rest}, reduce_attrs({axis}, true));
    }
  }
  return {mul(unreduce_like(g.grads[0], x, r.axes, r.keepdims), others)};
}

std::vector<Tensor> grad_softmax(const GradInputs& g) {
  const Tensor& y = g.outputs[0];
  const Tensor& dy = g.grads[0];
  const Tensor dot = apply_op1(OpId::ReduceSum, {mul(dy, y)}, reduce_attrs({g.attrs.get<AxisAttrs>().axis}, true));
  return {mul(y, sub(dy, dot))};
}

std::vector<Tensor> grad_log_softmax(const GradInputs& g) {
  const Tensor& dy = g.grads[0];
  const Tensor total = apply_op1(OpId::ReduceSum, {dy}, reduce_attrs({g.attrs.get<AxisAttrs>().axis}, true));
  return {sub(dy, mul(exp(g.outputs[0]), total))};
}

std::vector<Tensor> grad_sum_to_like(const GradInputs& g) {
  return {broadcast_like(g.grads[0], g.inputs[0]), Tensor()};
}
std::vector<Tensor> grad_broadcast_like(const GradInputs& g) {
  return {sum_to_like(g.grads[0], g.inputs[0]), Tensor()};
}
std::vector<Tensor> grad_unreduce_like(const GradInputs& g) {
  return {apply_op1(OpId::ReduceSum, {g.grads[0]}, g.attrs), Tensor()};  // the same ReduceAttrs
}

template <ReduceKind R>
void set_reduce(OpDef* t) {
  set_op(t, op_of<R>(), &infer_reduce<R>, &kernel_reduce<R>);
}

}  // namespace

void register_reduce_ops(OpDef* t) {
  set_reduce<ReduceKind::kSum>(t);
  set_reduce<ReduceKind::kMean>(t);
  set_reduce<ReduceKind::kMax>(t);
  set_reduce<ReduceKind::kMin>(t);
  set_reduce<ReduceKind::kProd>(t);
  set_reduce<ReduceKind::kAny>(t);
  set_reduce<ReduceKind::kAll>(t);
  set_op(t, OpId::ArgMax, &infer_arg<true>, &kernel_arg<true>);
  set_op(t, OpId::ArgMin, &infer_arg<false>, &kernel_arg<false>);
  set_op(t, OpId::Softmax, &infer_softmax<false>, &kernel_softmax<false>);
  set_op(t, OpId::LogSoftmax, &infer_softmax<true>, &kernel_softmax<true>);
  set_op(t, OpId::SumToLike, &infer_sum_to_like, &kernel_sum_to_like);
  set_op(t, OpId::BroadcastLike, &infer_broadcast_like, &kernel_broadcast_like);
  set_op(t, OpId::UnreduceLike, &infer_unreduce_like, &kernel_unreduce_like);
  set_grad(t, OpId::ReduceSum, &grad_reduce_sum);
  set_grad(t, OpId::ReduceMean, &grad_reduce_mean);
  set_grad(t, OpId::ReduceMax, &grad_reduce_extreme);
  set_grad(t, OpId::ReduceMin, &grad_reduce_extreme);
  set_grad(t, OpId::ReduceProd, &grad_reduce_prod);
  set_grad(t, OpId::Softmax, &grad_softmax);
  set_grad(t, OpId::LogSoftmax, &grad_log_softmax);
  set_grad(t, OpId::SumToLike, &grad_sum_to_like);
  set_grad(t, OpId::BroadcastLike, &grad_broadcast_like);
  set_grad(t, OpId::UnreduceLike, &grad_unreduce_like);
}

}  // namespace detail

// ---- public front functions ----
namespace {
Tensor apply_reduce(detail::OpId id, const Tensor& x, const std::vector<int>& axes, bool keepdims) {
  return detail::apply_op1(id, {x}, detail::ReduceAttrs{{axes.begin(), axes.end()}, keepdims});
}

}  // namespace

#define TG_REDUCE(fn, Id) \
  Tensor fn(const Tensor& x, std::vector<int> axes, bool keepdims) { \
    return apply_reduce(detail::OpId::Id, x, axes, keepdims);              \
  }
TG_REDUCE(reduce_sum, ReduceSum)
TG_REDUCE(reduce_mean, ReduceMean)
TG_REDUCE(reduce_max, ReduceMax)
TG_REDUCE(reduce_min, ReduceMin)
TG_REDUCE(reduce_prod, ReduceProd)
TG_REDUCE(reduce_any, ReduceAny)
TG_REDUCE(reduce_all, ReduceAll)
#undef TG_REDUCE

Tensor argmax(const Tensor& x, int axis) {
  return detail::apply_op1(detail::OpId::ArgMax, {x}, detail::ArgReduceAttrs{axis, int64});
}
Tensor argmin(const Tensor& x, int axis) {
  return detail::apply_op1(detail::OpId::ArgMin, {x}, detail::ArgReduceAttrs{axis, int64});
}
Tensor softmax(const Tensor& x, int axis) {
  return detail::apply_op1(detail::OpId::Softmax, {x}, detail::AxisAttrs{axis});
}
Tensor log_softmax(const Tensor& x, int axis) {
  return detail::apply_op1(detail::OpId::LogSoftmax, {x}, detail::AxisAttrs{axis});
}

namespace detail {

namespace {
bool same_static_shape(const Tensor& a, const Tensor& b) {
  const TensorShape sa = detail::static_shape(a);
  return sa.is_fully_defined() && sa == detail::static_shape(b);
}
}  // namespace

Tensor sum_to_like(const Tensor& g, const Tensor& like) {
  if (same_static_shape(g, like)) return g;
  return apply_op1(OpId::SumToLike, {g, like});
}

namespace {
// sum_to_operand's proof, on static shapes.
bool keeps_operand_shape(const TensorShape& sg, const std::vector<Tensor>& operands, std::size_t i) {
  const TensorShape& sx = static_shape(operands[i]);
  // g has the operand's rank and each of its static dims: else the operand was broadcast along
  // one, or g's static shape lost it (passing g would then lose it for whatever reads it).
  if (!sx.has_rank() || !sg.is_subtype_of(sx)) return false;
  const std::size_t rank = sx.dims().size();
  for (std::size_t d = 0; d < rank; ++d) {
    if (sx.dims()[d] != None) continue;
    for (std::size_t j = 0; j < operands.size(); ++j) {
      if (j == i) continue;
      const TensorShape& so = static_shape(operands[j]);
      if (!so.has_rank() || so.dims().size() > rank) return false;
      const std::size_t lead = rank - so.dims().size();  // dims operand j does not have
      if (d >= lead && so.dims()[d - lead] != 1) return false;
    }
  }
  return true;
}
}  // namespace

Tensor sum_to_operand(const Tensor& g, const std::vector<Tensor>& operands, std::size_t i) {
  if (keeps_operand_shape(static_shape(g), operands, i)) return g;
  return sum_to_like(g, operands[i]);
}

Tensor broadcast_like(const Tensor& x, const Tensor& like) {
  if (same_static_shape(x, like)) return x;
  return apply_op1(OpId::BroadcastLike, {x, like});
}

Tensor unreduce_like(const Tensor& g, const Tensor& like, const std::vector<int64_t>& axes,
                     bool keepdims) {
  return apply_op1(OpId::UnreduceLike, {g, like}, reduce_attrs(axes, keepdims));
}

}  // namespace detail

}  // namespace tg
