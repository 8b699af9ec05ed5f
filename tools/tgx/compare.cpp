#include "compare.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "cli.h"
#include "tracegraph/ops.h"

namespace tgx {
namespace {

enum class Family { kFloat, kInteger, kBool, kString };

Family family_of(tg::DType d) {
  switch (d) {
    case tg::DType::Float32:
    case tg::DType::Float64:
    case tg::DType::BFloat16: return Family::kFloat;
    case tg::DType::Int32:
    case tg::DType::Int64:
    case tg::DType::UInt8: return Family::kInteger;
    case tg::DType::Bool: return Family::kBool;
    case tg::DType::String: return Family::kString;
  }
  return Family::kString;
}

std::vector<double> as_doubles(const tg::Tensor& t) {
  if (t.dtype() == tg::float64) return t.to_vector<double>();
  const std::vector<float> f = (t.dtype() == tg::bfloat16 ? tg::cast(t, tg::float32) : t).to_vector<float>();
  return {f.begin(), f.end()};
}

std::vector<int64_t> as_integers(const tg::Tensor& t) {
  if (t.dtype() == tg::int64) return t.to_vector<int64_t>();
  if (t.dtype() == tg::uint8) {
    const std::vector<uint8_t> b = t.to_vector<uint8_t>();
    return {b.begin(), b.end()};
  }
  const std::vector<int32_t> v = t.to_vector<int32_t>();
  return {v.begin(), v.end()};
}

std::string tolerance_text(const Tolerance& tol) {
  return "atol " + format_number(tol.atol) + " + rtol " + format_number(tol.rtol) + " * |expected|";
}

Comparison compare_floats(const tg::Tensor& got, const tg::Tensor& expected, const Tolerance& tol) {
  const std::vector<double> g = as_doubles(got), e = as_doubles(expected);
  Comparison c;
  int64_t worst = -1;
  double worst_diff = -1;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double a = g[i], b = e[i];
    if ((std::isnan(a) && std::isnan(b)) || a == b) continue;  // also equal infinities
    const double diff = std::fabs(a - b);
    // A NaN on one side, or an infinity against a number, is a mismatch of infinite size.
    const double size = std::isnan(diff) ? INFINITY : diff;
    if (std::isfinite(diff)) c.max_abs_diff = std::max(c.max_abs_diff, diff);
    if (std::isfinite(diff) && diff <= tol.atol + tol.rtol * std::fabs(b)) continue;
    ++c.mismatches;
    if (size > worst_diff) {
      worst_diff = size;
      worst = static_cast<int64_t>(i);
    }
  }
  if (c.mismatches == 0) {
    c.ok = true;
    c.message = "matches: max |got - expected| " + format_number(c.max_abs_diff) + " (tolerance " +
                tolerance_text(tol) + ")";
    return c;
  }
  const auto w = static_cast<std::size_t>(worst);
  c.message = with_thousands(c.mismatches) + " of " + with_thousands(static_cast<long long>(g.size())) +
              " elements differ by more than " + tolerance_text(tol) + "; worst at " +
              index_text(got.shape(), worst) + ": got " + format_number(g[w], 9) + ", expected " +
              format_number(e[w], 9) + ", |diff| " + format_number(std::fabs(g[w] - e[w])) + " > allowed " +
              format_number(tol.atol + tol.rtol * std::fabs(e[w]));
  return c;
}

template <class T>
Comparison compare_exact(const std::vector<T>& g, const std::vector<T>& e, const tg::TensorShape& shape) {
  Comparison c;
  int64_t first = -1;
  for (std::size_t i = 0; i < g.size(); ++i)
    if (g[i] != e[i]) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++c.mismatches;
      if constexpr (std::is_same_v<T, int64_t>)
        c.max_abs_diff = std::max(c.max_abs_diff, std::fabs(static_cast<double>(g[i]) - static_cast<double>(e[i])));
    }
  if (c.mismatches == 0) {
    c.ok = true;
    c.message = "matches: all " + with_thousands(static_cast<long long>(g.size())) + " elements equal";
    return c;
  }
  const auto f = static_cast<std::size_t>(first);
  auto text = [](T v) {
    if constexpr (std::is_same_v<T, bool>) return std::string(v ? "true" : "false");
    else return std::to_string(v);
  };
  c.message = with_thousands(c.mismatches) + " of " + with_thousands(static_cast<long long>(g.size())) +
              " elements differ (integers and bools must be equal); first at " + index_text(shape, first) +
              ": got " + text(g[f]) + ", expected " + text(e[f]);
  return c;
}

}  // namespace

std::string index_text(const tg::TensorShape& shape, int64_t flat) {
  const auto& dims = shape.dims();
  std::vector<int64_t> index(dims.size());
  for (std::size_t k = dims.size(); k-- > 0;) {
    index[k] = dims[k] ? flat % dims[k] : 0;
    flat = dims[k] ? flat / dims[k] : 0;
  }
  std::string s = "[";
  for (std::size_t k = 0; k < index.size(); ++k) s += (k ? ", " : "") + std::to_string(index[k]);
  return s + "]";
}

Comparison compare(const tg::Tensor& got, const tg::Tensor& expected, const Tolerance& tolerance) {
  Comparison c;
  if (!(got.shape() == expected.shape())) {
    c.message = "shape " + got.shape().to_string() + " but the expected file has shape " +
                expected.shape().to_string();
    return c;
  }
  const Family fg = family_of(got.dtype()), fe = family_of(expected.dtype());
  if (fg != fe || fg == Family::kString) {
    c.message = "dtype " + tg::to_string(got.dtype()) + " but the expected file holds " +
                tg::to_string(expected.dtype()) + (fg == Family::kString ? " (string outputs cannot be compared)" :
                "; save the expected array with a matching dtype (float32/float64, int32/int64 or bool)");
    return c;
  }
  switch (fg) {
    case Family::kFloat: return compare_floats(got, expected, tolerance);
    case Family::kInteger: return compare_exact(as_integers(got), as_integers(expected), got.shape());
    case Family::kBool: return compare_exact(got.to_vector<bool>(), expected.to_vector<bool>(), got.shape());
    case Family::kString: break;
  }
  return c;
}

}  // namespace tgx
