// matmul: values for every dtype, transposes, batch broadcasting, empty dims, shape inference
// with unknown dims, and a property check against a naive triple loop.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>

#include "ops/epilogue_steps.h"
#include "kernels/gemm.h"
#include "kernels/implicit_gemm.h"
#include "ops/op.h"
#include "support/op_case.h"
#include "support/test_util.h"

namespace tg {
namespace {

auto mm(bool ta = false, bool tb = false) {
  return [ta, tb](const std::vector<Tensor>& in) { return matmul(in[0], in[1], ta, tb); };
}

template <class T>
Tensor filled(const TensorShape& shape, T value) {
  return constant(std::vector<T>(static_cast<std::size_t>(shape.num_elements()), value), shape,
                  dtype_of_v<T>);
}

// matmul_epilogue as the optimiser makes it, recorded by hand: output `k` of the node.
auto mm_epilogue(detail::MatMulEpilogueAttrs attrs, std::size_t k) {
  return [attrs, k](const std::vector<Tensor>& in) { return detail::apply_op(detail::OpId::MatMulEpilogue, in, attrs).at(k); };
}

TG_OP_CASES(matmul_epilogue) {
  const Tensor a = constant({{1.f, -2.f, 0.5f}, {-1.f, 3.f, 2.f}});
  const Tensor b = constant({{0.5f, -1.f}, {1.f, 0.25f}, {-2.f, 1.f}});  // a b = {{-2.5, -1}, {-1.5, 3.75}}
  const Tensor bias = constant({1.f, -1.f});
  const Tensor mask = constant({{true, false}, {true, true}});
  return {
      {"matmul_epilogue", "relu(a b + bias)", mm_epilogue({.bias = true, .mask_out = true, .relu = true}, 0),
       {a, b, bias}, constant({{0.f, 0.f}, {0.f, 2.75f}})},
      {"matmul_epilogue", "the mask a b + bias > 0", mm_epilogue({.bias = true, .mask_out = true, .relu = true}, 1),
       {a, b, bias}, constant({{false, false}, {false, true}})},
      {"matmul_epilogue", "where(mask, a b^T, 0)", mm_epilogue({.transpose_b = true, .mask_in = true}, 0),
       {a, transpose(b, {1, 0}), mask}, constant({{-2.5f, 0.f}, {-1.5f, 3.75f}})},
      {"matmul_epilogue", "the column sums of where(mask, a b, 0)", mm_epilogue({.mask_in = true, .column_sums = true}, 1),
       {a, b, mask}, constant({-4.f, 3.75f})},
      {"matmul_epilogue", "the column sums of a b + bias, kept as a row",
       mm_epilogue({.bias = true, .column_sums = true, .sums_keepdims = true}, 1), {a, b, bias}, constant({{-2.f, 0.75f}})},
  };
}

TG_OP_CASES(matmul) {
  constexpr int64_t i64max = std::numeric_limits<int64_t>::max();
  constexpr int64_t i64min = std::numeric_limits<int64_t>::min();
  return {
      {"matmul", "float32 (2,3)x(3,2)", mm(),
       {constant({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}}),
        constant({{7.f, 8.f}, {9.f, 10.f}, {11.f, 12.f}})},
       constant({{58.f, 64.f}, {139.f, 154.f}})},
      {"matmul", "float64 (2,3)x(3,2)", mm(),
       {constant({{1., 2., 3.}, {4., 5., 6.}}, float64),
        constant({{7., 8.}, {9., 10.}, {11., 12.}}, float64)},
       constant({{58., 64.}, {139., 154.}}, float64)},
      {"matmul", "int32 (2,2)x(2,2) with negatives", mm(),
       {constant({{1, -2}, {3, 4}}), constant({{5, 6}, {-7, 8}})},
       constant({{19, -10}, {-13, 50}})},
      {"matmul", "int32 wraps around on overflow", mm(),
       {constant({{2147483647, 1}, {65536, 0}}), constant({{1}, {1}})},
       constant({{-2147483647 - 1}, {65536}})},
      {"matmul", "int32 65536*65536 wraps to 0", mm(),
       {constant({{65536}}), constant({{65536}})}, constant({{0}})},
      {"matmul", "int64 (2,2)x(2,3)", mm(),
       {constant({{1, 2}, {3, 4}}, int64), constant({{1, 0, -1}, {2, 1, 0}}, int64)},
       constant({{5, 2, -1}, {11, 4, -3}}, int64)},
      {"matmul", "int64 wraps around on overflow", mm(),
       {constant(std::vector<int64_t>{i64max, 1}, {1, 2}),
        constant(std::vector<int64_t>{1, 1}, {2, 1})},
       constant(std::vector<int64_t>{i64min}, {1, 1})},
      {"matmul", "float32 transpose_a", mm(true, false),
       {constant({{1.f, 4.f}, {2.f, 5.f}, {3.f, 6.f}}),
        constant({{7.f, 8.f}, {9.f, 10.f}, {11.f, 12.f}})},
       constant({{58.f, 64.f}, {139.f, 154.f}})},
      {"matmul", "float32 transpose_b", mm(false, true),
       {constant({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}}),
        constant({{7.f, 9.f, 11.f}, {8.f, 10.f, 12.f}})},
       constant({{58.f, 64.f}, {139.f, 154.f}})},
      {"matmul", "float64 transpose_a and transpose_b", mm(true, true),
       {constant({{1., 4.}, {2., 5.}, {3., 6.}}, float64),
        constant({{7., 9., 11.}, {8., 10., 12.}}, float64)},
       constant({{58., 64.}, {139., 154.}}, float64)},
      {"matmul", "int32 transpose_a", mm(true, false),
       {constant({{1, 4}, {2, 5}, {3, 6}}), constant({{7, 8}, {9, 10}, {11, 12}})},
       constant({{58, 64}, {139, 154}})},
      {"matmul", "int64 transpose_b", mm(false, true),
       {constant({{1, 2, 3}, {4, 5, 6}}, int64), constant({{7, 9, 11}, {8, 10, 12}}, int64)},
       constant({{58, 64}, {139, 154}}, int64)},
      {"matmul", "int32 transpose_a and transpose_b", mm(true, true),
       {constant({{1, 4}, {2, 5}, {3, 6}}), constant({{7, 9, 11}, {8, 10, 12}})},
       constant({{58, 64}, {139, 154}})},
      {"matmul", "float32 batched (2,2,2)x(2,2,2)", mm(),
       {constant(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}),
        constant(std::vector<float>{1, 0, 0, 1, 0, 1, 1, 0}, {2, 2, 2})},
       constant(std::vector<float>{1, 2, 3, 4, 6, 5, 8, 7}, {2, 2, 2})},
      {"matmul", "int64 batched (2,2,2)x(2,2,2)", mm(),
       {constant({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}}, int64),
        constant({{{1, 0}, {0, 1}}, {{0, 1}, {1, 0}}}, int64)},
       constant({{{1, 2}, {3, 4}}, {{6, 5}, {8, 7}}}, int64)},
      {"matmul", "float32 batch broadcast (2,1,1,2)x(3,2,1)", mm(),
       {constant(std::vector<float>{1, 2, 3, 4}, {2, 1, 1, 2}),
        constant(std::vector<float>{1, 1, 1, 0, 0, 2}, {3, 2, 1})},
       constant(std::vector<float>{3, 1, 4, 7, 3, 8}, {2, 3, 1, 1})},
      {"matmul", "int32 batch broadcast (2,1,1,2)x(3,2,1)", mm(),
       {constant(std::vector<int32_t>{1, 2, 3, 4}, {2, 1, 1, 2}),
        constant(std::vector<int32_t>{1, 1, 1, 0, 0, 2}, {3, 2, 1})},
       constant(std::vector<int32_t>{3, 1, 4, 7, 3, 8}, {2, 3, 1, 1})},
      {"matmul", "float32 batched a x matrix b (2,2,2)x(2,1)", mm(),
       {constant(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}), constant({{2.f}, {1.f}})},
       constant(std::vector<float>{4, 10, 16, 22}, {2, 2, 1})},
      {"matmul", "float64 batched a x matrix b, transpose_b (2,1,2)x(3,2)^T", mm(false, true),
       {constant(std::vector<double>{1, 2, 3, 4}, {2, 1, 2}, float64),
        constant({{1., 0.}, {0., 1.}, {1., 1.}}, float64)},
       constant(std::vector<double>{1, 2, 3, 3, 4, 7}, {2, 1, 3}, float64)},
      {"matmul", "float32 matrix a x batched b (1,2)x(2,2,1)", mm(),
       {constant({{1.f, 2.f}}), constant(std::vector<float>{1, 2, 3, 4}, {2, 2, 1})},
       constant(std::vector<float>{5, 11}, {2, 1, 1})},
      {"matmul", "float32 batched transpose_a with broadcast (1,2,2)^T x (2,2,2)", mm(true, false),
       {constant(std::vector<float>{1, 3, 2, 4}, {1, 2, 2}),
        constant(std::vector<float>{1, 0, 0, 1, 2, 0, 0, 2}, {2, 2, 2})},
       constant(std::vector<float>{1, 2, 3, 4, 2, 4, 6, 8}, {2, 2, 2})},
      {"matmul", "float32 K=0 gives zeros", mm(), {zeros({2, 0}), zeros({0, 3})},
       filled<float>({2, 3}, 0.f)},
      {"matmul", "float64 K=0 transposed gives zeros", mm(true, true),
       {zeros({0, 2}, float64), zeros({3, 0}, float64)}, filled<double>({2, 3}, 0.)},
      {"matmul", "int32 K=0 gives zeros", mm(), {zeros({2, 0}, int32), zeros({0, 3}, int32)},
       filled<int32_t>({2, 3}, 0)},
      {"matmul", "int64 K=0 gives zeros", mm(), {zeros({1, 0}, int64), zeros({0, 2}, int64)},
       filled<int64_t>({1, 2}, 0)},
      {"matmul", "float32 M=0", mm(), {zeros({0, 3}), ones({3, 2})}, zeros({0, 2})},
      {"matmul", "float32 N=0", mm(), {ones({2, 3}), zeros({3, 0})}, zeros({2, 0})},
      {"matmul", "int32 M=0 and N=0", mm(), {zeros({0, 3}, int32), zeros({3, 0}, int32)},
       zeros({0, 0}, int32)},
      {"matmul", "float32 empty batch (0,2,2)x(2,2)", mm(), {zeros({0, 2, 2}), ones({2, 2})},
       zeros({0, 2, 2})},
      {"matmul", "float32 1x1", mm(), {constant({{3.f}}), constant({{4.f}})}, constant({{12.f}})},
      {"matmul", "float64 1x1", mm(), {constant({{3.}}, float64), constant({{-4.}}, float64)},
       constant({{-12.}}, float64)},
      {"matmul", "int64 1x1", mm(), {constant({{3}}, int64), constant({{5}}, int64)},
       constant({{15}}, int64)},
      {"matmul", "float32 outer product (3,1)x(1,2)", mm(),
       {constant({{1.f}, {2.f}, {3.f}}), constant({{4.f, 5.f}})},
       constant({{4.f, 5.f}, {8.f, 10.f}, {12.f, 15.f}})},
  };
}

// ---- property check against a naive triple loop in double ----

struct Shapes {
  std::vector<int64_t> a, b;
  bool ta, tb;
};

std::vector<int64_t> matmul_shape(const Shapes& s) {
  const std::size_t ra = s.a.size(), rb = s.b.size();
  const std::size_t r = std::max(ra, rb) - 2;
  std::vector<int64_t> out(r);
  for (std::size_t i = 0; i < r; ++i) {
    const int64_t x = i < ra - 2 ? s.a[ra - 3 - i] : 1;
    const int64_t y = i < rb - 2 ? s.b[rb - 3 - i] : 1;
    out[r - 1 - i] = x == 1 ? y : x;
  }
  out.push_back(s.ta ? s.a[ra - 1] : s.a[ra - 2]);
  out.push_back(s.tb ? s.b[rb - 2] : s.b[rb - 1]);
  return out;
}

int64_t count(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

// Element offset of matrix entry (r, c) of the operand with dims d at output batch index bi.
int64_t offset(const std::vector<int64_t>& d, const std::vector<int64_t>& out_batch,
               const std::vector<int64_t>& bi, int64_t r, int64_t c) {
  const std::size_t rank = d.size();
  int64_t off = 0, stride = d[rank - 2] * d[rank - 1];
  for (std::size_t i = 0; i + 2 < rank; ++i) {
    const std::size_t dim = rank - 3 - i;                 // operand batch dim
    const std::size_t odim = out_batch.size() - 1 - i;    // aligned output batch dim
    const int64_t idx = d[dim] == 1 ? 0 : bi[odim];
    off += idx * stride;
    stride *= d[dim];
  }
  return off + r * d[rank - 1] + c;
}

std::vector<double> naive_matmul(const Shapes& s, const std::vector<double>& a,
                                 const std::vector<double>& b) {
  const auto out = matmul_shape(s);
  const std::vector<int64_t> batch(out.begin(), out.end() - 2);
  const int64_t m = out[out.size() - 2], n = out.back();
  const int64_t k = s.ta ? s.a[s.a.size() - 2] : s.a.back();
  std::vector<double> c;
  std::vector<int64_t> bi(batch.size(), 0);
  for (int64_t flat = 0; flat < count(batch); ++flat) {
    int64_t rem = flat;
    for (std::size_t i = batch.size(); i-- > 0;) {
      bi[i] = rem % batch[i];
      rem /= batch[i];
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double x = a[offset(s.a, batch, bi, s.ta ? p : i, s.ta ? i : p)];
          const double y = b[offset(s.b, batch, bi, s.tb ? j : p, s.tb ? p : j)];
          sum += x * y;
        }
        c.push_back(sum);
      }
  }
  return c;
}

const std::vector<Shapes>& property_shapes() {
  static const std::vector<Shapes> shapes = {
      {{5, 7}, {7, 3}, false, false},
      {{7, 5}, {7, 3}, true, false},
      {{5, 7}, {3, 7}, false, true},
      {{7, 5}, {3, 7}, true, true},
      {{1, 13}, {13, 1}, false, false},
      {{64, 33}, {33, 17}, false, false},
      {{130, 90}, {110, 130}, true, true},
      {{3, 4, 6}, {3, 6, 2}, false, false},
      {{2, 1, 3, 4}, {5, 4, 6}, false, false},
      {{2, 1, 4, 3}, {5, 6, 4}, true, true},
      {{4, 6, 5}, {5, 3}, false, false},   // single-gemm path: a's batch folds into rows
      {{4, 6, 5}, {3, 5}, false, true},
      {{4, 5, 6}, {5, 3}, true, false},
      {{6, 5}, {2, 3, 5, 4}, false, false},
      {{1, 3, 2, 5}, {4, 1, 5, 2}, false, false},
      {{3, 0, 4}, {4, 5}, false, false},
      {{3, 4}, {0, 4, 5}, false, false},
  };
  return shapes;
}

std::string describe(const Shapes& s) {
  return TensorShape(s.a).to_string() + (s.ta ? "^T" : "") + " x " + TensorShape(s.b).to_string() +
         (s.tb ? "^T" : "");
}

template <class T>
Tensor random_tensor(const std::vector<int64_t>& dims, std::mt19937_64& rng,
                     std::vector<double>& values) {
  values.resize(static_cast<std::size_t>(count(dims)));
  std::vector<T> v(values.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    if constexpr (std::is_floating_point_v<T>)
      v[i] = static_cast<T>(std::uniform_real_distribution<double>(-1.0, 1.0)(rng));
    else
      v[i] = static_cast<T>(std::uniform_int_distribution<int>(-100, 100)(rng));
    values[i] = static_cast<double>(v[i]);
  }
  return constant(v, TensorShape(dims), dtype_of_v<T>);
}

template <class T>
void check_against_naive(double tol) {
  std::mt19937_64 rng(1234);
  for (const Shapes& s : property_shapes()) {
    SCOPED_TRACE(describe(s) + " " + to_string(dtype_of_v<T>));
    std::vector<double> av, bv;
    Tensor a = random_tensor<T>(s.a, rng, av);
    Tensor b = random_tensor<T>(s.b, rng, bv);
    const std::vector<double> ref = naive_matmul(s, av, bv);
    std::vector<T> ref_t(ref.begin(), ref.end());
    Tensor expected = constant(ref_t, TensorShape(matmul_shape(s)), dtype_of_v<T>);
    EXPECT_TENSOR_NEAR(matmul(a, b, s.ta, s.tb), expected, tol);
  }
}

TEST(MatMul, Float32MatchesNaiveLoop) { check_against_naive<float>(1e-4); }
// Where the CPU has AVX-512, float32 runs on tracegraph's own kernels (kernels/implicit_gemm.h);
// OpenBLAS's path is checked too, so that both are tested on such a machine.
TEST(MatMul, Float32OnOpenBlasMatchesNaiveLoop) {
  const bool was = detail::set_own_avx512_kernels(false);
  check_against_naive<float>(1e-4);
  detail::set_own_avx512_kernels(was);
}
TEST(MatMul, Float64MatchesNaiveLoop) { check_against_naive<double>(1e-12); }

// Runs fn(own, threads) with tracegraph's AVX-512 kernels on and off (OpenBLAS), each on one
// thread and on two, and restores both settings.
template <class Fn>
void on_every_path(Fn&& fn) {
  const int threads_before = config::num_threads();
  for (const bool own : {true, false})
    for (const int threads : {1, 2}) {
      const bool was = detail::set_own_avx512_kernels(own);
      config::set_num_threads(threads);
      fn(own, threads);
      detail::set_own_avx512_kernels(was);
    }
  config::set_num_threads(threads_before);
}

// detail::gemm itself, on the edges matmul does not reach: leading dims wider than the matrix,
// accumulation into C, sums longer than one pass of the AVX-512 kernel (512), every transpose,
// and products large enough to be split across the pool, on one thread and on two (where the own
// kernels split {64, 130, 513} and {96, 256, 784} over k). Own kernels and OpenBLAS both.
TEST(Gemm, EveryLayoutAccumulatesAndMatchesADoubleLoop) {
  struct Case { int m, n, k; bool ta, tb, accumulate; };
  const std::vector<Case> cases = {
      {1, 1, 1, false, false, false},     {7, 17, 5, true, false, true},     {33, 65, 600, false, true, false},
      {64, 130, 513, true, true, true},    {200, 70, 300, false, false, true}, {5, 3, 1030, true, false, false},
      {96, 256, 784, false, false, false}, {784, 64, 96, true, false, false}, {64, 784, 256, false, true, true},
      {64, 256, 300, false, true, true},  // B^T packed with padded rows (n and the halves multiples of 64)
      {200, 300, 100, false, false, true},  // B packed into panels, the last one partial (multiply_packed)
  };
  std::mt19937_64 rng(77);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  on_every_path([&](bool own, int threads) {
    for (const Case& c : cases) {
      SCOPED_TRACE(::testing::Message() << "m " << c.m << " n " << c.n << " k " << c.k << " ta " << c.ta << " tb "
                                      << c.tb << " accumulate " << c.accumulate << " own " << own << " threads "
                                      << threads);
      // Stored shapes with 3 spare columns each: op(A) is m x k, op(B) is k x n.
      const int a_rows = c.ta ? c.k : c.m, a_cols = c.ta ? c.m : c.k, lda = a_cols + 3;
      const int b_rows = c.tb ? c.n : c.k, b_cols = c.tb ? c.k : c.n, ldb = b_cols + 3, ldc = c.n + 3;
      std::vector<float> a(static_cast<std::size_t>(a_rows) * lda), b(static_cast<std::size_t>(b_rows) * ldb),
          out(static_cast<std::size_t>(c.m) * ldc);
      for (float& v : a) v = dist(rng);
      for (float& v : b) v = dist(rng);
      for (float& v : out) v = dist(rng);
      const std::vector<float> before = out;
      detail::gemm<float>(c.m, c.n, c.k, a.data(), lda, c.ta, b.data(), ldb, c.tb, out.data(), ldc, c.accumulate);
      for (int i = 0; i < c.m; ++i)
        for (int j = 0; j < ldc; ++j) {
          const std::size_t at = static_cast<std::size_t>(i) * ldc + j;
          if (j >= c.n) {  // the spare columns are never written
            ASSERT_EQ(out[at], before[at]) << "row " << i << " spare column " << j;
            continue;
          }
          double want = c.accumulate ? before[at] : 0.0;
          for (int p = 0; p < c.k; ++p) {
            const double x = a[c.ta ? static_cast<std::size_t>(p) * lda + i : static_cast<std::size_t>(i) * lda + p];
            const double y = b[c.tb ? static_cast<std::size_t>(j) * ldb + p : static_cast<std::size_t>(p) * ldb + j];
            want += x * y;
          }
          ASSERT_NEAR(out[at], want, 2e-6 * (c.k + 1)) << "row " << i << " column " << j;
        }
    }
  });
}
// The AVX-512 kernels sum every element in the same order when a product is split by rows or by
// columns, so one thread and two give the same bits: a split by columns (with a transposed B,
// each thread packs the columns it multiplies) and a split by rows. (A split over k, as for
// 64 x 784 times 784 x 256, adds two partial sums: see the next test.) Products of 32-64 rows
// by a small B are not split over k even where k >= 2 max(m, n): an LSTM step's 32 x 128 times
// 128 x 512 and its gradient's 32 x 512 times 512 x 128 (by rows, or by columns with B
// transposed), and 64 rows of a transposed A.
TEST(Gemm, OwnKernelsGiveTheSameBitsOnOneAndTwoThreads) {
  if (!detail::own_avx512_kernels()) GTEST_SKIP() << "no AVX-512 on this CPU";
  struct Case { int m, n, k; bool ta, tb; };
  const std::vector<Case> cases = {{64, 784, 256, false, true}, {784, 256, 64, true, false},
                                   {300, 96, 200, false, true}, {64, 256, 256, false, true},
                                   {32, 512, 128, false, false}, {32, 128, 512, false, false},
                                   {32, 128, 512, false, true},  {64, 256, 256, true, false},
                                   {40, 128, 512, false, false},
                                   // Rows in blocks claimed from each thread's range (the panel path):
                                   // the transformer's, and partial blocks, panels and chunks of k.
                                   {1024, 128, 512, false, true}, {1024, 512, 128, true, false},
                                   {1000, 200, 300, false, false}};
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int threads_before = config::num_threads();
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "m " << c.m << " n " << c.n << " k " << c.k << " tb " << c.tb);
    std::vector<float> a(static_cast<std::size_t>(c.m) * c.k), b(static_cast<std::size_t>(c.k) * c.n);
    for (float& v : a) v = dist(rng);
    for (float& v : b) v = dist(rng);
    const int lda = c.ta ? c.m : c.k, ldb = c.tb ? c.k : c.n;
    std::vector<float> one(static_cast<std::size_t>(c.m) * c.n), two(one.size());
    config::set_num_threads(1);
    detail::gemm<float>(c.m, c.n, c.k, a.data(), lda, c.ta, b.data(), ldb, c.tb, one.data(), c.n, false);
    config::set_num_threads(2);
    detail::gemm<float>(c.m, c.n, c.k, a.data(), lda, c.ta, b.data(), ldb, c.tb, two.data(), c.n, false);
    EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * sizeof(float)));
  }
  config::set_num_threads(threads_before);
}

// A column's sum does not depend on its neighbours: the kernels read a whole block of 64 columns
// unmasked and a partial one masked, and both sum in k order, so a column gives the same bits
// in a product 64 wide (one full block), 65 wide (a full block and a partial one) and 50 wide
// (one partial block). Products and their right-operand gradients (the convolutions' filter
// gradient), on one thread.
TEST(Gemm, FullAndPartialColumnBlocksSumInTheSameOrder) {
  if (!detail::own_avx512_kernels()) GTEST_SKIP() << "no AVX-512 on this CPU";
  const int threads_before = config::num_threads();
  config::set_num_threads(1);
  constexpr int kRows = 40, kDepth = 300, kWide = 65;
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(static_cast<std::size_t>(kRows) * kDepth), b(static_cast<std::size_t>(kDepth) * kWide);
  for (float& v : a) v = dist(rng);
  for (float& v : b) v = dist(rng);
  std::vector<float> full_product;
  std::vector<float> full_gradient;
  for (const int n : {kWide, 64, 50}) {
    SCOPED_TRACE(::testing::Message() << "n " << n);
    std::vector<float> product(static_cast<std::size_t>(kRows) * kWide, 0.0f);
    detail::gemm<float>(kRows, n, kDepth, a.data(), kDepth, false, b.data(), kWide, false, product.data(), kWide, false);
    // The gradient with respect to B of the product a (kRows x kDepth) times B: a^T times the
    // product read as the output's gradient, on the kernels directly.
    std::vector<int64_t> taps(static_cast<std::size_t>(kDepth));
    for (int i = 0; i < kDepth; ++i) taps[static_cast<std::size_t>(i)] = i;
    detail::implicit_gemm::Layout l;
    l.out_h = 1, l.out_w = kRows, l.col_step = kDepth, l.taps = taps.data(), l.k = kDepth, l.n = n;
    l.b_stride = kWide, l.c_stride = kWide;
    std::vector<float> gradient(static_cast<std::size_t>(kDepth) * kWide, 0.0f);
    detail::implicit_gemm::add_right_gradient(l, a.data(), product.data(), gradient.data());
    if (n == kWide) {
      full_product = product, full_gradient = gradient;
      continue;
    }
    for (int i = 0; i < kRows; ++i)
      for (int j = 0; j < n; ++j) {
        const std::size_t at = static_cast<std::size_t>(i) * kWide + j;
        ASSERT_EQ(std::bit_cast<uint32_t>(product[at]), std::bit_cast<uint32_t>(full_product[at])) << i << ", " << j;
      }
    // The gradient reads the product as given: compare it where both read the same columns.
    for (int i = 0; i < kDepth; ++i)
      for (int j = 0; j < n; ++j) {
        const std::size_t at = static_cast<std::size_t>(i) * kWide + j;
        ASSERT_EQ(std::bit_cast<uint32_t>(gradient[at]), std::bit_cast<uint32_t>(full_gradient[at])) << i << ", " << j;
      }
  }
  config::set_num_threads(threads_before);
}

// On one thread the AVX-512 kernels sum every element as one chain of fused multiply-adds in k
// order, from 0 or from C: products whose B is copied into panels (kPanelK = 128 entries of k and
// 64 columns at a time, the rows in blocks of 192; gemm.cpp), with a partial last panel and a
// partial last block of k and of rows, give the bits of that chain, as a B that fits L1 as it is.
TEST(Gemm, OwnKernelsSumEachElementAsOneFmaChainInKOrder) {
  if (!detail::own_avx512_kernels()) GTEST_SKIP() << "no AVX-512 on this CPU";
  const int threads_before = config::num_threads();
  config::set_num_threads(1);
  struct Case { int m, n, k; bool ta, tb, accumulate; };
  const Case cases[] = {{400, 130, 300, false, false, false}, {200, 100, 257, true, false, true},
                        {70, 200, 129, false, true, false},   {64, 64, 32, false, true, true}};
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "m " << c.m << " n " << c.n << " k " << c.k << " ta " << c.ta << " tb " << c.tb);
    const int lda = c.ta ? c.m : c.k, ldb = c.tb ? c.k : c.n;
    std::vector<float> a(static_cast<std::size_t>(c.m) * c.k), b(static_cast<std::size_t>(c.k) * c.n),
        out(static_cast<std::size_t>(c.m) * c.n);
    for (float& v : a) v = dist(rng);
    for (float& v : b) v = dist(rng);
    for (float& v : out) v = dist(rng);
    const std::vector<float> before = out;
    detail::gemm<float>(c.m, c.n, c.k, a.data(), lda, c.ta, b.data(), ldb, c.tb, out.data(), c.n, c.accumulate);
    for (int i = 0; i < c.m; ++i)
      for (int j = 0; j < c.n; ++j) {
        const std::size_t at = static_cast<std::size_t>(i) * c.n + j;
        float want = c.accumulate ? before[at] : 0.0f;
        for (int p = 0; p < c.k; ++p) {
          const float x = a[c.ta ? static_cast<std::size_t>(p) * lda + i : static_cast<std::size_t>(i) * lda + p];
          const float y = b[c.tb ? static_cast<std::size_t>(j) * ldb + p : static_cast<std::size_t>(p) * ldb + j];
          want = std::fma(x, y, want);
        }
        ASSERT_EQ(std::bit_cast<uint32_t>(out[at]), std::bit_cast<uint32_t>(want)) << "row " << i << " column " << j;
      }
  }
  config::set_num_threads(threads_before);
}

// A product split over k on two threads (k >= 2 max(m, n): each thread multiplies half of k, and
// the halves' sums are added at the end) gives the same bits on every run, and agrees with one
// thread's product to rounding.
TEST(Gemm, SplitOverKRepeatsItsBitsAndAgreesWithOneThread) {
  if (!detail::own_avx512_kernels()) GTEST_SKIP() << "no AVX-512 on this CPU";
  struct Case { int m, n, k; bool ta, tb; };
  const std::vector<Case> cases = {{128, 256, 784, false, false}, {64, 200, 600, true, true}};
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int threads_before = config::num_threads();
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "m " << c.m << " n " << c.n << " k " << c.k << " ta " << c.ta << " tb " << c.tb);
    std::vector<float> a(static_cast<std::size_t>(c.m) * c.k), b(static_cast<std::size_t>(c.k) * c.n);
    for (float& v : a) v = dist(rng);
    for (float& v : b) v = dist(rng);
    const int lda = c.ta ? c.m : c.k, ldb = c.tb ? c.k : c.n;
    std::vector<float> one(static_cast<std::size_t>(c.m) * c.n), two(one.size()), again(one.size());
    config::set_num_threads(1);
    detail::gemm<float>(c.m, c.n, c.k, a.data(), lda, c.ta, b.data(), ldb, c.tb, one.data(), c.n, false);
    config::set_num_threads(2);
    detail::gemm<float>(c.m, c.n, c.k, a.data(), lda, c.ta, b.data(), ldb, c.tb, two.data(), c.n, false);
    detail::gemm<float>(c.m, c.n, c.k, a.data(), lda, c.ta, b.data(), ldb, c.tb, again.data(), c.n, false);
    EXPECT_EQ(0, std::memcmp(two.data(), again.data(), two.size() * sizeof(float)));
    for (std::size_t i = 0; i < one.size(); ++i) ASSERT_NEAR(two[i], one[i], 1e-6f * c.k) << "element " << i;
  }
  config::set_num_threads(threads_before);
}

// An epilogue gives the bits of the product followed by the ops (add, greater, relu, where) on
// every path: one thread and two (rows, columns, a split over k), own kernels and OpenBLAS, and
// writes no column beyond n.
// The column sums an epilogue takes (a dense layer's bias gradient) are reduce_sum's over the
// rows, bit for bit, on every path: one thread's columns, two threads' halves of the columns,
// rows split between two threads (91 rows split 46 + 45 cut a leaf of reduce_sum's order, which
// is then summed after the product), the split over k, OpenBLAS's rows; rows in leaves of 32 and
// of odd sizes, and no rows at all.
TEST(Gemm, EpilogueColumnSumsGiveReduceSumsBitsOnEveryPath) {
  struct Case { int m, n, k; bool tb; };
  const std::vector<Case> cases = {{128, 256, 256, true}, {128, 256, 10, false}, {91, 64, 800, false},
                                   {300, 40, 400, false}, {33, 70, 5, false},    {0, 16, 8, false}};
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  on_every_path([&](bool own, int threads) {
    for (const Case& c : cases) {
      SCOPED_TRACE(::testing::Message() << "m " << c.m << " n " << c.n << " k " << c.k << " own " << own << " threads " << threads);
      std::vector<float> a(static_cast<std::size_t>(c.m) * c.k), b(static_cast<std::size_t>(c.k) * c.n);
      for (float& v : a) v = dist(rng);
      for (float& v : b) v = dist(rng);
      const std::size_t mn = static_cast<std::size_t>(c.m) * c.n;
      std::unique_ptr<bool[]> mask(new bool[mn]);
      for (std::size_t i = 0; i < mn; ++i) mask[i] = dist(rng) > -0.5f;
      std::vector<float> plain(mn), fused(mn), sums(static_cast<std::size_t>(c.n), 7.0f);
      detail::GemmEpilogue e;
      e.mask_in = mask.get(), e.mask_ld = c.n;
      detail::gemm<float>(c.m, c.n, c.k, a.data(), c.k, false, b.data(), c.tb ? c.k : c.n, c.tb, plain.data(), c.n, false, &e);
      detail::EpilogueColumnSums column_sums(c.m, c.n);
      e.column_sums = column_sums.leaves();
      detail::gemm<float>(c.m, c.n, c.k, a.data(), c.k, false, b.data(), c.tb ? c.k : c.n, c.tb, fused.data(), c.n, false, &e);
      column_sums.finish(fused.data(), sums.data());
      EXPECT_EQ(plain, fused);  // the sums leave the result as it was
      const Tensor want = reduce_sum(constant(plain, {c.m, c.n}), {0});
      EXPECT_TRUE(testing::same_bits(constant(sums, {c.n}), want));
    }
  });
}

TEST(Gemm, EpiloguesGiveTheBitsOfTheProductAndTheOpsOnEveryPath) {
  struct Case { int m, n, k; bool ta, tb; };
  const std::vector<Case> cases = {{128, 256, 784, false, false}, {128, 256, 256, false, true},
                                   {300, 96, 200, true, false},   {5, 3, 7, false, false},
                                   {64, 130, 513, true, true},    {200, 300, 100, false, false}};
  std::mt19937_64 rng(21);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  on_every_path([&](bool own, int threads) {
    for (const Case& c : cases) {
      for (const bool where : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "m " << c.m << " n " << c.n << " k " << c.k << " own " << own << " threads "
                                          << threads << (where ? " where" : " bias, mask, relu"));
        const int lda = c.ta ? c.m : c.k, ldb = c.tb ? c.k : c.n, ldc = c.n + 3;
        std::vector<float> a(static_cast<std::size_t>(c.m) * c.k), b(static_cast<std::size_t>(c.k) * c.n), bias(c.n);
        for (float& v : a) v = dist(rng);
        for (float& v : b) v = dist(rng);
        for (float& v : bias) v = dist(rng);
        const std::size_t mn = static_cast<std::size_t>(c.m) * c.n;
        std::unique_ptr<bool[]> mask_in(new bool[mn]), mask_out(new bool[mn]);
        for (std::size_t i = 0; i < mn; ++i) mask_in[i] = dist(rng) > 0;
        std::vector<float> plain(static_cast<std::size_t>(c.m) * ldc, 7.0f), fused = plain;
        detail::gemm<float>(c.m, c.n, c.k, a.data(), lda, c.ta, b.data(), ldb, c.tb, plain.data(), ldc);
        detail::GemmEpilogue e;
        if (where) {
          e.mask_in = mask_in.get();
        } else {
          e.bias = bias.data(), e.mask_out = mask_out.get(), e.relu = true;
        }
        e.mask_ld = c.n;
        detail::gemm<float>(c.m, c.n, c.k, a.data(), lda, c.ta, b.data(), ldb, c.tb, fused.data(), ldc, false, &e);
        for (int i = 0; i < c.m; ++i)
          for (int j = 0; j < ldc; ++j) {
            const std::size_t at = static_cast<std::size_t>(i) * ldc + j, mat = static_cast<std::size_t>(i) * c.n + j;
            if (j >= c.n) {
              ASSERT_EQ(fused[at], 7.0f) << "row " << i << " spare column " << j;
              continue;
            }
            float want = plain[at];
            if (where) {
              want = mask_in[mat] ? want : 0.0f;
            } else {
              want = want + bias[static_cast<std::size_t>(j)];
              ASSERT_EQ(mask_out[mat], want > 0.0f) << "row " << i << " column " << j;
              want = want < 0.0f ? 0.0f : want;
            }
            ASSERT_EQ(0, std::memcmp(&fused[at], &want, sizeof(float))) << "row " << i << " column " << j << ": "
                                                                        << fused[at] << " vs " << want;
          }
      }
    }
  });
}

// The epilogue ops are made by the optimiser; one recorded by hand with the wrong inputs gets a
// typed error naming what was expected, not a read past its inputs.
TEST(ProductEpilogueOps, WrongInputsAreTypedErrors) {
  using detail::OpId;
  const Tensor a = random_uniform({2, 3}), b = random_uniform({3, 4}), bias = random_uniform({4});
  const detail::MatMulEpilogueAttrs with_bias{.bias = true, .relu = true};
  EXPECT_THROW_MSG(detail::apply_op(OpId::MatMulEpilogue, {a, b}, with_bias), InvalidArgumentError, "matmul_epilogue",
                   "expected 3 inputs, got 2", "made by the graph optimiser only");
  EXPECT_THROW_MSG(detail::apply_op(OpId::MatMulEpilogue, {cast(a, float64), cast(b, float64), bias}, with_bias),
                   InvalidArgumentError, "matmul_epilogue", "expected float32 operands, got input 0");
  EXPECT_THROW_MSG(detail::apply_op(OpId::MatMulEpilogue, {random_uniform({2, 2, 3}), b, bias}, with_bias),
                   InvalidArgumentError, "matmul_epilogue", "expected matrices, got input 0");
  const detail::Conv2DEpilogueAttrs conv{.bias = true, .relu = true};
  EXPECT_THROW_MSG(detail::apply_op(OpId::Conv2DEpilogue, {random_uniform({1, 3, 3, 1}), random_uniform({2, 2, 1, 4})}, conv),
                   InvalidArgumentError, "conv2d_epilogue", "expected 3 inputs, got 2");
  // A bias the product's columns do not take: the add's own error, as in the unfused graph.
  EXPECT_THROW_MSG(detail::apply_op(OpId::MatMulEpilogue, {a, b, random_uniform({3})}, with_bias), InvalidArgumentError,
                   "add");
}

TEST(MatMul, Int32MatchesNaiveLoop) { check_against_naive<int32_t>(0); }
TEST(MatMul, Int64MatchesNaiveLoop) { check_against_naive<int64_t>(0); }

TEST(MatMul, IdentityAndTransposeProperties) {
  // a @ I == a, and (a @ b)^T == b^T @ a^T expressed through the transpose flags.
  Tensor a = random_uniform({37, 29}, -1, 1, 7);
  std::vector<float> eye(29 * 29, 0.f);
  for (int i = 0; i < 29; ++i) eye[i * 29 + i] = 1.f;
  EXPECT_TENSOR_EQ(matmul(a, constant(eye, {29, 29})), a);
  Tensor b = random_uniform({29, 41}, -1, 1, 8);
  Tensor ab = matmul(a, b);
  // (a @ b)^T computed as matmul(b, a, true, true) has shape (41, 37); compare element-wise.
  Tensor ba_t = matmul(b, a, true, true);
  ASSERT_EQ(ba_t.shape(), TensorShape({41, 37}));
  const auto x = ab.to_vector<float>();
  const auto y = ba_t.to_vector<float>();
  for (int i = 0; i < 37; ++i)
    for (int j = 0; j < 41; ++j) EXPECT_NEAR(x[i * 41 + j], y[j * 37 + i], 1e-5);
}

TEST(MatMul, BroadcastOperandIsNotModified) {
  Tensor a = random_uniform({3, 4, 5}, -1, 1, 3);
  Tensor b = random_uniform({5, 2}, -1, 1, 4);
  const auto before = b.to_vector<float>();
  (void)matmul(a, b);
  EXPECT_EQ(b.to_vector<float>(), before);
}

// ---- shape inference on partially known shapes (what tracing sees) ----

TensorShape infer(const TensorShape& a, const TensorShape& b, bool ta = false, bool tb = false,
                  DType dtype = float32) {
  const detail::MatMulAttrs attrs{ta, tb};
  const auto out = detail::op_def(detail::OpId::MatMul)
                       .infer({detail::ValueType{dtype, a}, detail::ValueType{dtype, b}}, attrs);
  EXPECT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dtype, dtype);
  return out[0].shape;
}

TEST(MatMulInfer, FullyDefined) {
  EXPECT_EQ(infer({2, 3}, {3, 4}), TensorShape({2, 4}));
  EXPECT_EQ(infer({3, 2}, {4, 3}, true, true), TensorShape({2, 4}));
  EXPECT_EQ(infer({2, 1, 3, 4}, {5, 4, 6}), TensorShape({2, 5, 3, 6}));
  EXPECT_EQ(infer({7, 3, 4}, {4, 6}), TensorShape({7, 3, 6}));
  EXPECT_EQ(infer({3, 4}, {1, 7, 4, 6}, false, false, int64), TensorShape({1, 7, 3, 6}));
}

TEST(MatMulInfer, NoneDims) {
  EXPECT_EQ(infer({None, 3}, {3, None}), TensorShape({None, None}));
  EXPECT_EQ(infer({2, None}, {4, 5}), TensorShape({2, 5}));       // K unknown on one side
  EXPECT_EQ(infer({2, None}, {None, 5}), TensorShape({2, 5}));
  EXPECT_EQ(infer({None, 2, 3}, {3, 4}), TensorShape({None, 2, 4}));
  EXPECT_EQ(infer({None, 2, 3}, {1, 3, 4}), TensorShape({None, 2, 4}));
  EXPECT_EQ(infer({None, 2, 3}, {5, 3, 4}), TensorShape({5, 2, 4}));
  EXPECT_EQ(infer({None, 2, 3}, {None, 3, 4}), TensorShape({None, 2, 4}));
  EXPECT_EQ(infer({None, None}, {None, None}, true, true), TensorShape({None, None}));
}

TEST(MatMulInfer, UnknownRank) {
  EXPECT_EQ(infer(TensorShape::unknown_rank(), {3, 4}), TensorShape::unknown_rank());
  EXPECT_EQ(infer({2, 3}, TensorShape::unknown_rank()), TensorShape::unknown_rank());
  EXPECT_EQ(infer(TensorShape::unknown_rank(), TensorShape::unknown_rank(), true, false, int32),
            TensorShape::unknown_rank());
}

}  // namespace
}  // namespace tg
