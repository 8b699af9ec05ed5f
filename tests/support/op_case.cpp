#include "support/op_case.h"

namespace tg::testing {

namespace {
std::vector<std::vector<OpCase> (*)()>& factories() {
  static std::vector<std::vector<OpCase> (*)()> f;
  return f;
}
}  // namespace

std::vector<TensorSpec> generalised_specs(const std::vector<Tensor>& inputs, bool unknown_rank) {
  std::vector<TensorSpec> specs;
  for (const Tensor& t : inputs)
    specs.emplace_back(unknown_rank ? TensorShape::unknown_rank()
                                    : TensorShape(std::vector<int64_t>(static_cast<std::size_t>(t.rank()), None)),
                       t.dtype());
  return specs;
}

void for_each_generalised_trace(const OpFn& fn, const std::vector<Tensor>& inputs,
                                const std::function<void(const std::function<Tensor()>& run,
                                                         const char* label)>& check) {
  for (const bool unknown_rank : {false, true}) {
    const std::vector<TensorSpec> specs = generalised_specs(inputs, unknown_rank);
    auto traced = function([&](const std::vector<Tensor>& in) { return fn(in); });
    check([&] { return traced.get_concrete_function(specs)(inputs); }, unknown_rank ? "unknown rank" : "None dims");
  }
}

OpCaseRegistrar::OpCaseRegistrar(std::vector<OpCase> (*make)()) { factories().push_back(make); }

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> all = [] {
    std::vector<OpCase> v;
    for (auto make : factories())
      for (auto& c : make()) v.push_back(std::move(c));
    return v;
  }();
  return all;
}

}  // namespace tg::testing
