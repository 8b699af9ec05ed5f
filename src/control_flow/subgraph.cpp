#include "control_flow/subgraph.h"

#include "core/check.h"
#include "core/tensor_impl.h"

namespace tg::detail {

const ControlFlowPayload& payload_of(const OpAttrs& attrs) {
  const ControlFlowAttrs& cf = attrs.get<ControlFlowAttrs>();
  TG_CHECK(cf.payload != nullptr, "control-flow op without its payload");
  return *cf.payload;
}

void merge_captures(const std::vector<const GraphRecorder*>& tracers, int first_input,
                    std::vector<Tensor>& inputs, ControlFlowPayload& payload) {
  std::unordered_map<const void*, int> index;  // outer symbolic value -> node input
  for (const GraphRecorder* t : tracers) {
    std::vector<int> map;
    for (const Tensor& c : t->captures()) {
      auto [it, inserted] = index.try_emplace(c.impl()->symbolic.get(), first_input + static_cast<int>(index.size()));
      if (inserted) inputs.push_back(c);
      map.push_back(it->second);
    }
    payload.capture_inputs.push_back(std::move(map));
  }
}

std::string describe_tensors(const std::vector<Tensor>& ts) {
  std::string s = "(";
  for (std::size_t i = 0; i < ts.size(); ++i)
    s += (i ? ", " : "") + describe(ValueType{ts[i].dtype(), detail::static_shape(ts[i])});
  return s + (ts.size() == 1 ? ",)" : ")");
}

}  // namespace tg::detail
