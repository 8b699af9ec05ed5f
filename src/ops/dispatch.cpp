#include "core/check.h"
#include "core/tensor_impl.h"
#include "ops/op.h"

namespace tg::detail {

namespace {
thread_local TraceRecorder* tls_recorder = nullptr;
}

TraceRecorder* current_recorder() { return tls_recorder; }
void set_current_recorder(TraceRecorder* r) { tls_recorder = r; }

std::vector<Tensor> apply_op(OpId id, const std::vector<Tensor>& inputs, const OpAttrs& attrs) {
  const OpDef& def = op_def(id);
  TG_CHECK(def.infer && def.kernel, "op ", def.name, " has no infer/kernel registered");
  TG_CHECK(def.arity < 0 || static_cast<std::size_t>(def.arity) == inputs.size(), "op ",
           def.name, " got ", inputs.size(), " inputs");
  std::vector<ValueType> in_types;
  in_types.reserve(inputs.size());
  bool symbolic = false;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const auto& impl = inputs[i].impl();
    if (!impl)
      op_error<ValueError>(def.name, "input ", i,
                           " is an empty tg::Tensor (default-constructed or moved-from); "
                           "assign it a value before passing it to an op");
    symbolic |= impl->symbolic != nullptr;
    in_types.push_back(ValueType{impl->dtype, impl->shape});
  }
  std::vector<ValueType> out_types = def.infer(in_types, attrs);
  if (symbolic) {
    TraceRecorder* rec = current_recorder();
    if (!rec)
      op_error<OutOfScopeError>(
          def.name,
          "a symbolic tensor was used outside the tg::function trace that created it; "
          "return it from the function (or use tg::print inside it) instead of keeping it");
    return rec->record(id, inputs, attrs, out_types);
  }
  std::vector<Tensor> outputs(out_types.size());
  if (!(def.traits & kView))
    for (std::size_t i = 0; i < out_types.size(); ++i)
      outputs[i] = allocate_tensor(out_types[i].dtype, out_types[i].shape);
  def.kernel(inputs, attrs, outputs);
  return outputs;
}

Tensor apply_op1(OpId id, const std::vector<Tensor>& inputs, const OpAttrs& attrs) {
  std::vector<Tensor> out = apply_op(id, inputs, attrs);
  TG_CHECK(out.size() == 1);
  return std::move(out[0]);
}

}  // namespace tg::detail
