// Explaining trace types: what changed between a traced type and a call's type, and the leaves
// (tensors, literals, objects) of a type with their paths. Used only when a call traces, never
// on the cached-call path.
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tracegraph/trace_type.h"

namespace tg::detail {

struct TypeChange {
  std::string path;  // "x", "batch[1]", "config['lr']"
  std::string what;  // "shape (3,) -> (5,), dim 0: 3 -> 5"
  // A container's length/keys or a value's kind changed: a bigger difference than one leaf's
  // dtype or shape when choosing the closest trace.
  bool structural = false;
};

/// The differences that keep `call` from being a subtype of `traced`, innermost first.
std::vector<TypeChange> diff_types(const TraceType& traced, const TraceType& call,
                                   const std::string& path);

enum class LeafKind { kTensor, kLiteral, kObject, kVariable, kOther };
struct LeafInfo {
  LeafKind kind = LeafKind::kOther;
  DType dtype = DType::Float32;  // tensors, variables
  TensorShape shape;             // tensors, variables
  std::string text;              // literal value / object / custom type, as printed
  std::string type_name;         // literals: LiteralValue::cpp_type (a frontend's type name)
  int64_t alias_id = -1;         // variables
};

/// `t` as a trace keeps it: objects of copyable types with == (inside containers too) hold a copy
/// of their value now, which later calls are compared with.
TraceTypePtr with_object_snapshots(const TraceTypePtr& t);

/// Whether a call's `value` type binds to parameter type `param` (TF's FunctionType cast): as
/// is_subtype_of, except that a tensor binds whatever the parameter spec's name, and a tensor
/// less specific than its parameter (a symbolic one of unknown rank or None dims, inside another
/// trace) binds too - run_concrete checks its shape when the graph runs.
bool castable_to(const TraceType& value, const TraceType& param);
/// The innermost pair (value, param) inside two types that does not bind, for messages:
/// {nullptr, nullptr} when `value` binds to `param`.
std::pair<const TraceType*, const TraceType*> innermost_uncastable(const TraceType& value, const TraceType& param);

/// Calls fn(path, leaf) for every leaf of t (containers are walked, not reported).
void for_each_leaf(const TraceType& t, const std::string& path,
                   const std::function<void(const std::string&, const LeafInfo&)>& fn);

}  // namespace tg::detail
