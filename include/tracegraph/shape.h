// Shapes with possibly unknown dimensions or rank, and TensorSpec.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "tracegraph/dtype.h"

namespace tg {

/// An unknown dimension (TensorFlow's None).
inline constexpr int64_t None = -1;

/// A tensor shape. Dims may be None; the rank itself may be unknown (unknown_rank()).
/// Eager tensors always have fully defined shapes; the unknowns exist for specs and tracing.
class TensorShape {
 public:
  TensorShape() = default;  // scalar: rank 0
  TensorShape(std::initializer_list<int64_t> dims);
  TensorShape(std::vector<int64_t> dims);
  static TensorShape unknown_rank();

  bool has_rank() const { return has_rank_; }
  /// The number of dims; -1 when the rank is unknown.
  int64_t rank() const { return has_rank_ ? static_cast<int64_t>(dims_.size()) : -1; }
  const std::vector<int64_t>& dims() const { return dims_; }
  /// dims()[i]; negative i counts from the end. Throws InvalidArgumentError when out of range.
  int64_t dim(int64_t i) const;
  bool is_fully_defined() const;
  /// Product of the dims; -1 if not fully defined.
  int64_t num_elements() const;
  /// (2,3) <= (None,3) <= <unknown>: every tensor of this shape also has shape `other`.
  bool is_subtype_of(const TensorShape& other) const;
  /// Could a tensor have both shapes? (None matches anything, unknown rank matches all.)
  bool is_compatible_with(const TensorShape& other) const;
  /// The most specific shape both are subtypes of: differing dims -> None, ranks -> unknown.
  TensorShape most_specific_common_supertype(const TensorShape& other) const;
  /// "()", "(3,)", "(None, 3)", "<unknown>".
  std::string to_string() const;

  bool operator==(const TensorShape& o) const = default;

 private:
  std::vector<int64_t> dims_;
  bool has_rank_ = true;
};

/// The type of a tensor argument: shape, dtype and an optional name (tf.TensorSpec).
struct TensorSpec {
  TensorShape shape;
  DType dtype;
  std::string name;
  TensorSpec(TensorShape shape, DType dtype, std::string name = "");
  /// "TensorSpec(shape=(None,), dtype=tg.int32, name=None)".
  std::string to_string() const;
  bool operator==(const TensorSpec& o) const = default;
};

}  // namespace tg
