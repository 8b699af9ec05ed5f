// The table of op cases: every op, with inputs and an independently computed expected result.
// Each op family's test file registers its cases with TG_OP_CASES; tests/ops/op_cases_test.cpp
// runs every case on every execution path (eager now; traced and traced+optimised once those
// paths exist) and the registry test fails if any registered op has no case. The tracing over
// generalised specs that the harness does is here too, for op tests outside the table.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "tracegraph/tracegraph.h"

namespace tg::testing {

using OpFn = std::function<Tensor(const std::vector<Tensor>&)>;

struct OpCase {
  std::string op;     // registry name, e.g. "add"
  std::string label;  // what this case covers, e.g. "broadcast (2,1) x (3,)"
  OpFn fn;            // calls the public op
  std::vector<Tensor> inputs;
  Tensor expected;
  double tol = 0.0;   // relative tolerance for floats (see tensors_near)
};

/// Specs that keep only the dtypes of `inputs`: every dim None, or (unknown_rank) not even the
/// rank, so that tracing exercises a shape rule on unknowns.
std::vector<TensorSpec> generalised_specs(const std::vector<Tensor>& inputs, bool unknown_rank);

/// Calls check(run, label) for every dim None and then for unknown rank: run() traces fn over
/// generalised_specs(inputs) and runs the concrete function on inputs, so that a shape rule's
/// error comes out of run() whether tracing or the run raises it; label is "None dims" or
/// "unknown rank".
void for_each_generalised_trace(const OpFn& fn, const std::vector<Tensor>& inputs,
                                const std::function<void(const std::function<Tensor()>& run,
                                                         const char* label)>& check);

/// Every registered case (factories run on first use, after static initialisation).
const std::vector<OpCase>& op_cases();

struct OpCaseRegistrar {
  explicit OpCaseRegistrar(std::vector<OpCase> (*make)());
};

}  // namespace tg::testing

// Usage: TG_OP_CASES(elementwise) { return { {"add", "scalars", fn, {a, b}, expected}, ... }; }
#define TG_OP_CASES(id)                                                    \
  static std::vector<::tg::testing::OpCase> tg_op_cases_##id();            \
  static ::tg::testing::OpCaseRegistrar tg_op_cases_reg_##id(&tg_op_cases_##id); \
  static std::vector<::tg::testing::OpCase> tg_op_cases_##id()
