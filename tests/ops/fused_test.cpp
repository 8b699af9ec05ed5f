// The fused_elementwise op (made by the optimiser; see tests/passes/fusion_test.cpp for the
// pass): its registry case, run eagerly, traced and traced+optimised like every op.
#include <cmath>
#include <map>

#include "ops/fused.h"
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

}  // namespace
}  // namespace tg
