// How the fused kernel runs a program (fused_plan.cpp builds it, fused.cpp runs it): each value's
// place - an input, a tile buffer, a scalar, an output - and the micro-op loops over tiles.
// Private to the fused kernel's two files.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "core/thread_pool.h"
#include "ops/fused.h"
#include "ops/fused_micro.h"

namespace tg::detail {

constexpr int64_t kTile = 1024;                   // elements per tile
// The widest dtype's tile, plus 4 cache lines: buffers a multiple of 4 KiB apart make a load
// from one and a store to the other at the same offset alias in the core's store-forwarding
// check, which stalled every step of the 1M relu chain (1.40 ms; 0.97-1.06 ms with the gap).
constexpr int64_t kBufferBytes = kTile * 8 + 256;
constexpr std::size_t kSlotBytes = 8;             // one scalar value
// Element-steps a thread should get before a program is split across the pool: about the work
// of kParallelMinElements elements of one op, as for the unfused elementwise kernels.
constexpr int64_t kParallelWork = kParallelMinElements;

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

/// How the kernel runs `p` when its inputs have `input_shapes` and every step has `shape` (all
/// fully defined). Throws tg::InternalError on a malformed program (a pass bug).
std::shared_ptr<const FusedPlan> build_plan(const FusedProgram& p, const std::vector<TensorShape>& input_shapes,
                                            const TensorShape& shape);

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

}  // namespace tg::detail
