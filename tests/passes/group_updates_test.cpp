// Update groups (passes/group_updates.cpp): an optimizer's step over all its parameters is one
// node, with the bits and the order of effects of the updates in turn.
#include "graph/verify.h"
#include "ops/optimizer_updates.h"
#include "passes/passes.h"
#include "support/graph_util.h"
#include "support/test_util.h"

namespace tg {
namespace {

using testing::count_op;
using testing::same_bits;

// A layer's weights (split across the pool: 76,800 elements), biases and a logits layer.
const std::vector<TensorShape> kShapes = {TensorShape({300, 256}), TensorShape({256}), TensorShape({256, 10}),
                                          TensorShape({10})};

std::vector<Variable> make_variables(const std::vector<Tensor>& initial, const std::string& prefix) {
  std::vector<Variable> vars;
  for (std::size_t k = 0; k < initial.size(); ++k) vars.emplace_back(initial[k], prefix + std::to_string(k));
  return vars;
}

std::vector<Tensor> gradients(int step) {
  std::vector<Tensor> grads;
  for (std::size_t k = 0; k < kShapes.size(); ++k)
    grads.push_back(random_uniform(kShapes[k].dims(), -2, 2, 1000 * static_cast<uint64_t>(step) + k));
  return grads;
}

// Three steps of `Opt` on one set of Variables in an optimised function and on another in an
// unoptimised one: every Variable (and slot) must have the same bits after each step.
template <class Opt>
void expect_grouped_step_keeps_the_bits(const char* group_op, const char* single_op) {
  detail::set_verify_graphs(true);
  const int threads_before = config::num_threads();
  for (const int threads : {1, 2}) {
    config::set_num_threads(threads);
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    const std::vector<Tensor> initial = gradients(0);
    std::vector<Variable> fast = make_variables(initial, "fast"), plain = make_variables(initial, "plain");
    Opt fast_opt, plain_opt;
    auto step = [](Opt& opt, std::vector<Variable>& vars) {
      return [&opt, &vars](const Tensor& g0, const Tensor& g1, const Tensor& g2, const Tensor& g3) {
        opt.apply_gradients({g0, g1, g2, g3}, vars);
        return constant(0);
      };
    };
    auto optimised = function(step(fast_opt, fast));
    auto unoptimised = function(step(plain_opt, plain), {.optimize = false});
    for (int s = 1; s <= 3; ++s) {
      const std::vector<Tensor> g = gradients(s);
      optimised(g[0], g[1], g[2], g[3]);
      unoptimised(g[0], g[1], g[2], g[3]);
      std::vector<Variable> fast_all = fast_opt.variables(), plain_all = plain_opt.variables();
      fast_all.insert(fast_all.end(), fast.begin(), fast.end());
      plain_all.insert(plain_all.end(), plain.begin(), plain.end());
      ASSERT_EQ(fast_all.size(), plain_all.size());
      for (std::size_t k = 0; k < fast_all.size(); ++k)
        EXPECT_TRUE(same_bits(fast_all[k].read_value(), plain_all[k].read_value())) << "step " << s << ", " << fast_all[k].name();
    }
    const std::vector<Tensor> g = gradients(1);
    const Graph graph = optimised.get_concrete_function(g[0], g[1], g[2], g[3]).optimized_graph();
    EXPECT_EQ(count_op(graph, group_op), 1) << graph.to_string();
    EXPECT_EQ(count_op(graph, single_op), 0) << graph.to_string();
    // A dump names what the group updates, in order.
    EXPECT_NE(graph.to_dot().find("group=[fast0, "), std::string::npos) << graph.to_dot();
  }
  config::set_num_threads(threads_before);
}

struct Sgd : optim::SGD {
  Sgd() : optim::SGD(0.01) {}
};
struct Adam : optim::Adam {
  Adam() : optim::Adam(0.001) {}
};

TEST(UpdateGroups, AnSgdStepIsOneNodeWithTheBitsOfItsUpdates) {
  expect_grouped_step_keeps_the_bits<Sgd>("apply_gradient_descent_group", "apply_gradient_descent");
}

TEST(UpdateGroups, AnAdamStepIsOneNodeWithTheBitsOfItsUpdates) {
  expect_grouped_step_keeps_the_bits<Adam>("apply_adam_group", "apply_adam");
}

TEST(UpdateGroups, TwoUpdatesOfOneVariableRunInTurn) {
  Variable v(constant({1.0f, 2.0f}), "v"), w(constant({3.0f, 4.0f}), "w");
  auto f = function([&](const Tensor& lr) {
    detail::apply_gradient_descent(v, lr, constant({1.0f, 1.0f}));
    detail::apply_gradient_descent(w, lr, constant({2.0f, 2.0f}));
    detail::apply_gradient_descent(v, lr, v.read_value());  // reads what the first update wrote
    return v.read_value();
  });
  // v: 1 - 0.5 = 0.5, then 0.5 - 0.5 * 0.5 = 0.25; 2 - 0.5 = 1.5, then 0.75.
  EXPECT_EQ(f(constant(0.5f)).to_vector<float>(), (std::vector<float>{0.25f, 0.75f}));
  EXPECT_EQ(w.read_value().to_vector<float>(), (std::vector<float>{2.0f, 3.0f}));
  // v and w are one group; the read of v, and the update after it, follow it.
  const Graph g = f.get_concrete_function(constant(0.5f)).optimized_graph();
  EXPECT_EQ(count_op(g, "apply_gradient_descent_group"), 1) << g.to_string();
  EXPECT_EQ(count_op(g, "apply_gradient_descent"), 1) << g.to_string();
  auto g2 = function([&](const Tensor& lr) {
    detail::apply_gradient_descent(v, lr, constant({1.0f, 1.0f}));
    detail::apply_gradient_descent(w, lr, constant({2.0f, 2.0f}));
    detail::apply_gradient_descent(v, lr * 2.0f, constant({1.0f, 1.0f}));
    return constant(0);
  });
  g2(constant(0.25f));  // one group of three: v's second update applies to its first's result
  EXPECT_EQ(v.read_value().to_vector<float>(), (std::vector<float>{-0.5f, 0.0f}));
  EXPECT_EQ(w.read_value().to_vector<float>(), (std::vector<float>{1.5f, 2.5f}));
  const Graph graph = g2.get_concrete_function(constant(0.25f)).optimized_graph();
  EXPECT_EQ(count_op(graph, "apply_gradient_descent_group"), 1) << graph.to_string();
  EXPECT_EQ(count_op(graph, "apply_gradient_descent"), 0) << graph.to_string();
}

TEST(UpdateGroups, AVariableArgumentBoundToAnUpdatedVariableRunsTheUpdatesInTurn) {
  // The group names a parameter and a captured Variable; called with that very Variable, both
  // updates change it, one after the other, as the ungrouped graph would.
  Variable w(constant({1.0f, 2.0f}), "w");
  auto f = function([&](Variable a, const Tensor& lr) {
    detail::apply_gradient_descent(a, lr, constant({1.0f, 1.0f}));
    detail::apply_gradient_descent(w, lr, constant({2.0f, 2.0f}));
    return constant(0);
  });
  Variable other(constant({0.0f, 0.0f}), "other");
  f(other, constant(1.0f));
  EXPECT_EQ(other.read_value().to_vector<float>(), (std::vector<float>{-1.0f, -1.0f}));
  EXPECT_EQ(w.read_value().to_vector<float>(), (std::vector<float>{-1.0f, 0.0f}));
  f(w, constant(1.0f));
  EXPECT_EQ(f.tracing_count(), 1);
  EXPECT_EQ(w.read_value().to_vector<float>(), (std::vector<float>{-4.0f, -3.0f}));
  const Graph g = f.get_concrete_function(other, constant(1.0f)).optimized_graph();
  EXPECT_EQ(count_op(g, "apply_gradient_descent_group"), 1) << g.to_string();
}

TEST(UpdateGroups, AFailingUpdateLeavesTheUpdatesBeforeItDoneAsUngrouped) {
  for (const bool optimize : {true, false}) {
    SCOPED_TRACE(optimize ? "optimised" : "not optimised");
    Variable a(constant({1.0f, 1.0f}), "a"), b(constant({1.0f, 1.0f, 1.0f}), "b"), c(constant({1.0f, 1.0f}), "c");
    auto f = function(
        [&](const Tensor& ga, const Tensor& gb, const Tensor& gc) {
          detail::apply_gradient_descent(a, constant(1.0f), ga);
          detail::apply_gradient_descent(b, constant(1.0f), gb);
          detail::apply_gradient_descent(c, constant(1.0f), gc);
          return constant(0);
        },
        {.input_signature = std::vector<TensorSpec>(3, TensorSpec(TensorShape({None}), float32)), .optimize = optimize});
    EXPECT_THROW_MSG(f(constant({1.0f, 1.0f}), constant({1.0f, 1.0f}), constant({1.0f, 1.0f})), InvalidArgumentError,
                     "[apply_gradient_descent]", "variable 'b' is float32 (3,)", "got float32 (2,)");
    EXPECT_EQ(a.read_value().to_vector<float>(), (std::vector<float>{0.0f, 0.0f}));
    EXPECT_EQ(b.read_value().to_vector<float>(), (std::vector<float>{1.0f, 1.0f, 1.0f}));
    EXPECT_EQ(c.read_value().to_vector<float>(), (std::vector<float>{1.0f, 1.0f}));
    if (optimize) {
      const Graph g = f.get_concrete_function(constant({1.0f}), constant({1.0f}), constant({1.0f})).optimized_graph();
      EXPECT_EQ(count_op(g, "apply_gradient_descent_group"), 1) << g.to_string();
    }
  }
}

TEST(UpdateGroups, RecordedByHandTheGroupsCheckTheirOperands) {
  Variable v(constant({1.0f, 2.0f}), "v"), m(constant({0.0f, 0.0f}), "m"), s(constant({0.0f, 0.0f}), "s");
  Variable ints(constant({1, 2}), "ints");
  const Tensor lr = constant(0.5f), g = constant({1.0f, 1.0f});
  EXPECT_THROW_MSG(detail::apply_gradient_descent_group({v, ints}, {lr, g, lr, g}), InvalidArgumentError,
                   "[apply_gradient_descent_group]", "float32 or float64", "'ints'");
  // Shapes are checked when the updates run, by each update's own rule.
  EXPECT_THROW_MSG(detail::apply_gradient_descent_group({v, m}, {g, g, lr, g}), InvalidArgumentError,
                   "[apply_gradient_descent]", "the learning rate must be float32 ()");
  EXPECT_THROW_MSG(detail::apply_adam_group({v, m, s}, {cast(g, float64), lr, lr, lr, lr}), InvalidArgumentError,
                   "[apply_adam_group]", "the gradient must be float32", "got float64");
  EXPECT_THROW_MSG(detail::apply_adam_group({v, m, m}, {g, lr, lr, lr, lr}), InvalidArgumentError, "[apply_adam]",
                   "three different Variables");
  EXPECT_THROW(detail::apply_gradient_descent_group({v, m}, {lr, g}), InternalError);  // inputs for one update
  EXPECT_EQ(v.read_value().to_vector<float>(), (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(m.read_value().to_vector<float>(), (std::vector<float>{0.0f, 0.0f}));
}

}  // namespace
}  // namespace tg
