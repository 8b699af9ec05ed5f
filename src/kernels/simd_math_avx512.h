// The AVX-512 math routines one register at a time, for code compiled for AVX-512 that keeps
// values in registers (the fused kernel's register chain, fused_micro.inc). Each is the very
// function that simd_math.h's AVX-512 routine applies to every 16 floats, so a caller gets the
// same bits as the routine without storing its registers to memory and loading them back.
// Only for translation units built with -mavx512f, and only called after the run-time check.
#pragma once
#include <immintrin.h>

#include "kernels/simd_math.h"

namespace tg::detail::simd {

using RegisterFn = __m512 (*)(__m512);
/// One member per routine of TG_SIMD_MATH_ROUTINES, named as in MathFns.
struct Avx512RegisterFns {
#define TG_SIMD_REGISTER_MEMBER(Op, F, routine, ...) RegisterFn routine;
  TG_SIMD_MATH_ROUTINES(TG_SIMD_REGISTER_MEMBER)
#undef TG_SIMD_REGISTER_MEMBER
};
extern const Avx512RegisterFns kAvx512RegisterFns;

}  // namespace tg::detail::simd
