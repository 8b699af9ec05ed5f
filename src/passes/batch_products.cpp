// Batches independent products of one right operand into one product (batch_products.h).
//
// A recurrent cell called in a C++ loop records x_t W once per step: T products of a few rows
// each (an LSTM's 32 x 64 times 64 x 512), each reading all of W and writing its own small
// result. The layer form multiplies the whole sequence by W at once; this pass gives the unrolled
// form the same product: concat(x_0..x_{T-1}) W, reshaped to (T, rows, n), and each old product
// an index view of it (no copy). The left operands must not depend on any of the products, so
// the batch can run before the first of them; they and their producers move up to it.
//
// The bits are the products' own: the AVX-512 kernels (kernels/gemm.cpp, implicit_gemm) sum each
// output row over k in the same order whatever the number of rows and however rows or columns
// are split across threads; only a split over k changes bits, taken when k >= 2 max(rows, n), so
// products with k >= 2 n are left alone (neither the batch nor any of its parts can split over k).
#include <algorithm>
#include <climits>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "core/check.h"
#include "passes/batch_products.h"
#include "passes/rewrite.h"

namespace tg::detail {

namespace {

// The products' right operand for grouping: a Variable and the number of possible writes before
// the read (reads with no write between them give the same value), or a value of the graph.
using RightKey = std::tuple<const void*, std::ptrdiff_t, int, int>;
// (right operand, transpose_b, rows, k, n)
using GroupKey = std::tuple<RightKey, bool, int64_t, int64_t, int64_t>;

struct Batch {
  std::vector<int> members;  // the products, in node order
  ValueRef right;            // the first member's right operand
  int64_t rows = 0, k = 0, n = 0;
  bool transpose_b = false;
};

// The most elements a batch's stacked left operand or product may have (16 MB of float32).
constexpr int64_t kMaxBatchElements = int64_t{1} << 22;

bool is_static_matrix(const ValueType& t) {
  return t.dtype == DType::Float32 && t.shape.has_rank() && t.shape.rank() == 2 && t.shape.is_fully_defined();
}

}  // namespace

int batch_independent_products(GraphIR& g) {
  static const bool avx512 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  if (!avx512) return 0;
  const std::size_t count = g.nodes.size();
  // Nodes that may change a Variable: writes, creations, and control flow (whose bodies may).
  std::vector<int> barriers;
  std::map<GroupKey, std::vector<int>> groups;
  for (std::size_t i = 0; i < count; ++i) {
    const GraphNode& node = g.nodes[i];
    if (node.kind != NodeKind::kOp) continue;
    const uint32_t traits = op_def(node.op).traits;
    if (traits & (kWritesVariable | kCreatesVariable | kSubgraphs)) barriers.push_back(static_cast<int>(i));
    if (node.op != OpId::MatMul) continue;
    const auto& attrs = node.attrs.get<MatMulAttrs>();
    if (attrs.transpose_a) continue;
    const ValueType& left = g.type_of(node.inputs[0]);
    const ValueType& right = g.type_of(node.inputs[1]);
    if (!is_static_matrix(left) || !is_static_matrix(right)) continue;
    const int64_t rows = left.shape.dims()[0], k = left.shape.dims()[1];
    const int64_t n = right.shape.dims()[attrs.transpose_b ? 0 : 1];
    if (rows == 0 || n == 0 || k >= 2 * n) continue;
    const GraphNode& producer = g.node_of(node.inputs[1]);
    RightKey key{nullptr, 0, node.inputs[1].node, node.inputs[1].output};
    if (producer.kind == NodeKind::kOp && producer.op == OpId::ReadVariable) {
      const std::ptrdiff_t writes = std::lower_bound(barriers.begin(), barriers.end(), node.inputs[1].node) - barriers.begin();
      key = RightKey{producer.attrs.get<VariableAttrs>().variable.get(), writes, -1, 0};
    }
    groups[GroupKey{key, attrs.transpose_b, rows, k, n}].push_back(static_cast<int>(i));
  }

  // Per group, the products whose left operand depends on none of the group's products.
  std::vector<Batch> batches;
  std::vector<int> batch_of(count, -1);
  std::vector<char> depends(count);
  for (auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    std::fill(depends.begin(), depends.end(), 0);
    for (int m : members) depends[static_cast<std::size_t>(m)] = 1;
    for (std::size_t i = static_cast<std::size_t>(members.front()); i < count; ++i) {
      const GraphNode& node = g.nodes[i];
      char d = depends[i];
      for (const ValueRef& in : node.inputs) d |= depends[static_cast<std::size_t>(in.node)];
      if (node.control_input >= 0) d |= depends[static_cast<std::size_t>(node.control_input)];
      depends[i] = d;
    }
    std::vector<int> independent;
    for (int m : members)
      if (!depends[static_cast<std::size_t>(g.node(m).inputs[0].node)]) independent.push_back(m);
    const int64_t rows = std::get<2>(key), k = std::get<3>(key), n = std::get<4>(key);
    // Batches of at most kMaxBatchElements in the stacked operand and in the product, whose
    // rows all stay alive until the last view is read (T steps of a long sequence's inference
    // would otherwise hold T results where one step held one), and within the BLAS int.
    const int64_t per_batch = std::min<int64_t>(kMaxBatchElements / std::max(k, n), INT_MAX) / rows;
    if (per_batch < 2) continue;
    for (std::size_t first = 0; first + 1 < independent.size(); first += static_cast<std::size_t>(per_batch)) {
      Batch b;
      const std::size_t end = std::min(independent.size(), first + static_cast<std::size_t>(per_batch));
      b.members.assign(independent.begin() + static_cast<std::ptrdiff_t>(first), independent.begin() + static_cast<std::ptrdiff_t>(end));
      if (b.members.size() < 2) break;
      b.rows = rows, b.k = k, b.n = n, b.transpose_b = std::get<1>(key);
      b.right = g.node(b.members.front()).inputs[1];
      for (int m : b.members) batch_of[static_cast<std::size_t>(m)] = static_cast<int>(batches.size());
      batches.push_back(std::move(b));
    }
  }
  if (batches.empty()) return 0;

  // Rebuild in node order; the first product of a batch emits the batch, after the left operands
  // of all its products and everything they depend on (moved up where they came later).
  GraphRebuilder rebuilt(g);
  std::vector<char> emitted(count, 0), on_stack(count, 0);
  auto dependencies = [&](int i) {
    std::vector<int> deps;
    const int b = batch_of[static_cast<std::size_t>(i)];
    if (b >= 0) {
      for (int m : batches[static_cast<std::size_t>(b)].members) deps.push_back(g.node(m).inputs[0].node);
      deps.push_back(batches[static_cast<std::size_t>(b)].right.node);
      return deps;
    }
    const GraphNode& node = g.node(i);
    for (const ValueRef& in : node.inputs) deps.push_back(in.node);
    if (node.control_input >= 0) deps.push_back(node.control_input);
    return deps;
  };
  auto emit_batch = [&](int b_index) {
    Batch& b = batches[static_cast<std::size_t>(b_index)];
    const int first = b.members.front();
    const auto steps = static_cast<int64_t>(b.members.size());
    // The new nodes' own inputs are new values; GraphRebuilder::add renumbers old values, so
    // each is named by an output of the first (removed) product that no one else reads.
    GraphNode concat;
    concat.name = g.unique_name("concat");
    concat.op = OpId::Concat;
    concat.attrs = AxisAttrs{0};
    for (int m : b.members) concat.inputs.push_back(g.node(m).inputs[0]);
    concat.outputs = {ValueType{DType::Float32, TensorShape({steps * b.rows, b.k})}};
    rebuilt.replace(ValueRef{first, 1}, ValueRef{rebuilt.add(std::move(concat)), 0});
    GraphNode product;
    product.name = g.unique_name("matmul");
    product.op = OpId::MatMul;
    product.attrs = MatMulAttrs{false, b.transpose_b};
    product.inputs = {ValueRef{first, 1}, b.right};
    product.outputs = {ValueType{DType::Float32, TensorShape({steps * b.rows, b.n})}};
    rebuilt.replace(ValueRef{first, 2}, ValueRef{rebuilt.add(std::move(product)), 0});
    GraphNode by_step;
    by_step.name = g.unique_name("reshape");
    by_step.op = OpId::Reshape;
    by_step.attrs = ReshapeAttrs{{steps, b.rows, b.n}};
    by_step.inputs = {ValueRef{first, 2}};
    by_step.outputs = {ValueType{DType::Float32, TensorShape({steps, b.rows, b.n})}};
    rebuilt.replace(ValueRef{first, 3}, ValueRef{rebuilt.add(std::move(by_step)), 0});
    for (int64_t t = 0; t < steps; ++t) {
      const int m = b.members[static_cast<std::size_t>(t)];
      GraphNode view;
      view.name = g.unique_name("index");
      view.op = OpId::Index;
      view.attrs = IndexAttrs{t};
      view.inputs = {ValueRef{first, 3}};
      view.outputs = {ValueType{DType::Float32, TensorShape({b.rows, b.n})}};
      const ValueRef now{rebuilt.add(std::move(view)), 0};
      rebuilt.replace(ValueRef{m, 0}, now);
      emitted[static_cast<std::size_t>(m)] = 1;
    }
  };
  // Emits node i after what it needs (a depth-first walk on a stack of its own: chains of
  // thousands of nodes must not exhaust the call stack).
  auto emit = [&](int root) {
    std::vector<std::pair<int, std::vector<int>>> stack;
    stack.emplace_back(root, dependencies(root));
    on_stack[static_cast<std::size_t>(root)] = 1;
    while (!stack.empty()) {
      auto& [i, deps] = stack.back();
      if (!deps.empty()) {
        const int d = deps.back();
        deps.pop_back();
        if (emitted[static_cast<std::size_t>(d)]) continue;
        TG_CHECK(!on_stack[static_cast<std::size_t>(d)], "batch_products: a cycle through node ", d);
        on_stack[static_cast<std::size_t>(d)] = 1;
        stack.emplace_back(d, dependencies(d));
        continue;
      }
      const int node = i;
      stack.pop_back();
      on_stack[static_cast<std::size_t>(node)] = 0;
      if (emitted[static_cast<std::size_t>(node)]) continue;
      const int b = batch_of[static_cast<std::size_t>(node)];
      if (b >= 0) {
        emit_batch(b);
      } else {
        rebuilt.keep(node);
        emitted[static_cast<std::size_t>(node)] = 1;
      }
    }
  };
  for (std::size_t i = 0; i < count; ++i)
    if (!emitted[i]) emit(static_cast<int>(i));
  rebuilt.finish();
  int merged = 0;
  for (const Batch& b : batches) merged += static_cast<int>(b.members.size()) - 1;
  return merged;
}

}  // namespace tg::detail
