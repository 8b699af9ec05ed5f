// tg::export_onnx: each concrete function's graph as traced, written as an ONNX model (opset 17,
// IR version 8) node by node through the op table (onnx_rules.cpp).
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <unordered_map>
#include <unordered_set>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "data/file_bytes.h"
#include "export/loaded.h"
#include "onnx_io/onnx_rules.h"
#include "trace/function_core.h"
#include "tracegraph/onnx.h"

namespace tg::detail::onnx_export {

void set_value_type(onnx::ValueInfoProto& vi, const std::string& name, DType dtype, const TensorShape& shape) {
  vi.set_name(name);
  onnx::TypeProto_Tensor* t = vi.mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx_dtype(dtype));
  if (!shape.has_rank()) return;
  onnx::TensorShapeProto* s = t->mutable_shape();
  const std::vector<int64_t> dims = shape.none_aware().dims();
  for (std::size_t k = 0; k < dims.size(); ++k) {
    onnx::TensorShapeProto_Dimension* d = s->add_dim();
    // A None dim is a named symbolic dim: its value's name and axis.
    if (dims[k] < 0) d->set_dim_param(str_cat(name, "_d", k));
    else d->set_dim_value(dims[k]);
  }
}

namespace {

constexpr const char* kOp = "tg::export_onnx";

// What the writers of one model share: the main graph (initializers and graph inputs go there
// whatever graph a node is written into), the names taken in the whole model (a sub-graph may
// not reuse an outer name), the Variables' current values, and the graph nodes go to.
struct ModelState {
  const std::string& function;
  const ConcreteImpl& cf;
  const OnnxOptions& options;
  onnx::GraphProto& main;
  std::vector<onnx::GraphProto*> targets;  // main, then the sub-graphs being written
  std::unordered_set<std::string> used;
  std::unordered_map<const VariableState*, std::string> current;  // a Variable's value now
  std::unordered_map<const VariableState*, std::string> input;    // its graph input (or initializer)
  std::vector<std::shared_ptr<VariableState>> written;            // in order of first write

  std::string fresh(const std::string& base) {
    if (used.insert(base).second) return base;
    for (int k = 1;; ++k) {
      std::string s = str_cat(base, "_", k);
      if (used.insert(s).second) return s;
    }
  }
};

class GraphWriter final : public Emitter {
 public:
  GraphWriter(ModelState& state, const GraphIR& graph, std::string scope)
      : s_(state), graph_(graph), scope_(std::move(scope)) {}

  // Writes the graph's nodes into the current target, its placeholders reading `inputs`;
  // returns the names of its results.
  std::vector<std::string> write(const std::vector<std::string>& inputs) {
    TG_CHECK(inputs.size() == graph_.placeholders.size(), "a graph of ", graph_.placeholders.size(),
             " inputs written with ", inputs.size());
    // Every node's outputs are named first (their names as traced), so that the intermediate
    // values the rules add never take one.
    names_.resize(graph_.nodes.size());
    for (std::size_t i = 0; i < graph_.nodes.size(); ++i) {
      const GraphNode& n = graph_.nodes[i];
      if (n.kind == NodeKind::kOutput) continue;
      if (n.kind == NodeKind::kPlaceholder) {
        names_[i].push_back(inputs[static_cast<std::size_t>(n.input_index)]);
        continue;
      }
      for (std::size_t k = 0; k < n.outputs.size(); ++k)
        names_[i].push_back(s_.fresh(scoped(k == 0 ? n.name : str_cat(n.name, ":", k))));
    }
    for (std::size_t i = 0; i < graph_.nodes.size(); ++i) {
      current_ = static_cast<int>(i);
      const GraphNode& n = graph_.nodes[i];
      switch (n.kind) {
        case NodeKind::kPlaceholder: check_dtype(n.outputs[0].dtype); break;
        case NodeKind::kConst: add_initializer(names_[i][0], n.value); break;
        case NodeKind::kOp: write_op(n); break;
        case NodeKind::kOutput: break;
      }
    }
    std::vector<std::string> results;
    for (int k : graph_.outputs) results.push_back(value_name(graph_.node(k).inputs[0]));
    return results;
  }

  // The main graph: its placeholders as graph inputs, its results as outputs "output_<k>", and
  // with variables_as_inputs each Variable written as an output "<its input>/new".
  void write_main() {
    std::vector<std::string> inputs;
    for (int p : graph_.placeholders) {
      const GraphNode& n = graph_.node(p);
      current_ = p;
      check_dtype(n.outputs[0].dtype);
      inputs.push_back(s_.fresh(n.name));
      set_value_type(*s_.main.add_input(), inputs.back(), n.outputs[0].dtype, n.outputs[0].shape);
    }
    const std::vector<std::string> results = write(inputs);
    for (std::size_t k = 0; k < graph_.outputs.size(); ++k) {
      const GraphNode& n = graph_.node(graph_.outputs[k]);
      current_ = graph_.outputs[k];
      const std::string name = s_.fresh(str_cat("output_", k));
      add("Identity", {results[k]}, {name});
      set_value_type(*s_.main.add_output(), name, n.outputs[0].dtype, n.outputs[0].shape);
    }
    for (const auto& v : s_.written) {
      const std::string name = s_.fresh(str_cat(s_.input.at(v.get()), "/new"));
      onnx::NodeProto* n = s_.main.add_node();
      n->set_op_type("Identity");
      n->set_name(s_.fresh(str_cat(name, "/Identity")));
      n->add_input(s_.current.at(v.get()));
      n->add_output(name);
      set_value_type(*s_.main.add_output(), name, v->dtype, v->shape);
    }
  }

  // Emitter
  const GraphNode& node() const override { return graph_.node(current_); }
  std::string in(int i) override { return value_name(node().inputs[static_cast<std::size_t>(i)]); }
  const ValueType& in_type(int i) const override { return graph_.type_of(node().inputs[static_cast<std::size_t>(i)]); }
  std::string out(int i) const override { return names_[static_cast<std::size_t>(current_)][static_cast<std::size_t>(i)]; }
  std::string temp(const std::string& hint) override { return s_.fresh(str_cat(scoped(node().name), "/", hint)); }
  onnx::NodeProto& add(const std::string& op_type, std::vector<std::string> inputs,
                       std::vector<std::string> outputs) override {
    onnx::NodeProto* n = s_.targets.back()->add_node();
    n->set_op_type(op_type);
    n->set_name(s_.fresh(str_cat(scoped(node().name), "/", op_type)));
    for (auto& s : inputs) n->add_input(std::move(s));
    for (auto& s : outputs) n->add_output(std::move(s));
    return *n;
  }
  std::string int64s(const std::vector<int64_t>& values) override {
    const std::string name = temp("const");
    onnx::TensorProto* t = s_.main.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
    return name;
  }
  std::string scalar(DType dtype, double value) override { return constant(dtype, {value}, TensorShape()); }
  std::string values(DType dtype, const std::vector<double>& values) override {
    return constant(dtype, values, TensorShape({static_cast<int64_t>(values.size())}));
  }
  std::string variable(const std::shared_ptr<VariableState>& v) override {
    TG_CHECK(v != nullptr, "a Variable op without its Variable");
    if (auto it = s_.current.find(v.get()); it != s_.current.end()) return it->second;
    const std::string name = s_.fresh(v->name);
    if (v->parameter || s_.options.variables_as_inputs) {
      // A Variable argument (the caller's value), or any Variable when the model takes them all.
      set_value_type(*s_.main.add_input(), name, v->dtype, v->shape);
    } else {
      Tensor value;
      {
        std::lock_guard lock(v->mu);
        value = v->value;
      }
      if (!value.defined())
        refuse(str_cat("it reads Variable '", v->name, "', which has no value yet (it is created by the function's "
                       "first run); run the function once, then export it"));
      add_initializer(name, value);
    }
    s_.current.emplace(v.get(), name);
    s_.input.emplace(v.get(), name);
    return name;
  }
  void write_variable(const std::shared_ptr<VariableState>& v, const std::string& value) override {
    TG_CHECK(v != nullptr, "a Variable op without its Variable");
    if (!s_.options.variables_as_inputs)
      refuse(str_cat("it writes Variable '", v->name, "', and an ONNX model has no state. Export the inference "
                     "function, or set OnnxOptions::variables_as_inputs to write the step as a function of its "
                     "inputs and Variables that returns its results and the Variables' new values"));
    if (s_.targets.size() > 1)
      refuse(str_cat("it writes Variable '", v->name, "' inside a cond branch or a while_loop body, which the "
                     "exporter does not thread through If / Loop; write the Variable after the cond or loop "
                     "from a value it returns"));
    variable(v);  // the Variable is an input of the step even when only written
    if (std::find(s_.written.begin(), s_.written.end(), v) == s_.written.end()) s_.written.push_back(v);
    s_.current[v.get()] = value;
  }
  std::vector<std::string> inline_graph(const GraphIR& g, const std::string& scope,
                                        const std::vector<std::string>& inputs) override {
    return GraphWriter(s_, g, str_cat(scoped(node().name), "/", scope)).write(inputs);
  }
  void push_graph(onnx::GraphProto& g) override { s_.targets.push_back(&g); }
  void pop_graph() override {
    TG_CHECK(s_.targets.size() > 1, "pop_graph without push_graph");
    s_.targets.pop_back();
  }
  [[noreturn]] void refuse(const std::string& why) const override {
    const GraphNode& n = node();
    throw ValueError(str_cat("[", kOp, "] function '", s_.function, "', concrete function ",
                             s_.cf.input_type.to_string(), ": node '", scoped(n.name), "' (op ", n.op_name(),
                             ") cannot be written to ONNX: ", why,
                             ". Nothing was written; docs/onnx.md lists what the exporter writes"));
  }

 private:
  std::string scoped(const std::string& name) const { return scope_.empty() ? name : str_cat(scope_, "/", name); }

  std::string value_name(const ValueRef& r) const {
    return names_[static_cast<std::size_t>(r.node)][static_cast<std::size_t>(r.output)];
  }

  void check_dtype(DType d) const {
    if (d != DType::String) return;
    refuse("it holds a string tensor, which this exporter does not write yet; export a function over numbers");
  }

  std::string constant(DType dtype, const std::vector<double>& values, const TensorShape& shape) {
    const std::string name = temp("const");
    onnx::TensorProto* t = s_.main.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx_dtype(dtype));
    for (int64_t d : shape.dims()) t->add_dims(d);
    for (double v : values) {
      switch (dtype) {
        case DType::Float32: t->add_float_data(static_cast<float>(v)); break;
        case DType::Float64: t->add_double_data(v); break;
        case DType::Int64: t->add_int64_data(static_cast<int64_t>(v)); break;
        case DType::Int32: case DType::Bool: case DType::UInt8: t->add_int32_data(static_cast<int32_t>(v)); break;
        case DType::BFloat16: t->add_int32_data(bfloat16_t(static_cast<float>(v)).bits); break;  // ONNX: the bits
        case DType::String: refuse("a string constant cannot be written");
      }
    }
    return name;
  }

  void add_initializer(const std::string& name, const Tensor& value) {
    if (value.dtype() == DType::String)
      refuse("it holds a string constant, which this exporter does not write yet; export a function over numbers");
    onnx::TensorProto* t = s_.main.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx_dtype(value.dtype()));
    const TensorShape& shape = static_shape(value);
    for (int64_t d : shape.dims()) t->add_dims(d);
    // raw_data is little-endian, row-major: tracegraph's own layout on the x86-64 it runs on.
    const auto bytes = static_cast<std::size_t>(shape.num_elements()) * dtype_size(value.dtype());
    t->set_raw_data(std::string(static_cast<const char*>(value.data()), bytes));
  }

  void write_op(const GraphNode& n) {
    for (const ValueRef& r : n.inputs) check_dtype(graph_.type_of(r).dtype);
    for (const ValueType& t : n.outputs) check_dtype(t.dtype);
    const OnnxRule* rule = onnx_rule(n.op);
    if (!rule) {
      const std::string why = onnx_refusal(n.op);
      refuse(str_cat(why.empty() ? str_cat("the exporter has no rule for op '", op_def(n.op).name,
                                           "' yet; export a function without it, or add its row to the table in "
                                           "src/onnx_io/onnx_rules.cpp")
                                 : why,
                     readers()));
    }
    rule->emit(*this);
  }

  // " (read by node 'x' (op y))": which op a refused node serves (an attention's dropout draws
  // its seed with a random op, refused before the attention is reached).
  std::string readers() const {
    std::string out;
    for (std::size_t i = static_cast<std::size_t>(current_) + 1; i < graph_.nodes.size(); ++i) {
      const GraphNode& n = graph_.nodes[i];
      if (n.kind != NodeKind::kOp) continue;
      const bool reads = std::any_of(n.inputs.begin(), n.inputs.end(), [&](const ValueRef& r) { return r.node == current_; });
      if (reads) out += str_cat(out.empty() ? " (read by" : ",", " node '", scoped(n.name), "' (op ", n.op_name(), ")");
    }
    return out.empty() ? out : out + ")";
  }

  ModelState& s_;
  const GraphIR& graph_;
  std::string scope_;  // "" for the main graph; "<node>/<role>" for a sub-graph
  int current_ = 0;
  std::vector<std::vector<std::string>> names_;
};

std::string model_bytes(const std::string& function, const ConcreteImpl& cf, const OnnxOptions& options) {
  onnx::ModelProto model;
  model.set_ir_version(kOnnxIrVersion);
  model.set_producer_name("tracegraph");
  model.set_producer_version(TG_VERSION_STRING);
  onnx::OperatorSetIdProto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxOpset);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name(options.graph_name.empty() ? function : options.graph_name);
  g->set_doc_string(str_cat(function, cf.input_type.to_string(), " -> ", cf.output_description));
  ModelState state{function, cf, options, *g, {g}, {}, {}, {}, {}};
  GraphWriter(state, cf.unoptimized_ir ? *cf.unoptimized_ir : *cf.ir, "").write_main();
  std::string bytes;
  TG_CHECK(model.SerializeToString(&bytes), "ONNX model serialisation failed");
  return bytes;
}

std::vector<std::string> write_models(const std::string& path, const std::string& function,
                                      const std::vector<std::shared_ptr<ConcreteImpl>>& concretes,
                                      const OnnxOptions& options) {
  if (concretes.empty())
    throw ValueError(str_cat("[", kOp, "] function '", function, "' has no concrete functions to export: it was never "
                             "traced. Call it (or get_concrete_function with TensorSpecs) for each input type the "
                             "model must serve, then export it"));
  // Every model is made before any file is written: a refused op leaves nothing behind.
  std::vector<std::string> models;
  for (const auto& cf : concretes) models.push_back(model_bytes(function, *cf, options));
  std::vector<std::string> paths;
  if (models.size() == 1) {
    paths.push_back(path);
  } else {
    const std::filesystem::path p(path);
    for (std::size_t i = 0; i < models.size(); ++i) {
      std::filesystem::path q = p;
      q.replace_filename(str_cat(p.stem().string(), ".", i, p.extension().string()));
      paths.push_back(q.string());
    }
  }
  for (std::size_t i = 0; i < models.size(); ++i) write_file_bytes(kOp, paths[i], models[i]);
  return paths;
}

}  // namespace
}  // namespace tg::detail::onnx_export

namespace tg::detail {

std::vector<std::string> export_onnx_function(const std::string& path, const FunctionCore& core,
                                              const std::vector<ConcreteFunction>* chosen, const OnnxOptions& options) {
  return onnx_export::write_models(path, core.name(), chosen_concrete_functions(core, chosen, "tg::export_onnx"),
                                   options);
}

std::vector<std::string> export_onnx_loaded(const std::string& path, const LoadedFunction& fn,
                                            const OnnxOptions& options) {
  return export_onnx_function(path, loaded_core(*LoadedAccess::state(fn)), nullptr, options);
}

}  // namespace tg::detail
