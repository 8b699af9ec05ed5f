// The part the .tgx and ONNX fuzz targets share: load the bytes, make what loaded describe itself
// (signatures, each optimised graph printed), and tell the loader saying no (a tg::Error) from a
// bug (a tg::InternalError: an invariant the loader should have checked first, which traps).
#pragma once

#include "tracegraph/errors.h"
#include "tracegraph/export.h"

template <class Load>
int fuzz_loaded_function(Load&& load) {
  try {
    const tg::LoadedFunction f = load();
    for (const auto& s : f.signatures()) (void)s;
    for (const auto& cf : f.concrete_functions()) (void)cf.optimized_graph().to_string();
  } catch (const tg::InternalError&) {
    __builtin_trap();
  } catch (const tg::Error&) {
  }
  return 0;
}
