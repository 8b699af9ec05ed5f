// Trace types: how tg::function decides whether a call can reuse an existing trace.
#pragma once
#include <any>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tracegraph/shape.h"

namespace tg {

class TraceType;
using TraceTypePtr = std::shared_ptr<const TraceType>;

/// The type of one argument as tracing sees it (TensorFlow's tf.types.experimental.TraceType).
/// A call can reuse a trace when every argument's type is a subtype of the traced one.
/// User types opt in with a member `tg::TraceTypePtr tracing_type() const` returning their own
/// subclass (the guide's Fruit example is in examples/guide/).
class TraceType {
 public:
  virtual ~TraceType() = default;
  /// True if every value of this type is also a value of `other`.
  virtual bool is_subtype_of(const TraceType& other) const = 0;
  /// The most specific type that this and every one of `others` are subtypes of, or nullptr.
  virtual TraceTypePtr most_specific_common_supertype(
      const std::vector<const TraceType*>& others) const = 0;
  /// The value the traced body receives for an argument of this type. An empty std::any
  /// means "the argument itself" (what built-in literal and object types do).
  virtual std::any placeholder_value() const { return {}; }
  virtual bool equals(const TraceType& other) const = 0;
  virtual std::size_t hash() const = 0;
  /// As shown in signatures: "TensorSpec(shape=(3,), dtype=tg.int32, name=None)", "Literal[2]".
  virtual std::string to_string() const = 0;

  bool operator==(const TraceType& other) const { return equals(other); }
};

namespace detail {
/// One leaf value of a literal trace type.
struct LiteralValue {
  enum class Kind : uint8_t { kInt, kFloat, kBool, kString, kEnum } kind;
  int64_t i = 0;
  double f = 0;
  std::string s;         // string value, or the enum's type name
  const char* cpp_type = "";  // the C++ type (a static name), so int 1 and long 1 differ
  bool operator==(const LiteralValue& o) const;
  std::string to_string() const;
};

TraceTypePtr tensor_trace_type(DType dtype, const TensorShape& shape, std::string name = "");
/// The name of a tensor type (a named TensorSpec's); empty for other types and unnamed ones.
const std::string& tensor_type_name(const TraceType& t);
TraceTypePtr literal_trace_type(LiteralValue value);
/// Ordered containers: kind is "List" (std::vector), "Array", "Tuple" (tuple, pair).
TraceTypePtr sequence_trace_type(std::string kind, std::vector<TraceTypePtr> elements);
/// Mappings: order-independent; keys are shown by their literal form.
TraceTypePtr mapping_trace_type(std::vector<std::pair<LiteralValue, TraceTypePtr>> items);
/// std::optional: nullptr element for an empty optional.
TraceTypePtr optional_trace_type(TraceTypePtr element);
/// An object passed by std::shared_ptr: matches the same live object, then an == one (when the
/// type has operator==). Holds the object weakly; a dead object never matches again.
TraceTypePtr object_trace_type(std::weak_ptr<const void> object, const void* address,
                               std::string cpp_type,
                               bool (*equal)(const void* a, const void* b),
                               std::shared_ptr<const void> (*copy)(const void*) = nullptr);

/// A Variable argument (TF's VariableSpec): dtype, shape, and its alias id - the position of
/// its Variable among the distinct Variables of the call - so that (x, y, z) and (z, y, x)
/// share a type while (x, x, z) does not.
TraceTypePtr variable_trace_type(DType dtype, const TensorShape& shape, int64_t alias_id);
/// The alias id of a Variable type; -1 for other types.
int64_t variable_alias_id(const TraceType& t);

/// Dtype and shape of a tensor trace type (nullptr-safe: false for other types).
bool as_tensor_type(const TraceType& t, DType* dtype, TensorShape* shape);
/// Elements of a sequence type, or nullptr.
const std::vector<TraceTypePtr>* sequence_elements(const TraceType& t);
/// The value type stored under `key` in a mapping type, or nullptr.
const TraceType* mapping_value(const TraceType& t, const LiteralValue& key);
/// The element type of a non-empty optional type, or nullptr.
const TraceType* optional_element(const TraceType& t);
/// True if t is the tensor type (dtype, shape) exactly (no allocation).
bool tensor_type_is(const TraceType& t, DType dtype, const TensorShape& shape);
/// The value of a literal type, or nullptr (no allocation: used by the cached-call path).
const LiteralValue* literal_of(const TraceType& t);

/// A built-in trace type as plain data: what export writes and reads back. Object types and
/// user-defined types have none (they name live C++ objects and code).
struct TraceTypeTree {
  enum class Kind : uint8_t { kTensor, kLiteral, kSequence, kMapping, kOptional, kVariable } kind = Kind::kTensor;
  DType dtype = DType::Float32;    // tensor, variable
  TensorShape shape;               // tensor, variable
  std::string name;                // tensor: the TensorSpec's name; sequence: "List", "Tuple", "Array"
  int64_t alias_id = 0;            // variable
  LiteralValue literal{};          // literal
  std::vector<LiteralValue> keys;  // mapping: one per element
  std::vector<TraceTypeTree> elements;  // sequence, mapping values; optional: none (empty) or one
};
/// The tree of a built-in type; false (with `unsupported` set to the offending type's text) when
/// `t` or a type inside it is an object or user-defined type.
bool trace_type_tree(const TraceType& t, TraceTypeTree& out, std::string& unsupported);
/// The trace type a tree describes (the inverse of trace_type_tree).
TraceTypePtr trace_type_from_tree(const TraceTypeTree& tree);
/// A static copy of a C++ type name read from a file (LiteralValue::cpp_type points at it).
const char* intern_cpp_type_name(const std::string& name);
}  // namespace detail

}  // namespace tg
