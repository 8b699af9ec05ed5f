// The pass pipeline: the passes and their order, in one place.
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "passes/batch_products.h"
#include "passes/bf16_operand_casts.h"
#include "passes/passes.h"
#include "passes/split_batch.h"
#include "graph/verify.h"
#include "tracegraph/graph.h"

namespace tg::detail {

namespace {

struct Pass {
  const char* name;
  int (*run)(GraphIR&);
  // Whether the pass also runs on a cond branch or loop body when its node is built. Not
  // simplification (it runs with the parent graph's pipeline, simplify_subgraphs below, so that
  // optimize = false keeps a sub-graph as written), and never fusion: control-flow gradients
  // replay sub-graph ops through the tape, and fused ops have no gradient (fuse_subgraphs fuses
  // them once the whole graph is final).
  bool on_new_subgraphs;
};
// The one pass list, for graphs and sub-graphs. Simplification first removes no-op nodes, and
// hand-written gradient steps become one-pass updates (their products die); folding then creates dead inputs and duplicate constants; CSE merges, DCE sweeps; fusion runs
// on the final set of ops, products take in the fused nodes that finish them, an optimizer's
// updates become one node, and a last DCE drops those products and the constants that fused
// programs took in as immediates.
constexpr Pass kPipeline[] = {
    {"simplify", &simplify_algebra, false},
    {"fold_scaled_updates", &fold_scaled_updates, false},
    {"batch_products", &batch_independent_products, false},  // before folding: it folds their operands' concat
    {"merge_product_sums", &merge_product_sums, false},  // before CSE: it shares the batches' concats
    {"constant_fold", &fold_constants, true},
    {"cse", &eliminate_common_subexpressions, true},
    {"dce", &eliminate_dead_code, true},
    {"fuse_elementwise", &fuse_elementwise, false},
    {"fuse_product_epilogues", &fuse_product_epilogues, false},
    {"group_updates", &group_variable_updates, false},
    {"bf16_product_casts", &take_bf16_product_casts, false},  // after fusion: a bfloat16 product's float32 cast
    {"dce", &eliminate_dead_code, false},
};

std::atomic<bool>& verify_flag() {
#ifdef NDEBUG
  static std::atomic<bool> on{std::getenv("TG_VERIFY_GRAPHS") != nullptr};
#else
  static std::atomic<bool> on{true};
#endif
  return on;
}

void dump(const std::shared_ptr<GraphIR>& g, const std::string& label, int step, const char* pass) {
  const char* dir = std::getenv("TG_DUMP_GRAPHS");  // read per trace: tracing is rare
  if (!dir || !*dir) return;
  std::filesystem::create_directories(dir);
  std::string safe;
  for (char c : label) safe += std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ? c : '_';
  const std::string base = std::string(dir) + "/" + safe + "." + (step < 10 ? "0" : "") + std::to_string(step) + "." + pass;
  Graph view(g);
  std::ofstream(base + ".txt") << view.to_string();
  std::ofstream(base + ".dot") << view.to_dot();
}

// Runs `rewrite` (a pass that returns its number of changes) over the sub-graphs of cond/while
// nodes, innermost first. Payloads and sub-graphs are shared (a node's copies, gradient
// functions), so each rewritten one is a fresh copy.
template <class Rewrite>
int rewrite_subgraphs(GraphIR& g, const Rewrite& rewrite) {
  int changed = 0;
  for (GraphNode& node : g.nodes) {
    if (node.kind != NodeKind::kOp || !has_subgraphs(node.op)) continue;
    auto payload = std::make_shared<ControlFlowPayload>(*node.attrs.get<ControlFlowAttrs>().payload);
    int here = 0;
    for (NamedSubgraph& sub : payload->subgraphs) {
      auto copy = std::make_shared<GraphIR>(*sub.graph);
      int n = rewrite_subgraphs(*copy, rewrite);  // innermost first
      n += rewrite(*copy);
      if (!n) continue;
      sub.graph = std::move(copy);
      here += n;
    }
    if (!here) continue;
    node.attrs = ControlFlowAttrs{std::move(payload)};
    changed += here;
  }
  return changed;
}

// Simplification only (and the sweep after it) while the graph may still be differentiated: the
// control-flow gradients replay sub-graph ops through the tape, and fused ops have no gradient.
int simplify_subgraphs(GraphIR& g) {
  return rewrite_subgraphs(g, [](GraphIR& sub) {
    const int n = simplify_algebra(sub);
    if (n) eliminate_dead_code(sub);
    return n;
  });
}

// Fusion, as the main pipeline fuses the graph: at the end of optimize_graph nothing
// differentiates the graph any more (a concrete function's gradient and its exports read the
// graph as traced, which keeps the sub-graphs as they were), so a loop body runs the same fused
// kernels as the same code unrolled.
int fuse_subgraphs(GraphIR& g) {
  return rewrite_subgraphs(g, [](GraphIR& sub) {
    int n = fuse_elementwise(sub);
    n += fuse_product_epilogues(sub);
    if (n) eliminate_dead_code(sub);
    return n;
  });
}

}  // namespace

void set_verify_graphs(bool enabled) { verify_flag().store(enabled); }

void optimize_subgraph(GraphIR& g) {
  verify_graph(g, "sub-graph tracing");
  for (const Pass& p : kPipeline)
    if (p.on_new_subgraphs) p.run(g);
  verify_graph(g, "sub-graph optimisation");
}

void optimize_graph(const std::shared_ptr<GraphIR>& g, const std::string& label) {
  const bool verify = verify_flag().load();
  if (verify) verify_graph(*g, "tracing");
  dump(g, label, 0, "traced");
  int step = 1;
  if (simplify_subgraphs(*g)) {
    if (verify) verify_graph(*g, "simplify_subgraphs");
    dump(g, label, 0, "simplify_subgraphs");  // keeps the numbers of the main passes
  }
  for (const Pass& p : kPipeline) {
    p.run(*g);
    if (verify) verify_graph(*g, p.name);
    dump(g, label, step++, p.name);
  }
  if (fuse_subgraphs(*g)) {
    if (verify) verify_graph(*g, "fuse_subgraphs");
    dump(g, label, step++, "fuse_subgraphs");
  }
  // Last: its halves are sub-graphs of the final ops, which no later pass looks into.
  if (split_batch_chains(*g)) {
    if (verify) verify_graph(*g, "split_batch");
    dump(g, label, step++, "split_batch");
  }
  // Passes that drop nodes keep the node array's capacity; the optimised graph is kept for as
  // long as its concrete function, usually at a fraction of the traced size (a fused chain).
  g->nodes.shrink_to_fit();
}

}  // namespace tg::detail
