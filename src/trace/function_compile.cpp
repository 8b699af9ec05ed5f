// The compile driver: what happens when a call of a tg::function finds no concrete function
// (dispatch, function_dispatch.cpp, calls FunctionCore::trace). It runs the body with a recorder
// installed - twice when the first trace creates Variables (the singleton-Variable rule) - under
// the checks a trace needs (a function tracing itself for the same types, the max_traces limit),
// generalises the call's types under reduce_retracing, and turns the graph into a concrete
// function (make_concrete: optimise, plan, describe the collectives), which it adds to the
// cache. Loading an exported function builds its concrete functions with make_concrete too.
// Nothing here runs on the cached path.
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "graph/graph_ir.h"
#include "ops/collective.h"
#include "ops/op.h"
#include "ops/record_mode.h"
#include "ops/variable_creation.h"
#include "passes/passes.h"
#include "runtime/executor.h"
#include "trace/concrete.h"
#include "trace/diagnostics.h"
#include "trace/function_core.h"
#include "trace/function_state.h"
#include "trace/recorder.h"
#include "trace/trace_diff.h"

namespace tg::detail {

std::string describe_output(const Tensor& t) {
  if (!t.defined()) return "None";
  return TensorSpec(detail::static_shape(t), t.dtype()).to_string();
}

namespace {
// One line per collective, in the order the ranks run them; a cond's or a while loop's
// sub-graphs are listed under their node, indented.
void describe_collectives(const GraphIR& g, const std::string& indent, std::string& out) {
  for (const GraphNode& node : g.nodes) {
    if (node.kind != NodeKind::kOp) continue;
    if (is_collective(node.op)) {
      out += str_cat(indent, op_def(node.op).name, "(", format_attrs(node.attrs), ")");
      for (std::size_t i = 0; i < node.inputs.size(); ++i) {
        ValueType t = g.type_of(node.inputs[i]);
        // The rows each rank gathers may differ; only the rest of the shape must agree.
        const bool rows_differ = (node.op == OpId::AllGather && i == 0) || (node.op == OpId::AllGatherGrad && i == 1);
        if (rows_differ && t.shape.has_rank() && t.shape.rank() > 0) {
          std::vector<int64_t> dims = t.shape.dims();
          dims[0] = None;
          t.shape = TensorShape(dims);
        }
        out += str_cat(i ? ", " : " of ", to_string(t.dtype), " ", t.shape.to_string());
      }
      out += "\n";
    }
    for (const NamedSubgraph& sub : subgraphs_of(node)) {
      std::string inner;
      describe_collectives(*sub.graph, indent + "  ", inner);
      if (!inner.empty()) out += str_cat(indent, node.name, " ", sub.role, ":\n", inner);
    }
  }
}

// Marks a trace of `core` for `types` as in progress on this thread while it lives; the marks
// link the enclosing ones, innermost first.
class TraceInProgress {
 public:
  TraceInProgress(const FunctionCore* core, const std::vector<TraceTypePtr>* types);
  const FunctionCore* core() const { return core_; }
  const std::vector<TraceTypePtr>& types() const { return *types_; }
  const TraceInProgress* enclosing() const { return installed_.previous(); }

 private:
  const FunctionCore* core_;
  const std::vector<TraceTypePtr>* types_;
  ScopedThreadValue<const TraceInProgress*> installed_;
};

// The innermost trace being recorded on this thread (TraceInProgress).
thread_local const TraceInProgress* t_traces_in_progress = nullptr;

TraceInProgress::TraceInProgress(const FunctionCore* core, const std::vector<TraceTypePtr>* types)
    : core_(core), types_(types), installed_(t_traces_in_progress, this) {}

// A trace of `core` for these types already in progress on this thread: the body called its
// own function with the arguments it is being traced for, which would trace forever. Other
// types are fine (recursion over a literal traces once per level, as in TF).
void check_not_in_progress(const FunctionCore* core, const std::vector<TraceTypePtr>& types,
                           const std::vector<std::string>& names) {
  for (const TraceInProgress* active = t_traces_in_progress; active; active = active->enclosing())
    if (active->core() == core && same_types(active->types(), types))
      throw StagingError(str_cat(
          "function '", core->name(), "' called itself while it was being traced, with the argument "
          "types of the trace in progress ", FunctionTypeKey{types, names, 0}.to_string(),
          ", so the trace would never end. ",
          core->diagnostics().language() == AdviceLanguage::kPython
              ? "A recursion that ends on a Python value (n - 1) traces once per level; one that ends on a "
                "tensor's value needs a loop: tg.while_loop, or a `while` that AutoGraph converts"
              : "A recursion that ends on a C++ literal argument (n - 1) traces once per level; one that "
                "ends on a tensor's value needs tg::while_loop"));
}

// Where an error escaping a traced body came from: C++ has no user frames to print (TF's
// tracebacks), so the message carries them. `index` counts from 0 like trace_history().
std::string trace_context(const std::string& function, int64_t index, const FunctionTypeKey& type) {
  std::string s = "(while tracing function '";
  s += function;
  s += "', trace ";
  s += std::to_string(index + 1);
  s += ", for ";
  s += type.to_string();
  s += ")";
  return s;
}

}  // namespace

std::shared_ptr<ConcreteImpl> FunctionCore::trace(std::vector<TraceTypePtr> target, std::size_t h,
                                                  uint64_t call_number, TraceBody body) {
  State& s = *state_;
  check_not_in_progress(this, target, s.signature ? s.signature->names : s.names_for(target.size()));
  std::lock_guard trace_lock(s.trace_mu);
  if (auto cf = s.lookup(target, h)) return cf;  // traced by another thread meanwhile
  const FunctionTypeKey call{target, s.signature ? s.signature->names : s.names_for(target.size()), h};
  s.diag->observe(call);
  TraceRecord record = s.diag->explain(call, concrete_functions(), s.options.reduce_retracing,
                                       s.options.max_cached_traces);
  bool generalised = false;
  if (s.options.reduce_retracing && !s.signature) {
    std::vector<std::string> kept;
    target = s.generalise(target, kept);
    generalised = !FunctionTypeKey{target, {}, 0}.is_subtype_of(call.params);
    if (generalised) check_not_in_progress(this, target, call.names);
    if (!kept.empty()) record.reason += s.diag->kept_static_dims_note(kept);
  }

  const int64_t index = s.tracing_count.load();
  if (s.options.max_traces > 0 && index >= s.options.max_traces)  // 0: no limit (services)
    throw RetracingLimitError(s.diag->limit_message(index, call));

  // The singleton-Variable rule (as in TensorFlow): only the first trace may create Variables,
  // and a first trace that did is traced once more, now without creating any, so that a body
  // creating a Variable on *every* call fails at once instead of leaking one per call. The
  // second pass's graph is the one kept - unless the first pass created a Variable from the
  // inputs: only its graph sets that Variable's value (at its first run), so it is kept, and
  // the second pass was the check alone.
  struct Pass {
    std::shared_ptr<GraphIR> graph;
    TraceOutput out;
    StaticDimReads static_reads;
    std::vector<std::shared_ptr<VariableState>> variable_parameters;
  };
  Pass kept;                         // what the concrete function is made of
  std::optional<Pass> initializing;  // a first pass that created Variables from the inputs
  const bool first = index == 0;
  for (int pass = 0; pass < 2; ++pass) {
    GraphRecorder recorder(CapturePolicy::kReject, s.options.name, index, s.variable_parameters.get());
    kept.graph = recorder.graph();
    VariableCreationPolicy policy{first && pass == 0, 0, s.options.name, 0, index + 1,
                                  diagnostics().language() == AdviceLanguage::kPython};
    try {
      TraceInProgress in_progress(this, &target);
      RecorderScope recording(&recorder);
      RecordEveryOpScope graph_mode(policy.python);
      VariablePolicyScope variables(&policy);
      kept.out = body(target, recorder);
      recorder.add_outputs(kept.out.outputs, "function output");
    } catch (Error& e) {
      e.add_context(trace_context(s.options.name, index, FunctionTypeKey{target, call.names, 0}));
      throw;
    }
    kept.static_reads = recorder.static_dim_reads();
    kept.variable_parameters = recorder.variable_parameters();
    if (policy.created == 0) break;
    if (policy.initialized_from_inputs > 0) initializing = kept;
  }
  if (initializing) kept = std::move(*initializing);
  for (TraceTypePtr& t : target) t = with_object_snapshots(t);  // the values the graph baked in
  ConcreteParts parts;
  parts.function_name = s.options.name;
  parts.index = index;
  parts.input_type = FunctionTypeKey{target, s.signature ? s.signature->names : s.names_for(target.size()),
                                     hash_types(target)};
  parts.graph = std::move(kept.graph);
  parts.optimize = s.options.optimize;
  parts.variable_parameters = std::move(kept.variable_parameters);
  parts.skeleton = std::move(kept.out.skeleton);
  parts.output_description = kept.out.description;
  std::shared_ptr<ConcreteImpl> cf = make_concrete(std::move(parts));
  cf->last_used.store(s.diag->calls(), std::memory_order_relaxed);
  {
    std::unique_lock lock(s.mu);
    if (s.options.max_cached_traces > 0 &&
        static_cast<int64_t>(s.concretes.size()) >= s.options.max_cached_traces)
      s.evict_one();
    s.concretes.push_back(cf);
    s.clear_fast();
    s.exact.emplace(cf->input_type.hash, cf.get());
    s.tracing_count.fetch_add(1);
  }
  s.static_dims.insert(kept.static_reads.begin(), kept.static_reads.end());
  s.diag->note_static_dims(s.static_dims);
  s.diag->on_traced(std::move(record), cf->input_type, generalised, call_number);
  return cf;
}

std::shared_ptr<ConcreteImpl> make_concrete(ConcreteParts parts) {
  std::shared_ptr<GraphIR>& graph = parts.graph;
  std::shared_ptr<const GraphIR> unoptimized;
  if (parts.optimize) {
    unoptimized = graph->copy_without_name_registry();  // only the optimised graph names nodes
    optimize_graph(graph, parts.function_name + ".trace" + std::to_string(parts.index));
  }
  auto cf = std::make_shared<ConcreteImpl>();
  cf->unoptimized_ir = std::move(unoptimized);
  cf->self = cf;
  cf->function_name = std::move(parts.function_name);
  cf->index = parts.index;
  cf->input_type = std::move(parts.input_type);
  cf->ir = graph;
  cf->plan = make_plan(*graph);
  cf->graph = std::make_unique<Graph>(cf->unoptimized_ir ? cf->unoptimized_ir : graph);
  cf->optimized_graph = std::make_unique<Graph>(graph);
  cf->variable_parameters = std::move(parts.variable_parameters);
  cf->skeleton = std::move(parts.skeleton);
  cf->output_description = std::move(parts.output_description);
  describe_collectives(cf->unoptimized_ir ? *cf->unoptimized_ir : *graph, "", cf->collective_sequence);
  return cf;
}

}  // namespace tg::detail
