// TG_UNROLL(n): unroll the next loop n times (GCC's and clang's `#pragma GCC unroll n`), where a
// kernel keeps its accumulators in registers only when the loop is unrolled.
//
// Under AddressSanitizer the loops stay rolled: clang takes minutes to instrument the unrolled
// bodies (implicit_gemm_avx512.cpp: 43 s rolled, more than 9 min unrolled, the longest step of
// `./tg test` on a fresh machine), while each memory access is checked the same way in either form.
#pragma once

#if defined(__SANITIZE_ADDRESS__)  // GCC
#define TG_ROLLED_LOOPS 1
#elif defined(__has_feature)  // clang
#if __has_feature(address_sanitizer)
#define TG_ROLLED_LOOPS 1
#endif
#endif

#define TG_PRAGMA_TEXT(text) _Pragma(#text)
#ifdef TG_ROLLED_LOOPS
#define TG_UNROLL(n)
#else
#define TG_UNROLL(n) TG_PRAGMA_TEXT(GCC unroll n)
#endif
