// The collectives' link to a communicator. The op layer owns the collective ops (their shape
// rules, kernels and gradients live in the registry like every other op, so graphs hold them,
// export them and run them anywhere); how the bytes travel between processes is a Communicator,
// which tg::dist (src/dist, over MPI) installs. With none installed the job is one process and
// every collective is the identity.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_context.h"
#include "ops/op.h"
#include "tracegraph/dtype.h"

namespace tg::detail {

/// How all_reduce combines the ranks' values (CollectiveAttrs::reduction).
enum class Reduction : int64_t { kSum = 0, kMean = 1, kMax = 2, kMin = 3 };
/// "sum", "mean", "max", "min".
const char* reduction_name(Reduction r);

/// One collective as every rank must agree on it. A communicator compares `key()` across the
/// ranks before any data moves, so that ranks at different collectives get an error instead of
/// a hang or a sum of unrelated tensors; `describe()` is what the error shows of each rank.
struct CollectiveCall {
  const char* op = "";             // the registry name: "all_reduce", ...
  Reduction reduction = Reduction::kSum;
  int64_t root = 0;
  DType dtype = DType::Float32;
  int64_t count = 0;               // elements this rank sends
  /// Elements that must be equal on every rank: `count`, except for all_gather (the elements of
  /// one row, since each rank may send another number of rows).
  int64_t agreed_count = 0;
  int tensors = 1;                 // how many tensors all_reduce packed into this one collective
  /// The shapes that must be equal on every rank: "(2, 3)", a bucket's "[(2,), (3,)]", or for
  /// all_gather the rows' shape "(None, 3)". Equal counts are not enough: (2, 3) summed with
  /// (3, 2) pairs unrelated elements.
  std::string shapes;
  /// Where this collective stands in its rank's sequence, equal on every rank of a job in step
  /// (CollectivePosition): "eager collective #4", or "collective #1 of call #7 of function
  /// 'train_step'".
  std::string position;
  const std::string* function = nullptr;  // the traced function it runs in; null when eager

  /// A hash of everything above but `count`: equal on every rank of a job in step.
  uint64_t key() const;
  /// "all_reduce(sum) of 2 float32 tensors [(2,), (3,)] (5 elements) in function 'train_step'
  /// (collective #1 of call #7 of function 'train_step')".
  std::string describe() const;
};

/// Moves the bytes of the collectives between the processes of a job. Every method is
/// collective: each rank calls it, in the same order, with calls that agree (CollectiveCall).
/// Failures are typed tg:: errors: CollectiveMismatchError when the ranks disagree,
/// DeadlineExceededError when a peer does not arrive in time, UnavailableError when the
/// transport fails.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Combines call.count elements at `data` across the ranks, in place. kMean sums (the kernel
  /// divides), kMax / kMin take the extreme.
  virtual void all_reduce(void* data, const CollectiveCall& call) = 0;
  /// Sets call.count elements at `data` to the root's.
  virtual void broadcast(void* data, const CollectiveCall& call) = 0;
  /// Sums call.count elements at `data` into the root's `data`; the others' `data` is left as
  /// it was.
  virtual void reduce_to_root(void* data, const CollectiveCall& call) = 0;
  /// Every rank's call.count, in rank order.
  virtual std::vector<int64_t> all_gather_counts(const CollectiveCall& call) = 0;
  /// Each rank's call.count elements from `send`, concatenated in rank order into `recv`
  /// (`counts` as all_gather_counts returned them).
  virtual void all_gather(const void* send, void* recv, const std::vector<int64_t>& counts,
                          const CollectiveCall& call) = 0;
  /// Called on the first run of each concrete function that holds collectives: `sequence` lists
  /// them as traced, one per line, and `signature` is the trace's input signature (for the
  /// message only). Raises CollectiveMismatchError on every rank when the ranks' functions or
  /// sequences differ, naming the function and the first difference.
  virtual void check_traced_collectives(const std::string& function, const std::string& signature,
                                        const std::string& sequence) = 0;
};

/// The communicator of this process's job; null in a single process.
Communicator* communicator();
/// Installs (or, with null, removes) the communicator. tg::dist calls it from init and
/// finalize, while no collective runs.
void set_communicator(std::shared_ptr<Communicator> c);

/// The run of a traced function that holds collectives, on this thread: what a collective's
/// errors name, and its position in the rank's sequence. Set for the run of a concrete function
/// (src/trace).
///
/// Positions: each run of a function with collectives is call #n of that function on this rank
/// (counted when the run starts, so a run that raises before its collectives still uses its
/// number), and its collectives are #1, #2, ... of that call. A rank whose step raised before
/// its all_reduce and that moved on to the next batch is then at another call than its peers,
/// and the next collective is a CollectiveMismatchError on every rank instead of averaging two
/// steps' gradients. Collectives run eagerly are numbered in the order this process calls them.
class CollectiveFunctionScope {
 public:
  /// `function` null, or the function already running on this thread: nothing changes.
  explicit CollectiveFunctionScope(const std::string* function);

  struct Run {
    const std::string* function = nullptr;
    uint64_t call = 0;         // this run is call #call of `function` on this rank
    uint64_t collectives = 0;  // the collectives this run has started
  };

 private:
  ScopedThreadValue<Run> run_;
};
/// The function of the innermost CollectiveFunctionScope on this thread; null when none.
const std::string* current_collective_function();
/// The position of the collective starting now on this thread (CollectiveFunctionScope), and
/// a step of the sequence it counts.
std::string next_collective_position();

/// Whether an op is one of the collectives (what a traced function's sequence lists).
bool is_collective(OpId id);

}  // namespace tg::detail
