// The fused_elementwise op (made by the optimiser; see tests/passes/fusion_test.cpp for the
// pass): its registry case, run eagerly, traced and traced+optimised like every op.
#include <cmath>
#include <map>

#include "ops/fused.h"
#include "ops/fused_plan.h"
#include "support/activations.h"
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

// Which ops and dtypes the fused kernel runs, pinned: everything elementwise except strings,
// the integer ops that can raise (div, floordiv, mod, pow) and stop_gradient. Written out so
// that a change of the op table shows up here as a decision, not as a silent change of graphs.
TEST(FusedOps, TheFusableOpsAndDtypesAreExactlyThese) {
  using namespace detail;
  const DType dtypes[] = {float32, float64, int32, int64, bool_, string_};
  auto add_pair = [](std::string& s, DType in, DType out) {
    s += ' ';
    s += to_string(in);
    if (out != in) s.append("->").append(to_string(out));
  };
  std::map<std::string, std::string> got;
  for (const OpDef* def : all_ops()) {
    if (!(def->traits & kElementwise)) continue;
    std::string& pairs = got[def->name];
    for (DType in : dtypes)
      for (DType out : dtypes)
        if (fusable_op(def->id, in, out)) add_pair(pairs, in, out);
  }
  const std::string num = " float32 float64 int32 int64";
  const std::string num_bool = num + " bool";
  const std::string floats = " float32 float64";
  const std::string compare = " float32->bool float64->bool int32->bool int64->bool";
  std::string casts;
  for (DType in : dtypes)
    for (DType out : dtypes)
      if (in != string_ && out != string_) add_pair(casts, in, out);
  const std::pair<const char*, std::string> table[] = {
      {"add", num}, {"sub", num}, {"mul", num}, {"div", floats}, {"floordiv", floats},
      {"mod", floats}, {"pow", floats}, {"maximum", num}, {"minimum", num},
      {"equal", compare + " bool"}, {"not_equal", compare + " bool"}, {"less", compare},
      {"less_equal", compare}, {"greater", compare}, {"greater_equal", compare},
      {"logical_and", " bool"}, {"logical_or", " bool"}, {"leaky_relu", floats}, {"neg", num}, {"abs", num}, {"sign", num},
      {"square", num}, {"relu", num}, {"sqrt", floats},
      {"rsqrt", floats},
      {"logical_not", " bool"}, {"cast", casts}, {"identity", num_bool}, {"zeros_like", num_bool},
      {"ones_like", num_bool}, {"where", num_bool}, {"stop_gradient", ""},
      {"floor", floats}, {"ceil", floats}, {"round", num},
  };
  std::map<std::string, std::string> expected(std::begin(table), std::end(table));
  // Every vectorised activation fuses in both float dtypes.
  for (const testing::Activation& a : testing::activations()) EXPECT_TRUE(expected.emplace(a.op, floats).second) << a.op;
  EXPECT_EQ(got, expected);
}

// gelu and gelu_grad of one float32 value next to each other (the erf form's forward and its
// gradient's factor) run as one loop (fused_plan.cpp): the plan has one step for the two, and
// the results are the bits of the ops apart, in either order, with the operand a step's value or
// an input, the results outputs or read by a later step, over tiles, tails and special values.
std::vector<float> gelu_pair_inputs(int64_t n, uint64_t seed) {
  std::vector<float> v = random_uniform({n}, -8.0f, 8.0f, seed).to_vector<float>();
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -0.7517915f, 15.3f, -15.3f, -200.0f, 1e-30f};
  for (std::size_t i = 0; i < v.size() && i < std::size(specials); ++i) v[i * 7 % v.size()] = specials[i];
  return v;
}

TEST(FusedGeluPair, GeluAndItsGradientOfOneValueAreOneStepWithTheOpsBits) {
  using namespace detail;
  for (const int64_t n : {int64_t{1}, int64_t{17}, int64_t{1024}, int64_t{1500}, int64_t{3000}}) {
    SCOPED_TRACE(::testing::Message() << "n = " << n);
    const Tensor x = constant(gelu_pair_inputs(n, 81), TensorShape{n});
    const Tensor b = constant(gelu_pair_inputs(n, 82), TensorShape{n});
    const Tensor h = x + b;
    const Tensor want_gelu = gelu(h), want_grad = apply_op1(OpId::GeluGrad, {h});
    // add(x, b), gelu, gelu_grad: both outputs, the operand a step's value.
    {
      FusedProgram p;
      p.inputs = {ValueType{float32, TensorShape{n}}, ValueType{float32, TensorShape{n}}};
      p.shape = TensorShape{n};
      p.steps = {FusedStep{OpId::Add, float32, float32, {0, 1, -1}, 2}, FusedStep{OpId::Gelu, float32, float32, {2, -1, -1}, 1},
                 FusedStep{OpId::GeluGrad, float32, float32, {2, -1, -1}, 1}};
      p.outputs = {3, 4};
      const auto prog = make_fused_program(std::move(p));
      ASSERT_TRUE(prog->plan);
      // the add, then the pair (one element: the plan's scalar steps, one op at a time)
      if (n > 1) {
        EXPECT_EQ(prog->plan->tile_steps.size(), 2u);
      }
      const std::vector<Tensor> out = apply_op(OpId::FusedElementwise, {x, b}, fused_attrs(prog));
      EXPECT_TRUE(testing::same_bits(out[0], want_gelu));
      EXPECT_TRUE(testing::same_bits(out[1], want_grad));
    }
    // gelu_grad, gelu of an input, their product the only output.
    {
      FusedProgram p;
      p.inputs = {ValueType{float32, TensorShape{n}}};
      p.shape = TensorShape{n};
      p.steps = {FusedStep{OpId::GeluGrad, float32, float32, {0, -1, -1}, 1}, FusedStep{OpId::Gelu, float32, float32, {0, -1, -1}, 1},
                 FusedStep{OpId::Mul, float32, float32, {1, 2, -1}, 2}};
      p.outputs = {3};
      const auto prog = make_fused_program(std::move(p));
      ASSERT_TRUE(prog->plan);
      if (n > 1) {
        EXPECT_EQ(prog->plan->tile_steps.size(), 2u);
      }
      const Tensor out = apply_op1(OpId::FusedElementwise, {h}, fused_attrs(prog));
      EXPECT_TRUE(testing::same_bits(out, apply_op1(OpId::GeluGrad, {h}) * gelu(h)));
    }
  }
}

}  // namespace
}  // namespace tg
