// libFuzzer target: tg::import_onnx on arbitrary bytes. A tg::Error is the importer saying no; a
// tg::InternalError (an invariant the importer should have checked first), a crash, a sanitizer
// report, another exception or a hang is a bug. Seeded with small models (tests/fuzz/corpus/onnx).
#include <cstddef>
#include <cstdint>

#include "loaded_fuzz.h"
#include "tracegraph/onnx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  // Small limits: a valid model may ask for large tensors, which is not what is tested here.
  tg::OnnxImportOptions options;
  options.max_tensor_bytes = 1 << 20;
  options.max_nodes = 2000;
  options.max_rank = 8;
  options.initializers_as_variables = (size % 2) == 0;
  return fuzz_loaded_function([&] { return tg::import_onnx_from_memory(data, size, options); });
}
