// What every reader of op attributes shares: names for messages, a hash for CSE, and a text
// form for the printers, all derived from each struct's for_each_field.
#include "ops/op_attrs.h"

#include <functional>
#include <iterator>
#include <sstream>

#include "core/check.h"
#include "ops/variable_state.h"
#include "tracegraph/hash.h"

namespace tg::detail {

const char* attrs_kind_name(std::size_t kind) {
  static constexpr const char* kNames[] = {
      "NoAttrs",       "ReduceAttrs",  "AxisAttrs",     "ArgReduceAttrs", "CastAttrs",       "MatMulAttrs",
      "ReshapeAttrs",  "TransposeAttrs", "SqueezeAttrs", "SliceAttrs",    "BlockAttrs",      "OneHotAttrs",
      "IndexAttrs",    "PrintAttrs",   "VariableAttrs", "FusedAttrs",     "ControlFlowAttrs", "TensorArrayAttrs",
      "ShapeValueAttrs", "AdamSlotsAttrs", "RandomAttrs", "Conv2DAttrs",  "Pool2DAttrs",
      "TileAttrs",     "PadAttrs",     "SplitAttrs",    "ReverseAttrs",
      "ScanAttrs",
      "SortAttrs",     "TopKAttrs",
      "CollectiveAttrs", "MatMulEpilogueAttrs", "Conv2DEpilogueAttrs", "VariableGroupAttrs",
      "MaxPoolGradMaskedAttrs", "ShapeCheckAttrs", "HostCallAttrs", "AttentionAttrs",
      "Conv2DTransposeAttrs", "LayerNormAttrs"};
  static_assert(std::size(kNames) == std::variant_size_v<AttrsVariant>, "one name per attribute struct");
  return kind < std::size(kNames) ? kNames[kind] : "?";
}

const AttrsVariant& OpAttrs::no_attrs() {
  static const AttrsVariant kNone;
  return kNone;
}

void OpAttrs::wrong_kind(std::size_t wanted) const {
  throw InternalError(str_cat("internal check failed: op attributes hold ", attrs_kind_name(kind()), " but ",
                              attrs_kind_name(wanted), " was read"));
}

namespace {

// Folds one field into a hash. Referenced objects (Variables, programs, sub-graphs) hash by
// identity, as == compares them.
struct FieldHasher {
  std::size_t h;
  void operator()(const char*, int64_t v) { hash_mix(h, static_cast<std::size_t>(v)); }
  void operator()(const char*, bool v) { hash_mix(h, v ? 0x9e37u : 0x7f4au); }
  void operator()(const char*, double v) { hash_mix(h, std::hash<double>{}(v)); }
  void operator()(const char*, DType v) { hash_mix(h, static_cast<std::size_t>(v)); }
  void operator()(const char*, const std::vector<int64_t>& v) {
    hash_mix(h, v.size());
    for (int64_t x : v) hash_mix(h, static_cast<std::size_t>(x));
  }
  void operator()(const char*, const std::vector<std::string>& v) {
    hash_mix(h, v.size());
    for (const std::string& x : v) hash_mix(h, std::hash<std::string>{}(x));
  }
  template <class T> void operator()(const char*, const std::shared_ptr<T>& p) {
    hash_mix(h, std::hash<const void*>{}(p.get()));
  }
};

// Writes "name=value" for one field; referenced objects by what they are, not their contents
// (a sub-graph prints under its node, a Variable by its node's name).
struct FieldWriter {
  std::ostringstream& os;
  bool first = true;
  void sep(const char* name) {
    os << (first ? "" : ", ") << name << "=";
    first = false;
  }
  void operator()(const char* name, int64_t v) { sep(name); os << v; }
  void operator()(const char* name, bool v) { sep(name); os << (v ? "true" : "false"); }
  void operator()(const char* name, double v) { sep(name); os << v; }
  void operator()(const char* name, DType v) { sep(name); os << to_string(v); }
  void operator()(const char* name, const std::vector<int64_t>& v) {
    sep(name);
    os << "[";
    for (std::size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
    os << "]";
  }
  void operator()(const char* name, const std::vector<std::string>& v) {
    sep(name);
    os << "[";
    for (std::size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << '"' << v[i] << '"';
    os << "]";
  }
  // An update group by its Variables' names (a dump says what the node updates).
  void operator()(const char* name, const std::shared_ptr<const VariableGroup>& g) {
    sep(name);
    os << "[";
    for (std::size_t i = 0; i < g->variables.size(); ++i) os << (i ? ", " : "") << g->variables[i]->name;
    os << "]";
  }
  template <class T> void operator()(const char*, const std::shared_ptr<T>&) {}
};

}  // namespace

std::size_t hash_attrs(const OpAttrs& attrs) {
  FieldHasher hasher{attrs.kind()};
  attrs.visit([&](const auto& a) { a.for_each_field(hasher); });
  return hasher.h;
}

std::string format_attrs(const OpAttrs& attrs) {
  std::ostringstream os;
  FieldWriter writer{os};
  attrs.visit([&](const auto& a) { a.for_each_field(writer); });
  return os.str();
}

}  // namespace tg::detail
