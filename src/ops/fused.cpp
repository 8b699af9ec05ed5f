// fused_elementwise: runs a program of elementwise micro-ops over the data once, tile by tile.
// Each micro-op runs over a whole tile (kTile elements, small enough for L1) before the next, so
// its loop vectorises on its own; values with uses outside the node are written straight into
// the node's outputs. Each micro-op applies the functor the unfused kernel applies
// (elementwise_functors.h), so results are bit-identical. The plan it runs is fused_plan.cpp's.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <type_traits>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "core/thread_pool.h"
#include "kernels/reduce_semantics.h"
#include "ops/broadcast.h"
#include "ops/eager_steps.h"
#include "ops/fused_plan.h"

namespace tg::detail {

namespace {

// ---- the kernel ----

// Per-thread scratch for tile buffers and scalar values; grows, never shrinks.
struct Scratch {
  std::byte* data = nullptr;
  std::size_t size = 0;
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { std::free(data); }
  std::byte* get(std::size_t bytes) {
    if (bytes > size) {
      std::free(data);
      size = (bytes + 63) / 64 * 64;
      data = static_cast<std::byte*>(std::aligned_alloc(64, size));
      if (!data) throw std::bad_alloc();
    }
    return data;
  }
};

template <class T>
void fill_as(void* dst, const void* value, int64_t n) {
  T v;
  std::memcpy(&v, value, sizeof(T));
  T* d = static_cast<T*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = v;
}
void fill(void* dst, const void* value, std::size_t elem_size, int64_t n) {
  switch (elem_size) {
    case 1: return fill_as<uint8_t>(dst, value, n);
    case 2: return fill_as<uint16_t>(dst, value, n);
    case 4: return fill_as<uint32_t>(dst, value, n);
    case 8: return fill_as<uint64_t>(dst, value, n);
    default: TG_CHECK(false, "element size ", elem_size);
  }
}

// Copies elements [start, start + len) of src broadcast to dims (strides 0 where it repeats).
template <class T>
void gather_as(const T* src, const std::vector<int64_t>& dims, const int64_t* strides,
               int64_t start, int64_t len, T* dst) {
  const std::size_t rank = dims.size();
  int64_t idx[16];
  int64_t offset = 0;
  int64_t rest = start;
  for (std::size_t d = rank; d-- > 0;) {
    idx[d] = rest % dims[d];
    rest /= dims[d];
    offset += idx[d] * strides[d];
  }
  const int64_t inner = dims[rank - 1];
  const int64_t inner_stride = strides[rank - 1];
  int64_t done = 0;
  while (done < len) {
    const int64_t run = std::min(inner - idx[rank - 1], len - done);
    // A bias row (stride 1) is a block copy and a repeated value (stride 0) a fill; the library's
    // baseline-ISA build copied them one element at a time, most of a bias + relu program's time.
    if (inner_stride == 1) std::memcpy(dst + done, src + offset, static_cast<std::size_t>(run) * sizeof(T));
    else if (inner_stride == 0) std::fill(dst + done, dst + done + run, src[offset]);
    else for (int64_t i = 0; i < run; ++i) dst[done + i] = src[offset + i * inner_stride];
    done += run;
    offset += run * inner_stride;
    idx[rank - 1] += run;
    // Carry into outer dims, rewinding the offsets of the dims that wrapped.
    for (std::size_t d = rank - 1; d > 0 && idx[d] == dims[d]; --d) {
      offset -= idx[d] * strides[d];
      idx[d] = 0;
      ++idx[d - 1];
      offset += strides[d - 1];
    }
  }
}
void gather(const void* src, std::size_t elem_size, const std::vector<int64_t>& dims,
            const int64_t* strides, int64_t start, int64_t len, void* dst) {
  switch (elem_size) {
    case 1: return gather_as(static_cast<const uint8_t*>(src), dims, strides, start, len, static_cast<uint8_t*>(dst));
    case 2: return gather_as(static_cast<const uint16_t*>(src), dims, strides, start, len, static_cast<uint16_t*>(dst));
    case 4: return gather_as(static_cast<const uint32_t*>(src), dims, strides, start, len, static_cast<uint32_t*>(dst));
    case 8: return gather_as(static_cast<const uint64_t*>(src), dims, strides, start, len, static_cast<uint64_t*>(dst));
    default: TG_CHECK(false, "element size ", elem_size);
  }
}

void run_steps(const std::vector<FusedPlan::Exec>& steps, void* const* ptr, int64_t n) {
  for (const FusedPlan::Exec& e : steps) {
    const void* args[3] = {e.args[0] >= 0 ? ptr[e.args[0]] : nullptr,
                           e.extra ? e.extra : e.args[1] >= 0 ? ptr[e.args[1]] : nullptr,
                           e.args[2] >= 0 ? ptr[e.args[2]] : nullptr};
    e.fn(args, ptr[e.out], n);
  }
}

// ---- folded reductions (what each computes: kernels/reduce_semantics.h) ----

// Folds x[0, n) - the part of one row that lies in one tile - into that row's accumulator.
template <ReduceKind R, class A, class T>
A reduce_chunk(A acc, const T* x, int64_t n) {
  if constexpr (R == ReduceKind::kSum || R == ReduceKind::kMean) {
    // The part's own sum, added to the row's: floats in sum_in_lanes' order; integers wrap, so
    // any order gives the same bits.
    if constexpr (kFloatingSum<R, A>) return reduce_step<R>(acc, sum_in_lanes<A>(x, n));
    else return reduce_step<R>(acc, reduce_in_lanes<R, A>(x, n));
  } else {
    // Max/min: the row's accumulator starts every lane and takes the part's tail in lane 0, so
    // a row cut by tiles is folded once per part.
    A lane[kReduceLanes];
    int nan[kReduceLanes] = {};
    for (A& l : lane) l = acc;
    int64_t i = reduce_blocks<R>(x, n, lane, nan);
    for (; i < n; ++i) {
      const A v = x[i];
      lane[0] = reduce_step<R>(lane[0], v);
      if constexpr (kReduceFlagsNan<R, A>) nan[0] |= v != v;
    }
    if constexpr (kReduceFlagsNan<R, A>)
      if (any_lane_nan(nan)) return reduce_nan<A>();
    return fold_lanes<R>(acc, lane);
  }
}

// Accumulates the tiles of one program run into per-result accumulators.
class Reducer {
 public:
  virtual ~Reducer() = default;
  virtual void add(const void* tile, int64_t start, int64_t len) = 0;
  virtual void finish(void* out) = 0;
};

template <ReduceKind R, class T>
class ReducerOf final : public Reducer {
  using A = reduce_acc_t<R, T>;

 public:
  ReducerOf(int64_t row, int64_t n_out) : row_(row), acc_(static_cast<std::size_t>(n_out), reduce_identity<R, A>()) {}
  void add(const void* tile, int64_t start, int64_t len) override {
    const T* x = static_cast<const T*>(tile);
    if (row_ == 1) {  // each result is one element: that element, as the reduce ops give it
      for (int64_t k = 0; k < len; ++k) acc_[static_cast<std::size_t>(start + k)] = reduce_one<R, A>(x[k]);
      return;
    }
    int64_t i = 0;
    while (i < len) {
      const int64_t pos = start + i;
      const int64_t o = pos / row_;
      const int64_t run = std::min(row_ - pos % row_, len - i);
      A& a = acc_[static_cast<std::size_t>(o)];
      a = reduce_chunk<R>(a, x + i, run);
      i += run;
    }
  }
  void finish(void* out) override {
    T* y = static_cast<T*>(out);
    for (std::size_t o = 0; o < acc_.size(); ++o) y[o] = finish_reduction<R, T>(acc_[o], row_);
  }

 private:
  int64_t row_;
  std::vector<A> acc_;
};

template <ReduceKind R>
std::unique_ptr<Reducer> make_reducer_for(DType d, int64_t row, int64_t n_out) {
  switch (d) {
    case DType::Float32: return std::make_unique<ReducerOf<R, float>>(row, n_out);
    case DType::Float64: return std::make_unique<ReducerOf<R, double>>(row, n_out);
    case DType::Int32: return std::make_unique<ReducerOf<R, int32_t>>(row, n_out);
    case DType::Int64: return std::make_unique<ReducerOf<R, int64_t>>(row, n_out);
    default: TG_CHECK(false, "fused reduction of ", to_string(d));
  }
  return nullptr;
}

std::unique_ptr<Reducer> make_reducer(const FusedProgram& p, const FusedPlan& plan) {
  const FusedReduce& r = p.reduce;
  const DType d = p.slot_dtype(r.slot);
  const int64_t n_out = plan.reduce_outputs;
  const int64_t row = plan.reduce_row;
  switch (r.op) {
    case OpId::ReduceSum: return make_reducer_for<ReduceKind::kSum>(d, row, n_out);
    case OpId::ReduceMean: return make_reducer_for<ReduceKind::kMean>(d, row, n_out);
    case OpId::ReduceMax: return make_reducer_for<ReduceKind::kMax>(d, row, n_out);
    case OpId::ReduceMin: return make_reducer_for<ReduceKind::kMin>(d, row, n_out);
    default: TG_CHECK(false, "fused reduction ", op_def(r.op).name);
  }
  return nullptr;
}

// One run of a program over elements [begin, end) on the calling thread, with this thread's
// own tile buffers and scalar values (so that ranges run in parallel).
struct FusedRun {
  const FusedProgram& p;
  const FusedPlan& plan;
  std::byte* const* in_base;
  std::byte* const* out_base;
  Reducer* reducer;

  void operator()(int64_t begin, int64_t end) const {
    const std::size_t num_slots = plan.slots.size();
    const std::size_t num_ptrs = num_slots + plan.splats.size();
    thread_local Scratch scratch;
    thread_local std::vector<void*> ptr_storage;
    const std::size_t buffer_bytes = static_cast<std::size_t>(plan.num_buffers) * kBufferBytes;
    std::byte* base = scratch.get(buffer_bytes + static_cast<std::size_t>(plan.num_scalars) * kSlotBytes + 64);
    std::byte* scalars = base + buffer_bytes;
    if (ptr_storage.size() < num_ptrs) ptr_storage.resize(num_ptrs);
    void** ptr = ptr_storage.data();
    const std::size_t first_imm = p.inputs.size();
    const std::size_t first_step = first_imm + p.immediates.size();
    for (int si : plan.scalar_slots) {
      const auto s = static_cast<std::size_t>(si);
      ptr[s] = s < first_imm    ? in_base[s]
               : s < first_step ? bytes_of(p.immediates[s - first_imm])
                                : scalars + static_cast<std::size_t>(plan.slots[s].scalar) * kSlotBytes;
    }
    for (int s : plan.buffer_slots)
      ptr[s] = base + static_cast<std::size_t>(plan.slots[static_cast<std::size_t>(s)].index) * kBufferBytes;
    run_steps(plan.scalar_steps, ptr, 1);
    for (const auto& [slot, k] : plan.scalar_outputs) {
      const std::size_t elem = plan.slots[static_cast<std::size_t>(slot)].elem_size;
      fill(out_base[static_cast<std::size_t>(k)] + begin * static_cast<int64_t>(elem), ptr[slot], elem, end - begin);
    }
    for (std::size_t k = 0; k < plan.splats.size(); ++k) {
      const auto [slot, buffer] = plan.splats[k];
      void* dst = base + static_cast<std::size_t>(buffer) * kBufferBytes;
      fill(dst, ptr[slot], plan.slots[static_cast<std::size_t>(slot)].elem_size, std::min(kTile, end - begin));
      ptr[num_slots + k] = dst;
    }
    if (plan.tile_steps.empty() && !reducer) return;
    const std::vector<int64_t>& dims = plan.dims;
    for (int64_t start = begin; start < end; start += kTile) {
      const int64_t len = std::min(kTile, end - start);
      for (int s : plan.tile_inputs) {
        const FusedPlan::Slot& slot = plan.slots[static_cast<std::size_t>(s)];
        if (slot.kind == FusedPlan::kFullInput)
          ptr[s] = in_base[s] + start * static_cast<int64_t>(slot.elem_size);
        else
          gather(in_base[s], slot.elem_size, dims,
                 plan.bcast_strides.data() + static_cast<std::size_t>(slot.index) * dims.size(), start, len, ptr[s]);
      }
      for (int s : plan.tile_outputs) {
        const FusedPlan::Slot& slot = plan.slots[static_cast<std::size_t>(s)];
        ptr[s] = out_base[static_cast<std::size_t>(slot.index)] + start * static_cast<int64_t>(slot.elem_size);
      }
      run_steps(plan.tile_steps, ptr, len);
      if (reducer) reducer->add(ptr[plan.reduce_ptr], start, len);
    }
  }
};

}  // namespace

// ---- programs over None dims (their plans by run-time shape: DynamicPlans, fused_plan.h) ----

namespace {

template <class ShapeOf>
bool key_matches(const std::vector<int64_t>& key, std::size_t num_inputs, ShapeOf shape_of) {
  std::size_t at = 0;
  for (std::size_t i = 0; i < num_inputs; ++i) {
    const std::vector<int64_t>& dims = shape_of(i).dims();
    if (at + 1 + dims.size() > key.size() || key[at] != static_cast<int64_t>(dims.size()) ||
        !std::equal(dims.begin(), dims.end(), key.begin() + static_cast<std::ptrdiff_t>(at + 1)))
      return false;
    at += 1 + dims.size();
  }
  return at == key.size();
}

// The attributes the unfused node of a step had: fused steps are attribute-free ops and casts.
OpAttrs step_attrs(const FusedStep& st) {
  OpAttrs attrs = st.op == OpId::Cast ? OpAttrs(CastAttrs{st.out_dtype}) : OpAttrs(NoAttrs{});
  TG_CHECK(attrs.kind() == op_def(st.op).attrs_kind, "fused step ", op_def(st.op).name, " has attributes");
  return attrs;
}

// The types every slot has when the inputs have `input_shapes`, by each op's own shape rule
// (which throws the unfused op's error for shapes that do not broadcast).
std::vector<ValueType> slot_types(const FusedProgram& p, const std::vector<TensorShape>& input_shapes) {
  std::vector<ValueType> types;
  types.reserve(static_cast<std::size_t>(p.first_step_slot()) + p.steps.size());
  for (std::size_t i = 0; i < p.inputs.size(); ++i) types.push_back(ValueType{p.inputs[i].dtype, input_shapes[i]});
  for (const Tensor& imm : p.immediates) types.push_back(ValueType{imm.dtype(), imm.impl()->shape});
  std::vector<ValueType> args;
  for (const FusedStep& st : p.steps) {
    args.clear();
    for (int a = 0; a < st.num_args; ++a) args.push_back(types[static_cast<std::size_t>(st.args[a])]);
    std::vector<ValueType> out = op_def(st.op).infer(args, step_attrs(st));
    TG_CHECK(out.size() == 1 && out[0].dtype == st.out_dtype, "fused step ", op_def(st.op).name, " changed type");
    types.push_back(std::move(out[0]));
  }
  return types;
}

template <class ShapeOf>
std::shared_ptr<const DynamicPlans::Entry> resolve(const FusedProgram& p, ShapeOf shape_of) {
  DynamicPlans& cache = *p.dynamic;
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    for (const auto& e : cache.entries)
      if (key_matches(e->key, p.inputs.size(), shape_of)) return e;
  }
  auto e = std::make_shared<DynamicPlans::Entry>();
  std::vector<TensorShape> input_shapes;
  for (std::size_t i = 0; i < p.inputs.size(); ++i) {
    input_shapes.push_back(shape_of(i));
    e->key.push_back(static_cast<int64_t>(input_shapes.back().dims().size()));
    e->key.insert(e->key.end(), input_shapes.back().dims().begin(), input_shapes.back().dims().end());
  }
  const std::vector<ValueType> types = slot_types(p, input_shapes);
  const auto first_step = static_cast<std::size_t>(p.first_step_slot());
  const TensorShape& shape = types[first_step].shape;
  const bool one_shape = std::all_of(types.begin() + static_cast<std::ptrdiff_t>(first_step), types.end(),
                                     [&](const ValueType& t) { return t.shape == shape; });
  if (one_shape) e->plan = build_plan(p, input_shapes, shape);
  for (int s : p.outputs) e->outputs.push_back(types[static_cast<std::size_t>(s)]);
  if (p.has_reduce()) {
    std::vector<ValueType> r = op_def(p.reduce.op).infer({types[static_cast<std::size_t>(p.reduce.slot)]}, p.reduce.attrs);
    e->outputs.push_back(std::move(r.at(0)));
  }
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.entries.insert(cache.entries.begin(), e);
  if (cache.entries.size() > DynamicPlans::kMaxEntries) cache.entries.pop_back();
  return e;
}

// The program's results op by op: `op(id, args, attrs)` for each step on `in` (the node's
// inputs) and the immediates, then for the reduction; the outputs, then the reduction's result.
// With run_step_eagerly, the program as the unfused graph would run it (run_steps_eagerly).
template <class Op>
std::vector<Tensor> run_program_ops(const FusedProgram& p, const std::vector<Tensor>& in, Op&& op) {
  std::vector<Tensor> values(in.begin(), in.end());
  values.insert(values.end(), p.immediates.begin(), p.immediates.end());
  std::vector<Tensor> args;
  for (const FusedStep& st : p.steps) {
    args.clear();
    for (int a = 0; a < st.num_args; ++a) args.push_back(values[static_cast<std::size_t>(st.args[a])]);
    values.push_back(op(st.op, args, step_attrs(st)));
  }
  std::vector<Tensor> results;
  for (int s : p.outputs) results.push_back(values[static_cast<std::size_t>(s)]);
  if (p.has_reduce()) results.push_back(op(p.reduce.op, {values[static_cast<std::size_t>(p.reduce.slot)]}, p.reduce.attrs));
  return results;
}

void kernel_fused(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const FusedProgram& p = fused_program(attrs);
  const FusedPlan* planned = p.plan.get();
  std::shared_ptr<const DynamicPlans::Entry> entry;  // keeps a run-time plan alive while it runs
  if (!planned) {
    entry = resolve(p, [&](std::size_t i) -> const TensorShape& { return in[i].impl()->shape; });
    if (!entry->plan) return run_steps_eagerly([&](auto op) { return run_program_ops(p, in, op); }, out);
    planned = entry->plan.get();
  }
  const FusedPlan& plan = *planned;
  std::unique_ptr<Reducer> reducer = p.has_reduce() ? make_reducer(p, plan) : nullptr;
  if (plan.total == 0) {
    if (reducer) reducer->finish(bytes_of(out.back()));  // empty rows: identities
    return;
  }
  // Reused per thread: no allocation on the call path once warm.
  thread_local std::vector<std::byte*> in_base, out_base;
  in_base.resize(in.size());
  out_base.resize(out.size());
  for (std::size_t i = 0; i < in.size(); ++i) in_base[i] = bytes_of(in[i]);
  for (std::size_t i = 0; i < out.size(); ++i) out_base[i] = bytes_of(out[i]);
  const FusedRun run{p, plan, in_base.data(), out_base.data(), reducer.get()};
  const int64_t row = p.has_reduce() ? plan.reduce_row : 1;
  if (plan.total < 2 * plan.grain || row == plan.total) {
    // Small, or one reduction over everything: one thread folds it, tile after tile, so that its
    // sum's rounding does not depend on the thread count.
    run(0, plan.total);
  } else {
    // Whole rows per thread: each reduced row is still folded in order by one thread.
    const int64_t rows = plan.total / row;
    parallel_for(rows, std::max<int64_t>(1, plan.grain / row),
                 [&](int64_t b, int64_t e) { run(b * row, e * row); });
  }
  if (reducer) reducer->finish(bytes_of(out.back()));
}

// Inputs may be less specific than the program's (tracing with None dims), never different.
// Over None dims, run-time inputs get the types the unfused steps would give them.
std::vector<ValueType> infer_fused(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  if (!attrs.get<FusedAttrs>().program)
    op_error<InvalidArgumentError>("fused_elementwise", "has no program; fused_elementwise nodes are made by "
                                   "the graph optimiser only");
  const FusedProgram& p = fused_program(attrs);
  if (in.size() != p.inputs.size())
    op_error<InvalidArgumentError>("fused_elementwise", "expected ", p.inputs.size(), " inputs, got ", in.size());
  for (std::size_t i = 0; i < in.size(); ++i)
    if (in[i].dtype != p.inputs[i].dtype || !in[i].shape.is_compatible_with(p.inputs[i].shape))
      op_error<InvalidArgumentError>("fused_elementwise", "input ", i, " is ", describe(in[i]),
                                     " but the fused program was built for ", describe(p.inputs[i]));
  const bool run_time = std::all_of(in.begin(), in.end(), [](const ValueType& t) { return t.shape.is_fully_defined(); });
  if (p.dynamic && run_time)
    return resolve(p, [&](std::size_t i) -> const TensorShape& { return in[i].shape; })->outputs;
  std::vector<ValueType> outs;
  for (int s : p.outputs) outs.push_back(ValueType{p.slot_dtype(s), p.shape});
  if (p.has_reduce()) outs.push_back(ValueType{p.slot_dtype(p.reduce.slot), p.reduce.shape});
  return outs;
}

// The one-op programs run_as_fused_op has run on this thread, most recent first, by op, input
// types and output shape: an eager loop or an unfused node meets the same few again and again.
struct OneOpProgram {
  OpId op;
  std::vector<ValueType> inputs;
  TensorShape shape;
  OpAttrs attrs;  // the program
};

}  // namespace

bool run_as_fused_op(OpId op, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  if (out.size() != 1 || in.empty() || in.size() > 3 || !(op_def(op).traits & kElementwise) ||
      op_def(op).attrs_kind != OpAttrs(NoAttrs{}).kind())
    return false;
  const TensorShape& shape = out[0].impl()->shape;
  if (shape.rank() > 16) return false;
  for (const Tensor& t : in)
    if (!t.defined() || t.impl()->shape.rank() > shape.rank()) return false;
  if (op == OpId::Where && in.size() != 3) return false;
  const DType in_dtype = in[op == OpId::Where ? 1 : 0].impl()->dtype;
  if (!fusable_op(op, in_dtype, out[0].impl()->dtype)) return false;
  thread_local std::vector<OneOpProgram> recent;
  auto same = [&](const OneOpProgram& r) {
    if (r.op != op || r.inputs.size() != in.size() || !(r.shape == shape)) return false;
    for (std::size_t i = 0; i < in.size(); ++i)
      if (r.inputs[i].dtype != in[i].impl()->dtype || !(r.inputs[i].shape == in[i].impl()->shape)) return false;
    return true;
  };
  auto hit = std::find_if(recent.begin(), recent.end(), same);
  if (hit == recent.end()) {
    FusedProgram p;
    std::vector<TensorShape> input_shapes;
    for (const Tensor& t : in) {
      p.inputs.push_back(ValueType{t.impl()->dtype, t.impl()->shape});
      input_shapes.push_back(t.impl()->shape);
    }
    FusedStep st;
    st.op = op;
    st.in_dtype = in_dtype;
    st.out_dtype = out[0].impl()->dtype;
    st.num_args = static_cast<int>(in.size());
    for (int a = 0; a < st.num_args; ++a) st.args[a] = a;
    p.steps.push_back(st);
    p.outputs.push_back(static_cast<int>(in.size()));
    p.shape = shape;
    p.plan = build_plan(p, input_shapes, shape);
    constexpr std::size_t kRecent = 16;
    if (recent.size() == kRecent) recent.pop_back();
    OneOpProgram entry{op, p.inputs, shape, fused_attrs(std::make_shared<const FusedProgram>(std::move(p)))};
    recent.insert(recent.begin(), std::move(entry));
    hit = recent.begin();
  } else if (hit != recent.begin()) {
    std::rotate(recent.begin(), hit, hit + 1);
    hit = recent.begin();
  }
  kernel_fused(in, hit->attrs, out);
  return true;
}

void register_fused_ops(OpDef* t) { set_op(t, OpId::FusedElementwise, &infer_fused, &kernel_fused); }

}  // namespace tg::detail
