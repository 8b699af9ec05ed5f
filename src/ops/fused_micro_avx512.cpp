// The fused kernel's arithmetic loops built for AVX-512 (chosen at run time by fused_plan.cpp).
// Compiled with -mavx512f -mavx512vl -mavx512bw -ffp-contract=off: no FMA contraction, so every
// result is the same IEEE operation the baseline kernels perform.
#include "ops/fused_micro.h"

#define TG_FUSED_NS fused_avx512
#define TG_FUSED_LIBM 0
#define TG_FUSED_CHAIN 1
#include "ops/fused_micro.inc"
