// How tg::function sees C++ values: the trace type of each argument, the tensors in it, the
// value the body receives while tracing, and how results are flattened to tensors and rebuilt.
// Templates (they must be: they follow the user's types); the library itself is in src/trace.
#pragma once
#include <any>
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
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

template <class>
inline constexpr bool dependent_false_v = false;

/// Collects the tensors of a call's arguments in flattening order.
struct ArgContext {
  std::vector<Tensor> leaves;
  bool has_specs = false;  // a TensorSpec stood for a tensor (get_concrete_function only)
};

/// Creates the symbolic inputs of a trace.
class PlaceholderContext {
 public:
  virtual ~PlaceholderContext() = default;
  /// A new graph input of the given tensor trace type, named after `path`.
  virtual Tensor placeholder(const TraceType& tensor_type, const std::string& path) = 0;
};

// ---- argument traits: trace type, tensor leaves, and the value the body sees while tracing --
template <class T, class Enable = void>
struct ArgTraits {
  static_assert(dependent_false_v<T>,
                "tg::function: unsupported argument type. Supported: tg::Tensor, tg::TensorSpec "
                "(get_concrete_function), arithmetic types, enums, std::string, const char*, "
                "std::vector/array/tuple/pair/map/unordered_map/optional of these, "
                "std::shared_ptr<T>, and types with a `tg::TraceTypePtr tracing_type() const`.");
};

template <class T>
using placeholder_t = decltype(ArgTraits<T>::placeholder(std::declval<const T&>(),
                                                        std::declval<const TraceType&>(),
                                                        std::declval<PlaceholderContext&>(),
                                                        std::declval<const std::string&>()));

std::string indexed_path(const std::string& path, std::size_t i);
std::string keyed_path(const std::string& path, const LiteralValue& key);

// ---- the cached-call fast path: hash and compare arguments against a known call type without
// building TraceType objects (no allocation). Types without it (objects, maps, custom types,
// Variables) take the general path.
std::size_t tensor_type_hash(const Tensor& t);
bool tensor_type_equals(const Tensor& t, const TraceType& type);
struct NoFastPath {
  template <class T>
  static bool fast_hash(const T&, std::size_t&) { return false; }
  template <class T>
  static bool fast_equal(const T&, const TraceType&) { return false; }
  template <class T>
  static void leaves(const T&, std::vector<Tensor>&) {}
};

template <>
struct ArgTraits<Tensor> {
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
  static void leaves(const Tensor& t, std::vector<Tensor>& out) { out.push_back(t); }
};
template <>
struct ArgTraits<TensorSpec> : NoFastPath {
  static TraceTypePtr trace_type(const TensorSpec& s, ArgContext& ctx) {
    ctx.has_specs = true;
    return tensor_trace_type(s.dtype, s.shape);
  }
  static Tensor placeholder(const TensorSpec&, const TraceType& type, PlaceholderContext& pc,
                            const std::string& path) {
    return pc.placeholder(type, path);
  }
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

template <class T>
struct ArgTraits<T, std::enable_if_t<std::is_arithmetic_v<T> || std::is_enum_v<T>>> {
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
  static void leaves(const T&, std::vector<Tensor>&) {}
};
struct StringArgTraits {
  static bool fast_hash(std::string_view v, std::size_t& h) {
    hash_mix(h, std::hash<std::string_view>{}(v));
    return true;
  }
  static bool fast_equal(std::string_view v, const TraceType& type) {
    const LiteralValue* lv = literal_of(type);
    return lv && lv->kind == LiteralValue::Kind::kString && lv->s == v;
  }
  template <class T>
  static void leaves(const T&, std::vector<Tensor>&) {}
};
template <>
struct ArgTraits<std::string> : StringArgTraits {
  static TraceTypePtr trace_type(const std::string& v, ArgContext&) { return literal_trace_type(to_literal(v)); }
  static std::string placeholder(const std::string& v, const TraceType&, PlaceholderContext&, const std::string&) { return v; }
};
template <>
struct ArgTraits<const char*> : StringArgTraits {
  static TraceTypePtr trace_type(const char* v, ArgContext&) { return literal_trace_type(to_literal(v)); }
  static const char* placeholder(const char* v, const TraceType&, PlaceholderContext&, const std::string&) { return v; }
};

template <class T>
struct ArgTraits<std::vector<T>> {
  static TraceTypePtr trace_type(const std::vector<T>& v, ArgContext& ctx) {
    std::vector<TraceTypePtr> el;
    el.reserve(v.size());
    for (const auto& x : v) el.push_back(ArgTraits<T>::trace_type(x, ctx));
    return sequence_trace_type("List", std::move(el));
  }
  static auto placeholder(const std::vector<T>& v, const TraceType& type, PlaceholderContext& pc,
                          const std::string& path) {
    const auto& el = *sequence_elements(type);
    std::vector<placeholder_t<T>> out;
    out.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i)
      out.push_back(ArgTraits<T>::placeholder(v[i], *el[i], pc, indexed_path(path, i)));
    return out;
  }
  static bool fast_hash(const std::vector<T>& v, std::size_t& h) {
    hash_mix(h, v.size());
    for (const auto& x : v)
      if (!ArgTraits<T>::fast_hash(x, h)) return false;
    return true;
  }
  static bool fast_equal(const std::vector<T>& v, const TraceType& type) {
    const auto* el = sequence_elements(type);
    if (!el || el->size() != v.size()) return false;
    for (std::size_t i = 0; i < v.size(); ++i)
      if (!ArgTraits<T>::fast_equal(v[i], *(*el)[i])) return false;
    return true;
  }
  static void leaves(const std::vector<T>& v, std::vector<Tensor>& out) {
    for (const auto& x : v) ArgTraits<T>::leaves(x, out);
  }
};
template <class T, std::size_t N>
struct ArgTraits<std::array<T, N>> {
  static TraceTypePtr trace_type(const std::array<T, N>& v, ArgContext& ctx) {
    std::vector<TraceTypePtr> el;
    for (const auto& x : v) el.push_back(ArgTraits<T>::trace_type(x, ctx));
    return sequence_trace_type("Array", std::move(el));
  }
  static auto placeholder(const std::array<T, N>& v, const TraceType& type, PlaceholderContext& pc,
                          const std::string& path) {
    const auto& el = *sequence_elements(type);
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::array<placeholder_t<T>, N>{
          ArgTraits<T>::placeholder(v[I], *el[I], pc, indexed_path(path, I))...};
    }(std::make_index_sequence<N>{});
  }
  static bool fast_hash(const std::array<T, N>& v, std::size_t& h) {
    for (const auto& x : v)
      if (!ArgTraits<T>::fast_hash(x, h)) return false;
    return true;
  }
  static bool fast_equal(const std::array<T, N>& v, const TraceType& type) {
    const auto* el = sequence_elements(type);
    if (!el || el->size() != N) return false;
    for (std::size_t i = 0; i < N; ++i)
      if (!ArgTraits<T>::fast_equal(v[i], *(*el)[i])) return false;
    return true;
  }
  static void leaves(const std::array<T, N>& v, std::vector<Tensor>& out) {
    for (const auto& x : v) ArgTraits<T>::leaves(x, out);
  }
};
template <class... Ts>
struct ArgTraits<std::tuple<Ts...>> {
  static TraceTypePtr trace_type(const std::tuple<Ts...>& v, ArgContext& ctx) {
    return std::apply(
        [&](const Ts&... x) {
          return sequence_trace_type("Tuple", std::vector<TraceTypePtr>{ArgTraits<Ts>::trace_type(x, ctx)...});
        },
        v);
  }
  static auto placeholder(const std::tuple<Ts...>& v, const TraceType& type, PlaceholderContext& pc,
                          const std::string& path) {
    const auto& el = *sequence_elements(type);
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::tuple<placeholder_t<Ts>...>{ArgTraits<Ts>::placeholder(
          std::get<I>(v), *el[I], pc, indexed_path(path, I))...};
    }(std::index_sequence_for<Ts...>{});
  }
  static bool fast_hash(const std::tuple<Ts...>& v, std::size_t& h) {
    return std::apply([&](const Ts&... x) { return (ArgTraits<Ts>::fast_hash(x, h) && ...); }, v);
  }
  static bool fast_equal(const std::tuple<Ts...>& v, const TraceType& type) {
    const auto* el = sequence_elements(type);
    if (!el || el->size() != sizeof...(Ts)) return false;
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return (ArgTraits<Ts>::fast_equal(std::get<I>(v), *(*el)[I]) && ...);
    }(std::index_sequence_for<Ts...>{});
  }
  static void leaves(const std::tuple<Ts...>& v, std::vector<Tensor>& out) {
    std::apply([&](const Ts&... x) { (ArgTraits<Ts>::leaves(x, out), ...); }, v);
  }
};
template <class A, class B>
struct ArgTraits<std::pair<A, B>> {
  static TraceTypePtr trace_type(const std::pair<A, B>& v, ArgContext& ctx) {
    TraceTypePtr a = ArgTraits<A>::trace_type(v.first, ctx);
    TraceTypePtr b = ArgTraits<B>::trace_type(v.second, ctx);
    return sequence_trace_type("Tuple", {std::move(a), std::move(b)});
  }
  static auto placeholder(const std::pair<A, B>& v, const TraceType& type, PlaceholderContext& pc,
                          const std::string& path) {
    const auto& el = *sequence_elements(type);
    auto a = ArgTraits<A>::placeholder(v.first, *el[0], pc, indexed_path(path, 0));
    auto b = ArgTraits<B>::placeholder(v.second, *el[1], pc, indexed_path(path, 1));
    return std::pair<placeholder_t<A>, placeholder_t<B>>{std::move(a), std::move(b)};
  }
  static bool fast_hash(const std::pair<A, B>& v, std::size_t& h) {
    return ArgTraits<A>::fast_hash(v.first, h) && ArgTraits<B>::fast_hash(v.second, h);
  }
  static bool fast_equal(const std::pair<A, B>& v, const TraceType& type) {
    const auto* el = sequence_elements(type);
    return el && el->size() == 2 && ArgTraits<A>::fast_equal(v.first, *(*el)[0]) &&
           ArgTraits<B>::fast_equal(v.second, *(*el)[1]);
  }
  static void leaves(const std::pair<A, B>& v, std::vector<Tensor>& out) {
    ArgTraits<A>::leaves(v.first, out);
    ArgTraits<B>::leaves(v.second, out);
  }
};
template <class Map>
struct MapArgTraits : NoFastPath {
  using K = typename Map::key_type;
  using V = typename Map::mapped_type;
  static_assert(std::is_arithmetic_v<K> || std::is_enum_v<K> || std::is_same_v<K, std::string>,
                "tg::function: map keys must be strings, integers or enums");
  // Keys are visited in sorted order so that leaves line up for any map type.
  static std::vector<const typename Map::value_type*> sorted(const Map& m) {
    std::vector<const typename Map::value_type*> items;
    for (const auto& kv : m) items.push_back(&kv);
    std::sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
    return items;
  }
  static TraceTypePtr trace_type(const Map& m, ArgContext& ctx) {
    std::vector<std::pair<LiteralValue, TraceTypePtr>> items;
    for (const auto* kv : sorted(m))
      items.emplace_back(to_literal(kv->first), ArgTraits<V>::trace_type(kv->second, ctx));
    return mapping_trace_type(std::move(items));
  }
  template <class Out>
  static Out placeholder_map(const Map& m, const TraceType& type, PlaceholderContext& pc,
                             const std::string& path) {
    Out out;
    for (const auto* kv : sorted(m)) {
      const LiteralValue key = to_literal(kv->first);
      out.emplace(kv->first, ArgTraits<V>::placeholder(kv->second, *mapping_value(type, key), pc,
                                                       keyed_path(path, key)));
    }
    return out;
  }
};
template <class K, class V, class C, class A>
struct ArgTraits<std::map<K, V, C, A>> : MapArgTraits<std::map<K, V, C, A>> {
  static auto placeholder(const std::map<K, V, C, A>& m, const TraceType& type,
                          PlaceholderContext& pc, const std::string& path) {
    return MapArgTraits<std::map<K, V, C, A>>::template placeholder_map<
        std::map<K, placeholder_t<V>>>(m, type, pc, path);
  }
};
template <class K, class V, class H, class E, class A>
struct ArgTraits<std::unordered_map<K, V, H, E, A>> : MapArgTraits<std::unordered_map<K, V, H, E, A>> {
  static auto placeholder(const std::unordered_map<K, V, H, E, A>& m, const TraceType& type,
                          PlaceholderContext& pc, const std::string& path) {
    return MapArgTraits<std::unordered_map<K, V, H, E, A>>::template placeholder_map<
        std::unordered_map<K, placeholder_t<V>>>(m, type, pc, path);
  }
};
template <class T>
struct ArgTraits<std::optional<T>> {
  static TraceTypePtr trace_type(const std::optional<T>& v, ArgContext& ctx) {
    return optional_trace_type(v ? ArgTraits<T>::trace_type(*v, ctx) : nullptr);
  }
  static auto placeholder(const std::optional<T>& v, const TraceType& type, PlaceholderContext& pc,
                          const std::string& path) {
    std::optional<placeholder_t<T>> out;
    if (v) out = ArgTraits<T>::placeholder(*v, *optional_element(type), pc, path);
    return out;
  }
  static bool fast_hash(const std::optional<T>& v, std::size_t& h) {
    hash_mix(h, v.has_value());
    return !v || ArgTraits<T>::fast_hash(*v, h);
  }
  static bool fast_equal(const std::optional<T>& v, const TraceType& type) {
    // The type at this argument position is always an optional type, so no element means empty.
    const TraceType* el = optional_element(type);
    if (!v) return el == nullptr;
    return el && ArgTraits<T>::fast_equal(*v, *el);
  }
  static void leaves(const std::optional<T>& v, std::vector<Tensor>& out) {
    if (v) ArgTraits<T>::leaves(*v, out);
  }
};

template <>
struct ArgTraits<std::nullopt_t> : NoFastPath {
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
struct ArgTraits<std::shared_ptr<T>> : NoFastPath {
  static TraceTypePtr trace_type(const std::shared_ptr<T>& p, ArgContext&) {
    using U = std::remove_const_t<T>;
    return object_trace_type(std::weak_ptr<const void>(p), p.get(), typeid(U).name(),
                             &object_equal<U>);
  }
  static std::shared_ptr<T> placeholder(const std::shared_ptr<T>& p, const TraceType&,
                                        PlaceholderContext&, const std::string&) {
    return p;
  }
};

/// A Variable argument of a tg::function: typed by dtype, shape and identity; the body sees the
/// variable itself, so its reads and assigns are recorded against it.
template <>
struct ArgTraits<Variable> : NoFastPath {
  static TraceTypePtr trace_type(const Variable& v, ArgContext&) {
    return variable_trace_type(v.dtype(), v.shape(), v.id());
  }
  static Variable placeholder(const Variable& v, const TraceType&, PlaceholderContext&,
                              const std::string&) {
    return v;
  }
};

template <class T>
concept HasTracingType = requires(const T& v) {
  { v.tracing_type() } -> std::convertible_to<TraceTypePtr>;
};
template <class T>
struct ArgTraits<T, std::enable_if_t<HasTracingType<T>>> : NoFastPath {
  static TraceTypePtr trace_type(const T& v, ArgContext&) { return v.tracing_type(); }
  static T placeholder(const T& v, const TraceType& type, PlaceholderContext&, const std::string&) {
    std::any p = type.placeholder_value();
    if (const T* value = std::any_cast<T>(&p)) return *value;
    return v;
  }
};

// ---- output traits: flatten results to tensors and rebuild them ---------------------------
template <class T, class Enable = void>
struct OutputTraits {
  static_assert(dependent_false_v<T>,
                "tg::function: unsupported return type. Return tg::Tensor, or std::tuple / "
                "std::pair / std::vector / std::array / std::map<std::string, .> / std::optional "
                "of those, or void.");
};
std::string describe_output(const Tensor& t);
template <>
struct OutputTraits<Tensor> {
  static void flatten(const Tensor& t, std::vector<Tensor>& out) { out.push_back(t); }
  static Tensor rebuild(const Tensor&, const std::vector<Tensor>& flat, std::size_t& i) { return flat[i++]; }
  static std::string describe(const Tensor& t) { return describe_output(t); }
};
template <class... Ts>
struct OutputTraits<std::tuple<Ts...>> {
  using T = std::tuple<Ts...>;
  static void flatten(const T& v, std::vector<Tensor>& out) {
    std::apply([&](const Ts&... x) { (OutputTraits<Ts>::flatten(x, out), ...); }, v);
  }
  static T rebuild(const T& sk, const std::vector<Tensor>& flat, std::size_t& i) {
    return std::apply([&](const Ts&... x) { return T{OutputTraits<Ts>::rebuild(x, flat, i)...}; }, sk);
  }
  static std::string describe(const T& v) {
    std::string s;
    std::apply([&](const Ts&... x) { ((s += (s.empty() ? "" : ", ") + OutputTraits<Ts>::describe(x)), ...); }, v);
    return "Tuple[" + s + "]";
  }
};
template <class A, class B>
struct OutputTraits<std::pair<A, B>> {
  using T = std::pair<A, B>;
  static void flatten(const T& v, std::vector<Tensor>& out) {
    OutputTraits<A>::flatten(v.first, out);
    OutputTraits<B>::flatten(v.second, out);
  }
  static T rebuild(const T& sk, const std::vector<Tensor>& flat, std::size_t& i) {
    A a = OutputTraits<A>::rebuild(sk.first, flat, i);
    B b = OutputTraits<B>::rebuild(sk.second, flat, i);
    return T{std::move(a), std::move(b)};
  }
  static std::string describe(const T& v) {
    return "Tuple[" + OutputTraits<A>::describe(v.first) + ", " + OutputTraits<B>::describe(v.second) + "]";
  }
};
template <class E>
struct OutputTraits<std::vector<E>> {
  using T = std::vector<E>;
  static void flatten(const T& v, std::vector<Tensor>& out) {
    for (const auto& x : v) OutputTraits<E>::flatten(x, out);
  }
  static T rebuild(const T& sk, const std::vector<Tensor>& flat, std::size_t& i) {
    T r;
    r.reserve(sk.size());
    for (const auto& x : sk) r.push_back(OutputTraits<E>::rebuild(x, flat, i));
    return r;
  }
  static std::string describe(const T& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + OutputTraits<E>::describe(x);
    return "List[" + s + "]";
  }
};
template <class E, std::size_t N>
struct OutputTraits<std::array<E, N>> {
  using T = std::array<E, N>;
  static void flatten(const T& v, std::vector<Tensor>& out) {
    for (const auto& x : v) OutputTraits<E>::flatten(x, out);
  }
  static T rebuild(const T& sk, const std::vector<Tensor>& flat, std::size_t& i) {
    T r;
    for (std::size_t k = 0; k < N; ++k) r[k] = OutputTraits<E>::rebuild(sk[k], flat, i);
    return r;
  }
  static std::string describe(const T& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + OutputTraits<E>::describe(x);
    return "Array[" + s + "]";
  }
};
template <class E, class C, class A>
struct OutputTraits<std::map<std::string, E, C, A>> {
  using T = std::map<std::string, E, C, A>;
  static void flatten(const T& v, std::vector<Tensor>& out) {
    for (const auto& kv : v) OutputTraits<E>::flatten(kv.second, out);
  }
  static T rebuild(const T& sk, const std::vector<Tensor>& flat, std::size_t& i) {
    T r;
    for (const auto& kv : sk) r.emplace(kv.first, OutputTraits<E>::rebuild(kv.second, flat, i));
    return r;
  }
  static std::string describe(const T& v) {
    std::string s;
    for (const auto& kv : v)
      s += (s.empty() ? "" : ", ") + ("['" + kv.first + "', " + OutputTraits<E>::describe(kv.second) + "]");
    return "Dict[" + s + "]";
  }
};
template <class E>
struct OutputTraits<std::optional<E>> {
  using T = std::optional<E>;
  static void flatten(const T& v, std::vector<Tensor>& out) {
    if (v) OutputTraits<E>::flatten(*v, out);
  }
  static T rebuild(const T& sk, const std::vector<Tensor>& flat, std::size_t& i) {
    if (!sk) return std::nullopt;
    return OutputTraits<E>::rebuild(*sk, flat, i);
  }
  static std::string describe(const T& v) {
    return v ? "Optional[" + OutputTraits<E>::describe(*v) + "]" : "None";
  }
};

}  // namespace tg::detail
