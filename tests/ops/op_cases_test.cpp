// Runs every registered op case, and checks the registry against the cases.
#include <set>

#include "ops/fused.h"
#include "ops/op.h"
#include "passes/passes.h"
#include "trace/function_core.h"
#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

// Cases that print (the print op's) stay quiet; the text is tested elsewhere.
struct QuietPrint {
  QuietPrint() { config::set_print_sink([](const std::string&, void*) {}); }
  ~QuietPrint() { config::set_print_sink(nullptr); }
};

TEST(OpCases, EveryCaseMatchesItsReferenceEagerly) {
  QuietPrint quiet;
  const auto& cases = testing::op_cases();
  ASSERT_FALSE(cases.empty());
  for (const auto& c : cases) {
    SCOPED_TRACE(c.op + ": " + c.label);
    Tensor out = c.fn(c.inputs);
    EXPECT_TRUE(testing::tensors_near(out, c.expected, c.tol));
  }
}

// The same cases traced, and traced + optimised: the inputs become placeholders of a graph that
// the executor runs. Results must be identical to the eager ones (same kernels), not just close.
TEST(OpCases, EveryCaseGivesTheSameResultTracedAndTracedOptimised) {
  QuietPrint quiet;
  detail::set_verify_graphs(true);  // the verifier checks every pass's output
  for (const bool optimize : {false, true}) {
    for (const auto& c : testing::op_cases()) {
      SCOPED_TRACE(c.op + ": " + c.label + (optimize ? " (traced+optimised)" : " (traced)"));
      auto traced = function([&](const std::vector<Tensor>& in) { return c.fn(in); },
                             {.name = "op_case_" + c.op, .optimize = optimize});
      Tensor out = traced(c.inputs);
      EXPECT_TRUE(testing::tensors_near(out, c.expected, c.tol));
      EXPECT_TRUE(testing::tensors_near(out, c.fn(c.inputs), 0.0)) << "graph result differs from eager";
      EXPECT_EQ(traced.tracing_count(), 1);
      // The op really is in the graph (not computed at trace time): as a node, inside a fused
      // node's program, or (optimised) removed by algebraic simplification as a no-op.
      auto cf = traced.get_concrete_function(c.inputs);
      bool found = false;
      for (const auto& node : detail::FunctionAccess::impl(cf)->ir->nodes) {
        found |= node.op_name() == c.op;
        if (node.kind == detail::NodeKind::kOp && node.op == detail::OpId::FusedElementwise)
          for (detail::OpId id : detail::fused_ops(node.attrs)) found |= detail::op_def(id).name == c.op;
      }
      if (!found && optimize) {
        auto plain = function([&](const std::vector<Tensor>& in) { return c.fn(in); }, {.optimize = false});
        detail::GraphIR g = *detail::FunctionAccess::impl(plain.get_concrete_function(c.inputs))->ir;
        auto count = [&] {
          int n = 0;
          for (const auto& node : g.nodes) n += node.op_name() == c.op;
          return n;
        };
        const int traced_count = count();
        detail::simplify_algebra(g);
        found = traced_count > 0 && count() < traced_count;
      }
      EXPECT_TRUE(found) << cf.graph().to_string();
    }
  }
}

// Every case traced against generalised specs - every dim None, and unknown rank - so that each
// shape rule is exercised on unknowns. Results must not change, and the static output shape the
// rule inferred must describe the real output.
TEST(OpCases, EveryCaseTracesWithUnknownDimsAndUnknownRank) {
  QuietPrint quiet;
  for (const bool unknown_rank : {false, true}) {
    for (const auto& c : testing::op_cases()) {
      SCOPED_TRACE(c.op + ": " + c.label + (unknown_rank ? " (unknown rank)" : " (None dims)"));
      const std::vector<TensorSpec> specs = testing::generalised_specs(c.inputs, unknown_rank);
      auto traced = function([&](const std::vector<Tensor>& in) { return c.fn(in); });
      try {
        auto cf = traced.get_concrete_function(specs);
        Tensor out = cf(c.inputs);
        EXPECT_TRUE(testing::tensors_near(out, c.expected, c.tol));
        const auto& ir = *detail::FunctionAccess::impl(cf)->ir;
        const auto& declared = ir.nodes[static_cast<std::size_t>(ir.outputs[0])].outputs[0];
        EXPECT_EQ(declared.dtype, out.dtype());
        EXPECT_TRUE(out.shape().is_subtype_of(declared.shape))
            << "inferred " << declared.shape.to_string() << " for a result of shape " << out.shape().to_string();
      } catch (const Error& e) {
        ADD_FAILURE() << "tracing with generalised specs failed: " << e.what();
      }
    }
  }
}

TEST(Registry, EveryOpHasARuleAKernelAGradientMarkAndACase) {
  std::set<std::string> covered;
  for (const auto& c : testing::op_cases()) covered.insert(c.op);
  std::set<int> serials;
  for (const detail::OpDef* d : detail::all_ops()) {
    SCOPED_TRACE(d->name);
    EXPECT_NE(d->infer, nullptr) << "no shape/dtype rule";
    EXPECT_NE(d->kernel, nullptr) << "no kernel";
    const bool diff = d->traits & detail::kDifferentiable;
    const bool nondiff = d->traits & detail::kNotDifferentiable;
    EXPECT_TRUE(diff != nondiff) << "must be marked differentiable xor not differentiable";
    if (diff) {
      EXPECT_NE(d->grad, nullptr) << "marked kDifferentiable but has no gradient rule (set_grad)";
    }
    if (nondiff) {
      EXPECT_EQ(d->grad, nullptr) << "marked kNotDifferentiable but has a gradient rule";
    }
    EXPECT_TRUE(serials.insert(d->serial).second) << "serial " << d->serial << " reused";
    EXPECT_TRUE(covered.count(d->name)) << "no op case registered for this op";
    EXPECT_EQ(detail::find_op(d->name), d);
  }
  for (const auto& name : covered) EXPECT_NE(detail::find_op(name), nullptr) << name;
}

// What is wrong with an op's declared effects (ops.def), or "" when nothing is. The passes, the
// tape, variable_uses() and the replay read the effect traits and no list of op names, so an
// effect left undeclared would go unnoticed by all of them: a replay would run it for real.
std::string effects_problem(const detail::OpDef& d) {
  using namespace detail;
  const uint32_t t = d.traits;
  if ((t & kStateful) && !(t & kEffects) && !(t & kSubgraphs))
    return "kStateful but declares no effect: add kReadsVariable, kWritesVariable, kCreatesVariable, kRandom, "
           "kCollective or kPrints to its traits in ops.def";
  if ((t & kEffects) && !(t & kStateful)) return "declares effects but is not kStateful (passes would merge or remove it)";
  if ((t & kReplayedEffects) && !(t & kOptimizerOnly) && !d.replay)
    return "has effects a replay must not run for real, but no replay hook: set_replay next to its kernel";
  if (d.replay && !(t & kReplayedEffects)) return "has a replay hook but no effect that needs one";
  const bool names_variables = d.attrs_kind == attrs_kind_of<VariableAttrs> ||
                               d.attrs_kind == attrs_kind_of<AdamSlotsAttrs> ||
                               d.attrs_kind == attrs_kind_of<VariableGroupAttrs>;
  if ((t & (kReadsVariable | kWritesVariable | kCreatesVariable)) && !names_variables)
    return "acts on Variables, but its attributes name none that variables_named() knows";
  if (is_variable_read(t) && (d.arity != 0 || d.attrs_kind != attrs_kind_of<VariableAttrs>))
    return "a differentiable Variable read, whose output a tape takes for the Variable's value, must have no "
           "inputs and VariableAttrs";
  if ((t & kRandom) && d.attrs_kind != attrs_kind_of<RandomAttrs>) return "draws random numbers without RandomAttrs";
  return "";
}

TEST(Registry, EveryStatefulOpDeclaresItsEffectsAndHowAReplayRunsIt) {
  for (const detail::OpDef* d : detail::all_ops()) EXPECT_EQ(effects_problem(*d), "") << d->name;
  // A new stateful op without its effects is refused, and so is one whose effects have no replay.
  detail::OpDef fresh = detail::op_def(detail::OpId::Print);
  fresh.traits = detail::kStateful | detail::kNotDifferentiable;
  EXPECT_NE(effects_problem(fresh).find("declares no effect"), std::string::npos);
  fresh.traits |= detail::kWritesVariable;
  fresh.replay = nullptr;
  fresh.attrs_kind = detail::attrs_kind_of<detail::VariableAttrs>;
  EXPECT_NE(effects_problem(fresh).find("no replay hook"), std::string::npos);
  fresh.traits = detail::kStateful | detail::kCollective | detail::kNotDifferentiable;
  EXPECT_EQ(effects_problem(fresh), "") << "a replay runs a collective again: it needs no hook";
  // The optimiser's rewrites keep what a node does to its Variables.
  const std::pair<detail::OpId, detail::OpId> rewrites[] = {
      {detail::OpId::AssignSubVariable, detail::OpId::ApplyGradientDescent},  // fold_updates.cpp
      {detail::OpId::ApplyGradientDescent, detail::OpId::ApplyGradientDescentGroup},  // group_updates.cpp
      {detail::OpId::ApplyAdam, detail::OpId::ApplyAdamGroup}};
  for (const auto& [from, to] : rewrites)
    EXPECT_EQ(detail::op_def(from).traits & detail::kEffects, detail::op_def(to).traits & detail::kEffects)
        << detail::op_def(from).name << " -> " << detail::op_def(to).name;
}

TEST(Registry, AttributesAreOneTypedStructPerOpFamily) {
  using detail::OpAttrs;
  // Dispatch refuses attributes of another family instead of reading a meaningless field.
  EXPECT_THROW_MSG(detail::apply_op(detail::OpId::ReduceSum, {constant({1, 2})}, detail::AxisAttrs{0}),
                   InternalError, "reduce_sum", "takes ReduceAttrs", "got AxisAttrs");
  const OpAttrs reduce = detail::ReduceAttrs{{1, -1}, true};
  EXPECT_THROW_MSG(reduce.get<detail::SliceAttrs>(), InternalError, "hold ReduceAttrs", "SliceAttrs was read");
  EXPECT_EQ(reduce.get<detail::ReduceAttrs>().axes, (std::vector<int64_t>{1, -1}));
  // Printing, comparing and hashing read the fields alone.
  EXPECT_EQ(detail::format_attrs(reduce), "axes=[1, -1], keepdims=true");
  EXPECT_EQ(detail::format_attrs(detail::OneHotAttrs{3, -1, int64, 1.0, 0.5}),
            "depth=3, axis=-1, dtype=int64, on_value=1, off_value=0.5");
  EXPECT_EQ(detail::format_attrs(OpAttrs{}), "");
  const OpAttrs same = detail::ReduceAttrs{{1, -1}, true};
  const OpAttrs kept_off = detail::ReduceAttrs{{1, -1}, false};
  const OpAttrs other_family = detail::SqueezeAttrs{{1, -1}};
  EXPECT_EQ(reduce, same);
  EXPECT_EQ(detail::hash_attrs(reduce), detail::hash_attrs(same));
  EXPECT_FALSE(reduce == kept_off);
  EXPECT_NE(detail::hash_attrs(reduce), detail::hash_attrs(kept_off));
  EXPECT_FALSE(reduce == other_family);
  EXPECT_NE(detail::hash_attrs(reduce), detail::hash_attrs(other_family));
  // Every op names a struct the variant holds.
  for (const detail::OpDef* d : detail::all_ops())
    EXPECT_LT(d->attrs_kind, std::variant_size_v<detail::AttrsVariant>) << d->name;
}

TEST(Registry, GraphDotShowsEachOpsAttributes) {
  auto f = function([](const Tensor& x) { return reduce_sum(transpose(x, {1, 0}), {0}, true); });
  const std::string dot = f.get_concrete_function(TensorSpec({2, 3}, float32)).graph().to_dot();
  EXPECT_NE(dot.find("transpose(perm=[1, 0])"), std::string::npos) << dot;
  EXPECT_NE(dot.find("reduce_sum(axes=[0], keepdims=true)"), std::string::npos) << dot;
}

}  // namespace
}  // namespace tg
