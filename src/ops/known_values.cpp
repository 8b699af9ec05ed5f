#include "ops/known_values.h"

#include <algorithm>
#include <cstdint>

#include "core/shape_limits.h"
#include "core/tensor_impl.h"

namespace tg::detail {

namespace {

bool is_index_dtype(DType d) { return d == DType::Int32 || d == DType::Int64; }

// Scalars and vectors no longer than the rank limit: what a shape can be made of. Longer ones are
// not tracked (their elements could not be a shape anyway).
bool trackable(const ValueType& t) {
  if (!is_index_dtype(t.dtype) || !t.shape.has_rank() || t.shape.rank() > 1) return false;
  return t.shape.rank() == 0 || (t.shape.dims()[0] != None && t.shape.dims()[0] <= static_cast<int64_t>(kMaxRank));
}

using Known = std::vector<int64_t>;

// a op b on known elements; None when either is unknown or the result leaves int64 (it would
// not be a size then, and the kernel reports what really happens).
int64_t combine(OpId id, int64_t a, int64_t b) {
  if (a == None || b == None) return None;
  int64_t r = None;
  switch (id) {
    case OpId::Add:
      if (__builtin_add_overflow(a, b, &r)) return None;
      return r;
    case OpId::Sub:
      if (__builtin_sub_overflow(a, b, &r)) return None;
      return r;
    case OpId::Mul:
      if (__builtin_mul_overflow(a, b, &r)) return None;
      return r;
    case OpId::FloorDiv:
      if (b == 0 || (a == INT64_MIN && b == -1)) return None;
      r = a / b;
      if ((a % b != 0) && ((a < 0) != (b < 0))) --r;
      return r;
    case OpId::Maximum: return std::max(a, b);
    case OpId::Minimum: return std::min(a, b);
    default: return None;
  }
}

// An element that is a legitimate -1 (reshape's "infer this one") reads as None: tracing then
// knows less than it could, never something false.
std::shared_ptr<const Known> make(Known k) { return std::make_shared<const Known>(std::move(k)); }

}  // namespace

std::optional<std::vector<int64_t>> known_elements(const Tensor& t) {
  if (!t.defined()) return std::nullopt;
  const TensorImpl& impl = *t.impl();
  if (!trackable(ValueType{impl.dtype, impl.shape})) return std::nullopt;
  if (impl.symbolic) {
    if (!impl.symbolic->known_elements) return std::nullopt;
    return *impl.symbolic->known_elements;
  }
  const int64_t n = impl.shape.rank() == 0 ? 1 : impl.shape.dims()[0];
  Known k(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    k[static_cast<std::size_t>(i)] = impl.dtype == DType::Int64 ? impl.data<int64_t>()[i] : int64_t{impl.data<int32_t>()[i]};
  return k;
}

std::shared_ptr<const std::vector<int64_t>> infer_known_elements(OpId id, const std::vector<Tensor>& inputs,
                                                                 const OpAttrs& attrs, const ValueType& output) {
  if (!trackable(output)) return nullptr;
  const std::size_t length = output.shape.rank() == 0 ? 1 : static_cast<std::size_t>(output.shape.dims()[0]);
  switch (id) {
    case OpId::Shape: {
      const TensorShape& s = static_shape(inputs[0]);
      if (!s.has_rank() || s.dims().size() != length) return nullptr;
      return make(s.dims());
    }
    case OpId::Stack: {
      if (attrs.get<AxisAttrs>().axis != 0 && attrs.get<AxisAttrs>().axis != -1) return nullptr;
      Known k;
      for (const Tensor& t : inputs) {
        const auto e = known_elements(t);
        k.push_back(e && e->size() == 1 && static_shape(t).rank() == 0 ? (*e)[0] : None);
      }
      return k.size() == length ? make(std::move(k)) : nullptr;
    }
    case OpId::Concat: {
      Known k;
      for (const Tensor& t : inputs) {
        const auto e = known_elements(t);
        if (!e) {  // its length alone still places the others
          const TensorShape& s = static_shape(t);
          if (!s.has_rank() || s.rank() != 1 || s.dims()[0] == None) return nullptr;
          k.insert(k.end(), static_cast<std::size_t>(s.dims()[0]), None);
        } else {
          k.insert(k.end(), e->begin(), e->end());
        }
      }
      return k.size() == length ? make(std::move(k)) : nullptr;
    }
    case OpId::Index: {
      const auto e = known_elements(inputs[0]);
      if (!e || static_shape(inputs[0]).rank() != 1) return nullptr;
      int64_t i = attrs.get<IndexAttrs>().index;
      const auto n = static_cast<int64_t>(e->size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return nullptr;
      return make({(*e)[static_cast<std::size_t>(i)]});
    }
    case OpId::Slice: {
      const auto e = known_elements(inputs[0]);
      const auto& a = attrs.get<SliceAttrs>();
      if (!e || static_shape(inputs[0]).rank() != 1 || a.begin.size() != 1 || a.size.size() != 1) return nullptr;
      const auto n = static_cast<int64_t>(e->size());
      const int64_t begin = a.begin[0], size = a.size[0] == -1 ? n - a.begin[0] : a.size[0];
      if (begin < 0 || size < 0 || begin > n || size > n - begin || static_cast<std::size_t>(size) != length)
        return nullptr;
      return make(Known(e->begin() + begin, e->begin() + begin + size));
    }
    case OpId::Cast:
    case OpId::Identity: {
      const auto e = known_elements(inputs[0]);
      if (!e || e->size() != length) return nullptr;
      Known k = *e;
      // int64 -> int32 wraps values outside int32: those are not known any more.
      if (output.dtype == DType::Int32)
        for (int64_t& v : k)
          if (v != None && (v < INT32_MIN || v > INT32_MAX)) v = None;
      return make(std::move(k));
    }
    case OpId::Add:
    case OpId::Sub:
    case OpId::Mul:
    case OpId::FloorDiv:
    case OpId::Maximum:
    case OpId::Minimum: {
      const auto a = known_elements(inputs[0]);
      const auto b = known_elements(inputs[1]);
      if (!a || !b) return nullptr;
      // A scalar operand broadcasts over the other's elements.
      const auto at = [](const Known& k, std::size_t i) { return k.size() == 1 ? k[0] : k[i]; };
      if ((a->size() != 1 && a->size() != length) || (b->size() != 1 && b->size() != length)) return nullptr;
      Known k(length);
      for (std::size_t i = 0; i < length; ++i) {
        k[i] = combine(id, at(*a, i), at(*b, i));
        // Int32 arithmetic wraps outside int32's range: not a known value then.
        if (output.dtype == DType::Int32 && k[i] != None && (k[i] < INT32_MIN || k[i] > INT32_MAX)) k[i] = None;
      }
      return make(std::move(k));
    }
    default: return nullptr;
  }
}

}  // namespace tg::detail
