// The built-in trace types: tensors, literals, containers, optionals and objects.
#include <typeinfo>
#include <algorithm>
#include <cstring>
#include <string_view>
#include <cstdio>
#include <functional>
#include <mutex>
#include <set>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "trace/trace_diff.h"
#include "tracegraph/function.h"

namespace tg::detail {

namespace {

class TensorTraceType final : public TraceType {
 public:
  // None is a value here. A name (a TensorSpec's, given to get_concrete_function) is part of the
  // type as in TF's TensorSpec.is_subtype_of: an unnamed type (a tensor's) is a subtype of a named
  // one, so that values bind whatever a parameter's spec is called, while a named type is a
  // subtype of the same name only (a spec named otherwise traces anew, its input named so).
  TensorTraceType(DType d, const TensorShape& s, std::string name = "")
      : dtype_(d), shape_(s.none_aware()), name_(std::move(name)) {}
  bool is_subtype_of(const TraceType& o) const override {
    auto* t = dynamic_cast<const TensorTraceType*>(&o);
    return t && t->dtype_ == dtype_ && (name_.empty() || t->name_ == name_) && shape_.is_subtype_of(t->shape_);
  }
  TraceTypePtr most_specific_common_supertype(const std::vector<const TraceType*>& others) const override {
    TensorShape shape = shape_;
    for (const TraceType* o : others) {
      auto* t = dynamic_cast<const TensorTraceType*>(o);
      if (!t || t->dtype_ != dtype_ || t->name_ != name_) return nullptr;
      shape = shape.most_specific_common_supertype(t->shape_);
    }
    return std::make_shared<TensorTraceType>(dtype_, shape, name_);
  }
  bool equals(const TraceType& o) const override {
    auto* t = dynamic_cast<const TensorTraceType*>(&o);
    return t && t->dtype_ == dtype_ && t->shape_ == shape_ && t->name_ == name_;
  }
  std::size_t hash() const override {
    std::size_t h = hash_combine(0x7e45, static_cast<std::size_t>(dtype_));
    h = hash_combine(h, static_cast<std::size_t>(shape_.rank()));
    for (int64_t d : shape_.dims()) h = hash_combine(h, static_cast<std::size_t>(d));
    if (!name_.empty()) hash_mix(h, std::hash<std::string>{}(name_));
    return h;
  }
  std::string to_string() const override { return TensorSpec(shape_, dtype_, name_).to_string(); }
  DType dtype_;
  TensorShape shape_;
  std::string name_;
};

class LiteralTraceType final : public TraceType {
 public:
  explicit LiteralTraceType(LiteralValue v) : v_(std::move(v)) {}
  bool is_subtype_of(const TraceType& o) const override { return equals(o); }
  TraceTypePtr most_specific_common_supertype(const std::vector<const TraceType*>& others) const override {
    for (const TraceType* o : others)
      if (!equals(*o)) return nullptr;  // literals never generalise
    return std::make_shared<LiteralTraceType>(v_);
  }
  bool equals(const TraceType& o) const override {
    auto* t = dynamic_cast<const LiteralTraceType*>(&o);
    return t && t->v_ == v_;
  }
  std::size_t hash() const override {
    std::size_t h = hash_combine(0x11e7, static_cast<std::size_t>(v_.kind));
    h = hash_combine(h, static_cast<std::size_t>(v_.i));
    h = hash_combine(h, std::hash<double>{}(v_.f));
    h = hash_combine(h, std::hash<std::string>{}(v_.s));
    return hash_combine(h, std::hash<std::string_view>{}(v_.cpp_type));
  }
  std::string to_string() const override { return "Literal[" + v_.to_string() + "]"; }
  LiteralValue v_;
};

class SequenceTraceType final : public TraceType {
 public:
  SequenceTraceType(std::string kind, std::vector<TraceTypePtr> el) : kind_(std::move(kind)), el_(std::move(el)) {}
  bool is_subtype_of(const TraceType& o) const override {
    auto* t = dynamic_cast<const SequenceTraceType*>(&o);
    if (!t || t->kind_ != kind_ || t->el_.size() != el_.size()) return false;
    for (std::size_t i = 0; i < el_.size(); ++i)
      if (!el_[i]->is_subtype_of(*t->el_[i])) return false;
    return true;
  }
  TraceTypePtr most_specific_common_supertype(const std::vector<const TraceType*>& others) const override {
    std::vector<const SequenceTraceType*> seqs;
    for (const TraceType* o : others) {
      auto* t = dynamic_cast<const SequenceTraceType*>(o);
      if (!t || t->kind_ != kind_ || t->el_.size() != el_.size()) return nullptr;
      seqs.push_back(t);
    }
    std::vector<TraceTypePtr> el;
    for (std::size_t i = 0; i < el_.size(); ++i) {
      std::vector<const TraceType*> col;
      for (auto* s : seqs) col.push_back(s->el_[i].get());
      TraceTypePtr sup = el_[i]->most_specific_common_supertype(col);
      if (!sup) return nullptr;
      el.push_back(std::move(sup));
    }
    return std::make_shared<SequenceTraceType>(kind_, std::move(el));
  }
  bool equals(const TraceType& o) const override {
    auto* t = dynamic_cast<const SequenceTraceType*>(&o);
    if (!t || t->kind_ != kind_ || t->el_.size() != el_.size()) return false;
    for (std::size_t i = 0; i < el_.size(); ++i)
      if (!el_[i]->equals(*t->el_[i])) return false;
    return true;
  }
  std::size_t hash() const override {
    std::size_t h = hash_combine(std::hash<std::string>{}(kind_), el_.size());
    for (const auto& e : el_) h = hash_combine(h, e->hash());
    return h;
  }
  std::string to_string() const override {
    std::string s;
    for (const auto& e : el_) s += (s.empty() ? "" : ", ") + e->to_string();
    return kind_ + "[" + s + "]";
  }
  std::string kind_;
  std::vector<TraceTypePtr> el_;
};

class MappingTraceType final : public TraceType {
 public:
  using Items = std::vector<std::pair<LiteralValue, TraceTypePtr>>;
  explicit MappingTraceType(Items items) : items_(std::move(items)) {}
  bool same_keys(const MappingTraceType& t) const {
    if (t.items_.size() != items_.size()) return false;
    for (std::size_t i = 0; i < items_.size(); ++i)
      if (!(t.items_[i].first == items_[i].first)) return false;
    return true;
  }
  bool is_subtype_of(const TraceType& o) const override {
    auto* t = dynamic_cast<const MappingTraceType*>(&o);
    if (!t || !same_keys(*t)) return false;
    for (std::size_t i = 0; i < items_.size(); ++i)
      if (!items_[i].second->is_subtype_of(*t->items_[i].second)) return false;
    return true;
  }
  TraceTypePtr most_specific_common_supertype(const std::vector<const TraceType*>& others) const override {
    std::vector<const MappingTraceType*> maps;
    for (const TraceType* o : others) {
      auto* t = dynamic_cast<const MappingTraceType*>(o);
      if (!t || !same_keys(*t)) return nullptr;
      maps.push_back(t);
    }
    Items items;
    for (std::size_t i = 0; i < items_.size(); ++i) {
      std::vector<const TraceType*> col;
      for (auto* m : maps) col.push_back(m->items_[i].second.get());
      TraceTypePtr sup = items_[i].second->most_specific_common_supertype(col);
      if (!sup) return nullptr;
      items.emplace_back(items_[i].first, std::move(sup));
    }
    return std::make_shared<MappingTraceType>(std::move(items));
  }
  bool equals(const TraceType& o) const override {
    auto* t = dynamic_cast<const MappingTraceType*>(&o);
    if (!t || !same_keys(*t)) return false;
    for (std::size_t i = 0; i < items_.size(); ++i)
      if (!items_[i].second->equals(*t->items_[i].second)) return false;
    return true;
  }
  std::size_t hash() const override {
    std::size_t h = hash_combine(0x3a9, items_.size());
    for (const auto& [k, v] : items_) h = hash_combine(hash_combine(h, std::hash<std::string>{}(k.to_string())), v->hash());
    return h;
  }
  std::string to_string() const override {
    std::string s;
    for (const auto& [k, v] : items_) {
      if (!s.empty()) s.append(", ");
      s.append("[").append(k.to_string()).append(", ").append(v->to_string()).append("]");
    }
    return "Dict[" + s + "]";
  }
  Items items_;
};

class OptionalTraceType final : public TraceType {
 public:
  explicit OptionalTraceType(TraceTypePtr el) : el_(std::move(el)) {}
  bool is_subtype_of(const TraceType& o) const override {
    auto* t = dynamic_cast<const OptionalTraceType*>(&o);
    if (!t || !el_ != !t->el_) return false;
    return !el_ || el_->is_subtype_of(*t->el_);
  }
  TraceTypePtr most_specific_common_supertype(const std::vector<const TraceType*>& others) const override {
    std::vector<const TraceType*> col;
    for (const TraceType* o : others) {
      auto* t = dynamic_cast<const OptionalTraceType*>(o);
      if (!t || !el_ != !t->el_) return nullptr;
      if (el_) col.push_back(t->el_.get());
    }
    if (!el_) return std::make_shared<OptionalTraceType>(nullptr);
    TraceTypePtr sup = el_->most_specific_common_supertype(col);
    return sup ? std::make_shared<OptionalTraceType>(std::move(sup)) : nullptr;
  }
  bool equals(const TraceType& o) const override {
    auto* t = dynamic_cast<const OptionalTraceType*>(&o);
    if (!t || !el_ != !t->el_) return false;
    return !el_ || el_->equals(*t->el_);
  }
  std::size_t hash() const override { return hash_combine(0x0971, el_ ? el_->hash() : 0); }
  std::string to_string() const override { return el_ ? "Optional[" + el_->to_string() + "]" : "None"; }
  TraceTypePtr el_;
};

class VariableTraceType final : public TraceType {
 public:
  VariableTraceType(DType d, TensorShape s, int64_t alias_id) : dtype_(d), shape_(std::move(s)), alias_id_(alias_id) {}
  bool is_subtype_of(const TraceType& o) const override { return equals(o); }
  TraceTypePtr most_specific_common_supertype(const std::vector<const TraceType*>& others) const override {
    for (const TraceType* o : others)
      if (!equals(*o)) return nullptr;
    return std::make_shared<VariableTraceType>(dtype_, shape_, alias_id_);
  }
  bool equals(const TraceType& o) const override {
    auto* t = dynamic_cast<const VariableTraceType*>(&o);
    return t && t->dtype_ == dtype_ && t->alias_id_ == alias_id_ && t->shape_ == shape_;
  }
  std::size_t hash() const override {
    std::size_t h = hash_combine(0x7a1, static_cast<std::size_t>(dtype_));
    hash_mix(h, static_cast<std::size_t>(alias_id_));
    for (int64_t d : shape_.dims()) hash_mix(h, static_cast<std::size_t>(d));
    return h;
  }
  std::string to_string() const override {
    return "VariableSpec(shape=" + shape_.to_string() + ", dtype=tg." + tg::to_string(dtype_) +
           ", alias_id=" + std::to_string(alias_id_) + ")";
  }
  DType dtype_;
  TensorShape shape_;
  int64_t alias_id_;
};

class ObjectTraceType final : public TraceType {
 public:
  using CopyFn = std::shared_ptr<const void> (*)(const void*);
  ObjectTraceType(std::weak_ptr<const void> obj, const void* addr, std::string type,
                  bool (*eq)(const void*, const void*), CopyFn copy, std::shared_ptr<const void> snapshot = nullptr)
      : obj_(std::move(obj)), addr_(addr), type_(std::move(type)), eq_(eq), copy_(copy), snapshot_(std::move(snapshot)) {}
  // A traced type of a copyable type with == holds a snapshot: its value when it was traced,
  // which is what the graph baked in. It is compared by ==, never by identity, so that the same
  // object mutated since, or another object equal to the mutated one, does not reuse a trace
  // made for other values. Without a snapshot: identity first, then == (both objects alive).
  bool matches(const ObjectTraceType& t) const {
    if (t.type_ != type_) return false;
    if (snapshot_ || t.snapshot_) {
      std::shared_ptr<const void> keep_a, keep_b;
      const void* a = value(keep_a);
      const void* b = t.value(keep_b);
      return a && b && eq_(a, b);
    }
    auto a = obj_.lock();
    auto b = t.obj_.lock();
    if (!a || !b) return false;
    return a.get() == b.get() || (eq_ && eq_(a.get(), b.get()));
  }
  // The value compared: the snapshot, else the live object (kept alive by `keep`), else null.
  const void* value(std::shared_ptr<const void>& keep) const {
    if (snapshot_) return snapshot_.get();
    keep = obj_.lock();
    return keep.get();
  }
  // This type with a snapshot of the live object's value (nullptr when there is nothing to copy).
  TraceTypePtr with_snapshot() const {
    if (!copy_ || snapshot_) return nullptr;
    auto live = obj_.lock();
    if (!live) return nullptr;
    return std::make_shared<ObjectTraceType>(obj_, addr_, type_, eq_, copy_, copy_(live.get()));
  }
  bool is_subtype_of(const TraceType& o) const override {
    auto* t = dynamic_cast<const ObjectTraceType*>(&o);
    return t && matches(*t);
  }
  TraceTypePtr most_specific_common_supertype(const std::vector<const TraceType*>& others) const override {
    for (const TraceType* o : others)
      if (!is_subtype_of(*o)) return nullptr;
    return std::make_shared<ObjectTraceType>(obj_, addr_, type_, eq_, copy_, snapshot_);
  }
  bool equals(const TraceType& o) const override { return is_subtype_of(o); }
  std::size_t hash() const override { return std::hash<std::string>{}(type_); }
  std::string to_string() const override {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%p", addr_);
    return "Object[" + demangle(type_.c_str()) + " at " + buf + (obj_.expired() ? " (deleted)" : "") + "]";
  }
  std::weak_ptr<const void> obj_;
  const void* addr_;
  std::string type_;
  bool (*eq_)(const void*, const void*);
  CopyFn copy_;  // set for copyable types with ==
  std::shared_ptr<const void> snapshot_;
};

}  // namespace

bool LiteralValue::operator==(const LiteralValue& o) const {
  return kind == o.kind && i == o.i && (f == o.f || (f != f && o.f != o.f)) && s == o.s &&
         std::strcmp(cpp_type, o.cpp_type) == 0;
}

bool tensor_type_is(const TraceType& t, DType dtype, const TensorShape& shape) {
  // On every cached call: an exact type check (the class is final) costs a comparison where
  // dynamic_cast walks the class hierarchy.
  if (typeid(t) != typeid(TensorTraceType)) return false;
  const auto& x = static_cast<const TensorTraceType&>(t);
  return x.dtype_ == dtype && x.shape_ == shape && x.name_.empty();
}

bool tensor_type_equals(const Tensor& t, const TraceType& type) {
  // Here beside tensor_type_is, so that a cached call compares each argument in one call.
  const auto& impl = t.impl();
  if (!impl || impl->symbolic) return false;  // leaked symbolic tensors take the general path
  return tensor_type_is(type, impl->dtype, impl->shape);
}

const LiteralValue* literal_of(const TraceType& t) {
  auto* l = dynamic_cast<const LiteralTraceType*>(&t);
  return l ? &l->v_ : nullptr;
}

std::string LiteralValue::to_string() const {
  switch (kind) {
    case Kind::kInt: return std::to_string(i);
    case Kind::kFloat: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", f);
      std::string s = buf;
      // Shortest form that round-trips, as Python prints floats.
      for (int prec = 1; prec <= 17; ++prec) {
        std::snprintf(buf, sizeof buf, "%.*g", prec, f);
        if (std::strtod(buf, nullptr) == f) {
          s = buf;
          break;
        }
      }
      if (s.find_first_of(".einn") == std::string::npos) s += ".0";
      return s;
    }
    case Kind::kBool: return i ? "True" : "False";
    case Kind::kString: return "'" + s + "'";
    case Kind::kEnum: return demangle(s.c_str()) + "(" + std::to_string(i) + ")";
  }
  return "?";
}

TraceTypePtr tensor_trace_type(DType dtype, const TensorShape& shape, std::string name) {
  return std::make_shared<TensorTraceType>(dtype, shape, std::move(name));
}
const std::string& tensor_type_name(const TraceType& t) {
  static const std::string kNone;
  auto* x = dynamic_cast<const TensorTraceType*>(&t);
  return x ? x->name_ : kNone;
}
TraceTypePtr literal_trace_type(LiteralValue value) {
  if (value.kind == LiteralValue::Kind::kEnum) value.s = value.cpp_type;  // printed demangled
  return std::make_shared<LiteralTraceType>(std::move(value));
}
TraceTypePtr sequence_trace_type(std::string kind, std::vector<TraceTypePtr> elements) {
  return std::make_shared<SequenceTraceType>(std::move(kind), std::move(elements));
}
TraceTypePtr mapping_trace_type(std::vector<std::pair<LiteralValue, TraceTypePtr>> items) {
  std::sort(items.begin(), items.end(),
            [](const auto& a, const auto& b) { return a.first.to_string() < b.first.to_string(); });
  return std::make_shared<MappingTraceType>(std::move(items));
}
TraceTypePtr optional_trace_type(TraceTypePtr element) {
  return std::make_shared<OptionalTraceType>(std::move(element));
}
TraceTypePtr object_trace_type(std::weak_ptr<const void> object, const void* address, std::string cpp_type,
                               bool (*equal)(const void*, const void*),
                               std::shared_ptr<const void> (*copy)(const void*)) {
  return std::make_shared<ObjectTraceType>(std::move(object), address, std::move(cpp_type), equal,
                                           equal ? copy : nullptr);
}

TraceTypePtr with_object_snapshots(const TraceTypePtr& t) {
  if (auto* o = dynamic_cast<const ObjectTraceType*>(t.get())) {
    TraceTypePtr s = o->with_snapshot();
    return s ? s : t;
  }
  if (auto* q = dynamic_cast<const SequenceTraceType*>(t.get())) {
    std::vector<TraceTypePtr> el;
    bool changed = false;
    for (const auto& e : q->el_) {
      el.push_back(with_object_snapshots(e));
      changed = changed || el.back() != e;
    }
    return changed ? std::make_shared<SequenceTraceType>(q->kind_, std::move(el)) : t;
  }
  if (auto* m = dynamic_cast<const MappingTraceType*>(t.get())) {
    MappingTraceType::Items items;
    bool changed = false;
    for (const auto& [k, v] : m->items_) {
      items.emplace_back(k, with_object_snapshots(v));
      changed = changed || items.back().second != v;
    }
    return changed ? std::make_shared<MappingTraceType>(std::move(items)) : t;
  }
  if (auto* op = dynamic_cast<const OptionalTraceType*>(t.get()); op && op->el_) {
    TraceTypePtr e = with_object_snapshots(op->el_);
    return e != op->el_ ? std::make_shared<OptionalTraceType>(std::move(e)) : t;
  }
  return t;
}

TraceTypePtr variable_trace_type(DType dtype, const TensorShape& shape, int64_t alias_id) {
  return std::make_shared<VariableTraceType>(dtype, shape, alias_id);
}
int64_t variable_alias_id(const TraceType& t) {
  auto* v = dynamic_cast<const VariableTraceType*>(&t);
  return v ? v->alias_id_ : -1;
}

bool castable_to(const TraceType& value, const TraceType& param) {
  if (auto* p = dynamic_cast<const TensorTraceType*>(&param)) {
    auto* v = dynamic_cast<const TensorTraceType*>(&value);
    if (!v || v->dtype_ != p->dtype_) return false;
    // TF's TensorSpec.cast: the parameter's name plays no part; a value less specific than the
    // parameter (a symbolic tensor of unknown rank or None dims) is cast to it (set_shape).
    return v->shape_.is_subtype_of(p->shape_) || p->shape_.is_subtype_of(v->shape_);
  }
  if (auto* p = dynamic_cast<const SequenceTraceType*>(&param)) {
    auto* v = dynamic_cast<const SequenceTraceType*>(&value);
    if (!v || v->kind_ != p->kind_ || v->el_.size() != p->el_.size()) return false;
    for (std::size_t i = 0; i < p->el_.size(); ++i)
      if (!castable_to(*v->el_[i], *p->el_[i])) return false;
    return true;
  }
  if (auto* p = dynamic_cast<const MappingTraceType*>(&param)) {
    auto* v = dynamic_cast<const MappingTraceType*>(&value);
    if (!v || !v->same_keys(*p)) return false;
    for (std::size_t i = 0; i < p->items_.size(); ++i)
      if (!castable_to(*v->items_[i].second, *p->items_[i].second)) return false;
    return true;
  }
  if (auto* p = dynamic_cast<const OptionalTraceType*>(&param)) {
    auto* v = dynamic_cast<const OptionalTraceType*>(&value);
    if (!v || !v->el_ != !p->el_) return false;
    return !p->el_ || castable_to(*v->el_, *p->el_);
  }
  return value.is_subtype_of(param);
}

std::pair<const TraceType*, const TraceType*> innermost_uncastable(const TraceType& value, const TraceType& param) {
  if (castable_to(value, param)) return {nullptr, nullptr};
  auto* v_seq = dynamic_cast<const SequenceTraceType*>(&value);
  auto* p_seq = dynamic_cast<const SequenceTraceType*>(&param);
  if (v_seq && p_seq && v_seq->kind_ == p_seq->kind_ && v_seq->el_.size() == p_seq->el_.size()) {
    for (std::size_t i = 0; i < p_seq->el_.size(); ++i)
      if (!castable_to(*v_seq->el_[i], *p_seq->el_[i])) return innermost_uncastable(*v_seq->el_[i], *p_seq->el_[i]);
  }
  auto* v_map = dynamic_cast<const MappingTraceType*>(&value);
  auto* p_map = dynamic_cast<const MappingTraceType*>(&param);
  if (v_map && p_map && v_map->same_keys(*p_map)) {
    for (std::size_t i = 0; i < p_map->items_.size(); ++i)
      if (!castable_to(*v_map->items_[i].second, *p_map->items_[i].second))
        return innermost_uncastable(*v_map->items_[i].second, *p_map->items_[i].second);
  }
  auto* v_opt = dynamic_cast<const OptionalTraceType*>(&value);
  auto* p_opt = dynamic_cast<const OptionalTraceType*>(&param);
  if (v_opt && p_opt && v_opt->el_ && p_opt->el_) return innermost_uncastable(*v_opt->el_, *p_opt->el_);
  return {&value, &param};
}

bool as_tensor_type(const TraceType& t, DType* dtype, TensorShape* shape) {
  auto* tt = dynamic_cast<const TensorTraceType*>(&t);
  if (!tt) return false;
  if (dtype) *dtype = tt->dtype_;
  if (shape) *shape = tt->shape_;
  return true;
}
const std::vector<TraceTypePtr>* sequence_elements(const TraceType& t) {
  auto* s = dynamic_cast<const SequenceTraceType*>(&t);
  return s ? &s->el_ : nullptr;
}
const TraceType* mapping_value(const TraceType& t, const LiteralValue& key) {
  auto* m = dynamic_cast<const MappingTraceType*>(&t);
  if (!m) return nullptr;
  for (const auto& [k, v] : m->items_)
    if (k == key) return v.get();
  return nullptr;
}
const TraceType* optional_element(const TraceType& t) {
  auto* o = dynamic_cast<const OptionalTraceType*>(&t);
  return o ? o->el_.get() : nullptr;
}

namespace {

std::string keys_text(const MappingTraceType& m) {
  std::string s = "{";
  for (std::size_t i = 0; i < m.items_.size(); ++i) s += (i ? ", " : "") + m.items_[i].first.to_string();
  return s + "}";
}

std::string kind_name(const TraceType& t) {
  if (dynamic_cast<const TensorTraceType*>(&t)) return "a Tensor";
  if (dynamic_cast<const LiteralTraceType*>(&t)) return "a literal";
  if (dynamic_cast<const SequenceTraceType*>(&t)) return "a container";
  if (dynamic_cast<const MappingTraceType*>(&t)) return "a map";
  if (dynamic_cast<const OptionalTraceType*>(&t)) return "an optional";
  if (dynamic_cast<const ObjectTraceType*>(&t)) return "an object";
  if (dynamic_cast<const VariableTraceType*>(&t)) return "a Variable";
  return "a custom trace type";
}

std::string tensor_change(const TensorTraceType& a, const TensorTraceType& b) {
  if (a.dtype_ != b.dtype_)
    return "dtype " + tg::to_string(a.dtype_) + " -> " + tg::to_string(b.dtype_);
  if (!a.shape_.has_rank() || !b.shape_.has_rank() || a.shape_.rank() != b.shape_.rank())
    return "rank " + (a.shape_.has_rank() ? std::to_string(a.shape_.rank()) : std::string("unknown")) +
           " -> " + (b.shape_.has_rank() ? std::to_string(b.shape_.rank()) : std::string("unknown")) +
           " (shape " + a.shape_.to_string() + " -> " + b.shape_.to_string() + ")";
  std::string s = "shape " + a.shape_.to_string() + " -> " + b.shape_.to_string();
  for (std::size_t i = 0; i < a.shape_.dims().size(); ++i) {
    const int64_t x = a.shape_.dims()[i], y = b.shape_.dims()[i];
    if (x != None && x != y)
      s += ", dim " + std::to_string(i) + ": " + std::to_string(x) + " -> " +
           (y == None ? std::string("None") : std::to_string(y));
  }
  return s;
}

}  // namespace

std::vector<TypeChange> diff_types(const TraceType& traced, const TraceType& call, const std::string& path) {
  if (call.is_subtype_of(traced)) return {};
  auto one = [&](std::string what) { return std::vector<TypeChange>{{path, std::move(what), false}}; };
  auto structural = [&](std::string what) { return std::vector<TypeChange>{{path, std::move(what), true}}; };
  if (auto* a = dynamic_cast<const TensorTraceType*>(&traced)) {
    if (auto* b = dynamic_cast<const TensorTraceType*>(&call)) return one(tensor_change(*a, *b));
  } else if (auto* a = dynamic_cast<const LiteralTraceType*>(&traced)) {
    if (auto* b = dynamic_cast<const LiteralTraceType*>(&call)) {
      if (std::strcmp(a->v_.cpp_type, b->v_.cpp_type) != 0 && a->v_.kind != LiteralValue::Kind::kEnum)
        return one("literal " + a->v_.to_string() + " (" + a->v_.cpp_type + ") -> " + b->v_.to_string() +
                   " (" + b->v_.cpp_type + ")");
      return one("literal value " + a->v_.to_string() + " -> " + b->v_.to_string());
    }
  } else if (auto* a = dynamic_cast<const SequenceTraceType*>(&traced)) {
    if (auto* b = dynamic_cast<const SequenceTraceType*>(&call)) {
      if (a->kind_ != b->kind_) return structural(a->kind_ + " -> " + b->kind_);
      if (a->el_.size() != b->el_.size())
        return structural("length " + std::to_string(a->el_.size()) + " -> " + std::to_string(b->el_.size()));
      std::vector<TypeChange> out;
      for (std::size_t i = 0; i < a->el_.size(); ++i)
        for (auto& c : diff_types(*a->el_[i], *b->el_[i], path + "[" + std::to_string(i) + "]"))
          out.push_back(std::move(c));
      return out;
    }
  } else if (auto* a = dynamic_cast<const MappingTraceType*>(&traced)) {
    if (auto* b = dynamic_cast<const MappingTraceType*>(&call)) {
      if (!a->same_keys(*b)) return structural("keys " + keys_text(*a) + " -> " + keys_text(*b));
      std::vector<TypeChange> out;
      for (std::size_t i = 0; i < a->items_.size(); ++i)
        for (auto& c : diff_types(*a->items_[i].second, *b->items_[i].second,
                                  path + "[" + a->items_[i].first.to_string() + "]"))
          out.push_back(std::move(c));
      return out;
    }
  } else if (auto* a = dynamic_cast<const OptionalTraceType*>(&traced)) {
    if (auto* b = dynamic_cast<const OptionalTraceType*>(&call)) {
      if (!a->el_ != !b->el_) return structural(a->el_ ? "set -> empty (std::nullopt)" : "empty -> set");
      return diff_types(*a->el_, *b->el_, path);
    }
  } else if (auto* a = dynamic_cast<const ObjectTraceType*>(&traced)) {
    if (auto* b = dynamic_cast<const ObjectTraceType*>(&call)) {
      if (a->snapshot_) {
        std::shared_ptr<const void> keep;
        if (b->value(keep) == a->obj_.lock().get())
          return one("the traced object " + a->to_string() + " changed since it was traced: it is no "
                     "longer == to the copy of its value taken then (which the trace's graph holds)");
        return one("a different object (" + b->to_string() + ") that is not == to the value the trace "
                   "was made for (" + a->to_string() + " as it was then)");
      }
      if (a->obj_.expired())
        return one("a different object (" + b->to_string() + "); the traced object " + a->to_string() +
                   " was deleted, and a deleted object's trace never matches again");
      return one("a different object (" + b->to_string() + ", not the traced " + a->to_string() +
                 (a->eq_ ? " nor == to it)" : "; the type has no operator== to compare them)"));
    }
  } else if (auto* a = dynamic_cast<const VariableTraceType*>(&traced)) {
    if (auto* b = dynamic_cast<const VariableTraceType*>(&call)) {
      if (a->dtype_ != b->dtype_)
        return one("Variable dtype " + tg::to_string(a->dtype_) + " -> " + tg::to_string(b->dtype_));
      if (!(a->shape_ == b->shape_))
        return one("Variable shape " + a->shape_.to_string() + " -> " + b->shape_.to_string());
      return one("Variable aliasing: alias_id " + std::to_string(a->alias_id_) + " -> " +
                 std::to_string(b->alias_id_) + " (which arguments are the same Variable changed)");
    }
  } else if (typeid(traced) == typeid(call)) {
    return one("custom trace type " + traced.to_string() + " -> " + call.to_string());
  }
  return structural(kind_name(traced) + " (" + traced.to_string() + ") -> " + kind_name(call) + " (" + call.to_string() + ")");
}

void for_each_leaf(const TraceType& t, const std::string& path,
                   const std::function<void(const std::string&, const LeafInfo&)>& fn) {
  LeafInfo leaf;
  if (auto* x = dynamic_cast<const TensorTraceType*>(&t)) {
    leaf.kind = LeafKind::kTensor;
    leaf.dtype = x->dtype_;
    leaf.shape = x->shape_;
  } else if (auto* x = dynamic_cast<const LiteralTraceType*>(&t)) {
    leaf.kind = LeafKind::kLiteral;
    leaf.text = x->v_.to_string();
    leaf.type_name = x->v_.cpp_type;
  } else if (auto* x = dynamic_cast<const SequenceTraceType*>(&t)) {
    for (std::size_t i = 0; i < x->el_.size(); ++i)
      for_each_leaf(*x->el_[i], path + "[" + std::to_string(i) + "]", fn);
    return;
  } else if (auto* x = dynamic_cast<const MappingTraceType*>(&t)) {
    for (const auto& [k, v] : x->items_) for_each_leaf(*v, path + "[" + k.to_string() + "]", fn);
    return;
  } else if (auto* x = dynamic_cast<const OptionalTraceType*>(&t)) {
    if (x->el_) for_each_leaf(*x->el_, path, fn);
    return;
  } else if (dynamic_cast<const ObjectTraceType*>(&t)) {
    leaf.kind = LeafKind::kObject;
    leaf.text = t.to_string();
  } else if (auto* x = dynamic_cast<const VariableTraceType*>(&t)) {
    leaf.kind = LeafKind::kVariable;
    leaf.dtype = x->dtype_;
    leaf.shape = x->shape_;
    leaf.alias_id = x->alias_id_;
    leaf.text = t.to_string();
  } else {
    leaf.text = t.to_string();
  }
  fn(path, leaf);
}

bool trace_type_tree(const TraceType& t, TraceTypeTree& out, std::string& unsupported) {
  using Kind = TraceTypeTree::Kind;
  out = TraceTypeTree{};
  auto child = [&](const TraceType& c) {
    out.elements.emplace_back();
    return trace_type_tree(c, out.elements.back(), unsupported);
  };
  if (auto* x = dynamic_cast<const TensorTraceType*>(&t)) {
    out.kind = Kind::kTensor;
    out.dtype = x->dtype_;
    out.shape = x->shape_;
    out.name = x->name_;
    return true;
  }
  if (auto* x = dynamic_cast<const LiteralTraceType*>(&t)) {
    out.kind = Kind::kLiteral;
    out.literal = x->v_;
    return true;
  }
  if (auto* x = dynamic_cast<const SequenceTraceType*>(&t)) {
    out.kind = Kind::kSequence;
    out.name = x->kind_;
    for (const auto& e : x->el_)
      if (!child(*e)) return false;
    return true;
  }
  if (auto* x = dynamic_cast<const MappingTraceType*>(&t)) {
    out.kind = Kind::kMapping;
    for (const auto& [k, v] : x->items_) {
      out.keys.push_back(k);
      if (!child(*v)) return false;
    }
    return true;
  }
  if (auto* x = dynamic_cast<const OptionalTraceType*>(&t)) {
    out.kind = Kind::kOptional;
    return !x->el_ || child(*x->el_);
  }
  if (auto* x = dynamic_cast<const VariableTraceType*>(&t)) {
    out.kind = Kind::kVariable;
    out.dtype = x->dtype_;
    out.shape = x->shape_;
    out.alias_id = x->alias_id_;
    return true;
  }
  unsupported = t.to_string();
  return false;
}

TraceTypePtr trace_type_from_tree(const TraceTypeTree& tree) {
  using Kind = TraceTypeTree::Kind;
  std::vector<TraceTypePtr> el;
  for (const auto& e : tree.elements) el.push_back(trace_type_from_tree(e));
  switch (tree.kind) {
    case Kind::kTensor: return tensor_trace_type(tree.dtype, tree.shape, tree.name);
    case Kind::kLiteral: {
      LiteralValue v = tree.literal;
      v.cpp_type = intern_cpp_type_name(v.cpp_type);
      return std::make_shared<LiteralTraceType>(std::move(v));
    }
    case Kind::kSequence: return sequence_trace_type(tree.name, std::move(el));
    case Kind::kMapping: {
      TG_CHECK(tree.keys.size() == el.size(), "mapping tree with ", tree.keys.size(), " keys for ", el.size(), " values");
      std::vector<std::pair<LiteralValue, TraceTypePtr>> items;
      for (std::size_t i = 0; i < el.size(); ++i) {
        LiteralValue k = tree.keys[i];
        k.cpp_type = intern_cpp_type_name(k.cpp_type);
        items.emplace_back(std::move(k), std::move(el[i]));
      }
      return std::make_shared<MappingTraceType>(std::move(items));
    }
    case Kind::kOptional: return optional_trace_type(el.empty() ? nullptr : std::move(el[0]));
    case Kind::kVariable: return variable_trace_type(tree.dtype, tree.shape, tree.alias_id);
  }
  throw InternalError("trace_type_from_tree: unknown kind");
}

const char* intern_cpp_type_name(const std::string& name) {
  // Names live as long as the process: a literal type keeps a plain pointer to its C++ type's
  // name (comparisons and hashes read the characters), and files name few distinct types.
  static std::mutex mu;
  static std::set<std::string> names;
  std::lock_guard lock(mu);
  return names.insert(name).first->c_str();
}

}  // namespace tg::detail
