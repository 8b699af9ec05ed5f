// The one-pass optimizer updates (optimizer_updates.h): apply_gradient_descent and apply_adam,
// and the groups the optimiser makes of a run of them (src/passes/group_updates.cpp). Built with
// -ffp-contract=off (src/CMakeLists.txt): they must give the bits of the separate ops they
// replace, with no a * b + c contracted.
#include "ops/optimizer_updates.h"

#include <cmath>
#include <mutex>
#include <type_traits>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "core/thread_pool.h"
#include "ops/op.h"
#include "ops/variable_access.h"
#include "tracegraph/ops.h"

namespace tg::detail {

namespace {

// ---- shape rules

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

// One gradient-descent update's operands: in = (lr, grad).
void check_gradient_descent(const char* op, const VariableState& var, const ValueType* in) {
  check_float_variable(op, var);
  check_update_operand(op, var, in[0], "the learning rate", true);
  check_update_operand(op, var, in[1], "the gradient", false);
}

// One Adam update's operands: in = (grad, alpha, beta1, beta2, epsilon).
void check_adam(const char* op, const VariableState& var, const VariableState& m, const VariableState& v,
                const ValueType* in) {
  check_float_variable(op, var);
  for (const VariableState* slot : {&m, &v})
    TG_CHECK(slot->dtype == var.dtype && slot->shape == var.shape, "Adam slot '", slot->name, "' does not match '",
             var.name, "'");
  check_update_operand(op, var, in[0], "the gradient", false);
  const char* names[] = {"alpha", "beta1", "beta2", "epsilon"};
  for (int k = 0; k < 4; ++k) check_update_operand(op, var, in[k + 1], names[k], true);
}

std::vector<ValueType> infer_apply_gradient_descent(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  check_gradient_descent("apply_gradient_descent", declared_state(attrs), in.data());
  return {};
}

std::vector<ValueType> infer_apply_adam(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const AdamSlotsAttrs& a = attrs.get<AdamSlotsAttrs>();
  TG_CHECK(a.variable && a.m && a.v, "apply_adam without its Variables");
  check_adam("apply_adam", *a.variable, *a.m, *a.v, in.data());
  return {};
}

// The Variables and inputs a group holds per update.
template <bool kAdam> inline constexpr std::size_t kVariablesPerUpdate = kAdam ? 3 : 1;
template <bool kAdam> inline constexpr std::size_t kInputsPerUpdate = kAdam ? 5 : 2;
template <bool kAdam> inline constexpr const char* kGroupName = kAdam ? "apply_adam_group" : "apply_gradient_descent_group";
template <bool kAdam> inline constexpr const char* kSingleName = kAdam ? "apply_adam" : "apply_gradient_descent";

const VariableGroup& group_of(const OpAttrs& attrs, std::size_t variables_per_update, std::size_t inputs,
                              std::size_t inputs_per_update) {
  const VariableGroup* g = attrs.get<VariableGroupAttrs>().group.get();
  TG_CHECK(g && !g->variables.empty() && g->variables.size() % variables_per_update == 0 &&
               inputs == g->variables.size() / variables_per_update * inputs_per_update,
           "an update group whose Variables (", g ? g->variables.size() : 0, ") and inputs (", inputs, ") do not match");
  for (const auto& v : g->variables) TG_CHECK(v != nullptr, "an update group without one of its Variables");
  return *g;
}

// Checks one update of a group as its single op's shape rule would (named as that op).
template <bool kAdam>
void check_update(const char* op, const VariableState* const* vars, const ValueType* operands) {
  if constexpr (kAdam) check_adam(op, *vars[0], *vars[1], *vars[2], operands);
  else check_gradient_descent(op, *vars[0], operands);
}

// Dtypes only: the shapes are checked by the kernel on the values it runs on. The executor runs
// a shape rule before the kernel whenever a shape was unknown when traced, and a rule that
// refused the third update's gradient would refuse the whole step, where the updates in turn
// apply the first two and then fail.
template <bool kAdam>
std::vector<ValueType> infer_group(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const VariableGroup& g = group_of(attrs, kVariablesPerUpdate<kAdam>, in.size(), kInputsPerUpdate<kAdam>);
  std::vector<ValueType> any_shape;
  for (const ValueType& t : in) any_shape.push_back(ValueType{t.dtype, TensorShape::unknown_rank()});
  for (std::size_t k = 0; k < in.size() / kInputsPerUpdate<kAdam>; ++k) {
    const VariableState* vars[kVariablesPerUpdate<kAdam>];
    for (std::size_t j = 0; j < kVariablesPerUpdate<kAdam>; ++j) vars[j] = g.variables[k * kVariablesPerUpdate<kAdam> + j].get();
    check_update<kAdam>(kGroupName<kAdam>, vars, &any_shape[k * kInputsPerUpdate<kAdam>]);
  }
  return {};
}

// ---- kernels

// Where an update writes: the Variable's own storage when nothing else can see the old value,
// else a new tensor (a handle, view or tape still holds the old one).
Tensor update_target(VariableState& v) {
  if (!v.value.defined()) throw_uninitialized(v);
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

// One update with its operands resolved and its outputs chosen: what a kernel runs over any
// range of its elements (split across the pool when it is large).
// The outputs may be the old values themselves (an update in place).
struct UpdateStep {
  int64_t n = 0;
  DType dtype = DType::Float32;
  Tensor out[3];              // the new var (m, v)
  const Tensor* old[3] = {};  // their values now
  const Tensor* in = nullptr;  // the update's inputs: (lr, grad) or (grad, alpha, beta1, beta2, epsilon)
};

template <class T>
void run_typed(const UpdateStep& s, bool adam, int64_t b, int64_t e) {
  const UpdateKernels& k = update_kernels();
  if (!adam) {
    const T lr = *data_of<T>(s.in[0]);
    if constexpr (std::is_same_v<T, float>)
      k.gradient_descent_f32(data_of<T>(s.out[0]), data_of<T>(*s.old[0]), data_of<T>(s.in[1]), lr, b, e);
    else
      k.gradient_descent_f64(data_of<T>(s.out[0]), data_of<T>(*s.old[0]), data_of<T>(s.in[1]), lr, b, e);
    return;
  }
  const T alpha = *data_of<T>(s.in[1]), c1 = T(1) - *data_of<T>(s.in[2]), c2 = T(1) - *data_of<T>(s.in[3]),
          eps = *data_of<T>(s.in[4]);
  if constexpr (std::is_same_v<T, float>)
    k.adam_f32(data_of<T>(s.out[0]), data_of<T>(s.out[1]), data_of<T>(s.out[2]), data_of<T>(*s.old[0]),
               data_of<T>(*s.old[1]), data_of<T>(*s.old[2]), data_of<T>(s.in[0]), alpha, c1, c2, eps, b, e);
  else
    k.adam_f64(data_of<T>(s.out[0]), data_of<T>(s.out[1]), data_of<T>(s.out[2]), data_of<T>(*s.old[0]),
               data_of<T>(*s.old[1]), data_of<T>(*s.old[2]), data_of<T>(s.in[0]), alpha, c1, c2, eps, b, e);
}

template <bool kAdam>
void run_range(const UpdateStep& s, int64_t b, int64_t e) {
  if (s.dtype == DType::Float32) run_typed<float>(s, kAdam, b, e);
  else run_typed<double>(s, kAdam, b, e);
}

// The step of one update of `vars` (its Variable, and m, v for Adam), locked by the caller.
template <bool kAdam>
UpdateStep prepare_step(VariableState* const* vars, const Tensor* in) {
  UpdateStep s;
  s.n = vars[0]->shape.num_elements();
  s.dtype = vars[0]->dtype;
  s.in = in;
  for (std::size_t k = 0; k < kVariablesPerUpdate<kAdam>; ++k) {
    s.out[k] = update_target(*vars[k]);
    s.old[k] = &vars[k]->value;
  }
  return s;
}

template <bool kAdam>
void publish(const UpdateStep& s, VariableState* const* vars) {
  for (std::size_t k = 0; k < kVariablesPerUpdate<kAdam>; ++k) vars[k]->value = s.out[k];
}

// One update on its own: checks, locks its Variables, runs split across the pool when large.
void apply_gradient_descent_to(VariableState& v, const Tensor* in) {
  check_gradient_shape("apply_gradient_descent", v, in[1]);
  std::lock_guard lock(v.mu);
  VariableState* vars[] = {&v};
  const UpdateStep s = prepare_step<false>(vars, in);
  for_elements(s.n, [&](int64_t b, int64_t e) { run_range<false>(s, b, e); });
  publish<false>(s, vars);
}

void apply_adam_to(VariableState& var, VariableState& m, VariableState& v, const Tensor* in) {
  if (&var == &m || &var == &v || &m == &v)
    op_error<InvalidArgumentError>("apply_adam", "variable '", var.name, "' and its slots '", m.name, "', '", v.name,
                                   "' must be three different Variables");
  check_gradient_shape("apply_adam", var, in[0]);
  std::scoped_lock lock(var.mu, m.mu, v.mu);
  VariableState* vars[] = {&var, &m, &v};
  const UpdateStep s = prepare_step<true>(vars, in);
  for_elements(s.n, [&](int64_t b, int64_t e) { run_range<true>(s, b, e); });
  publish<true>(s, vars);
}

void kernel_apply_gradient_descent(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>&) {
  apply_gradient_descent_to(state_of(attrs), in.data());
}

void kernel_apply_adam(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>&) {
  const AdamSlotsAttrs& a = attrs.get<AdamSlotsAttrs>();
  apply_adam_to(*resolve_variable(a.variable), *resolve_variable(a.m), *resolve_variable(a.v), in.data());
}

// ---- groups

// Whether an update's operands are what its single op's shape rule asks, on these values: the
// rule itself builds ValueTypes, which the common path does without.
template <bool kAdam>
bool operands_fit(VariableState* const* vars, const Tensor* in) {
  const VariableState& var = *vars[0];
  if (var.dtype != DType::Float32 && var.dtype != DType::Float64) return false;
  for (std::size_t j = 1; j < kVariablesPerUpdate<kAdam>; ++j)
    if (vars[j]->dtype != var.dtype || !(vars[j]->shape == var.shape)) return false;
  constexpr std::size_t kGradient = kAdam ? 0 : 1;
  for (std::size_t j = 0; j < kInputsPerUpdate<kAdam>; ++j) {
    const TensorImpl& t = *in[j].impl();
    if (t.dtype != var.dtype || !(j == kGradient ? t.shape == var.shape : t.shape.rank() == 0)) return false;
  }
  return true;
}

// The updates of a group, in turn, as the single ops would run them one node after another:
// each locks its own Variables, and one that is large is split across the pool as the single
// kernel splits it. So the group has the single ops' effects in every case - two updates that
// name the same Variable once parameters are bound, an update that fails after the ones before
// it took effect (each is checked by its single op's shape rule, named as that op) - and saves
// what the executor spends per node.
//
// Tried and not kept: one lock of every Variable and one dispatch to the pool for the whole
// group, small updates spread across the threads. 100 Adam updates of 1,024 floats took 47 us
// on one thread (43 us as 100 nodes) and 100 us on two (43 us): sorting and taking 300 locks
// cost more than the nodes, and small updates split across cores lose their caches.
template <bool kAdam>
void kernel_group(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>&) {
  constexpr std::size_t kVars = kVariablesPerUpdate<kAdam>, kInputs = kInputsPerUpdate<kAdam>;
  const VariableGroup& g = group_of(attrs, kVars, in.size(), kInputs);
  for (std::size_t k = 0; k < g.variables.size() / kVars; ++k) {
    VariableState* vars[kVars];
    for (std::size_t j = 0; j < kVars; ++j) vars[j] = resolve_variable(g.variables[k * kVars + j]).get();
    const Tensor* operands = &in[k * kInputs];
    if (!operands_fit<kAdam>(vars, operands)) {
      ValueType types[kInputs];
      for (std::size_t j = 0; j < kInputs; ++j) types[j] = ValueType{operands[j].dtype(), operands[j].impl()->shape};
      check_update<kAdam>(kSingleName<kAdam>, vars, types);
    }
    if constexpr (kAdam) apply_adam_to(*vars[0], *vars[1], *vars[2], operands);
    else apply_gradient_descent_to(*vars[0], operands);
  }
}

// In a replay (ReplayContext): the update computed through the public ops on the replay's
// values, which it keeps (the forward call updated the real Variables).
std::vector<Tensor> replay_apply_gradient_descent(ReplayContext& r, const std::vector<Tensor>& in, const OpAttrs& attrs) {
  const std::shared_ptr<VariableState>& v = attrs.get<VariableAttrs>().variable;
  r.write(v, sub(r.read(v), mul(in[0], in[1])));
  return {};
}
std::vector<Tensor> replay_apply_adam(ReplayContext& r, const std::vector<Tensor>& in, const OpAttrs& attrs) {
  const AdamSlotsAttrs& a = attrs.get<AdamSlotsAttrs>();
  const std::shared_ptr<VariableState>* vars[3] = {&a.variable, &a.m, &a.v};
  Tensor old[3];
  for (int k = 0; k < 3; ++k) old[k] = r.read(*vars[k]);
  const std::vector<Tensor> updated = adam_values(old[0], old[1], old[2], in[0], {in.begin() + 1, in.end()});
  for (int k = 0; k < 3; ++k) r.write(*vars[k], updated[static_cast<std::size_t>(k)]);
  return {};
}

}  // namespace

void register_optimizer_update_ops(OpDef* t) {
  set_op(t, OpId::ApplyGradientDescent, &infer_apply_gradient_descent, &kernel_apply_gradient_descent);
  set_op(t, OpId::ApplyAdam, &infer_apply_adam, &kernel_apply_adam);
  set_op(t, OpId::ApplyGradientDescentGroup, &infer_group<false>, &kernel_group<false>);
  set_op(t, OpId::ApplyAdamGroup, &infer_group<true>, &kernel_group<true>);
  set_replay(t, OpId::ApplyGradientDescent, &replay_apply_gradient_descent);
  set_replay(t, OpId::ApplyAdam, &replay_apply_adam);
}

std::vector<Tensor> adam_values(const Tensor& var, const Tensor& m, const Tensor& v, const Tensor& grad,
                                const std::vector<Tensor>& scalars) {
  TG_CHECK(scalars.size() == 4 && var.impl()->shape == grad.impl()->shape, "adam_values operands");
  const Tensor in[] = {grad, scalars[0], scalars[1], scalars[2], scalars[3]};
  UpdateStep s;
  s.n = var.impl()->shape.num_elements();
  s.dtype = var.dtype();
  s.in = in;
  const Tensor* old[] = {&var, &m, &v};
  for (int k = 0; k < 3; ++k) {
    s.out[k] = allocate_tensor(var.dtype(), var.impl()->shape);
    s.old[k] = old[k];
  }
  for_elements(s.n, [&](int64_t b, int64_t e) { run_range<true>(s, b, e); });
  return {s.out[0], s.out[1], s.out[2]};
}

void apply_gradient_descent(const Variable& var, const Tensor& lr, const Tensor& grad) {
  apply_op(OpId::ApplyGradientDescent, {lr, grad}, VariableAttrs{var.state()});
}

void apply_adam(const Variable& var, const Variable& m, const Variable& v, const Tensor& grad, const Tensor& alpha,
                const Tensor& beta1, const Tensor& beta2, const Tensor& epsilon) {
  apply_op(OpId::ApplyAdam, {grad, alpha, beta1, beta2, epsilon}, AdamSlotsAttrs{var.state(), m.state(), v.state()});
}

namespace {
void apply_group(OpId op, const std::vector<Variable>& variables, const std::vector<Tensor>& inputs) {
  auto group = std::make_shared<VariableGroup>();
  for (const Variable& v : variables) group->variables.push_back(v.state());
  apply_op(op, inputs, VariableGroupAttrs{std::move(group)});
}
}  // namespace

void apply_gradient_descent_group(const std::vector<Variable>& variables, const std::vector<Tensor>& inputs) {
  apply_group(OpId::ApplyGradientDescentGroup, variables, inputs);
}

void apply_adam_group(const std::vector<Variable>& variables, const std::vector<Tensor>& inputs) {
  apply_group(OpId::ApplyAdamGroup, variables, inputs);
}

}  // namespace tg::detail
