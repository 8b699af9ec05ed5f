// The one structure walker: how tg::function, tg::cond and tg::while_loop see nested C++ values
// (JAX's pytrees). A value is a leaf (a Tensor, a literal, a Variable, ...) or a container
// (vector, array, tuple, pair, map, optional) of values; each container kind says once how to
// visit its children and how to rebuild itself from new ones, and every walk - an argument's
// trace type, its tensors, the value the body sees while tracing, the allocation-free cached-call
// check, flattening results and loop variables to tensors and rebuilding them - is written once
// over that. Templates, because they follow the user's types; the rest is in src/trace.
#pragma once
#include <any>
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tracegraph/hash.h"
#include "tracegraph/tensor.h"
#include "tracegraph/trace_type.h"
#include "tracegraph/variable.h"

namespace tg::detail {

/// The tensors of a call on the cached path, in flattening order, lent: pointers to the caller's
/// own handles, which live until the call returns (arguments are const references for the whole
/// call). The executor passes them to kernels without copying the handles - each copy is a locked
/// increment and a locked decrement once the process has a second thread, about a fifth of a
/// cached scalar call. Room for eight tensors inline: collecting them allocates nothing.
class LentTensors {
 public:
  void push_back(const Tensor& t) {
    if (size_ < kInline) {
      inline_[size_] = &t;
    } else {
      if (size_ == kInline) more_.assign(inline_.begin(), inline_.end());
      more_.push_back(&t);
    }
    ++size_;
  }
  std::size_t size() const { return size_; }
  std::span<const Tensor* const> view() const {
    return {size_ > kInline ? more_.data() : inline_.data(), size_};
  }

 private:
  static constexpr std::size_t kInline = 8;
  // Left unset: only the first size_ are read. Zeroing them cost a cached call ~5 ns (rep stos).
  std::array<const Tensor*, kInline> inline_;
  std::vector<const Tensor*> more_;  // all of them, past kInline
  std::size_t size_ = 0;
};

/// Collects the tensors of a call's arguments in flattening order.
struct ArgContext {
  std::vector<Tensor> leaves;
  // The distinct Variables among the arguments, in order of first appearance: a Variable's
  // position here is its alias id (TF's VariableSpec.alias_id).
  std::vector<Variable> variables;
  bool has_specs = false;  // a TensorSpec stood for a tensor (get_concrete_function only)
};

/// Creates the symbolic inputs of a trace.
class PlaceholderContext {
 public:
  virtual ~PlaceholderContext() = default;
  /// A new graph input of the given tensor trace type, named after `path`.
  virtual Tensor placeholder(const TraceType& tensor_type, const std::string& path) = 0;
  /// The Variable parameter the body sees for a Variable argument of type `variable_type`
  /// (arguments with the same alias id get the same one); `traced_with` is the caller's.
  virtual Variable variable_placeholder(const TraceType& variable_type, const Variable& traced_with) = 0;
};

/// A static name per C++ literal type ("int32", "uint8", "double", "bool", "string", or the
/// enum's mangled name), so that comparing types never allocates.
template <class T>
const char* literal_type_name() {
  if constexpr (std::is_same_v<T, bool>) return "bool";
  else if constexpr (std::is_enum_v<T>) return typeid(T).name();
  else if constexpr (std::is_floating_point_v<T>) return sizeof(T) == 4 ? "float" : "double";
  else if constexpr (std::is_integral_v<T>) {
    if constexpr (std::is_signed_v<T>)
      return sizeof(T) == 1 ? "int8" : sizeof(T) == 2 ? "int16" : sizeof(T) == 4 ? "int32" : "int64";
    else
      return sizeof(T) == 1 ? "uint8" : sizeof(T) == 2 ? "uint16" : sizeof(T) == 4 ? "uint32" : "uint64";
  } else return "string";
}

template <class T>
LiteralValue to_literal(const T& v) {
  LiteralValue lv{};
  lv.cpp_type = literal_type_name<T>();
  if constexpr (std::is_same_v<T, bool>) {
    lv.kind = LiteralValue::Kind::kBool;
    lv.i = v;
  } else if constexpr (std::is_enum_v<T>) {
    lv.kind = LiteralValue::Kind::kEnum;
    lv.i = static_cast<int64_t>(v);
  } else if constexpr (std::is_integral_v<T>) {
    lv.kind = LiteralValue::Kind::kInt;
    lv.i = static_cast<int64_t>(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    lv.kind = LiteralValue::Kind::kFloat;
    lv.f = static_cast<double>(v);
  } else {
    lv.kind = LiteralValue::Kind::kString;
    lv.s = std::string(v);
  }
  return lv;
}

// ---- containers: the children of a value, and the value rebuilt from new children ---------

enum class ContainerKind { kList, kArray, kTuple, kDict, kOptional };
/// The key of an optional's one child (its path is the optional's own).
struct NoKey {};

/// Specialised for each container kind: `kind`, `size(v)`, `for_each(v, f)` calling
/// f(child, key) in a fixed order (map keys sorted, so that any map type flattens alike), and
/// `transform(v, f)`, the same container of f(child, key) results, built in that order.
template <class T>
struct Container {
  static constexpr bool is_container = false;
};
template <class T>
inline constexpr bool is_container_v = Container<T>::is_container;

template <class E, class A>
struct Container<std::vector<E, A>> {
  static constexpr bool is_container = true;
  static constexpr ContainerKind kind = ContainerKind::kList;
  static std::size_t size(const std::vector<E, A>& v) { return v.size(); }
  template <class F>
  static void for_each(const std::vector<E, A>& v, F&& f) {
    for (std::size_t i = 0; i < v.size(); ++i) f(v[i], i);
  }
  template <class F>
  static auto transform(const std::vector<E, A>& v, F&& f) {
    std::vector<std::decay_t<std::invoke_result_t<F&, const E&, std::size_t>>> out;
    out.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out.push_back(f(v[i], i));
    return out;
  }
};
template <class E, std::size_t N>
struct Container<std::array<E, N>> {
  static constexpr bool is_container = true;
  static constexpr ContainerKind kind = ContainerKind::kArray;
  static std::size_t size(const std::array<E, N>&) { return N; }
  template <class F>
  static void for_each(const std::array<E, N>& v, F&& f) {
    for (std::size_t i = 0; i < N; ++i) f(v[i], i);
  }
  template <class F>
  static auto transform(const std::array<E, N>& v, F&& f) {
    using R = std::decay_t<std::invoke_result_t<F&, const E&, std::size_t>>;
    // Braced initialisation runs left to right: children are produced in for_each order.
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::array<R, N>{f(v[I], I)...};
    }(std::make_index_sequence<N>{});
  }
};
template <class... Ts>
struct Container<std::tuple<Ts...>> {
  static constexpr bool is_container = true;
  static constexpr ContainerKind kind = ContainerKind::kTuple;
  static std::size_t size(const std::tuple<Ts...>&) { return sizeof...(Ts); }
  template <class F>
  static void for_each(const std::tuple<Ts...>& v, F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) { (f(std::get<I>(v), I), ...); }(std::index_sequence_for<Ts...>{});
  }
  template <class F>
  static auto transform(const std::tuple<Ts...>& v, F&& f) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::tuple<std::decay_t<std::invoke_result_t<F&, const Ts&, std::size_t>>...>{f(std::get<I>(v), I)...};
    }(std::index_sequence_for<Ts...>{});
  }
};
template <class A, class B>
struct Container<std::pair<A, B>> {
  static constexpr bool is_container = true;
  static constexpr ContainerKind kind = ContainerKind::kTuple;
  static std::size_t size(const std::pair<A, B>&) { return 2; }
  template <class F>
  static void for_each(const std::pair<A, B>& v, F&& f) {
    f(v.first, std::size_t{0});
    f(v.second, std::size_t{1});
  }
  template <class F>
  static auto transform(const std::pair<A, B>& v, F&& f) {
    return std::pair<std::decay_t<std::invoke_result_t<F&, const A&, std::size_t>>,
                     std::decay_t<std::invoke_result_t<F&, const B&, std::size_t>>>{f(v.first, std::size_t{0}),
                                                                                     f(v.second, std::size_t{1})};
  }
};
/// std::map and std::unordered_map, visited in sorted key order; keys are literals.
template <class Map, template <class...> class Out>
struct MapContainer {
  using K = typename Map::key_type;
  using V = typename Map::mapped_type;
  static_assert(std::is_arithmetic_v<K> || std::is_enum_v<K> || std::is_same_v<K, std::string>,
                "tg::function: map keys must be strings, integers or enums");
  static constexpr bool is_container = true;
  static constexpr ContainerKind kind = ContainerKind::kDict;
  static std::size_t size(const Map& m) { return m.size(); }
  static std::vector<const typename Map::value_type*> sorted(const Map& m) {
    std::vector<const typename Map::value_type*> items;
    items.reserve(m.size());
    for (const auto& kv : m) items.push_back(&kv);
    std::sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
    return items;
  }
  template <class F>
  static void for_each(const Map& m, F&& f) {
    for (const auto* kv : sorted(m)) f(kv->second, to_literal(kv->first));
  }
  template <class F>
  static auto transform(const Map& m, F&& f) {
    Out<K, std::decay_t<std::invoke_result_t<F&, const V&, const LiteralValue&>>> out;
    for (const auto* kv : sorted(m)) out.emplace(kv->first, f(kv->second, to_literal(kv->first)));
    return out;
  }
};
template <class K, class V, class C, class A>
struct Container<std::map<K, V, C, A>> : MapContainer<std::map<K, V, C, A>, std::map> {};
template <class K, class V, class H, class E, class A>
struct Container<std::unordered_map<K, V, H, E, A>> : MapContainer<std::unordered_map<K, V, H, E, A>, std::unordered_map> {};
template <class E>
struct Container<std::optional<E>> {
  static constexpr bool is_container = true;
  static constexpr ContainerKind kind = ContainerKind::kOptional;
  static std::size_t size(const std::optional<E>& v) { return v.has_value(); }
  template <class F>
  static void for_each(const std::optional<E>& v, F&& f) {
    if (v) f(*v, NoKey{});
  }
  template <class F>
  static auto transform(const std::optional<E>& v, F&& f) {
    std::optional<std::decay_t<std::invoke_result_t<F&, const E&, NoKey>>> out;
    if (v) out.emplace(f(*v, NoKey{}));
    return out;
  }
};

std::string indexed_path(const std::string& path, std::size_t i);
std::string keyed_path(const std::string& path, const LiteralValue& key);
inline std::string child_path(const std::string& path, std::size_t i) { return indexed_path(path, i); }
inline std::string child_path(const std::string& path, const LiteralValue& key) { return keyed_path(path, key); }
inline const std::string& child_path(const std::string& path, NoKey) { return path; }

/// The trace type of a container's child (nullptr when the type has no such child).
inline const TraceType* child_type(const TraceType& t, std::size_t i) {
  const auto* el = sequence_elements(t);
  return el && i < el->size() ? (*el)[i].get() : nullptr;
}
inline const TraceType* child_type(const TraceType& t, const LiteralValue& key) { return mapping_value(t, key); }
inline const TraceType* child_type(const TraceType& t, NoKey) { return optional_element(t); }

// ---- argument leaves: what each kind of leaf contributes to a call's trace type ---------------

/// The cached-call fast path hashes and compares arguments against a known call type without
/// building TraceType objects (no allocation). Leaves without it (objects, custom types,
/// Variables, specs) send the call down the general path.
std::size_t tensor_type_hash(const Tensor& t);
bool tensor_type_equals(const Tensor& t, const TraceType& type);
struct NoFastPath {
  static constexpr bool is_leaf = true;
  template <class T>
  static bool fast_hash(const T&, std::size_t&) { return false; }
  template <class T>
  static bool fast_equal(const T&, const TraceType&) { return false; }
  template <class T>
  static void leaves(const T&, LentTensors&) {}
};

/// Specialised for each leaf kind: trace_type (collecting tensors into the context),
/// placeholder (the value the body sees while tracing), fast_hash, fast_equal and leaves.
template <class T, class Enable = void>
struct ArgLeaf {
  static constexpr bool is_leaf = false;
};

template <>
struct ArgLeaf<Tensor> {
  static constexpr bool is_leaf = true;
  static TraceTypePtr trace_type(const Tensor& t, ArgContext& ctx) {
    ctx.leaves.push_back(t);
    return tensor_trace_type(t.dtype(), t.shape());
  }
  static Tensor placeholder(const Tensor&, const TraceType& type, PlaceholderContext& pc,
                            const std::string& path) {
    return pc.placeholder(type, path);
  }
  static bool fast_hash(const Tensor& t, std::size_t& h) {
    hash_mix(h, tensor_type_hash(t));
    return true;
  }
  static bool fast_equal(const Tensor& t, const TraceType& type) { return tensor_type_equals(t, type); }
  static void leaves(const Tensor& t, LentTensors& out) { out.push_back(t); }
};
template <>
struct ArgLeaf<TensorSpec> : NoFastPath {
  static TraceTypePtr trace_type(const TensorSpec& s, ArgContext& ctx) {
    ctx.has_specs = true;
    return tensor_trace_type(s.dtype, s.shape, s.name);
  }
  static Tensor placeholder(const TensorSpec&, const TraceType& type, PlaceholderContext& pc,
                            const std::string& path) {
    return pc.placeholder(type, path);
  }
};

template <class T>
struct ArgLeaf<T, std::enable_if_t<std::is_arithmetic_v<T> || std::is_enum_v<T>>> {
  static constexpr bool is_leaf = true;
  static TraceTypePtr trace_type(const T& v, ArgContext&) { return literal_trace_type(to_literal(v)); }
  static T placeholder(const T& v, const TraceType&, PlaceholderContext&, const std::string&) { return v; }
  static bool fast_hash(const T& v, std::size_t& h) {
    if constexpr (std::is_floating_point_v<T>) hash_mix(h, std::hash<double>{}(static_cast<double>(v)));
    else hash_mix(h, static_cast<std::size_t>(v));
    return true;
  }
  static bool fast_equal(const T& v, const TraceType& type) {
    const LiteralValue* lv = literal_of(type);
    if (!lv || std::strcmp(lv->cpp_type, literal_type_name<T>()) != 0) return false;
    if constexpr (std::is_floating_point_v<T>) return lv->f == static_cast<double>(v);
    else return lv->i == static_cast<int64_t>(v);
  }
  static void leaves(const T&, LentTensors&) {}
};
template <class S>
struct StringArgLeaf {
  static constexpr bool is_leaf = true;
  static TraceTypePtr trace_type(const S& v, ArgContext&) { return literal_trace_type(to_literal(v)); }
  static S placeholder(const S& v, const TraceType&, PlaceholderContext&, const std::string&) { return v; }
  static bool fast_hash(std::string_view v, std::size_t& h) {
    hash_mix(h, std::hash<std::string_view>{}(v));
    return true;
  }
  static bool fast_equal(std::string_view v, const TraceType& type) {
    const LiteralValue* lv = literal_of(type);
    return lv && lv->kind == LiteralValue::Kind::kString && lv->s == v;
  }
  static void leaves(const S&, LentTensors&) {}
};
template <>
struct ArgLeaf<std::string> : StringArgLeaf<std::string> {};
template <>
struct ArgLeaf<const char*> : StringArgLeaf<const char*> {};

template <>
struct ArgLeaf<std::nullopt_t> : NoFastPath {
  static TraceTypePtr trace_type(std::nullopt_t, ArgContext&) { return optional_trace_type(nullptr); }
  static std::nullopt_t placeholder(std::nullopt_t, const TraceType&, PlaceholderContext&, const std::string&) {
    return std::nullopt;
  }
};

template <class T>
bool object_equal(const void* a, const void* b) {
  if constexpr (requires(const T& x, const T& y) { { x == y } -> std::convertible_to<bool>; })
    return *static_cast<const T*>(a) == *static_cast<const T*>(b);
  else
    return false;
}
template <class T>
std::shared_ptr<const void> object_copy(const void* p) {
  if constexpr (std::is_copy_constructible_v<T>)
    return std::make_shared<const T>(*static_cast<const T*>(p));
  else
    return nullptr;
}
/// Other objects, by std::shared_ptr: identity, then `==` when the type has it (kept as weak
/// references). A trace keeps a copy of a copyable object with `==` as it was when traced, and
/// matches later calls against that copy (so mutating the object retraces).
template <class T>
struct ArgLeaf<std::shared_ptr<T>> : NoFastPath {
  static TraceTypePtr trace_type(const std::shared_ptr<T>& p, ArgContext&) {
    using U = std::remove_const_t<T>;
    constexpr bool kHasEq = requires(const U& x, const U& y) { { x == y } -> std::convertible_to<bool>; };
    constexpr bool kSnapshot = kHasEq && std::is_copy_constructible_v<U>;
    return object_trace_type(std::weak_ptr<const void>(p), p.get(), typeid(U).name(), &object_equal<U>,
                             kSnapshot ? &object_copy<U> : nullptr);
  }
  static std::shared_ptr<T> placeholder(const std::shared_ptr<T>& p, const TraceType&,
                                        PlaceholderContext&, const std::string&) {
    return p;
  }
};

/// A Variable argument of a tg::function (TF's VariableSpec): typed by dtype, shape and which
/// arguments are the same Variable, so one trace serves every Variable of that spec. The body
/// sees a Variable parameter that each call binds to the caller's Variable; reads and assigns
/// reach the caller's. (A Variable the body closes over is read by reference instead.)
template <>
struct ArgLeaf<Variable> : NoFastPath {
  static TraceTypePtr trace_type(const Variable& v, ArgContext& ctx) {
    std::size_t alias = 0;
    while (alias < ctx.variables.size() && ctx.variables[alias].state() != v.state()) ++alias;
    if (alias == ctx.variables.size()) ctx.variables.push_back(v);
    return variable_trace_type(v.dtype(), v.shape(), static_cast<int64_t>(alias));
  }
  static Variable placeholder(const Variable& v, const TraceType& type, PlaceholderContext& pc,
                              const std::string&) {
    return pc.variable_placeholder(type, v);
  }
};

/// User types with a custom trace type (TF's __tf_tracing_type__).
template <class T>
concept HasTracingType = requires(const T& v) {
  { v.tracing_type() } -> std::convertible_to<TraceTypePtr>;
};
/// `type`, or a TypeError naming the C++ type (`mangled_name`) when tracing_type() gave null.
TraceTypePtr checked_custom_trace_type(TraceTypePtr type, const char* mangled_name);
template <class T>
struct ArgLeaf<T, std::enable_if_t<HasTracingType<T>>> : NoFastPath {
  static TraceTypePtr trace_type(const T& v, ArgContext&) {
    return checked_custom_trace_type(v.tracing_type(), typeid(T).name());
  }
  static T placeholder(const T& v, const TraceType& type, PlaceholderContext&, const std::string&) {
    std::any p = type.placeholder_value();
    if (const T* value = std::any_cast<T>(&p)) return *value;
    return v;
  }
};

// ---- arguments: the walks, written once over containers and leaves ----------------------------

template <class T>
struct ArgTraits {
  static_assert(is_container_v<T> || ArgLeaf<T>::is_leaf,
                "tg::function: unsupported argument type. Supported: tg::Tensor, tg::TensorSpec "
                "(get_concrete_function), tg::Variable, arithmetic types, enums, std::string, const "
                "char*, std::vector/array/tuple/pair/map/unordered_map/optional of these, "
                "std::shared_ptr<T>, and types with a `tg::TraceTypePtr tracing_type() const`.");

  /// The argument's trace type; its tensors are appended to ctx.leaves.
  static TraceTypePtr trace_type(const T& v, ArgContext& ctx) {
    if constexpr (!is_container_v<T>) {
      return ArgLeaf<T>::trace_type(v, ctx);
    } else if constexpr (Container<T>::kind == ContainerKind::kDict) {
      std::vector<std::pair<LiteralValue, TraceTypePtr>> items;
      Container<T>::for_each(v, [&](const auto& x, const LiteralValue& key) {
        items.emplace_back(key, ArgTraits<std::decay_t<decltype(x)>>::trace_type(x, ctx));
      });
      return mapping_trace_type(std::move(items));
    } else if constexpr (Container<T>::kind == ContainerKind::kOptional) {
      TraceTypePtr element;
      Container<T>::for_each(v, [&](const auto& x, NoKey) {
        element = ArgTraits<std::decay_t<decltype(x)>>::trace_type(x, ctx);
      });
      return optional_trace_type(std::move(element));
    } else {
      std::vector<TraceTypePtr> elements;
      elements.reserve(Container<T>::size(v));
      Container<T>::for_each(v, [&](const auto& x, std::size_t) {
        elements.push_back(ArgTraits<std::decay_t<decltype(x)>>::trace_type(x, ctx));
      });
      constexpr ContainerKind kind = Container<T>::kind;
      return sequence_trace_type(kind == ContainerKind::kList ? "List" : kind == ContainerKind::kArray ? "Array" : "Tuple",
                                 std::move(elements));
    }
  }

  /// The value the body sees while tracing `type`: tensors become placeholders named after
  /// their path ("batch[1]"); everything else is passed through.
  static auto placeholder(const T& v, const TraceType& type, PlaceholderContext& pc, const std::string& path) {
    if constexpr (!is_container_v<T>) {
      return ArgLeaf<T>::placeholder(v, type, pc, path);
    } else {
      return Container<T>::transform(v, [&](const auto& x, const auto& key) {
        return ArgTraits<std::decay_t<decltype(x)>>::placeholder(x, *child_type(type, key), pc, child_path(path, key));
      });
    }
  }

  /// Mixes the argument's type into `h` without allocating; false when it has no fast path.
  static bool fast_hash(const T& v, std::size_t& h) {
    if constexpr (!is_container_v<T>) {
      return ArgLeaf<T>::fast_hash(v, h);
    } else if constexpr (Container<T>::kind == ContainerKind::kDict) {
      return false;  // sorting the keys would allocate
    } else {
      constexpr ContainerKind kind = Container<T>::kind;
      if constexpr (kind == ContainerKind::kList || kind == ContainerKind::kOptional) hash_mix(h, Container<T>::size(v));
      bool ok = true;
      Container<T>::for_each(v, [&](const auto& x, const auto&) {
        ok = ok && ArgTraits<std::decay_t<decltype(x)>>::fast_hash(x, h);
      });
      return ok;
    }
  }

  /// Whether the argument has exactly the trace type `type` (the fast path's confirmation).
  static bool fast_equal(const T& v, const TraceType& type) {
    if constexpr (!is_container_v<T>) {
      return ArgLeaf<T>::fast_equal(v, type);
    } else if constexpr (Container<T>::kind == ContainerKind::kDict) {
      return false;
    } else {
      if constexpr (Container<T>::kind == ContainerKind::kOptional) {
        // The type at this argument position is always an optional type: no element = empty.
        if ((optional_element(type) != nullptr) != (Container<T>::size(v) != 0)) return false;
      } else {
        const auto* elements = sequence_elements(type);
        if (!elements || elements->size() != Container<T>::size(v)) return false;
      }
      bool ok = true;
      Container<T>::for_each(v, [&](const auto& x, const auto& key) {
        const TraceType* t = ok ? child_type(type, key) : nullptr;
        ok = t && ArgTraits<std::decay_t<decltype(x)>>::fast_equal(x, *t);
      });
      return ok;
    }
  }

  /// Lends the argument's tensors, in trace_type's order (the cached path's; the general path
  /// collects owned ones with trace_type).
  static void leaves(const T& v, LentTensors& out) {
    if constexpr (!is_container_v<T>) {
      ArgLeaf<T>::leaves(v, out);
    } else {
      Container<T>::for_each(v, [&](const auto& x, const auto&) { ArgTraits<std::decay_t<decltype(x)>>::leaves(x, out); });
    }
  }
};

/// A string literal or char array: `f(x, "relu")` deduces `char[5]` where an argument is taken
/// as `const Args&`, which decays to `char*`. It is a string, compared by value (TF's Python
/// strings): the body sees the same `const char*` as for a `const char*` argument.
template <>
struct ArgTraits<char*> : ArgTraits<const char*> {};

template <class T>
using placeholder_t = decltype(ArgTraits<T>::placeholder(std::declval<const T&>(),
                                                        std::declval<const TraceType&>(),
                                                        std::declval<PlaceholderContext&>(),
                                                        std::declval<const std::string&>()));

// ---- results and loop variables: structures of tensors, flattened and rebuilt ---------------

/// A leaf of a tensor structure: a Tensor, or a type carried by one tensor (tg::TensorArray's
/// flow, specialised in control_flow.h).
template <class T>
struct TensorLeaf {
  static constexpr bool is_leaf = false;
};
std::string describe_output(const Tensor& t);
template <>
struct TensorLeaf<Tensor> {
  static constexpr bool is_leaf = true;
  static constexpr bool is_tensor_array = false;
  static const Tensor& tensor(const Tensor& t) { return t; }
  static Tensor with_tensor(const Tensor&, Tensor t) { return t; }
  static std::string describe(const Tensor& t) { return describe_output(t); }
};

/// A flattened leaf's path ("loop_vars[1]", for messages) and whether it is a TensorArray's
/// flow (whose shape may change across loop iterations).
struct FlatLeaf {
  std::string path;
  bool tensor_array = false;
};

template <class T>
struct TensorStructure {
  static_assert(is_container_v<T> || TensorLeaf<T>::is_leaf,
                "unsupported structure: use tg::Tensor (or tg::TensorArray in loops and conds), or "
                "std::tuple / std::pair / std::vector / std::array / std::map / std::optional of those");

  /// Appends the structure's tensors; with `paths`, each one's path below `path` too.
  static void flatten(const T& v, std::vector<Tensor>& out, std::vector<FlatLeaf>* paths = nullptr,
                      const std::string& path = "") {
    if constexpr (!is_container_v<T>) {
      out.push_back(TensorLeaf<T>::tensor(v));
      if (paths) paths->push_back({path, TensorLeaf<T>::is_tensor_array});
    } else {
      Container<T>::for_each(v, [&](const auto& x, const auto& key) {
        TensorStructure<std::decay_t<decltype(x)>>::flatten(x, out, paths, paths ? child_path(path, key) : path);
      });
    }
  }

  /// A structure like `like` whose tensors are flat[pos], flat[pos + 1], ... (pos advances).
  /// From a non-const `flat` the tensors are moved out (a function's results: a copied handle
  /// costs an atomic increment and decrement).
  template <class Flat>
  static T rebuild(const T& like, Flat& flat, std::size_t& pos) {
    if constexpr (!is_container_v<T>) {
      if constexpr (std::is_const_v<Flat>) return TensorLeaf<T>::with_tensor(like, flat.at(pos++));
      else return TensorLeaf<T>::with_tensor(like, std::move(flat.at(pos++)));
    } else {
      return Container<T>::transform(like, [&](const auto& x, const auto&) {
        return TensorStructure<std::decay_t<decltype(x)>>::rebuild(x, flat, pos);
      });
    }
  }

  /// The structure's type as messages print it: "Tuple[TensorSpec(...), List[...]]". (Built
  /// by appending: g++ 12 warns falsely (-Wrestrict) on some literal + std::string chains.)
  static std::string describe(const T& v) {
    if constexpr (!is_container_v<T>) {
      return TensorLeaf<T>::describe(v);
    } else {
      constexpr ContainerKind kind = Container<T>::kind;
      if constexpr (kind == ContainerKind::kOptional)
        if (Container<T>::size(v) == 0) return "None";
      std::string s = kind == ContainerKind::kList       ? "List["
                      : kind == ContainerKind::kArray    ? "Array["
                      : kind == ContainerKind::kDict     ? "Dict["
                      : kind == ContainerKind::kOptional ? "Optional["
                                                         : "Tuple[";
      bool first = true;
      Container<T>::for_each(v, [&](const auto& x, const auto& key) {
        if (!first) s.append(", ");
        first = false;
        if constexpr (kind == ContainerKind::kDict) s.append("[").append(key.to_string()).append(", ");
        s.append(TensorStructure<std::decay_t<decltype(x)>>::describe(x));
        if constexpr (kind == ContainerKind::kDict) s.append("]");
      });
      return s.append("]");
    }
  }
};

/// The tensors of a structure, in order.
template <class T>
std::vector<Tensor> flatten_tensors(const T& v, std::vector<FlatLeaf>* paths = nullptr, const std::string& path = "") {
  std::vector<Tensor> out;
  TensorStructure<T>::flatten(v, out, paths, path);
  return out;
}
/// `like` with its tensors replaced by `flat`, in order.
template <class T>
T rebuild_tensors(const T& like, const std::vector<Tensor>& flat) {
  std::size_t pos = 0;
  return TensorStructure<T>::rebuild(like, flat, pos);
}

}  // namespace tg::detail
