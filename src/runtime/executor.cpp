#include "runtime/executor.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>

#include "core/check.h"
#include "core/float_environment.h"
#include "core/tensor_impl.h"
#include "core/thread_context.h"
#include "core/thread_pool.h"
#include "ops/memory_refused.h"
#include "runtime/plan.h"
#include "tracegraph/errors.h"

namespace tg::detail {

struct Frame {
  std::vector<Tensor> values;             // per slot
  std::vector<std::vector<Tensor>> args;  // per step: the kernel's inputs
  std::vector<std::vector<Tensor>> outs;  // per step: its outputs (kArena: pre-built views)
  std::vector<Tensor> arena;              // per arena buffer: a flat tensor owning it
  // Per step: kFreshKept, last call's buffers; reuses_results, the last two calls' results
  // (two per output).
  std::vector<std::vector<Tensor>> kept;
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

// Results up to this size are reused across calls (reuse_result); a bigger one's allocation is
// small beside the work that fills it, and the frame would hold it between calls.
constexpr int64_t kReusedResultMaxBytes = int64_t{64} << 10;
// ThreadSanitizer does not model the fence reuse_result relies on (gcc refuses it there), so a
// TSan build allocates every result; the reuse is tested in the other builds.
#if defined(__SANITIZE_THREAD__)
constexpr bool kReusesResults = false;
#else
constexpr bool kReusesResults = true;
#endif

// Whether the frame's handle is the only one left to its tensor and storage: the caller dropped
// the result (and every view of it), so nothing can read it any more.
bool unshared(const Tensor& t) {
  return t.defined() && t.impl().use_count() == 1 && t.impl()->buffer.use_count() == 1;
}

// A small result of a static shape: one of the tensors the frame kept of the last two calls'
// results for this output when nothing else holds it any more, else a fresh one, kept as the
// newest. Two, so that `y = f(x)`, which holds the last result while the next call runs, finds
// the one before free. The acquire fence orders this call's writes after the reads of a thread
// whose drop made the count 1 (the count's load is relaxed).
Tensor reuse_result(Tensor* kept_pair, const ValueType& type) {
  for (int k = 0; k < 2; ++k) {
    if (!unshared(kept_pair[k])) continue;
#if !defined(__SANITIZE_THREAD__)
    std::atomic_thread_fence(std::memory_order_acquire);
#endif
    if (k == 1) std::swap(kept_pair[0], kept_pair[1]);
    return kept_pair[0];
  }
  kept_pair[1] = std::move(kept_pair[0]);
  kept_pair[0] = allocate_tensor(type.dtype, type.shape);
  return kept_pair[0];
}

// A handle to t's tensor that owns nothing (the aliasing constructor with an empty owner):
// copying and dropping it touches no reference count. Only the caller's own handle keeps the
// tensor alive, so a lent handle must not outlive the call (Plan::lendable_).
Tensor lend(const Tensor& t) {
  return Tensor(std::shared_ptr<TensorImpl>(std::shared_ptr<TensorImpl>(), t.impl().get()));
}
bool is_lent(const Tensor& t) { return t.impl() != nullptr && t.impl().use_count() == 0; }

// Elementwise, one output big enough to be worth splitting, and every operand either the output's
// size or a single element: chunks of the flat range are then independent.
bool splits_over_threads(const GraphNode& node, const MemoryPlan& mp) {
  if (node.outputs.size() != 1 || !(op_def(node.op).traits & kElementwise)) return false;
  const ValueType& out = node.outputs[0];
  const int64_t total = out.shape.num_elements();
  if (out.dtype == DType::String || total < kParallelMinElements) return false;
  for (const auto& in : node.inputs) {
    const int64_t c = mp.value_types[static_cast<std::size_t>(mp.value_of(in))].shape.num_elements();
    if (c != total && c != 1) return false;
  }
  return true;
}

// The sub-graph plans of the control-flow step this thread is running, where run_subgraph finds
// the plan of the sub-graph its kernel runs. Kernels keep their (inputs, attrs, outputs)
// signature, so the step hands its plans down this way; a nested step installs its own for the
// duration of its kernel.
thread_local const std::vector<SubgraphPlan>* t_subgraph_plans = nullptr;

class SubgraphPlansScope {
 public:
  explicit SubgraphPlansScope(const std::vector<SubgraphPlan>& plans) : plans_(t_subgraph_plans, &plans) {}

 private:
  ScopedThreadValue<const std::vector<SubgraphPlan>*> plans_;
};

// A flat view of `t`'s elements [begin, begin + n) (n == 1 and a 1-element tensor: a scalar).
Tensor chunk_of(const Tensor& t, int64_t begin, int64_t n, int64_t total) {
  if (t.impl()->shape.num_elements() != total) return make_view(t, TensorShape{});  // broadcast scalar
  return make_view(t, TensorShape({n}), begin);
}

// A control-flow node that may run on a pool thread beside another: a pure cond or while
// (stateful_while carries the effects of its sub-graphs; their kernels read this thread's
// context - Variable bindings, random streams - and must keep their program order).
bool runs_beside_others(const GraphNode& node) {
  return node.kind == NodeKind::kOp && has_subgraphs(node.op) && !(op_def(node.op).traits & kStateful) &&
         node.control_input < 0;
}

// The order the plan runs the nodes in: node order, except that a control-flow node S and the
// next one S2 that does not depend on it run side by side (beside[k]: the k-th node runs beside
// the (k+1)-th), on two threads when the pool has them. Between them in node order come nodes
// that S2 may need and nodes that need S's results (a loop's gradient has both: the other
// loop's inputs and this loop's stacked values); the first kind moves before S, the second
// after S2. Loops are serial chains of small ops that a second core does not speed up, so two
// independent ones (an LSTM's batch halves) are what keeps both cores busy.
std::vector<int> execution_order(const GraphIR& g, std::vector<char>& beside) {
  const auto n = static_cast<int>(g.nodes.size());
  std::vector<int> order;
  order.reserve(static_cast<std::size_t>(n));
  beside.assign(static_cast<std::size_t>(n), 0);
  int loops = 0;
  for (const GraphNode& node : g.nodes) loops += runs_beside_others(node);
  if (loops < 2) {
    for (int i = 0; i < n; ++i) order.push_back(i);
    return order;
  }
  std::vector<char> needs_s(static_cast<std::size_t>(n), 0);  // depends on the current S
  const auto needs = [&](const GraphNode& node) {
    for (const ValueRef& in : node.inputs)
      if (needs_s[static_cast<std::size_t>(in.node)]) return true;
    return node.control_input >= 0 && needs_s[static_cast<std::size_t>(node.control_input)];
  };
  int i = 0;
  while (i < n) {
    const GraphNode& s = g.nodes[static_cast<std::size_t>(i)];
    int partner = -1, scanned = i;
    if (runs_beside_others(s)) {
      needs_s[static_cast<std::size_t>(i)] = 1;
      for (int j = i + 1; j < n; ++j) {
        const GraphNode& node = g.nodes[static_cast<std::size_t>(j)];
        const bool dependent = needs(node);
        needs_s[static_cast<std::size_t>(j)] = dependent;
        scanned = j;
        if (runs_beside_others(node)) {
          if (!dependent) partner = j;
          break;
        }
      }
    }
    if (partner < 0) {
      std::fill(needs_s.begin() + i, needs_s.begin() + std::min(scanned + 1, n), 0);
      order.push_back(i++);
      continue;
    }
    for (int j = i + 1; j < partner; ++j)
      if (!needs_s[static_cast<std::size_t>(j)]) order.push_back(j);
    beside[order.size()] = 1;
    order.push_back(i);
    order.push_back(partner);
    for (int j = i + 1; j < partner; ++j)
      if (needs_s[static_cast<std::size_t>(j)]) order.push_back(j);
    std::fill(needs_s.begin() + i, needs_s.begin() + partner + 1, 0);
    i = partner + 1;
  }
  return order;
}

}  // namespace

Plan::Plan(const GraphIR& graph) : nodes_(&graph.nodes) {
  std::vector<char> beside;
  const std::vector<int> order = execution_order(graph, beside);
  const MemoryPlan mp = plan_memory(graph, order);
  num_slots_ = mp.num_values;
  buffers_ = mp.buffers;
  std::vector<int> step_of(graph.nodes.size(), -1);
  for (std::size_t k = 0; k < order.size(); ++k) {
    const auto i = static_cast<std::size_t>(order[k]);
    const GraphNode& node = graph.nodes[i];
    const int slot = mp.first_value[i];
    switch (node.kind) {
      case NodeKind::kPlaceholder:
        placeholder_slots_.emplace_back(slot, node.input_index);
        break;
      case NodeKind::kConst:
        const_slots_.emplace_back(slot, node.value);
        break;
      case NodeKind::kOutput:
        break;
      case NodeKind::kOp: {
        PlanStep step;
        step.def = &op_def(node.op);
        step.attrs = &node.attrs;
        step.node = static_cast<int>(i);
        step.memory = mp.output_memory[i];
        step.infer_per_call = mp.dynamic_shapes[i];
        step.beside_next = beside[k];
        for (const auto& in : node.inputs) step.in_slots.push_back(mp.value_of(in));
        for (std::size_t j = 0; j < node.outputs.size(); ++j) {
          const int v = slot + static_cast<int>(j);
          step.out_slots.push_back(v);
          if (step.memory == OutputMemory::kArena) step.out_buffers.push_back(mp.buffer_of[static_cast<std::size_t>(v)]);
        }
        step.reuses_results = kReusesResults && step.memory == OutputMemory::kFresh && !step.infer_per_call &&
                              std::all_of(node.outputs.begin(), node.outputs.end(), [](const ValueType& t) {
                                return t.dtype != DType::String &&
                                       t.shape.num_elements() * static_cast<int64_t>(dtype_size(t.dtype)) <=
                                           kReusedResultMaxBytes;
                              });
        step.parallel = (step.memory == OutputMemory::kArena || step.memory == OutputMemory::kFresh) &&
                        !step.infer_per_call && splits_over_threads(node, mp);
        for (const NamedSubgraph& sub : subgraphs_of(node)) {
          const auto same = [&](const SubgraphPlan& p) { return p.graph == sub.graph.get(); };
          if (std::none_of(step.subgraph_plans.begin(), step.subgraph_plans.end(), same))
            step.subgraph_plans.push_back({sub.graph.get(), std::make_unique<const Plan>(*sub.graph)});
        }
        step_of[i] = static_cast<int>(steps_.size());
        steps_.push_back(std::move(step));
        break;
      }
    }
  }
  // One pass over the placeholders, not over their pairs: a function may take thousands of tensors.
  std::vector<char> input_seen;
  for (const auto& placeholder : placeholder_slots_) {
    const auto k = static_cast<std::size_t>(placeholder.second);
    if (k >= input_seen.size()) input_seen.resize(k + 1, 0);
    if (input_seen[k]) inputs_movable_ = false;
    input_seen[k] = 1;
  }
  for (int out_node : graph.outputs)
    output_slots_.push_back(mp.value_of(graph.node(out_node).inputs[0]));
  std::vector<char> kept(static_cast<std::size_t>(num_slots_), 0);  // may outlive the call
  for (const GraphNode& node : graph.nodes)
    if (node.kind == NodeKind::kOp && runs_by_kernel(node))
      for (const auto& in : node.inputs) kept[static_cast<std::size_t>(mp.value_of(in))] = 1;
  for (int v : output_slots_) kept[static_cast<std::size_t>(v)] = 1;
  lendable_.assign(input_seen.size(), 1);
  for (const auto& [slot, index] : placeholder_slots_)
    if (kept[static_cast<std::size_t>(slot)]) lendable_[static_cast<std::size_t>(index)] = 0;
  for (int v = 0; v < num_slots_; ++v) {
    const int after = mp.drop_after[static_cast<std::size_t>(v)];
    if (after == MemoryPlan::kAtEnd) end_release_.push_back(v);
    else if (after >= 0) steps_[static_cast<std::size_t>(step_of[static_cast<std::size_t>(after)])].release.push_back(v);
  }
  for (PlanStep& step : steps_) {
    step.move_in.assign(step.in_slots.size(), 0);
    for (std::size_t k = 0; k < step.in_slots.size(); ++k) {
      const int v = step.in_slots[k];
      const bool later = std::find(step.in_slots.begin() + static_cast<std::ptrdiff_t>(k) + 1, step.in_slots.end(), v) !=
                         step.in_slots.end();
      step.move_in[k] = !later && std::find(step.release.begin(), step.release.end(), v) != step.release.end();
    }
  }
  for (int v : output_slots_)
    move_out_.push_back(std::count(output_slots_.begin(), output_slots_.end(), v) == 1 &&
                        std::find(end_release_.begin(), end_release_.end(), v) != end_release_.end());

  stats_.steps = static_cast<int>(steps_.size());
  for (const PlanStep& step : steps_) {
    stats_.arena_steps += step.memory == OutputMemory::kArena;
    stats_.dynamic |= step.infer_per_call;
    stats_.reused_per_call += step.memory == OutputMemory::kFreshKept;
    stats_.pairs_beside += step.beside_next;
  }
  for (char c : mp.in_place) stats_.in_place += c;
  for (char c : lendable_) stats_.lent_inputs += c;
  stats_.arena_buffers = static_cast<int>(buffers_.size());
  for (const auto& b : buffers_) stats_.arena_bytes += b.count * static_cast<int64_t>(dtype_size(b.dtype));
}

Plan::~Plan() = default;

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
    if (step.reuses_results) f->kept[s].resize(2 * step.out_slots.size());
    if (step.memory != OutputMemory::kArena) continue;
    const GraphNode& node = (*nodes_)[static_cast<std::size_t>(step.node)];
    for (std::size_t j = 0; j < step.out_slots.size(); ++j)
      f->outs[s][j] = make_view(f->arena[static_cast<std::size_t>(step.out_buffers[j])], node.outputs[j].shape);
  }
  return f;
}

void Plan::run_step(const PlanStep& step, Frame& frame) const {
  begin_step(step, frame);
  run_kernel(step, frame);
  end_step(step, frame);
}

// Two control-flow steps side by side (execution_order): their arguments are taken and their
// results stored on this thread, in step order, so that only the kernels run at once. Neither
// reads the other's results, and their inputs and outputs are never arena memory.
void Plan::run_steps_beside(const PlanStep& first, Frame& frame) const {
  const PlanStep& second = (&first)[1];
  begin_step(first, frame);
  begin_step(second, frame);
  parallel_parts(2, [&](int part) { run_kernel(part == 0 ? first : second, frame); });
  end_step(first, frame);
  end_step(second, frame);
}

void Plan::begin_step(const PlanStep& step, Frame& frame) const {
  const auto s = static_cast<std::size_t>(&step - steps_.data());
  std::vector<Tensor>& args = frame.args[s];
  std::vector<Tensor>& outs = frame.outs[s];
  for (std::size_t k = 0; k < args.size(); ++k) {
    Tensor& value = frame.values[static_cast<std::size_t>(step.in_slots[k])];
    if (step.move_in[k]) args[k] = std::move(value);
    else args[k] = value;
  }
  const GraphNode& node = (*nodes_)[static_cast<std::size_t>(step.node)];
  if (step.memory != OutputMemory::kArena) {
    if (step.memory == OutputMemory::kByKernel && makes_own_outputs(step.def->traits)) {
      for (Tensor& o : outs) o = Tensor();
    } else if (step.infer_per_call) {
      std::vector<ValueType> in_types;
      in_types.reserve(args.size());
      for (const Tensor& t : args) in_types.push_back(ValueType{t.impl()->dtype, t.impl()->shape});
      const std::vector<ValueType> types = step.def->infer(in_types, *step.attrs);
      TG_CHECK(types.size() == outs.size());
      for (std::size_t j = 0; j < outs.size(); ++j)
        outs[j] = step.memory == OutputMemory::kFreshKept ? reuse_or_allocate(frame.kept[s], j, types[j])
                                                          : allocate_tensor(types[j].dtype, types[j].shape);
    } else if (step.reuses_results) {
      for (std::size_t j = 0; j < outs.size(); ++j) outs[j] = reuse_result(&frame.kept[s][2 * j], node.outputs[j]);
    } else {
      for (std::size_t j = 0; j < outs.size(); ++j)
        outs[j] = allocate_tensor(node.outputs[j].dtype, node.outputs[j].shape);
    }
  }
}

void Plan::run_kernel(const PlanStep& step, Frame& frame) const {
  const auto s = static_cast<std::size_t>(&step - steps_.data());
  std::vector<Tensor>& args = frame.args[s];
  std::vector<Tensor>& outs = frame.outs[s];
  if (step.parallel && num_threads() > 1) {
    const int64_t total = outs[0].impl()->shape.num_elements();
    parallel_for(total, kParallelMinElements / 4, [&](int64_t b, int64_t e) {
      std::vector<Tensor> a(args.size()), o(1);
      for (std::size_t k = 0; k < args.size(); ++k) a[k] = chunk_of(args[k], b, e - b, total);
      o[0] = make_view(outs[0], TensorShape({e - b}), b);
      step.def->kernel(a, *step.attrs, o);
    });
  } else if (!step.subgraph_plans.empty()) {
    SubgraphPlansScope scope(step.subgraph_plans);
    step.def->kernel(args, *step.attrs, outs);
  } else {
    step.def->kernel(args, *step.attrs, outs);
  }
}

void Plan::end_step(const PlanStep& step, Frame& frame) const {
  const auto s = static_cast<std::size_t>(&step - steps_.data());
  std::vector<Tensor>& args = frame.args[s];
  std::vector<Tensor>& outs = frame.outs[s];
  if (step.memory == OutputMemory::kArena) {
    for (std::size_t j = 0; j < outs.size(); ++j) {
      TG_CHECK(outs[j].impl() && outs[j].impl()->buffer ==
                   frame.arena[static_cast<std::size_t>(step.out_buffers[j])].impl()->buffer,
               "kernel of ", step.def->name, " replaced its pre-allocated output");
      frame.values[static_cast<std::size_t>(step.out_slots[j])] = outs[j];
    }
  } else {
    for (std::size_t j = 0; j < outs.size(); ++j) {
      TG_CHECK(outs[j].defined(), "kernel of ", step.def->name, " left output ", j, " empty");
      // Only kernels that write into given outputs read lent inputs; one that handed an input
      // back as its output would let the handle outlive the call (into a Variable, a result).
      TG_CHECK(!is_lent(outs[j]), "kernel of ", step.def->name, " returned a lent input as output ", j);
      frame.values[static_cast<std::size_t>(step.out_slots[j])] = std::move(outs[j]);
    }
  }
  for (Tensor& a : args) a = Tensor();
  for (int slot : step.release) frame.values[static_cast<std::size_t>(slot)] = Tensor();
}

std::vector<Tensor> Plan::run(const std::vector<Tensor>& inputs) const { return run_with(inputs); }

std::vector<Tensor> Plan::run(std::vector<Tensor>&& inputs) const {
  if (inputs_movable_) return run_with(std::move(inputs));
  return run_with(inputs);
}

std::vector<Tensor> Plan::run(std::span<const Tensor* const> inputs) const { return run_with(inputs); }

// The frame a call runs in: the plan's parked one when no other call holds it (one exchange of
// the flag to take it, a plain store to give it back), else one for this call only. Unless the
// call reaches done(), an exception is on its way: the parked frame is dropped with whatever it
// holds, and the next call builds another.
class Plan::FrameLease {
 public:
  explicit FrameLease(const Plan& plan)
      : plan_(plan), parked_(!plan.frame_in_use_.exchange(true, std::memory_order_acquire)) {}
  ~FrameLease() {
    if (!parked_) return;
    if (!done_) plan_.frame_.reset();
    plan_.frame_in_use_.store(false, std::memory_order_release);
  }
  FrameLease(const FrameLease&) = delete;
  FrameLease& operator=(const FrameLease&) = delete;

  Frame& frame() {
    std::unique_ptr<Frame>& f = parked_ ? plan_.frame_ : own_;
    if (!f) f = plan_.make_frame();
    return *f;
  }
  void done() { done_ = true; }

 private:
  const Plan& plan_;
  const bool parked_;
  bool done_ = false;
  std::unique_ptr<Frame> own_;
};

[[noreturn]] void Plan::throw_refused(std::size_t step) const {
  if (step < steps_.size()) {
    const PlanStep& st = steps_[step];
    throw_memory_refused(st.def->name,
                         str_cat(", running node '", (*nodes_)[static_cast<std::size_t>(st.node)].name, "' of a graph"));
  }
  throw ResourceExhaustedError(str_cat("[execute] the system refused memory for the state of a graph's run (",
                                       num_slots_, " values, ", steps_.size(),
                                       " steps); use smaller shapes or batch sizes"),
                               SIZE_MAX);
}

// Memory the system refuses while a step runs - a kernel's scratch, a fused kernel's fallback,
// a sub-graph's run state - is the ResourceExhaustedError eager dispatch raises, naming the op
// and here its node, not a bare std::bad_alloc. One handler around the whole run: a step costs
// nothing more (a sub-graph's run has named its own node already).
template <class Inputs>
std::vector<Tensor> Plan::run_with(Inputs&& inputs) const {
  using In = std::remove_cvref_t<Inputs>;
  constexpr bool kLent = std::is_same_v<In, std::span<const Tensor* const>>;
  TG_CHECK(inputs.size() == placeholder_slots_.size(), "graph takes ", placeholder_slots_.size(),
           " inputs, got ", inputs.size());
  const KernelFloatEnvironment environment;  // TF's: subnormals flushed, rounding to nearest
  std::size_t s = steps_.size();  // the step running; steps_.size() outside the step loop
  try {
    FrameLease lease(*this);
    Frame& frame = lease.frame();
    for (const auto& [slot, index] : placeholder_slots_) {
      Tensor& value = frame.values[static_cast<std::size_t>(slot)];
      const auto k = static_cast<std::size_t>(index);
      if constexpr (kLent) value = lendable_[k] ? lend(*inputs[k]) : *inputs[k];
      else if constexpr (std::is_lvalue_reference_v<Inputs>) value = inputs[k];
      else value = std::move(inputs[k]);
    }
    const bool threads = num_threads() > 1;
    for (s = 0; s < steps_.size(); ++s) {
      if (steps_[s].beside_next && threads) run_steps_beside(steps_[s++], frame);
      else run_step(steps_[s], frame);
    }
    s = steps_.size();
    // The results go into the moved-in inputs' vector when it is big enough: one heap allocation
    // and free fewer per call (a tenth of a cached scalar call's instructions).
    std::vector<Tensor> results;
    if constexpr (!kLent && !std::is_lvalue_reference_v<Inputs>) {
      if (inputs.capacity() >= output_slots_.size()) {
        results = std::move(inputs);
        results.clear();
      }
    }
    results.reserve(output_slots_.size());
    for (std::size_t k = 0; k < output_slots_.size(); ++k) {
      Tensor& value = frame.values[static_cast<std::size_t>(output_slots_[k])];
      TG_CHECK(!is_lent(value), "a lent input reached output ", k, " of the graph");
      if (move_out_[k]) results.push_back(std::move(value));
      else results.push_back(value);
    }
    for (int slot : end_release_) frame.values[static_cast<std::size_t>(slot)] = Tensor();
    lease.done();
    return results;
  } catch (const std::bad_alloc&) {
    throw_refused(s);
  }
}

std::shared_ptr<const Plan> make_plan(const GraphIR& graph) { return std::make_shared<const Plan>(graph); }

std::vector<Tensor> execute(const Plan& plan, const std::vector<Tensor>& inputs) { return plan.run(inputs); }

std::vector<Tensor> execute(const Plan& plan, std::vector<Tensor>&& inputs) { return plan.run(std::move(inputs)); }

std::vector<Tensor> execute_lent(const Plan& plan, std::span<const Tensor* const> inputs) { return plan.run(inputs); }

std::vector<Tensor> execute(const GraphIR& graph, const std::vector<Tensor>& inputs) {
  return Plan(graph).run(inputs);
}

std::vector<Tensor> run_subgraph(const GraphIR& graph, const std::vector<Tensor>& inputs) {
  if (const std::vector<SubgraphPlan>* plans = t_subgraph_plans)
    for (const SubgraphPlan& p : *plans)
      if (p.graph == &graph) return p.plan->run(inputs);
  return Plan(graph).run(inputs);
}

}  // namespace tg::detail
