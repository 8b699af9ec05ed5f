// Common-subexpression elimination.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string_view>
#include <vector>

#include "core/buffer.h"
#include "core/tensor_impl.h"
#include "passes/passes.h"
#include "passes/rewrite.h"
#include "tracegraph/hash.h"

namespace tg::detail {

namespace {

// Small constants with the same dtype, shape and bytes are one value.
constexpr int64_t kMaxComparedConstant = 64;
bool same_constant(const Tensor& a, const Tensor& b) {
  if (a.impl() == b.impl()) return true;
  // The shapes as stored: Tensor::shape() and num_elements() copy the shape each call.
  const TensorShape& shape = static_shape(a);
  if (a.impl()->dtype != b.impl()->dtype || !(shape == static_shape(b)) || a.impl()->dtype == DType::String) return false;
  const int64_t n = shape.num_elements();
  if (n > kMaxComparedConstant) return false;
  return std::memcmp(data_of<char>(a), data_of<char>(b), static_cast<std::size_t>(n) * dtype_size(a.dtype())) == 0;
}

// The nodes seen so far by hash: open addressing over one array sized for the whole graph (a
// node-based map would allocate per entry). Entries are never removed. A slot keeps 32 bits of
// the hash (a mismatch there rules a node out; a match is still compared): at 100k nodes the
// array is megabytes of fresh pages, half of them with the full hash.
class SeenNodes {
 public:
  explicit SeenNodes(std::size_t max_entries) {
    std::size_t capacity = 16;
    for (shift_ = 60; capacity < 2 * max_entries; --shift_) capacity *= 2;
    slots_.assign(capacity, Slot{});
  }
  /// Calls same(node) for each node added with hash h until it returns true; returns that node,
  /// or -1.
  template <class Same> int find(std::size_t h, Same&& same) const {
    for (std::size_t k = home(h);; k = (k + 1) & mask()) {
      const Slot& slot = slots_[k];
      if (slot.node < 0) return -1;
      if (slot.hash == folded(h) && same(slot.node)) return slot.node;
    }
  }
  void add(std::size_t h, int node) {
    std::size_t k = home(h);
    while (slots_[k].node >= 0) k = (k + 1) & mask();
    slots_[k] = Slot{folded(h), node};
  }

 private:
  struct Slot {
    uint32_t hash = 0;
    int node = -1;
  };
  static uint32_t folded(std::size_t h) { return static_cast<uint32_t>(h ^ (h >> 32)); }
  std::size_t mask() const { return slots_.size() - 1; }
  // Fibonacci hashing: the top bits of a multiple, since hash_combine leaves the low bits weak.
  std::size_t home(std::size_t h) const { return (h * 0x9e3779b97f4a7c15ull) >> shift_; }
  int shift_ = 60;
  CachedVector<Slot> slots_;
};

// Whether the node's two operands may be taken in either order (commutes(): a + b and b + a give
// the same bits), so that CSE finds b + a where a + b was.
bool unordered_operands(const GraphIR& g, const GraphNode& node) {
  return node.inputs.size() == 2 && commutes(node.op, g.type_of(node.inputs[0]).dtype);
}

}  // namespace

int eliminate_common_subexpressions(GraphIR& g) {
  const std::size_t n = g.nodes.size();
  Forwarding fwd(g);
  std::vector<bool> keep(n, true);
  SeenNodes seen(n);
  int merged = 0;
  for (std::size_t i = 0; i < n; ++i) {
    GraphNode& node = g.nodes[i];
    for (ValueRef& in : node.inputs) in = fwd.resolve(in);
    std::size_t h;
    if (node.kind == NodeKind::kConst) {
      // Small constants hash by content, others by identity.
      const Tensor& v = node.value;
      const DType dtype = v.impl()->dtype;
      const TensorShape& shape = static_shape(v);  // as stored: Tensor::shape() copies
      h = hash_combine(0xc0, static_cast<std::size_t>(dtype));
      if (dtype != DType::String && shape.num_elements() <= kMaxComparedConstant) {
        const char* bytes = data_of<char>(v);
        const std::size_t len = static_cast<std::size_t>(shape.num_elements()) * dtype_size(dtype);
        h = hash_combine(h, std::hash<std::string_view>{}(std::string_view(bytes, len)));
        for (int64_t d : shape.dims()) h = hash_combine(h, static_cast<std::size_t>(d));
      } else {
        h = hash_combine(h, std::hash<const void*>{}(v.impl().get()));
      }
    } else if (node.kind == NodeKind::kOp && !(op_def(node.op).traits & kStateful)) {
      h = hash_combine(static_cast<std::size_t>(node.op), hash_attrs(node.attrs));
      auto add_input = [&h](const ValueRef& in) {
        h = hash_combine(hash_combine(h, static_cast<std::size_t>(in.node)), static_cast<std::size_t>(in.output));
      };
      if (unordered_operands(g, node)) {
        // Hashed in one canonical order; the node keeps its own.
        const ValueRef& a = node.inputs[0];
        const ValueRef& b = node.inputs[1];
        const bool swap = b.node < a.node || (b.node == a.node && b.output < a.output);
        add_input(swap ? b : a);
        add_input(swap ? a : b);
      } else {
        for (const ValueRef& in : node.inputs) add_input(in);
      }
    } else {
      continue;
    }
    const int match = seen.find(h, [&](int candidate) {
      const GraphNode& other = g.node(candidate);
      if (node.kind == NodeKind::kConst) return other.kind == NodeKind::kConst && same_constant(node.value, other.value);
      if (other.kind != NodeKind::kOp || other.op != node.op || !(other.attrs == node.attrs)) return false;
      if (other.inputs == node.inputs) return true;
      // Swapped operands: also the same static type (a rule need not infer None dims symmetrically).
      return unordered_operands(g, node) && other.inputs.size() == 2 && other.inputs[0] == node.inputs[1] &&
             other.inputs[1] == node.inputs[0] && other.outputs.size() == node.outputs.size() &&
             std::equal(other.outputs.begin(), other.outputs.end(), node.outputs.begin(),
                        [](const ValueType& x, const ValueType& y) { return x.dtype == y.dtype && x.shape == y.shape; });
    });
    if (match < 0) {
      seen.add(h, static_cast<int>(i));
      continue;
    }
    for (std::size_t k = 0; k < node.outputs.size(); ++k)
      fwd.forward(ValueRef{static_cast<int>(i), static_cast<int>(k)}, ValueRef{match, static_cast<int>(k)});
    keep[i] = false;
    ++merged;
  }
  if (merged) compact(g, keep, &fwd);
  return merged;
}

}  // namespace tg::detail
