// tg::dist: joining a job, the public collective functions, and the data-parallel helpers.
#include "tracegraph/dist.h"

#include <algorithm>
#include <cstdio>
#include <sched.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "dist/mpi_communicator.h"
#include "ops/collective.h"
#include "tracegraph/config.h"
#include "tracegraph/errors.h"
#include "tracegraph/ops.h"

namespace tg::dist {

namespace {

struct Job {
  std::mutex mu;
  bool initialized = false;
  bool mpi_started_here = false;  // MPI_Init was ours, so MPI_Finalize is too
  std::shared_ptr<detail::MpiCommunicator> comm;
  int local_rank = 0;
  int local_size = 1;
};
Job& job() {
  static Job j;
  return j;
}

// The environment variables that MPI launchers set (Open MPI's mpirun, PMIx and PMI-2 launchers
// such as Slurm's srun, MPICH's hydra). Without one this process is a job of its own, and MPI is
// never started: a singleton MPI_Init would look for a runtime that need not be there.
bool started_by_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"})
    if (std::getenv(name)) return true;
  return false;
}

void finalize_at_exit() { finalize(); }

// A rank's share of the machine: the cores the launcher bound it to (mpirun binds each of up
// to two ranks to a core of its own), else the machine's cores split among its ranks. More
// threads than that would time-share a core, which is slower than one thread.
int default_threads(int local_size) {
  const int machine = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
    const int bound = CPU_COUNT(&allowed);
    if (bound > 0 && bound < machine) return bound;
  }
  return std::max(1, machine / std::max(1, local_size));
}

detail::Reduction reduction_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return detail::Reduction::kSum;
    case ReduceOp::kMean: return detail::Reduction::kMean;
    case ReduceOp::kMax: return detail::Reduction::kMax;
    case ReduceOp::kMin: return detail::Reduction::kMin;
  }
  return detail::Reduction::kSum;
}

detail::CollectiveAttrs attrs_of(ReduceOp op, int root = 0) {
  detail::CollectiveAttrs a;
  a.reduction = static_cast<int64_t>(reduction_of(op));
  a.root = root;
  return a;
}

}  // namespace

void init(const Options& options) {
  if (options.collective_timeout_seconds <= 0)
    throw InvalidArgumentError(detail::str_cat("[tg::dist::init] collective_timeout_seconds must be > 0, got ",
                                               options.collective_timeout_seconds));
  if (options.threads_per_rank < 0)
    throw InvalidArgumentError(detail::str_cat("[tg::dist::init] threads_per_rank must be >= 0 (0: automatic), got ",
                                               options.threads_per_rank));
  Job& j = job();
  std::lock_guard lock(j.mu);
  if (j.initialized) return;
  if (started_by_launcher()) {
    int running = 0;
    MPI_Initialized(&running);
    if (!running) {
      // Collectives are called from one thread at a time (the communicator holds a lock).
      int provided = 0;
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        throw UnavailableError("[tg::dist::init] MPI_Init_thread failed; is the job started by mpirun?");
      j.mpi_started_here = true;
    }
    j.comm = std::make_shared<detail::MpiCommunicator>(options.collective_timeout_seconds);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &j.local_rank);
    MPI_Comm_size(local, &j.local_size);
    MPI_Comm_free(&local);
    detail::set_communicator(j.comm);
  }
  int threads = options.threads_per_rank;
  if (threads == 0 && !std::getenv("TG_NUM_THREADS")) threads = default_threads(j.local_size);
  if (threads > 0) config::set_num_threads(threads);
  j.initialized = true;
  static std::once_flag at_exit;
  std::call_once(at_exit, [] { std::atexit(finalize_at_exit); });
}

void finalize() {
  Job& j = job();
  std::lock_guard lock(j.mu);
  if (!j.initialized) return;
  j.initialized = false;
  detail::set_communicator(nullptr);
  if (j.comm && j.comm->failed()) {
    // A peer may wait forever in the collective that failed here: end the whole job.
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  j.comm.reset();
  if (j.mpi_started_here) MPI_Finalize();
  j.mpi_started_here = false;
  j.local_rank = 0;
  j.local_size = 1;
}

bool is_initialized() {
  std::lock_guard lock(job().mu);
  return job().initialized;
}

int rank() {
  const detail::Communicator* c = detail::communicator();
  return c ? c->rank() : 0;
}
int size() {
  const detail::Communicator* c = detail::communicator();
  return c ? c->size() : 1;
}
int local_rank() { return job().local_rank; }
int local_size() { return job().local_size; }

Tensor all_reduce(const Tensor& x, ReduceOp op) {
  return detail::apply_op1(detail::OpId::AllReduce, {x}, attrs_of(op));
}

std::vector<Tensor> all_reduce(const std::vector<Tensor>& xs, ReduceOp op) {
  return detail::apply_op(detail::OpId::AllReduce, xs, attrs_of(op));
}

Tensor broadcast(const Tensor& x, int root) {
  return detail::apply_op1(detail::OpId::CollectiveBroadcast, {x}, attrs_of(ReduceOp::kSum, root));
}

Tensor all_gather(const Tensor& x) { return detail::apply_op1(detail::OpId::AllGather, {x}, attrs_of(ReduceOp::kSum)); }

void broadcast_variables(const std::vector<Variable>& variables, int root) {
  for (Variable v : variables) v.assign(broadcast(v.read_value(), root));  // a handle: the copy assigns the Variable
}

std::vector<Tensor> all_reduce_gradients(const std::vector<Tensor>& gradients, const GradientReduceOptions& options) {
  if (options.bucket_bytes < 0)
    throw InvalidArgumentError(detail::str_cat("[tg::dist::all_reduce_gradients] bucket_bytes must be >= 0 (0: one "
                                               "collective per gradient), got ", options.bucket_bytes));
  std::vector<Tensor> out = gradients;
  // Buckets fill in order, one dtype each, closing when the next gradient would overflow them: a
  // gradient whose size is not known while tracing travels alone.
  struct Bucket {
    DType dtype;
    int64_t bytes = 0;
    std::vector<std::size_t> members;
  };
  std::vector<Bucket> open;  // at most one per dtype
  auto flush = [&](Bucket& b) {
    if (b.members.empty()) return;
    std::vector<Tensor> xs;
    for (std::size_t i : b.members) xs.push_back(gradients[i]);
    std::vector<Tensor> reduced = all_reduce(xs, options.op);
    for (std::size_t k = 0; k < b.members.size(); ++k) out[b.members[k]] = reduced[k];
    b.members.clear();
    b.bytes = 0;
  };
  for (std::size_t i = 0; i < gradients.size(); ++i) {
    const Tensor& g = gradients[i];
    if (!g.defined()) continue;
    const TensorShape& s = detail::static_shape(g);
    const int64_t bytes = s.is_fully_defined() ? s.num_elements() * static_cast<int64_t>(dtype_size(g.dtype())) : -1;
    if (bytes < 0 || options.bucket_bytes == 0) {
      out[i] = all_reduce(g, options.op);
      continue;
    }
    Bucket* bucket = nullptr;
    for (Bucket& b : open)
      if (b.dtype == g.dtype()) bucket = &b;
    if (!bucket) bucket = &open.emplace_back(Bucket{g.dtype(), 0, {}});
    if (!bucket->members.empty() && bucket->bytes + bytes > options.bucket_bytes) flush(*bucket);
    bucket->members.push_back(i);
    bucket->bytes += bytes;
  }
  for (Bucket& b : open) flush(b);
  return out;
}

data::LabeledImages shard(const data::LabeledImages& data) { return data::shard(data, size(), rank()); }

data::LabeledImages load_mnist_shard(const std::string& dir, const std::string& split) {
  return shard(data::load_mnist(dir, split));
}

}  // namespace tg::dist
