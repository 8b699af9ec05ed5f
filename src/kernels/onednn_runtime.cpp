#include "kernels/onednn_runtime.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace tg::detail::onednn_runtime {
namespace {

struct OmpThreadCalls {
  void (*set)(int) = nullptr;
  int (*get)() = nullptr;
};

template <class Fn>
Fn lookup(const char* name) {
  Fn fn = nullptr;
  if (void* sym = dlsym(RTLD_DEFAULT, name)) std::memcpy(&fn, &sym, sizeof fn);
  return fn;
}

const OmpThreadCalls& omp_calls() {
  static const OmpThreadCalls calls{lookup<void (*)(int)>("omp_set_num_threads"), lookup<int (*)()>("omp_get_max_threads")};
  return calls;
}

}  // namespace

bool omp_controllable() { return omp_calls().set && omp_calls().get; }

OneOmpThread::OneOmpThread() : saved_(omp_calls().get()) {
  if (saved_ != 1) omp_calls().set(1);
}

OneOmpThread::~OneOmpThread() {
  if (saved_ != 1) omp_calls().set(saved_);
}

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

void* thread_buffer(ScratchSlot slot, std::size_t bytes) {
  thread_local std::vector<float> buffers[kScratchSlots];
  std::vector<float>& b = buffers[slot];
  const std::size_t floats = bytes / sizeof(float) + 16;
  if (b.size() < floats) b.resize(floats);
  const auto at = reinterpret_cast<std::uintptr_t>(b.data());
  return reinterpret_cast<void*>((at + 63) & ~std::uintptr_t{63});
}

}  // namespace tg::detail::onednn_runtime
