// fused_elementwise's plan: which ops and dtypes fuse (the micro-op table, baseline loops with
// the AVX-512 ones laid over them), how a program's values are placed in tiles, scalars and
// outputs (build_plan), and the program as a node attribute. fused.cpp runs the plan.
#include "ops/fused_plan.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>

#include "core/check.h"
#include "kernels/simd_math.h"
#include "ops/broadcast.h"

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

}  // namespace

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
  // A tensor step's value goes to its node output, else to a tile buffer taken before its
  // operands' are freed, so that it never aliases them.
  auto place_result = [&](int out_slot) {
    FusedPlan::Slot& slot = plan->slots[static_cast<std::size_t>(out_slot)];
    if (output_of[static_cast<std::size_t>(out_slot)] >= 0) {
      slot.kind = FusedPlan::kOutputStep;
      slot.index = output_of[static_cast<std::size_t>(out_slot)];
    } else {
      slot.kind = FusedPlan::kTileStep;
      slot.index = take_buffer();
    }
  };
  // The tile buffer of a loop's one tensor operand is freed when no step after `last` reads it.
  auto release_operand = [&](int operand, std::size_t last) {
    const FusedPlan::Slot& in = plan->slots[static_cast<std::size_t>(operand)];
    if (in.kind == FusedPlan::kTileStep && last_use[static_cast<std::size_t>(operand)] <= static_cast<int>(last))
      free_buffers.push_back(in.index);
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
    plan->slots[static_cast<std::size_t>(out_slot)].elem_size = static_cast<uint8_t>(elem_size);
    e.out = out_slot;
    place_result(out_slot);
    release_operand(e.args[0], last);
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
    // gelu and gelu_grad of one float32 tensor value, next to each other (the erf form's forward
    // and its gradient's factor, as autodiff leaves them): one loop computes both, sharing their
    // e^(-x^2 / 2), with the bits of the two apart. Both results get their place first, then the
    // operand's buffer is freed if nothing later reads it, so neither output aliases it.
    if (k + 1 < p.steps.size()) {
      const FusedStep& nx = p.steps[k + 1];
      const bool pair = ((st.op == OpId::Gelu && nx.op == OpId::GeluGrad) ||
                         (st.op == OpId::GeluGrad && nx.op == OpId::Gelu)) &&
                        st.num_args == 1 && nx.num_args == 1 && st.args[0] == nx.args[0] &&
                        st.in_dtype == DType::Float32 && st.out_dtype == DType::Float32 &&
                        nx.in_dtype == DType::Float32 && nx.out_dtype == DType::Float32 &&
                        !is_scalar_slot(st.args[0]);
      if (pair) {
        const int gelu_slot = st.op == OpId::Gelu ? out_slot : out_slot + 1;
        const int grad_slot = st.op == OpId::Gelu ? out_slot + 1 : out_slot;
        for (const int s : {gelu_slot, grad_slot}) {
          plan->slots[static_cast<std::size_t>(s)].elem_size = sizeof(float);
          place_result(s);
        }
        const int operand = st.args[0];
        release_operand(operand, k + 1);
        FusedPlan::Exec e;
        e.fn = table.gelu_with_grad;
        e.out = gelu_slot;
        e.args[0] = operand;
        e.args[1] = grad_slot;
        plan->tile_steps.push_back(e);
        ++k;
        continue;
      }
    }
    // A register chain: a run of float32 ops, each reading only the value before it (used by
    // nothing else) and at most one constant, computed without a tile buffer in between. Not over
    // bfloat16: rounding each op's result in the registers costs ~8 integer instructions a
    // register, and such a chain ran the 20-op mul, add, relu chain on 1M values in 6.8 ms
    // against 8.1 ms for the tile loops (float32's chain: 0.8 ms).
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
    place_result(out_slot);
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

namespace {

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

}  // namespace tg::detail
