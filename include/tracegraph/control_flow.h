// In-graph control flow: tg::cond (tf.cond), tg::while_loop (tf.while_loop), tg::for_range
// (AutoGraph's `for i in tf.range(n)`) and tg::TensorArray (tf.TensorArray).
//
// C++ `if` and `for` run while a function is traced, so they unroll into the graph (or fail on a
// symbolic condition). These functions put the decision into the graph instead: traced, a
// tg::cond becomes one node holding both branches as sub-graphs, and a tg::while_loop one node
// holding its condition and body, which appear once however many iterations run. Eagerly they
// are plain C++ control flow.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tracegraph/ops.h"
#include "tracegraph/shape.h"
#include "tracegraph/structure.h"
#include "tracegraph/tensor.h"

namespace tg {

/// A list of same-typed tensors that grows by writes: how a loop accumulates per-iteration
/// values (tf.TensorArray). Values are immutable: write() returns the updated array, so inside a
/// loop body write `ta = ta.write(i, v)` and return `ta` as a loop variable.
///
/// - `size` fixes the number of elements (writes beyond it are an error) unless `dynamic_size`,
///   with which the array grows to the largest index written.
/// - Every element has the same shape: the `element_shape` given here, or that of the first
///   write. Elements never written read (and stack) as zeros.
/// - Works eagerly, and as a tg::while_loop / tg::for_range loop variable in traced functions.
/// - String arrays are not supported.
class TensorArray {
 public:
  explicit TensorArray(DType dtype, int64_t size = 0, bool dynamic_size = false,
                       TensorShape element_shape = TensorShape::unknown_rank());
  /// Sized by an int32/int64 scalar tensor, e.g. `tg::shape(x)[0]` for a None dim. An eager size
  /// is read at once (as the int64_t form). A size known only at run time (a symbolic tensor):
  /// stack() gives `size` elements (those never written are zeros), but an index >= size is
  /// not an error on write - the array grows as a dynamic one, and stack() then fails.
  TensorArray(DType dtype, const Tensor& size, bool dynamic_size = false,
              TensorShape element_shape = TensorShape::unknown_rank());

  /// The array with element `index` (an integer scalar) set to `value`.
  TensorArray write(const Tensor& index, const Tensor& value) const;
  TensorArray write(int64_t index, const Tensor& value) const;
  /// Element `index`; tg::InvalidArgumentError when out of range or nothing was written yet.
  Tensor read(const Tensor& index) const;
  Tensor read(int64_t index) const;
  /// All elements stacked along a new first dimension: shape (size, element_shape...).
  Tensor stack() const;

  DType dtype() const { return dtype_; }
  /// The fixed size (for dynamic arrays: the initial size). tg::ValueError when the size is a
  /// tensor known only at run time: use size_tensor().
  int64_t size() const;
  /// The size as an int scalar tensor (symbolic when it is known only at run time).
  Tensor size_tensor() const;
  bool dynamic_size() const { return dynamic_; }
  /// What is known of the element shape (unknown rank until the first write).
  const TensorShape& element_shape() const { return element_shape_; }

  /// The tensor that carries the elements through graphs (a loop variable's flat value).
  const Tensor& flow() const { return flow_; }
  /// The same array over another flow tensor (how loops rebuild their variables).
  TensorArray with_flow(const Tensor& flow) const;

 private:
  DType dtype_;
  int64_t size_;
  bool dynamic_;
  TensorShape element_shape_;
  Tensor flow_;
  Tensor run_time_size_;  // set when the size is a symbolic tensor (the op attrs say dynamic)
};

/// Options of tg::while_loop.
struct WhileOptions {
  /// One shape per flattened loop variable (TensorArrays included; their entry is ignored):
  /// the shapes the variables may take across iterations, with tg::None for the dims that
  /// change. Empty: every variable keeps its entry shape, and a body that changes a shape is a
  /// tg::ValueError naming the variable and both shapes.
  std::vector<TensorShape> shape_invariants;
  /// Stops after this many iterations even if the condition still holds (-1: no limit).
  int64_t maximum_iterations = -1;
  /// The node name in graphs.
  std::string name = "while";
};

namespace detail {

/// A TensorArray in a loop or cond structure is carried by its flow tensor.
template <>
struct TensorLeaf<TensorArray> {
  static constexpr bool is_leaf = true;
  static constexpr bool is_tensor_array = true;
  static const Tensor& tensor(const TensorArray& t) { return t.flow(); }
  static TensorArray with_tensor(const TensorArray& like, const Tensor& flow) { return like.with_flow(flow); }
  static std::string describe(const TensorArray&) { return "TensorArray"; }
};

using FlatFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// tg::cond on flattened branch results: runs one branch (eager predicate) or records a cond
/// node with both branches as sub-graphs (symbolic predicate).
std::vector<Tensor> cond_flat(const Tensor& pred, const std::function<std::vector<Tensor>()>& true_fn,
                              const std::function<std::vector<Tensor>()>& false_fn);
/// tg::while_loop on flattened loop variables. `cond` returns one boolean scalar.
std::vector<Tensor> while_loop_flat(const FlatFn& cond, const FlatFn& body,
                                    const std::vector<Tensor>& init,
                                    const std::vector<FlatLeaf>& leaves, const WhileOptions& options);

/// Calls f with the loop variables: whole (f(vars)), or unpacked if vars is a tuple
/// (f(a, b, ...)).
template <class F, class V>
decltype(auto) call_with_vars(F& f, const V& vars) {
  if constexpr (std::is_invocable_v<F&, const V&>) {
    return f(vars);
  } else {
    return std::apply(f, vars);
  }
}
}  // namespace detail

/// tf.cond: `true_fn()` if `pred` (a scalar bool tensor) holds, else `false_fn()`.
///
/// Both functions take no arguments and return the same C++ type: void, a Tensor, a
/// TensorArray, or a std::tuple / std::pair / std::vector / std::array of those. Eagerly (an
/// eager `pred`) only the chosen function runs. While tracing with a symbolic `pred`, both are
/// traced into sub-graphs of one "cond" node and the choice happens at every execution; their
/// results must then have the same structure and dtypes (tg::TypeError naming both otherwise),
/// and a dimension on which they differ becomes None. Tensors of the enclosing trace that a
/// branch uses are passed into the node; tg::print and Variable updates in a branch run only
/// when that branch is taken.
///
///     Tensor y = tg::cond(x > 0, [&] { return x * 2; }, [&] { return -x; });
template <class TrueFn, class FalseFn>
auto cond(const Tensor& pred, TrueFn true_fn, FalseFn false_fn) {
  using R = std::decay_t<std::invoke_result_t<TrueFn&>>;
  using R2 = std::decay_t<std::invoke_result_t<FalseFn&>>;
  static_assert(std::is_same_v<R, R2>,
                "tg::cond: true_fn and false_fn must return the same C++ type (write the lambdas' "
                "return types explicitly, e.g. -> tg::Tensor)");
  if constexpr (std::is_void_v<R>) {
    detail::cond_flat(pred, [&] { true_fn(); return std::vector<Tensor>{}; },
                      [&] { false_fn(); return std::vector<Tensor>{}; });
  } else {
    std::optional<R> t_out, f_out;
    std::vector<Tensor> flat = detail::cond_flat(
        pred, [&] { t_out.emplace(true_fn()); return detail::flatten_tensors(*t_out); },
        [&] { f_out.emplace(false_fn()); return detail::flatten_tensors(*f_out); });
    return detail::rebuild_tensors(t_out ? *t_out : *f_out, flat);
  }
}

/// tf.while_loop: `while (cond(vars)) vars = body(vars);` and returns the final vars.
///
/// `loop_vars` is a Tensor, a TensorArray, or a std::tuple / std::pair / std::vector /
/// std::array of those (nested freely). `cond` and `body` take the variables whole (`body(vars)`)
/// or, for a tuple, unpacked (`body(i, x)`); `cond` returns a scalar bool tensor and `body` the
/// new variables in the same structure with the same dtypes.
///
/// Eagerly this is a C++ loop. While tracing, the condition and the body are traced once each
/// into the sub-graphs of one "while" node, so the graph does not grow with the trip count.
/// Shapes must stay the same across iterations except along dims declared None in
/// `options.shape_invariants` (tg::ValueError naming the variable and both shapes otherwise).
///
///     auto [i, total] = tg::while_loop(
///         [](Tensor i, Tensor) { return i < 10; },
///         [](Tensor i, Tensor total) { return std::tuple{i + 1, total + i}; },
///         std::tuple{tg::constant(0), tg::constant(0)});
template <class CondFn, class BodyFn, class LoopVars>
LoopVars while_loop(CondFn cond_fn, BodyFn body_fn, const LoopVars& loop_vars,
                    const WhileOptions& options = {}) {
  std::vector<detail::FlatLeaf> leaves;
  std::vector<Tensor> init = detail::flatten_tensors(loop_vars, &leaves, "loop_vars");
  std::optional<LoopVars> last;  // the body's last result: TensorArrays learn element shapes there
  auto cond_flat = [&](const std::vector<Tensor>& flat) -> std::vector<Tensor> {
    const LoopVars vars = detail::rebuild_tensors(loop_vars, flat);
    return {Tensor(detail::call_with_vars(cond_fn, vars))};
  };
  auto body_flat = [&](const std::vector<Tensor>& flat) -> std::vector<Tensor> {
    const LoopVars vars = detail::rebuild_tensors(last ? *last : loop_vars, flat);
    last.emplace(LoopVars(detail::call_with_vars(body_fn, vars)));
    return detail::flatten_tensors(*last);
  };
  std::vector<Tensor> out = detail::while_loop_flat(cond_flat, body_flat, init, leaves, options);
  return detail::rebuild_tensors(last ? *last : loop_vars, out);
}

/// An integer scalar for tg::Range: a tensor, or a C++ integer that takes the dtype of the
/// range's tensor bounds (int32 when none is a tensor).
struct RangeBound {
  RangeBound(const Tensor& t) : tensor(t) {}  // NOLINT: implicit on purpose
  RangeBound(int v) : value(v) {}             // NOLINT
  RangeBound(int64_t v) : value(v) {}         // NOLINT
  Tensor tensor;
  int64_t value = 0;
};

/// What tg::for_range iterates over: start, start + delta, ... while < limit (> limit for a
/// negative delta), like tg::range(start, limit, delta) but without building the list.
struct Range {
  Range(const Tensor& limit) : start(0), limit(limit) {}  // NOLINT: tg::for_range(n, ...)
  Range(int limit) : start(0), limit(limit) {}            // NOLINT
  Range(int64_t limit) : start(0), limit(limit) {}        // NOLINT
  Range(RangeBound start, RangeBound limit, RangeBound delta = 1)
      : start(std::move(start)), limit(std::move(limit)), delta(std::move(delta)) {}
  RangeBound start;
  RangeBound limit;
  RangeBound delta = 1;
};

namespace detail {
/// The bounds as tensors of one integer dtype.
std::array<Tensor, 3> range_tensors(const Range& r);
/// Whether a loop over these bounds must be recorded as a while node (tracing) or run in C++.
bool loop_is_staged(const std::array<Tensor, 3>& bounds);
Tensor range_continues(const Tensor& i, const Tensor& limit, const Tensor& delta);
}  // namespace detail

/// AutoGraph's `for i in tf.range(...)`: runs `body(i)` for each i of the range. Eagerly a C++
/// loop; while tracing a while node whose body appears once in the graph. Side effects in the
/// body (tg::print, Variable updates) happen at every iteration of every call.
///
///     tg::for_range({1, n + 1}, [](tg::Tensor i) { tg::print(i); });
template <class Body>
  requires std::is_invocable_v<Body&, const Tensor&>
void for_range(const Range& range, Body body) {
  const auto b = detail::range_tensors(range);
  if (!detail::loop_is_staged(b)) {
    for (Tensor i = b[0]; static_cast<bool>(detail::range_continues(i, b[1], b[2])); i = i + b[2]) body(i);
    return;
  }
  while_loop([&](const Tensor& i) { return detail::range_continues(i, b[1], b[2]); },
             [&](const Tensor& i) { body(i); return i + b[2]; }, b[0]);
}

/// The same with loop state: `state = body(i, state)` for each i; returns the final state (any
/// tg::while_loop variable structure: Tensors, TensorArrays, tuples, vectors...).
///
///     Tensor total = tg::for_range(n, tg::constant(0), [](Tensor i, Tensor s) { return s + i; });
template <class State, class Body>
  requires std::is_invocable_v<Body&, const Tensor&, const State&>
State for_range(const Range& range, const State& init, Body body) {
  const auto b = detail::range_tensors(range);
  if (!detail::loop_is_staged(b)) {
    State s = init;
    for (Tensor i = b[0]; static_cast<bool>(detail::range_continues(i, b[1], b[2])); i = i + b[2])
      s = State(body(i, s));
    return s;
  }
  auto out = while_loop(
      [&](const std::pair<Tensor, State>& v) { return detail::range_continues(v.first, b[1], b[2]); },
      [&](const std::pair<Tensor, State>& v) {
        return std::pair<Tensor, State>(v.first + b[2], State(body(v.first, v.second)));
      },
      std::pair<Tensor, State>(b[0], init));
  return out.second;
}

}  // namespace tg
