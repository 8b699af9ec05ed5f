// Op cases for the control-flow ops (cond, while and their stateful variants, for_range's
// delta check) and the TensorArray ops. Eagerly tg::cond / tg::while_loop are C++ control flow; traced, the cases put
// the nodes into the graph, so every path is compared against the same expected values.
#include "support/op_case.h"

namespace tg {
namespace {

TG_OP_CASES(control_flow) {
  auto counter = std::make_shared<Variable>(constant(0));
  return {
      {"cond", "picks a branch by a computed predicate",
       [](const std::vector<Tensor>& in) {
         return cond(reduce_sum(in[0]) > 0, [&] { return in[0] * 2.0f; }, [&] { return -in[0]; });
       },
       {constant({1.0f, -3.0f})}, constant({-1.0f, 3.0f})},
      {"stateful_cond", "a branch that prints",
       [](const std::vector<Tensor>& in) {
         return cond(in[0] > 0, [&] { print("positive"); return in[0]; }, [&] { return in[0] + 1; });
       },
       {constant(4)}, constant(4)},
      {"while", "doubles until above a bound",
       [](const std::vector<Tensor>& in) {
         return while_loop([](const Tensor& x) { return reduce_max(x) < 100.0; },
                           [](const Tensor& x) { return x * 2.0; }, in[0]);
       },
       {constant({1.0, 3.0}, float64)}, constant({64.0, 192.0}, float64)},
      {"stateful_while", "counts iterations in a Variable",
       [counter](const std::vector<Tensor>& in) {
         counter->assign(0);
         while_loop([&](const Tensor& i) { return i < in[0]; },
                    [&](const Tensor& i) { counter->assign_add(1); return i + 1; }, constant(0));
         return counter->read_value();
       },
       {constant(5)}, constant(5)},
      {"tensor_array_write", "writes into a fixed-size array",
       [](const std::vector<Tensor>& in) { return TensorArray(float32, 3).write(1, in[0]).stack(); },
       {constant({1.0f, 2.0f})}, constant({{0.0f, 0.0f}, {1.0f, 2.0f}, {0.0f, 0.0f}})},
      {"tensor_array_read", "reads back an element",
       [](const std::vector<Tensor>& in) {
         return TensorArray(int32, 2).write(0, in[0]).write(1, in[0] * 3).read(1);
       },
       {constant({1, 2})}, constant({3, 6})},
      {"tensor_array_stack", "stacks a dynamic array",
       [](const std::vector<Tensor>& in) {
         return TensorArray(float32, 0, true).write(0, in[0]).write(1, in[0] + 1.0f).stack();
       },
       {constant(2.5f)}, constant({2.5f, 3.5f})},
      {"check_range_delta", "a for_range step known at run time",
       [](const std::vector<Tensor>& in) {
         return for_range({constant(0), constant(7), in[0]}, constant(0),
                          [](const Tensor& i, const Tensor& s) { return s + i; });
       },
       {constant(3)}, constant(9)},
  };
}

}  // namespace
}  // namespace tg
