// Op cases for the stateful ops (their behaviour is tested in tests/trace/state_test.cpp).
#include <optional>

#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

TG_OP_CASES(state_ops) {
  // Each case uses its own variable so that running it eagerly and traced gives equal results.
  auto read = std::make_shared<Variable>(constant({1.0f, 2.0f}));
  auto set = std::make_shared<Variable>(constant({0, 0}));
  auto add = std::make_shared<Variable>(constant(0.5));
  auto sub = std::make_shared<Variable>(constant(int64_t{10}));
  // Made anew at every run (eagerly, or in each new trace from the symbolic input: that records
  // initialize_variable). The singleton rule refuses the singleton check's second pass (and a
  // shape with None dims): that pass keeps the Variable the first one made.
  auto from_inputs = std::make_shared<std::optional<Variable>>();
  return {
      {"read_variable", "scaled read", [read](const std::vector<Tensor>& in) { return read->read_value() * in[0]; },
       {constant({3.0f, 4.0f})}, constant({3.0f, 8.0f})},
      {"assign_variable", "assign then read", [set](const std::vector<Tensor>& in) {
         set->assign(in[0]);
         return set->read_value();
       }, {constant({7, -7})}, constant({7, -7})},
      {"assign_add_variable", "reset and add", [add](const std::vector<Tensor>& in) {
         add->assign(constant(0.5));
         return add->assign_add(in[0]);
       }, {constant(0.25)}, constant(0.75)},
      {"assign_sub_variable", "reset and subtract", [sub](const std::vector<Tensor>& in) {
         sub->assign(constant(int64_t{10}));
         return sub->assign_sub(in[0]);
       }, {constant(int64_t{3})}, constant(int64_t{7})},
      {"initialize_variable", "a Variable made from the input", [from_inputs](const std::vector<Tensor>& in) {
         try {
           Variable made(in[0] * 2.0f);  // (not emplace: a throw there would empty the optional)
           *from_inputs = made;
         } catch (const ValueError&) {
           if (!from_inputs->has_value()) throw;
         }
         return (*from_inputs)->read_value() + in[0];
       }, {constant({1.0f, -2.0f})}, constant({3.0f, -6.0f})},
      // The printed text is checked in tests/trace/state_test.cpp; op_cases_test silences it.
      {"print", "passes values through", [](const std::vector<Tensor>& in) {
         print("x =", in[0]);
         return in[0];
       }, {constant({1, 2})}, constant({1, 2})},
  };
}

}  // namespace
}  // namespace tg
