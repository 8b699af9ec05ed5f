// gather_nd, scatter_nd, tensor_scatter_nd_add, where(condition) and boolean_mask against results
// written out by hand (TensorFlow's documented examples where it gives them), and the
// data-dependent shapes of where / boolean_mask through the planned executor.
#include <algorithm>

#include "ops/op.h"
#include "support/op_case.h"
#include "support/test_util.h"
#include "trace/function_core.h"

namespace tg {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
using ::tg::testing::empty;

Fn gather_nd_fn() {
  return [](const std::vector<Tensor>& in) { return gather_nd(in[0], in[1]); };
}
Fn scatter_nd_fn(std::vector<int64_t> shape) {
  return [shape](const std::vector<Tensor>& in) {
    return scatter_nd(in[0], in[1], constant(shape, TensorShape{static_cast<int64_t>(shape.size())}, int64));
  };
}
Fn scatter_add_fn() {
  return [](const std::vector<Tensor>& in) { return tensor_scatter_nd_add(in[0], in[1], in[2]); };
}
Fn mask_fn(int axis = 0) {
  return [axis](const std::vector<Tensor>& in) { return boolean_mask(in[0], in[1], axis); };
}

Fn dedup_fn(std::size_t output) {
  return [output](const std::vector<Tensor>& in) {
    return detail::apply_op(detail::OpId::DeduplicateSlices, {in[0], in[1]})[output];
  };
}

TG_OP_CASES(nd_index_ops) {
  const Tensor ab = constant({{"a", "b"}, {"c", "d"}});
  const Tensor p3 = constant({{{1.f, 2.f}, {3.f, 4.f}}, {{5.f, 6.f}, {7.f, 8.f}}});
  return {
      // gather_nd (TF's examples)
      {"gather_nd", "TF: simple indexing into a matrix", gather_nd_fn(), {ab, constant({{0, 0}, {1, 1}})},
       constant({"a", "d"})},
      {"gather_nd", "TF: slice indexing into a matrix", gather_nd_fn(), {ab, constant({{1}, {0}})},
       constant({{"c", "d"}, {"a", "b"}})},
      {"gather_nd", "TF: batched indices", gather_nd_fn(), {ab, constant({{{0, 0}}, {{0, 1}}}, int64)},
       constant({{"a"}, {"b"}})},
      {"gather_nd", "3-D params, depth 2, float32", gather_nd_fn(), {p3, constant({{1, 0}, {0, 1}, {1, 0}})},
       constant({{5.f, 6.f}, {3.f, 4.f}, {5.f, 6.f}})},
      {"gather_nd", "depth 0 takes the whole params", gather_nd_fn(),
       {constant({1.0, 2.0}, float64), empty<int32_t>({2, 0}, int32)}, constant({{1.0, 2.0}, {1.0, 2.0}}, float64)},
      {"gather_nd", "no index tuples", gather_nd_fn(), {p3, empty<int64_t>({0, 3}, int64)}, empty<float>({0}, float32)},
      // scatter_nd (TF's examples)
      {"scatter_nd", "TF: 1-D", scatter_nd_fn({8}), {constant({{4}, {3}, {1}, {7}}), constant({9, 10, 11, 12})},
       constant({0, 11, 0, 10, 9, 0, 0, 12})},
      {"scatter_nd", "rows of a matrix, repeated index adds, float64", scatter_nd_fn({3, 2}),
       {constant({{2}, {0}, {2}}, int64), constant({{1.0, 2.0}, {3.0, 4.0}, {10.0, 20.0}}, float64)},
       constant({{3.0, 4.0}, {0.0, 0.0}, {11.0, 22.0}}, float64)},
      {"scatter_nd", "elements, int64", scatter_nd_fn({2, 2}), {constant({{0, 1}, {1, 0}}), constant({5, 7}, int64)},
       constant({{0, 5}, {7, 0}}, int64)},
      // tensor_scatter_nd_add (TF's example)
      {"tensor_scatter_nd_add", "TF: 1-D", scatter_add_fn(),
       {constant({1, 2, 3, 4, 5, 6, 7, 8}), constant({{4}, {3}, {1}, {7}}), constant({9, 10, 11, 12})},
       constant({1, 13, 3, 14, 14, 6, 7, 20})},
      {"tensor_scatter_nd_add", "rows, a repeat, float32", scatter_add_fn(),
       {constant({{1.f, 1.f}, {2.f, 2.f}}), constant({{1}, {1}}, int64), constant({{0.5f, 1.f}, {2.f, 4.f}})},
       constant({{1.f, 1.f}, {4.5f, 7.f}})},
      // where(condition)
      {"where_indices", "TF's example, bool", [](const std::vector<Tensor>& in) { return where(in[0]); },
       {constant({{true, false}, {true, true}})}, constant({{0, 0}, {1, 0}, {1, 1}}, int64)},
      {"where_indices", "non-zero floats, 1-D", [](const std::vector<Tensor>& in) { return where(in[0]); },
       {constant({0.f, -1.f, 0.f, 2.f})}, constant({{1}, {3}}, int64)},
      {"where_indices", "nothing true, int32 3-D", [](const std::vector<Tensor>& in) { return where(in[0]); },
       {zeros({2, 1, 2}, int32)}, empty<int64_t>({0, 3}, int64)},
      {"where_indices", "a true scalar", [](const std::vector<Tensor>& in) { return where(in[0]); },
       {constant(int64_t{3})}, empty<int64_t>({1, 0}, int64)},
      // boolean_mask (TF's examples)
      {"boolean_mask", "TF: 1-D", mask_fn(), {constant({0, 1, 2, 3}), constant({true, false, true, false})},
       constant({0, 2})},
      {"boolean_mask", "TF: rows of a matrix, float32", mask_fn(),
       {constant({{1.f, 2.f}, {3.f, 4.f}, {5.f, 6.f}}), constant({true, false, true})},
       constant({{1.f, 2.f}, {5.f, 6.f}})},
      {"boolean_mask", "2-D mask over a 3-D tensor", mask_fn(),
       {p3, constant({{false, true}, {true, true}})}, constant({{3.f, 4.f}, {5.f, 6.f}, {7.f, 8.f}})},
      {"boolean_mask", "axis 1, strings", mask_fn(1), {ab, constant({false, true})}, constant({{"b"}, {"d"}})},
      {"boolean_mask", "axis -1 of 3, float64", mask_fn(-1),
       {cast(p3, float64), constant({true, false})}, constant({{{1.0}, {3.0}}, {{5.0}, {7.0}}}, float64)},
      {"boolean_mask", "nothing kept", mask_fn(), {constant({1, 2}), constant({false, false})},
       empty<int32_t>({0}, int32)},
      // deduplicate_slices: repeated indices' rows summed, in order of first appearance
      {"deduplicate_slices", "summed rows", dedup_fn(1),
       {constant({3, 1, 3, 0}), constant({{1.f, 2.f}, {3.f, 4.f}, {5.f, 6.f}, {7.f, 8.f}})},
       constant({{6.f, 8.f}, {3.f, 4.f}, {7.f, 8.f}})},
      {"deduplicate_slices", "the distinct indices, int64, float64 values", dedup_fn(0),
       {constant({5, 5, 2}, int64), constant({1.0, 2.0, 3.0}, float64)}, constant({5, 2}, int64)},
      {"deduplicate_slices", "no indices", dedup_fn(1), {empty<int32_t>({0}, int32), empty<float>({0, 3}, float32)},
       empty<float>({0, 3}, float32)},
  };
}

// A data-dependent size flows on through a planned, optimised graph with None dims: the ops after
// where / boolean_mask infer their shapes per call, and a frame reused by the next call with
// another count gives the right result (the arena never holds a data-dependent value).
TEST(DataDependentShapes, FlowThroughTheOptimisedExecutorCallAfterCall) {
  auto f = function([](const Tensor& x, const Tensor& threshold) {
    const Tensor kept = boolean_mask(x, x > threshold);
    const Tensor at = cast(where(x > threshold), float32);
    return std::pair{reduce_sum(exp(kept * 2.0f) + 1.0f), reduce_sum(at, {0})};
  });
  auto cf = f.get_concrete_function(TensorSpec({None}, float32), TensorSpec({}, float32));
  const auto& ir = *detail::FunctionAccess::impl(cf)->ir;
  const auto& mask_node = *std::find_if(ir.nodes.begin(), ir.nodes.end(),
                                        [](const auto& n) { return n.op_name() == "boolean_mask"; });
  EXPECT_EQ(mask_node.outputs[0].shape, TensorShape({None}));
  const Tensor x = constant({0.5f, -1.f, 2.f, 0.25f, 3.f});
  for (float t : {0.f, 1.f, 10.f, -5.f, 0.f}) {
    auto [sum, at] = cf(x, constant(t));
    auto [esum, eat] = [&] {
      const Tensor kept = boolean_mask(x, x > t);
      return std::pair{reduce_sum(exp(kept * 2.0f) + 1.0f), reduce_sum(cast(where(x > t), float32), {0})};
    }();
    EXPECT_TENSOR_EQ(sum, esum);
    EXPECT_TENSOR_EQ(at, eat);
  }
}

TEST(DataDependentShapes, WhereIsNoneWhileTracing) {
  auto f = function([](const Tensor& c) {
    const Tensor w = where(c);
    EXPECT_EQ(w.shape().to_string(), "(None, 2)");
    EXPECT_EQ(boolean_mask(c, c).shape().to_string(), "(None,)");
    return w;
  });
  f.get_concrete_function(TensorSpec({3, 4}, bool_));
}

// Out-of-range indices are refused at run time in a graph as eagerly (never garbage).
TEST(NdIndexOps, OutOfRangeIndicesAreRefusedInGraphs) {
  auto g = function([](const Tensor& p, const Tensor& i) { return gather_nd(p, i); });
  auto cf = g.get_concrete_function(TensorSpec({None, None}, float32), TensorSpec({None, 2}, int32));
  const Tensor p = constant({{1.f, 2.f}, {3.f, 4.f}});
  EXPECT_TENSOR_EQ(cf(p, constant({{1, 1}})), constant({4.f}));
  EXPECT_THROW_MSG(cf(p, constant({{0, 0}, {2, 1}})), InvalidArgumentError, "[gather_nd]", "indices[1] = [2, 1]",
                   "2 is not in [0, 2) along dimension 0");
  EXPECT_THROW_MSG(cf(p, constant({{0, -1}})), InvalidArgumentError, "[gather_nd]", "-1 is not in [0, 2)");
  auto s = function([](const Tensor& t, const Tensor& i, const Tensor& u) { return tensor_scatter_nd_add(t, i, u); });
  auto scf = s.get_concrete_function(TensorSpec({None}, float32), TensorSpec({None, 1}, int64),
                                      TensorSpec({None}, float32));
  EXPECT_THROW_MSG(scf(constant({1.f, 2.f}), constant({{5}}, int64), constant({1.f})), InvalidArgumentError,
                   "[tensor_scatter_nd_add]", "indices[0] = [5]", "tensor of shape (2,)");
  EXPECT_THROW_MSG(scf(constant({1.f, 2.f}), constant({{1}}, int64), constant({1.f, 2.f})), InvalidArgumentError,
                   "[tensor_scatter_nd_add]", "updates has shape (2,)", "need updates of shape (1,)");
  auto m = function([](const Tensor& x, const Tensor& k) { return boolean_mask(x, k); });
  auto mcf = m.get_concrete_function(TensorSpec({None}, float32), TensorSpec({None}, bool_));
  EXPECT_THROW_MSG(mcf(constant({1.f, 2.f}), constant({true})), InvalidArgumentError, "[boolean_mask]",
                   "mask shape (1,) does not match");
}

// Second order through the scatter/gather pair: d/dx of <d loss/d params, v> for a loss that
// gathers twice, against finite differences of that inner product.
TEST(NdIndexOps, SecondOrderThroughGatherAndScatterMatchesFiniteDifferences) {
  const Tensor idx = constant({{1, 0}, {0, 1}, {1, 0}});
  const Tensor mask = constant({true, false, true});
  const Tensor v = constant({{0.5, -1.0}, {2.0, 0.25}}, float64);
  auto inner = [&](const Tensor& p) {
    GradientTape tape;
    tape.watch(p);
    const Tensor y = gather_nd(p, idx);
    const Tensor z = boolean_mask(y * y * y, mask);
    return reduce_sum(tape.gradient(reduce_sum(z), p) * v);
  };
  const Tensor p = constant({{0.3, -0.7}, {1.1, 0.9}}, float64);
  GradientTape outer;
  outer.watch(p);
  const std::vector<double> tape_dp = outer.gradient(inner(p), p).to_vector<double>();
  std::vector<double> pv = p.to_vector<double>();
  for (std::size_t j = 0; j < pv.size(); ++j) {
    const double keep = pv[j], eps = 1e-6;
    pv[j] = keep + eps;
    const double up = inner(constant(pv, p.shape(), float64)).item<double>();
    pv[j] = keep - eps;
    const double down = inner(constant(pv, p.shape(), float64)).item<double>();
    pv[j] = keep;
    EXPECT_NEAR(tape_dp[j], (up - down) / (2 * eps), 1e-6) << "element " << j;
  }
}

}  // namespace
}  // namespace tg
