// Splits long row-wise chains over a batch into two halves the plan runs side by side
// (split_batch.h).
//
// A recurrent cell called in a C++ loop records its steps one after the other: each step's
// product and small elementwise ops are a serial chain, which a second core does not speed up
// op by op (each op is a few microseconds; handing half of it to the other core costs about as
// much, and the data moves between the cores). Rows of the batch never meet in such a chain,
// so each half of the rows can run the whole chain on one core: the same cut nn::LSTM makes
// between two loops, made here on the graph, where the unrolled form has no loop to cut.
//
// The halves are cond nodes with a constant true predicate: the one node the plan already runs
// beside another (a pure cond or while that does not read the other's results), whose kernel
// runs its sub-graph's own plan. Every node of a chain goes into both sub-graphs with half the
// rows; a value entering the chain from outside is passed whole and each half reads its rows
// (on its own core); a value leaving it is the two halves concatenated after the pair.
#include "passes/split_batch.h"

#include <algorithm>
#include <array>
#include <map>
#include <queue>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "core/thread_pool.h"
#include "ops/fused.h"
#include "ops/matmul.h"
#include "passes/rewrite.h"

namespace tg::detail {

namespace {

// How a row-wise node reads an input: its rows (a view for each half) or whole (a matrix the
// rows are multiplied by, a bias broadcast over the rows).
enum class Use : uint8_t { kRows, kWhole };

bool has_rows(const ValueType& t, int64_t b) {
  return t.dtype != DType::String && t.shape.is_fully_defined() && t.shape.rank() == 2 && t.shape.dims()[0] == b;
}

// A value every row reads alike: of rank below 2, or one row.
bool same_for_every_row(const ValueType& t) {
  return t.shape.is_fully_defined() && (t.shape.rank() < 2 || (t.shape.rank() == 2 && t.shape.dims()[0] == 1));
}

// Whether `node` computes each of its b output rows from the same rows of its row inputs alone;
// `uses` gets how it reads each input.
bool row_wise(const GraphIR& g, const GraphNode& node, int64_t b, std::vector<Use>& uses) {
  if (node.kind != NodeKind::kOp || node.control_input >= 0) return false;
  const OpDef& def = op_def(node.op);
  if (def.traits & (kStateful | kSubgraphs)) return false;
  for (const ValueType& t : node.outputs)
    if (!has_rows(t, b)) return false;
  uses.assign(node.inputs.size(), Use::kRows);
  auto elementwise_inputs = [&] {
    for (std::size_t k = 0; k < node.inputs.size(); ++k) {
      const ValueType& t = g.type_of(node.inputs[k]);
      if (has_rows(t, b)) continue;
      if (!same_for_every_row(t)) return false;
      uses[k] = Use::kWhole;
    }
    return true;
  };
  switch (node.op) {
    case OpId::MatMul: {
      // Rows of A times B: on the own kernels each row's sums are the same whatever the rows,
      // unless the whole product or a half's splits its sums over k.
      const MatMulAttrs& attrs = node.attrs.get<MatMulAttrs>();
      if (attrs.transpose_a || !matmul_on_own_kernels()) return false;
      if (node.outputs[0].dtype != DType::Float32 || !has_rows(g.type_of(node.inputs[0]), b)) return false;
      uses[1] = Use::kWhole;
      const TensorShape& right = g.type_of(node.inputs[1]).shape;
      if (right.rank() != 2 || !right.is_fully_defined()) return false;
      const int64_t k = right.dim(attrs.transpose_b ? 1 : 0), n = right.dim(attrs.transpose_b ? 0 : 1);
      return !matmul_sums_over_k_in_parts(b, n, k, attrs.transpose_b) &&
             !matmul_sums_over_k_in_parts(b / 2, n, k, attrs.transpose_b);
    }
    case OpId::Slice: {
      const SliceAttrs& a = node.attrs.get<SliceAttrs>();
      return has_rows(g.type_of(node.inputs[0]), b) && a.begin.size() == 2 && a.begin[0] == 0 &&
             (a.size[0] == -1 || a.size[0] == b);
    }
    case OpId::Concat: {
      const int64_t axis = node.attrs.get<AxisAttrs>().axis;
      if (axis != 1 && axis != -1) return false;
      for (const ValueRef& in : node.inputs)
        if (!has_rows(g.type_of(in), b)) return false;
      return true;
    }
    case OpId::FusedElementwise:
      // A reduction may run down the columns, across rows.
      return !fused_program(node.attrs).has_reduce() && elementwise_inputs();
    default:
      return (def.traits & kElementwise) && node.outputs.size() == 1 && elementwise_inputs();
  }
}

// The batch: the row count of the most 2-D float32 products (0 when none is even and >= 16).
int64_t batch_rows(const GraphIR& g) {
  std::map<int64_t, int> count;
  for (const GraphNode& node : g.nodes)
    if (node.kind == NodeKind::kOp && node.op == OpId::MatMul && node.outputs[0].shape.is_fully_defined() &&
        node.outputs[0].shape.rank() == 2 && !node.attrs.get<MatMulAttrs>().transpose_a)
      ++count[node.outputs[0].shape.dims()[0]];
  int64_t best = 0;
  int most = 0;
  for (const auto& [rows, n] : count)
    if (rows >= 16 && rows % 2 == 0 && n > most) best = rows, most = n;
  return best;
}

ValueType with_rows(ValueType t, int64_t rows) {
  std::vector<int64_t> dims = t.shape.dims();
  dims[0] = rows;
  t.shape = TensorShape(dims);
  return t;
}

// A chain: its nodes (in node order), the values it reads from outside (each with how), and
// the values others read (its results).
struct Chain {
  std::vector<int> nodes;
  std::vector<std::pair<ValueRef, Use>> inputs;
  std::vector<char> halved;  // per input: a result of an earlier chain, which comes in halves
  std::vector<ValueRef> results;
  // Per result, how nodes of no chain read it: not at all (0); joined, the halves concatenated
  // (1); only by row concatenations, which take the halves (2); by a row concatenation that
  // takes the halves and by others, which read their rows of its result (3, `stacked_in`).
  std::vector<char> read_outside;
  std::vector<int> stacked_in;  // per result of kind 3: the row concatenation (a node of g)
  std::array<std::shared_ptr<const GraphIR>, 2> halves;
};

// Node `node` for a half of `rows` rows: the same op on half the rows.
GraphNode half_node(const GraphNode& node, int64_t b, int64_t rows) {
  GraphNode h;
  h.name = node.name;
  h.kind = NodeKind::kOp;
  h.op = node.op;
  h.attrs = node.attrs;
  for (const ValueType& t : node.outputs) h.outputs.push_back(with_rows(t, rows));
  if (node.op == OpId::Slice) {
    SliceAttrs a = node.attrs.get<SliceAttrs>();
    if (a.size[0] == b) a.size[0] = rows;
    h.attrs = a;
  } else if (node.op == OpId::FusedElementwise) {
    FusedProgram p = fused_program(node.attrs);
    for (ValueType& t : p.inputs)
      if (has_rows(t, b)) t = with_rows(t, rows);
    p.shape = with_rows(ValueType{DType::Float32, p.shape}, rows).shape;
    p.plan = nullptr;
    p.dynamic = nullptr;
    h.attrs = FusedAttrs{make_fused_program(std::move(p))};
  }
  return h;
}

// The sub-graph of one half: rows [first, first + rows) of every value of the chain. Inputs from
// an earlier chain come as that chain's half already (`halved`).
std::shared_ptr<GraphIR> half_graph(const GraphIR& g, const Chain& c, const std::vector<char>& halved, int64_t b,
                                    int64_t first, int64_t rows) {
  auto sub = std::make_shared<GraphIR>(new_graph_id());
  std::unordered_map<int, int> at;  // node of g -> node of sub
  std::map<std::tuple<int, int, int>, ValueRef> entering;  // (node, output, use) -> value in sub
  for (std::size_t k = 0; k < c.inputs.size(); ++k) {
    const auto& [ref, use] = c.inputs[k];
    GraphNode p;
    p.kind = NodeKind::kPlaceholder;
    p.name = sub->unique_name("input");
    p.outputs = {halved[k] ? with_rows(g.type_of(ref), rows) : g.type_of(ref)};
    p.input_index = static_cast<int>(sub->placeholders.size());
    const int pi = sub->add_node(std::move(p));
    sub->placeholders.push_back(pi);
    ValueRef v{pi, 0};
    if (use == Use::kRows && !halved[k]) {
      // The half's rows of a whole value: a view of it as its two halves, not a slice's copy
      // (33 of them a half in the unrolled LSTM step, ~45 us of each half's run).
      const ValueType& t = g.type_of(ref);
      GraphNode halves;
      halves.kind = NodeKind::kOp;
      halves.op = OpId::Reshape;
      halves.name = sub->unique_name("halves");
      halves.attrs = ReshapeAttrs{{2, rows, t.shape.dim(1)}};
      halves.inputs = {v};
      halves.outputs = {ValueType{t.dtype, TensorShape({2, rows, t.shape.dim(1)})}};
      GraphNode own;
      own.kind = NodeKind::kOp;
      own.op = OpId::Index;
      own.name = sub->unique_name("rows");
      own.attrs = IndexAttrs{first / rows};
      own.inputs = {ValueRef{sub->add_node(std::move(halves)), 0}};
      own.outputs = {with_rows(t, rows)};
      v = ValueRef{sub->add_node(std::move(own)), 0};
    }
    entering[{ref.node, ref.output, static_cast<int>(use)}] = v;
  }
  std::vector<Use> uses;
  for (int i : c.nodes) {
    const GraphNode& node = g.node(i);
    TG_CHECK(row_wise(g, node, b, uses), "split_batch: node '", node.name, "' is no longer row-wise");
    GraphNode h = half_node(node, b, rows);
    h.name = sub->unique_name(node.name);
    for (std::size_t k = 0; k < node.inputs.size(); ++k) {
      const ValueRef in = node.inputs[k];
      if (auto it = at.find(in.node); it != at.end()) h.inputs.push_back(ValueRef{it->second, in.output});
      else h.inputs.push_back(entering.at({in.node, in.output, static_cast<int>(uses[k])}));
    }
    at[i] = sub->add_node(std::move(h));
  }
  for (const ValueRef& r : c.results) {
    GraphNode o;
    o.kind = NodeKind::kOutput;
    o.name = sub->unique_name("Identity");
    o.inputs = {ValueRef{at.at(r.node), r.output}};
    o.outputs = {with_rows(g.type_of(r), rows)};
    sub->outputs.push_back(sub->add_node(std::move(o)));
  }
  return sub;
}

bool is_row_concat(const GraphNode& node) {
  return node.kind == NodeKind::kOp && node.op == OpId::Concat && node.attrs.get<AxisAttrs>().axis == 0;
}

// Whether row concatenation `cat` stacks results of chain `l` alone, all of one shape: its
// result is then those values one after the other, and each one's rows a view of it. Reading
// only that chain, it comes before every other reader of those results.
bool stacks_results_of(const GraphIR& g, const GraphNode& cat, const std::vector<int>& chain_of, int l) {
  const ValueType& first = g.type_of(cat.inputs[0]);
  for (const ValueRef& in : cat.inputs) {
    const ValueType& t = g.type_of(in);
    if (chain_of[static_cast<std::size_t>(in.node)] != l || t.dtype != first.dtype || t.shape.dims() != first.shape.dims())
      return false;
  }
  return true;
}

}  // namespace

int split_batch_chains(GraphIR& g) {
  if (num_threads() < 2) return 0;
  const int64_t b = batch_rows(g);
  if (b == 0) return 0;
  const std::size_t n = g.nodes.size();
  // Row-wise nodes whose whole inputs come from outside them, and their chains: a node's chain
  // is the most times a path to it leaves row-wise nodes and comes back (so no path leaves a
  // chain and comes back to it).
  std::vector<char> rows(n, 0);
  std::vector<int> level(n, 0);  // row-wise: its chain; other: 1 + the last chain it reads
  std::vector<Use> uses;
  for (std::size_t i = 0; i < n; ++i) {
    const GraphNode& node = g.nodes[i];
    bool r = row_wise(g, node, b, uses);
    for (std::size_t k = 0; r && k < node.inputs.size(); ++k)
      r = uses[k] == Use::kRows || !rows[static_cast<std::size_t>(node.inputs[k].node)];
    rows[i] = r;
    int l = 0;
    for (const ValueRef& in : node.inputs) {
      const auto j = static_cast<std::size_t>(in.node);
      l = std::max(l, rows[j] && !r ? level[j] + 1 : level[j]);
    }
    if (node.control_input >= 0) l = std::max(l, level[static_cast<std::size_t>(node.control_input)]);
    level[i] = l;
  }
  std::map<int, Chain> chains;
  for (std::size_t i = 0; i < n; ++i)
    if (rows[i]) chains[level[i]].nodes.push_back(static_cast<int>(i));
  for (auto it = chains.begin(); it != chains.end();) {
    if (it->second.nodes.size() >= kMinSplitNodes) {
      ++it;
      continue;
    }
    for (int i : it->second.nodes) rows[static_cast<std::size_t>(i)] = 0;
    it = chains.erase(it);
  }
  if (chains.empty()) return 0;
  std::vector<int> chain_of(n, -1);
  for (const auto& [l, c] : chains)
    for (int i : c.nodes) chain_of[static_cast<std::size_t>(i)] = l;

  // Each chain's inputs and results.
  const NodeUsers users = g.users();
  std::map<std::pair<int, int>, std::pair<int, std::size_t>> result_index;  // value -> (chain, result)
  for (auto& [l, c] : chains) {
    for (int i : c.nodes) {
      const GraphNode& node = g.node(i);
      row_wise(g, node, b, uses);
      for (std::size_t k = 0; k < node.inputs.size(); ++k) {
        const ValueRef in = node.inputs[k];
        if (chain_of[static_cast<std::size_t>(in.node)] == l) continue;
        const std::pair<ValueRef, Use> key{in, uses[k]};
        if (std::find(c.inputs.begin(), c.inputs.end(), key) == c.inputs.end()) c.inputs.push_back(key);
      }
      for (std::size_t o = 0; o < node.outputs.size(); ++o) {
        bool outside = false;
        for (int u : users.of(i)) {
          if (chain_of[static_cast<std::size_t>(u)] == l) continue;
          for (const ValueRef& in : g.node(u).inputs) outside |= in == ValueRef{i, static_cast<int>(o)};
        }
        if (!outside) continue;
        const ValueRef r{i, static_cast<int>(o)};
        char by_other = 0;
        bool only_row_concats = true, only_ops = true;
        int stacked = -1;
        for (int u : users.of(i)) {
          if (chain_of[static_cast<std::size_t>(u)] >= 0) continue;
          const GraphNode& user = g.node(u);
          if (std::find(user.inputs.begin(), user.inputs.end(), r) == user.inputs.end()) continue;
          by_other = 1;
          only_ops &= user.kind == NodeKind::kOp;
          if (!is_row_concat(user)) only_row_concats = false;
          else if (stacked < 0 && stacks_results_of(g, user, chain_of, l)) stacked = u;
        }
        if (by_other && only_row_concats) by_other = 2;
        else if (by_other && only_ops && stacked >= 0) by_other = 3;
        result_index[{i, static_cast<int>(o)}] = {l, c.results.size()};
        c.results.push_back(r);
        c.read_outside.push_back(by_other);
        c.stacked_in.push_back(by_other == 3 ? stacked : -1);
      }
    }
  }
  // The halves, while every node is still in place (the rebuild below moves them out).
  const int64_t half = b / 2;
  for (auto& [l, c] : chains) {
    for (const auto& in : c.inputs) c.halved.push_back(chain_of[static_cast<std::size_t>(in.first.node)] >= 0);
    for (int h = 0; h < 2; ++h) c.halves[static_cast<std::size_t>(h)] = half_graph(g, c, c.halved, b, h * half, half);
  }

  // The new node order: a topological order of the other nodes and the chains (each one unit),
  // by first node index among those ready.
  std::vector<int> pending(n, 0);      // per node: inputs not placed yet (a chain: on its first node)
  auto unit = [&](int i) { const int l = chain_of[static_cast<std::size_t>(i)]; return l < 0 ? i : chains.at(l).nodes[0]; };
  std::vector<std::vector<int>> waiting(n);  // per unit: units that wait for it
  for (std::size_t i = 0; i < n; ++i) {
    const int u = unit(static_cast<int>(i));
    const GraphNode& node = g.nodes[i];
    std::vector<int> deps;
    for (const ValueRef& in : node.inputs) {
      deps.push_back(unit(in.node));
      // A reader of a stacked result reads its rows of the stacking concatenation.
      if (chain_of[i] >= 0 || is_row_concat(node)) continue;
      if (auto it = result_index.find({in.node, in.output}); it != result_index.end()) {
        const Chain& c = chains.at(it->second.first);
        if (c.read_outside[it->second.second] == 3) deps.push_back(unit(c.stacked_in[it->second.second]));
      }
    }
    if (node.control_input >= 0) deps.push_back(unit(node.control_input));
    for (int d : deps) {
      if (d == u) continue;
      if (std::find(waiting[static_cast<std::size_t>(d)].begin(), waiting[static_cast<std::size_t>(d)].end(), u) !=
          waiting[static_cast<std::size_t>(d)].end())
        continue;
      waiting[static_cast<std::size_t>(d)].push_back(u);
      ++pending[static_cast<std::size_t>(u)];
    }
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (std::size_t i = 0; i < n; ++i)
    if (unit(static_cast<int>(i)) == static_cast<int>(i) && pending[i] == 0) ready.push(static_cast<int>(i));

  GraphRebuilder out(g);
  int pred = -1;
  std::map<int, std::array<int, 2>> halves_at;  // chain -> its two cond nodes in the new graph
  std::size_t placed = 0;
  while (!ready.empty()) {
    const int u = ready.top();
    ready.pop();
    ++placed;
    const int l = chain_of[static_cast<std::size_t>(u)];
    if (l < 0) {
      const GraphNode& node = g.node(u);
      auto halves_of = [&](const ValueRef& in) -> const std::pair<int, std::size_t>* {
        auto it = result_index.find({in.node, in.output});
        return it != result_index.end() && chains.at(it->second.first).read_outside[it->second.second] >= 2 ? &it->second
                                                                                                           : nullptr;
      };
      bool takes_halves = false;
      if (is_row_concat(node))
        for (const ValueRef& in : node.inputs) takes_halves |= halves_of(in) != nullptr;
      if (!takes_halves) {
        out.keep(u);
      } else {
        // A concatenation of rows takes the halves' rows in their place: the same rows in the same order.
        GraphNode cat;
        cat.kind = node.kind;
        cat.op = node.op;
        cat.name = node.name;
        cat.attrs = node.attrs;
        cat.outputs = node.outputs;
        for (const ValueRef& in : node.inputs) {
          if (const auto* r = halves_of(in)) {
            for (int h = 0; h < 2; ++h)
              cat.inputs.push_back(ValueRef{halves_at.at(r->first)[static_cast<std::size_t>(h)], static_cast<int>(r->second)});
          } else {
            cat.inputs.push_back(out.now(in));
          }
        }
        const int stacked = out.add_built(std::move(cat));
        out.replace(ValueRef{u, 0}, ValueRef{stacked, 0});
        // The other readers of a result it stacks read their rows of it: a view, no copy.
        int steps = -1;
        for (std::size_t p = 0; p < node.inputs.size(); ++p) {
          const auto* r = halves_of(node.inputs[p]);
          if (!r) continue;
          const Chain& c = chains.at(r->first);
          if (c.read_outside[r->second] != 3 || c.stacked_in[r->second] != u) continue;
          if (std::find(node.inputs.begin(), node.inputs.begin() + static_cast<std::ptrdiff_t>(p), node.inputs[p]) !=
              node.inputs.begin() + static_cast<std::ptrdiff_t>(p))
            continue;  // stacked twice: the first one's rows
          const ValueType& t = g.type_of(node.inputs[p]);
          if (steps < 0) {
            GraphNode reshape;
            reshape.kind = NodeKind::kOp;
            reshape.op = OpId::Reshape;
            reshape.name = g.unique_name("batch_halves/stacked");
            const int64_t count = static_cast<int64_t>(node.inputs.size());
            reshape.attrs = ReshapeAttrs{{count, t.shape.dim(0), t.shape.dim(1)}};
            reshape.inputs = {ValueRef{stacked, 0}};
            reshape.outputs = {ValueType{t.dtype, TensorShape({count, t.shape.dim(0), t.shape.dim(1)})}};
            steps = out.add_built(std::move(reshape));
          }
          GraphNode rows;
          rows.kind = NodeKind::kOp;
          rows.op = OpId::Index;
          rows.name = g.unique_name("batch_halves/stacked_rows");
          rows.attrs = IndexAttrs{static_cast<int64_t>(p)};
          rows.inputs = {ValueRef{steps, 0}};
          rows.outputs = {t};
          out.replace(node.inputs[p], ValueRef{out.add_built(std::move(rows)), 0});
        }
      }
    } else {
      const Chain& c = chains.at(l);
      if (pred < 0) {
        GraphNode p;
        p.kind = NodeKind::kConst;
        p.name = g.unique_name("batch_halves/pred");
        p.value = allocate_tensor(DType::Bool, TensorShape{});
        *reinterpret_cast<bool*>(bytes_of(p.value)) = true;
        p.outputs = {ValueType{DType::Bool, TensorShape{}}};
        pred = out.add_built(std::move(p));
      }
      const std::vector<char>& halved = c.halved;
      std::array<int, 2> conds{};
      for (int h = 0; h < 2; ++h) {
        auto payload = std::make_shared<ControlFlowPayload>();
        const std::shared_ptr<const GraphIR>& sub = c.halves[static_cast<std::size_t>(h)];
        payload->subgraphs = {{"then_branch", sub}, {"else_branch", sub}};
        payload->name = "batch_halves";
        std::vector<int> captures;
        for (std::size_t k = 0; k < c.inputs.size(); ++k) captures.push_back(static_cast<int>(k) + 1);
        payload->capture_inputs = {captures, captures};
        for (const ValueRef& r : c.results) payload->output_types.push_back(with_rows(g.type_of(r), half));
        GraphNode cn;
        cn.kind = NodeKind::kOp;
        cn.op = OpId::Cond;
        cn.name = g.unique_name(h == 0 ? "batch_halves/first" : "batch_halves/second");
        for (const ValueType& t : payload->output_types) cn.outputs.push_back(t);
        cn.attrs = ControlFlowAttrs{payload};
        cn.inputs.push_back(ValueRef{pred, 0});
        for (std::size_t k = 0; k < c.inputs.size(); ++k) {
          const ValueRef in = c.inputs[k].first;
          if (halved[k]) {
            const auto [from, j] = result_index.at({in.node, in.output});
            cn.inputs.push_back(ValueRef{halves_at.at(from)[static_cast<std::size_t>(h)], static_cast<int>(j)});
          } else {
            cn.inputs.push_back(out.now(in));
          }
        }
        conds[static_cast<std::size_t>(h)] = out.add_built(std::move(cn));
      }
      halves_at[l] = conds;
      // Results read outside the chains: the halves' rows, concatenated.
      for (std::size_t j = 0; j < c.results.size(); ++j) {
        const ValueRef r = c.results[j];
        if (c.read_outside[j] != 1) continue;
        GraphNode cat;
        cat.kind = NodeKind::kOp;
        cat.op = OpId::Concat;
        cat.name = g.unique_name("batch_halves/concat");
        cat.attrs = AxisAttrs{0};
        cat.inputs = {ValueRef{conds[0], static_cast<int>(j)}, ValueRef{conds[1], static_cast<int>(j)}};
        cat.outputs = {g.type_of(r)};
        out.replace(r, ValueRef{out.add_built(std::move(cat)), 0});
      }
    }
    for (int w : waiting[static_cast<std::size_t>(u)])
      if (--pending[static_cast<std::size_t>(w)] == 0) ready.push(w);
  }
  std::size_t units = 0;
  for (std::size_t i = 0; i < n; ++i) units += unit(static_cast<int>(i)) == static_cast<int>(i);
  TG_CHECK(placed == units, "split_batch: the chains left a cycle (", placed, " of ", units, " placed)");
  out.finish();
  return static_cast<int>(chains.size());
}

}  // namespace tg::detail
