// Stateful ops: Variables (read / assign / assign_add / assign_sub) and print. The one-pass
// optimizer updates are in optimizer_updates.cpp.
#include <algorithm>
#include <atomic>
#include <iostream>
#include <mutex>
#include <type_traits>

#include "core/check.h"
#include "core/sink.h"
#include "core/tensor_impl.h"
#include "core/thread_pool.h"
#include "ops/broadcast.h"
#include "ops/distinct_indices.h"
#include "ops/op.h"
#include "ops/row_prefetch.h"
#include "ops/variable_access.h"
#include "ops/variable_creation.h"
#include "tracegraph/indexed_slices.h"
#include "tracegraph/ops.h"
#include "tracegraph/variable.h"

namespace tg {
namespace detail {

namespace {

// The singleton-Variable policy of the trace running on this thread (VariablePolicyScope).
thread_local VariableCreationPolicy* t_variable_policy = nullptr;
// Who creates Variables on this thread for the user, named by the error (VariableCreatorScope).
thread_local const VariableCreator* t_variable_creator = nullptr;
std::atomic<uint64_t> g_next_variable_id{1};

TextSink& print_sink() {
  static TextSink s(std::cout);
  return s;
}

}  // namespace

const VariableState& declared_state(const OpAttrs& attrs) {
  const VariableAttrs& a = attrs.get<VariableAttrs>();
  TG_CHECK(a.variable != nullptr, "variable op without a variable");
  return *a.variable;
}

VariableState& state_of(const OpAttrs& attrs) {
  declared_state(attrs);  // (checks that the op names a Variable)
  return *resolve_variable(attrs.get<VariableAttrs>().variable);
}

void throw_uninitialized(const VariableState& v) {
  throw FailedPreconditionError(str_cat(
      "tg::Variable '", v.name, "' is read before it has a value: its initial value depends on the "
      "inputs of the function that created it while tracing, and is computed when that trace first "
      "runs. Call the function (the concrete function of the trace that created the Variable) once "
      "before using the Variable elsewhere, or create it from constants"));
}

bool sole_owner(const Tensor& t) {
  const TensorImpl& impl = *t.impl();
  return t.impl().use_count() == 1 && impl.buffer.use_count() == 1 && impl.buffer->owns_memory() &&
         impl.offset == 0 && impl.buffer->count() == impl.shape.num_elements();
}

namespace {

std::vector<ValueType> infer_read(const std::vector<ValueType>&, const OpAttrs& attrs) {
  const VariableState& v = declared_state(attrs);
  return {ValueType{v.dtype, v.shape}};
}

void kernel_read(const std::vector<Tensor>&, const OpAttrs& attrs, std::vector<Tensor>& out) {
  VariableState& v = state_of(attrs);
  std::lock_guard lock(v.mu);
  if (!v.value.defined()) throw_uninitialized(v);
  out[0] = v.value;  // tensors are immutable: sharing the handle is a consistent snapshot
}

std::vector<ValueType> infer_initialize(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const VariableState& v = declared_state(attrs);
  if (in[0].dtype != v.dtype || !in[0].shape.is_compatible_with(v.shape))
    op_error<InvalidArgumentError>("initialize_variable", "variable '", v.name, "' is ", to_string(v.dtype), " ",
                                   v.shape.to_string(), " but its initial value is ", describe(in[0]));
  return {};
}

// Sets the initial value once: the first run of the trace that created the Variable.
void kernel_initialize(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>&) {
  VariableState& v = state_of(attrs);
  if (!(in[0].impl()->shape == v.shape))
    op_error<InvalidArgumentError>("initialize_variable", "variable '", v.name, "' has shape ",
                                   v.shape.to_string(), " but its initial value has shape ",
                                   in[0].impl()->shape.to_string());
  std::lock_guard lock(v.mu);
  if (!v.value.defined()) v.value = make_view(in[0], v.shape);
}

template <int kOp>
std::vector<ValueType> infer_assign(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const char* op = op_def(static_cast<OpId>(kOp)).name;
  const VariableState& v = declared_state(attrs);
  if (in[0].dtype != v.dtype)
    op_error<InvalidArgumentError>(op, "variable '", v.name, "' has dtype ", to_string(v.dtype),
                                   " but the value has dtype ", to_string(in[0].dtype),
                                   "; tg::cast the value first");
  if (!in[0].shape.is_compatible_with(v.shape))
    op_error<InvalidArgumentError>(op, "variable '", v.name, "' has shape ", v.shape.to_string(),
                                   " but the value has shape ", in[0].shape.to_string(),
                                   "; a Variable's shape is fixed when it is created");
  return {ValueType{v.dtype, v.shape}};
}

template <OpId kCombine>
void kernel_assign(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  VariableState& v = state_of(attrs);
  if (!(in[0].impl()->shape == v.shape))  // None dims at trace time: checked on real values
    op_error<InvalidArgumentError>("assign_variable", "variable '", v.name, "' has shape ",
                                   v.shape.to_string(), " but the value has shape ",
                                   in[0].impl()->shape.to_string());
  std::lock_guard lock(v.mu);
  if constexpr (kCombine != OpId::Identity) {
    if (!v.value.defined()) throw_uninitialized(v);
  }
  if constexpr (kCombine == OpId::Identity) {
    // A handle of its own (same storage): a tape must not mistake later reads of the variable
    // for the assigned tensor, through which no gradient flows.
    v.value = make_view(in[0], v.shape);
  } else if (sole_owner(v.value)) {
    // Nothing else can see the old value (no handle, view or tape holds it): update it where it
    // lies, as an optimizer step over large weights should, instead of allocating a new buffer.
    std::vector<Tensor> result{v.value};
    op_def(kCombine).kernel({v.value, in[0]}, OpAttrs{}, result);
  } else {
    v.value = run_op_eager(op_def(kCombine), {v.value, in[0]}, OpAttrs{})[0];
  }
  out[0] = v.value;
}

// ---- scatter_add / scatter_sub / scatter_update on a Variable's rows ----

enum class ScatterMode { kAdd, kSub, kUpdate };
constexpr OpId scatter_op(ScatterMode m) {
  return m == ScatterMode::kAdd ? OpId::ScatterAddVariable
         : m == ScatterMode::kSub ? OpId::ScatterSubVariable
                                  : OpId::ScatterUpdateVariable;
}

// indices.shape + the Variable's shape[1:]: the updates a scatter needs (unknown rank when the
// indices' rank is).
TensorShape scatter_updates_shape(const TensorShape& indices, const TensorShape& var) {
  if (!indices.has_rank() || !var.has_rank()) return TensorShape::unknown_rank();
  std::vector<int64_t> dims = indices.none_aware().dims();
  const std::vector<int64_t> vd = var.none_aware().dims();
  dims.insert(dims.end(), vd.begin() + 1, vd.end());
  return TensorShape(dims);
}

template <ScatterMode kMode>
std::vector<ValueType> infer_scatter(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const char* op = op_def(scatter_op(kMode)).name;
  const VariableState& v = declared_state(attrs);
  require_dtype(op, in[0], {DType::Int32, DType::Int64}, "indices");
  if (v.dtype == DType::Bool || v.dtype == DType::String)
    op_error<InvalidArgumentError>(op, "variable '", v.name, "' has dtype ", to_string(v.dtype),
                                   "; row updates take numeric Variables (float32, float64, int32, int64, uint8). "
                                   "Assign the whole value with assign instead");
  if (in[1].dtype != v.dtype)
    op_error<InvalidArgumentError>(op, "variable '", v.name, "' has dtype ", to_string(v.dtype),
                                   " but the updates have dtype ", to_string(in[1].dtype), "; tg::cast them first");
  if (v.shape.has_rank() && v.shape.rank() == 0)
    op_error<InvalidArgumentError>(op, "variable '", v.name, "' is a scalar and has no rows to update; use assign");
  const TensorShape want = scatter_updates_shape(in[0].shape, v.shape);
  if (!in[1].shape.is_compatible_with(want))
    op_error<InvalidArgumentError>(op, "updates have shape ", in[1].shape.to_string(), " but indices of shape ",
                                   in[0].shape.to_string(), " into variable '", v.name, "' (shape ", v.shape.to_string(),
                                   ") need updates of shape ", want.to_string(), " (indices.shape + shape[1:])");
  return {};
}

template <class I>
void check_scatter_indices(const char* op, const Tensor& indices, int64_t rows, const VariableState& v, bool unique) {
  const I* idx = data_of<I>(indices);
  const int64_t n = indices.impl()->shape.num_elements();
  DistinctIndices<I> seen(unique ? n : 0);
  for (int64_t j = 0; j < n; ++j) {
    if (idx[j] < 0 || static_cast<int64_t>(idx[j]) >= rows)
      op_error<InvalidArgumentError>(op, "indices[", j, "] = ", idx[j], " is not in [0, ", rows, "): variable '",
                                     v.name, "' has shape ", v.shape.to_string(), "; indices must be >= 0 and < ", rows);
    if (unique && !seen.number(idx[j]).second)
      op_error<InvalidArgumentError>(op, "index ", idx[j], " appears more than once (again at indices[", j,
                                     "]); which of the rows would be written is undefined. Pass each index once "
                                     "(IndexedSlices::deduplicated() sums repeated rows)");
  }
}

template <ScatterMode kMode>
void kernel_scatter(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>&) {
  const char* op = op_def(scatter_op(kMode)).name;
  VariableState& v = state_of(attrs);
  infer_scatter<kMode>({ValueType{in[0].impl()->dtype, in[0].impl()->shape},
                        ValueType{in[1].impl()->dtype, in[1].impl()->shape}}, attrs);
  const std::vector<int64_t>& vd = v.shape.dims();
  const int64_t rows = vd[0];
  const int64_t row = product(vd, 1, vd.size());
  if (in[0].impl()->dtype == DType::Int64)
    check_scatter_indices<int64_t>(op, in[0], rows, v, kMode == ScatterMode::kUpdate);
  else
    check_scatter_indices<int32_t>(op, in[0], rows, v, kMode == ScatterMode::kUpdate);
  const int64_t n = in[0].impl()->shape.num_elements();
  std::lock_guard lock(v.mu);
  if (!v.value.defined()) throw_uninitialized(v);
  if (n == 0 || row == 0) return;
  if (!sole_owner(v.value)) {
    // Someone still holds the old value (a read, a tape): it must not change under them, so the
    // update goes to a copy; otherwise only the named rows are written, where they lie.
    Tensor copy = allocate_tensor(v.dtype, v.shape);
    copy_elements(v.value, copy);
    v.value = std::move(copy);
  }
  visit_dtype(v.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T> || (std::is_integral_v<T> && !std::is_same_v<T, bool>)) {
      T* y = data_of<T>(v.value);
      const T* u = data_of<T>(in[1]);
      const auto* i32 = data_of<int32_t>(in[0]);
      const auto* i64 = data_of<int64_t>(in[0]);
      const bool wide = in[0].impl()->dtype == DType::Int64;
      // Threads take ranges of the variable's rows, each scanning every index for its own: a
      // repeated row's updates apply in index order on any thread count.
      auto index = [&](int64_t j) { return wide ? i64[j] : static_cast<int64_t>(i32[j]); };
      auto update_rows = [&](int64_t begin, int64_t end) {
        for (int64_t j = 0; j < n; ++j) {
          if (j + kRowPrefetchDistance < n) {
            const int64_t ahead = index(j + kRowPrefetchDistance);
            if (ahead >= begin && ahead < end)
              prefetch_row(y + ahead * row, sizeof(T) * static_cast<std::size_t>(row), true);
          }
          const int64_t i = index(j);
          if (i < begin || i >= end) continue;
          T* d = y + i * row;
          const T* s = u + j * row;
          for (int64_t k = 0; k < row; ++k) {
            if constexpr (kMode == ScatterMode::kAdd) d[k] += s[k];
            else if constexpr (kMode == ScatterMode::kSub) d[k] -= s[k];
            else d[k] = s[k];
          }
        }
      };
      if (n * row < 2 * kParallelMinElements) update_rows(0, rows);
      else parallel_for(rows, std::max<int64_t>(1, rows * kParallelMinElements / (n * row)), update_rows);
    }
  });
}

std::vector<ValueType> infer_print(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const PrintAttrs& attrs = op_attrs.get<PrintAttrs>();
  if (attrs.tensor_parts.size() != in.size())
    op_error<InvalidArgumentError>("print", "internal part layout mismatch: ", attrs.tensor_parts.size(),
                                   " tensor parts for ", in.size(), " tensors");
  const std::size_t want = std::max<std::size_t>(attrs.texts.size(), 1);
  if (!attrs.separators.empty() && attrs.separators.size() != want)
    op_error<InvalidArgumentError>("print", "expected ", want, " separators (one after each of the ",
                                   attrs.texts.size(), " parts, the last being the line's end), got ",
                                   attrs.separators.size());
  return {};
}

void kernel_print(const std::vector<Tensor>& in, const OpAttrs& op_attrs, std::vector<Tensor>&) {
  const PrintAttrs& attrs = op_attrs.get<PrintAttrs>();
  std::string line;
  std::size_t next_tensor = 0;
  const bool spaced = attrs.separators.empty();
  for (std::size_t part = 0; part < attrs.texts.size(); ++part) {
    if (part) line += spaced ? std::string(" ") : attrs.separators[part - 1];
    const bool is_tensor = next_tensor < attrs.tensor_parts.size() &&
                           attrs.tensor_parts[next_tensor] == static_cast<int64_t>(part);
    if (!is_tensor) {
      line += attrs.texts[part];
      continue;
    }
    const Tensor& t = in[next_tensor++];
    if (t.impl()->dtype == DType::String && t.impl()->shape.rank() == 0)
      line += *t.impl()->data<std::string>();  // tf.print shows a scalar string unquoted
    else
      line += format_print_values(t, attrs.summarize);
  }
  line += spaced ? std::string("\n") : attrs.separators.back();
  print_sink().write(line);
}

// The innermost VariableBindingScope alive on this thread; each links to the one it encloses.
thread_local const VariableBindingScope* t_variable_bindings = nullptr;

// The binding of `parameter` in force on this thread, innermost scope first; nullptr if none.
const VariableBinding* find_binding(const VariableState* parameter) {
  for (const VariableBindingScope* s = t_variable_bindings; s; s = s->prev_scope())
    for (const VariableBinding& b : s->bindings())
      if (b.parameter == parameter) return &b;
  return nullptr;
}

}  // namespace

bool variable_has_value(VariableState& v) {
  std::lock_guard lock(v.mu);
  return v.value.defined();
}

std::shared_ptr<VariableState> make_variable_state(std::string name, DType dtype, TensorShape shape, Tensor value) {
  auto v = std::make_shared<VariableState>();
  v->id = g_next_variable_id.fetch_add(1);
  v->name = std::move(name);
  v->dtype = dtype;
  v->shape = std::move(shape);
  v->value = std::move(value);
  return v;
}

std::shared_ptr<VariableState> make_variable_parameter(const VariableState& traced, const std::string& function) {
  auto p = std::make_shared<VariableState>();
  p->dtype = traced.dtype;
  p->shape = traced.shape;
  p->name = traced.name;
  p->id = g_next_variable_id.fetch_add(1);
  p->parameter = true;
  p->parameter_of = function;
  return p;
}

namespace {
// The bindings of a new VariableBindingScope, with each parameter's first binding noted; refuses
// a parameter whose trace made state for another Variable.
std::vector<VariableBinding> checked_bindings(std::vector<VariableBinding> bindings) {
  for (const VariableBinding& b : bindings) {
    VariableState* p = b.parameter;
    const uint64_t id = b.variable->id;
    std::lock_guard lock(p->mu);
    if (p->first_binding_id == 0) p->first_binding_id = id;
    if (p->owns_state_of_first_binding && p->first_binding_id != id)
      throw ValueError(str_cat(
          "function '", p->parameter_of, "' was traced with a Variable argument ('", p->name,
          "') for which state of its own was created in the trace (an optimizer's slots, made for "
          "the first Variable passed there), and is now called with another Variable ('",
          b.variable->name, "', id ", id, "). One trace serves Variables of the same dtype and shape, "
          "but those slots belong to the first one. Pass the same Variables on every call, or give "
          "each set of Variables its own tg::function (and optimizer)"));
  }
  return bindings;
}
}  // namespace

VariableBindingScope::VariableBindingScope(std::vector<VariableBinding> bindings)
    : bindings_(checked_bindings(std::move(bindings))), installed_(t_variable_bindings, this) {}

std::vector<VariableBinding> current_variable_bindings() {
  std::vector<VariableBinding> out;
  for (const VariableBindingScope* s = t_variable_bindings; s; s = s->prev_scope())
    out.insert(out.end(), s->bindings().begin(), s->bindings().end());
  return out;
}

const std::shared_ptr<VariableState>& resolve_variable(const std::shared_ptr<VariableState>& v) {
  const std::shared_ptr<VariableState>* at = &v;
  while ((*at)->parameter) {
    const VariableBinding* b = find_binding(at->get());
    if (!b)
      throw OutOfScopeError(str_cat(
          "tg::Variable '", (*at)->name, "' is the parameter that function '", (*at)->parameter_of,
          "' traced its Variable argument with: it stands for the caller's Variable only while a "
          "call of that function runs. Use the Variable you passed to the function instead of "
          "keeping the one the body received"));
    at = &b->variable;
  }
  return *at;
}

const VariableState* bound_variable_or_self(const VariableState* v) {
  while (v->parameter) {
    const VariableBinding* b = find_binding(v);
    if (!b) return v;
    v = b->variable.get();
  }
  return v;
}

VariableCreationPolicy* current_variable_policy() { return t_variable_policy; }
VariablePolicyScope::VariablePolicyScope(VariableCreationPolicy* policy) : policy_(t_variable_policy, policy) {}
VariableCreatorScope::VariableCreatorScope(const VariableCreator* creator) : creator_(t_variable_creator, creator) {}

namespace {
// A read has no tensor inputs: the tape itself maps a read back to its Variable.
std::vector<Tensor> grad_read_variable(const GradInputs&) { return {}; }

// In a replay (ReplayContext): print and initialize_variable did their work in the forward call,
// which also gave the Variable the value later reads see; the others act on the replay's values.
std::vector<Tensor> replay_nothing(ReplayContext&, const std::vector<Tensor>&, const OpAttrs&) { return {}; }
std::vector<Tensor> replay_read(ReplayContext& r, const std::vector<Tensor>&, const OpAttrs& attrs) {
  return {r.read(attrs.get<VariableAttrs>().variable)};
}
std::vector<Tensor> replay_assign(ReplayContext& r, const std::vector<Tensor>& in, const OpAttrs& attrs) {
  r.write(attrs.get<VariableAttrs>().variable, in[0]);
  return {in[0]};
}
template <bool kAdd>
std::vector<Tensor> replay_assign_update(ReplayContext& r, const std::vector<Tensor>& in, const OpAttrs& attrs) {
  const std::shared_ptr<VariableState>& v = attrs.get<VariableAttrs>().variable;
  const Tensor old = r.read(v);
  Tensor updated = kAdd ? add(old, in[0]) : sub(old, in[0]);
  r.write(v, updated);
  return {std::move(updated)};
}
// A replay's scatter: the Variable's replay value with the rows changed, through public ops so
// that gradients flow to the updates and to the untouched rows.
template <ScatterMode kMode>
std::vector<Tensor> replay_scatter(ReplayContext& r, const std::vector<Tensor>& in, const OpAttrs& attrs) {
  const std::shared_ptr<VariableState>& v = attrs.get<VariableAttrs>().variable;
  const Tensor old = r.read(v);
  const Tensor at = expand_dims(in[0], -1);
  Tensor updated;
  if constexpr (kMode == ScatterMode::kAdd) {
    updated = tensor_scatter_nd_add(old, at, in[1]);
  } else if constexpr (kMode == ScatterMode::kSub) {
    updated = tensor_scatter_nd_add(old, at, neg(in[1]));
  } else {
    // The indices are distinct (the forward call checked them): the named rows take the updates
    // exactly, the others keep their values.
    const Tensor written = scatter_nd(at, ones_like(in[1]), tg::shape(old));
    updated = where(greater(written, zeros_like(written)), scatter_nd(at, in[1], tg::shape(old)), old);
  }
  r.write(v, updated);
  return {};
}
}  // namespace

void register_state_ops(OpDef* t) {
  set_op(t, OpId::Print, &infer_print, &kernel_print);
  set_op(t, OpId::ReadVariable, &infer_read, &kernel_read);
  set_grad(t, OpId::ReadVariable, &grad_read_variable);
  set_op(t, OpId::AssignVariable, &infer_assign<static_cast<int>(OpId::AssignVariable)>,
      &kernel_assign<OpId::Identity>);
  set_op(t, OpId::AssignAddVariable, &infer_assign<static_cast<int>(OpId::AssignAddVariable)>,
      &kernel_assign<OpId::Add>);
  set_op(t, OpId::AssignSubVariable, &infer_assign<static_cast<int>(OpId::AssignSubVariable)>,
      &kernel_assign<OpId::Sub>);
  set_op(t, OpId::InitializeVariable, &infer_initialize, &kernel_initialize);
  set_op(t, OpId::ScatterAddVariable, &infer_scatter<ScatterMode::kAdd>, &kernel_scatter<ScatterMode::kAdd>);
  set_op(t, OpId::ScatterSubVariable, &infer_scatter<ScatterMode::kSub>, &kernel_scatter<ScatterMode::kSub>);
  set_op(t, OpId::ScatterUpdateVariable, &infer_scatter<ScatterMode::kUpdate>, &kernel_scatter<ScatterMode::kUpdate>);
  set_replay(t, OpId::ScatterAddVariable, &replay_scatter<ScatterMode::kAdd>);
  set_replay(t, OpId::ScatterSubVariable, &replay_scatter<ScatterMode::kSub>);
  set_replay(t, OpId::ScatterUpdateVariable, &replay_scatter<ScatterMode::kUpdate>);
  set_replay(t, OpId::Print, &replay_nothing);
  set_replay(t, OpId::ReadVariable, &replay_read);
  set_replay(t, OpId::AssignVariable, &replay_assign);
  set_replay(t, OpId::AssignAddVariable, &replay_assign_update<true>);
  set_replay(t, OpId::AssignSubVariable, &replay_assign_update<false>);
  set_replay(t, OpId::InitializeVariable, &replay_nothing);
}

void print_parts(const std::vector<PrintPart>& parts, int64_t summarize, std::vector<std::string> separators) {
  if (summarize < -1)
    op_error<InvalidArgumentError>("print", "summarize must be -1 (every element) or at least 0, got ", summarize);
  PrintAttrs attrs;
  attrs.summarize = summarize;
  attrs.separators = std::move(separators);
  std::vector<Tensor> tensors;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    attrs.texts.push_back(parts[i].text);
    if (parts[i].tensor.defined()) {
      attrs.tensor_parts.push_back(static_cast<int64_t>(i));
      tensors.push_back(parts[i].tensor);
    }
  }
  apply_op(OpId::Print, tensors, std::move(attrs));
}

}  // namespace detail

namespace config {
void set_print_sink(void (*sink)(const std::string&, void*), void* user) {
  detail::print_sink().set(sink, user);
}
}  // namespace config

namespace {
// A creator's fix (written for C++: "one tg::function per optimizer") in the Python package's words.
std::string python_words(std::string text) {
  for (std::size_t at = text.find("tg::"); at != std::string::npos; at = text.find("tg::", at)) text.replace(at, 4, "tg.");
  return text;
}
}  // namespace

Variable::Variable(Tensor initial_value, std::string name) {
  if (!initial_value.defined())
    throw ValueError("[Variable] the initial value is an empty tg::Tensor; pass a value");
  if (name.empty()) name = "Variable";
  auto* policy = detail::current_variable_policy();
  const bool from_inputs = initial_value.is_symbolic();
  if (from_inputs && !policy)
    throw ValueError(detail::str_cat(
        "[Variable] the initial value ", initial_value.to_string(),
        " is a symbolic tensor, but no function is being traced on this thread: it was kept after "
        "its trace. Create the Variable from an eager value"));
  if (from_inputs && !detail::static_shape(initial_value).is_fully_defined())
    throw ValueError(detail::str_cat(
        "[Variable] the initial value ", initial_value.to_string(), " of tg::Variable '", name,
        "' depends on the function's inputs and its shape is not fully known while tracing; a "
        "Variable's shape is fixed when it is created. Give the input a fixed shape (an "
        "input_signature without None there), or create the Variable from constants"));
  if (policy) {
    if (!policy->allowed) {
      // Name the Variable and its maker: "created once" alone does not say which one.
      const detail::VariableCreator* by = detail::t_variable_creator;
      const bool py = policy->python;  // the Python package's tg.function: its words
      throw ValueError(detail::str_cat(
          py ? "tg.function only supports singleton tg.Variables" : "tg::function only supports singleton tg::Variables",
          " created on the first call: function '", policy->function_name, "' tried to create ",
          py ? "tg.Variable '" : "tg::Variable '", name, "' (",
          to_string(initial_value.dtype()), ", shape ", detail::static_shape(initial_value).to_string(),
          ")", by ? " made by " + by->what : std::string(),
          policy->trace_number > 1
              ? detail::str_cat(" in a later trace (trace ", policy->trace_number, "). ")
              : std::string(" again when its first trace was traced a second time: a body that creates "
                            "Variables is traced twice, and this one creates a new Variable on every call. "),
          by && !by->fix.empty() ? (py ? python_words(by->fix) : by->fix)
          : py ? std::string("Make sure the tg.Variable is only created once or created outside tg.function")
               : std::string("Make sure the tg::Variable is only created once or created outside tg::function"),
          py ? ". See docs/python.md" : ". See docs/user-guide.md#variables"));
    }
    ++policy->created;
  }
  state_ = std::make_shared<detail::VariableState>();
  state_->id = detail::g_next_variable_id.fetch_add(1);
  state_->name = std::move(name);
  if (from_inputs) {
    // TF's variable_initializer_not_constant: the value comes from the trace's inputs, so the
    // trace sets it at its first run (the function keeps this trace's graph for that).
    state_->dtype = initial_value.dtype();
    state_->shape = detail::static_shape(initial_value);
    ++policy->initialized_from_inputs;
    detail::apply_op(detail::OpId::InitializeVariable, {initial_value}, detail::VariableAttrs{state_});
    return;
  }
  // A handle of its own (same storage), so that a tape tells this variable's reads apart from the
  // initial tensor and from other variables made from it.
  state_->value = detail::make_view(initial_value, detail::static_shape(initial_value));
  state_->dtype = state_->value.dtype();
  state_->shape = detail::static_shape(state_->value);
}

namespace {
detail::OpAttrs variable_attrs(const std::shared_ptr<detail::VariableState>& s) {
  return detail::VariableAttrs{s};
}
}  // namespace

Tensor Variable::read_value() const {
  return detail::apply_op1(detail::OpId::ReadVariable, {}, variable_attrs(state_));
}
Tensor Variable::assign(const Tensor& value) {
  return detail::apply_op1(detail::OpId::AssignVariable, {value}, variable_attrs(state_));
}
Tensor Variable::assign_add(const Tensor& delta) {
  return detail::apply_op1(detail::OpId::AssignAddVariable, {delta}, variable_attrs(state_));
}
Tensor Variable::assign_sub(const Tensor& delta) {
  return detail::apply_op1(detail::OpId::AssignSubVariable, {delta}, variable_attrs(state_));
}
namespace {
Variable& scatter_rows(Variable& v, const IndexedSlices& slices, detail::OpId id) {
  const char* op = detail::op_def(id).name;
  if (!(slices.dense_shape() == v.shape().none_aware()))
    detail::op_error<InvalidArgumentError>(op, "the slices' dense_shape ", slices.dense_shape().to_string(),
                                           " is not the shape of variable '", v.name(), "' ", v.shape().to_string());
  detail::apply_op(id, {slices.indices(), slices.values()}, variable_attrs(v.state()));
  return v;
}
}  // namespace

Variable& Variable::scatter_add(const IndexedSlices& delta) { return scatter_rows(*this, delta, detail::OpId::ScatterAddVariable); }
Variable& Variable::scatter_sub(const IndexedSlices& delta) { return scatter_rows(*this, delta, detail::OpId::ScatterSubVariable); }
Variable& Variable::scatter_update(const IndexedSlices& rows) {
  return scatter_rows(*this, rows, detail::OpId::ScatterUpdateVariable);
}
DType Variable::dtype() const { return state_->dtype; }
TensorShape Variable::shape() const { return state_->shape; }
const std::string& Variable::name() const { return state_->name; }
uint64_t Variable::id() const { return state_->id; }

std::ostream& operator<<(std::ostream& os, const Variable& v) {
  const Tensor value = v.read_value();
  return os << "<tg.Variable '" << v.name() << "' shape=" << v.shape().to_string()
            << " dtype=" << to_string(v.dtype()) << ", value=" << value.to_string() << ">";
}

}  // namespace tg
