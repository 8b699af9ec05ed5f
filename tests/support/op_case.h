// The table of op cases: every op, with inputs and an independently computed expected result.
// Each op family's test file registers its cases with TG_OP_CASES; tests/ops/op_cases_test.cpp
// runs every case on every execution path (eager now; traced and traced+optimised once those
// paths exist) and the registry test fails if any registered op has no case.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "tracegraph/tracegraph.h"

namespace tg::testing {

struct OpCase {
  std::string op;     // registry name, e.g. "add"
  std::string label;  // what this case covers, e.g. "broadcast (2,1) x (3,)"
  std::function<Tensor(const std::vector<Tensor>&)> fn;  // calls the public op
  std::vector<Tensor> inputs;
  Tensor expected;
  double tol = 0.0;   // relative tolerance for floats (see tensors_near)
};

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
