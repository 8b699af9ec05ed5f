// The collective ops: all_reduce (of a list: a bucket is one collective), collective_broadcast,
// all_gather, and the two that are only gradients, reduce_to_root and all_gather_grad. Their
// kernels hand the bytes to the installed Communicator (tg::dist's MPI one), or are the
// identity in a single process. Shape and dtype errors are raised here, on every rank alike,
// before anything travels.
#include "ops/collective.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "ops/broadcast.h"
#include "ops/op.h"

namespace tg::detail {

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::kSum: return "sum";
    case Reduction::kMean: return "mean";
    case Reduction::kMax: return "max";
    case Reduction::kMin: return "min";
  }
  return "?";
}

namespace {
// FNV-1a: a key that is the same in every process and on every machine (std::hash promises
// neither).
void fnv_mix(uint64_t& h, const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
}
template <class T> void fnv_mix_value(uint64_t& h, T v) { fnv_mix(h, &v, sizeof v); }
}  // namespace

uint64_t CollectiveCall::key() const {
  uint64_t h = 14695981039346656037ull;
  fnv_mix(h, op, std::strlen(op));
  fnv_mix_value(h, static_cast<int64_t>(reduction));
  fnv_mix_value(h, root);
  fnv_mix_value(h, static_cast<int64_t>(dtype));
  fnv_mix_value(h, agreed_count);
  fnv_mix_value(h, static_cast<int64_t>(tensors));
  fnv_mix(h, shapes.data(), shapes.size());
  fnv_mix_value(h, shapes.size());
  fnv_mix(h, position.data(), position.size());
  fnv_mix_value(h, position.size());
  if (function) fnv_mix(h, function->data(), function->size());
  return h;
}

std::string CollectiveCall::describe() const {
  const std::string_view name = op;
  std::string s = op;
  if (name == "all_reduce") s += str_cat("(", reduction_name(reduction), ")");
  if (name == "collective_broadcast") s += str_cat(" from rank ", root);
  if (name == "reduce_to_root") s += str_cat(" to rank ", root);
  s += " of ";
  if (tensors > 1) s += str_cat(tensors, " ");
  s += to_string(dtype);
  s += tensors > 1 ? " tensors " : " ";
  s += shapes;
  if (name == "all_gather" || name == "all_gather_grad")
    s += str_cat(" (rows of ", agreed_count, " elements; ", count, " rows here)");
  else
    s += str_cat(" (", count, " elements)");
  s += function ? str_cat(" in function '", *function, "'") : std::string(" run eagerly");
  if (!position.empty()) s += str_cat(" [", position, "]");
  return s;
}

namespace {
std::shared_ptr<Communicator> g_communicator_owner;
std::atomic<Communicator*> g_communicator{nullptr};
// The run of the innermost CollectiveFunctionScope on this thread.
thread_local CollectiveFunctionScope::Run t_collective_run;

// The sequence positions (CollectiveFunctionScope): how many runs of each function with
// collectives this process started, and how many collectives it ran eagerly. Both restart with
// each communicator, so that every rank of a new job counts from the same zero.
struct Positions {
  std::mutex mu;
  std::unordered_map<std::string, uint64_t> calls;
  uint64_t eager = 0;
};
// Never destroyed: tg::dist's atexit finalize resets it after static destructors may have run.
Positions& positions() {
  static Positions* p = new Positions;
  return *p;
}
}  // namespace

Communicator* communicator() { return g_communicator.load(std::memory_order_acquire); }

void set_communicator(std::shared_ptr<Communicator> c) {
  {
    Positions& p = positions();
    std::lock_guard lock(p.mu);
    p.calls.clear();
    p.eager = 0;
  }
  g_communicator.store(c.get(), std::memory_order_release);
  g_communicator_owner = std::move(c);
}

namespace {
// The run a CollectiveFunctionScope for `function` installs: the current one when `function` is
// null or already running, else the next call of `function`.
CollectiveFunctionScope::Run run_of(const std::string* function) {
  if (!function || function == t_collective_run.function) return t_collective_run;
  Positions& p = positions();
  std::lock_guard lock(p.mu);
  return CollectiveFunctionScope::Run{function, ++p.calls[*function], 0};
}
}  // namespace

CollectiveFunctionScope::CollectiveFunctionScope(const std::string* function)
    : run_(t_collective_run, run_of(function)) {}
const std::string* current_collective_function() { return t_collective_run.function; }

std::string next_collective_position() {
  CollectiveFunctionScope::Run& run = t_collective_run;
  if (run.function)
    return str_cat("collective #", ++run.collectives, " of call #", run.call, " of function '", *run.function, "'");
  Positions& p = positions();
  std::lock_guard lock(p.mu);
  return str_cat("eager collective #", ++p.eager);
}

bool is_collective(OpId id) { return (op_def(id).traits & kCollective) != 0; }

namespace {

// ---- attributes and shape rules ----

Reduction reduction_of(const char* op, const OpAttrs& attrs) {
  const int64_t r = attrs.get<CollectiveAttrs>().reduction;
  if (r < 0 || r > 3)
    op_error<InvalidArgumentError>(op, "reduction ", r, " is not one of 0 (sum), 1 (mean), 2 (max), 3 (min)");
  return static_cast<Reduction>(r);
}

int64_t root_of(const char* op, const OpAttrs& attrs) {
  const int64_t root = attrs.get<CollectiveAttrs>().root;
  if (root < 0) op_error<InvalidArgumentError>(op, "root must be a rank (>= 0), got ", root);
  return root;
}

// Strings have no fixed size to send; every other dtype travels as its bytes.
void require_sendable(const char* op, const ValueType& t) {
  require_dtype(op, t, {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool, DType::UInt8});
}

// What all_reduce and reduce_to_root can combine. Mean divides, so it needs floats (an integer
// mean would round, silently).
void require_reducible(const char* op, const ValueType& t, Reduction r) {
  require_dtype(op, t, {DType::Float32, DType::Float64, DType::Int32, DType::Int64});
  if (r == Reduction::kMean && t.dtype != DType::Float32 && t.dtype != DType::Float64)
    op_error<TypeError>(op, "a mean needs floating-point tensors, got ", to_string(t.dtype),
                        "; reduce with sum and divide, or cast to float32 first");
}

std::vector<ValueType> infer_all_reduce(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const Reduction r = reduction_of("all_reduce", attrs);
  if (in.empty()) op_error<InvalidArgumentError>("all_reduce", "needs at least one tensor, got an empty list");
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i].dtype != in[0].dtype)
      op_error<TypeError>("all_reduce", "the tensors of one all_reduce share a dtype (they travel as one buffer): "
                          "tensor 0 is ", to_string(in[0].dtype), ", tensor ", i, " is ", to_string(in[i].dtype),
                          "; reduce each dtype in its own all_reduce");
    require_reducible("all_reduce", in[i], r);
  }
  return in;
}

std::vector<ValueType> infer_collective_broadcast(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  root_of("collective_broadcast", attrs);
  require_sendable("collective_broadcast", in[0]);
  return in;
}

std::vector<ValueType> infer_reduce_to_root(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  root_of("reduce_to_root", attrs);
  require_reducible("reduce_to_root", in[0], Reduction::kSum);
  return in;
}

// The rows of every rank along axis 0: how many is known only when the ranks have sent theirs.
TensorShape gathered_shape(const char* op, const TensorShape& s) {
  if (!s.has_rank()) return s;
  if (s.rank() == 0)
    op_error<InvalidArgumentError>(op, "concatenates along axis 0, so the tensor needs rank >= 1; got a scalar "
                                   "(use tg::reshape(x, {1}))");
  std::vector<int64_t> dims = s.dims();
  dims[0] = None;
  return TensorShape(dims);
}

std::vector<ValueType> infer_all_gather(const std::vector<ValueType>& in, const OpAttrs&) {
  require_sendable("all_gather", in[0]);
  return {ValueType{in[0].dtype, gathered_shape("all_gather", in[0].shape)}};
}

// all_gather_grad(dy, x): this rank's rows of the sum over ranks of dy, shaped like x.
std::vector<ValueType> infer_all_gather_grad(const std::vector<ValueType>& in, const OpAttrs&) {
  require_reducible("all_gather_grad", in[0], Reduction::kSum);
  require_same_dtype("all_gather_grad", in);
  gathered_shape("all_gather_grad", in[1].shape);
  return {in[1]};
}

// ---- kernels ----

int64_t elements(const Tensor& t) { return t.impl()->shape.num_elements(); }
std::size_t byte_size(const Tensor& t) { return static_cast<std::size_t>(elements(t)) * dtype_size(t.dtype()); }

// A collective of the tensors `in` (their dtype and shapes), taking the next position of this
// rank's sequence.
CollectiveCall call_of(const char* op, const OpAttrs& attrs, const std::vector<Tensor>& in) {
  const auto& a = attrs.get<CollectiveAttrs>();
  CollectiveCall call;
  call.op = op;
  call.reduction = static_cast<Reduction>(a.reduction);
  call.root = a.root;
  call.dtype = in[0].dtype();
  for (const Tensor& t : in) call.count += elements(t);
  call.agreed_count = call.count;
  call.tensors = static_cast<int>(in.size());
  if (in.size() == 1) {
    call.shapes = in[0].impl()->shape.to_string();
  } else {
    // (Built apart and assigned whole: GCC 12 -O3 warns, wrongly, on assigning "[" (-Wrestrict).)
    std::string shapes;
    for (std::size_t i = 0; i < in.size(); ++i) shapes += str_cat(i ? ", " : "", in[i].impl()->shape.to_string());
    call.shapes = str_cat("[", shapes, "]");
  }
  call.position = next_collective_position();
  call.function = current_collective_function();
  return call;
}

// A root outside the job is the caller's error, on every rank alike.
void check_root_in_job(const char* op, int64_t root, int size) {
  if (root >= size)
    op_error<InvalidArgumentError>(op, "root ", root, " is not a rank of this job (ranks 0 to ", size - 1,
                                   "); pass a rank below tg::dist::size()");
}

void divide_by(const Tensor& t, int size) {
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      T* p = data_of<T>(t);
      const T n = static_cast<T>(size);
      for (int64_t i = 0, e = elements(t); i < e; ++i) p[i] /= n;
    }
  });
}

void kernel_all_reduce(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  Communicator* comm = communicator();
  if (!comm || comm->size() == 1) {  // one rank: the sum, mean, max and min of one value
    for (std::size_t i = 0; i < in.size(); ++i) copy_elements(in[i], out[i]);
    return;
  }
  const CollectiveCall call = call_of("all_reduce", attrs, in);
  const int64_t total = call.count;
  if (out.size() == 1) {
    copy_elements(in[0], out[0]);
    comm->all_reduce(bytes_of(out[0]), call);
  } else {
    // A bucket: one buffer, one collective, however many tensors.
    const std::size_t elem = dtype_size(in[0].dtype());
    std::unique_ptr<std::byte[]> packed(new std::byte[static_cast<std::size_t>(total) * elem]);
    std::size_t at = 0;
    for (const Tensor& t : in) {
      if (const std::size_t n = byte_size(t)) std::memcpy(packed.get() + at, bytes_of(t), n);
      at += byte_size(t);
    }
    comm->all_reduce(packed.get(), call);
    at = 0;
    for (const Tensor& t : out) {
      if (const std::size_t n = byte_size(t)) std::memcpy(bytes_of(t), packed.get() + at, n);
      at += byte_size(t);
    }
  }
  if (call.reduction == Reduction::kMean)
    for (const Tensor& t : out) divide_by(t, comm->size());
}

void kernel_collective_broadcast(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  copy_elements(in[0], out[0]);
  Communicator* comm = communicator();
  const int size = comm ? comm->size() : 1;
  check_root_in_job("collective_broadcast", attrs.get<CollectiveAttrs>().root, size);
  if (size == 1) return;
  comm->broadcast(bytes_of(out[0]), call_of("collective_broadcast", attrs, in));
}

void kernel_reduce_to_root(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  copy_elements(in[0], out[0]);
  Communicator* comm = communicator();
  const int size = comm ? comm->size() : 1;
  const int64_t root = attrs.get<CollectiveAttrs>().root;
  check_root_in_job("reduce_to_root", root, size);
  if (size == 1) return;
  comm->reduce_to_root(bytes_of(out[0]), call_of("reduce_to_root", attrs, in));
  // Only the root receives the sum; the others' part of the gradient is nothing.
  if (comm->rank() != root && byte_size(out[0])) std::memset(bytes_of(out[0]), 0, byte_size(out[0]));
}

// The elements of one row along axis 0 (the product of the other dims).
int64_t row_elements(const Tensor& t) {
  const auto& d = t.impl()->shape.dims();
  int64_t n = 1;
  for (std::size_t i = 1; i < d.size(); ++i) n *= d[i];
  return n;
}

// A collective of t's rows: each rank may send another number of them, so the shapes compared
// leave axis 0 out.
CollectiveCall rows_call(const char* op, const OpAttrs& attrs, const Tensor& t) {
  CollectiveCall call = call_of(op, attrs, {t});
  call.count = t.impl()->shape.dims()[0];
  call.agreed_count = row_elements(t);
  call.shapes = gathered_shape(op, t.impl()->shape).to_string();
  return call;
}

void kernel_all_gather(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  Communicator* comm = communicator();
  if (!comm || comm->size() == 1) {
    out[0] = allocate_tensor(x.dtype(), x.impl()->shape);
    copy_elements(x, out[0]);
    return;
  }
  const CollectiveCall call = rows_call("all_gather", attrs, x);
  const std::vector<int64_t> rows = comm->all_gather_counts(call);
  std::vector<int64_t> dims = x.impl()->shape.dims();
  dims[0] = 0;
  for (int64_t r : rows) dims[0] += r;
  out[0] = allocate_tensor(x.dtype(), TensorShape(dims));
  comm->all_gather(bytes_of(x), bytes_of(out[0]), rows, call);
}

void kernel_all_gather_grad(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const Tensor& dy = in[0];
  const Tensor& x = in[1];
  const auto& dy_dims = dy.impl()->shape.dims();
  const auto& x_dims = x.impl()->shape.dims();
  if (dy_dims.size() != x_dims.size() || !std::equal(dy_dims.begin() + 1, dy_dims.end(), x_dims.begin() + 1))
    op_error<InvalidArgumentError>("all_gather_grad", "the gradient ", dy.impl()->shape.to_string(),
                                   " does not hold rows of the input's ", x.impl()->shape.to_string());
  Communicator* comm = communicator();
  int64_t offset = 0, total = x_dims[0];
  if (comm && comm->size() > 1) {
    const std::vector<int64_t> rows = comm->all_gather_counts(rows_call("all_gather_grad", attrs, x));
    total = 0;
    for (std::size_t r = 0; r < rows.size(); ++r) {
      if (static_cast<int>(r) < comm->rank()) offset += rows[r];
      total += rows[r];
    }
  }
  if (dy_dims[0] != total)
    op_error<InvalidArgumentError>("all_gather_grad", "the gradient has ", dy_dims[0], " rows but the ranks gathered ",
                                   total);
  Tensor summed = dy;
  if (comm && comm->size() > 1) {
    summed = allocate_tensor(dy.dtype(), dy.impl()->shape);
    copy_elements(dy, summed);
    comm->all_reduce(bytes_of(summed), call_of("all_gather_grad", attrs, {dy}));
  }
  const std::size_t row_bytes = static_cast<std::size_t>(row_elements(x)) * dtype_size(x.dtype());
  if (const std::size_t n = row_bytes * static_cast<std::size_t>(x_dims[0]))
    std::memcpy(bytes_of(out[0]), bytes_of(summed) + row_bytes * static_cast<std::size_t>(offset), n);
}

// ---- gradients (Horovod's and TF's rules: each collective's adjoint is a collective) ----

std::vector<Tensor> grad_all_reduce(const GradInputs& g) {
  const Reduction r = reduction_of("all_reduce", g.attrs);
  if (r == Reduction::kMax || r == Reduction::kMin)
    op_error<InvalidArgumentError>("all_reduce", "a ", reduction_name(r), " across ranks has no gradient here; "
                                   "differentiate a sum or a mean, or stop the gradient (tg::stop_gradient) "
                                   "before the collective");
  // The sum's adjoint is the sum, the mean's the mean: every rank's output depends on every
  // rank's input alike. One collective again for the whole bucket.
  return apply_op(OpId::AllReduce, g.grads, g.attrs);
}

std::vector<Tensor> grad_collective_broadcast(const GradInputs& g) {
  return {apply_op1(OpId::ReduceToRoot, {g.grads[0]}, g.attrs)};
}

std::vector<Tensor> grad_reduce_to_root(const GradInputs& g) {
  return {apply_op1(OpId::CollectiveBroadcast, {g.grads[0]}, g.attrs)};
}

std::vector<Tensor> grad_all_gather(const GradInputs& g) {
  return {apply_op1(OpId::AllGatherGrad, {g.grads[0], g.inputs[0]}, g.attrs)};
}

std::vector<Tensor> grad_all_gather_grad(const GradInputs& g) {
  return {apply_op1(OpId::AllGather, {g.grads[0]}, g.attrs), Tensor()};
}

}  // namespace

void register_collective_ops(OpDef* t) {
  set_op(t, OpId::AllReduce, &infer_all_reduce, &kernel_all_reduce);
  set_op(t, OpId::CollectiveBroadcast, &infer_collective_broadcast, &kernel_collective_broadcast);
  set_op(t, OpId::AllGather, &infer_all_gather, &kernel_all_gather);
  set_op(t, OpId::ReduceToRoot, &infer_reduce_to_root, &kernel_reduce_to_root);
  set_op(t, OpId::AllGatherGrad, &infer_all_gather_grad, &kernel_all_gather_grad);
  set_grad(t, OpId::AllReduce, &grad_all_reduce);
  set_grad(t, OpId::CollectiveBroadcast, &grad_collective_broadcast);
  set_grad(t, OpId::AllGather, &grad_all_gather);
  set_grad(t, OpId::ReduceToRoot, &grad_reduce_to_root);
  set_grad(t, OpId::AllGatherGrad, &grad_all_gather_grad);
}

}  // namespace tg::detail
