// fused_elementwise: runs a program of elementwise micro-ops over the data once, tile by tile.
// Each micro-op runs over a whole tile (kTile elements, small enough for L1) before the next, so
// its loop vectorises on its own; values with uses outside the node are written straight into
// the node's outputs. Each micro-op applies the functor the unfused kernel applies
// (elementwise_functors.h), so results are bit-identical.
#include "ops/fused.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <type_traits>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "ops/broadcast.h"
#include "ops/eager_steps.h"
#include "kernels/reduce_semantics.h"
#include "ops/fused_micro.h"
#include "kernels/simd_math.h"
#include "core/thread_pool.h"

#define TG_FUSED_NS fused_baseline
#define TG_FUSED_LIBM 1
#define TG_FUSED_CHAIN 0
#include "ops/fused_micro.inc"
#undef TG_FUSED_NS
#undef TG_FUSED_LIBM
#undef TG_FUSED_CHAIN

namespace tg::detail {

// ---- the plan ----

namespace {

constexpr int64_t kTile = 1024;                   // elements per tile
// The widest dtype's tile, plus 4 cache lines: buffers a multiple of 4 KiB apart make a load
// from one and a store to the other at the same offset alias in the core's store-forwarding
// check, which stalled every step of the 1M relu chain (1.40 ms; 0.97-1.06 ms with the gap).
constexpr int64_t kBufferBytes = kTile * 8 + 256;
constexpr std::size_t kSlotBytes = 8;             // one scalar value
// Element-steps a thread should get before a program is split across the pool: about the work
// of kParallelMinElements elements of one op, as for the unfused elementwise kernels.
constexpr int64_t kParallelWork = kParallelMinElements;
const MicroTable& micro_table() {
  static const MicroTable table = [] {
    MicroTable t;
    fused_baseline::fill_micro_table(t);
    if (simd::cpu_has_avx512_bw_vl()) {
      // Overlay the AVX-512 loops of the plain-arithmetic ops; libm ones stay baseline.
      MicroTable fast;
      fused_avx512::fill_micro_table(fast);
      for (std::size_t op = 0; op < kNumOps; ++op)
        for (std::size_t d = 0; d < kNumDTypes; ++d)
          if (fast.ops[op][d].fn[0]) t.ops[op][d] = fast.ops[op][d];
      for (std::size_t a = 0; a < kNumDTypes; ++a)
        for (std::size_t b = 0; b < kNumDTypes; ++b)
          if (fast.cast[a][b]) t.cast[a][b] = fast.cast[a][b];
      for (std::size_t a = 0; a < 2; ++a)
        for (std::size_t b = 0; b < 2; ++b) t.affine[a][b] = fast.affine[a][b];
      t.chain_f32 = fast.chain_f32;
    }
    return t;
  }();
  return table;
}

const MicroSet* find_micro(OpId op, DType in) {
  if (in == DType::String) return nullptr;
  const MicroSet& s = micro_table().ops[static_cast<std::size_t>(op)][static_cast<std::size_t>(in)];
  return s.fn[0] ? &s : nullptr;
}

}  // namespace

bool chainable_op(OpId op) { return fused_baseline::chain_arithmetic(op) || fused_baseline::vec_f32_of(op); }

struct FusedPlan {
  enum Kind : uint8_t { kScalar, kFullInput, kBcastInput, kTileStep, kOutputStep };
  // One per value of the program: 12 bytes, since a traced chain of 100k ops has 100k of them
  // and the plan is built in fresh memory (the strides of the few broadcast inputs live in
  // bcast_strides).
  struct Slot {
    Kind kind = kScalar;
    uint8_t elem_size = 0;
    int index = -1;       // input index (inputs), buffer (tile steps, bcast inputs), output index
    int scalar = -1;      // scalar steps: the slot in scalar storage
  };
  struct Exec {
    MicroFn fn = nullptr;
    int out = -1;           // slot (or splat pseudo-slot) written
    int args[3] = {-1, -1, -1};
    const void* extra = nullptr;  // passed as the second operand (a register chain's ops)
  };
  CachedVector<Slot> slots;
  std::vector<Exec> scalar_steps;
  std::vector<Exec> tile_steps;
  std::vector<std::pair<int, int>> splats;  // (scalar slot, buffer): a scalar spread over a tile
  std::vector<std::pair<int, int>> scalar_outputs;  // (slot, output index)
  int reduce_ptr = -1;  // where the reduced value's tile lies (a slot or a splat pseudo-slot)
  int num_buffers = 0;
  int num_scalars = 0;
  int64_t total = 0;
  std::vector<int64_t> dims;    // the shape every step has
  // Broadcast input b (its Slot::index; they take buffers 0, 1, ... first): its stride per dim
  // of `dims`, 0 where it repeats, at b * dims.size().
  std::vector<int64_t> bcast_strides;
  int64_t reduce_row = 1;       // elements folded into each reduced result
  int64_t reduce_outputs = 0;   // reduced results
  // Derived from `slots` once, so that a run touches only the slots it must point somewhere
  // (a 100-op program has ~100 slots, most of them elided or reusing a handful of buffers).
  std::vector<int> buffer_slots;  // kTileStep / kBcastInput slots with a buffer
  std::vector<int> scalar_slots;  // kScalar slots
  std::vector<int> tile_inputs;   // kFullInput / kBcastInput slots, re-pointed per tile
  std::vector<int> tile_outputs;  // kOutputStep slots, re-pointed per tile
  int64_t grain = 0;              // elements per thread worth a wake-up (see kParallelWork)
  std::vector<std::unique_ptr<RegisterChain>> chains;  // what chain steps' `extra` points at
};

DType FusedProgram::slot_dtype(int slot) const {
  const auto s = static_cast<std::size_t>(slot);
  if (s < inputs.size()) return inputs[s].dtype;
  if (s < inputs.size() + immediates.size()) return immediates[s - inputs.size()].dtype();
  return steps[s - inputs.size() - immediates.size()].out_dtype;
}

bool fusable_reduce(OpId op, DType dtype) {
  const bool op_ok = op == OpId::ReduceSum || op == OpId::ReduceMean || op == OpId::ReduceMax || op == OpId::ReduceMin;
  return op_ok && (dtype == DType::Float32 || dtype == DType::Float64 || dtype == DType::Int32 || dtype == DType::Int64);
}

bool fusable_op(OpId op, DType in_dtype, DType out_dtype) {
  if (in_dtype == DType::String || out_dtype == DType::String) return false;
  if (op == OpId::Cast)
    return micro_table().cast[static_cast<std::size_t>(in_dtype)][static_cast<std::size_t>(out_dtype)] != nullptr;
  const MicroSet* s = find_micro(op, in_dtype);
  return s && s->out == out_dtype;
}

namespace {

// A Mul by a constant followed by an Add of a constant (its second operand), and a Relu after
// that, become one op of the chain (ChainOp::then): a third of the dispatches for the x * m + c,
// relu chains. The Add must take the constant second, as the merged op applies it.
void merge_multiply_adds(CachedVector<ChainOp>& ops) {
  std::size_t kept = 0;
  for (std::size_t r = 0; r < ops.size(); ++kept) {
    ChainOp c = ops[r++];
    if (c.op == OpId::Mul && r < ops.size() && ops[r].op == OpId::Add && ops[r].constant_side == 1) {
      c.added = ops[r++].constant;
      c.then = ChainOp::kAdd;
      if (r < ops.size() && ops[r].op == OpId::Relu) {
        c.then = ChainOp::kAddRelu;
        ++r;
      }
    }
    ops[kept] = c;
  }
  ops.resize(kept);
}

// How the kernel runs `p` when its inputs have `input_shapes` and every step has `shape` (all
// fully defined). Throws tg::InternalError on a malformed program (a pass bug).
std::shared_ptr<const FusedPlan> build_plan(const FusedProgram& p, const std::vector<TensorShape>& input_shapes,
                                            const TensorShape& shape) {
  TG_CHECK(shape.is_fully_defined() && input_shapes.size() == p.inputs.size(), "fused plan over ", shape.to_string());
  auto plan = std::make_shared<FusedPlan>();
  plan->total = shape.num_elements();
  plan->dims = shape.dims();
  const int first_step = p.first_step_slot();
  const int num_slots = first_step + static_cast<int>(p.steps.size());
  plan->slots.resize(static_cast<std::size_t>(num_slots));
  const std::vector<int64_t>& dims = plan->dims;
  int next_buffer = 0;
  for (std::size_t i = 0; i < p.inputs.size(); ++i) {
    const TensorShape& s = input_shapes[i];
    TG_CHECK(s.is_fully_defined() && s.rank() <= shape.rank(), "fused input ", i, " has shape ", s.to_string());
    FusedPlan::Slot& slot = plan->slots[i];
    slot.index = static_cast<int>(i);
    slot.elem_size = static_cast<uint8_t>(dtype_size(p.inputs[i].dtype));
    if (s.num_elements() == 1) {
      slot.kind = FusedPlan::kScalar;
    } else if (s.num_elements() == plan->total) {
      slot.kind = FusedPlan::kFullInput;
    } else {
      slot.kind = FusedPlan::kBcastInput;
      slot.index = next_buffer++;
      plan->bcast_strides.resize(plan->bcast_strides.size() + dims.size(), 0);
      int64_t* strides = plan->bcast_strides.data() + static_cast<std::size_t>(slot.index) * dims.size();
      int64_t stride = 1;
      for (std::size_t k = 0; k < s.dims().size(); ++k) {
        const int64_t d = s.dims()[s.dims().size() - 1 - k];
        const std::size_t od = dims.size() - 1 - k;
        TG_CHECK(d == 1 || d == dims[od], "fused input ", i, " does not broadcast to the program's shape");
        strides[od] = d == 1 ? 0 : stride;
        stride = mul_saturating(stride, d);  // an empty program's shape may be (0, 2^40, 2^40)
      }
    }
    slot.index = slot.kind == FusedPlan::kBcastInput ? slot.index : static_cast<int>(i);
  }
  for (std::size_t i = 0; i < p.immediates.size(); ++i) {
    TG_CHECK(p.immediates[i].num_elements() == 1 && p.immediates[i].dtype() != DType::String);
    FusedPlan::Slot& slot = plan->slots[p.inputs.size() + i];
    slot.kind = FusedPlan::kScalar;
    slot.elem_size = static_cast<uint8_t>(dtype_size(p.immediates[i].dtype()));
  }
  CachedVector<int> output_of(static_cast<std::size_t>(num_slots), -1);
  for (std::size_t k = 0; k < p.outputs.size(); ++k) {
    const int s = p.outputs[k];
    TG_CHECK(s >= first_step && s < num_slots && output_of[static_cast<std::size_t>(s)] < 0, "bad fused output slot ", s);
    output_of[static_cast<std::size_t>(s)] = static_cast<int>(k);
  }
  // Last tile step reading each slot, for buffer reuse.
  CachedVector<int> last_use(static_cast<std::size_t>(num_slots), -1);
  for (std::size_t k = 0; k < p.steps.size(); ++k) {
    const FusedStep& st = p.steps[k];
    TG_CHECK(st.num_args >= 1 && st.num_args <= 3);
    for (int a = 0; a < st.num_args; ++a) {
      TG_CHECK(st.args[a] >= 0 && st.args[a] < first_step + static_cast<int>(k), "fused step reads a later slot");
      last_use[static_cast<std::size_t>(st.args[a])] = static_cast<int>(k);
    }
  }
  std::vector<int> free_buffers;
  auto take_buffer = [&] {
    if (free_buffers.empty()) return next_buffer++;
    const int b = free_buffers.back();
    free_buffers.pop_back();
    return b;
  };
  const MicroTable& table = micro_table();
  CachedVector<int> use_count(static_cast<std::size_t>(num_slots), 0);
  for (const FusedStep& st : p.steps)
    for (int a = 0; a < st.num_args; ++a) ++use_count[static_cast<std::size_t>(st.args[a])];
  auto is_scalar_slot = [&](int s) { return plan->slots[static_cast<std::size_t>(s)].kind == FusedPlan::kScalar; };
  // A step's value that only the next step reads (so it need not exist on its own).
  auto internal_to_next = [&](std::size_t k) {
    const int s = first_step + static_cast<int>(k);
    return k + 1 < p.steps.size() && use_count[static_cast<std::size_t>(s)] == 1 &&
           output_of[static_cast<std::size_t>(s)] < 0 && p.steps[k + 1].args[0] == s;
  };
  // Steps [k, k + len) run as one loop `e` (a register chain, an affine peephole) reading the
  // tensor operand e.args[0]: the steps before the last are never materialised, the last one's
  // value goes to a node output or a fresh tile buffer, and the operand's buffer is freed when
  // no later step reads it. Returns the last step's index.
  auto emit_run = [&](std::size_t k, std::size_t len, std::size_t elem_size, FusedPlan::Exec e) {
    for (std::size_t j = k; j + 1 < k + len; ++j) {
      FusedPlan::Slot& elided = plan->slots[static_cast<std::size_t>(first_step) + j];
      elided.kind = FusedPlan::kTileStep;  // never materialised: only the run's loop reads it
      elided.elem_size = static_cast<uint8_t>(elem_size);
    }
    const std::size_t last = k + len - 1;
    const int out_slot = first_step + static_cast<int>(last);
    FusedPlan::Slot& slot = plan->slots[static_cast<std::size_t>(out_slot)];
    slot.elem_size = static_cast<uint8_t>(elem_size);
    e.out = out_slot;
    if (output_of[static_cast<std::size_t>(out_slot)] >= 0) {
      slot.kind = FusedPlan::kOutputStep;
      slot.index = output_of[static_cast<std::size_t>(out_slot)];
    } else {
      slot.kind = FusedPlan::kTileStep;
      slot.index = take_buffer();  // before freeing the operand's: out never aliases it
    }
    const int operand = e.args[0];
    const FusedPlan::Slot& in = plan->slots[static_cast<std::size_t>(operand)];
    if (in.kind == FusedPlan::kTileStep && last_use[static_cast<std::size_t>(operand)] <= static_cast<int>(last))
      free_buffers.push_back(in.index);
    plan->tile_steps.push_back(e);
    return last;
  };
  const int first_imm = static_cast<int>(p.inputs.size());
  // Step j as an op of a register chain whose value so far is slot `prev` (-1: step j would
  // start the chain, reading any slot that is not a scalar). The other operand, if any, must be a
  // float32 immediate: its value is baked into the chain.
  auto chain_op = [&](std::size_t j, int prev, ChainOp& op) {
    const FusedStep& st = p.steps[j];
    if (st.in_dtype != DType::Float32 || st.out_dtype != DType::Float32 || !chainable_op(st.op)) return -1;
    auto is_value = [&](int s) { return prev >= 0 ? s == prev : !is_scalar_slot(s); };
    auto is_constant = [&](int s) {
      return s >= first_imm && s < first_step && p.immediates[static_cast<std::size_t>(s - first_imm)].dtype() == DType::Float32;
    };
    op.op = st.op;
    op.routine = fused_baseline::vec_f32_of(st.op);
    if (st.num_args == 1 && !fused_baseline::chain_arithmetic(st.op)) return is_value(st.args[0]) ? st.args[0] : -1;
    if (st.num_args == 1) return (st.op == OpId::Neg || st.op == OpId::Relu || st.op == OpId::Square) && is_value(st.args[0]) ? st.args[0] : -1;
    if (st.num_args != 2 || st.op == OpId::Neg || st.op == OpId::Relu || st.op == OpId::Square) return -1;
    for (int side = 0; side < 2; ++side) {
      if (!is_constant(st.args[side]) || !is_value(st.args[1 - side])) continue;
      op.constant_side = static_cast<int8_t>(side);
      op.constant = *data_of<float>(p.immediates[static_cast<std::size_t>(st.args[side] - first_imm)]);
      return st.args[1 - side];
    }
    return -1;
  };
  for (std::size_t k = 0; k < p.steps.size(); ++k) {
    const FusedStep& st = p.steps[k];
    int out_slot = first_step + static_cast<int>(k);
    // A register chain: a run of float32 ops, each reading only the value before it (used by
    // nothing else) and at most one constant, computed without a tile buffer in between.
    if (table.chain_f32) {
      // Measured first, then filled at its exact size: a traced chain can be 100k ops long.
      ChainOp op;
      const int chain_in = chain_op(k, -1, op);
      std::size_t len = 0;
      if (chain_in >= 0) {
        len = 1;
        for (;;) {
          const int value = first_step + static_cast<int>(k + len - 1);
          if (k + len >= p.steps.size() || use_count[static_cast<std::size_t>(value)] != 1 ||
              output_of[static_cast<std::size_t>(value)] >= 0 || chain_op(k + len, value, op) != value)
            break;
          ++len;
        }
      }
      if (len >= 2) {
        auto chain = std::make_unique<RegisterChain>();
        chain->ops.resize(len);
        chain_op(k, -1, chain->ops[0]);
        for (std::size_t j = 1; j < len; ++j) chain_op(k + j, first_step + static_cast<int>(k + j - 1), chain->ops[j]);
        merge_multiply_adds(chain->ops);
        FusedPlan::Exec e;
        e.fn = table.chain_f32;
        e.args[0] = chain_in;
        e.extra = chain.get();
        plan->chains.push_back(std::move(chain));
        k = emit_run(k, len, sizeof(float), e);
        continue;
      }
    }
    // Peephole: x * m + c (+ relu), with m and c scalars, in one loop (the 100-op chains).
    std::size_t fused_len = 0;
    MicroFn affine = nullptr;
    int affine_args[3] = {-1, -1, -1};
    if (st.op == OpId::Mul && (st.in_dtype == DType::Float32 || st.in_dtype == DType::Float64) &&
        internal_to_next(k) && p.steps[k + 1].op == OpId::Add && p.steps[k + 1].num_args == 2 &&
        is_scalar_slot(p.steps[k + 1].args[1]) && is_scalar_slot(st.args[0]) != is_scalar_slot(st.args[1])) {
      const int x = is_scalar_slot(st.args[0]) ? st.args[1] : st.args[0];
      const int m = is_scalar_slot(st.args[0]) ? st.args[0] : st.args[1];
      const bool relu = internal_to_next(k + 1) && p.steps[k + 2].op == OpId::Relu;
      fused_len = relu ? 3 : 2;
      affine = table.affine[st.in_dtype == DType::Float32 ? 0 : 1][relu ? 1 : 0];
      affine_args[0] = x;
      affine_args[1] = m;
      affine_args[2] = p.steps[k + 1].args[1];
    }
    if (fused_len) {
      FusedPlan::Exec e;
      e.fn = affine;
      for (int a = 0; a < 3; ++a) e.args[a] = affine_args[a];
      k = emit_run(k, fused_len, dtype_size(st.in_dtype), e);
      continue;
    }
    for (int a = 0; a < st.num_args; ++a) {
      const DType want = (st.op == OpId::Where && a == 0) ? DType::Bool : st.in_dtype;
      TG_CHECK(p.slot_dtype(st.args[a]) == want, "fused step ", k, " operand dtype");
    }
    TG_CHECK(fusable_op(st.op, st.in_dtype, st.out_dtype), "no fused loop for ", op_def(st.op).name);
    const MicroSet* set = st.op == OpId::Cast ? nullptr : find_micro(st.op, st.in_dtype);
    const MicroFn vv = st.op == OpId::Cast
                           ? table.cast[static_cast<std::size_t>(st.in_dtype)][static_cast<std::size_t>(st.out_dtype)]
                           : set->fn[0];
    FusedPlan::Slot& slot = plan->slots[static_cast<std::size_t>(out_slot)];
    slot.elem_size = static_cast<uint8_t>(dtype_size(st.out_dtype));
    bool all_scalar = true;
    for (int a = 0; a < st.num_args; ++a)
      all_scalar &= plan->slots[static_cast<std::size_t>(st.args[a])].kind == FusedPlan::kScalar;
    FusedPlan::Exec e;
    e.out = out_slot;
    for (int a = 0; a < st.num_args; ++a) e.args[a] = st.args[a];
    if (all_scalar) {
      slot.kind = FusedPlan::kScalar;
      slot.scalar = plan->num_scalars++;
      e.fn = vv;
      plan->scalar_steps.push_back(e);
      if (output_of[static_cast<std::size_t>(out_slot)] >= 0)
        plan->scalar_outputs.emplace_back(out_slot, output_of[static_cast<std::size_t>(out_slot)]);
      continue;
    }
    const bool a_scalar = plan->slots[static_cast<std::size_t>(st.args[0])].kind == FusedPlan::kScalar;
    const bool b_scalar = st.num_args > 1 && plan->slots[static_cast<std::size_t>(st.args[1])].kind == FusedPlan::kScalar;
    if (st.num_args == 2 && (a_scalar || b_scalar)) {
      e.fn = set->fn[a_scalar ? 1 : 2];
    } else {
      e.fn = vv;
      // Scalars that a loop reads as vectors (where's operands) are spread over a buffer once.
      for (int a = 0; a < st.num_args; ++a) {
        if (plan->slots[static_cast<std::size_t>(st.args[a])].kind != FusedPlan::kScalar) continue;
        const int b = next_buffer++;
        plan->splats.emplace_back(st.args[a], b);
        e.args[a] = num_slots + static_cast<int>(plan->splats.size()) - 1;
      }
    }
    if (output_of[static_cast<std::size_t>(out_slot)] >= 0) {
      slot.kind = FusedPlan::kOutputStep;
      slot.index = output_of[static_cast<std::size_t>(out_slot)];
    } else {
      slot.kind = FusedPlan::kTileStep;
      slot.index = take_buffer();  // before freeing the operands': out never aliases them
    }
    for (int a = 0; a < st.num_args; ++a) {
      const int s = st.args[a];
      const FusedPlan::Slot& in = plan->slots[static_cast<std::size_t>(s)];
      const bool dup = std::find(st.args, st.args + a, s) != st.args + a;
      if (in.kind == FusedPlan::kTileStep && last_use[static_cast<std::size_t>(s)] == static_cast<int>(k) && !dup)
        free_buffers.push_back(in.index);
    }
    plan->tile_steps.push_back(e);
  }
  if (p.has_reduce()) {
    const FusedReduce& r = p.reduce;
    TG_CHECK(r.slot >= first_step && r.slot < num_slots && output_of[static_cast<std::size_t>(r.slot)] < 0 &&
                 use_count[static_cast<std::size_t>(r.slot)] == 0,
             "fused reduction of slot ", r.slot, " that other steps or outputs use");
    TG_CHECK(fusable_reduce(r.op, p.slot_dtype(r.slot)), "no fused reduction ", op_def(r.op).name);
    const bool over_all = r.over_all || dims.size() <= 1;
    plan->reduce_row = over_all ? plan->total : dims.back();
    plan->reduce_outputs = 1;
    if (!over_all)
      for (std::size_t d = 0; d + 1 < dims.size(); ++d) plan->reduce_outputs = mul_saturating(plan->reduce_outputs, dims[d]);
    TG_CHECK(!r.shape.is_fully_defined() || r.shape.num_elements() == plan->reduce_outputs, "fused reduction of ",
             shape.to_string(), " into ", r.shape.to_string());
    const FusedPlan::Slot& slot = plan->slots[static_cast<std::size_t>(r.slot)];
    if (slot.kind == FusedPlan::kScalar) {
      // A value that is the same everywhere still reduces element by element (sums count it).
      plan->splats.emplace_back(r.slot, next_buffer++);
      plan->reduce_ptr = num_slots + static_cast<int>(plan->splats.size()) - 1;
    } else {
      TG_CHECK(slot.kind == FusedPlan::kTileStep && slot.index >= 0, "fused reduction of an unmaterialised slot");
      plan->reduce_ptr = r.slot;
    }
  }
  plan->num_buffers = next_buffer;
  for (int s = 0; s < num_slots; ++s) {
    const FusedPlan::Slot& slot = plan->slots[static_cast<std::size_t>(s)];
    switch (slot.kind) {
      case FusedPlan::kScalar: plan->scalar_slots.push_back(s); break;
      case FusedPlan::kFullInput: plan->tile_inputs.push_back(s); break;
      case FusedPlan::kBcastInput:
        plan->tile_inputs.push_back(s);
        plan->buffer_slots.push_back(s);
        break;
      case FusedPlan::kTileStep:
        if (slot.index >= 0) plan->buffer_slots.push_back(s);  // elided peephole values have none
        break;
      case FusedPlan::kOutputStep: plan->tile_outputs.push_back(s); break;
    }
  }
  // Splitting pays when a thread's share of the work outweighs waking it: per element, each
  // tile step costs about one vector operation.
  const int64_t work_per_element = std::max<int64_t>(1, static_cast<int64_t>(plan->tile_steps.size()));
  plan->grain = std::max<int64_t>(kTile, kParallelWork / work_per_element);
  return plan;
}

// `s` with each None dim replaced by the matching dim of `like` (right-aligned) if that is
// known, else by 2: a stand-in run-time shape to check a program over None dims against.
TensorShape stand_in(const TensorShape& s, const TensorShape& like) {
  std::vector<int64_t> dims = s.dims();
  for (std::size_t k = 0; k < dims.size(); ++k) {
    if (dims[dims.size() - 1 - k] >= 0) continue;
    const int64_t other = k < like.dims().size() ? like.dims()[like.dims().size() - 1 - k] : -1;
    dims[dims.size() - 1 - k] = other >= 0 ? other : 2;
  }
  return TensorShape(dims);
}

}  // namespace

std::shared_ptr<const FusedProgram> make_fused_program(FusedProgram p) {
  TG_CHECK(p.shape.has_rank() && p.shape.rank() <= 16, "fused program over ", p.shape.to_string());
  for (const ValueType& in : p.inputs) TG_CHECK(in.shape.has_rank(), "fused input of unknown rank");
  const TensorShape shape = stand_in(p.shape, p.shape);
  std::vector<TensorShape> input_shapes;
  for (const ValueType& in : p.inputs) input_shapes.push_back(stand_in(in.shape, shape));
  std::shared_ptr<const FusedPlan> plan = build_plan(p, input_shapes, shape);  // checks the program
  if (p.shape.is_fully_defined()) p.plan = std::move(plan);
  else p.dynamic = std::make_shared<DynamicPlans>();
  return std::make_shared<const FusedProgram>(std::move(p));
}


const FusedProgram& fused_program(const OpAttrs& attrs) {
  const auto& fused = attrs.get<FusedAttrs>();
  TG_CHECK(fused.program, "fused_elementwise without a program");
  return *fused.program;
}

OpAttrs fused_attrs(std::shared_ptr<const FusedProgram> program) {
  return FusedAttrs{std::move(program)};
}

std::vector<OpId> fused_ops(const OpAttrs& attrs) {
  std::vector<OpId> ops;
  for (const FusedStep& s : fused_program(attrs).steps) ops.push_back(s.op);
  return ops;
}

std::string fused_summary(const OpAttrs& attrs, std::size_t max_ops) {
  const auto& steps = fused_program(attrs).steps;
  std::string s;
  for (std::size_t i = 0; i < steps.size() && i < max_ops; ++i) {
    if (i) s += ',';
    s += op_def(steps[i].op).name;
  }
  if (steps.size() > max_ops) {
    s += ",...(";
    s += std::to_string(steps.size());
    s += " ops)";
  }
  const FusedProgram& p = fused_program(attrs);
  if (p.has_reduce()) {
    s += "->";
    s += op_def(p.reduce.op).name;
    s += p.reduce.over_all && p.shape.rank() != 1 ? "(all)" : "(last)";
  }
  return s;
}

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

// ---- programs over None dims

// The plans of one program over None dims, by the run-time shapes of its inputs. A training
// loop meets a couple of batch sizes (the full one and the last), so a short list, most
// recent first, is searched by comparison before anything is built.
struct DynamicPlans {
  struct Entry {
    std::vector<int64_t> key;               // each input's rank, then its dims
    std::shared_ptr<const FusedPlan> plan;  // null: the steps' shapes differ, run step by step
    std::vector<ValueType> outputs;         // the node's output types at these shapes
  };
  static constexpr std::size_t kMaxEntries = 8;
  std::mutex mutex;
  std::vector<std::shared_ptr<const Entry>> entries;
};

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

}  // namespace

void register_fused_ops(OpDef* t) { set_op(t, OpId::FusedElementwise, &infer_fused, &kernel_fused); }

}  // namespace tg::detail
