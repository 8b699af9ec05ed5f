// Variables and tg::print inside and outside tg::function (the guide's state examples).
#include "support/test_util.h"

namespace tg {
namespace {

using testing::PrintCapture;

TEST(Variable, EagerReadAssignAndValidation) {
  Variable v(constant({1.0f, 2.0f}), "w");
  EXPECT_EQ(v.name(), "w");
  EXPECT_EQ(v.dtype(), float32);
  EXPECT_EQ(v.shape(), TensorShape({2}));
  Tensor before = v.read_value();
  v.assign(constant({5.0f, 6.0f}));
  EXPECT_EQ(before.to_vector<float>(), (std::vector<float>{1.0f, 2.0f})) << "reads are snapshots";
  EXPECT_EQ(v.assign_add(constant({1.0f, 1.0f})).to_vector<float>(), (std::vector<float>{6.0f, 7.0f}));
  EXPECT_EQ(v.assign_sub(constant({6.0f, 7.0f})).to_vector<float>(), (std::vector<float>{0.0f, 0.0f}));
  Tensor t = v;  // implicit read
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{0.0f, 0.0f}));
  EXPECT_EQ((v + 1.0f).to_vector<float>(), (std::vector<float>{1.0f, 1.0f}));
  EXPECT_THROW_MSG(v.assign(constant({1, 2})), InvalidArgumentError, "[assign_variable]", "float32", "int32");
  EXPECT_THROW_MSG(v.assign(constant({1.0f, 2.0f, 3.0f})), InvalidArgumentError, "shape (2,)", "(3,)");
  EXPECT_THROW_MSG(Variable(Tensor()), ValueError, "empty");
  std::ostringstream os;
  os << v;
  EXPECT_EQ(os.str(), "<tg.Variable 'w' shape=(2,) dtype=float32, value=tg.Tensor([0. 0.], shape=(2,), dtype=float32)>");
}

TEST(Variable, ReadByReferenceInsideFunctions) {
  Variable foo(constant(1));
  auto variable_add = function([&] { return 1 + foo; });
  EXPECT_EQ(variable_add().to_string(), "tg.Tensor(2, shape=(), dtype=int32)");
  foo.assign(100);
  EXPECT_EQ(variable_add().to_string(), "tg.Tensor(101, shape=(), dtype=int32)");
  EXPECT_EQ(variable_add.tracing_count(), 1);
  // A plain C++ value is captured at trace time instead (the guide's buggy_add).
  int plain = 1;
  auto buggy_add = function([&] { return constant(1) + plain; });
  EXPECT_EQ(buggy_add().item<int32_t>(), 2);
  plain = 100;
  EXPECT_EQ(buggy_add().item<int32_t>(), 2);
}

TEST(Variable, AssignsRunAtEveryCallInProgramOrder) {
  // The guide's Model: the C++ counter guards the assign only while tracing, so the recorded
  // assign_add runs at every call: 1, 2, 3.
  struct Model {
    Variable v{constant(0)};
    int counter = 0;
  } m;
  auto call = function([&] {
    if (m.counter == 0) {
      ++m.counter;
      m.v.assign_add(1);
    }
    return m.v.read_value();
  });
  std::vector<int32_t> seen;
  for (int n = 0; n < 3; ++n) seen.push_back(call().item<int32_t>());
  EXPECT_EQ(seen, (std::vector<int32_t>{1, 2, 3}));
  // The read after the assign sees the new value: reads and writes keep their order.
  auto cf = call.get_concrete_function();
  std::string g = cf.graph().to_string();
  EXPECT_LT(g.find("assign_add_variable"), g.find("read_variable")) << g;
}

TEST(Variable, SingletonRule) {
  // Creating a Variable on every call is an error even on the first call.
  auto f = function([](const Tensor& x) {
    Variable v(constant(1.0f));
    return v.read_value() + x;
  }, {.name = "f"});
  EXPECT_THROW_MSG(f(constant(1.0f)), ValueError,
                   "tg::function only supports singleton tg::Variables created on the first call");
  // The guide's Count: created lazily on the first call only, which works.
  std::optional<Variable> count;
  auto c = function([&] {
    if (!count) count.emplace(constant(0));
    return count->assign_add(1);
  });
  EXPECT_EQ(c().to_string(), "tg.Tensor(1, shape=(), dtype=int32)");
  EXPECT_EQ(c().to_string(), "tg.Tensor(2, shape=(), dtype=int32)");
  EXPECT_EQ(c.tracing_count(), 1);
  // A later trace (new input type) may not create Variables.
  std::vector<Variable> made;
  auto g = function([&](const Tensor& x) {
    made.emplace_back(constant(0.0f));
    return x;
  }, {.name = "g"});
  EXPECT_THROW_MSG(g(constant(1.0f)), ValueError, "singleton", "'g'");
  // A Variable made from the inputs on every call is still made on every call.
  auto h = function([](const Tensor& x) { return Variable(x).read_value(); });
  EXPECT_THROW_MSG(h(constant(1)), ValueError, "singleton");
}

TEST(Variable, VariablesAsArgumentsAndAsObjectAttributes) {
  Variable a(constant(2.0f)), b(constant(3.0f));
  auto scale = function([](const Tensor& x, const Variable& w) { return x * w; });
  EXPECT_EQ(scale(constant(1.0f), a).item<float>(), 2.0f);
  EXPECT_EQ(scale(constant(5.0f), a).item<float>(), 10.0f);
  EXPECT_EQ(scale.tracing_count(), 1);
  EXPECT_EQ(scale(constant(1.0f), b).item<float>(), 3.0f);
  EXPECT_EQ(scale.tracing_count(), 1);  // another Variable of the same spec: the same trace
  a.assign(4.0f);
  EXPECT_EQ(scale(constant(1.0f), a).item<float>(), 4.0f);
  EXPECT_EQ(scale.tracing_count(), 1);

  // The guide's BetterModel: Variables as attributes change results without retracing.
  struct BetterModel {
    Variable bias{constant(0.0f)};
    Variable weight{constant(2.0f)};
  };
  auto model = std::make_shared<BetterModel>();
  auto evaluate = function([](std::shared_ptr<BetterModel> m, const Tensor& x) { return m->weight * x + m->bias; });
  EXPECT_EQ(evaluate(model, constant(10.0f)).to_string(), "tg.Tensor(20.0, shape=(), dtype=float32)");
  model->bias.assign_add(5.0f);
  EXPECT_EQ(evaluate(model, constant(10.0f)).to_string(), "tg.Tensor(25.0, shape=(), dtype=float32)");
  EXPECT_EQ(evaluate.tracing_count(), 1);
}

TEST(Print, RunsAtEveryExecutionWhilePlainCppRunsOnlyWhileTracing) {
  PrintCapture out;
  std::string traced;
  auto f = function([&](const Tensor& x) {
    traced += "Traced with " + x.to_string() + "\n";
    print("Executed with", x);
    return x;
  }, {.arg_names = {"x"}});
  f(constant(1));
  f(constant(1));
  f(constant(2));
  EXPECT_EQ(traced, "Traced with Tensor(\"x:0\", shape=(), dtype=int32)\n");
  EXPECT_EQ(out.take(), "Executed with 1\nExecuted with 1\nExecuted with 2\n");

  // Eagerly, print prints at once; a scalar string unquoted, arrays as tf.print writes them.
  print("values:", constant({1.5f, 2.0f}), constant("text"), 3, true);
  EXPECT_EQ(out.take(), "values: [1.5 2] text 3 True\n");

  // A print with no tensor inputs still runs at every call.
  auto g = function([] { print("Executing"); });
  g();
  g();
  EXPECT_EQ(out.take(), "Executing\nExecuting\n");
}

// The values as TF's print_v2 writes them (tensorflow/python/kernel_tests/logging_ops_test.py
// and the guide's loop cell): summarised per dimension, floats with the digits that read back.
TEST(Print, WritesTensorsAsTfPrintDoes) {
  PrintCapture out;
  const Tensor ten = range(0, 10);
  print(ten, mul(ten, constant(10)));
  EXPECT_EQ(out.take(), "[0 1 2 ... 7 8 9] [0 10 20 ... 70 80 90]\n");
  detail::print_parts({{"", ten}}, 1);
  detail::print_parts({{"", ten}}, 2);
  detail::print_parts({{"", ten}}, -1);
  EXPECT_EQ(out.take(), "[0 ... 9]\n[0 1 ... 8 9]\n[0 1 2 3 4 5 6 7 8 9]\n");
  print(constant(43.5f), constant(43.5), constant({0.3f, 12.4f, -16.1f}), constant(1.0f),
        constant({0.722626925f, 0.33856f}), constant(0.1));
  EXPECT_EQ(out.take(), "43.5 43.5 [0.3 12.4 -16.1] 1 [0.722626925 0.33856] 0.1\n");
  print(constant({true, false}), constant({std::string("a"), std::string("q\"\n")}));
  EXPECT_EQ(out.take(), "[1 0] [\"a\" \"q\\\"\\n\"]\n");
  print(reshape(range(0, 14), {7, 2}));
  EXPECT_EQ(out.take(), "[[0 1]\n [2 3]\n [4 5]\n ...\n [8 9]\n [10 11]\n [12 13]]\n");
  print(reshape(range(0, 8), {2, 2, 2}));
  EXPECT_EQ(out.take(), "[[[0 1]\n  [2 3]]\n\n [[4 5]\n  [6 7]]]\n");
  EXPECT_THROW(detail::print_parts({{"", ten}}, -2), InvalidArgumentError);
}

TEST(Print, KeepsProgramOrderWithVariableUpdates) {
  PrintCapture out;
  Variable v(constant(0));
  auto step = function([&] {
    print("before", v);
    v.assign_add(1);
    print("after", v);
  });
  step();
  step();
  EXPECT_EQ(out.take(), "before 0\nafter 1\nbefore 1\nafter 2\n");
}

}  // namespace
}  // namespace tg
