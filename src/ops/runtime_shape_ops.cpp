// Ops that settle a shape at run time when the trace cannot: reshape_to (the target shape is a
// tensor's value, e.g. built from tg::shape(x) with None dims) and ensure_same_shape (a composite
// op's "these two shapes are equal", or "these dims are equal", checked again when the graph
// runs). Both pass the input's storage through: they are views.
#include <cstdint>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/tensor_impl.h"
#include "ops/broadcast.h"
#include "ops/grad_helpers.h"
#include "ops/op.h"
#include "ops/runtime_shape_checks.h"
#include "ops/shape_value.h"
#include "tracegraph/ops.h"

namespace tg {
namespace detail {
namespace {

// ---- reshape_to(x, shape) ----

// The sizes an eager shape tensor holds, -1 included (the dim to infer).
std::vector<int64_t> target_values(const Tensor& shape) {
  const TensorImpl& impl = *shape.impl();
  std::vector<int64_t> dims(static_cast<std::size_t>(impl.shape.dims()[0]));
  for (std::size_t i = 0; i < dims.size(); ++i)
    dims[i] = impl.dtype == DType::Int64 ? impl.data<int64_t>()[i] : int64_t{impl.data<int32_t>()[i]};
  return dims;
}

// What the target looks like while tracing: the known sizes (a -1 is None until the input's
// elements are counted) when the shape tensor's value was known, else one None per element.
std::vector<ValueType> infer_reshape_to(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const auto& known = attrs.get<ShapeValueAttrs>();
  ShapeValueAttrs sizes = known;
  for (int64_t& d : sizes.dims) d = d == -1 ? None : d;  // described_shape refuses negative sizes
  const TensorShape described = described_shape("reshape", in[1], sizes);
  if (known.known) {
    bool all_known = true;
    for (int64_t d : known.dims) all_known = all_known && d != None;
    if (all_known) return {ValueType{in[0].dtype, reshape_shape(in[0].shape, known.dims)}};
  }
  return {ValueType{in[0].dtype, described}};
}

void kernel_reshape_to(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const TensorImpl& shape = *in[1].impl();
  described_shape("reshape", ValueType{shape.dtype, shape.shape}, ShapeValueAttrs{});
  const std::vector<int64_t> target = target_values(in[1]);
  const TensorShape result = reshape_shape(in[0].impl()->shape, target);
  const auto& known = attrs.get<ShapeValueAttrs>();
  for (std::size_t i = 0; known.known && i < target.size(); ++i)
    if (i >= known.dims.size() || (known.dims[i] != None && known.dims[i] != target[i]))
      op_error<InvalidArgumentError>("reshape", "the target shape is ", format_list(target),
                                     " at run time but was known as ", format_list(known.dims),
                                     " when the graph was built");
  out[0] = make_view(in[0], result);
}

std::vector<Tensor> grad_reshape_to(const GradInputs& g) { return {reshape_like(g.grads[0], g.inputs[0]), Tensor()}; }

// ---- ensure_same_shape(x, y) ----

// names: {op, x's name, y's name}, and optionally what the caller should do (a composite whose
// check is on a value derived from its arguments says what it expected of the arguments).
[[noreturn]] void shapes_differ(const ShapeCheckAttrs& a, const TensorShape& x, const TensorShape& y,
                                const char* when) {
  const bool named = a.names.size() == 3 || a.names.size() == 4;
  const std::string op = named ? a.names[0] : "ensure_same_shape";
  const std::string first = named ? a.names[1] : "x";
  const std::string second = named ? a.names[2] : "y";
  if (a.names.size() == 4)
    op_error<InvalidArgumentError>(op.c_str(), first, " have shape ", x.to_string(), " but ", second, " have shape ",
                                   y.to_string(), when, "; ", a.names[3]);
  op_error<InvalidArgumentError>(op.c_str(), first, " have shape ", x.to_string(), " but ", second, " have shape ",
                                 y.to_string(), when, "; expected equal shapes, since these arguments do not "
                                 "broadcast: give one ", first, " entry per ", second, " entry (reshape them to "
                                 "the same shape)");
}

// The compared pair k of a dims check differs: x has xd at dim x_dims[k], y has yd at y_dims[k].
[[noreturn]] void dims_differ(const ShapeCheckAttrs& a, std::size_t k, const TensorShape& x, const TensorShape& y,
                              const char* when) {
  const bool named = a.names.size() == 3 || a.names.size() == 4;
  const std::string op = named ? a.names[0] : "ensure_same_shape";
  const std::string first = named ? a.names[1] : "x";
  const std::string second = named ? a.names[2] : "y";
  const int64_t xi = a.x_dims[k], yi = a.y_dims[k];
  op_error<InvalidArgumentError>(op.c_str(), "dim ", xi, " of ", first, " (shape ", x.to_string(), ") is ",
                                 x.dims()[static_cast<std::size_t>(xi)], " but dim ", yi, " of ", second, " (shape ",
                                 y.to_string(), ") is ", y.dims()[static_cast<std::size_t>(yi)], when, "; ",
                                 a.names.size() == 4 ? a.names[3] : std::string("expected equal sizes"));
}

bool compares_dims(const ShapeCheckAttrs& a) { return !a.x_dims.empty() || !a.y_dims.empty(); }

// The dim lists as a file or a caller may give them: one y dim per x dim, none negative.
void check_dim_lists(const ShapeCheckAttrs& a) {
  if (a.x_dims.size() != a.y_dims.size())
    op_error<InvalidArgumentError>("ensure_same_shape", "x_dims names ", a.x_dims.size(), " dims but y_dims ",
                                   a.y_dims.size(), "; expected one dim of y per dim of x");
  for (std::size_t k = 0; k < a.x_dims.size(); ++k)
    if (a.x_dims[k] < 0 || a.y_dims[k] < 0)
      op_error<InvalidArgumentError>("ensure_same_shape", "x_dims ", format_list(a.x_dims), " and y_dims ",
                                     format_list(a.y_dims), " must hold dims >= 0");
}

// A compared dim must exist in its operand (when its rank is known).
void check_dim_in_range(const char* which, int64_t dim, const TensorShape& s) {
  if (s.has_rank() && dim >= s.rank())
    op_error<InvalidArgumentError>("ensure_same_shape", "compares dim ", dim, " of ", which, ", whose shape ",
                                   s.to_string(), " has rank ", s.rank(), "; expected dims below the rank");
}

// Comparing dims: x's shape, with y's size at each compared dim x does not know. Whole shapes:
// x's dims, with y's where x's are None. Sizes known on both sides must agree; the rest is the
// kernel's to check.
std::vector<ValueType> infer_ensure_same_shape(const std::vector<ValueType>& in, const OpAttrs& attrs) {
  const auto& a = attrs.get<ShapeCheckAttrs>();
  const TensorShape& x = in[0].shape;
  const TensorShape& y = in[1].shape;
  if (compares_dims(a)) {
    check_dim_lists(a);
    for (std::size_t k = 0; k < a.x_dims.size(); ++k) {
      check_dim_in_range("x", a.x_dims[k], x);
      check_dim_in_range("y", a.y_dims[k], y);
    }
    if (!x.has_rank() || !y.has_rank()) return {in[0]};
    std::vector<int64_t> dims = x.dims();
    for (std::size_t k = 0; k < a.x_dims.size(); ++k) {
      int64_t& xd = dims[static_cast<std::size_t>(a.x_dims[k])];
      const int64_t yd = y.dims()[static_cast<std::size_t>(a.y_dims[k])];
      if (xd != None && yd != None && xd != yd) dims_differ(a, k, x, y, "");
      if (xd == None) xd = yd;
    }
    return {ValueType{in[0].dtype, TensorShape(dims)}};
  }
  if (!x.has_rank()) return {ValueType{in[0].dtype, y}};
  if (!y.has_rank()) return {in[0]};
  if (x.rank() != y.rank()) shapes_differ(a, x, y, "");
  std::vector<int64_t> dims = x.dims();
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const int64_t yd = y.dims()[i];
    if (dims[i] != None && yd != None && dims[i] != yd) shapes_differ(a, x, y, "");
    if (dims[i] == None) dims[i] = yd;
  }
  return {ValueType{in[0].dtype, TensorShape(dims)}};
}

void kernel_ensure_same_shape(const std::vector<Tensor>& in, const OpAttrs& attrs, std::vector<Tensor>& out) {
  const auto& a = attrs.get<ShapeCheckAttrs>();
  const TensorShape& x = in[0].impl()->shape;
  const TensorShape& y = in[1].impl()->shape;
  if (compares_dims(a)) {
    check_dim_lists(a);
    for (std::size_t k = 0; k < a.x_dims.size(); ++k) {
      check_dim_in_range("x", a.x_dims[k], x);
      check_dim_in_range("y", a.y_dims[k], y);
      if (x.dims()[static_cast<std::size_t>(a.x_dims[k])] != y.dims()[static_cast<std::size_t>(a.y_dims[k])])
        dims_differ(a, k, x, y, " when the graph ran");
    }
  } else if (x != y) {
    shapes_differ(a, x, y, " when the graph ran");
  }
  out[0] = make_view(in[0], x);
}

std::vector<Tensor> grad_ensure_same_shape(const GradInputs& g) { return {g.grads[0], Tensor()}; }

}  // namespace

void register_runtime_shape_ops(OpDef* t) {
  set_op(t, OpId::ReshapeTo, &infer_reshape_to, &kernel_reshape_to);
  set_op(t, OpId::EnsureSameShape, &infer_ensure_same_shape, &kernel_ensure_same_shape);
  set_grad(t, OpId::ReshapeTo, &grad_reshape_to);
  set_grad(t, OpId::EnsureSameShape, &grad_ensure_same_shape);
}

namespace {
Tensor ensure_same_shape_with(const Tensor& x, const Tensor& y, ShapeCheckAttrs attrs) {
  const TensorShape xs = static_shape(x), ys = static_shape(y);
  if (xs.is_fully_defined() && ys.is_fully_defined()) {
    if (xs != ys) shapes_differ(attrs, xs, ys, "");
    return x;  // settled now: no node
  }
  return apply_op1(OpId::EnsureSameShape, {x, y}, std::move(attrs));
}
}  // namespace

Tensor ensure_same_shape(const Tensor& x, const Tensor& y, const char* op, const char* x_name, const char* y_name) {
  return ensure_same_shape_with(x, y, ShapeCheckAttrs{{op, x_name, y_name}});
}

Tensor ensure_same_shape(const Tensor& x, const Tensor& y, const std::string& op, const std::string& x_name,
                         const std::string& y_name, const std::string& remedy) {
  return ensure_same_shape_with(x, y, ShapeCheckAttrs{{op, x_name, y_name, remedy}});
}

Tensor ensure_same_dims(const Tensor& x, const Tensor& y, std::vector<int64_t> x_dims, std::vector<int64_t> y_dims,
                        const std::string& op, const std::string& x_name, const std::string& y_name,
                        const std::string& remedy) {
  ShapeCheckAttrs attrs{{op, x_name, y_name, remedy}, std::move(x_dims), std::move(y_dims)};
  TG_CHECK(!attrs.x_dims.empty(), "ensure_same_dims compares at least one pair of dims");
  check_dim_lists(attrs);
  const TensorShape xs = static_shape(x), ys = static_shape(y);
  bool settled = xs.has_rank() && ys.has_rank();
  for (std::size_t k = 0; settled && k < attrs.x_dims.size(); ++k) {
    check_dim_in_range("x", attrs.x_dims[k], xs);
    check_dim_in_range("y", attrs.y_dims[k], ys);
    const int64_t xd = xs.dims()[static_cast<std::size_t>(attrs.x_dims[k])];
    const int64_t yd = ys.dims()[static_cast<std::size_t>(attrs.y_dims[k])];
    if (xd != None && yd != None && xd != yd) dims_differ(attrs, k, xs, ys, "");
    settled = xd != None && yd != None;
  }
  if (settled) return x;  // every compared size known now: no node
  return apply_op1(OpId::EnsureSameShape, {x, y}, std::move(attrs));
}

}  // namespace detail

Tensor reshape(const Tensor& x, const Tensor& shape) {
  if (!x.defined()) detail::op_error<ValueError>("reshape", "got an empty tg::Tensor to reshape");
  if (!shape.defined()) detail::op_error<ValueError>("reshape", "the shape is an empty tg::Tensor; pass e.g. tg::shape(x)");
  detail::ShapeValueAttrs known;
  const detail::TensorImpl& impl = *shape.impl();
  if (!impl.symbolic && impl.shape.rank() == 1 && (impl.dtype == DType::Int32 || impl.dtype == DType::Int64)) {
    known.known = true;
    known.dims = detail::target_values(shape);
  } else {
    known = detail::shape_value_of("reshape", shape);
  }
  return detail::apply_op1(detail::OpId::ReshapeTo, {x, shape}, std::move(known));
}

}  // namespace tg
