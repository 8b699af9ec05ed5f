// The exporter's op table: how each registry op is written in ONNX (opset 17). The table in
// onnx_rules.cpp is the one place the mapping is written; the exporter (onnx_export.cpp) reads it
// node by node, and tools/onnx_table generates docs/onnx.md from it.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "graph/graph_ir.h"
#include <onnx/onnx_pb.h>

namespace tg::detail::onnx_export {

/// What a rule sees of the node it writes: its inputs' and outputs' ONNX names and types, and a
/// way to add ONNX nodes and constants to the model. Implemented by the exporter.
class Emitter {
 public:
  virtual ~Emitter() = default;
  virtual const GraphNode& node() const = 0;
  template <class T>
  const T& attrs() const {
    return node().attrs.get<T>();
  }
  int num_inputs() const { return static_cast<int>(node().inputs.size()); }
  /// The ONNX name of the node's input i, and its type.
  virtual std::string in(int i) = 0;
  virtual const ValueType& in_type(int i) const = 0;
  /// The ONNX name the node's output i must be written to, and its type.
  virtual std::string out(int i) const = 0;
  const ValueType& out_type(int i) const { return node().outputs[static_cast<std::size_t>(i)]; }
  /// Input i's rank; an unknown rank is refused (the ONNX node needs it).
  int64_t rank(int i);
  /// A fresh value name for an intermediate result.
  virtual std::string temp(const std::string& hint) = 0;
  /// Adds a node of the default domain; attributes go on the returned proto.
  virtual onnx::NodeProto& add(const std::string& op_type, std::vector<std::string> inputs,
                               std::vector<std::string> outputs) = 0;
  /// Constants (initializers): int64 vectors (axes, shapes), and a scalar of a dtype.
  virtual std::string int64s(const std::vector<int64_t>& values) = 0;
  virtual std::string scalar(DType dtype, double value) = 0;
  /// A 1-D constant of a dtype.
  virtual std::string values(DType dtype, const std::vector<double>& values) = 0;
  /// The ONNX name holding a Variable's value at this point of the graph: its initializer, a
  /// graph input (a Variable argument, or any Variable with OnnxOptions::variables_as_inputs), or
  /// the last value write_variable gave it.
  virtual std::string variable(const std::shared_ptr<VariableState>& v) = 0;
  /// A Variable write: `value` is the Variable's value from here on, and its last one a graph
  /// output. Refused unless OnnxOptions::variables_as_inputs, and inside a sub-graph.
  virtual void write_variable(const std::shared_ptr<VariableState>& v, const std::string& value) = 0;
  /// Writes the nodes of sub-graph `g` (a cond branch, a loop's condition or body) into the ONNX
  /// graph being written, its placeholders reading `inputs` (ONNX names visible there); returns
  /// the names of its results. Its values are named "<scope>/<node name>".
  virtual std::vector<std::string> inline_graph(const GraphIR& g, const std::string& scope,
                                                const std::vector<std::string>& inputs) = 0;
  /// Nodes added between these two calls go to `g` (an If branch, a Loop body) instead of the
  /// graph being written; constants stay in the model's main graph, which `g` sees as outer scope.
  virtual void push_graph(onnx::GraphProto& g) = 0;
  virtual void pop_graph() = 0;
  /// Throws the tg::ValueError of a node this exporter cannot write, naming the node and op.
  [[noreturn]] virtual void refuse(const std::string& why) const = 0;
};

void set_attr(onnx::NodeProto& n, const std::string& name, int64_t v);
void set_attr(onnx::NodeProto& n, const std::string& name, float v);
void set_attr(onnx::NodeProto& n, const std::string& name, const std::string& v);
void set_attr(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v);

/// Declares a value's ONNX type: its dtype, and its dims when the rank is known (a None dim as
/// the symbolic dim "<name>_d<axis>").
void set_value_type(onnx::ValueInfoProto& vi, const std::string& name, DType dtype, const TensorShape& shape);

/// ONNX's TensorProto.DataType code of a dtype (0 for one ONNX cannot hold here: string).
int onnx_dtype(DType d);

using EmitFn = void (*)(Emitter&);
struct OnnxRule {
  OpId op;
  const char* onnx;   // the ONNX op(s) written, for the docs
  const char* notes;  // attribute mapping and limits, for the docs ("" when none)
  EmitFn emit;
};

/// Every op the exporter writes, in registry order.
std::span<const OnnxRule> onnx_rules();
/// The rule of `op`, or null when the exporter has none.
const OnnxRule* onnx_rule(OpId op);
/// Why an op without a rule has none (for the docs and the error), or "".
const char* onnx_refusal(OpId op);

}  // namespace tg::detail::onnx_export
