// Algebraic simplification: a table of rewrite rules, each matching one op and either forwarding
// the node to an existing value or rewriting the node in place. A rule fires only where the
// result is bit-identical to the original for every input, IEEE corner cases included:
//   x * 1, x / 1, pow(x, 1)          -> x   (also for NaN, inf and -0.0)
//   x - (+0.0)                       -> x   (x + (-0.0) in IEEE: keeps -0.0 and +0.0)
//   x + (-0.0)                       -> x   (x + (+0.0) is NOT x: -0.0 + +0.0 is +0.0, skipped)
//   integer x + 0, x - 0             -> x
// with the constant on either side of a commutative op (1 * x, (-0.0) + x: commutes()),
// and only when the constant cannot make the result larger than x by broadcasting (every dim
// of the constant is 1 and its rank is at most x's). x * 0 -> 0 is never done (NaN, inf).
// One rule drops a broadcast instead of an op:
//   unreduce_like(s, like) * x       -> s * x (s one element, like and x one static shape)
// the gradient of a mean or sum loss, which otherwise writes s out to the loss's whole input
// shape for the product to read back (each element is s * x[i] either way).
#include <cmath>
#include <cstring>

#include "core/tensor_impl.h"
#include "passes/passes.h"
#include "passes/rewrite.h"

namespace tg::detail {

namespace {

// What a rule sees: the graph, the node (inputs already forwarded) and the forwarding map.
struct Match {
  GraphIR& g;
  GraphNode& node;
  const GraphNode& input(std::size_t k) const { return g.node_of(node.inputs[k]); }
  const ValueType& input_type(std::size_t k) const {
    return g.type_of(node.inputs[k]);
  }
};

enum class Result { kNone, kForward, kRewritten };
struct Rule {
  OpId op;
  // Returns kForward with `to` set to replace the node's output 0, or kRewritten after
  // changing the node in place (its inputs must stay earlier nodes).
  Result (*apply)(Match& m, ValueRef& to);
};

enum class Sign { kAny, kPositiveZero, kNegativeZero };

// Input k is a one-element constant equal to `value` (with the given sign for zeros) that cannot
// broadcast the other operand (the output's shape equals the other operand's, dims all 1).
bool is_neutral_const(const Match& m, std::size_t k, double value, Sign sign) {
  const GraphNode& c = m.input(k);
  if (c.kind != NodeKind::kConst) return false;
  const TensorShape& cshape = static_shape(c.value);  // as stored: Tensor::shape() copies
  if (c.value.impl()->dtype == DType::String || cshape.num_elements() != 1) return false;
  const ValueType& other = m.input_type(1 - k);
  if (!other.shape.has_rank() || cshape.rank() > other.shape.rank()) return false;
  for (int64_t d : cshape.dims())
    if (d != 1) return false;
  double v = 0;
  bool negative = false;
  switch (c.value.dtype()) {
    case DType::Float32: v = *data_of<float>(c.value); negative = std::signbit(v); break;
    case DType::Float64: v = *data_of<double>(c.value); negative = std::signbit(v); break;
    case DType::Int32: v = *data_of<int32_t>(c.value); break;
    case DType::Int64: v = static_cast<double>(*data_of<int64_t>(c.value)); break;
    case DType::UInt8: v = *data_of<uint8_t>(c.value); break;
    default: return false;
  }
  if (v != value) return false;
  if (is_floating(c.value.dtype()) && value == 0) {
    if (sign == Sign::kPositiveZero && negative) return false;
    if (sign == Sign::kNegativeZero && !negative) return false;
  }
  return true;
}

ValueRef operand(const Match& m, std::size_t k) { return m.node.inputs[k]; }

// The neutral constant as operand 1, or as operand 0 when the op commutes: forwards the other.
Result forward_other_of_neutral(Match& m, double value, Sign sign, ValueRef& to) {
  for (std::size_t k : {std::size_t{1}, std::size_t{0}}) {
    if (k == 0 && !commutes(m.node.op, m.input_type(1).dtype)) break;
    if (!is_neutral_const(m, k, value, sign)) continue;
    to = operand(m, 1 - k);
    return Result::kForward;
  }
  return Result::kNone;
}

Result forward_if(bool cond, const Match& m, std::size_t k, ValueRef& to) {
  if (!cond) return Result::kNone;
  to = operand(m, k);
  return Result::kForward;
}

Result mul_one(Match& m, ValueRef& to) { return forward_other_of_neutral(m, 1, Sign::kAny, to); }
Result div_one(Match& m, ValueRef& to) { return forward_if(is_neutral_const(m, 1, 1, Sign::kAny), m, 0, to); }
Result pow_one(Match& m, ValueRef& to) { return forward_if(is_neutral_const(m, 1, 1, Sign::kAny), m, 0, to); }
Result add_zero(Match& m, ValueRef& to) { return forward_other_of_neutral(m, 0, Sign::kNegativeZero, to); }
Result sub_zero(Match& m, ValueRef& to) { return forward_if(is_neutral_const(m, 1, 0, Sign::kPositiveZero), m, 0, to); }

// unreduce_like(s, like) * x -> s * x (or x * unreduce_like(s, like) -> x * s), where s has one
// element (every dim 1, rank at most x's) of x's dtype and the unreduce_like's output and x have
// one fully defined static shape: the product broadcasts s itself, to the same shape, and
// multiplies the same two values per element in the same order.
Result mul_scalar_broadcast(Match& m, ValueRef&) {
  for (std::size_t k : {std::size_t{0}, std::size_t{1}}) {
    const GraphNode& u = m.input(k);
    if (u.kind != NodeKind::kOp || u.op != OpId::UnreduceLike || u.control_input >= 0) continue;
    const ValueType& s = m.g.type_of(u.inputs[0]);
    const ValueType& broadcast = m.input_type(k);
    const ValueType& x = m.input_type(1 - k);
    if (s.dtype != x.dtype || broadcast.dtype != x.dtype || !s.shape.has_rank() || !x.shape.is_fully_defined() ||
        !(broadcast.shape == x.shape) || s.shape.rank() > x.shape.rank())
      continue;
    bool one = true;
    for (int64_t d : s.shape.dims()) one = one && d == 1;
    if (!one) continue;
    m.node.inputs[k] = u.inputs[0];
    return Result::kRewritten;
  }
  return Result::kNone;
}

// f(f(x)) -> x for involutions.
Result involution(Match& m, ValueRef& to) {
  const GraphNode& in = m.input(0);
  if (in.kind != NodeKind::kOp || in.op != m.node.op) return Result::kNone;
  to = in.inputs[0];
  return Result::kForward;
}
// f(f(x)) -> f(x) for idempotent ops.
Result idempotent(Match& m, ValueRef& to) {
  const GraphNode& in = m.input(0);
  if (in.kind != NodeKind::kOp || in.op != m.node.op) return Result::kNone;
  to = m.node.inputs[0];
  return Result::kForward;
}
Result identity(Match& m, ValueRef& to) { return forward_if(true, m, 0, to); }
Result cast_same(Match& m, ValueRef& to) {
  return forward_if(m.input_type(0).dtype == m.node.attrs.get<CastAttrs>().dtype, m, 0, to);
}

// The permutation transpose applies, or empty when the rank is unknown.
std::vector<int64_t> perm_of(const GraphNode& t, const TensorShape& in) {
  const std::vector<int64_t>& perm = t.attrs.get<TransposeAttrs>().perm;
  if (!perm.empty()) return perm;
  if (!in.has_rank()) return {};
  std::vector<int64_t> p(static_cast<std::size_t>(in.rank()));
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<int64_t>(p.size() - 1 - i);
  return p;
}
bool is_identity_perm(const std::vector<int64_t>& p) {
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}
// transpose(transpose(x, p1), p2) is transpose(x, q) with q[i] = p1[p2[i]]; identity -> x.
Result transpose_pair(Match& m, ValueRef& to) {
  const std::vector<int64_t> outer = perm_of(m.node, m.input_type(0).shape);
  if (outer.empty()) return Result::kNone;
  if (is_identity_perm(outer)) return forward_if(true, m, 0, to);
  const GraphNode& in = m.input(0);
  if (in.kind != NodeKind::kOp || in.op != OpId::Transpose) return Result::kNone;
  const ValueType& x = m.g.type_of(in.inputs[0]);
  const std::vector<int64_t> inner = perm_of(in, x.shape);
  if (inner.size() != outer.size()) return Result::kNone;
  std::vector<int64_t> q(outer.size());
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = inner[static_cast<std::size_t>(outer[i])];
  if (is_identity_perm(q)) {
    to = in.inputs[0];
    return Result::kForward;
  }
  m.node.inputs[0] = in.inputs[0];
  m.node.attrs = TransposeAttrs{std::move(q)};
  return Result::kRewritten;
}
// reshape(reshape(x)) -> reshape(x); a reshape to x's own (static) shape -> x.
Result reshape_chain(Match& m, ValueRef& to) {
  const TensorShape& in_shape = m.input_type(0).shape;
  if (in_shape.is_fully_defined() && m.node.outputs[0].shape == in_shape) return forward_if(true, m, 0, to);
  const GraphNode& in = m.input(0);
  if (in.kind != NodeKind::kOp || in.op != OpId::Reshape) return Result::kNone;
  m.node.inputs[0] = in.inputs[0];
  const TensorShape& x = m.g.type_of(in.inputs[0]).shape;
  if (x.is_fully_defined() && m.node.outputs[0].shape == x) {
    to = in.inputs[0];
    return Result::kForward;
  }
  return Result::kRewritten;
}

constexpr Rule kRules[] = {
    {OpId::Mul, &mul_one},
    {OpId::Mul, &mul_scalar_broadcast},
    {OpId::Div, &div_one},
    {OpId::Pow, &pow_one},
    {OpId::Add, &add_zero},
    {OpId::Sub, &sub_zero},
    {OpId::Neg, &involution},
    {OpId::LogicalNot, &involution},
    {OpId::Abs, &idempotent},
    {OpId::Relu, &idempotent},
    {OpId::Identity, &identity},
    {OpId::Cast, &cast_same},
    {OpId::Transpose, &transpose_pair},
    {OpId::Reshape, &reshape_chain},
};

}  // namespace

int simplify_algebra(GraphIR& g) {
  const std::size_t n = g.nodes.size();
  Forwarding fwd(g);
  std::vector<bool> keep(n, true);
  int changed = 0;
  for (std::size_t i = 0; i < n; ++i) {
    GraphNode& node = g.nodes[i];
    for (ValueRef& in : node.inputs) in = fwd.resolve(in);
    if (node.kind != NodeKind::kOp || node.outputs.size() != 1 || (op_def(node.op).traits & kStateful)) continue;
    for (const Rule& r : kRules) {
      if (r.op != node.op) continue;
      Match m{g, node};
      ValueRef to;
      const Result res = r.apply(m, to);
      if (res == Result::kNone) continue;
      ++changed;
      if (res == Result::kForward) {
        // Only a value of the same static type may stand in (outputs keep their declared type).
        const ValueType& t = g.type_of(to);
        if (t.dtype != node.outputs[0].dtype || !(t.shape == node.outputs[0].shape)) {
          --changed;
          continue;
        }
        fwd.forward(ValueRef{static_cast<int>(i), 0}, to);
        keep[i] = false;
      }
      break;
    }
  }
  if (changed) compact(g, keep, &fwd);
  return changed;
}

}  // namespace tg::detail
