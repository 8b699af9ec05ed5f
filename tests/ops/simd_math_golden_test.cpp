// The exact bits of every float32 math routine (src/kernels/simd_math.h) on every instruction-set
// path, and of the same ops' float64 kernels, pinned by a hash of their outputs over a fixed
// million inputs. The hashes were recorded from the code as it stood before the routines were
// generated from one list (issue 35): any change to a routine's arithmetic, or a routine called
// in another's place, changes its hash. The accuracy tests (simd_math_test.cpp) allow a few ULP;
// this one allows none.
//
// libmvec's results are glibc's, so the hashes hold for the glibc they were recorded with
// (Debian 12's 2.36); elsewhere the test skips.
#include <gnu/libc-version.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/simd_math.h"
#include "passes/passes.h"
#include "runtime/executor.h"
#include "support/activations.h"
#include "support/graph_util.h"
#include "support/test_util.h"
#include "tracegraph/tracegraph.h"

namespace tg {
namespace {

using detail::simd::Isa;
using detail::simd::MathFn;
using detail::simd::MathFns;

constexpr const char* kRecordedGlibc = "2.36";

using testing::Activation;
using testing::activations;

// The hashes are each routine's row in tests/support/activations.cpp (f32_hash, f64_hash),
// recorded from the code before the refactor; a failure prints the hash the code gives now. One
// change since, on purpose: float64 sigmoid took float32's formula, e^-|x| based (it returned 0
// below x = -709.8, simd_math_formulas_test.cpp), which rounds differently for negative x. And
// float32 gelu became float32 arithmetic (within 1.5 ULP, no longer float64 rounded once).
MathFn MathFns::*member(const Activation& a) {
  for (const auto& b : detail::simd::kRoutineBounds)
    if (std::string(b.name) == a.routine) return b.fn;
  ADD_FAILURE() << a.routine << " is not in TG_SIMD_MATH_ROUTINES";
  return nullptr;
}

constexpr Isa kIsas[] = {Isa::kAvx512, Isa::kAvx2, Isa::kScalar};

// FNV-1a over the values' bytes, NaN payloads and signed zeros included.
template <class T>
uint64_t hash_of(const T* v, std::size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* p = reinterpret_cast<const unsigned char*>(v);
  for (std::size_t i = 0; i < n * sizeof(T); ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// Every 4093rd float32 bit pattern (every binade of both signs, NaNs with payloads), then the
// values the routines treat specially. An odd count, so the vector paths run their tail too.
// Signalling NaNs are made quiet: a tensor made from them holds them quiet, and the paths must
// see the inputs the kernels see.
std::vector<float> f32_inputs() {
  std::vector<float> x;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 4093) {
    uint32_t bits = static_cast<uint32_t>(b);
    if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x7fffffu) != 0) bits |= 0x400000u;
    x.push_back(std::bit_cast<float>(bits));
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, -0.0f, inf, -inf, 88.7f, -88.7f, 89.0f, -104.0f, 13.942385f, -13.942385f,
                  std::nextafter(13.942385f, 20.0f), std::nextafter(-13.942385f, -20.0f), 1e-40f, -1e-40f})
    x.push_back(v);
  return x;
}

// The float32 inputs widened, then doubles spread over every exponent (a fixed splitmix64
// stream) and a dense run over sigmoid's and exp's float64 underflow range.
std::vector<double> f64_inputs() {
  std::vector<double> x;
  for (float v : f32_inputs()) x.push_back(v);
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 200001; ++i) {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    x.push_back(std::bit_cast<double>(z ^ (z >> 31)));
  }
  for (int i = 0; i <= 10000; ++i) x.push_back(-760.0 + 70.0 * i / 10000);
  return x;
}

std::string hex(uint64_t h) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(h));
  return buf;
}

void skip_unless_recorded_glibc() {
  if (std::strcmp(gnu_get_libc_version(), kRecordedGlibc) != 0)
    GTEST_SKIP() << "hashes recorded with glibc " << kRecordedGlibc << ", this is " << gnu_get_libc_version();
}

TEST(SimdMathGolden, EveryPathGivesTheRecordedBits) {
  skip_unless_recorded_glibc();
  const std::vector<float> x = f32_inputs();
  std::vector<float> y(x.size());
  for (int k = 0; k < 3; ++k) {
    if (!detail::simd::cpu_has(kIsas[k])) continue;
    const MathFns& fns = detail::simd::math_fns(kIsas[k]);
    for (const Activation& r : activations()) {
      (fns.*member(r))(x.data(), y.data(), static_cast<int64_t>(x.size()));
      EXPECT_EQ(hex(hash_of(y.data(), y.size())), hex(r.f32_hash[k])) << fns.name << " " << r.routine;
    }
  }
}

// -r(x) computed by the fused kernel, with the sign bits flipped back (neg flips only the sign
// bit, NaNs included). On AVX-512 the two ops are one register chain, which applies the
// routine's per-register form.
template <class T>
std::vector<T> fused_through_neg(Tensor (*op)(const Tensor&), const Tensor& input) {
  auto g = testing::trace_graph([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{-op(in[0])}; },
                                {input});
  detail::optimize_graph(g, "golden");
  int fused = 0;
  for (const auto& node : g->nodes) fused += node.kind == detail::NodeKind::kOp && node.op == detail::OpId::FusedElementwise;
  EXPECT_EQ(fused, 1);
  std::vector<T> y = detail::execute(*g, {input})[0].template to_vector<T>();
  for (T& v : y) v = -v;
  return y;
}

// The eager float32 kernel runs the dispatched path, and the fused kernel the same bits.
TEST(SimdMathGolden, TheEagerAndFusedKernelsGiveTheDispatchedPathsBits) {
  skip_unless_recorded_glibc();
  const testing::IeeeKernelFloatEnvironment ieee;  // the hashes were taken with subnormals kept
  int best = 2;
  for (int k = 2; k >= 0; --k)
    if (detail::simd::cpu_has(kIsas[k])) best = k;
  const std::vector<float> x = f32_inputs();
  const Tensor input = constant(x, TensorShape({static_cast<int64_t>(x.size())}));
  for (const Activation& r : activations()) {
    SCOPED_TRACE(r.routine);
    const std::vector<float> eager = r.apply(input).to_vector<float>();
    EXPECT_EQ(hex(hash_of(eager.data(), eager.size())), hex(r.f32_hash[best]));
    const std::vector<float> fused = fused_through_neg<float>(r.apply, input);
    EXPECT_EQ(hex(hash_of(fused.data(), fused.size())), hex(r.f32_hash[best]));
  }
}

// float64 runs the ops' functors, eagerly and in the fused kernel's loops.
TEST(SimdMathGolden, TheFloat64KernelsGiveTheRecordedBits) {
  skip_unless_recorded_glibc();
  const testing::IeeeKernelFloatEnvironment ieee;  // the hashes were taken with subnormals kept
  const std::vector<double> x = f64_inputs();
  const Tensor input = constant(x, TensorShape({static_cast<int64_t>(x.size())}), float64);
  for (const Activation& r : activations()) {
    SCOPED_TRACE(r.routine);
    const std::vector<double> eager = r.apply(input).to_vector<double>();
    EXPECT_EQ(hex(hash_of(eager.data(), eager.size())), hex(r.f64_hash));
    const std::vector<double> fused = fused_through_neg<double>(r.apply, input);
    EXPECT_EQ(hex(hash_of(fused.data(), fused.size())), hex(r.f64_hash));
  }
}

}  // namespace
}  // namespace tg
