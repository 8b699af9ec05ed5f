// The argument checks of src/nn's layers (layer_checks.h).
#include "nn/layer_checks.h"

#include "core/check.h"
#include "core/tensor_impl.h"

namespace tg::nn {

using detail::op_error;

void check_sizes(const char* layer, const std::string& name,
                 std::initializer_list<std::pair<const char*, int64_t>> sizes) {
  for (const auto& [what, value] : sizes)
    if (value <= 0)
      op_error<InvalidArgumentError>(layer, "layer '", name, "' needs ", what, " > 0, got ", what, "=", value);
}

void check_float_dtype(const char* layer, DType dtype) {
  if (!is_floating(dtype))
    op_error<TypeError>(layer, "expected the dtype float32 or float64, got ", to_string(dtype));
}

std::string checked_layer_name(const char* layer, std::string name,
                               std::initializer_list<std::pair<const char*, int64_t>> sizes, DType dtype) {
  check_sizes(layer, name, sizes);
  check_float_dtype(layer, dtype);
  return name;
}

void check_features_input(const char* layer, const std::string& name, const Tensor& x, DType dtype,
                          int64_t features, int64_t min_rank) {
  if (!x.defined()) op_error<ValueError>(layer, "layer '", name, "' got an empty tg::Tensor");
  if (x.dtype() != dtype)
    op_error<InvalidArgumentError>(layer, "layer '", name, "' has dtype ", to_string(dtype),
                                   " but the input has dtype ", to_string(x.dtype()), "; tg::cast the input first");
  const TensorShape s = detail::static_shape(x);
  if (!s.has_rank() || s.rank() < min_rank || (s.dims().back() != None && s.dims().back() != features))
    op_error<InvalidArgumentError>(layer, "layer '", name, "' expects inputs of rank >= ", min_rank,
                                   " whose last dimension is its ", features, " features, got shape ",
                                   s.to_string(), "; reshape the input so that the features come last");
}

}  // namespace tg::nn
