// tg::save and tg::save_variables: a function's concrete functions - graphs as traced, their
// FunctionTypes, the Variables they use and the constants they captured - to one .tgx file.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <unordered_map>

#include "export/container.h"
#include "export/loaded.h"
#include "ops/fused.h"
#include "trace/function_core.h"

namespace tg {
namespace detail {
namespace tgx {
namespace {

class FunctionWriter {
 public:
  explicit FunctionWriter(const std::string& function) : function_(function) {}

  /// Numbers the Variables the graphs use in the order they were created (what a reader of
  /// LoadedFunction::variables() expects), before any graph is written.
  void number_variables(const std::vector<std::shared_ptr<ConcreteImpl>>& concretes) {
    std::vector<std::shared_ptr<VariableState>> found;
    for (const auto& cf : concretes) {
      const VariableUses uses = variable_uses(cf->unoptimized_ir ? *cf->unoptimized_ir : *cf->ir);
      for (const auto* list : {&uses.reads, &uses.writes})
        for (const auto& v : *list)
          if (!v->parameter && std::find(found.begin(), found.end(), v) == found.end()) found.push_back(v);
    }
    std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a->id < b->id; });
    for (auto& v : found) {
      variable_index_.emplace(v.get(), static_cast<uint32_t>(variables_.size()));
      variables_.push_back(std::move(v));
    }
  }

  /// The manifest entry of one concrete function (its graph goes to the GRPH section).
  void add(const ConcreteImpl& cf) {
    params_ = &cf.variable_parameters;
    const GraphIR& traced = cf.unoptimized_ir ? *cf.unoptimized_ir : *cf.ir;
    Writer& w = concretes_;
    const FunctionTypeKey& type = cf.input_type;
    w.count(type.params.size());
    for (std::size_t i = 0; i < type.params.size(); ++i) {
      TraceTypeTree tree;
      std::string unsupported;
      if (!trace_type_tree(*type.params[i], tree, unsupported))
        throw ValueError(str_cat(
            "[tg::save] function '", function_, "' has a concrete function ", type.to_string(), " whose argument '",
            type.names[i], "' has the type ", unsupported, ", which cannot leave this process: a .tgx file holds "
            "tensors, C++ literals, containers of them and Variables, not C++ objects. Save a function whose "
            "arguments are those (pass the object's values as tensors or literals)"));
      w.str(type.names[i]);
      try {
        write_type(w, tree);
      } catch (ValueError& e) {
        e.add_context(str_cat("(argument '", type.names[i], "' of function '", function_, "', concrete function ",
                              type.to_string(), ")"));
        throw;
      }
    }
    w.count(cf.variable_parameters.size());
    for (const auto& p : cf.variable_parameters) {
      w.str(p->name);
      w.dtype(p->dtype);
      try {
        w.shape(p->shape, "a Variable parameter");
      } catch (ValueError& e) {
        e.add_context(str_cat("(Variable parameter '", p->name, "' of function '", function_, "')"));
        throw;
      }
      w.u8(p->owns_state_of_first_binding ? 1 : 0);
    }
    // What the graph reads and writes (the loader checks it against the graph).
    const VariableUses uses = variable_uses(traced);
    for (const auto* list : {&uses.reads, &uses.writes}) {
      w.count(list->size());
      for (const auto& v : *list) write_variable_ref(w, v);
    }
    // One Tensor: a C++ function's skeleton is its result's C++ type; another frontend's (the
    // Python one's result structure) is not, and its description is one TensorSpec instead.
    const std::any& skeleton = cf.skeleton;
    const bool single = skeleton.has_value() && (skeleton.type() == typeid(Tensor) ||
                                                 (traced.outputs.size() == 1 && cf.output_description.rfind("TensorSpec(", 0) == 0));
    w.u8(static_cast<uint8_t>(!skeleton.has_value() ? OutputKind::kNone : single ? OutputKind::kTensor : OutputKind::kFlat));
    w.str(cf.output_description);
    write_graph(graphs_, traced);
    ++count_;
  }

  std::vector<Section> sections(const FunctionCore& core) {
    Writer m;
    m.u8(static_cast<uint8_t>(FileKind::kFunction));
    m.str(this_producer());
    m.str(function_);
    m.u8(core.options().optimize ? 1 : 0);
    m.count(variables_.size());
    for (const auto& v : variables_) write_variable(m, tensors_, *v);
    m.count(count_);
    m.bytes += concretes_.bytes;
    Writer g;
    g.count(count_);
    g.bytes += graphs_.bytes;
    return {{kManifest, std::move(m.bytes)}, {kGraphs, std::move(g.bytes)}, tensors_.table(), tensors_.data()};
  }

 private:
  void write_type(Writer& w, const TraceTypeTree& t) {
    using Kind = TraceTypeTree::Kind;
    switch (t.kind) {
      case Kind::kTensor:
        w.u8(static_cast<uint8_t>(TypeCode::kTensor));
        w.dtype(t.dtype);
        w.shape(t.shape, "a tensor type");
        w.str(t.name);
        return;
      case Kind::kLiteral:
        w.u8(static_cast<uint8_t>(TypeCode::kLiteral));
        write_literal(w, t.literal);
        return;
      case Kind::kSequence:
        w.u8(static_cast<uint8_t>(TypeCode::kSequence));
        w.str(t.name);
        w.count(t.elements.size());
        for (const auto& e : t.elements) write_type(w, e);
        return;
      case Kind::kMapping:
        w.u8(static_cast<uint8_t>(TypeCode::kMapping));
        w.count(t.elements.size());
        for (std::size_t i = 0; i < t.elements.size(); ++i) {
          write_literal(w, t.keys[i]);
          write_type(w, t.elements[i]);
        }
        return;
      case Kind::kOptional:
        w.u8(static_cast<uint8_t>(TypeCode::kOptional));
        w.u8(t.elements.empty() ? 0 : 1);
        if (!t.elements.empty()) write_type(w, t.elements[0]);
        return;
      case Kind::kVariable:
        w.u8(static_cast<uint8_t>(TypeCode::kVariable));
        w.dtype(t.dtype);
        w.shape(t.shape, "a Variable type");
        w.i64(t.alias_id);
        return;
    }
  }

  static void write_literal(Writer& w, const LiteralValue& v) {
    // What the loader would refuse is refused here, by the same definitions.
    std::string defect = type_name_defect(std::strlen(v.cpp_type));
    if (defect.empty()) defect = literal_defect(static_cast<int>(v.kind), v.i, v.f, v.s, v.cpp_type);
    if (!defect.empty() && v.kind == LiteralValue::Kind::kEnum && v.s.empty())
      // A std::map's enum keys carry no type name (trace types match keys as made from values).
      throw ValueError(str_cat("[tg::save] a std::map keyed by the enum ", v.cpp_type, " cannot be written to a .tgx "
                               "file yet: its keys lack the type name tg::load requires of an enum literal, so the file "
                               "would not load and nothing was written. Key the map by integers (static_cast<int>(key))"));
    if (!defect.empty())
      throw ValueError(str_cat("[tg::save] the literal ", v.to_string(), " (C++ type ", v.cpp_type, ") cannot be written: ",
                               defect, " in a .tgx file, so tg::load would refuse the file and nothing was written. Pass "
                               "the value as an integer literal or a tensor instead"));
    w.u8(static_cast<uint8_t>(v.kind));
    w.i64(v.i);
    w.f64(v.f);
    w.str(v.s);
    w.str(v.cpp_type);
  }

  void write_graph(Writer& w, const GraphIR& g) {
    w.count(g.nodes.size());
    for (const GraphNode& n : g.nodes) {
      w.str(n.name);
      const NodeCode code = n.kind == NodeKind::kPlaceholder ? NodeCode::kPlaceholder
                            : n.kind == NodeKind::kConst     ? NodeCode::kConst
                            : n.kind == NodeKind::kOp        ? NodeCode::kOp
                                                             : NodeCode::kOutput;
      w.u8(static_cast<uint8_t>(code));
      w.count(n.inputs.size());
      for (const ValueRef& in : n.inputs) {
        w.u32(static_cast<uint32_t>(in.node));
        w.u32(static_cast<uint32_t>(in.output));
      }
      w.count(n.outputs.size());
      try {
        for (const ValueType& t : n.outputs) {
          w.dtype(t.dtype);
          w.shape(t.shape, "an output");
        }
      } catch (ValueError& e) {
        e.add_context(node_context(n));
        throw;
      }
      w.i64(n.control_input);
      switch (n.kind) {
        case NodeKind::kPlaceholder:
          w.u32(static_cast<uint32_t>(n.input_index));
          w.str(g.captured_name(n));
          break;
        case NodeKind::kConst: w.u32(tensors_.add(n.value)); break;
        case NodeKind::kOp:
          // Files hold graphs as traced and the optimiser runs again when they are loaded; a
          // node only the optimiser makes, in a graph as traced, was put there by hand.
          if (op_def(n.op).traits & kOptimizerOnly)
            throw ValueError(str_cat("[tg::save] node '", n.name, "' of function '", function_, "' is a ",
                                     op_def(n.op).name, " node recorded by hand; a file holds graphs as traced (the "
                                     "optimiser runs again at load), so record the ops it stands for themselves"));
          // A host function (tf.py_function's callable) lives in this process only.
          if (const auto* host = n.attrs.get_if<HostCallAttrs>())
            throw ValueError(str_cat("[tg::save] node '", n.name, "' of function '", function_, "' is a ",
                                     op_def(n.op).name, " node calling the host function '", host->function->name,
                                     "', which cannot leave this process: a .tgx file holds graphs, not the host "
                                     "program's functions. Save a function without it (call the host function outside "
                                     "the tg::function, or compute its result with tracegraph ops)"));
          w.u16(static_cast<uint16_t>(op_def(n.op).serial));
          try {
            write_attrs(w, n);
          } catch (ValueError& e) {
            e.add_context(node_context(n));
            throw;
          }
          break;
        case NodeKind::kOutput: break;
      }
    }
    w.count(g.placeholders.size());
    for (int p : g.placeholders) w.u32(static_cast<uint32_t>(p));
    w.count(g.outputs.size());
    for (int o : g.outputs) w.u32(static_cast<uint32_t>(o));
  }

  std::string node_context(const GraphNode& n) const {
    return str_cat("(node '", n.name, "'", n.kind == NodeKind::kOp ? str_cat(" (op ", op_def(n.op).name, ")") : std::string(),
                   " of function '", function_, "')");
  }

  void write_attrs(Writer& w, const GraphNode& n) {
    Writer fields;
    std::size_t count = 0;
    n.attrs.visit([&](const auto& attrs) {
      attrs.for_each_field([&](const char* name, const auto& value) {
        using T = std::decay_t<decltype(value)>;
        fields.str(name);
        ++count;
        if constexpr (std::is_same_v<T, int64_t>) {
          fields.u8(static_cast<uint8_t>(FieldCode::kInt));
          fields.i64(value);
        } else if constexpr (std::is_same_v<T, bool>) {
          fields.u8(static_cast<uint8_t>(FieldCode::kBool));
          fields.u8(value ? 1 : 0);
        } else if constexpr (std::is_same_v<T, double>) {
          fields.u8(static_cast<uint8_t>(FieldCode::kFloat));
          fields.f64(value);
        } else if constexpr (std::is_same_v<T, DType>) {
          fields.u8(static_cast<uint8_t>(FieldCode::kDType));
          fields.dtype(value);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          fields.u8(static_cast<uint8_t>(FieldCode::kInts));
          fields.count(value.size());
          for (int64_t v : value) fields.i64(v);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          fields.u8(static_cast<uint8_t>(FieldCode::kStrings));
          fields.count(value.size());
          for (const auto& v : value) fields.str(v);
        } else if constexpr (std::is_same_v<T, std::shared_ptr<VariableState>>) {
          fields.u8(static_cast<uint8_t>(FieldCode::kVariable));
          write_variable_ref(fields, value);
        } else if constexpr (std::is_same_v<T, std::shared_ptr<const ControlFlowPayload>>) {
          fields.u8(static_cast<uint8_t>(FieldCode::kControlFlow));
          write_payload(fields, *value);
        } else {
          static_assert(std::is_same_v<T, std::shared_ptr<const FusedProgram>> ||
                            std::is_same_v<T, std::shared_ptr<const VariableGroup>> ||
                            std::is_same_v<T, std::shared_ptr<const HostFunction>>,
                        "a field type export does not know");
          TG_CHECK(false, "an optimiser-only or host_call node's attributes reached the writer (those nodes are refused first)");
        }
      });
    });
    w.count(count);
    w.bytes += fields.bytes;
  }

  void write_variable_ref(Writer& w, const std::shared_ptr<VariableState>& v) {
    TG_CHECK(v != nullptr, "a Variable op without its Variable");
    if (v->parameter) {
      for (std::size_t i = 0; i < params_->size(); ++i)
        if ((*params_)[i] == v) {
          w.u8(static_cast<uint8_t>(VariableRef::kParameter));
          w.u32(static_cast<uint32_t>(i));
          return;
        }
      throw InternalError(str_cat("[tg::save] a graph of function '", function_, "' uses Variable parameter '", v->name,
                                  "' of function '", v->parameter_of, "', which is not one of its own"));
    }
    auto it = variable_index_.find(v.get());
    TG_CHECK(it != variable_index_.end(), "Variable '", v->name, "' was not numbered before its graph was written");
    w.u8(static_cast<uint8_t>(VariableRef::kVariable));
    w.u32(it->second);
  }

  void write_payload(Writer& w, const ControlFlowPayload& p) {
    w.count(p.subgraphs.size());
    for (const NamedSubgraph& s : p.subgraphs) {
      w.str(s.role);
      write_graph(w, *s.graph);
    }
    w.str(p.name);
    w.count(p.capture_inputs.size());
    for (const auto& caps : p.capture_inputs) {
      w.count(caps.size());
      for (int c : caps) w.u32(static_cast<uint32_t>(c));
    }
    w.count(p.output_types.size());
    for (const ValueType& t : p.output_types) {
      w.dtype(t.dtype);
      w.shape(t.shape, "an output type");
    }
    w.i64(p.num_loop_vars);
    w.count(p.var_paths.size());
    for (const auto& s : p.var_paths) w.str(s);
    w.i64(p.maximum_iterations);
  }

  std::string function_;
  const std::vector<std::shared_ptr<VariableState>>* params_ = nullptr;
  TensorStore tensors_;
  std::vector<std::shared_ptr<VariableState>> variables_;
  std::unordered_map<const VariableState*, uint32_t> variable_index_;
  Writer concretes_, graphs_;
  std::size_t count_ = 0;
};

}  // namespace

void write_function(const FunctionCore& core, const std::vector<std::shared_ptr<ConcreteImpl>>& concretes,
                    const std::string& path) {
  if (concretes.empty())
    throw ValueError(str_cat("[tg::save] function '", core.name(), "' has no concrete functions to save: it was never "
                             "traced. Call it (or get_concrete_function with TensorSpecs) for each input type it must "
                             "serve, then save it"));
  FunctionWriter writer(core.name());
  writer.number_variables(concretes);
  for (const auto& cf : concretes) writer.add(*cf);
  write_container_file("tg::save", path, writer.sections(core));
}

}  // namespace tgx

std::vector<std::shared_ptr<ConcreteImpl>> chosen_concrete_functions(const FunctionCore& core,
                                                                     const std::vector<ConcreteFunction>* chosen,
                                                                     const char* op) {
  std::vector<std::shared_ptr<ConcreteImpl>> all = core.concrete_functions();
  if (!chosen) return all;
  std::vector<std::shared_ptr<ConcreteImpl>> concretes;
  for (const ConcreteFunction& c : *chosen) {
    const auto& impl = FunctionAccess::impl(c);
    if (std::find(all.begin(), all.end(), impl) == all.end())
      throw ValueError(str_cat("[", op, "] the concrete function ", c.function_type(), " is not one of function '",
                               core.name(), "'s; pass concrete functions of the function being exported"));
    concretes.push_back(impl);
  }
  return concretes;
}

void save_function(const std::string& path, const FunctionCore& core, const std::vector<ConcreteFunction>* chosen) {
  tgx::write_function(core, chosen_concrete_functions(core, chosen, "tg::save"), path);
}

}  // namespace detail

void save(const std::string& path, const LoadedFunction& fn) {
  const detail::FunctionCore& core = detail::loaded_core(*detail::LoadedAccess::state(fn));
  detail::save_function(path, core, nullptr);
}

void save_variables(const std::string& path, const std::vector<Variable>& variables) {
  std::unordered_map<std::string, std::size_t> seen;
  for (std::size_t i = 0; i < variables.size(); ++i) {
    const Variable& v = variables[i];
    if (v.state()->parameter)
      throw ValueError(detail::str_cat("[tg::save_variables] Variable ", i, " ('", v.name(), "') is the parameter of a traced "
                                       "function, not a Variable; save the Variables passed to the function"));
    if (auto [it, fresh] = seen.emplace(v.name(), i); !fresh)
      throw ValueError(detail::str_cat("[tg::save_variables] Variables ", it->second, " and ", i, " are both named '", v.name(),
                                       "'; a checkpoint restores by name, so give each Variable a unique name "
                                       "(tg::Variable(value, \"name\"))"));
  }
  detail::tgx::Writer m;
  m.u8(static_cast<uint8_t>(detail::tgx::FileKind::kCheckpoint));
  m.str(detail::tgx::this_producer());
  m.count(variables.size());
  detail::tgx::TensorStore tensors;
  for (const Variable& v : variables) detail::tgx::write_variable(m, tensors, *v.state());
  detail::tgx::write_container_file("tg::save_variables", path,
                                    {{detail::tgx::kManifest, std::move(m.bytes)}, tensors.table(), tensors.data()});
}

}  // namespace tg
