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
    main_.graph = &g;
    nodes_seen_ = g.node_size();
    plan_nodes(main_, main_scope_, 0);
    check_ops(main_);
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

  // The names a graph defines (initializers, inputs, node outputs), within those of the graphs
  // enclosing it: a sub-graph reads its enclosing graphs' values by name.
  struct Scope {
    const Scope* outer = nullptr;
    std::unordered_set<std::string> names;
    bool visible(const std::string& name) const {
      for (const Scope* s = this; s; s = s->outer)
        if (s->names.count(name)) return true;
      return false;
    }
  };

  // A validated graph: its nodes in an order that computes each value before its use, its own
  // initializers (a sub-graph's), the plans of its nodes' graph attributes, and the names it
  // reads from enclosing graphs.
  struct GraphPlan {
    const onnx::GraphProto* graph = nullptr;
    std::vector<int> order;
    std::vector<std::pair<std::string, Tensor>> initializers;
    std::map<std::pair<int, std::string>, std::unique_ptr<GraphPlan>> subgraphs;  // (node, attribute)
    std::vector<std::string> outer_reads;
  };

  void define(Scope& scope, const std::string& name, const std::string& what) {
    if (name.empty()) bad(what, "it defines a value with an empty name");
    if (scope.outer && scope.outer->visible(name))
      bad(what, str_cat("value '", name, "' is also a value of an enclosing graph; ONNX sub-graphs may read the names "
                        "of enclosing graphs but not define them again"));
    if (!scope.names.insert(name).second) bad(what, str_cat("value '", name, "' is defined twice (ONNX graphs define each value once)"));
  }
  void define(const std::string& name, const std::string& what) { define(main_scope_, name, what); }

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

  // Validates the nodes of plan.graph (its initializers and inputs already defined in `scope`)
  // and orders them by Kahn's algorithm: every input of a node, and every value its sub-graphs
  // read from this graph, is defined by the graph, an enclosing graph or an earlier node; a value
  // nothing defines, or a cycle, is refused. Sub-graphs are validated the same way, nested at most
  // OnnxImportOptions::max_graph_depth deep.
  void plan_nodes(GraphPlan& plan, Scope& scope, int64_t depth) {
    const onnx::GraphProto& g = *plan.graph;
    std::unordered_map<std::string, int> producer;
    for (int i = 0; i < g.node_size(); ++i) {
      const auto& n = g.node(i);
      for (const auto& out : n.output()) {
        if (out.empty()) continue;
        define(scope, out, node_name(n, i));
        producer.emplace(out, i);
      }
    }
    std::vector<int> pending(static_cast<std::size_t>(g.node_size()), 0);
    std::vector<std::vector<int>> consumers(static_cast<std::size_t>(g.node_size()));
    std::unordered_set<std::string> outer_reads;
    // Node i reads `name`: a dependency on its producer here, or a read of an enclosing graph.
    auto reads = [&](int i, const std::string& name, const std::string& what) {
      if (auto it = producer.find(name); it != producer.end()) {
        ++pending[static_cast<std::size_t>(i)];
        consumers[static_cast<std::size_t>(it->second)].push_back(i);
      } else if (!scope.names.count(name)) {
        if (!scope.visible(name)) bad(what, str_cat("it reads '", name, "', which no node, graph input or initializer defines"));
        if (outer_reads.insert(name).second) plan.outer_reads.push_back(name);
      }
    };
    for (int i = 0; i < g.node_size(); ++i) {
      const auto& n = g.node(i);
      for (const auto& in : n.input())
        if (!in.empty()) reads(i, in, node_name(n, i));  // empty: an omitted optional input
      for (const auto& a : n.attribute()) {
        if (a.type() == onnx::AttributeProto::GRAPHS || a.graphs_size() > 0)
          throw ValueError(str_cat("[", kOp, "] ", node_name(n, i), " has a list of graphs in attribute '", a.name(),
                                   "', which no op the importer reads takes (If and Loop take one graph each)"));
        if (a.type() != onnx::AttributeProto::GRAPH) continue;
        auto sub = plan_subgraph(a.g(), scope, depth + 1, str_cat(node_name(n, i), " attribute '", a.name(), "'"));
        for (const auto& name : sub->outer_reads) reads(i, name, node_name(n, i));
        if (!plan.subgraphs.emplace(std::pair{i, a.name()}, std::move(sub)).second)
          bad(node_name(n, i), str_cat("attribute '", a.name(), "' appears twice"));
      }
    }
    for (const auto& out : g.output()) {
      const std::string what = str_cat("graph output '", out.name(), "'");
      if (!scope.visible(out.name())) bad(what, "no node, input or initializer defines it");
      if (!scope.names.count(out.name()) && outer_reads.insert(out.name()).second) plan.outer_reads.push_back(out.name());
    }
    std::vector<int> ready;
    for (int i = g.node_size() - 1; i >= 0; --i)
      if (pending[static_cast<std::size_t>(i)] == 0) ready.push_back(i);
    while (!ready.empty()) {
      const int i = ready.back();
      ready.pop_back();
      plan.order.push_back(i);
      // Consumers in reverse so that independent nodes keep the file's order.
      const auto& cs = consumers[static_cast<std::size_t>(i)];
      for (auto it = cs.rbegin(); it != cs.rend(); ++it)
        if (--pending[static_cast<std::size_t>(*it)] == 0) ready.push_back(*it);
    }
    if (plan.order.size() != static_cast<std::size_t>(g.node_size())) {
      std::string names;
      int shown = 0;
      for (int i = 0; i < g.node_size() && shown < 5; ++i)
        if (pending[static_cast<std::size_t>(i)] > 0) names += str_cat(shown++ ? ", " : "", node_name(g.node(i), i));
      bad(depth == 0 ? std::string("graph") : str_cat("sub-graph '", g.name(), "'"),
          str_cat("its nodes form a cycle (", names, " wait on each other); ONNX graphs are acyclic"));
    }
  }

  // A graph attribute (an If branch, a Loop body): its initializers, inputs and nodes, within
  // the names of `outer`.
  std::unique_ptr<GraphPlan> plan_subgraph(const onnx::GraphProto& g, const Scope& outer, int64_t depth, const std::string& what) {
    if (depth > options_.max_graph_depth)
      bad(what, str_cat("its sub-graphs are nested more than OnnxImportOptions::max_graph_depth (", options_.max_graph_depth,
                        ") deep"));
    nodes_seen_ += g.node_size();
    if (nodes_seen_ > options_.max_nodes)
      bad(what, str_cat("the model's graphs have more than OnnxImportOptions::max_nodes (", options_.max_nodes, ") nodes"));
    if (g.sparse_initializer_size() > 0)
      throw ValueError(str_cat("[", kOp, "] ", what, " has sparse initializers, which the importer does not read; store them dense"));
    auto plan = std::make_unique<GraphPlan>();
    plan->graph = &g;
    Scope scope;
    scope.outer = &outer;
    for (const auto& init : g.initializer()) {
      const std::string part = str_cat(what, " initializer '", init.name(), "'");
      define(scope, init.name(), part);
      plan->initializers.emplace_back(init.name(), read_tensor(init, part));
    }
    for (const auto& in : g.input()) {
      const std::string part = str_cat(what, " input '", in.name(), "'");
      define(scope, in.name(), part);
      if (in.type().has_tensor_type()) read_shape(in.type().tensor_type(), part);  // its rank within the limit
      else if (in.has_type())
        throw ValueError(str_cat("[", kOp, "] ", part, " is not a tensor (a sequence, map or optional), which the importer "
                                 "does not read"));
    }
    plan_nodes(*plan, scope, depth);
    return plan;
  }

  static std::string node_name(const onnx::NodeProto& n, int index) {
    return n.name().empty() ? str_cat("node ", index, " (", n.op_type(), ")") : str_cat("node '", n.name(), "' (", n.op_type(), ")");
  }

  // Every node's op (sub-graphs' too) is read by the table at the model's opset: all that are
  // not, named at once.
  void collect_missing(const GraphPlan& plan, std::map<std::string, std::string>& missing) {
    const onnx::GraphProto& g = *plan.graph;
    for (int i : plan.order) {
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
    for (const auto& [key, sub] : plan.subgraphs) collect_missing(*sub, missing);
  }
  void check_ops(const GraphPlan& plan) {
    std::map<std::string, std::string> missing;  // op type -> first node
    collect_missing(plan, missing);
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

  // The values computed so far in one graph being traced, within those of its enclosing graphs:
  // as the ONNX graph sees them (values) and, for 4-D ones held channels-last, as NHWC tensors
  // (nhwc). A value may be in both (its NCHW form made for a rule that reads it so).
  struct Env {
    Env* outer = nullptr;
    std::unordered_map<std::string, Tensor> values;
    std::unordered_map<std::string, Tensor> nhwc;
  };

  // x's axes permuted (perm[0] is 0: the batch stays first): a reshape when the dims other than
  // 1 keep their order (a (N, C, 1, 1) value, a per-channel constant) and every dim but the
  // batch is static (the batch as -1 when it is None and the other dims hold elements), else a
  // transpose.
  static Tensor permute(const Tensor& x, const std::vector<int>& perm) {
    const TensorShape& s = static_shape(x);
    if (s.has_rank() && static_cast<std::size_t>(s.rank()) == perm.size() && perm[0] == 0) {
      const std::vector<int64_t> d = s.none_aware().dims();
      std::vector<int64_t> out;
      std::vector<int> moved;
      int64_t rest = 1;
      bool known = true;
      for (std::size_t k = 0; k < perm.size(); ++k) {
        const int64_t v = d[static_cast<std::size_t>(perm[k])];
        out.push_back(v);
        if (k > 0) {
          known = known && v >= 0;
          rest *= std::max<int64_t>(v, 0);
          if (v != 1) moved.push_back(perm[k]);
        }
      }
      if (known && (out[0] >= 0 || rest > 0) && std::is_sorted(moved.begin(), moved.end())) return tg::reshape(x, out);
    }
    return tg::transpose(x, perm);
  }
  static Tensor nchw_to_nhwc(const Tensor& x) { return permute(x, {0, 2, 3, 1}); }
  static Tensor nhwc_to_nchw(const Tensor& x) { return permute(x, {0, 3, 1, 2}); }

  class Context final : public NodeContext {
   public:
    Context(Importer& imp, const GraphPlan& plan, const onnx::NodeProto& n, int index, Env& env)
        : imp_(imp), plan_(plan), n_(n), index_(index), env_(env) {}
    const onnx::NodeProto& node() const override { return n_; }
    int64_t opset() const override { return imp_.opset_; }
    Tensor in(int i) override {
      note_input(i);
      if (!has_input(i)) malformed(str_cat("input ", i, " is missing"));
      if (!overrides_.empty() && overrides_[static_cast<std::size_t>(i)]) return *overrides_[static_cast<std::size_t>(i)];
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
    TensorShape shape_of(int i) override {
      note_input(i);
      if (!has_input(i)) malformed(str_cat("input ", i, " is missing"));
      if (!overrides_.empty() && overrides_[static_cast<std::size_t>(i)]) return overrides_[static_cast<std::size_t>(i)]->shape();
      if (const Tensor* h = imp_.nhwc_value(n_.input(i), env_)) {
        const std::vector<int64_t> d = h->shape().none_aware().dims();  // None is -1
        return TensorShape({d[0], d[3], d[1], d[2]});
      }
      return in(i).shape();
    }
    bool held_nhwc(int i) override {
      return has_input(i) && (overrides_.empty() || !overrides_[static_cast<std::size_t>(i)]) &&
             imp_.nhwc_value(n_.input(i), env_) != nullptr;
    }
    Tensor in_nhwc(int i) override {
      note_input(i);
      if (held_nhwc(i)) return *imp_.nhwc_value(n_.input(i), env_);
      const Tensor t = in(i);
      TG_CHECK(t.shape().has_rank() && t.shape().rank() == 4, "in_nhwc reads 4-D values (the rule checked the rank)");
      Tensor h = nchw_to_nhwc(t);
      // Kept: every later rule that reads this value channels-last shares the one transpose.
      if (overrides_.empty()) env_.nhwc.emplace(n_.input(i), h);
      return h;
    }
    // An elementwise node with an input held channels-last reads all its inputs channels-last:
    // each other input of rank 4 or less broadcasts as NCHW, so it is made 4-D, permuted to NHWC,
    // and its leading 1s dropped (a (C, 1, 1) constant becomes (C,)). False (inputs untouched)
    // when no input is held so or one has an unknown rank or more than 4 dims.
    bool take_nhwc_inputs() {
      bool any = false;
      for (int i = 0; i < n_.input_size(); ++i) any = any || held_nhwc(i);
      if (!any) return false;
      std::vector<std::optional<Tensor>> o(static_cast<std::size_t>(n_.input_size()));
      for (int i = 0; i < n_.input_size(); ++i) {
        if (!has_input(i)) continue;
        if (const Tensor* h = imp_.nhwc_value(n_.input(i), env_)) {
          o[static_cast<std::size_t>(i)] = *h;
          continue;
        }
        Tensor t = in(i);
        const TensorShape& s = static_shape(t);
        if (!s.has_rank() || s.rank() > 4) return false;
        if (s.rank() > 0) {
          if (s.is_fully_defined()) {
            std::vector<int64_t> d = s.dims();
            d.insert(d.begin(), static_cast<std::size_t>(4 - s.rank()), 1);
            std::vector<int64_t> out{d[0], d[2], d[3], d[1]};
            while (!out.empty() && out.front() == 1) out.erase(out.begin());
            t = tg::reshape(nchw_to_nhwc(tg::reshape(t, d)), out);
          } else {
            while (t.shape().rank() < 4) t = tg::expand_dims(t, 0);
            t = nchw_to_nhwc(t);
          }
        }
        o[static_cast<std::size_t>(i)] = t;
      }
      overrides_ = std::move(o);
      return true;
    }
    Tensor attr_tensor(const std::string& name) override {
      const auto* a = attr(name, onnx::AttributeProto::TENSOR);
      if (!a) malformed(str_cat("it has no attribute '", name, "'"));
      return imp_.read_tensor(a->t(), str_cat(node_name(n_, index_), " attribute '", name, "'"));
    }
    std::vector<Tensor> run_subgraph(const std::string& name, const std::vector<Tensor>& inputs) override {
      auto it = plan_.subgraphs.find(std::pair{index_, name});
      if (it == plan_.subgraphs.end()) malformed(str_cat("it has no graph attribute '", name, "'"));
      return imp_.run_graph(*it->second, env_, inputs, str_cat(where(), " attribute '", name, "'"));
    }
    std::any& memo() override { return imp_.memos_[&n_]; }
    std::string where() const override { return node_name(n_, index_); }

   private:
    Importer& imp_;
    const GraphPlan& plan_;
    const onnx::NodeProto& n_;
    int index_;
    Env& env_;
    std::vector<std::optional<Tensor>> overrides_;  // the inputs an elementwise node reads channels-last
  };

  // A value by name: computed here or in an enclosing graph, a graph input, or an initializer
  // (a Variable read on first use, in the graph that first uses it).
  // A value held only channels-last is transposed here (once per graph that reads it).
  Tensor value(const std::string& name, Env& env) {
    for (Env* e = &env; e; e = e->outer)
      if (auto it = e->values.find(name); it != e->values.end()) return it->second;
    if (const Tensor* h = nhwc_value(name, env)) {
      Tensor t = nhwc_to_nchw(*h);
      env.values.emplace(name, t);
      return t;
    }
    auto init = initializers_.find(name);
    TG_CHECK(init != initializers_.end(), "ONNX value '", name, "' was checked to be defined");
    Tensor t = init->second;
    if (auto v = variables_.find(name); v != variables_.end()) t = v->second.read_value();
    env.values.emplace(name, t);
    return t;
  }

  // The NHWC tensor of a value held channels-last, or null.
  const Tensor* nhwc_value(const std::string& name, Env& env) {
    for (Env* e = &env; e; e = e->outer)
      if (auto it = e->nhwc.find(name); it != e->nhwc.end()) return &it->second;
    return nullptr;
  }

  void run_node(const GraphPlan& plan, int index, Env& env) {
    const onnx::NodeProto& n = plan.graph->node(index);
    Context c(*this, plan, n, index, env);
    const ImportRule* rule = import_rule(n.op_type());
    TG_CHECK(rule != nullptr, "op ", n.op_type(), " was checked to have a rule");
    // The Variables (initializers) its sub-graphs read are read here, before the If or Loop:
    // gradients flow to a Variable read outside tg::cond / tg::while_loop and captured by them.
    for (auto it = plan.subgraphs.lower_bound(std::pair{index, std::string()});
         it != plan.subgraphs.end() && it->first.first == index; ++it)
      for (const auto& name : it->second->outer_reads)
        if (variables_.count(name)) value(name, env);
    std::vector<Tensor> outs;
    bool all_nhwc = false;  // an elementwise node reading channels-last inputs returns channels-last outputs
    try {
      all_nhwc = elementwise_op(n.op_type()) && c.take_nhwc_inputs();
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
    for (int i = 0; i < n.input_size(); ++i)
      if (!n.input(i).empty() && !c.input_read(i))
        c.refuse(str_cat("input ", i, " ('", n.input(i), "') is not read by the importer's ", n.op_type(),
                         " rule, and ignoring it could change the result; remove it from the model if it has no effect"));
    if (static_cast<int>(outs.size()) < c.num_outputs())
      c.refuse(str_cat("it asks for output ", outs.size(), " ('", n.output(static_cast<int>(outs.size())), "'), which the importer does not compute"));
    for (int k = 0; k < n.output_size(); ++k) {
      if (n.output(k).empty()) continue;
      const Tensor& t = outs[static_cast<std::size_t>(k)];
      if (all_nhwc || c.marked_nhwc(k)) {
        TG_CHECK(t.shape().has_rank() && t.shape().rank() == 4, "a channels-last output of ", n.op_type(), " is 4-D");
        env.nhwc[n.output(k)] = t;
      } else {
        env.values[n.output(k)] = t;
      }
    }
  }

  // A sub-graph traced where the caller records: its inputs bound to `inputs`, its initializers
  // as constants, its nodes in order; returns its outputs.
  std::vector<Tensor> run_graph(const GraphPlan& plan, Env& outer, const std::vector<Tensor>& inputs, const std::string& what) {
    const onnx::GraphProto& g = *plan.graph;
    if (static_cast<std::size_t>(g.input_size()) != inputs.size())
      bad(what, str_cat("the graph has ", g.input_size(), " inputs where its node gives it ", inputs.size()));
    Env env;
    env.outer = &outer;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const auto& in = g.input(static_cast<int>(i));
      if (in.type().has_tensor_type()) {
        const int elem = in.type().tensor_type().elem_type();
        const std::optional<DType> d = dtype_of(elem);
        if (elem != onnx::TensorProto::UNDEFINED && (!d || *d != inputs[i].dtype()))
          bad(str_cat(what, " input '", in.name(), "'"), str_cat("it is declared ", onnx_type_name(elem), " but its node gives it ",
                                                                 to_string(inputs[i].dtype())));
      }
      env.values.emplace(in.name(), inputs[i]);
    }
    for (const auto& [name, t] : plan.initializers) env.values.emplace(name, t);
    for (int i : plan.order) run_node(plan, i, env);
    std::vector<Tensor> out;
    for (const auto& o : g.output()) out.push_back(value(o.name(), env));
    return out;
  }

  TraceOutput body(const std::vector<TraceTypePtr>& traced, PlaceholderContext& pc, const FunctionCore& core) {
    const onnx::GraphProto& g = model_.graph();
    Env env;
    for (std::size_t i = 0; i < inputs_.size(); ++i) env.values.emplace(inputs_[i].name, pc.placeholder(*traced[i], core.parameter_name(i)));
    for (int i : main_.order) run_node(main_, i, env);
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
  Scope main_scope_;
  GraphPlan main_;
  int64_t nodes_seen_ = 0;
  std::unordered_map<const onnx::NodeProto*, std::any> memos_;
  std::unordered_map<std::string, Tensor> initializers_;
  std::vector<std::string> initializer_order_;
  std::unordered_map<std::string, Variable> variables_;
  std::vector<Input> inputs_;
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
