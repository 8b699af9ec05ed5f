// Stateful ops: Variables (read / assign / assign_add / assign_sub) and print.
#include <atomic>
#include <cmath>
#include <iostream>
#include <mutex>
#include <type_traits>

#include "core/check.h"
#include "core/sink.h"
#include "core/tensor_impl.h"
#include "core/thread_pool.h"
#include "ops/op.h"
#include "ops/optimizer_updates.h"
#include "ops/variable_state.h"
#include "ops/variable_creation.h"
#include "tracegraph/ops.h"
#include "tracegraph/variable.h"

namespace tg {
namespace detail {

namespace {

thread_local VariableCreationPolicy* t_policy = nullptr;
thread_local const VariableCreator* t_creator = nullptr;
std::atomic<uint64_t> g_next_variable_id{1};

TextSink& print_sink() {
  static TextSink s(std::cout);
  return s;
}

// The Variable an op names: for shape rules (a parameter has its Variables' dtype and shape).
const VariableState& declared_state(const OpAttrs& attrs) {
  const VariableAttrs& a = attrs.get<VariableAttrs>();
  TG_CHECK(a.variable != nullptr, "variable op without a variable");
  return *a.variable;
}
// The Variable a kernel reads or writes: a parameter's is the one the running call bound.
VariableState& state_of(const OpAttrs& attrs) {
  declared_state(attrs);  // (checks that the op names a Variable)
  return *resolve_variable(attrs.get<VariableAttrs>().variable);
}

std::vector<ValueType> infer_read(const std::vector<ValueType>&, const OpAttrs& attrs) {
  const VariableState& v = declared_state(attrs);
  return {ValueType{v.dtype, v.shape}};
}

[[noreturn]] void uninitialized(const VariableState& v) {
  throw FailedPreconditionError(str_cat(
      "tg::Variable '", v.name, "' is read before it has a value: its initial value depends on the "
      "inputs of the function that created it while tracing, and is computed when that trace first "
      "runs. Call the function (the concrete function of the trace that created the Variable) once "
      "before using the Variable elsewhere, or create it from constants"));
}

void kernel_read(const std::vector<Tensor>&, const OpAttrs& attrs, std::vector<Tensor>& out) {
  VariableState& v = state_of(attrs);
  std::lock_guard lock(v.mu);
  if (!v.value.defined()) uninitialized(v);
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

// True when `t` is the only handle to its storage and that storage is tracegraph's own.
bool sole_owner(const Tensor& t) {
  const TensorImpl& impl = *t.impl();
  return t.impl().use_count() == 1 && impl.buffer.use_count() == 1 && impl.buffer->owns_memory() &&
         impl.offset == 0 && impl.buffer->count() == impl.shape.num_elements();
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
    if (!v.value.defined()) uninitialized(v);
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

// ---- one-pass optimizer updates (optimizer_updates.h)

// The dtype and shape a Variable's update operand must have; scalars must be scalars of it.
void check_update_operand(const char* op, const VariableState& var, const ValueType& t, const char* what, bool scalar) {
  const bool shape_ok = scalar ? t.shape.is_compatible_with(TensorShape(std::vector<int64_t>{}))
                               : t.shape.is_compatible_with(var.shape);
  if (t.dtype != var.dtype || !shape_ok)
    op_error<InvalidArgumentError>(op, "variable '", var.name, "' is ", to_string(var.dtype), " ", var.shape.to_string(),
                                   " so ", what, " must be ", to_string(var.dtype), " ",
                                   scalar ? "()" : var.shape.to_string(), ", got ", describe(t));
}

void check_float_variable(const char* op, const VariableState& var) {
  if (var.dtype != DType::Float32 && var.dtype != DType::Float64)
    op_error<InvalidArgumentError>(op, "updates float32 or float64 Variables, got '", var.name, "' of dtype ",
                                   to_string(var.dtype), "; keep trainable weights in a float dtype");
}

std::vector<ValueType> infer_apply_gradient_descent(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const VariableState& var = declared_state(attrs);
  check_float_variable("apply_gradient_descent", var);
  check_update_operand("apply_gradient_descent", var, in[0], "the learning rate", true);
  check_update_operand("apply_gradient_descent", var, in[1], "the gradient", false);
  return {};
}

std::vector<ValueType> infer_apply_adam(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const AdamSlotsAttrs& a = attrs.get<AdamSlotsAttrs>();
  TG_CHECK(a.variable && a.m && a.v, "apply_adam without its Variables");
  const VariableState& var = *a.variable;
  check_float_variable("apply_adam", var);
  for (const VariableState* slot : {a.m.get(), a.v.get()})
    TG_CHECK(slot->dtype == var.dtype && slot->shape == var.shape, "Adam slot '", slot->name, "' does not match '",
             var.name, "'");
  check_update_operand("apply_adam", var, in[0], "the gradient", false);
  const char* names[] = {"alpha", "beta1", "beta2", "epsilon"};
  for (int k = 0; k < 4; ++k) check_update_operand("apply_adam", var, in[static_cast<std::size_t>(k + 1)], names[k], true);
  return {};
}

// Where an update writes: the Variable's own storage when nothing else can see the old value,
// else a new tensor (a handle, view or tape still holds the old one).
Tensor update_target(VariableState& v) {
  if (!v.value.defined()) uninitialized(v);
  return sole_owner(v.value) ? v.value : allocate_tensor(v.dtype, v.shape);
}

void check_gradient_shape(const char* op, const VariableState& var, const Tensor& grad) {
  if (!(grad.impl()->shape == var.shape))  // None dims at trace time: checked on real values
    op_error<InvalidArgumentError>(op, "variable '", var.name, "' has shape ", var.shape.to_string(),
                                   " but the gradient has shape ", grad.impl()->shape.to_string());
}

// Splits [0, n) across the pool when the update is large enough to pay for it: from 64K
// elements, in halves or smaller. The gradient an update reads was usually written by the
// pool's split of a product, half on each core, and reading a half from the other core's cache
// costs more than the split: the MLP's W2 (256 x 256) took 7.8 us on one thread and 43 us on
// the calling thread of two, 20 us split.
template <class F>
void for_elements(int64_t n, F&& f) {
  if (n >= kParallelMinElements) parallel_for(n, kParallelMinElements / 2, f);
  else f(int64_t{0}, n);
}

// GCC's "no dependence between iterations". clang warns on GCC's pragma and, in builds that do
// not vectorise (the sanitizer builds), on its own equivalent; it checks the overlap at run time.
#if defined(__clang__)
#define TG_LOOP_IVDEP
#else
#define TG_LOOP_IVDEP _Pragma("GCC ivdep")
#endif

// Each element's update reads only that element of every array, so outputs that are the very
// inputs (an update in place) carry no dependence between iterations: `ivdep` lets the loops
// vectorise without runtime overlap checks (12 pointer pairs for Adam, more than GCC versions).
template <class T>
[[gnu::always_inline]] inline void gradient_descent_range(T* out, const T* var, const T* g, T lr, int64_t b, int64_t e) {
TG_LOOP_IVDEP
  for (int64_t i = b; i < e; ++i) out[i] = var[i] - lr * g[i];
}

// The composite Adam step's operations in its order.
template <class T>
[[gnu::always_inline]] inline void adam_range(T* out_var, T* out_m, T* out_v, const T* var, const T* m, const T* v,
                                              const T* g, T alpha, T c1, T c2, T eps, int64_t b, int64_t e) {
TG_LOOP_IVDEP
  for (int64_t i = b; i < e; ++i) {
    const T gi = g[i];
    const T m_new = m[i] + (gi - m[i]) * c1;
    const T v_new = v[i] + (gi * gi - v[i]) * c2;
    out_m[i] = m_new;
    out_v[i] = v_new;
    out_var[i] = var[i] - m_new * alpha / (std::sqrt(v_new) + eps);
  }
}

// One copy per ISA, picked once at run time: the updates are bound by memory at AVX-512 widths
// but by sqrt and division at SSE2's (this file is built for the baseline ISA). -ffp-contract=off
// holds in every copy. (Not target_clones: its ifunc resolvers run before a sanitizer runtime is
// up, and crash TSan builds at load.)
#define TG_UPDATE_KERNELS(suffix, target)                                                                    \
  target void gradient_descent_f32_##suffix(float* out, const float* var, const float* g, float lr, int64_t b, \
                                            int64_t e) {                                                    \
    gradient_descent_range(out, var, g, lr, b, e);                                                          \
  }                                                                                                         \
  target void gradient_descent_f64_##suffix(double* out, const double* var, const double* g, double lr,      \
                                            int64_t b, int64_t e) {                                         \
    gradient_descent_range(out, var, g, lr, b, e);                                                          \
  }                                                                                                         \
  target void adam_f32_##suffix(float* out_var, float* out_m, float* out_v, const float* var, const float* m, \
                                const float* v, const float* g, float alpha, float c1, float c2, float eps,  \
                                int64_t b, int64_t e) {                                                     \
    adam_range(out_var, out_m, out_v, var, m, v, g, alpha, c1, c2, eps, b, e);                              \
  }                                                                                                         \
  target void adam_f64_##suffix(double* out_var, double* out_m, double* out_v, const double* var,             \
                                const double* m, const double* v, const double* g, double alpha, double c1, \
                                double c2, double eps, int64_t b, int64_t e) {                              \
    adam_range(out_var, out_m, out_v, var, m, v, g, alpha, c1, c2, eps, b, e);                              \
  }
TG_UPDATE_KERNELS(avx512, __attribute__((target("avx512f"))))
TG_UPDATE_KERNELS(avx2, __attribute__((target("avx2"))))
TG_UPDATE_KERNELS(baseline, )
#undef TG_UPDATE_KERNELS

struct UpdateKernels {
  decltype(&gradient_descent_f32_baseline) gradient_descent_f32;
  decltype(&gradient_descent_f64_baseline) gradient_descent_f64;
  decltype(&adam_f32_baseline) adam_f32;
  decltype(&adam_f64_baseline) adam_f64;
};
const UpdateKernels& update_kernels() {
  static const UpdateKernels k = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
      return UpdateKernels{gradient_descent_f32_avx512, gradient_descent_f64_avx512, adam_f32_avx512, adam_f64_avx512};
    if (__builtin_cpu_supports("avx2"))
      return UpdateKernels{gradient_descent_f32_avx2, gradient_descent_f64_avx2, adam_f32_avx2, adam_f64_avx2};
    return UpdateKernels{gradient_descent_f32_baseline, gradient_descent_f64_baseline, adam_f32_baseline,
                         adam_f64_baseline};
  }();
  return k;
}

template <class T>
void gradient_descent_into(T* out, const T* var, const T* g, T lr, int64_t n) {
  for_elements(n, [&](int64_t b, int64_t e) {
    if constexpr (std::is_same_v<T, float>) update_kernels().gradient_descent_f32(out, var, g, lr, b, e);
    else update_kernels().gradient_descent_f64(out, var, g, lr, b, e);
  });
}

// out_* may be the inputs themselves (an update in place).
template <class T>
void adam_into(T* out_var, T* out_m, T* out_v, const T* var, const T* m, const T* v, const T* g, const T* scalars,
               int64_t n) {
  const T alpha = scalars[0], c1 = T(1) - scalars[1], c2 = T(1) - scalars[2], eps = scalars[3];
  for_elements(n, [&](int64_t b, int64_t e) {
    if constexpr (std::is_same_v<T, float>) update_kernels().adam_f32(out_var, out_m, out_v, var, m, v, g, alpha, c1, c2, eps, b, e);
    else update_kernels().adam_f64(out_var, out_m, out_v, var, m, v, g, alpha, c1, c2, eps, b, e);
  });
}

template <class T>
void adam_tensors(const Tensor& out_var, const Tensor& out_m, const Tensor& out_v, const Tensor& var, const Tensor& m,
                  const Tensor& v, const Tensor& grad, const std::vector<Tensor>& scalars) {
  T s[4];
  for (std::size_t k = 0; k < 4; ++k) s[k] = *data_of<T>(scalars[k]);
  adam_into(data_of<T>(out_var), data_of<T>(out_m), data_of<T>(out_v), data_of<T>(var),
            data_of<T>(m), data_of<T>(v), data_of<T>(grad), s, var.impl()->shape.num_elements());
}

void kernel_apply_gradient_descent(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>&) {
  VariableState& v = state_of(attrs);
  check_gradient_shape("apply_gradient_descent", v, in[1]);
  std::lock_guard lock(v.mu);
  Tensor target = update_target(v);
  const int64_t n = v.shape.num_elements();
  if (v.dtype == DType::Float32)
    gradient_descent_into(data_of<float>(target), data_of<float>(v.value), data_of<float>(in[1]),
                          *data_of<float>(in[0]), n);
  else
    gradient_descent_into(data_of<double>(target), data_of<double>(v.value), data_of<double>(in[1]),
                          *data_of<double>(in[0]), n);
  v.value = std::move(target);
}

void kernel_apply_adam(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>&) {
  const AdamSlotsAttrs& a = attrs.get<AdamSlotsAttrs>();
  VariableState& var = *resolve_variable(a.variable);
  VariableState& m = *resolve_variable(a.m);
  VariableState& v = *resolve_variable(a.v);
  if (&var == &m || &var == &v || &m == &v)
    op_error<InvalidArgumentError>("apply_adam", "variable '", var.name, "' and its slots '", m.name, "', '", v.name,
                                   "' must be three different Variables");
  check_gradient_shape("apply_adam", var, in[0]);
  std::scoped_lock lock(var.mu, m.mu, v.mu);
  Tensor t_var = update_target(var), t_m = update_target(m), t_v = update_target(v);
  const std::vector<Tensor> scalars(in.begin() + 1, in.end());
  if (var.dtype == DType::Float32)
    adam_tensors<float>(t_var, t_m, t_v, var.value, m.value, v.value, in[0], scalars);
  else
    adam_tensors<double>(t_var, t_m, t_v, var.value, m.value, v.value, in[0], scalars);
  var.value = std::move(t_var);
  m.value = std::move(t_m);
  v.value = std::move(t_v);
}

std::vector<ValueType> infer_print(const std::vector<ValueType>& in, const OpAttrs& op_attrs) {
  const PrintAttrs& attrs = op_attrs.get<PrintAttrs>();
  if (attrs.tensor_parts.size() != in.size())
    op_error<InvalidArgumentError>("print", "internal part layout mismatch: ", attrs.tensor_parts.size(),
                                   " tensor parts for ", in.size(), " tensors");
  return {};
}

void kernel_print(const std::vector<Tensor>& in, const OpAttrs& op_attrs, std::vector<Tensor>&) {
  const PrintAttrs& attrs = op_attrs.get<PrintAttrs>();
  std::string line;
  std::size_t next_tensor = 0;
  for (std::size_t part = 0; part < attrs.texts.size(); ++part) {
    if (part) line += ' ';
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
      line += format_values(t);
  }
  line += '\n';
  print_sink().write(line);
}

thread_local const VariableBindingScope* t_bindings = nullptr;

// The binding of `parameter` in force on this thread, innermost scope first; nullptr if none.
const VariableBinding* find_binding(const VariableState* parameter) {
  for (const VariableBindingScope* s = t_bindings; s; s = s->prev_scope())
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

VariableBindingScope::VariableBindingScope(std::vector<VariableBinding> bindings)
    : bindings_(std::move(bindings)), prev_(t_bindings) {
  for (const VariableBinding& b : bindings_) {
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
  t_bindings = this;
}
VariableBindingScope::~VariableBindingScope() { t_bindings = prev_; }

std::vector<VariableBinding> current_variable_bindings() {
  std::vector<VariableBinding> out;
  for (const VariableBindingScope* s = t_bindings; s; s = s->prev_scope())
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

VariableCreationPolicy* current_variable_policy() { return t_policy; }
void set_current_variable_policy(VariableCreationPolicy* p) { t_policy = p; }

VariableCreatorScope::VariableCreatorScope(const VariableCreator* creator) : prev_(t_creator) {
  t_creator = creator;
}
VariableCreatorScope::~VariableCreatorScope() { t_creator = prev_; }

namespace {
// A read has no tensor inputs: the tape itself maps a read back to its Variable.
std::vector<Tensor> grad_read_variable(const GradInputs&) { return {}; }
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
  set_op(t, OpId::ApplyGradientDescent, &infer_apply_gradient_descent, &kernel_apply_gradient_descent);
  set_op(t, OpId::ApplyAdam, &infer_apply_adam, &kernel_apply_adam);
}

std::vector<Tensor> adam_values(const Tensor& var, const Tensor& m, const Tensor& v, const Tensor& grad,
                                const std::vector<Tensor>& scalars) {
  TG_CHECK(scalars.size() == 4 && var.impl()->shape == grad.impl()->shape, "adam_values operands");
  std::vector<Tensor> out{allocate_tensor(var.dtype(), var.impl()->shape), allocate_tensor(var.dtype(), var.impl()->shape),
                          allocate_tensor(var.dtype(), var.impl()->shape)};
  if (var.dtype() == DType::Float32) adam_tensors<float>(out[0], out[1], out[2], var, m, v, grad, scalars);
  else adam_tensors<double>(out[0], out[1], out[2], var, m, v, grad, scalars);
  return out;
}

void apply_gradient_descent(const Variable& var, const Tensor& lr, const Tensor& grad) {
  apply_op(OpId::ApplyGradientDescent, {lr, grad}, VariableAttrs{var.state()});
}

void apply_adam(const Variable& var, const Variable& m, const Variable& v, const Tensor& grad, const Tensor& alpha,
                const Tensor& beta1, const Tensor& beta2, const Tensor& epsilon) {
  apply_op(OpId::ApplyAdam, {grad, alpha, beta1, beta2, epsilon}, AdamSlotsAttrs{var.state(), m.state(), v.state()});
}

void print_parts(const std::vector<PrintPart>& parts) {
  PrintAttrs attrs;
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
      const detail::VariableCreator* by = detail::t_creator;
      throw ValueError(detail::str_cat(
          "tg::function only supports singleton tg::Variables created on the first call: function '",
          policy->function_name, "' tried to create tg::Variable '", name, "' (",
          to_string(initial_value.dtype()), ", shape ", detail::static_shape(initial_value).to_string(),
          ")", by ? " made by " + by->what : std::string(), " in a later trace. ",
          by && !by->fix.empty() ? by->fix
                                 : std::string("Make sure the tg::Variable is only created once or "
                                               "created outside tg::function"),
          ". See docs/user-guide.md#variables"));
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
