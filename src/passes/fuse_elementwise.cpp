// Elementwise fusion: connected elementwise ops over one shape become one fused_elementwise node.
#include <algorithm>
#include <queue>

#include "core/buffer.h"
#include "core/check.h"
#include "core/tensor_impl.h"
#include "ops/fused.h"
#include "passes/passes.h"
#include "passes/rewrite.h"

namespace tg::detail {

namespace {

struct Group {
  std::vector<int> members;  // node indices, ascending
  TensorShape shape;
};

// The operand dtype an elementwise node computes on (where: its x and y).
DType operand_dtype(const GraphIR& g, const GraphNode& node) {
  return g.type_of(node.inputs[node.op == OpId::Where ? 1 : 0]).dtype;
}

// Whether `r` is the bfloat16 output of a node whose epilogue fuse_product_epilogues takes in
// (a matmul, a max pooling gradient).
bool is_bf16_product(const GraphIR& g, ValueRef r) {
  const GraphNode& n = g.node_of(r);
  return n.kind == NodeKind::kOp && (n.op == OpId::MatMul || n.op == OpId::MaxPool2DGrad) &&
         g.type_of(r).dtype == DType::BFloat16;
}

// The bfloat16 nodes fuse_product_epilogues reads off the graph as a product's epilogue (it runs
// after this pass and takes op nodes, not programs): the ops reading the product, and the relu,
// the greater and the zeros_like reading an add of it (a bias). Left as they are for it.
bool left_to_bf16_epilogue(const GraphIR& g, const GraphNode& node) {
  for (const ValueRef& in : node.inputs) {
    if (is_bf16_product(g, in)) return true;
    const GraphNode& src = g.node_of(in);
    if ((node.op == OpId::Relu || node.op == OpId::Greater || node.op == OpId::ZerosLike) && src.kind == NodeKind::kOp &&
        src.op == OpId::Add && is_bf16_product(g, src.inputs[0]))
      return true;
  }
  return false;
}

bool is_candidate(const GraphIR& g, const GraphNode& node) {
  if (node.kind != NodeKind::kOp || node.outputs.size() != 1 || node.inputs.empty()) return false;
  const uint32_t traits = op_def(node.op).traits;
  if (!(traits & kElementwise) || (traits & kStateful)) return false;
  // Known ranks: a program over None dims is planned per run-time shape (fused.h).
  if (!node.outputs[0].shape.has_rank() || node.outputs[0].shape.rank() > 16) return false;
  for (const ValueRef& in : node.inputs)
    if (!g.type_of(in).shape.has_rank()) return false;
  const DType in_dtype = operand_dtype(g, node);
  if (in_dtype == DType::BFloat16 && left_to_bf16_epilogue(g, node)) return false;
  return fusable_op(node.op, in_dtype, node.outputs[0].dtype);
}

// A bfloat16 op alone still becomes a program: the fused kernel converts in blocks in cache,
// where the op's own kernel widens whole tensors into fresh float32 ones.
bool computes_bf16(const GraphIR& g, const GraphNode& node) {
  return node.op != OpId::Cast && operand_dtype(g, node) == DType::BFloat16;
}

// A one-element constant that the program holds as an immediate instead of an input.
bool is_immediate(const GraphNode& n) {
  return n.kind == NodeKind::kConst && n.value.impl()->dtype != DType::String &&
         static_shape(n.value).num_elements() == 1;  // as stored: Tensor::num_elements() copies the shape
}

// What the fused kernel can fold: a reduction over every dim, or over the last one only.
enum class Folded { kNo, kAll, kLast };
Folded folded_reduction(const GraphNode& r, int64_t rank) {
  const std::vector<int64_t>& axes = r.attrs.get<ReduceAttrs>().axes;
  std::vector<bool> mask(static_cast<std::size_t>(rank), axes.empty());
  for (int64_t a : axes) {
    const int64_t d = a < 0 ? a + rank : a;
    if (d < 0 || d >= rank || mask[static_cast<std::size_t>(d)]) return Folded::kNo;
    mask[static_cast<std::size_t>(d)] = true;
  }
  if (std::all_of(mask.begin(), mask.end(), [](bool b) { return b; })) return Folded::kAll;
  if (axes.size() == 1 && mask.back()) return Folded::kLast;
  return Folded::kNo;
}

}  // namespace

int fuse_elementwise(GraphIR& g) {
  const std::size_t n = g.nodes.size();
  const NodeUsers users = g.users();
  CachedVector<int> group_of(n, -1);
  std::vector<Group> groups;
  // Would adding a node whose operand comes from q (outside the group) close a cycle through
  // the group? Only if q depends on a member: search q's ancestors down to the first member.
  // A node in another group stands for its whole group once fused, so that group's later
  // members are searched too. (The floor cut is not exact at group level - an early ancestor
  // may belong to a group with later members - so the emission below breaks any cycle left.)
  CachedVector<int> stamp(n, 0), group_stamp;
  int current_stamp = 0;
  std::vector<int> stack;
  auto depends_on_group = [&](int q, int gid) {
    const int floor = groups[static_cast<std::size_t>(gid)].members.front();
    ++current_stamp;
    group_stamp.resize(groups.size(), 0);
    stack.clear();
    auto visit = [&](int p) {
      if (stamp[static_cast<std::size_t>(p)] == current_stamp) return;
      stamp[static_cast<std::size_t>(p)] = current_stamp;
      stack.push_back(p);
    };
    visit(q);
    while (!stack.empty()) {
      const int v = stack.back();
      stack.pop_back();
      const int h = group_of[static_cast<std::size_t>(v)];
      if (h == gid) return true;
      if (h >= 0 && group_stamp[static_cast<std::size_t>(h)] != current_stamp) {
        group_stamp[static_cast<std::size_t>(h)] = current_stamp;
        for (int m : groups[static_cast<std::size_t>(h)].members)
          if (m >= floor) visit(m);
      }
      if (v < floor) continue;
      const GraphNode& node = g.node(v);
      for (const ValueRef& in : node.inputs) visit(in.node);
      if (node.control_input >= 0) visit(node.control_input);
    }
    return false;
  };
  for (std::size_t i = 0; i < n; ++i) {
    const GraphNode& node = g.nodes[i];
    if (!is_candidate(g, node)) continue;
    const TensorShape& shape = node.outputs[0].shape;
    int chosen = -1;
    for (const ValueRef& in : node.inputs) {
      const int gid = group_of[static_cast<std::size_t>(in.node)];
      if (gid < 0 || gid == chosen || chosen >= 0) continue;
      if (!(groups[static_cast<std::size_t>(gid)].shape == shape)) continue;
      bool cycle = false;
      for (const ValueRef& other : node.inputs)
        if (group_of[static_cast<std::size_t>(other.node)] != gid) cycle |= depends_on_group(other.node, gid);
      if (!cycle) chosen = gid;
    }
    if (chosen < 0) {
      chosen = static_cast<int>(groups.size());
      groups.push_back(Group{{}, shape});
    }
    group_of[i] = chosen;
    groups[static_cast<std::size_t>(chosen)].members.push_back(static_cast<int>(i));
  }

  // A reduction whose input only it reads folds into the input's group (which then need not
  // write that value). It must come after every member, so that nothing the group needs can
  // depend on it.
  std::vector<int> reduce_of(groups.size(), -1);
  for (std::size_t i = 0; i < n; ++i) {
    const GraphNode& r = g.nodes[i];
    if (r.kind != NodeKind::kOp || r.inputs.size() != 1 || r.control_input >= 0 || r.outputs.size() != 1 ||
        !r.outputs[0].shape.has_rank() || !fusable_reduce(r.op, r.outputs[0].dtype))
      continue;
    const int m = r.inputs[0].node;
    const int gid = group_of[static_cast<std::size_t>(m)];
    if (gid < 0 || reduce_of[static_cast<std::size_t>(gid)] >= 0 || users.of(m).size() != 1) continue;
    const Group& grp = groups[static_cast<std::size_t>(gid)];
    if (grp.members.back() > static_cast<int>(i)) continue;
    if (folded_reduction(r, grp.shape.rank()) == Folded::kNo) continue;
    reduce_of[static_cast<std::size_t>(gid)] = static_cast<int>(i);
    group_of[i] = gid;
  }

  // Build each program; groups of one op stay as they are unless a reduction joined them.
  struct Fused {
    std::shared_ptr<const FusedProgram> program;
    std::vector<ValueRef> inputs;            // old refs
    std::vector<std::pair<int, int>> output_index;  // (member node, fused output)
  };
  std::vector<Fused> fused(groups.size());
  int count = 0;
  // Per node, while its group's program is built: its step, the immediate it is, or the input
  // slot of its outputs. Indexed by node rather than kept in maps, so that building a program of
  // k steps costs O(k) whatever the graph's size; each group resets what it set.
  CachedVector<int> step_of(n, -1), immediate_of(n, -1);
  // The input slots by value, at first_value[node] + output: one flat array (a list per node
  // was 24 bytes a node, megabytes of fresh pages at 100k nodes).
  CachedVector<std::size_t> first_value(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) first_value[i + 1] = first_value[i] + g.nodes[i].outputs.size();
  CachedVector<int> input_slot_of(first_value[n], -1);
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    const Group& grp = groups[gi];
    const int red = reduce_of[gi];
    if (grp.members.size() < 2 && red < 0 && !computes_bf16(g, g.node(grp.members.front()))) continue;
    FusedProgram p;
    p.shape = grp.shape;
    std::vector<int> touched;                 // nodes whose step_of / immediate_of / input_slot_of is set
    std::vector<std::pair<int, int>> pending;  // (step, arg) holding an immediate index
    Fused& f = fused[gi];
    p.steps.reserve(grp.members.size());
    touched.reserve(grp.members.size());
    for (int m : grp.members) {
      const GraphNode& node = g.node(m);
      FusedStep st;
      st.op = node.op;
      st.in_dtype = operand_dtype(g, node);
      st.out_dtype = node.outputs[0].dtype;
      st.num_args = static_cast<int>(node.inputs.size());
      for (std::size_t a = 0; a < node.inputs.size(); ++a) {
        const ValueRef& in = node.inputs[a];
        const GraphNode& src = g.node_of(in);
        if (group_of[static_cast<std::size_t>(in.node)] == static_cast<int>(gi)) {
          st.args[a] = -2 - step_of[static_cast<std::size_t>(in.node)];  // resolved below, once slots are numbered
        } else if (is_immediate(src)) {
          int& slot = immediate_of[static_cast<std::size_t>(in.node)];
          if (slot < 0) {
            slot = static_cast<int>(p.immediates.size());
            p.immediates.push_back(src.value);
            touched.push_back(in.node);
          }
          pending.emplace_back(static_cast<int>(p.steps.size()), static_cast<int>(a));
          st.args[a] = slot;
        } else {
          int& slot = input_slot_of[first_value[static_cast<std::size_t>(in.node)] + static_cast<std::size_t>(in.output)];
          if (slot < 0) {
            slot = static_cast<int>(p.inputs.size());
            p.inputs.push_back(g.type_of(in));
            f.inputs.push_back(in);
            touched.push_back(in.node);
          }
          st.args[a] = slot;
        }
      }
      step_of[static_cast<std::size_t>(m)] = static_cast<int>(p.steps.size());
      touched.push_back(m);
      p.steps.push_back(st);
    }
    // Slots: inputs, then immediates, then steps.
    const int num_inputs = static_cast<int>(p.inputs.size());
    const int first_step = num_inputs + static_cast<int>(p.immediates.size());
    for (std::size_t k = 0; k < p.steps.size(); ++k) {
      FusedStep& st = p.steps[k];
      for (int a = 0; a < st.num_args; ++a)
        if (st.args[a] <= -2) st.args[a] = first_step + (-2 - st.args[a]);
    }
    for (const auto& [step, arg] : pending) p.steps[static_cast<std::size_t>(step)].args[arg] += num_inputs;
    for (int m : grp.members) {
      bool external = false;
      for (int u : users.of(m)) external |= group_of[static_cast<std::size_t>(u)] != static_cast<int>(gi);
      if (!external) continue;
      f.output_index.emplace_back(m, static_cast<int>(p.outputs.size()));
      p.outputs.push_back(first_step + step_of[static_cast<std::size_t>(m)]);
    }
    if (red >= 0) {
      const GraphNode& r = g.node(red);
      p.reduce.op = r.op;
      p.reduce.slot = first_step + step_of[static_cast<std::size_t>(r.inputs[0].node)];
      p.reduce.over_all = folded_reduction(r, grp.shape.rank()) == Folded::kAll;
      p.reduce.attrs = r.attrs.get<ReduceAttrs>();
      p.reduce.shape = r.outputs[0].shape;
      f.output_index.emplace_back(red, static_cast<int>(p.outputs.size()));
    }
    for (int t : touched) {
      const auto k = static_cast<std::size_t>(t);
      step_of[k] = immediate_of[k] = -1;
      std::fill(input_slot_of.begin() + static_cast<std::ptrdiff_t>(first_value[k]),
                input_slot_of.begin() + static_cast<std::ptrdiff_t>(first_value[k + 1]), -1);
    }
    if (p.outputs.empty() && red < 0) continue;
    f.program = make_fused_program(std::move(p));
    ++count;
  }
  if (!count) return 0;

  // Re-emit in a topological order of units (a node, or a whole fused group), preferring the
  // original order: a group stands where its last member stood. Groups that ended up on a
  // cycle of units are left unfused (their members are emitted one by one) until none is.
  auto unit_of = [&](int i) {
    const int gid = group_of[static_cast<std::size_t>(i)];
    return gid >= 0 && fused[static_cast<std::size_t>(gid)].program ? static_cast<int>(n) + gid : i;
  };
  const std::size_t num_units = n + groups.size();
  std::vector<int> order;
  for (;;) {
    CachedVector<int> key(num_units, -1), indegree(num_units, 0);
    for (std::size_t i = 0; i < n; ++i) {
      const int u = unit_of(static_cast<int>(i));
      key[static_cast<std::size_t>(u)] = std::max(key[static_cast<std::size_t>(u)], static_cast<int>(i));
    }
    // Each unit's successors, in node order, in one flat array (counted, then filled): one
    // allocation, not one per unit.
    auto each_edge = [&](auto&& visit) {
      for (std::size_t i = 0; i < n; ++i) {
        const int u = unit_of(static_cast<int>(i));
        auto edge = [&](int p) {
          if (const int pu = unit_of(p); pu != u) visit(static_cast<std::size_t>(pu), u);
        };
        for (const ValueRef& in : g.nodes[i].inputs) edge(in.node);
        if (g.nodes[i].control_input >= 0) edge(g.nodes[i].control_input);
      }
    };
    CachedVector<std::size_t> succ_start(num_units + 1, 0);
    each_edge([&](std::size_t from, int to) {
      ++succ_start[from + 1];
      ++indegree[static_cast<std::size_t>(to)];
    });
    for (std::size_t u = 0; u < num_units; ++u) succ_start[u + 1] += succ_start[u];
    CachedVector<int> succ(succ_start.back());
    CachedVector<std::size_t> succ_next(succ_start.begin(), succ_start.end() - 1);
    each_edge([&](std::size_t from, int to) { succ[succ_next[from]++] = to; });
    using Item = std::pair<int, int>;  // (key, unit)
    std::priority_queue<Item, std::vector<Item>, std::greater<>> ready;
    for (std::size_t u = 0; u < num_units; ++u)
      if (key[u] >= 0 && indegree[u] == 0) ready.emplace(key[u], static_cast<int>(u));
    order.clear();
    while (!ready.empty()) {
      const int u = ready.top().second;
      ready.pop();
      order.push_back(u);
      for (std::size_t k = succ_start[static_cast<std::size_t>(u)]; k < succ_start[static_cast<std::size_t>(u) + 1]; ++k) {
        const int s = succ[k];
        if (--indegree[static_cast<std::size_t>(s)] == 0) ready.emplace(key[static_cast<std::size_t>(s)], s);
      }
    }
    std::size_t expected = 0;
    int stuck = -1;  // the fused group left on a cycle that stood last
    for (std::size_t u = 0; u < num_units; ++u) {
      expected += key[u] >= 0;
      if (u >= n && key[u] >= 0 && indegree[u] > 0 && (stuck < 0 || key[u] > key[static_cast<std::size_t>(stuck)]))
        stuck = static_cast<int>(u);
    }
    if (order.size() == expected) break;
    TG_CHECK(stuck >= 0, "fusion made a cycle without a fused group on it");
    fused[static_cast<std::size_t>(stuck) - n].program.reset();
    if (--count == 0) return 0;
  }
  GraphRebuilder rebuilt(g);
  for (const int u : order) {
    if (u < static_cast<int>(n)) {
      rebuilt.keep(u);
    } else {
      const Fused& f = fused[static_cast<std::size_t>(u) - n];
      GraphNode node;
      node.kind = NodeKind::kOp;
      node.op = OpId::FusedElementwise;
      node.name = g.unique_name("fused_elementwise");
      node.inputs = f.inputs;
      for (int s : f.program->outputs) node.outputs.push_back(ValueType{f.program->slot_dtype(s), f.program->shape});
      if (f.program->has_reduce())
        node.outputs.push_back(ValueType{f.program->slot_dtype(f.program->reduce.slot), f.program->reduce.shape});
      node.attrs = fused_attrs(f.program);
      const int at = rebuilt.add(std::move(node));
      for (const auto& [member, k] : f.output_index) rebuilt.replace(ValueRef{member, 0}, ValueRef{at, k});
    }
  }
  rebuilt.finish();
  return count;
}

}  // namespace tg::detail
