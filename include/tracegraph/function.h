// tg::function: trace C++ tensor code into graphs, cached per input trace type (tf.function).
#pragma once
#include <algorithm>
#include <any>
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string_view>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tracegraph/graph.h"
#include "tracegraph/tensor.h"
#include "tracegraph/trace_type.h"
#include "tracegraph/variable.h"

namespace tg {

struct FunctionOptions {
  std::string name = "function";                          // used in messages and reports
  std::optional<std::vector<TensorSpec>> input_signature{};  // one FunctionType only
  bool reduce_retracing = false;  // generalise shapes (dims -> None) instead of retracing
  std::vector<std::string> arg_names{};  // names in graphs, signatures and messages
  int64_t max_traces = 1000;           // hard limit -> tg::RetracingLimitError
  /// Bound on the concrete functions kept (least recently used are evicted); 0 = unbounded.
  /// For long-running services whose inputs have unbounded shapes.
  int64_t max_cached_traces = 0;
  /// Run the graph optimiser on each trace: algebraic simplification, constant folding, CSE,
  /// dead-code elimination and elementwise fusion (src/passes/pipeline.cpp lists the order).
  bool optimize = true;
};

/// Why one trace happened (see PolymorphicFunction::trace_history).
struct TraceRecord {
  int64_t index = 0;          // 0 for the first trace
  std::string function_type;  // the FunctionType that was traced
  /// "first call", or why no existing trace fit, naming the argument and what changed:
  /// "x: shape (3,) -> (5,), dim 0: 3 -> 5 (closest trace: #0)".
  std::string reason;
  std::vector<std::string> changed_arguments;  // names, or paths like "batch[1]", "config['lr']"
};

namespace detail {
class ConcreteImpl;
class FunctionCore;
}  // namespace detail

/// One trace of a function: a graph specialised to one FunctionType.
class ConcreteFunction {
 public:
  explicit ConcreteFunction(std::shared_ptr<detail::ConcreteImpl> impl) : impl_(std::move(impl)) {}
  /// "(a: TensorSpec(shape=(), dtype=tg.string, name=None)) -> TensorSpec(...)".
  std::string function_type() const;
  /// "Input Parameters:\n  a (POSITIONAL_OR_KEYWORD): ...\nOutput Type:\n  ...".
  std::string pretty_printed_signature() const;
  const Graph& graph() const;
  /// Runs the graph on the flattened tensor arguments (in argument order), returning the
  /// flattened outputs. Inputs are checked against the traced specs.
  std::vector<Tensor> call_flat(const std::vector<Tensor>& inputs) const;
  const std::shared_ptr<detail::ConcreteImpl>& impl() const { return impl_; }

 protected:
  std::shared_ptr<detail::ConcreteImpl> impl_;
};
std::ostream& operator<<(std::ostream&, const ConcreteFunction&);

/// A concrete function that knows the C++ result type of the function it was traced from:
/// callable with the arguments it was traced for.
template <class R>
class TypedConcreteFunction;

namespace config {
/// Where diagnostics (TG_LOG=retrace lines, frequent-retracing warnings) are written, one call
/// per message. nullptr restores the default, stderr.
void set_log_sink(void (*sink)(const std::string& message, void* user), void* user = nullptr);
/// Logs one line per retrace (function, trace number, reason). Defaults to on when the
/// environment variable TG_LOG contains "retrace" (e.g. TG_LOG=retrace).
void log_retraces(bool enabled);
/// Globally disables tracing: tg::function bodies run eagerly at every call (for debugging).
void run_functions_eagerly(bool enabled);
bool functions_run_eagerly();
}  // namespace config

// =============================================================================================
// Implementation details the templates below need.
namespace detail {

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

/// What a traced body produced: flat outputs, the C++ result holding symbolic tensors (used to
/// rebuild results), and its printed type.
struct TraceOutput {
  std::vector<Tensor> outputs;
  std::any skeleton;
  std::string description;
};

/// A non-owning reference to a callable (no allocation on the call path).
template <class Sig>
class FunctionRef;
template <class R, class... A>
class FunctionRef<R(A...)> {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cv_t<F>, FunctionRef>)
  FunctionRef(F& f) : obj_(&f), call_([](void* o, A... a) -> R { return (*static_cast<F*>(o))(std::forward<A>(a)...); }) {}
  R operator()(A... a) const { return call_(obj_, std::forward<A>(a)...); }

 private:
  void* obj_;
  R (*call_)(void*, A...);
};
using TraceBody = FunctionRef<TraceOutput(const std::vector<TraceTypePtr>&, PlaceholderContext&)>;
/// Does the call match this recorded call type exactly? (the allocation-free check)
using FastMatch = FunctionRef<bool(const std::vector<TraceTypePtr>&)>;

/// Everything about a tg::function that does not depend on its C++ types: the cache of
/// concrete functions, dispatch, tracing, limits and diagnostics (src/trace/function_core.cpp).
class FunctionCore {
 public:
  explicit FunctionCore(FunctionOptions options, std::string callable_type);
  ~FunctionCore();
  const FunctionOptions& options() const;
  const std::string& name() const;
  /// The cached-call path: the concrete function an earlier call of exactly this type went to,
  /// found by `fast_hash` and confirmed by `match`, without building trace types. nullptr if
  /// there is none (then dispatch_or_trace decides).
  std::shared_ptr<ConcreteImpl> fast_lookup(std::size_t fast_hash, FastMatch match) const;
  /// Finds the concrete function for a call's argument types, or traces one with `body`. With
  /// a fast hash, the result is remembered for fast_lookup.
  std::shared_ptr<ConcreteImpl> dispatch_or_trace(std::vector<TraceTypePtr> arg_types,
                                                  TraceBody body, const std::size_t* fast_hash);
  std::vector<Tensor> run(const ConcreteImpl& cf, const std::vector<Tensor>& leaves) const;
  int64_t tracing_count() const;
  std::vector<std::shared_ptr<ConcreteImpl>> concrete_functions() const;
  std::vector<TraceRecord> trace_history() const;
  std::optional<std::vector<TensorSpec>> suggested_input_signature() const;
  std::string retracing_report() const;
  /// Recursion guard: entering a function that is already being traced on this thread is a
  /// StagingError (it would unroll forever).
  class ActiveScope {
   public:
    explicit ActiveScope(const FunctionCore* core);
    ~ActiveScope();
    ActiveScope(const ActiveScope&) = delete;
    ActiveScope& operator=(const ActiveScope&) = delete;
  };

 private:
  std::shared_ptr<ConcreteImpl> dispatch_or_trace_impl(const std::vector<TraceTypePtr>& arg_types,
                                                       TraceBody body);
  struct State;
  std::unique_ptr<State> state_;
};

const std::any& skeleton_of(const ConcreteImpl& cf);
bool tracing_active();  // a trace is being recorded on this thread

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
inline void hash_mix(std::size_t& h, std::size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); }
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

std::string demangle(const char* mangled);

}  // namespace detail

template <class R>
class TypedConcreteFunction : public ConcreteFunction {
 public:
  using ConcreteFunction::ConcreteFunction;
  /// Calls the graph. Arguments must bind to the traced FunctionType: tensors of compatible
  /// specs and literals equal to the traced values (else tg::TypeError "Can not cast ...").
  template <class... Args>
  R operator()(const Args&... args) const {
    detail::ArgContext ctx;
    std::vector<TraceTypePtr> types{detail::ArgTraits<std::decay_t<Args>>::trace_type(args, ctx)...};
    bind(types);
    std::vector<Tensor> out = call_flat(ctx.leaves);
    if constexpr (std::is_void_v<R>) {
      return;
    } else {
      std::size_t i = 0;
      return detail::OutputTraits<R>::rebuild(std::any_cast<const R&>(detail::skeleton_of(*impl_)), out, i);
    }
  }

 private:
  void bind(const std::vector<TraceTypePtr>& arg_types) const;
};
namespace detail {
void bind_concrete(const ConcreteImpl& cf, const std::vector<TraceTypePtr>& arg_types);
}
template <class R>
void TypedConcreteFunction<R>::bind(const std::vector<TraceTypePtr>& arg_types) const {
  detail::bind_concrete(*impl_, arg_types);
}

/// A tg::function: callable like `fn`, tracing it once per new input trace type.
template <class F>
class PolymorphicFunction {
 public:
  PolymorphicFunction(F fn, FunctionOptions options)
      : fn_(std::make_shared<F>(std::move(fn))),
        core_(std::make_shared<detail::FunctionCore>(std::move(options),
                                                     detail::demangle(typeid(F).name()))) {}

  template <class... Args>
  auto operator()(Args&&... args)
      -> std::invoke_result_t<F&, detail::placeholder_t<std::decay_t<Args>>&...> {
    using R = std::invoke_result_t<F&, detail::placeholder_t<std::decay_t<Args>>&...>;
    if (config::functions_run_eagerly() || detail::tracing_active()) {
      // Eager mode runs the body directly; inside another trace the body is inlined into the
      // outer graph (its ops are recorded there).
      detail::FunctionCore::ActiveScope scope(core_.get());
      if constexpr (std::is_invocable_v<F&, Args&&...>)
        return (*fn_)(std::forward<Args>(args)...);
      else
        throw TypeError("function '" + name() + "' was called with a TensorSpec while running "
                        "eagerly or inside another trace; TensorSpecs only describe inputs for "
                        "get_concrete_function. Call it with tensors");
    }
    // Cached calls: hash the arguments' types and confirm the match without allocating.
    std::size_t fast_hash = 0x7467;
    const bool fast = (detail::ArgTraits<std::decay_t<Args>>::fast_hash(args, fast_hash) && ...);
    std::shared_ptr<detail::ConcreteImpl> cf;
    std::vector<Tensor> leaves;
    if (fast) {
      auto match = [&](const std::vector<TraceTypePtr>& types) {
        return fast_equal_all(types, std::index_sequence_for<Args...>{}, args...);
      };
      cf = core_->fast_lookup(fast_hash, detail::FastMatch(match));
      if (cf) (detail::ArgTraits<std::decay_t<Args>>::leaves(args, leaves), ...);
    }
    if (!cf) {
      detail::ArgContext ctx;
      cf = concrete_for(ctx, fast ? &fast_hash : nullptr, args...);
      leaves = std::move(ctx.leaves);
    }
    std::vector<Tensor> out = core_->run(*cf, leaves);
    if constexpr (std::is_void_v<R>) {
      return;
    } else {
      std::size_t i = 0;
      return detail::OutputTraits<R>::rebuild(std::any_cast<const R&>(detail::skeleton_of(*cf)), out, i);
    }
  }

  /// The concrete function for these arguments (tracing if needed). Any tensor may be replaced
  /// by a TensorSpec.
  template <class... Args>
  auto get_concrete_function(const Args&... args) {
    using R = std::invoke_result_t<F&, detail::placeholder_t<std::decay_t<Args>>&...>;
    detail::ArgContext ctx;
    return TypedConcreteFunction<R>(concrete_for(ctx, nullptr, args...));
  }

  std::vector<ConcreteFunction> concrete_functions() const {
    std::vector<ConcreteFunction> out;
    for (auto& c : core_->concrete_functions()) out.emplace_back(c);
    return out;
  }
  int64_t tracing_count() const { return core_->tracing_count(); }
  std::string pretty_printed_concrete_signatures() const {
    std::string s;
    for (const auto& c : concrete_functions()) s += c.pretty_printed_signature() + "\n";
    if (!s.empty()) s.pop_back();
    return s;
  }
  const std::string& name() const { return core_->name(); }

  /// Why each trace happened, oldest first.
  std::vector<TraceRecord> trace_history() const { return core_->trace_history(); }
  /// An input_signature that covers every call seen so far, when all arguments are tensors of
  /// one dtype each; std::nullopt otherwise (e.g. a varying C++ literal).
  std::optional<std::vector<TensorSpec>> suggested_input_signature() const {
    return core_->suggested_input_signature();
  }
  /// A JSON document (schema in docs/retracing.md) with the trace count, per-argument
  /// variation, the records, the suggested signature, and ranked workarounds and dead ends.
  std::string retracing_report() const { return core_->retracing_report(); }
  detail::FunctionCore& core() const { return *core_; }

 private:
  template <std::size_t... I, class... Args>
  static bool fast_equal_all(const std::vector<TraceTypePtr>& types, std::index_sequence<I...>,
                             const Args&... args) {
    return types.size() == sizeof...(Args) &&
           (detail::ArgTraits<std::decay_t<Args>>::fast_equal(args, *types[I]) && ...);
  }

  template <class... Args>
  std::shared_ptr<detail::ConcreteImpl> concrete_for(detail::ArgContext& ctx, const std::size_t* fast_hash,
                                                     const Args&... args) {
    using R = std::invoke_result_t<F&, detail::placeholder_t<std::decay_t<Args>>&...>;
    std::vector<TraceTypePtr> types{detail::ArgTraits<std::decay_t<Args>>::trace_type(args, ctx)...};
    auto body = [&](const std::vector<TraceTypePtr>& traced, detail::PlaceholderContext& pc) {
      return trace_body<R>(traced, pc, std::index_sequence_for<Args...>{}, args...);
    };
    return core_->dispatch_or_trace(std::move(types), detail::TraceBody(body), fast_hash);
  }

  template <class R, std::size_t... I, class... Args>
  detail::TraceOutput trace_body(const std::vector<TraceTypePtr>& traced, detail::PlaceholderContext& pc,
                                 std::index_sequence<I...>, const Args&... args) {
    const auto& names = core_->options().arg_names;
    [[maybe_unused]] auto arg_name = [&](std::size_t i) {
      return i < names.size() ? names[i] : "arg" + std::to_string(i);
    };
    std::tuple<detail::placeholder_t<std::decay_t<Args>>...> ph{
        detail::ArgTraits<std::decay_t<Args>>::placeholder(args, *traced[I], pc, arg_name(I))...};
    detail::TraceOutput out;
    if constexpr (std::is_void_v<R>) {
      std::apply(*fn_, ph);
      out.description = "None";
    } else {
      R result = std::apply(*fn_, ph);
      detail::OutputTraits<R>::flatten(result, out.outputs);
      out.description = detail::OutputTraits<R>::describe(result);
      out.skeleton = std::move(result);
    }
    return out;
  }

  std::shared_ptr<F> fn_;
  std::shared_ptr<detail::FunctionCore> core_;
};

/// Wraps a callable into a PolymorphicFunction (tf.function).
template <class F>
auto function(F fn, FunctionOptions options = {}) {
  return PolymorphicFunction<F>(std::move(fn), std::move(options));
}

}  // namespace tg
