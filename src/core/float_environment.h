// The floating-point environment every kernel runs in, as TensorFlow's: denormals flushed to zero
// (results: FTZ; inputs: DAZ) and rounding to nearest, whatever the caller's thread has set.
// TensorFlow sets the same around each kernel (eager or in a graph), in its pools' threads and
// for constant folding; XLA's CPU executables do too. Besides matching TF's values, the flush
// keeps training at full speed: an Intel core takes a microcode assist of ~150 cycles for each
// vector instruction that meets a subnormal, and Adam's moments of units whose gradient stays
// zero decay into subnormals after ~600 steps (the demo's step then ran 1.7 -> 3.5 ms).
//
// The scopes are where kernels start: an eager op (ops/dispatch.cpp), a plan's run
// (runtime/executor.cpp); a pool job runs under its caller's environment (core/thread_pool.cpp).
// Kernel code called directly (detail:: functions in tests) runs under the caller's own.
#pragma once

#include <xmmintrin.h>

#include <atomic>
#include <cstdint>

namespace tg::detail {

/// Whether the scopes below set the kernels' environment (the default) or leave the caller's.
/// Off only for tests that pin the math routines' IEEE bits through the ops, subnormals included.
inline std::atomic<bool> kernel_float_environment_enabled{true};
/// Turns the kernels' environment on or off; returns the previous setting.
inline bool set_kernel_float_environment(bool enabled) { return kernel_float_environment_enabled.exchange(enabled); }

/// The MXCSR bits of the kernels' environment over `csr`: FTZ and DAZ set, rounding to nearest;
/// the exception masks and flags are the caller's.
inline uint32_t kernel_csr(uint32_t csr) {
  constexpr uint32_t kFlushToZero = 0x8000, kDenormalsAreZero = 0x0040, kRounding = 0x6000;
  return (csr & ~kRounding) | kFlushToZero | kDenormalsAreZero;
}

/// Sets the kernels' environment on this thread for its lifetime and puts the caller's back
/// after (only its exception flags raised meanwhile stay, as TF's scopes leave them). Nested
/// scopes cost one read of MXCSR.
class KernelFloatEnvironment {
 public:
  KernelFloatEnvironment() : saved_(_mm_getcsr()) {
    const uint32_t want = kernel_float_environment_enabled.load(std::memory_order_relaxed) ? kernel_csr(saved_) : saved_;
    if (want != saved_) _mm_setcsr(want);
  }
  ~KernelFloatEnvironment() {
    const uint32_t now = _mm_getcsr();
    constexpr uint32_t kFlags = 0x003F;
    const uint32_t restored = (saved_ & ~kFlags) | (now & kFlags);
    if (restored != now) _mm_setcsr(restored);
  }
  KernelFloatEnvironment(const KernelFloatEnvironment&) = delete;
  KernelFloatEnvironment& operator=(const KernelFloatEnvironment&) = delete;

 private:
  uint32_t saved_;
};

}  // namespace tg::detail
