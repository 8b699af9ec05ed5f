// The best straightforward hand-written C++ for the workloads, and the loops that measure this
// machine's limits (memory bandwidth, FMA peak). Defined in reference_cpp.cpp, the one file of
// tg_bench compiled with -O3 -march=native -ffast-math -fopenmp (bench/CMakeLists.txt), so that
// the compiler may vectorise std::tanh through glibc's libmvec and spread loops over cores.
//
// The interface is plain pointers and integers on purpose: an inline function (a template from
// <vector>, <algorithm>, a tracegraph header) instantiated in that file would be compiled with
// -ffast-math and -march=native, and the linker may keep that copy for every other file too.
#pragma once
#include <cstdint>

namespace tg_bench {

// The 100-op chain: (x * 1.01, x + 0.5, act) x 33 = 99 ops. workloads.h builds the same chain
// from tracegraph ops.
inline constexpr int kChainRounds = 33;

namespace reference {

// y = the chain of x, n floats, each element kept in a register through all 99 ops; on
// `threads` OpenMP threads when n is large enough to pay for waking them, else serial.
void tanh_chain(const float* x, float* y, std::int64_t n, int threads);
void relu_chain(const float* x, float* y, std::int64_t n, int threads);

// y[i] = s * x[i] on `threads` threads: one read and one write of each of n floats, the least
// traffic any one-pass elementwise kernel over n floats has.
void scale_copy(const float* x, float* y, std::int64_t n, float s, int threads);

// Runs `iterations` steps of independent fused multiply-add chains on each of `threads`
// threads, every value in a register, and returns the floating-point operations done (an FMA
// counts as 2). *sink receives a value that depends on every chain, so none can be removed.
double fma_loop(std::int64_t iterations, int threads, float* sink);

// Floats per vector register fma_loop uses (16 with AVX-512, 8 with AVX2, 1 without either).
int fma_lanes();

// NHWC convolution, stride 1, SAME padding, HWIO filter (kh, kw, c, oc): on `threads` OpenMP
// threads, each taking blocks of 4 images: im2col of the block into its part of col, then one
// single-threaded cblas_sgemm. col: scratch of threads * (4 * h * w * kh * kw * c + kh * kw * c *
// oc) floats.
void conv2d_same(const float* x, int n, int h, int w, int c, const float* f, int kh, int kw, int oc,
                 float* y, float* col, int threads);
// Its gradients given dy (n, h, w, oc), by the same blocks: df = im2col(x)^T dy (a partial per
// thread, summed at the end), and when dx is not null, dx = col2im(dy f^T).
void conv2d_same_backward(const float* x, int n, int h, int w, int c, const float* f, int kh, int kw,
                          int oc, const float* dy, float* df, float* dx, float* col, int threads);

// The same convolution and gradients as direct loop nests: per output pixel, every window tap
// and input channel adds its product to the output channels (the innermost loop, which the
// compiler vectorises); no im2col. The gradients take the same loops: df summed per thread into
// part of scratch (threads * kh * kw * c * oc floats), dx scattered from each output pixel.
void conv2d_same_direct(const float* x, int n, int h, int w, int c, const float* f, int kh, int kw, int oc,
                        float* y, int threads);
void conv2d_same_direct_backward(const float* x, int n, int h, int w, int c, const float* f, int kh, int kw,
                                 int oc, const float* dy, float* df, float* dx, float* scratch, int threads);

}  // namespace reference
}  // namespace tg_bench
