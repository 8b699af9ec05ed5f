// What a concrete function is made of (shared by the function core and the executor users).
#pragma once
#include <any>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "graph/graph_ir.h"
#include "ops/variable_state.h"
#include "tracegraph/function.h"

namespace tg::detail {

/// A FunctionType: parameter names and their trace types.
struct FunctionTypeKey {
  std::vector<TraceTypePtr> params;
  std::vector<std::string> names;
  std::size_t hash = 0;
  /// "(a: TensorSpec(...), b: Literal[2])".
  std::string to_string() const;
  /// Every parameter type is a subtype of the corresponding one of `other`.
  bool is_subtype_of(const std::vector<TraceTypePtr>& other) const;
};
std::size_t hash_types(const std::vector<TraceTypePtr>& types);
/// Every type equal to the other list's (an exact FunctionType match).
bool same_types(const std::vector<TraceTypePtr>& a, const std::vector<TraceTypePtr>& b);

class Plan;
/// What differentiating a concrete function needs (src/autodiff/tape.cpp builds it on the
/// function's first call under a GradientTape).
struct FunctionGradient;

class ConcreteImpl {
 public:
  std::weak_ptr<ConcreteImpl> self;
  std::string function_name;
  int64_t index = 0;                 // 0 for the first trace
  FunctionTypeKey input_type;
  std::shared_ptr<GraphIR> ir;
  // The executor's plan of ir, made with the concrete function (ir does not change after), so
  // that a call needs no lock or lookup to find it.
  std::shared_ptr<const Plan> plan;
  // The graph as traced, before the optimiser (set only when it ran): gradients replay this
  // one, whose ops all have gradient rules (fused kernels do not).
  std::shared_ptr<const GraphIR> unoptimized_ir;
  // Built on the first call under a GradientTape (src/autodiff): the backward function.
  mutable std::mutex gradient_mu;
  mutable std::shared_ptr<FunctionGradient> gradient;
  std::unique_ptr<Graph> graph;            // the public view of the graph as traced
  std::unique_ptr<Graph> optimized_graph;  // the public view of ir
  // The Variable parameters the body saw for its Variable arguments, by alias id: a call binds
  // them to its distinct Variables, in order (run_concrete).
  std::vector<std::shared_ptr<VariableState>> variable_parameters;
  std::any skeleton;                 // the traced result with symbolic tensors
  std::string output_description;    // "TensorSpec(shape=(), dtype=tg.int32, name=None)"
  std::atomic<uint64_t> last_used{0};  // call number of the latest use (LRU eviction)
  // The collectives of the graph as traced, one per line; empty when it has none. Every rank of
  // a distributed job compares its own on the function's first run (check_collectives_once).
  std::string collective_sequence;
  mutable std::once_flag collectives_checked;
};

/// What a concrete function is made from: a graph as traced (or as read from a file) and what
/// is known of its signature.
struct ConcreteParts {
  std::string function_name;
  int64_t index = 0;
  FunctionTypeKey input_type;
  std::shared_ptr<GraphIR> graph;  // as traced; optimised (a copy) when `optimize`
  bool optimize = true;
  std::vector<std::shared_ptr<VariableState>> variable_parameters;
  std::any skeleton;
  std::string output_description;
};
/// The concrete function of `parts`: the graph optimised (when asked) and planned, with its
/// public views. Tracing and loading an exported function both build theirs here, so a loaded
/// function runs the same plan as the original.
std::shared_ptr<ConcreteImpl> make_concrete(ConcreteParts parts);

/// Runs calls of concrete functions while a GradientTape records on this thread, so that the
/// tape can differentiate through the call (src/autodiff installs it, with its OpObserver).
class CallObserver {
 public:
  virtual ~CallObserver() = default;
  virtual std::vector<Tensor> run_call(const ConcreteImpl& cf, const std::vector<Tensor>& inputs) = 0;
};
/// Installed while a tape records on the thread (not a scope: tapes start and stop in any order).
void set_call_observer(CallObserver* o);

/// Runs a concrete function's graph on its flat inputs, with its Variable parameters bound to
/// `variables` (the call's distinct Variables; through the call observer, when one is
/// installed; inlined into the trace being recorded, when there is one).
std::vector<Tensor> run_concrete(const ConcreteImpl& cf, std::vector<Tensor> inputs,
                                 const std::vector<Variable>& variables);

}  // namespace tg::detail
