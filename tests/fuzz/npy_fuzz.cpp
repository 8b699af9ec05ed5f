// libFuzzer target: the .npy parser on arbitrary bytes. A typed tg::Error is the parser saying
// no; anything else - a crash, a sanitizer report, another exception, a hang - is a bug.
#include <cstddef>
#include <cstdint>

#include "data/npy.h"
#include "tracegraph/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  try {
    const tg::Tensor t = tg::detail::parse_npy(data, size, "fuzz.npy");
    // What parsed must write back and parse again to the same tensor.
    const std::string again = tg::detail::encode_npy(t);
    const tg::Tensor u =
        tg::detail::parse_npy(reinterpret_cast<const uint8_t*>(again.data()), again.size(), "again.npy");
    if (u.to_string() != t.to_string() || u.dtype() != t.dtype()) __builtin_trap();
  } catch (const tg::Error&) {
  }
  return 0;
}
