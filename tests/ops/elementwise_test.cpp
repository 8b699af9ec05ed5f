// Elementwise ops: values, broadcasting, dtypes, TF integer semantics.
#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

TG_OP_CASES(elementwise_smoke) {
  auto bin = [](Tensor (*f)(const Tensor&, const Tensor&)) {
    return [f](const std::vector<Tensor>& in) { return f(in[0], in[1]); };
  };
  return {
      {"add", "broadcast (2,1)+(3,)", bin(&add), {constant({{1}, {2}}), constant({10, 20, 30})},
       constant({{11, 21, 31}, {12, 22, 32}})},
  };
}

TEST(Elementwise, Smoke) {
  Tensor a = ones({2, 2});
  EXPECT_EQ((a + a).to_string(), "tg.Tensor([[2. 2.] [2. 2.]], shape=(2, 2), dtype=float32)");
  EXPECT_EQ((constant(1.1f) + constant(1.1f)).to_string(), "tg.Tensor(2.2, shape=(), dtype=float32)");
  EXPECT_EQ((constant("a") + constant("a")).to_string(), "tg.Tensor(b'aa', shape=(), dtype=string)");
  EXPECT_EQ((constant({-7, 7}) / 2).to_vector<int32_t>(), (std::vector<int32_t>{-4, 3}));
  EXPECT_EQ((constant({-7, 7}) % 3).to_vector<int32_t>(), (std::vector<int32_t>{2, 1}));
  EXPECT_TENSOR_NEAR(tanh(constant({0.5f, -1.0f})), constant({0.46211716f, -0.7615942f}), 1e-6);
}

}  // namespace
}  // namespace tg
