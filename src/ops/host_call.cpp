// host_call: a graph node that calls a function of the host program (tf.py_function's op).
#include "core/tensor_impl.h"
#include "ops/op.h"
#include "tracegraph/ops.h"

namespace tg {
namespace detail {
namespace {

const HostFunction& host_function(const OpAttrs& attrs) {
  const HostCallAttrs& a = attrs.get<HostCallAttrs>();
  TG_CHECK(a.function != nullptr && a.function->call, "host_call without its function");
  return *a.function;
}

// One output of each declared dtype, of unknown rank: only the run knows the shapes.
std::vector<ValueType> infer_host_call(const std::vector<ValueType>&, const OpAttrs& attrs) {
  std::vector<ValueType> out;
  for (DType d : host_function(attrs).output_dtypes) out.push_back(ValueType{d, TensorShape::unknown_rank()});
  return out;
}

std::string dtype_list(const std::vector<DType>& dtypes) {
  std::string s = "[";
  for (std::size_t i = 0; i < dtypes.size(); ++i) s += str_cat(i ? ", " : "", to_string(dtypes[i]));
  return s + "]";
}

void kernel_host_call(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const HostFunction& f = host_function(attrs);
  std::vector<Tensor> got = f.call(in);
  if (got.size() != f.output_dtypes.size())
    op_error<InvalidArgumentError>("host_call", "the host function '", f.name, "' returned ", got.size(),
                                   " tensor(s), but it was declared with ", f.output_dtypes.size(), " output dtype(s) ",
                                   dtype_list(f.output_dtypes), "; return one value per declared dtype (Tout)");
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!got[i].defined())
      op_error<InvalidArgumentError>("host_call", "the host function '", f.name, "' returned an empty tensor as output ",
                                     i, "; return a value of dtype ", to_string(f.output_dtypes[i]));
    if (got[i].impl()->symbolic)
      op_error<InvalidArgumentError>("host_call", "the host function '", f.name, "' returned a symbolic tensor as output ",
                                     i, "; it runs with eager tensors and must return eager values");
    if (got[i].dtype() != f.output_dtypes[i])
      op_error<InvalidArgumentError>("host_call", "output ", i, " of the host function '", f.name, "' has dtype ",
                                     to_string(got[i].dtype()), " but was declared ", to_string(f.output_dtypes[i]),
                                     " (declared ", dtype_list(f.output_dtypes), "); cast it or declare that dtype");
    out[i] = std::move(got[i]);
  }
}

// A gradient replays the graph after the forward call ran the host function; calling it again
// would repeat its effects. Without outputs nothing is needed; outputs the replay cannot know.
std::vector<Tensor> replay_host_call(ReplayContext&, const std::vector<Tensor>&, const OpAttrs& attrs) {
  const HostFunction& f = host_function(attrs);
  if (f.output_dtypes.empty()) return {};
  throw InvalidArgumentError(str_cat(
      "[gradient] a gradient through a function that calls the host function '", f.name,
      "' (host_call, tf.py_function) with outputs is not supported: computing it would run the graph again and "
      "call the host function a second time. Call the host function outside the differentiated tg::function, "
      "or compute the gradient of a function without it"));
}

}  // namespace

void register_host_call_ops(OpDef* t) {
  set_op(t, OpId::HostCall, &infer_host_call, &kernel_host_call);
  set_replay(t, OpId::HostCall, &replay_host_call);
}

}  // namespace detail

std::vector<Tensor> host_call(HostFunctionFn fn, const std::vector<Tensor>& inputs,
                              const std::vector<DType>& output_dtypes, const std::string& name) {
  if (!fn) throw ValueError(detail::str_cat("[host_call] the host function '", name, "' is empty; pass a callable"));
  auto f = std::make_shared<detail::HostFunction>();
  f->call = std::move(fn);
  f->output_dtypes = output_dtypes;
  f->name = name;
  return detail::apply_op(detail::OpId::HostCall, inputs, detail::HostCallAttrs{std::move(f)});
}

}  // namespace tg
