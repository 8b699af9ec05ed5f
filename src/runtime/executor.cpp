#include "runtime/executor.h"

#include <algorithm>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "runtime/plan.h"
#include "runtime/thread_pool.h"

namespace tg::detail {

struct Frame {
  std::vector<Tensor> values;             // per slot
  std::vector<std::vector<Tensor>> args;  // per step: the kernel's inputs
  std::vector<std::vector<Tensor>> outs;  // per step: its outputs (kArena: pre-built views)
  std::vector<Tensor> arena;              // per arena buffer: a flat tensor owning it
  std::vector<std::vector<Tensor>> kept;  // per step (reuse_per_call): last call's buffers
};

namespace {

// A None-dim step's output: last call's buffer when nothing else holds it any more and it is big
// enough, else a fresh one that the frame keeps for next time.
Tensor reuse_or_allocate(std::vector<Tensor>& kept, std::size_t j, const ValueType& type) {
  if (kept.size() <= j) kept.resize(j + 1);
  Tensor& k = kept[j];
  const int64_t n = type.shape.num_elements();
  if (k.defined() && k.impl()->buffer.use_count() == 1 && k.impl()->dtype == type.dtype &&
      k.impl()->buffer->count() >= n)
    return make_view(k, type.shape);
  Tensor fresh = allocate_tensor(type.dtype, type.shape);
  k = make_view(fresh, TensorShape({n}));
  return fresh;
}

// Views whose output shares input 0's storage and nothing else (other kView ops, such as the
// TensorArray ones, may keep their inputs).
bool is_pure_view(const GraphNode& node) {
  switch (node.op) {
    case OpId::Identity: case OpId::Reshape: case OpId::ExpandDims: case OpId::Squeeze:
    case OpId::Index:
      return !node.inputs.empty();
    default:
      return false;
  }
}

// Run as run_op_eager does, and their inputs may outlive the call: views, stateful ops (a
// Variable keeps the assigned tensor), control flow, and ops carrying a resource other than a
// fused program.
bool is_generic(const OpDef& def, const GraphNode& node) {
  return (def.traits & (kView | kStateful | kSubgraphs)) ||
         (node.attrs.resource && node.op != OpId::FusedElementwise);
}

bool defined(const ValueType& t) { return t.shape.is_fully_defined(); }

// A flat view of `t`'s elements [begin, begin + n) (n == 1 and a 1-element tensor: a scalar).
Tensor chunk_of(const Tensor& t, int64_t begin, int64_t n, int64_t total) {
  if (t.impl()->shape.num_elements() != total) return make_view(t, TensorShape{});  // broadcast scalar
  return make_view(t, TensorShape({n}), begin);
}

}  // namespace

Plan::Plan(const GraphIR& graph) : nodes_(graph.nodes.data()), num_nodes_(graph.nodes.size()) {
  const std::size_t n = graph.nodes.size();
  std::vector<int> first_slot(n, -1);
  std::vector<ValueType> slot_type;
  std::vector<int> slot_step;  // producing step (-1: placeholder or constant)
  for (std::size_t i = 0; i < n; ++i) {
    const GraphNode& node = graph.nodes[i];
    first_slot[i] = num_slots_;
    if (node.kind == NodeKind::kOutput) continue;
    const std::size_t outs = node.kind == NodeKind::kOp ? node.outputs.size() : 1;
    for (std::size_t j = 0; j < outs; ++j) {
      ValueType t = j < node.outputs.size() ? node.outputs[j] : ValueType{};
      if (node.kind == NodeKind::kConst) t = ValueType{node.value.dtype(), node.value.shape()};
      slot_type.push_back(t);
      slot_step.push_back(-1);
      ++num_slots_;
    }
  }
  auto slot_of = [&](const ValueRef& r) {
    return first_slot[static_cast<std::size_t>(r.node)] + r.output;
  };

  // Steps, value roots (a pure view's output stands for the value it views) and escapes.
  std::vector<int> root(static_cast<std::size_t>(num_slots_));
  for (int s = 0; s < num_slots_; ++s) root[static_cast<std::size_t>(s)] = s;
  std::vector<char> escapes(static_cast<std::size_t>(num_slots_), 0);
  std::vector<char> is_const(static_cast<std::size_t>(num_slots_), 0);
  std::vector<int> output_nodes_order;
  for (std::size_t i = 0; i < n; ++i) {
    const GraphNode& node = graph.nodes[i];
    const int slot = first_slot[i];
    switch (node.kind) {
      case NodeKind::kPlaceholder:
        placeholder_slots_.emplace_back(slot, static_cast<int>(node.attrs.axis));
        escapes[static_cast<std::size_t>(slot)] = 1;
        break;
      case NodeKind::kConst:
        const_slots_.emplace_back(slot, node.value);
        escapes[static_cast<std::size_t>(slot)] = 1;
        is_const[static_cast<std::size_t>(slot)] = 1;
        break;
      case NodeKind::kOutput:
        break;
      case NodeKind::kOp: {
        PlanStep step;
        step.def = &op_def(node.op);
        step.attrs = &node.attrs;
        step.node = static_cast<int>(i);
        for (const auto& in : node.inputs) step.in_slots.push_back(slot_of(in));
        for (std::size_t j = 0; j < node.outputs.size(); ++j) {
          step.out_slots.push_back(slot + static_cast<int>(j));
          slot_step[static_cast<std::size_t>(slot) + j] = static_cast<int>(steps_.size());
        }
        const bool generic = is_generic(*step.def, node);
        if (is_pure_view(node)) {
          for (int o : step.out_slots)
            root[static_cast<std::size_t>(o)] = root[static_cast<std::size_t>(step.in_slots[0])];
        } else if (generic) {
          // A stateful or control-flow kernel may keep its inputs (a Variable stores the
          // assigned tensor): they must not live in memory that the next call overwrites.
          for (int in : step.in_slots) escapes[static_cast<std::size_t>(root[static_cast<std::size_t>(in)])] = 1;
          for (int o : step.out_slots) escapes[static_cast<std::size_t>(o)] = 1;
        }
        for (int in : step.in_slots)
          step.infer_per_call |= !defined(slot_type[static_cast<std::size_t>(in)]);
        for (const auto& t : node.outputs) step.infer_per_call |= !defined(t);
        step.mode = generic ? StepMode::kGeneric : StepMode::kFresh;
        steps_.push_back(std::move(step));
        break;
      }
    }
  }
  for (int out_node : graph.outputs) {
    const GraphNode& node = graph.nodes[static_cast<std::size_t>(out_node)];
    TG_CHECK(node.kind == NodeKind::kOutput && node.inputs.size() == 1);
    const int slot = slot_of(node.inputs[0]);
    output_slots_.push_back(slot);
    escapes[static_cast<std::size_t>(root[static_cast<std::size_t>(slot)])] = 1;
  }

  // Arena eligibility: every output a non-escaping value of fully defined static type.
  for (PlanStep& step : steps_) {
    if (step.mode != StepMode::kFresh) continue;
    bool ok = true;
    for (int o : step.out_slots) {
      const ValueType& t = slot_type[static_cast<std::size_t>(o)];
      ok &= !escapes[static_cast<std::size_t>(o)] && t.dtype != DType::String;
    }
    if (step.infer_per_call) {
      step.reuse_per_call = ok;
      continue;
    }
    if (ok) step.mode = StepMode::kArena;
    if (step.out_slots.size() != 1) continue;
    const ValueType& t0 = slot_type[static_cast<std::size_t>(step.out_slots[0])];
    if ((step.def->traits & kElementwise) &&
        t0.dtype != DType::String && t0.shape.num_elements() >= kParallelMinElements) {
      bool flat = true;
      for (int in : step.in_slots) {
        const int64_t c = slot_type[static_cast<std::size_t>(in)].shape.num_elements();
        flat &= c == t0.shape.num_elements() || c == 1;
      }
      step.parallel = flat;
    }
  }

  // Liveness: the last step reading each slot, and each root (through its views).
  std::vector<int> last_read(static_cast<std::size_t>(num_slots_), -1);
  std::vector<int> root_last(static_cast<std::size_t>(num_slots_), -1);
  for (std::size_t s = 0; s < steps_.size(); ++s)
    for (int in : steps_[s].in_slots) {
      last_read[static_cast<std::size_t>(in)] = static_cast<int>(s);
      root_last[static_cast<std::size_t>(root[static_cast<std::size_t>(in)])] = static_cast<int>(s);
    }
  std::vector<char> is_output(static_cast<std::size_t>(num_slots_), 0);
  for (int o : output_slots_) is_output[static_cast<std::size_t>(o)] = 1;
  for (int s = 0; s < num_slots_; ++s) {
    const auto si = static_cast<std::size_t>(s);
    if (is_const[si]) continue;
    if (is_output[si] || last_read[si] < 0) {
      // Outputs are collected after the last step; unread op outputs go right after their step.
      if (is_output[si] || slot_step[si] < 0) end_release_.push_back(s);
      else steps_[static_cast<std::size_t>(slot_step[si])].release.push_back(s);
    } else {
      steps_[static_cast<std::size_t>(last_read[si])].release.push_back(s);
    }
  }

  // Arena assignment in step order: free buffers of the same dtype and size are reused; an
  // in-place op takes over the buffer of an input whose value dies at that op.
  std::vector<int> buffer_of(static_cast<std::size_t>(num_slots_), -1);
  std::vector<int> free_list;
  auto take_free = [&](DType dt, int64_t count) {
    for (std::size_t k = 0; k < free_list.size(); ++k) {
      const ArenaBufferSpec& b = buffers_[static_cast<std::size_t>(free_list[k])];
      if (b.dtype == dt && b.count == count) {
        const int id = free_list[k];
        free_list.erase(free_list.begin() + static_cast<std::ptrdiff_t>(k));
        return id;
      }
    }
    buffers_.push_back({dt, count});
    return static_cast<int>(buffers_.size()) - 1;
  };
  std::vector<char> donated(static_cast<std::size_t>(num_slots_), 0);
  for (std::size_t s = 0; s < steps_.size(); ++s) {
    PlanStep& step = steps_[s];
    if (step.mode == StepMode::kArena) {
      for (int o : step.out_slots) {
        const ValueType& t = slot_type[static_cast<std::size_t>(o)];
        const int64_t count = t.shape.num_elements();
        int id = -1;
        if (step.def->traits & kInPlace) {
          for (int in : step.in_slots) {
            const int r = root[static_cast<std::size_t>(in)];
            const int b = buffer_of[static_cast<std::size_t>(r)];
            if (b < 0 || donated[static_cast<std::size_t>(r)] || root_last[static_cast<std::size_t>(r)] != static_cast<int>(s))
              continue;
            const ValueType& it = slot_type[static_cast<std::size_t>(in)];
            if (buffers_[static_cast<std::size_t>(b)].dtype != t.dtype ||
                buffers_[static_cast<std::size_t>(b)].count != count || it.shape.num_elements() != count)
              continue;
            id = b;
            donated[static_cast<std::size_t>(r)] = 1;
            ++stats_.in_place;
            break;
          }
        }
        if (id < 0) id = take_free(t.dtype, count);
        buffer_of[static_cast<std::size_t>(o)] = id;
        step.out_buffers.push_back(id);
      }
    }
    // Buffers whose value (and every view of it) dies here become free for later steps.
    auto release_root = [&](int r) {
      const int b = buffer_of[static_cast<std::size_t>(r)];
      if (b >= 0 && !donated[static_cast<std::size_t>(r)]) {
        free_list.push_back(b);
        donated[static_cast<std::size_t>(r)] = 1;  // released once
      }
    };
    for (int in : step.in_slots) {
      const int r = root[static_cast<std::size_t>(in)];
      if (root_last[static_cast<std::size_t>(r)] == static_cast<int>(s)) release_root(r);
    }
    for (int o : step.out_slots)
      if (root_last[static_cast<std::size_t>(o)] < 0 && root[static_cast<std::size_t>(o)] == o) release_root(o);
  }

  stats_.steps = static_cast<int>(steps_.size());
  for (const PlanStep& step : steps_) {
    stats_.arena_steps += step.mode == StepMode::kArena;
    stats_.dynamic |= step.infer_per_call;
    stats_.reused_per_call += step.reuse_per_call;
  }
  stats_.arena_buffers = static_cast<int>(buffers_.size());
  for (const auto& b : buffers_) stats_.arena_bytes += b.count * static_cast<int64_t>(dtype_size(b.dtype));
}

Plan::~Plan() { delete spare_.load(); }

std::unique_ptr<Frame> Plan::make_frame() const {
  auto f = std::make_unique<Frame>();
  f->values.resize(static_cast<std::size_t>(num_slots_));
  for (const auto& [slot, value] : const_slots_) f->values[static_cast<std::size_t>(slot)] = value;
  for (const auto& b : buffers_) f->arena.push_back(allocate_tensor(b.dtype, TensorShape({b.count})));
  f->args.resize(steps_.size());
  f->outs.resize(steps_.size());
  f->kept.resize(steps_.size());
  for (std::size_t s = 0; s < steps_.size(); ++s) {
    const PlanStep& step = steps_[s];
    f->args[s].resize(step.in_slots.size());
    f->outs[s].resize(step.out_slots.size());
    if (step.mode != StepMode::kArena) continue;
    const GraphNode& node = nodes_[static_cast<std::size_t>(step.node)];
    for (std::size_t j = 0; j < step.out_slots.size(); ++j)
      f->outs[s][j] = make_view(f->arena[static_cast<std::size_t>(step.out_buffers[j])], node.outputs[j].shape);
  }
  return f;
}

void Plan::run_step(const PlanStep& step, Frame& frame) const {
  const auto s = static_cast<std::size_t>(&step - steps_.data());
  std::vector<Tensor>& args = frame.args[s];
  std::vector<Tensor>& outs = frame.outs[s];
  for (std::size_t k = 0; k < args.size(); ++k)
    args[k] = frame.values[static_cast<std::size_t>(step.in_slots[k])];
  const GraphNode& node = nodes_[static_cast<std::size_t>(step.node)];
  if (step.mode != StepMode::kArena) {
    if (step.mode == StepMode::kGeneric && (step.def->traits & kView)) {
      for (Tensor& o : outs) o = Tensor();
    } else if (step.infer_per_call) {
      std::vector<ValueType> in_types;
      in_types.reserve(args.size());
      for (const Tensor& t : args) in_types.push_back(ValueType{t.impl()->dtype, t.impl()->shape});
      const std::vector<ValueType> types = step.def->infer(in_types, *step.attrs);
      TG_CHECK(types.size() == outs.size());
      for (std::size_t j = 0; j < outs.size(); ++j)
        outs[j] = step.reuse_per_call ? reuse_or_allocate(frame.kept[s], j, types[j])
                                      : allocate_tensor(types[j].dtype, types[j].shape);
    } else {
      for (std::size_t j = 0; j < outs.size(); ++j)
        outs[j] = allocate_tensor(node.outputs[j].dtype, node.outputs[j].shape);
    }
  }
  if (step.parallel && num_threads() > 1) {
    const int64_t total = outs[0].impl()->shape.num_elements();
    parallel_for(total, kParallelMinElements / 4, [&](int64_t b, int64_t e) {
      std::vector<Tensor> a(args.size()), o(1);
      for (std::size_t k = 0; k < args.size(); ++k) a[k] = chunk_of(args[k], b, e - b, total);
      o[0] = make_view(outs[0], TensorShape({e - b}), b);
      step.def->kernel(a, *step.attrs, o);
    });
  } else {
    step.def->kernel(args, *step.attrs, outs);
  }
  if (step.mode == StepMode::kArena) {
    for (std::size_t j = 0; j < outs.size(); ++j) {
      TG_CHECK(outs[j].impl() && outs[j].impl()->buffer ==
                   frame.arena[static_cast<std::size_t>(step.out_buffers[j])].impl()->buffer,
               "kernel of ", step.def->name, " replaced its pre-allocated output");
      frame.values[static_cast<std::size_t>(step.out_slots[j])] = outs[j];
    }
  } else {
    for (std::size_t j = 0; j < outs.size(); ++j) {
      TG_CHECK(outs[j].defined(), "kernel of ", step.def->name, " left output ", j, " empty");
      frame.values[static_cast<std::size_t>(step.out_slots[j])] = std::move(outs[j]);
    }
  }
  for (Tensor& a : args) a = Tensor();
  for (int slot : step.release) frame.values[static_cast<std::size_t>(slot)] = Tensor();
}

std::vector<Tensor> Plan::run(const std::vector<Tensor>& inputs) const {
  TG_CHECK(inputs.size() == placeholder_slots_.size(), "graph takes ", placeholder_slots_.size(),
           " inputs, got ", inputs.size());
  std::unique_ptr<Frame> frame(spare_.exchange(nullptr, std::memory_order_acquire));
  if (!frame) frame = make_frame();
  for (const auto& [slot, index] : placeholder_slots_)
    frame->values[static_cast<std::size_t>(slot)] = inputs[static_cast<std::size_t>(index)];
  // On an exception the frame is dropped with whatever it holds; the next call builds another.
  for (const PlanStep& step : steps_) run_step(step, *frame);
  std::vector<Tensor> results;
  results.reserve(output_slots_.size());
  for (int slot : output_slots_) results.push_back(frame->values[static_cast<std::size_t>(slot)]);
  for (int slot : end_release_) frame->values[static_cast<std::size_t>(slot)] = Tensor();
  Frame* expected = nullptr;
  if (spare_.compare_exchange_strong(expected, frame.get(), std::memory_order_release))
    frame.release();
  return results;
}

const Plan& plan_for(const GraphIR& graph) {
  const PlanCache& cache = graph.plan_cache;
  if (const auto* p = static_cast<const Plan*>(cache.plan.load(std::memory_order_acquire)); p && p->matches(graph))
    return *p;
  std::lock_guard lock(cache.mu);
  if (const auto* p = static_cast<const Plan*>(cache.plan.load(std::memory_order_acquire)); p && p->matches(graph))
    return *p;
  auto plan = std::make_shared<const Plan>(graph);
  cache.owned.push_back(plan);
  cache.plan.store(plan.get(), std::memory_order_release);
  return *plan;
}

std::vector<Tensor> execute(const GraphIR& graph, const std::vector<Tensor>& inputs) {
  return plan_for(graph).run(inputs);
}

}  // namespace tg::detail
