// The graph IR that traces record into and the executor runs.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/buffer.h"
#include "core/chunked_vector.h"
#include "core/small_vector.h"
#include "ops/control_flow_attrs.h"
#include "ops/op.h"
#include "ops/variable_state.h"
#include "tracegraph/graph.h"
#include "tracegraph/tensor.h"

namespace tg::detail {

/// One output of one node.
struct ValueRef {
  int node = -1;
  int output = 0;
  bool operator==(const ValueRef&) const = default;
};

enum class NodeKind : uint8_t {
  kPlaceholder,  // a function input (index = position in GraphIR::placeholders)
  kConst,        // a captured eager tensor
  kOp,           // a registry op
  kOutput,       // "Identity" nodes that name the function's results
};

class GraphIR;

/// Who uses each node (GraphIR::users), in two flat arrays rather than a list per node, so that
/// asking costs two allocations however large the graph.
class NodeUsers {
 public:
  /// The users of node i, in node order.
  std::span<const int> of(int i) const {
    const auto k = static_cast<std::size_t>(i);
    return {users_.data() + start_[k], start_[k + 1] - start_[k]};
  }

 private:
  friend class GraphIR;
  CachedVector<std::size_t> start_;  // per node, where its users begin in users_ (and one past the last)
  CachedVector<int> users_;
};

struct GraphNode {
  std::string name;               // unique within the graph
  NodeKind kind = NodeKind::kOp;
  OpId op = OpId::Identity;       // for kOp
  OpAttrs attrs;                  // for kOp
  // Nearly every node reads one or two values and makes one: those cost no allocation of
  // their own (a graph is recorded, copied and rebuilt node by node, 100k of them at times).
  SmallVector<ValueRef, 2> inputs;
  SmallVector<ValueType, 1> outputs;  // static output types (dims may be None)
  Tensor value;                    // for kConst
  int input_index = -1;            // for kPlaceholder: its position in GraphIR::placeholders
  // Ordering edge for stateful ops: the previous stateful node (or -1). Keeps tg::print and
  // variable updates in program order through any later reordering pass.
  int control_input = -1;

  std::string op_name() const;  // "Placeholder", "Const", "Identity" or the op's name
};

/// A graph's nodes. Chunked, since a trace appends them one by one to a size known only at its
/// end: recording 100k ops into a std::vector spent a quarter of its time and half its page
/// faults on the vector's doublings. A node's address is stable while it is in the graph.
using NodeArray = ChunkedVector<GraphNode>;

/// The names a graph has handed out, its removed nodes' included (a name is never handed out
/// twice). Almost every name is a base and a number ("mul_41327", as unique_name makes them):
/// those are kept as one bit per number under their base, so that taking the next one touches
/// a few cache lines however large the graph (a hash table over 100k names is megabytes, each
/// probe a cache miss). Where a name is kept depends on the name alone, so a name can only be
/// found where it would have been put. Other names are stored once in blocks of characters (its
/// length, then its characters) with an open-addressed index of 8-byte slots over them: taking a
/// name allocates nothing per node.
class NameRegistry {
 public:
  /// Takes `name` if no one has; false when someone has.
  bool take(std::string_view name);
  /// The last suffix tried for `base` (0 before its first), counted once `base` was found
  /// taken; null before that. Stable while the registry lives.
  int* suffix_count(const std::string& base);
  int& start_suffixes(const std::string& base) { return suffix_counts_[base]; }

 private:
  // Numbers kept as bits: up to 2^22 per base (512 KB of bits at most); a larger number (or
  // one written with a leading zero) is kept with the other names.
  static constexpr uint32_t kMaxNumber = uint32_t{1} << 22;
  struct TransparentHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  bool take_number(std::string_view base, uint32_t number);
  bool take_other(std::string_view name);

  struct Slot {
    uint32_t hash = 0;             // the name's hash, folded to 32 bits; also picks its home slot
    uint32_t offset_plus_one = 0;  // where the name's length starts (see kBlockShift); 0: free
    bool used() const { return offset_plus_one != 0; }
  };
  void grow();
  std::string_view name_at(const Slot& s) const;

  // A name's offset: its block's index, then its position in the block. A block holds names
  // back to back up to kBlockShift bits of positions; a longer name has a block of its own.
  static constexpr unsigned kBlockShift = 16;
  std::vector<std::string> blocks_;  // every name taken that is not a base and a number
  std::vector<Slot> slots_;
  std::size_t taken_ = 0;
  // Per base, bit n set when "base_n" is taken.
  std::unordered_map<std::string, std::vector<uint64_t>, TransparentHash, std::equal_to<>> numbered_;
  // Only bases that were asked for while taken ("mul", "Const"): a handful per graph.
  std::unordered_map<std::string, int> suffix_counts_;
};

/// A process-unique graph id (what tells a recorder's own values from another graph's).
uint64_t new_graph_id();

class GraphIR {
 public:
  explicit GraphIR(uint64_t id) : id_(id) {}
  uint64_t id() const { return id_; }

  NodeArray nodes;
  std::vector<int> placeholders;  // node index per function input, in argument order
  std::vector<int> outputs;       // kOutput node index per function result

  /// `base`, or `base_1`, `base_2`... so that node names stay unique (TensorFlow's scheme).
  std::string unique_name(const std::string& base);
  /// A copy without the name registry (megabytes at 100k nodes, most of a traced graph's copy
  /// beside its nodes): for the traced graph, kept read-only beside the one the optimiser
  /// rewrites. A copy of it that names a node takes its nodes' names first (so names of nodes
  /// removed before the copy may come back; a traced graph has removed none).
  std::shared_ptr<const GraphIR> copy_without_name_registry() const;
  int add_node(GraphNode node);
  /// Adds a "Const" node holding the eager tensor `value` (a capture); returns its index.
  int add_const(const Tensor& value);
  /// "add" for output 0, "add:1" for others (as graph inputs are written).
  std::string ref_name(const ValueRef& r) const;

  /// The node at an index (node indices are ints, as ValueRef and control_input hold them).
  const GraphNode& node(int i) const { return nodes[static_cast<std::size_t>(i)]; }
  /// The node that produces a value, and the value's static type.
  const GraphNode& node_of(ValueRef r) const { return node(r.node); }
  const ValueType& type_of(ValueRef r) const { return node_of(r).outputs[static_cast<std::size_t>(r.output)]; }
  /// For a kPlaceholder of a sub-graph that captures a value of the enclosing graph: that
  /// value's name there ("mul", "add:1"); empty for every other node. Kept by input index, off
  /// the nodes, since few graphs have any.
  const std::string& captured_name(const GraphNode& node) const;
  void set_captured_name(int input_index, std::string name);
  /// For each node, the nodes that read one of its outputs or follow it by a control edge, in
  /// node order (a node reading twice is listed twice).
  NodeUsers users() const;

 private:
  uint64_t id_;
  NameRegistry names_;
  bool names_from_nodes_ = false;  // names_ left out: take the nodes' names before naming one
  std::vector<std::string> captured_names_;  // by input index; may stop before the last input
};

/// The sub-graphs a node carries (cond branches, a while loop's condition and body); empty for
/// every node without the kSubgraphs trait.
inline const std::vector<NamedSubgraph>& subgraphs_of(const GraphNode& node) { return subgraphs_of(node.attrs); }
/// The name a recorded node starts from: the op's name, or the one its attributes give (a
/// while loop's WhileOptions::name).
std::string node_base_name(OpId op, const OpAttrs& attrs);

/// The Variables (and Variable parameters) a graph's ops read and write, sub-graphs included,
/// each once, in order of first use: read_variable reads; assign, initialize_variable write;
/// assign_add, assign_sub and the optimizer updates (and their groups) do both.
struct VariableUses {
  std::vector<std::shared_ptr<VariableState>> reads, writes;
};
VariableUses variable_uses(const GraphIR& g);

/// `g` with every Variable op (in its sub-graphs too) that names a parameter of `bindings`
/// naming the bound Variable instead: how a traced function with Variable arguments is inlined
/// into another trace. `g` itself when nothing is bound; otherwise copies, sharing the rest.
std::shared_ptr<const GraphIR> with_variables_bound(const std::shared_ptr<const GraphIR>& g,
                                                    const std::vector<VariableBinding>& bindings);

/// The IR behind a public tg::Graph view (the view itself exposes none of it).
struct GraphAccess {
  static const GraphIR& ir(const Graph& g) { return *g.ir_; }
};

}  // namespace tg::detail
