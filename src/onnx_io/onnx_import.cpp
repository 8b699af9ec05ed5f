// tg::import_onnx: an ONNX model read into a function with tg::LoadedFunction's dispatch. The
// file is validated before anything runs (sizes, tensor data against dims and type, names
// defined once and before use, no cycles, known dtypes, the opset), then the graph is traced once
// through tracegraph's ops, node by node through the op table (onnx_import_rules.cpp), into one
// concrete function that a FunctionCore adopts, as tg::load's are.
#include <google/protobuf/io/coded_stream.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "data/file_bytes.h"
#include "export/loaded.h"
#include "onnx_io/onnx_import.h"
#include "ops/known_values.h"
#include "trace/function_core.h"
#include "tracegraph/onnx.h"
#include "tracegraph/ops.h"

namespace tg::detail::onnx_import {

std::optional<DType> dtype_of(int onnx_type) {
  switch (onnx_type) {
    case onnx::TensorProto::FLOAT: return DType::Float32;
    case onnx::TensorProto::DOUBLE: return DType::Float64;
    case onnx::TensorProto::INT32: return DType::Int32;
    case onnx::TensorProto::INT64: return DType::Int64;
    case onnx::TensorProto::BOOL: return DType::Bool;
    case onnx::TensorProto::UINT8: return DType::UInt8;
    default: return std::nullopt;
  }
}

std::string onnx_type_name(int onnx_type) {
  if (onnx::TensorProto_DataType_IsValid(onnx_type))
    return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(onnx_type));
  return str_cat("data type ", onnx_type, " (not an ONNX type)");
}

namespace {

constexpr const char* kOp = "tg::import_onnx";
// The default domain's opsets whose op definitions the table follows.
constexpr int64_t kMinOpset = 7, kMaxOpset = 21;
// IR versions 3 (opset imports) to 10 (ONNX 1.16).
constexpr int64_t kMinIr = 3, kMaxIr = 10;

[[noreturn]] void bad(const std::string& part, const std::string& why) {
  throw FormatError(str_cat("[", kOp, "] ", part, ": ", why), part, 0);
}

// The ONNX name of a tensor type, for messages: "FLOAT (None, 12)".
std::string describe(int elem, const TensorShape& s) { return str_cat(onnx_type_name(elem), " ", s.to_string()); }

class Importer {
 public:
  Importer(const onnx::ModelProto& model, const OnnxImportOptions& options) : model_(model), options_(options) {}

  std::shared_ptr<LoadedState> run() {
    check_model();
    const onnx::GraphProto& g = model_.graph();
    read_initializers(g);
    read_inputs(g);
    order_nodes(g);
    check_ops(g);
    for (const auto& out : g.output())
      if (!defined_.count(out.name())) bad(str_cat("graph output '", out.name(), "'"), "no node, input or initializer defines it");
    if (g.output_size() == 0) bad("graph", "it has no outputs");
    return trace(g);
  }

 private:
  // ---- the model and its graph ----

  void check_model() {
    if (model_.ir_version() < kMinIr || model_.ir_version() > kMaxIr)
      bad("model", str_cat("IR version ", model_.ir_version(), " is not one this importer reads (", kMinIr, " to ", kMaxIr,
                           "); convert the model with onnx.version_converter or export it again"));
    bool found = false;
    for (const auto& o : model_.opset_import()) {
      if (o.domain().empty() || o.domain() == "ai.onnx") {
        if (found) bad("model", "the default domain's opset is imported twice");
        found = true;
        opset_ = o.version();
      }
    }
    if (!found) bad("model", "it imports no opset of the default ONNX domain");
    if (opset_ < kMinOpset || opset_ > kMaxOpset)
      throw ValueError(str_cat("[", kOp, "] the model uses opset ", opset_, " of the default domain; the importer reads opsets ",
                               kMinOpset, " to ", kMaxOpset, ". Convert it (onnx.version_converter.convert_version(model, 17)) "
                               "or export it again with opset 17"));
    if (!model_.has_graph()) bad("model", "it has no graph");
    const onnx::GraphProto& g = model_.graph();
    if (g.node_size() > options_.max_nodes)
      bad("graph", str_cat("it has ", g.node_size(), " nodes, more than OnnxImportOptions::max_nodes (", options_.max_nodes, ")"));
    if (g.sparse_initializer_size() > 0)
      throw ValueError(str_cat("[", kOp, "] the graph has sparse initializers, which the importer does not read; store them dense"));
  }

  void define(const std::string& name, const std::string& what) {
    if (name.empty()) bad(what, "it defines a value with an empty name");
    if (!defined_.insert(name).second) bad(what, str_cat("value '", name, "' is defined twice (ONNX graphs define each value once)"));
  }

  TensorShape read_shape(const onnx::TypeProto_Tensor& t, const std::string& what) {
    if (!t.has_shape()) return TensorShape::unknown_rank();
    const auto& dims = t.shape().dim();
    if (dims.size() > options_.max_rank)
      bad(what, str_cat("its rank ", dims.size(), " is more than OnnxImportOptions::max_rank (", options_.max_rank, ")"));
    std::vector<int64_t> out;
    for (const auto& d : dims) {
      if (d.has_dim_value()) {
        if (d.dim_value() < 0) bad(what, str_cat("it has the negative dim ", d.dim_value()));
        out.push_back(d.dim_value());
      } else {
        out.push_back(None);  // a named symbolic dim, or one without a value
      }
    }
    return TensorShape(out);
  }

  Tensor read_tensor(const onnx::TensorProto& t, const std::string& what) {
    if (t.data_location() == onnx::TensorProto::EXTERNAL || t.external_data_size() > 0)
      throw ValueError(str_cat("[", kOp, "] ", what, " keeps its data in an external file, which the importer does not read "
                               "(a model file is read on its own, never files it names); save the model with its data "
                               "inside (onnx.save_model(model, path, save_as_external_data=False))"));
    if (t.has_segment()) bad(what, "it is a segment of a tensor; the importer reads whole tensors");
    if (!onnx::TensorProto_DataType_IsValid(t.data_type()) || t.data_type() == onnx::TensorProto::UNDEFINED)
      bad(what, str_cat("its data type ", t.data_type(), " is not an ONNX type"));
    const std::optional<DType> dtype = dtype_of(t.data_type());
    if (!dtype)
      throw ValueError(str_cat("[", kOp, "] ", what, " is ", onnx_type_name(t.data_type()), ", a type tracegraph does not compute in "
                               "(it reads FLOAT, DOUBLE, INT32, INT64, BOOL and UINT8); convert the model's tensors"));
    if (t.dims_size() > options_.max_rank)
      bad(what, str_cat("its rank ", t.dims_size(), " is more than OnnxImportOptions::max_rank (", options_.max_rank, ")"));
    std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
    const uint64_t size = dtype_size(*dtype);
    uint64_t n = 1;
    for (int64_t d : dims) {
      if (d < 0) bad(what, str_cat("it has the negative dim ", d));
      if (d != 0 && n > options_.max_tensor_bytes / size / static_cast<uint64_t>(d))
        bad(what, str_cat("its dims ", TensorShape(dims).to_string(), " are more than OnnxImportOptions::max_tensor_bytes (",
                          options_.max_tensor_bytes, ")"));
      n *= static_cast<uint64_t>(d);
    }
    const uint64_t bytes = n * size;
    Tensor out = allocate_tensor(*dtype, TensorShape(dims));
    std::byte* dst = bytes_of(out);
    auto count = [&](int have, const char* field) {
      if (static_cast<uint64_t>(have) != n)
        bad(what, str_cat("its ", field, " holds ", have, " values but its dims ", TensorShape(dims).to_string(), " need ", n));
    };
    const int typed = t.float_data_size() + t.double_data_size() + t.int32_data_size() + t.int64_data_size() +
                      t.uint64_data_size() + t.string_data_size();
    if (t.has_raw_data()) {
      if (typed > 0) bad(what, "it holds both raw_data and typed values");
      if (t.raw_data().size() != bytes)
        bad(what, str_cat("its raw_data has ", t.raw_data().size(), " bytes but ", n, " ", onnx_type_name(t.data_type()),
                          " values need ", bytes));
      if (bytes) std::memcpy(dst, t.raw_data().data(), bytes);
      if (*dtype == DType::Bool)  // any byte but 0 is true; a bool holds 0 or 1
        for (uint64_t i = 0; i < n; ++i) dst[i] = std::byte{dst[i] != std::byte{0}};
      return out;
    }
    switch (*dtype) {
      case DType::Float32:
        count(t.float_data_size(), "float_data");
        if (n) std::memcpy(dst, t.float_data().data(), bytes);
        break;
      case DType::Float64:
        count(t.double_data_size(), "double_data");
        if (n) std::memcpy(dst, t.double_data().data(), bytes);
        break;
      case DType::Int64:
        count(t.int64_data_size(), "int64_data");
        if (n) std::memcpy(dst, t.int64_data().data(), bytes);
        break;
      case DType::Int32:
        count(t.int32_data_size(), "int32_data");
        if (n) std::memcpy(dst, t.int32_data().data(), bytes);
        break;
      case DType::Bool:
      case DType::UInt8:
        count(t.int32_data_size(), "int32_data");
        for (uint64_t i = 0; i < n; ++i) {
          const int32_t v = t.int32_data(static_cast<int>(i));
          if (*dtype == DType::UInt8 && (v < 0 || v > 255)) bad(what, str_cat("its int32_data holds ", v, ", not a UINT8"));
          dst[i] = static_cast<std::byte>(*dtype == DType::Bool ? (v != 0) : v);
        }
        break;
      case DType::String:
      case DType::BFloat16: TG_CHECK(false, "dtype_of never gives ", to_string(*dtype));
    }
    return out;
  }

  void read_initializers(const onnx::GraphProto& g) {
    for (const auto& init : g.initializer()) {
      const std::string what = str_cat("initializer '", init.name(), "'");
      define(init.name(), what);
      initializers_.emplace(init.name(), read_tensor(init, what));
      initializer_order_.push_back(init.name());
    }
  }

  void read_inputs(const onnx::GraphProto& g) {
    for (const auto& in : g.input()) {
      // Before IR 4 initializers were listed as inputs too (their defaults): they stay initializers.
      if (initializers_.count(in.name())) continue;
      const std::string what = str_cat("graph input '", in.name(), "'");
      define(in.name(), what);
      if (!in.type().has_tensor_type())
        throw ValueError(str_cat("[", kOp, "] ", what, " is not a tensor (a sequence, map or optional), which the importer does "
                                 "not read"));
      const auto& t = in.type().tensor_type();
      const std::optional<DType> dtype = dtype_of(t.elem_type());
      if (!dtype) {
        if (!onnx::TensorProto_DataType_IsValid(t.elem_type()) || t.elem_type() == onnx::TensorProto::UNDEFINED)
          bad(what, str_cat("its element type ", t.elem_type(), " is not an ONNX type"));
        throw ValueError(str_cat("[", kOp, "] ", what, " is ", onnx_type_name(t.elem_type()), ", a type tracegraph does not "
                                 "compute in (it reads FLOAT, DOUBLE, INT32, INT64, BOOL and UINT8)"));
      }
      inputs_.push_back({in.name(), *dtype, read_shape(t, what)});
    }
  }

  // Kahn's order over the nodes: every input of a node is defined by the graph or an earlier
  // node; a value nothing defines, or a cycle, is refused.
  void order_nodes(const onnx::GraphProto& g) {
    std::unordered_map<std::string, int> producer;
    for (int i = 0; i < g.node_size(); ++i) {
      const auto& n = g.node(i);
      for (const auto& out : n.output()) {
        if (out.empty()) continue;
        define(out, node_name(n, i));
        producer.emplace(out, i);
      }
    }
    std::vector<int> pending(static_cast<std::size_t>(g.node_size()), 0);
    std::vector<std::vector<int>> consumers(static_cast<std::size_t>(g.node_size()));
    for (int i = 0; i < g.node_size(); ++i) {
      const auto& n = g.node(i);
      for (const auto& in : n.input()) {
        if (in.empty()) continue;  // an omitted optional input
        if (!defined_.count(in))
          bad(node_name(n, i), str_cat("it reads '", in, "', which no node, graph input or initializer defines"));
        if (auto it = producer.find(in); it != producer.end()) {
          ++pending[static_cast<std::size_t>(i)];
          consumers[static_cast<std::size_t>(it->second)].push_back(i);
        }
      }
    }
    std::vector<int> ready;
    for (int i = g.node_size() - 1; i >= 0; --i)
      if (pending[static_cast<std::size_t>(i)] == 0) ready.push_back(i);
    while (!ready.empty()) {
      const int i = ready.back();
      ready.pop_back();
      order_.push_back(i);
      // Consumers in reverse so that independent nodes keep the file's order.
      const auto& cs = consumers[static_cast<std::size_t>(i)];
      for (auto it = cs.rbegin(); it != cs.rend(); ++it)
        if (--pending[static_cast<std::size_t>(*it)] == 0) ready.push_back(*it);
    }
    if (order_.size() != static_cast<std::size_t>(g.node_size())) {
      std::string names;
      int shown = 0;
      for (int i = 0; i < g.node_size() && shown < 5; ++i)
        if (pending[static_cast<std::size_t>(i)] > 0) names += str_cat(shown++ ? ", " : "", node_name(g.node(i), i));
      bad("graph", str_cat("its nodes form a cycle (", names, " wait on each other); ONNX graphs are acyclic"));
    }
  }

  static std::string node_name(const onnx::NodeProto& n, int index) {
    return n.name().empty() ? str_cat("node ", index, " (", n.op_type(), ")") : str_cat("node '", n.name(), "' (", n.op_type(), ")");
  }

  // Every node's op is read by the table at the model's opset: all that are not, named at once.
  void check_ops(const onnx::GraphProto& g) {
    std::map<std::string, std::string> missing;  // op type -> first node
    for (int i : order_) {
      const auto& n = g.node(i);
      if (!n.domain().empty() && n.domain() != "ai.onnx") {
        missing.emplace(str_cat(n.domain(), "::", n.op_type()), node_name(n, i));
        continue;
      }
      const ImportRule* rule = import_rule(n.op_type());
      if (!rule) {
        missing.emplace(n.op_type(), node_name(n, i));
      } else if (opset_ < rule->since) {
        throw ValueError(str_cat("[", kOp, "] ", node_name(n, i), ": op ", n.op_type(), " is read from opset ", rule->since,
                                 " on, and the model imports opset ", opset_, "; export the model with opset ", rule->since,
                                 " or later"));
      }
    }
    if (missing.empty()) return;
    std::string list;
    for (const auto& [op, node] : missing) list += str_cat(list.empty() ? "" : ", ", op, " (first at ", node, ")");
    throw ValueError(str_cat("[", kOp, "] the model uses ops the importer does not read: ", list,
                             ". docs/onnx.md lists the ops it reads; export the model without these ops (another opset, "
                             "or a simpler formulation), or add a row to the table in src/onnx_io/onnx_import_rules.cpp"));
  }

  // ---- tracing ----

  struct Input {
    std::string name;
    DType dtype;
    TensorShape shape;
  };

  class Context final : public NodeContext {
   public:
    Context(Importer& imp, const onnx::NodeProto& n, int index, std::unordered_map<std::string, Tensor>& env)
        : imp_(imp), n_(n), index_(index), env_(env) {}
    const onnx::NodeProto& node() const override { return n_; }
    int64_t opset() const override { return imp_.opset_; }
    Tensor in(int i) override {
      if (!has_input(i)) malformed(str_cat("input ", i, " is missing"));
      Tensor t = imp_.value(n_.input(i), env_);
      // A shape-like value (an integer scalar or vector) whose every element tracing knows (static
      // dims read by Shape, and arithmetic on them) is a constant from here on: the rules that
      // need values while importing (Reshape, Slice, ...) get them. Known elements use -1 for
      // "unknown", so only non-negative ones are taken as values.
      if (t.is_symbolic() && (t.dtype() == DType::Int64 || t.dtype() == DType::Int32)) {
        const TensorShape& s = static_shape(t);
        if (s.has_rank() && s.rank() <= 1)
          if (auto known = known_elements(t); known && std::all_of(known->begin(), known->end(), [](int64_t v) { return v >= 0; }))
            t = tg::cast(constant(*known, s.rank() == 0 ? TensorShape() : TensorShape({static_cast<int64_t>(known->size())}),
                                  DType::Int64), t.dtype());
      }
      return t;
    }
    Tensor attr_tensor(const std::string& name) override {
      const auto* a = attr(name, onnx::AttributeProto::TENSOR);
      if (!a) malformed(str_cat("it has no attribute '", name, "'"));
      return imp_.read_tensor(a->t(), str_cat(node_name(n_, index_), " attribute '", name, "'"));
    }
    std::string where() const override { return node_name(n_, index_); }

   private:
    Importer& imp_;
    const onnx::NodeProto& n_;
    int index_;
    std::unordered_map<std::string, Tensor>& env_;
  };

  // A value by name: computed, a graph input, or an initializer (a Variable read on first use).
  Tensor value(const std::string& name, std::unordered_map<std::string, Tensor>& env) {
    if (auto it = env.find(name); it != env.end()) return it->second;
    auto init = initializers_.find(name);
    TG_CHECK(init != initializers_.end(), "ONNX value '", name, "' was checked to be defined");
    Tensor t = init->second;
    if (auto v = variables_.find(name); v != variables_.end()) t = v->second.read_value();
    env.emplace(name, t);
    return t;
  }

  void run_node(const onnx::NodeProto& n, int index, std::unordered_map<std::string, Tensor>& env) {
    Context c(*this, n, index, env);
    const ImportRule* rule = import_rule(n.op_type());
    TG_CHECK(rule != nullptr, "op ", n.op_type(), " was checked to have a rule");
    std::vector<Tensor> outs;
    try {
      outs = rule->compute(c);
    } catch (Error& e) {
      if (dynamic_cast<FormatError*>(&e) == nullptr && std::string(e.what()).find(node_name(n, index)) == std::string::npos)
        e.add_context(str_cat("(importing ONNX ", node_name(n, index), ")"));
      throw;
    }
    std::set<std::string> seen;
    for (const auto& a : n.attribute()) {
      if (!seen.insert(a.name()).second) c.malformed(str_cat("attribute '", a.name(), "' appears twice"));
      const auto& used = c.used_attrs();
      if (std::find(used.begin(), used.end(), a.name()) == used.end())
        c.refuse(str_cat("attribute '", a.name(), "' is not read by the importer's ", n.op_type(),
                         " rule, and ignoring it could change the result; remove it from the model if it has no effect"));
    }
    if (static_cast<int>(outs.size()) < c.num_outputs())
      c.refuse(str_cat("it asks for output ", outs.size(), " ('", n.output(static_cast<int>(outs.size())), "'), which the importer does not compute"));
    for (int k = 0; k < n.output_size(); ++k)
      if (!n.output(k).empty()) env[n.output(k)] = outs[static_cast<std::size_t>(k)];
  }

  TraceOutput body(const std::vector<TraceTypePtr>& traced, PlaceholderContext& pc, const FunctionCore& core) {
    const onnx::GraphProto& g = model_.graph();
    std::unordered_map<std::string, Tensor> env;
    for (std::size_t i = 0; i < inputs_.size(); ++i) env.emplace(inputs_[i].name, pc.placeholder(*traced[i], core.parameter_name(i)));
    for (int i : order_) run_node(g.node(i), i, env);
    TraceOutput out;
    for (const auto& o : g.output()) {
      Tensor t = value(o.name(), env);
      check_output(o, t);
      out.outputs.push_back(t);
    }
    if (out.outputs.size() == 1) {
      out.skeleton = out.outputs[0];
      out.description = TensorStructure<Tensor>::describe(out.outputs[0]);
    } else {
      out.skeleton = out.outputs;
      out.description = TensorStructure<std::vector<Tensor>>::describe(out.outputs);
    }
    return out;
  }

  // A graph output's declared type (when the file gives one) is what the graph computes.
  void check_output(const onnx::ValueInfoProto& o, const Tensor& t) {
    if (!o.type().has_tensor_type()) return;
    const auto& tt = o.type().tensor_type();
    const std::string what = str_cat("graph output '", o.name(), "'");
    const TensorShape declared = read_shape(tt, what);
    const std::optional<DType> dtype = dtype_of(tt.elem_type());
    const TensorShape& got = static_shape(t);
    bool ok = tt.elem_type() == onnx::TensorProto::UNDEFINED || (dtype && *dtype == t.dtype());
    if (declared.has_rank() && got.has_rank()) {
      ok &= declared.rank() == got.rank();
      for (int64_t k = 0; ok && k < declared.rank(); ++k) {
        const int64_t a = declared.dims()[static_cast<std::size_t>(k)], b = got.dims()[static_cast<std::size_t>(k)];
        ok &= a < 0 || b < 0 || a == b;
      }
    }
    if (!ok)
      bad(what, str_cat("the model declares it ", describe(tt.elem_type(), declared), " but its graph computes ",
                        to_string(t.dtype()), " ", got.to_string()));
  }

  std::shared_ptr<LoadedState> trace(const onnx::GraphProto& g) {
    auto state = std::make_shared<LoadedState>();
    if (options_.initializers_as_variables)
      for (const auto& name : initializer_order_) {
        const Tensor& t = initializers_.at(name);
        if (t.dtype() != DType::Float32 && t.dtype() != DType::Float64) continue;
        Variable v(t, name);
        variables_.emplace(name, v);
        state->variables.push_back(v);
      }
    FunctionOptions fo;
    fo.name = !options_.name.empty() ? options_.name : !g.name().empty() ? g.name() : "onnx_model";
    fo.optimize = options_.optimize;
    fo.max_traces = 0;
    std::vector<TraceTypePtr> types;
    for (const Input& in : inputs_) {
      fo.arg_names.push_back(in.name);
      types.push_back(tensor_trace_type(in.dtype, in.shape));
    }
    // No callable type: like tg::load's functions, an import is not a C++ callable that could be
    // wrapped again and again.
    state->core = std::make_shared<FunctionCore>(fo, "");
    const FunctionCore& core = *state->core;
    auto traced_body = [&](const std::vector<TraceTypePtr>& traced, PlaceholderContext& pc) { return body(traced, pc, core); };
    auto cf = dispatch_or_trace(*state->core, std::move(types), TraceBody(traced_body), nullptr, false);
    // The Variables the graph reads, as LoadedFunction::variable_uses reports them.
    const GraphIR& ir = cf->unoptimized_ir ? *cf->unoptimized_ir : *cf->ir;
    VariableUse use;
    const VariableUses uses = variable_uses(ir);
    for (const auto& [list, out] : {std::pair{&uses.reads, &use.reads}, std::pair{&uses.writes, &use.writes}})
      for (const auto& v : *list)
        for (std::size_t k = 0; k < state->variables.size(); ++k)
          if (state->variables[k].state() == v) out->push_back(k);
    state->uses.push_back(std::move(use));
    state->producer = str_cat(model_.producer_name().empty() ? "unknown producer" : model_.producer_name(),
                              model_.producer_version().empty() ? "" : " ", model_.producer_version(), " (ONNX, opset ", opset_, ")");
    return state;
  }

  const onnx::ModelProto& model_;
  const OnnxImportOptions& options_;
  int64_t opset_ = 0;
  std::unordered_set<std::string> defined_;
  std::unordered_map<std::string, Tensor> initializers_;
  std::vector<std::string> initializer_order_;
  std::unordered_map<std::string, Variable> variables_;
  std::vector<Input> inputs_;
  std::vector<int> order_;
};

std::shared_ptr<LoadedState> import_bytes(const void* data, std::size_t size, const OnnxImportOptions& options) {
  if (size > options.max_file_bytes)
    bad("model", str_cat("it has ", size, " bytes, more than OnnxImportOptions::max_file_bytes (", options.max_file_bytes, ")"));
  if (size > static_cast<std::size_t>(INT32_MAX)) bad("model", "protobuf messages are limited to 2 GiB");
  onnx::ModelProto model;
  google::protobuf::io::CodedInputStream in(static_cast<const uint8_t*>(data), static_cast<int>(size));
  in.SetTotalBytesLimit(static_cast<int>(size));
  // Nested messages (graphs in attributes, types in types) beyond this depth are refused.
  in.SetRecursionLimit(64);
  if (!model.ParseFromCodedStream(&in))
    bad("model", "the bytes are not an ONNX ModelProto (truncated, damaged, or another kind of file)");
  return Importer(model, options).run();
}

}  // namespace
}  // namespace tg::detail::onnx_import

namespace tg {

LoadedFunction import_onnx(const std::string& path, const OnnxImportOptions& options) {
  {
    detail::RegularFile f("tg::import_onnx", path, "an ONNX model file");
    if (f.size() > options.max_file_bytes)
      throw FormatError(detail::str_cat("[tg::import_onnx] '", path, "' has ", f.size(), " bytes, more than "
                                        "OnnxImportOptions::max_file_bytes (", options.max_file_bytes, ")"), "model", 0);
  }
  const std::vector<uint8_t> bytes = detail::read_file_bytes("tg::import_onnx", path, "an ONNX model file", "");
  try {
    return LoadedFunction(detail::onnx_import::import_bytes(bytes.data(), bytes.size(), options));
  } catch (Error& e) {
    e.add_context("(in '" + path + "')");
    throw;
  }
}

LoadedFunction import_onnx_from_memory(const void* data, std::size_t size, const OnnxImportOptions& options) {
  return LoadedFunction(detail::onnx_import::import_bytes(data, size, options));
}

}  // namespace tg
