// Shapes with possibly unknown dimensions or rank, and TensorSpec.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "tracegraph/dtype.h"

namespace tg {

/// An unknown dimension (TensorFlow's None).
inline constexpr int64_t None = -1;

class TensorShape;
namespace detail {
struct SymbolicValue;  // core/tensor_impl.h: what a symbolic tensor stands for
/// The shape of a symbolic tensor as Tensor::shape() hands it out: checks what is read of it.
TensorShape checked_shape(const TensorShape& shape, std::shared_ptr<const SymbolicValue> tensor);
}  // namespace detail

/// A tensor shape. Dims may be None; the rank itself may be unknown (unknown_rank()).
/// Eager tensors always have fully defined shapes; the unknowns exist for specs and tracing.
///
/// The shape of a symbolic tensor (Tensor::shape() while tracing) never hands an unknown to C++
/// code as a plain integer: rank(), dims(), dim(i) and num_elements() raise ValueError when
/// their answer involves an unknown rank or a None dim, because a loop bound or a size read as
/// -1 makes the traced code silently wrong for every real size. none_aware() (or as_list())
/// is the view for code that handles None on purpose; has_rank(), is_fully_defined() and
/// to_string() never raise.
class TensorShape {
 public:
  TensorShape() = default;  // scalar: rank 0
  TensorShape(std::initializer_list<int64_t> dims);
  TensorShape(std::vector<int64_t> dims);
  static TensorShape unknown_rank();

  bool has_rank() const { return has_rank_; }
  /// The number of dims; -1 when the rank is unknown.
  int64_t rank() const { return has_rank_ ? static_cast<int64_t>(dims_.size()) : unknown_rank_value(); }
  const std::vector<int64_t>& dims() const {
    if (traced_) check_known("dims()");
    return dims_;
  }
  /// dims()[i]; negative i counts from the end. Throws InvalidArgumentError when out of range.
  int64_t dim(int64_t i) const;
  bool is_fully_defined() const;
  /// Product of the dims; -1 if not fully defined.
  int64_t num_elements() const;
  /// This shape as a plain value whose dims() hold None for unknown dims (the view for code
  /// that handles None on purpose; see the class comment).
  TensorShape none_aware() const;
  /// The dims with None kept as tg::None (TF's as_list()). Raises ValueError on an unknown rank.
  std::vector<int64_t> as_list() const;
  /// (2,3) <= (None,3) <= <unknown>: every tensor of this shape also has shape `other`.
  bool is_subtype_of(const TensorShape& other) const;
  /// Could a tensor have both shapes? (None matches anything, unknown rank matches all.)
  bool is_compatible_with(const TensorShape& other) const;
  /// The most specific shape both are subtypes of: differing dims -> None, ranks -> unknown.
  TensorShape most_specific_common_supertype(const TensorShape& other) const;
  /// "()", "(3,)", "(None, 3)", "<unknown>".
  std::string to_string() const;

  bool operator==(const TensorShape& o) const { return has_rank_ == o.has_rank_ && dims_ == o.dims_; }

 private:
  friend TensorShape detail::checked_shape(const TensorShape&, std::shared_ptr<const detail::SymbolicValue>);
  int64_t unknown_rank_value() const;
  void check_known(const char* what, int64_t dim = -1) const;

  std::vector<int64_t> dims_;
  bool has_rank_ = true;
  // Set on the shape of a symbolic tensor: the tensor, for messages and for recording which
  // dims the traced code read as integers.
  std::shared_ptr<const detail::SymbolicValue> traced_;
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

/// Write to_string(): "(None, 3)", "<unknown>"; "TensorSpec(shape=(None,), dtype=tg.int32, name=None)".
std::ostream& operator<<(std::ostream&, const TensorShape&);
std::ostream& operator<<(std::ostream&, const TensorSpec&);

}  // namespace tg
