// The shared state behind tg::Variable handles (read by the variable ops and by tapes).
#pragma once
#include <cstdint>
#include <mutex>
#include <string>

#include "tracegraph/tensor.h"

namespace tg::detail {

struct VariableState {
  std::mutex mu;
  Tensor value;  // eager; a handle owned by the variable (reads return it)
  DType dtype;
  TensorShape shape;
  std::string name;
  uint64_t id;
};

}  // namespace tg::detail
