// tg::load: reads a .tgx file back into a callable, trusting nothing in it. Every count is
// checked against the bytes left before anything is allocated for it, every index against what
// it indexes, every op against the registry, every attribute against its op's struct, every
// type against the op's own shape rule and every graph against the verifier; failures are
// tg::FormatErrors naming the section and byte offset (docs/export.md lists the checks).
#include <algorithm>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <type_traits>

#include "core/tensor_impl.h"
#include "export/container.h"
#include "export/loaded.h"
#include "graph/verify.h"
#include "trace/trace_diff.h"

namespace tg {
namespace detail {
namespace tgx {
namespace {

const OpDef* op_by_serial(uint16_t serial) {
  static const std::map<int, const OpDef*> table = [] {
    std::map<int, const OpDef*> m;
    for (const OpDef* d : all_ops()) m.emplace(d->serial, d);
    return m;
  }();
  auto it = table.find(serial);
  return it == table.end() ? nullptr : it->second;
}

// A default attribute struct of the variant alternative `kind`.
template <std::size_t... I>
OpAttrs default_attrs(std::size_t kind, std::index_sequence<I...>) {
  OpAttrs out;
  ((kind == I ? (out = OpAttrs(std::variant_alternative_t<I, AttrsVariant>{}), 0) : 0), ...);
  return out;
}

// A literal's kind is written as the enum's value: these are the file's codes (docs/export.md).
static_assert(static_cast<int>(LiteralValue::Kind::kInt) == 0 && static_cast<int>(LiteralValue::Kind::kFloat) == 1 &&
                  static_cast<int>(LiteralValue::Kind::kBool) == 2 && static_cast<int>(LiteralValue::Kind::kString) == 3 &&
                  static_cast<int>(LiteralValue::Kind::kEnum) == 4,
              "LiteralValue::Kind's values are the .tgx literal codes; never reorder them");

// C++ type names of literals are kept for the process's lifetime (a literal type points at its
// name): files may add only a bounded number of them, each of bounded length (kMaxTypeName).
constexpr std::size_t kMaxTypeNames = 4096;
const char* interned_type_name(const Reader& r, std::size_t at, const std::string& name) {
  static std::mutex mu;
  static std::set<std::string> from_files;
  {
    std::lock_guard lock(mu);
    if (!from_files.count(name) && from_files.size() >= kMaxTypeNames)
      r.fail_at(at, str_cat("files loaded by this process have named more than ", kMaxTypeNames, " C++ literal types"));
    from_files.insert(name);
  }
  return intern_cpp_type_name(name);
}

class FunctionReader {
 public:
  explicit FunctionReader(const Container& c) : c_(c) {}

  std::shared_ptr<LoadedState> read() {
    Reader m = c_.manifest();
    if (c_.kind() != FileKind::kFunction)
      m.fail_at(m.offset(), "this file is a checkpoint of Variables, not a function: read it with tg::restore_variables");
    std::string name = m.str("the function's name");
    const bool optimize = m.boolean("the optimize flag");
    const std::size_t variable_count = m.count("the Variables", 4 + 1 + 1 + 1);
    for (std::size_t i = 0; i < variable_count; ++i) variables_.push_back(c_.read_variable(m));
    const std::size_t concrete_count = m.count("the concrete functions", 4 + 4 + 1 + 4);
    Reader g = c_.section(kGraphs, "the graphs");
    const std::size_t at = g.offset();
    if (g.count("the graphs", 4 + 4 + 4) != concrete_count)
      g.fail_at(at, str_cat("the file has ", concrete_count, " concrete functions in its manifest and a different number of graphs"));

    auto state = std::make_shared<LoadedState>();
    state->producer = c_.producer();
    for (const auto& v : variables_) state->variables.emplace_back(v);
    FunctionOptions options;
    options.name = name;
    options.optimize = optimize;
    options.max_traces = 0;
    std::vector<std::shared_ptr<ConcreteImpl>> concretes;
    std::unordered_multimap<std::size_t, std::size_t> by_hash;  // FunctionType hash -> concrete index
    for (std::size_t index = 0; index < concrete_count; ++index) {
      ConcreteParts parts = read_concrete(m, g, name, static_cast<int64_t>(index), optimize);
      if (index == 0) options.arg_names = parts.input_type.names;
      auto range = by_hash.equal_range(parts.input_type.hash);
      for (auto it = range.first; it != range.second; ++it)
        if (same_types(concretes[it->second]->input_type.params, parts.input_type.params))
          m.fail(str_cat("concrete function ", index, " has the FunctionType ", parts.input_type.to_string(),
                         " of concrete function ", it->second, "; each FunctionType is saved once"));
      by_hash.emplace(parts.input_type.hash, index);
      concretes.push_back(make_concrete(std::move(parts)));
    }
    m.expect_end();
    g.expect_end();
    state->core = std::make_shared<FunctionCore>(options, "");
    for (auto& cf : concretes) state->core->adopt(std::move(cf));
    state->uses = uses_;
    return state;
  }

 private:
  ConcreteParts read_concrete(Reader& m, Reader& g, const std::string& name, int64_t index, bool optimize) {
    ConcreteParts parts;
    parts.function_name = name;
    parts.index = index;
    parts.optimize = optimize;
    const std::size_t type_at = m.offset();
    const std::size_t n = m.count("the parameters", 4 + 1);
    for (std::size_t i = 0; i < n; ++i) {
      parts.input_type.names.push_back(m.str("a parameter's name"));
      parts.input_type.params.push_back(trace_type_from_tree(read_type(m, 0)));
    }
    parts.input_type.hash = hash_types(parts.input_type.params);
    const std::size_t vp = m.count("the Variable parameters", 4 + 1 + 1 + 1);
    for (std::size_t i = 0; i < vp; ++i) {
      VariableState traced;
      traced.name = m.str("a Variable parameter's name");
      traced.dtype = m.dtype("a Variable parameter");
      const std::size_t shape_at = m.offset();
      traced.shape = m.shape("a Variable parameter");
      if (!traced.shape.is_fully_defined()) m.fail_at(shape_at, "a Variable parameter's shape is not fully defined");
      c_.check_bytes(m, shape_at, "Variable parameter '" + traced.name + "'", traced.dtype, traced.shape);
      auto p = make_variable_parameter(traced, name);
      p->owns_state_of_first_binding = m.boolean("a Variable parameter's state flag");
      parts.variable_parameters.push_back(std::move(p));
    }
    const std::size_t uses_at = m.offset();
    VariableUse declared;
    read_uses(m, parts.variable_parameters.size(), declared.reads, declared.argument_reads);
    read_uses(m, parts.variable_parameters.size(), declared.writes, declared.argument_writes);
    const std::size_t kind_at = m.offset();
    const uint8_t kind = m.u8();
    if (kind > static_cast<uint8_t>(OutputKind::kFlat)) m.fail_at(kind_at, str_cat("output kind ", int(kind), " is not 0, 1 or 2"));
    parts.output_description = m.str("the output description");
    params_ = &parts.variable_parameters;
    const std::size_t graph_at = g.offset();
    parts.graph = read_graph(g, 0);
    check_signature(m, type_at, parts, graph_at, g);
    // The Variables the manifest says the graph reads and writes are the ones it does.
    const VariableUses uses = variable_uses(*parts.graph);
    VariableUse actual;
    to_indices(uses.reads, parts.variable_parameters, actual.reads, actual.argument_reads);
    to_indices(uses.writes, parts.variable_parameters, actual.writes, actual.argument_writes);
    if (actual.reads != declared.reads || actual.writes != declared.writes ||
        actual.argument_reads != declared.argument_reads || actual.argument_writes != declared.argument_writes)
      m.fail_at(uses_at, str_cat("concrete function ", index, "'s list of the Variables it reads and writes is not what its "
                                 "graph reads and writes"));
    uses_.push_back(std::move(actual));
    const std::size_t outputs = parts.graph->outputs.size();
    if ((kind == static_cast<uint8_t>(OutputKind::kNone) && outputs != 0) ||
        (kind == static_cast<uint8_t>(OutputKind::kTensor) && outputs != 1))
      m.fail_at(kind_at, str_cat("the output kind says ", kind == 0 ? "no result" : "one Tensor", " but the graph has ", outputs, " outputs"));
    if (kind == static_cast<uint8_t>(OutputKind::kTensor)) parts.skeleton = Tensor();
    else if (kind == static_cast<uint8_t>(OutputKind::kFlat)) parts.skeleton = std::vector<Tensor>();
    return parts;
  }

  // The FunctionType against the graph: its tensors are the graph's placeholders in order (dtype
  // equal, shape a subtype), its Variables the Variable parameters by alias id.
  void check_signature(const Reader& m, std::size_t at, const ConcreteParts& parts, std::size_t graph_at, const Reader& g) {
    const GraphIR& graph = *parts.graph;
    std::size_t tensor = 0;
    std::vector<bool> alias_seen(parts.variable_parameters.size(), false);
    int64_t next_alias = 0;
    const auto& type = parts.input_type;
    for (std::size_t i = 0; i < type.params.size(); ++i) {
      for_each_leaf(*type.params[i], type.names[i], [&](const std::string& path, const LeafInfo& leaf) {
        if (leaf.kind == LeafKind::kTensor) {
          if (tensor >= graph.placeholders.size())
            m.fail_at(at, str_cat("the FunctionType has more tensors than the graph's ", graph.placeholders.size(), " inputs"));
          const ValueType& p = graph.node(graph.placeholders[tensor++]).outputs[0];
          if (p.dtype != leaf.dtype || !leaf.shape.is_subtype_of(p.shape))
            m.fail_at(at, str_cat("parameter ", path, " is ", TensorSpec(leaf.shape, leaf.dtype).to_string(),
                                  " but the graph's input ", tensor - 1, " is ", describe(p)));
        } else if (leaf.kind == LeafKind::kVariable) {
          const int64_t alias = leaf.alias_id;
          if (alias < 0 || static_cast<std::size_t>(alias) >= alias_seen.size())
            m.fail_at(at, str_cat("Variable parameter ", path, " has alias id ", alias, " but the function has ",
                                  alias_seen.size(), " Variable parameters"));
          // Alias ids number distinct Variables in order of first appearance (as calls make them).
          if (!alias_seen[static_cast<std::size_t>(alias)] && alias != next_alias++)
            m.fail_at(at, str_cat("Variable parameter ", path, " has alias id ", alias, " where the next new one is ", next_alias - 1));
          const VariableState& vp = *parts.variable_parameters[static_cast<std::size_t>(alias)];
          if (vp.dtype != leaf.dtype || !(vp.shape == leaf.shape))
            m.fail_at(at, str_cat("Variable parameter ", path, " is ", to_string(leaf.dtype), " ", leaf.shape.to_string(),
                                  " but its parameter entry is ", to_string(vp.dtype), " ", vp.shape.to_string()));
          alias_seen[static_cast<std::size_t>(alias)] = true;
        }
      });
    }
    if (tensor != graph.placeholders.size())
      g.fail_at(graph_at, str_cat("the graph has ", graph.placeholders.size(), " inputs but its FunctionType ", tensor, " tensors"));
    for (std::size_t a = 0; a < alias_seen.size(); ++a)
      if (!alias_seen[a]) m.fail_at(at, str_cat("Variable parameter ", a, " has no argument of the FunctionType"));
  }

  // A list of Variable references (kind, index): file Variables into `vars`, parameters into `params`.
  void read_uses(Reader& m, std::size_t parameters, std::vector<std::size_t>& vars, std::vector<std::size_t>& params) {
    const std::size_t n = m.count("a Variable use list", 5);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t at = m.offset();
      const uint8_t kind = m.u8();
      const uint32_t index = m.u32();
      const std::size_t limit = kind == static_cast<uint8_t>(VariableRef::kParameter) ? parameters : variables_.size();
      if (kind > static_cast<uint8_t>(VariableRef::kParameter) || index >= limit)
        m.fail_at(at, str_cat("a Variable use names ", kind == 1 ? "Variable parameter " : "Variable ", index, " of ", limit));
      (kind == 1 ? params : vars).push_back(index);
    }
  }

  // The positions of `used` among the file's Variables and the concrete function's parameters.
  void to_indices(const std::vector<std::shared_ptr<VariableState>>& used,
                  const std::vector<std::shared_ptr<VariableState>>& parameters, std::vector<std::size_t>& vars,
                  std::vector<std::size_t>& params) const {
    for (const auto& v : used) {
      const auto& list = v->parameter ? parameters : variables_;
      const auto it = std::find(list.begin(), list.end(), v);
      TG_CHECK(it != list.end(), "a graph read from the file names a Variable the file does not list");
      (v->parameter ? params : vars).push_back(static_cast<std::size_t>(it - list.begin()));
    }
  }

  LiteralValue read_literal(Reader& r) {
    LiteralValue v{};
    const std::size_t at = r.offset();
    const uint8_t kind = r.u8();
    if (kind > static_cast<uint8_t>(LiteralValue::Kind::kEnum)) r.fail_at(at, str_cat("literal kind ", int(kind), " is not 0-4"));
    v.kind = static_cast<LiteralValue::Kind>(kind);
    v.i = r.i64();
    v.f = r.f64();
    v.s = r.str("a literal's text");
    const std::size_t type_at = r.offset();
    const std::string cpp_type = r.str("a literal's C++ type");
    // Only the fields of the literal's kind may be set (so that equal values are equal bytes).
    if (const std::string defect = literal_defect(kind, v.i, v.f, v.s, cpp_type); !defect.empty()) r.fail_at(at, defect);
    if (const std::string defect = type_name_defect(cpp_type.size()); !defect.empty()) r.fail_at(type_at, defect);
    v.cpp_type = interned_type_name(r, type_at, cpp_type);
    return v;
  }

  TraceTypeTree read_type(Reader& r, int depth) {
    using Kind = TraceTypeTree::Kind;
    const std::size_t at = r.offset();
    if (depth > c_.options().max_nesting)
      r.fail_at(at, str_cat("types nest deeper than LoadOptions::max_nesting (", c_.options().max_nesting, ")"));
    TraceTypeTree t;
    const uint8_t code = r.u8();
    switch (static_cast<TypeCode>(code)) {
      case TypeCode::kTensor:
        t.kind = Kind::kTensor;
        t.dtype = r.dtype("a tensor type");
        t.shape = r.shape("a tensor type");
        t.name = r.str("a TensorSpec's name");
        return t;
      case TypeCode::kLiteral:
        t.kind = Kind::kLiteral;
        t.literal = read_literal(r);
        return t;
      case TypeCode::kSequence: {
        t.kind = Kind::kSequence;
        t.name = r.str("a sequence's kind");
        if (t.name != "List" && t.name != "Tuple" && t.name != "Array")
          r.fail_at(at, str_cat("sequence kind '", t.name, "' is not List, Tuple or Array"));
        const std::size_t n = r.count("a sequence's elements", 1);
        for (std::size_t i = 0; i < n; ++i) t.elements.push_back(read_type(r, depth + 1));
        return t;
      }
      case TypeCode::kMapping: {
        t.kind = Kind::kMapping;
        const std::size_t n = r.count("a mapping's items", 2);
        std::set<std::tuple<int, int64_t, uint64_t, std::string, std::string>> seen;
        for (std::size_t i = 0; i < n; ++i) {
          const std::size_t key_at = r.offset();
          t.keys.push_back(read_literal(r));
          const LiteralValue& k = t.keys.back();
          uint64_t bits;
          std::memcpy(&bits, &k.f, sizeof bits);
          if (!seen.emplace(static_cast<int>(k.kind), k.i, bits, k.s, k.cpp_type).second)
            r.fail_at(key_at, "a mapping has the same key twice");
          t.elements.push_back(read_type(r, depth + 1));
        }
        return t;
      }
      case TypeCode::kOptional:
        t.kind = Kind::kOptional;
        if (r.boolean("an optional's flag")) t.elements.push_back(read_type(r, depth + 1));
        return t;
      case TypeCode::kVariable:
        t.kind = Kind::kVariable;
        t.dtype = r.dtype("a Variable type");
        t.shape = r.shape("a Variable type");
        t.alias_id = r.i64();
        return t;
    }
    r.fail_at(at, str_cat("type code ", int(code), " is not a trace type (1-6)"));
  }

  std::shared_ptr<GraphIR> read_graph(Reader& r, int depth) {
    const std::size_t graph_at = r.offset();
    if (depth > c_.options().max_nesting)
      r.fail_at(graph_at, str_cat("sub-graphs nest deeper than LoadOptions::max_nesting (", c_.options().max_nesting, ")"));
    auto g = std::make_shared<GraphIR>(new_graph_id());
    // A node takes at least: name (4), kind (1), input and output counts (8), control input (8).
    const std::size_t n = r.count("the nodes", 4 + 1 + 8 + 8);
    nodes_ += n;
    if (nodes_ > static_cast<std::size_t>(std::max<int64_t>(c_.options().max_nodes, 0)))
      r.fail_at(graph_at, str_cat("the file has more than LoadOptions::max_nodes (", c_.options().max_nodes, ") nodes"));
    std::vector<std::size_t> node_at(n);
    std::vector<std::pair<int, std::string>> captures;  // (input index, captured name) as read
    for (std::size_t i = 0; i < n; ++i) {
      node_at[i] = r.offset();
      g->nodes.push_back(read_node(r, *g, i, depth, captures));
    }
    const std::size_t np = r.count("the graph's inputs", 4);
    for (std::size_t i = 0; i < np; ++i) g->placeholders.push_back(node_index(r, n, "a graph input"));
    const std::size_t no = r.count("the graph's outputs", 4);
    for (std::size_t i = 0; i < no; ++i) g->outputs.push_back(node_index(r, n, "a graph output"));
    // The verifier's checks, the op's own rule for every node's types among them: the file may
    // not say what an op returns.
    int bad = -1;
    if (const std::string defect = graph_defect(*g, &bad); !defect.empty())
      r.fail_at(bad >= 0 ? node_at[static_cast<std::size_t>(bad)] : graph_at, "the graph is malformed: " + defect);
    // Only now that every input index is known to be valid (a bad one could ask for any size).
    for (auto& [input, name] : captures) g->set_captured_name(input, std::move(name));
    return g;
  }

  int node_index(Reader& r, std::size_t nodes, const char* what) {
    const std::size_t at = r.offset();
    const uint32_t v = r.u32();
    if (v >= nodes) r.fail_at(at, str_cat(what, " is node ", v, " of ", nodes));
    return static_cast<int>(v);
  }

  GraphNode read_node(Reader& r, GraphIR& g, std::size_t index, int depth,
                      std::vector<std::pair<int, std::string>>& captures) {
    GraphNode node;
    const std::size_t at = r.offset();
    node.name = r.str("a node's name");
    if (node.name.empty() || g.unique_name(node.name) != node.name)
      r.fail_at(at, node.name.empty() ? std::string("a node has an empty name") : str_cat("node name '", node.name, "' appears twice"));
    const uint8_t code = r.u8();
    if (code > static_cast<uint8_t>(NodeCode::kOutput)) r.fail_at(at, str_cat("node '", node.name, "' has kind ", int(code), "; expected 0-3"));
    node.kind = code == 0 ? NodeKind::kPlaceholder : code == 1 ? NodeKind::kConst : code == 2 ? NodeKind::kOp : NodeKind::kOutput;
    const std::size_t ni = r.count("a node's inputs", 8);
    for (std::size_t k = 0; k < ni; ++k) {
      const std::size_t in_at = r.offset();
      const uint32_t from = r.u32(), output = r.u32();
      if (from >= index)
        r.fail_at(in_at, str_cat("node '", node.name, "' (node ", index, ") reads node ", from, "; a node reads only earlier nodes"));
      if (output >= g.nodes[from].outputs.size())
        r.fail_at(in_at, str_cat("node '", node.name, "' reads output ", output, " of node '", g.nodes[from].name, "', which has ",
                                 g.nodes[from].outputs.size()));
      node.inputs.push_back({static_cast<int>(from), static_cast<int>(output)});
    }
    const std::size_t no = r.count("a node's outputs", 2);
    for (std::size_t k = 0; k < no; ++k) {
      const std::size_t type_at = r.offset();
      ValueType t{r.dtype("an output"), r.shape("an output")};
      c_.check_bytes(r, type_at, "an output of node '" + node.name + "'", t.dtype, t.shape);
      node.outputs.push_back(std::move(t));
    }
    const std::size_t control_at = r.offset();
    const int64_t control = r.i64();
    if (control < -1 || control >= static_cast<int64_t>(index))
      r.fail_at(control_at, str_cat("node '", node.name, "' has a control edge to node ", control, "; only to an earlier node, or -1"));
    node.control_input = static_cast<int>(control);
    switch (node.kind) {
      case NodeKind::kPlaceholder: {
        const std::size_t p_at = r.offset();
        const uint32_t input = r.u32();
        if (input > INT32_MAX) r.fail_at(p_at, str_cat("placeholder '", node.name, "' has input index ", input));
        node.input_index = static_cast<int>(input);
        if (std::string name = r.str("a capture's name"); !name.empty())
          captures.emplace_back(node.input_index, std::move(name));
        break;
      }
      case NodeKind::kConst: {
        const std::size_t t_at = r.offset();
        node.value = c_.tensor(r.u32(), r, t_at);
        break;
      }
      case NodeKind::kOp: {
        const std::size_t op_at = r.offset();
        const uint16_t serial = r.u16();
        const OpDef* def = op_by_serial(serial);
        if (!def)
          r.fail_at(op_at, str_cat("node '", node.name, "' has op serial ", serial, ", which no op of ", this_producer(),
                                   " has; the file needs a newer tracegraph"));
        if (def->traits & kOptimizerOnly)
          r.fail_at(op_at, str_cat("node '", node.name, "' is a ", def->name, " node, which only the optimiser makes; "
                                   "files hold graphs as traced, which the optimiser never touched"));
        if (def->attrs_kind == attrs_kind_of<HostCallAttrs>)
          r.fail_at(op_at, str_cat("node '", node.name, "' is a ", def->name, " node, which calls a function of the host "
                                   "program; such a function never leaves its process, so no file holds one"));
        node.op = def->id;
        node.attrs = read_attrs(r, *def, node.name, depth);
        break;
      }
      case NodeKind::kOutput: break;
    }
    return node;
  }

  OpAttrs read_attrs(Reader& r, const OpDef& def, const std::string& node, int depth) {
    OpAttrs attrs = default_attrs(def.attrs_kind, std::make_index_sequence<std::variant_size_v<AttrsVariant>>{});
    const std::size_t n = r.count("an op's attributes", 4 + 1);
    std::set<std::string> seen;
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t at = r.offset();
      const std::string name = r.str("an attribute's name");
      const uint8_t code = r.u8();
      if (!seen.insert(name).second) r.fail_at(at, str_cat("attribute '", name, "' of node '", node, "' appears twice"));
      bool found = false;
      attrs.visit([&](const auto& family) {
        family.for_each_field([&](const char* field, const auto& value) {
          if (found || name != field) return;
          found = true;
          // The struct is this function's own (attrs is not const): for_each_field hands out
          // const references, and the reader fills the field through them.
          using T = std::decay_t<decltype(value)>;
          read_field(r, at, code, node, name, const_cast<T&>(value), depth);
        });
      });
      if (!found)
        r.fail_at(at, str_cat("node '", node, "' (op ", def.name, ") has attribute '", name, "', which ", def.name, "'s ",
                              attrs_kind_name(def.attrs_kind), " does not have"));
    }
    // The references every op with them needs: a Variable op its Variable, control flow its payload.
    bool complete = true;
    attrs.visit([&](const auto& family) {
      family.for_each_field([&](const char*, const auto& value) {
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, std::shared_ptr<VariableState>> ||
                      std::is_same_v<T, std::shared_ptr<const ControlFlowPayload>>)
          complete &= value != nullptr;
      });
    });
    if (!complete) r.fail(str_cat("node '", node, "' (op ", def.name, ") lacks its Variable or sub-graph attribute"));
    return attrs;
  }

  template <class T>
  void read_field(Reader& r, std::size_t at, uint8_t code, const std::string& node, const std::string& name, T& value, int depth) {
    auto expect = [&](FieldCode want) {
      if (code != static_cast<uint8_t>(want))
        r.fail_at(at, str_cat("attribute '", name, "' of node '", node, "' has field type ", int(code), "; expected ", int(want)));
    };
    if constexpr (std::is_same_v<T, int64_t>) {
      expect(FieldCode::kInt);
      value = r.i64();
    } else if constexpr (std::is_same_v<T, bool>) {
      expect(FieldCode::kBool);
      value = r.boolean("a bool attribute");
    } else if constexpr (std::is_same_v<T, double>) {
      expect(FieldCode::kFloat);
      value = r.f64();
    } else if constexpr (std::is_same_v<T, DType>) {
      expect(FieldCode::kDType);
      value = r.dtype("a dtype attribute");
    } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
      expect(FieldCode::kInts);
      const std::size_t n = r.count("an integer list", 8);
      value.resize(n);
      for (auto& v : value) v = r.i64();
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      expect(FieldCode::kStrings);
      const std::size_t n = r.count("a string list", 4);
      for (std::size_t i = 0; i < n; ++i) value.push_back(r.str("a string attribute"));
    } else if constexpr (std::is_same_v<T, std::shared_ptr<VariableState>>) {
      expect(FieldCode::kVariable);
      const uint8_t kind = r.u8();
      const uint32_t index = r.u32();
      const auto& table = kind == static_cast<uint8_t>(VariableRef::kParameter) ? *params_ : variables_;
      if (kind > static_cast<uint8_t>(VariableRef::kParameter) || index >= table.size())
        r.fail_at(at, str_cat("node '", node, "' names ", kind == 1 ? "Variable parameter " : "Variable ", index, " but the ",
                              kind == 1 ? "concrete function has " : "file has ", table.size()));
      value = table[index];
    } else if constexpr (std::is_same_v<T, std::shared_ptr<const ControlFlowPayload>>) {
      expect(FieldCode::kControlFlow);
      value = read_payload(r, depth);
    } else {
      // Fused programs, update groups: never in a file (read_node refuses optimiser-only nodes first).
      r.fail_at(at, str_cat("attribute '", name, "' of node '", node, "' cannot be read from a file"));
    }
  }

  std::shared_ptr<const ControlFlowPayload> read_payload(Reader& r, int depth) {
    auto p = std::make_shared<ControlFlowPayload>();
    const std::size_t ns = r.count("the sub-graphs", 4 + 4);
    for (std::size_t i = 0; i < ns; ++i) {
      NamedSubgraph s;
      s.role = r.str("a sub-graph's role");
      s.graph = read_graph(r, depth + 1);
      p->subgraphs.push_back(std::move(s));
    }
    p->name = r.str("a control-flow node's name");
    const std::size_t nc = r.count("the capture lists", 4);
    for (std::size_t i = 0; i < nc; ++i) {
      const std::size_t n = r.count("a capture list", 4);
      std::vector<int> caps;
      for (std::size_t k = 0; k < n; ++k) {
        const std::size_t at = r.offset();
        const uint32_t c = r.u32();
        if (c > INT32_MAX) r.fail_at(at, str_cat("capture index ", c, " is out of range"));
        caps.push_back(static_cast<int>(c));
      }
      p->capture_inputs.push_back(std::move(caps));
    }
    const std::size_t no = r.count("the output types", 2);
    for (std::size_t i = 0; i < no; ++i) p->output_types.push_back(ValueType{r.dtype("an output type"), r.shape("an output type")});
    const std::size_t at = r.offset();
    const int64_t loop_vars = r.i64();
    if (loop_vars < 0 || loop_vars > INT32_MAX) r.fail_at(at, str_cat("a loop has ", loop_vars, " loop variables"));
    p->num_loop_vars = static_cast<int>(loop_vars);
    const std::size_t nv = r.count("the loop variables' paths", 4);
    for (std::size_t i = 0; i < nv; ++i) p->var_paths.push_back(r.str("a loop variable's path"));
    p->maximum_iterations = r.i64();
    return p;
  }

  const Container& c_;
  std::vector<std::shared_ptr<VariableState>> variables_;
  std::vector<VariableUse> uses_;  // per concrete function, in file order
  const std::vector<std::shared_ptr<VariableState>>* params_ = nullptr;
  std::size_t nodes_ = 0;
};

}  // namespace

std::shared_ptr<LoadedState> read_function(const uint8_t* data, std::size_t size, std::shared_ptr<const void> owner,
                                           const LoadOptions& options) {
  Container c(data, size, std::move(owner), options);
  return FunctionReader(c).read();
}

}  // namespace tgx

const FunctionCore& loaded_core(const LoadedState& state) { return *state.core; }

std::shared_ptr<ConcreteImpl> find_loaded(const LoadedState& state, std::vector<TraceTypePtr> types,
                                          const ArgContext& ctx, const std::size_t* fast_hash) {
  const FunctionCore& core = *state.core;
  if (ctx.has_specs)
    throw TypeError(str_cat("loaded function '", core.name(), "' was called with a TensorSpec; a loaded function "
                            "runs its saved concrete functions on values: call it with tensors"));
  reject_leaked_tensors(core, ctx.leaves);
  std::shared_ptr<ConcreteImpl> cf = core.find(types, fast_hash);  // a copy: the message below names them
  if (!cf) {
    std::string call = "(";
    for (std::size_t i = 0; i < types.size(); ++i) call += (i ? ", " : "") + types[i]->to_string();
    call += ")";
    std::string options;
    const auto all = core.concrete_functions();
    for (std::size_t i = 0; i < all.size(); ++i)
      options += str_cat("\n  Option ", i + 1, ": ", all[i]->input_type.to_string(), " -> ", all[i]->output_description);
    throw TypeError(str_cat(
        "Could not find matching concrete function to call loaded function '", core.name(), "' with ", call,
        ". A loaded function never traces; it accepts the ", all.size(), " signature", all.size() == 1 ? "" : "s",
        " saved in its file:", options,
        "\nCall it with arguments of one of these types, or save the function after tracing it for this input "
        "type (call it once with such arguments, or give it an input_signature with None dims)."));
  }
  return cf;
}

Outputs run_loaded(const LoadedState& state, const ConcreteImpl& cf, CallInputs&& inputs) {
  std::vector<Tensor> out = state.core->run(cf, std::move(inputs));
  return Outputs(std::move(out), cf.skeleton.has_value() && cf.skeleton.type() == typeid(Tensor));
}

}  // namespace detail

Outputs::operator Tensor() const {
  if (!single_)
    throw TypeError(detail::str_cat("the loaded function returned ", values_.size(), " tensors in a structure, not one "
                                    "Tensor; read them as std::vector<Tensor> or with operator[]"));
  return values_[0];
}

const Tensor& Outputs::operator[](std::size_t i) const {
  if (i >= values_.size())
    throw InvalidArgumentError(detail::str_cat("[Outputs] index ", i, " is out of range for ", values_.size(), " outputs"));
  return values_[i];
}

Outputs LoadedFunction::call(const std::vector<Tensor>& positional) const {
  detail::ArgContext ctx;
  std::vector<TraceTypePtr> types;
  for (const Tensor& t : positional) types.push_back(detail::ArgTraits<Tensor>::trace_type(t, ctx));
  const auto cf = detail::find_loaded(*state_, std::move(types), ctx, nullptr);
  detail::CallInputs inputs;
  inputs.tensors = std::move(ctx.leaves);
  inputs.variables = std::move(ctx.variables);
  return detail::run_loaded(*state_, *cf, std::move(inputs));
}

const std::string& LoadedFunction::name() const { return state_->core->name(); }
const std::string& LoadedFunction::producer() const { return state_->producer; }
std::vector<Variable> LoadedFunction::variables() const { return state_->variables; }

std::vector<std::string> LoadedFunction::signatures() const {
  std::vector<std::string> out;
  for (const auto& cf : state_->core->concrete_functions())
    out.push_back(cf->input_type.to_string() + " -> " + cf->output_description);
  return out;
}

const std::vector<VariableUse>& LoadedFunction::variable_uses() const { return state_->uses; }

std::vector<ConcreteFunction> LoadedFunction::concrete_functions() const {
  std::vector<ConcreteFunction> out;
  for (const auto& cf : state_->core->concrete_functions()) out.emplace_back(cf);
  return out;
}

LoadedFunction load(const std::string& path, const LoadOptions& options) {
  detail::tgx::MappedFile f = detail::tgx::map_file("tg::load", path, options);
  try {
    return LoadedFunction(detail::tgx::read_function(f.data, f.size, f.owner, options));
  } catch (FormatError& e) {
    e.add_context("(in '" + path + "')");
    throw;
  }
}

LoadedFunction load_from_memory(const void* data, std::size_t size, const LoadOptions& options) {
  if (size > options.max_file_bytes || size > SIZE_MAX - 128)
    throw FormatError(detail::str_cat("[tg::load] header at byte 0: the image has ", size, " bytes, more than LoadOptions::max_file_bytes (",
                                      options.max_file_bytes, ")"), "header", 0);
  // A copy at a 64-byte boundary, so that tensors can use it in place as they do a mapped file.
  std::shared_ptr<uint8_t> copy(static_cast<uint8_t*>(std::aligned_alloc(64, std::max<std::size_t>(64, (size + 63) / 64 * 64))),
                                [](uint8_t* p) { std::free(p); });
  if (!copy) throw ResourceExhaustedError(detail::str_cat("[tg::load_from_memory] cannot copy ", size, " bytes"), size);
  if (size) std::memcpy(copy.get(), data, size);
  return LoadedFunction(detail::tgx::read_function(copy.get(), size, copy, options));
}

void restore_variables(const std::string& path, const std::vector<Variable>& variables, const LoadOptions& options) {
  detail::tgx::MappedFile f = detail::tgx::map_file("tg::restore_variables", path, options);
  std::multimap<std::string, std::shared_ptr<detail::VariableState>> by_name;
  try {
    detail::tgx::Container c(f.data, f.size, f.owner, options, "tg::restore_variables");
    detail::tgx::Reader m = c.manifest();
    const bool model = c.kind() == detail::tgx::FileKind::kFunction;
    if (model) {
      // A model file: its Variables by name (what a saved train_step's model holds).
      m.str("the function's name");
      m.boolean("the optimize flag");
    }
    const std::size_t n = m.count("the Variables", 4 + 1 + 1 + 1);
    for (std::size_t i = 0; i < n; ++i) {
      auto v = c.read_variable(m);
      by_name.emplace(v->name, std::move(v));
    }
    if (!model) m.expect_end();
  } catch (FormatError& e) {
    e.add_context("(in '" + path + "')");
    throw;
  }
  // Check everything before assigning anything: a failed restore changes no Variable.
  std::vector<std::pair<const Variable*, Tensor>> values;
  for (const Variable& v : variables) {
    auto it = by_name.find(v.name());
    if (by_name.count(v.name()) > 1)
      throw ValueError(detail::str_cat("[tg::restore_variables] '", path, "' holds ", by_name.count(v.name()),
                                       " Variables named '", v.name(), "'; restoring by name needs unique names "
                                       "(name the Variables when you create them: tg::Variable(value, \"name\"))"));
    if (it == by_name.end()) {
      std::string names;
      for (const auto& [k, _] : by_name) names += (names.empty() ? "'" : ", '") + k + "'";  // sorted, repeats kept
      throw ValueError(detail::str_cat("[tg::restore_variables] '", path, "' has no Variable named '", v.name(),
                                       "'; it has ", names.empty() ? std::string("none") : names));
    }
    const auto& saved = *it->second;
    if (saved.dtype != v.dtype() || !(saved.shape == v.shape()))
      throw ValueError(detail::str_cat("[tg::restore_variables] Variable '", v.name(), "' is ", to_string(v.dtype()), " ",
                                       v.shape().to_string(), " but '", path, "' holds it as ", to_string(saved.dtype), " ",
                                       saved.shape.to_string()));
    if (!saved.value.defined())
      throw ValueError(detail::str_cat("[tg::restore_variables] '", path, "' holds Variable '", v.name(),
                                       "' without a value (it was saved before its function first ran)"));
    values.emplace_back(&v, saved.value);
  }
  for (auto& [v, value] : values) {
    Variable handle = *v;
    handle.assign(value);
  }
}

}  // namespace tg
