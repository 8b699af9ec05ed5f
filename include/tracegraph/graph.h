// tg::Graph: the read-only view of a traced graph (TensorFlow's concrete_function.graph).
#pragma once
#include <memory>
#include <string>
#include <vector>

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
  };
  explicit Graph(std::shared_ptr<const detail::GraphIR> ir) : ir_(std::move(ir)) {}
  std::vector<Node> nodes() const;
  /// One line per node: "[a, b] -> add".
  std::string to_string() const;
  /// Graphviz DOT text.
  std::string to_dot() const;

 private:
  friend struct detail::GraphAccess;
  std::shared_ptr<const detail::GraphIR> ir_;
};

}  // namespace tg
