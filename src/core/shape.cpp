#include "tracegraph/shape.h"

#include <ostream>

#include "core/check.h"
#include "core/tensor_impl.h"

namespace tg {

namespace {
void validate_dims(const std::vector<int64_t>& dims) {
  for (std::size_t i = 0; i < dims.size(); ++i)
    if (dims[i] < -1)
      throw InvalidArgumentError(detail::str_cat(
          "[TensorShape] dimension ", i, " is ", dims[i],
          "; expected a size >= 0 or tg::None (-1) for an unknown dimension"));
}
}  // namespace

TensorShape::TensorShape(std::initializer_list<int64_t> dims) : dims_(dims) {
  validate_dims(dims_);
}
TensorShape::TensorShape(std::vector<int64_t> dims) : dims_(std::move(dims)) {
  validate_dims(dims_);
}

TensorShape TensorShape::unknown_rank() {
  TensorShape s;
  s.has_rank_ = false;
  return s;
}

int64_t TensorShape::dim(int64_t i) const {
  if (!has_rank_) {
    if (traced_) check_known("dim()");
    throw InvalidArgumentError("[TensorShape] cannot index a shape of unknown rank");
  }
  const int64_t r = rank();
  if (i < -r || i >= r)
    throw InvalidArgumentError(detail::str_cat("[TensorShape] dimension index ", i,
                                               " is out of range for rank ", r, " shape ",
                                               to_string()));
  const int64_t k = i < 0 ? i + r : i;
  if (traced_) check_known("dim()", k);
  return dims_[static_cast<std::size_t>(k)];
}

int64_t TensorShape::unknown_rank_value() const {
  if (traced_) check_known("rank()");
  return -1;
}

// Raises when the answer of `what` would involve an unknown (dim < 0: any dim, else that one);
// otherwise tells the symbolic value which dims the code read as integers.
void TensorShape::check_known(const char* what, int64_t dim) const {
  const std::string tensor = traced_->origin();
  const std::string fixes =
      "; that has no integer value while tracing, and using -1 in its place would make the traced "
      "code wrong for every real size. Use tg::shape(tensor)";
  if (!has_rank_)
    throw ValueError(detail::str_cat(
        "[TensorShape::", what, "] the rank of the symbolic tensor ", tensor, " is unknown", fixes,
        " for the shape as a tensor at run time, or give the argument a shape of known rank "
        "(input_signature); shape().has_rank() and none_aware() handle an unknown rank on purpose"));
  for (std::size_t i = 0; i < dims_.size(); ++i) {
    if (dims_[i] != None || (dim >= 0 && static_cast<int64_t>(i) != dim)) continue;
    throw ValueError(detail::str_cat(
        "[TensorShape::", what, "] dimension ", i, " of the symbolic tensor ", tensor, ", shape ",
        to_string(), ", is unknown (None)", fixes, "[", i,
        "] for its value as a tensor at run time (tg::for_range loops over it), or give that "
        "dimension a fixed size (input_signature, or calls with one size); shape().none_aware() "
        "reads None as tg::None on purpose"));
  }
  if (dim >= 0) {
    traced_->on_static_dims_read(dim);
  } else {
    for (std::size_t i = 0; i < dims_.size(); ++i) traced_->on_static_dims_read(static_cast<int64_t>(i));
  }
}

TensorShape detail::checked_shape(const TensorShape& shape, std::shared_ptr<const SymbolicValue> tensor) {
  TensorShape s = shape;
  s.traced_ = std::move(tensor);
  return s;
}

TensorShape TensorShape::none_aware() const {
  TensorShape s = *this;
  s.traced_.reset();
  return s;
}

std::vector<int64_t> TensorShape::as_list() const {
  if (!has_rank_)
    throw ValueError("[TensorShape::as_list] as_list() is not defined on a shape of unknown rank; "
                     "check has_rank() first");
  return dims_;
}

bool TensorShape::is_fully_defined() const {
  if (!has_rank_) return false;
  for (int64_t d : dims_)
    if (d == None) return false;
  return true;
}

int64_t TensorShape::num_elements() const {
  if (traced_) check_known("num_elements()");
  if (!is_fully_defined()) return -1;
  // (2^40, 2^40, 0) holds no element: its leading dims alone would overflow the count.
  for (int64_t d : dims_)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : dims_)
    if (__builtin_mul_overflow(n, d, &n))
      throw InvalidArgumentError(detail::str_cat("[TensorShape] the shape ", to_string(),
                                                 " has more elements than int64 can count"));
  return n;
}

bool TensorShape::is_subtype_of(const TensorShape& other) const {
  if (!other.has_rank_) return true;
  if (!has_rank_) return false;
  if (dims_.size() != other.dims_.size()) return false;
  for (std::size_t i = 0; i < dims_.size(); ++i)
    if (other.dims_[i] != None && other.dims_[i] != dims_[i]) return false;
  return true;
}

bool TensorShape::is_compatible_with(const TensorShape& other) const {
  if (!has_rank_ || !other.has_rank_) return true;
  if (dims_.size() != other.dims_.size()) return false;
  for (std::size_t i = 0; i < dims_.size(); ++i)
    if (dims_[i] != None && other.dims_[i] != None && dims_[i] != other.dims_[i]) return false;
  return true;
}

TensorShape TensorShape::most_specific_common_supertype(const TensorShape& other) const {
  if (!has_rank_ || !other.has_rank_ || dims_.size() != other.dims_.size())
    return unknown_rank();
  std::vector<int64_t> dims(dims_.size());
  for (std::size_t i = 0; i < dims_.size(); ++i)
    dims[i] = dims_[i] == other.dims_[i] ? dims_[i] : None;
  return TensorShape(std::move(dims));
}

std::string TensorShape::to_string() const {
  if (!has_rank_) return "<unknown>";
  std::string s = "(";
  for (std::size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ", ";
    s += dims_[i] == None ? "None" : std::to_string(dims_[i]);
  }
  if (dims_.size() == 1) s += ",";
  return s + ")";
}

TensorSpec::TensorSpec(TensorShape s, DType d, std::string n)
    : shape(s.none_aware()), dtype(d), name(std::move(n)) {}  // a spec keeps None as a value

std::string TensorSpec::to_string() const {
  return detail::str_cat("TensorSpec(shape=", shape.to_string(), ", dtype=tg.", tg::to_string(dtype),
                         ", name=", name.empty() ? "None" : "'" + name + "'", ")");
}

}  // namespace tg

namespace tg {
std::ostream& operator<<(std::ostream& os, const TensorShape& s) { return os << s.to_string(); }
std::ostream& operator<<(std::ostream& os, const TensorSpec& s) { return os << s.to_string(); }
}  // namespace tg
