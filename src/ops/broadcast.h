// Shape/dtype rule helpers shared by op families, and the strided loop broadcasting kernels use.
#pragma once
#include <algorithm>
#include <array>
#include <string>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "ops/op.h"

namespace tg::detail {

/// One dimension of NumPy broadcasting, None-aware: equal dims, or a 1 against anything, or
/// None against a known dim. False if x and y cannot broadcast.
bool broadcast_dim(int64_t x, int64_t y, int64_t& out);

/// Where two dim lists fail to broadcast: the result dim (from the front) and the two sizes.
struct BroadcastMismatch {
  int64_t dim;
  int64_t x;
  int64_t y;
};
/// NumPy broadcasting of two dim lists, right-aligned, None-aware (broadcast_dim per dim): the
/// result in `out`, or the first mismatch from the right (each caller words its own error).
std::optional<BroadcastMismatch> broadcast_dims(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                                std::vector<int64_t>& out);

/// NumPy broadcasting of two shapes, aware of None dims and unknown rank:
/// (None vs 1) -> None, (None vs k>1) -> k, (None vs None) -> None.
TensorShape broadcast_shapes(const char* op, const TensorShape& a, const TensorShape& b);

/// Throws InvalidArgumentError naming both dtypes and the op when they differ (no promotion).
void require_same_dtype(const char* op, const std::vector<ValueType>& in);
/// Throws InvalidArgumentError unless in.dtype is one of `allowed` (listed in the message).
void require_dtype(const char* op, const ValueType& in, std::initializer_list<DType> allowed,
                   const char* what = "input");
/// Throws InvalidArgumentError unless the rank is known and >= min_rank (unknown ranks pass).
void require_min_rank(const char* op, const ValueType& in, int64_t min_rank, const char* what);

/// Calls fn with a value-initialised object of dtype's C++ type (float, double, int32_t,
/// int64_t, bool, std::string, uint8_t, bfloat16_t): the one switch from a runtime dtype to a
/// kernel template. bfloat16_t has no arithmetic: kernels that compute on T exclude it, since
/// ops compute on bfloat16 in float32 (ops/bf16_compute.h) and refuse it otherwise.
template <class Fn>
void visit_dtype(DType d, Fn&& fn) {
  switch (d) {
    case DType::Float32: return fn(float{});
    case DType::Float64: return fn(double{});
    case DType::Int32: return fn(int32_t{});
    case DType::Int64: return fn(int64_t{});
    case DType::Bool: return fn(bool{});
    case DType::String: return fn(std::string{});
    case DType::UInt8: return fn(uint8_t{});
    case DType::BFloat16: return fn(bfloat16_t{});
  }
}

/// out = src (whose row-major dims are src_dims, which broadcast to out's) broadcast to out's
/// shape; out is allocated. Any dtype.
void broadcast_copy(const Tensor& src, const std::vector<int64_t>& src_dims, Tensor& out);

/// "[2, -1]": attribute lists in messages (-1 there means "infer", not None).
std::string format_list(const std::vector<int64_t>& v);

/// a * b for dims and element counts (a, b >= 0), INT64_MAX when that overflows. Only a
/// zero-element shape can get there - (0, 2^40, 2^40, 3) is a legal empty tensor, while a shape
/// whose nonzero element count overflows is refused where tensors are made (TensorShape::
/// num_elements) - and such a value addresses no element: code that loops over one must return
/// on zero elements first. Signed overflow itself would be undefined behaviour.
inline int64_t mul_saturating(int64_t a, int64_t b) {
  int64_t p;
  return __builtin_mul_overflow(a, b, &p) ? std::numeric_limits<int64_t>::max() : p;
}

/// Product of dims[begin, end) (fully defined dims): 0 when one of them is 0, else saturated
/// as mul_saturating (a range of a zero-element shape may multiply past int64).
int64_t product(const std::vector<int64_t>& dims, std::size_t begin, std::size_t end);

/// Row-major strides of a fully defined shape, saturated as mul_saturating: the outer strides
/// of a zero-element shape such as (0, 2^40, 2^40, 3) do not fit int64 (and are never used).
std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dims);

/// Walks out_dims in row-major order, calling fn(offsets, inner_strides, inner_len) for each
/// innermost run, where offsets[k] is input k's element offset at the start of the run and
/// inner_strides[k] is 0 (broadcast) or its stride along the run. Adjacent dims that broadcast
/// the same way are merged first, so contiguous tensors give one long run.
template <std::size_t N, class Fn>
void for_each_broadcast_run(const std::vector<int64_t>& out_dims,
                            const std::array<const std::vector<int64_t>*, N>& in_dims, Fn&& fn) {
  // An empty output has no run, and its dims' products may overflow int64 - (0, 2^40, 2^40, 3)
  // is a legal empty shape - which for a nonempty one (and its inputs, which broadcast to it)
  // the tensor's own allocation has ruled out.
  for (int64_t d : out_dims)
    if (d == 0) return;
  // The usual case first, without the stride tables below (two heap vectors, a third of a
  // cached scalar call): every input has the output's dims or is a single element, so the
  // whole output is one run.
  {
    int64_t total = 1;
    for (int64_t d : out_dims) total *= d;
    std::array<int64_t, N> run_strides{};
    bool one_run = true;
    for (std::size_t k = 0; k < N && one_run; ++k) {
      if (*in_dims[k] == out_dims) run_strides[k] = 1;
      else if (std::all_of(in_dims[k]->begin(), in_dims[k]->end(), [](int64_t d) { return d == 1; }))
        run_strides[k] = 0;
      else one_run = false;
    }
    if (one_run) {
      if (total > 0) fn(std::array<int64_t, N>{}, run_strides, total);
      return;
    }
  }
  const std::size_t rank = out_dims.size();
  // Per input strides aligned to the output's dims (0 where the input broadcasts).
  std::vector<std::array<int64_t, N>> strides(rank);
  for (std::size_t k = 0; k < N; ++k) {
    const auto& d = *in_dims[k];
    int64_t s = 1;
    for (std::size_t i = 0; i < rank; ++i) {
      const std::size_t oi = rank - 1 - i;
      if (i < d.size()) {
        const int64_t dim = d[d.size() - 1 - i];
        strides[oi][k] = dim == 1 ? 0 : s;
        s *= dim;
      } else {
        strides[oi][k] = 0;
      }
    }
  }
  // Merge dim i into i+1 when every input's stride along i equals stride(i+1) * dim(i+1).
  std::vector<int64_t> dims;
  std::vector<std::array<int64_t, N>> st;
  for (std::size_t i = 0; i < rank; ++i) {
    if (out_dims[i] == 1) continue;  // size-1 dims contribute nothing
    if (!dims.empty()) {
      bool mergeable = true;
      for (std::size_t k = 0; k < N; ++k)
        if (st.back()[k] != strides[i][k] * out_dims[i]) mergeable = false;
      if (mergeable) {
        dims.back() *= out_dims[i];
        st.back() = strides[i];
        continue;
      }
    }
    dims.push_back(out_dims[i]);
    st.push_back(strides[i]);
  }
  int64_t total = 1;
  for (int64_t d : out_dims) total *= d;
  if (total == 0) return;
  if (dims.empty()) {
    fn(std::array<int64_t, N>{}, std::array<int64_t, N>{}, int64_t{1});
    return;
  }
  const std::size_t r = dims.size();
  const int64_t inner = dims[r - 1];
  std::vector<int64_t> counter(r, 0);
  std::array<int64_t, N> off{};
  const int64_t outer = total / inner;
  for (int64_t o = 0; o < outer; ++o) {
    fn(off, st[r - 1], inner);
    // Advance the outer counters (dims 0 .. r-2).
    for (std::size_t i = r - 1; i-- > 0;) {
      ++counter[i];
      for (std::size_t k = 0; k < N; ++k) off[k] += st[i][k];
      if (counter[i] < dims[i]) break;
      for (std::size_t k = 0; k < N; ++k) off[k] -= st[i][k] * dims[i];
      counter[i] = 0;
    }
  }
}

}  // namespace tg::detail
