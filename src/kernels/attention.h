// Scaled dot-product attention on raw buffers, tiled so that no Tq x Tk matrix exists: the
// forward pass walks the keys in tiles keeping each query row's running maximum and sum (an
// online softmax), and the backward pass recomputes each tile's weights from the row's saved
// log-sum-exp (flash attention's scheme). The scratch is a few tiles per thread.
#pragma once
#include <cstdint>

namespace tg::detail {

/// The sizes: q (batch, heads, tq, d), k (batch, heads, tk, d), v (batch, heads, tk, dv), all
/// contiguous row-major; with interleaved, q (batch, tq, heads, d), k (batch, tk, heads, d) and
/// v (batch, tk, heads, dv) instead, and the output and dq, dk, dv likewise (a head's rows
/// heads * d apart). lse is (batch, heads, tq) either way; the arithmetic is the same.
struct AttentionSizes {
  int64_t batch = 0, heads = 0, tq = 0, tk = 0, d = 0, dv = 0;
  bool interleaved = false;
};

/// A mask over (batch, heads, tq, tk) read through strides (0 along a broadcast dim): bool
/// (true: attend) or of the kernel's element type (added to the scores).
struct AttentionMaskView {
  const void* data = nullptr;  // null: no mask
  bool is_bool = false;
  int64_t strides[4] = {0, 0, 0, 0};
};

struct AttentionParams {
  double scale = 1.0;
  bool causal = false;        // query i sees keys j <= i
  AttentionMaskView mask;
  double dropout = 0.0;       // > 0: weights dropped by the (seed0, seed1) hash, kept ones scaled
  uint64_t seed0 = 0, seed1 = 0;
  // float32 on an AVX-512 CPU runs the score rows' passes (maximum, shift, sum, the gradients'
  // P * (dP - delta), the scalings by the scale and 1 / sum) on AVX-512 registers with the portable
  // loops' bits; true runs the portable loops instead (the tests compare the two).
  bool portable = false;
};

/// Whether the dropout keeps weight (b, h, i, j), flat index ((b * heads + h) * tq + i) * tk + j:
/// a pure function of the seeds and the index, so that the gradient sees the forward's mask.
bool attention_keeps(const AttentionParams& p, uint64_t flat_index);

/// out (batch, heads, tq, dv) (interleaved: (batch, tq, heads, dv)) and lse (batch, heads, tq): each row's log-sum-exp of its scores,
/// -inf for a row that sees no key (its output row is zeros). T is float or double.
template <class T>
void attention_forward(const AttentionSizes& s, const AttentionParams& p, const T* q, const T* k, const T* v,
                       T* out, T* lse);

/// dq, dk, dv from the forward's out and lse and the gradients of both (dlse may be null: zero).
template <class T>
void attention_backward(const AttentionSizes& s, const AttentionParams& p, const T* q, const T* k, const T* v,
                        const T* out, const T* lse, const T* dout, const T* dlse, T* dq, T* dk, T* dv);

}  // namespace tg::detail
