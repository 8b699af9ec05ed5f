// Golden files: .tgx files written by format version 1.0 and committed in tests/export/golden/.
// Every later tracegraph must keep loading them and computing the same results (docs/export.md,
// "Compatibility"); the expected values below are computed here, eagerly, never read from the
// files. TG_WRITE_GOLDEN=1 writes them; it is for adding files of a new format version under
// new names - files of an old version are never rewritten.
#include <cstdlib>
#include <map>

#include "support/test_util.h"

namespace tg {
namespace {

using testing::tensors_near;

const std::string kGolden = std::string(TG_SOURCE_DIR) + "/tests/export/golden/";

// The fixed weights of the golden MLP (4 -> 3 -> 2).
Tensor w1() {
  std::vector<float> v;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) v.push_back(0.1f * static_cast<float>(i - j) + 0.05f);
  return constant(v, TensorShape{4, 3});
}
Tensor w2() { return constant({{0.5f, -0.25f}, {-0.75f, 0.5f}, {0.25f, 1.0f}}); }
Tensor b1() { return constant({0.1f, -0.1f, 0.0f}); }
Tensor input_batch() { return constant({{1.0f, 2.0f, 3.0f, 4.0f}, {-1.0f, 0.5f, 0.0f, 2.0f}}); }
Tensor mlp_eager(const Tensor& x, const Tensor& a, const Tensor& b, const Tensor& c) {
  return softmax(matmul(relu(matmul(x, a) + b), c), -1);
}

// y = cond(sum(x) > 0, 2x, -x) summed n times by a while loop, and x scaled by a literal.
Tensor loop_eager(const Tensor& x, int n, float scale) {
  Tensor y = reduce_sum(x).item<float>() > 0 ? x * 2.0f : -x;
  Tensor acc = zeros_like(y);
  for (int i = 0; i < n; ++i) acc = acc + y;
  return acc * scale;
}

TEST(GoldenFiles, WriteWhenAsked) {
  if (!std::getenv("TG_WRITE_GOLDEN")) GTEST_SKIP() << "set TG_WRITE_GOLDEN=1 to rewrite tests/export/golden/";
  {
    Variable a(w1(), "dense1/kernel"), b(b1(), "dense1/bias"), c(w2(), "dense2/kernel");
    auto classify = function([&](const Tensor& x) { return softmax(matmul(relu(matmul(x, a) + b), c), -1); },
                             {.name = "classify", .input_signature = std::vector<TensorSpec>{TensorSpec({None, 4}, float32, "images")}});
    classify(input_batch());
    save(kGolden + "mlp_v1_0.tgx", classify);
  }
  {
    auto looping = function([](const Tensor& x, const Tensor& n, float scale) {
      Tensor y = cond(reduce_sum(x) > 0.0f, [&] { return x * 2.0f; }, [&] { return -x; });
      auto [i, acc] = while_loop([&](const Tensor& i, const Tensor&) { return i < n; },
                                 [&](const Tensor& i, const Tensor& acc) { return std::make_tuple(i + 1, acc + y); },
                                 std::make_tuple(constant(0), zeros_like(y)));
      return std::make_tuple(acc * scale, i);
    }, {.name = "looping", .arg_names = {"x", "n", "scale"}});
    looping(constant({1.0f, 2.0f}), constant(3), 0.5f);
    looping(constant({1.0f, 2.0f}), constant(3), 2.0f);
    save(kGolden + "control_flow_v1_0.tgx", looping);
  }
  {
    Variable w(constant({{0.5f}, {-0.5f}}), "w");
    optim::SGD sgd(0.1);
    auto train_step = function([&](const Tensor& x, const Tensor& y) {
      GradientTape tape;
      Tensor loss = reduce_mean(square(matmul(x, w) - y));
      sgd.apply_gradients(tape.gradient(loss, {w}), {w});
      return loss;
    }, {.name = "train_step", .input_signature = std::vector<TensorSpec>{TensorSpec({None, 2}, float32), TensorSpec({None, 1}, float32)}});
    train_step.get_concrete_function(TensorSpec({None, 2}, float32), TensorSpec({None, 1}, float32));
    save(kGolden + "train_step_v1_0.tgx", train_step);
    save_variables(kGolden + "checkpoint_v1_0.tgx", {w, Variable(constant(int64_t{42}), "step")});
  }
}

TEST(GoldenFiles, TheMlpOfVersion1_0LoadsAndClassifies) {
  LoadedFunction classify = load(kGolden + "mlp_v1_0.tgx");
  EXPECT_EQ(classify.name(), "classify");
  ASSERT_EQ(classify.signatures().size(), 1u);
  EXPECT_EQ(classify.signatures()[0], "(images: TensorSpec(shape=(None, 4), dtype=tg.float32, name=None)) -> "
                                      "TensorSpec(shape=(None, 2), dtype=tg.float32, name=None)");
  EXPECT_TRUE(tensors_near(classify(input_batch()), mlp_eager(input_batch(), w1(), b1(), w2()), 1e-6));
  const Tensor five = concat({input_batch(), input_batch(), input_batch()}, 0);
  EXPECT_TRUE(tensors_near(classify(five), mlp_eager(five, w1(), b1(), w2()), 1e-6));
  std::map<std::string, Variable> vars;
  for (const Variable& v : classify.variables()) vars.emplace(v.name(), v);
  ASSERT_EQ(vars.size(), 3u);
  EXPECT_TRUE(tensors_near(vars.at("dense1/kernel").read_value(), w1(), 0.0));
}

TEST(GoldenFiles, TheControlFlowOfVersion1_0LoadsAndDispatchesOnItsLiteral) {
  LoadedFunction looping = load(kGolden + "control_flow_v1_0.tgx");
  ASSERT_EQ(looping.signatures().size(), 2u);
  for (float scale : {0.5f, 2.0f}) {
    for (const Tensor& x : {constant({1.0f, 2.0f}), constant({-3.0f, 1.0f})}) {
      Outputs out = looping(x, constant(3), scale);
      ASSERT_EQ(out.size(), 2u);
      EXPECT_TRUE(tensors_near(out[0], loop_eager(x, 3, scale), 0.0));
      EXPECT_EQ(out[1].item<int32_t>(), 3);
    }
  }
  EXPECT_THROW(looping(constant({1.0f, 2.0f}), constant(3), 1.0f), TypeError);
}

TEST(GoldenFiles, TheTrainStepOfVersion1_0Trains) {
  LoadedFunction train_step = load(kGolden + "train_step_v1_0.tgx");
  const Tensor x = constant({{1.0f, 2.0f}, {3.0f, -1.0f}}), y = constant({{1.0f}, {0.0f}});
  Variable w = train_step.variables().at(0);
  ASSERT_EQ(w.name(), "w");
  const Tensor w0 = w.read_value();
  const Tensor err = matmul(x, w0) - y;
  const float loss = Tensor(train_step(x, y)).item<float>();
  EXPECT_FLOAT_EQ(loss, reduce_mean(square(err)).item<float>());
  // SGD: w -= 0.1 * d(mean((xw - y)^2))/dw = 0.1 * 2/N * x^T (xw - y).
  const Tensor grad = matmul(x, err, /*transpose_a=*/true) * (2.0f / 2.0f);
  EXPECT_TRUE(tensors_near(w.read_value(), w0 - grad * 0.1f, 1e-6));
}

TEST(GoldenFiles, TheCheckpointOfVersion1_0Restores) {
  Variable w(constant({{0.0f}, {0.0f}}), "w"), step(constant(int64_t{0}), "step");
  restore_variables(kGolden + "checkpoint_v1_0.tgx", {w, step});
  EXPECT_TRUE(tensors_near(w.read_value(), constant({{0.5f}, {-0.5f}}), 0.0));
  EXPECT_EQ(step.read_value().item<int64_t>(), 42);
}

}  // namespace
}  // namespace tg
