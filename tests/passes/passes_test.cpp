// Each pass on graphs with known redundancy; results before and after must be identical.
#include <cmath>
#include <cstdlib>
#include <limits>
#include <filesystem>

#include "core/tensor_impl.h"
#include "trace/function_core.h"
#include "passes/passes.h"
#include "graph/verify.h"
#include "runtime/executor.h"
#include "support/graph_util.h"
#include "support/test_util.h"
#include "trace/concrete.h"

namespace tg {
namespace {

using detail::GraphIR;
using detail::NodeKind;

using testing::count_op;
using testing::trace_graph;

TEST(Passes, CseMergesRepeatedWorkAndDceRemovesWhatIsUnused) {
  auto g = trace_graph([](const std::vector<Tensor>& in) {
    Tensor a = in[0] * 2;
    Tensor b = in[0] * 2;    // the same as a
    Tensor unused = in[0] + 5;  // nothing uses it
    (void)unused;
    return a + b;
  }, {constant({1, 2, 3})});
  const std::vector<Tensor> args{constant({1, 2, 3})};
  const Tensor before = detail::execute(*g, args)[0];
  EXPECT_EQ(count_op(*g, "mul"), 2);
  EXPECT_EQ(detail::eliminate_common_subexpressions(*g), 2);  // the mul and its duplicate Const 2
  detail::verify_graph(*g, "cse");
  EXPECT_EQ(count_op(*g, "mul"), 1);
  EXPECT_EQ(detail::eliminate_dead_code(*g), 2);  // add(x, 5) and its constant
  detail::verify_graph(*g, "dce");
  EXPECT_EQ(count_op(*g, "add"), 1);
  EXPECT_TRUE(testing::tensors_near(detail::execute(*g, args)[0], before, 0.0));
  EXPECT_EQ(detail::eliminate_common_subexpressions(*g), 0) << "a second run finds nothing";
  EXPECT_EQ(detail::eliminate_dead_code(*g), 0);
}

TEST(Passes, DceKeepsStatefulOpsInOrder) {
  Variable v(constant(0));
  auto f = function([&](const Tensor& x) {
    print("side effect");
    v.assign_add(1);
    Tensor dead = x * 3;
    (void)dead;
    return x;
  });
  config::set_print_sink([](const std::string&, void*) {});
  f(constant(1));
  f(constant(1));
  config::set_print_sink(nullptr);
  EXPECT_EQ(v.read_value().item<int32_t>(), 2);
  const auto& g = *detail::FunctionAccess::impl(f.concrete_functions()[0])->ir;
  EXPECT_EQ(count_op(g, "print"), 1);
  EXPECT_EQ(count_op(g, "assign_add_variable"), 1);
  EXPECT_EQ(count_op(g, "mul"), 0) << "dead work is gone";
}

// The traced graph is kept as a copy without the name registry; a copy of that copy which
// names nodes must still hand out names no node has.
TEST(GraphNames, ACopyWithoutTheRegistryNamesAfterItsNodes) {
  GraphIR g(1);
  auto add_node = [](GraphIR& graph, const std::string& base) {
    detail::GraphNode n;
    n.kind = NodeKind::kConst;
    n.name = graph.unique_name(base);
    n.value = constant(1.0f);
    n.outputs = {detail::ValueType{float32, TensorShape{}}};
    graph.add_node(std::move(n));
    return graph.nodes.back().name;
  };
  EXPECT_EQ(add_node(g, "Const"), "Const");
  EXPECT_EQ(add_node(g, "Const"), "Const_1");
  EXPECT_EQ(add_node(g, "Const_2"), "Const_2");
  GraphIR copy = *g.copy_without_name_registry();
  EXPECT_EQ(add_node(copy, "Const"), "Const_3");
  EXPECT_EQ(add_node(copy, "Const_1"), "Const_1_1");
  EXPECT_EQ(add_node(copy, "x"), "x");
  EXPECT_EQ(add_node(g, "Const"), "Const_3") << "the original keeps its own registry";
  // Names are kept in 64 KiB blocks; a longer one gets a block of its own.
  const std::string long_name(70000, 'n');
  EXPECT_EQ(add_node(g, long_name), long_name);
  EXPECT_EQ(add_node(g, long_name), long_name + "_1");
  for (int i = 0; i < 10000; ++i) add_node(g, "filler");
  EXPECT_EQ(add_node(g, "Const"), "Const_4");
  EXPECT_EQ(add_node(g, "filler_9999"), "filler_9999_1");
}

// A name "base_n" is kept as a bit under its base, others in a table: each name must collide
// with itself however it was made, and only with itself.
TEST(GraphNames, NumberedNamesCollideExactlyWithThemselves) {
  GraphIR g(1);
  auto name = [&](const std::string& base) { return g.unique_name(base); };
  EXPECT_EQ(name("mul_2"), "mul_2") << "taken by hand before the counter reaches it";
  EXPECT_EQ(name("mul"), "mul");
  EXPECT_EQ(name("mul"), "mul_1");
  EXPECT_EQ(name("mul"), "mul_3") << "mul_2 was taken";
  EXPECT_EQ(name("mul_3"), "mul_3_1");
  // Each of these is taken as written, then again as "<name>_1". Not "base_n" forms: a leading
  // zero, n = 0, no base, no number; then the numbers on either side of the largest kept as a
  // bit (2^22 - 1), and one with more digits than a bit number may have.
  for (const std::string taken : {"mul_03", "mul_0", "_5", "5", "mul_", "mul_4194304", "mul_4194303", "mul_12345678"}) {
    EXPECT_EQ(name(taken), taken);
    EXPECT_EQ(name(taken), taken + "_1");
  }
  // Bases differ by their whole text, numbers included.
  EXPECT_EQ(name("a_1_2"), "a_1_2");
  EXPECT_EQ(name("a_1"), "a_1");
  EXPECT_EQ(name("a_1"), "a_1_1");
  EXPECT_EQ(name("a_1"), "a_1_3") << "a_1_2 was taken";
  // Many numbers under one base, taken out of order.
  for (int i = 20000; i > 10; --i) EXPECT_EQ(name("n_" + std::to_string(i)), "n_" + std::to_string(i));
  EXPECT_EQ(name("n"), "n");
  for (int i = 1; i <= 10; ++i) EXPECT_EQ(name("n"), "n_" + std::to_string(i));
  EXPECT_EQ(name("n"), "n_20001");
}

TEST(Passes, ConstantFoldingComputesOpsOnConstants) {
  GraphIR g(1);
  auto add_const = [&](Tensor t, const std::string& name) {
    detail::GraphNode n;
    n.kind = NodeKind::kConst;
    n.name = g.unique_name(name);
    n.value = t;
    n.outputs = {detail::ValueType{t.dtype(), t.shape()}};
    return g.add_node(std::move(n));
  };
  const int a = add_const(constant({1.0f, 2.0f}), "a");
  const int b = add_const(constant({10.0f, 20.0f}), "b");
  detail::GraphNode sum;
  sum.kind = NodeKind::kOp;
  sum.op = detail::OpId::Add;
  sum.name = g.unique_name("add");
  sum.inputs = {{a, 0}, {b, 0}};
  sum.outputs = {detail::ValueType{float32, TensorShape({2})}};
  const int s = g.add_node(std::move(sum));
  detail::GraphNode out;
  out.kind = NodeKind::kOutput;
  out.name = g.unique_name("Identity");
  out.inputs = {{s, 0}};
  out.outputs = {detail::ValueType{float32, TensorShape({2})}};
  g.outputs.push_back(g.add_node(std::move(out)));
  EXPECT_EQ(detail::fold_constants(g), 1);
  detail::verify_graph(g, "constant_fold");
  EXPECT_EQ(count_op(g, "add"), 0);
  EXPECT_EQ(detail::eliminate_dead_code(g), 2);  // a and b are unused now
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[0].name, "add/folded");
  EXPECT_EQ(detail::execute(g, {})[0].to_vector<float>(), (std::vector<float>{11.0f, 22.0f}));
}

TEST(Passes, FoldingLeavesOpsThatFailToFailAtRunTime) {
  GraphIR g(2);
  auto konst = [&](Tensor t) {
    detail::GraphNode n;
    n.kind = NodeKind::kConst;
    n.name = g.unique_name("Const");
    n.value = t;
    n.outputs = {detail::ValueType{t.dtype(), t.shape()}};
    return g.add_node(std::move(n));
  };
  const int a = konst(constant(1)), b = konst(constant(0));
  detail::GraphNode div;
  div.kind = NodeKind::kOp;
  div.op = detail::OpId::FloorDiv;
  div.name = "floordiv";
  div.inputs = {{a, 0}, {b, 0}};
  div.outputs = {detail::ValueType{int32, TensorShape{}}};
  g.add_node(std::move(div));
  EXPECT_EQ(detail::fold_constants(g), 0);
  EXPECT_EQ(count_op(g, "floordiv"), 1);
}

TEST(Passes, VerifierRejectsBrokenGraphs) {
  auto g = trace_graph([](const std::vector<Tensor>& in) { return in[0] + 1; }, {constant(1)});
  detail::verify_graph(*g, "test");
  auto bad = *g;
  bad.nodes[2].inputs[0].node = 3;  // a use of a later node
  EXPECT_THROW_MSG(detail::verify_graph(bad, "test"), InternalError, "graph verifier (after test)", "later");
  auto dup = *g;
  dup.nodes[1].name = dup.nodes[0].name;
  EXPECT_THROW_MSG(detail::verify_graph(dup, "test"), InternalError, "duplicate name");
}

TEST(Passes, VerifierRejectsAttributesOfAnotherOpFamily) {
  auto g = trace_graph([](const std::vector<Tensor>& in) { return reduce_sum(in[0], {0}); }, {constant({1, 2})});
  detail::verify_graph(*g, "test");
  auto bad = *g;
  for (auto& n : bad.nodes)
    if (n.kind == NodeKind::kOp) n.attrs = detail::AxisAttrs{0};
  EXPECT_THROW_MSG(detail::verify_graph(bad, "test"), InternalError, "holds AxisAttrs", "reduce_sum",
                   "takes ReduceAttrs");
}

TEST(Passes, CseMergesOpsOnlyWhenEveryAttributeMatches) {
  auto g = trace_graph([](const std::vector<Tensor>& in) {
    const Tensor x = in[0];
    return reduce_sum(x, {0}) + reduce_sum(x, {0}) + reduce_sum(x, {0}, true)[0] + reduce_sum(x, {1})[0];
  }, {constant({{1, 2}, {3, 4}})});
  EXPECT_EQ(count_op(*g, "reduce_sum"), 4);
  detail::eliminate_common_subexpressions(*g);
  detail::verify_graph(*g, "cse");
  EXPECT_EQ(count_op(*g, "reduce_sum"), 3) << "only the two identical reductions merge";
}

TEST(Passes, CseTakesACommutativeOpsOperandsInEitherOrder) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<Tensor> args{constant({-0.0f, 0.0f, nan, 1.5f, 7.0f}), constant({0.0f, -0.0f, 2.0f, nan, 7.0f})};
  auto g = trace_graph([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0] + in[1], in[1] + in[0], in[0] * in[1], in[1] * in[0],
                               maximum(in[0], in[1]), maximum(in[1], in[0])};
  }, args);
  const std::vector<Tensor> before = detail::execute(*g, args);
  EXPECT_EQ(detail::eliminate_common_subexpressions(*g), 2) << "b + a is a + b, b * a is a * b";
  detail::verify_graph(*g, "cse");
  EXPECT_EQ(count_op(*g, "add"), 1);
  EXPECT_EQ(count_op(*g, "mul"), 1);
  // maximum gives its first operand when they compare equal: maximum(-0.0, +0.0) is -0.0 and
  // maximum(+0.0, -0.0) is +0.0, so its operands keep their order (it is not kCommutative).
  EXPECT_EQ(count_op(*g, "maximum"), 2);
  EXPECT_TRUE(std::signbit(before[4].data<float>()[0]));
  EXPECT_FALSE(std::signbit(before[5].data<float>()[0]));
  const std::vector<Tensor> after = detail::execute(*g, args);
  ASSERT_EQ(after.size(), before.size());
  for (std::size_t k = 0; k < after.size(); ++k) EXPECT_TRUE(testing::same_bits(after[k], before[k])) << k;
}

TEST(Passes, CseKeepsTheOrderOfConcatenatedStrings) {
  const std::vector<Tensor> args{constant({"a", "x"}), constant({"b", "y"})};
  auto g = trace_graph([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] + in[1], in[1] + in[0]}; },
                       args);
  EXPECT_EQ(detail::eliminate_common_subexpressions(*g), 0) << "add concatenates strings: b + a is not a + b";
  const std::vector<Tensor> out = detail::execute(*g, args);
  EXPECT_EQ(out[0].to_string(), constant({"ab", "xy"}).to_string());
  EXPECT_EQ(out[1].to_string(), constant({"ba", "yx"}).to_string());
}

TEST(Passes, DumpGraphsWritesEveryStage) {
  const auto dir = std::filesystem::temp_directory_path() / "tg_dump_test";
  std::filesystem::remove_all(dir);
  setenv("TG_DUMP_GRAPHS", dir.c_str(), 1);
  auto f = function([](const Tensor& x) { return x * 2 + x * 2; }, {.name = "dumped"});
  f(constant(1));
  unsetenv("TG_DUMP_GRAPHS");
  for (const char* stage : {"00.traced", "01.simplify", "02.fold_scaled_updates", "03.batch_products",
                            "04.merge_product_sums", "05.constant_fold", "06.cse", "07.dce", "08.fuse_elementwise",
                            "09.fuse_product_epilogues", "10.group_updates", "11.bf16_product_casts", "12.dce"}) {
    EXPECT_TRUE(std::filesystem::exists(dir / (std::string("dumped.trace0.") + stage + ".txt"))) << stage;
    EXPECT_TRUE(std::filesystem::exists(dir / (std::string("dumped.trace0.") + stage + ".dot"))) << stage;
  }
  EXPECT_EQ(f(constant(3)).item<int32_t>(), 12);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tg
