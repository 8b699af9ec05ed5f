// The one entry point every op goes through: validate, infer, then run the kernel (eager inputs)
// or hand the op to the active trace (symbolic inputs).
#include <cstdint>
#include <new>

#include "core/check.h"
#include "core/float_environment.h"
#include "core/tensor_impl.h"
#include "ops/memory_refused.h"
#include "ops/op.h"
#include "ops/random.h"
#include "ops/record_mode.h"

namespace tg::detail {

namespace {

// The recorder of the trace running on this thread (RecorderScope).
thread_local TraceRecorder* t_recorder = nullptr;
// What sees every op on this thread: the tapes' observer while one records (set_op_observer).
thread_local OpObserver* t_op_observer = nullptr;
// Whether the trace recording here records ops with only eager inputs too (RecordEveryOpScope).
thread_local bool t_records_every_op = false;

// Runs part of an op - its shape rule, or its kernel with the outputs' allocation - turning
// memory the system refused (a kernel's scratch, a table sized by a shape) into TF's
// ResourceExhaustedError, named by the op, rather than a bare std::bad_alloc. Tensor buffers
// refuse a size they cannot have with their own error, naming it, before allocating anything.
template <class Part>
auto refusing_bad_alloc(const OpDef& def, Part&& part) {
  try {
    return part();
  } catch (const std::bad_alloc&) {
    throw_memory_refused(def.name);
  }
}

std::vector<Tensor> allocate_and_run(const OpDef& def, const std::vector<Tensor>& inputs,
                                     const OpAttrs& attrs, const std::vector<ValueType>& out_types) {
  return refusing_bad_alloc(def, [&] {
    const KernelFloatEnvironment environment;
    std::vector<Tensor> outputs(out_types.size());
    if (!makes_own_outputs(def.traits))
      for (std::size_t i = 0; i < out_types.size(); ++i)
        outputs[i] = allocate_tensor(out_types[i].dtype, out_types[i].shape);
    def.kernel(inputs, attrs, outputs);
    return outputs;
  });
}

std::vector<Tensor> dispatch(OpId id, const std::vector<Tensor>& inputs, const OpAttrs& attrs,
                             bool record_eager_inputs) {
  const OpDef& def = op_def(id);
  TG_CHECK(def.infer && def.kernel, "op ", def.name, " has no infer/kernel registered");
  TG_CHECK(def.arity < 0 || static_cast<std::size_t>(def.arity) == inputs.size(), "op ",
           def.name, " got ", inputs.size(), " inputs");
  TG_CHECK(attrs.kind() == def.attrs_kind, "op ", def.name, " takes ", attrs_kind_name(def.attrs_kind),
           ", got ", attrs_kind_name(attrs.kind()));
  std::vector<ValueType> in_types;
  in_types.reserve(inputs.size());
  bool symbolic = false;
  const SymbolicValue* first_symbolic = nullptr;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const auto& impl = inputs[i].impl();
    if (!impl)
      op_error<ValueError>(def.name, "input ", i,
                           " is an empty tg::Tensor (default-constructed or moved-from); "
                           "assign it a value before passing it to an op");
    if (impl->symbolic && !first_symbolic) first_symbolic = impl->symbolic.get();
    symbolic |= impl->symbolic != nullptr;
    in_types.push_back(ValueType{impl->dtype, impl->shape});
  }
  std::vector<ValueType> out_types = refusing_bad_alloc(def, [&] { return def.infer(in_types, attrs); });
  TraceRecorder* rec = t_recorder;
  // Stateful ops (tg::print) are recorded while tracing even when their inputs are eager, so
  // that they run at every execution of the graph, not once at trace time.
  if (symbolic || (rec && (record_eager_inputs || t_records_every_op || (def.traits & kStateful)))) {
    if (!rec)
      op_error<OutOfScopeError>(
          def.name, "the symbolic tensor ", first_symbolic->origin(),
          " was used outside the trace that created it. Symbolic tensors only exist while a "
          "tg::function is traced; return the value from the function and use the returned "
          "tensor instead of keeping the symbolic one (e.g. in a global or a captured variable)");
    std::vector<Tensor> out = rec->record(id, inputs, attrs, std::move(out_types));
    if (OpObserver* o = t_op_observer) o->on_op(id, inputs, attrs, out);
    return out;
  }
  std::vector<Tensor> out = allocate_and_run(def, inputs, attrs, out_types);
  if (OpObserver* o = t_op_observer) o->on_op(id, inputs, attrs, out);
  return out;
}

}  // namespace

TraceRecorder* current_recorder() { return t_recorder; }
RecorderScope::RecorderScope(TraceRecorder* r) : recorder_(t_recorder, r), recording_(r != nullptr) {
  if (!recorder_.previous() && r) restart_trace_op_seeds();
}

bool records_every_op() { return t_records_every_op; }
RecordEveryOpScope::RecordEveryOpScope(bool every_op) : every_op_(t_records_every_op, every_op) {}

OpObserver* current_op_observer() { return t_op_observer; }
void set_op_observer(OpObserver* o) { t_op_observer = o; }

std::vector<Tensor> apply_op(OpId id, const std::vector<Tensor>& inputs, const OpAttrs& attrs) {
  return dispatch(id, inputs, attrs, false);
}

std::vector<Tensor> apply_op_in_trace(OpId id, const std::vector<Tensor>& inputs, const OpAttrs& attrs) {
  return dispatch(id, inputs, attrs, true);
}

std::vector<Tensor> run_op_eager(const OpDef& def, const std::vector<Tensor>& inputs,
                                 const OpAttrs& attrs) {
  std::vector<ValueType> in_types;
  in_types.reserve(inputs.size());
  for (const Tensor& t : inputs) in_types.push_back(ValueType{t.impl()->dtype, t.impl()->shape});
  return allocate_and_run(def, inputs, attrs, refusing_bad_alloc(def, [&] { return def.infer(in_types, attrs); }));
}

Tensor apply_op1(OpId id, const std::vector<Tensor>& inputs, const OpAttrs& attrs) {
  std::vector<Tensor> out = apply_op(id, inputs, attrs);
  TG_CHECK(out.size() == 1);
  return std::move(out[0]);
}

}  // namespace tg::detail
