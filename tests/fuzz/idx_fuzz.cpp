// libFuzzer target: the IDX parser (plain and gzipped) on arbitrary bytes. A typed tg::Error is
// the parser saying no; anything else - a crash, a sanitizer report, another exception, a hang -
// is a bug.
#include <cstddef>
#include <cstdint>

#include "data/idx.h"
#include "tracegraph/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  try {
    tg::detail::parse_idx(data, size, "fuzz.idx");
  } catch (const tg::Error&) {
  }
  return 0;
}
