// The fused_elementwise op (made by the optimiser; see tests/passes/fusion_test.cpp for the
// pass): its registry case, run eagerly, traced and traced+optimised like every op.
#include <cmath>

#include "ops/fused.h"
#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

// tanh(x * 2 + b) with x (2, 3) and b (3,) broadcast: one immediate, one broadcast input.
Tensor fused_tanh_affine(const std::vector<Tensor>& in) {
  using namespace detail;
  FusedProgram p;
  p.inputs = {ValueType{float32, TensorShape({2, 3})}, ValueType{float32, TensorShape({3})}};
  p.immediates = {constant(2.0f)};
  p.shape = TensorShape({2, 3});
  FusedStep mul{OpId::Mul, float32, float32, {0, 2, -1}, 2};
  FusedStep add{OpId::Add, float32, float32, {3, 1, -1}, 2};
  FusedStep th{OpId::Tanh, float32, float32, {4, -1, -1}, 1};
  p.steps = {mul, add, th};
  p.outputs = {5};
  return apply_op1(OpId::FusedElementwise, in, fused_attrs(make_fused_program(std::move(p))));
}

TG_OP_CASES(fused) {
  const Tensor x = constant({{0.5f, -1.0f, 0.0f}, {2.0f, -0.25f, 1.0f}});
  const Tensor b = constant({0.1f, 0.2f, -0.3f});
  std::vector<float> expected;
  const auto xv = x.to_vector<float>();
  const auto bv = b.to_vector<float>();
  for (std::size_t i = 0; i < xv.size(); ++i) expected.push_back(std::tanh(xv[i] * 2.0f + bv[i % 3]));
  return {
      {"fused_elementwise", "tanh(x * 2 + b), b broadcast", &fused_tanh_affine, {x, b},
       constant(expected, TensorShape({2, 3})), 1e-6},
  };
}

}  // namespace
}  // namespace tg
