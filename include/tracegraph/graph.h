// tg::Graph: the read-only view of a traced graph (TensorFlow's concrete_function.graph).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tracegraph/shape.h"

namespace tg {

namespace detail {
class GraphIR;
struct GraphAccess;  // the library's way to the IR behind a view (src/graph/graph_ir.h)
}

/// A traced graph, read-only. Nodes are in topological (recording) order.
class Graph {
 public:
  struct Node {
    std::string name;                 // unique in the graph: "a", "add", "add_1", "Identity"
    std::string op;                   // "Placeholder", "Const", "Identity" or an op name
    std::vector<std::string> inputs;  // producer names; "add:1" for a second output
    /// Each output's dtype and static shape (dims may be None), named as inputs name it.
    std::vector<TensorSpec> outputs;
    /// read_variable / assign*_variable: the name of the Variable; empty for other nodes.
    std::string variable;
    /// A sub-graph's input that captures a value of the enclosing graph (a cond branch or loop
    /// body using an outer tensor): that value's name there. Empty for other nodes.
    std::string captured;
  };
  explicit Graph(std::shared_ptr<const detail::GraphIR> ir) : ir_(std::move(ir)) {}
  std::vector<Node> nodes() const;
  /// One line per node: "[a, b] -> add"; a sub-graph's capture of an enclosing value as
  /// "[capture: mul] -> mul".
  std::string to_string() const;
  /// Graphviz DOT text: each node's name, op, attributes (a Variable's name) and output types;
  /// captures are dashed and say what they capture.
  std::string to_dot() const;

 private:
  friend struct detail::GraphAccess;
  std::shared_ptr<const detail::GraphIR> ir_;
};

}  // namespace tg
