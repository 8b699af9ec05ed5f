#include "control_flow/subgraph.h"

#include <atomic>

#include "core/check.h"
#include "core/tensor_impl.h"

namespace tg::detail {

namespace {

// Sub-graph ids count down from the top so that they never meet the ids of function graphs.
std::atomic<uint64_t> g_next_subgraph_id{~uint64_t{0}};

// A symbolic tensor's link into a sub-graph being traced.
struct SubgraphValue final : SymbolicValue {
  const SubgraphTracer* tracer = nullptr;
  uint64_t graph_id = 0;
  ValueRef ref;
  std::string node_name;
  std::string label;
  std::string name() const override { return str_cat(node_name, ":", ref.output); }
  std::string origin() const override {
    return str_cat("'", name(), "' of the ", label, " sub-graph (it only exists inside that branch or loop body)");
  }
};

// Installs a recorder for the current thread; restores the previous one on exit. Tapes of the
// enclosing trace ignore the sub-graph's ops (a tape records only its own context); they see
// the cond / while node instead.
class SubgraphScope {
 public:
  explicit SubgraphScope(TraceRecorder* r) : prev_(current_recorder()) { set_current_recorder(r); }
  ~SubgraphScope() { set_current_recorder(prev_); }
  SubgraphScope(const SubgraphScope&) = delete;
  SubgraphScope& operator=(const SubgraphScope&) = delete;

 private:
  TraceRecorder* prev_;
};

}  // namespace

const ControlFlowPayload& payload_of(const OpAttrs& attrs) {
  TG_CHECK(attrs.resource != nullptr, "control-flow op without sub-graphs");
  return *static_cast<const ControlFlowPayload*>(attrs.resource.get());
}

SubgraphTracer::SubgraphTracer(std::string label)
    : graph_(std::make_shared<GraphIR>(g_next_subgraph_id.fetch_sub(1))), label_(std::move(label)) {}

Tensor SubgraphTracer::add_input(const ValueType& type, const std::string& name) {
  GraphNode node;
  node.kind = NodeKind::kPlaceholder;
  node.name = graph_->unique_name(name);
  node.attrs.axis = static_cast<int64_t>(graph_->placeholders.size());
  node.outputs = {type};
  const int idx = graph_->add_node(std::move(node));
  graph_->placeholders.push_back(idx);
  return symbolic_output(idx, 0);
}

std::vector<Tensor> SubgraphTracer::trace(const std::function<std::vector<Tensor>()>& fn) {
  std::vector<Tensor> results;
  {
    SubgraphScope scope(this);
    results = fn();
    for (const Tensor& t : results) {
      GraphNode node;
      node.kind = NodeKind::kOutput;
      node.name = graph_->unique_name("Identity");
      node.inputs = {value_of(t, label_.c_str())};
      node.outputs = {ValueType{t.dtype(), t.shape()}};
      graph_->outputs.push_back(graph_->add_node(std::move(node)));
    }
  }
  return results;
}

std::vector<Tensor> SubgraphTracer::record(OpId id, const std::vector<Tensor>& inputs,
                                           const OpAttrs& attrs,
                                           const std::vector<ValueType>& output_types) {
  const OpDef& def = op_def(id);
  GraphNode node;
  node.kind = NodeKind::kOp;
  node.op = id;
  node.attrs = attrs;
  node.name = graph_->unique_name(node_base_name(id, attrs));
  for (const Tensor& t : inputs) node.inputs.push_back(value_of(t, def.name));
  node.outputs = output_types;
  const bool stateful = def.traits & kStateful;
  if (stateful) node.control_input = last_stateful_;
  const int idx = graph_->add_node(std::move(node));
  if (stateful) {
    last_stateful_ = idx;
    stateful_ = true;
  }
  std::vector<Tensor> out;
  out.reserve(output_types.size());
  for (std::size_t i = 0; i < output_types.size(); ++i) out.push_back(symbolic_output(idx, static_cast<int>(i)));
  return out;
}

ValueRef SubgraphTracer::value_of(const Tensor& t, const char* user) {
  const auto& impl = t.impl();
  if (!impl)
    op_error<ValueError>(user, "an empty tg::Tensor (default-constructed or moved-from) was used in the ",
                         label_, "; assign it a value first");
  if (impl->symbolic) {
    auto* sv = dynamic_cast<const SubgraphValue*>(impl->symbolic.get());
    if (sv && sv->tracer == this && sv->graph_id == graph_->id()) return sv->ref;
    // A value of an enclosing trace: it enters as an extra input of the node. (A tensor that
    // belongs to no enclosing trace is reported when the node itself is recorded.)
    auto it = capture_nodes_.find(impl->symbolic.get());
    if (it != capture_nodes_.end()) return ValueRef{it->second, 0};
    std::string base = impl->symbolic->name();
    base = base.substr(0, base.find(':'));
    add_input(ValueType{impl->dtype, impl->shape}, base.empty() ? "capture" : base);
    const int idx = graph_->placeholders.back();
    capture_nodes_.emplace(impl->symbolic.get(), idx);
    captures_.push_back(t);
    return ValueRef{idx, 0};
  }
  auto it = constants_.find(impl.get());
  if (it != constants_.end()) return ValueRef{it->second, 0};
  const int idx = graph_->add_const(t);
  constants_.emplace(impl.get(), idx);
  return ValueRef{idx, 0};
}

Tensor SubgraphTracer::symbolic_output(int node, int output) {
  auto v = std::make_shared<SubgraphValue>();
  v->tracer = this;
  v->graph_id = graph_->id();
  v->ref = ValueRef{node, output};
  v->node_name = graph_->nodes[static_cast<std::size_t>(node)].name;
  v->label = label_;
  auto impl = std::make_shared<TensorImpl>();
  const ValueType& type = graph_->nodes[static_cast<std::size_t>(node)].outputs[static_cast<std::size_t>(output)];
  impl->dtype = type.dtype;
  impl->shape = type.shape;
  impl->symbolic = std::move(v);
  return Tensor(std::move(impl));
}

void merge_captures(const std::vector<const SubgraphTracer*>& tracers, int first_input,
                    std::vector<Tensor>& inputs, ControlFlowPayload& payload) {
  std::unordered_map<const void*, int> index;  // outer symbolic value -> node input
  for (const SubgraphTracer* t : tracers) {
    std::vector<int> map;
    for (const Tensor& c : t->captures()) {
      auto [it, inserted] = index.try_emplace(c.impl()->symbolic.get(), first_input + static_cast<int>(index.size()));
      if (inserted) inputs.push_back(c);
      map.push_back(it->second);
    }
    payload.capture_inputs.push_back(std::move(map));
  }
}

std::string describe_tensors(const std::vector<Tensor>& ts) {
  std::string s = "(";
  for (std::size_t i = 0; i < ts.size(); ++i)
    s += (i ? ", " : "") + describe(ValueType{ts[i].dtype(), ts[i].shape()});
  return s + (ts.size() == 1 ? ",)" : ")");
}

}  // namespace tg::detail
