// tg::export_onnx: each concrete function's graph as traced, written as an ONNX model (opset 17,
// IR version 8) node by node through the op table (onnx_rules.cpp).
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <unordered_set>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "data/file_bytes.h"
#include "export/loaded.h"
#include "onnx_io/onnx_rules.h"
#include "trace/function_core.h"
#include "tracegraph/onnx.h"

namespace tg::detail::onnx_export {
namespace {

constexpr const char* kOp = "tg::export_onnx";

void set_type(onnx::ValueInfoProto& vi, const std::string& name, DType dtype, const TensorShape& shape) {
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

class GraphWriter final : public Emitter {
 public:
  GraphWriter(const std::string& function, const ConcreteImpl& cf, onnx::GraphProto& g)
      : function_(function), cf_(cf), graph_(cf.unoptimized_ir ? *cf.unoptimized_ir : *cf.ir), out_(g) {}

  void write() {
    // Every node's outputs are named first (their names as traced), so that the intermediate
    // values the rules add never take one.
    names_.resize(graph_.nodes.size());
    for (std::size_t i = 0; i < graph_.nodes.size(); ++i) {
      const GraphNode& n = graph_.nodes[i];
      if (n.kind == NodeKind::kOutput) continue;
      for (std::size_t k = 0; k < n.outputs.size(); ++k) names_[i].push_back(fresh(k == 0 ? n.name : str_cat(n.name, ":", k)));
    }
    for (int p : graph_.placeholders) {
      const GraphNode& n = graph_.node(p);
      set_type(*out_.add_input(), names_[static_cast<std::size_t>(p)][0], n.outputs[0].dtype, n.outputs[0].shape);
      check_dtype(n, n.outputs[0].dtype);
    }
    for (std::size_t i = 0; i < graph_.nodes.size(); ++i) {
      current_ = static_cast<int>(i);
      const GraphNode& n = graph_.nodes[i];
      switch (n.kind) {
        case NodeKind::kPlaceholder: break;
        case NodeKind::kConst: add_initializer(names_[i][0], n.value); break;
        case NodeKind::kOp: write_op(n); break;
        case NodeKind::kOutput: break;
      }
    }
    for (std::size_t k = 0; k < graph_.outputs.size(); ++k) {
      const GraphNode& n = graph_.node(graph_.outputs[k]);
      current_ = graph_.outputs[k];
      const std::string name = fresh(str_cat("output_", k));
      add("Identity", {value_name(n.inputs[0])}, {name});
      set_type(*out_.add_output(), name, n.outputs[0].dtype, n.outputs[0].shape);
    }
  }

  // Emitter
  const GraphNode& node() const override { return graph_.node(current_); }
  std::string in(int i) override { return value_name(node().inputs[static_cast<std::size_t>(i)]); }
  const ValueType& in_type(int i) const override { return graph_.type_of(node().inputs[static_cast<std::size_t>(i)]); }
  std::string out(int i) const override { return names_[static_cast<std::size_t>(current_)][static_cast<std::size_t>(i)]; }
  std::string temp(const std::string& hint) override { return fresh(str_cat(node().name, "/", hint)); }
  onnx::NodeProto& add(const std::string& op_type, std::vector<std::string> inputs,
                       std::vector<std::string> outputs) override {
    onnx::NodeProto* n = out_.add_node();
    n->set_op_type(op_type);
    n->set_name(fresh(str_cat(node().name, "/", op_type)));
    for (auto& s : inputs) n->add_input(std::move(s));
    for (auto& s : outputs) n->add_output(std::move(s));
    return *n;
  }
  std::string int64s(const std::vector<int64_t>& values) override {
    const std::string name = temp("const");
    onnx::TensorProto* t = out_.add_initializer();
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
    if (auto it = variables_.find(v.get()); it != variables_.end()) return it->second;
    const std::string name = fresh(v->name);
    if (v->parameter) {
      // A Variable argument: the caller's value, a graph input.
      set_type(*out_.add_input(), name, v->dtype, v->shape);
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
    variables_.emplace(v.get(), name);
    return name;
  }
  [[noreturn]] void refuse(const std::string& why) const override {
    const GraphNode& n = node();
    throw ValueError(str_cat("[", kOp, "] function '", function_, "', concrete function ", cf_.input_type.to_string(),
                             ": node '", n.name, "' (op ", n.op_name(), ") cannot be written to ONNX: ", why,
                             ". Nothing was written; docs/onnx.md lists what the exporter writes"));
  }

 private:
  std::string fresh(const std::string& base) {
    if (used_.insert(base).second) return base;
    for (int k = 1;; ++k) {
      std::string s = str_cat(base, "_", k);
      if (used_.insert(s).second) return s;
    }
  }

  std::string value_name(const ValueRef& r) const {
    return names_[static_cast<std::size_t>(r.node)][static_cast<std::size_t>(r.output)];
  }

  void check_dtype(const GraphNode& n, DType d) const {
    if (d != DType::String) return;
    (void)n;
    refuse("it holds a string tensor, which this exporter does not write yet; export a function over numbers");
  }

  std::string constant(DType dtype, const std::vector<double>& values, const TensorShape& shape) {
    const std::string name = temp("const");
    onnx::TensorProto* t = out_.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx_dtype(dtype));
    for (int64_t d : shape.dims()) t->add_dims(d);
    for (double v : values) {
      switch (dtype) {
        case DType::Float32: t->add_float_data(static_cast<float>(v)); break;
        case DType::Float64: t->add_double_data(v); break;
        case DType::Int64: t->add_int64_data(static_cast<int64_t>(v)); break;
        case DType::Int32: case DType::Bool: case DType::UInt8: t->add_int32_data(static_cast<int32_t>(v)); break;
        case DType::String: refuse("a string constant cannot be written");
      }
    }
    return name;
  }

  void add_initializer(const std::string& name, const Tensor& value) {
    if (value.dtype() == DType::String)
      refuse("it holds a string constant, which this exporter does not write yet; export a function over numbers");
    onnx::TensorProto* t = out_.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx_dtype(value.dtype()));
    const TensorShape& shape = static_shape(value);
    for (int64_t d : shape.dims()) t->add_dims(d);
    // raw_data is little-endian, row-major: tracegraph's own layout on the x86-64 it runs on.
    const auto bytes = static_cast<std::size_t>(shape.num_elements()) * dtype_size(value.dtype());
    t->set_raw_data(std::string(static_cast<const char*>(value.data()), bytes));
  }

  void write_op(const GraphNode& n) {
    for (const ValueRef& r : n.inputs) check_dtype(n, graph_.type_of(r).dtype);
    for (const ValueType& t : n.outputs) check_dtype(n, t.dtype);
    const OnnxRule* rule = onnx_rule(n.op);
    if (!rule) {
      const std::string why = onnx_refusal(n.op);
      refuse(why.empty() ? str_cat("the exporter has no rule for op '", op_def(n.op).name,
                                   "' yet; export a function without it, or add its row to the table in "
                                   "src/onnx_io/onnx_rules.cpp")
                         : why);
    }
    rule->emit(*this);
  }

  const std::string& function_;
  const ConcreteImpl& cf_;
  const GraphIR& graph_;
  onnx::GraphProto& out_;
  int current_ = 0;
  std::vector<std::vector<std::string>> names_;
  std::unordered_set<std::string> used_;
  std::unordered_map<const VariableState*, std::string> variables_;
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
  GraphWriter(function, cf, *g).write();
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
