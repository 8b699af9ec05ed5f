#include "runtime/memory_plan.h"

#include <algorithm>

#include "core/buffer.h"
#include "core/check.h"

namespace tg::detail {

namespace {

// The arena's buffers. Free ones are handed out first-fit in the order they were freed, so that
// a graph always gets the same plan.
class BufferPool {
 public:
  explicit BufferPool(std::vector<ArenaBufferSpec>& buffers) : buffers_(buffers) {}

  int take(DType dtype, int64_t count) {
    for (std::size_t k = 0; k < free_.size(); ++k) {
      const ArenaBufferSpec& b = buffers_[static_cast<std::size_t>(free_[k])];
      if (b.dtype == dtype && b.count == count) {
        const int id = free_[k];
        free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(k));
        return id;
      }
    }
    buffers_.push_back({dtype, count});
    return static_cast<int>(buffers_.size()) - 1;
  }
  void give_back(int id) { free_.push_back(id); }

 private:
  std::vector<ArenaBufferSpec>& buffers_;
  std::vector<int> free_;
};

}  // namespace

bool runs_by_kernel(const GraphNode& node) {
  const uint32_t traits = op_def(node.op).traits;
  return makes_own_outputs(traits) || (traits & (kStateful | kSubgraphs));
}

bool output_aliases_input(const GraphNode& node) {
  return node.kind == NodeKind::kOp && (op_def(node.op).traits & kView) && !node.inputs.empty();
}

MemoryPlan plan_memory(const GraphIR& graph, std::span<const int> order) {
  MemoryPlan mp;
  const std::size_t n = graph.nodes.size();
  TG_CHECK(order.empty() || order.size() == n, "an execution order of ", order.size(), " nodes for a graph of ", n);
  // The k-th node to run.
  const auto run_at = [&](std::size_t k) { return order.empty() ? k : static_cast<std::size_t>(order[k]); };
  mp.first_value.resize(n);
  mp.dynamic_shapes.assign(n, 0);
  mp.output_memory.assign(n, OutputMemory::kByKernel);
  std::vector<int> producer;  // per value: its node
  for (std::size_t i = 0; i < n; ++i) {
    const GraphNode& node = graph.nodes[i];
    mp.first_value[i] = mp.num_values;
    if (node.kind == NodeKind::kOutput) continue;
    const std::size_t outs = node.kind == NodeKind::kOp ? node.outputs.size() : 1;
    for (std::size_t j = 0; j < outs; ++j) {
      ValueType t = j < node.outputs.size() ? node.outputs[j] : ValueType{};
      if (node.kind == NodeKind::kConst) t = ValueType{node.value.dtype(), node.value.shape()};
      mp.value_types.push_back(t);
      producer.push_back(static_cast<int>(i));
      ++mp.num_values;
    }
  }
  const auto nv = static_cast<std::size_t>(mp.num_values);
  auto at = [](auto& v, int k) -> auto& { return v[static_cast<std::size_t>(k)]; };

  // Storage (an aliasing view stands for the value it views) and escapes: values that must not
  // live in memory a later call overwrites.
  mp.storage_of.resize(nv);
  for (int v = 0; v < mp.num_values; ++v) at(mp.storage_of, v) = v;
  CachedVector<char> escapes(nv, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const GraphNode& node = graph.nodes[i];
    const int first = mp.first_value[i];
    if (node.kind == NodeKind::kPlaceholder || node.kind == NodeKind::kConst) at(escapes, first) = 1;
    if (node.kind != NodeKind::kOp) continue;
    for (const auto& in : node.inputs) mp.dynamic_shapes[i] |= !at(mp.value_types, mp.value_of(in)).shape.is_fully_defined();
    for (const auto& t : node.outputs) mp.dynamic_shapes[i] |= !t.shape.is_fully_defined();
    if (output_aliases_input(node)) {
      for (std::size_t j = 0; j < node.outputs.size(); ++j)
        at(mp.storage_of, first + static_cast<int>(j)) = at(mp.storage_of, mp.value_of(node.inputs[0]));
    } else if (runs_by_kernel(node)) {
      for (const auto& in : node.inputs) at(escapes, at(mp.storage_of, mp.value_of(in))) = 1;
      for (std::size_t j = 0; j < node.outputs.size(); ++j) at(escapes, first + static_cast<int>(j)) = 1;
    }
  }
  CachedVector<char> is_output(nv, 0);
  for (int out_node : graph.outputs) {
    const GraphNode& node = graph.node(out_node);
    TG_CHECK(node.kind == NodeKind::kOutput && node.inputs.size() == 1);
    const int v = mp.value_of(node.inputs[0]);
    at(is_output, v) = 1;
    at(escapes, at(mp.storage_of, v)) = 1;
  }

  // How each op's outputs get memory: all outputs in the arena, or none.
  for (std::size_t i = 0; i < n; ++i) {
    const GraphNode& node = graph.nodes[i];
    if (node.kind != NodeKind::kOp || runs_by_kernel(node)) continue;
    bool plannable = true;
    for (std::size_t j = 0; j < node.outputs.size(); ++j) {
      const int v = mp.first_value[i] + static_cast<int>(j);
      plannable &= !at(escapes, v) && at(mp.value_types, v).dtype != DType::String;
    }
    if (!plannable) mp.output_memory[i] = OutputMemory::kFresh;
    else mp.output_memory[i] = mp.dynamic_shapes[i] ? OutputMemory::kFreshKept : OutputMemory::kArena;
  }

  // Liveness: when each value's slot can be dropped, and how many reads each storage has left
  // (through any view of it).
  mp.drop_after.assign(nv, -1);
  CachedVector<int> readers_left(nv, 0);
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = run_at(k);
    const GraphNode& node = graph.nodes[i];
    if (node.kind != NodeKind::kOp) continue;
    for (const auto& in : node.inputs) {
      const int v = mp.value_of(in);
      at(mp.drop_after, v) = static_cast<int>(i);
      ++at(readers_left, at(mp.storage_of, v));
    }
  }
  for (int v = 0; v < mp.num_values; ++v) {
    const NodeKind kind = graph.node(at(producer, v)).kind;
    if (kind == NodeKind::kConst) at(mp.drop_after, v) = MemoryPlan::kNever;
    else if (at(is_output, v)) at(mp.drop_after, v) = MemoryPlan::kAtEnd;
    else if (at(mp.drop_after, v) < 0)  // unread: right after its op, or at the end for an input
      at(mp.drop_after, v) = kind == NodeKind::kOp ? at(producer, v) : MemoryPlan::kAtEnd;
  }

  // Arena buffers in execution order. An in-place op takes over a dying input's buffer; a
  // storage's buffer is free for later nodes once its last reader has run.
  mp.buffer_of.assign(nv, -1);
  mp.in_place.assign(nv, 0);
  BufferPool pool(mp.buffers);
  std::vector<int> dying;  // storages whose last reader is the current node
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = run_at(k);
    const GraphNode& node = graph.nodes[i];
    if (node.kind != NodeKind::kOp) continue;
    dying.clear();
    for (const auto& in : node.inputs) --at(readers_left, at(mp.storage_of, mp.value_of(in)));
    for (const auto& in : node.inputs) {  // in order of first use: the free list's order
      const int s = at(mp.storage_of, mp.value_of(in));
      if (at(readers_left, s) == 0 && std::find(dying.begin(), dying.end(), s) == dying.end()) dying.push_back(s);
    }
    if (mp.output_memory[i] == OutputMemory::kArena) {
      const bool in_place_ok = op_def(node.op).traits & kInPlace;
      for (std::size_t j = 0; j < node.outputs.size(); ++j) {
        const int v = mp.first_value[i] + static_cast<int>(j);
        const ValueType& t = at(mp.value_types, v);
        const int64_t count = t.shape.num_elements();
        int id = -1;
        for (std::size_t k = 0; in_place_ok && id < 0 && k < node.inputs.size(); ++k) {
          const int in = mp.value_of(node.inputs[k]);
          const int s = at(mp.storage_of, in);
          const int b = at(mp.buffer_of, s);
          auto d = std::find(dying.begin(), dying.end(), s);
          if (b < 0 || d == dying.end()) continue;
          // The input itself must cover the whole buffer: a view of part of it (x[i]) does not.
          if (at(mp.buffers, b).dtype != t.dtype || at(mp.buffers, b).count != count ||
              at(mp.value_types, in).shape.num_elements() != count)
            continue;
          id = b;
          dying.erase(d);  // its buffer now belongs to v
          at(mp.in_place, v) = 1;
        }
        if (id < 0) id = pool.take(t.dtype, count);
        at(mp.buffer_of, v) = id;
      }
    }
    for (int s : dying)
      if (at(mp.buffer_of, s) >= 0) pool.give_back(at(mp.buffer_of, s));
    for (std::size_t j = 0; j < node.outputs.size(); ++j) {
      const int v = mp.first_value[i] + static_cast<int>(j);
      if (at(mp.storage_of, v) == v && at(readers_left, v) == 0 && at(mp.buffer_of, v) >= 0)
        pool.give_back(at(mp.buffer_of, v));  // never read
    }
  }
  return mp;
}

}  // namespace tg::detail
