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
#include "ops/matmul.h"
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
  if (!matmul_on_own_kernels()) return 0;
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

// ---- Sums of products as one product ----
//
// The backward of an unrolled cell sums a weight's gradient over the steps: T products
// x_t^T dz_t (k = the batch's rows each) added one after another, each read back by its add.
// The sum is one product over the stacked rows, concat(x_t)^T concat(dz_t): one pass over the
// operands instead of T results written and read back. Each output element is then summed over
// all T k terms in the kernel's order rather than per product and then across products, so the
// bits differ, within the float sum's error bound (DECISIONS: reassociated sums of products).

namespace {

// One sum tree to rewrite: its root add, the adds it absorbs, the runs of products that become
// one product each, and the terms added to them as they are.
struct ProductSum {
  int root = -1;
  std::vector<int> adds;
  struct Run {
    std::vector<int> products;         // >= 2, of one orientation
    std::vector<int64_t> stacked[2];   // the shapes of the stacked left and right operands
  };
  std::vector<Run> runs;
  std::vector<ValueRef> rest;          // other terms (shared products, other values), in tree order
};

// The axis along which a product's operand holds k.
int k_axis(bool left, const MatMulAttrs& a) { return left ? (a.transpose_a ? 0 : 1) : (a.transpose_b ? 1 : 0); }

}  // namespace

int merge_product_sums(GraphIR& g) {
  const std::size_t count = g.nodes.size();
  const NodeUsers users = g.users();  // data readers and control followers alike
  // A float32 add of two operands of its own (static) shape, not ordered by a control edge.
  auto plain_add = [&](int i) {
    const GraphNode& node = g.node(i);
    if (node.kind != NodeKind::kOp || node.op != OpId::Add || node.control_input >= 0 || node.inputs.size() != 2) return false;
    const ValueType& out = node.outputs[0];
    if (out.dtype != DType::Float32 || !out.shape.has_rank() || !out.shape.is_fully_defined()) return false;
    for (const ValueRef& in : node.inputs) {
      const ValueType& t = g.type_of(in);
      if (t.dtype != DType::Float32 || !(t.shape == out.shape)) return false;
    }
    return true;
  };
  // Read once (by the tree's add) and by no control edge: the tree may drop it.
  auto only_in_tree = [&](int i) { return users.of(i).size() == 1; };
  auto followed_by_control = [&](int i) {
    const auto of = users.of(i);
    return std::any_of(of.begin(), of.end(), [&](int u) { return g.node(u).control_input == i; });
  };
  auto mergeable_product = [&](ValueRef r) {
    const GraphNode& node = g.node_of(r);
    return node.kind == NodeKind::kOp && node.op == OpId::MatMul && node.control_input < 0 && only_in_tree(r.node) &&
           is_static_matrix(node.outputs[0]) && is_static_matrix(g.type_of(node.inputs[0])) &&
           is_static_matrix(g.type_of(node.inputs[1]));
  };

  std::vector<char> visited(count, 0);
  std::vector<ProductSum> sums;
  for (int i = static_cast<int>(count) - 1; i >= 0; --i) {
    if (visited[static_cast<std::size_t>(i)] || !plain_add(i) || followed_by_control(i)) continue;
    ProductSum s;
    s.root = i;
    // The tree's terms: an add read only by the tree is part of it.
    std::vector<ValueRef> terms;
    std::vector<int> stack{i};
    while (!stack.empty()) {
      const int a = stack.back();
      stack.pop_back();
      visited[static_cast<std::size_t>(a)] = 1;  // a subtree has no more products than its tree
      s.adds.push_back(a);
      const GraphNode& add = g.node(a);
      for (const ValueRef& in : add.inputs) {
        if (in.output == 0 && plain_add(in.node) && only_in_tree(in.node)) stack.push_back(in.node);
        else terms.push_back(in);
      }
    }
    // Products by orientation, each group in the order of its operands in the graph (so that
    // a stack of x_0..x_{T-1} is the forward batch's own concatenation, which CSE then shares).
    std::map<std::pair<bool, bool>, std::vector<int>> groups;
    for (const ValueRef& t : terms) {
      if (!mergeable_product(t)) {
        s.rest.push_back(t);
        continue;
      }
      const auto& attrs = g.node(t.node).attrs.get<MatMulAttrs>();
      groups[{attrs.transpose_a, attrs.transpose_b}].push_back(t.node);
    }
    for (auto& [orientation, products] : groups) {
      std::stable_sort(products.begin(), products.end(), [&](int a, int b) {
        const GraphNode &x = g.node(a), &y = g.node(b);
        return std::tie(x.inputs[0].node, x.inputs[0].output, x.inputs[1].node, x.inputs[1].output) <
               std::tie(y.inputs[0].node, y.inputs[0].output, y.inputs[1].node, y.inputs[1].output);
      });
      // Runs whose stacked operands hold at most kMaxBatchElements each (and k within the BLAS
      // int); a run of one product stays as it is.
      std::vector<int> run;
      int64_t left = 0, right = 0, k = 0;
      auto close = [&] {
        if (run.size() >= 2) {
          ProductSum::Run r;
          r.products = run;
          for (int side = 0; side < 2; ++side) {
            const GraphNode& first = g.node(run.front());
            const auto axis = static_cast<std::size_t>(k_axis(side == 0, first.attrs.get<MatMulAttrs>()));
            r.stacked[side] = g.type_of(first.inputs[side]).shape.dims();
            r.stacked[side][axis] = 0;
            for (int p : run) r.stacked[side][axis] += g.type_of(g.node(p).inputs[side]).shape.dims()[axis];
          }
          s.runs.push_back(std::move(r));
        } else
          for (int p : run) s.rest.push_back(ValueRef{p, 0});
        run.clear();
        left = right = k = 0;
      };
      for (int p : products) {
        const GraphNode& node = g.node(p);
        const int64_t a = g.type_of(node.inputs[0]).shape.num_elements(), b = g.type_of(node.inputs[1]).shape.num_elements();
        const int64_t kp = g.type_of(node.inputs[0]).shape.dims()[k_axis(true, node.attrs.get<MatMulAttrs>())];
        if (!run.empty() && (left + a > kMaxBatchElements || right + b > kMaxBatchElements || k + kp > INT_MAX)) close();
        run.push_back(p);
        left += a, right += b, k += kp;
      }
      close();
    }
    if (!s.runs.empty()) sums.push_back(std::move(s));
  }
  if (sums.empty()) return 0;

  // The order of each run's products: that of a concatenation the graph already has of one of
  // its operand lists (the forward batch's stacked x_t), or of a stack another run chose (the
  // dz_t that both of a cell's weight gradients stack), so that CSE keeps one of each; runs
  // matching neither take the graph's order and offer their stacks to the others.
  struct Stack {
    int64_t axis;
    std::vector<ValueRef> order, sorted;
  };
  auto sorted_refs = [](std::vector<ValueRef> v) {
    std::sort(v.begin(), v.end(), [](ValueRef a, ValueRef b) { return std::tie(a.node, a.output) < std::tie(b.node, b.output); });
    return v;
  };
  std::vector<Stack> stacks;
  for (const GraphNode& node : g.nodes)
    if (node.kind == NodeKind::kOp && node.op == OpId::Concat && node.inputs.size() >= 2) {
      std::vector<ValueRef> order(node.inputs.begin(), node.inputs.end());
      stacks.push_back(Stack{node.attrs.get<AxisAttrs>().axis, order, sorted_refs(order)});
    }
  std::vector<ProductSum::Run*> pending;
  for (ProductSum& sum : sums)
    for (ProductSum::Run& run : sum.runs) pending.push_back(&run);
  auto operands = [&](const ProductSum::Run& run, int side) {
    std::vector<ValueRef> v;
    for (int p : run.products) v.push_back(g.node(p).inputs[static_cast<std::size_t>(side)]);
    return v;
  };
  auto offer = [&](const ProductSum::Run& run) {
    const auto& attrs = g.node(run.products.front()).attrs.get<MatMulAttrs>();
    for (int side = 0; side < 2; ++side) {
      std::vector<ValueRef> order = operands(run, side);
      stacks.push_back(Stack{k_axis(side == 0, attrs), order, sorted_refs(order)});
    }
  };
  // Orders the run as a known stack of one of its operand lists (whose values must be
  // distinct); false if there is none.
  auto take_known_order = [&](ProductSum::Run& run) {
    const auto& attrs = g.node(run.products.front()).attrs.get<MatMulAttrs>();
    for (int side = 0; side < 2; ++side) {
      const std::vector<ValueRef> mine = sorted_refs(operands(run, side));
      if (std::adjacent_find(mine.begin(), mine.end()) != mine.end()) continue;
      for (const Stack& stack : stacks) {
        if (stack.axis != k_axis(side == 0, attrs) || stack.sorted != mine) continue;
        std::vector<int> ordered;
        for (const ValueRef& r : stack.order)
          for (int p : run.products)
            if (g.node(p).inputs[static_cast<std::size_t>(side)] == r) ordered.push_back(p);
        run.products = std::move(ordered);
        return true;
      }
    }
    return false;
  };
  while (!pending.empty()) {
    bool progress = false;
    for (std::size_t r = 0; r < pending.size();) {
      if (take_known_order(*pending[r])) {
        offer(*pending[r]);
        pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(r));
        progress = true;
      } else {
        ++r;
      }
    }
    if (!progress) {
      offer(*pending.front());
      pending.erase(pending.begin());
    }
  }

  std::vector<char> dropped(count, 0);
  std::vector<int> sum_at(count, -1);
  for (std::size_t s = 0; s < sums.size(); ++s) {
    sum_at[static_cast<std::size_t>(sums[s].root)] = static_cast<int>(s);
    for (int a : sums[s].adds) dropped[static_cast<std::size_t>(a)] = 1;
    for (const auto& run : sums[s].runs)
      for (int p : run.products) dropped[static_cast<std::size_t>(p)] = 1;
  }
  int merged = 0;
  GraphRebuilder rebuilt(g);
  for (std::size_t i = 0; i < count; ++i) {
    if (sum_at[i] < 0) {
      if (!dropped[i]) rebuilt.keep(static_cast<int>(i));
      continue;
    }
    // The root emits the sum (its operands all come before it). New nodes read new values,
    // which are named by outputs 1, 2, ... of the removed root (GraphRebuilder::add renumbers).
    const ProductSum& s = sums[static_cast<std::size_t>(sum_at[i])];
    const GraphNode& root = g.node(s.root);
    std::vector<ValueRef> made(1);  // made[j]: the new value named {root, j}
    auto add_node = [&](GraphNode node) {
      node.name = g.unique_name(node.op == OpId::Concat ? "concat" : node.op == OpId::Add ? "add" : "matmul");
      const ValueRef as{s.root, static_cast<int>(made.size())};
      made.push_back(ValueRef{rebuilt.add(std::move(node)), 0});
      rebuilt.replace(as, made.back());
      return as;
    };
    std::vector<ValueRef> terms;
    for (const auto& run : s.runs) {
      // (The operands' producers may have been moved into the new graph: their types were
      // taken before, and the dropped products and adds are still whole.)
      const GraphNode& first = g.node(run.products.front());
      const auto attrs = first.attrs.get<MatMulAttrs>();
      ValueRef stacked[2];
      for (int side = 0; side < 2; ++side) {
        GraphNode concat;
        concat.op = OpId::Concat;
        concat.attrs = AxisAttrs{k_axis(side == 0, attrs)};
        for (int p : run.products) concat.inputs.push_back(g.node(p).inputs[side]);
        concat.outputs = {ValueType{DType::Float32, TensorShape(run.stacked[side])}};
        stacked[side] = add_node(std::move(concat));
      }
      GraphNode product;
      product.op = OpId::MatMul;
      product.attrs = attrs;
      product.inputs = {stacked[0], stacked[1]};
      product.outputs = {first.outputs[0]};
      terms.push_back(add_node(std::move(product)));
      merged += static_cast<int>(run.products.size()) - 1;
    }
    terms.insert(terms.end(), s.rest.begin(), s.rest.end());
    ValueRef total = terms.front();
    for (std::size_t t = 1; t < terms.size(); ++t) {
      GraphNode add;
      add.op = OpId::Add;
      add.attrs = root.attrs;
      add.inputs = {total, terms[t]};
      add.outputs = {root.outputs[0]};
      total = add_node(std::move(add));
    }
    rebuilt.replace(ValueRef{s.root, 0}, made[static_cast<std::size_t>(total.output)]);
  }
  rebuilt.finish();
  return merged;
}

}  // namespace tg::detail
