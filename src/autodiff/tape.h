// The tape machinery behind tg::GradientTape, as the rest of the library sees it. Tapes hear of
// ops and of calls of traced functions through the observers of src/ops/op.h and
// src/trace/concrete.h, installed on a thread while a tape records there.
#pragma once
#include <cstdint>

namespace tg::detail {

class ConcreteImpl;

/// How many times the cached backward function of `cf` has been traced (0 before its first
/// call under a tape). For tests: the backward graph is built once per concrete function.
int64_t backward_tracing_count(const ConcreteImpl& cf);

}  // namespace tg::detail
