// The formulas of src/kernels/simd_math_formulas.h serve every dtype: float64 runs them at width 1,
// so what the float32 form fixes holds for float64 too.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "passes/passes.h"
#include "runtime/executor.h"
#include "support/graph_util.h"
#include "support/test_util.h"
#include "tracegraph/tracegraph.h"

namespace tg {
namespace {

// 1 / (1 + e^-x) overflows e^-x below x = -709.78 and returned 0 there, though sigmoid(x) stays
// a subnormal double down to about -744.4 (where it is e^x: 1 + e^x rounds to 1). float32 had
// the fix (e^-|x|) and float64 did not.
TEST(SimdMathFormulas, Float64SigmoidKeepsItsSubnormalTail) {
  const testing::IeeeKernelFloatEnvironment ieee;  // the tail exists where subnormals are kept
  std::vector<double> x;
  for (double v = -744.0; v < -709.0; v += 0.25) x.push_back(v);
  x.push_back(-709.79);
  x.push_back(-745.2);  // e^x rounds to 0 here: so does sigmoid
  const Tensor input = constant(x, TensorShape({static_cast<int64_t>(x.size())}), float64);
  auto g = testing::trace_graph([](const std::vector<Tensor>& in) { return std::vector<Tensor>{-sigmoid(in[0])}; },
                                {input});
  detail::optimize_graph(g, "sigmoid");
  const std::vector<double> eager = sigmoid(input).to_vector<double>();
  const std::vector<double> fused = detail::execute(*g, {input})[0].to_vector<double>();
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double want = std::exp(x[i]);  // e^x / (1 + e^x), with 1 + e^x == 1
    EXPECT_EQ(std::bit_cast<uint64_t>(eager[i]), std::bit_cast<uint64_t>(want)) << "sigmoid(" << x[i] << ") = " << eager[i];
    EXPECT_EQ(std::bit_cast<uint64_t>(-fused[i]), std::bit_cast<uint64_t>(want)) << "fused sigmoid(" << x[i] << ")";
    if (x[i] > -744.5) {
      EXPECT_GT(eager[i], 0.0) << x[i];
    }
  }
}

// Both dtypes are the same function: float64's sigmoid rounded to float32 is within an ULP of
// the float32 kernel's (which is within 2.5 of the exact value) over the float32 range, tails
// included.
TEST(SimdMathFormulas, Float64AndFloat32SigmoidAgreeAcrossTheRange) {
  const testing::IeeeKernelFloatEnvironment ieee;  // the float32 tail is subnormal below -87
  std::vector<float> x;
  for (float v = -110.0f; v <= 30.0f; v += 0.125f) x.push_back(v);
  const Tensor x32 = constant(x, TensorShape({static_cast<int64_t>(x.size())}));
  const std::vector<float> y32 = sigmoid(x32).to_vector<float>();
  const std::vector<double> y64 = sigmoid(cast(x32, float64)).to_vector<double>();
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float narrowed = static_cast<float>(y64[i]);
    EXPECT_LE(std::abs(std::bit_cast<int32_t>(narrowed) - std::bit_cast<int32_t>(y32[i])), 3) << "x = " << x[i];
  }
}

}  // namespace
}  // namespace tg
