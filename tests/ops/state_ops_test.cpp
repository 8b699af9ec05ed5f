// Op cases for the stateful ops (their behaviour is tested in tests/trace/state_test.cpp).
#include <cmath>
#include <cstring>
#include <optional>

#include "ops/op.h"
#include "ops/optimizer_updates.h"
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
  auto descend = std::make_shared<Variable>(constant({1.0f, 2.0f, 3.0f}));
  auto adam = std::make_shared<std::vector<Variable>>(std::vector<Variable>{
      Variable(constant({1.0f, -2.0f})), Variable(constant({0.1f, 0.2f})), Variable(constant({0.01f, 0.04f}))});
  // Adam's step on those values, in plain C++ (alpha 0.01, beta1 0.9, beta2 0.999, epsilon 1e-7).
  std::vector<double> adam_expected;
  for (int part = 0; part < 3; ++part)
    for (int i = 0; i < 2; ++i) {
      const double var = i ? -2.0 : 1.0, m = i ? 0.2 : 0.1, v = i ? 0.04 : 0.01, g = i ? -1.0 : 0.5;
      const double m_new = m + (g - m) * (1 - 0.9), v_new = v + (g * g - v) * (1 - 0.999);
      adam_expected.push_back(part == 0 ? var - m_new * 0.01 / (std::sqrt(v_new) + 1e-7) : part == 1 ? m_new : v_new);
    }
  std::vector<double> adam_expected_twice = adam_expected;
  adam_expected_twice.insert(adam_expected_twice.end(), adam_expected.begin(), adam_expected.end());
  auto descend_two = std::make_shared<std::vector<Variable>>(
      std::vector<Variable>{Variable(constant({0.0f, 0.0f, 0.0f})), Variable(constant({0.0f, 0.0f, 0.0f}))});
  // The row updates, through the op (the cases' traces with unknown ranks pass no IndexedSlices).
  auto rows = std::make_shared<std::vector<Variable>>(std::vector<Variable>{
      Variable(zeros({3, 2})), Variable(zeros({3, 2}, float64)), Variable(zeros({3, 2}))});
  auto scatter_case = [rows](std::size_t k, detail::OpId op) {
    return [rows, k, op](const std::vector<Tensor>& in) {
      Variable& v = (*rows)[k];
      v.assign(cast(constant({{1.0f, 2.0f}, {3.0f, 4.0f}, {5.0f, 6.0f}}), v.dtype()));
      detail::apply_op(op, {in[0], in[1]}, detail::VariableAttrs{v.state()});
      return v.read_value();
    };
  };
  auto adam_two = std::make_shared<std::vector<Variable>>();
  for (int k = 0; k < 6; ++k) adam_two->emplace_back(constant({0.0f, 0.0f}));
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
      {"apply_gradient_descent", "reset and descend", [descend](const std::vector<Tensor>& in) {
         descend->assign(constant({1.0f, 2.0f, 3.0f}));
         detail::apply_gradient_descent(*descend, in[0], in[1]);
         return descend->read_value();
       }, {constant(0.5f), constant({2.0f, 4.0f, -6.0f})}, constant({0.0f, 0.0f, 6.0f})},
      {"apply_adam", "reset and take one step", [adam](const std::vector<Tensor>& in) {
         std::vector<Variable>& w = *adam;
         w[0].assign(constant({1.0f, -2.0f}));
         w[1].assign(constant({0.1f, 0.2f}));
         w[2].assign(constant({0.01f, 0.04f}));
         detail::apply_adam(w[0], w[1], w[2], in[0], in[1], in[2], in[3], in[4]);
         return stack({w[0].read_value(), w[1].read_value(), w[2].read_value()});
       }, {constant({0.5f, -1.0f}), constant(0.01f), constant(0.9f), constant(0.999f), constant(1e-7f)},
       cast(constant(adam_expected, TensorShape({3, 2}), float64), float32), 1e-5},
      // The optimiser's groups of updates (tests/passes/group_updates_test.cpp), recorded by hand.
      {"apply_gradient_descent_group", "reset and descend two", [descend_two](const std::vector<Tensor>& in) {
         std::vector<Variable>& w = *descend_two;
         w[0].assign(constant({1.0f, 2.0f, 3.0f}));
         w[1].assign(constant({1.0f, 1.0f, 1.0f}));
         detail::apply_gradient_descent_group(w, {in[0], in[1], in[0], in[2]});
         return stack({w[0].read_value(), w[1].read_value()});
       }, {constant(0.5f), constant({2.0f, 4.0f, -6.0f}), constant({2.0f, -2.0f, 0.0f})},
       constant({{0.0f, 0.0f, 6.0f}, {0.0f, 2.0f, 1.0f}})},
      {"apply_adam_group", "reset and take one step on two", [adam_two](const std::vector<Tensor>& in) {
         std::vector<Variable>& w = *adam_two;
         for (int k = 0; k < 2; ++k) {
           w[3 * k].assign(constant({1.0f, -2.0f}));
           w[3 * k + 1].assign(constant({0.1f, 0.2f}));
           w[3 * k + 2].assign(constant({0.01f, 0.04f}));
         }
         detail::apply_adam_group(w, {in[0], in[1], in[2], in[3], in[4], in[0], in[1], in[2], in[3], in[4]});
         std::vector<Tensor> values;
         for (const Variable& v : w) values.push_back(v.read_value());
         return stack(values);
       }, {constant({0.5f, -1.0f}), constant(0.01f), constant(0.9f), constant(0.999f), constant(1e-7f)},
       cast(constant(adam_expected_twice, TensorShape({6, 2}), float64), float32), 1e-5},
      {"scatter_add_variable", "reset, add rows (a repeated index adds twice)",
       scatter_case(0, detail::OpId::ScatterAddVariable),
       {constant({2, 0, 2}), constant({{1.0f, 1.0f}, {10.0f, 10.0f}, {0.5f, 0.5f}})},
       constant({{11.0f, 12.0f}, {3.0f, 4.0f}, {6.5f, 7.5f}})},
      {"scatter_sub_variable", "reset, subtract rows, float64, int64 indices",
       scatter_case(1, detail::OpId::ScatterSubVariable),
       {constant({1}, int64), constant({{1.0, -1.0}}, float64)},
       constant({{1.0, 2.0}, {2.0, 5.0}, {5.0, 6.0}}, float64)},
      {"scatter_update_variable", "reset, write rows",
       scatter_case(2, detail::OpId::ScatterUpdateVariable),
       {constant({2, 0}), constant({{7.0f, 8.0f}, {9.0f, 0.0f}})},
       constant({{9.0f, 0.0f}, {3.0f, 4.0f}, {7.0f, 8.0f}})},
      // The printed text is checked in tests/trace/state_test.cpp; op_cases_test silences it.
      {"print", "passes values through", [](const std::vector<Tensor>& in) {
         print("x =", in[0]);
         return in[0];
       }, {constant({1, 2})}, constant({1, 2})},
  };
}

// The one-pass updates give the bits of the composite ops they replaced, step after step.
TEST(OptimizerUpdates, AdamGivesTheCompositeOpsBits) {
  const Tensor init = random_uniform({300, 70}, -1, 1, 5);
  Variable var(init), m(zeros({300, 70})), v(zeros({300, 70}));
  Tensor ref_var = init, ref_m = zeros({300, 70}), ref_v = zeros({300, 70});
  const Tensor one = constant(1.0f), beta1 = constant(0.9f), beta2 = constant(0.999f), eps = constant(1e-7f);
  for (int step = 1; step <= 4; ++step) {
    const Tensor grad = random_uniform({300, 70}, -2, 2, 10 + static_cast<uint64_t>(step));
    const Tensor alpha = constant(0.001f) * sqrt(one - pow(beta2, constant(float(step)))) / (one - pow(beta1, constant(float(step))));
    detail::apply_adam(var, m, v, grad, alpha, beta1, beta2, eps);
    ref_m = ref_m + (grad - ref_m) * (one - beta1);
    ref_v = ref_v + (square(grad) - ref_v) * (one - beta2);
    ref_var = ref_var - ref_m * alpha / (sqrt(ref_v) + eps);
    for (const auto& [got, want] : {std::pair{var.read_value(), ref_var}, {m.read_value(), ref_m}, {v.read_value(), ref_v}})
      ASSERT_EQ(std::memcmp(got.to_vector<float>().data(), want.to_vector<float>().data(), 300 * 70 * sizeof(float)), 0) << step;
  }
}

TEST(OptimizerUpdates, AHeldValueIsNotChangedByTheUpdate) {
  Variable var(constant({1.0f, 2.0f}));
  const Tensor before = var.read_value();  // a handle to the old storage: no update in place
  detail::apply_gradient_descent(var, constant(1.0f), constant({1.0f, 1.0f}));
  EXPECT_EQ(before.to_vector<float>(), (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(var.read_value().to_vector<float>(), (std::vector<float>{0.0f, 1.0f}));
}

TEST(OptimizerUpdates, WrongOperandsAreTypedErrors) {
  Variable ints(constant({1, 2}));
  EXPECT_THROW(detail::apply_gradient_descent(ints, constant(1), constant({1, 1})), InvalidArgumentError);
  Variable var(constant({1.0f, 2.0f})), m(constant({0.0f, 0.0f})), v(constant({0.0f, 0.0f}));
  EXPECT_THROW(detail::apply_gradient_descent(var, constant(1.0f), constant({1.0f, 1.0f, 1.0f})), InvalidArgumentError);
  EXPECT_THROW(detail::apply_gradient_descent(var, constant({1.0f, 1.0f}), constant({1.0f, 1.0f})), InvalidArgumentError);
  EXPECT_THROW(detail::apply_gradient_descent(var, cast(constant(1.0f), float64), constant({1.0f, 1.0f})), InvalidArgumentError);
  const Tensor s = constant(0.5f);
  EXPECT_THROW(detail::apply_adam(var, m, v, cast(constant({1.0f, 1.0f}), float64), s, s, s, s), InvalidArgumentError);
  EXPECT_THROW(detail::apply_adam(var, m, m, constant({1.0f, 1.0f}), s, s, s, s), InvalidArgumentError);
  EXPECT_EQ(var.read_value().to_vector<float>(), (std::vector<float>{1.0f, 2.0f}));  // nothing half-done
}

}  // namespace
}  // namespace tg
