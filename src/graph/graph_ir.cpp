#include "graph/graph_ir.h"

#include <algorithm>
#include <atomic>
#include <cstring>


#include "core/check.h"

namespace tg {
namespace detail {

std::string GraphNode::op_name() const {
  switch (kind) {
    case NodeKind::kPlaceholder: return "Placeholder";
    case NodeKind::kConst: return "Const";
    case NodeKind::kOutput: return "Identity";
    case NodeKind::kOp: break;
  }
  return op_def(op).name;
}

std::shared_ptr<const GraphIR> with_variables_bound(const std::shared_ptr<const GraphIR>& g,
                                                    const std::vector<VariableBinding>& bindings) {
  if (bindings.empty()) return g;
  // Points `v` at the Variable a binding gives its parameter (the last one that does).
  auto rebind = [&](std::shared_ptr<VariableState>& v) {
    for (const VariableBinding& b : bindings)
      if (b.parameter == v.get()) v = b.variable;
  };
  std::shared_ptr<GraphIR> copy;  // made at the first change
  for (std::size_t i = 0; i < g->nodes.size(); ++i) {
    const GraphNode& node = g->nodes[i];
    if (node.kind != NodeKind::kOp) continue;
    // Not std::optional<OpAttrs>: g++ 12 takes its shared_ptr for uninitialised
    // (-Wmaybe-uninitialized), and a null OpAttrs is NoAttrs, never a rebinding.
    OpAttrs bound;
    if (const auto* v = node.attrs.get_if<VariableAttrs>()) {
      VariableAttrs rebound = *v;
      rebind(rebound.variable);
      if (!(rebound == *v)) bound = std::move(rebound);
    } else if (const auto* a = node.attrs.get_if<AdamSlotsAttrs>()) {
      AdamSlotsAttrs rebound = *a;
      for (auto* v : {&rebound.variable, &rebound.m, &rebound.v}) rebind(*v);
      if (!(rebound == *a)) bound = std::move(rebound);
    } else if (const auto* group = node.attrs.get_if<VariableGroupAttrs>()) {
      auto rebound = std::make_shared<VariableGroup>(*group->group);
      for (auto& v : rebound->variables) rebind(v);
      if (rebound->variables != group->group->variables) bound = VariableGroupAttrs{std::move(rebound)};
    } else if (const auto* c = node.attrs.get_if<ControlFlowAttrs>(); c && c->payload) {
      auto payload = std::make_shared<ControlFlowPayload>(*c->payload);
      bool changed = false;
      for (NamedSubgraph& sub : payload->subgraphs) {
        std::shared_ptr<const GraphIR> sub_bound = with_variables_bound(sub.graph, bindings);
        changed = changed || sub_bound != sub.graph;
        sub.graph = std::move(sub_bound);
      }
      if (changed) bound = ControlFlowAttrs{std::move(payload)};
    }
    if (bound.kind() == attrs_kind_of<NoAttrs>) continue;
    if (!copy) copy = std::make_shared<GraphIR>(*g);
    copy->nodes[i].attrs = std::move(bound);
  }
  if (!copy) return g;
  return copy;
}

namespace {
void add_uses(const GraphIR& g, VariableUses& uses) {
  auto note = [](std::vector<std::shared_ptr<VariableState>>& list, const std::shared_ptr<VariableState>& v) {
    if (std::find(list.begin(), list.end(), v) == list.end()) list.push_back(v);
  };
  for (const GraphNode& n : g.nodes) {
    if (n.kind != NodeKind::kOp) continue;
    // What a node does to its Variables is its op's effects (ops.def); creating is writing.
    const uint32_t traits = op_def(n.op).traits;
    if (traits & (kReadsVariable | kWritesVariable | kCreatesVariable))
      for (const std::shared_ptr<VariableState>& v : variables_named(n.attrs)) {
        if (traits & kReadsVariable) note(uses.reads, v);
        if (traits & (kWritesVariable | kCreatesVariable)) note(uses.writes, v);
      }
    for (const NamedSubgraph& s : subgraphs_of(n)) add_uses(*s.graph, uses);
  }
}
}  // namespace

VariableUses variable_uses(const GraphIR& g) {
  VariableUses uses;
  add_uses(g, uses);
  return uses;
}

uint64_t new_graph_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

std::string node_base_name(OpId op, const OpAttrs& attrs) {
  const ControlFlowAttrs* cf = attrs.get_if<ControlFlowAttrs>();
  return cf && cf->payload ? cf->payload->name : std::string(op_def(op).name);
}

std::shared_ptr<const GraphIR> GraphIR::copy_without_name_registry() const {
  auto copy = std::make_shared<GraphIR>(id_);
  copy->nodes = nodes;
  copy->placeholders = placeholders;
  copy->outputs = outputs;
  copy->captured_names_ = captured_names_;
  copy->names_from_nodes_ = true;
  return copy;
}

std::string GraphIR::unique_name(const std::string& base) {
  if (names_from_nodes_) {
    names_from_nodes_ = false;
    for (const GraphNode& node : nodes) names_.take(node.name);
  }
  // Names are never given back, so a base found taken once stays taken: from then on its next
  // suffix is tried first, one probe of the index per node instead of two (at 100k nodes the
  // index is megabytes, and each probe a cache miss).
  int* suffix = names_.suffix_count(base);
  if (!suffix) {
    if (names_.take(base)) return base;
    suffix = &names_.start_suffixes(base);
  }
  std::string name;
  do name = base + "_" + std::to_string(++*suffix); while (!names_.take(name));
  return name;
}

int* NameRegistry::suffix_count(const std::string& base) {
  auto it = suffix_counts_.find(base);
  return it == suffix_counts_.end() ? nullptr : &it->second;
}

std::string_view NameRegistry::name_at(const Slot& s) const {
  const uint32_t offset = s.offset_plus_one - 1;
  const std::string& block = blocks_[offset >> kBlockShift];
  const std::size_t at = offset & ((1u << kBlockShift) - 1);
  uint32_t size = 0;
  std::memcpy(&size, block.data() + at, sizeof size);
  return std::string_view(block).substr(at + sizeof size, size);
}

bool NameRegistry::take(std::string_view name) {
  // "base_n": n in decimal without a leading zero, 1 <= n < kMaxNumber, base not empty.
  std::size_t digits = 0;
  while (digits < name.size() && name[name.size() - 1 - digits] >= '0' && name[name.size() - 1 - digits] <= '9')
    ++digits;
  const std::size_t underscore = name.size() - digits - 1;
  if (digits == 0 || digits > 7 || digits + 2 > name.size() || name[underscore] != '_' || name[underscore + 1] == '0')
    return take_other(name);
  uint32_t number = 0;
  for (char c : name.substr(underscore + 1)) number = number * 10 + static_cast<uint32_t>(c - '0');
  if (number >= kMaxNumber) return take_other(name);
  return take_number(name.substr(0, underscore), number);
}

bool NameRegistry::take_number(std::string_view base, uint32_t number) {
  auto it = numbered_.find(base);
  if (it == numbered_.end()) it = numbered_.emplace(std::string(base), std::vector<uint64_t>{}).first;
  std::vector<uint64_t>& bits = it->second;
  const std::size_t word = number / 64;
  const uint64_t bit = uint64_t{1} << (number % 64);
  if (word >= bits.size()) bits.resize(std::max(word + 1, bits.size() * 2), 0);
  if (bits[word] & bit) return false;
  bits[word] |= bit;
  return true;
}

bool NameRegistry::take_other(std::string_view name) {
  if ((taken_ + 1) * 2 > slots_.size()) grow();
  const std::size_t full = std::hash<std::string_view>{}(name);
  const auto h = static_cast<uint32_t>(full ^ (full >> 32));
  const std::size_t mask = slots_.size() - 1;
  std::size_t k = h & mask;
  for (; slots_[k].used(); k = (k + 1) & mask) {
    const Slot& s = slots_[k];
    if (s.hash == h && name_at(s) == name) return false;
  }
  const auto size = static_cast<uint32_t>(name.size());
  constexpr std::size_t kBlockBytes = std::size_t{1} << kBlockShift;
  const std::size_t need = sizeof size + name.size();
  if (blocks_.empty() || blocks_.back().size() + need > kBlockBytes) {
    TG_CHECK(blocks_.size() + 1 < (std::size_t{1} << (32 - kBlockShift)), "a graph's node names exceed 4 GiB");
    blocks_.emplace_back().reserve(std::max(need, kBlockBytes));
  }
  std::string& block = blocks_.back();
  const auto offset = static_cast<uint32_t>(((blocks_.size() - 1) << kBlockShift) | block.size());
  slots_[k] = Slot{h, offset + 1};
  block.append(reinterpret_cast<const char*>(&size), sizeof size);
  block.append(name);
  ++taken_;
  return true;
}

void NameRegistry::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
  const std::size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (!s.used()) continue;
    std::size_t k = s.hash & mask;
    while (slots_[k].used()) k = (k + 1) & mask;
    slots_[k] = s;
  }
}

int GraphIR::add_const(const Tensor& value) {
  GraphNode node;
  node.kind = NodeKind::kConst;
  node.name = unique_name("Const");
  node.outputs = {ValueType{value.dtype(), value.shape()}};
  node.value = value;
  return add_node(std::move(node));
}

int GraphIR::add_node(GraphNode node) {
  for (const ValueRef& in : node.inputs)
    TG_CHECK(in.node >= 0 && in.node < static_cast<int>(nodes.size()), "dangling input");
  nodes.push_back(std::move(node));
  return static_cast<int>(nodes.size()) - 1;
}

NodeUsers GraphIR::users() const {
  // Counted first, then filled: a node's users land in node order.
  NodeUsers out;
  out.start_.assign(nodes.size() + 1, 0);
  auto each_use = [&](auto&& use) {
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      for (const ValueRef& in : nodes[i].inputs) use(static_cast<std::size_t>(in.node), static_cast<int>(i));
      if (nodes[i].control_input >= 0) use(static_cast<std::size_t>(nodes[i].control_input), static_cast<int>(i));
    }
  };
  each_use([&](std::size_t used, int) { ++out.start_[used + 1]; });
  for (std::size_t k = 0; k < nodes.size(); ++k) out.start_[k + 1] += out.start_[k];
  out.users_.resize(out.start_.back());
  CachedVector<std::size_t> next(out.start_.begin(), out.start_.end() - 1);
  each_use([&](std::size_t used, int user) { out.users_[next[used]++] = user; });
  return out;
}

const std::string& GraphIR::captured_name(const GraphNode& node) const {
  static const std::string kNone;
  if (node.kind != NodeKind::kPlaceholder || node.input_index < 0) return kNone;
  const auto k = static_cast<std::size_t>(node.input_index);
  return k < captured_names_.size() ? captured_names_[k] : kNone;
}

void GraphIR::set_captured_name(int input_index, std::string name) {
  TG_CHECK(input_index >= 0, "a captured name for input ", input_index);
  const auto k = static_cast<std::size_t>(input_index);
  if (k >= captured_names_.size()) captured_names_.resize(k + 1);
  captured_names_[k] = std::move(name);
}

std::string GraphIR::ref_name(const ValueRef& r) const {
  const std::string& n = node(r.node).name;
  return r.output == 0 ? n : n + ":" + std::to_string(r.output);
}

}  // namespace detail

}  // namespace tg
