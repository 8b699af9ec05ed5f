#include "trace/recorder.h"

#include <atomic>
#include <cctype>
#include <cstring>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "ops/known_values.h"

namespace tg::detail {

namespace {

// A symbolic tensor's link to the graph value it stands for.
struct RecordedValue : SymbolicValue {
  uint64_t graph_id = 0;
  ValueRef ref;
  std::string node_name;
  std::shared_ptr<const std::string> origin_suffix;  // "function 'f' (trace 1)", ...
  std::string name() const override { return str_cat(node_name, ":", ref.output); }
  std::string origin() const override { return str_cat("'", name(), "' of ", *origin_suffix); }
};

// A tensor argument of a function's trace: remembers which of its dims the body read as
// integers, so that reduce_retracing and the suggested signature never relax them.
struct ArgumentValue final : RecordedValue {
  std::string path;                        // the argument path: "x", "batch[1]"
  const TraceRecorder* recorder = nullptr;  // the trace it belongs to
  std::shared_ptr<StaticDimReads> reads;
  void on_static_dims_read(int64_t dim) const override {
    // Only while its own trace runs (on the tracing thread); a leaked tensor records nothing.
    if (current_recorder() == recorder) reads->emplace(path, dim);
  }
};

}  // namespace

std::string placeholder_name(const std::string& path, const char* fallback) {
  std::string out;
  for (char c : path) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') out += c;
    else if ((c == '[' || c == '.') && !out.empty() && out.back() != '_') out += '_';
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out.empty() ? fallback : out;
}

GraphRecorder::GraphRecorder(CapturePolicy policy, std::string label, int64_t trace_index,
                             VariableParameters* parameters)
    : graph_(std::make_shared<GraphIR>(new_graph_id())),
      policy_(policy),
      label_(std::move(label)),
      static_reads_(std::make_shared<StaticDimReads>()),
      origin_suffix_(std::make_shared<const std::string>(
          policy == CapturePolicy::kReject
              ? str_cat("function '", label_, "' (trace ", trace_index + 1, ")")
              : str_cat("the ", label_, " sub-graph (it only exists inside that branch or loop body)"))),
      parameter_source_(parameters) {}

std::shared_ptr<VariableState> VariableParameters::get(int64_t alias_id, const VariableState& traced_with) {
  std::lock_guard lock(mu_);
  for (const auto& [alias, p] : made_)
    if (alias == alias_id && p->dtype == traced_with.dtype && p->shape == traced_with.shape) return p;
  made_.emplace_back(alias_id, make_variable_parameter(traced_with, function_));
  return made_.back().second;
}

Variable GraphRecorder::variable_placeholder(const TraceType& variable_type, const Variable& traced_with) {
  const int64_t alias = variable_alias_id(variable_type);
  TG_CHECK(alias >= 0 && parameter_source_ != nullptr, "a Variable placeholder outside a function's trace");
  const auto a = static_cast<std::size_t>(alias);
  if (a < variable_params_.size()) return Variable(variable_params_[a]);
  // Alias ids count the call's distinct Variables in order, so they arrive in order.
  TG_CHECK(a == variable_params_.size(), "Variable alias id ", alias, " out of order");
  variable_params_.push_back(parameter_source_->get(alias, *traced_with.state()));
  return Variable(variable_params_.back());
}

Tensor GraphRecorder::placeholder(const TraceType& tensor_type, const std::string& path) {
  ValueType type;
  TG_CHECK(as_tensor_type(tensor_type, &type.dtype, &type.shape), "placeholder for a non-tensor type");
  // A named spec (get_concrete_function) names its graph input, as TF's placeholders are.
  const std::string& spec_name = tensor_type_name(tensor_type);
  Tensor t = add_input(type, spec_name.empty() ? placeholder_name(path, "arg") : spec_name);
  if (policy_ == CapturePolicy::kReject) {
    auto arg = std::make_shared<ArgumentValue>();
    static_cast<RecordedValue&>(*arg) = static_cast<const RecordedValue&>(*t.impl()->symbolic);
    arg->path = path;
    arg->recorder = this;
    arg->reads = static_reads_;
    t.impl()->symbolic = std::move(arg);
  }
  return t;
}

Tensor GraphRecorder::add_input(const ValueType& type, const std::string& name) {
  GraphNode node;
  node.kind = NodeKind::kPlaceholder;
  node.name = graph_->unique_name(name);
  node.input_index = static_cast<int>(graph_->placeholders.size());
  node.outputs = {type};
  const int idx = graph_->add_node(std::move(node));
  graph_->placeholders.push_back(idx);
  return symbolic_output(idx, 0);
}

std::vector<Tensor> GraphRecorder::record(OpId id, const std::vector<Tensor>& inputs,
                                          const OpAttrs& attrs,
                                          std::vector<ValueType>&& output_types) {
  const OpDef& def = op_def(id);
  GraphNode node;
  node.kind = NodeKind::kOp;
  node.op = id;
  node.attrs = attrs;
  node.name = graph_->unique_name(node_base_name(id, attrs));
  node.inputs.reserve(inputs.size());
  for (const Tensor& t : inputs) node.inputs.push_back(value_of(t, def.name));
  const std::size_t num_outputs = output_types.size();
  node.outputs.reserve(num_outputs);
  for (ValueType& t : output_types) node.outputs.push_back(std::move(t));
  const bool stateful = def.traits & kStateful;
  if (stateful) node.control_input = last_stateful_;
  const int idx = graph_->add_node(std::move(node));
  if (stateful) last_stateful_ = idx;
  std::vector<Tensor> out;
  out.reserve(num_outputs);
  for (std::size_t i = 0; i < num_outputs; ++i) {
    out.push_back(symbolic_output(idx, static_cast<int>(i)));
    // A shape being built (shape(x)[0] stacked with a constant): what is known of its elements.
    const TensorImpl& impl = *out.back().impl();
    if ((impl.dtype == DType::Int32 || impl.dtype == DType::Int64) && impl.shape.has_rank() && impl.shape.rank() <= 1)
      impl.symbolic->known_elements = infer_known_elements(id, inputs, attrs, ValueType{impl.dtype, impl.shape});
  }
  return out;
}

Tensor GraphRecorder::constant(const Tensor& value) {
  TG_CHECK(value.defined() && !value.impl()->symbolic, "GraphRecorder::constant takes an eager tensor");
  const ValueRef ref = value_of(value, "constant");
  Tensor out = symbolic_output(ref.node, ref.output);
  if (std::optional<std::vector<int64_t>> known = known_elements(value))
    out.impl()->symbolic->known_elements = std::make_shared<const std::vector<int64_t>>(std::move(*known));
  return out;
}

void GraphRecorder::add_outputs(const std::vector<Tensor>& outputs, const char* user) {
  for (const Tensor& t : outputs) {
    GraphNode node;
    node.kind = NodeKind::kOutput;
    node.name = graph_->unique_name("Identity");
    node.inputs = {value_of(t, user)};
    node.outputs = {ValueType{t.dtype(), detail::static_shape(t)}};
    graph_->outputs.push_back(graph_->add_node(std::move(node)));
  }
}

std::vector<Tensor> GraphRecorder::trace(const std::function<std::vector<Tensor>()>& fn) {
  // Tapes of the enclosing trace ignore the ops recorded here (a tape records only its own
  // context); they see the cond / while node instead.
  RecorderScope scope(this);
  std::vector<Tensor> results;
  try {
    results = fn();
  } catch (Error& e) {
    // Which branch or loop part failed; the enclosing function's trace adds its own context.
    e.add_context(str_cat("(while tracing the sub-graph '", label_, "')"));
    throw;
  }
  add_outputs(results, label_.c_str());
  return results;
}

ValueRef GraphRecorder::value_of(const Tensor& t, const char* user) {
  const auto& impl = t.impl();
  if (!impl) {
    if (policy_ == CapturePolicy::kReject)
      op_error<ValueError>(user, "an empty tg::Tensor (default-constructed or moved-from) was "
                                 "passed; assign it a value first");
    op_error<ValueError>(user, "an empty tg::Tensor (default-constructed or moved-from) was used in the ",
                         label_, "; assign it a value first");
  }
  if (impl->symbolic) {
    auto* rv = dynamic_cast<const RecordedValue*>(impl->symbolic.get());
    if (rv && rv->graph_id == graph_->id()) return rv->ref;
    if (policy_ == CapturePolicy::kReject)
      op_error<OutOfScopeError>(
          user, "the symbolic tensor ", impl->symbolic->origin(), " was used while tracing function '",
          label_, "'. A symbolic tensor belongs to the trace that made it; pass the value in as an "
          "argument, or return it from its function and use the returned tensor");
    // A value of an enclosing trace enters as an extra input of the node. (A tensor that
    // belongs to no enclosing trace is reported when the node itself is recorded.)
    auto it = capture_nodes_.find(impl->symbolic.get());
    if (it != capture_nodes_.end()) return ValueRef{it->second, 0};
    std::string base = impl->symbolic->name();
    base = base.substr(0, base.find(':'));
    add_input(ValueType{impl->dtype, impl->shape}, base.empty() ? "capture" : base);
    const int idx = graph_->placeholders.back();
    std::string outer = impl->symbolic->name();  // "mul:0" -> "mul", as graph inputs are written
    if (outer.size() > 2 && outer.compare(outer.size() - 2, 2, ":0") == 0) outer.resize(outer.size() - 2);
    graph_->set_captured_name(graph_->node(idx).input_index, outer.empty() ? "capture" : outer);
    capture_nodes_.emplace(impl->symbolic.get(), idx);
    captures_.push_back(t);
    return ValueRef{idx, 0};
  }
  // Eager tensors the body captured become constants of the graph (once per tensor).
  auto it = constants_.find(impl.get());
  if (it != constants_.end()) return ValueRef{it->second, 0};
  // Each `x * 1.01f` captures a fresh scalar tensor. Its node still gets a Const of its own (the
  // traced graph is what the body did), but holding the first equal scalar's tensor, so the
  // fresh one dies with its expression: tracing 100k ops then reuses one scalar's memory
  // instead of keeping tens of thousands (a quarter of the trace's page faults). Only tensors
  // that own their memory: a from_blob scalar's memory is its caller's to change.
  const ScalarBits key = scalar_bits(t);
  if (key.dtype != DType::String) {
    auto [first, inserted] = scalar_constants_.try_emplace(key, -1);
    if (!inserted) return ValueRef{graph_->add_const(graph_->node(first->second).value), 0};
    first->second = graph_->add_const(t);
    constants_.emplace(impl.get(), first->second);
    return ValueRef{first->second, 0};
  }
  const int idx = graph_->add_const(t);
  constants_.emplace(impl.get(), idx);
  return ValueRef{idx, 0};
}

GraphRecorder::ScalarBits GraphRecorder::scalar_bits(const Tensor& t) {
  const TensorImpl& impl = *t.impl();
  ScalarBits key{DType::String, 0};
  if (impl.dtype == DType::String || impl.shape.rank() != 0 || !impl.buffer || !impl.buffer->owns_memory())
    return key;
  const std::size_t size = dtype_size(impl.dtype);
  std::memcpy(&key.bits, static_cast<const char*>(impl.buffer->data()) + static_cast<std::size_t>(impl.offset) * size, size);
  key.dtype = impl.dtype;
  return key;
}

Tensor GraphRecorder::symbolic_output(int node, int output) {
  const GraphNode& n = graph_->node(node);
  // From the per-thread object lists, as eager tensors' handles are: a trace makes and drops two
  // of these per op (the previous op's symbolic result usually dies as the next is recorded).
  auto v = std::allocate_shared<RecordedValue>(RecyclingAllocator<RecordedValue>());
  v->graph_id = graph_->id();
  v->ref = ValueRef{node, output};
  v->node_name = n.name;
  v->origin_suffix = origin_suffix_;
  auto impl = new_tensor_impl();
  const ValueType& type = n.outputs[static_cast<std::size_t>(output)];
  impl->dtype = type.dtype;
  impl->shape = type.shape;
  impl->symbolic = std::move(v);
  return Tensor(std::move(impl));
}

}  // namespace tg::detail
