// tracegraph::dist: data-parallel training over Open MPI, with the collectives as graph ops.
//
// A separate component: find_package(tracegraph COMPONENTS dist) and link tracegraph::dist.
// Launch with mpirun (`mpirun -np 2 ./train`); run without a launcher, the same program is a job
// of one process (size() 1, every collective the identity), so code written for many machines
// runs on one. docs/distributed.md is the guide.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tracegraph/data.h"
#include "tracegraph/gradient.h"
#include "tracegraph/tensor.h"
#include "tracegraph/variable.h"

namespace tg::dist {

struct Options {
  /// How long a collective may wait for the other ranks before it raises
  /// tg::DeadlineExceededError naming the ranks that did not arrive. A rank that died, hangs or
  /// raised an error outside the collectives then never leaves the others waiting forever.
  double collective_timeout_seconds = 300.0;
  /// Threads each rank computes on (tg::config::set_num_threads). 0: the cores the launcher
  /// bound this rank to, or, unbound, the machine's cores divided by the ranks on this machine -
  /// unless TG_NUM_THREADS says otherwise. Ranks that share a machine would otherwise fight over
  /// its cores.
  int threads_per_rank = 0;
};

/// Joins the job: initialises MPI when the process was started by an MPI launcher (mpirun,
/// srun), else makes a job of one. Call it once, before any collective; a second call changes
/// nothing. MPI is finalised at exit, or by finalize().
void init(const Options& options = {});
/// Leaves the job (MPI_Finalize). After a collective failed (a timeout, a lost peer), it ends the
/// whole job instead (MPI_Abort): the other ranks may be stuck in a collective that will never
/// complete. Safe to call twice, or without init.
void finalize();
bool is_initialized();

/// This process's rank (0 to size() - 1) and the number of processes in the job.
int rank();
int size();
/// The rank among the processes on this machine, and how many there are.
int local_rank();
int local_size();

/// How all_reduce combines the ranks' tensors.
enum class ReduceOp { kSum, kMean, kMax, kMin };

/// Collectives: stateful ops that run eagerly and inside tg::function (where they are kept in
/// program order and never merged, folded or removed). Every rank must call the same
/// collectives in the same order with tensors of the same dtype and shape (all_gather: the same
/// shape after axis 0); a rank that does not raises tg::CollectiveMismatchError on every rank.
///
/// The sum (or mean, max, min) of x over the ranks, on every rank. Differentiable for kSum and
/// kMean (the gradient is the same all_reduce of the incoming gradient).
Tensor all_reduce(const Tensor& x, ReduceOp op = ReduceOp::kSum);
/// The same for a list of tensors of one dtype, moved in one collective (a bucket).
std::vector<Tensor> all_reduce(const std::vector<Tensor>& xs, ReduceOp op = ReduceOp::kSum);
/// The root's x, on every rank (x's shape and dtype must match the root's).
Tensor broadcast(const Tensor& x, int root = 0);
/// Every rank's x concatenated along axis 0, in rank order. The ranks may send different numbers
/// of rows; axis 0 is None while tracing.
Tensor all_gather(const Tensor& x);

/// Sets every Variable to the root's value (the start of data-parallel training: every rank
/// then begins from the same weights, whatever its own initialiser drew).
void broadcast_variables(const std::vector<Variable>& variables, int root = 0);

/// How all_reduce_gradients averages.
struct GradientReduceOptions {
  ReduceOp op = ReduceOp::kMean;
  /// Gradients are packed into buckets of at most this many bytes, one collective per bucket
  /// (a gradient larger than a bucket travels alone). 0: one collective per gradient.
  int64_t bucket_bytes = 64 << 20;
};
/// The gradients combined across the ranks (by default their mean), in the same order; an empty
/// Tensor stays empty. Works eagerly and inside a traced train step.
std::vector<Tensor> all_reduce_gradients(const std::vector<Tensor>& gradients,
                                         const GradientReduceOptions& options = {});

/// A GradientTape whose gradient() returns the gradients averaged across the ranks (Horovod's
/// DistributedGradientTape): a data-parallel train step is the single-process one with this
/// tape in place of tg::GradientTape.
class DistributedGradientTape : public GradientTape {
 public:
  explicit DistributedGradientTape(bool persistent = false, GradientReduceOptions options = {})
      : GradientTape(persistent), options_(options) {}

  std::vector<Tensor> gradient(const Tensor& target, std::initializer_list<GradientSource> sources,
                               UnconnectedGradients unconnected = UnconnectedGradients::kZero) {
    return all_reduce_gradients(GradientTape::gradient(target, sources, unconnected), options_);
  }
  std::vector<Tensor> gradient(const Tensor& target, const std::vector<Tensor>& sources,
                               UnconnectedGradients unconnected = UnconnectedGradients::kZero) {
    return all_reduce_gradients(GradientTape::gradient(target, sources, unconnected), options_);
  }
  std::vector<Tensor> gradient(const Tensor& target, const std::vector<Variable>& sources,
                               UnconnectedGradients unconnected = UnconnectedGradients::kZero) {
    return all_reduce_gradients(GradientTape::gradient(target, sources, unconnected), options_);
  }
  template <class S>
    requires(std::same_as<S, Tensor> || std::same_as<S, Variable>)
  Tensor gradient(const Tensor& target, const S& source,
                  UnconnectedGradients unconnected = UnconnectedGradients::kZero) {
    return gradient(target, std::vector<S>{source}, unconnected)[0];
  }

 private:
  GradientReduceOptions options_;
};

/// This rank's shard of a data set: data::shard(data, size(), rank()). Every rank gets the same
/// number of examples, so that every rank runs the same number of steps.
data::LabeledImages shard(const data::LabeledImages& data);
/// This rank's shard of an MNIST-style split (data::load_mnist, then shard).
data::LabeledImages load_mnist_shard(const std::string& dir, const std::string& split);

}  // namespace tg::dist
