// tg::IndexedSlices (tf.IndexedSlices) and tg::Gradient: the sparse gradient of a gather, and a
// gradient that is either dense or sparse.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "tracegraph/tensor.h"

namespace tg {

/// Rows of a tensor of shape `dense_shape`: row indices[i] of the dense tensor is values[i]
/// (tf.IndexedSlices). What GradientTape::sparse_gradient gives for a source that is only
/// gathered along axis 0 (tg::gather, nn::Embedding): the gathered rows' gradients, one per
/// index, duplicates kept. Indices and values are ordinary tensors, eager or symbolic.
///
/// Duplicated indices mean a sum: to_dense() adds the rows of equal indices.
class IndexedSlices {
 public:
  /// `indices`: a 1-D int32 or int64 tensor [N]; `values`: [N] + dense_shape[1:] of a floating
  /// dtype; `dense_shape`: fully known, rank >= 1. tg::InvalidArgumentError otherwise (the
  /// indices' range is checked where they are used: to_dense(), a Variable's scatter ops).
  IndexedSlices(Tensor indices, Tensor values, TensorShape dense_shape);

  const Tensor& indices() const { return indices_; }
  const Tensor& values() const { return values_; }
  const TensorShape& dense_shape() const { return dense_shape_; }
  DType dtype() const { return values_.dtype(); }

  /// The dense tensor (tf.convert_to_tensor): rows of equal indices summed, other rows zero.
  /// Logs TF's warning ("... to a dense Tensor with N elements. This may consume a large amount
  /// of memory.") when it has 100,000,000 elements or more. tg::InvalidArgumentError for an
  /// index outside [0, dense_shape[0]).
  Tensor to_dense() const;

  /// The same slices with each index once, in order of first appearance, the rows of repeated
  /// indices summed (TF's unique + unsorted_segment_sum, as optimizers deduplicate a sparse
  /// gradient before applying it).
  IndexedSlices deduplicated() const;

  std::string to_string() const;

 private:
  Tensor indices_, values_;
  TensorShape dense_shape_;
};

/// One gradient: a dense tg::Tensor, an IndexedSlices, or nothing (an undefined tensor, TF's
/// None). What GradientTape::sparse_gradient returns per source and what the optimizers and
/// clipping functions accept next to plain tensors.
class Gradient {
 public:
  Gradient() = default;
  Gradient(Tensor dense) : dense_(std::move(dense)) {}  // NOLINT: implicit, as TF mixes both
  Gradient(IndexedSlices sparse);                         // NOLINT: implicit

  bool defined() const { return sparse_ != nullptr || dense_.defined(); }
  bool is_sparse() const { return sparse_ != nullptr; }
  /// The dense tensor; tg::TypeError for a sparse gradient (use to_dense(), or slices()).
  const Tensor& dense() const;
  /// The slices; tg::TypeError for a dense gradient.
  const IndexedSlices& slices() const;
  /// The dense tensor, a sparse gradient converted (IndexedSlices::to_dense); an undefined
  /// gradient gives an undefined tensor.
  Tensor to_dense() const;
  DType dtype() const;

 private:
  Tensor dense_;
  std::shared_ptr<const IndexedSlices> sparse_;
};

}  // namespace tg
