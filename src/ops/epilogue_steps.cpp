#include "ops/epilogue_steps.h"

#include <cstring>

#include "core/tensor_impl.h"

namespace tg::detail {

bool epilogue_fits(const EpilogueParts& e, const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                   const TensorShape& product) {
  const std::size_t mask = 2 + std::size_t{e.bias};
  return out[0].impl()->shape == product &&
         (!e.bias || in[2].impl()->shape == TensorShape({product.dims().back()})) &&
         (!e.mask_in || in[mask].impl()->shape == product);
}

void run_epilogue_steps_eagerly(OpId product, const OpAttrs& product_attrs, const EpilogueParts& e,
                                const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const std::vector<Tensor> values =
      run_epilogue_steps(product, product_attrs, e, in, [](OpId id, const std::vector<Tensor>& args, const OpAttrs& a) {
        return run_op_eager(op_def(id), args, a).at(0);
      });
  for (std::size_t k = 0; k < out.size(); ++k)
    std::memcpy(bytes_of(out[k]), bytes_of(values[k]),
                static_cast<std::size_t>(values[k].impl()->shape.num_elements()) * dtype_size(values[k].dtype()));
}

GemmEpilogue gemm_epilogue_of(const EpilogueParts& e, const std::vector<Tensor>& in, std::vector<Tensor>& out,
                              int64_t mask_ld) {
  GemmEpilogue epilogue;
  std::size_t next = 2;
  if (e.bias) epilogue.bias = data_of<float>(in[next++]);
  if (e.mask_in) epilogue.mask_in = data_of<bool>(in[next++]);
  if (e.mask_out) epilogue.mask_out = data_of<bool>(out[1]);
  epilogue.relu = e.relu;
  epilogue.mask_ld = mask_ld;
  return epilogue;
}

}  // namespace tg::detail
