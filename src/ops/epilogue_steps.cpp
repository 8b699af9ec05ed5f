#include "ops/epilogue_steps.h"

#include <cstring>

#include "core/tensor_impl.h"

namespace tg::detail {

std::vector<ValueType> infer_epilogue_node(const char* op, OpId product, const OpAttrs& product_attrs,
                                           const EpilogueParts& e, const std::vector<ValueType>& in) {
  if (in.size() != e.arity())
    op_error<InvalidArgumentError>(op, "expected ", e.arity(), " inputs, got ", in.size(), "; ", op,
                                   " nodes are made by the graph optimiser only");
  for (std::size_t i = 0; i < 2; ++i)
    if (in[i].dtype != DType::Float32)
      op_error<InvalidArgumentError>(op, "expected float32 operands, got input ", i, " ", describe(in[i]));
  return run_epilogue_steps(product, product_attrs, e, in, [](OpId id, const std::vector<ValueType>& args, const OpAttrs& a) {
    return op_def(id).infer(args, a).at(0);
  });
}

bool epilogue_fits(const EpilogueParts& e, const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                   const TensorShape& product) {
  return out[0].impl()->shape == product &&
         (!e.bias || in[EpilogueParts::kBiasInput].impl()->shape == TensorShape({product.dims().back()})) &&
         (!e.mask_in || in[e.mask_input()].impl()->shape == product);
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
  if (e.bias) epilogue.bias = data_of<float>(in[EpilogueParts::kBiasInput]);
  if (e.mask_in) epilogue.mask_in = data_of<bool>(in[e.mask_input()]);
  if (e.mask_out) epilogue.mask_out = data_of<bool>(out[1]);
  epilogue.relu = e.relu;
  epilogue.mask_ld = mask_ld;
  return epilogue;
}

}  // namespace tg::detail
