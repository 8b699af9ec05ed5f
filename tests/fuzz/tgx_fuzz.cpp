// libFuzzer target: tg::load on arbitrary bytes. A tg::Error is the loader saying no; a
// tg::InternalError (an invariant the loader should have checked first), a crash, a sanitizer
// report, another exception or a hang is a bug. Seeded with the golden files.
#include <cstddef>
#include <cstdint>

#include "loaded_fuzz.h"
#include "tracegraph/export.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  // Small limits: a valid file may ask for large tensors, which is not what is tested here.
  tg::LoadOptions options;
  options.max_tensor_bytes = 1 << 20;
  options.max_nodes = 20000;
  // Mutated files rarely keep their CRC32s: with checksums on, the fuzzer would explore little
  // beyond them. Checked files are exercised by the seeds.
  options.verify_checksums = (size % 2) == 0;
  return fuzz_loaded_function([&] { return tg::load_from_memory(data, size, options); });
}
