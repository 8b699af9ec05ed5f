#include "tracegraph/shape.h"

#include "core/check.h"

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
  if (!has_rank_)
    throw InvalidArgumentError("[TensorShape] cannot index a shape of unknown rank");
  const int64_t r = rank();
  if (i < -r || i >= r)
    throw InvalidArgumentError(detail::str_cat("[TensorShape] dimension index ", i,
                                               " is out of range for rank ", r, " shape ",
                                               to_string()));
  return dims_[static_cast<std::size_t>(i < 0 ? i + r : i)];
}

bool TensorShape::is_fully_defined() const {
  if (!has_rank_) return false;
  for (int64_t d : dims_)
    if (d == None) return false;
  return true;
}

int64_t TensorShape::num_elements() const {
  if (!is_fully_defined()) return -1;
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
    : shape(std::move(s)), dtype(d), name(std::move(n)) {}

std::string TensorSpec::to_string() const {
  return detail::str_cat("TensorSpec(shape=", shape.to_string(), ", dtype=tg.", tg::to_string(dtype),
                         ", name=", name.empty() ? "None" : "'" + name + "'", ")");
}

}  // namespace tg
