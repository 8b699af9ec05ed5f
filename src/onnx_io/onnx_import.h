// The importer's op table: how each ONNX op is computed with tracegraph's ops. The table in
// onnx_import_rules.cpp is the one place the mapping is written; the importer (onnx_import.cpp)
// calls a node's rule while it traces the graph, and tools/onnx_table lists the table in
// docs/onnx.md.
#pragma once
#include <any>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "tracegraph/tensor.h"

namespace tg::detail::onnx_import {

/// ONNX's TensorProto.DataType code as a tracegraph dtype; nullopt for a type tracegraph does
/// not compute in (float16, int8, complex, ...).
std::optional<DType> dtype_of(int onnx_type);
/// The name ONNX gives a data type code ("FLOAT16"), for messages.
std::string onnx_type_name(int onnx_type);

/// What a rule sees of the node it computes: its inputs as tensors (symbolic while the graph is
/// traced, eager for initializers and what is computed from them alone), its attributes - each
/// one read through here is marked used, and an attribute no rule read is refused after the
/// rule ran - and the errors to raise. Implemented by the importer.
class NodeContext {
 public:
  virtual ~NodeContext() = default;
  virtual const onnx::NodeProto& node() const = 0;
  /// The model's opset of the default domain.
  virtual int64_t opset() const = 0;
  /// How many inputs the node lists, trailing empty (omitted optional) ones not counted.
  int num_inputs() const;
  /// Whether input i is given (listed and not the empty name of an omitted optional input).
  bool has_input(int i) const;
  /// Input i; a missing one is a FormatError naming the node.
  virtual Tensor in(int i) = 0;
  /// Input i's rank; an unknown one is refused (the rule needs it).
  int64_t rank(int i);
  /// Input i's shape as the ONNX graph sees it, without computing anything.
  virtual TensorShape shape_of(int i) = 0;
  /// Input i's dims as the ONNX graph sees them (None as -1); its rank must be known.
  std::vector<int64_t> dims(int i);

  // Channels-last values. The importer may hold a 4-D value channels-last (NHWC) while the ONNX
  // graph sees it channels-first (NCHW): convolutions, pools and elementwise ops then pass it on
  // without transposing, and in() gives the NCHW value (one transpose, made once per value) to
  // every rule that does not ask for the NHWC one.
  /// Whether input i is held channels-last (in_nhwc(i) costs nothing).
  virtual bool held_nhwc(int i) = 0;
  /// 4-D input i channels-last: as held, or transposed from NCHW.
  virtual Tensor in_nhwc(int i) = 0;
  /// Marks output k as returned channels-last (the rule returns the NHWC tensor of a 4-D value).
  void mark_nhwc(int k) { nhwc_outputs_.push_back(k); }
  bool marked_nhwc(int k) const;
  /// The values of integer input i when they are known while importing (a constant, or a shape
  /// computed from static dims); otherwise the node is refused: `what` names the input ("the
  /// axes") for the message.
  std::vector<int64_t> const_ints(int i, const char* what);
  /// How many outputs the node lists, trailing empty (unused optional) ones not counted.
  int num_outputs() const;

  bool has_attr(const std::string& name);
  int64_t attr_int(const std::string& name, int64_t fallback);
  float attr_float(const std::string& name, float fallback);
  std::string attr_string(const std::string& name, const std::string& fallback);
  std::vector<int64_t> attr_ints(const std::string& name, const std::vector<int64_t>& fallback);
  std::vector<float> attr_floats(const std::string& name);
  /// A tensor attribute (Constant's value), read with the importer's checks.
  virtual Tensor attr_tensor(const std::string& name) = 0;
  /// The graph attribute `name` (If's branches, Loop's body), marked used; null when the node has
  /// none. The importer validated it with the model (names, order, ops, limits).
  const onnx::GraphProto* subgraph(const std::string& name);
  /// Runs the graph attribute `name` with its graph inputs bound to `inputs` (in order) and the
  /// values of the enclosing graphs in scope, recording its nodes where the caller is tracing
  /// (inside a tg::cond branch or a tg::while_loop body); returns its graph outputs in order.
  virtual std::vector<Tensor> run_subgraph(const std::string& name, const std::vector<Tensor>& inputs) = 0;
  /// What a rule keeps about its node across the traces of one import (a Loop's learned loop
  /// shapes, when the body enclosing it is traced again): empty at first.
  virtual std::any& memo() = 0;
  /// Marks an attribute read that the computation does not need, with the reason in a comment
  /// at the call (e.g. BatchNormalization's momentum, which only training uses).
  void accept_attr(const std::string& name);
  /// The same for input i: an input given to the node that no rule reads is refused after the
  /// rule ran, as an unread attribute is.
  void accept_input(int i) { note_input(i); }
  /// Whether the rule read input i (in, shape_of, in_nhwc, const_ints) or accepted it.
  bool input_read(int i) const;

  /// "node 'conv1' (Conv)", or "node 3 (Conv)" for a node without a name: how messages name it.
  virtual std::string where() const = 0;
  /// A node the importer cannot compute as ONNX specifies: tg::ValueError naming the op type,
  /// the node and `why` (which should say what to do).
  [[noreturn]] void refuse(const std::string& why) const;
  /// A node that breaks the ONNX spec (a missing required input, a bad attribute type):
  /// tg::FormatError naming the node.
  [[noreturn]] void malformed(const std::string& why) const;

  /// The attribute `name` (marked used), or null.
  const onnx::AttributeProto* attr(const std::string& name, onnx::AttributeProto_AttributeType type);
  /// The names of attributes read so far.
  const std::vector<std::string>& used_attrs() const { return used_; }

 private:
  std::vector<std::string> used_;
  std::vector<int> nhwc_outputs_;
  std::vector<int> read_inputs_;

 protected:
  void note_input(int i) {
    if (!input_read(i)) read_inputs_.push_back(i);
  }
};

/// A rule returns the node's outputs in order; fewer than the node lists is a refusal of the
/// ones left (an optional output, such as MaxPool's Indices, the rule does not compute).
using ImportFn = std::vector<Tensor> (*)(NodeContext&);
struct ImportRule {
  const char* op_type;
  int64_t since;      // the first opset the rule reads (older models: refused)
  const char* notes;  // what is refused or how the op is computed, for the docs ("" when none)
  ImportFn compute;
};

/// Every ONNX op the importer reads, by op type.
std::span<const ImportRule> import_rules();
/// The rule of `op_type`, or null.
const ImportRule* import_rule(const std::string& op_type);
/// Whether `op_type` computes each output element from the inputs' elements at the same index
/// (after broadcasting) whatever the axis order, so that it runs on channels-last inputs as held.
bool elementwise_op(const std::string& op_type);

}  // namespace tg::detail::onnx_import
