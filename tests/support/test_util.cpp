#include "support/test_util.h"

#include <cmath>
#include <cstring>

#include "core/tensor_impl.h"

namespace tg::testing {

namespace {
template <class T>
::testing::AssertionResult compare(const Tensor& a, const Tensor& e, double tol) {
  const auto av = a.to_vector<T>();
  const auto ev = e.to_vector<T>();
  for (std::size_t i = 0; i < av.size(); ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      const double x = av[i], y = ev[i];
      if (std::isnan(x) && std::isnan(y)) continue;
      if (std::isinf(y) || std::isinf(x)) {
        if (x == y) continue;
      } else if (std::fabs(x - y) <= tol * (1.0 + std::fabs(y))) {
        continue;
      }
    } else {
      if (av[i] == ev[i]) continue;
    }
    return ::testing::AssertionFailure()
           << "element " << i << " differs (tol " << tol << ")\n  actual:   " << a.to_string()
           << "\n  expected: " << e.to_string();
  }
  return ::testing::AssertionSuccess();
}
}  // namespace

Tensor seeded_values(const std::vector<int64_t>& dims, DType dtype, uint64_t seed, ValueGrid grid) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<double> v(static_cast<std::size_t>(n));
  // The golden-ratio multiply spreads small consecutive seeds apart before the LCG (Knuth's
  // MMIX constants) runs; its top 53 bits make a double in [0, 1).
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (double& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<double>(s >> 11) / 9007199254740992.0 * 2.0 - 1.0;
    if (grid.step > 0) x = std::round(x / grid.step) * grid.step;
    x *= grid.scale;
  }
  return cast(constant(v, TensorShape(dims), float64), dtype);
}

::testing::AssertionResult tensors_near(const Tensor& actual, const Tensor& expected, double tol) {
  if (!actual.defined() || !expected.defined())
    return ::testing::AssertionFailure() << "an empty tensor was compared";
  if (actual.dtype() != expected.dtype())
    return ::testing::AssertionFailure() << "dtype " << to_string(actual.dtype()) << " != expected "
                                         << to_string(expected.dtype()) << "\n  actual: "
                                         << actual.to_string();
  if (!(actual.shape() == expected.shape()))
    return ::testing::AssertionFailure() << "shape " << actual.shape().to_string()
                                         << " != expected " << expected.shape().to_string()
                                         << "\n  actual: " << actual.to_string();
  switch (actual.dtype()) {
    case DType::Float32: return compare<float>(actual, expected, tol);
    case DType::Float64: return compare<double>(actual, expected, tol);
    case DType::Int32: return compare<int32_t>(actual, expected, tol);
    case DType::Int64: return compare<int64_t>(actual, expected, tol);
    case DType::Bool: return compare<bool>(actual, expected, tol);
    case DType::String: return compare<std::string>(actual, expected, tol);
    case DType::UInt8: return compare<uint8_t>(actual, expected, tol);
    case DType::BFloat16: return compare<float>(cast(actual, float32), cast(expected, float32), tol);
  }
  return ::testing::AssertionFailure() << "unknown dtype";
}

::testing::AssertionResult same_bits(const Tensor& actual, const Tensor& expected) {
  if (actual.dtype() != expected.dtype() || !(actual.shape() == expected.shape()))
    return ::testing::AssertionFailure() << "type " << to_string(actual.dtype()) << actual.shape().to_string() << " vs "
                                         << to_string(expected.dtype()) << expected.shape().to_string();
  const std::size_t bytes = static_cast<std::size_t>(actual.num_elements()) * dtype_size(actual.dtype());
  if (bytes && std::memcmp(detail::bytes_of(actual), detail::bytes_of(expected), bytes) != 0)
    return ::testing::AssertionFailure() << "values differ:\n  " << actual.to_string() << "\n  " << expected.to_string();
  return ::testing::AssertionSuccess();
}

}  // namespace tg::testing
